//! Starting the program inside the session's cgroup without a migration (Linux).
//!
//! Moving a process into a cgroup (a write to `cgroup.procs`) takes the kernel's
//! `cgroup_threadgroup_rwsem` for writing, and that waits for an RCU grace period whenever no
//! other migration happened in the last few milliseconds: 7–12 ms on the development machine, for
//! every spaced run, which was most of a `stallwatch -- true` run's time. A process *born* in the
//! cgroup (`clone3` with `CLONE_INTO_CGROUP`, kernel 5.7) takes that lock only for reading, which
//! costs nothing.
//!
//! std's `Command` forks in its own way, so the program's process is made one step later: in the
//! `pre_exec` hook, after std has set up the child (its stdio, working directory, identity,
//! signal mask and the caller's own hooks), the forked process calls `clone3(CLONE_INTO_CGROUP |
//! CLONE_PARENT)`. The new process is a copy of it, born in the cgroup, a child of stallwatch
//! (`CLONE_PARENT`); it becomes the leader (its own group or session), sets the parent-death
//! signal and returns from the hook, and std goes on to `exec` the program in it. The forked
//! process writes the new pid to a pipe ([`Handoff`]) and exits; stallwatch reaps it and
//! supervises the new pid. Every setting of the caller's `Command` still applies, because std
//! applied it before the copy.
//!
//! Where `clone3` or `CLONE_INTO_CGROUP` is missing (before 5.7) the forked process enters the
//! cgroup itself, as before (`0` to `cgroup.procs`), and says so with the pid `0`.
//!
//! On x86-64 the new process shares the forked one's memory (`CLONE_VM | CLONE_VFORK`, as
//! `vfork`): no second copy of the address space is made and torn down; the forked process,
//! suspended until the program's `exec`, then says the pid and exits in a few lines of
//! assembly ([`vfork_into`] says why that is sound). Elsewhere, or where the kernel refuses
//! it, the copy is made as described above.
//!
//! Both processes run between a fork and an `exec`, where only async-signal-safe calls are
//! allowed: raw system calls through `rustix`, `libc`'s `syscall` and `_exit`. Nothing
//! allocates.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::Pid;

use super::{Lead, lead_group, parent_death};

/// `CLONE_PARENT` (linux/sched.h): the new process is a child of the caller's parent.
const CLONE_PARENT: u64 = 0x0000_8000;
/// `CLONE_INTO_CGROUP` (linux/sched.h, 5.7): the new process starts in the cgroup `cgroup`.
pub(super) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of the kernel's ABI (linux/sched.h), up to `cgroup` (version 2, 88
/// bytes): eleven 64-bit fields, the layout fixed by the kernel on every architecture.
#[repr(C)]
#[derive(Default)]
pub(super) struct CloneArgs {
    pub(super) flags: u64,
    pub(super) pidfd: u64,
    pub(super) child_tid: u64,
    pub(super) parent_tid: u64,
    pub(super) exit_signal: u64,
    pub(super) stack: u64,
    pub(super) stack_size: u64,
    pub(super) tls: u64,
    pub(super) set_tid: u64,
    pub(super) set_tid_size: u64,
    pub(super) cgroup: u64,
}

/// The session's cgroup as the child enters it: its directory, opened before the fork, for
/// `clone3(CLONE_INTO_CGROUP)`. Its `cgroup.procs`, the fallback's way in, is opened (from it)
/// only where the fallback may be taken ([`configure`]): a program started without std's fork
/// never needs it.
#[derive(Debug)]
pub(crate) struct CgroupEntry {
    pub(crate) dir: OwnedFd,
}

/// How the forked process tells stallwatch which process runs the program: the read end of a
/// pipe (non-blocking) to which it writes a pid before it exits (`clone3` worked) or `0` before
/// it goes on to `exec` itself (the fallback).
#[derive(Debug)]
pub(crate) struct Handoff {
    read: OwnedFd,
}

/// What the forked process said, read once std's spawn has returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leader {
    /// The program runs in this process, made by `clone3`; the forked one exited.
    Sibling(i32),
    /// The forked process runs the program itself (it entered the cgroup by a write).
    Forked,
    /// Nothing was said: the forked process failed before (the spawn's error says why).
    Unknown,
}

