//! One look at a process for the diagnosis of a stall: the raw `/proc` texts of the process
//! and its threads (stat, wchan, syscall), what its descriptors are, the descriptors its epoll
//! sets watch (`/proc/PID/fdinfo`) and, for a thread blocked in poll or select, the descriptors
//! it polls (read from its memory through `/proc/PID/mem`, which the kernel allows to an
//! ancestor of the same user under Yama's default `ptrace_scope` 1; refused under scope 2 or 3,
//! or for a process that changed its credentials, such as a setuid program: then the polled
//! descriptors are unknown). Nothing here interprets: the pure classifier does.

#[cfg(target_os = "linux")]
use std::io::{Read, Seek, SeekFrom};

use super::ProcUnavailable;
use crate::pid::Pid;

/// One thread as read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ThreadSnap {
    /// Its `/proc/PID/task/TID/stat` line.
    pub(crate) stat: String,
    /// Its wait channel (`hrtimer_nanosleep`, `do_wait`, `0`…).
    pub(crate) wchan: String,
    /// Its `/proc/PID/task/TID/syscall` line (`0 0x0 0x7ff…`, `running`, `-1 …`).
    pub(crate) syscall: String,
    /// The descriptors it polls, when it is blocked in poll or select and they could be read.
    pub(crate) polled: Option<Vec<i32>>,
}

/// One process as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcSnap {
    /// Its pid.
    pub(crate) pid: Pid,
    /// Its threads (the main thread first).
    pub(crate) threads: Vec<ThreadSnap>,
    /// Its descriptors and their link targets (`0 pipe:[5]`, `3 socket:[77]`, `1 /dev/pts/3`).
    pub(crate) fds: Vec<(i32, String)>,
    /// Its epoll descriptors and the descriptors each watches.
    pub(crate) epoll: Vec<(i32, Vec<i32>)>,
    /// Its pipe and FIFO descriptors open for writing (`flags` in `/proc/PID/fdinfo`): who
    /// holds the write end of a pipe another process of the tree reads.
    pub(crate) writable: Vec<i32>,
    /// Its descriptors that are FIFOs (named pipes: a path whose file is a FIFO).
    pub(crate) fifos: Vec<i32>,
    /// Why it could not be read (a part of it), if so.
    pub(crate) error: Option<ReadingProblem>,
}

/// Why a process of a diagnosis, or a part of it, could not be read
/// ([`ProcessDiagnosis::error`](crate::diagnosis::ProcessDiagnosis::error)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadingProblem {
    /// No `/proc` of quietus's pid namespace: no process is read by pid.
    Proc(ProcUnavailable),
    /// Its descriptors (`/proc/PID/fd`) could not be listed: it ended, or they are not
    /// quietus's to read.
    Descriptors(crate::error::SystemError),
    /// None of its threads (`/proc/PID/task`) could be read: it ended.
    Threads,
    /// The diagnosis ran out of its time (a few tens of milliseconds) before reaching it.
    OutOfTime,
}

impl std::fmt::Display for ReadingProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadingProblem::Proc(why) => write!(f, "{why}"),
            ReadingProblem::Descriptors(e) => write!(f, "its descriptors: {e}"),
            ReadingProblem::Threads => f.write_str("its threads cannot be read"),
            ReadingProblem::OutOfTime => f.write_str("not read: the diagnosis ran out of time"),
        }
    }
}

impl ProcSnap {
    /// Process `pid` with nothing read yet.
    pub(crate) fn empty(pid: Pid) -> ProcSnap {
        ProcSnap {
            pid,
            threads: Vec::new(),
            fds: Vec::new(),
            epoll: Vec::new(),
            writable: Vec::new(),
            fifos: Vec::new(),
            error: None,
        }
    }
}

/// Never more threads than this per process in a snapshot.
#[cfg(target_os = "linux")]
const MAX_THREADS: usize = 64;
/// Never more polled descriptors than this read per thread.
#[cfg(target_os = "linux")]
const MAX_POLLED: u64 = 256;

