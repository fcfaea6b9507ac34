//! The files source: [`FileActivityTracker`] stamps the board when files under the watched roots
//! are created, modified, renamed or removed.
//!
//! Normal mode uses `notify`'s recommended watcher (inotify on Linux, FSEvents on macOS); its
//! event handler only classifies the paths, stamps the board and, when a root appears or
//! disappears, asks the tracker's own thread to re-arm the watches. When the OS runs out of
//! watches or watcher instances, or when asked, the tracker thread stat-scans the roots at the
//! check interval instead (nanosecond mtime + size + inode). `notify`'s `PollWatcher` is not
//! used: its one-second mtime resolution misses writes.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::sync::RwLock;
use crossbeam_channel::{Receiver, Sender, never, select, unbounded};
use notify::event::CreateKind;
use notify::{EventKind, RecursiveMode};

use crate::activity::{ActivityBoard, ActivitySource};
use crate::config::{FileGlobs, FileWatchConfig};
use crate::error::ConfigError;
use crate::error::SpawnError;
use crate::outcome::UnwatchedFolder;
use crate::own_files::OwnFiles;

/// Which paths count: include / exclude globs (matched against the path relative to its root and
/// against the file name), and the files quietus itself writes.
struct PathFilter {
    roots: Vec<PathBuf>,
    /// Per root, the folder it resolves to when the root itself is a symbolic link (events
    /// then come under that path).
    resolved: RwLock<Vec<Option<PathBuf>>>,
    /// Per root, its canonical path (every link on the way resolved), to recognise own files
    /// reached through another spelling of the same folder.
    canonical: RwLock<Vec<Option<PathBuf>>>,
    /// The include and exclude patterns, and their matchers once built (at the arming: a child
    /// that is done before it never pays for them).
    patterns: FileWatchConfig,
    globs: OnceLock<FileGlobs>,
    own_files: OwnFiles,
}

/// Where a path stands relative to the roots.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// Inside a root (or the root itself); `true` when it passes the filters.
    Inside(bool),
    /// A proper ancestor of a root: its creation may bring the root into being.
    AboveRoot,
    /// Anything else (a sibling in a watched ancestor, say): never counts.
    Elsewhere,
}

impl PathFilter {
    fn new(config: &FileWatchConfig, roots: Vec<PathBuf>) -> Self {
        let mut patterns = FileWatchConfig::default();
        patterns.include.clone_from(&config.include);
        patterns.exclude.clone_from(&config.exclude);
        Self {
            patterns,
            globs: OnceLock::new(),
            own_files: OwnFiles::default(),
            resolved: RwLock::new(vec![None; roots.len()]),
            canonical: RwLock::new(vec![None; roots.len()]),
            roots,
        }
    }

    fn place(&self, path: &Path) -> Place {
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

    /// Builds the matchers, once (they were checked at the start: only a pattern set too big
    /// for the matcher can fail here).
    fn build(&self) -> Result<(), ConfigError> {
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
fn is_progress(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) | EventKind::Any
    )
}

enum Msg {
    Rearm,
    /// Try again to watch this folder (a part that could not be watched, or a new folder that
    /// cannot be read).
    Retry(PathBuf),
    FallBack,
    /// Arm now if the watches are not armed yet; answer once they are.
    ArmNow(Sender<()>),
    Stop,
}

/// What the tracker's thread has yet to act on: the messages posted to it that can change what
/// is watched or counted (`Rearm`, `Retry`, `FallBack`), and a delayed arming not done yet.
/// When there is none, [`FileActivityTracker::arm_now`] has nothing to wait for and returns at
/// once, with no round trip through that thread (one that a loaded machine may take
/// milliseconds to schedule, at the very instant a stall is decided).
#[derive(Debug, Default, Clone)]
struct Queued(Arc<AtomicUsize>);

impl Queued {
    /// Posts `msg` to the tracker's thread, counted until it is acted on.
    fn post(&self, tx: &Sender<Msg>, msg: Msg) {
        self.0.fetch_add(1, Ordering::AcqRel);
        if tx.send(msg).is_err() {
            self.done(); // the thread is gone: nothing will act on it
        }
    }

