//! Deferred arming: a session's watches armed only when the arming delay is over (or at once
//! when a stale decision asks), so a program done sooner costs no inotify instance and no
//! thread; what changed before the arming is found then by its change times. Also what the
//! tracker's thread has yet to act on ([`Poster`]), so that asking for the arming costs no
//! round trip when nothing is pending.
//!
//! The delay runs on real time, not on the session's clock: the monitor asks for it as a
//! real-time poll ([`FileActivityTracker::arm_if_due`]), so a frozen test clock never keeps
//! the watches off. Every other time of the tracker is the session's clock's.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::FileActivityTracker;
use super::classes::Place;
use super::scan::walk;
use super::worker::{Msg, Worker};
use crate::activity::ActivitySource;

/// Now, on the arming delay's clock: real time, as the monitor polls for it (the module's
/// doc says why); the one place the tracker reads a clock other than the session's.
pub(super) fn arming_now() -> Instant {
    Instant::now()
}

/// When and how the watches are armed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arming {
    /// How long after the start ([`FileWatchConfig::arm_delay`](crate::FileWatchConfig)):
    /// zero arms at once, on the caller's thread.
    pub(super) delay: Duration,
    /// Stat-scan from the start instead of watching.
    pub(super) forced: bool,
    /// The start, on the precise wall clock (for the look at what changed before a delayed
    /// arming: no change made before it has a later time).
    pub(super) since: SystemTime,
}

/// How a wait for a delayed arming ended.
pub(super) enum ArmCall {
    /// Told to stop first: no watch is ever made.
    Stopped,
    /// The delay is over.
    Due,
    /// [`FileActivityTracker::arm_now`] asked: tell it once armed.
    Asked(Sender<()>),
}

/// The arming a session's monitor does when its delay is over, and what the tracker's thread
/// then runs: a session pays no thread for a program that ends within the delay.
pub(super) struct Deferred {
    pub(super) worker: Worker,
    pub(super) rx: Receiver<Msg>,
    pub(super) arming: Arming,
    /// When the delay is over (real time).
    pub(super) due: Instant,
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

/// Waits out the arming delay on the tracker's channel. Nothing but `ArmNow` and `Stop` can
/// come before the arming (no watcher exists to send the rest).
pub(super) fn wait_to_arm(rx: &Receiver<Msg>, poster: &Poster, delay: Duration) -> ArmCall {
    let deadline = arming_now() + delay;
    loop {
        match rx.recv_deadline(deadline) {
            Ok(Msg::ArmNow(ack)) => return ArmCall::Asked(ack),
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return ArmCall::Stopped,
            Ok(Msg::Rearm | Msg::Retry(_) | Msg::FallBack) => poster.done(),
            Err(RecvTimeoutError::Timeout) => return ArmCall::Due,
        }
    }
}

impl FileActivityTracker {
    /// When a session's delayed arming is due (real time), while it has not begun.
    pub(crate) fn arm_due(&self) -> Option<Instant> {
        self.deferred.lock().as_ref().map(|d| d.due)
    }

    /// Arms a session's delayed watches if their time has come (real time); returns how long
    /// until it does when it has not.
    pub(crate) fn arm_if_due(&self) -> Option<Duration> {
        let due = self.arm_due()?;
        let now = arming_now();
        if now < due {
            return Some(due - now);
        }
        self.arm_deferred();
        None
    }

    /// Begins a session's delayed arming now, on this thread (the watches, and the look at
    /// what changed since the start), then hands the tracker's work to a thread of its own.
    /// Returns whether there was one to begin.
    pub(super) fn arm_deferred(&self) -> bool {
        let Some(Deferred {
            mut worker,
            rx,
            arming,
            ..
        }) = self.deferred.lock().take()
        else {
            return false;
        };
        worker.arm_late(&arming);
        let started = std::thread::Builder::new()
            .name("quietus-files".into())
            .spawn(move || worker.run(&rx));
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

    /// Arms the watches now if [`FileWatchConfig::arm_delay`](crate::FileWatchConfig) put the
    /// arming off and it has not come yet (what changed since the start is counted then);
    /// returns once they are armed. At once when they are.
    pub fn arm_now(&self) {
        if self.arm_deferred() || self.poster.is_clear() {
            return; // armed, and nothing posted before this call is left to act on
        }
        #[cfg(test)]
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let (ack, armed) = crossbeam_channel::bounded(1);
        if self.poster.send(Msg::ArmNow(ack)) {
            let _ = armed.recv(); // an error: the thread is gone, nothing to wait for
        }
    }
}

impl Worker {
    /// A delayed arming: the watches, the look at what changed since the start, and the
    /// arming counted as done.
    pub(super) fn arm_late(&mut self, arming: &Arming) {
        self.begin(arming.forced);
        self.changed_since(arming.since);
        self.poster.done();
    }

