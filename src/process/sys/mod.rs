//! Every operating-system call stallwatch makes, in one place (Unix, through `rustix`).
//!
//! No other module of the library uses `rustix` (nor `libc` or `nix`); the command has its own
//! door, `src/cli/sys.rs`.
//! Every `unsafe` block of the crate is here, allowed one by one under the crate's
//! `#![deny(unsafe_code)]`: the `pre_exec` hooks (the leader's group or session and the
//! parent-death signal of [`configure`]; the birth in the session's cgroup by `clone3`, on
//! x86-64 sharing the forked process's memory in a few lines of assembly, in [`enter`]), the
//! start of a plain program without a fork (x86-64: `clone3` onto a stack of its own, the new
//! process's raw signal and `exec` calls, in [`plain`]), and the guardian's fork with the few
//! libc calls of the forked child ([`guardian`]; rustix has no `fork`, no `clone3` and no
//! `_exit`).

pub(crate) mod spawn;
pub(crate) mod unsafe_calls;

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Pid, Signal as RSignal, WaitIdOptions};

#[cfg(target_os = "linux")]
pub(crate) mod runprobe;
#[cfg(target_os = "linux")]
pub(crate) mod snapshot;
#[cfg(target_os = "linux")]
pub(crate) mod sockdiag;

pub(crate) const SIGHUP: i32 = RSignal::HUP.as_raw();
pub(crate) const SIGINT: i32 = RSignal::INT.as_raw();
pub(crate) const SIGQUIT: i32 = RSignal::QUIT.as_raw();
pub(crate) const SIGKILL: i32 = RSignal::KILL.as_raw();
pub(crate) const SIGTERM: i32 = RSignal::TERM.as_raw();
pub(crate) const SIGUSR1: i32 = RSignal::USR1.as_raw();
pub(crate) const SIGUSR2: i32 = RSignal::USR2.as_raw();
pub(crate) const SIGCONT: i32 = RSignal::CONT.as_raw();

/// The standard signals by name, with this platform's numbers.
const SIGNALS: &[(&str, RSignal)] = &[
    ("HUP", RSignal::HUP),
    ("INT", RSignal::INT),
    ("QUIT", RSignal::QUIT),
    ("ILL", RSignal::ILL),
    ("TRAP", RSignal::TRAP),
    ("ABRT", RSignal::ABORT),
    ("BUS", RSignal::BUS),
    ("FPE", RSignal::FPE),
    ("KILL", RSignal::KILL),
    ("USR1", RSignal::USR1),
    ("SEGV", RSignal::SEGV),
    ("USR2", RSignal::USR2),
    ("PIPE", RSignal::PIPE),
    ("ALRM", RSignal::ALARM),
    ("TERM", RSignal::TERM),
    ("CHLD", RSignal::CHILD),
    ("CONT", RSignal::CONT),
    ("STOP", RSignal::STOP),
    ("TSTP", RSignal::TSTP),
    ("TTIN", RSignal::TTIN),
    ("TTOU", RSignal::TTOU),
    ("URG", RSignal::URG),
    ("XCPU", RSignal::XCPU),
    ("XFSZ", RSignal::XFSZ),
    ("VTALRM", RSignal::VTALARM),
    ("PROF", RSignal::PROF),
    ("WINCH", RSignal::WINCH),
    ("IO", RSignal::IO),
    ("SYS", RSignal::SYS),
];

/// Standard signals only some platforms have.
const PLATFORM_SIGNALS: &[(&str, RSignal)] = &[
    #[cfg(all(
        target_os = "linux",
        not(any(
            target_arch = "mips",
            target_arch = "mips32r6",
            target_arch = "mips64",
            target_arch = "mips64r6",
            target_arch = "sparc",
            target_arch = "sparc64"
        ))
    ))]
    ("STKFLT", RSignal::STKFLT),
    #[cfg(target_os = "linux")]
    ("PWR", RSignal::POWER),
];

/// Every standard signal this platform names.
fn named_signals() -> impl Iterator<Item = &'static (&'static str, RSignal)> {
    SIGNALS.iter().chain(PLATFORM_SIGNALS)
}

fn rsignal(number: i32) -> Option<RSignal> {
    named_signals()
        .find(|(_, s)| s.as_raw() == number)
        .map(|(_, s)| *s)
}

