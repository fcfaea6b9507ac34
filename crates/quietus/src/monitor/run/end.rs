//! The end of a run: the leader's exit (its leftovers ended, or left), the ladder under way,
//! the drain, and the result published.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::super::port::Port;
use super::super::wait::{POLL_MAX, POLL_MIN, Wake};
use super::phase::{Drain, End, Move, Phase};
use super::result::{self, Closing, DoneGuard};
use super::{Files, Monitor, Next};
use crate::activity::ActivitySource;
use crate::events::Event;
use crate::outcome::{MonitorResult, Outcome};
use crate::verdict;

/// The log target of the kill precision's figures: each session ended at a deadline says, at
/// debug level, how long after it its first signal went out, its tree was gone and its result
/// was out (`RUST_LOG=quietus::timing=debug`; `benches/serve.rs` reads them).
const TIMING: &str = "quietus::timing";

/// The session-clock timer while the drain waits for its own backlog (which only real-time
/// polls and `ReaderDone` end): far away, and the same instant every time, so it is re-used.
const BACKLOG_TIMER: Duration = Duration::from_secs(365 * 24 * 3600);

impl<P: Port> Monitor<P> {
    /// The leader exited while being watched: take the leftovers down, or leave them.
    pub(super) fn after_leader_exit(&mut self, now: Instant) {
        if !self.core.config.keep_leftovers && !self.tree_gone {
            // Adopting orphans, with no child but the leader (and this library's own)
            // (`tree_gone`): every descendant still alive would be a child of this process
            // now, so none is left, in the group or out of it. No sample, no scan.
            let left = self.port.leftovers(now);
            if let Some(memory) = left.memory {
                self.memory = memory;
            }
            if left.count() > 0 {
                log::info!(
                    "session {}: pid {} exited, leaving {} group member(s) and {} escaped \
                     descendant(s); ending them",
                    self.core.id,
                    self.pid,
                    left.members,
                    left.escapees
                );
                let steps = self.core.config.kill_ladder.effective();
                self.start_ladder(Outcome::Exited, steps, None, left.count());
                if let Phase::Ending { ladder, .. } = &mut self.phase {
                    ladder.leftovers = left.named;
                }
                return;
            }
        }
        self.start_drain(now);
    }

    /// The ladder is under way: its next step, or the drain once it is over.
    pub(super) fn ending(&mut self, now: Instant) -> Next {
        let exited = self.leader.exited();
        let Phase::Ending { ladder, .. } = &mut self.phase else {
            return Next::Continue(()); // cannot happen: called while ending
        };
        match ladder.step(self.port.layer(), now, exited) {
            Some(wake) => Next::Break(wake),
            None => {
                self.start_drain(now);
                Next::Continue(())
            }
        }
    }

    /// The tree is gone: the session is ended, file activity no longer matters, the leader
    /// is reaped (the ladder is done, or was not needed), and the output drains.
    fn start_drain(&mut self, now: Instant) {
        let drain = Drain::new(now, self.core.config.drain_cap);
        if !self.transition(Move::TreeGone { drain }) {
            return;
        }
        self.let_go_of_files();
        self.reap();
        let outcome = self
            .end()
            .map_or(Outcome::Exited, |end| end.outcome.clone());
        self.core.emitter.lifecycle(Event::Exited {
            outcome,
            status: self.leader.status(),
        });
    }

    /// How the run ended, once it has.
    fn end(&self) -> Option<&End> {
        self.phase.end()
    }

    /// The tree is gone: waits for the readers' end-of-file, or for quiet empty pipes, at most
    /// until the drain cap (those two only for pipes that strangers hold open: a reader behind
    /// on a pipe nobody holds is waited for, [`Monitor::own_backlog`]).
    pub(super) fn drain(&mut self, now: Instant, drain: Drain) -> Next {
        if self.tap.all_done() {
            self.transition(Move::Drained);
            return Next::Continue(());
        }
        let last_output = self
            .core
            .board
            .last(&ActivitySource::Output)
            .max(drain.since);
        let quiet_at = last_output + self.core.config.drain_quiet;
        let quiet = now >= quiet_at && self.tap.pipes_empty();
        if now >= drain.cap || quiet {
            // The cap and the quiet rule are for pipes that strangers hold open.
            if let Some(wake) = self.own_backlog(drain) {
                return Next::Break(wake);
            }
            if quiet {
                log::debug!(
                    "session {}: output quiet after exit; not waiting for end-of-file",
                    self.core.id
                );
            }
            self.transition(Move::Drained);
            return Next::Continue(());
        }
        // Bytes still sit in a pipe: look again shortly (real time: the reader
        // thread empties the pipe in real time, whatever the clock says).
        let poll = (now >= quiet_at).then_some(POLL_MIN);
        Next::Break(Wake {
            at: if now >= quiet_at {
                drain.cap
            } else {
                quiet_at.min(drain.cap)
            },
            poll,
        })
    }

