//! Event classes: which paths count ([`PathFilter`]: under which root, past the include and
//! exclude globs, not a file quietus writes), which `notify` events are progress
//! ([`is_progress`]), and what `notify`'s event handler does with each ([`EventHandler`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use notify::EventKind;
use notify::event::CreateKind;

use super::deferred::Poster;
use super::gaps::Gaps;
use super::worker::{Msg, is_out_of_watches};
use crate::activity::{ActivityBoard, ActivitySource};
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

/// What `notify`'s event handler does with an event: stamps the board when a path that counts
/// changed; asks the tracker's thread to re-arm when a root (or a folder above one) appeared,
/// vanished or changed kind, to try again a folder that could not be watched, or to fall back
/// to the stat scan when the system is out of watches.
pub(super) struct EventHandler {
    pub(super) filter: Arc<PathFilter>,
    pub(super) board: Arc<ActivityBoard>,
    pub(super) to_worker: Poster,
    pub(super) gaps: Gaps,
}

impl EventHandler {
    pub(super) fn handle(&self, result: &notify::Result<notify::Event>) {
        match result {
            Ok(event) => self.on_event(event),
            Err(error) if is_out_of_watches(error) => self.to_worker.post(Msg::FallBack),
            Err(error) => log::debug!("file watcher: {error}"),
        }
    }

    fn on_event(&self, event: &notify::Event) {
        let mut counted = event.need_rescan();
        let mut rearm = false;
        if is_progress(&event.kind) {
            for path in &event.paths {
                match self.filter.place(path) {
                    Place::Inside(counts) => {
                        if self.filter.roots.iter().any(|r| r == path) {
                            // The root itself appeared, vanished or changed kind: the re-arm
                            // decides (and stamps a real change); a root that is a file being
                            // written is not activity.
                            rearm = true;
                        } else {
                            counted |= counts;
                            if self.to_retry(&event.kind, path) {
                                self.to_worker.post(Msg::Retry(path.clone()));
                            }
                        }
                    }
                    Place::AboveRoot => rearm = true,
                    Place::Elsewhere => {}
                }
            }
        }
        if counted {
            self.board.stamp(&ActivitySource::Files);
        }
        if rearm {
            self.to_worker.post(Msg::Rearm);
        }
    }

    /// Whether `path` inside a root is to be tried (again): a folder that could not be watched
    /// changed (its mode, say); a new folder came that notify could not watch (it says nothing
    /// then), or that nothing watches for it (its parent is watched alone, around a folder of
    /// another filesystem).
    fn to_retry(&self, kind: &EventKind, path: &Path) -> bool {
        match kind {
            EventKind::Create(CreateKind::Folder) => {
                fs::read_dir(path).is_err()
                    || path.parent().is_some_and(|p| self.filter.is_around(p))
            }
            EventKind::Modify(_) => self.gaps.is_open(path),
            _ => false,
        }
    }
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
