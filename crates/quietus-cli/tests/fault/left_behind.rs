//! Fault scenarios, family "things left behind": nothing of quietus's own outlives it, not
//! even a zombie for its caller (issue 28, item 9), whatever makes its helpers (a forked
//! guardian per session today, one guardian per supervisor process tomorrow).
//!
//! The caller is a small Python parent that is a child subreaper (`PR_SET_CHILD_SUBREAPER`, as a
//! container's PID 1 or an agent harness is) and reaps only the process it started: whatever
//! of quietus's own outlives quietus becomes its child, alive or a zombie. It lists its
//! children right after each run has been waited for: a clean run leaves none.
#![cfg(target_os = "linux")]

use std::process::Command;

use crate::support::Marker;

/// How many runs each caller makes (a leak shows at the first one; more runs catch a late
/// exit that happens to be reaped in time once).
const RUNS: usize = 5;

/// The caller: `python3 -c CALLER RUNS PROGRAM ARGS...`. After each run, one line: `run I:
/// exit N; clean`, or `... left: [...]` with each child it holds (`pid (name) state`).
const CALLER: &str = r#"
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
me = os.getpid()
def children():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        if int(rest[1]) == me:
            found.append("%s (%s) %s" % (pid, stat[stat.index("(") + 1:stat.rindex(")")], rest[0]))
    return found
runs = int(sys.argv[1])
for i in range(runs):
    code = subprocess.run(sys.argv[2:], stdout=sys.stderr).returncode  # waits for it alone
    left = children()
    print("run %d: exit %d; %s" % (i, code, "left: %s" % left if left else "clean"), flush=True)
"#;

/// Runs `program args` [`RUNS`] times under the subreaper caller, in `dir`; asserts that each
/// run exited 0 and left the caller no child.
#[track_caller]
fn assert_nothing_left_to_the_caller(marker: &Marker, dir: &std::path::Path, argv: &[&str]) {
    let output = Command::new("python3")
        .arg("-c")
        .arg(CALLER)
        .arg(RUNS.to_string())
        .args(argv)
        .current_dir(dir)
        .env(crate::support::MARKER_ENV, marker.as_str())
        .env_remove("RUST_LOG")
        .output()
        .expect("python3 starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the caller failed: {:?}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), RUNS, "one line per run:\n{stdout}");
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(
            *line,
            format!("run {i}: exit 0; clean"),
            "something of quietus's own outlived it:\n{stdout}"
        );
    }
    crate::support::assert_no_leak(marker);
}

/// A working directory with an `.agent/` folder: the file tracker watches it (the watches are
/// what a guardian was handed to hold past the supervisor's exit).
fn agent_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join(".agent")).expect("the .agent folder");
    dir
}

#[test]
fn the_command_leaves_its_caller_no_child_not_even_a_zombie() {
    let marker = Marker::new("caller-command");
    let dir = agent_dir();
    for containment in ["auto", "group"] {
        assert_nothing_left_to_the_caller(
            &marker,
            dir.path(),
            &[
                env!("CARGO_BIN_EXE_quietus"),
                "-i",
                "10s",
                "--containment",
                containment,
                "--",
                "sh",
                "-c",
                "exit 0",
                marker.as_str(),
            ],
        );
    }
}

/// The child role of [`a_library_host_leaves_its_caller_no_child_not_even_a_zombie`]: one
/// session of `sh -c 'exit 0'`, waited for; the process exits right after.
#[test]
#[ignore = "the child role of a_library_host_leaves_its_caller_no_child_not_even_a_zombie"]
fn library_host_role() {
    let marker = std::env::var(crate::support::MARKER_ENV).expect("run by the caller");
    let mut command = Command::new("sh");
    command.args(["-c", "exit 0", &marker]);
    let session = quietus::Session::builder(command)
        .config(
            quietus::MonitorConfig::builder()
                .idle_timeout(std::time::Duration::from_secs(10))
                .build()
                .unwrap(),
        )
        .spawn()
        .expect("the session starts");
    let result = crate::support::wait_generously(&session);
    assert_eq!(result.outcome, quietus::Outcome::Exited);
}

#[test]
fn a_library_host_leaves_its_caller_no_child_not_even_a_zombie() {
    let marker = Marker::new("caller-library");
    let dir = agent_dir();
    let me = std::env::current_exe().expect("this test binary");
    assert_nothing_left_to_the_caller(
        &marker,
        dir.path(),
        &[
            me.to_str().expect("a UTF-8 path"),
            "--ignored",
            "--exact",
            "left_behind::library_host_role",
            "--test-threads=1",
            "--quiet",
        ],
    );
}

/// The cgroup2 mount point (the child's `0::` line is relative to it: this test and
/// quietus share the cgroup namespace).
fn cgroup_mount() -> std::path::PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    mountinfo
        .lines()
        .find_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mount = std::path::PathBuf::from(before.split_whitespace().nth(4)?);
            (after.split_whitespace().next()? == "cgroup2").then_some(mount)
        })
        .expect("a cgroup2 mount")
}

/// How the outer quietus of a nested pair ends.
#[derive(Debug, Clone, Copy)]
enum OuterEnd {
    /// Idle timeout, first signal KILL.
    KillAtOnce,
    /// Idle timeout, TERM, a grace shorter than the inner quietus's ladder.
    ShortGrace,
    /// SIGKILL of the outer quietus itself (its guardian ends the tree).
    Killed,
}

