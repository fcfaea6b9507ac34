//! Signals: the platform's signal table by name and number, and sending them to a process or a
//! process group (never to a pgid <= 1, nor to quietus's own group or itself); becoming a
//! child subreaper.

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Signal as RSignal, WaitIdOptions};

use crate::pid::Pid;

use super::*;

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

pub(super) fn rsignal(number: i32) -> Option<RSignal> {
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

/// The process group of this (supervising) process.
///
/// `None` when the group lies outside this process's pid namespace (a container's first
/// process started without a group of its own): `getpgrp` would then report 0, which no `Pid`
/// may hold, so on Linux the value is read from `/proc/self/stat` instead.
pub(crate) fn own_process_group() -> Option<Pid> {
    #[cfg(target_os = "linux")]
    {
        // `thread-self` first: the same group as `self` on every kernel, and the real one
        // under qemu's user-mode emulation, which answers `/proc/self/stat` itself with the
        // group 0 (measured with qemu-aarch64 10.0: `self` says 0, `thread-self` the group
        // `getpgrp` gives). Without it, no group of ours would be refused there.
        for path in ["/proc/thread-self/stat", "/proc/self/stat"] {
            let mut buf = [0u8; 1024];
            if let Some(stat) = read_proc(path, &mut buf).and_then(|text| parse_stat(&text)) {
                return stat.pgrp;
            }
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        from_raw(rustix::process::getpgrp().as_raw_pid())
    }
}

/// Sends `signal` to every member of process group `pgid`. Refuses group 1 and our own
/// group, whatever the caller believes.
pub(crate) fn kill_group(pgid: Pid, signal: i32) -> io::Result<()> {
    if pgid.get() == 1 || Some(pgid) == own_process_group() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    let sig = rsignal(signal).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    rustix::process::kill_process_group(to_rustix(pgid), sig).map_err(io::Error::from)
}

/// Sends `signal` to one process. Refuses pid 1 and ourselves. Callers check the process's
/// identity (pid + start time) just before, so a reused pid is not signalled.
pub(crate) fn kill_pid(pid: Pid, signal: i32) -> io::Result<()> {
    if pid.get() == 1 || pid == Pid::current() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {pid}"),
        ));
    }
    let p = to_rustix(pid);
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
