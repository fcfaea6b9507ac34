//! The decision, as a pure function: (board snapshot, now, limits) -> [`Verdict`].
//!
//! No threads, no I/O, no clock: every staleness rule is tested here with plain values. The
//! rules: the idle timeout over every enabled source; solo caps (a capped source's activity
//! counts only up to its cap after the last activity of any other source); the linger after
//! completion; the hard deadline; when a probe is asked.

use std::time::{Duration, Instant};

use crate::activity::{ActivitySource, BoardReading, SourceState};
use crate::outcome::{SourceActivity, StaleReport};

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
    /// Completion was seen and the linger is over (or the child went stale, or the hard
    /// deadline passed, during the linger: the work is done all the same).
    Completed { deadline: Instant },
}

/// The limits the verdict applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits<'a> {
    pub(crate) idle_timeout: Duration,
    pub(crate) hard_deadline: Option<Instant>,
    /// The solo cap of each capped source.
    pub(crate) caps: &'a [(ActivitySource, Duration)],
    /// Completion was seen: the end of its linger.
    pub(crate) linger_until: Option<Instant>,
}

impl<'a> Limits<'a> {
    /// Plain limits: an idle timeout and a hard deadline, no cap, no completion.
    pub(crate) fn new(idle_timeout: Duration, hard_deadline: Option<Instant>) -> Self {
        Self {
            idle_timeout,
            hard_deadline,
            caps: &[],
            linger_until: None,
        }
    }

    fn cap(&self, source: ActivitySource) -> Option<Duration> {
        self.caps
            .iter()
            .find(|(s, _)| *s == source)
            .map(|(_, cap)| *cap)
    }
}

/// A source's latest activity as the verdict counts it: capped at `cap` after the latest
/// activity of every other enabled source (or the start).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Counted {
    source: ActivitySource,
    last: Instant,
    /// The cap cut its activity short.
    capped: bool,
}

fn counted(board: &BoardReading, caps: &[(ActivitySource, Duration)]) -> Vec<Counted> {
    let limits = Limits {
        caps,
        ..Limits::new(Duration::ZERO, None)
    };
    let enabled: Vec<&SourceState> = board.sources.iter().filter(|s| s.enabled).collect();
    enabled
        .iter()
        .map(|s| match limits.cap(s.source.clone()) {
            None => Counted {
                source: s.source.clone(),
                last: s.last,
                capped: false,
            },
            Some(cap) => {
                let others = enabled
                    .iter()
                    .filter(|o| o.source != s.source)
                    .map(|o| o.last)
                    .fold(board.origin, Instant::max);
                let limit = others + cap;
                Counted {
                    source: s.source.clone(),
                    last: s.last.min(limit),
                    capped: s.last > limit,
                }
            }
        })
        .collect()
}

/// The latest activity that counts, of any enabled source (never earlier than the board's
/// origin), solo caps applied. Output held back by its consumer right now counts (the
/// snapshot's instant): quietus reads none of the child's output meanwhile, and the child
/// blocks on a pipe quietus cannot empty; once the hold ends, the reader reads what waits
/// (activity again), and the bytes still waiting at a deadline count once, as always.
pub(crate) fn last_activity(board: &BoardReading, caps: &[(ActivitySource, Duration)]) -> Instant {
    counted(board, caps)
        .iter()
        .map(|c| c.last)
        .chain(board.held_now)
        .fold(board.origin, Instant::max)
}

/// Decides. The hard deadline wins over staleness when both are due; after completion, the
/// first of the linger's end, staleness and the hard deadline ends the run as completed.
pub(crate) fn decide(board: &BoardReading, now: Instant, limits: Limits<'_>) -> Verdict {
    let stale_at = last_activity(board, limits.caps) + limits.idle_timeout;
    if let Some(linger_until) = limits.linger_until {
        let end = [Some(linger_until), Some(stale_at), limits.hard_deadline]
            .into_iter()
            .flatten()
            .fold(linger_until, Instant::min);
        return if now >= end {
            Verdict::Completed { deadline: end }
        } else {
            Verdict::Wait { until: end }
        };
    }
    if let Some(deadline) = limits.hard_deadline
        && now >= deadline
    {
        return Verdict::HardDeadline { deadline };
    }
    if now >= stale_at {
        return Verdict::Stale {
            deadline: stale_at,
            report: report_capped(board, now, limits),
        };
    }
    let until = match limits.hard_deadline {
        Some(hard) => stale_at.min(hard),
        None => stale_at,
    };
    Verdict::Wait { until }
}

