//! Signals sent to quietus. Every signal that would end it is either passed on to the
//! child's tree or has no effect (docs/cli.md, "Signals", has the table):
//!
//! - passed on like TERM (the same signal to the child's process group, then KILL after the
//!   grace; a second INT kills at once): HUP, INT, QUIT, TERM, USR1, USR2, ALRM, STKFLT, XCPU,
//!   VTALRM, PROF, IO, PWR — every catchable signal whose default action ends a process and
//!   that means "stop" when someone sends it;
//! - taken and ignored: XFSZ (a write past the file-size limit then fails with EFBIG, which
//!   the writer reports); PIPE stays ignored as Rust programs have it (a write to a closed
//!   pipe fails with EPIPE, which the pass-through relies on);
//! - an inherited ignore is respected (issue 28): a signal quietus was started with ignored
//!   (a script's background job has INT and QUIT ignored) is neither taken nor passed on, and
//!   the program inherits the ignore, as it would run directly or under `timeout`;
//! - left alone: the fault signals ILL, TRAP, ABRT, BUS, FPE, SEGV, SYS, so that a real fault
//!   (Rust's stack-overflow message among them) is reported as usual. Sent by another process,
//!   they end quietus like any Rust program (SEGV and BUS at the second: the runtime's
//!   stack-overflow handler takes the first and gives the signal its default action), and its
//!   guardian ends the tree;
//! - harmless with their default action: CHLD (also a cue to reap adopted orphans, when
//!   quietus can adopt them), CONT, URG; WINCH, which with `--pty` is taken and resizes the
//!   program's terminal to quietus's own terminal's size;
//! - job control: TSTP, TTIN and TTOU stop quietus (not the program, which runs in its own
//!   process group) until CONT, as they would any program;
//! - KILL and STOP cannot be caught.
//!
//! One mechanism: the signals quietus acts on are blocked before any thread exists (so
//! every thread inherits the mask: the command's `run` before the spawn, `serve` before its
//! first thread) and taken by one thread with `sigwait`. No handler is
//! installed anywhere: nothing runs in a signal context, and no system call is interrupted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use quietus::{KillLadder, Session, Signal};

use super::reaper;
use crate::report::Received;
use crate::sys::{self, Sig};

/// The signals passed on to the child's tree, those of them this platform has (PWR and STKFLT
/// are Linux's; STKFLT not on MIPS or SPARC): the library's signal table decides.
pub(crate) fn forwarded() -> Vec<i32> {
    [
        "HUP", "INT", "QUIT", "TERM", "USR1", "USR2", "ALRM", "XCPU", "VTALRM", "PROF", "IO",
        "PWR", "STKFLT",
    ]
    .into_iter()
    .filter_map(|name| name.parse::<Signal>().ok())
    .map(Signal::number)
    .collect()
}

/// The signals taken and ignored.
const IGNORED: [Sig; 1] = [Sig::XFSZ];

/// What quietus received while the child ran, as the signal thread records it.
#[derive(Debug, Default)]
struct Shared {
    /// The first forwarded signal's number (0: none).
    first: AtomicI32,
    /// A second INT made quietus kill the tree at once.
    forced: AtomicBool,
    /// The thread is acting on a signal to pass on: [`SignalHandling::finish`] waits for it.
    busy: AtomicBool,
    /// [`SignalHandling::finish`] was called: the thread takes signals and ignores them.
    closed: AtomicBool,
}

/// The signals quietus acts on, blocked in every thread before the child is spawned (so a
/// signal that arrives during the spawn is not lost: it stays pending, and is acted on as soon
/// as the session exists), and the thread that takes them (`sigwait`).
///
/// Blocked and waited for rather than caught: one `pthread_sigmask` where installing a handler
/// for each of the 16 signals (signal-hook, with its self-pipe) took 32 `rt_sigaction` calls,
/// a socket pair and an allocation per signal, about a tenth of a millisecond of every run's
/// start. The program does not inherit the mask: both ways of starting it empty it.
#[derive(Debug)]
pub(crate) struct SignalHandling {
    signals: Option<sys::Waited>,
    thread: Option<JoinHandle<()>>,
    received: Arc<Shared>,
    reap: bool,
    /// WINCH is taken: the program's terminal follows quietus's own terminal's size.
    resize: bool,
    /// A child of this process was a zombie before the signals were blocked (no CHLD will tell
    /// of it): one look for adopted zombies when the thread starts.
    zombie_before: bool,
}

