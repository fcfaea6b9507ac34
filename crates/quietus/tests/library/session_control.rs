//! Controlling a running session: terminate, kill, keepalive, keepalive with a new timeout.

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::os::unix::process::ExitStatusExt;
use std::thread;
use std::time::{Duration, Instant};

use common::{GENEROUS, Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{ActivitySource, KillLadder, MonitorConfig, Outcome, Session, Signal};

fn silent_child(marker: &Marker, config: impl Into<MonitorConfigBuilder>) -> (Session, SharedBuf) {
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh("echo ready; sleep 1000"))
        .config(config)
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    (session, out)
}

fn patient() -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
}

#[test]
fn terminate_runs_the_ladder() {
    let marker = Marker::new("control_terminate");
    let (session, _out) = silent_child(&marker, patient());
    assert!(session.try_wait().is_none());
    assert!(session.wait_timeout(ms(50)).is_none(), "still running");
    session.terminate();
    let result = wait_generously(&session);
    assert_eq!(
        result.outcome,
        Outcome::Terminated { forced: false },
        "{result:#?}"
    );
    assert!(result.outcome.ended_by_quietus());
    assert_eq!(result.outcome.name(), "terminated");
    assert_eq!(result.signals_sent.first(), Some(&Signal::TERM));
    assert_eq!(result.status.expect("reaped").signal(), Some(15));
    assert_eq!(result.exit_code(), 143);
    assert!(result.kill_latency.is_none(), "not a timeout");
    assert_no_leak(&marker);
}

#[test]
fn kill_sends_sigkill_at_once() {
    let marker = Marker::new("control_kill");
    let (session, _out) = silent_child(&marker, patient());
    session.kill();
    let result = wait_generously(&session);
    assert_eq!(
        result.outcome,
        Outcome::Terminated { forced: true },
        "{result:#?}"
    );
    assert_eq!(result.signals_sent, vec![Signal::KILL]);
    assert!(result.escalated);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    assert_eq!(result.exit_code(), 137);
    assert_no_leak(&marker);
}

#[test]
fn terminate_after_the_child_exited_changes_nothing() {
    let marker = Marker::new("control_terminate_late");
    let session = Session::spawn(marker.sh("exit 5"), patient()).expect("sh can be spawned");
    let first = wait_generously(&session);
    session.terminate();
    session.kill();
    session.keepalive();
    let again = session.wait();
    assert_eq!(first, again);
    assert_eq!(again.outcome, Outcome::Exited);
    assert_eq!(again.exit_code(), 5);
    assert_eq!(session.try_wait(), Some(first));
    assert_no_leak(&marker);
}

#[test]
fn keepalives_keep_a_silent_child_alive_until_they_stop() {
    let marker = Marker::new("control_keepalive");
    let idle = ms(1000);
    let period = idle / 4;
    let kept_for = ms(3500);
    let (session, _out) = silent_child(
        &marker,
        MonitorConfig::builder()
            .idle_timeout(idle)
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    );
    // The board's origin (the spawn) is before this instant.
    let after_spawn = Instant::now();
    let mut sent = 0u64;
    let last_keepalive = loop {
        // Taken before the call, so the keepalive's own stamp is not earlier.
        let before = Instant::now();
        session.keepalive();
        sent += 1;
        assert!(
            session.try_wait().is_none(),
            "ended although kept alive: {:#?}",
            session.try_wait()
        );
        if after_spawn.elapsed() >= kept_for {
            // Alive more than three idle timeouts after the spawn.
            break before;
        }
        thread::sleep(period); // the keepalive cadence itself, not a wait for a condition
    };
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout once keepalives stopped: {result:#?}");
    };
    assert!(
        last_keepalive.elapsed() >= idle,
        "ended {:?} after the last keepalive",
        last_keepalive.elapsed()
    );
    assert!(
        result.runtime >= last_keepalive.duration_since(after_spawn) + idle,
        "{result:#?}"
    );
    let keepalive = report
        .get(ActivitySource::Keepalive)
        .expect("keepalive is listed");
    assert_eq!(keepalive.events, sent);
    assert!(keepalive.idle >= idle);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}

#[test]
fn keepalive_then_a_shorter_idle_timeout_shortens_the_idle_timeout() {
    let marker = Marker::new("control_shorten");
    let (session, _out) = silent_child(&marker, patient());
    let short = ms(500);
    let asked = Instant::now();
    session.keepalive();
    session
        .set_idle_timeout(short)
        .expect("500 ms is a valid idle timeout");
    let result = wait_generously(&session);
    let waited = asked.elapsed();
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout: {result:#?}");
    };
    assert_eq!(report.idle_timeout, short);
    assert!(waited >= short, "ended {waited:?} after the new timeout");
    assert!(
        waited < GENEROUS,
        "ended long before the original 60 s: {waited:?}"
    );
    assert_eq!(
        report.get(ActivitySource::Keepalive).map(|k| k.events),
        Some(1)
    );
    assert_no_leak(&marker);
}

#[test]
fn keepalive_then_a_longer_idle_timeout_lengthens_the_idle_timeout() {
    let marker = Marker::new("control_lengthen");
    let first = Duration::from_secs(3);
    let (session, _out) = silent_child(
        &marker,
        MonitorConfig::builder()
            .idle_timeout(first)
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
            .build()
            .unwrap(),
    );
    session.keepalive();
    session
        .set_idle_timeout(Duration::from_secs(60))
        .expect("60 s is a valid idle timeout");
    // Outlive the first timeout by a margin: the new one is in force.
    assert!(
        session.wait_timeout(first + ms(1000)).is_none(),
        "ended at the old timeout: {:#?}",
        session.try_wait()
    );
    session.terminate();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert!(result.runtime >= first + ms(1000));
    assert_no_leak(&marker);
}

#[test]
fn wait_timeout_accepts_an_unbounded_timeout() {
    // `std::sync::mpsc::Receiver::recv_timeout(Duration::MAX)` and crossbeam's equivalent simply
    // block; a "wait at most forever" must not panic on `Instant + Duration` overflow.
    let marker = Marker::new("control_wait_max");
    let session = Session::spawn(marker.sh("echo hi"), patient()).expect("sh can be spawned");
    let result = session
        .wait_timeout(Duration::MAX)
        .expect("the run ends, so an unbounded wait returns its result");
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 0);
    assert_no_leak(&marker);
}

#[test]
fn several_threads_can_wait_on_one_session() {
    let marker = Marker::new("control_many_waiters");
    let (session, _out) = silent_child(&marker, patient());
    let results = thread::scope(|scope| {
        let waiters: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| wait_generously(&session)))
            .collect();
        session.terminate();
        waiters
            .into_iter()
            .map(|w| w.join().expect("a waiter does not panic"))
            .collect::<Vec<_>>()
    });
    assert!(results.iter().all(|r| *r == results[0]), "{results:#?}");
    assert_eq!(results[0].outcome, Outcome::Terminated { forced: false });
    assert_no_leak(&marker);
}
