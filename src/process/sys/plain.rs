//! Starting a plain program without forking stallwatch (Linux, x86-64).
//!
//! std's `Command` forks the supervisor whenever it has a `pre_exec` hook, and stallwatch
//! always needs one (the program's group or session, its start in the session's cgroup, the
//! parent-death signal). A fork copies the page tables of the whole process and tears the copy
//! down again at `exec`: on the development VM std's spawn with a hook took a median 1.2–1.3 ms
//! in a minimal program, against 0.26–0.38 ms for its `posix_spawn` path (which `vfork`s) — and
//! glibc's `posix_spawn` has no attribute for a parent-death signal, nor, before glibc 2.39
//! (this machine has 2.36), for a cgroup.
//!
//! For a program whose every setting stallwatch knows (a [`Program`](crate::Program): its
//! arguments, working directory and environment; the session's stdio), this module does what
//! `posix_spawn` does, with those extras: `clone3(CLONE_VM | CLONE_VFORK)` on a stack of its
//! own (with `CLONE_INTO_CGROUP`, the program is born in the session's cgroup), the new process
//! sets itself up with system calls only, and `exec`s. Everything it needs (the argument
//! and environment arrays, the candidate paths of a `PATH` search) is prepared before the
//! clone; it allocates nothing and takes no lock. It writes its own stack, the error slot its
//! parent reads once it is resumed (when the `exec` fails), and `errno` (libc's `syscall` sets
//! it on a failed call): the thread-local of the suspended parent thread, whose inherited TLS
//! register it uses, which the parent reads nowhere after the clone.
//!
//! What the new process does, in order (as std's own child does: the program gets the same
//! arguments, variables, directory, group, signal dispositions and mask):
//! 1. every signal with a handler gets the default action, and SIGPIPE too (std's rule: Rust
//!    ignores SIGPIPE, programs expect the default): a signal that arrived before the `exec`
//!    must not run the supervisor's handler in memory the supervisor shares;
//! 2. it leads a new process group or session;
//! 3. its stdin, stdout and stderr become the given descriptors;
//! 4. it changes to the working directory;
//! 5. with the parent-death signal, it asks for SIGKILL when its parent dies, and checks that
//!    the parent did not die already;
//! 6. it unblocks every signal (the caller blocked all of them around the clone) and `exec`s
//!    each `PATH` candidate as `execvp` does.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

use super::Lead;
use super::enter::{CLONE_INTO_CGROUP, CLONE_VFORK, CLONE_VM, CloneArgs, SYS_CLONE3};

/// How the program's process starts: everything but the command itself.
pub(crate) struct Start<'a> {
    /// What becomes its stdin, stdout and stderr; `None` leaves this process's own.
    pub(crate) stdio: [Option<BorrowedFd<'a>>; 3],
    /// How it leads its tree (a group, a session, or a session on the terminal its stdin is).
    pub(crate) lead: Lead,
    /// SIGKILL when the calling thread dies (`PR_SET_PDEATHSIG`).
    pub(crate) parent_death_signal: bool,
    /// Born in this cgroup (its directory), when given.
    pub(crate) cgroup: Option<BorrowedFd<'a>>,
}

/// Why [`spawn`] did not start the program.
#[derive(Debug)]
pub(crate) enum Refused {
    /// This path cannot start it (`clone3` or `CLONE_INTO_CGROUP` missing, a stdio descriptor
    /// this path does not handle): start it the usual way.
    Unsupported,
    /// The start failed (the program was not found, could not be run, its directory is
    /// missing…): the error std would have returned.
    Failed(io::Error),
}

/// `SIGCHLD`: the new process's exit signal, as std's and fork's.
const SIGCHLD: u64 = 17;
/// The new process's stack. It runs one small function (below 4 KiB of frames); the rest is
/// margin. Unused pages are never touched, so they cost nothing.
const STACK_SIZE: usize = 64 * 1024;

