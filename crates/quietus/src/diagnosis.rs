//! What a stalled tree was doing: a [`Diagnosis`] of one snapshot of its processes, classified
//! as one [`StallKind`] (in a [`StaleReport`](crate::StaleReport), an
//! [`Event::Diagnosis`](crate::Event::Diagnosis), or from [`diagnose`] for any processes), and
//! the [`InputWait`] that ends a run blocked on a question nobody answers.
//!
//! Inside, the classifier is a pure function over the raw `/proc` texts read by
//! `process::sys::snapshot`, so that every rule is tested on recorded fixtures, without
//! processes.

use std::fmt;
use std::net::SocketAddr;

pub use crate::input_wait::InputWait;
use crate::process::sys::snapshot::{ProcSnap, ThreadSnap, syscall_args, syscall_name};

/// What a stalled tree was doing, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StallKind {
    /// Blocked reading its stdin or a terminal, directly or through poll/epoll on it: a
    /// question nobody will answer (a pager, an editor, a password prompt).
    AwaitingInput,
    /// Blocked on a TCP socket (reading, connecting, accepting); the peer is named.
    NetworkWait,
    /// Sleeping (`sleep`, `nanosleep`, `pause`).
    Sleeping,
    /// Stopped by a signal: SIGSTOP, or SIGTTIN/SIGTTOU from touching the terminal in the
    /// background.
    Stopped,
    /// Waiting for a child process to end.
    WaitingOnChild,
    /// Every thread parked on a lock (a futex, a file lock): a deadlock, most likely.
    LockWait,
    /// In uninterruptible (disk) wait.
    DiskWait,
    /// Running on the CPU, with no progress any source could see.
    Running,
    /// None of the above, or the processes could not be read (the summary says why).
    Unknown,
}

impl StallKind {
    /// The name used in reports (`"awaiting_input"`, `"network_wait"`…).
    pub fn name(self) -> &'static str {
        match self {
            StallKind::AwaitingInput => "awaiting_input",
            StallKind::NetworkWait => "network_wait",
            StallKind::Sleeping => "sleeping",
            StallKind::Stopped => "stopped",
            StallKind::WaitingOnChild => "waiting_on_child",
            StallKind::LockWait => "lock_wait",
            StallKind::DiskWait => "disk_wait",
            StallKind::Running => "running",
            StallKind::Unknown => "unknown",
        }
    }

    fn phrase(self) -> &'static str {
        match self {
            StallKind::AwaitingInput => "waiting for input",
            StallKind::NetworkWait => "waiting on the network",
            StallKind::Sleeping => "sleeping",
            StallKind::Stopped => "stopped",
            StallKind::WaitingOnChild => "waiting on a child",
            StallKind::LockWait => "waiting on a lock",
            StallKind::DiskWait => "in disk wait",
            StallKind::Running => "running without visible progress",
            StallKind::Unknown => "stalled for an unknown reason",
        }
    }
}

impl fmt::Display for StallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One process of the tree at the diagnosis.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessDiagnosis {
    /// Its pid.
    pub pid: u32,
    /// Its name (`comm`).
    pub name: String,
    /// Its state: `running`, `sleeping`, `disk`, `stopped`, `zombie` or `unknown`.
    pub state: &'static str,
    /// The kernel function it sleeps in (`do_wait`, `anon_pipe_read`), if any.
    pub wchan: Option<String>,
    /// The system call it is blocked in (`read`, `epoll_wait`…), if known.
    pub syscall: Option<String>,
    /// The descriptor that call waits on (for poll and epoll: the most telling one watched).
    pub fd: Option<i32>,
    /// What that descriptor is: `stdin (a pipe)`, `the terminal /dev/pts/3`, `TCP peer
    /// 127.0.0.1:8080`, `/dev/null`, a path, `a Unix socket or other socket`, `an epoll set`.
    pub target: Option<String>,
    /// What this process alone is doing.
    pub kind: StallKind,
    /// Why (a part of) it could not be read, if so.
    pub error: Option<String>,
}

/// One snapshot of every live process of a stalled tree, classified as one [`StallKind`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Diagnosis {
    /// The tree's kind.
    pub kind: StallKind,
    /// One line for people: `waiting for input — git (pid 4242) reads the terminal
    /// /dev/pts/3`.
    pub summary: String,
    /// Every process read, the child first.
    pub processes: Vec<ProcessDiagnosis>,
}

