//! Observe mode (`MonitorConfig::observe`, issue 43): everything but the ending. A stalled
//! child is not ended; the result lists when and why it would have been (one observation per
//! stretch of quiet, the hard timeout and completion once), and the outcome is its own.

use quietus::config::MonitorConfigBuilder;
use std::time::Duration;

use crate::support as common;

use common::{Marker, SharedBuf, assert_no_leak, wait_generously};
use quietus::{
    CompletionConfig, Event, EventReceiver, MockClock, MonitorConfig, Outcome, Session, Stdin,
    outcome::Observation,
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

/// The next observation sent (each receive bounded by `PATIENCE`).
fn next_observed(events: &mut EventReceiver) -> Observation {
    std::iter::from_fn(|| events.recv_timeout(PATIENCE))
        .find_map(|event| match event {
            Event::Observed(observation) => Some(observation),
            _ => None,
        })
        .expect("no observation was sent")
}

/// Whether an observation waits among the events sent so far.
fn observed_yet(events: &mut EventReceiver) -> bool {
    std::iter::from_fn(|| events.try_recv()).any(|event| matches!(event, Event::Observed(_)))
}

/// A child that reads one line from its piped stdin, prints it and exits 0.
fn reader(
    clock: &MockClock,
    config: impl Into<MonitorConfigBuilder>,
    m: &Marker,
) -> (Session, SharedBuf) {
    let buf = SharedBuf::new();
    let session = Session::builder(m.sh("echo ready; read x; echo got-$x"))
        .config(config.into().observe(true))
        .clock(clock.clone())
        .stdin(Stdin::Piped)
        .stdout(buf.sink())
        .spawn()
        .expect("spawn sh");
    (session, buf)
}

#[test]
fn a_stalled_child_is_not_ended_and_each_quiet_stretch_is_observed_once() {
    let m = Marker::new("observe-stalled");
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let (session, buf) = reader(&clock, config, &m);
    let mut events = session.events();
    buf.wait_for("ready");
    parked(&clock);
    clock.advance(Duration::from_secs(300));
    let first = next_observed(&mut events);
    assert_eq!(first.at, Duration::from_secs(300));
    let Outcome::IdleTimeout(report) = &first.would_have_ended else {
        panic!("expected a would-be idle timeout: {first:?}");
    };
    assert_eq!(report.idle_timeout, Duration::from_secs(300));
    let diagnosis = first.diagnosis().expect("a diagnosis, as for a real end");
    if cfg!(target_os = "linux") {
        assert_eq!(diagnosis.kind.name(), "awaiting_input", "{diagnosis:?}");
    }
    parked(&clock);
    assert!(session.try_wait().is_none(), "observe mode ended the child");
    // Quiet starts over: nothing a second before another whole idle timeout…
    clock.advance(Duration::from_secs(299));
    parked(&clock);
    assert!(!observed_yet(&mut events), "observed again too early");
    // …then the second stretch is observed, with how long the sources had really been idle.
    clock.advance(Duration::from_secs(1));
    let second = next_observed(&mut events);
    assert_eq!(second.at, Duration::from_secs(600));
    let Outcome::IdleTimeout(report) = &second.would_have_ended else {
        panic!("expected a would-be idle timeout: {second:?}");
    };
    let output = report
        .get(quietus::ActivitySource::Output)
        .expect("output on");
    assert_eq!(output.idle, Duration::from_secs(600));
    // Activity after an observation counts as always: a keepalive at 700 s puts the next one
    // at 1000 s, not 900 s.
    parked(&clock);
    clock.advance(Duration::from_secs(100));
    session.keepalive();
    parked(&clock);
    clock.advance(Duration::from_secs(299));
    parked(&clock);
    assert!(!observed_yet(&mut events), "the keepalive did not count");
    clock.advance(Duration::from_secs(1));
    assert_eq!(next_observed(&mut events).at, Duration::from_secs(1000));
    // The program runs to its own end: the outcome and the exit status are its own.
    session.write_stdin(b"go\n").expect("write stdin");
    session.close_stdin();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.signals_sent.is_empty(), "{:?}", result.signals_sent);
    buf.wait_for("got-go");
    let at: Vec<_> = result.observations.iter().map(|o| o.at.as_secs()).collect();
    assert_eq!(at, [300, 600, 1000]);
    assert_eq!(result.observations[0], first);
    assert_no_leak(&m);
}

