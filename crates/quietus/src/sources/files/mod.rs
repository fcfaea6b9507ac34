//! The files source: [`FileActivityTracker`] stamps the board when files under the watched roots
//! are created, modified, renamed or removed.
//!
//! Normal mode uses `notify`'s recommended watcher (inotify on Linux, FSEvents on macOS); its
//! event handler only classifies the paths, stamps the board and, when a root appears or
//! disappears, asks the tracker's own thread to re-arm the watches. When the OS runs out of
//! watches or watcher instances, or when asked, the tracker thread stat-scans the roots at the
//! check interval instead (nanosecond mtime + size + inode). `notify`'s `PollWatcher` is not
//! used: its one-second mtime resolution misses writes.
//!
//! One job per file, each with its own state: [`classes`] (which paths and events count),
//! [`handler`] (`notify`'s event handler), [`worker`] (the tracker's thread, owning the
//! jobs' states), [`rearm`] (the roots: how each is watched, re-armed and worked around, and
//! the watcher), [`extent`] (a root's own filesystem, within the bound of one session's
//! watches), [`scan`] (the stat-scan fallback and its snapshot), [`gaps`] (what was not
//! watched, for the report) and [`deferred`] (a session's arming put off). What they share
//! is [`common`]'s: the messages to the thread, the poster that counts what is left to act
//! on, and the shared handles. This file holds the handle and the arming it puts off. The
//! imports run one way: `worker` → `deferred`, `scan` → `rearm` → `handler` → `common` →
//! `classes`, `gaps`.

mod classes;
mod common;
mod deferred;
mod extent;
mod gaps;
mod handler;
mod rearm;
mod scan;
mod worker;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::unbounded;

use crate::activity::{ActivityBoard, ActivitySource};
use crate::config::FileWatchConfig;
use crate::error::SpawnError;
use crate::outcome::UnwatchedFolder;
use crate::own_files::OwnFiles;
use crate::process::spare::Spare;
use classes::PathFilter;
use common::{Common, Msg, Poster};
use deferred::Arming;
use gaps::Gaps;
use worker::Worker;

#[cfg(test)]
pub(crate) use deferred::hold::hold_arming;

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
    /// The filter, the board, the gaps, the way to the thread, whether it stat-scans and
    /// whether the arming has begun (a watcher may exist, whose teardown can be slow).
    common: Common,
    /// How many times `arm_now` waited for the tracker's thread (tests).
    #[cfg(test)]
    round_trips: AtomicUsize,
    thread: crate::sync::Mutex<Option<JoinHandle<()>>>,
    /// A session's delayed arming, not begun yet: no thread exists until it is
    /// ([`FileActivityTracker::arm_if_due`]).
    deferred: crate::sync::Mutex<Option<Deferred>>,
}

