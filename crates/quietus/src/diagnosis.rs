//! What a stalled tree was doing: a [`Diagnosis`] of one snapshot of its processes, classified
//! as one [`StallKind`] (in a [`StaleReport`](crate::outcome::StaleReport), an
//! [`Event::Diagnosis`](crate::Event::Diagnosis), or from [`diagnose`] for any processes), and
//! the [`InputWait`] that ends a run blocked on a question nobody answers.
//!
//! Inside, the classifier is a pure function over the raw `/proc` texts read by
//! `process::sys::snapshot`, so that every rule is tested on recorded fixtures, without
//! processes.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::pid::Pid;
pub use crate::process::sys::snapshot::ReadingProblem;
use crate::process::sys::snapshot::{ProcSnap, ThreadSnap, syscall_args, syscall_name};

mod describe;
#[cfg(target_os = "linux")]
mod gather;
use describe::{describe, described_set, network_of, under_way};
#[cfg(target_os = "linux")]
use gather::{describe_sockets, snapshots};

/// What a stalled tree was doing, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StallKind {
    /// Blocked reading input from outside the tree (quietus's stdin, a terminal, a FIFO no
    /// process of the tree writes), directly or through poll/epoll on it: a question nobody
    /// will answer (a pager, an editor, a password prompt).
    AwaitingInput,
    /// Blocked on a socket whose other end is outside the tree (reading, connecting,
    /// accepting): TCP with a request outstanding or closed by the peer, UDP, Unix; the peer
    /// (or the process at the other end) is named.
    NetworkWait,
    /// Sleeping (`sleep`, `nanosleep`, `pause`), or an event loop with nothing outstanding.
    Sleeping,
    /// Stopped by a signal: SIGSTOP, or SIGTTIN/SIGTTOU from touching the terminal in the
    /// background.
    Stopped,
    /// Waiting on another process of the tree: a child to end, the writer of a pipe or FIFO
    /// it reads, the other end of a Unix socket ([`ProcessDiagnosis::waits_on`]).
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
    /// Every kind (for a client's list of the names: `quietus serve --schema`).
    pub const ALL: &'static [StallKind] = &[
        StallKind::AwaitingInput,
        StallKind::NetworkWait,
        StallKind::Sleeping,
        StallKind::Stopped,
        StallKind::WaitingOnChild,
        StallKind::LockWait,
        StallKind::DiskWait,
        StallKind::Running,
        StallKind::Unknown,
    ];

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
    pub pid: Pid,
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
    /// The process of the tree it waits on, when it waits on one: its child (`wait4`), the
    /// writer of a pipe or FIFO it reads, the other end of a Unix socket. The diagnosis
    /// follows these waits to the process blocked on its own account.
    pub waits_on: Option<Pid>,
    /// Why (a part of) it could not be read, if so.
    pub error: Option<ReadingProblem>,
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
    /// What comes from outside the tree: quietus's stdin, a terminal's slave side, a FIFO no
    /// process of the tree holds open for writing.
    Input,
    /// A TCP socket.
    Tcp {
        /// Bytes were sent after the last bytes received: a request waits for its answer.
        outstanding: bool,
        /// The connection's last bytes, either way, moved with the tree's last activity: an
        /// exchange under way (a response begun and stopped; see [`Tree::recent`]) unless the
        /// process has a child to wait on.
        recent: bool,
        /// The peer closed the connection and it was not read to its end (`CLOSE_WAIT`).
        closed: bool,
        /// Milliseconds since its last bytes moved either way (`u32::MAX`: not known): of two
        /// connections under way, the one that moved last speaks.
        since: u32,
    },
    /// Another socket whose other end is outside the tree (UDP, Unix).
    Socket,
    /// A listening socket: it has no peer, and waits for clients to connect (a daemon's
    /// socket). An event loop watching it waits on no one.
    Listener,
    /// A pipe, FIFO or Unix socket whose other end this process of the tree holds.
    Process(Pid),
    /// The master side of a terminal (`/dev/ptmx`): whoever reads it relays a terminal
    /// (`script`, `expect`, tmux, an agent running a tool with a tty); it is not input.
    Relay,
    Other,
}

