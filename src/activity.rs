//! The activity board: one timestamp and one counter per activity source.
//!
//! Sources (the output readers, [`Session::keepalive`](crate::Session::keepalive), later the file
//! and descendant observers) only *stamp* the board, with atomics; the monitor only *reads* it.
//! Nothing on the board ever blocks or calls back.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::Clock;

/// A kind of activity that keeps a supervised child alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ActivitySource {
    /// A read of more than 0 bytes from the child's stdout or stderr.
    Output,
    /// A create, modify, rename or remove under a watched folder (never a read).
    Files,
    /// CPU progress of the child's descendants between two samples.
    Children,
    /// An explicit keepalive from the caller. Always enabled.
    Keepalive,
    /// Bytes received or sent on the TCP sockets of the child's tree (Linux socket
    /// diagnostics), above a small floor: an open but silent connection is no activity.
    Network,
}

impl ActivitySource {
    /// Every source, in board order.
    pub const ALL: [ActivitySource; 5] = [
        ActivitySource::Output,
        ActivitySource::Files,
        ActivitySource::Children,
        ActivitySource::Keepalive,
        ActivitySource::Network,
    ];

    pub(crate) fn index(self) -> usize {
        match self {
            ActivitySource::Output => 0,
            ActivitySource::Files => 1,
            ActivitySource::Children => 2,
            ActivitySource::Keepalive => 3,
            ActivitySource::Network => 4,
        }
    }

    /// The lower-case name used in reports (`"output"`, `"keepalive"`).
    pub fn name(self) -> &'static str {
        match self {
            ActivitySource::Output => "output",
            ActivitySource::Files => "files",
            ActivitySource::Children => "children",
            ActivitySource::Keepalive => "keepalive",
            ActivitySource::Network => "network",
        }
    }
}

impl fmt::Display for ActivitySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Default)]
struct Slot {
    enabled: AtomicBool,
    /// Cleared by a source that cannot observe anything (a watched root that is a file).
    unavailable: AtomicBool,
    /// Nanoseconds after the board's origin of the latest stamp (0: none yet).
    last: AtomicU64,
    count: AtomicU64,
}

/// Told of every stamp on an [`ActivityBoard`], on the stamping thread, right after the stamp
/// is recorded. Must not block (the `Activity` events are its one implementation).
pub(crate) trait StampObserver: Send + Sync {
    /// `source` was stamped at `at` after the board's origin.
    fn stamped(&self, source: ActivitySource, at: Duration);
}

/// The latest activity of every source, stamped lock-free from any thread.
///
/// Every source starts "fresh" at the board's creation: a child that never does anything is
/// stale exactly one idle timeout after it was spawned.
pub struct ActivityBoard {
    clock: Arc<dyn Clock>,
    origin: Instant,
    slots: [Slot; ActivitySource::ALL.len()],
    /// Who hears of every stamp (the `Activity` events), once set.
    observer: OnceLock<Arc<dyn StampObserver>>,
}

impl fmt::Debug for ActivityBoard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityBoard")
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

