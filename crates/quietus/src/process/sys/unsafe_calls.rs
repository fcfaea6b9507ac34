//! Every `unsafe` block of the crate, each with its reason (Linux and Unix).
//!
//! What runs in the child between std's fork and the program's `exec`, where only
//! async-signal-safe work is allowed: the hook of [`install`] (the dispositions and descriptor
//! limit quietus was started with, an empty signal mask, a new process group or session,
//! the parent-death signal with its parent check, the entry into the session's cgroup, and for
//! a `Program` the `execve` that keeps its environment in order), the system calls rustix does
//! not wrap (`clone3(CLONE_INTO_CGROUP)`, [`clone_into`], with the `_exit` of the process it
//! leaves behind; `rt_sigaction`, [`set_disposition`]), and the guardian's closing of the
//! descriptors it inherited ([`close_inherited`]).
//!
//! Why `clone3` at all, when a write of `0` to the cgroup's `cgroup.procs` enters it: a
//! migration takes the kernel's `cgroup_threadgroup_rwsem` for writing, which waits for an RCU
//! grace period when no other migration happened in the last few milliseconds — 6.9 to 16.7 ms
//! per spaced migration on the development VM (15 migrations of a sleeping child, 200 ms apart,
//! `python3` writing its pid; the median 11.3 ms), most of a `quietus -- true` run's time. A
//! process *born* in the cgroup takes that lock for reading only. The `clone3` here shares
//! nothing with its parent (no `CLONE_VM`: a copy of the forked process, as `fork` makes it,
//! returning on its own copy of the stack), and where the kernel refuses it (before 5.7) the
//! hook writes to `cgroup.procs` instead.
//!
//! The direct start ([`start_direct`], issue 50) makes the program's process without copying
//! this one: `clone3(CLONE_VM | CLONE_VFORK | CLONE_CLEAR_SIGHAND | CLONE_INTO_CGROUP)` on a
//! stack of its own, entered by a few instructions of inline assembly (x86-64; elsewhere std's
//! path), every signal blocked across the call; the new process runs
//! `async_signal_safe::direct_child` in this process's memory, then `execve` (docs/design.md,
//! "How the tree is started and held", says why each step is sound).
//!
//! The safe helpers the hook calls in the forked child, and the direct start's new process,
//! are fenced with it, in [`async_signal_safe`]: only async-signal-safe work may go there.
//!
//! The crate denies `unsafe_code` everywhere else (`#![deny(unsafe_code)]` in `lib.rs`), and
//! `clippy.toml` forbids `libc::fork`, `libc::syscall`, `libc::_exit` and their kin outside
//! this file.
#![allow(unsafe_code)]
#![allow(clippy::disallowed_methods)] // the one place the raw calls are allowed

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::before_exec::{Direct, Lead, OrderedExec, PreExec};
#[cfg(target_os = "linux")]
use async_signal_safe::restore_in_child;
use async_signal_safe::{become_leader, lead_group, parent_death};

pub(crate) mod async_signal_safe;

/// Installs `plan` as `command`'s `pre_exec` hook. `handoff`, with a cgroup, is the write end
/// of the pipe on which the forked process says which process runs the program ([`clone_into`]
/// worked: its pid; it entered by a write: `0`).
pub(super) fn install(command: &mut Command, plan: PreExec, handoff: Option<OwnedFd>) {
    // SAFETY: the hook runs in the child std forked, before `exec`, where only
    // async-signal-safe work is allowed. It reads only what was moved into it (plain values,
    // descriptors, strings and address arrays made in the parent) and a value set once before
    // any spawn (the start state, in `before_exec`), makes raw system calls through rustix
    // (setrlimit, setpgid or setsid, ioctl TIOCSCTTY on fd 0, prctl, getppid, write) and
    // libc's async-signal-safe calls (rt_sigaction, sigprocmask, clone3, execve, _exit); on
    // failure it builds an `io::Error` from a raw OS code, which does not allocate. It takes
    // no lock and touches no memory shared with other threads (the forked process has one
    // thread).
    unsafe {
        command.pre_exec(move || run(&plan, handoff.as_ref()));
    }
}

/// The hook: in the child std forked, before `exec`.
fn run(plan: &PreExec, handoff: Option<&OwnedFd>) -> io::Result<()> {
    // The dispositions and descriptor limit this process was started with (issue 28).
    #[cfg(target_os = "linux")]
    restore_in_child()?;
    empty_signal_mask();
    lead_and_enter(plan, handoff)?;
    match &plan.exec {
        Some(exec) => exec_ordered(exec),
        None => Ok(()), // std's own `execvp`
    }
}