/// What the diagnosis knows of one socket, by its inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sock {
    /// A TCP socket.
    Tcp {
        /// Its peer.
        peer: SocketAddr,
        /// Its own address, when known: a connection whose peer is another socket of the
        /// tree (a loopback connection between two of its processes) is no network wait.
        local: Option<SocketAddr>,
        /// Its TCP state (1 established, 2 connecting, 8 closed by the peer…).
        state: u8,
        /// Milliseconds since the last payload sent and received, when known.
        last_data: Option<(u32, u32)>,
        /// Bytes were sent (and acknowledged) and none ever received: a request never
        /// answered, even when it left in the millisecond the connection was made (whose
        /// handshake counts as the last bytes received).
        unanswered: bool,
    },
    /// A UDP socket: its peer (unspecified when never connected) and its local address.
    Udp {
        /// Its peer.
        peer: SocketAddr,
        /// Its local address.
        local: SocketAddr,
    },
    /// A Unix socket.
    Unix {
        /// The path it is bound to (an accepted socket has its listener's).
        path: Option<String>,
        /// The inode of its other end.
        peer: Option<u64>,
        /// The process outside the tree that holds the other end, if found.
        holder: Option<(Pid, String)>,
    },
}

/// TCP's `CLOSE_WAIT`: the peer closed; the bytes before its end were not all read.
const TCP_CLOSE_WAIT: u8 = 8;
/// TCP's `SYN_SENT`: connecting.
const TCP_SYN_SENT: u8 = 2;

impl Sock {
    /// Whether bytes were sent after the last bytes received (or none ever were).
    fn outstanding(&self) -> bool {
        match self {
            Sock::Tcp {
                unanswered: true, ..
            } => true,
            Sock::Tcp {
                last_data: Some((sent, received)),
                ..
            } => sent < received,
            _ => false,
        }
    }

    /// Whether (with `recent`, in milliseconds) its last bytes, either way, moved no longer
    /// ago than that.
    fn recent(&self, recent: Option<u64>) -> bool {
        recent.is_some_and(|r| u64::from(self.since_last_data()) <= r)
    }

    /// Milliseconds since its last bytes moved either way (`u32::MAX`: not known).
    fn since_last_data(&self) -> u32 {
        match self {
            Sock::Tcp {
                last_data: Some((sent, received)),
                ..
            } => *sent.min(received),
            _ => u32::MAX,
        }
    }

    fn closed(&self) -> bool {
        matches!(self, Sock::Tcp { state, .. } if *state == TCP_CLOSE_WAIT)
    }
}

/// Resolves a socket inode to what is known of it.
pub(crate) type Peers<'a> = &'a dyn Fn(u64) -> Option<Sock>;

/// Never more processes than this read in one diagnosis.
const MAX_PROCESSES: usize = 500;
/// Reading stops once this much time has gone (the rest are reported unread).
const BUDGET: std::time::Duration = std::time::Duration::from_millis(20);
/// Looking for the process outside the tree at the other end of a Unix socket stops after
/// this long.
#[cfg(target_os = "linux")]
const HOLDER_BUDGET: std::time::Duration = std::time::Duration::from_millis(30);

/// Takes one snapshot of the processes `pids` (the child first) and classifies it. Its
/// sockets are described by one socket-diagnostics dump (TCP with `tcp_info`, UDP, and Unix
/// when a process holds a socket neither TCP nor UDP); a TCP peer the dump missed comes from
/// `known` (the network source's last sample). `recent` and `redrawing`: see
/// [`classify_lately`].
#[cfg(all(target_os = "linux", not(feature = "portable")))]
pub(crate) fn diagnose_tree(
    pids: &[Pid],
    known: &dyn Fn(u64) -> Option<SocketAddr>,
    recent: Option<Duration>,
    redrawing: bool,
) -> Diagnosis {
    let first = diagnose_once(pids, known, recent, redrawing);
    if first.kind != StallKind::Running {
        return first;
    }
    // On the CPU at one instant: a poller awake for a millisecond looks the same as a loop
    // that never sleeps. A second look a moment later tells them apart; work still runs.
    std::thread::sleep(SECOND_LOOK);
    let second = diagnose_once(pids, known, recent, redrawing);
    if second.kind == StallKind::Unknown {
        first
    } else {
        second
    }
}

/// How long after a look that found the tree running the second look is taken.
#[cfg(all(target_os = "linux", not(feature = "portable")))]
const SECOND_LOOK: Duration = Duration::from_millis(10);