/// What [`spawn`] needs of `command` (its program, arguments, environment changes and
/// working directory: the caller guarantees it has no other setting), made on the caller's
/// thread; `env_cleared`: its environment starts empty, not from this process's.
pub(crate) fn prepare(command: &Command, env_cleared: bool) -> Result<Prepared, Refused> {
    if has_nul_placeholder(command) {
        return Err(Refused::Unsupported);
    }
    Prepared::new(command, env_cleared).map_err(Refused::Failed)
}

/// Starts the `prepared` program as `start` says; returns its pid.
pub(crate) fn spawn(prepared: &Prepared, start: &Start<'_>) -> Result<i32, Refused> {
    // A descriptor below 3 that is not already in its place could be overwritten by an
    // earlier `dup2` of the three: std's path handles it; this one does not need to.
    for (target, fd) in start.stdio.iter().enumerate() {
        if let Some(fd) = fd
            && fd.as_raw_fd() < 3
            && fd.as_raw_fd() != target as i32
        {
            return Err(Refused::Unsupported);
        }
    }
    let argv = pointers(&prepared.argv);
    let envp = prepared.environment();
    let error = AtomicI32::new(0);
    let child = ChildArgs {
        candidates: &prepared.candidates,
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: prepared.cwd.as_deref(),
        stdio: start.stdio.map(|fd| fd.map_or(-1, |fd| fd.as_raw_fd())),
        lead: start.lead,
        parent: start.parent_death_signal.then(rustix::process::getpid),
        error: &error,
    };
    let pid = clone_and_run(&child, start.cgroup)?;
    match error.load(Ordering::Acquire) {
        0 => Ok(pid),
        errno => {
            // The new process failed before or at the `exec` and has exited: reap it.
            if let Err(e) = super::reap_child(pid, true) {
                log::debug!("reaping pid {pid}, whose exec failed: {e}");
            }
            if errno == libc::ENOEXEC {
                // A script without `#!`: `execvp` (std's path) runs it with `/bin/sh`.
                return Err(Refused::Unsupported);
            }
            Err(Refused::Failed(io::Error::from_raw_os_error(errno)))
        }
    }
}

#[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
unsafe extern "C" {
    /// The C library's environment of this process (`environ(7)`).
    static environ: *const *const libc::c_char;
}

/// This process's environment, each variable as a pointer to its `KEY=value` string (the
/// C library's own, not a copy) and its bytes.
fn own_environment() -> impl Iterator<Item = (*const libc::c_char, &'static [u8])> {
    // SAFETY: `environ` is the C library's null-terminated array of pointers to
    // NUL-terminated strings. It and its strings stay as they are while this thread reads them
    // and until the program's `exec` has read them, as for any reader of the environment: only
    // `setenv` and the like change them, and changing the environment while another thread
    // may read it is excluded by their contract (`std::env::set_var` is `unsafe` for that
    // reason; std's own spawn hands `execve` the same strings). The `'static` bytes are used
    // within that time only (by [`Prepared::environment`], just before the clone).
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    unsafe {
        let mut at = environ;
        std::iter::from_fn(move || {
            if at.is_null() || (*at).is_null() {
                return None;
            }
            let entry = *at;
            at = at.add(1);
            Some((entry, CStr::from_ptr(entry).to_bytes()))
        })
    }
}

/// The null-terminated array of pointers to `strings` that `execve` takes (valid while
/// `strings` lives).
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// What std puts in place of a program, argument or working directory that has a nul byte
/// (it fails the spawn with `InvalidInput` then, which only its own path knows).
const NUL_PLACEHOLDER: &[u8] = b"<string-with-nul>";

/// Whether `command` holds std's placeholder (see [`NUL_PLACEHOLDER`]).
fn has_nul_placeholder(command: &Command) -> bool {
    let cwd = command.get_current_dir().map(|d| d.as_os_str());
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .chain(cwd)
        .any(|s| s.as_bytes() == NUL_PLACEHOLDER)
}

