//! The stat-scan fallback: when the OS runs out of watches or watcher instances (or when told
//! to), the roots are walked at the scan interval and a fingerprint of every entry that counts
//! compared with the previous walk's (nanosecond mtime and status-change time, size and inode;
//! a folder's mode and owner). A walk never follows a link inside a root, nor leaves the
//! root's filesystem.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::classes::{PathFilter, Place};
use super::common::Common;
use super::rearm::RootState;
use crate::activity::ActivitySource;
use crate::outcome::UnwatchedReason;

/// Fingerprint of one entry for the stat scan: for a file its data and status change times
/// (nanoseconds), size and inode; for a folder its mode, owner, group and inode.
type Fingerprint = (i64, i64, i64, i64, u64, u64);

/// The stat scan's state: the fingerprints the last scan found.
#[derive(Default)]
pub(super) struct StatScan {
    snapshot: Option<HashMap<PathBuf, Fingerprint>>,
}

impl StatScan {
    /// One stat scan of every root watched in `roots`; stamps the board when anything that
    /// counts changed since the previous scan (the first scan only records a baseline).
    pub(super) fn scan(&mut self, common: &Common, roots: &[(PathBuf, RootState)]) {
        let mut now = HashMap::new();
        let mut unreadable = Vec::new();
        for (root, state) in roots {
            if state.is_watched() {
                collect(root, &common.filter, &mut now, &mut unreadable);
            }
        }
        // The folders that cannot be read are what this mode cannot see: exactly those are
        // the gaps now, and each is looked at again at the next scan.
        let at = common.board.clock().now();
        common.gaps.close(at, |gap| {
            !unreadable.iter().any(|(p, _)| p == gap)
                && !roots
                    .iter()
                    .any(|(root, state)| root == gap && !state.is_watched())
        });
        for (path, reason) in unreadable {
            if common.gaps.open(&path, reason.clone(), at) {
                log::warn!(
                    "files source: cannot read {} ({reason}); looking again every {:?}",
                    path.display(),
                    common.scan_interval
                );
            }
        }
        let changed = self.snapshot.as_ref().is_some_and(|before| *before != now);
        if changed {
            common.board.stamp(&ActivitySource::Files);
        }
        self.snapshot = Some(now);
    }
}

/// Walks `dir` without following symbolic links (entries by `lstat`) nor leaving its
/// filesystem (a folder of another device is not entered), handing every entry to
/// `visit` until it says stop (`true`; then this returns `true`), and every folder that
/// cannot be read (but for one that vanished) to `unreadable`.
pub(super) fn walk(
    dir: &Path,
    visit: &mut dyn FnMut(&Path, &fs::Metadata) -> bool,
    unreadable: &mut dyn FnMut(PathBuf, io::Error),
) -> bool {
    let device = fs::metadata(dir).map(|m| m.dev()).ok();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                if e.kind() != io::ErrorKind::NotFound {
                    unreadable(dir, e);
                }
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue }; // lstat: links not followed
            if device.is_some_and(|d| d != meta.dev()) {
                continue; // another filesystem (a mount inside the root): never entered
            }
            if visit(&path, &meta) {
                return true;
            }
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    false
}

/// Walks `dir` without following symbolic links, recording a fingerprint of every entry that
/// passes the filter (folders too: creating or removing one is activity), and the folders
/// that cannot be read, with why.
///
/// Metadata changes count, as they do under inotify (`IN_ATTRIB`): a file's status change
/// time moves with `chmod`, `chown`, `touch` and extended attributes, and a folder's mode,
/// owner and group are part of its fingerprint. A folder's own times are not: they change
/// with every entry added or removed, excluded ones too.
fn collect(
    dir: &Path,
    filter: &PathFilter,
    into: &mut HashMap<PathBuf, Fingerprint>,
    unreadable: &mut Vec<(PathBuf, UnwatchedReason)>,
) {
    let mut record = |path: &Path, meta: &fs::Metadata| {
        if filter.place(path) == Place::Inside(true) {
            let print = if meta.is_dir() {
                let (uid, gid) = (i64::from(meta.uid()), i64::from(meta.gid()));
                (i64::from(meta.mode()), uid, gid, 0, 0, meta.ino())
            } else {
                (
                    meta.mtime(),
                    meta.mtime_nsec(),
                    meta.ctime(),
                    meta.ctime_nsec(),
                    meta.size(),
                    meta.ino(),
                )
            };
            into.insert(path.to_path_buf(), print);
        }
        false
    };
    walk(dir, &mut record, &mut |dir, e| {
        unreadable.push((dir, UnwatchedReason::System(e.into())));
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::activity::ActivityBoard;
    use crate::clock::{Clock, MockClock};
    use crate::config::FileWatchConfig;

    /// The stat scan on its own (no thread, no watcher): the first scan is a baseline, a
    /// change that counts stamps the board once, an excluded file and a root not watched
    /// never do.
    #[test]
    fn the_scan_alone_stamps_what_changed_since_the_last_scan() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".agent");
        fs::create_dir(&root).unwrap();
        fs::write(root.join("plan.md"), "a").unwrap();
        let board = Arc::new(ActivityBoard::new(Clock::from(&MockClock::new())));
        let common = Common::alone(&FileWatchConfig::default(), vec![root.clone()], board);
        let files = || common.board.count(&ActivitySource::Files);
        let mut roots = vec![(root.clone(), RootState::Watched)];
        let mut scan = StatScan::default();
        scan.scan(&common, &roots);
        assert_eq!(files(), 0, "the first scan is a baseline");
        fs::write(root.join("debug.log"), "excluded").unwrap();
        scan.scan(&common, &roots);
        assert_eq!(files(), 0, "an excluded file never counts");
        fs::write(root.join("notes.md"), "new").unwrap();
        scan.scan(&common, &roots);
        assert_eq!(files(), 1, "a new file counts");
        scan.scan(&common, &roots);
        assert_eq!(files(), 1, "nothing changed since");
        roots[0].1 = RootState::Invalid;
        fs::write(root.join("more.md"), "unseen").unwrap();
        scan.scan(&common, &roots);
        scan.scan(&common, &roots);
        assert_eq!(
            files(),
            2,
            "the root's tree left the snapshot once, then nothing"
        );
    }
}
