//! Watching: the verdict asked at each wake-up, and what a stale decision looks at first
//! (a fresh sample, bytes waiting in a pipe, files changed before the watches were armed, the
//! probes); the idle warning; the input-wait rule.

use std::time::{Duration, Instant};

use super::super::port::Port;
use super::super::wait::Wake;
use super::{Files, Monitor, Next};
use crate::activity::{ActivitySource, BoardReading};
use crate::events::Event;
use crate::outcome::{HumanDuration, Outcome, StaleReport};
use crate::pid::Pid;
use crate::verdict::{self, Verdict};

impl<P: Port> Monitor<P> {
    /// Watching: asks the verdict; sleeps until its next deadline, or ends the run.
    pub(super) fn watch(&mut self, now: Instant) -> Next {
        if self.leader.exited() {
            self.after_leader_exit(now);
            return Next::Continue(());
        }
        if self.port.observes_tree() && now >= self.timing.next_sample {
            self.sample_children(now);
        }
        // Real time, as the OS: a frozen test clock must not keep the watches off.
        let arm_in = match &self.files {
            Files::Watching(files) => files.arm_if_due(),
            Files::Off | Files::LetGo(_) => None,
        };
        let (seen, next_look) = self.rules.look_at_files(now, self.core.board.origin());
        if let Some(seen) = seen {
            self.completed(seen);
        }
        // observe mode (issue 43): quiet starts over after an observation; the hard timeout
        // and completion are observed once.
        let snapshot = self.observer.adjust(self.core.board.read());
        let limits = self.observer.limits(self.rules.limits(
            self.shared.idle_timeout(),
            self.timing.hard_deadline,
            self.core.board.origin(),
        ));
        match verdict::decide(&snapshot, now, limits) {
            Verdict::Wait { until } => {
                let mut until = if self.port.observes_tree() {
                    until.min(self.timing.next_sample)
                } else {
                    until
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
            Verdict::Stale { deadline, report } => self.stale(now, deadline, report, &snapshot),
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
            self.core.id,
            self.pid,
            HumanDuration(self.core.config.completion.linger)
        );
        let steps = self.core.config.kill_ladder.effective();
        self.start_ladder(Outcome::Completed(seen), steps, Some(deadline), 0);
        Next::Continue(())
    }

    /// At a stale decision: asks the probes (not the capped ones; one that said yes less than
    /// a check interval ago still holds). Returns whether one said yes (stamped now).
    fn probes_say_active(&mut self, now: Instant, capped: &[ActivitySource]) -> bool {
        let (ask, still) = self.rules.probes_to_ask(capped, now, self.timing.interval);
        let mut yes = still;
        if !ask.is_empty() {
            yes.extend(self.rules.prober.ask(&ask, &self.core.clock, now));
        }
        for source in &yes {
            log::debug!("session {}: probe {source} says active", self.core.id);
            self.core.board.stamp_at(source, now);
        }
        !yes.is_empty()
    }

    /// Every source was quiet for the idle timeout: the ladder starts (unless a descendant
    /// works right now).
    fn stale(
        &mut self,
        now: Instant,
        deadline: Instant,
        mut report: StaleReport,
        snapshot: &BoardReading,
    ) -> Next {
        // The files source's thread still at work (a delayed arming's walk of a large root, a
        // re-arm): asked again shortly, in real time, before any sample is taken; every other
        // deadline is kept meanwhile, the hard one first (`verdict::decide`).
        if self.files_busy() {
            return Next::Break(Wake {
                at: now + FILES_BUSY_POLL,
                poll: Some(FILES_BUSY_POLL),
            });
        }
        // A descendant working right now is never killed for want of a
        // poll: one fresh sample first.
        if self.port.observes_tree()
            && self.timing.sampled_at != Some(now)
            && self.sample_children(now)
        {
            return Next::Continue(());
        }
        if self.output_waiting(now) {
            return Next::Continue(());
        }
        if self.files_counted_since(snapshot) {
            return Next::Continue(());
        }
        if self.timing.probed_at != Some(now) {
            self.timing.probed_at = Some(now);
            if self.probes_say_active(now, &report.capped) {
                return Next::Continue(());
            }
        }
        let recent = self.recent(snapshot, now);
        let children_on = self.core.config.enabled.children;
        report.children = self.port.last_children().filter(|_| children_on);
        self.late_idle_warning();
        let diagnosis = self.port.diagnose(Some(recent), self.redrawing(now));
        self.core
            .emitter
            .lifecycle(Event::Diagnosis(diagnosis.clone()));
        report.diagnosis = Some(diagnosis);
        log::info!(
            "session {}: pid {} stale after {} ({report})",
            self.core.id,
            self.pid,
            HumanDuration(self.shared.idle_timeout())
        );
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::IdleTimeout(report));
            return Next::Continue(());
        }
        let steps = self.core.config.kill_ladder.effective();
        self.start_ladder(Outcome::IdleTimeout(report), steps, Some(deadline), 0);
        Next::Continue(())
    }

