//! The monitor loop: sleeps until the next instant its decision can change (or a control
//! message), then watches (asks the verdict), goes stale or reaches the hard deadline, runs
//! the ladder, and drains the output; publishes the result at the end.
//!
//! A state machine: its [`Phase`] carries each phase's data (the ladder while ending, the
//! drain and how the run ended after), moved by one transition function ([`Phase::next`])
//! together with the session's public state. Everything it asks of the operating system goes
//! through its [`Port`](super::port::Port), so the loop is unit-tested with a fake one on a
//! `MockClock` (`run/tests.rs`).
//!
//! - `phase`: the phases, their moves, what the run ended with;
//! - `watch`: watching (the verdict, the stale decision, the idle warning, the input wait);
//! - `end`: ending, draining, and the run's end (the result published);
//! - `result`: the result, built one way, and the guard that publishes one when the thread
//!   fails.

mod end;
mod phase;
mod result;
#[cfg(test)]
mod tests;
mod watch;

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::core::Core;
use super::ladder::{Ladder, signal_leader};
use super::observe::Observer;
use super::port::{Memory, Port};
use super::rules::Rules;
use super::tap::{StreamSlot, Tap, stream_index};
use super::wait::Wake;
use crate::activity::ActivityBoard;
use crate::clock::Clock;
use crate::completion::FileWatch;
use crate::config::{KillStep, MonitorConfig};
use crate::contract::{Control, Shared};
use crate::events::Event;
use crate::input_wait::InputWaitRule;
use crate::outcome::{CompletionSeen, HumanDuration, Outcome, UnwatchedFolder};
use crate::pid::Pid;
use crate::signal::Signal;
use crate::sources::files::FileActivityTracker;
use crate::sources::output::SinkError;

use phase::Move;
pub(super) use phase::Phase;
pub(super) use result::{DoneGuard, Facts};

/// When the monitor wakes, and what it knows about time while watching.
pub(super) struct Timing {
    pub(super) hard_deadline: Option<Instant>,
    /// Descendant CPU is sampled every `interval`.
    pub(super) interval: Duration,
    pub(super) next_sample: Instant,
    pub(super) sampled_at: Option<Instant>,
    /// The last activity instant an `IdleWarning` was sent for (once per idle spell).
    pub(super) warned_for: Option<Instant>,
    /// When the probes were last asked at a stale decision.
    pub(super) probed_at: Option<Instant>,
}

impl Timing {
    pub(super) fn new(config: &MonitorConfig, clock: &Clock, board: &ActivityBoard) -> Self {
        let interval = config.effective_check_interval();
        let next_sample = clock.now() + interval;
        Self {
            hard_deadline: config.hard_timeout.map(|d| board.origin() + d),
            interval,
            next_sample,
            sampled_at: None,
            warned_for: None,
            probed_at: None,
        }
    }
}

/// The leader, as the monitor knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeaderState {
    /// It runs (as far as the monitor knows).
    Running,
    /// It exited; not reaped until the ladder is done (its pid stays its own).
    Exited,
    /// Reaped: its status, when it could be had.
    Reaped(Option<ExitStatus>),
}

impl LeaderState {
    /// Whether it has exited (reaped or not).
    pub(super) fn exited(self) -> bool {
        !matches!(self, LeaderState::Running)
    }

    /// Its status, once reaped.
    pub(super) fn status(self) -> Option<ExitStatus> {
        match self {
            LeaderState::Reaped(status) => status,
            LeaderState::Running | LeaderState::Exited => None,
        }
    }
}

/// The file tracker, as the run goes.
pub(super) enum Files {
    /// The files source is off.
    Off,
    /// Watching while the program runs.
    Watching(Box<FileActivityTracker>),
    /// Let go of when the drain started: what it could not watch, as it stood then.
    LetGo(Vec<UnwatchedFolder>),
}

impl Files {
    /// What the tracker could not watch.
    fn unwatched(&self) -> Vec<UnwatchedFolder> {
        match self {
            Files::Off => Vec::new(),
            Files::Watching(files) => files.unwatched(),
            Files::LetGo(unwatched) => unwatched.clone(),
        }
    }
}

/// The monitor thread's state: the session's parts, the rules, the phase, and the port to
/// the operating system.
pub(super) struct Monitor<P: Port> {
    /// The session's id, configuration, clock, board and emitter.
    pub(super) core: Core,
    /// The leader (its process group's id too).
    pub(super) pid: Pid,
    /// The session's messages: controls, the leader's exit, the readers' news.
    pub(super) control: Receiver<Control>,
    /// What the session handle and the monitor share.
    pub(super) shared: Arc<Shared>,
    /// Deadlines, sampling, the idle warning, the wake-up timer.
    pub(super) timing: Timing,
    /// The output streams: held-back events, peeking at the pipes, the logs.
    pub(super) tap: Tap,
    /// Completion, solo caps, probes.
    pub(super) rules: Rules,
    /// The input-wait rule (on with [`MonitorConfig::input_wait_timeout`]).
    pub(super) input_wait: Option<InputWaitRule>,
    /// The file tracker while the program runs.
    pub(super) files: Files,
    pub(super) leader: LeaderState,
    /// The leader had exited before the threads started, leaving no descendant (adopting
    /// orphans): nothing to look for after it.
    pub(super) tree_gone: bool,
    /// The memory figures of the session's cgroup, read before it is removed.
    pub(super) memory: Memory,
    /// Why the network source is on but cannot observe anything.
    pub(super) network_unavailable: Option<crate::outcome::NetworkUnavailable>,
    pub(super) children_unavailable: Option<crate::outcome::ProcUnavailable>,
    pub(super) phase: Phase,
    /// Observe mode (issue 43): the observations, and how quiet starts over after one.
    pub(super) observer: Observer,
    /// The operating system: sleep, readers, leader, observers, cgroup, guardian.
    pub(super) port: P,
}

