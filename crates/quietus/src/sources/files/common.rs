//! What the parts of the files source share: the messages to the tracker's thread ([`Msg`]),
//! the way to post them counted ([`Poster`]), and the handles that the tracker, its thread's
//! jobs and `notify`'s event handler all hold ([`Common`]). Every job's own state is its own
//! file's (`rearm`'s roots, `scan`'s snapshot); only this is shared.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_channel::Sender;

use super::classes::PathFilter;
use super::gaps::Gaps;
use crate::activity::ActivityBoard;

/// What the tracker, and `notify`'s handler, ask of the worker thread.
pub(super) enum Msg {
    /// Look at every root again (one appeared, vanished or changed kind).
    Rearm,
    /// Try again to watch this folder (a part that could not be watched, or a new folder that
    /// cannot be read or that nothing watches yet).
    Retry(PathBuf),
    /// The system is out of watches: stat-scan instead.
    FallBack,
    /// Arm now if the watches are not armed yet; answer once they are.
    ArmNow(Sender<()>),
    /// The tracker is dropped.
    Stop,
}

/// The way to the tracker's thread, counting what it has yet to act on: the messages posted
/// to it that can change what is watched or counted (`Rearm`, `Retry`, `FallBack`), and a
/// delayed arming not done yet. When there is none, [`FileActivityTracker::arm_now`] has
/// nothing to wait for and returns at once, with no round trip through that thread (one that
/// a loaded machine may take milliseconds to schedule, at the very instant a stall is decided).
#[derive(Debug, Clone)]
pub(super) struct Poster {
    tx: Sender<Msg>,
    pending: Arc<AtomicUsize>,
}

impl Poster {
    /// A way to the thread reading `tx`'s other end; `delayed` counts a delayed arming as
    /// pending until it is done.
    pub(super) fn new(tx: Sender<Msg>, delayed: bool) -> Poster {
        Poster {
            tx,
            pending: Arc::new(AtomicUsize::new(usize::from(delayed))),
        }
    }

    /// Posts `msg` to the tracker's thread, counted until it is acted on.
    pub(super) fn post(&self, msg: Msg) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(msg).is_err() {
            self.done(); // the thread is gone: nothing will act on it
        }
    }

    /// Sends `msg` without counting it (`Stop`, `ArmNow`); whether the thread is there.
    pub(super) fn send(&self, msg: Msg) -> bool {
        self.tx.send(msg).is_ok()
    }

    /// One posted message (or the delayed arming) was acted on.
    pub(super) fn done(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Whether nothing posted is left to act on.
    pub(super) fn is_clear(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }
}

/// The handles every part of a tracker holds, each shared (cloning one shares them).
#[derive(Clone)]
pub(super) struct Common {
    /// Which paths count.
    pub(super) filter: Arc<PathFilter>,
    pub(super) board: Arc<ActivityBoard>,
    /// The parts that could not be watched.
    pub(super) gaps: Gaps,
    /// The way to the tracker's thread (and what it has yet to act on).
    pub(super) poster: Poster,
    /// Whether the roots are stat-scanned (the system ran out of watches, or told to).
    pub(super) scanning: Arc<AtomicBool>,
    /// Set when the arming begins.
    pub(super) arming: Arc<AtomicBool>,
    /// The stat scan's period (and the retries' of the parts not watched).
    pub(super) scan_interval: Duration,
}

#[cfg(test)]
impl Common {
    /// The handles of a tracker of `roots` as `config` filters them, with no thread behind
    /// its poster: for a job driven alone.
    pub(super) fn alone(
        config: &crate::config::FileWatchConfig,
        roots: Vec<PathBuf>,
        board: Arc<ActivityBoard>,
    ) -> Common {
        let filter = PathFilter::new(config, roots);
        filter.build().expect("valid globs");
        let (tx, _) = crossbeam_channel::unbounded();
        Common {
            filter: Arc::new(filter),
            board,
            gaps: Gaps::default(),
            poster: Poster::new(tx, false),
            scanning: Arc::new(AtomicBool::new(true)),
            arming: Arc::new(AtomicBool::new(true)),
            scan_interval: Duration::from_secs(1),
        }
    }
}
