//! The monitor driven by a `MockClock`: hours of a session simulated in milliseconds, with a real
//! child process, no sleeping, and exact (mock-time) assertions.
//!
//! Every test spawns its own `sh` child carrying a unique marker in its argv and checks at the
//! end that no process with that marker is left.

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::process::Command;
use std::time::Duration;

use common::{Marker, SharedBuf, assert_no_leak};
use quietus::{
    ActivitySource, EventConfig, KillLadder, MockClock, MonitorConfig, Outcome, Session, Signal,
};

/// Real-time bound for anything a test waits for (generous: a loaded 2-core machine).
const PATIENCE: Duration = Duration::from_secs(30);

/// Waits until the monitor is parked on its next timer.
fn parked(clock: &MockClock) {
    assert!(
        clock.wait_for_timers(1, PATIENCE),
        "the monitor never armed a timer"
    );
}

fn spawn(
    clock: &MockClock,
    config: impl Into<MonitorConfigBuilder>,
    script: &str,
    m: &Marker,
) -> (Session, SharedBuf) {
    let buf = SharedBuf::new();
    let session = Session::builder(m.sh(script))
        .config(config)
        .clock(clock.clone())
        .stdout(buf.sink())
        .spawn()
        .expect("spawn sh");
    (session, buf)
}

#[test]
fn silent_child_ends_exactly_at_the_idle_timeout_with_one_timer() {
    let m = Marker::new("mock-silent");
    let clock = MockClock::new();
    let config = MonitorConfig::default(); // idle 300 s
    let (session, buf) = spawn(&clock, config, "echo ready; exec sleep 100000", &m);
    buf.wait_for("ready");
    parked(&clock);
    clock.advance(Duration::from_secs(299));
    parked(&clock);
    assert!(
        session.try_wait().is_none(),
        "ended before the idle timeout"
    );
    clock.advance(Duration::from_secs(1));
    let result = session.wait();
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {:?}", result.outcome);
    };
    assert_eq!(report.idle_timeout, Duration::from_secs(300));
    let output = report.get(ActivitySource::Output).expect("output enabled");
    assert!(output.idle <= Duration::from_secs(300));
    assert_eq!(output.events, 1, "one read: the ready line");
    assert_eq!(result.kill_latency, Some(Duration::ZERO));
    assert_eq!(result.signals_sent, vec![Signal::TERM]);
    assert!(!result.escalated);
    assert_eq!(result.exit_code(), 124);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(15));
    // Only the clock moved the run: it lasted exactly the idle timeout of mock time.
    assert_eq!(result.runtime, Duration::from_secs(300));
    // No tick: the monitor armed a handful of timers, not one per interval.
    assert!(
        clock.timers_created() <= 4,
        "{} timers",
        clock.timers_created()
    );
    assert_no_leak(&m);
}

#[test]
fn keepalives_carry_a_silent_child_through_hours() {
    let m = Marker::new("mock-hours");
    let clock = MockClock::new();
    let (session, buf) = spawn(
        &clock,
        MonitorConfig::default(),
        "echo ready; exec sleep 100000",
        &m,
    );
    buf.wait_for("ready");
    // 200 keepalives 200 s apart: 11 hours of mock time.
    for _ in 0..200 {
        parked(&clock);
        clock.advance(Duration::from_secs(200));
        session.keepalive();
        assert!(session.try_wait().is_none());
    }
    parked(&clock);
    assert!(session.try_wait().is_none(), "ended while kept alive");
    clock.advance(Duration::from_secs(299));
    parked(&clock);
    assert!(session.try_wait().is_none());
    clock.advance(Duration::from_secs(1));
    let result = session.wait();
    assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
    assert_eq!(result.runtime, Duration::from_secs(200 * 200 + 300));
    // About one wake-up per keepalive spell, never a periodic tick.
    assert!(
        clock.timers_created() <= 2 * 200 + 10,
        "{} timers",
        clock.timers_created()
    );
    assert_no_leak(&m);
}

#[test]
fn hard_timeout_ends_an_active_child_at_its_exact_instant() {
    let m = Marker::new("mock-hard");
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .hard_timeout(Some(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let (session, buf) = spawn(&clock, config, "echo ready; exec sleep 100000", &m);
    buf.wait_for("ready");
    for _ in 0..36 {
        parked(&clock);
        assert!(session.try_wait().is_none());
        clock.advance(Duration::from_secs(100));
        session.keepalive();
    }
    let result = session.wait();
    assert_eq!(
        result.outcome,
        Outcome::HardTimeout {
            after: Duration::from_secs(3600)
        }
    );
    assert_eq!(result.runtime, Duration::from_secs(3600));
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&m);
}

#[test]
fn ladder_grace_runs_on_the_mock_clock_and_escalates() {
    let m = Marker::new("mock-ladder");
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(5)))
        .build()
        .unwrap();
    let (session, buf) = spawn(
        &clock,
        config,
        "trap '' TERM; echo ready; while :; do sleep 100000; done",
        &m,
    );
    buf.wait_for("ready");
    parked(&clock);
    clock.advance(Duration::from_secs(60));
    // Stale: TERM sent, ignored; the monitor now waits out the grace on the mock clock.
    parked(&clock);
    assert!(session.try_wait().is_none(), "SIGTERM was ignored");
    clock.advance(Duration::from_secs(4));
    parked(&clock);
    assert!(session.try_wait().is_none(), "still inside the grace");
    clock.advance(Duration::from_secs(1));
    let result = session.wait();
    assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
    assert!(result.escalated);
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    assert_eq!(result.ladder_time, Some(Duration::from_secs(5)));
    assert_eq!(result.runtime, Duration::from_secs(65));
    assert_no_leak(&m);
}

