//! The guardian's process: a fork of this process that runs no program (Linux).
//!
//! Forked rather than started as a program (it was a `sh` before): a fork costs a copy of the
//! page tables, where starting `sh` cost its loading, linking and start-up, about a sixth of the
//! CPU of a whole `stallwatch -- true` run (measured; docs/benchmarks.md, and CHANGELOG.md for the history). And a fork can
//! be handed file descriptors over its socket, which a shell cannot receive: the supervisor hands
//! it the file tracker's inotify instances when a run is over. (That moved the kernel's slow
//! teardown of an instance, one SRCU grace period, 8–11 ms here, off the supervisor's way out
//! while the guardian outlived it; it no longer does: the guardian exits at `done` and the
//! supervisor reaps it, since nothing of stallwatch's own may outlive it, not even a zombie
//! for its caller.)
//!
//! The forked child may only make async-signal-safe calls (other threads of the parent may have
//! held locks at the fork): raw system calls through `rustix` (its Linux backend makes them
//! without libc) and `libc`'s thin wrappers of `fork`, `signal`, `sigprocmask`, `syscall` and
//! `_exit`. Nothing allocates, and nothing reads the heap: forked from a process with one
//! thread, the guardian does not have it (`HeapOutOfFork`); what it needs of the supervisor's
//! memory (the cgroup's path) is on the forking thread's stack.

use std::ffi::CStr;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use rustix::process::{Pid, Signal};

/// What the supervisor sends when the session ended properly.
const DONE: &[u8] = b"done";
/// What the supervisor sends to have the guardian close every descriptor it was handed (the
/// file tracker gave its inotify instance up mid-run: its watches must not outlive it here).
const GIVE_BACK: &[u8] = b"back";
/// File descriptors per message of a hand-over.
const FDS_PER_MESSAGE: usize = 16;

/// A forked guardian: its pid, and the supervisor's end of its socket.
#[derive(Debug)]
pub(crate) struct ForkedGuardian {
    pub(crate) pid: i32,
    channel: OwnedFd,
}

/// The longest cgroup directory a guardian takes, with room for its files' names.
const PATH_MAX: usize = 4096;

/// The directory of a session's cgroup, copied before the fork onto the stack: the forked
/// child may not allocate, and does not have this process's heap ([`HeapOutOfFork`]).
struct CgroupFiles {
    dir: [u8; PATH_MAX],
    len: usize,
}

impl CgroupFiles {
    fn of(dir: &Path) -> io::Result<CgroupFiles> {
        let bytes = dir.as_os_str().as_bytes();
        if bytes.len() + 32 > PATH_MAX || bytes.contains(&0) {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let mut files = CgroupFiles {
            dir: [0; PATH_MAX],
            len: bytes.len(),
        };
        files.dir[..bytes.len()].copy_from_slice(bytes);
        Ok(files)
    }

    /// The path of its file `name` (the directory itself for an empty name), made in `out`
    /// (no allocation: the forked child calls this).
    fn file<'o>(&self, name: &[u8], out: &'o mut [u8; PATH_MAX]) -> &'o CStr {
        let mut at = self.len;
        out[..at].copy_from_slice(&self.dir[..at]);
        if !name.is_empty() {
            out[at] = b'/';
            out[at + 1..at + 1 + name.len()].copy_from_slice(name);
            at += 1 + name.len();
        }
        out[at] = 0;
        CStr::from_bytes_with_nul(&out[..=at]).unwrap_or(c"")
    }
}

/// The main heap (`brk`) of a process with one thread, left out of the guardian's fork
/// (`MADV_DONTFORK`) until it is dropped, right after the fork. Found without reading
/// `/proc/self/stat` (which cost half of what is saved): from the image's end to `sbrk(0)`.
///
/// A fork shares every private page copy-on-write, so each heap page this process writes
/// afterwards costs it a fault and a copy, and the command writes to its heap all along. The guardian never
/// touches the heap (see the module docs). With other threads, one of them might fork (std's
/// spawn) while the heap is left out, and its child would lack it: then nothing is done.
struct HeapOutOfFork {
    start: usize,
    len: usize,
}

