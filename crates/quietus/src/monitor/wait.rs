//! How the monitor sleeps: one way under every clock. It sleeps in `poll` on its wake-up
//! descriptor (poked by every message), the leader's pidfd (its exit) and, until their
//! readers start, the output pipes; only the clock's deadline reaches it in two ways:
//!
//! - the real clock ([`SystemClock`](crate::SystemClock) as the session's own): a deadline
//!   is an `Instant`, and `poll`'s timeout reaches it;
//! - any other clock (a [`MockClock`](crate::MockClock), a caller's): its timer channel, armed
//!   by the monitor as before, is watched by a relay thread that pokes the wake-up when it
//!   fires. The relay is the clock's part, not the monitor's: the loop, the exit detection
//!   and the readers' start a test runs under a mock clock are those production runs.
//!
//! Where the system has no pidfd (not Linux, Linux before 5.3), a waiter thread tells of the
//! exit as a message, under every clock alike.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, never, select};

use crate::clock::Clock;
use crate::contract::{Control, ControlTx};
use crate::error::SpawnError;
use crate::pid::Pid;
use crate::process::sys::{self, Wakeup, Woken};

use crate::process::spare::Spare;

/// When the monitor wakes next.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wake {
    /// A deadline on the session's clock (idle, hard, grace, drain).
    pub(super) at: Instant,
    /// A real-time re-check of operating-system state (group members gone, pipes emptied).
    ///
    /// Deliberately not on the session's clock: the OS makes progress in real time, and a
    /// frozen mock clock must not stall the monitor while a killed process finishes dying.
    pub(super) poll: Option<Duration>,
}

/// While a ladder waits for group members other than the (already exited) leader, it checks
/// them at 5 ms, doubling up to 200 ms: quick for the common case, cheap for a slow one.
pub(super) const POLL_MIN: Duration = Duration::from_millis(5);
pub(super) const POLL_MAX: Duration = Duration::from_millis(200);

/// The monitor's sleep: its wake-up, and how the clock's deadlines reach it.
pub(super) struct Sleeper {
    wakeup: Arc<Wakeup>,
    alarm: Alarm,
}

/// How the clock's deadline wakes the monitor.
enum Alarm {
    /// The real clock: `poll`'s timeout.
    RealTime,
    /// Another clock: each timer armed (a new deadline) goes to the relay thread.
    Relay {
        timers: Sender<Receiver<Instant>>,
        /// The deadline of the timer last handed over.
        handed: Option<Instant>,
    },
}

#[cfg(test)]
thread_local! {
    /// How many waiter threads this thread started (tests).
    pub(super) static WAITERS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl Sleeper {
    /// The wake-up for the leader `pid` (for the control channel's senders too), and, given the
    /// thread for it (`relay`: the session's clock is not the real one), the relay of its
    /// timers.
    pub(super) fn new(pid: Pid, relay: Option<Spare>) -> io::Result<(Sleeper, Arc<Wakeup>)> {
        let wakeup = Arc::new(Wakeup::new(pid).map_err(|e| {
            SpawnError::new(
                crate::error::SpawnErrorKind::Thread,
                "cannot make the monitor's wake-up descriptor",
                e,
            )
        })?);
        let alarm = if let Some(thread) = relay {
            let (timers, rx) = crossbeam_channel::unbounded();
            let poked = wakeup.clone();
            thread.run(move || relay_timers(&rx, &poked)).map_err(|_| {
                SpawnError::thread("clock relay", io::Error::other("it ended unused"))
            })?;
            Alarm::Relay {
                timers,
                handed: None,
            }
        } else {
            Alarm::RealTime
        };
        let sleeper = Sleeper {
            wakeup: wakeup.clone(),
            alarm,
        };
        Ok((sleeper, wakeup))
    }

    /// The leader's pidfd, shared (the ladder signals the leader through it): one per session.
    pub(super) fn leader_pidfd(&self) -> Option<Arc<std::os::fd::OwnedFd>> {
        self.wakeup.leader_pidfd()
    }

    /// Sleeps until `wake` (its deadline on the session's `clock`, its real-time re-check), a
    /// message, the leader's exit (unless `leader_exited`), or one of `pipes` being readable. On a
    /// clock other than the real one, a timer is armed for each new deadline (one for a
    /// deadline that stays: a silent child under an idle timeout of hours needs one timer).
    pub(super) fn sleep(
        &mut self,
        clock: &Clock,
        wake: Wake,
        leader_exited: bool,
        pipes: [Option<BorrowedFd<'_>>; 2],
    ) -> Woken {
        let until = match &mut self.alarm {
            Alarm::RealTime => Some(wake.at.saturating_duration_since(clock.now())),
            Alarm::Relay { timers, handed } => {
                if *handed != Some(wake.at) {
                    *handed = Some(wake.at);
                    // The relay ends only with this sender: the send cannot fail.
                    let _ = timers.send(clock.at(wake.at));
                }
                None
            }
        };
        let timeout = match (until, wake.poll) {
            (Some(until), Some(poll)) => Some(until.min(poll)),
            (until, poll) => until.or(poll),
        };
        self.wakeup.sleep(timeout, leader_exited, pipes)
    }
}

/// The relay of a clock's timers: pokes `wakeup` when the last timer handed over fires; ends
/// when the monitor is gone.
fn relay_timers(timers: &Receiver<Receiver<Instant>>, wakeup: &Wakeup) {
    let mut current = never();
    loop {
        select! {
            recv(timers) -> timer => match timer {
                Ok(timer) => current = timer,
                Err(_) => return,
            },
            recv(current) -> fired => {
                if fired.is_ok() {
                    wakeup.poke();
                }
                current = never();
            }
        }
    }
}

/// How the monitor learns of the leader's exit: by itself through the pidfd (nothing to do
/// here); told at once when it had exited, alone, before the monitor started (`gone`); or by
/// a waiter thread where there is no pidfd (`waiter`, started before the program where the
/// system has no pidfds).
pub(super) fn watch_exit(
    pid: Pid,
    wakeup: &Wakeup,
    exited: ControlTx,
    gone: bool,
    waiter: Option<Spare>,
) -> io::Result<()> {
    if gone {
        let _ = exited.send(Control::ChildExited);
        return Ok(());
    }
    if wakeup.sees_exit() {
        return Ok(());
    }
    #[cfg(test)]
    WAITERS.with(|n| n.set(n.get() + 1));
    let unused = || {
        let why = "no thread was started for it before the program (its pidfd could not be had)";
        SpawnError::thread("waiter", io::Error::other(why))
    };
    waiter
        .ok_or_else(unused)?
        .run(move || {
            if let Err(e) = sys::wait_exited_no_reap(pid) {
                log::error!("waiting for pid {pid}: {e}");
            }
            let _ = exited.send(Control::ChildExited);
        })
        .map(drop)
        .map_err(|_| unused().into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
