//! The guardian: one helper process per supervising process, started by `exec`, that ends
//! every live session's tree if the supervisor dies without ending it (SIGKILL, a crash).
//!
//! The parent-death signal reaches only the direct child; a tree's other processes need
//! someone outside the supervisor. That someone is the `quietus` binary itself, run as
//! `quietus __guardian` (hidden): the command and `serve` run their own executable; a
//! library user's process runs the program [`set_program`] names, else the one the
//! `QUIETUS_GUARDIAN` variable names, else `quietus` found in `PATH`. It is never a fork
//! of the host: a multi-gigabyte, multi-threaded host (a Python or JVM process) copies no page
//! tables and runs no `atfork` handler for it.
//!
//! The supervisor and its guardian share a `SOCK_SEQPACKET` socket pair: the guardian's end is
//! its stdin, the supervisor's end is close-on-exec (no program it starts holds it). Each
//! message is one line of text:
//!
//! - `cgroup <session> <path>`: the session's cgroup, told before its folder is made;
//! - `group <session> <pgid>`: the session's process group, told once the leader runs;
//! - `end <session>`: the session ended properly (its tree is gone or let go).
//!
//! When its socket reaches end-of-file (the supervisor is gone: no other process holds its
//! end), the guardian SIGKILLs every group it still holds and kills every cgroup (`cgroup.kill`)
//! and removes it, then exits. It runs while at least one session is registered: the end of the
//! last one closes the socket (holding nothing, the guardian exits quietly) and the supervisor
//! reaps it, so no process of quietus's outlives the supervisor's sessions, and none is left
//! for the caller to reap. The next session starts a new one.
//!
//! Right after its start the guardian answers `quietus-guardian 1` on the socket; a program
//! that does not within [`HANDSHAKE`] is no guardian (it is killed and reaped). Where none can be
//! had, the session goes on without, and says so ([`SupervisorDeath::LeaderOnly`]): the leader
//! still gets the parent-death signal, and a cgroup left by a dead supervisor is reclaimed by
//! the next quietus start in the same cgroup.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// How a message is sent to a socket whose reader may be gone: an `EPIPE` error rather than a
/// `SIGPIPE` (Linux's `MSG_NOSIGNAL`; elsewhere Rust's runtime ignores `SIGPIPE`, and macOS's
/// sockets get `SO_NOSIGPIPE` once made).
#[cfg(target_os = "linux")]
const NO_SIGPIPE: SendFlags = SendFlags::NOSIGNAL;
#[cfg(not(target_os = "linux"))]
const NO_SIGPIPE: SendFlags = SendFlags::empty();

/// The flags a socket pair is made with: close-on-exec where the call takes it (Linux), else set
/// right after ([`no_leak`]).
#[cfg(target_os = "linux")]
const PAIR_FLAGS: SocketFlags = SocketFlags::CLOEXEC;
#[cfg(not(target_os = "linux"))]
const PAIR_FLAGS: SocketFlags = SocketFlags::empty();

/// Both ends of the pair close-on-exec (set by [`PAIR_FLAGS`] on Linux; the guardian's end
/// becomes its stdin by `dup2`, which clears the flag there only) and, on Apple's systems, no
/// `SIGPIPE` on our end when the guardian is gone.
fn no_leak(ours: &OwnedFd, theirs: &OwnedFd) -> io::Result<()> {
    #[cfg(not(target_os = "linux"))]
    for end in [ours, theirs] {
        sys::set_cloexec(end.as_fd())?;
    }
    #[cfg(any(target_os = "macos", target_os = "ios"))]
    rustix::net::sockopt::set_socket_nosigpipe(ours, true)?;
    let _ = (ours, theirs);
    Ok(())
}

use super::cgroup::Cgroup;
use super::{orphans, sys};
use crate::error::SystemError;
use crate::pid::Pid;

/// The hidden subcommand that runs the guardian.
pub const SUBCOMMAND: &str = "__guardian";
/// What a guardian answers at its start.
const HELLO: &[u8] = b"quietus-guardian 1";
/// How long a guardian may take to answer at its start.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// The environment variable naming the guardian's program for a library user.
pub const PROGRAM_VARIABLE: &str = "QUIETUS_GUARDIAN";
/// The longest message (a cgroup's path included).
const MAX_MESSAGE: usize = 8192;

