//! The monitor loop against a fake port: no process, no thread, no sleeping. The session's
//! clock is a `MockClock` the fake's sleep moves to each wake-up's deadline; its process table
//! is scripted (when the leader exits, which signals end it, who it leaves behind), and it
//! records what the monitor asked of it (signals, reaping, the session state at each sleep).

use std::sync::Arc;
use std::time::Duration;

use super::super::ladder::Ladder;
use super::super::tap::{StreamSlot, Tap};
use super::phase::{Drain, Move, Phase};
use crate::activity::ActivitySource;
use crate::clock::{Clock, MockClock};
use crate::config::KillStep;
use crate::contract::{Control, SessionState};
use crate::diagnosis::StallKind;
use crate::events::Event;
use crate::outcome::{CompletionSeen, Outcome};
use crate::process::sys::{SIGCONT, SIGKILL, SIGTERM};
use crate::signal::Signal;
use crate::stream::Stream;
use rig::*;

mod rig;

#[test]
fn the_transition_function_moves_only_along_the_phases() {
    let clock = MockClock::new();
    let emitter = Arc::new(crate::events::Emitter::new(8));
    let ladder = || {
        let clock = Clock::from(&clock);
        Box::new(Ladder::new(1, LEADER, secs(3), clock, emitter.clone()))
    };
    let drain = Drain::new(clock.now(), secs(1));
    let outcome = Outcome::HardTimeout { after: secs(9) };
    let mut phase = Phase::Watching;
    assert_eq!(phase.state(), SessionState::Running);
    assert!(phase.end().is_none());
    assert!(
        !phase.next(Move::Drained),
        "no drain before the tree is gone"
    );
    assert_eq!(phase.name(), "watching");
    let to_ladder = Move::Ladder {
        outcome: outcome.clone(),
        ladder: ladder(),
    };
    assert!(phase.next(to_ladder), "watching -> ending");
    assert_eq!(
        (phase.name(), phase.state()),
        ("ending", SessionState::Grace)
    );
    // The first reason wins: an ending phase takes no second ladder, nor skips its end.
    let second = Move::Ladder {
        outcome: Outcome::Exited,
        ladder: ladder(),
    };
    assert!(!phase.next(second));
    assert!(!phase.next(Move::Drained));
    assert_eq!(phase.name(), "ending");
    assert!(phase.next(Move::TreeGone { drain }), "ending -> draining");
    assert_eq!(
        (phase.name(), phase.state()),
        ("draining", SessionState::Ended)
    );
    assert_eq!(phase.end().map(|e| &e.outcome), Some(&outcome));
    assert!(!phase.next(Move::TreeGone { drain }), "the tree goes once");
    assert!(phase.next(Move::Drained), "draining -> done");
    assert_eq!((phase.name(), phase.state()), ("done", SessionState::Ended));
    assert_eq!(phase.end().map(|e| &e.outcome), Some(&outcome));
    assert!(!phase.next(Move::Drained), "done stays done");
    let late = Move::Ladder {
        outcome: Outcome::Exited,
        ladder: ladder(),
    };
    assert!(!phase.next(late));
    assert_eq!(phase.end().map(|e| &e.outcome), Some(&outcome));
    // Watching: the leader exits leaving nobody (the run ends as exited, no ladder).
    let mut phase = Phase::Watching;
    assert!(phase.next(Move::TreeGone { drain }), "watching -> draining");
    let end = phase.end().expect("ended");
    assert_eq!(end.outcome, Outcome::Exited);
    assert!(end.ladder.signals_sent.is_empty());
}

#[test]
fn the_public_state_moves_with_the_phase_and_stays_on_a_refused_move() {
    let mut rig = new_rig(quiet(10), World::default());
    assert_eq!(rig.shared.state(), SessionState::Running);
    rig.monitor.handle(Control::Terminate);
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert_eq!(rig.shared.state(), SessionState::Grace);
    // A refused move (a second drain-less end) changes neither.
    assert!(!rig.monitor.transition(Move::Drained));
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert_eq!(rig.shared.state(), SessionState::Grace);
    let drain = Drain::new(rig.clock.now(), secs(1));
    assert!(rig.monitor.transition(Move::TreeGone { drain }));
    assert_eq!(rig.shared.state(), SessionState::Ended);
    assert!(rig.monitor.transition(Move::Drained));
    assert_eq!(rig.monitor.phase.name(), "done");
    assert_eq!(rig.shared.state(), SessionState::Ended);
    assert!(rig.step().is_none(), "a run that is done takes no step");
}