/// One snapshot of `pids`, classified ([`diagnose_tree`]).
#[cfg(all(target_os = "linux", not(feature = "portable")))]
fn diagnose_once(
    pids: &[Pid],
    known: &dyn Fn(u64) -> Option<SocketAddr>,
    recent: Option<Duration>,
    redrawing: bool,
) -> Diagnosis {
    let snaps = snapshots(pids);
    let socks = describe_sockets(&snaps);
    let peers = |inode: u64| {
        socks.get(&inode).cloned().or_else(|| {
            known(inode).map(|peer| Sock::Tcp {
                peer,
                local: None,
                state: 1,
                last_data: None,
                unanswered: false,
            })
        })
    };
    classify_lately(&snaps, &peers, recent, redrawing)
}

/// Elsewhere (and in the portable backend): no `/proc` to read.
#[cfg(any(not(target_os = "linux"), feature = "portable"))]
pub(crate) fn diagnose_tree(
    _pids: &[Pid],
    _known: &dyn Fn(u64) -> Option<SocketAddr>,
    _recent: Option<Duration>,
    _redrawing: bool,
) -> Diagnosis {
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
/// use quietus::Pid;
/// use quietus::diagnosis::StallKind;
///
/// let mut child = Command::new("sleep").arg("30").spawn()?;
/// let mut diagnosis = quietus::diagnosis::diagnose(&[Pid::of(&child)]);
/// for _ in 0..2000 {
///     if diagnosis.kind == StallKind::Sleeping {
///         break;
///     }
///     std::thread::sleep(std::time::Duration::from_millis(10)); // until it sleeps
///     diagnosis = quietus::diagnosis::diagnose(&[Pid::of(&child)]);
/// }
/// assert_eq!(diagnosis.kind, StallKind::Sleeping);
/// assert_eq!(diagnosis.processes[0].name, "sleep");
/// child.kill()?;
/// child.wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn diagnose(pids: &[Pid]) -> Diagnosis {
    diagnose_tree(pids, &|_| None, None, false)
}

/// The tree as the classifier sees it: the snapshot, its sockets, and who holds what.
struct Tree<'a> {
    peers: Peers<'a>,
    /// How long ago the tree's last activity was, plus the lag of the sampled sources, in
    /// milliseconds (`None`: not known). A TCP connection whose last bytes moved within this
    /// took part in the tree's last activity: the tree went quiet with that exchange, so it
    /// is under way (a response begun and stopped), not an idle pooled connection, even when
    /// its last bytes were received.
    recent: Option<u64>,
    /// The tree's output went on showing nothing new after its last activity (a spinner, a
    /// bar redrawn the same): a program that watches its terminal and a connection under
    /// way animates a wait on that connection; one idle at its prompt draws nothing.
    redrawing: bool,
    /// Pipe and FIFO links (`pipe:[N]`, a FIFO's path) to the processes holding them open
    /// for writing.
    writers: std::collections::HashMap<&'a str, Vec<Pid>>,
    /// Socket inodes to the processes holding them.
    sockets: std::collections::HashMap<u64, Vec<Pid>>,
    /// The local addresses of the tree's TCP sockets, to the processes holding them.
    tcp_locals: std::collections::HashMap<SocketAddr, Vec<Pid>>,
    /// Process names by pid.
    names: std::collections::HashMap<Pid, String>,
    /// The snapshots by pid.
    snaps: std::collections::HashMap<Pid, &'a ProcSnap>,
}

impl<'a> Tree<'a> {
    fn new(snaps: &'a [ProcSnap], peers: Peers<'a>, recent: Option<Duration>) -> Self {
        let mut tree = Tree {
            peers,
            recent: recent.map(|r| u64::try_from(r.as_millis()).unwrap_or(u64::MAX)),
            redrawing: false,
            writers: Default::default(),
            sockets: Default::default(),
            tcp_locals: Default::default(),
            names: Default::default(),
            snaps: Default::default(),
        };
        for s in snaps {
            let pid = s.pid;
            tree.snaps.insert(pid, s);
            if let Some((name, _)) = s.threads.first().and_then(|t| name_and_state(&t.stat)) {
                tree.names.insert(pid, name.to_owned());
            }
            for (fd, link) in &s.fds {
                if s.writable.contains(fd) {
                    tree.writers.entry(link.as_str()).or_default().push(pid);
                }
                if let Some(inode) = crate::process::sys::socket_inode(link.as_bytes()) {
                    tree.sockets.entry(inode).or_default().push(pid);
                    if let Some(Sock::Tcp {
                        local: Some(local), ..
                    }) = (tree.peers)(inode)
                    {
                        tree.tcp_locals.entry(local).or_default().push(pid);
                    }
                }
            }
        }
        tree
    }

