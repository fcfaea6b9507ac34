//! The result, built one way ([`build`]) from what every session has ([`Facts`]) and what
//! its run found ([`Closing`]): by the monitor at its end, and by the [`DoneGuard`] when the
//! monitor thread failed ([`Closing::failed`]).

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;

use super::phase::{End, LadderRecord};
use crate::contract::{SessionState, Shared};
use crate::outcome::LogFile;
use crate::outcome::{
    CompletionSeen, MonitorResult, Observation, Outcome, SourceActivity, TreeHold, UnwatchedFolder,
};
use crate::pid::Pid;
use crate::signal::Signal;

use super::super::port::Memory;

/// What the result says of every session, however its run went.
#[derive(Clone)]
pub(in crate::monitor) struct Facts {
    /// The leader's pid.
    pub(in crate::monitor) pid: Pid,
    /// How the tree is held.
    pub(in crate::monitor) containment: TreeHold,
}

/// What the run found, for the result.
pub(in crate::monitor) struct Closing {
    pub(in crate::monitor) end: End,
    pub(in crate::monitor) status: Option<ExitStatus>,
    pub(in crate::monitor) runtime: Duration,
    pub(in crate::monitor) activity: Vec<SourceActivity>,
    pub(in crate::monitor) logs: Vec<LogFile>,
    pub(in crate::monitor) events_dropped: u64,
    pub(in crate::monitor) output_complete: bool,
    pub(in crate::monitor) unwatched: Vec<UnwatchedFolder>,
    pub(in crate::monitor) completion: Option<CompletionSeen>,
    pub(in crate::monitor) memory: Memory,
    pub(in crate::monitor) network_unavailable: Option<crate::outcome::NetworkUnavailable>,
    pub(in crate::monitor) children_unavailable: Option<crate::outcome::ProcUnavailable>,
    /// Observe mode (issue 43): when and why the run would have been ended.
    pub(in crate::monitor) observations: Vec<Observation>,
    pub(in crate::monitor) observations_dropped: u64,
}

impl Closing {
    /// The monitor thread failed: its tree was SIGKILLed, and nothing proves it is gone.
    pub(in crate::monitor) fn failed() -> Self {
        Closing {
            end: End {
                outcome: Outcome::Terminated { forced: true },
                ladder: LadderRecord {
                    signals_sent: vec![Signal::KILL],
                    escalated: true,
                    unproven: true,
                    ..LadderRecord::default()
                },
            },
            status: None,
            runtime: Duration::ZERO,
            activity: Vec::new(),
            logs: Vec::new(),
            events_dropped: 0,
            output_complete: false,
            unwatched: Vec::new(),
            completion: None,
            memory: Memory::default(),
            network_unavailable: None,
            children_unavailable: None,
            observations: Vec::new(),
            observations_dropped: 0,
        }
    }
}

/// The result of the session `facts` describes, its run `closing` (its isolated home is the
/// `shared` one).
pub(in crate::monitor) fn build(facts: &Facts, shared: &Shared, closing: Closing) -> MonitorResult {
    let Closing { end, .. } = &closing;
    let containment = &facts.containment;
    MonitorResult {
        outcome: end.outcome.clone(),
        status: closing.status,
        pid: facts.pid,
        signals_sent: end.ladder.signals_sent.clone(),
        escalated: end.ladder.escalated,
        leftovers_killed: end.ladder.leftovers_killed,
        leftovers: end.ladder.leftovers.clone(),
        termination_unproven: end.ladder.unproven,
        runtime: closing.runtime,
        ladder_time: end.ladder.time,
        kill_latency: end.ladder.kill_latency,
        activity: closing.activity,
        logs: closing.logs,
        events_dropped: closing.events_dropped,
        output_complete: closing.output_complete,
        home: shared.home.clone(),
        unwatched: closing.unwatched,
        completion: closing.completion,
        containment: containment.mode(),
        cgroup: containment.cgroup(),
        why_not_cgroup: containment.why_not_cgroup(),
        supervisor_death: containment.supervisor_death().clone(),
        memory_peak: closing.memory.peak,
        oom_kills: closing.memory.oom_kills,
        network_unavailable: closing.network_unavailable,
        children_unavailable: closing.children_unavailable,
        observations: closing.observations,
        observations_dropped: closing.observations_dropped,
    }
}

/// Publishes the result and closes the done channel; if the monitor thread unwinds before it
/// could, it still ends the tree (`kill_tree`), marks the session ended and publishes an
/// "unproven" result ([`Closing::failed`]), so no waiter hangs.
pub(in crate::monitor) struct DoneGuard {
    shared: Arc<Shared>,
    done: Option<Sender<()>>,
    facts: Facts,
    /// Ends the tree when the monitor failed: SIGKILL to its group (a fake in the tests).
    kill_tree: Option<Box<dyn FnOnce() + Send>>,
}

impl DoneGuard {
    /// The guard of the session `facts` describes, closing `done` once its result is out.
    pub(in crate::monitor) fn new(
        shared: Arc<Shared>,
        done: Sender<()>,
        facts: Facts,
        kill_tree: Box<dyn FnOnce() + Send>,
    ) -> Self {
        DoneGuard {
            shared,
            done: Some(done),
            facts,
            kill_tree: Some(kill_tree),
        }
    }

    /// The session's facts, for the result.
    pub(in crate::monitor) fn facts(&self) -> &Facts {
        &self.facts
    }

    /// Publishes `result` and closes the done channel.
    pub(in crate::monitor) fn publish(mut self, result: MonitorResult) {
        let _ = self.shared.result.set(result);
        self.done.take();
    }

    /// The monitor never ran (it was never handed its child): nothing to publish.
    pub(in crate::monitor) fn disarm(mut self) {
        self.done.take();
    }
}

impl Drop for DoneGuard {
    fn drop(&mut self) {
        if self.done.is_some() && self.shared.result.get().is_none() {
            log::error!(
                "quietus monitor for pid {} failed; killing its group",
                self.facts.pid
            );
            if let Some(kill_tree) = self.kill_tree.take() {
                kill_tree();
            }
            // Ended before its result is out, as on the normal way (the drain's start).
            self.shared.set_state(SessionState::Ended);
            let result = build(&self.facts, &self.shared, Closing::failed());
            let _ = self.shared.result.set(result);
        }
    }
}