/// Leads, enters the cgroup (born there by `clone3`, or by a write), sets the parent-death
/// signal.
fn lead_and_enter(plan: &PreExec, handoff: Option<&OwnedFd>) -> io::Result<()> {
    if let (Some(cgroup), Some(handoff)) = (&plan.cgroup, handoff) {
        if plan.try_clone3 {
            match clone_into(cgroup.dir_raw()) {
                // The new process, born in the cgroup: it runs the program.
                Some(0) => return become_leader(plan.lead, plan.parent),
                Some(pid) => {
                    // The forked process: says who runs the program, and ends.
                    let _ = rustix::io::write(handoff, &pid.to_ne_bytes());
                    exit_now(0);
                }
                None => {} // no clone3 or no CLONE_INTO_CGROUP here: enter by a write
            }
        }
        lead_group(plan.lead)?;
        rustix::io::write(&cgroup.procs, b"0")?;
        let _ = rustix::io::write(handoff, &0i32.to_ne_bytes());
        return parent_death(plan.parent);
    }
    if plan.lead != Lead::Group {
        lead_group(plan.lead)?;
    }
    parent_death(plan.parent)
}

/// Unblocks every signal: std leaves the child the spawning thread's mask (quietus's own
/// threads block the signals they wait for), and a program expects none blocked.
fn empty_signal_mask() {
    let _ = signal_call(SignalCall::EmptyMask);
}

/// Sets `signal`'s action: ignored, or the default — never a handler, so nothing ever runs in
/// a signal context. Through the kernel's `rt_sigaction` with its own layout of the structure
/// (`linux-raw-sys`, per architecture): the C library's `sigaction` refuses its own two signals
/// (32 and 33 in glibc), which a parent may have ignored too. `EINVAL` for KILL and STOP.
/// Async-signal-safe: the `pre_exec` hook calls it, and the command once before any thread.
#[cfg(target_os = "linux")]
pub(crate) fn set_disposition(signal: i32, ignore: bool) -> io::Result<()> {
    signal_call(SignalCall::Disposition { signal, ignore })
}

/// One of the kernel's two signal calls, each with the kernel's own structure (elsewhere than
/// Linux, the C library's `sigprocmask`).
enum SignalCall<'a> {
    /// `rt_sigaction(signal, {SIG_IGN or SIG_DFL, no flags, empty mask}, NULL)`.
    #[cfg(target_os = "linux")]
    Disposition { signal: i32, ignore: bool },
    /// `rt_sigprocmask(SIG_SETMASK, {empty}, NULL)`.
    EmptyMask,
    /// `rt_sigprocmask(SIG_SETMASK, {every signal}, old)`: the calling thread's mask before
    /// (the direct start's).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    BlockAll {
        old: &'a mut linux_raw_sys::general::kernel_sigset_t,
    },
    /// `rt_sigprocmask(SIG_SETMASK, mask, NULL)`: a mask `BlockAll` saved, back.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    Restore {
        mask: &'a linux_raw_sys::general::kernel_sigset_t,
    },
    /// Never made: the lifetime's use where the direct start is not built.
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    #[allow(dead_code)]
    Never(std::marker::PhantomData<&'a ()>),
}

