//! The extent of a watched root, measured before it is watched: a root never leads the watches
//! onto another filesystem (a folder of another device met inside it is left out, and the
//! folders above it are watched alone), a root on a pseudo-filesystem (`/proc`, `/sys`, a
//! cgroup, `/dev`) is never watched, and one session takes at most [`MAX_WATCHED_FOLDERS`]
//! watches for a root: a larger one (`.agent` a link to `/`, say) is not watched, and the
//! report's `unavailable` says so, instead of arming tens of thousands of watches whose churn
//! would hide a stall.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The folders one session may watch under one root. A larger root is not watched at all (a
/// part of it would count some activity and miss the rest).
pub(super) const MAX_WATCHED_FOLDERS: usize = 8192;

/// What a root's tree holds, as far as watching it goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Extent {
    /// Within the bound; the folders of another filesystem met inside it (not entered).
    Fits {
        /// The mount points inside the root, never watched.
        foreign: Vec<PathBuf>,
    },
    /// Not to be watched, and why (in the report's words).
    Refused(String),
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
        };
    };
    if let Some(kind) = pseudo_filesystem(dir, meta.dev()) {
        return Extent::Refused(format!(
            "is on a pseudo-filesystem ({kind}), which quietus never watches"
        ));
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
                return Extent::Refused(format!(
                    "has more than {bound} folders to watch, the most one session watches \
                     under a root; name a smaller folder to watch"
                ));
            }
            stack.push(entry.path());
        }
    }
    Extent::Fits { foreign }
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
                foreign: Vec::new()
            }
        );
        let Extent::Refused(why) = survey(dir.path(), 10) else {
            panic!("11 folders fit a bound of 10");
        };
        assert!(why.contains("more than 10 folders"), "{why}");
    }

    /// `/` holds more folders than a small bound; `/proc` is never watched at all.
    #[test]
    fn the_whole_machine_is_refused_and_proc_never_watched() {
        let Extent::Refused(why) = survey(Path::new("/"), 100) else {
            panic!("/ fits a bound of 100");
        };
        assert!(why.contains("more than"), "{why}");
        if Path::new("/proc/self").exists() {
            let Extent::Refused(why) = survey(Path::new("/proc"), MAX_WATCHED_FOLDERS) else {
                panic!("/proc may be watched");
            };
            assert!(why.contains("pseudo-filesystem (proc)"), "{why}");
        }
    }
}
