//! What the program's process reads between its start and its `exec`, as plain data made in
//! the parent: how it leads its tree ([`Lead`]), the cgroup it enters ([`CgroupEntry`]), the
//! hook's plan ([`PreExec`]), the ordered `execve` ([`OrderedExec`]), the direct start's plan
//! ([`Direct`]), and the state this process was started with ([`Inherited`], recorded once by
//! `start_state`). A leaf of `process::sys`: it imports none of its siblings, so `spawn` (which
//! makes these), `unsafe_calls` (whose hook and direct start read them) and `start_state`
//! (which records the start state) all point down to it, and none of them to another in a
//! circle.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::Command;
#[cfg(target_os = "linux")]
use std::sync::OnceLock;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicI32, AtomicUsize};

use rustix::process::Pid;

/// How the child leads its tree. In every case its process-group id is its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lead {
    /// The leader of a new process group.
    Group,
    /// The leader of a new session without a controlling terminal (the non-interactive
    /// profile): opening `/dev/tty` fails at once (ENXIO) instead of prompting.
    Session,
    /// The leader of a new session whose controlling terminal is its standard input, which
    /// the caller has already set to a terminal's slave side (std duplicates the slave onto
    /// fds 0, 1 and 2 before the hooks run).
    Terminal,
}

/// A session's cgroup as the child enters it: its directory (for `clone3(CLONE_INTO_CGROUP)`)
/// and its `cgroup.procs` (the fallback's way in), both opened before the fork.
#[derive(Debug)]
pub(crate) struct CgroupEntry {
    pub(crate) dir: OwnedFd,
    pub(crate) procs: OwnedFd,
}

impl CgroupEntry {
    /// The directory's descriptor number (what `clone3` takes).
    pub(super) fn dir_raw(&self) -> i32 {
        self.dir.as_raw_fd()
    }
}

/// What the hook does in the child, before `exec`: plain values and descriptors only.
#[derive(Debug)]
pub(crate) struct PreExec {
    pub(super) lead: Lead,
    /// The supervisor's pid, when the child must get SIGKILL as its spawning thread dies
    /// (Linux): the hook checks that this parent still lives.
    pub(super) parent: Option<Pid>,
    pub(super) cgroup: Option<CgroupEntry>,
    /// Born in the cgroup by `clone3` where the kernel can; `false` forces the write (tests).
    pub(super) try_clone3: bool,
    /// The program's own `execve` with its environment in order ([`OrderedExec`]); `None`:
    /// std's.
    pub(super) exec: Option<OrderedExec>,
}

/// The `execve` of a command whose environment quietus changes, with that environment in
/// order. std sorts a changed environment (and keeps one entry per name); a program run
/// directly gets its parent's in order, duplicates and entries without `=` kept. So for a
/// [`Program`](crate::Program) (whose every setting quietus knows) the hook ends in this
/// `execve`: this process's environment as std reads it, in its order, but the names the
/// command changes, then what it sets. The strings and the pointer arrays are made here, in
/// the parent; the hook only calls `execve` on each `PATH` candidate, as `execvp` does.
#[derive(Debug)]
pub(crate) struct OrderedExec {
    /// The paths `execvp` would try, in its order.
    pub(super) candidates: Vec<CString>,
    /// The arguments (owned here: the addresses below point into them), and their
    /// null-terminated array of addresses.
    _argv: Vec<CString>,
    pub(super) argv_ptrs: Vec<usize>,
    /// The environment (owned here), and its null-terminated array of addresses.
    _envp: Vec<CString>,
    pub(super) envp_ptrs: Vec<usize>,
    /// `execvp`'s way with a file the kernel cannot run (`ENOEXEC`: a script without `#!`):
    /// `/bin/sh FILE ARGS…`. The shell's path, and the array `[sh, FILE, args…, NULL]` whose
    /// second slot the direct start fills with the candidate that gave `ENOEXEC`.
    pub(super) shell: CString,
    pub(super) shell_argv: Vec<AtomicUsize>,
}

impl OrderedExec {
    /// The ordered `execve` of `command`, whose environment starts from this process's unless
    /// `env_cleared`; `None` when the command changes no variable (std passes this process's
    /// environment untouched then).
    pub(crate) fn of(command: &Command, env_cleared: bool) -> io::Result<Option<OrderedExec>> {
        if command.get_envs().next().is_none() && !env_cleared {
            return Ok(None);
        }
        OrderedExec::always(command, env_cleared).map(Some)
    }