pub(crate) fn signal_is_known(number: i32) -> bool {
    rsignal(number).is_some()
}

pub(crate) fn signal_name(number: i32) -> Option<&'static str> {
    named_signals()
        .find(|(_, s)| s.as_raw() == number)
        .map(|(n, _)| *n)
}

pub(crate) fn signal_by_name(name: &str) -> Option<i32> {
    let name = match name {
        "ABORT" | "IOT" => "ABRT",
        "ALARM" => "ALRM",
        "CHILD" => "CHLD",
        "POWER" => "PWR",
        "POLL" => "IO",
        other => other,
    };
    named_signals()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| s.as_raw())
}

/// `O_NOFOLLOW`, for [`OpenOptionsExt::custom_flags`](std::os::unix::fs::OpenOptionsExt):
/// the open fails when the last part of the path is a symbolic link.
pub(crate) const O_NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;

/// Whether this process may create and open files in folder `dir` (`access(W_OK | X_OK)`,
/// with the real user id, as the folder's permission bits and ACLs say).
pub(crate) fn check_dir_writable(dir: &Path) -> io::Result<()> {
    rustix::fs::access(
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
    )
    .map_err(io::Error::from)
}

/// Whether this process may write to file `path` (`access(W_OK)` with the real user id).
pub(crate) fn check_writable(path: &Path) -> io::Result<()> {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).map_err(io::Error::from)
}

/// Whether this process may run file `path` (`access(X_OK)`, a regular file).
pub(crate) fn check_executable(path: &Path) -> io::Result<()> {
    if !path.is_file() {
        return Err(io::ErrorKind::NotFound.into());
    }
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK).map_err(io::Error::from)
}

/// Waits until `fd` is readable (or at its end), at most `timeout`; whether it is.
pub(crate) fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let left = rustix::event::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&left)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Whether a raw OS error code says a system-wide or per-process limit was hit while adding a
/// watch: `ENOSPC` (inotify's watch limit), `EMFILE` or `ENFILE` (open files).
pub(crate) fn is_watch_limit_error(code: i32) -> bool {
    [
        rustix::io::Errno::NOSPC,
        rustix::io::Errno::MFILE,
        rustix::io::Errno::NFILE,
    ]
    .iter()
    .any(|errno| errno.raw_os_error() == code)
}

/// How many bytes sit unread in the pipe (or socket) `fd` reads (`FIONREAD`).
pub(crate) fn unread_bytes(fd: impl AsFd) -> io::Result<u64> {
    rustix::io::ioctl_fionread(fd).map_err(io::Error::from)
}

/// The effective user id of this process.
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The process group of this (supervising) process.
///
/// 0 when the group lies outside this process's pid namespace (a container's first process
/// started without a group of its own): `getpgrp` would then report 0, which no `Pid` may hold,
/// so on Linux the value is read from `/proc/self/stat` instead.
pub(crate) fn own_process_group() -> i32 {
    #[cfg(target_os = "linux")]
    {
        read_stat(std::process::id() as i32).map_or(0, |stat| stat.pgrp)
    }
    #[cfg(not(target_os = "linux"))]
    {
        rustix::process::getpgrp().as_raw_pid()
    }
}

/// Sends `signal` to every member of process group `pgid`. Refuses a pgid <= 1 and our own
/// group, whatever the caller believes.
pub(crate) fn kill_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 || pgid == own_process_group() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    let pid = Pid::from_raw(pgid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let sig = rsignal(signal).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    rustix::process::kill_process_group(pid, sig).map_err(io::Error::from)
}

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