    /// Past the drain cap (or the quiet rule): whether a reader still works through a pipe
    /// that nobody holds open any more, so that its end-of-file is only a matter of quietus's
    /// own pace (the log spill's disk and hash, or a sink that is slow but moving), not a
    /// stranger's. Then the drain goes on, bounded by the disk: every byte written before the
    /// tree ended is read and logged. A reader that neither moved since the last look (at least
    /// [`POLL_MAX`] earlier) nor waits for its log spill is stuck in its sink: the drain ends.
    fn own_backlog(&mut self, drain: Drain) -> Option<Wake> {
        let read = [0, 1].map(|i| self.shared.pumps[i].bytes.load(Ordering::Relaxed));
        let real_now = std::time::Instant::now();
        // Real time: the readers work in real time, whatever the clock says.
        let wake = Wake {
            at: drain.since + BACKLOG_TIMER,
            poll: Some(POLL_MAX),
        };
        let looked = drain.looked;
        if looked.is_some_and(|(at, _)| real_now.saturating_duration_since(at) < POLL_MAX) {
            // Woken early (another reader finished): judge on a full interval.
            return self.tap.any_hung_up().then_some(wake);
        }
        let waiting = self.tap.behind(read, looked.map(|(_, before)| before));
        if let Phase::Draining { drain, .. } = &mut self.phase {
            drain.looked = Some((real_now, read));
        }
        if waiting {
            log::debug!(
                "session {}: the tree is gone but a reader is still behind; reading on",
                self.core.id
            );
        }
        waiting.then_some(wake)
    }

    /// The program's run is over: file activity no longer matters. The tracker is dropped on
    /// a thread of its own, so that the kernel's teardown of the watches (an SRCU grace
    /// period, about 10 ms on Linux) runs beside the drain and the result instead of after
    /// them.
    fn let_go_of_files(&mut self) {
        let Files::Watching(files) = std::mem::replace(&mut self.files, Files::Off) else {
            return;
        };
        self.files = Files::LetGo(files.unwatched());
        if !files.has_armed() {
            return; // no watch yet: dropped at once, no thread needed
        }
        let dropped = std::thread::Builder::new()
            .name(format!("quietus-unwatch-{}", self.core.id))
            .spawn(move || drop(files));
        if let Err(e) = dropped {
            // The tracker came back with the error and is dropped here, on this thread.
            log::debug!(
                "session {}: no thread to drop the watches on: {e}",
                self.core.id
            );
        }
    }

    /// The run is over: detaches the readers, flushes the last output, publishes the result.
    pub(super) fn finish(mut self, done: DoneGuard) {
        self.port.session_over();
        for pump in &self.shared.pumps {
            pump.detached.store(true, Ordering::Release);
        }
        // A reader not started yet (nothing came through a pipe a stranger still holds, the
        // drain over): started now, it takes what comes next, as one always running would.
        self.port.start_readers_left();
        self.reap(); // not reaped at the drain: cannot happen, but never leave a zombie
        let now = self.core.clock.now();
        self.tap.flush_output(now, true, &self.core.emitter);
        self.shared.stdin.lock().take(); // nobody reads it any more
        if let Some(memory) = self.port.let_go_of_cgroup(self.core.config.keep_leftovers) {
            self.memory = memory;
        }
        // Told before the result is out: whoever waits for it may end this process at once,
        // and the guardian of the last session is reaped here (no process of quietus's
        // outlives the sessions, none is left for the caller to reap).
        self.port.release_guardian();
        let result = self.result(&done);
        log::debug!("session {}: {:?}", self.core.id, result);
        self.core.emitter.lifecycle(Event::Closed);
        let timing = self.end().and_then(|end| end.ladder.after_deadline);
        let published = self.core.clock.now();
        done.publish(result);
        if let Some((due, signal, gone)) = timing {
            // After the result is out, not to delay it: what the kill precision is made of.
            log::debug!(
                target: TIMING,
                "session {} pid {}: after its deadline, first signal {} us, tree gone {} us, \
                 result {} us",
                self.core.id,
                self.pid,
                signal.as_micros(),
                gone.map_or(-1, |gone| gone.as_micros() as i128),
                published.saturating_duration_since(due).as_micros(),
            );
        }
    }

    /// The result of the run, as it stands (its end is [`Outcome::Exited`] before it has one).
    fn result(&self, done: &DoneGuard) -> MonitorResult {
        let now = self.core.clock.now();
        let mut end = self.end().cloned().unwrap_or_else(|| End {
            outcome: Outcome::Exited,
            ladder: super::phase::LadderRecord::default(),
        });
        // A tree that cannot be seen (no cgroup, no `/proc` of this pid namespace) is never
        // confirmed gone: its escapees are unknown.
        end.ladder.unproven |= !end.ladder.signals_sent.is_empty() && self.port.tree_unseen();
        let closing = Closing {
            end,
            status: self.leader.status(),
            runtime: now.saturating_duration_since(self.core.board.origin()),
            activity: verdict::report(&self.core.board.read(), now, self.shared.idle_timeout())
                .sources,
            // Every chunk read is written and hashed first (bounded by the disk).
            logs: self.tap.logs(),
            events_dropped: self.core.emitter.dropped(),
            output_complete: self.tap.all_done(),
            unwatched: self.files.unwatched(),
            completion: self.rules.completion.clone(),
            memory: self.memory,
            network_unavailable: self.network_unavailable.clone(),
            children_unavailable: self.children_unavailable.clone(),
            observations: self.observer.observations(), // observe mode (issue 43)
            observations_dropped: self.observer.dropped(),
        };
        result::build(done.facts(), &self.shared, closing)
    }
}