#[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
unsafe extern "C" {
    /// The end of the executable's image (its `.bss`), as the linker defines it: the heap
    /// (`brk`) starts above it.
    static _end: u8;
}

thread_local! {
    /// Where this thread's thread-local storage is (its address only).
    static TLS_HERE: u8 = const { 0 };
}

impl HeapOutOfFork {
    fn mark() -> Option<HeapOutOfFork> {
        if !single_threaded() {
            return None;
        }
        let page = rustix::param::page_size();
        // From the image's end (the heap starts a random offset above it; nothing else is
        // mapped in between) to the heap's current end.
        let start = ((&raw const _end) as usize).next_multiple_of(page);
        // SAFETY: `sbrk(0)` only reads the current end of the heap.
        #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
        let end = unsafe { libc::sbrk(0) } as usize;
        let range = start..end;
        // The guardian runs on this thread's stack and thread-local storage: neither may be
        // left out (a static C library puts the first thread's storage in the heap).
        let stack = (&raw const page) as usize;
        let tls = TLS_HERE.with(|here| std::ptr::from_ref(here) as usize);
        if range.is_empty() || range.contains(&stack) || range.contains(&tls) {
            return None;
        }
        let heap = HeapOutOfFork {
            start,
            len: end - start,
        };
        heap.advise(libc::MADV_DONTFORK).then_some(heap)
    }

    /// Advises the range; unmapped parts of it (below the heap) are passed over (`ENOMEM`).
    fn advise(&self, advice: libc::c_int) -> bool {
        // SAFETY: the advice changes whether the range's pages are inherited by a fork, nothing
        // of their contents or mapping in this process.
        #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
        let done = unsafe { libc::madvise(self.start as *mut libc::c_void, self.len, advice) };
        done == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM)
    }
}

/// Whether this process has only ever had one thread: the C library's own flag
/// (`__libc_single_threaded`, glibc 2.32), found once at run time; `false` where there is none.
fn single_threaded() -> bool {
    static FLAG: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let flag = *FLAG.get_or_init(|| {
        // SAFETY: a lookup of a symbol by a constant name.
        #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) };
        found as usize
    });
    // SAFETY: the C library's `char` flag, alive as long as the process, read as an atomic
    // byte. It only ever goes from true to false, as a second thread is made; while it is
    // true there is no other thread to write it.
    #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
    let flag = (flag != 0).then(|| unsafe { &*(flag as *const std::sync::atomic::AtomicU8) });
    flag.is_some_and(|flag| flag.load(std::sync::atomic::Ordering::Relaxed) != 0)
}

impl Drop for HeapOutOfFork {
    fn drop(&mut self) {
        // Inherited again by a later fork (std's spawn reads its arguments there).
        self.advise(libc::MADV_DOFORK);
    }
}

/// Forks the guardian of process group `pgid`, or of the session's cgroup `cgroup`: it waits
/// on its socket; when the socket reaches end-of-file (every process holding the other end,
/// this one, is gone) it SIGKILLs the group, or every member of the cgroup and removes it; on
/// [`ForkedGuardian::done`] it exits quietly. A cgroup's guardian, forked before the cgroup
/// and the program exist, needs no group: every process of the tree is a member, those that
/// left the group too.
pub(crate) fn fork(pgid: Option<i32>, cgroup: Option<&Path>) -> io::Result<ForkedGuardian> {
    let pgid = pgid
        .map(|pgid| Pid::from_raw(pgid).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput)))
        .transpose()?;
    let cgroup = cgroup.map(CgroupFiles::of).transpose()?;
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let theirs_raw = theirs.as_raw_fd();
    let heap = HeapOutOfFork::mark();
    // SAFETY: `fork` in a process that may have other threads: the child runs only `watch`,
    // which makes async-signal-safe calls alone (raw system calls, no allocation, no lock; see
    // the module docs) and never returns (it ends in `_exit`). The parent goes on as usual.
    #[allow(unsafe_code)] // the fork of the guardian (module docs of `sys`)
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        drop(heap);
    }
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => watch(theirs_raw, pgid, cgroup.as_ref()),
        pid => {
            drop(theirs);
            Ok(ForkedGuardian { pid, channel: ours })
        }
    }
}

