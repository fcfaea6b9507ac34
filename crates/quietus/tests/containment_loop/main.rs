//! 200 sessions in a loop, and a spawn that fails, leave no cgroup and no open descriptor
//! behind. A test binary of its own with this one test: no other session of this process runs
//! meanwhile, so every `quietus-<pid>-…` cgroup and every descriptor is this loop's.

#[path = "../support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::Duration;

use quietus::{MonitorConfig, Session, SpawnError, error::SpawnErrorKind};
use support::{Marker, assert_no_leak, wait_generously};

/// The open descriptors of this process (their numbers), and what they are.
fn open_fds() -> Vec<(String, String)> {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .flatten()
        .filter_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            let fd = e.file_name().to_string_lossy().into_owned();
            Some((fd, target.display().to_string()))
        })
        .collect()
}

/// The descriptor numbers of [`open_fds`].
fn fd_numbers() -> Vec<String> {
    open_fds().into_iter().map(|(fd, _)| fd).collect()
}

/// Whether a session's descriptors are still open: its monitor thread lets go of its pidfd,
/// its cgroup, its socket-diagnostics socket and the `/proc` files its network probes keep
/// just after publishing the result, and the guardian's socket closes as it is told `done`.
fn session_fds_open() -> bool {
    let listing = format!("/proc/{}/fd", std::process::id());
    open_fds().iter().any(|(_, target)| {
        target.contains("pidfd")
            || target.contains("cgroup")
            || target.starts_with("socket:")
            || (target.starts_with("/proc/") && *target != listing)
    })
}

/// This process's session cgroups still present: `quietus-<own pid>-…` anywhere below the
/// cgroup2 mount's directory of this process.
fn own_session_cgroups() -> Vec<PathBuf> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").expect("own cgroup");
    let Some(rel) = cgroup.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Vec::new();
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let Some(mount) = mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mount = PathBuf::from(before.split_whitespace().nth(4)?);
        (after.split_whitespace().next()? == "cgroup2").then_some(mount)
    }) else {
        return Vec::new();
    };
    let prefix = format!("quietus-{}-", std::process::id());
    std::fs::read_dir(mount.join(rel.trim_start_matches('/')))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// This process's children, zombies included.
fn own_children() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn two_hundred_sessions_and_a_failed_spawn_leave_no_cgroup_and_no_descriptor() {
    let marker = Marker::new("contain_loop");
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .watch_files(false)
        .build()
        .unwrap();
    // One session first: the threads and descriptors made once per process (the spawner,
    // the registry of orphans…) exist before the count.
    wait_generously(&Session::spawn(marker.sh("true"), config.clone()).expect("sh runs"));
    assert!(support::poll_until(
        support::GENEROUS,
        || !session_fds_open()
    ));
    // And the set has settled: the same twice, 50 ms apart.
    let mut fds = fd_numbers();
    let settled = support::poll_until(support::GENEROUS, || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = fd_numbers();
        std::mem::replace(&mut fds, now) == fds
    });
    assert!(settled, "the first session's descriptors never settled");
    let root = rustix::process::geteuid().is_root();
    let mut cgroups = 0;
    for i in 0..200 {
        // Every few runs one leaves an escapee behind: the ladder (or the cgroup) ends it.
        let script = if i % 10 == 0 {
            "setsid -f sh -c 'sleep 1000' \"$0\" </dev/null >/dev/null 2>&1; exit 0"
        } else {
            "exit 0"
        };
        let session = Session::spawn(marker.sh(script), config.clone()).expect("sh runs");
        let result = wait_generously(&session);
        assert_eq!(result.exit_code(), 0, "{result:?}");
        if let Some(path) = &result.cgroup {
            assert!(!path.exists(), "{} was removed", path.display());
            cgroups += 1;
        }
    }
    assert_eq!(cgroups, if root { 200 } else { 0 });
    for _ in 0..3 {
        let err = Session::spawn(
            std::process::Command::new("/no/such/program-contain-loop"),
            config.clone(),
        )
        .expect_err("no such program");
        assert_eq!(SpawnError::kind(&err), SpawnErrorKind::Program);
        assert_eq!(err.io_error_kind(), std::io::ErrorKind::NotFound, "{err}");
    }
    assert_eq!(own_session_cgroups(), Vec::<PathBuf>::new());
    // Where the program is born in the cgroup by clone3, the process std forked and the one
    // whose exec failed are both reaped: no child of this process is left, not even a zombie
    // (each guardian is reaped by its monitor's thread just after the result, soon).
    let no_children = support::poll_until(support::GENEROUS, || own_children().is_empty());
    assert!(no_children, "children left: {:?}", own_children());
    // The guardians are reaped just after the results: their pipes close soon after.
    let settled = support::poll_until(support::GENEROUS, || fd_numbers() == fds);
    assert!(settled, "before {fds:#?}\nafter {:#?}", open_fds());
    assert_no_leak(&marker);
}