    /// Whether process `pid` of the tree holds a connection with an exchange under way
    /// ([`under_way`]).
    fn has_under_way(&self, pid: Pid) -> bool {
        self.snaps.get(&pid).is_some_and(|snap| {
            sockets_of(snap, self)
                .iter()
                .any(|(_, class, _)| under_way(*class, self))
        })
    }

    /// `name (pid N)`.
    fn who(&self, pid: Pid) -> String {
        format!(
            "{} (pid {pid})",
            self.names.get(&pid).map_or("?", String::as_str)
        )
    }

    /// Another process of the tree than `me` among `pids`.
    fn other(pids: Option<&Vec<Pid>>, me: Pid) -> Option<Pid> {
        pids?.iter().copied().find(|p| *p != me)
    }
}

/// Classifies one snapshot of the tree (the child first), when the tree's last activity is not
/// known.
#[cfg(test)]
pub(crate) fn classify(snaps: &[ProcSnap], peers: Peers<'_>) -> Diagnosis {
    classify_recent(snaps, peers, None)
}

/// Classifies one snapshot of the tree (the child first). `recent`: how long ago the tree's
/// last activity was, plus the lag of the sources that sample ([`Tree::recent`]).
#[cfg(test)]
pub(crate) fn classify_recent(
    snaps: &[ProcSnap],
    peers: Peers<'_>,
    recent: Option<Duration>,
) -> Diagnosis {
    classify_lately(snaps, peers, recent, false)
}

/// Classifies one snapshot of the tree (the child first). `recent`: how long ago the tree's
/// last activity was, plus the lag of the sources that sample ([`Tree::recent`]);
/// `redrawing`: its output went on showing nothing new since ([`Tree::redrawing`]).
pub(crate) fn classify_lately(
    snaps: &[ProcSnap],
    peers: Peers<'_>,
    recent: Option<Duration>,
    redrawing: bool,
) -> Diagnosis {
    let mut tree = Tree::new(snaps, peers, recent);
    tree.redrawing = redrawing;
    let (mut processes, weak): (Vec<ProcessDiagnosis>, Vec<bool>) =
        snaps.iter().map(|s| process(s, &tree)).unzip();
    waits_for_children(snaps, &mut processes);
    let live: Vec<(&ProcessDiagnosis, bool)> = processes
        .iter()
        .zip(weak.iter().copied())
        .filter(|(p, _)| p.state != "zombie")
        .collect();
    let Some((root, _)) = live.first().copied() else {
        return Diagnosis {
            kind: StallKind::Unknown,
            summary: "stalled for an unknown reason — no live process could be read".to_owned(),
            processes,
        };
    };
    // The deepest blocked process is the cause. A process waiting on another of the tree (a
    // child, the writer of a pipe it reads) passes the question on; so does an event loop
    // watching several descriptors while anything else in the tree is blocked on its own
    // account. Among the processes blocked on their own account the most telling kind wins,
    // the deepest first; then the event loops; then the end of the chain of waits.
    const ORDER: [StallKind; 7] = [
        StallKind::Stopped,
        StallKind::AwaitingInput,
        StallKind::NetworkWait,
        StallKind::DiskWait,
        StallKind::Running,
        StallKind::LockWait,
        StallKind::Sleeping,
    ];
    let depth = depths(snaps, &live);
    let pick = |want_weak: bool| {
        ORDER.iter().find_map(|kind| {
            live.iter()
                .filter(|(p, weak)| p.kind == *kind && *weak == want_weak)
                // The first in tree order among the deepest (`max_by_key` keeps the last).
                .rev()
                .max_by_key(|(p, _)| depth(p.pid))
                .map(|(p, _)| *p)
        })
    };
    // A program that watches its terminal all the time while another process of the tree (its
    // daemon) holds a connection with an exchange under way waits on that connection, as when
    // it holds the connection itself (see `watched`).
    let under_way = || {
        live.iter()
            .filter(|(p, weak)| {
                *weak && p.kind == StallKind::NetworkWait && tree.has_under_way(p.pid)
            })
            .rev()
            .max_by_key(|(p, _)| depth(p.pid))
            .map(|(p, _)| *p)
    };
    let subject: &ProcessDiagnosis = pick(false)
        .or_else(under_way)
        .or_else(|| pick(true))
        .or_else(|| end_of_waits(&live, &depth))
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

/// A shell's `wait` builtin waits for a signal (SIGCHLD), not in wait4: a process waiting for
/// a signal while a child of its lives in the tree waits on that child; a process waiting for
/// a child (`wait4`, a signal) names it in `waits_on`, a live one first.
fn waits_for_children(snaps: &[ProcSnap], processes: &mut [ProcessDiagnosis]) {
    let parents: Vec<(Pid, Pid)> = snaps
        .iter()
        .filter_map(|s| Some((s.pid, s.threads.first().and_then(|t| parent_of(&t.stat))?)))
        .collect();
    let zombies: Vec<Pid> = processes
        .iter()
        .filter(|p| p.state == "zombie")
        .map(|p| p.pid)
        .collect();
    for p in processes.iter_mut() {
        let for_signal = matches!(p.syscall.as_deref(), Some("rt_sigsuspend" | "pause"));
        let for_child = matches!(p.syscall.as_deref(), Some("wait4" | "waitid"));
        // Its child, a live one first.
        let children = || parents.iter().filter(|(_, parent)| *parent == p.pid);
        let child = children()
            .find(|(child, _)| !zombies.contains(child))
            .or_else(|| children().next())
            .map(|(child, _)| *child);
        if p.kind == StallKind::Sleeping && for_signal && child.is_some() {
            p.kind = StallKind::WaitingOnChild;
            p.target = None;
        }
        if p.kind == StallKind::WaitingOnChild && (for_signal || for_child) {
            p.waits_on = child;
        }
    }
}

/// Each live process's depth in the tree, counted along the parent links of the snapshot.
fn depths<'a>(
    snaps: &[ProcSnap],
    live: &[(&ProcessDiagnosis, bool)],
) -> impl Fn(Pid) -> usize + 'a {
    let parent: std::collections::HashMap<Pid, Pid> = snaps
        .iter()
        .filter_map(|s| Some((s.pid, parent_of(&s.threads.first()?.stat)?)))
        .collect();
    let alive: std::collections::HashSet<Pid> = live.iter().map(|(p, _)| p.pid).collect();
    let limit = live.len();
    move |pid: Pid| {
        let (mut depth, mut at) = (0usize, pid);
        while let Some(&up) = parent.get(&at)
            && depth < limit
            && alive.contains(&up)
        {
            depth += 1;
            at = up;
        }
        depth
    }
}

