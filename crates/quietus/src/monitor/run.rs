//! The monitor loop: sleeps until the next instant its decision can change (or a control
//! message), then watches (asks the verdict), goes stale or reaches the hard deadline, runs
//! the ladder, and drains the output; publishes the result at the end.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::ladder::{Ladder, Leader, OsProcesses, ProcessLayer, signal_leader};
use super::tap::{Tap, stream_index};
use super::{POLL_MAX, Wake, end_session};
use crate::activity::{ActivityBoard, ActivitySource, BoardSnapshot};
use crate::clock::Clock;
use crate::config::{KillStep, MonitorConfig};
use crate::contract::{Control, SessionState, Shared};
use crate::events::{Emitter, Event};
use crate::outcome::{
    CompletionSeen, HumanDuration, MonitorResult, Outcome, StaleReport, TreeHold,
};
use crate::process::{self, ChildProcess, sys};
use crate::signal::Signal;
use crate::sources::files::FileActivityTracker;
use crate::sources::network::NetworkObserver;
use crate::verdict::{self, Verdict};

/// Publishes the result and closes the done channel; if the monitor thread unwinds before it
/// could, it still kills the group and publishes an "unproven" result, so no waiter hangs.
pub(super) struct DoneGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) done: Option<Sender<()>>,
    pub(super) pid: i32,
    /// How the tree is held (the cgroup itself, dropped with the monitor, kills what is left
    /// in it and is removed).
    pub(super) containment: TreeHold,
}

impl DoneGuard {
    fn publish(mut self, result: MonitorResult) {
        let _ = self.shared.result.set(result);
        self.done.take();
    }

    pub(super) fn disarm(mut self) {
        self.done.take();
    }
}

impl Drop for DoneGuard {
    fn drop(&mut self) {
        if self.done.is_some() && self.shared.result.get().is_none() {
            log::error!(
                "quietus monitor for pid {} failed; killing its group",
                self.pid
            );
            let _ = sys::kill_group(self.pid, sys::SIGKILL);
            // Ended before its result is out, as on the normal way (`start_drain`).
            self.shared
                .phase
                .store(SessionState::ENDED, Ordering::Release);
            let _ = self.shared.result.set(MonitorResult {
                outcome: Outcome::Terminated { forced: true },
                status: None,
                pid: self.pid as u32,
                signals_sent: vec![Signal::KILL],
                escalated: true,
                leftovers_killed: 0,
                termination_unproven: true,
                runtime: Duration::ZERO,
                ladder_time: None,
                kill_latency: None,
                activity: Vec::new(),
                logs: Vec::new(),
                events_dropped: 0,
                output_complete: false,
                home: self.shared.home.clone(),
                unwatched: Vec::new(),
                completion: None,
                containment: self.containment.mode(),
                cgroup: self.containment.cgroup(),
                why_not_cgroup: self.containment.why_not_cgroup(),
                supervisor_death: self.containment.supervisor_death().clone(),
                memory_peak: None,
                oom_kills: None,
                network_unavailable: None,
                observations: Vec::new(),
            });
        }
    }
}

/// The log target of the kill precision's figures: each session ended at a deadline says, at
/// debug level, how long after it its first signal went out, its tree was gone and its result
/// was out (`RUST_LOG=quietus::timing=debug`; `benches/serve.rs` reads them).
const TIMING: &str = "quietus::timing";

/// Why the run ends; the first one found is kept.
#[derive(Debug, Clone)]
pub(super) enum Reason {
    Exited,
    Outcome(Outcome),
}

#[derive(Debug)]
pub(super) enum Phase {
    Watching,
    /// The kill ladder is under way (its steps live in [`Ladder`]).
    Ending,
    Draining {
        since: Instant,
        cap: Instant,
        /// The last look at the readers past the cap: when (real time) and the bytes each had
        /// read ([`Monitor::own_backlog`]).
        looked: Looked,
    },
    Done,
}

/// The session-clock timer while the drain waits for its own backlog (which only real-time
/// polls and `ReaderDone` end): far away, and the same instant every time, so it is re-used.
const BACKLOG_TIMER: Duration = Duration::from_secs(365 * 24 * 3600);

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

