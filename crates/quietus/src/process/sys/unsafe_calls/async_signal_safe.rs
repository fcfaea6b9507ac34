//! **Only async-signal-safe work goes here.** Every function of this module runs in the child
//! std forked, between the fork and the program's `exec` (the `pre_exec` hook of
//! [`install`](super::install)), or in the process `clone3` made there: a copy of a
//! multi-threaded process with one thread left, where a lock another thread held stays held
//! forever. So: no allocation, no lock (no `log`, no `Mutex`, no `println!`), no `OnceLock`
//! initialisation (reading one set before any spawn is fine), nothing but raw system calls
//! (rustix's, or this module's parent's) and plain values moved into the hook. An error is an
//! `io::Error` made from a raw OS code, which does not allocate.
//!
//! The helpers live here, beside the `unsafe` code that calls them, so that whoever changes one
//! sees the rule; they are safe code themselves (`unsafe` stays in the parent module).
#![deny(unsafe_code)]

use std::io;

use rustix::process::Pid;

#[cfg(target_os = "linux")]
use crate::process::sys::before_exec;
use crate::process::sys::before_exec::Lead;

/// In a child before exec: a new process group, or a new session (with fd 0 as its
/// controlling terminal).
pub(in crate::process::sys) fn lead_group(lead: Lead) -> io::Result<()> {
    match lead {
        Lead::Group => rustix::process::setpgid(None, None)?,
        Lead::Session => {
            rustix::process::setsid()?;
        }
        Lead::Terminal => {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
        }
    }
    Ok(())
}

/// In a child before exec, on Linux when asked (`parent`): SIGKILL when the thread that
/// spawned it dies; fails if `parent` is already gone (then the signal would never come).
pub(in crate::process::sys) fn parent_death(parent: Option<Pid>) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    if let Some(parent) = parent {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::SRCH.raw_os_error(),
            ));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
    Ok(())
}

/// In the program's process born by `clone3`: it leads, and dies with quietus when asked.
pub(in crate::process::sys) fn become_leader(lead: Lead, parent: Option<Pid>) -> io::Result<()> {
    lead_group(lead)?;
    parent_death(parent)
}

/// In a new program's process before its `exec` (`rt_sigaction` and `setrlimit` only, no
/// allocation): the dispositions and the descriptor limit this process was started with
/// (`start_state`'s module docs, recorded in `before_exec`). Without `supervisor::prepare` it does nothing.
#[cfg(target_os = "linux")]
pub(in crate::process::sys) fn restore_in_child() -> io::Result<()> {
    let Some(inherited) = before_exec::inherited() else {
        return Ok(());
    };
    for signal in 1..=64 {
        if inherited.ignored & before_exec::bit(signal) != 0 {
            set_disposition(signal, true)?;
        }
    }
    if let Some((current, maximum)) = inherited.nofile {
        let limit = rustix::process::Rlimit {
            current: (current != u64::MAX).then_some(current),
            maximum: (maximum != u64::MAX).then_some(maximum),
        };
        rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)?;
    }
    Ok(())
}

/// `signal`'s action: ignored, or the default (the kernel's `rt_sigaction`, in the parent
/// module). glibc keeps its own two signals (32 and 33) to itself and refuses them; quietus
/// never changes them either, so an ignore of theirs inherited at the start is still in place,
/// and is inherited by every program through its fork and `exec`. Also called once by
/// `start_state::prepare_supervisor`, before any thread.
#[cfg(target_os = "linux")]
pub(in crate::process::sys) fn set_disposition(signal: i32, ignore: bool) -> io::Result<()> {
    match super::set_disposition(signal, ignore) {
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
            // One of the C library's own, or one no disposition can be set for (KILL, STOP).
            Ok(())
        }
        other => other,
    }
}

/// The new process of the direct start (`start_direct`), on its own stack in the parent's
/// memory, every signal blocked and every handler reset (`CLONE_CLEAR_SIGHAND`): what std's
/// child and the hook do, in their order — SIGPIPE to its default (std's rule), the start
/// state given back, the stdio `dup2`ed onto 0, 1 and 2, the working directory, the group or
/// session (and terminal), the parent-death signal, an empty mask — then the program's
/// `execve`. Returns the error that stopped it (it never returns otherwise). Writes nothing of
/// the parent's memory but the shell's argument slot (`exec_candidates`).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(in crate::process::sys) fn direct_child(
    plan: &crate::process::sys::before_exec::Direct,
) -> io::Error {
    match prepare_direct(plan) {
        Ok(()) => super::exec_candidates(&plan.exec, true)
            .unwrap_or_else(|| io::Error::from_raw_os_error(libc::ENOEXEC)),
        Err(error) => error,
    }
}

/// [`direct_child`] before the `execve`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn prepare_direct(plan: &crate::process::sys::before_exec::Direct) -> io::Result<()> {
    set_disposition(rustix::process::Signal::PIPE.as_raw(), false)?;
    restore_in_child()?;
    let [stdin, stdout, stderr] = &plan.stdio;
    if let Some(fd) = stdin {
        rustix::stdio::dup2_stdin(fd)?;
    }
    if let Some(fd) = stdout {
        rustix::stdio::dup2_stdout(fd)?;
    }
    if let Some(fd) = stderr {
        rustix::stdio::dup2_stderr(fd)?;
    }
    if let Some(dir) = &plan.cwd {
        rustix::process::chdir(dir.as_c_str())?;
    }
    lead_group(plan.lead)?;
    parent_death(plan.parent)?;
    super::empty_signal_mask();
    Ok(())
}