/// With nothing blocked on its own account: the deepest process waiting on another (a chain
/// of waits ends there), else the deepest one only polling, `None` when only the root is
/// left.
fn end_of_waits<'a>(
    live: &[(&'a ProcessDiagnosis, bool)],
    depth: &dyn Fn(Pid) -> usize,
) -> Option<&'a ProcessDiagnosis> {
    let deepest = |kind: StallKind| {
        live.iter()
            .skip(1)
            .filter(|(p, _)| p.kind == kind && p.error.is_none() && p.syscall.is_some())
            .rev()
            .max_by_key(|(p, _)| depth(p.pid))
            .map(|(p, _)| *p)
    };
    deepest(StallKind::WaitingOnChild).or_else(|| deepest(StallKind::Unknown))
}

/// What the subject process does, after its name.
fn detail(p: &ProcessDiagnosis) -> String {
    let target = p.target.as_deref().unwrap_or("something unknown");
    let call = p.syscall.as_deref().unwrap_or("an unknown call");
    let reads = matches!(call, "read" | "readv" | "pread64" | "recvfrom" | "recvmsg");
    match p.kind {
        // A Unix socket's other end is a process: "waits on dockerd (pid 812) over …".
        StallKind::NetworkWait if !target.starts_with("TCP ") && !target.starts_with("UDP ") => {
            format!("waits on {target} ({call})")
        }
        StallKind::AwaitingInput | StallKind::NetworkWait => match call {
            _ if reads => format!("reads {target}"),
            "connect" => format!("connects to {target}"),
            "accept" | "accept4" => format!("waits for a connection on {target}"),
            "open" | "openat" | "openat2" => format!("opens {target}"),
            _ => format!("waits in {call} on {target}"),
        },
        StallKind::Sleeping => match &p.target {
            Some(target) if p.fd.is_some() || polls(call) => format!("waits in {call} on {target}"),
            Some(target) => format!("sleeps ({call}) between exchanges with {target}"),
            None => format!("sleeps ({call})"),
        },
        StallKind::Stopped => {
            "is stopped by a signal (SIGSTOP, or SIGTTIN/SIGTTOU from the terminal)".to_owned()
        }
        StallKind::WaitingOnChild => match &p.target {
            Some(target) if reads => format!("reads {target}"),
            Some(target) => format!("waits in {call} on {target}"),
            None => format!("waits for a child to end ({call})"),
        },
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

/// Whether `call` waits on a set of descriptors.
fn polls(call: &str) -> bool {
    matches!(
        call,
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait" | "epoll_pwait2"
    )
}

/// The name and state letter of a `stat` line.
fn name_and_state(stat: &str) -> Option<(&str, u8)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let state = stat.get(close + 1..)?.trim_start().bytes().next()?;
    Some((stat.get(open + 1..close)?, state))
}

/// The parent pid of a `stat` line (`None` for 0: a parent outside this pid namespace).
fn parent_of(stat: &str) -> Option<Pid> {
    let close = stat.rfind(')')?;
    Pid::parse(stat.get(close + 1..)?.split_whitespace().nth(1)?)
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
    /// The process of the tree it waits on.
    waits_on: Option<Pid>,
    /// Its kind comes from an event loop watching several descriptors: it is the cause only
    /// when nothing else in the tree is blocked on its own account.
    weak: bool,
}

/// One process, and whether its kind is weak (see [`Blocked::weak`]).
fn process(snap: &ProcSnap, tree: &Tree<'_>) -> (ProcessDiagnosis, bool) {
    let main = snap.threads.first();
    let (name, state) = main
        .and_then(|t| name_and_state(&t.stat))
        .map_or(("?".to_owned(), "unknown"), |(n, s)| {
            (n.to_owned(), state_name(s))
        });
    let wchan = main
        .map(|t| t.wchan.trim().to_owned())
        .filter(|w| !w.is_empty() && w != "0");
    let threads: Vec<Blocked> = snap.threads.iter().map(|t| thread(t, snap, tree)).collect();
    // Every thread on a lock is a lock wait; otherwise the most telling thread speaks (one
    // on its own account before an event loop's).
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
        [false, true]
            .iter()
            .find_map(|weak| {
                ORDER
                    .iter()
                    .filter(|k| **k != StallKind::Unknown)
                    .find_map(|kind| threads.iter().find(|t| t.kind == *kind && t.weak == *weak))
            })
            .or_else(|| threads.iter().find(|t| t.kind == StallKind::Unknown))
            .or(threads.first())
    };
    let mut out = ProcessDiagnosis {
        pid: snap.pid,
        name,
        state,
        wchan,
        syscall: None,
        fd: None,
        target: None,
        kind: StallKind::Unknown,
        waits_on: None,
        error: snap.error.clone(),
    };
    let mut weak = false;
    if let Some(b) = chosen {
        out.kind = b.kind;
        out.syscall = b.call.clone();
        out.fd = b.fd;
        out.target = b.target.clone();
        out.waits_on = b.waits_on;
        weak = b.weak;
    }
    // Sleeping between exchanges (a retry loop): the peer it talks to is named.
    if out.kind == StallKind::Sleeping && out.target.is_none() {
        out.target = sockets_of(snap, tree).into_iter().next().map(|(_, _, t)| t);
    }
    (out, weak)
}