/// Whether a cgroup v2 file system is mounted at `path` (its `statfs` magic number,
/// `CGROUP2_SUPER_MAGIC`). Linux only.
pub(crate) fn is_cgroup2_mount(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
        // `f_type` is an i64 here, a u32 or an i32 on other targets.
        #[allow(clippy::useless_conversion)]
        rustix::fs::statfs(path).is_ok_and(|fs| i64::from(fs.f_type) == CGROUP2_SUPER_MAGIC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// Size stallwatch asks for the child's output pipes.
pub(crate) const PIPE_SIZE: usize = 1024 * 1024;

/// Grows a pipe to [`PIPE_SIZE`] where the platform allows it (Linux); failure is harmless.
pub(crate) fn grow_pipe(fd: std::os::fd::BorrowedFd<'_>) {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(fd, PIPE_SIZE) {
        log::debug!("cannot grow an output pipe to {PIPE_SIZE} bytes: {e}");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}

/// Whether no process holds the write end of the pipe `fd` reads any more: once its unread
/// bytes are read, the reader sees end-of-file (`POLLHUP` on the read end).
pub(crate) fn pipe_hung_up(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0].revents().contains(rustix::event::PollFlags::HUP)
}

pub(crate) use spawn::{CgroupEntry, Handoff, Lead, Leader, configure};

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

/// Whether `error` says a cgroup still has members or children (`EBUSY` on `rmdir`).
pub(crate) fn is_busy(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
}

/// A new pseudo-terminal of `rows` x `cols`: (master, slave), both close-on-exec, the slave
/// opened without becoming stallwatch's controlling terminal.
pub(crate) fn open_pty(
    rows: u16,
    cols: u16,
) -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    set_terminal_size(std::os::fd::AsFd::as_fd(&master), rows, cols)?;
    Ok((master, slave))
}

/// Sets the window size of the terminal `fd` belongs to (`TIOCSWINSZ`; on a master the kernel
/// then sends SIGWINCH to the slave's foreground process group).
pub(crate) fn set_terminal_size(
    fd: std::os::fd::BorrowedFd<'_>,
    rows: u16,
    cols: u16,
) -> io::Result<()> {
    let size = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(fd, size).map_err(Into::into)
}

/// The window size (rows, cols) of the terminal `fd` belongs to.
pub(crate) fn terminal_size(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(u16, u16)> {
    let size = rustix::termios::tcgetwinsize(fd)?;
    Ok((size.ws_row, size.ws_col))
}

#[cfg_attr(not(test), allow(dead_code))] // only the tests use it
/// The foreground process group of the terminal `fd` belongs to (on a master: the slave's),
/// the group the line discipline signals for Ctrl-C and the kernel for a resize.
pub(crate) fn foreground_group(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<i32> {
    Ok(rustix::termios::tcgetpgrp(fd)?.as_raw_pid())
}

/// The value of a disabled special character (`_POSIX_VDISABLE`).
const VDISABLE: u8 = if cfg!(any(target_os = "linux", target_os = "android")) {
    0
} else {
    0xff
};

/// What the line discipline of a terminal does with the bytes written to it: the settings
/// stallwatch needs to interrupt and to end input the terminal way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineDiscipline {
    /// Canonical (line-by-line) input (`ICANON`): only then is the EOF character special.
    pub(crate) canonical: bool,
    /// The interrupt, quit and suspend characters signal the foreground group (`ISIG`).
    pub(crate) signals: bool,
    /// The interrupt character (`VINTR`), unless disabled.
    pub(crate) interrupt: Option<u8>,
    /// The end-of-file character (`VEOF`), unless disabled.
    pub(crate) eof: Option<u8>,
    /// The extra end-of-line characters (`VEOL`, `VEOL2`), unless disabled.
    pub(crate) eol: [Option<u8>; 2],
    /// A carriage return ends a line too (`ICRNL` without `IGNCR`).
    pub(crate) cr_ends_line: bool,
}

impl LineDiscipline {
    /// Whether `byte`, written last, leaves the line being edited empty: a newline, an extra
    /// end-of-line character, the EOF character itself, or a carriage return turned into a
    /// newline.
    pub(crate) fn ends_line(&self, byte: u8) -> bool {
        byte == b'\n'
            || Some(byte) == self.eof
            || self.eol.contains(&Some(byte))
            || (self.cr_ends_line && byte == b'\r')
    }
}

/// The line-discipline settings of the terminal `fd` belongs to. On a pseudo-terminal's master
/// these are the slave's settings, as the program on it last set them.
pub(crate) fn line_discipline(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<LineDiscipline> {
    use rustix::termios::{InputModes, LocalModes, SpecialCodeIndex as Cc};
    let t = rustix::termios::tcgetattr(fd)?;
    let special = |index| Some(t.special_codes[index]).filter(|c| *c != VDISABLE);
    Ok(LineDiscipline {
        canonical: t.local_modes.contains(LocalModes::ICANON),
        signals: t.local_modes.contains(LocalModes::ISIG),
        interrupt: special(Cc::VINTR),
        eof: special(Cc::VEOF),
        eol: [special(Cc::VEOL), special(Cc::VEOL2)],
        cr_ends_line: t.input_modes.contains(InputModes::ICRNL)
            && !t.input_modes.contains(InputModes::IGNCR),
    })
}

/// Whether `error` is the end of a pseudo-terminal's output: a read on the master fails with
/// EIO once every slave descriptor is closed (Linux; other systems return 0).
pub(crate) fn is_terminal_hangup(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error())
}

/// One line of `/proc/<pid>/stat`, the fields stallwatch needs.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) pid: i32,
    pub(crate) state: u8,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    /// User + system time, in clock ticks.
    pub(crate) cpu_ticks: u64,
    /// User + system time of reaped children (cutime + cstime), in clock ticks.
    pub(crate) child_cpu_ticks: u64,
    /// Start time after boot, in clock ticks: with the pid, the identity of a process.
    pub(crate) start_time: u64,
    /// Number of threads.
    pub(crate) threads: u64,
}