/// What a descriptor is, for the classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Input,
    Tcp,
    /// The master side of a terminal (`/dev/ptmx`): whoever reads it relays a terminal
    /// (`script`, `expect`, tmux, an agent running a tool with a tty); it is not input.
    Relay,
    Other,
}

/// Resolves a socket inode to its TCP peer.
pub(crate) type Peers<'a> = &'a dyn Fn(u64) -> Option<SocketAddr>;

/// Never more processes than this read in one diagnosis.
const MAX_PROCESSES: usize = 500;
/// Reading stops once this much time has gone (the rest are reported unread).
const BUDGET: std::time::Duration = std::time::Duration::from_millis(20);

/// Takes one snapshot of the processes `pids` (the child first) and classifies it. TCP peers
/// come from `known` (the network source's last sample), else from one socket-diagnostics
/// dump for the sockets it does not know.
#[cfg(all(target_os = "linux", not(feature = "portable")))]
pub(crate) fn diagnose_tree(pids: &[i32], known: Peers<'_>) -> Diagnosis {
    use crate::process::sys;
    let start = std::time::Instant::now();
    let mut snaps = Vec::with_capacity(pids.len().min(MAX_PROCESSES));
    for &pid in pids.iter().take(MAX_PROCESSES) {
        if start.elapsed() >= BUDGET {
            snaps.push(ProcSnap {
                pid,
                error: Some("not read: the diagnosis ran out of time".to_owned()),
                ..ProcSnap::default()
            });
            continue;
        }
        snaps.push(sys::snapshot::snapshot(pid));
    }
    let unknown: std::collections::HashSet<u64> = snaps
        .iter()
        .flat_map(|s| s.fds.iter())
        .filter_map(|(_, link)| sys::socket_inode(link.as_bytes()))
        .filter(|inode| known(*inode).is_none())
        .collect();
    let mut found = std::collections::HashMap::new();
    if !unknown.is_empty()
        && let Ok(mut diag) = sys::sockdiag::SockDiag::open()
    {
        let _ = diag.tcp_sockets(&mut |inode| unknown.contains(&inode), &mut found);
    }
    let peers = |inode: u64| known(inode).or_else(|| found.get(&inode).map(|s| s.peer));
    classify(&snaps, &peers)
}

/// Elsewhere (and in the portable backend): no `/proc` to read.
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
pub(crate) fn diagnose_tree(_pids: &[i32], _known: Peers<'_>) -> Diagnosis {
    Diagnosis {
        kind: StallKind::Unknown,
        summary: "stalled for an unknown reason — the diagnosis reads /proc (Linux only)"
            .to_owned(),
        processes: Vec::new(),
    }
}

/// One snapshot of the processes `pids` (the tree's root first), classified: what a
/// [`Session`](crate::Session) does when its child is judged stale, for a tree of your own.
/// TCP peers are found with one socket-diagnostics dump when a process holds a socket.
///
/// ```
/// use std::process::Command;
/// use quietus::diagnosis::StallKind;
///
/// let mut child = Command::new("sleep").arg("30").spawn()?;
/// let mut diagnosis = quietus::diagnosis::diagnose(&[child.id()]);
/// for _ in 0..2000 {
///     if diagnosis.kind == StallKind::Sleeping {
///         break;
///     }
///     std::thread::sleep(std::time::Duration::from_millis(10)); // until it sleeps
///     diagnosis = quietus::diagnosis::diagnose(&[child.id()]);
/// }
/// assert_eq!(diagnosis.kind, StallKind::Sleeping);
/// assert_eq!(diagnosis.processes[0].name, "sleep");
/// child.kill()?;
/// child.wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn diagnose(pids: &[u32]) -> Diagnosis {
    let pids: Vec<i32> = pids.iter().filter_map(|p| i32::try_from(*p).ok()).collect();
    diagnose_tree(&pids, &|_| None)
}