/// The monitor thread's state: the session's parts, grouped by who owns them.
pub(super) struct Monitor {
    pub(super) id: u64,
    pub(super) pid: i32,
    pub(super) config: MonitorConfig,
    pub(super) clock: Clock,
    pub(super) board: Arc<ActivityBoard>,
    pub(super) control: Receiver<Control>,
    pub(super) shared: Arc<Shared>,
    pub(super) emitter: Arc<Emitter>,
    /// Deadlines, sampling, the idle warning, the wake-up timer.
    pub(super) timing: Timing,
    /// The output streams: held-back events, peeking at the pipes, the logs.
    pub(super) tap: Tap,
    /// The kill ladder and what it did.
    pub(super) ladder: Ladder,
    /// The processes the ladder acts on, and the descendant observer.
    pub(super) processes: OsProcesses,
    /// The child (leader of its group) and its status.
    pub(super) leader: Leader,
    /// This session's place in the process's guardian: released when the run is over.
    pub(super) guardian: Option<process::Guardian>,
    /// What the monitor sleeps on, under every clock: messages poke it, the leader's exit
    /// wakes it (no waiter thread where there are pidfds), and so do the output pipes whose
    /// readers have not started.
    pub(super) sleeper: super::wait::Sleeper,
    /// Each stream's reader (by slot, [`stream_index`]) until it starts: once its pipe has
    /// something to read (see [`Reader`](super::reader::Reader)).
    pub(super) readers: [Option<super::reader::Reader>; 2],
    /// The leader had exited before the threads started, leaving no descendant (adopting
    /// orphans): nothing to look for after it.
    pub(super) tree_gone: bool,
    /// How the tree is held, for the result.
    pub(super) containment: TreeHold,
    /// The memory peak and OOM kills of the session's cgroup, read before it is removed.
    pub(super) memory: (Option<u64>, Option<u64>),
    /// Stamps the board from its own thread; stopped when the monitor ends.
    /// The file tracker while the program runs; let go of when the drain starts.
    pub(super) files: Option<FileActivityTracker>,
    /// The network source (on, and able to observe).
    pub(super) network: Option<NetworkObserver>,
    /// Why the network source is on but cannot observe anything.
    pub(super) network_unavailable: Option<String>,
    /// What the file tracker could not watch, as it stood when the program's run was over.
    pub(super) unwatched: Vec<crate::outcome::UnwatchedFolder>,
    /// The input-wait rule (on with [`MonitorConfig::input_wait_timeout`]).
    pub(super) input_wait: Option<crate::input_wait::InputWaitRule>,
    pub(super) reason: Option<Reason>,
    pub(super) phase: Phase,
    /// Completion, solo caps, probes.
    pub(super) rules: super::rules::Rules,
    /// Observe mode (issue 43): the observations, and how quiet starts over after one.
    pub(super) observer: super::observe::Observer,
}

/// The drain's last look at the readers: when (real time) and the bytes each had read.
type Looked = Option<(std::time::Instant, [u64; 2])>;

/// What a phase's method tells [`Monitor::step`]: sleep until this wake-up, or look again now
/// (the phase changed, or one more look is due).
type Next = std::ops::ControlFlow<Wake>;