#[cfg(target_os = "linux")]
impl ProcStat {
    /// Whether the process is a zombie (or dead): no longer running anything.
    pub(crate) fn is_dead(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

#[cfg(target_os = "linux")]
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    // Field n of proc_pid_stat(5) (1-based; 1 is the pid, 2 the name) is fields[n - 3].
    let fields: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let number = |n: usize| field(n)?.parse::<u64>().ok();
    Some(ProcStat {
        pid,
        state: *field(3)?.as_bytes().first()?,
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        cpu_ticks: number(14)? + number(15)?,
        child_cpu_ticks: number(16)? + number(17)?,
        threads: number(20)?,
        start_time: number(22)?,
    })
}

/// Reads a small `/proc` file whole into `buf`, in one `read` when it fits (it does for
/// `stat` and a short `children` list), where `fs::read_to_string` grows its buffer from 32
/// bytes on (`/proc` reports size 0): five or six reads for one `stat` line. Measured on the
/// leftover scan, which reads every process's `stat`. `None` if it cannot be read or is not
/// UTF-8; a file longer than `buf` is read whole into a `String` instead.
#[cfg(target_os = "linux")]
pub(crate) fn read_proc<'b>(
    path: &str,
    buf: &'b mut [u8; 1024],
) -> Option<std::borrow::Cow<'b, str>> {
    read_small(std::path::Path::new(path), buf).ok()
}