/// Classifies one snapshot of the tree (the child first).
pub(crate) fn classify(snaps: &[ProcSnap], peers: Peers<'_>) -> Diagnosis {
    let mut processes: Vec<ProcessDiagnosis> = snaps.iter().map(|s| process(s, peers)).collect();
    // A shell's `wait` builtin waits for a signal (SIGCHLD), not in wait4: a process waiting
    // for a signal while a child of its lives in the tree waits on that child.
    let parents: Vec<i32> = snaps
        .iter()
        .filter_map(|s| s.threads.first().and_then(|t| parent_of(&t.stat)))
        .collect();
    for p in &mut processes {
        let for_signal = matches!(p.syscall.as_deref(), Some("rt_sigsuspend" | "pause"));
        if p.kind == StallKind::Sleeping && for_signal && parents.contains(&(p.pid as i32)) {
            p.kind = StallKind::WaitingOnChild;
        }
    }
    let live: Vec<&ProcessDiagnosis> = processes.iter().filter(|p| p.state != "zombie").collect();
    let Some(root) = live.first() else {
        return Diagnosis {
            kind: StallKind::Unknown,
            summary: "stalled for an unknown reason — no live process could be read".to_owned(),
            processes,
        };
    };
    // A telling state anywhere in the tree wins; else what the child itself does (a shell
    // waiting on a sleeping child is waiting on a child).
    const TELLING: [StallKind; 6] = [
        StallKind::Stopped,
        StallKind::AwaitingInput,
        StallKind::NetworkWait,
        StallKind::DiskWait,
        StallKind::Running,
        StallKind::LockWait,
    ];
    let subject: &ProcessDiagnosis = TELLING
        .iter()
        .find_map(|kind| live.iter().find(|p| p.kind == *kind).copied())
        .or_else(|| {
            only_polls(root)
                .then(|| deepest_blocked(&live, snaps))
                .flatten()
        })
        .unwrap_or(root);
    let summary = format!(
        "{} — {} (pid {}) {}",
        subject.kind.phrase(),
        subject.name,
        subject.pid,
        detail(subject)
    );
    Diagnosis {
        kind: subject.kind,
        summary,
        processes,
    }
}

/// Whether the tree's root is blocked in a call that says nothing by itself: a poll, select or
/// epoll (or a read) on descriptors that are neither input nor the network (an eventfd, a pipe
/// or a socket to its own children, a terminal master it relays).
fn only_polls(root: &ProcessDiagnosis) -> bool {
    root.kind == StallKind::Unknown && root.error.is_none() && root.syscall.is_some()
}

/// The process the others wait on: the deepest live descendant with a kind of its own
/// (sleeping, waiting on a lock…), else the deepest one waiting on a child; `None` when no
/// descendant says more than the root. Depth is counted along the parent links of the
/// snapshot.
fn deepest_blocked<'a>(
    live: &[&'a ProcessDiagnosis],
    snaps: &[ProcSnap],
) -> Option<&'a ProcessDiagnosis> {
    let parent: std::collections::HashMap<u32, i32> = snaps
        .iter()
        .filter_map(|s| Some((s.pid as u32, parent_of(&s.threads.first()?.stat)?)))
        .collect();
    let alive: std::collections::HashSet<i32> = live.iter().map(|p| p.pid as i32).collect();
    let depth = |pid: u32| {
        let (mut depth, mut at) = (0usize, pid);
        while let Some(&up) = parent.get(&at)
            && depth < live.len()
            && alive.contains(&up)
        {
            depth += 1;
            at = up as u32;
        }
        depth
    };
    let deepest = |waiting: bool| {
        // The first in tree order among the deepest (`max_by_key` keeps the last).
        live.iter()
            .skip(1)
            .rev()
            .filter(|p| p.kind != StallKind::Unknown)
            .filter(|p| (p.kind == StallKind::WaitingOnChild) == waiting)
            .max_by_key(|p| depth(p.pid))
            .copied()
    };
    deepest(false).or_else(|| deepest(true))
}

/// What the subject process does, after its name.
fn detail(p: &ProcessDiagnosis) -> String {
    let target = p.target.as_deref().unwrap_or("something unknown");
    let call = p.syscall.as_deref().unwrap_or("an unknown call");
    match p.kind {
        StallKind::AwaitingInput | StallKind::NetworkWait => match call {
            "read" | "readv" | "pread64" | "recvfrom" | "recvmsg" => format!("reads {target}"),
            "connect" => format!("connects to {target}"),
            "accept" | "accept4" => format!("waits for a connection on {target}"),
            _ => format!("waits in {call} on {target}"),
        },
        StallKind::Sleeping => format!("sleeps ({call})"),
        StallKind::Stopped => {
            "is stopped by a signal (SIGSTOP, or SIGTTIN/SIGTTOU from the terminal)".to_owned()
        }
        StallKind::WaitingOnChild => format!("waits for a child to end ({call})"),
        StallKind::LockWait => format!("has every thread parked on a lock ({call})"),
        StallKind::DiskWait => format!(
            "is in uninterruptible wait in {}",
            p.wchan.as_deref().unwrap_or("the kernel")
        ),
        StallKind::Running => "is on the CPU".to_owned(),
        StallKind::Unknown => match (&p.error, &p.syscall) {
            (Some(error), _) => format!("could not be read: {error}"),
            (None, Some(call)) => format!("is blocked in {call} on {target}"),
            (None, None) => "is blocked outside any known system call".to_owned(),
        },
    }
}