/// Reads process `pid`; a part that cannot be read leaves its field empty and says why.
#[cfg(target_os = "linux")]
pub(crate) fn snapshot(pid: Pid) -> ProcSnap {
    let mut snap = ProcSnap::empty(pid);
    if let Some(why) = super::proc_view().why_not() {
        snap.error = Some(ReadingProblem::Proc(why)); // never another namespace's process
        return snap;
    }
    let fds = super::fd_links(pid, &mut |fd, target| {
        snap.fds
            .push((fd, String::from_utf8_lossy(target).into_owned()));
    });
    if let Err(e) = fds {
        snap.error = Some(ReadingProblem::Descriptors((&e).into()));
    }
    snap.fds.sort_unstable();
    for (fd, target) in &snap.fds {
        if target == "anon_inode:[eventpoll]" {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"));
            snap.epoll
                .push((*fd, info.map(|t| epoll_targets(&t)).unwrap_or_default()));
            continue;
        }
        let fifo = target.starts_with('/')
            && std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
        if fifo {
            snap.fifos.push(*fd);
        }
        if fifo || target.starts_with("pipe:") {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"));
            if info.is_ok_and(|t| opened_for_writing(&t)) {
                snap.writable.push(*fd);
            }
        }
    }
    let mut buf = [0u8; 1024];
    // The main thread's stat says how many threads there are: one (the usual case) needs no
    // listing of the tasks.
    let main_stat = super::read_proc(&format!("/proc/{pid}/task/{pid}/stat"), &mut buf)
        .map(|text| text.into_owned())
        .unwrap_or_default();
    let single = super::parse_stat(&main_stat).is_some_and(|stat| stat.threads == 1);
    let main = super::raw(pid);
    let tids = if single { vec![main] } else { threads(pid) };
    for tid in tids.into_iter().take(MAX_THREADS) {
        let mut read = |name: &str| {
            super::read_proc(&format!("/proc/{pid}/task/{tid}/{name}"), &mut buf)
                .map(|text| text.into_owned())
                .unwrap_or_default()
        };
        let stat = if tid == main {
            main_stat.clone()
        } else {
            read("stat")
        };
        let mut thread = ThreadSnap {
            stat,
            wchan: read("wchan"),
            syscall: read("syscall").trim_end().to_owned(),
            polled: None,
        };
        thread.polled = polled(pid, &thread.syscall);
        snap.threads.push(thread);
    }
    if snap.threads.is_empty() && snap.error.is_none() {
        snap.error = Some(ReadingProblem::Threads);
    }
    snap
}

/// The thread ids of `pid`, the main thread first.
#[cfg(target_os = "linux")]
fn threads(pid: Pid) -> Vec<i32> {
    let main = super::raw(pid);
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable_by_key(|tid| (*tid != main, *tid));
    tids
}