/// [`read_proc`] with its error: for the small files of `/proc` and of a cgroup (`cgroup`,
/// `cgroup.events`…), whose size the kernel reports as 0 or 4096.
pub(crate) fn read_small<'b>(
    path: &std::path::Path,
    buf: &'b mut [u8; 1024],
) -> io::Result<std::borrow::Cow<'b, str>> {
    use std::io::Read;
    let not_text = || io::Error::new(io::ErrorKind::InvalidData, "not UTF-8");
    let mut file = std::fs::File::open(path)?;
    let mut len = 0;
    loop {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len == buf.len() {
                    // Longer than the buffer: the rest the ordinary way.
                    let mut bytes = buf.to_vec();
                    file.read_to_end(&mut bytes)?;
                    return String::from_utf8(bytes)
                        .map(std::borrow::Cow::Owned)
                        .map_err(|_| not_text());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    std::str::from_utf8(&buf[..len])
        .map(std::borrow::Cow::Borrowed)
        .map_err(|_| not_text())
}

/// The number of read system calls `pid` made (`syscr` in `/proc/<pid>/io`): two samples
/// that both find a process blocked in `read` prove it waited in between only if this did not
/// change. `None` if it cannot be read.
#[cfg(target_os = "linux")]
pub(crate) fn read_count(pid: i32) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let text = read_proc(&format!("/proc/{pid}/io"), &mut buf)?;
    text.lines()
        .find_map(|line| line.strip_prefix("syscr:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Elsewhere: no `/proc`.
#[cfg(not(target_os = "linux"))]
pub(crate) fn read_count(_pid: i32) -> Option<u64> {
    None
}

/// Reads `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub(crate) fn read_stat(pid: i32) -> Option<ProcStat> {
    let mut buf = [0u8; 1024];
    parse_stat(&read_proc(&format!("/proc/{pid}/stat"), &mut buf)?)
}

/// The children of `pid`, from `/proc/<pid>/task/<tid>/children` of every thread (a child is
/// listed under the thread that forked it). `None` when the kernel does not offer the file.
/// A single-threaded process has one such file, read without listing the tasks.
#[cfg(target_os = "linux")]
pub(crate) fn children_of(pid: i32, threads: u64, into: &mut Vec<i32>) -> Option<()> {
    if threads == 1 {
        let mut buf = [0u8; 1024];
        let text = read_proc(&format!("/proc/{pid}/task/{pid}/children"), &mut buf)?;
        into.extend(
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
        return Some(());
    }
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut offered = false;
    for task in tasks.flatten() {
        let mut path = task.path();
        path.push("children");
        let mut buf = [0u8; 1024];
        let Some(text) = path.to_str().and_then(|path| read_proc(path, &mut buf)) else {
            continue;
        };
        offered = true;
        into.extend(
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    offered.then_some(())
}

/// Clock ticks per second of the times in `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub(crate) fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// Sends `signal` to one process. Refuses pid <= 1 and ourselves. Callers check the process's
/// identity (pid + start time) just before, so a reused pid is not signalled.
pub(crate) fn kill_pid(pid: i32, signal: i32) -> io::Result<()> {
    if pid <= 1 || pid == std::process::id() as i32 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {pid}"),
        ));
    }
    let p = Pid::from_raw(pid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let sig = rsignal(signal).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    rustix::process::kill_process(p, sig).map_err(io::Error::from)
}

/// Makes this process a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): orphaned
/// descendants are re-parented to it instead of init. Process-wide and permanent.
pub(crate) fn become_subreaper() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).map_err(Into::into)
    }
    #[cfg(not(target_os = "linux"))]
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "subreaper mode needs Linux",
    ))
}

/// This process's children where orphans go: the kernel hands an orphan to the first live
/// thread of its reaper, which is the main thread while it lives, so the main thread's
/// `children` list holds every adopted process (and what the main thread forked itself; the
/// library's own children forked on other threads are known to it anyway). Every thread's
/// list when the main thread has exited.
///
/// Only that list, because looking up another thread's `/proc/self/task/<tid>` leaves entries
/// the kernel must drop when that thread exits, and when it exits at the end of a run, that
/// races with the parent's reap of this process: the parent's `wait` then spins in the
/// kernel's dentry shrinking until the thread's own flush is done (7–10 ms of a run's time,
/// median, on the loaded development VM).
#[cfg(target_os = "linux")]
pub(crate) fn own_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let main_thread_lives = read_stat(me).is_some_and(|stat| !stat.is_dead());
    if !(main_thread_lives && children_of(me, 1, &mut out).is_some()) {
        out.clear();
        let _ = children_of(me, 0, &mut out);
    }
    out
}

/// One TCP socket as the kernel describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpSocket {
    /// The socket's inode (the `N` of `socket:[N]` in `/proc/PID/fd`).
    pub(crate) inode: u64,
    /// TCP state (1 established, 2 syn-sent…).
    pub(crate) state: u8,
    /// Payload bytes received.
    pub(crate) received: u64,
    /// Payload bytes sent and acknowledged by the peer.
    pub(crate) acked: u64,
    /// The local address.
    pub(crate) local: std::net::SocketAddr,
    /// The peer's address.
    pub(crate) peer: std::net::SocketAddr,
    /// The kernel's key of the socket (its family, then its `inet_diag_sockid`: ports,
    /// addresses, interface, cookie), to ask for this one socket again.
    pub(crate) key: [u8; 49],
}

/// Every descriptor of process `pid` and what its `/proc/<pid>/fd/<n>` link names
/// (`socket:[123]`, `pipe:[45]`, `/dev/pts/3`…), in one pass over the folder with a
/// reused buffer. A link longer than 4 KiB is skipped. Fails when the folder cannot be read
/// (the process is gone, or another user's without the privilege).
#[cfg(target_os = "linux")]
pub(crate) fn fd_links(pid: i32, found: &mut dyn FnMut(i32, &[u8])) -> io::Result<()> {
    let mut dir = rustix::fs::Dir::new(open_fd_dir(pid)?)?;
    read_fd_links(&mut dir, found)
}