    /// The hard timeout ran out: the ladder starts, activity or not.
    fn hard_deadline(&mut self, now: Instant, deadline: Instant) -> Next {
        let after = self.core.config.hard_timeout.unwrap_or_default();
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::HardTimeout { after });
            return Next::Continue(());
        }
        log::info!(
            "session {}: pid {} reached its hard timeout of {}",
            self.core.id,
            self.pid,
            HumanDuration(after)
        );
        let steps = self.core.config.kill_ladder.effective();
        self.start_ladder(Outcome::HardTimeout { after }, steps, Some(deadline), 0);
        Next::Continue(())
    }

    /// For the diagnosis: how long ago the tree's last activity was, plus the lag of the
    /// sources that sample (one check interval, and a second of slack). A connection whose
    /// last bytes moved within this took part in the tree's last activity: an exchange under
    /// way (docs/design.md, Diagnosis).
    fn recent(&self, snapshot: &BoardReading, now: Instant) -> Duration {
        let last = verdict::last_activity(snapshot, &self.rules.caps);
        let lag = self
            .core
            .config
            .check_interval_for(self.shared.idle_timeout());
        now.saturating_duration_since(last) + lag + Duration::from_secs(1)
    }

    /// Whether the output went on showing nothing new lately (within the lag of the sampled
    /// sources and a second): a spinner or a bar redrawn over a wait, not a program idle at
    /// its prompt, which draws nothing.
    fn redrawing(&self, now: Instant) -> bool {
        let lag = self
            .core
            .config
            .check_interval_for(self.shared.idle_timeout())
            + Duration::from_secs(1);
        self.core
            .board
            .last_redrawn()
            .is_some_and(|at| now.saturating_duration_since(at) <= lag)
    }

    /// Sends the idle warning when its time has come in this idle spell; otherwise returns
    /// when it will (if it still has to be sent).
    fn idle_warning(&mut self, snapshot: &BoardReading, now: Instant) -> Option<Instant> {
        let fraction = self.core.config.events.idle_warning?;
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
        self.core.emitter.lifecycle(Event::IdleWarning { left });
        let diagnosis = self
            .port
            .diagnose(Some(self.recent(snapshot, now)), self.redrawing(now));
        self.core.emitter.lifecycle(Event::Diagnosis(diagnosis));
        None
    }

    /// At a stale decision: the idle warning of this idle spell when it was not sent yet (the
    /// monitor woke only after the deadline: its thread starved, or a suspended machine), with
    /// no time left, so a consumer always sees the warning before the first signal.
    fn late_idle_warning(&mut self) {
        if self.core.config.events.idle_warning.is_none() {
            return;
        }
        let snapshot = self.observer.adjust(self.core.board.read());
        let last = verdict::last_activity(&snapshot, &self.rules.caps);
        if self.timing.warned_for != Some(last) {
            self.timing.warned_for = Some(last);
            self.core.emitter.lifecycle(Event::IdleWarning {
                left: Duration::ZERO,
            });
        }
    }

    /// With the input-wait rule on: looks at the tree when it is due (every source quiet for a
    /// while), its processes sampled afresh (a grandchild started since the last sample is in
    /// the tree, whatever the check interval). Returns when to look next, or `Err` to look
    /// again now: the fresh sample showed work, or the tree has waited on input for the
    /// timeout (the event is sent and the ladder started).
    fn look_for_input_wait(
        &mut self,
        snapshot: &BoardReading,
        now: Instant,
    ) -> Result<Option<Instant>, ()> {
        let Some(rule) = self.input_wait.as_ref() else {
            return Ok(None);
        };
        let last = verdict::last_activity(snapshot, &self.rules.caps);
        if now < rule.next_look(last) {
            return Ok(Some(rule.next_look(last)));
        }
        if self.port.observes_tree()
            && self.timing.sampled_at != Some(now)
            && self.sample_children(now)
        {
            return Err(());
        }
        let diagnosis = self
            .port
            .diagnose(Some(self.recent(snapshot, now)), self.redrawing(now));
        let port = &self.port;
        let look = crate::input_wait::Look::from(&diagnosis, &|pid| port.read_count(pid));
        let Some(rule) = self.input_wait.as_mut() else {
            return Ok(None);
        };
        let noticed = rule.noticed();
        // The episode is judged on the sources' real last activity: an observation (observe
        // mode) starts quiet over for the verdict, not a new wait for input.
        let real_last = verdict::last_activity(&self.core.board.read(), &self.rules.caps);
        let wait = match rule.observe(now, real_last, look) {
            None => return Ok(Some(rule.next_look(last))),
            Some(crate::input_wait::Found::Notice(wait)) => {
                log::info!(
                    "session {}: {}",
                    self.core.id,
                    input_wait_line(self.pid, &wait, false)
                );
                let next = rule.next_look(last);
                self.core.emitter.lifecycle(Event::InputWait(wait));
                self.core.emitter.lifecycle(Event::Diagnosis(diagnosis));
                return Ok(Some(next));
            }
            Some(crate::input_wait::Found::End(wait)) => wait,
        };
        log::info!(
            "session {}: {}",
            self.core.id,
            input_wait_line(self.pid, &wait, !self.observing())
        );
        if !noticed {
            // Once per episode: not again when the notice gave it already.
            self.core.emitter.lifecycle(Event::InputWait(wait.clone()));
            self.core.emitter.lifecycle(Event::Diagnosis(diagnosis));
        }
        if self.observing() {
            // observe mode (issue 43)
            self.observe(now, Outcome::InputWait(wait));
            return Err(());
        }
        let steps = self.core.config.kill_ladder.effective();
        self.start_ladder(Outcome::InputWait(wait), steps, None, 0);
        Err(())
    }

    /// Samples descendant CPU; stamps the board when it shows work. Returns whether it did.
    fn sample_children(&mut self, now: Instant) -> bool {
        let Some(sample) = self.port.sample_tree(now) else {
            return false;
        };
        self.timing.sampled_at = Some(now);
        self.timing.next_sample = now + self.timing.interval;
        let active = sample.cpu && self.core.config.enabled.children;
        if active {
            self.core.board.stamp_at(&ActivitySource::Children, now);
        }
        let moved = sample.network;
        if moved {
            self.core.board.stamp_at(&ActivitySource::Network, now);
        }
        active || moved
    }

    /// At a stale decision: bytes the child wrote that no reader has taken yet (quietus was
    /// stopped, or a reader is slow) are output too. They count once, stamped at `now`; when the
    /// readers then record nothing for a whole idle timeout (a reader held by its sink), the
    /// same waiting bytes do not keep the child alive again.
    fn output_waiting(&mut self, now: Instant) -> bool {
        if !self.core.config.enabled.output || self.tap.pipes_empty() {
            return false;
        }
        let last_output = self.core.board.last(&ActivitySource::Output);
        if self.tap.waiting_counted_at == Some(last_output) {
            return false;
        }
        log::debug!(
            "session {}: output waits unread in a pipe at the idle deadline; it counts",
            self.core.id
        );
        self.core.board.stamp_at(&ActivitySource::Output, now);
        self.tap.waiting_counted_at = Some(self.core.board.last(&ActivitySource::Output));
        true
    }

    /// At a stale decision: whether the files source has yet to act on something it was asked
    /// (a delayed arming, begun now on its thread if it was not, with its look at what the
    /// program changed before it; a re-arm). The monitor never waits for it: the files source
    /// walks trees on its own thread.
    fn files_busy(&self) -> bool {
        match &self.files {
            Files::Watching(files) => !files.settled(),
            Files::Off | Files::LetGo(_) => false,
        }
    }

    /// Whether the files source counted activity since `snapshot`, the board the decision
    /// read (what a delayed arming found, say): the decision is made again.
    fn files_counted_since(&self, snapshot: &BoardReading) -> bool {
        let read = snapshot
            .sources
            .iter()
            .find(|s| s.source == ActivitySource::Files)
            .map_or(0, |s| s.count);
        self.core.board.count(&ActivitySource::Files) != read
    }
}