#[test]
fn a_silent_leader_is_ended_exactly_at_its_idle_timeout() {
    let rig = new_rig(quiet(10), polite());
    let origin = rig.origin();
    let ran = rig.run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(ref report) if report.diagnosis.is_some()),
        "{:?}",
        ran.result.outcome
    );
    assert_eq!(ran.world.wakes[0].at, origin + secs(10), "first wake-up");
    assert_eq!(ran.ended_at, secs(10));
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
    assert_eq!(ran.signals(), [(Signal::TERM, 0)]);
    assert_eq!(
        ran.world.sent,
        [Sent::Group(LEADER, SIGTERM), Sent::Group(LEADER, SIGCONT)]
    );
    assert!(!ran.result.escalated);
    assert_eq!(ran.result.kill_latency, Some(Duration::ZERO));
    assert_eq!(ran.result.runtime, secs(10));
    assert_eq!(
        ran.states(),
        [SessionState::Running, SessionState::Grace],
        "grace while the ladder waits"
    );
    assert_eq!(ran.state, SessionState::Ended);
    assert_eq!(ran.world.reaped, [true], "reaped once, after the exit");
    assert!(ran.result.status.is_some(), "its status");
    assert!(ran.events.iter().any(|e| matches!(e, Event::Diagnosis(_))));
    assert!(matches!(ran.events.last(), Some(Event::Closed)));
    assert!(!ran.killed, "the failure path stays unused");
}

#[test]
fn keepalives_and_a_new_idle_timeout_move_the_stale_decision() {
    let mut rig = new_rig(quiet(10), polite());
    let origin = rig.origin();
    assert_eq!(rig.step().map(|w| w.at), Some(origin + secs(10)));
    rig.at(secs(8));
    rig.monitor.core.board.stamp(&ActivitySource::Keepalive);
    assert_eq!(rig.step().map(|w| w.at), Some(origin + secs(18)));
    rig.shared.set_idle_timeout(secs(30));
    rig.control.send(Control::IdleTimeoutChanged).expect("open");
    assert_eq!(rig.step().map(|w| w.at), Some(origin + secs(38)));
    rig.at(secs(37));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "watching", "not before its time");
    rig.at(secs(38));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert_eq!(rig.shared.state(), SessionState::Grace);
}

#[test]
fn the_hard_timeout_ends_a_busy_leader() {
    let config = quiet(10).watch_children(true).hard_timeout(Some(secs(25)));
    let world = World {
        observed: true,
        ..polite()
    };
    let rig = new_rig(config, world);
    rig.world.borrow_mut().busy_until = Some(rig.origin() + secs(3600));
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::HardTimeout { after: secs(25) });
    assert_eq!(ran.ended_at, secs(25));
    assert!(ran.world.samples > 2, "sampled while it worked");
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
}

#[test]
fn a_leader_that_stops_working_is_stale_one_timeout_after_its_last_work() {
    let config = quiet(10).watch_children(true);
    let rig = new_rig(config, polite());
    rig.world.borrow_mut().observed = true;
    rig.world.borrow_mut().busy_until = Some(rig.origin() + secs(7));
    let ran = rig.run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        ran.result.outcome
    );
    // Its last sample with work is the last check before 7 s; stale a timeout later.
    assert!(
        ran.ended_at > secs(15) && ran.ended_at <= secs(17),
        "{:?}",
        ran.ended_at
    );
}

#[test]
fn a_tree_waiting_on_input_is_ended_after_the_input_wait_timeout() {
    let config = quiet(600).input_wait_timeout(Some(secs(2)));
    let world = World {
        diagnosis: Some(diagnosis(StallKind::AwaitingInput)),
        ..polite()
    };
    let ran = new_rig(config, world).run();
    let Outcome::InputWait(wait) = &ran.result.outcome else {
        panic!("{:?}", ran.result.outcome);
    };
    assert_eq!(wait.pid, LEADER);
    assert!(wait.waited >= secs(2), "{:?}", wait.waited);
    // Looks start after 1 s of quiet; the end comes at most 250 ms past the timeout.
    assert!(
        ran.ended_at >= secs(3) && ran.ended_at <= Duration::from_millis(3250),
        "{:?}",
        ran.ended_at
    );
    assert!(ran.events.iter().any(|e| matches!(e, Event::InputWait(_))));
    assert_eq!(ran.result.kill_latency, None, "no deadline of its own");
}

#[test]
fn a_tree_that_is_only_sleeping_is_no_input_wait() {
    let config = quiet(20).input_wait_timeout(Some(secs(2)));
    let ran = new_rig(config, polite()).run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        ran.result.outcome
    );
    assert_eq!(ran.ended_at, secs(20));
}