/// The name and state letter of a `stat` line.
fn name_and_state(stat: &str) -> Option<(&str, u8)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let state = stat.get(close + 1..)?.trim_start().bytes().next()?;
    Some((stat.get(open + 1..close)?, state))
}

/// The parent pid of a `stat` line.
fn parent_of(stat: &str) -> Option<i32> {
    let close = stat.rfind(')')?;
    stat.get(close + 1..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn state_name(state: u8) -> &'static str {
    match state {
        b'R' => "running",
        b'S' | b'I' => "sleeping",
        b'D' => "disk",
        b'T' | b't' => "stopped",
        b'Z' | b'X' => "zombie",
        _ => "unknown",
    }
}

/// One thread's verdict: its kind, call, descriptor and that descriptor's description.
struct Blocked {
    kind: StallKind,
    call: Option<String>,
    fd: Option<i32>,
    target: Option<String>,
}

fn process(snap: &ProcSnap, peers: Peers<'_>) -> ProcessDiagnosis {
    let main = snap.threads.first();
    let (name, state) = main
        .and_then(|t| name_and_state(&t.stat))
        .map_or(("?".to_owned(), "unknown"), |(n, s)| {
            (n.to_owned(), state_name(s))
        });
    let wchan = main
        .map(|t| t.wchan.trim().to_owned())
        .filter(|w| !w.is_empty() && w != "0");
    let threads: Vec<Blocked> = snap
        .threads
        .iter()
        .map(|t| thread(t, snap, peers))
        .collect();
    // Every thread on a lock is a lock wait; otherwise the most telling thread speaks.
    const ORDER: [StallKind; 8] = [
        StallKind::Stopped,
        StallKind::AwaitingInput,
        StallKind::NetworkWait,
        StallKind::DiskWait,
        StallKind::Running,
        StallKind::WaitingOnChild,
        StallKind::Sleeping,
        StallKind::Unknown,
    ];
    let all_locked = !threads.is_empty() && threads.iter().all(|t| t.kind == StallKind::LockWait);
    let chosen = if all_locked {
        threads.first()
    } else {
        ORDER
            .iter()
            .find_map(|kind| threads.iter().find(|t| t.kind == *kind))
            .or(threads.first())
    };
    let mut out = ProcessDiagnosis {
        pid: snap.pid as u32,
        name,
        state,
        wchan,
        syscall: None,
        fd: None,
        target: None,
        kind: StallKind::Unknown,
        error: snap.error.clone(),
    };
    if let Some(b) = chosen {
        out.kind = b.kind;
        out.syscall = b.call.clone();
        out.fd = b.fd;
        out.target = b.target.clone();
    }
    out
}

fn thread(t: &ThreadSnap, snap: &ProcSnap, peers: Peers<'_>) -> Blocked {
    let mut b = Blocked {
        kind: StallKind::Unknown,
        call: None,
        fd: None,
        target: None,
    };
    let state = name_and_state(&t.stat).map_or(b'?', |(_, s)| s);
    match state {
        b'T' | b't' => b.kind = StallKind::Stopped,
        b'D' => b.kind = StallKind::DiskWait,
        b'R' => b.kind = StallKind::Running,
        b'Z' | b'X' => b.kind = StallKind::Unknown,
        _ if t.syscall == "running" => b.kind = StallKind::Running,
        _ => blocked_in_call(t, snap, peers, &mut b),
    }
    b
}

/// A sleeping thread: what its system call waits on.
fn blocked_in_call(t: &ThreadSnap, snap: &ProcSnap, peers: Peers<'_>, b: &mut Blocked) {
    let Some((number, args)) = syscall_args(&t.syscall) else {
        return;
    };
    let Some(call) = syscall_name(number) else {
        b.call = Some(format!("syscall {number}"));
        return;
    };
    b.call = Some(call.to_owned());
    let first_fd = i32::try_from(args[0]).ok();
    b.kind = match call {
        "read" | "readv" | "pread64" | "recvfrom" | "recvmsg" | "connect" | "accept"
        | "accept4" => {
            b.fd = first_fd;
            let (class, target) = describe(first_fd.unwrap_or(-1), snap, peers);
            b.target = Some(target);
            match class {
                Class::Input if !call.starts_with("recv") => StallKind::AwaitingInput,
                Class::Tcp => StallKind::NetworkWait,
                _ => StallKind::Unknown,
            }
        }
        "poll" | "ppoll" | "select" | "pselect6" => watched(t.polled.as_deref(), snap, peers, b),
        "epoll_wait" | "epoll_pwait" | "epoll_pwait2" => {
            let set = snap
                .epoll
                .iter()
                .find(|(fd, _)| Some(*fd) == first_fd)
                .map(|(_, fds)| fds.as_slice());
            watched(set, snap, peers, b)
        }
        "wait4" | "waitid" => StallKind::WaitingOnChild,
        "nanosleep" | "clock_nanosleep" | "pause" | "rt_sigsuspend" | "rt_sigtimedwait" => {
            StallKind::Sleeping
        }
        "futex" | "futex_waitv" | "flock" | "fcntl" => StallKind::LockWait,
        _ => StallKind::Unknown,
    };
}

/// A poll, select or epoll on `fds` (unknown: `None`): input first, then a TCP socket.
fn watched(fds: Option<&[i32]>, snap: &ProcSnap, peers: Peers<'_>, b: &mut Blocked) -> StallKind {
    let Some(fds) = fds else {
        b.target = Some("descriptors that could not be read".to_owned());
        return StallKind::Unknown;
    };
    if fds.is_empty() {
        b.target = Some("no descriptor (a timed wait)".to_owned());
        return StallKind::Sleeping;
    }
    let mut described: Vec<(i32, Class, String)> = fds
        .iter()
        .map(|fd| {
            let (class, target) = describe(*fd, snap, peers);
            (*fd, class, target)
        })
        .collect();
    // A relay watching its own input as well as a terminal master passes that input on to
    // the program on the terminal: what the relay reads is the program's question, not its
    // own (that program, reading the slave side, is the one awaiting input, if any).
    if let Some(at) = described.iter().position(|(_, c, _)| *c == Class::Relay) {
        described.rotate_left(at);
        for (_, class, _) in &mut described {
            if *class == Class::Input {
                *class = Class::Other;
            }
        }
    }
    for (want, kind) in [
        (Class::Input, StallKind::AwaitingInput),
        (Class::Tcp, StallKind::NetworkWait),
    ] {
        if let Some((fd, _, target)) = described.iter().find(|(_, c, _)| *c == want) {
            b.fd = Some(*fd);
            b.target = Some(target.clone());
            return kind;
        }
    }
    let (fd, _, target) = &described[0];
    b.fd = Some(*fd);
    b.target = Some(target.clone());
    StallKind::Unknown
}

/// What descriptor `fd` of the process is.
fn describe(fd: i32, snap: &ProcSnap, peers: Peers<'_>) -> (Class, String) {
    let Some((_, link)) = snap.fds.iter().find(|(n, _)| *n == fd) else {
        return (
            Class::Other,
            format!("descriptor {fd} (not open, or unreadable)"),
        );
    };
    if link == "/dev/ptmx" || link == "/dev/pts/ptmx" {
        return (
            Class::Relay,
            format!("the terminal master {link} (a relay)"),
        );
    }
    let terminal =
        link.starts_with("/dev/pts/") || link.starts_with("/dev/tty") || link == "/dev/console";
    if terminal {
        return (Class::Input, format!("the terminal {link}"));
    }
    if let Some(inode) = crate::process::sys::socket_inode(link.as_bytes()) {
        return match peers(inode) {
            Some(peer) => (Class::Tcp, format!("TCP peer {peer}")),
            None if fd == 0 => (Class::Input, "stdin (a socket)".to_owned()),
            None => (Class::Other, "a Unix socket or other socket".to_owned()),
        };
    }
    match (fd, link.as_str()) {
        (_, "/dev/null") => (Class::Other, "/dev/null".to_owned()),
        (0, l) if l.starts_with("pipe:") => (Class::Input, "stdin (a pipe)".to_owned()),
        (_, l) if l.starts_with("pipe:") => (Class::Other, "a pipe".to_owned()),
        (_, "anon_inode:[eventpoll]") => (Class::Other, "an epoll set".to_owned()),
        (_, l) => (Class::Other, l.to_owned()),
    }
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests;