/// The program the guardian runs, set by the process (the command: its own executable), and
/// whether it is this very executable (then its answer is not waited for: it is known to be a
/// guardian, and its start is no part of the session's).
static PROGRAM: Mutex<Option<(PathBuf, bool)>> = Mutex::new(None);

/// The process's guardian, while a session is registered.
static RUNNING: Mutex<Running> = Mutex::new(Running {
    child: None,
    sessions: 0,
});

struct Running {
    child: Option<Process>,
    sessions: usize,
}

/// The guardian's process and the supervisor's end of its socket.
struct Process {
    child: Child,
    channel: OwnedFd,
}

/// Names the program to run as this process's guardian (`<program> __guardian`), before
/// the library looks at `QUIETUS_GUARDIAN` and `PATH`.
pub fn set_program(program: impl Into<PathBuf>) {
    *PROGRAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((program.into(), false));
}

/// This process's own executable is a `quietus` binary (the command, `serve`): it is the
/// guardian's program, and its answer is not waited for.
pub(crate) fn use_own_executable(program: PathBuf) {
    *PROGRAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((program, true));
}

/// Why a session has no guardian
/// ([`SupervisorDeath::LeaderOnly`](crate::supervisor::SupervisorDeath::LeaderOnly)). Its text
/// is the one the report's `why_no_guardian` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardianUnavailable {
    /// Not Linux: no guardian outside Linux.
    NotLinux,
    /// No program to run as the guardian: none set, `QUIETUS_GUARDIAN` unset and no
    /// `quietus` in `PATH`.
    NoProgram,
    /// Nothing to guard (no process group above 1, no cgroup).
    NothingToGuard,
    /// The cgroup's path is too long to be told to the guardian.
    PathTooLong,
    /// No socket pair for the guardian.
    NoSocket(SystemError),
    /// The guardian's program cannot be started.
    CannotStart {
        /// The program.
        program: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// The program started but is no guardian: it did not answer in time.
    NoAnswer {
        /// The program.
        program: PathBuf,
    },
    /// The program started but is no guardian: it answered something else.
    WrongAnswer {
        /// The program.
        program: PathBuf,
        /// What it answered.
        answer: String,
    },
    /// The program started but its answer could not be read.
    Unreadable {
        /// The program.
        program: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// The running guardian does not take messages any more (it died, or was killed).
    NotListening(SystemError),
}

impl std::fmt::Display for GuardianUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuardianUnavailable::NotLinux => f.write_str("no guardian outside Linux"),
            GuardianUnavailable::NoProgram => write!(
                f,
                "no guardian program: no `quietus` in PATH, {PROGRAM_VARIABLE} unset \
                 (install the quietus command, or name it)"
            ),
            GuardianUnavailable::NothingToGuard => f.write_str("nothing to guard"),
            GuardianUnavailable::PathTooLong => {
                f.write_str("the cgroup's path is too long for the guardian")
            }
            GuardianUnavailable::NoSocket(e) => write!(f, "no socket for the guardian: {e}"),
            GuardianUnavailable::CannotStart { program, error } => {
                write!(
                    f,
                    "cannot start the guardian {}: {error}",
                    program.display()
                )
            }
            GuardianUnavailable::NoAnswer { program } => {
                write!(f, "{} is no guardian: no answer", program.display())
            }
            GuardianUnavailable::WrongAnswer { program, answer } => {
                write!(
                    f,
                    "{} is no guardian: it answered {answer:?}",
                    program.display()
                )
            }
            GuardianUnavailable::Unreadable { program, error } => {
                write!(f, "{} is no guardian: {error}", program.display())
            }
            GuardianUnavailable::NotListening(e) => {
                write!(f, "the guardian does not listen: {e}")
            }
        }
    }
}

/// A reason, not a chain: its text includes the system's error, which is no `source()`.
impl std::error::Error for GuardianUnavailable {}

