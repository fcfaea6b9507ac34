//! `/proc` files and process facts: a process's `stat`, its children, its descriptors and what
//! they name, an entry of its environment, its process group; the members of a group; the boot
//! clock that process start times are counted on (Linux reads `/proc`; elsewhere what the
//! platform offers).

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Signal as RSignal, WaitIdOptions};

use crate::pid::Pid;

use super::*;

/// How this process sees `/proc`: the pids in it are this process's own only when it is
/// mounted for this process's pid namespace. Without it (a container or sandbox that mounts
/// none), or with the host's kept in a new pid namespace (`unshare --pid --fork` without
/// `--mount-proc`), every process read by pid would be none, or another one: nothing is read
/// from it then ([`read_proc`] and the rest say nothing), and the sources that need it say
/// they cannot observe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcView {
    /// Mounted for this process's own pid namespace.
    Own,
    /// Not mounted.
    Missing,
    /// Mounted for another pid namespace: there this process is `seen_as`, not `own`.
    Foreign { seen_as: i32, own: i32 },
}

impl ProcView {
    /// Why processes cannot be read by pid from `/proc`, if they cannot.
    pub(crate) fn why_not(&self) -> Option<ProcUnavailable> {
        match *self {
            ProcView::Own => None,
            ProcView::Missing => Some(ProcUnavailable::NotMounted),
            ProcView::Foreign { seen_as, own } => Some(ProcUnavailable::ForeignNamespace {
                seen_as: seen_as.unsigned_abs(),
                own: own.unsigned_abs(),
            }),
        }
    }
}

/// Why quietus cannot read processes by pid from `/proc`: the reason a source that needs it
/// is unavailable ([`NetworkUnavailable::ForeignProc`](crate::outcome::NetworkUnavailable)) and a
/// process of a diagnosis was not read
/// ([`ReadingProblem::Proc`](crate::diagnosis::ReadingProblem)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProcUnavailable {
    /// No `/proc` is mounted (a container or sandbox that mounts none).
    NotMounted,
    /// The `/proc` mounted is another pid namespace's (the host's, kept by
    /// `unshare --pid --fork` without `--mount-proc`): every pid in it would name another
    /// process, or none.
    ForeignNamespace {
        /// This process's pid in that namespace.
        seen_as: u32,
        /// This process's pid in its own.
        own: u32,
    },
}

impl std::fmt::Display for ProcUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcUnavailable::NotMounted => f.write_str("/proc is not mounted"),
            ProcUnavailable::ForeignNamespace { seen_as, own } => write!(
                f,
                "/proc is another pid namespace's (this process is {seen_as} there, {own} here)"
            ),
        }
    }
}

impl std::error::Error for ProcUnavailable {}

/// How this process sees the `/proc` at `root`, being process `own` in its pid namespace: by
/// where `root/self` leads.
pub(crate) fn proc_view_at(root: &Path, own: i32) -> ProcView {
    let seen = std::fs::read_link(root.join("self")).ok();
    match seen
        .as_deref()
        .and_then(Path::to_str)
        .map(str::parse::<i32>)
    {
        Some(Ok(seen_as)) if seen_as == own => ProcView::Own,
        Some(Ok(seen_as)) => ProcView::Foreign { seen_as, own },
        _ => ProcView::Missing,
    }
}

/// How this process sees `/proc` (looked at once: a process's pid namespace never changes).
pub(crate) fn proc_view() -> &'static ProcView {
    static VIEW: std::sync::OnceLock<ProcView> = std::sync::OnceLock::new();
    VIEW.get_or_init(|| {
        if cfg!(target_os = "linux") {
            proc_view_at(
                Path::new("/proc"),
                rustix::process::getpid().as_raw_nonzero().get(),
            )
        } else {
            ProcView::Missing
        }
    })
}

/// Whether processes can be read by pid from `/proc` ([`ProcView::Own`]).
fn proc_is_own() -> bool {
    *proc_view() == ProcView::Own
}