    /// The `execve` of `command` even when it changes no variable (the direct start runs no
    /// `execvp` of std's: it passes this process's environment as std would).
    pub(crate) fn always(command: &Command, env_cleared: bool) -> io::Result<OrderedExec> {
        let mut changed: Vec<Vec<u8>> = Vec::new();
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
        let mut envp = Vec::new();
        if !env_cleared {
            for entry in own_environment() {
                let key = entry.split(|b| *b == b'=').next().unwrap_or(&entry);
                if !changed.iter().any(|k| k == key) {
                    envp.push(CString::new(entry).map_err(|_| io::ErrorKind::InvalidInput)?);
                }
            }
        }
        envp.extend(set);
        let program = command.get_program();
        let argv: Vec<CString> = std::iter::once(program)
            .chain(command.get_args())
            .map(c_string)
            .collect::<io::Result<_>>()?;
        let addresses = |strings: &[CString]| -> Vec<usize> {
            let mut ptrs: Vec<usize> = strings.iter().map(|s| s.as_ptr() as usize).collect();
            ptrs.push(0);
            ptrs
        };
        let shell = CString::from(c"/bin/sh");
        let shell_argv = std::iter::once(shell.as_ptr() as usize)
            .chain(addresses(&argv))
            .map(AtomicUsize::new)
            .collect();
        Ok(OrderedExec {
            candidates: candidates(program, path.as_deref())?,
            argv_ptrs: addresses(&argv),
            _argv: argv,
            envp_ptrs: addresses(&envp),
            _envp: envp,
            shell,
            shell_argv,
        })
    }
}

/// This process's environment, entry by entry (`KEY=value`), in its order with its
/// duplicates: as std reads it (under its lock), or, when that is exactly the environment the
/// process was started with, that one as the kernel holds it (`/proc/self/environ`), which
/// also has the entries without `=` std cannot show.
fn own_environment() -> Vec<Vec<u8>> {
    let current: Vec<Vec<u8>> = std::env::vars_os()
        .map(|(key, value)| {
            let mut entry = key.into_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            entry
        })
        .collect();
    #[cfg(target_os = "linux")]
    if let Ok(initial) = std::fs::read("/proc/self/environ") {
        let initial: Vec<Vec<u8>> = initial
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        // The entries std can read: those with a name before an `=` (glibc's rule, which
        // std copies: a name may start with `=`).
        let readable = initial
            .iter()
            .filter(|e| e.iter().skip(1).any(|b| *b == b'='))
            .cloned();
        if readable.eq(current.iter().cloned()) {
            return initial;
        }
    }
    current
}

/// `s` for a system call; an interior NUL is std's `InvalidInput` error.
pub(super) fn c_string(s: &OsStr) -> io::Result<CString> {
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

/// Everything the direct start does in the new process before its `exec`, made in the parent:
/// plain values, descriptors, the strings and address arrays of the `execve`, and the slot in
/// which the new process leaves the error that stopped it.
#[derive(Debug)]
#[cfg_attr(
    not(all(target_os = "linux", target_arch = "x86_64")),
    allow(dead_code) // planned only where it runs (`direct_available`)
)]
pub(crate) struct Direct {
    pub(super) lead: Lead,
    /// As [`PreExec::parent`].
    pub(super) parent: Option<Pid>,
    /// The cgroup's directory, for `clone3(CLONE_INTO_CGROUP)`.
    pub(super) cgroup: Option<OwnedFd>,
    /// What the program gets as 0, 1, 2 (each numbered 3 or more here).
    pub(super) stdio: [Option<OwnedFd>; 3],
    /// Its working directory, when the command sets one.
    pub(super) cwd: Option<CString>,
    pub(super) exec: OrderedExec,
    /// The OS error that stopped the new process before its program ran (0: none). It shares
    /// this process's memory until its `exec`; the parent reads the slot once `clone3` returned.
    pub(super) error: AtomicI32,
}

impl Direct {
    /// The error the new process left, if any.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(super) fn failure(&self) -> Option<io::Error> {
        match self.error.load(Ordering::Acquire) {
            0 => None,
            errno => Some(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The state this process was started with, where quietus changed it (`start_state`).
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// The ignored signals at the start (bit `n - 1` for signal `n`), SIGPIPE left out.
    pub(crate) ignored: u64,
    /// The soft and hard `RLIMIT_NOFILE` at the start, when quietus raised the soft one.
    pub(crate) nofile: Option<(u64, u64)>,
}

/// The start state, set once before any spawn and only read after (the hook may read it).
#[cfg(target_os = "linux")]
static INHERITED: OnceLock<Inherited> = OnceLock::new();

/// The state this process was started with, once `start_state::prepare_supervisor` recorded
/// it.
#[cfg(target_os = "linux")]
pub(super) fn inherited() -> Option<&'static Inherited> {
    INHERITED.get()
}

/// Records the state this process was started with: the first record stays.
#[cfg(target_os = "linux")]
pub(super) fn record(state: Inherited) {
    let _ = INHERITED.set(state);
}

/// `signal`'s bit in [`Inherited::ignored`].
#[cfg(target_os = "linux")]
pub(super) fn bit(signal: i32) -> u64 {
    1u64 << (signal - 1)
}
