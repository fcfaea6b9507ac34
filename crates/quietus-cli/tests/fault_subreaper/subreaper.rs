//! Subreaper mode (Linux): escapees born and orphaned between two samples are caught.
//!
//! In its own test binary: the mode makes the whole process a child subreaper.
#![cfg(target_os = "linux")]

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::time::Duration;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{ChildWatchConfig, Containment, MonitorConfig, Outcome, Session};

/// The process-group backend: subreaper mode is its way to catch orphans (a cgroup holds
/// them without it).
fn config() -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .containment(Containment::Group)
        .idle_timeout(ms(600))
        // No sample before the stale deadline: whatever escapes does so between two samples.
        .check_interval(Some(Duration::from_secs(3600)))
        .children(ChildWatchConfig::builder().subreaper(true))
        .kill_ladder(quietus::KillLadder::polite(quietus::Signal::TERM, ms(500)))
}

#[test]
fn a_double_forked_setsid_daemon_born_between_samples_is_ended() {
    let m = Marker::new("subreaper-daemon");
    let out = SharedBuf::new();
    let session = Session::builder(m.sh("(setsid sleep 1000 &); echo ready; exec sleep 1000"))
        .config(config())
        .stdout(out.sink())
        .spawn()
        .unwrap();
    out.wait_for("ready");
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{:?}", result.outcome);
    };
    assert!(report.children.unwrap().escapees >= 1, "{report:?}");
    assert_no_leak(&m);
}

#[test]
fn a_killed_daemons_workers_coming_back_are_ended_too() {
    let m = Marker::new("subreaper-workers");
    let out = SharedBuf::new();
    // A daemon in a session of its own with two workers; when the ladder kills the daemon, the
    // workers are orphaned in turn and come back to this process.
    let session = Session::builder(
        m.sh("(setsid sh -c 'sleep 1000 & sleep 1000 & wait' &); echo ready; exec sleep 1000"),
    )
    .config(config())
    .stdout(out.sink())
    .spawn()
    .unwrap();
    out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
    assert_no_leak(&m);
}

#[test]
fn a_normal_exit_leaving_a_daemon_behind_counts_it_as_a_leftover() {
    let m = Marker::new("subreaper-leftover");
    let session = Session::builder(m.sh("(setsid sleep 1000 &); echo bye"))
        .config(config())
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 0);
    assert!(result.leftovers_killed >= 1, "{result:?}");
    assert_no_leak(&m);
}