/// One line of `/proc/<pid>/stat`, the fields quietus needs.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) pid: Pid,
    pub(crate) state: u8,
    /// `None` for a process whose parent is outside this pid namespace (init, a kernel thread).
    pub(crate) ppid: Option<Pid>,
    /// `None` when the group lies outside this pid namespace.
    pub(crate) pgrp: Option<Pid>,
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
    let pid = from_raw(text[..open].trim().parse().ok()?)?;
    // Field n of proc_pid_stat(5) (1-based; 1 is the pid, 2 the name) is fields[n - 3].
    let fields: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let number = |n: usize| field(n)?.parse::<u64>().ok();
    Some(ProcStat {
        pid,
        state: *field(3)?.as_bytes().first()?,
        ppid: from_raw(field(4)?.parse().ok()?),
        pgrp: from_raw(field(5)?.parse().ok()?),
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
    if !proc_is_own() {
        return None;
    }
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
#[cfg(all(target_os = "linux", not(feature = "portable")))]
pub(crate) fn read_count(pid: Pid) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let text = read_proc(&format!("/proc/{pid}/io"), &mut buf)?;
    text.lines()
        .find_map(|line| line.strip_prefix("syscr:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The bytes `pid` has moved that are progress no other source sees: what it wrote with
/// `write` and its kin (`wchar` of `/proc/<pid>/io`: into a pipe its parent reads, a file, a
/// socket) plus what it read from storage (`read_bytes`: disk-bound work). Reads that only
/// copy from the page cache or a pipe are left out: every program's start reads its libraries'
/// headers, and a reader only consumes what a writer already counted. `None` if it cannot be
/// read (another user's process, a kernel without task I/O accounting).
#[cfg(target_os = "linux")]
pub(crate) fn read_moved_bytes(pid: Pid) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let text = read_proc(&format!("/proc/{pid}/io"), &mut buf)?;
    parse_moved_bytes(&text)
}

/// The part of [`read_moved_bytes`] that is `pid`'s own, its live threads' (each
/// `/proc/<pid>/task/<tid>/io`): the process's whole count also holds what its reaped
/// children moved (the kernel adds a child's counts to its parent's when it is reaped).
#[cfg(target_os = "linux")]
pub(crate) fn read_own_moved_bytes(pid: Pid) -> Option<u64> {
    let mut sum = 0u64;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let mut buf = [0u8; 1024];
        let path = entry.path().join("io");
        let Ok(text) = read_small(&path, &mut buf) else {
            continue; // a thread that ended meanwhile
        };
        sum = sum.saturating_add(parse_moved_bytes(&text)?);
    }
    Some(sum)
}

/// `wchar` + `read_bytes` of a `/proc/<pid>/io` text.
pub(crate) fn parse_moved_bytes(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    Some(field("wchar:")?.saturating_add(field("read_bytes:").unwrap_or(0)))
}

/// Elsewhere (and in the portable backend): no `/proc`.
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
pub(crate) fn read_count(_pid: Pid) -> Option<u64> {
    None
}

/// Reads `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub(crate) fn read_stat(pid: Pid) -> Option<ProcStat> {
    let mut buf = [0u8; 1024];
    parse_stat(&read_proc(&format!("/proc/{pid}/stat"), &mut buf)?)
}

/// The children of `pid`, from `/proc/<pid>/task/<tid>/children` of every thread (a child is
/// listed under the thread that forked it). `None` when the kernel does not offer the file.
/// A single-threaded process has one such file, read without listing the tasks.
#[cfg(target_os = "linux")]
pub(crate) fn children_of(pid: Pid, threads: u64, into: &mut Vec<Pid>) -> Option<()> {
    if threads == 1 {
        let mut buf = [0u8; 1024];
        let text = read_proc(&format!("/proc/{pid}/task/{pid}/children"), &mut buf)?;
        into.extend(text.split_ascii_whitespace().filter_map(Pid::parse));
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
        into.extend(text.split_ascii_whitespace().filter_map(Pid::parse));
    }
    offered.then_some(())
}

/// Clock ticks per second of the times in `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub(crate) fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
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
pub(crate) fn own_children() -> Vec<Pid> {
    let me = Pid::current();
    let mut out = Vec::new();
    let main_thread_lives = read_stat(me).is_some_and(|stat| !stat.is_dead());
    if !(main_thread_lives && children_of(me, 1, &mut out).is_some()) {
        out.clear();
        let _ = children_of(me, 0, &mut out);
    }
    out
}

/// Every descriptor of process `pid` and what its `/proc/<pid>/fd/<n>` link names
/// (`socket:[123]`, `pipe:[45]`, `/dev/pts/3`…), in one pass over the folder with a
/// reused buffer. A link longer than 4 KiB is skipped. Fails when the folder cannot be read
/// (the process is gone, or another user's without the privilege).
#[cfg(target_os = "linux")]
pub(crate) fn fd_links(pid: Pid, found: &mut dyn FnMut(i32, &[u8])) -> io::Result<()> {
    let mut dir = rustix::fs::Dir::new(open_fd_dir(pid)?)?;
    read_fd_links(&mut dir, found)
}

/// `/proc/<pid>/fd`, open.
#[cfg(target_os = "linux")]
pub(crate) fn open_fd_dir(pid: Pid) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    if let Some(why) = proc_view().why_not() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, why));
    }
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
pub(crate) fn environ_entry(pid: Pid, name: &str) -> Option<Vec<u8>> {
    if !proc_is_own() {
        return None;
    }
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = [name.as_bytes(), b"="].concat();
    env.split(|b| *b == 0)
        .find(|e| e.starts_with(&prefix))
        .map(<[u8]>::to_vec)
}

