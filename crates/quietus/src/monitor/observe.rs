//! Observe mode (issue 43): everything but the ending.
//!
//! With [`MonitorConfig::observe`](crate::MonitorConfig::observe) on, each decision that would
//! start the kill ladder (the idle timeout, the hard timeout, an input wait, completion's
//! linger) is recorded as an [`Observation`] and sent as an
//! [`Event::Observed`](crate::Event::Observed) instead, and the program runs on to its own
//! end. The rules, kept here so that the monitor's loop only calls in at its decisions:
//!
//! - after an observation, quiet starts over: every source's last activity counts as at least
//!   that instant ([`Observer::adjust`] on the board's snapshot, before the pure verdict is
//!   asked), so the next stale observation comes only after another full idle timeout of
//!   quiet, and an input wait only after a new episode of the input-wait timeout;
//! - the hard timeout and completion are observed at most once each (their limits are off the
//!   verdict's once observed);
//! - everything else stays as it is: the leader's own exit ends the run, the leftovers and the
//!   drain after it are handled as usual, and the caller's terminate and kill still act.

use std::time::Instant;

use crate::activity::BoardReading;
use crate::outcome::{MAX_OBSERVATIONS, Observation, Outcome};
use crate::verdict::Limits;

/// The observation bookkeeping of one session.
#[derive(Debug, Default)]
pub(super) struct Observer {
    /// Observe mode is on.
    on: bool,
    /// The first observations, in order ([`MAX_OBSERVATIONS`] at most).
    observations: Vec<Observation>,
    /// Observations past the bound (not kept).
    dropped: u64,
    /// The instant of the latest observation: quiet starts over from it.
    observed_at: Option<Instant>,
    /// The hard timeout was observed (once at most).
    hard_observed: bool,
    /// Completion's end was observed (once at most).
    completion_observed: bool,
}

impl Observer {
    /// The bookkeeping of a session, observing when `on`.
    pub(super) fn new(on: bool) -> Self {
        Self {
            on,
            ..Self::default()
        }
    }

    /// Whether observe mode is on.
    pub(super) fn on(&self) -> bool {
        self.on
    }

    /// The board as the verdict sees it: every source's last activity at least the latest
    /// observation's instant (quiet starts over after an observation).
    pub(super) fn adjust(&self, mut snapshot: BoardReading) -> BoardReading {
        if let Some(at) = self.observed_at {
            for source in &mut snapshot.sources {
                source.last = source.last.max(at);
            }
        }
        snapshot
    }