impl ForkedGuardian {
    /// Hands the guardian `fds` (duplicates: the caller may close its own right after), to be
    /// closed when it exits.
    pub(crate) fn hand_over(&self, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        for chunk in fds.chunks(FDS_PER_MESSAGE) {
            let mut space =
                [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(FDS_PER_MESSAGE))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !control.push(SendAncillaryMessage::ScmRights(chunk)) {
                return Err(io::Error::other("the hand-over message does not fit"));
            }
            rustix::net::sendmsg(
                &self.channel,
                &[io::IoSlice::new(b"fds")],
                &mut control,
                SendFlags::NOSIGNAL,
            )?;
        }
        Ok(())
    }

    /// Has the guardian close every descriptor it was handed ([`hand_over`](Self::hand_over)).
    pub(crate) fn give_back(&self) -> io::Result<()> {
        rustix::net::send(&self.channel, GIVE_BACK, SendFlags::NOSIGNAL)?;
        Ok(())
    }

    /// The session ended properly: the guardian exits at once without signalling (closing
    /// what it was handed). Closes this end of the socket; returns the guardian's pid, to
    /// reap before this process may exit.
    pub(crate) fn done(self) -> i32 {
        if let Err(e) = rustix::net::send(&self.channel, DONE, SendFlags::NOSIGNAL) {
            log::debug!("telling the guardian the session is done: {e}");
        }
        self.pid
    }
}

/// Waits for the guardian `pid` to exit and reaps it.
pub(crate) fn reap(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}

