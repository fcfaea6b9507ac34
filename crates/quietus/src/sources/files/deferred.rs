//! Deferred arming: a session's watches armed only when the arming delay is over (or at once
//! when a stale decision asks), so a program done sooner costs no inotify instance and no
//! thread; what changed before the arming is found then by its change times
//! ([`changed_since`]). The tracker's handle holds the arming put off (`super::Deferred`).
//!
//! The delay runs on real time, not on the session's clock: the monitor asks for it as a
//! real-time poll ([`FileActivityTracker::arm_if_due`]), so a frozen test clock never keeps
//! the watches off. Every other time of the tracker is the session's clock's. The arming
//! itself (each root's survey, the watches, the look at what changed) runs on the tracker's
//! own thread, never the monitor's: a large root under I/O load takes seconds to walk, and the
//! monitor's deadlines must not wait for it.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::classes::{PathFilter, Place};
use super::common::{Msg, Poster};
use super::rearm::RootState;
use super::scan::walk;

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

/// After a delayed arming: whether anything that counts was created,
/// written, renamed or changed under the roots after `since` (by its modification and
/// status change times; a folder by its birth time). `since` is read on the precise wall
/// clock, so a change made before it never counts (the caller's own setup). A file time
/// is either coarse (the wall clock at the last tick, behind the precise one) or, since
/// Linux 6.13 for a change that follows a look at the file's times, precise (multigrain
/// timestamps): ahead of the coarse clock, which is why `since` is not read on that one.
/// A change in the tick after `since` stamped coarsely is missed, which moves a stall's
/// deadline by at most that tick.
pub(super) fn changed_since(
    since: SystemTime,
    roots: &[(PathBuf, RootState)],
    filter: &PathFilter,
) -> bool {
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
        recent && filter.place(path) == Place::Inside(true)
    };
    let mut found = false;
    for (root, state) in roots {
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
    found
}

/// A test's hold on the delayed arming of the trackers of one root: the arming waits at its
/// start, on whatever thread runs it, until the [`HeldArming`] is dropped (a walk of a huge
/// tree under I/O load, made as long as a test needs, with no timing).
#[cfg(test)]
pub(crate) mod hold {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use crossbeam_channel::{Receiver, Sender};

    /// A root held: the way to tell its test an arming came (the arming thread's name), the
    /// release (disconnected when the hold is dropped), and how many times a tracker of it was
    /// asked whether it had settled while it had not.
    type Hold = (PathBuf, Sender<String>, Receiver<()>, Arc<AtomicUsize>);

    /// The roots held.
    static HELD: std::sync::Mutex<Vec<Hold>> = std::sync::Mutex::new(Vec::new());

    /// A hold on the arming of `root`'s trackers; dropped, it releases them.
    pub(crate) struct HeldArming {
        root: PathBuf,
        came: Receiver<String>,
        _release: Sender<()>,
        asked: Arc<AtomicUsize>,
    }

    /// Holds every delayed arming of a tracker whose roots include `root` from now on.
    pub(crate) fn hold_arming(root: &Path) -> HeldArming {
        let (came_tx, came) = crossbeam_channel::unbounded();
        let (release, released) = crossbeam_channel::bounded(0);
        let mut held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let asked = Arc::new(AtomicUsize::new(0));
        held.push((root.to_path_buf(), came_tx, released, asked.clone()));
        HeldArming {
            root: root.to_path_buf(),
            came,
            _release: release,
            asked,
        }
    }

    impl HeldArming {
        /// The name of the thread whose arming came to the hold, once one did (within
        /// `within`, real time).
        pub(crate) fn came(&self, within: Duration) -> Option<String> {
            self.came.recv_timeout(within).ok()
        }

        /// How many times a tracker of the held root was asked whether it had settled (a
        /// stale decision) and had not.
        pub(crate) fn asked(&self) -> usize {
            self.asked.load(Ordering::Relaxed)
        }
    }

    impl Drop for HeldArming {
        fn drop(&mut self) {
            let mut held = HELD
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            held.retain(|(root, _, _, _)| *root != self.root);
        }
    }

    /// A tracker of `roots` was asked whether it had settled, and had not: counted for the
    /// test that holds one of them.
    pub(in crate::sources::files) fn note_asked(roots: &[PathBuf]) {
        let held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, _, _, asked) in held.iter().filter(|(root, _, _, _)| roots.contains(root)) {
            asked.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// At the start of an arming of `roots`: waits while a test holds one of them.
    pub(in crate::sources::files) fn wait_if_held(roots: &[PathBuf]) {
        let found = {
            let held = HELD
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            held.iter()
                .find(|(root, _, _, _)| roots.contains(root))
                .map(|(_, came, released, _)| (came.clone(), released.clone()))
        };
        if let Some((came, released)) = found {
            let thread = std::thread::current().name().unwrap_or("").to_owned();
            let _ = came.send(thread);
            let _ = released.recv(); // an error: the hold was dropped
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::activity::ActivityBoard;
    use crate::activity::ActivitySource;
    use crate::config::FileWatchConfig;
    use crate::sources::files::FileActivityTracker;
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

    /// `arm_now` waits for the tracker's thread only while something is left to act on: a
    /// delayed arming (begun on that thread, never the caller's) or a posted re-arm. Once the
    /// watches are armed and nothing posted is left, it returns without a round trip through
    /// that thread (which a loaded machine may take milliseconds to schedule).
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
            tracker.arm_now(); // the delayed arming, on the tracker's thread
            assert!(tracker.has_armed(), "{delay:?}");
            assert!(tracker.settled(), "{delay:?}: armed, nothing left");
            let arming = u64::from(!delay.is_zero());
            let trips = || tracker.round_trips.load(Ordering::Relaxed) as u64;
            assert_eq!(trips(), arming, "{delay:?}: one wait for a delayed arming");
            tracker.arm_now();
            tracker.arm_now();
            assert_eq!(trips(), arming, "{delay:?}");

            // A re-arm posted: `arm_now` returns once it was acted on (with a round trip, unless
            // the thread was quicker than the call).
            tracker.common.poster.post(Msg::Rearm);
            tracker.arm_now();
            assert!(
                tracker.common.poster.is_clear(),
                "{delay:?}: the re-arm was acted on"
            );
            assert!(trips() <= arming + 1, "{delay:?}");
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
            tracker.common.filter.globs.get().is_none(),
            "built before the arming"
        );
        tracker.arm_now();
        assert!(tracker.has_armed());
        assert!(
            tracker.common.filter.globs.get().is_some(),
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
