//! Re-arming: how each root is watched ([`RootState`]) and the (re-)arming of every root when
//! one appears, vanishes, is re-created or changes kind (a missing root is awaited through its
//! nearest existing ancestor); a root's extent measured first ([`super::extent`]: its own
//! filesystem only, within the bound); the parts that cannot be watched worked around and
//! retried.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use notify::RecursiveMode;

use super::common::{Common, Msg};
use super::extent::{Extent, FolderId, Share, folder_id, survey};
use super::handler::{EventHandler, is_out_of_watches};
use crate::activity::ActivitySource;
use crate::error::SystemError;
use crate::outcome::UnwatchedReason;
use crate::sources::shared_watcher::SharedWatcher;

/// How a root is being watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RootState {
    /// Watched recursively.
    Watched,
    /// Watched, but folders of another filesystem lie inside (`skip`, never watched): the
    /// folders above them are watched alone, the rest recursively (`watches`: every path
    /// watched for it).
    Around {
        skip: Vec<PathBuf>,
        watches: Vec<PathBuf>,
    },
    /// Missing: its nearest existing ancestor is watched, non-recursively.
    Waiting(PathBuf),
    /// Not a folder (a file, say): its parent is watched, non-recursively, so the tracker
    /// notices when it turns into a folder.
    NotAFolder(PathBuf),
    /// A folder that cannot be watched (no permission): its parent is watched,
    /// non-recursively, and it is retried on the parent's events and at the check interval.
    Unwatchable(PathBuf),
    /// A folder not to be watched (too large, or on a pseudo-filesystem): nothing is watched
    /// for it while it stays the same folder; the report says why.
    Refused {
        folder: Option<FolderId>,
        why: UnwatchedReason,
    },
    /// Cannot be watched at all.
    Invalid,
}

impl RootState {
    /// Whether the root's tree is watched (wholly or around other filesystems).
    pub(super) fn is_watched(&self) -> bool {
        matches!(self, RootState::Watched | RootState::Around { .. })
    }

    /// Whether the source cannot see what happens in the root.
    fn is_blind(&self) -> bool {
        matches!(
            self,
            RootState::Invalid
                | RootState::NotAFolder(_)
                | RootState::Unwatchable(_)
                | RootState::Refused { .. }
        )
    }
}

/// The folders right inside `dir` (none when it cannot be read). Links are not followed, like
/// notify's own walk.
fn subfolders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        .collect()
}

/// Why `notify` could not watch a folder: the system's error when there is one.
fn notify_reason(e: &notify::Error) -> UnwatchedReason {
    UnwatchedReason::System(match &e.kind {
        notify::ErrorKind::Io(io) => io.into(),
        _ => SystemError::other(e.to_string()),
    })
}

/// Drops the watch of `root` in its `old` state (at `old_target` when it was a link to a folder).
fn unwatch_root(
    watcher: &mut SharedWatcher,
    root: &Path,
    old: &RootState,
    old_target: Option<&Path>,
) {
    match old {
        RootState::Watched => {
            let _ = watcher.unwatch(old_target.unwrap_or(root));
        }
        RootState::Around { watches, .. } => {
            for path in watches {
                let _ = watcher.unwatch(path);
            }
        }
        RootState::Waiting(ancestor)
        | RootState::NotAFolder(ancestor)
        | RootState::Unwatchable(ancestor) => {
            let _ = watcher.unwatch(ancestor);
        }
        RootState::Refused { .. } | RootState::Invalid => {}
    }
}

/// A watch of a root that failed, not for want of watches.
struct WatchFailure<'a> {
    root: &'a Path,
    /// The state the root was to be in.
    new: RootState,
    /// The folder the root leads to, when it is a link.
    target: Option<&'a Path>,
    error: notify::Error,
    at: Instant,
}

/// The arming's state: the roots and how each is watched, with the watcher itself (or none,
/// in the stat-scan mode), owned by the tracker's thread.
pub(super) struct Roots {
    common: Common,
    /// Each root and how it is watched.
    list: Vec<(PathBuf, RootState)>,
    watcher: Option<SharedWatcher>,
    /// Roots already warned about, so a broken root is logged once per breakage.
    warned: Vec<PathBuf>,
    /// Whether the roots were armed once (the first arming is not a change).
    armed: bool,
    /// Per root, the folders its last measure counted (0 when refused or not measured): what
    /// it takes of the session's bound of watched folders.
    measured: Vec<usize>,
    /// The most folders the roots may have watched together ([`super::extent`]).
    watch_bound: usize,
    /// The roots' share of the process's bound of watched folders, across its sessions.
    share: Share,
}

