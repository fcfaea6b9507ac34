//! Probes: pull-style sources asked only at a stale decision, at most once per check interval
//! while they say yes; a panicking or blocked probe is a "no" and never holds up the ladder.

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Marker, assert_no_leak, wait_generously};
use quietus::{ActivitySource, EventConfig, MockClock, MonitorConfig, Outcome, Probe, Session};

const PATIENCE: Duration = Duration::from_secs(30);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Only the idle timeout plans wake-ups: no file arming, no warning, and the descendants
/// (sampled whatever the children source says) sampled at the idle deadlines themselves.
fn quiet_config(probe: Probe) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(secs(300))
        .check_interval(Some(secs(300)))
        .watch_children(false)
        .watch_files(false)
        .watch_output(false)
        .events(EventConfig::builder().idle_warning(None))
        .probe(probe)
}

#[test]
fn a_probe_is_asked_only_at_the_stale_decision_and_its_yes_keeps_the_child() {
    let m = Marker::new("probe-yes");
    let clock = MockClock::new();
    let asked = Arc::new(AtomicUsize::new(0));
    let busy = Arc::new(AtomicBool::new(true));
    let (a, b) = (asked.clone(), busy.clone());
    let probe = Probe::new("tool_call", move || {
        a.fetch_add(1, Ordering::SeqCst);
        b.load(Ordering::SeqCst)
    });
    let t0 = clock.now();
    let session = Session::builder(m.sh("exec sleep 100000"))
        .config(quiet_config(probe))
        .clock(clock.clone())
        .spawn()
        .unwrap();
    assert!(clock.wait_for_deadline(t0 + secs(300), PATIENCE));
    clock.advance(secs(299));
    assert!(clock.wait_for_deadline(t0 + secs(300), PATIENCE));
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "asked before the stale decision"
    );
    clock.advance(secs(1));
    // Yes at 300 s: activity now, the next decision at 600 s.
    assert!(clock.wait_for_deadline(t0 + secs(600), PATIENCE));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(session.try_wait().is_none());
    clock.advance(secs(300));
    assert!(clock.wait_for_deadline(t0 + secs(900), PATIENCE));
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    busy.store(false, Ordering::SeqCst);
    clock.advance(secs(300));
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected idle timeout, got {:?}", result.outcome);
    };
    assert_eq!(asked.load(Ordering::SeqCst), 3);
    let probe = report
        .get(ActivitySource::probe("tool_call"))
        .expect("the probe is reported like any source");
    assert_eq!(probe.events, 2);
    assert_eq!(probe.idle, secs(300));
    assert_eq!(result.runtime, secs(900));
    assert_no_leak(&m);
}

#[test]
fn a_panicking_probe_is_a_no() {
    let m = Marker::new("probe-panic");
    let clock = MockClock::new();
    let probe = Probe::new("buggy", || panic!("probe bug"));
    let t0 = clock.now();
    let session = Session::builder(m.sh("exec sleep 100000"))
        .config(quiet_config(probe))
        .clock(clock.clone())
        .spawn()
        .unwrap();
    assert!(clock.wait_for_deadline(t0 + secs(300), PATIENCE));
    clock.advance(secs(300));
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.runtime, secs(300));
    assert_no_leak(&m);
}

#[test]
fn a_blocked_probe_is_cut_off_by_its_timeout_on_the_session_clock() {
    let m = Marker::new("probe-blocked");
    let clock = MockClock::new();
    let (release, blocked) = crossbeam_channel::bounded::<()>(0);
    let probe = Probe::new("remote_job", move || {
        let _ = blocked.recv(); // blocks until the test ends
        true
    })
    .timeout(secs(5));
    let t0 = clock.now();
    let session = Session::builder(m.sh("exec sleep 100000"))
        .config(quiet_config(probe))
        .clock(clock.clone())
        .spawn()
        .unwrap();
    assert!(clock.wait_for_deadline(t0 + secs(300), PATIENCE));
    clock.advance(secs(300));
    // The monitor waits for the probe at most 5 s of its clock.
    assert!(clock.wait_for_deadline(t0 + secs(305), PATIENCE));
    assert!(session.try_wait().is_none());
    clock.advance(secs(5));
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        result.outcome
    );
    drop(release); // lets the probe's thread go
    assert_no_leak(&m);
}

#[test]
fn bad_probe_settings_are_config_errors() {
    let m = Marker::new("probe-bad");
    for (config, needle) in [
        (
            MonitorConfig::builder().probe(Probe::new("", || true)),
            "probe \"\"",
        ),
        (
            MonitorConfig::builder().probe(Probe::new("output", || true)),
            "built-in",
        ),
        (
            MonitorConfig::builder()
                .probe(Probe::new("a", || true))
                .probe(Probe::new("a", || false)),
            "two probes",
        ),
        (
            MonitorConfig::builder().solo_cap(ActivitySource::probe("nope"), Some(secs(1))),
            "no such source",
        ),
    ] {
        let err = Session::spawn(m.sh("true"), config).unwrap_err();
        assert_eq!(err.io_error_kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains(needle), "{err}");
    }
}
