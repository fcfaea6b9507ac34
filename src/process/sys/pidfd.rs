//! Children and pidfds: waiting for a child's exit with or without reaping it, pidfds (signals
//! that reach one process or nobody), and the monitor's wake-up (an eventfd and the leader's
//! pidfd in one `poll`).

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Pid, Signal as RSignal, WaitIdOptions};

use super::*;

/// Blocks until child `pid` has exited, without reaping it (`waitid(WEXITED | WNOWAIT)`): the
/// zombie keeps its pid and process-group id reserved until stallwatch reaps it on purpose.
pub(crate) fn wait_exited_no_reap(pid: i32) -> io::Result<()> {
    let p = Pid::from_raw(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
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
pub(crate) fn reap_child(pid: i32, hang: bool) -> io::Result<Option<std::process::ExitStatus>> {
    use std::os::unix::process::ExitStatusExt;
    let p = Pid::from_raw(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
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

/// What wakes a monitor that sleeps in `poll` instead of on its channel: an eventfd that every
/// message pokes, and a pidfd of the leader, readable once it has exited (Linux 5.3). With it,
/// the monitor needs no waiter thread, and the leader's exit wakes it directly.
#[derive(Debug)]
pub(crate) struct Wakeup {
    event: std::os::fd::OwnedFd,
    leader: std::os::fd::OwnedFd,
}

/// What [`Wakeup::sleep`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Woken {
    /// A message was sent (the eventfd is reset).
    pub(crate) message: bool,
    /// The leader has exited (it stays so: stop asking, `leader_exited: true`).
    pub(crate) exited: bool,
    /// The pipe given is readable, or at its end.
    pub(crate) pipe: bool,
}

impl Wakeup {
    /// An eventfd and a pidfd of `pid`; `None` where either is missing (no pidfds before
    /// Linux 5.3; not Linux), and the caller keeps its waiter thread.
    pub(crate) fn new(pid: i32) -> Option<Wakeup> {
        #[cfg(target_os = "linux")]
        {
            let leader = pidfd_open(pid).ok()?;
            let flags =
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK;
            let event = rustix::event::eventfd(0, flags).ok()?;
            Some(Wakeup { event, leader })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }

    /// Wakes the sleeper (a message is waiting). Never blocks: a counter already at its
    /// maximum wakes it as well.
    pub(crate) fn poke(&self) {
        let _ = rustix::io::write(&self.event, &1u64.to_ne_bytes());
    }

    /// Sleeps until a message, the leader's exit (unless `leader_exited` already), `pipe`
    /// (when given) is readable or at its end, or `timeout`.
    pub(crate) fn sleep(
        &self,
        timeout: std::time::Duration,
        leader_exited: bool,
        pipe: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> Woken {
        use rustix::event::{PollFd, PollFlags};
        let timeout = rustix::event::Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        // The eventfd first; then the leader, the pipe, as asked for (the array's prefix).
        let leader = (!leader_exited).then_some(&self.leader);
        let mut fds = [
            PollFd::new(&self.event, PollFlags::IN),
            PollFd::new(&self.event, PollFlags::IN),
            PollFd::new(&self.event, PollFlags::IN),
        ];
        let mut watched = 1;
        let (mut leader_at, mut pipe_at) = (None, None);
        if let Some(fd) = leader {
            fds[watched] = PollFd::new(fd, PollFlags::IN);
            leader_at = Some(watched);
            watched += 1;
        }
        if let Some(fd) = &pipe {
            fds[watched] = PollFd::new(fd, PollFlags::IN);
            pipe_at = Some(watched);
            watched += 1;
        }
        let ready = rustix::event::poll(&mut fds[..watched], Some(&timeout));
        let mut woken = Woken::default();
        if matches!(ready, Ok(n) if n > 0) {
            let seen = |at: Option<usize>| at.is_some_and(|i| !fds[i].revents().is_empty());
            woken.message = !fds[0].revents().is_empty();
            woken.exited = seen(leader_at);
            woken.pipe = seen(pipe_at);
        }
        if woken.message {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&self.event, &mut count);
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
pub(crate) fn has_exited_no_reap(pid: i32) -> bool {
    let Some(p) = Pid::from_raw(pid) else {
        return false;
    };
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    matches!(
        rustix::process::waitid(rustix::process::WaitId::Pid(p), options),
        Ok(Some(_))
    )
}

/// A pidfd of process `pid` (Linux `pidfd_open`): signals sent through it reach that process
/// or nobody, never a later process that reuses the pid. `Unsupported` elsewhere and on
/// kernels without pidfds (before 5.3).
pub(crate) fn pidfd_open(pid: i32) -> io::Result<std::os::fd::OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        let p = Pid::from_raw(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        match rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => Ok(fd),
            Err(rustix::io::Errno::NOSYS) => Err(io::ErrorKind::Unsupported.into()),
            Err(e) => Err(e.into()),
        }
    }
    #[cfg(not(target_os = "linux"))]
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
pub(crate) fn reap_if_exited(pid: i32) -> bool {
    matches!(reap_child(pid, false), Ok(Some(_)))
}
