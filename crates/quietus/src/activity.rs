//! The activity board: one timestamp and one counter per activity source.
//!
//! Sources (the output readers, [`Session::keepalive`](crate::Session::keepalive), later the file
//! and descendant observers) only *stamp* the board, with atomics; the monitor only *reads* it.
//! Nothing on the board ever blocks or calls back (a hold of the output, see
//! [`ActivityBoard::hold_output`], takes a lock for a few instructions).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::Clock;

/// A kind of activity that keeps a supervised child alive.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// Output that merely repeats itself (the same line again, digits aside: a spinner, a
    /// "retrying in 5s" loop; a redraw that shows nothing new on the screen), told apart from
    /// [`Output`](Self::Output) only when asked
    /// ([`MonitorConfigBuilder::repeated_output`](crate::config::MonitorConfigBuilder::repeated_output)).
    RepeatedOutput,
    /// A named pull-style probe ([`Probe`](crate::Probe)) that answered `true`. Make one with
    /// [`ActivitySource::probe`].
    Probe(Arc<str>),
}

impl ActivitySource {
    /// Every built-in source, in board order (probes come after them, in the order given). A
    /// slice: a source added in a later version lengthens it without changing its type.
    pub const ALL: &'static [ActivitySource] = &[
        ActivitySource::Output,
        ActivitySource::Files,
        ActivitySource::Children,
        ActivitySource::Keepalive,
        ActivitySource::Network,
        ActivitySource::RepeatedOutput,
    ];

    /// The board slot of a built-in source (`None` for a probe: probes have slots of their
    /// own).
    pub(crate) fn index(&self) -> Option<usize> {
        match self {
            ActivitySource::Output => Some(0),
            ActivitySource::Files => Some(1),
            ActivitySource::Children => Some(2),
            ActivitySource::Keepalive => Some(3),
            ActivitySource::Network => Some(4),
            ActivitySource::RepeatedOutput => Some(5),
            ActivitySource::Probe(_) => None,
        }
    }

    /// The probe source named `name` (`ActivitySource::probe("jobs")`).
    pub fn probe(name: &str) -> ActivitySource {
        ActivitySource::Probe(Arc::from(name))
    }

    /// The lower-case name used in reports (`"output"`, `"keepalive"`, a probe's own name).
    pub fn name(&self) -> &str {
        match self {
            ActivitySource::Output => "output",
            ActivitySource::Files => "files",
            ActivitySource::Children => "children",
            ActivitySource::Keepalive => "keepalive",
            ActivitySource::Network => "network",
            ActivitySource::RepeatedOutput => "repeated_output",
            ActivitySource::Probe(name) => name,
        }
    }

    /// The source of a report name: a built-in source's name, else the probe of that name.
    pub fn from_name(name: &str) -> ActivitySource {
        ActivitySource::ALL
            .iter()
            .find(|s| s.name() == name)
            .cloned()
            .unwrap_or_else(|| ActivitySource::probe(name))
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
    fn stamped(&self, source: &ActivitySource, at: Duration);
}

/// The latest activity of every source, stamped lock-free from any thread.
///
/// Every source starts "fresh" at the board's creation: a child that never does anything is
/// stale exactly one idle timeout after it was spawned.
pub struct ActivityBoard {
    clock: Clock,
    origin: Instant,
    slots: [Slot; ActivitySource::ALL.len()],
    /// One slot per probe, in the order the probes were given.
    probes: Vec<(Arc<str>, Slot)>,
    /// Who hears of every stamp (the `Activity` events), once set.
    observer: OnceLock<Arc<dyn StampObserver>>,
    /// Writes of the child's output to its consumer in flight, and how long they took.
    holds: crate::sync::Mutex<Holds>,
    /// The latest output that showed nothing new (a spinner, a bar redrawn the same, a
    /// heartbeat line), in nanoseconds since the origin, plus one (0: none yet). Not activity:
    /// the diagnosis reads it (a program that keeps redrawing waits on something).
    redrawn: AtomicU64,
}