impl Roots {
    /// The roots of `common`'s filter, none armed yet.
    pub(super) fn new(common: Common) -> Roots {
        let list = (common.filter.roots.iter())
            .map(|root| (root.clone(), RootState::Invalid))
            .collect();
        Roots {
            common,
            list,
            watcher: None,
            warned: Vec::new(),
            armed: false,
            measured: Vec::new(),
            watch_bound: super::extent::bound(),
            share: Share::default(),
        }
    }

    /// Each root and how it is watched.
    pub(super) fn list(&self) -> &[(PathBuf, RootState)] {
        &self.list
    }

    /// Makes the watcher (or falls back to the stat scan when `forced`) and arms the roots.
    pub(super) fn begin(&mut self, forced: bool) {
        if let Err(e) = self.common.filter.build() {
            // Checked at the start, each pattern parses: only a set too big for the matcher
            // gets here. Nothing could be told apart, so nothing is watched, and it is said.
            log::warn!("files source unavailable: {e}");
            let now = self.common.board.clock().now();
            for (root, _) in &self.list {
                self.common
                    .gaps
                    .open(root, UnwatchedReason::TooManyPatterns, now);
            }
            self.common
                .board
                .set_available(&ActivitySource::Files, false);
            return;
        }
        if forced {
            self.fall_back("forced by configuration");
        } else {
            self.start_watcher();
        }
        self.arm();
    }

    fn start_watcher(&mut self) {
        let handler = EventHandler {
            common: self.common.clone(),
        };
        // The watcher of these roots, shared with every other tracker of the same roots in
        // this process (one inotify instance for a server's sessions, `shared_watcher`).
        match SharedWatcher::new(&self.common.filter.roots, move |event| {
            handler.handle(event)
        }) {
            Ok(watcher) => self.watcher = Some(watcher),
            Err(e) if is_out_of_watches(&e) => self.fall_back(&e.to_string()),
            Err(e) => {
                log::warn!("cannot start a file watcher ({e}); stat-scanning instead");
                self.fall_back(&e.to_string());
            }
        }
    }

    pub(super) fn fall_back(&mut self, why: &str) {
        if !self.common.scanning.swap(true, Ordering::AcqRel) {
            log::warn!(
                "files source: stat-scanning {:?} every {:?} ({why})",
                self.common.filter.roots,
                self.common.scan_interval
            );
        }
        self.watcher = None;
    }

    /// (Re-)arms every root: a recursive watch on a root folder, a non-recursive one on the
    /// nearest existing ancestor of a missing root.
    pub(super) fn arm(&mut self) {
        let mut available = true;
        let mut appeared_or_vanished = false;
        self.measured.resize(self.list.len(), 0);
        for index in 0..self.list.len() {
            let (root, old) = self.list[index].clone();
            let new = self.arm_root(index, &root, &old);
            available &= !new.is_blind();
            // A root that came into being (or went away) since the last look is activity, even
            // when the event that announced it was on a folder watched too late to see it.
            appeared_or_vanished |=
                self.armed && old.is_watched() != new.is_watched() && old != RootState::Invalid;
            self.list[index].1 = new;
        }
        self.armed = true;
        self.common
            .board
            .set_available(&ActivitySource::Files, available);
        if appeared_or_vanished {
            self.common.board.stamp(&ActivitySource::Files);
        }
    }

    /// Where root `index` leads now: the folder it points to when it is a symbolic link to
    /// one (watched there: inotify would otherwise watch the link itself), recorded for the
    /// filter; returns it and the one recorded before.
    fn resolve_root(&mut self, index: usize, root: &Path) -> (Option<PathBuf>, Option<PathBuf>) {
        let target = fs::symlink_metadata(root)
            .is_ok_and(|m| m.file_type().is_symlink())
            .then(|| fs::canonicalize(root).ok())
            .flatten();
        let old_target = std::mem::replace(
            &mut self.common.filter.resolved.write()[index],
            target.clone(),
        );
        self.common.filter.canonical.write()[index] = fs::canonicalize(root).ok();
        (target, old_target)
    }