/// Makes `call` (async-signal-safe: one system call on locals, no allocation).
fn signal_call(call: SignalCall) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    use linux_raw_sys::general::{
        __kernel_sighandler_t, SIG_SETMASK, kernel_sigaction, kernel_sigset_t,
    };
    #[cfg(target_os = "linux")]
    let sigset_size = std::mem::size_of::<kernel_sigset_t>();
    // SAFETY: `kernel_sigaction` and `kernel_sigset_t` are plain data (integers, an optional
    // function pointer, a signal set): all zeros is a valid value of each (no handler, no
    // flags, no restorer, an empty set). A handler is then SIG_IGN (1) or SIG_DFL (0,
    // `None`): the kernel's sentinels, never called. Each call reads one live local of the
    // kernel's layout, with the kernel's sigset size as its last argument, and writes nothing
    // (a null old action, a null old set) but `BlockAll`'s old mask, a live `&mut` of the
    // kernel's set type. Elsewhere `sigemptyset` initialises the local set that `sigprocmask`
    // reads.
    let done: libc::c_long = unsafe {
        match call {
            #[cfg(target_os = "linux")]
            SignalCall::Disposition { signal, ignore } => {
                let mut action: kernel_sigaction = std::mem::zeroed();
                if ignore {
                    action.sa_handler_kernel =
                        std::mem::transmute::<usize, __kernel_sighandler_t>(1usize);
                }
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    &raw const action,
                    std::ptr::null_mut::<kernel_sigaction>(),
                    sigset_size,
                )
            }
            #[cfg(not(target_os = "linux"))]
            SignalCall::EmptyMask => {
                let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(set.as_mut_ptr());
                libc::sigprocmask(libc::SIG_SETMASK, set.as_ptr(), std::ptr::null_mut()).into()
            }
            #[cfg(target_os = "linux")]
            SignalCall::EmptyMask => {
                let empty: kernel_sigset_t = std::mem::zeroed();
                libc::syscall(
                    libc::SYS_rt_sigprocmask,
                    SIG_SETMASK,
                    &raw const empty,
                    std::ptr::null_mut::<kernel_sigset_t>(),
                    sigset_size,
                )
            }
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            SignalCall::BlockAll { old } => {
                let mut all: kernel_sigset_t = std::mem::zeroed();
                all.sig.iter_mut().for_each(|word| *word = !0);
                libc::syscall(
                    libc::SYS_rt_sigprocmask,
                    SIG_SETMASK,
                    &raw const all,
                    std::ptr::from_mut(old),
                    sigset_size,
                )
            }
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            SignalCall::Restore { mask } => libc::syscall(
                libc::SYS_rt_sigprocmask,
                SIG_SETMASK,
                std::ptr::from_ref(mask),
                std::ptr::null_mut::<kernel_sigset_t>(),
                sigset_size,
            ),
            #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
            SignalCall::Never(_) => 0,
        }
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Each candidate `exec`ed with the ordered environment, as `execvp` does: a missing file or
/// folder goes on to the next, a permission error is remembered (and returned if no candidate
/// runs), any other error stops. `ENOEXEC` (a script without `#!`, which `execvp` hands to
/// `/bin/sh`) returns to std, whose `execvp` runs it (with std's sorted environment).
fn exec_ordered(exec: &OrderedExec) -> io::Result<()> {
    match exec_candidates(exec, false) {
        Some(error) => Err(error),
        None => Ok(()), // ENOEXEC: std's `execvp`
    }
}

/// [`exec_ordered`]'s loop; with `shell`, a candidate that gives `ENOEXEC` is run as
/// `/bin/sh CANDIDATE ARGS…` (`execvp`'s way, glibc's order: the shell's error is the one
/// looked at then), else the loop returns `None` at it. Returns the error that stopped it.
fn exec_candidates(exec: &OrderedExec, shell: bool) -> Option<io::Error> {
    let (argv, envp) = (exec.argv_ptrs.as_ptr(), exec.envp_ptrs.as_ptr());
    let mut denied = false;
    let mut last = libc::ENOENT;
    for path in &exec.candidates {
        // SAFETY: `path` and `exec.shell` are NUL-terminated strings; `argv`, `envp` and
        // `shell_argv` are null-terminated arrays of the addresses of NUL-terminated strings
        // (`shell_argv`'s second slot set here to `path`'s), all owned by `exec`, which lives
        // until the `execve` replaces this process (a copy of the parent's memory, or, in the
        // direct start, the parent's own, untouched while its spawning thread waits).
        // `usize`, `AtomicUsize` and a pointer have the same size and layout.
        let errno = unsafe {
            libc::execve(path.as_ptr(), argv.cast(), envp.cast());
            let mut errno = errno_now();
            if errno == libc::ENOEXEC && shell {
                if let Some(slot) = exec.shell_argv.get(1) {
                    slot.store(path.as_ptr() as usize, std::sync::atomic::Ordering::Relaxed);
                }
                let shell_argv = exec.shell_argv.as_ptr();
                libc::execve(exec.shell.as_ptr(), shell_argv.cast(), envp.cast());
                errno = errno_now();
            }
            errno
        };
        match errno {
            libc::ENOEXEC if !shell => return None,
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            other => return Some(io::Error::from_raw_os_error(other)),
        }
        last = errno;
    }
    Some(io::Error::from_raw_os_error(if denied {
        libc::EACCES
    } else {
        last
    }))
}

/// The OS error of the last failed call (the C library's `errno` of this thread: in the direct
/// start, the spawning thread's, which waits in `clone3` meanwhile and reads no `errno` after).
fn errno_now() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::ENOENT)
}

