//! The decision, as a pure function: (board snapshot, now, limits) -> [`Verdict`].
//!
//! No threads, no I/O, no clock: every staleness rule is tested here with plain values.

use std::time::{Duration, Instant};

use crate::activity::BoardSnapshot;
use crate::outcome::{SourceIdle, StaleReport};

/// What the monitor should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing to do before `until`, the next instant at which the answer can change.
    Wait { until: Instant },
    /// Every enabled source has been quiet for the idle timeout since `deadline`.
    Stale {
        deadline: Instant,
        report: StaleReport,
    },
    /// The hard deadline has passed.
    HardDeadline { deadline: Instant },
}

/// The limits the verdict applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) idle_timeout: Duration,
    pub(crate) hard_deadline: Option<Instant>,
}

/// The latest activity of any enabled source (never earlier than the board's origin).
pub(crate) fn last_activity(board: &BoardSnapshot) -> Instant {
    board
        .sources
        .iter()
        .filter(|s| s.enabled)
        .map(|s| s.last)
        .fold(board.origin, Instant::max)
}

/// Decides. The hard deadline wins over staleness when both are due.
pub(crate) fn decide(board: &BoardSnapshot, now: Instant, limits: Limits) -> Verdict {
    if let Some(deadline) = limits.hard_deadline
        && now >= deadline
    {
        return Verdict::HardDeadline { deadline };
    }
    let stale_at = last_activity(board) + limits.idle_timeout;
    if now >= stale_at {
        return Verdict::Stale {
            deadline: stale_at,
            report: report(board, now, limits.idle_timeout),
        };
    }
    let until = match limits.hard_deadline {
        Some(hard) => stale_at.min(hard),
        None => stale_at,
    };
    Verdict::Wait { until }
}