impl Monitor {
    pub(super) fn run(mut self, child: ChildProcess, done: DoneGuard) {
        self.leader.child = Some(child);
        self.baseline();
        let control = self.control.clone();
        loop {
            // Whatever was sent before this wake-up is taken into account before deciding.
            while let Ok(msg) = control.try_recv() {
                self.handle(msg);
            }
            let now = self.clock.now();
            self.tap.flush_output(now, false, &self.emitter);
            let Some(mut wake) = self.step(now) else {
                break;
            };
            if let Some(due) = self.tap.flush_due {
                wake.at = wake.at.min(due);
            }
            let pipes = self
                .readers
                .each_ref()
                .map(|reader| reader.as_ref().map(|reader| reader.fd.as_fd()));
            let woken = self
                .sleeper
                .sleep(&self.clock, wake, self.leader.exited, pipes);
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

    /// The first samples of the tree's CPU and sockets, which the later ones are measured
    /// against: here, on the monitor's thread, rather than on the caller's before its spawn
    /// returns. None when the leader has already exited (a program that ends at once): its
    /// run is over, and the look at what it left behind samples the tree then.
    fn baseline(&mut self) {
        if self.tree_gone || sys::has_exited_no_reap(self.pid) {
            return; // the waiter (or the launcher) says so: only it, before any reaping
        }
        let now = self.clock.now();
        if let Some(observer) = self.processes.children.as_mut() {
            observer.sample(now);
            if let Some(network) = self.network.as_mut() {
                network.sample_pids(now, observer.pids());
            }
        }
    }

    /// The run is over: detaches the readers, flushes the last output, publishes the result.
    fn finish(mut self, done: DoneGuard) {
        end_session(self.id);
        for pump in &self.shared.pumps {
            pump.detached.store(true, Ordering::Release);
        }
        // A reader not started yet (nothing came through a pipe a stranger still holds, the
        // drain over): started now, it takes what comes next, as one always running would.
        for reader in self.readers.iter_mut().filter_map(Option::take) {
            let stream = reader.stream;
            if let Err(e) = reader.start() {
                log::debug!(
                    "session {}: the {} is not read on: {e}",
                    self.id,
                    stream.name()
                );
            }
        }
        if self.leader.child.is_some() {
            self.reap(); // not reaped at the drain: cannot happen, but never leave a zombie
        }
        let now = self.clock.now();
        self.tap.flush_output(now, true, &self.emitter);
        self.shared.stdin.lock().take(); // nobody reads it any more
        self.let_go_of_cgroup();
        // Told before the result is out: whoever waits for it may end this process at once,
        // and the guardian of the last session is reaped here (no process of quietus's
        // outlives the sessions, none is left for the caller to reap).
        if let Some(guardian) = self.guardian.take() {
            guardian.release();
        }
        let result = self.result();
        log::debug!("session {}: {:?}", self.id, result);
        self.emitter.lifecycle(Event::Closed);
        let timing = self.ladder.after_deadline();
        let published = self.clock.now();
        done.publish(result);
        if let Some((due, signal, gone)) = timing {
            // After the result is out, not to delay it: what the kill precision is made of.
            log::debug!(
                target: TIMING,
                "session {} pid {}: after its deadline, first signal {} us, tree gone {} us, \
                 result {} us",
                self.id,
                self.pid,
                signal.as_micros(),
                gone.map_or(-1, |gone| gone.as_micros() as i128),
                published.saturating_duration_since(due).as_micros(),
            );
        }
    }

    /// The session published a new idle timeout: what derives from it follows (the check
    /// interval, unless one was configured: descendant sampling, the completion files'
    /// look); the next decision reads the timeout itself.
    fn idle_timeout_changed(&mut self) {
        let interval = self.config.check_interval_for(self.shared.idle_timeout());
        let now = self.clock.now();
        self.timing.interval = interval;
        self.timing.next_sample = self.timing.next_sample.min(now + interval);
        self.rules.set_check_interval(interval, now);
    }

    fn handle(&mut self, msg: Control) {
        match msg {
            Control::IdleTimeoutChanged => self.idle_timeout_changed(),
            Control::Signal(signal) => {
                if !self.leader.exited
                    && !matches!(self.phase, Phase::Draining { .. } | Phase::Done)
                    && let Err(e) = signal_leader(
                        &mut self.processes,
                        self.id,
                        self.pid,
                        self.leader.child.is_some() && !self.leader.exited,
                        signal.number(),
                    )
                {
                    log::debug!("session {}: {signal} to group {}: {e}", self.id, self.pid);
                }
            }
            Control::ChildExited => self.leader.exited = true,
            Control::OutputPending(due) => self.tap.output_pending(due),
            Control::ReaderDone(stream) => self.tap.reader_done(stream),
            Control::Terminate => {
                let steps = self.config.kill_ladder.effective();
                self.terminate(steps);
            }
            Control::TerminateWith(steps) => self.terminate(steps),
            Control::Kill => self.kill(),
            Control::Completed(seen) => self.completed(seen),
        }
    }

    /// Completion was seen: told in the result and the events; while watching, the linger
    /// starts.
    fn completed(&mut self, seen: CompletionSeen) {
        if matches!(self.phase, Phase::Done) || !self.rules.seen(seen.clone()) {
            return;
        }
        log::info!(
            "session {}: pid {} completed: {seen}; {} to exit",
            self.id,
            self.pid,
            HumanDuration(self.config.completion.linger)
        );
        self.emitter.lifecycle(Event::Completed { seen });
    }

    /// SIGKILL now: a ladder of one step, or the running ladder skips to its SIGKILL.
    fn kill(&mut self) {
        let kill_only = vec![KillStep {
            signal: Signal::KILL,
            grace: Duration::ZERO,
        }];
        match &mut self.phase {
            Phase::Watching if !self.leader.exited => {
                self.set_reason(Reason::Outcome(Outcome::Terminated { forced: true }));
                self.start_ladder(kill_only, None);
            }
            Phase::Ending => {
                self.ladder.skip_to_kill(self.clock.now());
            }
            _ => {}
        }
    }

    fn terminate(&mut self, steps: Vec<KillStep>) {
        if matches!(self.phase, Phase::Watching) && !self.leader.exited {
            self.set_reason(Reason::Outcome(Outcome::Terminated { forced: false }));
            self.start_ladder(steps, None);
        }
    }

    fn set_reason(&mut self, reason: Reason) {
        if self.reason.is_none() {
            self.reason = Some(reason);
        }
    }

    /// Advances the state machine at `now`; returns the next instant to wake at, or `None`
    /// when the run is over.
    fn step(&mut self, now: Instant) -> Option<Wake> {
        loop {
            let next = match self.phase {
                Phase::Watching => self.watch(now),
                Phase::Ending => self.ending(now),
                Phase::Draining { since, cap, looked } => self.drain(now, since, cap, looked),
                Phase::Done => return None,
            };
            if let Next::Break(wake) = next {
                return Some(wake);
            }
        }
    }

    /// Watching: asks the verdict; sleeps until its next deadline, or ends the run.
    fn watch(&mut self, now: Instant) -> Next {
        if self.leader.exited {
            self.set_reason(Reason::Exited);
            self.after_leader_exit(now);
            return Next::Continue(());
        }
        if self.processes.children.is_some() && now >= self.timing.next_sample {
            self.sample_children(now);
        }
        // Real time, as the OS: a frozen test clock must not keep the watches off.
        let arm_in = self
            .files
            .as_ref()
            .and_then(FileActivityTracker::arm_if_due);
        let (seen, next_look) = self.rules.look_at_files(now, self.board.origin());
        if let Some(seen) = seen {
            self.completed(seen);
        }
        // observe mode (issue 43): quiet starts over after an observation; the hard timeout
        // and completion are observed once.
        let snapshot = self.observer.adjust(self.board.snapshot());
        let limits = self.observer.limits(self.rules.limits(
            self.shared.idle_timeout(),
            self.timing.hard_deadline,
            self.board.origin(),
        ));
        match verdict::decide(&snapshot, now, limits) {
            Verdict::Wait { until } => {
                let mut until = match self.processes.children {
                    Some(_) => until.min(self.timing.next_sample),
                    None => until,
                };
                if let Some(look) = next_look {
                    until = until.min(look);
                }
                if let Some(warn_at) = self.idle_warning(&snapshot, now) {
                    until = until.min(warn_at);
                }
                match self.look_for_input_wait(&snapshot, now) {
                    Ok(Some(look_at)) => until = until.min(look_at),
                    Ok(None) => {}
                    Err(()) => return Next::Continue(()),
                }
                Next::Break(Wake {
                    at: until,
                    poll: arm_in,
                })
            }
            Verdict::Stale { deadline, report } => self.stale(now, deadline, report),
            Verdict::HardDeadline { deadline } => self.hard_deadline(now, deadline),
            Verdict::Completed { deadline } => self.end_completed(now, deadline),
        }
    }

    /// Completion was seen and the child did not exit within the linger: the ladder starts.
    fn end_completed(&mut self, now: Instant, deadline: Instant) -> Next {
        let Some(seen) = self.rules.completion.clone() else {
            return Next::Continue(()); // cannot happen: the verdict says so only after it
        };
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::Completed(seen));
            return Next::Continue(());
        }
        log::info!(
            "session {}: pid {} did not exit within {} of completion; ending it",
            self.id,
            self.pid,
            HumanDuration(self.config.completion.linger)
        );
        self.set_reason(Reason::Outcome(Outcome::Completed(seen)));
        self.start_ladder(self.config.kill_ladder.effective(), Some(deadline));
        Next::Continue(())
    }