/// The guardian's whole life, in the forked child: async-signal-safe calls only.
fn watch(channel: i32, pgid: Option<Pid>, cgroup: Option<&CgroupFiles>) -> ! {
    // Its own process group: the session's ladder, and a terminal's Ctrl-C, do not reach it.
    let _ = rustix::process::setpgid(None, None);
    // Named for `ps` and `top` (its command line is the supervisor's).
    let _ = rustix::thread::set_name(c"sw-guardian");
    // Default dispositions and an empty mask, as a freshly started program would have: the
    // parent's handlers are meaningless here.
    #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
    // SAFETY: `signal` and `sigprocmask` are async-signal-safe; the set is a local.
    unsafe {
        for signal in 1..32 {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        let mut none = MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(none.as_mut_ptr());
        libc::sigprocmask(libc::SIG_SETMASK, none.as_ptr(), std::ptr::null_mut());
    }
    // Only the socket stays open, as fd 0: a pipe end of the parent's held here would keep its
    // reader from ever seeing end-of-file.
    // SAFETY: `dup2` is async-signal-safe; `channel` is open in this process.
    #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
    if channel != 0 && unsafe { libc::dup2(channel, 0) } != 0 {
        // Without its socket it cannot tell a crash from a proper end: it must never signal.
        exit();
    }
    close_from(1);
    // SAFETY: fd 0 is the socket now, open until this process exits.
    #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
    let channel = unsafe { BorrowedFd::borrow_raw(0) };
    let signal = loop {
        let mut data = [0u8; 8];
        let mut space =
            [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(FDS_PER_MESSAGE))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = rustix::net::recvmsg(
            channel,
            &mut [io::IoSliceMut::new(&mut data)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        match received {
            Ok(message) if message.bytes == 0 => break true, // the supervisor is gone
            // Exits at once, whatever it holds: the supervisor reaps it before it goes on
            // (nothing of stallwatch's own outlives it, not even a zombie for its caller).
            Ok(message) if data[..message.bytes] == *DONE => break false,
            Ok(message) if data[..message.bytes] == *GIVE_BACK => {
                close_from(1); // fd 0 is the socket; every other one was handed over
            }
            Ok(_) => keep(&mut control),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break true,
        }
    };
    if signal {
        if let Some(pgid) = pgid {
            let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        }
        if let Some(cgroup) = cgroup {
            end_cgroup(cgroup);
        }
    }
    exit()
}

/// Ends the guardian at once, without running anything of the parent's (`atexit` handlers,
/// buffers to flush).
fn exit() -> ! {
    // SAFETY: `_exit` is async-signal-safe.
    #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
    unsafe {
        libc::_exit(0)
    }
}

/// Kills every member of the cgroup (`cgroup.kill`; before Linux 5.14, frozen and killed one by
/// one) and removes it once empty, trying for 10 s: the steps of `Cgroup::kill` and
/// `Cgroup::remove` (`process/cgroup.rs`), written again here without allocation or locks, as
/// the forked child requires.
fn end_cgroup(cgroup: &CgroupFiles) {
    let mut path = [0; PATH_MAX];
    if write_file(cgroup.file(b"cgroup.kill", &mut path), b"1").is_err() {
        let _ = write_file(cgroup.file(b"cgroup.freeze", &mut path), b"1");
        kill_members(cgroup.file(b"cgroup.procs", &mut path));
        let _ = write_file(cgroup.file(b"cgroup.freeze", &mut path), b"0");
    }
    let pause = rustix::thread::Timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    for _ in 0..200 {
        let _ = cgroup.file(b"", &mut path);
        match remove_tree(&mut path, cgroup.len, 0) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => return,
            Err(_) => {
                let _ = rustix::thread::nanosleep(&pause);
            }
        }
    }
}

/// Removes the cgroup directory `path[..len]` and the cgroups below it, depth first: a nested
/// stallwatch's session cgroup, left empty below this one when its supervisor was killed with
/// the tree, would keep it (`EBUSY`) for good. No allocation (the forked child): the paths
/// are made in `path`, each level's entries read into a buffer on the stack.
fn remove_tree(path: &mut [u8; PATH_MAX], len: usize, depth: usize) -> rustix::io::Result<()> {
    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, RawDir};
    fn rmdir(path: &mut [u8; PATH_MAX], len: usize) -> rustix::io::Result<()> {
        path[len] = 0;
        let dir = CStr::from_bytes_with_nul(&path[..=len]).map_err(|_| rustix::io::Errno::INVAL)?;
        rustix::fs::unlinkat(CWD, dir, AtFlags::REMOVEDIR)
    }
    match rmdir(path, len) {
        Err(rustix::io::Errno::BUSY) if depth < 16 => {}
        other => return other,
    }
    let dir = CStr::from_bytes_with_nul(&path[..=len]).map_err(|_| rustix::io::Errno::INVAL)?;
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut buffer = [MaybeUninit::<u8>::uninit(); 2048];
    let mut entries = RawDir::new(&fd, &mut buffer);
    while let Some(Ok(entry)) = entries.next() {
        let name = entry.file_name().to_bytes();
        let end = len + 1 + name.len();
        if entry.file_type() != FileType::Directory
            || name == b"."
            || name == b".."
            || end >= PATH_MAX
        {
            continue;
        }
        path[len] = b'/';
        path[len + 1..end].copy_from_slice(name);
        let _ = remove_tree(path, end, depth + 1);
    }
    rmdir(path, len)
}

/// Writes `value` to the control file `path`.
fn write_file(path: &CStr, value: &[u8]) -> rustix::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let file = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&file, value)?;
    Ok(())
}

/// SIGKILLs every pid listed in `cgroup.procs` at `procs` (read into a buffer on the stack).
fn kill_members(procs: &CStr) {
    use rustix::fs::{Mode, OFlags};
    let Ok(file) = rustix::fs::open(procs, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) else {
        return;
    };
    let mut buffer = [0u8; 4096];
    let mut pid: i32 = 0;
    loop {
        let n = match rustix::io::read(&file, &mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &buffer[..n] {
            if byte.is_ascii_digit() {
                pid = pid
                    .saturating_mul(10)
                    .saturating_add(i32::from(byte - b'0'));
            } else {
                kill_pid(pid);
                pid = 0;
            }
        }
    }
    kill_pid(pid);
}

fn kill_pid(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// Keeps the file descriptors a hand-over brought: open until the guardian exits.
fn keep(control: &mut RecvAncillaryBuffer<'_>) {
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for fd in fds {
                let _ = fd.into_raw_fd();
            }
        }
    }
}

