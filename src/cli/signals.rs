//! Signals sent to stallwatch: TERM, INT, HUP and QUIT are passed on to the child's process
//! group (the same signal, then KILL after the grace); a second INT kills at once. When
//! stallwatch can adopt orphans (pid 1, child subreaper), SIGCHLD also triggers a sweep that
//! reaps adopted zombies, never the supervised child.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use stallwatch::{KillLadder, Session, Signal};

use super::reaper;

/// The signals passed on to the child's tree.
pub(crate) const FORWARDED: [i32; 4] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT];

/// What stallwatch received while the child ran, as the signal thread records it.
#[derive(Debug, Default)]
struct Shared {
    /// The first forwarded signal's number (0: none).
    first: AtomicI32,
    /// A second INT made stallwatch kill the tree at once.
    forced: AtomicBool,
}

/// What [`SignalHandling::finish`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Received {
    /// The first signal stallwatch received and passed on.
    pub(crate) first: Option<Signal>,
    /// Whether a second INT killed the tree at once.
    pub(crate) forced: bool,
}

/// Signal handlers installed before the child is spawned (so a signal that arrives during the
/// spawn is not lost: it is acted on as soon as the session exists), and the thread that acts
/// on them.
#[derive(Debug)]
pub(crate) struct SignalHandling {
    signals: Option<Signals>,
    handle: Option<Handle>,
    thread: Option<JoinHandle<()>>,
    received: Arc<Shared>,
    reap: bool,
}

impl SignalHandling {
    /// Catches TERM, INT, HUP and QUIT (and CHLD when `reap`). Failing to is not fatal: the
    /// signals then keep their default action, which still ends the child through its
    /// parent-death signal on Linux.
    pub(crate) fn install(reap: bool) -> SignalHandling {
        let mut wanted = FORWARDED.to_vec();
        if reap {
            wanted.push(SIGCHLD);
        }
        let signals = match Signals::new(&wanted) {
            Ok(signals) => Some(signals),
            Err(e) => {
                log::warn!("cannot catch signals ({e}); they will not be passed on to the child");
                None
            }
        };
        SignalHandling {
            handle: signals.as_ref().map(Signals::handle),
            signals,
            thread: None,
            received: Arc::default(),
            reap,
        }
    }

    /// Starts acting on the signals for `session`: forwarding, and reaping adopted zombies
    /// other than the session's child.
    pub(crate) fn start(&mut self, session: Arc<Session>, grace: Duration) {
        let Some(mut signals) = self.signals.take() else {
            return;
        };
        let received = self.received.clone();
        let reap = self.reap;
        let child = session.pid();
        if reap {
            // Zombies adopted before the handler existed.
            log_reaped(reaper::reap_zombies(|pid| pid != child));
        }
        let started = std::thread::Builder::new()
            .name("stallwatch-signals".into())
            .spawn(move || {
                for number in signals.forever() {
                    if number == SIGCHLD {
                        if reap {
                            log_reaped(reaper::reap_zombies(|pid| pid != child));
                        }
                        continue;
                    }
                    let Some(signal) = Signal::from_number(number) else {
                        continue;
                    };
                    let first = received.first.compare_exchange(
                        0,
                        number,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    if first.is_ok() {
                        log::info!("received {signal}; passing it on to the child's tree");
                        session.terminate_with(&KillLadder::polite(signal, grace));
                    } else if number == SIGINT {
                        log::info!("second INT: killing the child's tree now");
                        received.forced.store(true, Ordering::Release);
                        session.kill();
                    } else {
                        log::info!("received {signal} again; the ladder goes on");
                    }
                }
            });
        match started {
            Ok(thread) => self.thread = Some(thread),
            Err(e) => log::warn!("cannot start the signal thread ({e})"),
        }
    }

    /// Stops acting on signals (they stay caught, and are ignored from now on); reaps the
    /// adopted zombies left (the supervised child has been reaped by now); says what was
    /// received.
    pub(crate) fn finish(mut self) -> Received {
        if let Some(handle) = self.handle.take() {
            handle.close();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if self.reap {
            log_reaped(reaper::reap_zombies(|_| true));
        }
        Received {
            first: Signal::from_number(self.received.first.load(Ordering::Acquire)),
            forced: self.received.forced.load(Ordering::Acquire),
        }
    }
}

fn log_reaped(pids: Vec<u32>) {
    if !pids.is_empty() {
        log::debug!("reaped adopted zombie(s) {pids:?}");
    }
}

/// Ends stallwatch by `signal`, the way a process that was ended by it ends: its parent sees
/// "killed by `signal`" (shells stop a loop on INT only then). No core dump for QUIT. As
/// process 1, where a signal with its default action is ignored, exits with 128 + `signal`.
pub(crate) fn die_by(signal: Signal) -> ! {
    let code = 128 + signal.number();
    if std::process::id() != 1 {
        let no_core = rustix::process::Rlimit {
            current: Some(0),
            maximum: rustix::process::getrlimit(rustix::process::Resource::Core).maximum,
        };
        let _ = rustix::process::setrlimit(rustix::process::Resource::Core, no_core);
        // Restores the default action, unblocks and raises; does not return when that ends
        // the process (it falls back to abort if something else caught it meanwhile).
        let _ = signal_hook::low_level::emulate_default_handler(signal.number());
    }
    std::process::exit(code)
}