/// The watched descriptors in an epoll descriptor's fdinfo (`tfd:        5 events: …`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // read by `snapshot` (Linux)
pub(crate) fn epoll_targets(fdinfo: &str) -> Vec<i32> {
    fdinfo
        .lines()
        .filter_map(|line| line.strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Whether an fdinfo text's `flags` (octal) open the descriptor for writing (`O_WRONLY` or
/// `O_RDWR`).
pub(crate) fn opened_for_writing(fdinfo: &str) -> bool {
    access_mode(fdinfo).is_some_and(|mode| mode != 0)
}

/// The access mode of an fdinfo text's `flags`: 0 read only, 1 write only, 2 read and write.
pub(crate) fn access_mode(fdinfo: &str) -> Option<u32> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .map(|flags| flags & 0o3)
}

/// The arguments of a `/proc/PID/syscall` line: its number and its six arguments.
pub(crate) fn syscall_args(line: &str) -> Option<(i64, [u64; 6])> {
    let mut words = line.split_whitespace();
    let number: i64 = words.next()?.parse().ok()?;
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(words.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some((number, args))
}

/// For a thread blocked in poll or select: the descriptors it polls, from its memory.
#[cfg(target_os = "linux")]
fn polled(pid: Pid, syscall: &str) -> Option<Vec<i32>> {
    let (number, args) = syscall_args(syscall)?;
    match syscall_name(number)? {
        "poll" | "ppoll" => {
            let count = args[1].min(MAX_POLLED);
            let bytes = read_memory(pid, args[0], count * 8)?;
            // struct pollfd { int fd; short events; short revents; }
            Some(
                bytes
                    .chunks_exact(8)
                    .map(|p| i32::from_ne_bytes([p[0], p[1], p[2], p[3]]))
                    .filter(|fd| *fd >= 0)
                    .collect(),
            )
        }
        "select" | "pselect6" if args[1] != 0 => {
            let count = args[0].min(MAX_POLLED);
            let bytes = read_memory(pid, args[1], count.div_ceil(8))?;
            Some(
                (0..count as usize)
                    .filter(|fd| bytes[fd / 8] & (1 << (fd % 8)) != 0)
                    .map(|fd| fd as i32)
                    .collect(),
            )
        }
        _ => None,
    }
}

/// `len` bytes of process `pid`'s memory at `address` (`/proc/PID/mem`).
#[cfg(target_os = "linux")]
fn read_memory(pid: Pid, address: u64, len: u64) -> Option<Vec<u8>> {
    let mut file = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    file.seek(SeekFrom::Start(address)).ok()?;
    let mut bytes = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact(&mut bytes).ok()?;
    Some(bytes)
}

/// The name of system call `number` on this architecture, for those the diagnosis knows.
pub(crate) fn syscall_name(number: i64) -> Option<&'static str> {
    SYSCALLS
        .iter()
        .find(|(n, _)| *n == number)
        .map(|(_, name)| *name)
}

#[cfg(target_arch = "x86_64")]
const SYSCALLS: &[(i64, &str)] = &[
    (0, "read"),
    (2, "open"),
    (7, "poll"),
    (17, "pread64"),
    (19, "readv"),
    (23, "select"),
    (34, "pause"),
    (35, "nanosleep"),
    (42, "connect"),
    (43, "accept"),
    (45, "recvfrom"),
    (47, "recvmsg"),
    (61, "wait4"),
    (72, "fcntl"),
    (73, "flock"),
    (130, "rt_sigsuspend"),
    (128, "rt_sigtimedwait"),
    (202, "futex"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (257, "openat"),
    (247, "waitid"),
    (270, "pselect6"),
    (271, "ppoll"),
    (281, "epoll_pwait"),
    (288, "accept4"),
    (437, "openat2"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
];

#[cfg(target_arch = "aarch64")]
const SYSCALLS: &[(i64, &str)] = &[
    (22, "epoll_pwait"),
    (25, "fcntl"),
    (32, "flock"),
    (56, "openat"),
    (63, "read"),
    (65, "readv"),
    (67, "pread64"),
    (72, "pselect6"),
    (73, "ppoll"),
    (95, "waitid"),
    (98, "futex"),
    (101, "nanosleep"),
    (115, "clock_nanosleep"),
    (133, "rt_sigsuspend"),
    (137, "rt_sigtimedwait"),
    (202, "accept"),
    (203, "connect"),
    (207, "recvfrom"),
    (212, "recvmsg"),
    (242, "accept4"),
    (260, "wait4"),
    (437, "openat2"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
];

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SYSCALLS: &[(i64, &str)] = &[];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoll_fdinfo_and_syscall_lines_are_read() {
        let info = "pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t1057\n\
                    tfd:        5 events:       19 data:                5  pos:0 ino:1d40 sdev:8\n\
                    tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:d\n";
        assert_eq!(epoll_targets(info), vec![5, 0]);
        assert!(!opened_for_writing(
            "pos:\t0\nflags:\t0100000\nmnt_id:\t15\n"
        ));
        assert!(opened_for_writing("pos:\t0\nflags:\t01\n"));
        assert!(opened_for_writing("flags:\t02004002\n"));
        assert!(!opened_for_writing("pos:\t0\n"));
        let (n, args) =
            syscall_args("0 0x0 0x7ffc434d1e8f 0x1 0x8 0x2 0x1 0x7ffc434d1e58 0x7f1e3826e2ad")
                .unwrap();
        assert_eq!(n, 0);
        assert_eq!(args[1], 0x7ffc434d1e8f);
        assert_eq!(syscall_args("running"), None);
        assert_eq!(syscall_args("-1 0x7ffc434d1e58 0x7f1e3826e2ad"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_blocked_in_poll_shows_what_it_polls() {
        use std::process::{Command, Stdio};
        // perl's 4-argument select is select(2) (pselect6 in glibc) on fd 0.
        let mut child = Command::new("perl")
            .args(["-e", "vec($r, 0, 1) = 1; select($r, undef, undef, 30)"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("perl runs");
        let pid = Pid::of(&child);
        let mut seen = None;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            let snap = snapshot(pid);
            if let Some(polled) = snap.threads.first().and_then(|t| t.polled.clone()) {
                seen = Some(polled);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, Some(vec![0]));
    }
}