/// `/proc/<pid>/fd`, open.
#[cfg(target_os = "linux")]
pub(crate) fn open_fd_dir(pid: i32) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::open(
        format!("/proc/{pid}/fd"),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// [`fd_links`] on an open `/proc/<pid>/fd` (read from its start, so that it can be kept
/// open and read again). Fails once the process is gone.
#[cfg(target_os = "linux")]
pub(crate) fn read_fd_links(
    dir: &mut rustix::fs::Dir,
    found: &mut dyn FnMut(i32, &[u8]),
) -> io::Result<()> {
    dir.rewind();
    let mut link = [0u8; 4096];
    while let Some(entry) = dir.next() {
        let entry = entry?;
        let name = entry.file_name();
        let Some(number) = std::str::from_utf8(name.to_bytes())
            .ok()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue; // "." and ".."
        };
        let dirfd = dir.fd()?;
        if let Ok(len) = rustix::fs::readlinkat_raw(dirfd, name, &mut link[..])
            && len < link.len()
        {
            found(number, &link[..len]);
        }
    }
    Ok(())
}

/// The inode `N` of a `socket:[N]` link target.
pub(crate) fn socket_inode(target: &[u8]) -> Option<u64> {
    let rest = target.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(rest).ok()?.parse().ok()
}

/// The entry `NAME=…` of `/proc/<pid>/environ` for `name`, if the process has one.
#[cfg(target_os = "linux")]
pub(crate) fn environ_entry(pid: i32, name: &str) -> Option<Vec<u8>> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = [name.as_bytes(), b"="].concat();
    env.split(|b| *b == 0)
        .find(|e| e.starts_with(&prefix))
        .map(<[u8]>::to_vec)
}

/// The pipes (device, inode) among the standard streams (fds 0, 1, 2) of process `pid`.
#[cfg(target_os = "linux")]
pub(crate) fn stdio_pipes(pid: i32) -> Vec<(u64, u64)> {
    (0..3)
        .filter_map(|fd| rustix::fs::stat(format!("/proc/{pid}/fd/{fd}")).ok())
        .filter(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo)
        .map(|st| file_id(&st))
        .collect()
}

/// The (device, inode) of the pipe `fd` is an end of.
pub(crate) fn pipe_id(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|st| file_id(&st))
}

/// (device, inode) of a `stat`.
#[allow(clippy::unnecessary_cast)] // u64 on Linux; other widths elsewhere
fn file_id(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// Now, in clock ticks since boot (the unit of a process's start time): `CLOCK_BOOTTIME`, the
/// clock the kernel stamps a process's start with (and `/proc/uptime` prints), read through
/// the vDSO rather than by opening and parsing `/proc/uptime` at every spawn.
#[cfg(target_os = "linux")]
pub(crate) fn boot_ticks_now() -> Option<u64> {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let nanos =
        u128::try_from(now.tv_sec).ok()? * 1_000_000_000 + u128::try_from(now.tv_nsec).ok()?;
    // Rounded down: a session's start is never taken as later than its leader's.
    u64::try_from(nanos * u128::from(clock_ticks_per_second()) / 1_000_000_000).ok()
}

/// The process group of process `pid`.
pub(crate) fn process_group_of(pid: i32) -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        read_stat(pid).map(|stat| stat.pgrp)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let p = Pid::from_raw(pid)?;
        rustix::process::getpgid(Some(p))
            .ok()
            .map(|g| g.as_raw_pid())
    }
}

/// Reaps child `pid` if it is a zombie, without waiting; returns whether it did.
pub(crate) fn reap_if_exited(pid: i32) -> bool {
    matches!(reap_child(pid, false), Ok(Some(_)))
}

/// Live (not zombie) members of process group `pgid`, other than `except`. `None` where the
/// platform cannot enumerate them.
pub(crate) fn group_members(pgid: i32, except: i32) -> Option<Vec<i32>> {
    #[cfg(target_os = "linux")]
    {
        let mut members = Vec::new();
        let dir = std::fs::read_dir("/proc").ok()?;
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if pid == except {
                continue;
            }
            if let Some(stat) = read_stat(pid)
                && stat.pgrp == pgid
                && !stat.is_dead()
            {
                members.push(pid);
            }
        }
        Some(members)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pgid, except);
        None
    }
}