/// The pipes (device, inode) among the standard streams (fds 0, 1, 2) of process `pid`.
#[cfg(target_os = "linux")]
pub(crate) fn stdio_pipes(pid: Pid) -> Vec<(u64, u64)> {
    if !proc_is_own() {
        return Vec::new();
    }
    (0..3)
        .filter_map(|fd| rustix::fs::stat(format!("/proc/{pid}/fd/{fd}")).ok())
        .filter(|st| rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo)
        .map(|st| file_id(&st))
        .collect()
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
pub(crate) fn process_group_of(pid: Pid) -> Option<Pid> {
    #[cfg(target_os = "linux")]
    {
        read_stat(pid).and_then(|stat| stat.pgrp)
    }
    #[cfg(not(target_os = "linux"))]
    {
        rustix::process::getpgid(Some(to_rustix(pid)))
            .ok()
            .map(from_rustix)
    }
}

/// Live (not zombie) members of process group `pgid`, other than `except`. `None` where the
/// platform cannot enumerate them.
pub(crate) fn group_members(pgid: Pid, except: Pid) -> Option<Vec<Pid>> {
    #[cfg(target_os = "linux")]
    {
        if !proc_is_own() {
            return None;
        }
        let mut members = Vec::new();
        let dir = std::fs::read_dir("/proc").ok()?;
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(Pid::parse) else {
                continue;
            };
            if pid == except {
                continue;
            }
            if let Some(stat) = read_stat(pid)
                && stat.pgrp == Some(pgid)
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

#[cfg(test)]
mod view_tests {
    use super::*;

    /// A `/proc` of this pid namespace, none, and another namespace's (the host's kept by
    /// `unshare --pid --fork`): only the first is read.
    #[test]
    fn proc_is_read_only_when_it_is_this_namespaces() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(proc_view_at(dir.path(), 7), ProcView::Missing);
        assert_eq!(
            ProcView::Missing.why_not(),
            Some(ProcUnavailable::NotMounted)
        );
        assert!(
            ProcView::Missing
                .why_not()
                .unwrap()
                .to_string()
                .contains("not mounted")
        );
        std::os::unix::fs::symlink("4242", dir.path().join("self")).unwrap();
        assert_eq!(proc_view_at(dir.path(), 4242), ProcView::Own);
        let foreign = proc_view_at(dir.path(), 3);
        assert_eq!(
            foreign,
            ProcView::Foreign {
                seen_as: 4242,
                own: 3
            }
        );
        assert_eq!(
            foreign.why_not(),
            Some(ProcUnavailable::ForeignNamespace {
                seen_as: 4242,
                own: 3
            })
        );
        assert!(
            foreign
                .why_not()
                .unwrap()
                .to_string()
                .contains("another pid namespace")
        );
        // This test process runs with its own /proc.
        assert_eq!(*proc_view(), ProcView::Own);
    }
}
