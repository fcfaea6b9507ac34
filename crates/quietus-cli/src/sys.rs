//! Every operating-system call the command makes itself, in one place: the command's own door,
//! as `process/sys` is the library's. The command is a separate crate that sees only the
//! library's public API, so it cannot use `process/sys`; besides the terminal's own calls
//! (`cli/terminal.rs`), no other file of the command uses `rustix` or `nix`.
//!
//! What sits here is the command's business, not the library's: reaping adopted zombies as a
//! container's first process (the library reaps its own child, and never with `waitpid(-1)`),
//! dying by a signal without a core dump, the signals taken by `sigwait`, and opening a report
//! FIFO without blocking.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use quietus::Pid;

/// The platform's signals by name (constants only).
pub(crate) use rustix::process::Signal as Sig;

/// rustix's pid for `pid`: the command's one conversion between the library's [`Pid`] and the
/// platform's `pid_t` (a `Pid` is at most `i32::MAX`, so it always fits).
fn to_rustix(pid: Pid) -> Option<rustix::process::Pid> {
    i32::try_from(pid.get())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
}

/// The id of the calling thread (on Linux a thread id is a number of the pids' range).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn current_thread() -> Pid {
    Pid::new(
        rustix::thread::gettid()
            .as_raw_nonzero()
            .get()
            .unsigned_abs(),
    )
    .expect("a thread id is positive")
}

/// Whether this process is a child subreaper (Linux `PR_GET_CHILD_SUBREAPER`).
pub(crate) fn is_child_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        matches!(rustix::process::child_subreaper(), Ok(Some(_)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Whether a child of this process is a zombie now (`waitid(P_ALL, WEXITED | WNOHANG |
/// WNOWAIT)`: only looks, reaps nothing). No child at all is `false`; a failure to look is
/// `true` (then the caller looks the long way).
pub(crate) fn zombie_child() -> bool {
    use rustix::process::{WaitId, WaitIdOptions};
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    match rustix::process::waitid(WaitId::All, options) {
        Ok(found) => found.is_some(),
        Err(rustix::io::Errno::CHILD) => false,
        Err(_) => true,
    }
}

/// Reaps child `pid` if it is a zombie, without waiting (`waitpid(pid, WNOHANG)`, by pid,
/// never -1); returns whether it did. (Linux: elsewhere the command adopts no orphans.)
#[cfg(target_os = "linux")]
pub(crate) fn reap_if_zombie(pid: Pid) -> io::Result<bool> {
    let Some(raw) = to_rustix(pid) else {
        return Ok(false);
    };
    match rustix::process::waitpid(Some(raw), rustix::process::WaitOptions::NOHANG) {
        Ok(status) => Ok(status.is_some()),
        Err(e) => Err(e.into()),
    }
}

/// Sets the core-file size limit to 0 (the hard limit unchanged); failure is harmless.
pub(crate) fn disable_core_dumps() {
    let no_core = rustix::process::Rlimit {
        current: Some(0),
        maximum: rustix::process::getrlimit(rustix::process::Resource::Core).maximum,
    };
    let _ = rustix::process::setrlimit(rustix::process::Resource::Core, no_core);
}

/// The signals this process ignores (bit `n - 1` for signal `n`): `SigIgn` of
/// `/proc/self/status` on Linux; none elsewhere, or when it cannot be read.
pub(crate) fn ignored_signals() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .unwrap_or(0)
}

/// Unblocks `signal` in the calling thread and raises it at this thread (`pthread_sigmask`,
/// `raise`: through `nix`, safe): with its default action, the process ends by it here.
pub(crate) fn raise_unblocked(signal: i32) {
    if let Ok(signal) = nix::sys::signal::Signal::try_from(signal) {
        let mut set = nix::sys::signal::SigSet::empty();
        set.add(signal);
        let _ = set.thread_unblock();
        let _ = nix::sys::signal::raise(signal);
    }
}

/// Signals blocked in every thread (from the thread that blocked them, before any other
/// started) and taken one by one by the thread that waits for them (`sigwait`): no handler is
/// installed, so a signal interrupts no system call and nothing runs in a signal context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waited(nix::sys::signal::SigSet);

impl Waited {
    /// Blocks `signals` in the calling thread; threads started afterwards inherit the mask.
    pub(crate) fn block(signals: &[i32]) -> io::Result<Waited> {
        let mut set = nix::sys::signal::SigSet::empty();
        for signal in signals {
            if let Ok(signal) = nix::sys::signal::Signal::try_from(*signal) {
                set.add(signal);
            }
        }
        set.thread_block().map_err(io::Error::from)?;
        Ok(Waited(set))
    }

    /// Unblocks them again in the calling thread: a pending one is delivered at once, with its
    /// usual action.
    pub(crate) fn unblock(&self) {
        let _ = self.0.thread_unblock();
    }

    /// Waits for one of them (which must be blocked in every thread) and takes it.
    pub(crate) fn wait(&self) -> io::Result<i32> {
        self.0
            .wait()
            .map(|signal| signal as i32)
            .map_err(io::Error::from)
    }
}

/// The signals that end a wait quietus makes for itself (INT, TERM, HUP, QUIT): taken
/// from a `signalfd` while they are blocked (the command blocks them before it opens its
/// files), so that such a wait can be given up.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub(crate) struct Interrupting(nix::sys::signalfd::SignalFd);

/// INT, TERM, HUP and QUIT.
fn interrupting_set() -> nix::sys::signal::SigSet {
    use nix::sys::signal::Signal as S;
    let mut set = nix::sys::signal::SigSet::empty();
    for signal in [S::SIGINT, S::SIGTERM, S::SIGHUP, S::SIGQUIT] {
        set.add(signal);
    }
    set
}

#[cfg(target_os = "linux")]
impl Interrupting {
    /// Starts taking them.
    pub(crate) fn new() -> io::Result<Interrupting> {
        let flags =
            nix::sys::signalfd::SfdFlags::SFD_NONBLOCK | nix::sys::signalfd::SfdFlags::SFD_CLOEXEC;
        Ok(Interrupting(
            nix::sys::signalfd::SignalFd::with_flags(&interrupting_set(), flags)
                .map_err(io::Error::from)?,
        ))
    }

    /// Waits at most `timeout` for one of them; takes it and returns its number.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> io::Result<Option<i32>> {
        use std::os::fd::AsFd;
        let timeout = rustix::event::Timespec::try_from(timeout).map_err(io::Error::other)?;
        let fd = self.0.as_fd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        let taken = self.0.read_signal().map_err(io::Error::from)?;
        Ok(taken.map(|info| info.ssi_signo as i32))
    }
}

