//! Fault scenarios, family "limits": the command under a process limit (issue 51 item 1).
//! `RLIMIT_NPROC` counts every process and thread of the user; under it, quietus aborted
//! (a panic in `notify`, a second one in a destructor: exit 134, a 0-byte report), or ran the
//! program with its output lost. Now every thread quietus needs is started before the program:
//! either quietus exits 125 with nothing run, or the program runs with everything quietus
//! promises (its output passed on, a report).
//!
//! The limit is real, never mocked. It is not enforced for root: as root (the usual CI), the
//! command runs as a user no process runs as (`setpriv`, a prerequisite: asked for, never
//! skipped), so the count is quietus's own alone; as another user, under that user's own
//! count of tasks now plus the limit (the invariants hold whatever else the user runs).
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::cli as cli_support;
use crate::support::{GENEROUS, Marker, assert_no_leak, prerequisites};

/// A uid no process runs as now (its task count is 0), from a range no system account uses.
fn idle_uid() -> u32 {
    let used: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("status")).ok())
        .filter_map(|status| real_uid(&status))
        .collect();
    (61_000..62_000)
        .find(|uid| !used.contains(uid))
        .expect("a uid between 61000 and 62000 that no process runs as")
}

/// The real uid of a `/proc/PID/status` text.
fn real_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// How many tasks (processes and threads) run as `uid` now.
fn tasks_of(uid: u32) -> u64 {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("status")).ok())
        .filter(|status| real_uid(status) == Some(uid))
        .filter_map(|status| {
            let line = status.lines().find(|line| line.starts_with("Threads:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

/// A copy of the command that `uid` may run (the build folder may be closed to it).
fn readable_binary(dir: &Path) -> PathBuf {
    let copy = dir.join("quietus");
    std::fs::copy(env!("CARGO_BIN_EXE_quietus"), &copy).expect("the binary copied");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    copy
}

/// One run of `quietus -i 2s --report r.json -- sh -c SCRIPT` under a limit of `nproc` tasks
/// beyond what `uid` runs already, in `work` (its HOME).
fn run_limited(
    marker: &Marker,
    binary: &Path,
    work: &Path,
    uid: Option<u32>,
    nproc: u64,
) -> std::process::Output {
    let prlimit = prerequisites::require("prlimit", "apt-get install util-linux");
    let own = rustix::process::getuid().as_raw();
    let limit = nproc + uid.map_or_else(|| tasks_of(own), tasks_of);
    let mut command = std::process::Command::new(prlimit);
    command.arg(format!("--nproc={limit}"));
    if let Some(uid) = uid {
        let setpriv = prerequisites::require("setpriv", "apt-get install util-linux");
        command
            .arg(setpriv)
            .args([format!("--reuid={uid}"), format!("--regid={uid}")])
            .arg("--clear-groups");
    }
    // Builtins and `exec` only: under the limit the shell may have no fork of its own. It
    // lives past the file tracker's arming (a fifth of a second at `-i 2s`), whose `notify`
    // thread is the last one quietus starts.
    let script = "echo > ran; echo hello-$0; exec sleep 1";
    command
        .arg(binary)
        .args(["-i", "2s", "--report", "r.json", "--"])
        .args(marker.sh_words(script))
        .env("HOME", work)
        .env_remove("XDG_CACHE_HOME")
        .current_dir(work);
    cli_support::isolate(&mut command, marker);
    let mut command = assert_cmd::Command::from_std(command);
    command.timeout(GENEROUS);
    command.output().expect("prlimit runs")
}

#[test]
fn under_a_process_limit_quietus_exits_125_with_nothing_run_or_runs_the_program_whole() {
    let marker = Marker::new("limits_nproc");
    let uid = rustix::process::geteuid().is_root().then(idle_uid);
    let bin_dir = tempfile::tempdir().expect("a folder");
    let binary = readable_binary(bin_dir.path());
    let (mut refused, mut whole) = (Vec::new(), Vec::new());
    for nproc in 1..=16 {
        let work = tempfile::tempdir().expect("a folder");
        if let Some(uid) = uid {
            std::os::unix::fs::chown(work.path(), Some(uid), Some(uid)).expect("chown");
        }
        let out = run_limited(&marker, &binary, work.path(), uid, nproc);
        let (stdout, stderr) = (
            cli_support::text(&out.stdout),
            cli_support::text(&out.stderr),
        );
        let seen = format!("at {nproc} more tasks: {:?}\n{stderr}", out.status);
        assert!(!stderr.contains("panicked"), "{seen}");
        assert!(!stderr.contains("is lost"), "no output lost: {seen}");
        let report: serde_json::Value = serde_json::from_slice(
            &std::fs::read(work.path().join("r.json")).expect("a report, whatever the limit"),
        )
        .unwrap_or_else(|e| panic!("a whole report ({e}): {seen}"));
        let ran = work.path().join("ran").exists();
        if out.status.code() == Some(125) {
            assert!(!ran, "nothing run when quietus exits 125: {seen}");
            assert_eq!(report["outcome"], "not_started", "{seen}");
            let why = report["error"].as_str().unwrap_or_default();
            assert!(
                !why.is_empty() && stderr.contains(why),
                "the report and stderr say why: {report}\n{seen}"
            );
            assert!(
                stderr.contains("cannot start quietus's")
                    || stderr.contains("quietus itself ran short"),
                "quietus's own want, not the program's: {seen}"
            );
            refused.push((nproc, why.to_owned()));
        } else {
            assert!(ran, "the program ran: {seen}");
            assert!(
                stdout.contains(&format!("hello-{}", marker.as_str())),
                "its output passed on: {stdout:?} {seen}"
            );
            assert_ne!(report["outcome"], "not_started", "{seen}");
            if out.status.code() == Some(0) {
                whole.push(nproc);
            }
        }
        assert_no_leak(&marker);
    }
    // The sweep went through both sides: threads refused at the start, and runs in full.
    assert!(
        refused.iter().any(|(_, why)| why.contains("thread")),
        "a thread refused at the start: {refused:?}"
    );
    assert!(
        !whole.is_empty(),
        "a run in full at a higher limit: {refused:?}"
    );
}