fn thread(t: &ThreadSnap, snap: &ProcSnap, tree: &Tree<'_>) -> Blocked {
    let mut b = Blocked {
        kind: StallKind::Unknown,
        call: None,
        fd: None,
        target: None,
        waits_on: None,
        weak: false,
    };
    let state = name_and_state(&t.stat).map_or(b'?', |(_, s)| s);
    // Runnable but off the CPU inside a known call: woken from it and waiting for a CPU (a
    // poller on a loaded machine after its sleep), judged by the call. On the CPU the
    // kernel says `running`; preempted in user mode, call -1.
    let in_a_call = syscall_args(&t.syscall).is_some_and(|(n, _)| syscall_name(n).is_some());
    match state {
        b'T' | b't' => b.kind = StallKind::Stopped,
        b'D' => b.kind = StallKind::DiskWait,
        b'R' if !in_a_call => b.kind = StallKind::Running,
        b'Z' | b'X' => b.kind = StallKind::Unknown,
        _ if t.syscall == "running" => b.kind = StallKind::Running,
        _ => blocked_in_call(t, snap, tree, &mut b),
    }
    b
}

/// A sleeping thread: what its system call waits on.
fn blocked_in_call(t: &ThreadSnap, snap: &ProcSnap, tree: &Tree<'_>, b: &mut Blocked) {
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
            let (class, target) = describe(first_fd.unwrap_or(-1), snap, tree);
            b.target = Some(target);
            match class {
                Class::Input if !call.starts_with("recv") => StallKind::AwaitingInput,
                Class::Tcp { .. } | Class::Socket | Class::Listener => StallKind::NetworkWait,
                Class::Process(pid) => {
                    b.waits_on = Some(pid);
                    StallKind::WaitingOnChild
                }
                _ => StallKind::Unknown,
            }
        }
        "poll" | "ppoll" | "select" | "pselect6" => watched(t.polled.as_deref(), snap, tree, b),
        "epoll_wait" | "epoll_pwait" | "epoll_pwait2" => {
            let set = snap
                .epoll
                .iter()
                .find(|(fd, _)| Some(*fd) == first_fd)
                .map(|(_, fds)| fds.as_slice());
            watched(set, snap, tree, b)
        }
        "wait4" | "waitid" => StallKind::WaitingOnChild,
        // Blocked opening a FIFO (the kernel's `wait_for_partner`): no process has the other
        // end open, in the tree or out of it, or the open would have returned; what it waits
        // for comes from outside the tree.
        "open" | "openat" | "openat2" if t.wchan.contains("partner") || t.wchan == "fifo_open" => {
            let flags = match call {
                "open" => args.get(1),
                "openat" => args.get(2),
                _ => None,
            };
            let writes = flags.is_some_and(|f| f & 0o3 != 0);
            b.target = Some(if writes {
                "a FIFO to write, and no process has it open for reading".to_owned()
            } else {
                "a FIFO to read, and no process has it open for writing".to_owned()
            });
            StallKind::AwaitingInput
        }
        "nanosleep" | "clock_nanosleep" | "pause" | "rt_sigsuspend" | "rt_sigtimedwait" => {
            StallKind::Sleeping
        }
        "futex" | "futex_waitv" | "flock" | "fcntl" => StallKind::LockWait,
        _ => StallKind::Unknown,
    };
}

