//! The worker thread (`quietus-files`): acts on what `notify`'s handler and the tracker post
//! to it (re-arm, retry a folder, fall back to the stat scan, answer an `arm_now`), and runs
//! the stat scan and the retries at the scan interval, on the session's clock. It owns each
//! job's state: the roots and the watcher (`rearm`), the stat scan's snapshot (`scan`).

use std::io;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, never, select};

use super::common::{Common, Msg};
use super::deferred::{ArmCall, Arming, changed_since, wait_to_arm};
use super::rearm::Roots;
use super::scan::StatScan;
use crate::activity::ActivitySource;
use crate::error::SpawnError;

/// Whether the worker goes on after a message.
enum Flow {
    Go,
    Stop,
}

/// The tracker's own thread: owns the roots (and the watcher), runs the stat scan.
pub(super) struct Worker {
    common: Common,
    /// The arming's state: the roots, how each is watched, the watcher.
    roots: Roots,
    /// The stat scan's state.
    scan: StatScan,
}

impl Worker {
    /// The worker of `common`'s roots, none armed yet.
    pub(super) fn new(common: Common) -> Worker {
        Worker {
            roots: Roots::new(common.clone()),
            scan: StatScan::default(),
            common,
        }
    }

    /// The tracker's thread: waits out the arming delay first (if any), then works.
    pub(super) fn start(mut self, rx: Receiver<Msg>, arming: Arming) -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("quietus-files".into())
            .spawn(move || {
                if !arming.delay.is_zero() {
                    match wait_to_arm(&rx, &self.common.poster, arming.delay) {
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
        self.common.arming.store(true, Ordering::Release);
        self.roots.begin(forced);
    }

    /// A delayed arming: the watches, the look at what changed since the start, and the
    /// arming counted as done.
    pub(super) fn arm_late(&mut self, arming: &Arming) {
        #[cfg(test)]
        super::deferred::hold::wait_if_held(&self.common.filter.roots);
        self.begin(arming.forced);
        if changed_since(arming.since, self.roots.list(), &self.common.filter) {
            self.common.board.stamp(&ActivitySource::Files);
        }
        self.common.poster.done();
    }

    /// The thread's loop: messages as they come; the stat scan (in that mode) or the retry of
    /// the parts not watched at the scan interval, on the session's clock.
    pub(super) fn run(mut self, rx: &Receiver<Msg>) {
        let clock = self.common.board.clock().clone();
        let mut next_scan: Option<Instant> = None;
        loop {
            let scanning = self.common.scanning.load(Ordering::Acquire);
            let timer = if scanning {
                let due = *next_scan.get_or_insert_with(|| {
                    self.scan.scan(&self.common, self.roots.list()); // baseline
                    clock.now() + self.common.scan_interval
                });
                clock.at(due)
            } else if !self.common.gaps.open_paths().is_empty() {
                // Parts that could not be watched are retried at the scan interval too, in
                // case no event on their parent says when they can be.
                let due = *next_scan.get_or_insert_with(|| clock.now() + self.common.scan_interval);
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
                        self.roots.arm(); // roots may have appeared, vanished or turned into files
                        self.scan.scan(&self.common, self.roots.list());
                    } else {
                        self.roots.retry(None);
                    }
                    next_scan = Some(clock.now() + self.common.scan_interval);
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
        self.roots.arm();
        (0..rearms).for_each(|_| self.common.poster.done());
        after.map_or(Flow::Go, |msg| self.act(msg))
    }

    /// Acts on one message.
    fn act(&mut self, msg: Msg) -> Flow {
        match msg {
            Msg::Rearm => {
                self.roots.arm();
                self.common.poster.done();
            }
            Msg::Retry(path) => {
                self.roots.retry(Some(&path));
                self.common.poster.done();
            }
            Msg::FallBack => {
                self.roots.fall_back("the system is out of file watches");
                self.roots.arm();
                self.common.poster.done();
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
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::activity::ActivityBoard;
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
                let _ = tracker.common.poster.send(Msg::Rearm);
                let _ = tracker.common.poster.send(Msg::Rearm);
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