/// The guardian's program: the one set, else `$QUIETUS_GUARDIAN`, else `quietus` in
/// `PATH`; or why there is none.
fn program() -> Result<(PathBuf, bool), GuardianUnavailable> {
    let set = PROGRAM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if let Some(program) = set {
        return Ok(program);
    }
    if let Some(named) = std::env::var_os(PROGRAM_VARIABLE).filter(|v| !v.is_empty()) {
        return Ok((PathBuf::from(named), false));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("quietus"))
        .find(|candidate| sys::check_executable(candidate).is_ok())
        .map(|found| (found, false))
        .ok_or(GuardianUnavailable::NoProgram)
}

/// One session's place in the guardian's care. Dropping it (or [`release`](Self::release))
/// tells the guardian the session ended properly.
#[derive(Debug)]
pub(crate) struct Guardian {
    id: u64,
    released: bool,
    /// The escapees told to the guardian (pid, start time).
    told: std::collections::HashSet<(Pid, u64)>,
}

impl Guardian {
    /// Registers session `id`'s process group `pgid` or cgroup `cgroup` (its folder, told
    /// before it is made) with this process's guardian, started now if none runs.
    pub(crate) fn start(
        id: u64,
        pgid: Option<Pid>,
        cgroup: Option<&Path>,
    ) -> Result<Guardian, GuardianUnavailable> {
        if !cfg!(target_os = "linux") {
            return Err(GuardianUnavailable::NotLinux);
        }
        let message = match (cgroup, pgid) {
            (Some(path), _) => {
                let mut m = format!("cgroup {id} ").into_bytes();
                m.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()));
                m
            }
            (None, Some(pgid)) if pgid.get() > 1 => format!("group {id} {pgid}").into_bytes(),
            _ => return Err(GuardianUnavailable::NothingToGuard),
        };
        if message.len() > MAX_MESSAGE {
            return Err(GuardianUnavailable::PathTooLong);
        }
        let mut running = lock_running();
        let process = match running.child.take() {
            Some(process) => running.child.insert(process),
            None => running.child.insert(Process::start()?),
        };
        if let Err(e) = process.send(&message) {
            // It died (or was killed): reaped now (the sessions it held lost their guard with
            // it); the next session starts another.
            let gone = running.child.take();
            drop(running);
            gone.into_iter().for_each(Process::stop);
            return Err(GuardianUnavailable::NotListening(e.into()));
        }
        running.sessions += 1;
        Ok(Guardian {
            id,
            released: false,
            told: std::collections::HashSet::new(),
        })
    }

    /// In group mode: processes of the tree seen outside its process group (`setsid`, another
    /// group), each by pid and start time. The guardian SIGKILLs them too when the supervisor
    /// dies — each checked by its start time first, so a reused pid is never hit.
    pub(crate) fn escapees(&mut self, escapees: impl IntoIterator<Item = (Pid, u64)>) {
        // Only the new ones, and the process-wide lock only for them: every sample of every
        // session in group mode passes its escapees here.
        let new: Vec<(Pid, u64)> = escapees
            .into_iter()
            .filter(|e| self.told.insert(*e))
            .collect();
        if new.is_empty() {
            return;
        }
        let running = lock_running();
        let Some(process) = &running.child else {
            return;
        };
        for (pid, start_time) in new {
            let message = format!("escapee {} {pid} {start_time}", self.id);
            if let Err(e) = process.send(message.as_bytes()) {
                log::debug!(
                    "session {}: telling the guardian of escapee {pid}: {e}",
                    self.id
                );
            }
        }
    }

    /// The session ended properly: the guardian forgets it. The end of the last session stops
    /// the guardian and reaps it (it holds nothing then, and exits at once).
    pub(crate) fn release(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        let mut running = lock_running();
        if let Some(process) = &running.child
            && let Err(e) = process.send(format!("end {}", self.id).as_bytes())
        {
            log::debug!("session {}: telling the guardian of the end: {e}", self.id);
        }
        running.sessions = running.sessions.saturating_sub(1);
        if running.sessions == 0 {
            let last = running.child.take();
            drop(running);
            last.into_iter().for_each(Process::stop);
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.end();
    }
}