/// `quietus OUTER -- quietus -i 1h INNER -- sh -c 'print the cgroup; ...'`, ended as
/// `end` says; then neither session's cgroup is left (the inner one is below the outer one).
fn assert_nested_cgroups_removed(end: OuterEnd) {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: no cgroup is made, none can be left (the test needs root)");
        return;
    }
    let marker = Marker::new("nested-cgroups");
    let outer: &[&str] = match end {
        OuterEnd::KillAtOnce => &["-i", "2s", "-s", "KILL"],
        OuterEnd::ShortGrace => &["-i", "2s", "-g", "200ms"],
        OuterEnd::Killed => &["-i", "1h"],
    };
    let mut args = outer.to_vec();
    args.extend(["--", env!("CARGO_BIN_EXE_quietus"), "-i", "1h", "-g", "30s"]);
    // The leader ignores TERM (as bash with a trap does); its sleeps are TERMed, and it goes
    // on: only KILL ends the inner tree.
    let script = "trap '' TERM; grep '^0::' /proc/self/cgroup; echo ready; \
                  while :; do sleep 0.5; done";
    let running = crate::support::cli::sw(&marker)
        .args(&args)
        .args(&["--", "bash", "-c", script, marker.as_str()])
        .spawn();
    assert!(
        crate::support::poll_until(crate::support::HANDSHAKE, || running
            .stdout
            .contains("ready\n")),
        "no ready: {:?} {:?}",
        running.stdout.text(),
        running.stderr.text()
    );
    let stdout = running.stdout.text();
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("the child printed its cgroup: {stdout:?}"));
    let inner = cgroup_mount().join(line.trim_start_matches('/'));
    let outer = inner
        .parent()
        .expect("the outer session's cgroup")
        .to_owned();
    for dir in [&inner, &outer] {
        let name = dir.file_name().expect("a name").to_string_lossy();
        assert!(name.starts_with("quietus-"), "{}", dir.display());
    }
    if let OuterEnd::Killed = end {
        running.signal(rustix::process::Signal::KILL);
    }
    let finished = running.wait();
    if !matches!(end, OuterEnd::Killed) {
        assert_eq!(finished.status.code(), Some(124), "{finished:?}");
    }
    crate::support::assert_no_leak(&marker);
    // The outer quietus removes its cgroup before it exits; its guardian, after.
    assert!(
        crate::support::poll_until(crate::support::GENEROUS, || !outer.exists()),
        "left behind: {} (inner {} exists: {}); stderr {:?}",
        outer.display(),
        inner.display(),
        inner.exists(),
        finished.stderr_text()
    );
}

#[test]
fn a_nested_quietus_killed_at_once_leaves_no_cgroup() {
    assert_nested_cgroups_removed(OuterEnd::KillAtOnce);
}

#[test]
fn a_nested_quietus_killed_within_its_own_ladder_leaves_no_cgroup() {
    assert_nested_cgroups_removed(OuterEnd::ShortGrace);
}

#[test]
fn a_sigkilled_quietus_leaves_no_cgroup_of_a_nested_one() {
    assert_nested_cgroups_removed(OuterEnd::Killed);
}

/// The cgroup v1 freezer's mount point, if this machine has one.
fn freezer_mount() -> Option<std::path::PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut fields = after.split_whitespace();
        let is_freezer = fields.next()? == "cgroup"
            && fields.nth(1)?.split(',').any(|option| option == "freezer");
        let mount = before.split_whitespace().nth(4)?;
        is_freezer.then(|| std::path::PathBuf::from(mount))
    })
}

/// A grandchild frozen by a v1 freezer cannot die of SIGKILL until it is thawed: the run ends
/// with its termination unproven, and the session's cgroup is removed all the same (the
/// survivor is moved out of it), not left behind, empty, once the grandchild dies.
#[test]
fn a_frozen_v1_grandchild_leaves_no_cgroup() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: no cgroup is made, none can be left (the test needs root)");
        return;
    }
    let Some(freezer) = freezer_mount() else {
        eprintln!("no cgroup v1 freezer here: nothing can freeze a process that way");
        return;
    };
    let marker = Marker::new("frozen-v1");
    let frozen = freezer.join(marker.as_str());
    std::fs::create_dir(&frozen).expect("a freezer cgroup of our own (root)");
    let f = frozen.display();
    let script = format!(
        "sleep 1000 & echo $! > {f}/cgroup.procs; echo FROZEN > {f}/freezer.state; \
         grep '^0::' /proc/self/cgroup; echo ready; wait"
    );
    let running = crate::support::cli::sw(&marker)
        .args(&[
            "-i",
            "1s",
            "-g",
            "200ms",
            "--",
            "bash",
            "-c",
            &script,
            marker.as_str(),
        ])
        .spawn();
    let finished = running.wait();
    let stdout = finished.stdout_text();
    // Thawed whatever came: the frozen sleep dies of its pending SIGKILL.
    let _ = std::fs::write(frozen.join("freezer.state"), "THAWED");
    assert!(
        crate::support::poll_until(crate::support::GENEROUS, || {
            std::fs::read_to_string(frozen.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty())
        }),
        "the thawed sleep died"
    );
    let _ = std::fs::remove_dir(&frozen);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("the child printed its cgroup: {stdout:?}"));
    let session = cgroup_mount().join(line.trim_start_matches('/'));
    let stderr = finished.stderr_text();
    assert!(stderr.contains("termination unproven"), "{stderr}");
    assert_eq!(finished.status.code(), Some(125), "{stderr}");
    assert!(
        !session.exists(),
        "left behind: {}; {stderr}",
        session.display()
    );
    crate::support::assert_no_leak(&marker);
}