/// Everything the new process needs, made before the clone (it must not allocate), on any
/// thread.
pub(crate) struct Prepared {
    /// The paths to try, in order (one when the program names a path).
    candidates: Vec<CString>,
    /// The arguments (the program first, as std gives it).
    argv: Vec<CString>,
    /// This process's environment is the program's base (not cleared).
    inherits: bool,
    /// The names the command sets or removes: this process's variables of those names are
    /// left out.
    changed: Vec<Vec<u8>>,
    /// What the command sets, `KEY=value`, by name (as std orders them).
    set: Vec<CString>,
    cwd: Option<CString>,
}

impl Prepared {
    fn new(command: &Command, env_cleared: bool) -> io::Result<Prepared> {
        let program = command.get_program();
        let argv: Vec<CString> = std::iter::once(program)
            .chain(command.get_args())
            .map(c_string)
            .collect::<io::Result<_>>()?;
        let mut changed = Vec::new();
        let mut set = Vec::new();
        let mut path = None;
        for (key, value) in command.get_envs() {
            changed.push(key.as_bytes().to_vec());
            if let Some(value) = value {
                if key == "PATH" {
                    path = Some(value.to_owned());
                }
                let mut entry = key.to_owned();
                entry.push("=");
                entry.push(value);
                set.push(c_string(&entry)?);
            }
        }
        let path = match path {
            Some(path) => Some(path),
            None if env_cleared || changed.iter().any(|k| k == b"PATH") => None,
            None => std::env::var_os("PATH"),
        };
        let cwd = command
            .get_current_dir()
            .map(|d| c_string(d.as_os_str()))
            .transpose()?;
        Ok(Prepared {
            candidates: candidates(program, path.as_deref())?,
            argv,
            inherits: !env_cleared,
            changed,
            set,
            cwd,
        })
    }

    /// The program's environment as `execve` takes it (null-terminated): this process's
    /// variables as they are now, in their order and without a copy, but those the command
    /// changes, then what the command sets. (Copying and sorting this process's environment,
    /// as std does for a command that changes it, was most of this preparation.)
    fn environment(&self) -> Vec<*const libc::c_char> {
        let mut envp = Vec::with_capacity(64 + self.set.len());
        if self.inherits {
            let changed = |entry: &[u8]| {
                let key = entry.split(|b| *b == b'=').next().unwrap_or(entry);
                self.changed.iter().any(|k| k == key)
            };
            envp.extend(
                own_environment()
                    .filter(|(_, entry)| !changed(entry))
                    .map(|(p, _)| p),
            );
        }
        envp.extend(self.set.iter().map(|s| s.as_ptr()));
        envp.push(std::ptr::null());
        envp
    }
}

/// `s` for a system call; an interior NUL is std's `InvalidInput` error.
fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("nul byte found in provided data: {s:?}"),
        )
    })
}

/// The paths `execvp` would try for `program`: itself when it names a path, else each folder
/// of `path` (the program's own `PATH`, as std uses; glibc's default without one) joined with
/// it, an empty folder meaning the working directory.
fn candidates(program: &OsStr, path: Option<&OsStr>) -> io::Result<Vec<CString>> {
    let name = program.as_bytes();
    if name.is_empty() {
        return Err(io::ErrorKind::NotFound.into());
    }
    if name.contains(&b'/') {
        return Ok(vec![c_string(program)?]);
    }
    let path = path.map_or(&b"/bin:/usr/bin"[..], OsStr::as_bytes);
    path.split(|b| *b == b':')
        .map(|dir| {
            let mut full = OsString::from_vec(dir.to_vec());
            if !dir.is_empty() {
                full.push("/");
            }
            full.push(program);
            c_string(&full)
        })
        .collect()
}

/// What the new process reads (in its parent's memory, which it shares) and the slot it
/// writes its error to.
struct ChildArgs<'a> {
    candidates: &'a [CString],
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: Option<&'a CStr>,
    /// Descriptors for 0, 1 and 2; -1 keeps the inherited one.
    stdio: [i32; 3],
    lead: Lead,
    /// This process, when the program gets the parent-death signal.
    parent: Option<Pid>,
    error: &'a AtomicI32,
}

