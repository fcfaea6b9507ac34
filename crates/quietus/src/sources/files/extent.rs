//! The extent of a watched root, measured before it is watched: a root never leads the watches
//! onto another filesystem (a folder of another device met inside it is left out, and the
//! folders above it are watched alone), a root on a pseudo-filesystem (`/proc`, `/sys`, a
//! cgroup, `/dev`) is never watched, and one session takes at most [`MAX_WATCHED_FOLDERS`]
//! watches for its roots: a root beyond them (`.agent` a link to `/`, say) is not watched, and the
//! report's `unavailable` says so, instead of arming tens of thousands of watches whose churn
//! would hide a stall. The trackers of one process (a server's sessions) take at most
//! [`MAX_PROCESS_WATCHED_FOLDERS`] together: distinct roots add up (issue 51 item 15), and a
//! root beyond what the others left is refused the same way ([`Share`]).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::outcome::UnwatchedReason;

/// The folders one session may watch under its roots together. A root that does not fit in
/// what the others left is not watched at all (a part of it would count some activity and
/// miss the rest).
pub(super) const MAX_WATCHED_FOLDERS: usize = 8192;

/// The bound of a tracker made now: [`MAX_WATCHED_FOLDERS`] (a unit test of this thread may
/// set a smaller one).
pub(super) fn bound() -> usize {
    #[cfg(test)]
    if let Some(bound) = TEST_BOUND.get() {
        return bound;
    }
    MAX_WATCHED_FOLDERS
}

/// The folders every tracker of this process may watch together (eight sessions' worth): a
/// server's sessions whose roots differ add up, each within [`MAX_WATCHED_FOLDERS`]. The
/// kernel's per-user limit of inotify watches (`fs.inotify.max_user_watches`, 8,192 on older
/// kernels) is shared with the user's other programs, whose watches quietus must not starve.
pub(super) const MAX_PROCESS_WATCHED_FOLDERS: usize = 65_536;

/// The test hook of the process's bound (an environment variable read once, for the tests
/// of `serve`; no documented setting): a whole number of folders.
const PROCESS_BOUND_HOOK: &str = "QUIETUS_TEST_PROCESS_WATCH_BOUND";

/// The bound of this process: [`MAX_PROCESS_WATCHED_FOLDERS`], or the test hook's.
fn process_bound() -> usize {
    static BOUND: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BOUND.get_or_init(|| {
        std::env::var(PROCESS_BOUND_HOOK)
            .ok()
            .and_then(|bound| bound.parse().ok())
            .unwrap_or(MAX_PROCESS_WATCHED_FOLDERS)
    })
}

/// Per root folder watched in this process: its identity, its folders, how many trackers hold
/// it (trackers of the same folder share its watches: it counts once).
static HELD: crate::sync::Mutex<Vec<(FolderId, usize, usize)>> =
    crate::sync::Mutex::new(Vec::new());

/// One tracker's share of the process's bound: per root (by index), the folder it holds.
/// Dropped with the tracker's roots, it lets go of them.
#[derive(Debug, Default)]
pub(super) struct Share {
    held: Vec<Option<FolderId>>,
}

impl Share {
    /// Root `index` watches `folders` folders at `folder` from now on (what it held before is
    /// let go of first). `Err(bound)`: they do not fit in what this process's other roots
    /// left of its bound; the root then holds nothing.
    pub(super) fn take(
        &mut self,
        index: usize,
        folder: FolderId,
        folders: usize,
    ) -> Result<(), usize> {
        self.release(index);
        let mut held = HELD.lock();
        if let Some(entry) = held.iter_mut().find(|(id, ..)| *id == folder) {
            entry.1 = entry.1.max(folders);
            entry.2 += 1;
        } else {
            let bound = process_bound();
            let others: usize = held.iter().map(|(_, n, _)| n).sum();
            if others.saturating_add(folders) > bound {
                return Err(bound);
            }
            held.push((folder, folders, 1));
        }
        if self.held.len() <= index {
            self.held.resize(index + 1, None);
        }
        self.held[index] = Some(folder);
        Ok(())
    }