impl SignalHandling {
    /// Blocks the forwarded and the ignored signals (and CHLD when `reap`, WINCH when
    /// `resize`), to be taken by the thread [`start`](Self::start) starts; not those
    /// quietus was started with ignored. Failing to is not fatal: the signals then keep
    /// their default action, which still ends the child through its guardian or its
    /// parent-death signal on Linux.
    pub(crate) fn install(reap: bool, resize: bool) -> SignalHandling {
        let mut wanted = forwarded();
        wanted.extend(IGNORED.map(Sig::as_raw));
        if resize {
            wanted.push(Sig::WINCH.as_raw());
        }
        let mut wanted = sys::not_ignored(wanted);
        if reap {
            // Never ignored by now: `prepare_supervisor` gave it its default action.
            wanted.push(Sig::CHILD.as_raw());
        }
        let signals = match sys::Waited::block(&wanted) {
            Ok(signals) => Some(signals),
            Err(e) => {
                log::warn!("cannot catch signals ({e}); they will not be passed on to the child");
                None
            }
        };
        SignalHandling {
            signals,
            thread: None,
            received: Arc::default(),
            reap,
            resize,
            // After the block: a child that becomes a zombie from now on leaves a CHLD pending.
            zombie_before: reap && sys::zombie_child(),
        }
    }

    /// Starts acting on the signals for `session`: forwarding, and reaping adopted zombies
    /// other than the session's child.
    pub(crate) fn start(&mut self, session: Arc<Session>, grace: Duration) {
        let Some(signals) = self.signals else {
            return;
        };
        let received = self.received.clone();
        let reap = self.reap;
        let resize = self.resize;
        let zombie_before = self.zombie_before;
        let child = session.pid();
        let started = std::thread::Builder::new()
            .name("quietus-signals".into())
            .spawn(move || {
                if zombie_before {
                    // Zombies from before the block (children of the process that exec'd
                    // quietus, orphans adopted through an inherited subreaper bit), here
                    // rather than on the way to the program's start.
                    log_reaped(reaper::reap_zombies(|pid| {
                        pid != child && !crate::probe::is_probe_command(pid)
                    }));
                }
                loop {
                    let number = match signals.wait() {
                        Ok(number) => number,
                        Err(e) => {
                            // Cannot happen with a valid set; should it, the signals take
                            // their usual action here rather than stay pending for ever.
                            log::warn!("cannot wait for signals ({e}); they will not be passed on");
                            signals.unblock();
                            loop {
                                std::thread::park();
                            }
                        }
                    };
                    if received.closed.load(Ordering::Acquire) {
                        continue; // quietus is on its way out: taken, and ignored
                    }
                    if number == Sig::CHILD.as_raw() {
                        // No zombie at all (the library reaped its own already): no look.
                        if reap && sys::zombie_child() {
                            log_reaped(reaper::reap_zombies(|pid| {
                                pid != child && !crate::probe::is_probe_command(pid)
                            }));
                        }
                        continue;
                    }
                    if resize && number == Sig::WINCH.as_raw() {
                        follow_own_size(&session);
                        continue;
                    }
                    if IGNORED.iter().any(|s| s.as_raw() == number) {
                        log::debug!("received signal {number}; ignored");
                        continue;
                    }
                    let Some(signal) = Signal::from_number(number) else {
                        continue;
                    };
                    received.busy.store(true, Ordering::Release);
                    pass_on(&received, &session, signal, grace);
                    received.busy.store(false, Ordering::Release);
                }
            });
        match started {
            Ok(thread) => self.thread = Some(thread),
            Err(e) => {
                log::warn!("cannot start the signal thread ({e}); signals take their usual action");
                // Deliverable to this thread again: none stays pending for ever.
                signals.unblock();
            }
        }
    }