/// The kernel's signal set for `rt_sigprocmask` (64 signals, 8 bytes).
type KernelSigset = u64;

/// `rt_sigprocmask(SIG_SETMASK, set)`; returns the previous mask. Raw, so that glibc's own
/// signals (cancellation, setxid) are blocked too, as glibc's `posix_spawn` blocks them.
fn set_mask(set: KernelSigset) -> KernelSigset {
    let mut old: KernelSigset = 0;
    // SAFETY: `rt_sigprocmask` reads 8 bytes at `&set` and writes 8 at `&mut old`, both live
    // locals of the kernel's sigset size for this call (the fourth argument).
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &set as *const KernelSigset,
            &mut old as *mut KernelSigset,
            std::mem::size_of::<KernelSigset>(),
        );
    }
    old
}

/// Clones the new process onto a stack of its own, sharing this memory, with every signal
/// blocked meanwhile (in this thread, and so in the new process until it has reset its
/// handlers); resumed once it has `exec`ed or exited. Returns its pid.
fn clone_and_run(child: &ChildArgs<'_>, cgroup: Option<BorrowedFd<'_>>) -> Result<i32, Refused> {
    let mut stack: Vec<u8> = Vec::with_capacity(STACK_SIZE);
    // The top, aligned as the ABI wants the stack at a call.
    let top = (stack.as_mut_ptr() as usize + STACK_SIZE) & !15;
    let base = stack.as_mut_ptr() as usize;
    let mut flags = CLONE_VM | CLONE_VFORK;
    if cgroup.is_some() {
        flags |= CLONE_INTO_CGROUP;
    }
    let args = CloneArgs {
        flags,
        exit_signal: SIGCHLD,
        stack: base as u64,
        stack_size: (top - base) as u64,
        cgroup: cgroup.map_or(0, |fd| u64::try_from(fd.as_raw_fd()).unwrap_or(u64::MAX)),
        ..CloneArgs::default()
    };
    let old_mask = set_mask(!0);
    let ret: i64;
    // SAFETY: `clone3` reads the `repr(C)` `args` of the kernel's layout (a live local). The
    // new process starts on its own stack (`stack`, which outlives it: this thread is
    // suspended until the new process has `exec`ed or exited, `CLONE_VFORK`), with the
    // stack pointer at its 16-byte aligned top, and calls `child_main`, which never returns
    // (`ud2` guards the impossible). `child_main` reads `child` (live: borrowed by this
    // frame, which cannot go on meanwhile) and makes raw system calls only. In this thread
    // the block only changes `rax` (the pid or `-errno`) and `rcx`, `r11` (`syscall`), as
    // declared; `r12` is an input the new process reads.
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            // The new process, on its own stack.
            "mov rdi, r12",
            "call {entry}",
            "ud2",
            "2:",
            entry = sym child_main,
            inlateout("rax") SYS_CLONE3 => ret,
            in("rdi") &args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") child as *const ChildArgs<'_>,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    set_mask(old_mask);
    drop(stack);
    if ret < 0 {
        let errno = i32::try_from(-ret).unwrap_or(libc::EINVAL);
        // Refused before any process exists: no clone3 (before 5.3), no CLONE_INTO_CGROUP
        // (before 5.7), a seccomp filter that answers EPERM, a cgroup the kernel will not
        // start a process in… The usual way works, or says why. Only a lack of memory or
        // processes is the start's own failure.
        return Err(match errno {
            libc::EAGAIN | libc::ENOMEM => Refused::Failed(io::Error::from_raw_os_error(errno)),
            _ => Refused::Unsupported,
        });
    }
    i32::try_from(ret).map_err(|_| Refused::Unsupported)
}

/// `struct sigaction` as the kernel's `rt_sigaction` takes it on x86-64.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: KernelSigset,
}