    /// The verdict's limits without the hard deadline and completion's linger once they were
    /// observed.
    pub(super) fn limits<'a>(&self, mut limits: Limits<'a>) -> Limits<'a> {
        if self.hard_observed {
            limits.hard_deadline = None;
        }
        if self.completion_observed {
            limits.linger_until = None;
        }
        limits
    }

    /// Records that the run would have ended at `now` (`after` the spawn) with `would_have_ended`.
    pub(super) fn record(
        &mut self,
        now: Instant,
        origin: Instant,
        would_have_ended: Outcome,
    ) -> Observation {
        match would_have_ended {
            Outcome::HardTimeout { .. } => self.hard_observed = true,
            Outcome::Completed(_) => self.completion_observed = true,
            _ => {}
        }
        self.observed_at = Some(self.observed_at.map_or(now, |at| at.max(now)));
        let observation = Observation {
            at: now.saturating_duration_since(origin),
            would_have_ended,
        };
        if self.observations.len() < MAX_OBSERVATIONS {
            self.observations.push(observation.clone());
        } else {
            self.dropped += 1;
        }
        observation
    }

    /// How many observations were not kept (past [`MAX_OBSERVATIONS`]).
    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Every observation so far, for the result.
    pub(super) fn observations(&self) -> Vec<Observation> {
        self.observations.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::activity::{ActivitySource, SourceState};
    use crate::verdict::{self, Verdict};

    fn board(origin: Instant, last_ms: u64) -> BoardReading {
        BoardReading {
            origin,
            sources: [ActivitySource::Output, ActivitySource::Children]
                .into_iter()
                .map(|source| SourceState {
                    source,
                    enabled: true,
                    available: true,
                    last: origin + Duration::from_millis(last_ms),
                    count: 1,
                })
                .collect(),
            held_now: None,
        }
    }

    fn stale_report() -> Outcome {
        Outcome::IdleTimeout(verdict::report(
            &board(Instant::now(), 0),
            Instant::now(),
            Duration::from_secs(1),
        ))
    }

    /// A run keeps the first observations only (issue 51, point 4: `-i 1ms` made 4,404), and
    /// counts the rest.
    #[test]
    fn a_run_keeps_a_bounded_number_of_observations_and_counts_the_rest() {
        let t0 = Instant::now();
        let mut observer = Observer::new(true);
        for i in 0..MAX_OBSERVATIONS + 50 {
            let at = t0 + Duration::from_millis(i as u64);
            observer.record(at, t0, stale_report());
        }
        assert_eq!(observer.observations().len(), MAX_OBSERVATIONS);
        assert_eq!(observer.dropped(), 50);
        assert_eq!(observer.observations()[0].at, Duration::ZERO);
    }

    #[test]
    fn quiet_starts_over_after_an_observation() {
        let t0 = Instant::now();
        let idle = Duration::from_secs(3);
        let mut observer = Observer::new(true);
        let limits = Limits::new(idle, None);
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Quiet since 1 s: stale at 4 s.
        let snapshot = observer.adjust(board(t0, 1_000));
        assert!(matches!(
            verdict::decide(&snapshot, at(4), observer.limits(limits)),
            Verdict::Stale { .. }
        ));
        let seen = observer.record(at(4), t0, stale_report());
        assert_eq!(seen.at, Duration::from_secs(4));
        // Still quiet: the next one only a whole idle timeout after the observation.
        let snapshot = observer.adjust(board(t0, 1_000));
        assert_eq!(
            verdict::decide(&snapshot, at(5), observer.limits(limits)),
            Verdict::Wait { until: at(7) }
        );
        assert!(matches!(
            verdict::decide(&snapshot, at(7), observer.limits(limits)),
            Verdict::Stale { .. }
        ));
        // Activity after the observation counts as always.
        let snapshot = observer.adjust(board(t0, 6_000));
        assert_eq!(
            verdict::decide(&snapshot, at(7), observer.limits(limits)),
            Verdict::Wait { until: at(9) }
        );
    }

    #[test]
    fn the_hard_timeout_and_completion_are_observed_once() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut observer = Observer::new(true);
        let limits = Limits {
            linger_until: Some(at(2)),
            ..Limits::new(Duration::from_secs(60), Some(at(5)))
        };
        let snapshot = observer.adjust(board(t0, 0));
        assert_eq!(
            verdict::decide(&snapshot, at(2), observer.limits(limits)),
            Verdict::Completed { deadline: at(2) }
        );
        let seen = crate::outcome::CompletionSeen::File {
            path: "done".into(),
            after: Duration::from_secs(1),
        };
        observer.record(at(2), t0, Outcome::Completed(seen));
        let snapshot = observer.adjust(board(t0, 0));
        assert_eq!(
            verdict::decide(&snapshot, at(5), observer.limits(limits)),
            Verdict::HardDeadline { deadline: at(5) }
        );
        observer.record(
            at(5),
            t0,
            Outcome::HardTimeout {
                after: Duration::from_secs(5),
            },
        );
        let snapshot = observer.adjust(board(t0, 0));
        // Neither again: only the idle timeout, from the last observation on.
        assert_eq!(
            verdict::decide(&snapshot, at(6), observer.limits(limits)),
            Verdict::Wait { until: at(65) }
        );
        let kinds: Vec<_> = observer
            .observations()
            .iter()
            .map(|o| o.would_have_ended.name())
            .collect();
        assert_eq!(kinds, ["completed", "hard_timeout"]);
    }

    #[test]
    fn off_it_changes_nothing() {
        let t0 = Instant::now();
        let observer = Observer::new(false);
        assert!(!observer.on());
        assert_eq!(observer.adjust(board(t0, 7)), board(t0, 7));
        let limits = Limits::new(Duration::from_secs(1), Some(t0));
        assert_eq!(observer.limits(limits), limits);
        assert!(observer.observations().is_empty());
    }
}