    fn arm_root(&mut self, index: usize, root: &Path, old: &RootState) -> RootState {
        let (target, old_target) = self.resolve_root(index, root);
        let at = target.clone().unwrap_or_else(|| root.to_path_buf());
        let new = match self.root_state(root) {
            // The stat scan re-arms at every scan: a root measured once is not walked twice
            // per scan (the scan's own walk stays on its filesystem too).
            RootState::Watched if self.watcher.is_none() && old.is_watched() => old.clone(),
            RootState::Watched => self.measure(index, &at, old),
            other => other,
        };
        self.record_root_gap(root, &new);
        let Some(watcher) = self.watcher.as_mut() else {
            return new; // stat-scan mode: nothing to arm
        };
        // Always drop the old watch and add the new one: a root deleted and created again is a
        // new inode that needs a new watch even under the same path.
        unwatch_root(watcher, root, old, old_target.as_deref());
        let old_at = old_target.unwrap_or_else(|| root.to_path_buf());
        self.common
            .filter
            .around
            .write()
            .retain(|a| !a.starts_with(&old_at));
        // What was not watched under the root is found again by this arming.
        let now = self.common.board.clock().now();
        self.common.gaps.close(now, |gap| {
            gap != root && (gap.starts_with(root) || gap.starts_with(&at))
        });
        let result = match &new {
            RootState::Watched => watcher.watch(&at, RecursiveMode::Recursive),
            RootState::Around { skip, .. } => {
                let skip = skip.clone();
                let mut watches = Vec::new();
                self.watch_around(&at, &skip, &mut watches);
                return RootState::Around { skip, watches };
            }
            RootState::Waiting(ancestor) | RootState::NotAFolder(ancestor) => {
                watcher.watch(ancestor, RecursiveMode::NonRecursive)
            }
            RootState::Invalid | RootState::Unwatchable(_) | RootState::Refused { .. } => Ok(()),
        };
        match result {
            Ok(()) => {
                // The root may have appeared (or changed kind) between the look and the watch on
                // its ancestor, unseen by that watch: look again.
                if matches!(new, RootState::Waiting(_) | RootState::NotAFolder(_))
                    && fs::metadata(root).is_ok_and(|m| m.is_dir())
                {
                    self.common.poster.post(Msg::Rearm);
                }
                new
            }
            Err(e) if is_out_of_watches(&e) => {
                self.fall_back(&e.to_string());
                new
            }
            Err(error) => self.watch_failed(WatchFailure {
                root,
                new,
                target: target.as_deref(),
                error,
                at: now,
            }),
        }
    }

    /// The state of root folder `index` (at `at`, where a link leads) by its extent: refused
    /// when it does not fit in the folders the other roots left of the session's bound, or is
    /// on a pseudo-filesystem (not measured again while it is the same folder as `old`
    /// refused); watched around the folders of other filesystems inside it.
    fn measure(&mut self, index: usize, at: &Path, old: &RootState) -> RootState {
        let root = self.list[index].0.clone();
        let folder = folder_id(at);
        if let RootState::Refused { folder: was, .. } = old
            && *was == folder
        {
            return old.clone();
        }
        let others: usize = (self.measured.iter().enumerate())
            .filter(|(i, _)| *i != index)
            .map(|(_, n)| n)
            .sum();
        let mut extent = survey(at, self.watch_bound.saturating_sub(others));
        // Within the session's bound, the process's: the sessions of a server add up.
        match (&extent, folder) {
            (Extent::Fits { folders, .. }, Some(id)) => {
                if let Err(bound) = self.share.take(index, id, *folders) {
                    extent = Extent::Refused(UnwatchedReason::TooManyFoldersInProcess { bound });
                }
            }
            _ => self.share.release(index),
        }
        self.measured[index] = match &extent {
            Extent::Fits { folders, .. } => *folders,
            Extent::Refused(_) => 0,
        };
        match extent {
            Extent::Fits { foreign, .. } if foreign.is_empty() => RootState::Watched,
            Extent::Fits { foreign, .. } => {
                log::info!(
                    "files source: {} holds folders of other filesystems, never watched: {foreign:?}",
                    root.display()
                );
                RootState::Around {
                    skip: foreign,
                    watches: Vec::new(),
                }
            }
            Extent::Refused(why) => {
                self.warn_once(&root, &format!("{why}; its activity is not seen"));
                RootState::Refused { folder, why }
            }
        }
    }