/// Elsewhere (no `signalfd`, no `sigtimedwait` on macOS): the four signals are unblocked in the
/// waiting thread while it waits, so one of them ends quietus at once by its default action (as
/// the Linux wait ends in dying of it, without the words on stderr); blocked again after.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
pub(crate) struct Interrupting(nix::sys::signal::SigSet);

#[cfg(not(target_os = "linux"))]
impl Interrupting {
    /// Unblocks them in the calling thread.
    pub(crate) fn new() -> io::Result<Interrupting> {
        let set = interrupting_set();
        set.thread_unblock().map_err(io::Error::from)?;
        Ok(Interrupting(set))
    }

    /// Sleeps `timeout` (a signal ends the process meanwhile): never returns one.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> io::Result<Option<i32>> {
        std::thread::sleep(timeout);
        Ok(None)
    }
}

#[cfg(not(target_os = "linux"))]
impl Drop for Interrupting {
    fn drop(&mut self) {
        let _ = self.0.thread_block();
    }
}

/// Opens `path` for writing, created or emptied; `nonblocking` only for the open itself
/// (`O_NONBLOCK`, so a FIFO without a reader fails at once instead of waiting for one), after
/// which writes block as usual.
pub(crate) fn open_truncated(path: &Path, nonblocking: bool) -> io::Result<File> {
    let flags = if nonblocking {
        rustix::fs::OFlags::NONBLOCK
    } else {
        rustix::fs::OFlags::empty()
    };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    if nonblocking {
        let flags = rustix::fs::fcntl_getfl(&file)?;
        rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    }
    Ok(file)
}

/// Whether `error` is `ENXIO` from a non-blocking open: a FIFO without a reader (POSIX open(2)).
pub(crate) fn is_fifo_without_reader(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error())
}

/// Whether `error`, or an error it wraps (a [`quietus::SpawnError`] and its cause), is
/// `EMFILE` or `ENFILE`: no descriptor left.
pub(crate) fn is_out_of_descriptors(error: &(dyn std::error::Error + 'static)) -> bool {
    let no_descriptor = |e: &io::Error| {
        [rustix::io::Errno::MFILE, rustix::io::Errno::NFILE]
            .iter()
            .any(|errno| e.raw_os_error() == Some(errno.raw_os_error()))
    };
    let mut cause = Some(error);
    while let Some(e) = cause {
        cause = match e.downcast_ref::<io::Error>() {
            Some(io) if no_descriptor(io) => return true,
            // An `io::Error`'s `source` skips its payload: the payload itself is next.
            Some(io) => io
                .get_ref()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}

/// SIGKILL to process group `pgid` (a probe command's own group; never group 1).
pub(crate) fn kill_group(pgid: Pid) -> io::Result<()> {
    let Some(pid) = to_rustix(pgid).filter(|_| pgid.get() > 1) else {
        return Ok(());
    };
    rustix::process::kill_process_group(pid, Sig::KILL)?;
    Ok(())
}

/// `signals` without those quietus was started with ignored (their ignore is respected:
/// never taken, never passed on, inherited by the program).
pub(crate) fn not_ignored(signals: Vec<i32>) -> Vec<i32> {
    let ignored = ignored_signals();
    signals
        .into_iter()
        .filter(|&signal| (1..=64).contains(&signal) && ignored & (1u64 << (signal - 1)) == 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_descriptors_is_found_in_what_an_error_wraps() {
        let emfile = || io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        assert!(is_out_of_descriptors(&emfile()));
        let wrapped = io::Error::other(emfile());
        assert!(is_out_of_descriptors(&wrapped));
        let twice = io::Error::other(io::Error::other(emfile()));
        assert!(is_out_of_descriptors(&twice));
        let enoent = io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error());
        assert!(!is_out_of_descriptors(&io::Error::other(enoent)));
    }
}
