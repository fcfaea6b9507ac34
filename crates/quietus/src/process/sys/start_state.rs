//! What quietus changes in its own process to supervise, and gives back to every program it
//! starts (issue 28, items 2 and 11).
//!
//! [`prepare_supervisor`] (the command and `serve` call it first thing, through the public
//! [`crate::prepare_supervisor`]) records the state this process was started with, then:
//! - SIGCHLD ignored → its default action (an ignored SIGCHLD makes the kernel reap children
//!   itself, so no exit status could be had: coreutils' `timeout` does the same);
//! - the soft `RLIMIT_NOFILE` → the hard limit (each session holds pipes, pidfds, a cgroup's
//!   files, watches).
//!
//! `restore_in_child` (in `unsafe_calls::async_signal_safe`, with the hook's other helpers)
//! runs in every new program's process before its `exec`: the signals
//! ignored at the start are ignored again (SIGCHLD, but also any other the parent ignored that
//! something in this process caught meanwhile), and the soft limit is the one this process
//! was started with. Without [`prepare_supervisor`] it does nothing (a library user's process
//! is the program's parent as it is).
//!
//! SIGPIPE is left out: the Rust runtime ignores it before `main`, so its state at the start is
//! unknown; every program gets the default action (std's rule for the programs it starts).

use std::io;

use super::before_exec::{self, Inherited, bit};

/// `SIGPIPE`'s bit.
const PIPE_BIT: u64 = 1 << (13 - 1);
/// `SIGCHLD`.
const SIGCHLD: i32 = rustix::process::Signal::CHILD.as_raw();

/// What [`prepare_supervisor`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prepared {
    /// SIGCHLD was ignored and now has its default action.
    pub(crate) sigchld_restored: bool,
    /// The soft descriptor limit (before, after), when it was raised.
    pub(crate) nofile_raised: Option<(u64, u64)>,
}

/// Records the start state and changes what quietus needs (module docs). Once per process:
/// a second call changes nothing more and says so.
pub(crate) fn prepare_supervisor() -> io::Result<Prepared> {
    let mut prepared = Prepared {
        sigchld_restored: false,
        nofile_raised: None,
    };
    if before_exec::inherited().is_some() {
        return Ok(prepared);
    }
    let ignored = ignored_now()? & !PIPE_BIT;
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let nofile = match (limit.current, limit.maximum) {
        (Some(current), maximum) if maximum.is_none_or(|max| max > current) => {
            let raised = rustix::process::Rlimit {
                current: maximum,
                maximum,
            };
            match rustix::process::setrlimit(rustix::process::Resource::Nofile, raised) {
                Ok(()) => {
                    prepared.nofile_raised = Some((current, maximum.unwrap_or(u64::MAX)));
                    Some((current, maximum.unwrap_or(u64::MAX)))
                }
                Err(e) => {
                    log::debug!("cannot raise the descriptor limit to the hard limit: {e}");
                    None
                }
            }
        }
        _ => None,
    };
    before_exec::record(Inherited { ignored, nofile });
    if ignored & bit(SIGCHLD) != 0 {
        super::unsafe_calls::async_signal_safe::set_disposition(SIGCHLD, false)?;
        prepared.sigchld_restored = true;
    }
    Ok(prepared)
}

/// The signals ignored now, from `/proc/self/status` (`SigIgn`), which shows every signal,
/// the C library's own among them.
fn ignored_now() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .ok_or_else(|| io::Error::other("no SigIgn line in /proc/self/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_signals_are_read_from_proc() {
        // The test harness ignores SIGPIPE (Rust's runtime): bit 13 is set.
        let ignored = ignored_now().expect("readable");
        assert_ne!(ignored & PIPE_BIT, 0, "{ignored:x}");
    }
}
