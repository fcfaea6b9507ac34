//! Fault scenarios, family "timing": exits and keepalives that race the monitor's decisions.
//!
//! The racy scenarios run `QUIETUS_STRESS=N` times (once by default). Their assertions are
//! about consistency, never about who wins a race: whichever way it went, the result must tell
//! one coherent story.
//!
//! Already covered elsewhere, not repeated here: the exact idle and hard instants on the mock
//! clock (`mock_clock.rs`), terminate after the child exited
//! (`session_control::terminate_after_the_child_exited_changes_nothing`).
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::fault as fault_support;
use quietus::config::MonitorConfigBuilder;

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{ms, wait_generously};
use fault_support::{Scenario, repeats};
use quietus::{ActivitySource, KillLadder, MonitorConfig, MonitorResult, Outcome, Signal};

fn config(idle: Duration) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(idle)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
}

/// The child and a grandchild answer TERM by exiting cleanly during a long grace: the ladder
/// notices at once (no waiting out the grace, no SIGKILL), and the child's own code is kept in
/// the status while the outcome stays the idle timeout.
#[test]
fn a_tree_that_exits_during_the_grace_is_not_escalated() {
    let s = Scenario::new("timing_grace_exit");
    let idle = ms(400);
    let grace = Duration::from_secs(20);
    let session = s.spawn(
        "trap 'say leader-term; exit 3' TERM; \
         (trap 'say sub-term; exit 0' TERM; sleep 1000 & wait) & \
         say ready; sleep 1000 & wait",
        config(idle).kill_ladder(KillLadder::polite(Signal::TERM, grace)),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(result.signals_sent, vec![Signal::TERM]);
    assert!(!result.escalated);
    assert_eq!(result.status.and_then(|s| s.code()), Some(3), "{result:#?}");
    assert_eq!(result.exit_code(), 124, "a timeout stays a timeout");
    assert!(result.ladder_time.expect("a ladder ran") < grace);
    assert!(result.runtime >= idle);
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// Checks that a result is one coherent story of either "the child exited with `code`" or
/// "quietus ended it with `ended`".
#[track_caller]
fn assert_coherent(result: &MonitorResult, code: i32, ended_by: &str) {
    match &result.outcome {
        Outcome::Exited => {
            assert!(result.signals_sent.is_empty(), "{result:#?}");
            assert_eq!(result.leftovers_killed, 0, "{result:#?}");
            assert!(result.kill_latency.is_none(), "{result:#?}");
            assert!(result.ladder_time.is_none(), "{result:#?}");
            assert_eq!(result.status.and_then(|s| s.code()), Some(code));
            assert_eq!(result.exit_code(), code);
        }
        other => {
            assert_eq!(other.name(), ended_by, "{result:#?}");
            assert_eq!(
                result.signals_sent.first(),
                Some(&Signal::TERM),
                "{result:#?}"
            );
            assert!(!result.escalated, "TERM suffices: {result:#?}");
            assert!(result.ladder_time.is_some(), "{result:#?}");
            let status = result.status.expect("reaped");
            assert!(
                status.code() == Some(code)
                    || std::os::unix::process::ExitStatusExt::signal(&status) == Some(15),
                "its own exit or our TERM: {result:#?}"
            );
        }
    }
    assert!(!result.termination_unproven);
    assert!(result.output_complete);
}

/// The child prints, stays silent for about the idle timeout, and exits with 3: just before,
/// at, or just after the instant it becomes stale.
#[test]
fn a_child_exiting_around_the_stale_deadline_gets_a_coherent_result() {
    let idle = ms(300);
    let offsets: [i64; 5] = [-20, -5, 0, 5, 20];
    let (mut exited, mut ended) = (0, 0);
    for round in 0..repeats(1) {
        for offset in offsets {
            let s = Scenario::new("timing_at_deadline");
            let after = (idle.as_millis() as i64 + offset) as f64 / 1000.0;
            let started = Instant::now();
            let session = s.spawn(
                &format!(
                    "exec perl -MTime::HiRes=sleep -e 'open(my $l, q(>>), $ENV{{SW_OUT}}) or die; \
                     print $l qq(ready\\n); close $l; syswrite(STDOUT, qq(ready\\n)); \
                     sleep {after}; exit 3'"
                ),
                config(idle),
            );
            let result = wait_generously(&session);
            assert_coherent(&result, 3, "idle_timeout");
            let floor = ms((idle.as_millis() as i64 + offset.min(0)) as u64);
            assert!(started.elapsed() >= floor, "round {round}, offset {offset}");
            match result.outcome {
                Outcome::Exited => exited += 1,
                _ => ended += 1,
            }
            s.assert_no_leak();
            s.assert_accounted();
        }
    }
    eprintln!("exits around the deadline: {exited} exited on their own, {ended} ended");
}

/// The child exits (with output, or without) before the first descendant sample, even before
/// the monitor has started.
#[test]
fn a_child_exiting_before_the_first_sample_is_reported_exactly() {
    for _ in 0..repeats(1) {
        for (script, code) in [
            ("exit 7", 7),
            ("say quick; exit 7", 7),
            ("warn on-stderr; say on-stdout; exit 0", 0),
            (
                "head -c 1048576 /dev/urandom | tee -a \"$SW_OUT\"; exit 9",
                9,
            ),
            ("exec true", 0),
        ] {
            let s = Scenario::new("timing_early_exit");
            let session = s.spawn(script, config(Duration::from_secs(30)));
            let result = wait_generously(&session);
            assert_eq!(result.outcome, Outcome::Exited, "{script}: {result:#?}");
            assert_coherent(&result, code, "exited");
            s.assert_no_leak();
            s.assert_accounted();
        }
    }
}

/// Idle and hard timeouts due at the very same instant: the hard timeout wins (DESIGN.md:
/// "the hard deadline wins over staleness when both are due"), every time.
#[test]
fn idle_and_hard_timeouts_due_together_report_the_hard_one() {
    for _ in 0..repeats(1) {
        let s = Scenario::new("timing_both_due");
        let limit = ms(400);
        let session = s.spawn("exec sleep 1000", config(limit).hard_timeout(Some(limit)));
        let result = wait_generously(&session);
        assert_eq!(
            result.outcome,
            Outcome::HardTimeout { after: limit },
            "{result:#?}"
        );
        assert!(result.runtime >= limit);
        s.assert_no_leak();
        s.assert_accounted();
    }
}

/// `terminate()` sent just as the child exits on its own.
#[test]
fn terminate_racing_the_childs_own_exit_gets_a_coherent_result() {
    let (mut exited, mut terminated) = (0, 0);
    for _ in 0..repeats(1) {
        for aim in [-10i64, -2, 0, 2, 10] {
            let s = Scenario::new("timing_terminate_race");
            let exit_after = ms(150);
            let session = s.spawn(
                &format!(
                    "say ready; exec perl -MTime::HiRes=sleep -e 'sleep {}; exit 4'",
                    exit_after.as_secs_f64()
                ),
                config(Duration::from_secs(30)),
            );
            s.out.wait_for("ready");
            // Deliberate timing: aim the request at the child's exit, give or take a few ms.
            thread::sleep(ms((exit_after.as_millis() as i64 + aim).max(0) as u64));
            session.terminate();
            let result = wait_generously(&session);
            assert_coherent(&result, 4, "terminated");
            if result.outcome == Outcome::Exited {
                exited += 1;
            } else {
                assert_eq!(result.outcome, Outcome::Terminated { forced: false });
                assert!(result.kill_latency.is_none(), "not a timeout");
                terminated += 1;
            }
            s.assert_no_leak();
            s.assert_accounted();
        }
    }
    eprintln!("terminate vs exit: {exited} exited, {terminated} terminated");
}

/// One keepalive call: when it started and when it returned.
#[derive(Debug, Clone, Copy)]
struct Call {
    start: Instant,
    end: Instant,
}

/// A storm of keepalives (one about every 100 µs, from another thread) that begins within a
/// few milliseconds of the instant the silent child becomes stale.
///
/// What must hold, whoever wins: the run ends with an idle timeout (the storm stops after two
/// idle timeouts), and no keepalive is ever lost. The report says how many keepalives the
/// monitor had counted when it decided (`n`). Every keepalive that *returned* before the
/// decision is counted, and the decision needs the last counted one to be an idle timeout old
/// (one may be in flight while the monitor reads the board). So either all were counted and the
/// end came at least an idle timeout after the last one, or the first uncounted keepalive
/// returned at least an idle timeout after the last one before it that surely counted (for
/// `n <= 1`: after the spawn). Both are checked from the recorded call times, lower bounds only.
#[allow(clippy::too_many_lines)] // a test or bench scenario: the 80-line rule is for the library and the command
#[test]
fn keepalives_racing_the_deadline_are_never_lost() {
    let idle = ms(300);
    let offsets: [i64; 5] = [-30, -10, 0, 10, 30];
    let (mut before, mut after) = (0, 0);
    for _ in 0..repeats(1) {
        for offset in offsets {
            let s = Scenario::new("timing_keepalive_storm");
            let spawned_at = Instant::now();
            let session = s.spawn(
                "exec sleep 1000",
                config(idle).watch_children(false).watch_files(false),
            );
            let storm_at = if offset >= 0 {
                spawned_at + idle + ms(offset as u64)
            } else {
                spawned_at + idle - ms((-offset) as u64)
            };
            let storm_for = idle * 2;
            let over = AtomicBool::new(false);
            let (calls, result, returned_at) = thread::scope(|scope| {
                let storm = scope.spawn(|| {
                    let mut calls = Vec::with_capacity(20_000);
                    let now = Instant::now();
                    if storm_at > now {
                        thread::sleep(storm_at - now);
                    }
                    let stop = Instant::now() + storm_for;
                    while Instant::now() < stop && !over.load(Ordering::Acquire) {
                        let start = Instant::now();
                        session.keepalive();
                        calls.push(Call {
                            start,
                            end: Instant::now(),
                        });
                        thread::sleep(Duration::from_micros(100));
                    }
                    calls
                });
                let result = wait_generously(&session);
                let returned_at = Instant::now();
                over.store(true, Ordering::Release);
                (storm.join().expect("the storm thread"), result, returned_at)
            });
            // Harmless after the end.
            session.keepalive();

            let Outcome::IdleTimeout(report) = &result.outcome else {
                panic!("{result:#?}");
            };
            let keepalive = report
                .get(ActivitySource::Keepalive)
                .expect("keepalive is always listed");
            assert!(keepalive.idle >= idle, "{report}");
            let n = keepalive.events as usize;
            assert!(n <= calls.len(), "{n} counted of {} sent", calls.len());
            if calls.is_empty() {
                // The run was over before the storm began: nothing raced.
                before += 1;
                s.assert_no_leak();
                s.assert_accounted();
                continue;
            }
            let surely_counted = |n: usize| {
                if n >= 2 {
                    calls[n - 2].start
                } else {
                    spawned_at
                }
            };
            if n < calls.len() {
                // Stale before keepalive #n (0-based) was counted.
                let first_uncounted = calls[n].end;
                assert!(
                    first_uncounted >= surely_counted(n) + idle,
                    "offset {offset}: keepalive {n} returned {:?} after keepalive {} started, \
                     yet was not counted by a decision that needed {idle:?} of silence \
                     ({} calls)",
                    first_uncounted - surely_counted(n),
                    n.saturating_sub(2),
                    calls.len()
                );
                before += 1;
            } else {
                assert!(
                    returned_at >= surely_counted(n) + idle,
                    "offset {offset}: ended {:?} after a counted keepalive",
                    returned_at - surely_counted(n)
                );
                after += 1;
            }
            s.assert_no_leak();
            s.assert_accounted();
        }
    }
    eprintln!("keepalive storms: {before} lost the race to the deadline, {after} won it");
}

/// A sink that holds the reader thread until released, so what the child writes meanwhile
/// stays in the pipe. It keeps what it was given, and says when it was first entered.
#[derive(Clone, Default)]
struct HeldSink {
    state: std::sync::Arc<(std::sync::Mutex<Held>, std::sync::Condvar)>,
}

/// Entered, released, and the bytes given so far.
type Held = (bool, bool, Vec<u8>);

impl HeldSink {
    fn sink(&self) -> quietus::OutputSink {
        let state = self.state.clone();
        quietus::OutputSink::callback(move |chunk| {
            let (lock, changed) = &*state;
            let mut s = lock.lock().unwrap_or_else(|p| p.into_inner());
            s.0 = true; // entered
            s.2.extend_from_slice(chunk);
            changed.notify_all();
            while !s.1 {
                s = changed.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        })
    }

    #[track_caller]
    fn wait_entered(&self) {
        let (lock, changed) = &*self.state;
        let s = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (s, timeout) = changed
            .wait_timeout_while(s, common::HANDSHAKE, |s| !s.0)
            .unwrap_or_else(|p| p.into_inner());
        assert!(!timeout.timed_out() && s.0, "the sink was never entered");
    }

    fn release(&self) {
        let (lock, changed) = &*self.state;
        lock.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        changed.notify_all();
    }

    fn bytes(&self) -> Vec<u8> {
        self.state
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .2
            .clone()
    }
}

/// Issue 11, item 7, and issue 28, item 7: the reader is held in the sink (mock clock, no
/// sleeping) while the child's output waits unread in the pipe. The output is held back by its
/// consumer: the child is not stale however long that lasts (two idle timeouts here; only a
/// hard timeout would end it), and the time adds up in `output_held_back`. Once released, the
/// waiting bytes are read (activity at that instant), and the child, silent from then on, is
/// stale one idle timeout later. (Before issue 28 the waiting bytes counted once and a reader
/// still held a second idle timeout later let the child be ended.)
#[test]
fn bytes_waiting_behind_a_held_sink_keep_the_child_alive_until_read() {
    let s = Scenario::new("timing_pipe_waiting");
    let idle = Duration::from_secs(10);
    let clock = quietus::MockClock::new();
    let held = HeldSink::default();
    let session = s
        .builder(
            "say first; while [ ! -e \"$SW_TMP/go\" ]; do sleep 0.01; done; \
             say second; : > \"$SW_TMP/written\"; exec sleep 1000",
            config(idle)
                .watch_files(false)
                .watch_children(false)
                .events(quietus::EventConfig::builder().idle_warning(None))
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(300))),
        )
        .clock(clock.clone())
        .stdout(held.sink())
        .spawn()
        .expect("the scenario's child can be spawned");
    // The reader read "first" and is now held in the sink; "second" is written to the pipe
    // behind it and stays there.
    held.wait_entered();
    std::fs::write(s.scratch("go"), b"").expect("the go file");
    fault_support::wait_for_file(&s.scratch("written"), common::HANDSHAKE);
    assert!(
        clock.wait_for_timers(1, common::HANDSHAKE),
        "the monitor never parked"
    );
    // A blocked write is one in flight for 50 ms of real time (a precondition, not a timing
    // assertion).
    std::thread::sleep(ms(60));
    clock.advance(idle);
    // Not stale: the waiting bytes counted, and the monitor parked again, still watching (it
    // moves to the grace before it arms any timer of a ladder).
    assert!(
        clock.wait_for_timers(1, common::HANDSHAKE),
        "the monitor never parked again"
    );
    assert_eq!(session.state(), quietus::SessionState::Running);
    assert!(session.try_wait().is_none());
    // Still held a whole idle timeout later: still not stale.
    clock.advance(idle);
    assert!(
        clock.wait_for_timers(1, common::HANDSHAKE),
        "the monitor never parked again"
    );
    assert_eq!(session.state(), quietus::SessionState::Running);
    assert!(session.output_held_back() >= idle * 2);
    held.release();
    // The reader reads what waited (stamped at 2 idle timeouts), then the child is silent.
    assert!(common::poll_until(common::HANDSHAKE, || held.bytes() == b"first\nsecond\n"));
    assert!(
        clock.wait_for_timers(1, common::HANDSHAKE),
        "the monitor never parked after the release"
    );
    clock.advance(idle);
    assert!(
        poll_until_state_left_running(&session),
        "silent for an idle timeout after its output was read"
    );
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{result:#?}");
    };
    assert_eq!(result.runtime, idle * 3, "{result:#?}");
    let output = report.get(ActivitySource::Output).expect("output counts");
    assert!(output.events >= 2, "the two reads: {report}");
    assert_eq!(held.bytes(), b"first\nsecond\n");
    assert_eq!(
        fault_support::fingerprint(&held.bytes()),
        fault_support::file_fingerprint(&s.out_ledger())
    );
    s.assert_no_leak();
}

fn poll_until_state_left_running(session: &quietus::Session) -> bool {
    common::poll_until(common::HANDSHAKE, || {
        session.state() != quietus::SessionState::Running
    })
}