    /// At a stale decision: asks the probes (not the capped ones; one that said yes less than
    /// a check interval ago still holds). Returns whether one said yes (stamped now).
    fn probes_say_active(&mut self, now: Instant, capped: &[ActivitySource]) -> bool {
        let (ask, still) = self.rules.probes_to_ask(capped, now, self.timing.interval);
        let mut yes = still;
        if !ask.is_empty() {
            yes.extend(self.rules.prober.ask(&ask, &self.clock, now));
        }
        for source in &yes {
            log::debug!("session {}: probe {source} says active", self.id);
            self.board.stamp_at(source, now);
        }
        !yes.is_empty()
    }

    /// Every source was quiet for the idle timeout: the ladder starts (unless a descendant
    /// works right now).
    fn stale(&mut self, now: Instant, deadline: Instant, mut report: StaleReport) -> Next {
        // A descendant working right now is never killed for want of a
        // poll: one fresh sample first.
        if self.processes.children.is_some()
            && self.timing.sampled_at != Some(now)
            && self.sample_children(now)
        {
            return Next::Continue(());
        }
        if self.output_waiting(now) {
            return Next::Continue(());
        }
        if self.files_changed_before_arming() {
            return Next::Continue(());
        }
        if self.timing.probed_at != Some(now) {
            self.timing.probed_at = Some(now);
            if self.probes_say_active(now, &report.capped) {
                return Next::Continue(());
            }
        }
        let children_on = self.config.enabled.children;
        report.children = self
            .processes
            .children
            .as_ref()
            .filter(|_| children_on)
            .map(|o| o.last());
        let diagnosis = self.diagnose();
        self.emitter.lifecycle(Event::Diagnosis(diagnosis.clone()));
        report.diagnosis = Some(diagnosis);
        log::info!(
            "session {}: pid {} stale after {} ({report})",
            self.id,
            self.pid,
            HumanDuration(self.shared.idle_timeout())
        );
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::IdleTimeout(report));
            return Next::Continue(());
        }
        self.set_reason(Reason::Outcome(Outcome::IdleTimeout(report)));
        self.start_ladder(self.config.kill_ladder.effective(), Some(deadline));
        Next::Continue(())
    }

    /// The hard timeout ran out: the ladder starts, activity or not.
    fn hard_deadline(&mut self, now: Instant, deadline: Instant) -> Next {
        let after = self.config.hard_timeout.unwrap_or_default();
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::HardTimeout { after });
            return Next::Continue(());
        }
        log::info!(
            "session {}: pid {} reached its hard timeout of {}",
            self.id,
            self.pid,
            HumanDuration(after)
        );
        self.set_reason(Reason::Outcome(Outcome::HardTimeout { after }));
        self.start_ladder(self.config.kill_ladder.effective(), Some(deadline));
        Next::Continue(())
    }

    /// The ladder is under way: its next step, or the drain once it is over.
    fn ending(&mut self, now: Instant) -> Next {
        match self
            .ladder
            .step(&mut self.processes, now, self.leader.exited)
        {
            Some(wake) => Next::Break(wake),
            None => {
                self.start_drain(now);
                Next::Continue(())
            }
        }
    }

    /// The tree is gone: waits for the readers' end-of-file, or for quiet empty pipes, at most
    /// until the drain cap (those two only for pipes that strangers hold open: a reader behind
    /// on a pipe nobody holds is waited for, [`Monitor::own_backlog`]).
    fn drain(&mut self, now: Instant, since: Instant, cap: Instant, looked: Looked) -> Next {
        if self.tap.all_done() {
            self.phase = Phase::Done;
            return Next::Continue(());
        }
        let last_output = self.board.last(&ActivitySource::Output).max(since);
        let quiet_at = last_output + self.config.drain_quiet;
        let quiet = now >= quiet_at && self.tap.pipes_empty();
        if now >= cap || quiet {
            // The cap and the quiet rule are for pipes that strangers hold open.
            if let Some(wake) = self.own_backlog(since, looked) {
                return Next::Break(wake);
            }
            if quiet {
                log::debug!(
                    "session {}: output quiet after exit; not waiting for end-of-file",
                    self.id
                );
            }
            self.phase = Phase::Done;
            return Next::Continue(());
        }
        // Bytes still sit in a pipe: look again shortly (real time: the reader
        // thread empties the pipe in real time, whatever the clock says).
        let poll = (now >= quiet_at).then_some(super::POLL_MIN);
        Next::Break(Wake {
            at: if now >= quiet_at {
                cap
            } else {
                quiet_at.min(cap)
            },
            poll,
        })
    }

    /// Sends the idle warning when its time has come in this idle spell; otherwise returns
    /// when it will (if it still has to be sent).
    fn idle_warning(&mut self, snapshot: &BoardSnapshot, now: Instant) -> Option<Instant> {
        let fraction = self.config.events.idle_warning?;
        let last = verdict::last_activity(snapshot, &self.rules.caps);
        if self.timing.warned_for == Some(last) {
            return None;
        }
        let idle_timeout = self.shared.idle_timeout();
        let warn_at = last + idle_timeout.mul_f64(fraction);
        if now < warn_at {
            return Some(warn_at);
        }
        self.timing.warned_for = Some(last);
        let left = (last + idle_timeout).saturating_duration_since(now);
        self.emitter.lifecycle(Event::IdleWarning { left });
        let diagnosis = self.diagnose();
        self.emitter.lifecycle(Event::Diagnosis(diagnosis));
        None
    }

    /// With the input-wait rule on: looks at the tree when it is due (every source quiet for a
    /// while), its processes sampled afresh (a grandchild started since the last sample is in
    /// the tree, whatever the check interval). Returns when to look next, or `Err` to look
    /// again now: the fresh sample showed work, or the tree has waited on input for the
    /// timeout (the event is sent and the ladder started).
    fn look_for_input_wait(
        &mut self,
        snapshot: &BoardSnapshot,
        now: Instant,
    ) -> Result<Option<Instant>, ()> {
        let Some(rule) = self.input_wait.as_ref() else {
            return Ok(None);
        };
        let last = verdict::last_activity(snapshot, &self.rules.caps);
        if now < rule.next_look(last) {
            return Ok(Some(rule.next_look(last)));
        }
        if self.processes.children.is_some()
            && self.timing.sampled_at != Some(now)
            && self.sample_children(now)
        {
            return Err(());
        }
        let diagnosis = self.diagnose();
        let look = crate::input_wait::Look::from(&diagnosis, &|pid| {
            i32::try_from(pid).ok().and_then(sys::read_count)
        });
        let Some(rule) = self.input_wait.as_mut() else {
            return Ok(None);
        };
        let noticed = rule.noticed();
        let wait = match rule.observe(now, last, look) {
            None => return Ok(Some(rule.next_look(last))),
            Some(crate::input_wait::Found::Notice(wait)) => {
                log::info!(
                    "session {}: {}",
                    self.id,
                    input_wait_line(self.pid, &wait, false)
                );
                let next = rule.next_look(last);
                self.emitter.lifecycle(Event::InputWait(wait));
                self.emitter.lifecycle(Event::Diagnosis(diagnosis));
                return Ok(Some(next));
            }
            Some(crate::input_wait::Found::End(wait)) => wait,
        };
        log::info!(
            "session {}: {}",
            self.id,
            input_wait_line(self.pid, &wait, !self.observing())
        );
        if !noticed {
            // Once per episode: not again when the notice gave it already.
            self.emitter.lifecycle(Event::InputWait(wait.clone()));
            self.emitter.lifecycle(Event::Diagnosis(diagnosis));
        }
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::InputWait(wait));
            return Err(());
        }
        self.set_reason(Reason::Outcome(Outcome::InputWait(wait)));
        self.start_ladder(self.config.kill_ladder.effective(), None);
        Err(())
    }

    /// One snapshot of the tree as the last sample found it, classified.
    fn diagnose(&self) -> crate::diagnosis::Diagnosis {
        let root = [self.pid];
        let pids = self
            .processes
            .children
            .as_ref()
            .map_or(&root[..], |o| o.pids());
        let pids = if pids.is_empty() { &root[..] } else { pids };
        let network = self.network.as_ref();
        crate::diagnosis::diagnose_tree(pids, &|inode| network.and_then(|n| n.peer(inode)))
    }

    /// Samples descendant CPU; stamps the board when it shows work. Returns whether it did.
    fn sample_children(&mut self, now: Instant) -> bool {
        self.processes.collect_adopted();
        let Some(observer) = self.processes.children.as_mut() else {
            return false;
        };
        let sample = observer.sample(now);
        self.timing.sampled_at = Some(now);
        self.timing.next_sample = now + self.timing.interval;
        let active = sample.active && self.config.enabled.children;
        if active {
            self.board.stamp_at(&ActivitySource::Children, now);
        }
        let moved = self
            .network
            .as_mut()
            .is_some_and(|network| network.sample_pids(now, observer.pids()).active);
        if moved {
            self.board.stamp_at(&ActivitySource::Network, now);
        }
        active || moved
    }

    /// The leader exited while being watched: take the leftovers down, or leave them.
    fn after_leader_exit(&mut self, now: Instant) {
        if !self.config.keep_leftovers {
            // Adopting orphans, with no child but the leader (and this library's own): every
            // descendant still alive would be a child of this process now, so none is left,
            // in the group or out of it. No sample, no scan.
            // In a cgroup, its removal says the same in one call: no process is left in it
            // (the leader is a zombie, no member), and none can have left it. What it
            // measured is read first; it is gone before the drain.
            let alone = self.tree_gone
                || match &self.processes.cgroup {
                    Some(cgroup) => {
                        self.memory = cgroup.memory();
                        match cgroup.remove_if_empty() {
                            Ok(removed) => removed,
                            Err(_) => cgroup.populated().is_ok_and(|populated| !populated),
                        }
                    }
                    None => self.processes.leader_alone(self.pid),
                };
            if !alone {
                self.processes.sample(now); // who is left, now that the leader is gone
            }
            let members = if alone {
                Vec::new() // no scan of every process needed
            } else if let Some(cgroup) = &self.processes.cgroup {
                // Every process of the tree, escapees included (the leader is a zombie now,
                // no member).
                cgroup.members().unwrap_or_default()
            } else {
                self.processes
                    .group_members(self.pid, self.pid)
                    .unwrap_or_default()
            };
            let escapees = if self.processes.cgroup.is_some() || alone {
                0 // members already, or provably none
            } else {
                self.processes.escapees(self.pid).len()
            };
            let leftovers = members.len() + escapees;
            if leftovers > 0 {
                log::info!(
                    "session {}: pid {} exited, leaving {} group member(s) and {} escaped \
                     descendant(s); ending them",
                    self.id,
                    self.pid,
                    members.len(),
                    escapees
                );
                self.ladder.leftovers_killed = leftovers;
                self.start_ladder(self.config.kill_ladder.effective(), None);
                return;
            }
        }
        self.start_drain(now);
    }

    fn start_drain(&mut self, now: Instant) {
        self.shared
            .phase
            .store(SessionState::ENDED, Ordering::Release);
        self.let_go_of_files();
        // The ladder is done (or was not needed): now the leader may be reaped.
        self.reap();
        self.emitter.lifecycle(Event::Exited {
            outcome: self.outcome(),
            status: self.leader.status,
        });
        self.phase = Phase::Draining {
            since: now,
            cap: now + self.config.drain_cap,
            looked: None,
        };
    }

    /// At a stale decision: bytes the child wrote that no reader has taken yet (quietus was
    /// stopped, or a reader is slow) are output too. They count once, stamped at `now`; when the
    /// readers then record nothing for a whole idle timeout (a reader held by its sink), the
    /// same waiting bytes do not keep the child alive again.
    fn output_waiting(&mut self, now: Instant) -> bool {
        if !self.config.enabled.output || self.tap.pipes_empty() {
            return false;
        }
        let last_output = self.board.last(&ActivitySource::Output);
        if self.tap.waiting_counted_at == Some(last_output) {
            return false;
        }
        log::debug!(
            "session {}: output waits unread in a pipe at the idle deadline; it counts",
            self.id
        );
        self.board.stamp_at(&ActivitySource::Output, now);
        self.tap.waiting_counted_at = Some(self.board.last(&ActivitySource::Output));
        true
    }

    /// Past the drain cap (or the quiet rule): whether a reader still works through a pipe
    /// that nobody holds open any more, so that its end-of-file is only a matter of quietus's
    /// own pace (the log spill's disk and hash, or a sink that is slow but moving), not a
    /// stranger's. Then the drain goes on, bounded by the disk: every byte written before the
    /// tree ended is read and logged. A reader that neither moved since the last look (at least
    /// [`POLL_MAX`] earlier) nor waits for its log spill is stuck in its sink: the drain ends.
    fn own_backlog(&mut self, since: Instant, looked: Looked) -> Option<Wake> {
        let read = [0, 1].map(|i| self.shared.pumps[i].bytes.load(Ordering::Relaxed));
        let real_now = std::time::Instant::now();
        // Real time: the readers work in real time, whatever the clock says.
        let wake = Wake {
            at: since + BACKLOG_TIMER,
            poll: Some(POLL_MAX),
        };
        if looked.is_some_and(|(at, _)| real_now.saturating_duration_since(at) < POLL_MAX) {
            // Woken early (another reader finished): judge on a full interval.
            return self.tap.any_hung_up().then_some(wake);
        }
        let waiting = self.tap.behind(read, looked.map(|(_, before)| before));
        if let Phase::Draining { looked, .. } = &mut self.phase {
            *looked = Some((real_now, read));
        }
        if waiting {
            log::debug!(
                "session {}: the tree is gone but a reader is still behind; reading on",
                self.id
            );
        }
        waiting.then_some(wake)
    }

    fn start_ladder(&mut self, steps: Vec<KillStep>, due: Option<Instant>) {
        self.shared
            .phase
            .store(SessionState::GRACE, Ordering::Release);
        self.phase = Phase::Ending;
        self.ladder
            .start(&mut self.processes, steps, due, self.leader.exited);
    }

    /// Reaps the child (once): waits for it if it exited, else only looks.
    /// At a stale decision: watches whose arming was put off are armed now, and what the
    /// program changed before counts (true: it did).
    fn files_changed_before_arming(&self) -> bool {
        let Some(files) = &self.files else {
            return false;
        };
        let before = self.board.count(&ActivitySource::Files);
        files.arm_now();
        self.board.count(&ActivitySource::Files) != before
    }

    /// The program's run is over: file activity no longer matters. The tracker is dropped on
    /// a thread of its own, so that the kernel's teardown of the watches (an SRCU grace
    /// period, about 10 ms on Linux) runs beside the drain and the result instead of after
    /// them.
    fn let_go_of_files(&mut self) {
        if let Some(files) = self.files.take() {
            self.unwatched = files.unwatched();
            if !files.has_armed() {
                return; // no watch yet: dropped at once, no thread needed
            }
            let dropped = std::thread::Builder::new()
                .name(format!("quietus-unwatch-{}", self.id))
                .spawn(move || drop(files));
            if let Err(e) = dropped {
                // The tracker came back with the error and is dropped here, on this thread.
                log::debug!("session {}: no thread to drop the watches on: {e}", self.id);
            }
        }
    }

    /// Starts the reader of `slot`, its pipe ready: on a thread of its own when the pipe holds
    /// bytes; here when it is at its end with nothing left (the reading is then one `read` of
    /// nothing, and its end-of-stream steps).
    fn start_reader(&mut self, slot: usize) {
        let Some(reader) = self.readers[slot].take() else {
            return;
        };
        if sys::unread_bytes(&reader.fd).is_ok_and(|n| n == 0) {
            (reader.work)();
            return;
        }
        let stream = reader.stream;
        if let Err(e) = reader.start() {
            // Not on this thread: a reader blocks, and the monitor must keep its deadlines.
            // The stream is lost (its pipe closed: the program's writes to it fail), and the
            // result says so.
            log::error!("session {}: {e}; the {} is lost", self.id, stream.name());
            let why = format!("no thread could be started to read it: {e}");
            *self.shared.pumps[stream_index(stream)].sink_error.lock() = Some(why);
            self.tap.reader_done(stream);
        }
    }

    fn reap(&mut self) {
        self.leader.reap(self.id, self.pid);
    }

    /// The run is over: reads the cgroup's memory figures and removes it, unless both were
    /// done at the leader's exit. Leftovers the caller keeps ([`MonitorConfig::keep_leftovers`]) move to
    /// this process's own cgroup first; anything else still in it (an unproven termination) is
    /// killed by the removal.
    fn let_go_of_cgroup(&mut self) {
        let Some(cgroup) = self.processes.cgroup.take() else {
            return;
        };
        if !cgroup.is_removed() {
            self.memory = cgroup.memory(); // read before the removal at the leader's exit
        }
        if self.config.keep_leftovers
            && cgroup.populated().unwrap_or(false)
            && let Err(e) = cgroup.release_members()
        {
            log::warn!("session {}: cannot hand over the leftovers: {e}", self.id);
        }
        if let Err(e) = cgroup.remove() {
            log::error!(
                "session {}: cannot remove the cgroup {}: {e}",
                self.id,
                cgroup.path().display()
            );
        }
    }

    fn outcome(&self) -> Outcome {
        match self.reason.clone() {
            Some(Reason::Outcome(outcome)) => outcome,
            Some(Reason::Exited) | None => Outcome::Exited,
        }
    }

    fn result(&self) -> MonitorResult {
        let now = self.clock.now();
        MonitorResult {
            outcome: self.outcome(),
            status: self.leader.status,
            pid: self.pid as u32,
            signals_sent: self.ladder.signals_sent.clone(),
            escalated: self.ladder.escalated,
            leftovers_killed: self.ladder.leftovers_killed,
            termination_unproven: self.ladder.unproven,
            runtime: now.saturating_duration_since(self.board.origin()),
            ladder_time: self.ladder.time,
            kill_latency: self.ladder.kill_latency,
            activity: verdict::report(&self.board.snapshot(), now, self.shared.idle_timeout())
                .sources,
            // Every chunk read is written and hashed first (bounded by the disk).
            logs: self.tap.logs(),
            events_dropped: self.emitter.dropped(),
            output_complete: self.tap.all_done(),
            home: self.shared.home.clone(),
            unwatched: match &self.files {
                Some(files) => files.unwatched(),
                None => self.unwatched.clone(),
            },
            completion: self.rules.completion.clone(),
            containment: self.containment.mode(),
            cgroup: self.containment.cgroup(),
            why_not_cgroup: self.containment.why_not_cgroup(),
            supervisor_death: self.containment.supervisor_death().clone(),
            memory_peak: self.memory.0,
            oom_kills: self.memory.1,
            network_unavailable: self.network_unavailable.clone(),
            observations: self.observer.observations(), // observe mode (issue 43)
        }
    }
}

/// The log line of an input wait of the tree of `pid`: noticed, or `ending` it.
fn input_wait_line(pid: i32, wait: &crate::input_wait::InputWait, ending: bool) -> String {
    let what = format!("{} (pid {}) reads {}", wait.name, wait.pid, wait.target);
    let waited = HumanDuration(wait.waited);
    if ending {
        format!("pid {pid} waited {waited} on input ({what}); ending it")
    } else {
        format!("pid {pid} waits on input for {waited} ({what})")
    }
}