fn seen() -> CompletionSeen {
    CompletionSeen::Pattern {
        stream: Stream::Stdout,
        line: "DONE".to_owned(),
        after: secs(1),
    }
}

#[test]
fn completion_ends_a_leader_that_lingers_past_its_linger() {
    let config =
        quiet(600).completion(crate::completion::CompletionConfig::builder().linger(secs(4)));
    let rig = new_rig(config, polite());
    rig.control.send(Control::Completed(seen())).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Completed(seen()));
    assert_eq!(ran.result.completion, Some(seen()));
    // Seen 1 s after the start: the linger runs from then.
    assert_eq!(ran.ended_at, secs(5));
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
    assert!(
        ran.events
            .iter()
            .any(|e| matches!(e, Event::Completed { .. }))
    );
}

#[test]
fn completion_followed_by_the_leaders_exit_is_an_exit() {
    let config =
        quiet(600).completion(crate::completion::CompletionConfig::builder().linger(secs(4)));
    let rig = new_rig(config, polite());
    rig.world.borrow_mut().exit_at = Some(rig.origin() + secs(2));
    rig.control.send(Control::Completed(seen())).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.completion, Some(seen()), "told in the result");
    assert!(ran.result.signals_sent.is_empty());
    assert_eq!(ran.ended_at, secs(2));
}

#[test]
fn a_leader_exiting_alone_ends_the_run_as_exited_with_its_status() {
    let rig = new_rig(quiet(600), World::default());
    {
        let mut world = rig.world.borrow_mut();
        world.exit_at = Some(rig.origin() + secs(5));
        world.code = 3;
    }
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.exit_code(), 3);
    assert!(ran.result.signals_sent.is_empty() && ran.world.sent.is_empty());
    assert_eq!(ran.result.leftovers_killed, 0);
    assert_eq!(ran.ended_at, secs(5));
    assert_eq!(ran.states(), [SessionState::Running], "no grace");
    assert_eq!(ran.state, SessionState::Ended);
    assert_eq!(ran.world.reaped, [true]);
    assert_eq!(ran.world.guardian_released, 1);
    assert_eq!(ran.world.cgroup_let_go, 1);
    assert_eq!(ran.world.session_over, 1);
    assert_eq!(ran.world.readers_left_started, 1);
    assert_eq!(
        ran.result.memory_peak,
        Some(4096),
        "read before the removal"
    );
    let exited: Vec<_> = ran
        .events
        .iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect();
    assert_eq!(exited.len(), 1, "Exited exactly once");
}

#[test]
fn descendants_lingering_after_the_leaders_exit_are_ended() {
    // They ignore SIGTERM: the ladder waits its grace, then SIGKILLs them.
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let rig = new_rig(quiet(600), world);
    {
        let mut world = rig.world.borrow_mut();
        world.exit_at = Some(rig.origin() + secs(5));
        world.members = vec![pid(5001), pid(5002)];
    }
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.leftovers_killed, 2);
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert_eq!(ran.states(), [SessionState::Running, SessionState::Grace]);
    assert_eq!(
        ran.ended_at,
        secs(7),
        "exit at 5 s, SIGKILL after the 2 s grace"
    );
    assert_eq!(ran.world.reaped, [true], "reaped after the ladder");
}

#[test]
fn descendants_lingering_are_left_alone_when_the_caller_keeps_them() {
    let rig = new_rig(quiet(600).keep_leftovers(true), polite());
    {
        let mut world = rig.world.borrow_mut();
        world.exit_at = Some(rig.origin() + secs(5));
        world.members = vec![pid(5001), pid(5002)];
    }
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.leftovers_killed, 0);
    assert!(ran.world.sent.is_empty());
}

#[test]
fn terminate_runs_the_configured_ladder_and_terminate_with_its_own() {
    let rig = new_rig(quiet(600), polite());
    rig.control.send(Control::Terminate).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
    assert_eq!(ran.ended_at, Duration::ZERO);
    assert_eq!(ran.result.kill_latency, None);

    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let rig = new_rig(quiet(600), world);
    let steps = vec![
        KillStep {
            signal: Signal::INT,
            grace: secs(1),
        },
        KillStep {
            signal: Signal::KILL,
            grace: Duration::ZERO,
        },
    ];
    rig.control
        .send(Control::TerminateWith(steps))
        .expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(ran.result.signals_sent, [Signal::INT, Signal::KILL]);
    assert!(ran.result.escalated);
    assert_eq!(ran.ended_at, secs(1), "SIGKILL after the INT's grace");
}