/// The sockets of a process with a peer worth naming, the most telling first: one the peer
/// closed unread, one with a request outstanding, one outside the tree, an idle one.
fn sockets_of(snap: &ProcSnap, tree: &Tree<'_>) -> Vec<(i32, Class, String)> {
    let mut found: Vec<(i32, Class, String)> = snap
        .fds
        .iter()
        .filter(|(_, link)| link.starts_with("socket:"))
        .map(|(fd, _)| {
            let (class, target) = describe(*fd, snap, tree);
            (*fd, class, target)
        })
        .filter(|(_, class, _)| matches!(class, Class::Tcp { .. } | Class::Socket))
        .collect();
    found.sort_by_key(|(fd, class, _)| (rank(*class), since(*class), *fd));
    found
}

/// Milliseconds since a TCP connection's last bytes (`u32::MAX` for anything else): among
/// descriptors of one rank, the connection that moved last speaks first.
fn since(class: Class) -> u32 {
    match class {
        Class::Tcp { since, .. } => since,
        _ => u32::MAX,
    }
}

/// The order in which network descriptors speak (lower first).
fn rank(class: Class) -> u8 {
    match class {
        Class::Tcp { closed: true, .. } => 0,
        Class::Tcp {
            outstanding: true, ..
        } => 1,
        Class::Tcp { recent: true, .. } => 2,
        Class::Socket => 3,
        Class::Tcp { .. } => 4,
        _ => 5,
    }
}