#[test]
fn keepalive_then_set_idle_timeout_replaces_the_idle_timeout() {
    let m = Marker::new("mock-retime");
    let clock = MockClock::new();
    // No idle warning, and the tree sampled once a minute (a configured interval does not
    // follow the timeout): the only deadline left is the idle timeout itself.
    let config = MonitorConfig::builder()
        .events(EventConfig::builder().idle_warning(None))
        .check_interval(Some(Duration::from_secs(60)))
        .build()
        .unwrap();
    let (session, buf) = spawn(&clock, config, "echo ready; exec sleep 100000", &m);
    buf.wait_for("ready");
    parked(&clock);
    clock.advance(Duration::from_secs(100));
    session.keepalive();
    session.set_idle_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        session.set_idle_timeout(Duration::ZERO).is_err(),
        "a zero timeout is rejected"
    );
    // The monitor re-plans on the message: wait until it is parked on the new deadline.
    assert!(clock.wait_for_deadline(clock.now() + Duration::from_secs(10), PATIENCE));
    clock.advance(Duration::from_secs(10));
    let result = session.wait();
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{:?}", result.outcome);
    };
    assert_eq!(report.idle_timeout, Duration::from_secs(10));
    assert_eq!(result.runtime, Duration::from_secs(110));
    assert_no_leak(&m);
}

#[test]
fn output_counts_as_activity_at_the_mock_instant() {
    let m = Marker::new("mock-output");
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // The child prints a line for every line it reads... it cannot read (stdin is null), so
    // drive it with signals instead: it prints "tick" on every SIGUSR1.
    let (session, buf) = spawn(
        &clock,
        config,
        "trap 'echo tick' USR1; echo ready; while :; do sleep 100000 & wait $!; done",
        &m,
    );
    buf.wait_for("ready");
    parked(&clock);
    clock.advance(Duration::from_secs(50));
    // Signal only the shell (its pid is the session pid); the sleeper is left alone.
    let status = Command::new("kill")
        .args(["-USR1", &session.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    buf.wait_for("tick");
    // The tick was stamped at mock t=50 s, so the child is stale at 110 s, not 60 s.
    clock.advance(Duration::from_secs(10));
    parked(&clock);
    assert!(
        session.try_wait().is_none(),
        "output at 50 s keeps it alive"
    );
    clock.advance(Duration::from_secs(49));
    parked(&clock);
    assert!(session.try_wait().is_none());
    clock.advance(Duration::from_secs(1));
    let result = session.wait();
    assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
    assert_eq!(result.runtime, Duration::from_secs(110));
    assert_no_leak(&m);
}

#[test]
fn terminate_under_the_mock_clock_needs_no_time_to_pass() {
    let m = Marker::new("mock-terminate");
    let clock = MockClock::new();
    let (session, buf) = spawn(
        &clock,
        MonitorConfig::default(),
        "echo ready; exec sleep 100000",
        &m,
    );
    buf.wait_for("ready");
    session.terminate();
    let result = session.wait();
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(result.runtime, Duration::ZERO);
    assert_eq!(result.exit_code(), 143);
    assert_no_leak(&m);
}

#[test]
fn a_new_idle_timeout_brings_the_check_interval_derived_from_it() {
    // An hour of idle timeout: the descendants are sampled every 30 s (idle / 10, at most
    // 30 s). Two seconds: every 200 ms — from the moment the timeout changes, not after the
    // 30 s planned under the old one.
    let m = Marker::new("mock-interval");
    let clock = MockClock::new();
    let t0 = clock.now();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(3600))
        .events(EventConfig::builder().idle_warning(None))
        .build()
        .unwrap();
    let (session, buf) = spawn(&clock, config, "echo ready; exec sleep 100000", &m);
    buf.wait_for("ready");
    assert!(clock.wait_for_deadline(t0 + Duration::from_secs(30), PATIENCE));
    session
        .set_idle_timeout(Duration::from_secs(2))
        .expect("2 s is a valid idle timeout");
    assert!(
        clock.wait_for_deadline(t0 + Duration::from_millis(200), PATIENCE),
        "the monitor kept the sampling interval of the old timeout"
    );
    session.kill();
    session.wait();
    assert_no_leak(&m);
}