    /// Watches `dir` alone and, below it, every folder recursively but those in `skip` (of
    /// another filesystem) and those above one of them (watched alone in turn); records every
    /// path watched in `watches`.
    fn watch_around(&mut self, dir: &Path, skip: &[PathBuf], watches: &mut Vec<PathBuf>) {
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        match watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => {
                watches.push(dir.to_path_buf());
                self.common.filter.around.write().push(dir.to_path_buf());
            }
            Err(e) if is_out_of_watches(&e) => return self.fall_back(&e.to_string()),
            Err(e) => {
                let now = self.common.board.clock().now();
                self.common.gaps.open(dir, notify_reason(&e), now);
                return;
            }
        }
        for child in subfolders(dir) {
            if skip.contains(&child) {
                continue;
            }
            if skip.iter().any(|s| s.starts_with(&child)) {
                self.watch_around(&child, skip, watches);
            } else if self.watch_part(&child) {
                watches.push(child);
            }
        }
    }

    /// What `root` is now. The root itself may be a symbolic link to a folder (`.agent ->
    /// shared/agent`): it is followed; links *inside* a root are not.
    fn root_state(&mut self, root: &Path) -> RootState {
        match fs::metadata(root) {
            Ok(meta) if meta.is_dir() => {
                self.warned.retain(|w| w != root);
                RootState::Watched
            }
            Ok(_) => {
                self.warn_once(root, "is not a folder");
                let parent = root
                    .parent()
                    .filter(|p| p.is_dir())
                    .unwrap_or_else(|| Path::new("/"))
                    .to_path_buf();
                RootState::NotAFolder(parent)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let ancestor = root
                    .ancestors()
                    .skip(1)
                    .find(|a| a.is_dir())
                    .unwrap_or_else(|| Path::new("/"))
                    .to_path_buf();
                RootState::Waiting(ancestor)
            }
            Err(e) => {
                self.warn_once(root, &e.to_string());
                RootState::Invalid
            }
        }
    }

    /// A root that is not a folder, or cannot even be looked at, is not watched: a gap opens;
    /// any other state closes the root's gap.
    fn record_root_gap(&mut self, root: &Path, new: &RootState) {
        let at = self.common.board.clock().now();
        match new {
            RootState::NotAFolder(_) => {
                self.common.gaps.open(root, UnwatchedReason::NotAFolder, at);
            }
            RootState::Refused { why, .. } => {
                self.common.gaps.open(root, why.clone(), at);
            }
            RootState::Invalid => {
                let why = match fs::metadata(root) {
                    Err(e) => e.into(),
                    Ok(_) => SystemError::other("could not be looked at"),
                };
                self.common
                    .gaps
                    .open(root, UnwatchedReason::System(why), at);
            }
            _ => {
                self.common.gaps.close(at, |gap| gap == root);
            }
        }
    }

    /// Watching a root failed, not for want of watches: the state the root is left in.
    fn watch_failed(&mut self, failure: WatchFailure<'_>) -> RootState {
        let WatchFailure {
            root,
            new,
            target,
            error: e,
            at: now,
        } = failure;
        // The root may have vanished between the check and the watch: look again.
        if !root.exists() {
            self.common.poster.post(Msg::Rearm);
            return new;
        }
        let watched_as = target.unwrap_or(root).to_path_buf();
        if !new.is_watched() {
            self.warn_once(root, &e.to_string());
            return RootState::Invalid;
        }
        match e.paths.first() {
            // The walk stopped at a folder inside: the rest is watched around it.
            Some(failed) if failed != &watched_as && failed.starts_with(&watched_as) => {
                let failed = failed.clone();
                self.cover(&watched_as, &failed, notify_reason(&e));
                RootState::Watched
            }
            // The root itself cannot be watched (no permission): watch its parent to
            // learn when that changes, and retry at the check interval too.
            _ => {
                self.warn_once(root, &e.to_string());
                self.common.gaps.open(root, notify_reason(&e), now);
                let parent = root
                    .parent()
                    .filter(|p| p.is_dir())
                    .unwrap_or_else(|| Path::new("/"))
                    .to_path_buf();
                if let Some(watcher) = self.watcher.as_mut() {
                    let _ = watcher.unwatch(&watched_as);
                    if let Err(e) = watcher.watch(&parent, RecursiveMode::NonRecursive) {
                        log::debug!("files source: watching {}: {e}", parent.display());
                    }
                }
                RootState::Unwatchable(parent)
            }
        }
    }

    /// `dir` is watched recursively, but notify's walk stopped at `failed` (a folder below it
    /// that cannot be watched): records the gap and watches the rest of the tree around it.
    fn cover(&mut self, dir: &Path, failed: &Path, reason: UnwatchedReason) {
        let now = self.common.board.clock().now();
        if self.common.gaps.open(failed, reason.clone(), now) {
            log::warn!(
                "files source: cannot watch {} ({reason}); retrying it on its changes and every {:?}",
                failed.display(),
                self.common.scan_interval
            );
        }
        for child in subfolders(dir) {
            if child == failed {
                continue;
            }
            if failed.starts_with(&child) {
                // Watched before the walk went down to `failed`: go on below it.
                self.cover(&child, failed, reason.clone());
            } else {
                self.watch_part(&child);
            }
        }
    }

    /// Watches the folder `dir` inside a root, recursively, working around any folder below it
    /// that cannot be watched. Returns whether `dir` itself is watched now.
    pub(super) fn watch_part(&mut self, dir: &Path) -> bool {
        let Some(watcher) = self.watcher.as_mut() else {
            return false;
        };
        let now = self.common.board.clock().now();
        match watcher.watch(dir, RecursiveMode::Recursive) {
            Ok(()) => {
                self.common.gaps.close(now, |gap| gap == dir);
                true
            }
            Err(e) if is_out_of_watches(&e) => {
                self.fall_back(&e.to_string());
                false
            }
            Err(e) => match e.paths.first() {
                Some(failed) if failed != dir && failed.starts_with(dir) => {
                    let failed = failed.clone();
                    self.common.gaps.close(now, |gap| gap == dir);
                    self.cover(dir, &failed, notify_reason(&e));
                    true
                }
                _ if !dir.is_dir() => {
                    self.common.gaps.close(now, |gap| gap == dir); // gone: nothing to watch
                    false
                }
                _ => {
                    let reason = notify_reason(&e);
                    if self.common.gaps.open(dir, reason.clone(), now) {
                        log::warn!(
                            "files source: cannot watch {} ({reason}); retrying it on its changes and every {:?}",
                            dir.display(),
                            self.common.scan_interval
                        );
                    }
                    false
                }
            },
        }
    }

    /// Tries again every part that could not be watched: roots first (through a re-arm), then
    /// folders inside them. A part that can be watched again is a sign of life (its mode
    /// changed): it counts as activity.
    pub(super) fn retry(&mut self, only: Option<&Path>) {
        if self.common.scanning.load(Ordering::Acquire) {
            return; // the stat scan looks at everything readable anyway
        }
        let root_unwatchable = self.list.iter().any(|(root, state)| {
            matches!(state, RootState::Unwatchable(_)) && only.is_none_or(|p| p == root)
        });
        if root_unwatchable {
            self.arm();
        }
        let parts = match only {
            Some(path) => vec![path.to_path_buf()],
            None => self.common.gaps.open_paths(),
        };
        let mut back = false;
        for path in parts {
            if self.list.iter().any(|(r, _)| *r == path) {
                continue;
            }
            let was_open = self.common.gaps.is_open(&path);
            back |= self.watch_part(&path) && was_open;
        }
        if back {
            self.common.board.stamp(&ActivitySource::Files);
        }
    }

    fn warn_once(&mut self, root: &Path, why: &str) {
        if !self.warned.iter().any(|w| w == root) {
            log::warn!("files source unavailable for {}: {why}", root.display());
            self.warned.push(root.to_path_buf());
        }
    }
}
