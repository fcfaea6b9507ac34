//! The child's own exit code, or the signal it died of, passes through unchanged.

use crate::support as common;

use std::os::unix::process::ExitStatusExt;

use common::{Marker, assert_no_leak, ms, wait_generously};
use quietus::{MonitorConfig, MonitorResult, Outcome, Session};

fn run(marker: &Marker, script: &str) -> MonitorResult {
    let session = Session::spawn(
        marker.sh(script),
        MonitorConfig::builder()
            .idle_timeout(ms(10_000))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(!result.outcome.ended_by_quietus());
    assert_eq!(result.outcome.name(), "exited");
    assert!(result.signals_sent.is_empty(), "{result:#?}");
    assert!(!result.escalated);
    assert_eq!(result.leftovers_killed, 0);
    assert!(result.kill_latency.is_none());
    assert!(result.ladder_time.is_none());
    assert!(result.output_complete);
    result
}

#[test]
fn exit_zero() {
    let marker = Marker::new("exit_zero");
    let result = run(&marker, "exit 0");
    assert!(result.status.expect("reaped").success());
    assert_eq!(result.exit_code(), 0);
    assert_no_leak(&marker);
}

#[test]
fn exit_code_passes_through() {
    let marker = Marker::new("exit_three");
    let result = run(&marker, "exit 3");
    assert_eq!(result.status.expect("reaped").code(), Some(3));
    assert_eq!(result.exit_code(), 3);
    assert_eq!(result.signal(), None);
    assert_no_leak(&marker);
}

#[test]
fn high_exit_code_passes_through() {
    let marker = Marker::new("exit_255");
    let result = run(&marker, "exit 255");
    assert_eq!(result.exit_code(), 255);
    assert_no_leak(&marker);
}

#[test]
fn death_by_sigterm_is_128_plus_15() {
    let marker = Marker::new("exit_self_term");
    let result = run(&marker, "kill -TERM $$");
    let status = result.status.expect("reaped");
    assert_eq!(status.signal(), Some(15), "{status:?}");
    assert_eq!(result.signal().map(quietus::Signal::number), Some(15));
    assert_eq!(result.exit_code(), 143);
    assert_no_leak(&marker);
}

#[test]
fn death_by_sigkill_is_128_plus_9() {
    let marker = Marker::new("exit_self_kill");
    let result = run(&marker, "kill -KILL $$");
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    assert_eq!(result.exit_code(), 137);
    assert_no_leak(&marker);
}