/// `clone3(CLONE_INTO_CGROUP | CLONE_PARENT)` into the cgroup directory `dir` (a descriptor
/// number): the new pid in the caller, 0 in the new process, `None` when the kernel refused.
/// Without `CLONE_VM` the new process gets a copy of the caller's memory and returns here on
/// its own copy of the stack, exactly as from `fork` (but born in the cgroup, and a child of
/// quietus rather than of the forked process).
#[cfg(target_os = "linux")]
fn clone_into(dir: i32) -> Option<i32> {
    use linux_raw_sys::general::{CLONE_INTO_CGROUP, CLONE_PARENT, clone_args};
    // The kernel's `struct clone_args` (linux/sched.h), up to `cgroup` (version 2, 88 bytes).
    let args = clone_args {
        flags: CLONE_INTO_CGROUP | u64::from(CLONE_PARENT),
        // With CLONE_PARENT the kernel takes the caller's own exit signal (SIGCHLD: std
        // forked it) and requires 0 here.
        exit_signal: 0,
        cgroup: u64::try_from(dir).ok()?,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
    };
    // SAFETY: `clone3` reads `size_of::<clone_args>()` bytes at `&args`, a live, initialised
    // `repr(C)` value of the kernel's layout; it writes nothing of ours (no pidfd, no tid
    // pointers are asked for). Without `CLONE_VM` and with no stack given, both processes
    // return here, each on its own copy of this (single-threaded) process's memory.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw const args,
            std::mem::size_of::<clone_args>(),
        )
    };
    i32::try_from(pid).ok().filter(|pid| *pid >= 0)
}

#[cfg(not(target_os = "linux"))]
fn clone_into(_dir: i32) -> Option<i32> {
    None
}

/// The size of the direct start's stack: the new process runs a few system calls on it (the
/// hook's work, no allocation), far below this even unoptimised.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const DIRECT_STACK: usize = 64 * 1024;

/// One 16-byte unit of the direct start's stack: the x86-64 ABI wants the stack 16-byte
/// aligned at each call.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct StackUnit([u8; 16]);

/// The start without a copy of this process, what `posix_spawn` does: `clone3` with
/// `CLONE_VM | CLONE_VFORK` (the new process runs in this process's memory, on a stack of its
/// own, while the calling thread waits in the kernel until it `exec`s or exits), born in the
/// session's cgroup (`CLONE_INTO_CGROUP`), every signal handler reset in it
/// (`CLONE_CLEAR_SIGHAND`), every signal blocked across the call. It runs [`direct_entry`].
/// `None` when the kernel refuses such a `clone3` (before Linux 5.7, or a filter).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(super) fn start_direct(plan: &Direct) -> Option<io::Result<crate::pid::Pid>> {
    use linux_raw_sys::general::{
        CLONE_CLEAR_SIGHAND, CLONE_INTO_CGROUP, CLONE_VFORK, CLONE_VM, SIGCHLD, clone_args,
        kernel_sigset_t,
    };
    use std::os::fd::AsRawFd;
    let mut stack = vec![StackUnit([0; 16]); DIRECT_STACK / 16];
    let cgroup = plan.cgroup.as_ref().map(|dir| dir.as_raw_fd());
    let mut flags = u64::from(CLONE_VM | CLONE_VFORK) | CLONE_CLEAR_SIGHAND;
    if cgroup.is_some() {
        flags |= CLONE_INTO_CGROUP;
    }
    let args = clone_args {
        flags,
        exit_signal: u64::from(SIGCHLD),
        cgroup: cgroup.and_then(|fd| u64::try_from(fd).ok()).unwrap_or(0),
        stack: stack.as_mut_ptr() as u64,
        stack_size: (stack.len() * std::mem::size_of::<StackUnit>()) as u64,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
    };
    // No handler may run in the new process, on its stack in this process's memory: every
    // signal blocked in this thread (the new process inherits the mask) until the `exec`.
    let mut old = kernel_sigset_t {
        sig: Default::default(),
    };
    if let Err(e) = signal_call(SignalCall::BlockAll { old: &mut old }) {
        return Some(Err(e));
    }
    let pid = clone_vfork(&args, plan);
    let _ = signal_call(SignalCall::Restore { mask: &old });
    drop(stack); // the new process has `exec`ed or exited: its stack is free
    match pid {
        pid if pid > 0 => {
            // A process was made: never `None` (std's path would make a second one).
            let Some(pid) = i32::try_from(pid).ok().and_then(super::from_raw) else {
                return Some(Err(io::Error::other("clone3 returned no pid")));
            };
            Some(match plan.failure() {
                None => Ok(pid),
                Some(error) => {
                    // It exited before its program ran: reaped, as std reaps its own.
                    let _ = super::reap_child(pid, true);
                    Err(error)
                }
            })
        }
        _ => {
            let errno = i32::try_from(-pid).unwrap_or(libc::EINVAL);
            match errno {
                libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM => None,
                other => Some(Err(io::Error::from_raw_os_error(other))),
            }
        }
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(super) fn start_direct(_plan: &Direct) -> Option<io::Result<crate::pid::Pid>> {
    None
}

/// The raw `clone3` of [`start_direct`]: the new pid (or `-errno`) in this process; the new
/// process starts on the top of `args.stack` and calls [`direct_entry`] with `plan`, never
/// coming back here.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn clone_vfork(args: &linux_raw_sys::general::clone_args, plan: &Direct) -> isize {
    let entry: extern "C" fn(*const Direct) -> ! = direct_entry;
    let result: isize;
    // SAFETY: `clone3` reads `size_of::<clone_args>()` bytes at `args`, a live, initialised
    // `repr(C)` value of the kernel's layout, and writes nothing of ours (no pidfd, no tid
    // pointers). In this process the block is one `syscall` instruction: it clobbers `rax`
    // (the result), `rcx` and `r11`, all declared, and uses no stack (`nostack`). The new
    // process shares this memory (`CLONE_VM`) but not this stack: the kernel starts it at the
    // instruction after `syscall` with `rax` 0 and `rsp` at the top of `args.stack` (a live
    // allocation of `stack_size` bytes, 16-byte aligned, that outlives it: this thread waits in
    // the kernel until it `exec`s or exits, `CLONE_VFORK`); there it calls `entry` (the
    // aligned `rsp` is what a call wants) with `plan` in `rdi`, and `entry` never returns
    // (`ud2` would trap). `plan` outlives the new process for the same reason.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => result,
            in("rdi") std::ptr::from_ref(args),
            in("rsi") std::mem::size_of::<linux_raw_sys::general::clone_args>(),
            in("r12") std::ptr::from_ref(plan),
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    result
}