impl fmt::Debug for FileActivityTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileActivityTracker")
            .field("roots", &self.common.filter.roots)
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
    /// folder is logged and the source marked unavailable on the board, as is a root beyond
    /// the 8,192 folders the roots may have watched together, or one on a pseudo-filesystem (`/proc`, `/sys`…), which is not
    /// watched ([`FileActivityTracker::unwatched`] says why). A root is watched on its own
    /// filesystem only: a folder of another device inside it is never entered.
    ///
    /// # Errors
    ///
    /// An `io::Error` carrying a [`SpawnError`], as from a session's spawn:
    /// of kind [`Config`](crate::error::SpawnErrorKind::Config) (`InvalidInput`, a
    /// [`ConfigError`](crate::ConfigError) inside) for an invalid glob, of kind
    /// [`Thread`](crate::error::SpawnErrorKind::Thread) if the tracker thread cannot be started.
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
        let arming = Arming {
            delay: config.arm_delay,
            forced: config.force_stat_scan,
            // The start, for the look at what changed before a delayed arming, on the precise
            // wall clock: no file time taken before it is later (`changed_since` says why not
            // the coarse clock file times often come from).
            since: SystemTime::now(),
        };
        let (tx, rx) = unbounded();
        // A delayed arming is something to wait for until it is done.
        let poster = Poster::new(tx, !arming.delay.is_zero());
        let common = Common {
            filter,
            board,
            gaps: Gaps::default(),
            poster,
            scanning: Arc::new(AtomicBool::new(false)),
            arming: Arc::new(AtomicBool::new(false)),
            scan_interval,
        };
        let mut worker = Worker::new(common.clone());
        let tracker = FileActivityTracker::handle_of(common);
        if deferred && !arming.delay.is_zero() {
            // Its thread now, waiting: one that cannot be had fails the session before the
            // program runs, not the source after it (issue 51 item 1).
            let thread = Spare::start("quietus-files".into(), "file tracker")?;
            *tracker.deferred.lock() = Some(Deferred {
                worker,
                rx,
                arming,
                due: deferred::arming_now() + arming.delay,
                thread,
            });
            return Ok(tracker);
        }
        if arming.delay.is_zero() {
            worker.begin(arming.forced);
        }
        *tracker.thread.lock() = Some(worker.start(rx, arming)?);
        Ok(tracker)
    }

    /// The handle of the tracker whose parts share `common`.
    fn handle_of(common: Common) -> FileActivityTracker {
        FileActivityTracker {
            common,
            #[cfg(test)]
            round_trips: AtomicUsize::new(0),
            thread: crate::sync::Mutex::new(None),
            deferred: crate::sync::Mutex::new(None),
        }
    }

    /// A session's tracker: with a delay, nothing runs until the session's monitor begins the
    /// arming ([`FileActivityTracker::arm_if_due`], or [`FileActivityTracker::settled`] at a
    /// stale decision), which its thread, started now and waiting, then does; a program that
    /// ends within the delay costs no watch. Without one, as [`FileActivityTracker::start`].
    pub(crate) fn start_for_session(
        config: &FileWatchConfig,
        base_dir: &Path,
        board: Arc<ActivityBoard>,
        scan_interval: Duration,
    ) -> io::Result<FileActivityTracker> {
        Self::begin(config, base_dir, board, scan_interval, true)
    }

    /// Whether the arming has begun: until then no watch exists, and dropping the tracker is
    /// quick (with watches, the kernel's teardown of an inotify instance can take 10 ms).
    pub(crate) fn has_armed(&self) -> bool {
        self.common.arming.load(Ordering::Acquire)
    }

    /// Whether the tracker has fallen back to stat-scanning (or was told to).
    pub fn is_stat_scan(&self) -> bool {
        self.common.scanning.load(Ordering::Acquire)
    }

    /// Never count activity on `path` (a file quietus or its caller writes itself, such as
    /// a log), matched by identity like [`FileWatchConfig::own_files`], from now on.
    pub fn ignore_file(&self, path: impl Into<PathBuf>) {
        self.common.filter.own_files.add(&path.into());
    }

    /// The shared list of own files, for the log spill to register its files in.
    pub(crate) fn own_files(&self) -> OwnFiles {
        self.common.filter.own_files.clone()
    }

    /// The absolute roots being tracked.
    pub fn roots(&self) -> &[PathBuf] {
        &self.common.filter.roots
    }

    /// Every folder that could not be watched so far (a root or a folder inside one that the
    /// user may not read, say), with why and for how long. Such a folder is retried on its
    /// parent's events and at the scan interval, never dropped; a root refused as too large or
    /// on a pseudo-filesystem is listed too, and not retried while it stays the same folder.
    pub fn unwatched(&self) -> Vec<UnwatchedFolder> {
        self.common.gaps.report(self.common.board.clock().now())
    }
}

/// A session's arming put off: what the tracker's thread (started with the session, waiting)
/// runs once the monitor begins it — the arming, then the tracker's work. A program that ends
/// within the delay costs no watch and no inotify instance.
struct Deferred {
    worker: Worker,
    rx: crossbeam_channel::Receiver<Msg>,
    arming: Arming,
    /// When the delay is over (real time).
    due: Instant,
    /// The tracker's thread, waiting for the worker.
    thread: Spare,
}