#[test]
fn kill_ends_at_once_and_skips_a_ladder_under_way() {
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let rig = new_rig(quiet(600), world);
    rig.control.send(Control::Kill).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: true });
    assert_eq!(ran.result.signals_sent, [Signal::KILL]);
    assert_eq!(ran.ended_at, Duration::ZERO);

    // A leader that ignores TERM: the ladder waits for its grace, until a kill skips it.
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let mut rig = new_rig(quiet(600), world);
    rig.control.send(Control::Terminate).expect("open");
    let wake = rig.step().expect("the grace");
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert!(wake.at >= rig.origin() + secs(2), "TERM's grace: {wake:?}");
    rig.control.send(Control::Kill).expect("open");
    rig.step();
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert!(ran.result.escalated);
    assert_eq!(ran.ended_at, Duration::ZERO, "no grace waited");
}

#[test]
fn a_signal_is_relayed_to_the_group_only_while_the_leader_runs() {
    let mut rig = new_rig(quiet(600), World::default());
    rig.control
        .send(Control::Signal(Signal::INT))
        .expect("open");
    rig.step();
    assert_eq!(
        rig.world.borrow().sent,
        [Sent::Group(LEADER, Signal::INT.number())]
    );
    assert_eq!(rig.monitor.phase.name(), "watching", "no ladder");
    assert_eq!(rig.shared.state(), SessionState::Running);
    rig.monitor.handle(Control::ChildExited);
    rig.control
        .send(Control::Signal(Signal::INT))
        .expect("open");
    rig.step();
    assert_eq!(rig.world.borrow().sent.len(), 1, "not after its exit");
}

#[test]
fn requests_during_the_ladder_keep_the_first_reason() {
    // A terminate and a kill arriving once the run is stale: the kill skips the grace, the
    // outcome stays the idle timeout.
    let rig = rig_after_stale();
    rig.control.send(Control::Terminate).expect("open");
    rig.control.send(Control::Kill).expect("open");
    let ran = rig.run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        ran.result.outcome
    );
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert_eq!(ran.ended_at, secs(10), "no grace waited");
}

/// A rig whose leader ignores TERM, stepped to its stale decision at 10 s.
fn rig_after_stale() -> Rig {
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let mut rig = new_rig(quiet(10), world);
    rig.step();
    rig.at(secs(10));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "ending");
    rig
}

#[test]
fn a_tree_that_outlives_its_sigkill_is_reported_unproven() {
    let config = quiet(10).kill_confirm_timeout(secs(3));
    let ran = new_rig(config, World::default()).run();
    assert!(matches!(ran.result.outcome, Outcome::IdleTimeout(_)));
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert!(ran.result.termination_unproven);
    // TERM at 10 s, KILL after its 2 s grace, then the 3 s confirmation bound.
    assert_eq!(ran.ended_at, secs(15));
    assert_eq!(ran.world.reaped, [false], "only looked at: it never exited");
}

#[test]
fn the_idle_warning_comes_once_per_idle_spell() {
    let events = crate::config::EventConfig::builder()
        .idle_warning(Some(0.5))
        .build()
        .unwrap();
    let ran = new_rig(quiet(10).events(events), polite()).run();
    let warnings: Vec<_> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::IdleWarning { left } => Some(*left),
            _ => None,
        })
        .collect();
    assert_eq!(warnings, [secs(5)]);
    assert!(matches!(ran.result.outcome, Outcome::IdleTimeout(_)));
}

/// A monitor woken only after the idle deadline (its thread starved on a loaded machine, seen
/// in `capture_events::idle_warning_then_the_ladder_signals_in_order`): the warning still
/// comes, before the first signal, with no time left.
#[test]
fn a_monitor_woken_after_the_deadline_still_warns_before_the_ladder() {
    let events = crate::config::EventConfig::builder()
        .idle_warning(Some(0.5))
        .build()
        .unwrap();
    let mut rig = new_rig(quiet(10).events(events), polite());
    rig.step();
    rig.at(secs(12));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "ending");
    let seen: Vec<Event> = rig.events.try_iter().collect();
    let warning = seen
        .iter()
        .position(|e| matches!(e, Event::IdleWarning { left } if left.is_zero()));
    let term = seen.iter().position(|e| {
        matches!(
            e,
            Event::Signal {
                signal: Signal::TERM,
                ..
            }
        )
    });
    assert!(
        warning.is_some() && term.is_some() && warning < term,
        "{seen:#?}"
    );
    let ran = rig.run();
    assert!(
        !ran.events
            .iter()
            .any(|e| matches!(e, Event::IdleWarning { .. })),
        "once per idle spell: {:#?}",
        ran.events
    );
}