/// The new process (see the module docs): sets itself up and `exec`s; on failure, writes the
/// errno to the slot its parent reads and exits with 127.
///
/// It runs between the clone and the `exec` in memory it shares with its parent: only raw
/// system calls (rustix's, or libc's `syscall`/`execve`/`_exit`, which are system-call
/// wrappers), no allocation, no lock, no panic (every step's error is handled).
extern "C" fn child_main(args: *const ChildArgs<'_>) -> ! {
    // SAFETY: `clone_and_run` passes a pointer to a live `ChildArgs` that outlives this
    // process's use of it (its parent is suspended until the `exec` or the exit).
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    let args = unsafe { &*args };
    let errno = match set_up(args) {
        Ok(()) => exec(args),
        Err(e) => e.raw_os_error(),
    };
    args.error.store(errno.max(1), Ordering::Release);
    // SAFETY: `_exit` ends the process at once (no handlers, no flush): what a child that
    // failed before its `exec` must do.
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    unsafe {
        libc::_exit(127)
    }
}

/// Steps 1 to 5 of the module docs.
fn set_up(args: &ChildArgs<'_>) -> Result<(), rustix::io::Errno> {
    reset_handlers();
    match args.lead {
        Lead::Group => rustix::process::setpgid(None, None)?,
        Lead::Session | Lead::Terminal => {
            rustix::process::setsid()?;
        }
    }
    for (target, fd) in args.stdio.into_iter().enumerate() {
        if fd < 0 {
            continue;
        }
        // SAFETY: `fd` is one of the descriptors the caller borrowed for the spawn, open
        // for as long as it (and so this process before its `exec`) runs.
        #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs)
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if fd.as_raw_fd() == target as i32 {
            // Already in place: only keep it open across the `exec`.
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            continue;
        }
        match target {
            0 => rustix::stdio::dup2_stdin(fd)?,
            1 => rustix::stdio::dup2_stdout(fd)?,
            _ => rustix::stdio::dup2_stderr(fd)?,
        }
    }
    if args.lead == Lead::Terminal {
        // Its stdin is the terminal's slave: its controlling terminal (a session leader now).
        rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
    }
    if let Some(dir) = args.cwd {
        rustix::process::chdir(dir)?;
    }
    // The dispositions and descriptor limit this process was started with (issue 28; the
    // mask is emptied at the `exec`).
    super::start_state::restore_in_child()
        .map_err(|e| rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::INVAL))?;
    if let Some(parent) = args.parent {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(rustix::io::Errno::SRCH);
        }
    }
    Ok(())
}

/// Step 1: every caught signal, and SIGPIPE, to the default action (in this process only:
/// without `CLONE_SIGHAND` its dispositions are its own copy).
fn reset_handlers() {
    const SIG_DFL: usize = 0;
    const SIG_IGN: usize = 1;
    const SIGPIPE: usize = 13;
    for signal in 1..=64usize {
        if signal == 9 || signal == 19 {
            continue; // SIGKILL and SIGSTOP have no disposition to change
        }
        let mut old = KernelSigaction {
            handler: SIG_DFL,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        let default = KernelSigaction {
            handler: SIG_DFL,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: `rt_sigaction` reads nothing (null `act`) and writes a `KernelSigaction`
        // (the kernel's x86-64 layout) at `&mut old`, a live local; the sigset size is 8.
        #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs)
        let got = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                std::ptr::null::<KernelSigaction>(),
                &mut old as *mut KernelSigaction,
                std::mem::size_of::<KernelSigset>(),
            )
        };
        let caught = got == 0 && old.handler != SIG_DFL && old.handler != SIG_IGN;
        if caught || (signal == SIGPIPE && got == 0 && old.handler != SIG_DFL) {
            // SAFETY: as above, the kernel reads the live local `default` (the default
            // action, no flags, empty mask) and writes nothing.
            #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys`
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    &default as *const KernelSigaction,
                    std::ptr::null_mut::<KernelSigaction>(),
                    std::mem::size_of::<KernelSigset>(),
                );
            }
        }
    }
}

