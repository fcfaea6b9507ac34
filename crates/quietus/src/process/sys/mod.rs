//! Every operating-system call of the library, by theme (Unix, through `rustix`):
//!
//! - `pid`: the one conversion between [`Pid`](crate::Pid) and the platform's `pid_t`;
//! - `signals`: the signal table, sending signals to a process or a group, the subreaper bit;
//! - `pidfd`: waiting for and reaping children, pidfds, the monitor's wake-up;
//! - `proc`: `/proc` files (a process's `stat`, children, descriptors, environment);
//! - `terminal`: pseudo-terminals and their settings;
//! - `files`: access checks, pipes and descriptors, the file clock;
//! - `cgroupfs`: the cgroup v2 file system (the cgroup's own files are `process::cgroup`'s);
//! - `sockdiag`: socket diagnostics (`NETLINK_SOCK_DIAG`, Linux); `snapshot` and `runprobe`:
//!   the diagnosis's look at a tree;
//! - `spawn`: what the child does before `exec`, planned in safe code (the direct start's plan,
//!   and std's hook's);
//! - `before_exec`: the plain data the new program's process reads before its `exec` (the
//!   plans `spawn` makes, the start state `start_state` records), a leaf that `spawn`,
//!   `unsafe_calls` and `start_state` import, so that no two of them import each other;
//! - `unsafe_calls`: every `unsafe` block of the crate (the direct start's `clone3` and entry,
//!   the `pre_exec` hook, `clone3` into a cgroup and its `_exit`, the guardian's closing of
//!   inherited descriptors).
//!
//! Other modules use `rustix` too where it is the plain way to a call (`process::cgroup`,
//! `capture::spill`, the command's `cli/terminal.rs` and `cli/reaper.rs`); only this module's
//! `unsafe_calls` has `unsafe`. The command has its own door for its signal handling,
//! `src/cli/sys.rs`.

mod cgroupfs;
mod files;
mod pid;
mod pidfd;
pub(crate) mod proc;
mod signals;
mod terminal;

pub(crate) use cgroupfs::*;
pub(crate) use files::*;
#[cfg(target_os = "linux")] // the snapshot's thread ids
pub(crate) use pid::raw;
pub(crate) use pid::{from_raw, from_rustix, to_rustix};
pub(crate) use pidfd::*;
pub(crate) use proc::*;
pub(crate) use signals::*;
pub(crate) use terminal::*;

mod before_exec;
pub(crate) mod spawn;
pub(crate) mod unsafe_calls;

#[cfg(target_os = "linux")]
pub(crate) mod runprobe;
// The snapshot's types and its pure parsers everywhere (the classifier is pure); its reading of
// `/proc` on Linux only.
pub(crate) mod snapshot;
#[cfg(target_os = "linux")]
pub(crate) mod sockdiag;
#[cfg(target_os = "linux")]
pub(crate) mod start_state;

pub(crate) use before_exec::{CgroupEntry, Lead, OrderedExec};
pub(crate) use spawn::{Handoff, configure};
// Who runs the program after a `clone3` into a cgroup (Linux).
#[cfg(target_os = "linux")]
pub(crate) use spawn::Leader;

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
    /// Milliseconds since it last sent and last received payload (`tcp_info`'s
    /// `tcpi_last_data_sent`, `tcpi_last_data_recv`); `None` without `tcp_info`.
    pub(crate) last_data: Option<(u32, u32)>,
    /// The kernel's key of the socket (its family, then its `inet_diag_sockid`: ports,
    /// addresses, interface, cookie), to ask for this one socket again.
    pub(crate) key: [u8; 49],
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::pid::Pid;
    use std::os::fd::AsFd;
    use std::process::Command;

    fn pid(n: u32) -> Pid {
        Pid::new(n).expect("a pid")
    }

    #[test]
    fn parses_stat_with_spaces_and_parens_in_name() {
        let line = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 98765 1000 10 18446744073709551615";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.pid, pid(1234));
        assert_eq!(stat.state, b'S');
        assert_eq!(stat.ppid, Some(pid(1)));
        assert_eq!(stat.pgrp, Some(pid(1234)));
        assert_eq!(stat.cpu_ticks, 10);
        assert_eq!(stat.child_cpu_ticks, 0);
        assert_eq!(stat.threads, 1);
        assert_eq!(stat.start_time, 98765);
    }

    #[test]
    fn refuses_dangerous_targets() {
        // 0 and negative numbers (every process, a group) are no `Pid` at all.
        assert_eq!(from_raw(0), None);
        assert_eq!(from_raw(-5), None);
        assert!(kill_group(pid(1), SIGTERM).is_err());
        let own = own_process_group().expect("the test's group is in its namespace");
        assert!(kill_group(own, 0).is_err());
        assert!(kill_group(own, SIGTERM).is_err());
        assert!(kill_pid(pid(1), SIGTERM).is_err());
        assert!(kill_pid(Pid::current(), SIGTERM).is_err());
    }

    #[test]
    fn boot_ticks_are_the_clock_of_process_start_times() {
        let before = boot_ticks_now().expect("the boot clock");
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let started = read_stat(Pid::of(&child)).expect("its stat").start_time;
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
        let pid = Pid::of(&child);
        let tid = from_rustix(rustix::thread::gettid());
        let mine = read_proc(&format!("/proc/self/task/{tid}/children"), &mut [0u8; 1024])
            .map(|t| t.split_ascii_whitespace().any(|p| p == pid.to_string()));
        assert_eq!(
            mine,
            Some(true),
            "the kernel lists it under the forking thread"
        );
        assert_ne!(tid, Pid::current(), "the test runs off the main thread");
        let listed = own_children().contains(&pid);
        child.kill().expect("our own sleep");
        child.wait().expect("reaped");
        assert!(!listed, "another thread's children were looked at");
    }

    #[test]
    fn a_pidfd_reaches_its_process_and_nobody_after_it_is_reaped() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = Pid::of(&child);
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