    /// One posted message (or the delayed arming) was acted on.
    fn done(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    fn is_clear(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// One part that is (or was) not watched.
#[derive(Debug)]
struct Gap {
    path: PathBuf,
    reason: String,
    /// Since when it is not watched; `None` once it is watched again.
    since: Option<Instant>,
    /// The earlier stretches.
    total: Duration,
}

/// Every part not watched during the run, shared by the tracker's thread, `notify`'s event
/// handler (which asks for a retry when an open gap changes) and the handle (for the report).
#[derive(Debug, Default, Clone)]
struct Gaps(Arc<crate::sync::Mutex<Vec<Gap>>>);

impl Gaps {
    /// Records that `path` cannot be watched from `now` (kept open if it already is).
    fn open(&self, path: &Path, reason: String, now: Instant) -> bool {
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
    fn close(&self, now: Instant, which: impl Fn(&Path) -> bool) -> usize {
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
    fn open_paths(&self) -> Vec<PathBuf> {
        let gaps = self.0.lock();
        gaps.iter()
            .filter(|g| g.since.is_some())
            .map(|g| g.path.clone())
            .collect()
    }

    fn is_open(&self, path: &Path) -> bool {
        self.0
            .lock()
            .iter()
            .any(|g| g.since.is_some() && g.path == path)
    }

    fn report(&self, now: Instant) -> Vec<UnwatchedFolder> {
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

/// How a root is being watched.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RootState {
    /// Watched recursively.
    Watched,
    /// Missing: its nearest existing ancestor is watched, non-recursively.
    Waiting(PathBuf),
    /// Not a folder (a file, say): its parent is watched, non-recursively, so the tracker
    /// notices when it turns into a folder.
    NotAFolder(PathBuf),
    /// A folder that cannot be watched (no permission): its parent is watched,
    /// non-recursively, and it is retried on the parent's events and at the check interval.
    Unwatchable(PathBuf),
    /// Cannot be watched at all.
    Invalid,
}

/// Tracks file activity under one or more roots and stamps [`ActivitySource::Files`] on an
/// [`ActivityBoard`].
///
/// Usable on its own; [`Session`](crate::Session) starts one for every session whose
/// [`MonitorConfig`](crate::MonitorConfig) has the files source on (the default, root
/// `.agent` in the child's working directory). Dropping the tracker stops it.
///
/// ```
/// use std::sync::{Arc, OnceLock};
/// use std::time::{Duration, Instant};
/// use quietus::sources::{ActivityBoard, FileActivityTracker};
/// use quietus::{ActivitySource, Clock, FileWatchConfig};
///
/// let workspace = tempfile::tempdir()?;
/// let board = Arc::new(ActivityBoard::new(Clock::system()));
/// let tracker = FileActivityTracker::start(
///     &FileWatchConfig::default(), // root `.agent`, not created yet: picked up when it is
///     workspace.path(),
///     board.clone(),
///     Duration::from_secs(1),
/// )?;
/// std::fs::create_dir(workspace.path().join(".agent"))?;
/// let give_up = Instant::now() + Duration::from_secs(10);
/// while board.count(&ActivitySource::Files) == 0 && Instant::now() < give_up {
///     std::thread::sleep(Duration::from_millis(5));
/// }
/// assert!(board.count(&ActivitySource::Files) > 0);
/// drop(tracker);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FileActivityTracker {
    filter: Arc<PathFilter>,
    gaps: Gaps,
    board: Arc<ActivityBoard>,
    scanning: Arc<AtomicBool>,
    /// Whether the arming has begun (a watcher may exist, whose teardown can be slow).
    arming: Arc<AtomicBool>,
    tx: Sender<Msg>,
    /// What the tracker's thread has yet to act on.
    queued: Queued,
    /// How many times `arm_now` waited for the tracker's thread (tests).
    #[cfg(test)]
    round_trips: AtomicUsize,
    thread: crate::sync::Mutex<Option<JoinHandle<()>>>,
    /// A session's delayed arming, not begun yet: no thread exists until it is
    /// ([`FileActivityTracker::arm_if_due`]).
    deferred: crate::sync::Mutex<Option<Deferred>>,
}

/// The arming a session's monitor does when its delay is over, and what the tracker's thread
/// then runs: a session pays no thread for a program that ends within the delay.
struct Deferred {
    worker: Worker,
    rx: Receiver<Msg>,
    forced: bool,
    /// The start, on the file clock (for the look at what changed before the arming).
    since: SystemTime,
    /// When the delay is over (real time).
    due: Instant,
}

impl fmt::Debug for FileActivityTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileActivityTracker")
            .field("roots", &self.filter.roots)
            .field("stat_scan", &self.is_stat_scan())
            .finish_non_exhaustive()
    }
}

impl FileActivityTracker {
    /// Starts tracking `config.roots` (relative roots are taken from `base_dir`), stamping
    /// `board`. The watches are armed when this returns. `scan_interval` is the stat-scan
    /// period, used only in the fallback mode.
    ///
    /// A root that does not exist is normal (picked up when created); a root that is not a
    /// folder is logged and the source marked unavailable on the board.
    ///
    /// # Errors
    ///
    /// An `io::Error` carrying a [`SpawnError`], as from a session's spawn:
    /// of kind [`Config`](crate::SpawnErrorKind::Config) (`InvalidInput`, a
    /// [`ConfigError`] inside) for an invalid glob, of kind
    /// [`Thread`](crate::SpawnErrorKind::Thread) if the tracker thread cannot be started.
    pub fn start(
        config: &FileWatchConfig,
        base_dir: &Path,
        board: Arc<ActivityBoard>,
        scan_interval: Duration,
    ) -> io::Result<FileActivityTracker> {
        Self::begin(config, base_dir, board, scan_interval, false)
    }

    /// [`FileActivityTracker::start`]; with `deferred`, a delayed arming is left to the caller
    /// ([`FileActivityTracker::start_for_session`]).
    fn begin(
        config: &FileWatchConfig,
        base_dir: &Path,
        board: Arc<ActivityBoard>,
        scan_interval: Duration,
        deferred: bool,
    ) -> io::Result<FileActivityTracker> {
        let roots: Vec<PathBuf> = config.roots.iter().map(|r| base_dir.join(r)).collect();
        config.check_globs().map_err(SpawnError::config)?;
        let filter = Arc::new(PathFilter::new(config, roots.clone()));
        if config.arm_delay.is_zero() {
            filter.build().map_err(SpawnError::config)?;
        }
        for own in &config.own_files {
            filter.own_files.add(own);
        }
        board.set_enabled(&ActivitySource::Files, true);
        let (tx, rx) = unbounded();
        let scanning = Arc::new(AtomicBool::new(false));
        let arming = Arc::new(AtomicBool::new(false));
        let gaps = Gaps::default();
        // A delayed arming is something to wait for until it is done.
        let queued = Queued::default();
        if !config.arm_delay.is_zero() {
            queued.0.store(1, Ordering::Release);
        }
        let mut worker = Worker {
            gaps: gaps.clone(),
            roots: roots
                .iter()
                .map(|r| (r.clone(), RootState::Invalid))
                .collect(),
            filter: filter.clone(),
            board: board.clone(),
            watcher: None,
            scanning: scanning.clone(),
            arming: arming.clone(),
            scan_interval,
            snapshot: None,
            tx: tx.clone(),
            queued: queued.clone(),
            warned: Vec::new(),
            armed: false,
        };
        let forced = config.force_stat_scan;
        let delay = config.arm_delay;
        // The start, for the look at what changed before a delayed arming, on the clock file
        // times come from (a later change has a later time: `changed_since`).
        let since = crate::process::sys::file_clock_now();
        let tracker = FileActivityTracker {
            filter,
            gaps,
            board,
            scanning,
            arming,
            tx,
            queued,
            #[cfg(test)]
            round_trips: AtomicUsize::new(0),
            thread: crate::sync::Mutex::new(None),
            deferred: crate::sync::Mutex::new(None),
        };
        if deferred && !delay.is_zero() {
            *tracker.deferred.lock() = Some(Deferred {
                worker,
                rx,
                forced,
                since,
                due: Instant::now() + delay,
            });
            return Ok(tracker);
        }
        if delay.is_zero() {
            worker.begin(forced);
        }
        *tracker.thread.lock() = Some(worker.start(rx, delay, forced, since)?);
        Ok(tracker)
    }

    /// A session's tracker: with a delay, nothing runs until the session's monitor arms it
    /// ([`FileActivityTracker::arm_if_due`], or [`FileActivityTracker::arm_now`] at a stale
    /// decision); a program that ends within the delay costs no thread. Without one, as
    /// [`FileActivityTracker::start`].
    pub(crate) fn start_for_session(
        config: &FileWatchConfig,
        base_dir: &Path,
        board: Arc<ActivityBoard>,
        scan_interval: Duration,
    ) -> io::Result<FileActivityTracker> {
        Self::begin(config, base_dir, board, scan_interval, true)
    }

    /// When a session's delayed arming is due (real time), while it has not begun.
    pub(crate) fn arm_due(&self) -> Option<Instant> {
        self.deferred.lock().as_ref().map(|d| d.due)
    }

    /// Arms a session's delayed watches if their time has come (real time); returns how long
    /// until it does when it has not.
    pub(crate) fn arm_if_due(&self) -> Option<Duration> {
        let due = self.arm_due()?;
        let now = Instant::now();
        if now < due {
            return Some(due - now);
        }
        self.arm_deferred();
        None
    }

    /// Begins a session's delayed arming now, on this thread (the watches, and the look at
    /// what changed since the start), then hands the tracker's work to a thread of its own.
    /// Returns whether there was one to begin.
    fn arm_deferred(&self) -> bool {
        let Some(Deferred {
            mut worker,
            rx,
            forced,
            since,
            ..
        }) = self.deferred.lock().take()
        else {
            return false;
        };
        worker.begin(forced);
        worker.changed_since(since);
        worker.queued.done();
        let started = std::thread::Builder::new()
            .name("quietus-files".into())
            .spawn(move || worker.run(rx));
        match started {
            Ok(thread) => *self.thread.lock() = Some(thread),
            Err(e) => {
                // The watcher went with the closure: nothing watches any more, and it is said.
                log::warn!("files source unavailable: no thread for the file tracker: {e}");
                self.board.set_available(&ActivitySource::Files, false);
            }
        }
        true
    }

    /// Arms the watches now if [`FileWatchConfig::arm_delay`] put the arming off and it has
    /// not come yet (what changed since the start is counted then); returns once they are
    /// armed. At once when they are.
    pub fn arm_now(&self) {
        if self.arm_deferred() || self.queued.is_clear() {
            return; // armed, and nothing posted before this call is left to act on
        }
        #[cfg(test)]
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let (ack, armed) = crossbeam_channel::bounded(1);
        if self.tx.send(Msg::ArmNow(ack)).is_ok() {
            let _ = armed.recv(); // an error: the thread is gone, nothing to wait for
        }
    }

    /// Whether the arming has begun: until then no watch exists, and dropping the tracker is
    /// quick (with watches, the kernel's teardown of an inotify instance can take 10 ms).
    pub(crate) fn has_armed(&self) -> bool {
        self.arming.load(Ordering::Acquire)
    }

    /// Whether the tracker has fallen back to stat-scanning (or was told to).
    pub fn is_stat_scan(&self) -> bool {
        self.scanning.load(Ordering::Acquire)
    }

    /// Never count activity on `path` (a file quietus or its caller writes itself, such as
    /// a log), matched by identity like [`FileWatchConfig::get_own_files`], from now on.
    pub fn ignore_file(&self, path: impl Into<PathBuf>) {
        self.filter.own_files.add(&path.into());
    }

    /// The shared list of own files, for the log spill to register its files in.
    pub(crate) fn own_files(&self) -> OwnFiles {
        self.filter.own_files.clone()
    }

    /// The absolute roots being tracked.
    pub fn roots(&self) -> &[PathBuf] {
        &self.filter.roots
    }

    /// Every folder that could not be watched so far (a root or a folder inside one that the
    /// user may not read, say), with why and for how long. Such a folder is retried on its
    /// parent's events and at the scan interval, never dropped.
    pub fn unwatched(&self) -> Vec<UnwatchedFolder> {
        self.gaps.report(self.board.clock().now())
    }
}

impl Drop for FileActivityTracker {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(thread) = self.thread.get_mut().take() {
            let _ = thread.join();
        }
    }
}

/// Fingerprint of one entry for the stat scan: for a file its data and status change times
/// (nanoseconds), size and inode; for a folder its mode, owner, group and inode.
type Fingerprint = (i64, i64, i64, i64, u64, u64);

/// The tracker's own thread: owns the watcher, re-arms roots, runs the stat scan.
struct Worker {
    roots: Vec<(PathBuf, RootState)>,
    /// The parts that could not be watched.
    gaps: Gaps,
    filter: Arc<PathFilter>,
    board: Arc<ActivityBoard>,
    watcher: Option<super::shared_watcher::SharedWatcher>,
    scanning: Arc<AtomicBool>,
    /// Set when the arming begins.
    arming: Arc<AtomicBool>,
    scan_interval: Duration,
    snapshot: Option<HashMap<PathBuf, Fingerprint>>,
    tx: Sender<Msg>,
    /// What this thread has yet to act on (shared with the tracker).
    queued: Queued,
    /// Roots already warned about, so a broken root is logged once per breakage.
    warned: Vec<PathBuf>,
    /// Whether the roots were armed once (the first arming is not a change).
    armed: bool,
}

/// Drops the watch of `root` in its `old` state (at `old_target` when it was a link to a folder).
fn unwatch_root(
    watcher: &mut super::shared_watcher::SharedWatcher,
    root: &Path,
    old: &RootState,
    old_target: Option<&Path>,
) {
    match old {
        RootState::Watched => {
            let _ = watcher.unwatch(old_target.unwrap_or(root));
        }
        RootState::Waiting(ancestor)
        | RootState::NotAFolder(ancestor)
        | RootState::Unwatchable(ancestor) => {
            let _ = watcher.unwatch(ancestor);
        }
        RootState::Invalid => {}
    }
}

fn is_out_of_watches(error: &notify::Error) -> bool {
    match &error.kind {
        notify::ErrorKind::MaxFilesWatch => true,
        notify::ErrorKind::Io(e) => e
            .raw_os_error()
            .is_some_and(crate::process::sys::is_watch_limit_error),
        _ => false,
    }
}

/// Waits out the arming delay on the tracker's channel: `None` when told to stop first, else
/// whom to tell once armed (a caller of [`FileActivityTracker::arm_now`], if one asked).
/// Nothing else can come before the arming (no watcher exists to send it).
fn wait_to_arm(rx: &Receiver<Msg>, queued: &Queued, delay: Duration) -> Option<Option<Sender<()>>> {
    // Real time, as every look at the OS: a frozen test clock must not keep the watches off.
    let deadline = Instant::now() + delay;
    loop {
        match rx.recv_deadline(deadline) {
            Ok(Msg::ArmNow(ack)) => return Some(Some(ack)),
            Ok(Msg::Stop) | Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return None,
            Ok(Msg::Rearm | Msg::Retry(_) | Msg::FallBack) => queued.done(),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => return Some(None),
        }
    }
}

impl Worker {
    /// The tracker's thread: waits out the arming `delay` first (if any), then works.
    fn start(
        mut self,
        rx: Receiver<Msg>,
        delay: Duration,
        forced: bool,
        since: SystemTime,
    ) -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("quietus-files".into())
            .spawn(move || {
                if !delay.is_zero() {
                    let Some(ack) = wait_to_arm(&rx, &self.queued, delay) else {
                        return; // stopped before the arming: no watch was ever made
                    };
                    self.begin(forced);
                    self.changed_since(since);
                    self.queued.done();
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                }
                self.run(rx)
            })
            .map_err(|e| SpawnError::thread("file tracker", e).into())
    }

    /// Makes the watcher (or falls back to the stat scan when `forced`) and arms the roots.
    fn begin(&mut self, forced: bool) {
        self.arming.store(true, Ordering::Release);
        if let Err(e) = self.filter.build() {
            // Checked at the start, each pattern parses: only a set too big for the matcher
            // gets here. Nothing could be told apart, so nothing is watched, and it is said.
            log::warn!("files source unavailable: {e}");
            let now = self.board.clock().now();
            for (root, _) in &self.roots {
                self.gaps.open(root, e.to_string(), now);
            }
            self.board.set_available(&ActivitySource::Files, false);
            return;
        }
        if forced {
            self.fall_back("forced by configuration");
        } else {
            self.start_watcher();
        }
        self.arm();
    }

    /// After a delayed arming: stamps the board when anything that counts was created,
    /// written, renamed or changed under the roots after `since` (by its modification and
    /// status change times; a folder by its birth time). Strictly after: a change in the same
    /// clock tick as `since` but before it (the caller's own setup) does not count, and one in
    /// that tick after it is missed, which moves a stall's deadline by at most that tick.
    fn changed_since(&self, since: SystemTime) {
        let newer = |t: io::Result<SystemTime>| t.is_ok_and(|t| t > since);
        let changed = |path: &Path, meta: &fs::Metadata| {
            let recent = if meta.is_dir() {
                newer(meta.created())
            } else {
                let ctime = SystemTime::UNIX_EPOCH
                    .checked_add(Duration::new(
                        u64::try_from(meta.ctime()).unwrap_or(0),
                        u32::try_from(meta.ctime_nsec()).unwrap_or(0),
                    ))
                    .ok_or(io::ErrorKind::InvalidData.into());
                newer(meta.modified()) || newer(ctime)
            };
            recent && self.filter.place(path) == Place::Inside(true)
        };
        let mut found = false;
        for (root, state) in &self.roots {
            if *state != RootState::Watched {
                continue;
            }
            found = fs::metadata(root).is_ok_and(|meta| newer(meta.created()))
                // An unreadable folder is left to the arming, which reports it as a gap.
                || walk(root, &mut |path, meta| changed(path, meta), &mut |_, _| {});
            if found {
                break;
            }
        }
        if found {
            self.board.stamp(&ActivitySource::Files);
        }
    }

    fn start_watcher(&mut self) {
        let filter = self.filter.clone();
        let board = self.board.clone();
        let tx = self.tx.clone();
        let queued = self.queued.clone();
        let gaps = self.gaps.clone();
        let handler = move |result: &notify::Result<notify::Event>| match result {
            Ok(event) => {
                let mut counted = event.need_rescan();
                let mut rearm = false;
                if is_progress(&event.kind) {
                    for path in &event.paths {
                        match filter.place(path) {
                            Place::Inside(counts) => {
                                if filter.roots.iter().any(|r| r == path) {
                                    // The root itself appeared, vanished or changed kind: the
                                    // re-arm decides (and stamps a real change); a root that is
                                    // a file being written is not activity.
                                    rearm = true;
                                } else {
                                    counted |= counts;
                                    // A folder that could not be watched changed (its mode,
                                    // say), or a new folder came that notify could not watch
                                    // (it says nothing then): try it (again).
                                    let retry = match event.kind {
                                        EventKind::Create(CreateKind::Folder) => {
                                            fs::read_dir(path).is_err()
                                        }
                                        EventKind::Modify(_) => gaps.is_open(path),
                                        _ => false,
                                    };
                                    if retry {
                                        queued.post(&tx, Msg::Retry(path.clone()));
                                    }
                                }
                            }
                            Place::AboveRoot => rearm = true,
                            Place::Elsewhere => {}
                        }
                    }
                }
                if counted {
                    board.stamp(&ActivitySource::Files);
                }
                if rearm {
                    queued.post(&tx, Msg::Rearm);
                }
            }
            Err(error) if is_out_of_watches(error) => {
                queued.post(&tx, Msg::FallBack);
            }
            Err(error) => log::debug!("file watcher: {error}"),
        };
        // The watcher of these roots, shared with every other tracker of the same roots in
        // this process (one inotify instance for a server's sessions, `shared_watcher`).
        match super::shared_watcher::SharedWatcher::new(&self.filter.roots, handler) {
            Ok(watcher) => self.watcher = Some(watcher),
            Err(e) if is_out_of_watches(&e) => self.fall_back(&e.to_string()),
            Err(e) => {
                log::warn!("cannot start a file watcher ({e}); stat-scanning instead");
                self.fall_back(&e.to_string());
            }
        }
    }

    fn fall_back(&mut self, why: &str) {
        if !self.scanning.swap(true, Ordering::AcqRel) {
            log::warn!(
                "files source: stat-scanning {:?} every {:?} ({why})",
                self.filter.roots,
                self.scan_interval
            );
        }
        self.watcher = None;
    }

    /// (Re-)arms every root: a recursive watch on a root folder, a non-recursive one on the
    /// nearest existing ancestor of a missing root.
    fn arm(&mut self) {
        let mut available = true;
        let mut appeared_or_vanished = false;
        for index in 0..self.roots.len() {
            let (root, old) = self.roots[index].clone();
            let new = self.arm_root(index, &root, &old);
            if matches!(
                new,
                RootState::Invalid | RootState::NotAFolder(_) | RootState::Unwatchable(_)
            ) {
                available = false;
            }
            // A root that came into being (or went away) since the last look is activity, even
            // when the event that announced it was on a folder watched too late to see it.
            appeared_or_vanished |= self.armed
                && (old == RootState::Watched) != (new == RootState::Watched)
                && old != RootState::Invalid;
            self.roots[index].1 = new;
        }
        self.armed = true;
        self.board.set_available(&ActivitySource::Files, available);
        if appeared_or_vanished {
            self.board.stamp(&ActivitySource::Files);
        }
    }

    fn arm_root(&mut self, index: usize, root: &Path, old: &RootState) -> RootState {
        // A root that is a symbolic link to a folder is watched at the folder it points to
        // (inotify would otherwise watch the link itself).
        let target = fs::symlink_metadata(root)
            .is_ok_and(|m| m.file_type().is_symlink())
            .then(|| fs::canonicalize(root).ok())
            .flatten();
        let old_target =
            std::mem::replace(&mut self.filter.resolved.write()[index], target.clone());
        self.filter.canonical.write()[index] = fs::canonicalize(root).ok();
        let new = self.root_state(root);
        self.record_root_gap(root, &new);
        let Some(watcher) = self.watcher.as_mut() else {
            return new; // stat-scan mode: nothing to arm
        };
        // Always drop the old watch and add the new one: a root deleted and created again is a
        // new inode that needs a new watch even under the same path.
        unwatch_root(watcher, root, old, old_target.as_deref());
        // What was not watched under the root is found again by this arming.
        let now = self.board.clock().now();
        let under = target.clone().unwrap_or_else(|| root.to_path_buf());
        self.gaps.close(now, |gap| {
            gap != root && (gap.starts_with(root) || gap.starts_with(&under))
        });
        let result = match &new {
            RootState::Watched => {
                watcher.watch(target.as_deref().unwrap_or(root), RecursiveMode::Recursive)
            }
            RootState::Waiting(ancestor) | RootState::NotAFolder(ancestor) => {
                watcher.watch(ancestor, RecursiveMode::NonRecursive)
            }
            RootState::Invalid | RootState::Unwatchable(_) => Ok(()),
        };
        match result {
            Ok(()) => {
                // The root may have appeared (or changed kind) between the look and the watch on
                // its ancestor, unseen by that watch: look again.
                if matches!(new, RootState::Waiting(_) | RootState::NotAFolder(_))
                    && fs::metadata(root).is_ok_and(|m| m.is_dir())
                {
                    self.queued.post(&self.tx, Msg::Rearm);
                }
                new
            }
            Err(e) if is_out_of_watches(&e) => {
                self.fall_back(&e.to_string());
                new
            }
            Err(e) => self.watch_failed(root, new, target.as_deref(), e, now),
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
        let at = self.board.clock().now();
        match new {
            RootState::NotAFolder(_) => {
                self.gaps.open(root, "is not a folder".into(), at);
            }
            RootState::Invalid => {
                let why = fs::metadata(root)
                    .err()
                    .map_or_else(String::new, |e| e.to_string());
                self.gaps.open(root, why, at);
            }
            _ => {
                self.gaps.close(at, |gap| gap == root);
            }
        }
    }

    /// Watching `root` (in state `new`, at `target` when it is a link) failed with `e`, not for
    /// want of watches: the state the root is left in.
    fn watch_failed(
        &mut self,
        root: &Path,
        new: RootState,
        target: Option<&Path>,
        e: notify::Error,
        now: Instant,
    ) -> RootState {
        // The root may have vanished between the check and the watch: look again.
        if !root.exists() {
            self.queued.post(&self.tx, Msg::Rearm);
            return new;
        }
        let watched_as = target.unwrap_or(root).to_path_buf();
        if new != RootState::Watched {
            self.warn_once(root, &e.to_string());
            return RootState::Invalid;
        }
        match e.paths.first() {
            // The walk stopped at a folder inside: the rest is watched around it.
            Some(failed) if failed != &watched_as && failed.starts_with(&watched_as) => {
                let failed = failed.clone();
                self.cover(&watched_as, &failed, e.to_string());
                RootState::Watched
            }
            // The root itself cannot be watched (no permission): watch its parent to
            // learn when that changes, and retry at the check interval too.
            _ => {
                self.warn_once(root, &e.to_string());
                self.gaps.open(root, e.to_string(), now);
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
    fn cover(&mut self, dir: &Path, failed: &Path, reason: String) {
        let now = self.board.clock().now();
        if self.gaps.open(failed, reason.clone(), now) {
            log::warn!(
                "files source: cannot watch {} ({reason}); retrying it on its changes and every {:?}",
                failed.display(),
                self.scan_interval
            );
        }
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            // Links are not followed, like notify's own walk.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let child = entry.path();
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
    fn watch_part(&mut self, dir: &Path) -> bool {
        let Some(watcher) = self.watcher.as_mut() else {
            return false;
        };
        let now = self.board.clock().now();
        match watcher.watch(dir, RecursiveMode::Recursive) {
            Ok(()) => {
                self.gaps.close(now, |gap| gap == dir);
                true
            }
            Err(e) if is_out_of_watches(&e) => {
                self.fall_back(&e.to_string());
                false
            }
            Err(e) => match e.paths.first() {
                Some(failed) if failed != dir && failed.starts_with(dir) => {
                    let failed = failed.clone();
                    self.gaps.close(now, |gap| gap == dir);
                    self.cover(dir, &failed, e.to_string());
                    true
                }
                _ if !dir.is_dir() => {
                    self.gaps.close(now, |gap| gap == dir); // gone: nothing to watch
                    false
                }
                _ => {
                    let reason = e.to_string();
                    if self.gaps.open(dir, reason.clone(), now) {
                        log::warn!(
                            "files source: cannot watch {} ({reason}); retrying it on its changes and every {:?}",
                            dir.display(),
                            self.scan_interval
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
    fn retry(&mut self, only: Option<&Path>) {
        if self.scanning.load(Ordering::Acquire) {
            return; // the stat scan looks at everything readable anyway
        }
        let root_unwatchable = self.roots.iter().any(|(root, state)| {
            matches!(state, RootState::Unwatchable(_)) && only.is_none_or(|p| p == root)
        });
        if root_unwatchable {
            self.arm();
        }
        let parts = match only {
            Some(path) => vec![path.to_path_buf()],
            None => self.gaps.open_paths(),
        };
        let mut back = false;
        for path in parts {
            if self.roots.iter().any(|(r, _)| *r == path) {
                continue;
            }
            let was_open = self.gaps.is_open(&path);
            back |= self.watch_part(&path) && was_open;
        }
        if back {
            self.board.stamp(&ActivitySource::Files);
        }
    }

    fn warn_once(&mut self, root: &Path, why: &str) {
        if !self.warned.iter().any(|w| w == root) {
            log::warn!("files source unavailable for {}: {why}", root.display());
            self.warned.push(root.to_path_buf());
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        let clock = self.board.clock().clone();
        let mut next_scan: Option<Instant> = None;
        loop {
            let scanning = self.scanning.load(Ordering::Acquire);
            let timer = if scanning {
                let due = *next_scan.get_or_insert_with(|| {
                    self.scan(); // baseline
                    clock.now() + self.scan_interval
                });
                clock.at(due)
            } else if !self.gaps.open_paths().is_empty() {
                // Parts that could not be watched are retried at the scan interval too, in
                // case no event on their parent says when they can be.
                let due = *next_scan.get_or_insert_with(|| clock.now() + self.scan_interval);
                clock.at(due)
            } else {
                next_scan = None;
                never()
            };
            select! {
                recv(rx) -> msg => match msg {
                    Ok(Msg::Rearm) => {
                        // Coalesce a burst of requests into one re-arm, keeping the first
                        // other message for its turn: a `Stop` swallowed here would leave
                        // `Drop` joining this thread forever.
                        let mut after = None;
                        let mut rearms = 1;
                        while let Ok(msg) = rx.try_recv() {
                            if !matches!(msg, Msg::Rearm) {
                                after = Some(msg);
                                break;
                            }
                            rearms += 1;
                        }
                        self.arm();
                        (0..rearms).for_each(|_| self.queued.done());
                        match after {
                            Some(Msg::Stop) => return,
                            Some(Msg::Retry(path)) => {
                                self.retry(Some(&path));
                                self.queued.done();
                            }
                            Some(Msg::FallBack) => {
                                self.fall_back("the system is out of file watches");
                                self.arm();
                                self.queued.done();
                            }
                            Some(Msg::ArmNow(ack)) => {
                                let _ = ack.send(());
                            }
                            Some(Msg::Rearm) | None => {}
                        }
                    }
                    Ok(Msg::Retry(path)) => {
                        self.retry(Some(&path));
                        self.queued.done();
                    }
                    Ok(Msg::FallBack) => {
                        self.fall_back("the system is out of file watches");
                        self.arm();
                        self.queued.done();
                    }
                    Ok(Msg::ArmNow(ack)) => {
                        let _ = ack.send(()); // armed already
                    }
                    Ok(Msg::Stop) | Err(_) => return,
                },
                recv(timer) -> _ => {
                    if scanning {
                        self.arm(); // roots may have appeared, vanished or turned into files
                        self.scan();
                    } else {
                        self.retry(None);
                    }
                    next_scan = Some(clock.now() + self.scan_interval);
                }
            }
        }
    }

    /// One stat scan of every root; stamps the board when anything that counts changed since
    /// the previous scan (the first scan only records a baseline).
    fn scan(&mut self) {
        let mut now = HashMap::new();
        let mut unreadable = Vec::new();
        for (root, state) in &self.roots {
            if *state == RootState::Watched {
                collect(root, &self.filter, &mut now, &mut unreadable);
            }
        }
        // The folders that cannot be read are what this mode cannot see: exactly those are
        // the gaps now, and each is looked at again at the next scan.
        let at = self.board.clock().now();
        let roots = &self.roots;
        self.gaps.close(at, |gap| {
            !unreadable.iter().any(|(p, _)| p == gap)
                && !roots
                    .iter()
                    .any(|(root, state)| root == gap && *state != RootState::Watched)
        });
        for (path, reason) in unreadable {
            if self.gaps.open(&path, reason.clone(), at) {
                log::warn!(
                    "files source: cannot read {} ({reason}); looking again every {:?}",
                    path.display(),
                    self.scan_interval
                );
            }
        }
        let changed = self.snapshot.as_ref().is_some_and(|before| *before != now);
        if changed {
            self.board.stamp(&ActivitySource::Files);
        }
        self.snapshot = Some(now);
    }
}

/// Walks `dir` without following symbolic links (entries by `lstat`), handing every entry to
/// `visit` until it says stop (`true`; then this returns `true`), and every folder that
/// cannot be read (but for one that vanished) to `unreadable`.
fn walk(
    dir: &Path,
    visit: &mut dyn FnMut(&Path, &fs::Metadata) -> bool,
    unreadable: &mut dyn FnMut(PathBuf, io::Error),
) -> bool {
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
    unreadable: &mut Vec<(PathBuf, String)>,
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
        unreadable.push((dir, e.to_string()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At a stale decision the monitor asks `arm_now`: once the watches are armed and nothing
    /// posted to the tracker's thread is left to act on, it returns without a round trip
    /// through that thread (which a loaded machine may take milliseconds to schedule); while
    /// a re-arm is posted, it still waits for it.
    #[test]
    fn arm_now_waits_for_the_tracker_only_when_something_is_left_to_act_on() {
        let dir = tempfile::tempdir().unwrap();
        for delay in [Duration::ZERO, Duration::from_secs(10)] {
            let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
            let config = FileWatchConfig::default().arm_delay(delay);
            let tracker = FileActivityTracker::start_for_session(
                &config,
                dir.path(),
                board,
                Duration::from_secs(1),
            )
            .unwrap();
            tracker.arm_now(); // the delayed arming, on this thread
            assert!(tracker.has_armed(), "{delay:?}");
            tracker.arm_now();
            tracker.arm_now();
            assert_eq!(tracker.round_trips.load(Ordering::Relaxed), 0, "{delay:?}");

            tracker.queued.post(&tracker.tx, Msg::Rearm);
            tracker.arm_now();
            assert_eq!(tracker.round_trips.load(Ordering::Relaxed), 1, "{delay:?}");
            assert!(
                tracker.queued.is_clear(),
                "{delay:?}: the re-arm was acted on"
            );
        }
    }

    #[test]
    fn a_stop_right_after_a_burst_of_rearms_is_not_lost() {
        // Dropping the tracker joins its thread: a `Stop` swallowed while coalescing re-arm
        // requests would make the drop hang forever.
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
            let tracker = FileActivityTracker::start(
                &FileWatchConfig::default(),
                dir.path(),
                board,
                Duration::from_secs(1),
            )
            .unwrap();
            let (done_tx, done_rx) = crossbeam_channel::bounded(1);
            std::thread::spawn(move || {
                let _ = tracker.tx.send(Msg::Rearm);
                let _ = tracker.tx.send(Msg::Rearm);
                drop(tracker); // sends Stop right behind them, then joins
                let _ = done_tx.send(());
            });
            assert!(
                done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
                "dropping the tracker hung"
            );
        }
    }

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

    /// Polls (bounded) until `board` has at least `n` file stamps.
    fn wait_for_stamps(board: &ActivityBoard, n: u64) -> bool {
        let give_up = Instant::now() + Duration::from_secs(10);
        while board.count(&ActivitySource::Files) < n && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(5));
        }
        board.count(&ActivitySource::Files) >= n
    }

    /// A delayed arming: what changed before it counts once it comes (the file written, the
    /// root created, a file renamed in), what does not count never does (an excluded file, a
    /// file untouched since before the start), and `arm_now` arms at once.
    /// A child done before the arming costs neither the matchers nor a watch: the globs are
    /// only parsed at the start (an invalid one is still an error then), and built at the
    /// arming.
    #[test]
    fn before_a_delayed_arming_nothing_is_built_or_watched() {
        let dir = tempfile::tempdir().unwrap();
        let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
        let config = FileWatchConfig::default().arm_delay(Duration::from_secs(10));
        let tracker = FileActivityTracker::start(
            &config,
            dir.path(),
            board.clone(),
            Duration::from_millis(20),
        )
        .unwrap();
        assert!(!tracker.has_armed());
        assert!(
            tracker.filter.globs.get().is_none(),
            "built before the arming"
        );
        tracker.arm_now();
        assert!(tracker.has_armed());
        assert!(
            tracker.filter.globs.get().is_some(),
            "not built at the arming"
        );
        drop(tracker);

        let bad = config.exclude("a[".to_owned());
        let error = FileActivityTracker::start(&bad, dir.path(), board, Duration::from_millis(20))
            .expect_err("an invalid glob is an error at the start, armed late or not");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
        assert!(error.to_string().contains("a["), "{error}");
    }

    #[test]
    fn a_delayed_arming_counts_what_changed_before_it() {
        for stat_scan in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let agent = dir.path().join(".agent");
            fs::create_dir_all(&agent).unwrap();
            fs::write(agent.join("old.md"), "before the start").unwrap();
            fs::write(dir.path().join("outside.md"), "x").unwrap();
            // In an earlier tick of the file clock than the tracker's start.
            std::thread::sleep(Duration::from_millis(30));
            let new_tracker = |delay: Duration| {
                let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
                let config = FileWatchConfig::default()
                    .force_stat_scan(stat_scan)
                    .arm_delay(delay);
                let tracker = FileActivityTracker::start(
                    &config,
                    dir.path(),
                    board.clone(),
                    Duration::from_millis(20),
                )
                .unwrap();
                // A tick of the file clock passes before the test acts: a change in the
                // start's own tick does not count (`changed_since`).
                std::thread::sleep(Duration::from_millis(30));
                (board, tracker)
            };
            let files = |board: &ActivityBoard| board.count(&ActivitySource::Files);

            // Nothing changed: armed (on demand), no stamp.
            let (board, tracker) = new_tracker(Duration::from_secs(10));
            fs::write(agent.join("debug.log"), "excluded").unwrap();
            tracker.arm_now();
            assert_eq!(
                files(&board),
                0,
                "nothing that counts changed (stat scan: {stat_scan})"
            );
            drop(tracker);

            // A file written before the arming counts at the arming.
            let (board, tracker) = new_tracker(Duration::from_secs(10));
            fs::write(agent.join("plan.md"), "written before the arming").unwrap();
            assert_eq!(files(&board), 0, "not armed yet: nothing can count yet");
            tracker.arm_now();
            assert_eq!(
                files(&board),
                1,
                "the write before the arming (stat scan: {stat_scan})"
            );
            tracker.arm_now(); // armed already: no second look
            assert_eq!(files(&board), 1);
            drop(tracker);

            // A file renamed in from outside the roots counts (its status change time moves).
            let (board, tracker) = new_tracker(Duration::from_secs(10));
            fs::rename(dir.path().join("outside.md"), agent.join("moved.md")).unwrap();
            tracker.arm_now();
            assert_eq!(
                files(&board),
                1,
                "the rename into the root (stat scan: {stat_scan})"
            );
            drop(tracker);

            // The root created before the arming counts; the arming comes by itself.
            fs::remove_dir_all(&agent).unwrap();
            let (board, tracker) = new_tracker(Duration::from_millis(200));
            fs::create_dir(&agent).unwrap();
            assert!(
                wait_for_stamps(&board, 1),
                "the root created (stat scan: {stat_scan})"
            );
            drop(tracker);
        }
    }

    #[test]
    fn own_files_are_ignored_by_identity_under_any_spelling() {
        // The workspace is reached through a symbolic link; the own file is named through the
        // real folder, before it exists; the tracker watches the link's spelling.
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir_all(real.join(".agent")).unwrap();
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&real, &alias).unwrap();
        for mode in [false, true] {
            let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
            let own = real.join(format!(".agent/events-{mode}.jsonl"));
            let tracker = FileActivityTracker::start(
                &FileWatchConfig::default()
                    .own_file(&own)
                    .force_stat_scan(mode),
                &alias,
                board.clone(),
                Duration::from_millis(20),
            )
            .unwrap();
            // A name registered later, through the link, counts as own too.
            let later = alias.join(format!(".agent/report-{mode}.json"));
            tracker.ignore_file(&later);
            for i in 0..20 {
                fs::write(&own, format!("line {i}")).unwrap();
                fs::write(&later, format!("line {i}")).unwrap();
                if mode {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            // Then one real change, after every own write.
            fs::create_dir(real.join(format!(".agent/work-{mode}"))).unwrap();
            assert!(wait_for_stamps(&board, 1), "the folder was not seen");
            if mode {
                std::thread::sleep(Duration::from_millis(100)); // a few more scans
            }
            assert_eq!(board.count(&ActivitySource::Files), 1, "stat scan: {mode}");
            drop(tracker);
        }
    }

    #[test]
    fn metadata_changes_count_in_the_stat_scan_as_under_inotify() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join(".agent");
        fs::create_dir_all(agent.join("sub")).unwrap();
        fs::write(agent.join("plan.md"), "x").unwrap();
        for stat_scan in [false, true] {
            let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
            let tracker = FileActivityTracker::start(
                &FileWatchConfig::default().force_stat_scan(stat_scan),
                dir.path(),
                board.clone(),
                Duration::from_millis(20),
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(100)); // the scan's baseline
            let mode = if stat_scan { 0o600 } else { 0o640 };
            fs::set_permissions(agent.join("plan.md"), fs::Permissions::from_mode(mode)).unwrap();
            assert!(
                wait_for_stamps(&board, 1),
                "file chmod, stat scan: {stat_scan}"
            );
            let seen = board.count(&ActivitySource::Files);
            let mode = if stat_scan { 0o700 } else { 0o750 };
            fs::set_permissions(agent.join("sub"), fs::Permissions::from_mode(mode)).unwrap();
            assert!(
                wait_for_stamps(&board, seen + 1),
                "folder chmod, stat scan: {stat_scan}"
            );
            drop(tracker);
        }
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