#[test]
fn a_failing_monitor_still_publishes_a_result_and_ends_the_session() {
    let rig = new_rig(quiet(10), polite());
    rig.world.borrow_mut().fail_on_sleep = true;
    let Rig {
        monitor,
        shared,
        done,
        guard,
        killed,
        ..
    } = rig;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| monitor.run(guard)));
    assert!(unwound.is_err(), "the port failed");
    assert!(done.recv().is_err(), "the done channel is closed");
    assert!(
        killed.load(std::sync::atomic::Ordering::SeqCst),
        "its tree was killed"
    );
    assert_eq!(shared.state(), SessionState::Ended);
    let result = shared.result.get().expect("a result is published");
    assert_eq!(result.outcome, Outcome::Terminated { forced: true });
    assert!(result.termination_unproven);
    assert_eq!(result.signals_sent, [Signal::KILL]);
    assert_eq!(result.pid, LEADER);
    assert!(!result.output_complete);
}

#[test]
fn a_monitor_never_handed_its_child_publishes_nothing() {
    let rig = new_rig(quiet(10), polite());
    let Rig {
        shared,
        done,
        guard,
        killed,
        ..
    } = rig;
    guard.disarm();
    assert!(done.recv().is_err());
    assert!(shared.result.get().is_none());
    assert!(!killed.load(std::sync::atomic::Ordering::SeqCst));
}

/// Gives the rig a stdout stream whose reader has not reached its end-of-file.
fn with_stdout(rig: &mut Rig) {
    let recorder = crate::capture::Recorder::new(
        Stream::Stdout,
        crate::capture::HeadTail::new(1024),
        &rig.monitor.core.config.events,
    );
    let slot = StreamSlot {
        recorder: Arc::new(crate::sync::Mutex::new(recorder)),
        spill: None,
        peek: None,
        done: false,
    };
    rig.monitor.tap = Tap::new([Some(slot), None]);
}

#[test]
fn the_drain_waits_for_the_readers_end_of_file() {
    let config = quiet(600).drain_quiet(secs(10)).drain_cap(secs(30));
    let mut rig = new_rig(config, World::default());
    with_stdout(&mut rig);
    rig.step();
    rig.at(secs(5));
    rig.world.borrow_mut().exited = true;
    rig.monitor.handle(Control::ChildExited);
    let wake = rig.step().expect("the drain waits");
    assert_eq!(rig.monitor.phase.name(), "draining");
    assert_eq!(rig.shared.state(), SessionState::Ended);
    assert_eq!(wake.at, rig.origin() + secs(15), "the quiet rule's instant");
    rig.control
        .send(Control::ReaderDone(Stream::Stdout))
        .expect("open");
    assert!(rig.step().is_none(), "done at the reader's end-of-file");
    assert_eq!(rig.monitor.phase.name(), "done");
    let ran = rig.run();
    assert!(ran.result.output_complete);
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.ended_at, secs(5));
}

#[test]
fn a_drain_without_end_of_file_ends_at_the_quiet_rule_with_the_output_incomplete() {
    let config = quiet(600).drain_quiet(secs(1)).drain_cap(secs(30));
    let mut rig = new_rig(config, World::default());
    with_stdout(&mut rig);
    rig.world.borrow_mut().exit_at = Some(rig.origin() + secs(5));
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert!(!ran.result.output_complete);
    assert_eq!(ran.ended_at, secs(6), "exit at 5 s, quiet 1 s later");
}

#[test]
fn a_monitor_failing_during_its_ladder_ends_the_session_too() {
    let mut rig = new_rig(quiet(600), World::default());
    rig.control.send(Control::Terminate).expect("open");
    rig.step();
    assert_eq!(rig.shared.state(), SessionState::Grace);
    rig.world.borrow_mut().fail_on_sleep = true;
    let Rig {
        monitor,
        shared,
        done,
        guard,
        killed,
        ..
    } = rig;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| monitor.run(guard)));
    assert!(unwound.is_err(), "the port failed");
    assert!(done.recv().is_err(), "the done channel is closed");
    assert!(killed.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(shared.state(), SessionState::Ended, "not left in grace");
    let result = shared.result.get().expect("a result is published");
    assert_eq!(result.outcome, Outcome::Terminated { forced: true });
    assert!(result.termination_unproven);
}