impl Handoff {
    /// What the forked process said. Call it after std's spawn returned: by then the forked
    /// process has exited (or `exec`ed), so whatever it wrote is in the pipe and the read never
    /// waits.
    pub(crate) fn leader(&self) -> Leader {
        let mut pid = [0u8; 4];
        match rustix::io::read(&self.read, &mut pid) {
            Ok(4) => match i32::from_ne_bytes(pid) {
                0 => Leader::Forked,
                p if p > 0 => Leader::Sibling(p),
                _ => Leader::Unknown,
            },
            _ => Leader::Unknown,
        }
    }
}

/// Makes `command`'s program start in the cgroup of `entry` as the leader `lead` asks, with the
/// parent-death signal when asked (see the module docs). `try_clone3` false forces the fallback
/// (the tests use it to cover that path on kernels that have `clone3`).
pub(crate) fn configure(
    command: &mut Command,
    lead: Lead,
    parent_death_signal: bool,
    entry: CgroupEntry,
    try_clone3: bool,
) -> io::Result<Handoff> {
    let (read, write) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )?;
    let procs = rustix::fs::openat(
        &entry.dir,
        "cgroup.procs",
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let parent = rustix::process::getpid();
    // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe work
    // is allowed. It makes raw system calls through rustix and libc's `syscall` (clone3, setpgid
    // or setsid, ioctl, prctl, getppid, write) and libc's `_exit`, reads only memory it owns (the
    // descriptors and flags moved into it, a `CloneArgs` on its stack), and builds an `io::Error`
    // from a raw OS code, which does not allocate. It touches no lock and no memory shared with
    // other threads. The process `clone3` makes is a copy of this single-threaded one (no
    // `CLONE_VM`, so it has its own stack) and returns from the hook into std's code that execs.
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    unsafe {
        command.pre_exec(move || {
            if try_clone3 {
                // Sharing this process's memory first (x86-64): the forked process, suspended
                // until the program's `exec`, then only says the pid and exits.
                #[cfg(target_arch = "x86_64")]
                if let Ok(0) = vfork_into(entry.dir.as_fd(), write.as_fd()) {
                    return become_leader(lead, parent_death_signal, parent);
                }
                match clone_into(entry.dir.as_fd()) {
                    // The new process: born in the cgroup, it will run the program.
                    Ok(0) => return become_leader(lead, parent_death_signal, parent),
                    Ok(pid) => {
                        let _ = rustix::io::write(&write, &pid.to_ne_bytes());
                        libc::_exit(0);
                    }
                    // No clone3 or no CLONE_INTO_CGROUP here: enter by a write.
                    Err(()) => {}
                }
            }
            lead_group(lead)?;
            rustix::io::write(&procs, b"0")?;
            let _ = rustix::io::write(&write, &0i32.to_ne_bytes());
            parent_death(parent_death_signal, parent)?;
            super::child_start()
        });
    }
    Ok(Handoff { read })
}

/// `clone3(CLONE_INTO_CGROUP | CLONE_PARENT)` into the cgroup `dir`: the new pid in the caller,
/// 0 in the new process, `Err` when the kernel refused.
fn clone_into(dir: BorrowedFd<'_>) -> Result<i32, ()> {
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP | CLONE_PARENT,
        // With CLONE_PARENT the kernel takes the caller's own exit signal (SIGCHLD, std
        // forked it) and requires 0 here.
        exit_signal: 0,
        cgroup: u64::try_from(dir.as_raw_fd()).unwrap_or(u64::MAX),
        ..CloneArgs::default()
    };
    // SAFETY: `clone3` reads `size_of::<CloneArgs>()` bytes at `&args`, a live, initialised
    // `repr(C)` value of the kernel's layout. Without `CLONE_VM` the new process gets a copy of
    // the address space and returns here on its own copy of this stack, like `fork`.
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    i32::try_from(pid).ok().filter(|p| *p >= 0).ok_or(())
}

/// `CLONE_VM` (linux/sched.h): the new process shares the caller's memory.
#[cfg(target_arch = "x86_64")]
pub(super) const CLONE_VM: u64 = 0x0000_0100;
/// `CLONE_VFORK` (linux/sched.h): the caller is suspended until the new process `exec`s or
/// exits.
#[cfg(target_arch = "x86_64")]
pub(super) const CLONE_VFORK: u64 = 0x0000_4000;
/// `__NR_clone3`, `__NR_write` and `__NR_exit_group` on x86-64.
#[cfg(target_arch = "x86_64")]
pub(super) const SYS_CLONE3: u64 = 435;
#[cfg(target_arch = "x86_64")]
const SYS_WRITE: u64 = 1;
#[cfg(target_arch = "x86_64")]
const SYS_EXIT_GROUP: u64 = 231;