#[test]
fn the_hard_timeout_is_observed_once_and_terminate_still_acts() {
    let m = Marker::new("observe-hard");
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(300))
        .hard_timeout(Some(Duration::from_secs(10)))
        .build()
        .unwrap();
    let (session, buf) = reader(&clock, config, &m);
    let mut events = session.events();
    buf.wait_for("ready");
    parked(&clock);
    clock.advance(Duration::from_secs(10));
    let hard = next_observed(&mut events);
    assert_eq!(hard.at, Duration::from_secs(10));
    assert_eq!(
        hard.would_have_ended,
        Outcome::HardTimeout {
            after: Duration::from_secs(10)
        }
    );
    assert!(hard.diagnosis().is_none());
    // Never again; and quiet started over at it: no idle observation at 300 s.
    parked(&clock);
    clock.advance(Duration::from_secs(299));
    parked(&clock);
    assert!(!observed_yet(&mut events), "observed again");
    assert!(session.try_wait().is_none(), "observe mode ended the child");
    // The caller's own request still ends it.
    session.terminate();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(result.observations, vec![hard]);
    assert_no_leak(&m);
}

#[test]
fn completion_past_its_linger_is_observed_once() {
    let m = Marker::new("observe-done");
    let clock = MockClock::new();
    let buf = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(300))
        .watch_children(false)
        .watch_files(false)
        .completion(
            CompletionConfig::builder()
                .output("^DONE$")
                .linger(Duration::from_secs(10)),
        )
        .observe(true)
        .build()
        .unwrap();
    let t0 = clock.now();
    let session = Session::builder(m.sh("echo DONE; read x; exit 3"))
        .config(config)
        .clock(clock.clone())
        .stdin(Stdin::Piped)
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    let mut events = session.events();
    buf.wait_for("DONE");
    assert!(clock.wait_for_deadline(t0 + Duration::from_secs(10), PATIENCE));
    clock.advance(Duration::from_secs(10));
    let done = next_observed(&mut events);
    assert_eq!(done.at, Duration::from_secs(10));
    assert!(
        matches!(done.would_have_ended, Outcome::Completed(_)),
        "{done:?}"
    );
    parked(&clock);
    assert!(session.try_wait().is_none(), "observe mode ended the child");
    session.close_stdin();
    let result = wait_generously(&session);
    // Its own end, its own status (not completion's 0).
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 3);
    assert_eq!(result.observations, vec![done]);
    assert!(result.completion.is_some());
    assert_no_leak(&m);
}

#[cfg(target_os = "linux")]
#[test]
fn an_input_wait_is_observed_and_the_child_answered_goes_on() {
    let m = Marker::new("observe-input");
    let out = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .input_wait_timeout(Some(Duration::from_millis(1000)))
        .observe(true)
        .build()
        .unwrap();
    let session = Session::builder(m.sh("echo ready; read x; echo got-$x"))
        .stdin(Stdin::Piped)
        .config(config)
        .stdout(out.sink())
        .spawn()
        .unwrap();
    let mut events = session.events();
    out.wait_for("ready");
    let seen = next_observed(&mut events);
    let Outcome::InputWait(wait) = &seen.would_have_ended else {
        panic!("expected a would-be input wait: {seen:?}");
    };
    assert_eq!(wait.target, "stdin (a pipe)");
    assert!(seen.at >= Duration::from_millis(1000), "{seen:?}");
    assert!(session.try_wait().is_none(), "observe mode ended the child");
    session.write_stdin(b"yes\n").unwrap();
    session.close_stdin();
    let result = wait_generously(&session);
    out.wait_for("got-yes");
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 0);
    assert!(result.signals_sent.is_empty());
    assert!(
        matches!(
            result.observations.first().map(|o| &o.would_have_ended),
            Some(Outcome::InputWait(_))
        ),
        "{:?}",
        result.observations
    );
    assert_no_leak(&m);
}