/// The output held back by its consumer: writes of the child's output in flight (while the
/// consumer of quietus's stdout does not read, or an output callback does not return,
/// quietus reads none of the child's output, and the child blocks once its pipe is full:
/// not a stall of its own).
#[derive(Debug, Default)]
struct Holds {
    /// Writes in flight (one per stream at most).
    in_flight: u32,
    /// When the current hold began (the first write of those in flight).
    since: Option<Instant>,
    /// The same instant by the real clock: a write is blocked when it has been in flight for
    /// [`HELD_BACK`] of real time (a mock clock's jump while a quick write is in flight is no
    /// block).
    since_real: Option<std::time::Instant>,
    /// The holds that ended, in all (those blocked).
    total: Duration,
}

/// A write in flight for this long (real time) is held back by its consumer (a write to a
/// reader that keeps up takes microseconds): it counts as activity while it lasts, and in the
/// time held back.
pub(crate) const HELD_BACK: Duration = Duration::from_millis(50);

impl Holds {
    /// A write has been in flight for [`HELD_BACK`] of real time.
    fn blocked(&self) -> bool {
        self.since_real.is_some_and(|at| at.elapsed() >= HELD_BACK)
    }
}

/// A write of the child's output in flight, from [`ActivityBoard::hold_output`]; the hold
/// ends when it is dropped.
#[must_use = "the hold ends when this is dropped"]
pub(crate) struct OutputHold<'a> {
    board: &'a ActivityBoard,
}

impl Drop for OutputHold<'_> {
    fn drop(&mut self) {
        let mut holds = self.board.holds.lock();
        holds.in_flight = holds.in_flight.saturating_sub(1);
        if holds.in_flight == 0
            && let Some(since) = holds.since.take()
        {
            // The clock is read only for a write that was blocked (the reader's loop pays
            // nothing more for a write to a reader that keeps up).
            if holds.blocked() {
                let now = self.board.clock.now();
                holds.total += now.saturating_duration_since(since);
            }
            holds.since_real = None;
        }
    }
}

impl fmt::Debug for ActivityBoard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityBoard")
            .field("reading", &self.read())
            .finish()
    }
}

impl ActivityBoard {
    /// A board whose origin is `clock.now()`, with only [`ActivitySource::Keepalive`] enabled.
    pub fn new(clock: impl Into<Clock>) -> Self {
        Self::with_probes(clock.into(), &[])
    }

    /// A board with one enabled slot per probe name besides the built-in sources.
    pub(crate) fn with_probes(clock: Clock, probes: &[Arc<str>]) -> Self {
        let origin = clock.now();
        let board = Self {
            clock,
            origin,
            slots: Default::default(),
            probes: probes
                .iter()
                .map(|name| (name.clone(), Slot::default()))
                .collect(),
            observer: OnceLock::new(),
            holds: crate::sync::Mutex::default(),
            redrawn: AtomicU64::new(0),
        };
        board.set_enabled(&ActivitySource::Keepalive, true);
        for name in probes {
            board.set_enabled(&ActivitySource::Probe(name.clone()), true);
        }
        board
    }

    /// The slot of `source` (`None`: a probe this board does not have).
    fn slot(&self, source: &ActivitySource) -> Option<&Slot> {
        match source.index() {
            Some(index) => Some(&self.slots[index]),
            None => self
                .probes
                .iter()
                .find(|(name, _)| matches!(source, ActivitySource::Probe(n) if n == name))
                .map(|(_, slot)| slot),
        }
    }

    /// Marks a source as counting (or not) in the verdict (a probe the board does not have is
    /// ignored).
    pub fn set_enabled(&self, source: &ActivitySource, enabled: bool) {
        if let Some(slot) = self.slot(source) {
            slot.enabled.store(enabled, Ordering::Release);
        }
    }

    /// Marks a source as able (or unable) to observe activity; shown in the [`StaleReport`].
    ///
    /// [`StaleReport`]: crate::outcome::StaleReport
    pub(crate) fn set_available(&self, source: &ActivitySource, available: bool) {
        if let Some(slot) = self.slot(source) {
            slot.unavailable.store(!available, Ordering::Release);
        }
    }

    /// The clock the board stamps with.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Notes output that showed nothing new, now (no source is stamped).
    pub(crate) fn note_redrawn(&self) {
        let at = self.clock.now().saturating_duration_since(self.origin);
        let nanos = crate::clock::saturating_nanos(at).saturating_add(1);
        self.redrawn.fetch_max(nanos, Ordering::AcqRel);
    }

