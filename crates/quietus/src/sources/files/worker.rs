//! The worker thread (`quietus-files`): owns the watcher, acts on what `notify`'s handler and
//! the tracker post to it (re-arm, retry a folder, fall back to the stat scan, answer an
//! `arm_now`), and runs the stat scan and the retries at the scan interval, on the session's
//! clock.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, never, select};

use super::classes::{EventHandler, PathFilter};
use super::deferred::{ArmCall, Arming, Poster, wait_to_arm};
use super::gaps::Gaps;
use super::rearm::RootState;
use super::scan::Fingerprint;
use crate::activity::{ActivityBoard, ActivitySource};
use crate::error::SpawnError;
use crate::outcome::UnwatchedReason;
use crate::sources::shared_watcher::SharedWatcher;

/// What the tracker, and `notify`'s handler, ask of the worker thread.
pub(super) enum Msg {
    /// Look at every root again (one appeared, vanished or changed kind).
    Rearm,
    /// Try again to watch this folder (a part that could not be watched, or a new folder that
    /// cannot be read or that nothing watches yet).
    Retry(PathBuf),
    /// The system is out of watches: stat-scan instead.
    FallBack,
    /// Arm now if the watches are not armed yet; answer once they are.
    ArmNow(Sender<()>),
    /// The tracker is dropped.
    Stop,
}

/// Whether the worker goes on after a message.
enum Flow {
    Go,
    Stop,
}

/// The tracker's own thread: owns the watcher, re-arms roots, runs the stat scan.
pub(super) struct Worker {
    pub(super) roots: Vec<(PathBuf, RootState)>,
    /// The parts that could not be watched.
    pub(super) gaps: Gaps,
    pub(super) filter: Arc<PathFilter>,
    pub(super) board: Arc<ActivityBoard>,
    pub(super) watcher: Option<SharedWatcher>,
    pub(super) scanning: Arc<AtomicBool>,
    /// Set when the arming begins.
    pub(super) arming: Arc<AtomicBool>,
    pub(super) scan_interval: Duration,
    pub(super) snapshot: Option<HashMap<PathBuf, Fingerprint>>,
    /// The way to this thread (and what it has yet to act on, shared with the tracker).
    pub(super) poster: Poster,
    /// Roots already warned about, so a broken root is logged once per breakage.
    pub(super) warned: Vec<PathBuf>,
    /// Whether the roots were armed once (the first arming is not a change).
    pub(super) armed: bool,
    /// Per root, the folders its last measure counted (0 when refused or not measured): what
    /// it takes of the session's bound of watched folders.
    pub(super) measured: Vec<usize>,
    /// The most folders the roots may have watched together ([`super::extent`]).
    pub(super) watch_bound: usize,
}

/// Whether a `notify` error says the system is out of watches or watcher instances.
pub(super) fn is_out_of_watches(error: &notify::Error) -> bool {
    match &error.kind {
        notify::ErrorKind::MaxFilesWatch => true,
        notify::ErrorKind::Io(e) => e
            .raw_os_error()
            .is_some_and(crate::process::sys::is_watch_limit_error),
        _ => false,
    }
}

impl Worker {
    /// The tracker's thread: waits out the arming delay first (if any), then works.
    pub(super) fn start(mut self, rx: Receiver<Msg>, arming: Arming) -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("quietus-files".into())
            .spawn(move || {
                if !arming.delay.is_zero() {
                    match wait_to_arm(&rx, &self.poster, arming.delay) {
                        ArmCall::Stopped => return, // no watch was ever made
                        ArmCall::Due => self.arm_late(&arming),
                        ArmCall::Asked(ack) => {
                            self.arm_late(&arming);
                            let _ = ack.send(());
                        }
                    }
                }
                self.run(&rx);
            })
            .map_err(|e| SpawnError::thread("file tracker", e).into())
    }

    /// Makes the watcher (or falls back to the stat scan when `forced`) and arms the roots.
    pub(super) fn begin(&mut self, forced: bool) {
        self.arming.store(true, Ordering::Release);
        if let Err(e) = self.filter.build() {
            // Checked at the start, each pattern parses: only a set too big for the matcher
            // gets here. Nothing could be told apart, so nothing is watched, and it is said.
            log::warn!("files source unavailable: {e}");
            let now = self.board.clock().now();
            for (root, _) in &self.roots {
                self.gaps.open(root, UnwatchedReason::TooManyPatterns, now);
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

    fn start_watcher(&mut self) {
        let handler = EventHandler {
            filter: self.filter.clone(),
            board: self.board.clone(),
            to_worker: self.poster.clone(),
            gaps: self.gaps.clone(),
        };
        // The watcher of these roots, shared with every other tracker of the same roots in
        // this process (one inotify instance for a server's sessions, `shared_watcher`).
        match SharedWatcher::new(&self.filter.roots, move |event| handler.handle(event)) {
            Ok(watcher) => self.watcher = Some(watcher),
            Err(e) if is_out_of_watches(&e) => self.fall_back(&e.to_string()),
            Err(e) => {
                log::warn!("cannot start a file watcher ({e}); stat-scanning instead");
                self.fall_back(&e.to_string());
            }
        }
    }

    pub(super) fn fall_back(&mut self, why: &str) {
        if !self.scanning.swap(true, Ordering::AcqRel) {
            log::warn!(
                "files source: stat-scanning {:?} every {:?} ({why})",
                self.filter.roots,
                self.scan_interval
            );
        }
        self.watcher = None;
    }

    /// The thread's loop: messages as they come; the stat scan (in that mode) or the retry of
    /// the parts not watched at the scan interval, on the session's clock.
    pub(super) fn run(mut self, rx: &Receiver<Msg>) {
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
                recv(rx) -> msg => {
                    let flow = match msg {
                        Ok(Msg::Rearm) => self.rearm_burst(rx),
                        Ok(msg) => self.act(msg),
                        Err(_) => Flow::Stop,
                    };
                    if let Flow::Stop = flow {
                        return;
                    }
                }
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

    /// A `Rearm`, and every `Rearm` right behind it, as one re-arm; the first other message
    /// is kept for its turn: a `Stop` swallowed here would leave `Drop` joining this thread
    /// forever.
    fn rearm_burst(&mut self, rx: &Receiver<Msg>) -> Flow {
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
        (0..rearms).for_each(|_| self.poster.done());
        after.map_or(Flow::Go, |msg| self.act(msg))
    }

    /// Acts on one message.
    fn act(&mut self, msg: Msg) -> Flow {
        match msg {
            Msg::Rearm => {
                self.arm();
                self.poster.done();
            }
            Msg::Retry(path) => {
                self.retry(Some(&path));
                self.poster.done();
            }
            Msg::FallBack => {
                self.fall_back("the system is out of file watches");
                self.arm();
                self.poster.done();
            }
            Msg::ArmNow(ack) => {
                let _ = ack.send(()); // armed already
            }
            Msg::Stop => return Flow::Stop,
        }
        Flow::Go
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileWatchConfig;
    use crate::sources::files::FileActivityTracker;

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
                let _ = tracker.poster.send(Msg::Rearm);
                let _ = tracker.poster.send(Msg::Rearm);
                drop(tracker); // sends Stop right behind them, then joins
                let _ = done_tx.send(());
            });
            assert!(
                done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
                "dropping the tracker hung"
            );
        }
    }
}