/// The new process of [`start_direct`], on its own stack in this process's memory: does what
/// the hook does (`async_signal_safe::direct_child`) and `exec`s the program; if it cannot,
/// leaves the error in `plan` and exits with 127.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
extern "C" fn direct_entry(plan: *const Direct) -> ! {
    // SAFETY: `plan` is the `&Direct` `clone_vfork` passed, alive until this process `exec`s
    // or exits (the parent's thread waits in `clone3` meanwhile).
    let plan = unsafe { &*plan };
    let error = async_signal_safe::direct_child(plan);
    let errno = error.raw_os_error().unwrap_or(libc::EINVAL);
    plan.error
        .store(errno.max(1), std::sync::atomic::Ordering::Release);
    exit_now(127)
}

/// Ends the forked process that `clone_into` left behind, without running anything of the
/// supervisor's (`atexit` handlers, buffers to flush: they are copies of the supervisor's).
fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and ends the calling process at once.
    unsafe { libc::_exit(code) }
}

/// Closes every descriptor from `first` up that this process inherited: the guardian calls it
/// first thing, so that a descriptor its supervisor's host left inheritable (a pipe's write
/// end, say) is not held open by the guardian for as long as it runs. One `close_range`
/// (Linux 5.9); before it, each descriptor `/proc/self/fd` lists.
pub(crate) fn close_inherited(first: u32) {
    // The listing is made first and its own descriptor closed before anything is closed.
    let listed = || -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        let numbers: Vec<i32> = entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .filter(|&n| u32::try_from(n).is_ok_and(|n| n >= first))
            .collect();
        // The listing's own descriptor is closed now: no longer listed below.
        numbers
            .into_iter()
            .filter(|n| std::fs::symlink_metadata(format!("/proc/self/fd/{n}")).is_ok())
            .collect()
    };
    // SAFETY: called at the very start of the guardian, on its only thread, before it opens
    // anything: no object of this process owns these numbers (inherited across `exec`).
    // `close_range` closes only what is open in the range; where the kernel has none, each
    // number closed is open (checked by `listed`; nothing opens or closes meanwhile).
    unsafe {
        #[cfg(target_os = "linux")]
        let closed = libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) == 0;
        #[cfg(not(target_os = "linux"))]
        let closed = false;
        if !closed {
            for number in listed() {
                rustix::io::close(number);
            }
        }
    }
}