/// What a phase's method tells [`Monitor::step`]: sleep until this wake-up, or look again now
/// (the phase changed, or one more look is due).
type Next = std::ops::ControlFlow<Wake>;

impl<P: Port> Monitor<P> {
    /// The monitor of leader `pid` on `port`, watching, with no stream, no file tracker and no
    /// completion file yet: the launcher gives it what it opened and armed
    /// ([`Monitor::with_streams`], [`Monitor::with_watches`]); a test drives it as it is.
    pub(super) fn new(
        core: Core,
        pid: Pid,
        shared: Arc<Shared>,
        control: Receiver<Control>,
        port: P,
    ) -> Self {
        let config = &core.config;
        Monitor {
            observer: Observer::new(config.observe), // observe mode (issue 43)
            input_wait: InputWaitRule::new(config.input_wait_notice, config.input_wait_timeout),
            rules: Rules::new(core.id, config, None, core.clock.now()),
            timing: Timing::new(config, &core.clock, &core.board),
            tap: Tap::new([None, None]),
            files: Files::Off,
            leader: LeaderState::Running,
            tree_gone: false,
            memory: Memory::default(),
            network_unavailable: None,
            children_unavailable: None,
            phase: Phase::Watching,
            core,
            pid,
            control,
            shared,
            port,
        }
    }

    /// The output streams the monitor looks after, one slot per stream.
    pub(super) fn with_streams(mut self, slots: [Option<StreamSlot>; 2]) -> Self {
        self.tap = Tap::new(slots);
        self
    }

    /// What was armed before the spawn: the file tracker, the completion files as they were.
    pub(super) fn with_watches(
        mut self,
        files: Option<FileActivityTracker>,
        completion: Option<FileWatch>,
    ) -> Self {
        self.files = files.map_or(Files::Off, |files| Files::Watching(Box::new(files)));
        self.rules.watch_completion_files(completion);
        self
    }

    /// Runs the session to its end, then publishes its result through `done`.
    pub(super) fn run(mut self, done: DoneGuard) {
        self.baseline();
        let control = self.control.clone();
        loop {
            // Whatever was sent before this wake-up is taken into account before deciding.
            while let Ok(msg) = control.try_recv() {
                self.handle(msg);
            }
            let now = self.core.clock.now();
            self.tap.flush_output(now, false, &self.core.emitter);
            let Some(mut wake) = self.step(now) else {
                break;
            };
            if let Some(due) = self.tap.flush_due {
                wake.at = wake.at.min(due);
            }
            let woken = self
                .port
                .sleep(&self.core.clock, wake, self.leader.exited());
            for (slot, ready) in woken.pipes.into_iter().enumerate() {
                if ready {
                    self.start_reader(slot);
                }
            }
            if woken.exited {
                self.handle(Control::ChildExited);
            }
        }
        self.finish(done);
    }

    /// The one way the phase moves: the session's public state follows in the same step.
    /// Returns whether the move was made (an impossible one leaves the phase as it was).
    fn transition(&mut self, step: Move) -> bool {
        let name = step.name();
        let moved = self.phase.next(step);
        if !moved {
            log::error!(
                "session {}: no move '{name}' from {}",
                self.core.id,
                self.phase.name()
            );
        }
        self.shared.set_state(self.phase.state());
        moved
    }

    /// The first samples of the tree's CPU and sockets, which the later ones are measured
    /// against: here, on the monitor's thread, rather than on the caller's before its spawn
    /// returns. None when the leader has already exited (a program that ends at once): its
    /// run is over, and the look at what it left behind samples the tree then.
    fn baseline(&mut self) {
        if self.tree_gone || self.port.leader_exited() {
            return; // the waiter (or the launcher) says so: only it, before any reaping
        }
        let now = self.core.clock.now();
        self.port.baseline(now);
    }

    /// The session published a new idle timeout: what derives from it follows (the check
    /// interval, unless one was configured: descendant sampling, the completion files'
    /// look); the next decision reads the timeout itself.
    fn idle_timeout_changed(&mut self) {
        let interval = self
            .core
            .config
            .check_interval_for(self.shared.idle_timeout());
        let now = self.core.clock.now();
        self.timing.interval = interval;
        self.timing.next_sample = self.timing.next_sample.min(now + interval);
        self.rules.set_check_interval(interval, now);
    }