/// How often a stale decision asks again while the files source's thread is at work (real
/// time).
const FILES_BUSY_POLL: Duration = Duration::from_millis(20);

/// The log line of an input wait of the tree of `pid`: noticed, or `ending` it.
fn input_wait_line(pid: Pid, wait: &crate::diagnosis::InputWait, ending: bool) -> String {
    let what = format!("{} (pid {}) reads {}", wait.name, wait.pid, wait.target);
    let waited = HumanDuration(wait.waited);
    if ending {
        format!("pid {pid} waited {waited} on input ({what}); ending it")
    } else {
        format!("pid {pid} waits on input for {waited} ({what})")
    }
}

/// Observe mode (issue 43): the decisions recorded instead of ending the run (the bookkeeping
/// is `monitor::observe`'s).
impl<P: Port> Monitor<P> {
    /// Whether observe mode is on: the decision is recorded with [`Monitor::observe`] instead
    /// of ending the run.
    pub(super) fn observing(&self) -> bool {
        self.observer.on()
    }

    /// The run would have ended at `now` with `outcome`: recorded, logged and sent as an
    /// event; the program goes on.
    pub(super) fn observe(&mut self, now: Instant, mut outcome: Outcome) {
        if let Outcome::IdleTimeout(report) = &mut outcome {
            // How long each source had really been quiet (the verdict saw them from the last
            // observation on).
            report.sources =
                verdict::report(&self.core.board.read(), now, self.shared.idle_timeout()).sources;
        }
        let observation = self.observer.record(now, self.core.board.origin(), outcome);
        log::info!(
            "session {}: pid {} would have been ended after {} ({}); observing only",
            self.core.id,
            self.pid,
            HumanDuration(observation.at),
            observation.would_have_ended.name()
        );
        self.core.emitter.lifecycle(Event::Observed(observation));
    }
}