/// [`clone_into`] without copying the address space: `clone3(CLONE_VM | CLONE_VFORK |
/// CLONE_INTO_CGROUP | CLONE_PARENT)` on this very stack, as `vfork` does. The copy
/// `clone_into` makes, and its teardown at the program's `exec`, cost a run 0.3–0.7 ms on the
/// development VM (`perf stat -r 100 stallwatch -i 1h -- true`, three pairs: 4.3–4.7 ms
/// against 4.4–5.4 ms).
///
/// Returns `Ok(0)` in the new process and `Err` when the kernel refused (in the caller, which
/// then tries [`clone_into`]). In the caller it never returns when the clone worked: resumed
/// once the new process has `exec`ed or exited, it writes the new pid to `handoff` and exits,
/// all in the assembly below, touching only registers and the stack below its stack pointer.
/// It must not return into compiled code: the new process ran on this same stack (returning
/// from the hook into std's code, which calls `exec`) and overwrote what the frames below
/// held. Only the new process leaves the assembly block, exactly as the compiler expects: the
/// kernel gives it the caller's registers (but `rax`, 0, and `rcx`, `r11`, which `syscall`
/// clobbers) and it shares the caller's memory, which the caller does not touch meanwhile.
///
/// Sound here because the caller is the process std forked for the spawn: single-threaded,
/// its memory a throwaway copy of stallwatch's that nothing else uses, its only task after the
/// clone to say the pid and exit. (Closing its descriptors before the exit, so that std's
/// spawn need not wait for the teardown of its memory, measured no faster.)
#[cfg(target_arch = "x86_64")]
fn vfork_into(dir: BorrowedFd<'_>, handoff: BorrowedFd<'_>) -> Result<i32, ()> {
    let args = CloneArgs {
        flags: CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PARENT,
        exit_signal: 0, // CLONE_PARENT: the caller's own (see `clone_into`)
        cgroup: u64::try_from(dir.as_raw_fd()).unwrap_or(u64::MAX),
        ..CloneArgs::default()
    };
    let ret: i64;
    // SAFETY: see the function's docs. `clone3` reads the `repr(C)` `args` of the kernel's
    // layout (a live local). In the caller, after a successful clone, the block writes four
    // bytes below the stack pointer and makes two system calls (`write` of them to `handoff`,
    // a descriptor it owns, then `exit_group`), and never falls through (`ud2` after the
    // exit). Falling through (the new process, or a refusal) only `rax`, `rcx` and `r11` have
    // changed, as declared.
    #[allow(unsafe_code)] // one of the crate's `unsafe` blocks, all in `sys` (module docs there)
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jle 2f",
            // The caller, resumed: the new pid in eax.
            "mov dword ptr [rsp - 8], eax",
            "lea rsi, [rsp - 8]",
            "mov edi, edx",
            "mov edx, 4",
            "mov eax, {write}",
            "syscall",
            "xor edi, edi",
            "mov eax, {exit_group}",
            "syscall",
            "ud2",
            "2:",
            write = const SYS_WRITE,
            exit_group = const SYS_EXIT_GROUP,
            inlateout("rax") SYS_CLONE3 => ret,
            in("rdi") &args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("rdx") handoff.as_raw_fd(),
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    if ret == 0 { Ok(0) } else { Err(()) }
}