/// A poll, select or epoll on `fds` (unknown: `None`): input first, then the network, then a
/// process of the tree. Watching several descriptors makes it an event loop: its kind is then
/// weak (the cause only when nothing else is blocked on its own account), and an idle TCP
/// connection (no request outstanding, not closed by the peer) is no network wait at all.
fn watched(fds: Option<&[i32]>, snap: &ProcSnap, tree: &Tree<'_>, b: &mut Blocked) -> StallKind {
    let Some(fds) = fds else {
        b.target = Some("descriptors that could not be read".to_owned());
        return StallKind::Unknown;
    };
    if fds.is_empty() {
        b.target = Some("no descriptor (a timed wait)".to_owned());
        return StallKind::Sleeping;
    }
    let event_loop = fds.len() > 1;
    b.weak = event_loop;
    let described = described_set(fds, snap, tree);
    let mut choose = |fd: i32, target: &str| {
        b.fd = Some(fd);
        b.target = Some(target.to_owned());
    };
    if let Some((fd, _, target)) = described.iter().find(|(_, c, _)| *c == Class::Input) {
        // An interactive program (an agent's TUI) watches its terminal all the time: it waits
        // on the connection instead when a request there is unanswered, or when the tree went
        // quiet with an exchange on it while its screen kept animating a wait.
        let connection = sockets_of(snap, tree)
            .into_iter()
            .find(|(_, class, _)| event_loop && under_way(*class, tree));
        if let Some((fd, _, target)) = connection {
            choose(fd, &target);
            return StallKind::NetworkWait;
        }
        choose(*fd, target);
        return StallKind::AwaitingInput;
    }
    let network = network_of(&described, fds, snap, tree);
    // A process of the tree whose output it reads through a pipe (its tool), rather than one
    // it talks to over a socket (a UI and its daemon, a client and its server: when both are
    // idle, each waits on the other).
    let over_socket = |fd: i32| {
        snap.fds
            .iter()
            .any(|(n, link)| *n == fd && link.starts_with("socket:"))
    };
    let tool = |fd: i32, class: &Class| matches!(class, Class::Process(_)) && !over_socket(fd);
    let child = described.iter().any(|(fd, c, _)| tool(*fd, c));
    if let Some((fd, class, target)) = network.first() {
        let quiet = |recent_too: bool| {
            matches!(
                class,
                Class::Tcp {
                    outstanding: false,
                    closed: false,
                    recent,
                    ..
                } if recent_too || !*recent
            )
        };
        // An idle connection is no network wait for an event loop; nor is one that merely
        // moved last when the loop also waits on a child (its tool started after it).
        if !(event_loop && (quiet(false) || (child && quiet(true)))) {
            choose(*fd, target);
            return StallKind::NetworkWait;
        }
    }
    let process = described
        .iter()
        .find(|(fd, c, _)| tool(*fd, c))
        .or_else(|| {
            described
                .iter()
                .find(|(_, c, _)| matches!(c, Class::Process(_)))
        });
    if let Some((fd, Class::Process(pid), target)) = process {
        choose(*fd, target);
        b.waits_on = Some(*pid);
        // Waiting on its tool is the chain to follow; a loop that talks to another process of
        // the tree over a socket is the cause only when nothing else is.
        b.weak = event_loop && over_socket(*fd);
        return StallKind::WaitingOnChild;
    }
    if let Some((fd, _, target)) = network.first() {
        // Only idle connections: an event loop with nothing outstanding.
        choose(*fd, &format!("{target}, idle (no request outstanding)"));
        return StallKind::Sleeping;
    }
    if let Some((fd, _, target)) = described.iter().find(|(_, c, _)| *c == Class::Listener) {
        // A server waiting for its clients, with nothing else to wait on.
        choose(*fd, target);
        return StallKind::Sleeping;
    }
    let (fd, _, target) = &described[0];
    choose(*fd, target);
    b.weak = false;
    StallKind::Unknown
}

/// The tree has been blocked on input, every source quiet, for the configured time: which
/// process waits and on what (what `input_wait.rs`'s rule finds; defined here, with the
/// diagnosis it carries, so that the rule imports the diagnosis and not the reverse).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InputWait {
    /// The process that reads.
    pub pid: Pid,
    /// Its name (`comm`).
    pub name: String,
    /// What it reads: `stdin (a pipe)`, `the terminal /dev/pts/3`…
    pub target: String,
    /// How long it has been seen waiting, with its read count unchanged.
    pub waited: Duration,
    /// The snapshot of the tree it was judged on (kind [`StallKind::AwaitingInput`]).
    pub diagnosis: Diagnosis,
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests;

#[cfg(test)]
mod all_kinds {
    use super::StallKind;

    #[test]
    fn all_lists_every_kind() {
        // A new kind fails to compile here until it has its place, then fails until in ALL.
        let place = |k: StallKind| match k {
            StallKind::AwaitingInput => 0,
            StallKind::NetworkWait => 1,
            StallKind::Sleeping => 2,
            StallKind::Stopped => 3,
            StallKind::WaitingOnChild => 4,
            StallKind::LockWait => 5,
            StallKind::DiskWait => 6,
            StallKind::Running => 7,
            StallKind::Unknown => 8,
        };
        assert_eq!(StallKind::ALL.len(), 9);
        for (i, kind) in StallKind::ALL.iter().enumerate() {
            assert_eq!(place(*kind), i, "{}", kind.name());
        }
    }
}