    /// After a delayed arming: stamps the board when anything that counts was created,
    /// written, renamed or changed under the roots after `since` (by its modification and
    /// status change times; a folder by its birth time). `since` is read on the precise wall
    /// clock, so a change made before it never counts (the caller's own setup). A file time
    /// is either coarse (the wall clock at the last tick, behind the precise one) or, since
    /// Linux 6.13 for a change that follows a look at the file's times, precise (multigrain
    /// timestamps): ahead of the coarse clock, which is why `since` is not read on that one.
    /// A change in the tick after `since` stamped coarsely is missed, which moves a stall's
    /// deadline by at most that tick.
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
            if !state.is_watched() {
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
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::activity::ActivityBoard;
    use crate::config::FileWatchConfig;
    use crate::sources::files::wait_for_stamps;

    /// A tracker of `dir` on the system clock (its arming as `config` says), and its board.
    fn delayed(
        dir: &std::path::Path,
        config: &FileWatchConfig,
    ) -> (Arc<ActivityBoard>, FileActivityTracker) {
        let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
        let tracker =
            FileActivityTracker::start(config, dir, board.clone(), Duration::from_millis(20))
                .unwrap();
        (board, tracker)
    }

    /// At a stale decision the monitor asks `arm_now`: once the watches are armed and nothing
    /// posted to the tracker's thread is left to act on, it returns without a round trip
    /// through that thread (which a loaded machine may take milliseconds to schedule); while
    /// a re-arm is posted, it still waits for it.
    #[test]
    fn arm_now_waits_for_the_tracker_only_when_something_is_left_to_act_on() {
        let dir = tempfile::tempdir().unwrap();
        for delay in [Duration::ZERO, Duration::from_secs(10)] {
            let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
            let config = FileWatchConfig::builder().arm_delay(delay).build().unwrap();
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

            tracker.poster.post(Msg::Rearm);
            tracker.arm_now();
            assert_eq!(tracker.round_trips.load(Ordering::Relaxed), 1, "{delay:?}");
            assert!(
                tracker.poster.is_clear(),
                "{delay:?}: the re-arm was acted on"
            );
        }
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
        let config = FileWatchConfig::builder()
            .arm_delay(Duration::from_secs(10))
            .build()
            .unwrap();
        let (board, tracker) = delayed(dir.path(), &config);
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

        // Only the crate can hold an invalid configuration: its builder refuses one.
        let bad = FileWatchConfig {
            exclude: vec!["a[".to_owned()],
            ..config
        };
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
            // Written before the start: never newer than it (`changed_since`), in whatever
            // tick of the file clock.
            let new_tracker = |delay: Duration| {
                let board = Arc::new(ActivityBoard::new(crate::clock::Clock::system()));
                let config = FileWatchConfig::builder()
                    .force_stat_scan(stat_scan)
                    .arm_delay(delay)
                    .build()
                    .unwrap();
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

    /// A change made just before the start never counts at a delayed arming, however the
    /// filesystem stamps it. Since Linux 6.13, ext4, xfs, btrfs and tmpfs stamp a change that
    /// follows a look at the file's times with the precise clock (multigrain timestamps): such
    /// a time is ahead of the coarse clock the start used to be read on, and a plan file
    /// rewritten (or the root made) just before the start counted as the child's activity at
    /// the arming — a sleeping child lived one idle timeout longer (seen in CI).
    #[test]
    fn a_change_just_before_the_start_never_counts_at_the_arming() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join(".agent");
        for round in 0..20 {
            let _ = fs::remove_dir_all(&agent);
            fs::create_dir(&agent).unwrap();
            let plan = agent.join("plan.md");
            fs::write(&plan, "first").unwrap();
            let _ = fs::metadata(&plan); // a look at its times: the next change is precise
            let _ = fs::metadata(&agent);
            fs::write(&plan, "second").unwrap();
            let config = FileWatchConfig::builder()
                .arm_delay(Duration::from_secs(10))
                .build()
                .unwrap();
            let (board, tracker) = delayed(dir.path(), &config);
            tracker.arm_now();
            assert_eq!(
                board.count(&ActivitySource::Files),
                0,
                "round {round}: a write before the start counted"
            );
        }
    }
}