/// In the program's process: it leads, and dies with stallwatch when asked.
fn become_leader(lead: Lead, parent_death_signal: bool, parent: Pid) -> io::Result<()> {
    lead_group(lead)?;
    parent_death(parent_death_signal, parent)?;
    super::child_start()
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::process::{Command, Stdio};

    use super::*;
    use crate::process::cgroup::Cgroup;
    use crate::process::{self, ChildProcess};

    /// What the program's process says about itself: its pid, its `stat` fields 4–6 (parent,
    /// group, session) and its cgroup v2 path.
    const SELF_REPORT: &str = "read -r a b c ppid pgid sid rest < /proc/self/stat; \
                               echo \"$$ $ppid $pgid $sid\"; grep '^0::' /proc/self/cgroup";

    /// A session cgroup for one test (`id` apart from the library's own sessions), or `None`
    /// where this process may not make one — then it must not be root.
    fn cgroup(id: u64) -> Option<Cgroup> {
        match Cgroup::create(id, |_| {}) {
            Ok((cgroup, _)) => Some(cgroup),
            Err(why) => {
                assert!(
                    !rustix::process::geteuid().is_root(),
                    "root makes cgroups here: {why}"
                );
                None
            }
        }
    }

    /// Spawns the self report as `lead` in `cgroup`, by clone3 or by the fallback; returns the
    /// child and what it printed.
    fn run_self_report(cgroup: &Cgroup, lead: Lead, try_clone3: bool) -> (ChildProcess, String) {
        let mut command = Command::new("sh");
        command
            .args(["-c", SELF_REPORT])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let entry = cgroup.entry().expect("the cgroup's files");
        let handoff = configure(&mut command, lead, true, entry, try_clone3).expect("a pipe");
        let (_, spawned) = process::spawn(command, true, Some(handoff));
        let mut child = spawned.expect("sh runs");
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("piped")
            .read_to_string(&mut out)
            .expect("its output");
        (child, out)
    }

    fn check_born_in(cgroup: &Cgroup, lead: Lead, try_clone3: bool) {
        let (mut child, out) = run_self_report(cgroup, lead, try_clone3);
        let status = child.wait().expect("reaped");
        assert!(status.success(), "{status:?}: {out}");
        let mut lines = out.lines();
        let ids: Vec<u32> = lines
            .next()
            .expect("the ids")
            .split(' ')
            .map(|n| n.parse().expect("a number"))
            .collect();
        let pid = child.id();
        assert_eq!(ids[0], pid, "the supervised pid runs the program: {out}");
        assert_eq!(ids[1], std::process::id(), "a child of this process: {out}");
        assert_eq!(ids[2], pid, "it leads its group: {out}");
        if lead == Lead::Session {
            assert_eq!(ids[3], pid, "it leads its session: {out}");
        } else {
            assert_ne!(ids[3], pid, "it stays in this process's session: {out}");
        }
        let name = cgroup.path().file_name().expect("a name").to_string_lossy();
        let line = lines.next().expect("the cgroup line");
        assert!(line.ends_with(&format!("/{name}")), "in {name}: {out}");
        // Reaped once: a second wait answers from memory, a kill signals nobody.
        assert_eq!(child.wait().expect("known"), status);
        child.kill().expect("no signal after the reap");
    }

    #[test]
    fn the_program_is_born_in_the_cgroup_and_leads_its_group() {
        if let Some(cgroup) = cgroup(9_100_001) {
            check_born_in(&cgroup, Lead::Group, true);
            check_born_in(&cgroup, Lead::Session, true);
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn with_clone3_the_forked_process_hands_over_to_a_sibling_and_exits() {
        if let Some(cgroup) = cgroup(9_100_004) {
            for (try_clone3, lead) in [(true, Lead::Group), (false, Lead::Group)] {
                let mut command = Command::new("true");
                let entry = cgroup.entry().expect("the cgroup's files");
                let handoff =
                    configure(&mut command, lead, false, entry, try_clone3).expect("a pipe");
                let mut forked = command.spawn().expect("true runs");
                let leader = handoff.leader();
                if try_clone3 {
                    // This kernel (5.7 or later) has clone3 with CLONE_INTO_CGROUP.
                    let Leader::Sibling(pid) = leader else {
                        panic!("clone3 was not used: {leader:?}");
                    };
                    assert_ne!(pid.unsigned_abs(), forked.id());
                    assert!(forked.wait().expect("it exits").success());
                    let status = super::super::reap_child(pid, true).expect("our child");
                    assert!(status.expect("exited").success());
                } else {
                    assert_eq!(leader, Leader::Forked);
                    assert!(forked.wait().expect("it runs true").success());
                }
            }
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn without_clone3_the_forked_process_enters_and_runs_the_program() {
        if let Some(cgroup) = cgroup(9_100_002) {
            check_born_in(&cgroup, Lead::Group, false);
            check_born_in(&cgroup, Lead::Session, false);
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn a_program_that_cannot_be_run_fails_the_spawn_with_its_own_error() {
        if let Some(cgroup) = cgroup(9_100_003) {
            for try_clone3 in [true, false] {
                let mut command = Command::new("/no/such/program-enter");
                command.stdin(Stdio::null());
                let entry = cgroup.entry().expect("the cgroup's files");
                let handoff =
                    configure(&mut command, Lead::Group, true, entry, try_clone3).expect("a pipe");
                let (_, spawned) = process::spawn(command, true, Some(handoff));
                let err = spawned.expect_err("no such program");
                assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
            }
            // (That both processes are reaped is checked where no other test forks meanwhile:
            // tests/containment_loop.)
            assert!(!cgroup.populated().expect("its events"));
            cgroup.remove().expect("emptied");
        }
    }
}