/// Now, on the clock the kernel stamps file times with: on Linux its coarse wall clock, which
/// lags the precise one by up to a tick; a file changed after this instant carries a later
/// time, one changed before it never does. Elsewhere the ordinary wall clock.
pub(crate) fn file_clock_now() -> std::time::SystemTime {
    #[cfg(target_os = "linux")]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(t.tv_sec).unwrap_or(0),
                u32::try_from(t.tv_nsec).unwrap_or(0),
            )
    }
    #[cfg(not(target_os = "linux"))]
    {
        std::time::SystemTime::now()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn parses_stat_with_spaces_and_parens_in_name() {
        let line = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 98765 1000 10 18446744073709551615";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.pid, 1234);
        assert_eq!(stat.state, b'S');
        assert_eq!(stat.ppid, 1);
        assert_eq!(stat.pgrp, 1234);
        assert_eq!(stat.cpu_ticks, 10);
        assert_eq!(stat.child_cpu_ticks, 0);
        assert_eq!(stat.threads, 1);
        assert_eq!(stat.start_time, 98765);
    }

    #[test]
    fn refuses_dangerous_targets() {
        assert!(kill_group(0, SIGTERM).is_err());
        assert!(kill_group(1, SIGTERM).is_err());
        assert!(kill_group(-5, SIGTERM).is_err());
        assert!(kill_group(own_process_group(), 0).is_err());
        assert!(kill_group(own_process_group(), SIGTERM).is_err());
        assert!(kill_pid(1, SIGTERM).is_err());
        assert!(kill_pid(std::process::id() as i32, SIGTERM).is_err());
    }

    #[test]
    fn boot_ticks_are_the_clock_of_process_start_times() {
        let before = boot_ticks_now().expect("the boot clock");
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let started = read_stat(child.id() as i32).expect("its stat").start_time;
        let after = boot_ticks_now().expect("the boot clock");
        // One tick of slack each side: a start time is in whole ticks.
        assert!(
            before <= started + 1 && started <= after + 1,
            "{before} <= {started} <= {after}"
        );
        child.kill().expect("our own sleep");
        child.wait().expect("reaped");
    }

    #[test]
    fn own_children_reads_the_main_thread_s_list_only() {
        // A child forked on this (non-main) test thread is in this thread's list, not in the
        // main thread's, where orphans go: `own_children` must not look at this thread's.
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = child.id() as i32;
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        let mine = read_proc(&format!("/proc/self/task/{tid}/children"), &mut [0u8; 1024])
            .map(|t| t.split_ascii_whitespace().any(|p| p == pid.to_string()));
        assert_eq!(
            mine,
            Some(true),
            "the kernel lists it under the forking thread"
        );
        assert_ne!(
            tid,
            std::process::id() as i32,
            "the test runs off the main thread"
        );
        let listed = own_children().contains(&pid);
        child.kill().expect("our own sleep");
        child.wait().expect("reaped");
        assert!(!listed, "another thread's children were looked at");
    }

    #[test]
    fn a_pidfd_reaches_its_process_and_nobody_after_it_is_reaped() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = child.id() as i32;
        let pidfd = pidfd_open(pid).expect("pidfds (Linux 5.3)");
        pidfd_signal(pidfd.as_fd(), SIGCONT).expect("it lives");
        pidfd_signal(pidfd.as_fd(), SIGKILL).expect("our own sleep");
        child.wait().expect("reaped");
        // Its pid may belong to another process from now on: the pidfd still names the dead one.
        let gone = pidfd_signal(pidfd.as_fd(), SIGKILL).expect_err("gone");
        assert_eq!(
            gone.raw_os_error(),
            Some(rustix::io::Errno::SRCH.raw_os_error())
        );
    }

    #[test]
    fn signal_table_round_trips() {
        assert_eq!(signal_by_name("TERM"), Some(SIGTERM));
        assert_eq!(signal_name(SIGKILL), Some("KILL"));
        assert!(!signal_is_known(0));
    }
}
