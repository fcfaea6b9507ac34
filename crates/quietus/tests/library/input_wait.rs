//! `MonitorConfig::input_wait_timeout` on real processes: a `read` on a held pipe is ended
//! within a second or two of the timeout (once, with one event), a child whose stdin is fed
//! line by line or that shows activity is never ended for it.
#![cfg(target_os = "linux")]

use quietus::config::MonitorConfigBuilder;
use std::time::{Duration, Instant};

use crate::support as common;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::diagnosis::InputWait;
use quietus::{Event, MonitorConfig, Outcome, Session, Stdin};

/// Idle timeout 60 s: whatever ends the child earlier is the input-wait rule.
fn config(timeout: Duration) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .input_wait_timeout(Some(timeout))
        .kill_ladder(quietus::KillLadder::polite(quietus::Signal::TERM, ms(300)))
}

fn input_wait(event: Event) -> Option<InputWait> {
    match event {
        Event::InputWait(w) => Some(w),
        _ => None,
    }
}

fn input_waits(events: Vec<Event>) -> Vec<InputWait> {
    events.into_iter().filter_map(input_wait).collect()
}

/// The next input-wait event of a running session (each receive bounded by `GENEROUS`).
fn next_input_wait(events: &mut quietus::EventReceiver) -> Option<InputWait> {
    std::iter::from_fn(|| events.recv_timeout(common::GENEROUS)).find_map(input_wait)
}

#[test]
fn a_read_on_a_held_pipe_is_ended_within_a_second_or_two_of_the_timeout() {
    let m = Marker::new("iw-held");
    let out = SharedBuf::new();
    let session = Session::builder(m.sh("echo ready; read x"))
        .stdin(Stdin::Piped)
        .config(config(ms(2000)))
        .stdout(out.sink())
        .spawn()
        .unwrap();
    let mut events = session.events();
    out.wait_for("ready");
    let seen = Instant::now();
    let result = wait_generously(&session);
    let took = seen.elapsed();
    let Outcome::InputWait(wait) = &result.outcome else {
        panic!("expected an input wait: {:?}", result.outcome);
    };
    assert_eq!(result.exit_code(), 124);
    assert_eq!(result.outcome.name(), "input_wait");
    assert_eq!((wait.pid, wait.name.as_str()), (result.pid, "sh"));
    assert_eq!(wait.target, "stdin (a pipe)");
    assert!(wait.waited >= ms(2000), "{wait:?}");
    // Not before the timeout after the last output; well before the idle timeout (generous).
    assert!(
        took >= ms(1900) && took < Duration::from_secs(20),
        "{took:?}"
    );
    let sent = input_waits(events.iter().collect());
    assert_eq!(sent, vec![wait.clone()], "one event per episode");
    assert_no_leak(&m);
}

#[test]
fn a_child_whose_stdin_is_fed_line_by_line_is_never_ended_for_it() {
    let m = Marker::new("iw-fed");
    // Silent: only its read count shows that it gets lines. A line every 300 ms for 5 s,
    // 1.7 s of slack below the 2 s timeout.
    let session = Session::builder(m.sh("while read x; do :; done; echo fed-done"))
        .stdin(Stdin::Piped)
        .config(config(ms(2000)))
        .spawn()
        .unwrap();
    let mut events = session.events();
    let start = Instant::now();
    let mut lines = 0;
    while start.elapsed() < Duration::from_secs(5) {
        session
            .write_stdin(format!("line {lines}\n").as_bytes())
            .unwrap();
        lines += 1;
        std::thread::sleep(ms(300));
    }
    session.close_stdin();
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::Exited),
        "{:?} after {lines} lines",
        result.outcome
    );
    assert_eq!(result.exit_code(), 0);
    assert!(input_waits(events.iter().collect()).is_empty());
    assert_no_leak(&m);
}

#[test]
fn never_while_a_source_shows_activity() {
    let m = Marker::new("iw-active");
    // The shell reads its held stdin while a background loop prints every 300 ms for 4.5 s:
    // the input wait comes only after the output stops.
    let out = SharedBuf::new();
    let script = "(i=0; while [ $i -lt 15 ]; do echo tick$i; sleep 0.3; i=$((i+1)); done) & \
                  read x";
    let session = Session::builder(m.sh(script))
        .stdin(Stdin::Piped)
        .config(config(ms(2000)))
        .stdout(out.sink())
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::InputWait(_)),
        "{:?}",
        result.outcome
    );
    assert!(
        out.contains("tick14"),
        "ended while active: {:?}",
        out.text()
    );
    assert_no_leak(&m);
}

#[test]
fn a_grandchild_started_after_the_last_sample_is_seen_whatever_the_check_interval() {
    let m = Marker::new("iw-grandchild");
    let out = SharedBuf::new();
    // Idle timeout 300 s: descendants are sampled every 30 s. The reader is a grandchild
    // started 2 s in, long after the last sample the quiet spell began with; the shell waits
    // on it.
    let config = config(ms(2000)).idle_timeout(Duration::from_secs(300));
    let session = Session::builder(m.sh("echo ready; sleep 2; sh -c 'read x'; echo after"))
        .stdin(Stdin::Piped)
        .config(config)
        .stdout(out.sink())
        .spawn()
        .unwrap();
    out.wait_for("ready");
    let seen = Instant::now();
    let result = wait_generously(&session);
    let took = seen.elapsed();
    let Outcome::InputWait(wait) = &result.outcome else {
        panic!("expected an input wait: {:?}", result.outcome);
    };
    assert!(
        took >= ms(3900),
        "not before the reader waited 2 s: {took:?}"
    );
    assert_ne!(wait.pid, result.pid, "the grandchild reads: {wait:?}");
    // Well before the 30 s check interval (generous).
    assert!(took < Duration::from_secs(17), "{took:?}");
    assert_no_leak(&m);
}

/// `input_wait_notice` alone: the event once per episode, and the child goes on. A line on
/// its stdin ends the first episode (its read count moves), the next wait is a second one;
/// the end of its input lets it exit by itself.
#[test]
fn a_notice_tells_once_per_episode_and_never_ends_the_child() {
    let m = Marker::new("iw-notice");
    let out = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .input_wait_notice(Some(ms(500)))
        .build()
        .unwrap();
    let session = Session::builder(m.sh("echo ready; read x; read y; echo got \"$x\" \"$y\""))
        .stdin(Stdin::Piped)
        .config(config)
        .stdout(out.sink())
        .spawn()
        .unwrap();
    let mut events = session.events();
    out.wait_for("ready");
    let first = next_input_wait(&mut events).expect("a notice for the first read");
    assert_eq!(first.target, "stdin (a pipe)");
    assert!(first.waited >= ms(500), "{first:?}");
    // Still running: a notice ends nothing. Feed the first line; the second read waits anew.
    assert!(session.try_wait().is_none(), "the notice ended the child");
    session.write_stdin(b"one\n").unwrap();
    let second = next_input_wait(&mut events).expect("a notice for the second read, a new episode");
    assert_eq!(second.pid, first.pid);
    session.write_stdin(b"two\n").unwrap();
    session.close_stdin();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    out.wait_for("got one two");
    assert_no_leak(&m);
}