impl FileActivityTracker {
    /// When a session's delayed arming is due (real time), while it has not begun.
    pub(crate) fn arm_due(&self) -> Option<Instant> {
        self.deferred.lock().as_ref().map(|d| d.due)
    }

    /// Begins a session's delayed arming if its time has come (real time), on the tracker's
    /// own thread; returns how long until it does when it has not. Never waits for the
    /// arming: the caller (the session's monitor) never walks a tree.
    pub(crate) fn arm_if_due(&self) -> Option<Duration> {
        let due = self.arm_due()?;
        let now = deferred::arming_now();
        if now < due {
            return Some(due - now);
        }
        self.arm_deferred();
        None
    }

    /// Hands a session's delayed arming to the tracker's thread, started with the session and
    /// waiting: the watches (the survey of each root first), the look at what changed since
    /// the start, then the tracker's work. Returns at once, whether there was one to begin.
    fn arm_deferred(&self) -> bool {
        let Some(Deferred {
            mut worker,
            rx,
            arming,
            thread,
            ..
        }) = self.deferred.lock().take()
        else {
            return false;
        };
        // Begun: a watcher may exist from now on (dropping the tracker waits for the thread).
        self.common.arming.store(true, Ordering::Release);
        let work = move || {
            worker.arm_late(&arming);
            worker.run(&rx);
        };
        match thread.run(work) {
            Ok(thread) => *self.thread.lock() = Some(thread),
            Err(_) => {
                // Its thread ended unused (it cannot): nothing watches, nothing is left to
                // wait for, and it is said.
                log::warn!("files source unavailable: the file tracker's thread is gone");
                self.common
                    .board
                    .set_available(&ActivitySource::Files, false);
                self.common.poster.done();
            }
        }
        true
    }

    /// Whether the tracker has acted on everything asked of it so far: a session's delayed
    /// arming (begun now on its thread if it was not) and every re-arm, retry or fallback
    /// posted to its thread, so that what they find is on the board. Never waits: a stale
    /// decision asks again until it is (the session's monitor keeps its other deadlines
    /// meanwhile). A thread that is gone has nothing left to do.
    pub(crate) fn settled(&self) -> bool {
        self.arm_deferred();
        let settled = self.common.poster.is_clear()
            || self
                .thread
                .lock()
                .as_ref()
                .is_none_or(JoinHandle::is_finished);
        #[cfg(test)]
        if !settled {
            deferred::hold::note_asked(&self.common.filter.roots);
        }
        settled
    }

    /// Arms the watches now if [`FileWatchConfig::arm_delay`](crate::FileWatchConfig) put the
    /// arming off and it has not come yet (what changed since the start is counted then);
    /// returns once they are armed, and whatever was posted to the tracker's thread before
    /// this call was acted on. At once when there is nothing left to act on.
    pub fn arm_now(&self) {
        self.arm_deferred();
        if self.common.poster.is_clear() {
            return; // armed, and nothing posted before this call is left to act on
        }
        #[cfg(test)]
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let (ack, armed) = crossbeam_channel::bounded(1);
        if self.common.poster.send(Msg::ArmNow(ack)) {
            let _ = armed.recv(); // an error: the thread is gone, nothing to wait for
        }
    }
}

impl Drop for FileActivityTracker {
    fn drop(&mut self) {
        let _ = self.common.poster.send(Msg::Stop);
        if let Some(thread) = self.thread.get_mut().take() {
            let _ = thread.join();
        }
    }
}

/// Polls (bounded) until `board` has at least `n` file stamps.
#[cfg(test)]
pub(super) fn wait_for_stamps(board: &ActivityBoard, n: u64) -> bool {
    let give_up = std::time::Instant::now() + Duration::from_secs(10);
    while board.count(&ActivitySource::Files) < n && std::time::Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    board.count(&ActivitySource::Files) >= n
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

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
                &FileWatchConfig::builder()
                    .own_file(&own)
                    .force_stat_scan(mode)
                    .build()
                    .unwrap(),
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
                &FileWatchConfig::builder()
                    .force_stat_scan(stat_scan)
                    .build()
                    .unwrap(),
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
}
