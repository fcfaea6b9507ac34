//! Input waits caught early: a pure rule fed snapshots of the tree (like the verdict), that
//! says when the whole tree has been blocked on input for the configured time while every
//! source was quiet.
//!
//! A snapshot that finds a process blocked in `read` on its stdin says nothing about the time
//! before it: a child whose stdin is fed line by line is found in `read` at almost every look.
//! So each look also records every process's read count (`syscr` in `/proc/PID/io`); an
//! episode goes on only while those counts stay the same (and no source shows activity), and
//! starts again at the look that finds them changed. A count that cannot be read proves
//! nothing: the episode starts again.

use std::time::{Duration, Instant};

use crate::diagnosis::{Diagnosis, InputWait, StallKind};
use crate::pid::Pid;

/// One look at the tree: the diagnosis of one snapshot and every process's read count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Look {
    /// The reader, when the whole tree waits on input (nothing running or in disk wait).
    pub(crate) reader: Option<(Pid, String, String)>,
    /// Every process's read count (`None`: unreadable).
    pub(crate) reads: Vec<(Pid, Option<u64>)>,
    /// The diagnosis it was built from.
    pub(crate) diagnosis: Diagnosis,
}

impl Look {
    /// Builds a look from a diagnosis and a read counter (`/proc/PID/io` in the monitor, a fake
    /// process table in tests).
    pub(crate) fn from(diagnosis: &Diagnosis, reads: &dyn Fn(Pid) -> Option<u64>) -> Self {
        let live = || diagnosis.processes.iter().filter(|p| p.state != "zombie");
        let busy = live().any(|p| matches!(p.kind, StallKind::Running | StallKind::DiskWait));
        let reader = (diagnosis.kind == StallKind::AwaitingInput && !busy)
            .then(|| live().find(|p| p.kind == StallKind::AwaitingInput))
            .flatten()
            .map(|p| {
                let target = p.target.clone().unwrap_or_else(|| "its input".to_owned());
                (p.pid, p.name.clone(), target)
            });
        Self {
            reader,
            reads: live().map(|p| (p.pid, reads(p.pid))).collect(),
            diagnosis: diagnosis.clone(),
        }
    }
}

/// The current episode: since when the tree is seen waiting with the same read counts.
#[derive(Debug)]
struct Episode {
    since: Instant,
    /// The last activity of any source when it started (activity since ends it).
    quiet_since: Instant,
    reads: Vec<(Pid, Option<u64>)>,
    /// The notice for this episode was given.
    noticed: bool,
    /// Its end was found (once per episode: in observe mode the tree goes on waiting, and the
    /// same wait is not found again).
    ended: bool,
}

/// What a look found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// The tree has waited the notice time: tell (once per episode), and go on.
    Notice(InputWait),
    /// The tree has waited the timeout: end the child.
    End(InputWait),
}

/// The rule: when to look, and whether a look finds an episode of the notice's or the
/// timeout's length.
#[derive(Debug)]
pub(crate) struct InputWaitRule {
    /// The input_wait event after this long (`MonitorConfig::input_wait_notice`).
    notice: Option<Duration>,
    /// The end after this long (`MonitorConfig::input_wait_timeout`).
    timeout: Option<Duration>,
    /// The shorter of the two: what the looks are paced by.
    timeout_or_notice: Duration,
    looked_at: Option<Instant>,
    episode: Option<Episode>,
}

impl InputWaitRule {
    /// The rule for an event after `notice` and an end after `timeout`; `None` when both are
    /// off.
    pub(crate) fn new(notice: Option<Duration>, timeout: Option<Duration>) -> Option<Self> {
        let first = match (notice, timeout) {
            (Some(n), Some(t)) => n.min(t),
            (Some(d), None) | (None, Some(d)) => d,
            (None, None) => return None,
        };
        Some(Self {
            notice,
            timeout,
            timeout_or_notice: first,
            looked_at: None,
            episode: None,
        })
    }

    /// Looks start once every source has been quiet this long: min(timeout / 2, 1 s), so the
    /// snapshot's cost stays off the common path.
    fn quiet_first(&self) -> Duration {
        (self.timeout_or_notice / 2).min(Duration::from_secs(1))
    }

    /// Between looks: timeout / 4, within 50..=250 ms (whatever the check interval), so the
    /// end comes at most quiet_first + 250 ms past the timeout.
    fn interval(&self) -> Duration {
        (self.timeout_or_notice / 4).clamp(Duration::from_millis(50), Duration::from_millis(250))
    }

    /// The next instant to look, given the last activity of any source.
    pub(crate) fn next_look(&self, last_activity: Instant) -> Instant {
        let quiet = last_activity + self.quiet_first();
        match self.looked_at {
            Some(at) if at >= last_activity => quiet.max(at + self.interval()),
            _ => quiet,
        }
    }

    /// Takes one look at `now`: what it finds once the tree has been seen waiting, with
    /// unchanged read counts and no activity, for the notice (once per episode) or the timeout.
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        last_activity: Instant,
        look: Look,
    ) -> Option<Found> {
        self.looked_at = Some(now);
        let Some((pid, name, target)) = look.reader else {
            self.episode = None;
            return None;
        };
        let proven = look.reads.iter().all(|(_, n)| n.is_some());
        let goes_on = self
            .episode
            .as_ref()
            .is_some_and(|e| proven && e.quiet_since == last_activity && e.reads == look.reads);
        if !goes_on {
            self.episode = Some(Episode {
                since: now,
                quiet_since: last_activity,
                reads: look.reads,
                noticed: false,
                ended: false,
            });
        }
        let episode = self.episode.as_mut()?;
        let waited = now.saturating_duration_since(episode.since);
        if !proven {
            return None;
        }
        let wait = InputWait {
            pid,
            name,
            target,
            waited,
            diagnosis: look.diagnosis,
        };
        if self.timeout.is_some_and(|t| waited >= t) {
            if episode.ended {
                return None;
            }
            episode.ended = true;
            return Some(Found::End(wait));
        }
        if self.notice.is_some_and(|n| waited >= n) && !episode.noticed {
            episode.noticed = true;
            return Some(Found::Notice(wait));
        }
        None
    }

    /// Whether the event was given for the current episode already (at its notice).
    pub(crate) fn noticed(&self) -> bool {
        self.episode.as_ref().is_some_and(|e| e.noticed)
    }
}

#[cfg(test)]
mod tests;