/// Step 6: every signal unblocked, then each candidate `exec`ed as `execvp` does: a missing
/// file or folder goes on to the next, a permission error is remembered (and returned if no
/// candidate runs), any other error stops. Returns the errno when nothing ran. (`ENOEXEC`, a
/// script without `#!`, which `execvp` hands to `/bin/sh`, sends the caller to std's path.)
fn exec(args: &ChildArgs<'_>) -> i32 {
    set_mask(0);
    let mut denied = false;
    let mut last = libc::ENOENT;
    for path in args.candidates {
        // SAFETY: `path`, `argv` and `envp` are NUL-terminated strings and null-terminated
        // pointer arrays prepared by the parent, alive until it resumes (after this `exec`).
        #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs)
        unsafe {
            libc::syscall(libc::SYS_execve, path.as_ptr(), args.argv, args.envp);
        }
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOENT);
        match errno {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            other => return other,
        }
        last = errno;
    }
    if denied { libc::EACCES } else { last }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::{AsFd, OwnedFd};

    use super::*;
    use crate::process::cgroup::Cgroup;

    /// What a shell says about the process it runs in: its arguments, its ids (pid, parent,
    /// group, session), its working directory, its signal mask and ignored signals, two
    /// variables and its stdin.
    const SELF_REPORT: &str = "echo \"args: $0 $*\"; \
        read -r a b c ppid pgid sid rest < /proc/self/stat; echo \"ids: $$ $ppid $pgid $sid\"; \
        echo \"cwd: $PWD\"; grep -E '^Sig(Blk|Ign)' /proc/self/status; \
        echo \"set: ${PLAIN_SET-unset} removed: ${PLAIN_REMOVED-unset} path: ${PATH:+set}\"; \
        echo \"stdin: $(cat)\"";

    /// Runs `command` through `spawn` with a stdin pipe fed `input` and a stdout pipe (stderr
    /// inherited); returns its pid, what it printed and its exit status.
    fn run(command: &Command, start: Start<'_>, input: &str) -> (i32, String, i32) {
        run_env(command, false, start, input)
    }

    /// `prepare`, then `spawn`.
    fn start_it(command: &Command, start: &Start<'_>) -> Result<i32, Refused> {
        spawn(&prepare(command, false)?, start)
    }

    /// [`run`], with the environment cleared when `env_cleared`.
    fn run_env(
        command: &Command,
        env_cleared: bool,
        start: Start<'_>,
        input: &str,
    ) -> (i32, String, i32) {
        let (in_read, mut in_write) = std::io::pipe().expect("a pipe");
        let (mut out_read, out_write) = std::io::pipe().expect("a pipe");
        let start = Start {
            stdio: [Some(in_read.as_fd()), Some(out_write.as_fd()), None],
            ..start
        };
        let started = prepare(command, env_cleared).and_then(|p| spawn(&p, &start));
        let pid = match started {
            Ok(pid) => pid,
            Err(e) => panic!("not started: {e:?}"),
        };
        drop((in_read, out_write));
        in_write.write_all(input.as_bytes()).expect("it reads");
        drop(in_write);
        let mut out = String::new();
        out_read.read_to_string(&mut out).expect("its output");
        let status = super::super::reap_child(pid, true).expect("our child");
        let code = status.and_then(|s| s.code()).unwrap_or(-1);
        (pid, out, code)
    }

    fn start() -> Start<'static> {
        Start {
            stdio: [None, None, None],
            lead: Lead::Group,
            parent_death_signal: true,
            cgroup: None,
        }
    }

    fn report_command(dir: &std::path::Path) -> Command {
        let mut command = Command::new("sh");
        command
            .args(["-c", SELF_REPORT, "reporter", "one", "two"])
            .current_dir(dir)
            .env("PLAIN_SET", "yes")
            .env_remove("PLAIN_REMOVED");
        command
    }

    /// This thread's blocked signals, from `/proc`.
    fn blocked_here() -> String {
        std::fs::read_to_string("/proc/thread-self/status")
            .expect("readable")
            .lines()
            .find(|l| l.starts_with("SigBlk"))
            .expect("a SigBlk line")
            .to_owned()
    }

    #[test]
    fn the_program_starts_as_std_would_start_it() {
        let dir = tempfile::tempdir().expect("a folder");
        let dir = dir.path().canonicalize().expect("its path");
        let mask_before = blocked_here();
        let (pid, out, code) = run(&report_command(&dir), start(), "typed");
        assert_eq!(code, 0, "{out}");
        assert_eq!(blocked_here(), mask_before, "the caller's mask is restored");
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("args: reporter one two"), "{out}");
        let ids = format!("ids: {pid} {} {pid} ", std::process::id());
        assert!(lines.next().expect("ids").starts_with(&ids), "{out}");
        assert_eq!(
            lines.next(),
            Some(format!("cwd: {}", dir.display()).as_str())
        );
        assert_eq!(lines.next(), Some("SigBlk:\t0000000000000000"), "{out}");
        // Rust ignores SIGPIPE in this process; the program gets the default (bit 13).
        let ignored = lines.next().expect("SigIgn");
        let ignored = u64::from_str_radix(ignored.trim_start_matches("SigIgn:\t"), 16).unwrap();
        assert_eq!(ignored & (1 << 12), 0, "SIGPIPE is not ignored: {out}");
        assert_eq!(
            lines.next(),
            Some("set: yes removed: unset path: set"),
            "{out}"
        );
        assert_eq!(lines.next(), Some("stdin: typed"), "{out}");

        // std's fork (the path of a command with a `pre_exec` hook, as stallwatch's were) says
        // the same, but for the ids. (Its `posix_spawn` path differs: glibc leaves its own
        // two internal signals ignored in the child.)
        let mut forked = report_command(&dir);
        super::super::configure(&mut forked, Lead::Group, true, None).expect("configured");
        let std_out = forked
            .stdin(std::process::Stdio::null())
            .output()
            .expect("std runs it");
        let std_out = String::from_utf8_lossy(&std_out.stdout);
        let without_ids = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| !l.starts_with("ids:") && !l.starts_with("stdin:"))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(without_ids(&out), without_ids(&std_out));
    }

    #[test]
    fn an_unchanged_environment_is_this_process_s_in_its_order_as_std_passes_it() {
        let command = Command::new("/usr/bin/env");
        let (_, out, code) = run_env(&command, false, start(), "");
        assert_eq!(code, 0);
        let std_out = Command::new("/usr/bin/env").output().expect("std runs it");
        assert_eq!(out, String::from_utf8_lossy(&std_out.stdout));
        assert!(out.lines().any(|l| l.starts_with("PATH=")), "{out}");
    }

    #[test]
    fn a_variable_the_command_sets_or_removes_replaces_this_process_s() {
        let mut command = Command::new("/usr/bin/env");
        command
            .env("HOME", "/plain/home")
            .env_remove("PATH")
            .env("PLAIN_ADDED", "1");
        let (_, out, code) = run_env(&command, false, start(), "");
        assert_eq!(code, 0);
        let homes: Vec<&str> = out.lines().filter(|l| l.starts_with("HOME=")).collect();
        assert_eq!(homes, ["HOME=/plain/home"], "{out}");
        assert!(!out.lines().any(|l| l.starts_with("PATH=")), "{out}");
        assert_eq!(out.lines().last(), Some("PLAIN_ADDED=1"), "{out}");
        // Everything else is this process's, in its order.
        let std_out = Command::new("/usr/bin/env").output().expect("std runs it");
        let kept = |s: &str| !s.starts_with("HOME=") && !s.starts_with("PATH=");
        let own: Vec<String> = String::from_utf8_lossy(&std_out.stdout)
            .lines()
            .filter(|l| kept(l))
            .map(str::to_owned)
            .collect();
        let theirs: Vec<&str> = out.lines().filter(|l| kept(l)).collect();
        assert_eq!(theirs[..theirs.len() - 1], own[..], "{out}");
    }

    #[test]
    fn a_cleared_environment_has_only_the_commands_variables() {
        let mut command = Command::new("/usr/bin/env");
        command.env("ONLY", "this");
        let (_, out, code) = run_env(&command, true, start(), "");
        assert_eq!(code, 0);
        assert_eq!(out, "ONLY=this\n");
    }

    #[test]
    fn the_program_is_found_as_execvp_finds_it() {
        let dir = tempfile::tempdir().expect("a folder");
        let (denied, runs) = (dir.path().join("denied"), dir.path().join("runs"));
        for folder in [&denied, &runs] {
            std::fs::create_dir(folder).expect("made");
        }
        // The same name, first not executable, then a script that runs.
        std::fs::write(denied.join("plain-probe"), "#!/bin/sh\necho wrong\n").expect("written");
        std::fs::write(runs.join("plain-probe"), "#!/bin/sh\necho found\n").expect("written");
        use std::os::unix::fs::PermissionsExt;
        let exec = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(runs.join("plain-probe"), exec).expect("chmod");
        let path = format!("/no/such/dir:{}:{}", denied.display(), runs.display());
        let mut command = Command::new("plain-probe");
        command.env("PATH", &path);
        let (_, out, code) = run(&command, start(), "");
        assert_eq!((code, out.as_str()), (0, "found\n"));

        // Only the file that cannot be run: permission denied, as execvp says.
        let mut command = Command::new("plain-probe");
        command.env("PATH", denied.as_os_str());
        let Err(Refused::Failed(e)) = start_it(&command, &start()) else {
            panic!("it cannot run");
        };
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");

        let mut command = Command::new("plain-probe");
        command.env("PATH", "/no/such/dir");
        let Err(Refused::Failed(e)) = start_it(&command, &start()) else {
            panic!("nothing to run");
        };
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn a_missing_working_directory_fails_with_stds_error_and_a_nul_goes_to_std() {
        let mut command = Command::new("true");
        command.current_dir("/no/such/dir-plain");
        let Err(Refused::Failed(e)) = start_it(&command, &start()) else {
            panic!("no such folder");
        };
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");

        // std keeps a program, argument or folder with a nul byte as a placeholder and fails
        // its spawn with `InvalidInput`: its path says so.
        let mut command = Command::new("true");
        command.arg("a\0b");
        assert!(matches!(
            start_it(&command, &start()),
            Err(Refused::Unsupported)
        ));
        let mut command = Command::new("true");
        command.env("NUL", "a\0b");
        let Err(Refused::Failed(e)) = start_it(&command, &start()) else {
            panic!("a nul byte");
        };
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn a_detached_program_leads_its_own_session() {
        let mut command = Command::new("sh");
        command.args(["-c", SELF_REPORT]);
        let start = Start {
            lead: Lead::Session,
            ..start()
        };
        let (pid, out, code) = run(&command, start, "");
        assert_eq!(code, 0);
        let ids = format!("ids: {pid} {} {pid} {pid}", std::process::id());
        assert!(out.lines().any(|l| l == ids), "{out}");
    }

    #[test]
    fn the_program_is_born_in_the_cgroup() {
        let cgroup = match Cgroup::create(9_100_101, |_| {}) {
            Ok((cgroup, _)) => cgroup,
            Err(why) => {
                assert!(
                    !rustix::process::geteuid().is_root(),
                    "root makes cgroups here: {why}"
                );
                return;
            }
        };
        let entry = cgroup.entry().expect("the cgroup's files");
        let dir: OwnedFd = entry.dir;
        let mut command = Command::new("grep");
        command.args(["^0::", "/proc/self/cgroup"]);
        let start = Start {
            cgroup: Some(dir.as_fd()),
            ..start()
        };
        let (_, out, code) = run(&command, start, "");
        assert_eq!(code, 0);
        let name = cgroup.path().file_name().expect("a name").to_string_lossy();
        assert!(out.trim_end().ends_with(&format!("/{name}")), "{out}");
        cgroup.remove().expect("emptied");
    }
}