/// How long every enabled source had been idle at `now`.
pub(crate) fn report(board: &BoardReading, now: Instant, idle_timeout: Duration) -> StaleReport {
    StaleReport {
        idle_timeout,
        children: None,
        capped: Vec::new(),
        diagnosis: None,
        sources: board
            .sources
            .iter()
            .filter(|s| s.enabled)
            .map(|s| SourceActivity {
                source: s.source.clone(),
                available: s.available,
                idle: now.saturating_duration_since(s.last),
                events: s.count,
            })
            .collect(),
    }
}

/// [`report`], with the sources whose solo cap was reached.
fn report_capped(board: &BoardReading, now: Instant, limits: Limits<'_>) -> StaleReport {
    let mut report = report(board, now, limits.idle_timeout);
    report.capped = counted(board, limits.caps)
        .into_iter()
        .filter(|c| c.capped)
        .map(|c| c.source)
        .collect();
    report
}

/// What to do with a probe at a stale decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeStep {
    /// Ask it now.
    Ask,
    /// It said yes less than a check interval ago: that answer still holds, unasked.
    StillYes,
    /// Leave it: its activity would not count (its solo cap is reached).
    Skip,
}

/// A probe is asked only at a stale decision, and at most once per check interval while it
/// keeps saying yes; a capped probe is not asked (its yes would not count).
pub(crate) fn probe_step(
    last_yes: Option<Instant>,
    capped: bool,
    now: Instant,
    interval: Duration,
) -> ProbeStep {
    if capped {
        ProbeStep::Skip
    } else if last_yes.is_some_and(|at| now < at + interval) {
        ProbeStep::StillYes
    } else {
        ProbeStep::Ask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::SourceState;
    use proptest::prelude::*;

    fn board(origin: Instant, stamps: &[(bool, u64)]) -> BoardReading {
        BoardReading {
            origin,
            sources: stamps
                .iter()
                .zip(ActivitySource::ALL)
                .map(|(&(enabled, ms), source)| SourceState {
                    source: source.clone(),
                    enabled,
                    available: true,
                    last: origin + Duration::from_millis(ms),
                    count: ms,
                })
                .collect(),
            held_now: None,
        }
    }

    #[test]
    fn silent_child_is_stale_exactly_one_timeout_after_spawn() {
        let t0 = Instant::now();
        let b = board(t0, &[(true, 0), (true, 0), (true, 0), (true, 0)]);
        let limits = Limits::new(Duration::from_secs(300), None);
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
        let limits = Limits::new(Duration::from_secs(300), None);
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
        let limits = Limits::new(Duration::from_secs(300), Some(t0 + Duration::from_secs(60)));
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

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// Output silent since the start, children busy at `children_ms`.
    fn busy_children(t0: Instant, children_ms: u64) -> BoardReading {
        board(t0, &[(true, 0), (true, 0), (true, children_ms), (true, 0)])
    }

    #[test]
    fn output_held_back_by_its_consumer_is_not_idle_but_the_hard_deadline_holds() {
        let t0 = Instant::now();
        let idle = secs(5);
        // Every source quiet since 1 s; a write of the output in flight since then (the
        // consumer of quietus's stdout does not read): at 300 s, not stale.
        let mut b = board(t0, &[(true, 1000), (true, 0), (true, 0), (true, 0)]);
        b.held_now = Some(t0 + secs(300));
        assert_eq!(
            decide(&b, t0 + secs(300), Limits::new(idle, None)),
            Verdict::Wait {
                until: t0 + secs(305)
            }
        );
        assert_eq!(last_activity(&b, &[]), t0 + secs(300));
        // Whatever the sources and their caps.
        let caps = [(ActivitySource::Output, secs(1))];
        let capped = Limits {
            caps: &caps,
            ..Limits::new(idle, None)
        };
        assert!(matches!(
            decide(&b, t0 + secs(300), capped),
            Verdict::Wait { .. }
        ));
        // The hard deadline still ends it.
        assert_eq!(
            decide(&b, t0 + secs(300), Limits::new(idle, Some(t0 + secs(200)))),
            Verdict::HardDeadline {
                deadline: t0 + secs(200)
            }
        );
        // No longer held: the sources' own activity decides (the report says how long each
        // was quiet).
        b.held_now = None;
        match decide(&b, t0 + secs(300), Limits::new(idle, None)) {
            Verdict::Stale { deadline, report } => {
                assert_eq!(deadline, t0 + secs(6));
                assert_eq!(report.get(ActivitySource::Output).unwrap().idle, secs(299));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_capped_source_keeps_the_child_alive_alone_only_up_to_its_cap() {
        let t0 = Instant::now();
        let caps = [(ActivitySource::Children, secs(600))];
        let limits = Limits {
            caps: &caps,
            ..Limits::new(secs(300), None)
        };
        // Children busy at 599 s: within the cap, it counts: stale at 899 s, not before.
        let b = busy_children(t0, 599_000);
        assert_eq!(
            decide(&b, t0 + secs(800), limits),
            Verdict::Wait {
                until: t0 + Duration::from_millis(899_000)
            }
        );
        // Busy all along (last sample at 1000 s): only 600 s of it count, stale at 900 s.
        let b = busy_children(t0, 1_000_000);
        assert_eq!(
            decide(&b, t0 + secs(899), limits),
            Verdict::Wait {
                until: t0 + secs(900)
            }
        );
        match decide(&b, t0 + secs(1000), limits) {
            Verdict::Stale { deadline, report } => {
                assert_eq!(deadline, t0 + secs(900));
                assert_eq!(report.capped, vec![ActivitySource::Children]);
                assert_eq!(report.get(ActivitySource::Children).unwrap().idle, secs(0));
                assert!(report.to_string().contains("children capped"), "{report}");
            }
            other => panic!("expected stale, got {other:?}"),
        }
        // Without the cap, the same board is never stale while the children work.
        assert!(matches!(
            decide(&b, t0 + secs(1000), Limits::new(secs(300), None)),
            Verdict::Wait { .. }
        ));
    }

    #[test]
    fn activity_of_another_source_lifts_the_cap() {
        let t0 = Instant::now();
        let caps = [(ActivitySource::Children, secs(600))];
        let limits = Limits {
            caps: &caps,
            ..Limits::new(secs(300), None)
        };
        // Output at 700 s: the children count again, up to 700 + 600 s.
        let b = board(
            t0,
            &[(true, 700_000), (true, 0), (true, 1_200_000), (true, 0)],
        );
        assert_eq!(
            decide(&b, t0 + secs(1200), limits),
            Verdict::Wait {
                until: t0 + secs(1500)
            }
        );
        let b = board(
            t0,
            &[(true, 700_000), (true, 0), (true, 5_000_000), (true, 0)],
        );
        assert_eq!(
            decide(&b, t0 + secs(1200), limits),
            Verdict::Wait {
                until: t0 + secs(1600)
            }
        );
        // A cap of a disabled source is no cap; a cap of an idle source changes nothing.
        let quiet = board(t0, &[(true, 0), (true, 0), (true, 0), (true, 0)]);
        assert_eq!(
            decide(&quiet, t0, limits),
            decide(&quiet, t0, Limits::new(secs(300), None))
        );
    }

    #[test]
    fn the_idle_warning_counts_capped_activity_the_same_way() {
        let t0 = Instant::now();
        let caps = [(ActivitySource::Children, secs(60))];
        let b = busy_children(t0, 500_000);
        assert_eq!(last_activity(&b, &caps), t0 + secs(60));
        assert_eq!(last_activity(&b, &[]), t0 + secs(500));
    }

    #[test]
    fn completion_ends_the_run_at_the_end_of_the_linger() {
        let t0 = Instant::now();
        // Output all along: completion at 10 s with a 5 s linger ends at 15 s all the same.
        let b = board(t0, &[(true, 14_000), (true, 0), (true, 0), (true, 0)]);
        let limits = Limits {
            linger_until: Some(t0 + secs(15)),
            ..Limits::new(secs(300), Some(t0 + secs(3600)))
        };
        assert_eq!(
            decide(&b, t0 + secs(12), limits),
            Verdict::Wait {
                until: t0 + secs(15)
            }
        );
        assert_eq!(
            decide(&b, t0 + secs(15), limits),
            Verdict::Completed {
                deadline: t0 + secs(15)
            }
        );
        // Stale, or at the hard deadline, during the linger: completed, sooner.
        let short = Limits {
            linger_until: Some(t0 + secs(15)),
            ..Limits::new(secs(2), Some(t0 + secs(3600)))
        };
        assert_eq!(
            decide(&b, t0 + secs(16), short),
            Verdict::Completed {
                deadline: t0 + secs(15)
            }
        );
        let quiet = board(t0, &[(true, 10_000), (true, 0), (true, 0), (true, 0)]);
        assert_eq!(
            decide(&quiet, t0 + secs(12), short),
            Verdict::Completed {
                deadline: t0 + secs(12)
            }
        );
        let hard = Limits {
            linger_until: Some(t0 + secs(15)),
            ..Limits::new(secs(300), Some(t0 + secs(13)))
        };
        assert_eq!(
            decide(&b, t0 + secs(13), hard),
            Verdict::Completed {
                deadline: t0 + secs(13)
            }
        );
    }

    #[test]
    fn probes_are_asked_at_most_once_per_interval_while_they_say_yes() {
        let t0 = Instant::now();
        let interval = secs(30);
        assert_eq!(probe_step(None, false, t0, interval), ProbeStep::Ask);
        assert_eq!(
            probe_step(Some(t0), false, t0 + secs(29), interval),
            ProbeStep::StillYes
        );
        assert_eq!(
            probe_step(Some(t0), false, t0 + secs(30), interval),
            ProbeStep::Ask
        );
        assert_eq!(probe_step(None, true, t0, interval), ProbeStep::Skip);
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
            let limits = Limits::new(
                Duration::from_millis(idle),
                hard.map(|h| t0 + Duration::from_millis(h)),
            );
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
            let limits = Limits::new(Duration::from_millis(idle), None);
            let all_old = now_i.saturating_duration_since(t0) >= limits.idle_timeout
                && b.sources.iter().filter(|s| s.enabled)
                    .all(|s| now_i.saturating_duration_since(s.last) >= limits.idle_timeout);
            let v = decide(&b, now_i, limits);
            prop_assert_eq!(all_old, matches!(v, Verdict::Stale { .. }), "{:?}", v);
        }

        #[test]
        fn caps_only_ever_shorten_life_and_wake_up_exactly(
            (stamps, idle, now, hard) in arb_case(),
            cap in 0u64..500_000,
            which in 0usize..4,
        ) {
            let t0 = Instant::now();
            let b = board(t0, &stamps);
            let now_i = t0 + Duration::from_millis(now);
            let caps = [(ActivitySource::ALL[which].clone(), Duration::from_millis(cap))];
            let plain = Limits::new(
                Duration::from_millis(idle),
                hard.map(|h| t0 + Duration::from_millis(h)),
            );
            let capped = Limits { caps: &caps, ..plain };
            prop_assert!(last_activity(&b, &caps) <= last_activity(&b, &[]));
            if matches!(decide(&b, now_i, plain), Verdict::Stale { .. }) {
                let v = decide(&b, now_i, capped);
                prop_assert!(matches!(v, Verdict::Stale { .. }), "{:?}", v);
            }
            if let Verdict::Wait { until } = decide(&b, now_i, capped) {
                prop_assert!(until > now_i);
                let at = decide(&b, until, capped);
                prop_assert!(!matches!(at, Verdict::Wait { .. }), "{:?}", at);
            }
        }

        #[test]
        fn wake_up_is_exactly_the_next_change((stamps, idle, now, hard) in arb_case()) {
            let t0 = Instant::now();
            let b = board(t0, &stamps);
            let now_i = t0 + Duration::from_millis(now);
            let limits = Limits::new(
                Duration::from_millis(idle),
                hard.map(|h| t0 + Duration::from_millis(h)),
            );
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