fn lock_running() -> std::sync::MutexGuard<'static, Running> {
    RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Process {
    /// Starts the guardian by `exec` and waits for its answer.
    fn start() -> Result<Process, GuardianUnavailable> {
        let (program, own) = program()?;
        Process::start_program(&program, own)
    }

    /// Starts `program` as the guardian by `exec` and, unless it is this very executable
    /// (`own`), waits for its answer. (Then its answer is read by no one: the messages wait in
    /// the socket until it reads them, and its `exec` worked, or std's spawn would have
    /// failed.)
    fn start_program(program: &Path, own: bool) -> Result<Process, GuardianUnavailable> {
        let (ours, theirs) =
            rustix::net::socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, PAIR_FLAGS, None)
                .map_err(|e| GuardianUnavailable::NoSocket(io::Error::from(e).into()))?;
        no_leak(&ours, &theirs).map_err(|e| GuardianUnavailable::NoSocket(e.into()))?;
        let mut command = Command::new(program);
        command
            .arg0("quietus-guardian")
            .arg(SUBCOMMAND)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group: the ladder, and a terminal's Ctrl-C, do not reach it.
            .process_group(0);
        // Our own child, not an orphan to attribute to a session.
        let gate = orphans::spawn_gate();
        let child = command
            .spawn()
            .map_err(|e| GuardianUnavailable::CannotStart {
                program: program.to_owned(),
                error: e.into(),
            })?;
        orphans::spawned(Pid::of(&child));
        drop(gate);
        drop(command); // closes our copy of its end
        let process = Process {
            child,
            channel: ours,
        };
        if own {
            return Ok(process);
        }
        match process.hello(program) {
            Ok(()) => Ok(process),
            Err(why) => {
                let mut child = process.child;
                let _ = child.kill(); // our own child, not yet reaped
                let _ = child.wait();
                orphans::reaped(Pid::of(&child));
                Err(why)
            }
        }
    }

    /// Waits (bounded) for the answer of the guardian started from `program`.
    fn hello(&self, program: &Path) -> Result<(), GuardianUnavailable> {
        let program = program.to_owned();
        if !sys::wait_readable(self.channel.as_fd(), HANDSHAKE) {
            return Err(GuardianUnavailable::NoAnswer { program });
        }
        let mut answer = [0u8; 64];
        match rustix::net::recv(&self.channel, &mut answer, RecvFlags::DONTWAIT) {
            Ok((n, _)) if answer[..n] == *HELLO => Ok(()),
            Ok((n, _)) => Err(GuardianUnavailable::WrongAnswer {
                program,
                answer: String::from_utf8_lossy(&answer[..n]).into_owned(),
            }),
            Err(e) => Err(GuardianUnavailable::Unreadable {
                program,
                error: io::Error::from(e).into(),
            }),
        }
    }

    fn send(&self, message: &[u8]) -> io::Result<()> {
        loop {
            match rustix::net::send(&self.channel, message, NO_SIGPIPE) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => return Ok(()),
            }
        }
    }

    /// Closes the socket (the guardian, holding nothing, exits) and reaps it.
    fn stop(self) {
        let Process { mut child, channel } = self;
        drop(channel);
        if let Err(e) = child.wait() {
            log::debug!("reaping the guardian (pid {}): {e}", child.id());
        }
        orphans::reaped(Pid::of(&child));
    }
}