    /// Stops acting on signals (they stay blocked, and are taken and ignored from now on);
    /// says what was received. Adopted zombies still there are not looked for: quietus
    /// exits next, and the kernel hands them to the next reaper up, which reaps them.
    ///
    /// The thread is not joined (it ends with the process): only a signal it is acting on is
    /// waited for, so that what it records is in the answer. Waking it and waiting for its end
    /// would cost the way out a thread switch or two; and a look for zombies it may be making
    /// (the guardian's CHLD, at the end of every run) is not waited for.
    pub(crate) fn finish(self) -> Received {
        self.received.closed.store(true, Ordering::Release);
        if self.thread.is_some() {
            // Bounded: passing a signal on is a message to the monitor, never a wait.
            let give_up = std::time::Instant::now() + Duration::from_secs(1);
            while self.received.busy.load(Ordering::Acquire) && std::time::Instant::now() < give_up
            {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        Received {
            first: Signal::from_number(self.received.first.load(Ordering::Acquire)),
            forced: self.received.forced.load(Ordering::Acquire),
        }
    }
}

/// Passes `signal` on to the session's tree: the ladder with it first (the first one), KILL at
/// once (a second INT); recorded in `received` before it is acted on.
fn pass_on(received: &Shared, session: &Session, signal: Signal, grace: Duration) {
    let number = signal.number();
    let first = received
        .first
        .compare_exchange(0, number, Ordering::AcqRel, Ordering::Acquire);
    if first.is_ok() {
        log::info!("received {signal}; passing it on to the child's tree");
        session.terminate_with(&KillLadder::polite(signal, grace));
    } else if number == Sig::INT.as_raw() {
        log::info!("second INT: killing the child's tree now");
        received.forced.store(true, Ordering::Release);
        session.kill();
    } else {
        log::info!("received {signal} again; the ladder goes on");
    }
}

/// The program's terminal to quietus's own terminal's size (a WINCH came).
fn follow_own_size(session: &Session) {
    if let Some(size) = super::terminal::own_terminal_size()
        && let Err(e) = session.resize(size.rows, size.cols)
    {
        log::debug!("resizing the program's terminal: {e}");
    }
}

fn log_reaped(pids: Vec<quietus::Pid>) {
    if !pids.is_empty() {
        let pids: Vec<u32> = pids.into_iter().map(quietus::Pid::get).collect();
        log::debug!("reaped adopted zombie(s) {pids:?}");
    }
}

/// Ends quietus by `signal`, the way a process that was ended by it ends: its parent sees
/// "killed by `signal`" (shells stop a loop on INT only then). No core dump for QUIT. The
/// signal has its default action (quietus installs no handler, and one it was started with
/// ignored is never taken): unblocked in this thread and raised at it, it ends the process. As
/// process 1, where a signal with its default action is ignored, exits with 128 + `signal`.
pub(crate) fn die_by(signal: Signal) -> ! {
    let code = 128 + signal.number();
    if std::process::id() != 1 {
        sys::disable_core_dumps();
        sys::raise_unblocked(signal.number());
    }
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On Linux x86-64 the thirteen, PWR and STKFLT included, each once; never a signal
    /// quietus must not pass on.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn every_forwarded_signal_this_platform_has_is_listed() {
        let mut signals = forwarded();
        signals.sort_unstable();
        // HUP INT QUIT USR1 USR2 ALRM TERM STKFLT XCPU VTALRM PROF IO PWR
        assert_eq!(signals, [1, 2, 3, 10, 12, 14, 15, 16, 24, 26, 27, 29, 30]);
    }

    /// `finish` does not join the thread, but a signal it is acting on is in the answer.
    #[test]
    fn finish_waits_for_a_signal_being_passed_on() {
        let received = Arc::new(Shared::default());
        received.busy.store(true, Ordering::Release);
        let acting = received.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20)); // still passing it on
            acting.first.store(Sig::TERM.as_raw(), Ordering::Release);
            acting.busy.store(false, Ordering::Release);
            // Then it would wait for the next signal: never joined.
            std::thread::sleep(Duration::from_secs(60));
        });
        let handling = SignalHandling {
            signals: None,
            thread: Some(thread),
            received,
            reap: false,
            resize: false,
            zombie_before: false,
        };
        let answer = handling.finish();
        assert_eq!(answer.first, Signal::from_number(Sig::TERM.as_raw()));
        assert!(!answer.forced);
    }
}
