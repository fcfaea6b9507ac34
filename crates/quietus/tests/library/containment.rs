//! The library's containment: the result says how the tree was held; as root every session has
//! a cgroup of its own (20 at once in a registry: 20 cgroups), removed at the end, also when
//! the session is dropped; `Containment::Group` keeps the process group. (200 sessions and
//! a failed spawn leaving no cgroup and no descriptor: `tests/containment_loop`, a process of
//! its own.)

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use common::{HANDSHAKE, Marker, SharedBuf, assert_no_leak, poll_until, wait_generously};
use quietus::{Containment, MonitorConfig, MonitorResult, Registry, Session};

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

fn config() -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .watch_files(false)
}

/// The cgroup the result names (as root), or `None` after checking the group's reason.
fn cgroup_of(result: &MonitorResult) -> Option<PathBuf> {
    match result.containment {
        Containment::Cgroup => {
            assert!(root(), "only root gets a cgroup here");
            assert!(result.why_not_cgroup.is_none(), "{result:?}");
            Some(result.cgroup.clone().expect("a cgroup has a path"))
        }
        Containment::Group => {
            assert!(!root(), "root gets a cgroup");
            assert!(result.why_not_cgroup.is_some(), "auto says why not");
            assert!(result.cgroup.is_none(), "{result:?}");
            None
        }
        other => panic!("unknown containment {other:?}"),
    }
}

#[test]
fn twenty_concurrent_sessions_of_a_registry_each_have_their_own_cgroup() {
    let marker = Marker::new("contain_registry");
    let registry = Registry::new();
    let mut outs = Vec::new();
    for _ in 0..20 {
        let out = SharedBuf::new();
        let builder = Session::builder(
            marker.sh("sed -n 's/^0:://p' /proc/self/cgroup; echo ready; exec sleep 1000"),
        )
        .config(config())
        .stdout(out.sink());
        registry.spawn(builder).expect("sh can be spawned");
        outs.push(out);
    }
    for out in &outs {
        out.wait_for("ready\n");
    }
    // All 20 run at once, each in its own cgroup (or all in this process's, without root).
    let seen: BTreeSet<String> = outs
        .iter()
        .map(|out| out.text().lines().next().unwrap_or_default().to_owned())
        .collect();
    let results = registry.shutdown_all();
    assert_eq!(results.len(), 20);
    let mut paths = BTreeSet::new();
    for (_, result) in &results {
        if let Some(path) = cgroup_of(result) {
            assert!(!path.exists(), "{} was removed", path.display());
            paths.insert(path);
        }
    }
    if root() {
        assert_eq!(seen.len(), 20, "{seen:#?}");
        assert!(seen.iter().all(|s| s.contains("/quietus-")), "{seen:#?}");
        assert_eq!(paths.len(), 20);
    } else {
        assert_eq!(seen.len(), 1, "{seen:#?}");
    }
    assert_no_leak(&marker);
}

#[test]
fn a_dropped_session_takes_its_escapee_and_its_cgroup_down() {
    let marker = Marker::new("contain_drop");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let up = dir.path().join("up");
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh(&format!(
        "sed -n 's/^0:://p' /proc/self/cgroup; \
         setsid -f sh -c 'touch \"$1\"; while :; do sleep 1; done' \"$0\" {} \
         </dev/null >/dev/null 2>&1; echo ready; exec sleep 1000",
        up.display()
    )))
    .config(config())
    .stdout(out.sink())
    .spawn()
    .expect("sh can be spawned");
    out.wait_for("ready\n");
    assert!(poll_until(HANDSHAKE, || up.exists()), "the escapee is up");
    let rel = out.text().lines().next().unwrap_or_default().to_owned();
    let held_in_cgroup = rel.contains("/quietus-");
    assert_eq!(held_in_cgroup, root(), "{rel}");
    drop(session);
    if held_in_cgroup {
        // The escapee left the process group: only the cgroup reaches it.
        assert_no_leak(&marker);
        let name = rel.rsplit('/').next().expect("a name").to_owned();
        let gone = poll_until(common::GENEROUS, || !own_cgroup_children().contains(&name));
        assert!(gone, "{name} was removed");
    }
}

/// The names of the cgroups below this process's own.
fn own_cgroup_children() -> Vec<String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").expect("own cgroup");
    let rel = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a v2 line")
        .trim_start_matches('/')
        .to_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let mount = mountinfo
        .lines()
        .find_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mount = PathBuf::from(before.split_whitespace().nth(4)?);
            (after.split_whitespace().next()? == "cgroup2").then_some(mount)
        })
        .expect("a cgroup2 mount");
    std::fs::read_dir(mount.join(rel))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn containment_group_keeps_the_process_group_and_says_it_was_asked() {
    let marker = Marker::new("contain_group");
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh("sed -n 's/^0:://p' /proc/self/cgroup"))
        .config(config().containment(Containment::Group))
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.containment, Containment::Group, "{result:?}");
    assert_eq!(result.why_not_cgroup, None, "{result:?}");
    assert!(!out.text().contains("quietus-"), "{}", out.text());
    assert_eq!(result.memory_peak, None);
    assert_no_leak(&marker);
}

#[test]
fn the_caller_s_command_settings_survive_the_birth_in_the_cgroup() {
    // The program's process is made by clone3 from the process std forked, after std applied
    // the command: its identity, cleared environment, working folder and argv[0] all hold. (As
    // root the command switches to nobody, who may not clone into root's cgroup: that process
    // enters by the fallback, a write to `cgroup.procs` opened by root.)
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let marker = Marker::new("contain_settings");
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("readable by all");
    let mut command = marker.sh(
        "id -u; echo \"${HOME-unset}|$KEEP\"; pwd; tr '\\0' ' ' < /proc/$$/cmdline; echo; \
         sed -n 's/^0:://p' /proc/self/cgroup",
    );
    command
        .env_clear()
        .env(common::MARKER_ENV, marker.as_str())
        .env("PATH", "/usr/bin:/bin")
        .env("KEEP", "kept")
        .current_dir(dir.path())
        .arg0("renamed-sh");
    let uid = if root() {
        65534
    } else {
        rustix::process::geteuid().as_raw()
    };
    if root() {
        command.uid(uid).gid(65534);
    }
    let out = SharedBuf::new();
    let session = Session::builder(command)
        .config(config())
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "{result:?}\n{}", out.text());
    let text = out.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], uid.to_string(), "{text}");
    assert_eq!(lines[1], "unset|kept", "{text}");
    let here = dir.path().canonicalize().expect("the folder");
    assert_eq!(lines[2], here.display().to_string(), "{text}");
    assert!(lines[3].starts_with("renamed-sh -c "), "{text}");
    assert_eq!(lines[4].contains("/quietus-"), root(), "{text}");
    if let Some(path) = cgroup_of(&result) {
        assert!(lines[4].ends_with(&*path.file_name().unwrap().to_string_lossy()));
    }
    assert_no_leak(&marker);
}
