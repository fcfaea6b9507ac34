//! Gap bookkeeping: every part of a watched tree that is (or was) not watched — a folder the
//! user may not read, a root that is not a folder or is too large to watch — with why and for
//! how long, for the report's `unavailable` ([`FileActivityTracker::unwatched`]). Times are
//! the session's clock's.
//!
//! [`FileActivityTracker::unwatched`]: super::FileActivityTracker::unwatched

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::outcome::{UnwatchedFolder, UnwatchedReason};

/// One part that is (or was) not watched.
#[derive(Debug)]
struct Gap {
    path: PathBuf,
    reason: UnwatchedReason,
    /// Since when it is not watched; `None` once it is watched again.
    since: Option<Instant>,
    /// The earlier stretches.
    total: Duration,
}

/// Every part not watched during the run, shared by the tracker's thread, `notify`'s event
/// handler (which asks for a retry when an open gap changes) and the handle (for the report).
#[derive(Debug, Default, Clone)]
pub(super) struct Gaps(Arc<crate::sync::Mutex<Vec<Gap>>>);

impl Gaps {
    /// Records that `path` cannot be watched from `now` (kept open if it already is).
    pub(super) fn open(&self, path: &Path, reason: UnwatchedReason, now: Instant) -> bool {
        let mut gaps = self.0.lock();
        match gaps.iter_mut().find(|g| g.path == path) {
            Some(gap) => {
                gap.reason = reason;
                gap.since.get_or_insert(now);
                false
            }
            None => {
                gaps.push(Gap {
                    path: path.to_path_buf(),
                    reason,
                    since: Some(now),
                    total: Duration::ZERO,
                });
                true
            }
        }
    }

    /// Records that every open gap `which` selects is watched (or gone) from `now`; returns
    /// how many were open.
    pub(super) fn close(&self, now: Instant, which: impl Fn(&Path) -> bool) -> usize {
        let mut closed = 0;
        for gap in self.0.lock().iter_mut() {
            if which(&gap.path)
                && let Some(since) = gap.since.take()
            {
                gap.total += now.saturating_duration_since(since);
                closed += 1;
            }
        }
        closed
    }

    /// The open gaps' paths.
    pub(super) fn open_paths(&self) -> Vec<PathBuf> {
        let gaps = self.0.lock();
        gaps.iter()
            .filter(|g| g.since.is_some())
            .map(|g| g.path.clone())
            .collect()
    }

    pub(super) fn is_open(&self, path: &Path) -> bool {
        self.0
            .lock()
            .iter()
            .any(|g| g.since.is_some() && g.path == path)
    }

    pub(super) fn report(&self, now: Instant) -> Vec<UnwatchedFolder> {
        self.0
            .lock()
            .iter()
            .map(|g| UnwatchedFolder {
                path: g.path.clone(),
                reason: g.reason.clone(),
                duration: g.total
                    + g.since
                        .map_or(Duration::ZERO, |s| now.saturating_duration_since(s)),
                still: g.since.is_some(),
            })
            .collect()
    }
}