    /// The latest output that showed nothing new, if any.
    pub(crate) fn last_redrawn(&self) -> Option<Instant> {
        match self.redrawn.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.origin + Duration::from_nanos(n - 1)),
        }
    }

    /// Records activity of `source` now (by the board's clock).
    pub fn stamp(&self, source: &ActivitySource) {
        self.stamp_at(source, self.clock.now());
    }

    /// Records activity of `source` at `when`. Stamps only move forward. A probe the board
    /// does not have is ignored.
    pub(crate) fn stamp_at(&self, source: &ActivitySource, when: Instant) {
        let nanos = crate::clock::saturating_nanos(when.saturating_duration_since(self.origin));
        let Some(slot) = self.slot(source) else {
            return;
        };
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
    pub fn last(&self, source: &ActivitySource) -> Instant {
        let last = self
            .slot(source)
            .map_or(0, |s| s.last.load(Ordering::Acquire));
        self.origin + Duration::from_nanos(last)
    }

    /// How many times `source` was stamped.
    pub fn count(&self, source: &ActivitySource) -> u64 {
        self.slot(source)
            .map_or(0, |s| s.count.load(Ordering::Relaxed))
    }

    /// Whether `source` counts in the verdict ([`set_enabled`](Self::set_enabled)).
    pub fn is_enabled(&self, source: &ActivitySource) -> bool {
        self.slot(source)
            .is_some_and(|s| s.enabled.load(Ordering::Acquire))
    }

    /// Whether `source` can observe anything: `false` when its source gave up (a
    /// [`FileActivityTracker`](crate::sources::FileActivityTracker) whose root is a file).
    pub fn is_available(&self, source: &ActivitySource) -> bool {
        !self
            .slot(source)
            .is_some_and(|s| s.unavailable.load(Ordering::Acquire))
    }

    /// When the board was created.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// A write of the child's output to its consumer begins (a sink's write or callback). Once
    /// it has lasted [`HELD_BACK`], and until the returned hold is dropped, the child is not
    /// idle (quietus reads none of its output meanwhile), and the time counts as held back.
    pub(crate) fn hold_output(&self) -> OutputHold<'_> {
        let now = self.clock.now();
        let mut holds = self.holds.lock();
        if holds.in_flight == 0 {
            holds.since = Some(now);
            holds.since_real = Some(std::time::Instant::now());
        }
        holds.in_flight += 1;
        OutputHold { board: self }
    }

    /// How long the child's output was held back by its consumer so far (a hold in flight
    /// included, up to now): every hold of at least [`HELD_BACK`].
    pub(crate) fn held_back(&self) -> Duration {
        let now = self.clock.now();
        let holds = self.holds.lock();
        let current = holds
            .since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        holds.total
            + if holds.blocked() {
                current
            } else {
                Duration::ZERO
            }
    }

    /// Now, while a write of the output has been in flight for at least [`HELD_BACK`].
    fn held_now(&self) -> Option<Instant> {
        let now = self.clock.now();
        self.holds.lock().blocked().then_some(now)
    }

    /// Tests: the write in flight began [`HELD_BACK`] ago by the real clock (a blocked write,
    /// without waiting for one).
    #[cfg(test)]
    pub(crate) fn backdate_hold(&self) {
        let mut holds = self.holds.lock();
        if holds.since.is_some() {
            holds.since_real = std::time::Instant::now().checked_sub(HELD_BACK);
        }
    }

    /// A consistent-enough copy for the verdict (each source read once).
    pub(crate) fn read(&self) -> BoardReading {
        let probes = self
            .probes
            .iter()
            .map(|(name, _)| ActivitySource::Probe(name.clone()));
        let mut sources = Vec::with_capacity(ActivitySource::ALL.len() + self.probes.len());
        for source in ActivitySource::ALL.iter().cloned().chain(probes) {
            sources.push(SourceState {
                enabled: self.is_enabled(&source),
                available: self.is_available(&source),
                last: self.last(&source),
                count: self.count(&source),
                source,
            });
        }
        BoardReading {
            origin: self.origin,
            sources,
            held_now: self.held_now(),
        }
    }
}