impl ActivityBoard {
    /// A board whose origin is `clock.now()`, with only [`ActivitySource::Keepalive`] enabled.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let origin = clock.now();
        let board = Self {
            clock,
            origin,
            slots: Default::default(),
            observer: OnceLock::new(),
        };
        board.set_enabled(ActivitySource::Keepalive, true);
        board
    }

    /// Marks a source as counting (or not) in the verdict.
    pub fn set_enabled(&self, source: ActivitySource, enabled: bool) {
        self.slots[source.index()]
            .enabled
            .store(enabled, Ordering::Release);
    }

    /// Marks a source as able (or unable) to observe activity; shown in the [`StaleReport`].
    ///
    /// [`StaleReport`]: crate::StaleReport
    pub(crate) fn set_available(&self, source: ActivitySource, available: bool) {
        self.slots[source.index()]
            .unavailable
            .store(!available, Ordering::Release);
    }

    /// The clock the board stamps with.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Records activity of `source` now (by the board's clock).
    pub fn stamp(&self, source: ActivitySource) {
        self.stamp_at(source, self.clock.now());
    }

    /// Records activity of `source` at `when`. Stamps only move forward.
    pub(crate) fn stamp_at(&self, source: ActivitySource, when: Instant) {
        let nanos = crate::clock::saturating_nanos(when.saturating_duration_since(self.origin));
        let slot = &self.slots[source.index()];
        slot.last.fetch_max(nanos, Ordering::AcqRel);
        slot.count.fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = self.observer.get() {
            observer.stamped(source, Duration::from_nanos(nanos));
        }
    }

    /// Tells `observer` of every stamp from now on (the first observer set stays).
    pub(crate) fn observe(&self, observer: Arc<dyn StampObserver>) {
        let _ = self.observer.set(observer);
    }

    /// The instant of the latest stamp of `source` (the origin when there was none).
    pub fn last(&self, source: ActivitySource) -> Instant {
        self.origin + Duration::from_nanos(self.slots[source.index()].last.load(Ordering::Acquire))
    }

    /// How many times `source` was stamped.
    pub fn count(&self, source: ActivitySource) -> u64 {
        self.slots[source.index()].count.load(Ordering::Relaxed)
    }

    /// Whether `source` counts in the verdict ([`set_enabled`](Self::set_enabled)).
    pub fn is_enabled(&self, source: ActivitySource) -> bool {
        self.slots[source.index()].enabled.load(Ordering::Acquire)
    }

    /// Whether `source` can observe anything: `false` when its source gave up (a
    /// [`FileActivityTracker`](crate::parts::FileActivityTracker) whose root is a file).
    pub fn is_available(&self, source: ActivitySource) -> bool {
        !self.slots[source.index()]
            .unavailable
            .load(Ordering::Acquire)
    }

    /// When the board was created.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// A consistent-enough copy for the verdict (each source read once).
    pub(crate) fn snapshot(&self) -> BoardSnapshot {
        let mut sources = Vec::with_capacity(ActivitySource::ALL.len());
        for source in ActivitySource::ALL {
            let slot = &self.slots[source.index()];
            sources.push(SourceState {
                source,
                enabled: self.is_enabled(source),
                available: self.is_available(source),
                last: self.last(source),
                count: slot.count.load(Ordering::Relaxed),
            });
        }
        BoardSnapshot {
            origin: self.origin,
            sources,
        }
    }
}

/// The state of one source at a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SourceState {
    /// Which source.
    pub(crate) source: ActivitySource,
    /// Whether it counts.
    pub(crate) enabled: bool,
    /// Whether it can observe anything (a file tracker whose root is a file cannot).
    pub(crate) available: bool,
    /// Its latest activity (the board's origin when none).
    pub(crate) last: Instant,
    /// How many times it was stamped.
    pub(crate) count: u64,
}

/// A copy of the board, the input of the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardSnapshot {
    /// When the board was created (the spawn).
    pub(crate) origin: Instant,
    /// Every source, in board order.
    pub(crate) sources: Vec<SourceState>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MockClock;

    #[test]
    fn stamps_move_forward_only_and_count() {
        let clock = MockClock::new();
        let board = ActivityBoard::new(Arc::new(clock.clone()));
        let t0 = board.origin();
        assert_eq!(board.last(ActivitySource::Output), t0);
        clock.advance(Duration::from_secs(5));
        board.stamp(ActivitySource::Output);
        board.stamp_at(ActivitySource::Output, t0 + Duration::from_secs(1));
        assert_eq!(
            board.last(ActivitySource::Output),
            t0 + Duration::from_secs(5)
        );
        assert_eq!(board.count(ActivitySource::Output), 2);
        let snap = board.snapshot();
        assert!(!snap.sources[0].enabled);
        assert!(!snap.sources[1].enabled);
        assert!(!snap.sources[2].enabled);
        assert!(snap.sources[3].enabled);
        assert!(!snap.sources[4].enabled);
        assert!(snap.sources.iter().all(|s| s.available));
    }
}
