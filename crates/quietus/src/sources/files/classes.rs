//! Event classes: which paths count ([`PathFilter`]: under which root, past the include and
//! exclude globs, not a file quietus writes) and which `notify` events are progress
//! ([`is_progress`]). What the event handler does with them is `handler`'s.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use notify::EventKind;

use crate::config::{FileGlobs, FileWatchConfig};
use crate::error::ConfigError;
use crate::own_files::OwnFiles;
use crate::sync::RwLock;

/// Which paths count: include / exclude globs (matched against the path relative to its root and
/// against the file name), and the files quietus itself writes.
pub(super) struct PathFilter {
    pub(super) roots: Vec<PathBuf>,
    /// Per root, the folder it resolves to when the root itself is a symbolic link (events
    /// then come under that path).
    pub(super) resolved: RwLock<Vec<Option<PathBuf>>>,
    /// Per root, its canonical path (every link on the way resolved), to recognise own files
    /// reached through another spelling of the same folder.
    pub(super) canonical: RwLock<Vec<Option<PathBuf>>>,
    /// The include and exclude patterns, and their matchers once built (at the arming: a child
    /// that is done before it never pays for them).
    pub(super) patterns: FileWatchConfig,
    pub(super) globs: OnceLock<FileGlobs>,
    pub(super) own_files: OwnFiles,
    /// Folders inside the roots watched alone (not recursively) because a folder of another
    /// filesystem lies below them ([`super::extent`]): a folder made in one is watched by the
    /// tracker's thread, not by `notify`.
    pub(super) around: RwLock<Vec<PathBuf>>,
}

/// Where a path stands relative to the roots.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// Inside a root (or the root itself); `true` when it passes the filters.
    Inside(bool),
    /// A proper ancestor of a root: its creation may bring the root into being.
    AboveRoot,
    /// Anything else (a sibling in a watched ancestor, say): never counts.
    Elsewhere,
}

impl PathFilter {
    pub(super) fn new(config: &FileWatchConfig, roots: Vec<PathBuf>) -> Self {
        let mut patterns = FileWatchConfig::default();
        patterns.include.clone_from(&config.include);
        patterns.exclude.clone_from(&config.exclude);
        Self {
            patterns,
            globs: OnceLock::new(),
            own_files: OwnFiles::default(),
            resolved: RwLock::new(vec![None; roots.len()]),
            canonical: RwLock::new(vec![None; roots.len()]),
            around: RwLock::new(Vec::new()),
            roots,
        }
    }

    pub(super) fn place(&self, path: &Path) -> Place {
        for (i, root) in self.roots.iter().enumerate() {
            if let Ok(relative) = path.strip_prefix(root) {
                return Place::Inside(!self.is_own(i, path, relative) && self.counts(relative));
            }
        }
        for (i, target) in self.resolved.read().iter().enumerate() {
            if let Some(relative) = target.as_ref().and_then(|t| path.strip_prefix(t).ok()) {
                return Place::Inside(!self.is_own(i, path, relative) && self.counts(relative));
            }
        }
        if self.roots.iter().any(|root| root.starts_with(path)) {
            Place::AboveRoot
        } else {
            Place::Elsewhere
        }
    }

    /// Whether `path`, at `relative` under root `index`, is a file quietus writes itself.
    fn is_own(&self, index: usize, path: &Path, relative: &Path) -> bool {
        let canonical = self.canonical.read();
        let root = canonical.get(index).and_then(Option::as_deref);
        self.own_files.contains(path, root, relative)
    }

    /// Whether `dir` is watched alone, around a folder of another filesystem below it.
    pub(super) fn is_around(&self, dir: &Path) -> bool {
        self.around.read().iter().any(|a| a == dir)
    }

    /// Builds the matchers, once (they were checked at the start: only a pattern set too big
    /// for the matcher can fail here).
    pub(super) fn build(&self) -> Result<(), ConfigError> {
        if self.globs.get().is_none() {
            let globs = self.patterns.globs()?;
            let _ = self.globs.set(globs);
        }
        Ok(())
    }

    fn counts(&self, relative: &Path) -> bool {
        if relative.as_os_str().is_empty() {
            return true; // the root itself appearing or going away
        }
        let Some(globs) = self.globs.get() else {
            return false; // not armed yet, or the matchers could not be built
        };
        let name = relative.file_name().map(Path::new).unwrap_or(relative);
        if globs.exclude.is_match(relative) || globs.exclude.is_match(name) {
            return false;
        }
        globs
            .include
            .as_ref()
            .is_none_or(|inc| inc.is_match(relative) || inc.is_match(name))
    }
}

/// Whether a notify event kind is progress: create, modify (data, metadata, rename), remove.
/// Access events (open, read, close with or without write) never are.
pub(super) fn is_progress(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(config: &FileWatchConfig) -> PathFilter {
        let filter = PathFilter::new(config, vec![PathBuf::from("/w/.agent")]);
        filter.build().unwrap();
        filter
    }

    #[test]
    fn default_filters() {
        let f = filter(&FileWatchConfig::default());
        assert_eq!(f.place(Path::new("/w/.agent/plan.md")), Place::Inside(true));
        assert_eq!(
            f.place(Path::new("/w/.agent/sub/notes.txt")),
            Place::Inside(true)
        );
        assert_eq!(f.place(Path::new("/w/.agent")), Place::Inside(true));
        for excluded in [
            "/w/.agent/run.log",
            "/w/.agent/sub/deep/run.log",
            "/w/.agent/.plan.md.swp",
            "/w/.agent/plan.md~",
            "/w/.agent/sub/.#plan.md",
        ] {
            assert_eq!(
                f.place(Path::new(excluded)),
                Place::Inside(false),
                "{excluded}"
            );
        }
        assert_eq!(f.place(Path::new("/w")), Place::AboveRoot);
        assert_eq!(f.place(Path::new("/w/target/debug/x")), Place::Elsewhere);
        assert_eq!(f.place(Path::new("/w/.agentx")), Place::Elsewhere);
    }

    #[test]
    fn include_globs_and_own_files() {
        let config = FileWatchConfig {
            include: vec!["*.md".into()],
            ..FileWatchConfig::default()
        };
        let f = filter(&config);
        assert_eq!(
            f.place(Path::new("/w/.agent/a/plan.md")),
            Place::Inside(true)
        );
        assert_eq!(
            f.place(Path::new("/w/.agent/a/data.json")),
            Place::Inside(false)
        );
        f.own_files.add(Path::new("/w/.agent/own.md"));
        assert_eq!(f.place(Path::new("/w/.agent/own.md")), Place::Inside(false));
        // The same name elsewhere in the tree still counts: identity, not name.
        assert_eq!(
            f.place(Path::new("/w/.agent/sub/own.md")),
            Place::Inside(true)
        );
    }

    #[test]
    fn access_is_never_progress() {
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
        assert!(!is_progress(&EventKind::Access(AccessKind::Read)));
        assert!(!is_progress(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(!is_progress(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(is_progress(&EventKind::Create(CreateKind::File)));
        assert!(is_progress(&EventKind::Modify(ModifyKind::Any)));
    }
}