/// The guardian's whole life (`quietus __guardian`): answers, then holds what it is told
/// until its socket (stdin) ends; then ends what it still holds. Returns the exit status.
pub(crate) fn run() -> i32 {
    let channel = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(_) => return 2,
    };
    // Named for `ps` and `top` (its executable may be `/proc/self/exe`, named `exe`).
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::set_name(c"sw-guardian");
    if rustix::net::send(&channel, HELLO, NO_SIGPIPE).is_err() {
        return 2; // not a guardian's socket: nothing to guard
    }
    let mut held = Held::default();
    let mut buffer = vec![0u8; MAX_MESSAGE];
    loop {
        match rustix::io::read(&channel, &mut buffer) {
            Ok(0) => break, // the supervisor is gone (or let go of its last session)
            Ok(n) => held.take(&buffer[..n]),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    held.end_all();
    0
}

/// What the guardian holds, by session.
#[derive(Default)]
struct Held {
    sessions: HashMap<u64, Tree>,
    /// Each session's escapees in group mode: (pid, start time).
    escapees: HashMap<u64, Vec<(Pid, u64)>>,
}

enum Tree {
    Group(Pid),
    Cgroup(PathBuf),
}

impl Held {
    fn take(&mut self, message: &[u8]) {
        let mut parts = message.splitn(3, |b| *b == b' ');
        let (Some(verb), Some(id)) = (parts.next(), parts.next()) else {
            return;
        };
        let Some(id) = std::str::from_utf8(id).ok().and_then(|id| id.parse().ok()) else {
            return;
        };
        let rest = parts.next();
        match (verb, rest) {
            (b"end", _) => {
                self.sessions.remove(&id);
                self.escapees.remove(&id);
            }
            (b"escapee", Some(rest)) => {
                let text = std::str::from_utf8(rest).unwrap_or_default();
                if let Some((pid, start)) = text.split_once(' ')
                    && let (Some(pid), Ok(start)) = (Pid::parse(pid), start.parse::<u64>())
                {
                    self.escapees.entry(id).or_default().push((pid, start));
                }
            }
            (b"group", Some(pgid)) => {
                if let Some(pgid) = std::str::from_utf8(pgid).ok().and_then(Pid::parse) {
                    self.sessions.insert(id, Tree::Group(pgid));
                }
            }
            (b"cgroup", Some(path)) => {
                let path: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(path);
                self.sessions.insert(id, Tree::Cgroup(PathBuf::from(path)));
            }
            _ => {}
        }
    }

    /// The supervisor died: SIGKILL for every group and every escapee told (the one with the
    /// start time it was told: a pidfd opened, then the start time checked, then the signal),
    /// `cgroup.kill` and removal for every cgroup.
    fn end_all(self) {
        // (Only Linux has a guardian: elsewhere no escapee is ever told.)
        #[cfg(target_os = "linux")]
        for (pid, start_time) in self.escapees.into_values().flatten() {
            if let Ok(fd) = sys::pidfd_open(pid)
                && sys::read_stat(pid).is_some_and(|s| s.start_time == start_time)
            {
                let _ = sys::pidfd_signal(std::os::fd::AsFd::as_fd(&fd), sys::SIGKILL);
            }
        }
        for tree in self.sessions.into_values() {
            match tree {
                Tree::Group(pgid) => {
                    let _ = sys::kill_group(pgid, sys::SIGKILL);
                }
                Tree::Cgroup(path) => {
                    let cgroup = Cgroup::existing(path);
                    let _ = cgroup.kill();
                    let _ = cgroup.remove();
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The children of this process named `name` (zombies included).
    fn children_named(name: &str) -> Vec<u32> {
        let me = std::process::id();
        let tasks = std::fs::read_dir(format!("/proc/{me}/task")).expect("own threads");
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|c| {
                c.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .collect()
    }

    #[test]
    fn a_program_that_does_not_answer_is_no_guardian_and_is_reaped() {
        // `true` exits at once without a word: no guardian, and no zombie of it is left.
        let why = Process::start_program(Path::new("/bin/true"), false)
            .err()
            .expect("true is no guardian");
        assert!(why.to_string().contains("is no guardian"), "{why}");
        assert!(children_named("true").is_empty(), "reaped");
        let missing = Process::start_program(Path::new("/no/such/quietus"), false)
            .err()
            .expect("nothing to run");
        assert!(
            missing.to_string().contains("cannot start the guardian"),
            "{missing}"
        );
    }

    #[test]
    fn messages_register_and_end_sessions() {
        let mut held = Held::default();
        held.take(b"group 3 1234");
        held.take(b"cgroup 4 /sys/fs/cgroup/a b/quietus-1-4");
        held.take(b"nonsense");
        held.take(b"group x 12");
        assert_eq!(held.sessions.len(), 2);
        assert!(matches!(held.sessions.get(&3), Some(Tree::Group(pid)) if pid.get() == 1234));
        assert!(matches!(
            held.sessions.get(&4),
            Some(Tree::Cgroup(p)) if p == Path::new("/sys/fs/cgroup/a b/quietus-1-4")
        ));
        held.take(b"escapee 3 777 123456");
        held.take(b"escapee 3 778 x");
        held.take(b"escapee 3 0 5");
        assert_eq!(held.escapees[&3], [(Pid::parse("777").unwrap(), 123_456)]);
        held.take(b"end 3");
        assert_eq!(held.sessions.len(), 1);
        assert!(held.escapees.is_empty(), "forgotten with its session");
    }
}