/// How long every enabled source had been idle at `now`.
pub(crate) fn report(board: &BoardSnapshot, now: Instant, idle_timeout: Duration) -> StaleReport {
    StaleReport {
        idle_timeout,
        children: None,
        diagnosis: None,
        sources: board
            .sources
            .iter()
            .filter(|s| s.enabled)
            .map(|s| SourceIdle {
                source: s.source,
                available: s.available,
                idle: now.saturating_duration_since(s.last),
                events: s.count,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::{ActivitySource, SourceState};
    use proptest::prelude::*;

    fn board(origin: Instant, stamps: &[(bool, u64)]) -> BoardSnapshot {
        BoardSnapshot {
            origin,
            sources: stamps
                .iter()
                .zip(ActivitySource::ALL)
                .map(|(&(enabled, ms), source)| SourceState {
                    source,
                    enabled,
                    available: true,
                    last: origin + Duration::from_millis(ms),
                    count: ms,
                })
                .collect(),
        }
    }

    #[test]
    fn silent_child_is_stale_exactly_one_timeout_after_spawn() {
        let t0 = Instant::now();
        let b = board(t0, &[(true, 0), (true, 0), (true, 0), (true, 0)]);
        let limits = Limits {
            idle_timeout: Duration::from_secs(300),
            hard_deadline: None,
        };
        assert_eq!(
            decide(&b, t0 + Duration::from_secs(299), limits),
            Verdict::Wait {
                until: t0 + Duration::from_secs(300)
            }
        );
        match decide(&b, t0 + Duration::from_secs(300), limits) {
            Verdict::Stale { deadline, report } => {
                assert_eq!(deadline, t0 + Duration::from_secs(300));
                assert_eq!(report.sources.len(), 4);
                assert!(
                    report
                        .sources
                        .iter()
                        .all(|s| s.idle == Duration::from_secs(300))
                );
            }
            other => panic!("expected stale, got {other:?}"),
        }
    }

    #[test]
    fn disabled_sources_neither_count_nor_appear() {
        let t0 = Instant::now();
        let b = board(
            t0,
            &[
                (false, 250_000),
                (false, 280_000),
                (false, 290_000),
                (true, 0),
            ],
        );
        let limits = Limits {
            idle_timeout: Duration::from_secs(300),
            hard_deadline: None,
        };
        match decide(&b, t0 + Duration::from_secs(300), limits) {
            Verdict::Stale { report, .. } => {
                assert_eq!(report.sources.len(), 1);
                assert_eq!(report.sources[0].source, ActivitySource::Keepalive);
            }
            other => panic!("expected stale, got {other:?}"),
        }
    }

    #[test]
    fn hard_deadline_wins_and_bounds_the_wait() {
        let t0 = Instant::now();
        let b = board(t0, &[(true, 10_000), (true, 0), (true, 0), (true, 0)]);
        let limits = Limits {
            idle_timeout: Duration::from_secs(300),
            hard_deadline: Some(t0 + Duration::from_secs(60)),
        };
        assert_eq!(
            decide(&b, t0, limits),
            Verdict::Wait {
                until: t0 + Duration::from_secs(60)
            }
        );
        assert_eq!(
            decide(&b, t0 + Duration::from_secs(60), limits),
            Verdict::HardDeadline {
                deadline: t0 + Duration::from_secs(60)
            }
        );
    }

    fn arb_case() -> impl Strategy<Value = (Vec<(bool, u64)>, u64, u64, Option<u64>)> {
        (
            prop::collection::vec((any::<bool>(), 0u64..1_000_000), 4),
            1u64..500_000,
            0u64..2_000_000,
            prop::option::of(1u64..2_000_000),
        )
    }

    proptest! {
        #[test]
        fn never_stale_while_any_enabled_source_is_fresh((stamps, idle, now, hard) in arb_case()) {
            let t0 = Instant::now();
            let b = board(t0, &stamps);
            let now_i = t0 + Duration::from_millis(now);
            let limits = Limits {
                idle_timeout: Duration::from_millis(idle),
                hard_deadline: hard.map(|h| t0 + Duration::from_millis(h)),
            };
            let fresh = b.sources.iter().any(|s| s.enabled
                && now_i.saturating_duration_since(s.last) < limits.idle_timeout)
                || now_i.saturating_duration_since(t0) < limits.idle_timeout;
            let v = decide(&b, now_i, limits);
            if fresh {
                prop_assert!(!matches!(v, Verdict::Stale { .. }), "{:?}", v);
            }
        }

        #[test]
        fn always_stale_once_every_enabled_source_is_old((stamps, idle, now, _hard) in arb_case()) {
            let t0 = Instant::now();
            let b = board(t0, &stamps);
            let now_i = t0 + Duration::from_millis(now);
            let limits = Limits { idle_timeout: Duration::from_millis(idle), hard_deadline: None };
            let all_old = now_i.saturating_duration_since(t0) >= limits.idle_timeout
                && b.sources.iter().filter(|s| s.enabled)
                    .all(|s| now_i.saturating_duration_since(s.last) >= limits.idle_timeout);
            let v = decide(&b, now_i, limits);
            prop_assert_eq!(all_old, matches!(v, Verdict::Stale { .. }), "{:?}", v);
        }

        #[test]
        fn wake_up_is_exactly_the_next_change((stamps, idle, now, hard) in arb_case()) {
            let t0 = Instant::now();
            let b = board(t0, &stamps);
            let now_i = t0 + Duration::from_millis(now);
            let limits = Limits {
                idle_timeout: Duration::from_millis(idle),
                hard_deadline: hard.map(|h| t0 + Duration::from_millis(h)),
            };
            if let Verdict::Wait { until } = decide(&b, now_i, limits) {
                prop_assert!(until > now_i);
                // Just before: still the same answer.
                let before = until - Duration::from_nanos(1);
                prop_assert_eq!(decide(&b, before, limits), Verdict::Wait { until });
                // At the instant: the answer has changed.
                let at = decide(&b, until, limits);
                prop_assert!(!matches!(at, Verdict::Wait { .. }), "{:?}", at);
            }
        }
    }
}