    fn handle(&mut self, msg: Control) {
        match msg {
            Control::IdleTimeoutChanged => self.idle_timeout_changed(),
            Control::Signal(signal) => self.relay(signal),
            Control::ChildExited => {
                if self.leader == LeaderState::Running {
                    self.leader = LeaderState::Exited;
                }
            }
            Control::OutputPending(due) => self.tap.output_pending(due),
            Control::ReaderDone(stream) => self.tap.reader_done(stream),
            Control::Terminate => {
                let steps = self.core.config.kill_ladder.effective();
                self.terminate(steps);
            }
            Control::TerminateWith(steps) => self.terminate(steps),
            Control::Kill => self.kill(),
            Control::Completed(seen) => self.completed(seen),
        }
    }

    /// Sends `signal` to the leader's group (no ladder) while the leader runs and the tree is
    /// not gone.
    fn relay(&mut self, signal: Signal) {
        if self.leader.exited() || matches!(self.phase, Phase::Draining { .. } | Phase::Done { .. })
        {
            return;
        }
        let (id, pid) = (self.core.id, self.pid);
        if let Err(e) = signal_leader(self.port.layer(), id, pid, true, signal) {
            log::debug!("session {id}: {signal} to group {pid}: {e}");
        }
    }

    /// Completion was seen: told in the result and the events; while watching, the linger
    /// starts.
    fn completed(&mut self, seen: CompletionSeen) {
        if matches!(self.phase, Phase::Done { .. }) || !self.rules.seen(seen.clone()) {
            return;
        }
        log::info!(
            "session {}: pid {} completed: {seen}; {} to exit",
            self.core.id,
            self.pid,
            HumanDuration(self.core.config.completion.linger)
        );
        self.core.emitter.lifecycle(Event::Completed { seen });
    }

    /// SIGKILL now: a ladder of one step, or the running ladder skips to its SIGKILL.
    fn kill(&mut self) {
        let kill_only = vec![KillStep {
            signal: Signal::KILL,
            grace: Duration::ZERO,
        }];
        match &mut self.phase {
            Phase::Watching if !self.leader.exited() => {
                self.start_ladder(Outcome::Terminated { forced: true }, kill_only, None, 0);
            }
            Phase::Ending { ladder, .. } => {
                ladder.skip_to_kill(self.core.clock.now());
            }
            _ => {}
        }
    }

    fn terminate(&mut self, steps: Vec<KillStep>) {
        if matches!(self.phase, Phase::Watching) && !self.leader.exited() {
            self.start_ladder(Outcome::Terminated { forced: false }, steps, None, 0);
        }
    }

    /// A reason to end the tree was found while watching (`outcome`, the first one wins):
    /// its ladder starts, `due` at a deadline, for `leftovers` the leader left behind.
    fn start_ladder(
        &mut self,
        outcome: Outcome,
        steps: Vec<KillStep>,
        due: Option<Instant>,
        leftovers: usize,
    ) {
        let mut ladder = Ladder::new(
            self.core.id,
            self.pid,
            self.core.config.kill_confirm_timeout,
            self.core.clock.clone(),
            self.core.emitter.clone(),
        );
        ladder.leftovers_killed = leftovers;
        let ladder = Box::new(ladder);
        // The state says "grace" before the first signal goes out.
        if !self.transition(Move::Ladder { outcome, ladder }) {
            return;
        }
        if let Phase::Ending { ladder, .. } = &mut self.phase {
            ladder.start(self.port.layer(), steps, due, self.leader.exited());
        }
    }

    /// Advances the state machine at `now`; returns the next instant to wake at, or `None`
    /// when the run is over.
    fn step(&mut self, now: Instant) -> Option<Wake> {
        loop {
            let next = match &self.phase {
                Phase::Watching => self.watch(now),
                Phase::Ending { .. } => self.ending(now),
                Phase::Draining { drain, .. } => self.drain(now, *drain),
                Phase::Done { .. } => return None,
            };
            if let Next::Break(wake) = next {
                return Some(wake);
            }
        }
    }

    /// Starts the reader of `slot`, its pipe ready; a reader that cannot start loses its
    /// stream (its pipe closed: the program's writes to it fail), and the result says so.
    fn start_reader(&mut self, slot: usize) {
        if let Err(lost) = self.port.start_reader(slot) {
            // Not on this thread: a reader blocks, and the monitor must keep its deadlines.
            let (stream, e) = (lost.stream, lost.error);
            log::error!(
                "session {}: {e}; the {} is lost",
                self.core.id,
                stream.name()
            );
            let why = SinkError::NoReader((&e).into());
            *self.shared.pumps[stream_index(stream)].sink_error.lock() = Some(why);
            self.tap.reader_done(stream);
        }
    }

    /// Reaps the leader (once): waits for it if it exited, else only looks.
    fn reap(&mut self) {
        if !matches!(self.leader, LeaderState::Reaped(_)) {
            let status = self.port.reap(self.leader.exited());
            self.leader = LeaderState::Reaped(status);
        }
    }
}
