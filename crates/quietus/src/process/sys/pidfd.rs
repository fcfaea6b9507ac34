//! Children and pidfds: waiting for a child's exit with or without reaping it, pidfds (signals
//! that reach one process or nobody), and the monitor's wake-up (an eventfd and the leader's
//! pidfd in one `poll`).

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Signal as RSignal, WaitIdOptions};

use crate::pid::Pid;

use super::*;

/// Blocks until child `pid` has exited, without reaping it (`waitid(WEXITED | WNOWAIT)`): the
/// zombie keeps its pid and process-group id reserved until quietus reaps it on purpose.
pub(crate) fn wait_exited_no_reap(pid: Pid) -> io::Result<()> {
    let p = to_rustix(pid);
    loop {
        match rustix::process::waitid(
            rustix::process::WaitId::Pid(p),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reaps child `pid`: waits for it to exit when `hang`, else only looks (`None`: it runs).
pub(crate) fn reap_child(pid: Pid, hang: bool) -> io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    let p = to_rustix(pid);
    let options = if hang {
        rustix::process::WaitOptions::empty()
    } else {
        rustix::process::WaitOptions::NOHANG
    };
    loop {
        match rustix::process::waitpid(Some(p), options) {
            Ok(found) => {
                return Ok(
                    found.map(|(_, status)| std::process::ExitStatus::from_raw(status.as_raw()))
                );
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// What wakes a monitor as it sleeps in `poll`: a descriptor that every message (and, on a
/// clock other than the real one, every timer that fires) pokes, and a pidfd of the leader,
/// readable once it has exited (Linux 5.3). With the pidfd, the monitor needs no waiter thread:
/// the leader's exit wakes it directly.
#[derive(Debug)]
pub(crate) struct Wakeup {
    /// Readable once poked: an eventfd (Linux), or the read end of a pipe.
    event: std::os::fd::OwnedFd,
    /// The pipe's write end, where there is no eventfd.
    poke_end: Option<std::os::fd::OwnedFd>,
    /// The leader's pidfd (shared with the ladder, which signals through it); `None` where
    /// there is none (not Linux, or before 5.3): a waiter thread tells of the exit then, as
    /// a message.
    leader: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

/// What [`Wakeup::sleep`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Woken {
    /// A message was sent, or a timer fired (the poke is reset).
    pub(crate) message: bool,
    /// The leader has exited (it stays so: stop asking, `leader_exited: true`).
    pub(crate) exited: bool,
    /// Which of the pipes given is readable, or at its end.
    pub(crate) pipes: [bool; 2],
}

impl Wakeup {
    /// The poke descriptor, and a pidfd of `pid` where the system has them.
    pub(crate) fn new(pid: Pid) -> io::Result<Wakeup> {
        let leader = pidfd_open(pid).ok().map(std::sync::Arc::new);
        #[cfg(all(target_os = "linux", not(feature = "portable")))]
        {
            let flags =
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK;
            let event = rustix::event::eventfd(0, flags)?;
            Ok(Wakeup {
                event,
                poke_end: None,
                leader,
            })
        }
        #[cfg(any(not(target_os = "linux"), feature = "portable"))]
        {
            let (read, write) = std::io::pipe()?;
            let (read, write) = (
                std::os::fd::OwnedFd::from(read),
                std::os::fd::OwnedFd::from(write),
            );
            rustix::io::ioctl_fionbio(&read, true)?;
            rustix::io::ioctl_fionbio(&write, true)?;
            Ok(Wakeup {
                event: read,
                poke_end: Some(write),
                leader,
            })
        }
    }

    /// The leader's pidfd, for whoever else needs one (the ladder signals through it).
    pub(crate) fn leader_pidfd(&self) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
        self.leader.clone()
    }

    /// Whether the leader's exit wakes the sleeper by itself (a pidfd); otherwise a waiter
    /// thread must send it as a message.
    pub(crate) fn sees_exit(&self) -> bool {
        self.leader.is_some()
    }

    /// Wakes the sleeper. Never blocks: a counter at its maximum, or a full pipe, wakes it
    /// as well.
    pub(crate) fn poke(&self) {
        match &self.poke_end {
            Some(end) => drop(rustix::io::write(end, &[1])),
            None => drop(rustix::io::write(&self.event, &1u64.to_ne_bytes())),
        }
    }

    /// Sleeps until a poke, the leader's exit (unless `leader_exited` already), one of
    /// `pipes` (those given) is readable or at its end, or `timeout` (`None`: no timeout).
    pub(crate) fn sleep(
        &self,
        timeout: Option<std::time::Duration>,
        leader_exited: bool,
        pipes: [Option<std::os::fd::BorrowedFd<'_>>; 2],
    ) -> Woken {
        use rustix::event::{PollFd, PollFlags};
        let timeout = timeout.map(|timeout| rustix::event::Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        });
        // The poke first; then the leader, the pipes, as asked for (the array's prefix).
        let leader = self.leader.as_ref().filter(|_| !leader_exited);
        let mut fds: [PollFd<'_>; 4] =
            std::array::from_fn(|_| PollFd::new(&self.event, PollFlags::IN));
        let mut watched = 1;
        let (mut leader_at, mut pipe_at) = (None, [None; 2]);
        if let Some(fd) = leader {
            fds[watched] = PollFd::new(fd, PollFlags::IN);
            leader_at = Some(watched);
            watched += 1;
        }
        for (i, pipe) in pipes.iter().enumerate() {
            if let Some(fd) = pipe {
                fds[watched] = PollFd::new(fd, PollFlags::IN);
                pipe_at[i] = Some(watched);
                watched += 1;
            }
        }
        let ready = rustix::event::poll(&mut fds[..watched], timeout.as_ref());
        let mut woken = Woken::default();
        if matches!(ready, Ok(n) if n > 0) {
            let seen = |at: Option<usize>| at.is_some_and(|i| !fds[i].revents().is_empty());
            woken.message = !fds[0].revents().is_empty();
            woken.exited = seen(leader_at);
            woken.pipes = pipe_at.map(seen);
        }
        if woken.message {
            // One read resets the eventfd; a pipe is emptied (pokes are single bytes).
            let mut count = [0u8; 64];
            while matches!(rustix::io::read(&self.event, &mut count), Ok(n) if n == count.len()) {}
        }
        woken
    }
}

/// Whether the calling thread is the process's main thread: the thread that lives as long as
/// the process (Rust's `main` returning ends the process), so that a child it forks with the
/// parent-death signal gets it when the process dies, as from the spawner thread.
pub(crate) fn on_main_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        rustix::thread::gettid() == rustix::process::getpid()
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Whether child `pid` has exited, without waiting and without reaping it (`waitid(WEXITED |
/// WNOHANG | WNOWAIT)`). An error (not our child) is `false`.
pub(crate) fn has_exited_no_reap(pid: Pid) -> bool {
    let p = to_rustix(pid);
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    matches!(
        rustix::process::waitid(rustix::process::WaitId::Pid(p), options),
        Ok(Some(_))
    )
}

/// Whether this system gives pidfds (asked once, of this process): where it does not, a
/// session needs a thread to wait for its leader's exit.
pub(crate) fn pidfds() -> bool {
    static GIVEN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *GIVEN.get_or_init(|| pidfd_open(Pid::current()).is_ok())
}

/// A pidfd of process `pid` (Linux `pidfd_open`): signals sent through it reach that process
/// or nobody, never a later process that reuses the pid. `Unsupported` elsewhere and on
/// kernels without pidfds (before 5.3).
pub(crate) fn pidfd_open(pid: Pid) -> io::Result<std::os::fd::OwnedFd> {
    #[cfg(all(target_os = "linux", not(feature = "portable")))]
    {
        match rustix::process::pidfd_open(to_rustix(pid), rustix::process::PidfdFlags::empty()) {
            Ok(fd) => Ok(fd),
            Err(rustix::io::Errno::NOSYS) => Err(io::ErrorKind::Unsupported.into()),
            Err(e) => Err(e.into()),
        }
    }
    // The portable backend: as on a kernel without pidfds.
    #[cfg(any(not(target_os = "linux"), feature = "portable"))]
    {
        let _ = pid;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Sends `signal` to the process of `pidfd` (Linux `pidfd_send_signal`); `ESRCH` once it has
/// exited.
pub(crate) fn pidfd_signal(pidfd: std::os::fd::BorrowedFd<'_>, signal: i32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let sig = rsignal(signal).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        rustix::process::pidfd_send_signal(pidfd, sig).map_err(io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pidfd, signal);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Reaps child `pid` if it is a zombie, without waiting; returns whether it did.
pub(crate) fn reap_if_exited(pid: Pid) -> bool {
    matches!(reap_child(pid, false), Ok(Some(_)))
}