    /// Root `index` holds nothing of the process's bound from now on.
    pub(super) fn release(&mut self, index: usize) {
        let Some(folder) = self.held.get_mut(index).and_then(Option::take) else {
            return;
        };
        let mut held = HELD.lock();
        if let Some(at) = held.iter().position(|(id, ..)| *id == folder) {
            held[at].2 -= 1;
            if held[at].2 == 0 {
                held.swap_remove(at);
            }
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        for index in 0..self.held.len() {
            self.release(index);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// The bound of the trackers this test thread makes (their arming runs on it).
    pub(super) static TEST_BOUND: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// What a root's tree holds, as far as watching it goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Extent {
    /// Within the bound; the folders of another filesystem met inside it (not entered).
    Fits {
        /// The mount points inside the root, never watched.
        foreign: Vec<PathBuf>,
        /// The folders to watch (the root's own included).
        folders: usize,
    },
    /// Not to be watched, and why.
    Refused(UnwatchedReason),
}

/// The identity of a folder: device and inode.
pub(super) type FolderId = (u64, u64);

/// The identity of folder `dir` (followed if a link), if it can be looked at.
pub(super) fn folder_id(dir: &Path) -> Option<FolderId> {
    fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

/// Measures the tree at `dir` (followed if a link), walking only its own filesystem and
/// counting its folders up to `bound`.
pub(super) fn survey(dir: &Path, bound: usize) -> Extent {
    let Ok(meta) = fs::metadata(dir) else {
        // Gone or unreadable: the watch itself says what it is.
        return Extent::Fits {
            foreign: Vec::new(),
            folders: 1,
        };
    };
    if let Some(kind) = pseudo_filesystem(dir, meta.dev()) {
        return Extent::Refused(UnwatchedReason::PseudoFilesystem { kind });
    }
    let device = meta.dev();
    let mut foreign = Vec::new();
    let mut folders = 1;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue; // unreadable: the watch reports it as a gap
        };
        for entry in entries.flatten() {
            // The entry's type from the folder itself (no system call for a file, most of a
            // tree); a link inside a root is never watched through.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.dev() != device {
                foreign.push(entry.path());
                continue;
            }
            folders += 1;
            if folders > bound {
                return Extent::Refused(UnwatchedReason::TooManyFolders { bound });
            }
            stack.push(entry.path());
        }
    }
    Extent::Fits { foreign, folders }
}

/// The kind of pseudo-filesystem `dir` (on device `device`) is on, if it is on one.
fn pseudo_filesystem(dir: &Path, device: u64) -> Option<&'static str> {
    const KINDS: &[(u64, &str)] = &[
        (0x9fa0, "proc"),
        (0x6265_6572, "sysfs"),
        (0x0027_e0eb, "cgroup"),
        (0x6367_7270, "cgroup2"),
        (0x1cd1, "devpts"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x7363_6673, "securityfs"),
        (0xcafe_4a11, "bpf"),
        (0x6165_676c, "pstore"),
        (0x6265_6570, "configfs"),
        (0x6573_5543, "fusectl"),
        (0x4249_4e4d, "binfmt_misc"),
        (0x1980_0202, "mqueue"),
        (0x6e73_6673, "nsfs"),
    ];
    let kind = crate::process::sys::filesystem_kind(dir)?;
    if let Some((_, name)) = KINDS.iter().find(|(magic, _)| *magic == kind) {
        return Some(name);
    }
    crate::process::sys::is_devtmpfs(device).then_some("devtmpfs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_tree_fits_and_a_large_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            fs::create_dir_all(dir.path().join(format!("a{i}/b"))).unwrap();
        }
        assert_eq!(
            survey(dir.path(), 11),
            Extent::Fits {
                foreign: Vec::new(),
                folders: 11
            }
        );
        let Extent::Refused(why) = survey(dir.path(), 10) else {
            panic!("11 folders fit a bound of 10");
        };
        assert_eq!(why, UnwatchedReason::TooManyFolders { bound: 10 });
        assert!(why.to_string().contains("more than 10 folders"), "{why}");
    }

    /// `/` holds more folders than a small bound; `/proc` is never watched at all.
    #[test]
    fn the_whole_machine_is_refused_and_proc_never_watched() {
        let Extent::Refused(why) = survey(Path::new("/"), 100) else {
            panic!("/ fits a bound of 100");
        };
        assert_eq!(why, UnwatchedReason::TooManyFolders { bound: 100 });
        if Path::new("/proc/self").exists() {
            let Extent::Refused(why) = survey(Path::new("/proc"), MAX_WATCHED_FOLDERS) else {
                panic!("/proc may be watched");
            };
            assert_eq!(why, UnwatchedReason::PseudoFilesystem { kind: "proc" });
            assert!(
                why.to_string().contains("pseudo-filesystem (proc)"),
                "{why}"
            );
        }
    }
}

#[cfg(test)]
mod session_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::activity::{ActivityBoard, ActivitySource};
    use crate::config::FileWatchConfig;
    use crate::sources::files::FileActivityTracker;

    /// The bound is the session's, not each root's: a second root that does not fit in what
    /// the first left is not watched, and the tracker says so.
    #[test]
    fn the_roots_of_one_tracker_share_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        for root in ["a", "b"] {
            for i in 0..5 {
                fs::create_dir_all(dir.path().join(root).join(format!("{i}"))).unwrap();
            }
        }
        TEST_BOUND.set(Some(10));
        let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
        let config = FileWatchConfig {
            roots: vec!["a".into(), "b".into()],
            ..FileWatchConfig::default()
        };
        let tracker =
            FileActivityTracker::start(&config, dir.path(), board.clone(), Duration::from_secs(1))
                .unwrap();
        TEST_BOUND.set(None);
        let unwatched = tracker.unwatched();
        assert_eq!(unwatched.len(), 1, "{unwatched:?}");
        assert_eq!(unwatched[0].path, dir.path().join("b"));
        assert_eq!(
            unwatched[0].reason,
            UnwatchedReason::TooManyFolders { bound: 4 },
            "{unwatched:?}"
        );
        assert!(!board.is_available(&ActivitySource::Files));
    }
}