/// Closes every file descriptor from `first` up.
fn close_from(first: u32) {
    // SAFETY: a raw system call with integer arguments; async-signal-safe.
    #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) };
    if closed != 0 {
        // Kernels before 5.9: one by one, up to the limit of open files.
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(1 << 16)
            .min(1 << 16);
        for fd in first..u32::try_from(limit).unwrap_or(u32::MAX) {
            // SAFETY: closing a descriptor number nothing in this process uses any more.
            #[allow(unsafe_code)] // the guardian's fork (module docs of `sys`)
            unsafe {
                libc::close(fd as i32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// A `sleep` in a process group of its own, started by this test.
    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("1000")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sleep starts")
    }

    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < give_up, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn fd_targets(pid: i32) -> Vec<String> {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|dir| {
                dir.flatten()
                    .filter_map(|e| std::fs::read_link(e.path()).ok())
                    .map(|t| t.to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_guardian_keeps_what_it_is_handed_and_lets_the_group_be_on_done() {
        let mut group = sleeper();
        let guardian = fork(Some(group.id() as i32), None).expect("the guardian forks");
        // Only its socket is open in it (fd 0), whatever this test process holds.
        wait_until("the guardian closed what it inherited", || {
            fd_targets(guardian.pid).len() == 1
        });
        let instance =
            rustix::fs::inotify::init(rustix::fs::inotify::CreateFlags::CLOEXEC).unwrap();
        guardian
            .hand_over(&[instance.as_fd()])
            .expect("handed over");
        wait_until("the guardian holds the inotify instance", || {
            fd_targets(guardian.pid)
                .iter()
                .any(|t| t == "anon_inode:inotify")
        });
        guardian.give_back().expect("sent");
        wait_until("the guardian closed what it was handed", || {
            fd_targets(guardian.pid).len() == 1
        });
        reap(guardian.done());
        assert!(
            group.try_wait().expect("a look").is_none(),
            "a proper end never signals the group"
        );
        group.kill().expect("our own sleep");
        group.wait().expect("reaped");
    }

    #[test]
    fn a_guardian_kills_the_group_when_its_socket_closes_without_done() {
        let mut group = sleeper();
        let guardian = fork(Some(group.id() as i32), None).expect("the guardian forks");
        let pid = guardian.pid;
        // The supervisor "dies": its end of the socket closes without a word.
        drop(guardian.channel);
        assert_killed_then_reap(&mut group, pid);
    }

    /// The sleeper `group` ends by SIGKILL; then the guardian `pid` is reaped.
    fn assert_killed_then_reap(group: &mut std::process::Child, pid: i32) {
        let status = group.wait().expect("the sleeper ends");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "{status:?}"
        );
        let _ = rustix::process::waitpid(Pid::from_raw(pid), rustix::process::WaitOptions::empty());
    }

    #[test]
    fn the_inotify_instances_of_this_process_are_found_and_duplicated() {
        let instance =
            rustix::fs::inotify::init(rustix::fs::inotify::CreateFlags::CLOEXEC).unwrap();
        let inode = rustix::fs::fstat(&instance).unwrap().st_ino;
        let found = super::super::own_inotify_fds(&super::super::inotify_numbers()).fds;
        assert!(
            found
                .iter()
                .any(|dup| rustix::fs::fstat(dup).unwrap().st_ino == inode),
            "the instance is among the duplicates"
        );
        for dup in &found {
            assert_ne!(
                dup.as_raw_fd(),
                instance.as_raw_fd(),
                "a duplicate, not the original"
            );
        }
    }

    /// Sessions ending at once (a `serve`) duplicate the instances at once: each lists and
    /// duplicates the instances, not the others' duplicates (that grew to the descriptor
    /// limit; without the lock, 44–52 here, against ten instances).
    #[test]
    fn concurrent_callers_duplicate_the_inotify_instances_not_each_others_duplicates() {
        let instances: Vec<_> = (0..10)
            .map(|_| rustix::fs::inotify::init(rustix::fs::inotify::CreateFlags::CLOEXEC).unwrap())
            .collect();
        let most = std::thread::scope(|scope| {
            let callers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        (0..30)
                            .map(|_| {
                                super::super::own_inotify_fds(&super::super::inotify_numbers())
                                    .fds
                                    .len()
                            })
                            .max()
                            .unwrap_or(0)
                    })
                })
                .collect();
            callers.into_iter().map(|c| c.join().unwrap()).max()
        });
        // This test's ten, and those other tests of this process hold at the moment.
        let most = most.unwrap_or(0);
        assert!(
            (10..30).contains(&most),
            "{most} duplicates of ten instances"
        );
        drop(instances);
    }

    /// This process's cgroup v2 directory, from `/proc/self/mountinfo` and `/proc/self/cgroup`.
    fn own_cgroup_dir() -> std::path::PathBuf {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mounts
            .lines()
            .find(|l| {
                l.split(" - ")
                    .nth(1)
                    .is_some_and(|t| t.starts_with("cgroup2 "))
            })
            .and_then(|l| l.split(' ').nth(4))
            .expect("a cgroup2 mount")
            .to_owned();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("a cgroup v2 line");
        Path::new(&mount).join(own.trim_start_matches('/'))
    }

    /// As root (CI is): a crash of the supervisor ends every member of the session's cgroup,
    /// also one outside the process group, and the cgroup is removed.
    #[test]
    // Each sleeper is reaped by `try_wait` (or killed and waited for on the way out).
    #[allow(clippy::zombie_processes)]
    fn a_guardian_ends_the_cgroup_and_removes_it_when_its_socket_closes() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: a cgroup cannot be made here; the test needs root");
            return;
        }
        let dir = own_cgroup_dir().join(format!("stallwatch-test-guardian-{}", std::process::id()));
        std::fs::create_dir(&dir).expect("a cgroup of our own (root, cgroup2 writable)");
        let mut in_group = sleeper();
        let mut elsewhere = sleeper(); // a group of its own: only the cgroup holds it
        std::fs::write(dir.join("cgroup.procs"), elsewhere.id().to_string()).unwrap();
        let guardian = fork(Some(in_group.id() as i32), Some(&dir)).expect("the guardian forks");
        let pid = guardian.pid;
        drop(guardian.channel);
        let give_up = Instant::now() + Duration::from_secs(20);
        let mut statuses = [None, None];
        while statuses.iter().any(Option::is_none) && Instant::now() < give_up {
            for (child, status) in [&mut in_group, &mut elsewhere]
                .into_iter()
                .zip(&mut statuses)
            {
                if status.is_none() {
                    *status = child.try_wait().expect("a look");
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if statuses.iter().any(Option::is_none) {
            for child in [&mut in_group, &mut elsewhere] {
                let _ = child.kill(); // our own sleepers
                let _ = child.wait();
            }
            let _ = std::fs::remove_dir(&dir);
            panic!("a member outlived the guardian: {statuses:?}");
        }
        for status in statuses.into_iter().flatten() {
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(9),
                "{status:?}"
            );
        }
        let _ = rustix::process::waitpid(Pid::from_raw(pid), rustix::process::WaitOptions::empty());
        if dir.exists() {
            let _ = std::fs::remove_dir(&dir);
            panic!("the guardian left the cgroup {}", dir.display());
        }
    }

    #[test]
    fn a_guardian_forked_before_its_cgroup_exists_removes_it_once_made() {
        // The session's order: the guardian, then the cgroup's folder, then the program. The
        // supervisor "dies" between the folder and the program: the folder goes.
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: a cgroup cannot be made here; the test needs root");
            return;
        }
        let dir = own_cgroup_dir().join(format!("stallwatch-test-early-{}", std::process::id()));
        let guardian = fork(None, Some(&dir)).expect("the guardian forks");
        let pid = guardian.pid;
        std::fs::create_dir(&dir).expect("a cgroup of our own (root, cgroup2 writable)");
        drop(guardian.channel);
        let _ = rustix::process::waitpid(Pid::from_raw(pid), rustix::process::WaitOptions::empty());
        if dir.exists() {
            let _ = std::fs::remove_dir(&dir);
            panic!("the guardian left the cgroup {}", dir.display());
        }
    }
}