/// The state of one source at a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// One reading of the board (each source read once), the input of the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardReading {
    /// When the board was created (the spawn).
    pub(crate) origin: Instant,
    /// Every source, in board order.
    pub(crate) sources: Vec<SourceState>,
    /// The snapshot's instant, while a write of the child's output is held back by its
    /// consumer (in flight for at least [`HELD_BACK`]); else `None`.
    pub(crate) held_now: Option<Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::MockClock;

    #[test]
    fn stamps_move_forward_only_and_count() {
        let clock = MockClock::new();
        let board = ActivityBoard::new(Clock::from(&clock));
        let t0 = board.origin();
        assert_eq!(board.last(&ActivitySource::Output), t0);
        clock.advance(Duration::from_secs(5));
        board.stamp(&ActivitySource::Output);
        board.stamp_at(&ActivitySource::Output, t0 + Duration::from_secs(1));
        assert_eq!(
            board.last(&ActivitySource::Output),
            t0 + Duration::from_secs(5)
        );
        assert_eq!(board.count(&ActivitySource::Output), 2);
        let snap = board.read();
        assert!(!snap.sources[0].enabled);
        assert!(!snap.sources[1].enabled);
        assert!(!snap.sources[2].enabled);
        assert!(snap.sources[3].enabled);
        assert!(!snap.sources[4].enabled);
        assert!(snap.sources.iter().all(|s| s.available));
    }

    #[test]
    fn a_write_in_flight_long_enough_is_held_back_until_the_last_one_ends() {
        let clock = MockClock::new();
        let board = ActivityBoard::new(Clock::from(&clock));
        let t0 = board.origin();
        let secs = Duration::from_secs;
        assert_eq!(board.read().held_now, None);
        // A write to a reader that keeps up (microseconds of real time): neither held nor
        // counted, even when the mock clock jumps meanwhile.
        let quick = board.hold_output();
        clock.advance(secs(1));
        assert_eq!(board.read().held_now, None);
        drop(quick);
        assert_eq!(board.held_back(), Duration::ZERO);
        let out = board.hold_output();
        board.backdate_hold(); // blocked
        clock.advance(secs(2));
        let err = board.hold_output(); // both streams held
        clock.advance(secs(3));
        assert_eq!(board.read().held_now, Some(t0 + secs(6)));
        assert_eq!(board.held_back(), secs(5));
        drop(out);
        clock.advance(secs(4));
        assert_eq!(board.read().held_now, Some(t0 + secs(10)));
        drop(err);
        clock.advance(secs(30));
        assert_eq!(board.read().held_now, None);
        assert_eq!(board.held_back(), secs(9));
        let again = board.hold_output();
        board.backdate_hold();
        clock.advance(secs(1));
        drop(again);
        assert_eq!(board.held_back(), secs(10));
        // Holding is not activity of the output source itself.
        assert_eq!(board.count(&ActivitySource::Output), 0);
    }

    #[test]
    fn probes_have_slots_of_their_own_and_names_are_interned() {
        let clock = MockClock::new();
        let jobs = ActivitySource::probe("jobs");
        assert_eq!(jobs, ActivitySource::probe(&String::from("jobs")));
        assert_eq!(jobs.name(), "jobs");
        assert_eq!(
            ActivitySource::from_name("children"),
            ActivitySource::Children
        );
        assert_eq!(ActivitySource::from_name("jobs"), jobs);
        let board = ActivityBoard::with_probes(Clock::from(&clock), &["jobs".into()]);
        clock.advance(Duration::from_secs(3));
        board.stamp(&jobs);
        board.stamp(&ActivitySource::probe("unknown")); // ignored
        assert_eq!(board.count(&jobs), 1);
        assert_eq!(board.last(&jobs), board.origin() + Duration::from_secs(3));
        assert!(board.is_enabled(&jobs));
        assert!(!board.is_enabled(&ActivitySource::probe("unknown")));
        let snap = board.read();
        assert_eq!(snap.sources.len(), ActivitySource::ALL.len() + 1);
        assert_eq!(snap.sources.last().unwrap().source, jobs);
    }
}
