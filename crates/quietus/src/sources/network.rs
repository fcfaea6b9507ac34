//! The network source: bytes received and sent on the TCP sockets held by any process of the
//! tree, from the kernel's socket diagnostics (`tcp_info`'s `bytes_received` and
//! `bytes_acked`), matched to the tree through the `socket:[inode]` links in `/proc/PID/fd`.
//!
//! Rules (see the crate docs):
//! - bytes count, never sockets: an open connection that moves nothing is no activity;
//! - a sample is active when bytes moved since the previous sample **and** the bytes moved in
//!   the last [`WINDOW`] reach [`FLOOR`]: keep-alive pings (TCP keep-alive probes carry no
//!   payload; an HTTP/2 or WebSocket ping with its TLS record is well under 200 bytes, a few
//!   a minute) never reach it, while a model streaming a few tokens a second does;
//! - a socket first seen after the first sample counts whole (it opened since: its bytes are
//!   new); the first sample is a baseline; a socket closed between two samples is forgotten
//!   (a connection opened and closed between two samples is not seen);
//! - while the tree holds no socket, nothing but the `/proc/PID/fd` listing is done; a socket
//!   that is not TCP (a Unix socket, UDP) is looked for again at most every [`RECHECK`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

use crate::pid::Pid;
#[cfg_attr(not(target_os = "linux"), allow(unused_imports))] // `sys` reads sockets on Linux
use crate::process::sys::{self, TcpSocket};

/// Bytes (received + sent) that must move within [`WINDOW`] for the network to be active.
pub(crate) const FLOOR: u64 = 1024;
/// The window over which [`FLOOR`] is judged.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);
/// How long a socket found in no TCP dump twice in a row (Unix, UDP) is left alone. Once is not
/// enough: a TCP socket between its `socket` and its `connect` is in no dump either, and left
/// alone for this long it would not count for longer than many an idle timeout.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// Where sockets come from: `/proc` and sock_diag on Linux, a script in tests.
pub(crate) trait SocketTable: Send {
    /// A sample begins: what was kept about processes not asked for in the previous sample
    /// can go.
    fn begin(&mut self) {}
    /// Adds the inodes of the sockets `pid` holds.
    fn inodes(&mut self, pid: Pid, into: &mut Vec<u64>);
    /// The TCP sockets whose inode is in `wanted`; `known` are those found last time (with
    /// their kernel keys, so that they can be asked for one by one).
    fn tcp(
        &mut self,
        wanted: &HashSet<u64>,
        known: &HashMap<u64, TcpSocket>,
        into: &mut HashMap<u64, TcpSocket>,
    ) -> io::Result<()>;
}

/// Processes whose last walk is kept, with a [`RunProbe`](sys::runprobe::RunProbe) each (four
/// open descriptors, 64 at most per session): a larger tree's other processes are walked at
/// every sample.
#[cfg(target_os = "linux")]
const PROBED: usize = 16;

/// Run probes open at most in the whole process (64 descriptors), as many as one session may
/// have: a server holding a thousand sessions keeps a few descriptors per session, not eight
/// more for a shell and its `sleep`; the processes beyond are walked at every sample (the same
/// sockets found, at the cost of the walk).
#[cfg(target_os = "linux")]
const PROBED_IN_PROCESS: usize = PROBED;

/// Run probes open now in the process.
#[cfg(target_os = "linux")]
static PROBES_OPEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A run probe counted against [`PROBED_IN_PROCESS`].
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Probe(sys::runprobe::RunProbe);

#[cfg(target_os = "linux")]
impl Probe {
    /// The probe of `pid`, if the process's budget allows one and it opens.
    fn open(pid: Pid) -> Option<Probe> {
        use std::sync::atomic::Ordering::Relaxed;
        if PROBES_OPEN.fetch_add(1, Relaxed) >= PROBED_IN_PROCESS {
            PROBES_OPEN.fetch_sub(1, Relaxed);
            return None;
        }
        match sys::runprobe::RunProbe::open(pid) {
            Ok(probe) => Some(Probe(probe)),
            Err(_) => {
                PROBES_OPEN.fetch_sub(1, Relaxed);
                None
            }
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for Probe {
    fn drop(&mut self) {
        PROBES_OPEN.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(target_os = "linux")]
impl std::ops::Deref for Probe {
    type Target = sys::runprobe::RunProbe;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

#[cfg(target_os = "linux")]
impl std::ops::DerefMut for Probe {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The process's one socket-diagnostics socket, shared by every observer (a netlink socket
/// answers about any socket of the namespace): one descriptor, not one per session. Made by
/// the first observer, closed with the last.
#[cfg(target_os = "linux")]
fn shared_diag() -> io::Result<std::sync::Arc<crate::sync::Mutex<sys::sockdiag::SockDiag>>> {
    type Diag = crate::sync::Mutex<sys::sockdiag::SockDiag>;
    static SHARED: crate::sync::Mutex<std::sync::Weak<Diag>> =
        crate::sync::Mutex::new(std::sync::Weak::new());
    let mut shared = SHARED.lock();
    if let Some(diag) = shared.upgrade() {
        return Ok(diag);
    }
    let diag = std::sync::Arc::new(crate::sync::Mutex::new(sys::sockdiag::SockDiag::open()?));
    *shared = std::sync::Arc::downgrade(&diag);
    Ok(diag)
}

/// Linux: `/proc/PID/fd` links and one `NETLINK_SOCK_DIAG` socket.
///
/// A process's links are read again only when it may have changed them: the sockets found by
/// its last walk stand while it provably has not run since (see [`Held::unchanged`]).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub(crate) struct Kernel {
    diag: std::sync::Arc<crate::sync::Mutex<sys::sockdiag::SockDiag>>,
    held: HashMap<Pid, Held>,
    /// The sample under way (to forget processes no longer asked for).
    generation: u64,
    /// `/proc/PID/fd` walks done (for the tests).
    walks: u64,
}

/// What the last walk of one process found, and what tells whether it still stands.
#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Held {
    probe: Option<Probe>,
    /// The run time read before the last walk, when that walk can stand for later samples
    /// (the process was single-threaded); `None`: walk again.
    run_time: Option<u64>,
    inodes: Vec<u64>,
    generation: u64,
}

#[cfg(target_os = "linux")]
impl Held {
    /// Whether the last walk still stands: the process has not run since it. Its main
    /// thread — its only one at the walk — has the run time (exact, in nanoseconds) read
    /// before the walk, read again *after* finding the thread off the CPU. A process that ran
    /// since either left the CPU (its run time grew then) or is on it (not off the CPU); a
    /// second thread could only have come from a run. Only a process that runs changes its
    /// descriptors (received ones are installed by its own `recvmsg`; one sharing its table
    /// is in the tree and walked on its own), so its sockets are the same. The one exception
    /// known: a seccomp supervisor's `SECCOMP_IOCTL_NOTIF_ADDFD` installs a descriptor into a
    /// process blocked in a system call; it is found when that process runs, at the latest.
    ///
    /// Otherwise returns the run time read now (taken before the walk about to be done), or
    /// `Err(None)` when there is none (no probe, or no scheduler statistics).
    ///
    /// Fails when the probe cannot be read: the process is gone (its pid may name another).
    fn unchanged(&self) -> io::Result<Result<(), Option<u64>>> {
        let Some(probe) = &self.probe else {
            return Ok(Err(None));
        };
        let now = probe.run_time()?;
        if now.is_none() || now != self.run_time {
            return Ok(Err(now));
        }
        let off = probe.off_cpu()?;
        let again = probe.run_time()?;
        Ok(if off && again == now {
            Ok(())
        } else {
            Err(again)
        })
    }

    /// Reads the links of `pid`; `before` is its run time read before. The walk stands for
    /// later samples only when the process is single-threaded, counted after `before` was
    /// read (a thread made since is a run since).
    fn walk(&mut self, pid: Pid, before: Option<u64>) {
        self.inodes.clear();
        let inodes = &mut self.inodes;
        let mut add = |_, target: &[u8]| {
            if let Some(inode) = sys::socket_inode(target) {
                inodes.push(inode);
            }
        };
        let walked = match self.probe.as_mut() {
            Some(probe) => probe.fd_links(&mut add),
            None => sys::fd_links(pid, &mut add),
        };
        let single = self
            .probe
            .as_ref()
            .is_some_and(|p| p.threads().is_ok_and(|n| n == 1));
        self.run_time = before.filter(|_| single && walked.is_ok());
    }
}

#[cfg(target_os = "linux")]
impl Kernel {
    fn new(diag: std::sync::Arc<crate::sync::Mutex<sys::sockdiag::SockDiag>>) -> Kernel {
        Kernel {
            diag,
            held: HashMap::new(),
            generation: 0,
            walks: 0,
        }
    }
}

#[cfg(target_os = "linux")]
impl SocketTable for Kernel {
    fn begin(&mut self) {
        let generation = self.generation;
        self.held.retain(|_, held| held.generation == generation);
        self.generation += 1;
    }

    fn inodes(&mut self, pid: Pid, into: &mut Vec<u64>) {
        let generation = self.generation;
        let open = |allowed: bool| allowed.then(|| Probe::open(pid)).flatten();
        if !self.held.contains_key(&pid) {
            let probed = self.held.values().filter(|h| h.probe.is_some()).count();
            let held = Held {
                probe: open(probed < PROBED),
                run_time: None,
                inodes: Vec::new(),
                generation,
            };
            self.held.insert(pid, held);
        }
        let Some(held) = self.held.get_mut(&pid) else {
            return;
        };
        held.generation = generation;
        let before = match held.unchanged() {
            Ok(Ok(())) => None,
            Ok(Err(before)) => Some(before),
            Err(_) => {
                // The process is gone, or its pid names another one now: a new probe.
                held.probe = open(true);
                let probe = held.probe.as_ref();
                Some(probe.and_then(|p| p.run_time().ok().flatten()))
            }
        };
        if let Some(before) = before {
            self.walks += 1;
            held.walk(pid, before);
        }
        into.extend_from_slice(&held.inodes);
    }

    /// Every wanted socket already known: asked for one by one (the cost grows with the
    /// tree's sockets). Else one dump of the namespace's TCP sockets (a new socket's key is
    /// only learnt there).
    fn tcp(
        &mut self,
        wanted: &HashSet<u64>,
        known: &HashMap<u64, TcpSocket>,
        into: &mut HashMap<u64, TcpSocket>,
    ) -> io::Result<()> {
        if wanted.iter().all(|inode| known.contains_key(inode)) {
            let sockets: Vec<&TcpSocket> = wanted.iter().filter_map(|i| known.get(i)).collect();
            return self.diag.lock().lookup(&sockets, into);
        }
        self.diag
            .lock()
            .tcp_sockets(&mut |inode| wanted.contains(&inode), into)
    }
}

/// What one network sample found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct NetworkSample {
    /// Whether the bytes moved make the processes active: bytes moved since the previous
    /// sample, and at least 1 KiB within the last 10 s.
    pub active: bool,
    /// TCP sockets the processes hold.
    pub sockets: usize,
    /// Bytes received and sent (acknowledged by the peer) since the previous sample.
    pub bytes: u64,
}

/// Samples the TCP byte counters of the sockets a set of processes holds (Linux socket
/// diagnostics), and tells moving bytes from an open but silent connection.
///
/// Usable on its own; a [`Session`](crate::Session) runs one with its descendant sample when
/// the network source is on (the default), over the pids of the child's tree.
///
/// ```
/// use std::io::{Read, Write};
/// use std::net::{TcpListener, TcpStream};
/// use std::time::Instant;
/// use quietus::Pid;
/// use quietus::sources::NetworkObserver;
///
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let mut client = TcpStream::connect(listener.local_addr()?)?;
/// let (mut server, _) = listener.accept()?;
/// let me = [Pid::current()];
/// let mut observer = NetworkObserver::open()?;
/// observer.sample(Instant::now(), &me); // the baseline
/// server.write_all(&[7; 4096])?;
/// client.read_exact(&mut [0; 4096])?;
/// let sample = observer.sample(Instant::now(), &me);
/// assert!(sample.active);
/// assert!(sample.bytes >= 2 * 4096); // received by one end, sent (and acked) by the other
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct NetworkObserver {
    table: Box<dyn SocketTable>,
    known: HashMap<u64, TcpSocket>,
    /// Sockets found in no TCP dump: when, and whether twice in a row (then left alone).
    not_tcp: HashMap<u64, (Instant, bool)>,
    sampled: bool,
    window: VecDeque<(Instant, u64)>,
    held: Vec<u64>,
    wanted: HashSet<u64>,
    found: HashMap<u64, TcpSocket>,
    last: NetworkSample,
    /// Why a sample failed, once (logged; the source goes on trying).
    failed: Option<crate::error::SystemError>,
}

impl fmt::Debug for NetworkObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkObserver")
            .field("known", &self.known.len())
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl NetworkObserver {
    /// An observer with this platform's socket diagnostics. Fails where there are none: a
    /// kernel without `inet_diag`, a sandbox that refuses netlink sockets, a system other than
    /// Linux (`Unsupported`); and where the tree's sockets cannot be found, without a `/proc`
    /// of this pid namespace (`Unsupported`).
    pub fn open() -> io::Result<NetworkObserver> {
        #[cfg(all(target_os = "linux", not(feature = "portable")))]
        {
            if let Some(why) = sys::proc_view().why_not() {
                log::warn!("network source unavailable: the tree's sockets cannot be found: {why}");
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the tree's sockets cannot be found: {why}"),
                ));
            }
            let diag = shared_diag()?;
            Ok(Self::with_table(Box::new(Kernel::new(diag))))
        }
        #[cfg(all(target_os = "linux", feature = "portable"))]
        {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "socket diagnostics are off in the portable backend",
            ))
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "socket diagnostics are Linux-only",
            ))
        }
    }

    /// Samples the TCP sockets the processes `pids` hold, at `now` (the caller's clock). The
    /// first sample is a baseline and never active.
    pub fn sample(&mut self, now: Instant, pids: &[Pid]) -> NetworkSample {
        self.held.clear();
        self.table.begin();
        for &pid in pids {
            self.table.inodes(pid, &mut self.held);
        }
        self.wanted.clear();
        self.wanted.extend(self.held.iter().copied());
        self.not_tcp.retain(|inode, (at, _)| {
            self.wanted.contains(inode) && now.duration_since(*at) < RECHECK
        });
        // Sockets found in no dump twice in a row (Unix, UDP) are not asked for again yet.
        let not_tcp = &self.not_tcp;
        self.wanted
            .retain(|inode| !not_tcp.get(inode).is_some_and(|(_, twice)| *twice));
        self.found.clear();
        if !self.wanted.is_empty()
            && let Err(e) = self.table.tcp(&self.wanted, &self.known, &mut self.found)
        {
            if self.failed.is_none() {
                log::warn!("network source: socket diagnostics failed: {e}");
                self.failed = Some((&e).into());
            }
            self.found.clear();
        }
        let bytes = self.account(now);
        let sum = self.judge(now, bytes);
        self.last = NetworkSample {
            active: self.sampled && bytes > 0 && sum >= FLOOR,
            sockets: self.known.len(),
            bytes,
        };
        self.sampled = true;
        self.last
    }
    pub(crate) fn with_table(table: Box<dyn SocketTable>) -> NetworkObserver {
        NetworkObserver {
            table,
            known: HashMap::new(),
            not_tcp: HashMap::new(),
            sampled: false,
            window: VecDeque::new(),
            held: Vec::new(),
            wanted: HashSet::new(),
            found: HashMap::new(),
            last: NetworkSample::default(),
            failed: None,
        }
    }

    /// The peer of the TCP socket `inode`, as last sampled.
    pub(crate) fn peer(&self, inode: u64) -> Option<std::net::SocketAddr> {
        self.known.get(&inode).map(|s| s.peer)
    }

    /// The bytes moved since the last sample; `known` becomes what was found now.
    fn account(&mut self, now: Instant) -> u64 {
        let mut bytes = 0u64;
        for (inode, socket) in &self.found {
            let moved = match self.known.get(inode) {
                Some(before) => socket
                    .received
                    .saturating_sub(before.received)
                    .saturating_add(socket.acked.saturating_sub(before.acked)),
                None => socket.received.saturating_add(socket.acked),
            };
            bytes = bytes.saturating_add(moved);
        }
        for inode in &self.wanted {
            if !self.found.contains_key(inode) {
                self.not_tcp
                    .entry(*inode)
                    .and_modify(|missed| *missed = (now, true))
                    .or_insert((now, false));
            } else if !self.not_tcp.is_empty() {
                self.not_tcp.remove(inode); // missed once, found now: a TCP socket after all
            }
        }
        std::mem::swap(&mut self.known, &mut self.found);
        bytes
    }

    /// Bytes moved within the window ending at `now`, this sample's included.
    fn judge(&mut self, now: Instant, bytes: u64) -> u64 {
        self.window.push_back((now, bytes));
        while self
            .window
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) >= WINDOW)
        {
            self.window.pop_front();
        }
        self.window.iter().map(|(_, b)| *b).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::sync::Mutex;
    use std::net::SocketAddr;

    /// The pids numbered `numbers` (a script's made-up processes).
    fn pids(numbers: &[u32]) -> Vec<Pid> {
        numbers
            .iter()
            .map(|n| Pid::new(*n).expect("a pid"))
            .collect()
    }

    /// A scripted table: sockets held by pid, and the TCP ones' counters.
    #[derive(Clone, Default)]
    struct Script {
        held: Arc<Mutex<HashMap<Pid, Vec<u64>>>>,
        tcp: Arc<Mutex<HashMap<u64, (u64, u64)>>>,
        dumps: Arc<Mutex<usize>>,
    }

    impl Script {
        fn hold(&self, pid: u32, inodes: &[u64]) {
            let pid = Pid::new(pid).expect("a pid");
            self.held.lock().insert(pid, inodes.to_vec());
        }
        fn tcp(&self, inode: u64, received: u64, acked: u64) {
            self.tcp.lock().insert(inode, (received, acked));
        }
    }

    impl SocketTable for Script {
        fn inodes(&mut self, pid: Pid, into: &mut Vec<u64>) {
            into.extend(self.held.lock().get(&pid).cloned().unwrap_or_default());
        }
        fn tcp(
            &mut self,
            wanted: &HashSet<u64>,
            _known: &HashMap<u64, TcpSocket>,
            into: &mut HashMap<u64, TcpSocket>,
        ) -> io::Result<()> {
            *self.dumps.lock() += 1;
            for (inode, (received, acked)) in self.tcp.lock().iter() {
                if wanted.contains(inode) {
                    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
                    into.insert(
                        *inode,
                        TcpSocket {
                            inode: *inode,
                            state: 1,
                            received: *received,
                            acked: *acked,
                            local: addr,
                            peer: addr,
                            last_data: None,
                            key: [0; 49],
                        },
                    );
                }
            }
            Ok(())
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn bytes_count_sockets_do_not_and_the_first_sample_is_a_baseline() {
        let script = Script::default();
        let mut obs = NetworkObserver::with_table(Box::new(script.clone()));
        let t0 = Instant::now();
        script.hold(1, &[10]);
        script.tcp(10, 50_000, 0);
        assert!(!obs.sample(t0, &pids(&[1])).active, "baseline");
        // Open but silent: not activity, however long.
        for i in 1..=20 {
            let s = obs.sample(t0 + 500 * MS * i, &pids(&[1]));
            assert!(!s.active);
            assert_eq!((s.sockets, s.bytes), (1, 0));
        }
        // 4 KiB received: activity.
        script.tcp(10, 54_096, 0);
        let s = obs.sample(t0 + 11_000 * MS, &pids(&[1]));
        assert!(s.active);
        assert_eq!(s.bytes, 4096);
    }

    #[test]
    fn sending_counts_and_a_grandchilds_new_socket_counts_whole() {
        let script = Script::default();
        let mut obs = NetworkObserver::with_table(Box::new(script.clone()));
        let t0 = Instant::now();
        script.hold(1, &[]);
        obs.sample(t0, &pids(&[1, 2]));
        // The grandchild (pid 2) opened a connection and sent 2 KiB since.
        script.hold(2, &[20]);
        script.tcp(20, 0, 2048);
        let s = obs.sample(t0 + 200 * MS, &pids(&[1, 2]));
        assert!(s.active);
        assert_eq!(s.bytes, 2048);
        script.tcp(20, 0, 4096);
        assert!(
            obs.sample(t0 + 400 * MS, &pids(&[1, 2])).active,
            "uploading"
        );
    }

    #[test]
    fn keepalive_pings_stay_under_the_floor_and_a_quiet_sample_never_counts() {
        let script = Script::default();
        let mut obs = NetworkObserver::with_table(Box::new(script.clone()));
        let t0 = Instant::now();
        script.hold(1, &[10]);
        script.tcp(10, 0, 0);
        obs.sample(t0, &pids(&[1]));
        // A 100-byte ping each way every 15 s, sampled every second for 5 minutes.
        let mut total = 0;
        for s in 1..=300u32 {
            if s % 15 == 0 {
                total += 100;
            }
            script.tcp(10, total, total);
            assert!(
                !obs.sample(t0 + 1000 * MS * s, &pids(&[1])).active,
                "at {s}"
            );
        }
        // A trickle of 300 bytes a second adds up within the window...
        let mut active = false;
        for s in 301..=310u32 {
            total += 150;
            script.tcp(10, total, total);
            active |= obs.sample(t0 + 1000 * MS * s, &pids(&[1])).active;
        }
        assert!(active);
        // ...but once it stops, the window's old bytes make no sample active.
        assert!(!obs.sample(t0 + 1000 * MS * 311, &pids(&[1])).active);
    }

    #[test]
    fn no_socket_no_dump_and_non_tcp_sockets_are_rechecked_rarely() {
        let script = Script::default();
        let mut obs = NetworkObserver::with_table(Box::new(script.clone()));
        let t0 = Instant::now();
        for i in 0..10 {
            obs.sample(t0 + 100 * MS * i, &pids(&[1]));
        }
        assert_eq!(*script.dumps.lock(), 0, "the tree holds no socket");
        script.hold(1, &[30]); // a Unix socket: never in a TCP dump
        for i in 10..40 {
            obs.sample(t0 + 100 * MS * i, &pids(&[1]));
        }
        // Looked for at 1 s and 1.1 s (missing once could be a TCP socket not yet connected),
        // then again once RECHECK has passed (6.1 s); not at every sample.
        assert_eq!(*script.dumps.lock(), 2);
        obs.sample(t0 + 100 * MS * 60, &pids(&[1]));
        assert_eq!(*script.dumps.lock(), 2);
        obs.sample(t0 + 100 * MS * 62, &pids(&[1]));
        assert_eq!(*script.dumps.lock(), 3);
    }

    /// A TCP socket sampled between its `socket` and its `connect` is in no dump: it is asked
    /// for again at the next sample, and what it moves then counts.
    #[test]
    fn a_socket_not_yet_connected_at_one_sample_counts_at_the_next() {
        let script = Script::default();
        let mut obs = NetworkObserver::with_table(Box::new(script.clone()));
        let t0 = Instant::now();
        script.hold(1, &[40]);
        obs.sample(t0, &pids(&[1])); // not connected yet: in no dump
        script.tcp(40, 0, 4096);
        let s = obs.sample(t0 + 500 * MS, &pids(&[1]));
        assert!(s.active, "sent 4 KiB once connected");
        assert_eq!(s.bytes, 4096);
        script.tcp(40, 0, 8192);
        assert!(obs.sample(t0 + 1000 * MS, &pids(&[1])).active);
    }

    #[test]
    fn a_closed_socket_is_forgotten_and_counters_never_go_negative() {
        let script = Script::default();
        let mut obs = NetworkObserver::with_table(Box::new(script.clone()));
        let t0 = Instant::now();
        script.hold(1, &[10]);
        script.tcp(10, 9000, 9000);
        obs.sample(t0, &pids(&[1]));
        script.hold(1, &[]);
        let s = obs.sample(t0 + 100 * MS, &pids(&[1]));
        assert_eq!((s.sockets, s.bytes, s.active), (0, 0, false));
        // A reused inode with smaller counters: a new socket, counted whole.
        script.hold(1, &[10]);
        script.tcp(10, 10, 0);
        assert_eq!(obs.sample(t0 + 200 * MS, &pids(&[1])).bytes, 10);
        script.tcp(10, 5, 0);
        assert_eq!(obs.sample(t0 + 300 * MS, &pids(&[1])).bytes, 0);
    }
}

/// The Linux table with real processes: a process's walk stands while it sleeps, and any run
/// makes it walked again (a socket closed and its number reused, a grandchild's new socket).
#[cfg(all(test, target_os = "linux"))]
mod kernel_tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
    use std::sync::Arc;

    use crate::sync::Mutex;

    /// The kernel table, shared with the test so that it can count the walks.
    struct Shared(Arc<Mutex<Kernel>>);

    impl SocketTable for Shared {
        fn begin(&mut self) {
            self.0.lock().begin();
        }
        fn inodes(&mut self, pid: Pid, into: &mut Vec<u64>) {
            self.0.lock().inodes(pid, into);
        }
        fn tcp(
            &mut self,
            wanted: &HashSet<u64>,
            known: &HashMap<u64, TcpSocket>,
            into: &mut HashMap<u64, TcpSocket>,
        ) -> io::Result<()> {
            self.0.lock().tcp(wanted, known, into)
        }
    }

    /// A `bash` running `script` (`$1` is the server's port), told lines on its stdin.
    struct Holder {
        child: Child,
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    }

    impl Holder {
        fn start(script: &str, port: u16) -> Holder {
            let mut child = Command::new("bash")
                .args(["-c", script, "holder", &port.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn bash");
            let stdin = child.stdin.take().expect("piped");
            let stdout = BufReader::new(child.stdout.take().expect("piped"));
            Holder {
                child,
                stdin,
                stdout,
            }
        }
        fn line(&mut self) -> String {
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("a line from bash");
            line.trim_end().to_owned()
        }
        fn say(&mut self, line: &str) {
            writeln!(self.stdin, "{line}").expect("tell bash");
        }
        fn pid(&self) -> Pid {
            Pid::of(&self.child)
        }
    }

    impl Drop for Holder {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The next connection, or a failure after 20 s (never a hang).
    fn accept(listener: &TcpListener) -> TcpStream {
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match listener.accept() {
                Ok((conn, _)) => {
                    conn.set_nonblocking(false).unwrap();
                    return conn;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("no connection: {e}"),
            }
        }
    }

    /// Waits until process `pid` sleeps (its state `S`), for 20 s at most.
    fn wait_asleep(pid: Pid) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap_or_default();
            let close = stat.iter().rposition(|b| *b == b')').unwrap_or(0);
            if stat.get(close + 2) == Some(&b'S') {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("process {pid} never sleeps");
    }

    fn observer() -> (NetworkObserver, Arc<Mutex<Kernel>>) {
        let diag = sys::sockdiag::SockDiag::open().expect("socket diagnostics");
        let kernel = Arc::new(Mutex::new(Kernel::new(Arc::new(crate::sync::Mutex::new(
            diag,
        )))));
        let obs = NetworkObserver::with_table(Box::new(Shared(kernel.clone())));
        (obs, kernel)
    }

    /// Samples until one walks no process (all of them asleep since their last walk); fails
    /// after 10 s of samples that all walked.
    fn settle(obs: &mut NetworkObserver, kernel: &Mutex<Kernel>, pids: &[Pid]) -> NetworkSample {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let walks = kernel.lock().walks;
            let sample = obs.sample(Instant::now(), pids);
            if kernel.lock().walks == walks {
                return sample;
            }
            assert!(Instant::now() < deadline, "every sample walked");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_sleeping_process_is_walked_once_and_its_sockets_still_count() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut holder = Holder::start(
            "exec 3<>/dev/tcp/127.0.0.1/$1; echo ready; read -r line",
            port,
        );
        assert_eq!(holder.line(), "ready");
        let mut server = accept(&listener);
        let (mut obs, kernel) = observer();
        let pids = [holder.pid()];
        obs.sample(Instant::now(), &pids);
        let sample = settle(&mut obs, &kernel, &pids);
        assert_eq!(sample.sockets, 1, "the kept walk still has the socket");
        // Bytes on a socket of a process that does not run: still asked for, still counted.
        server.write_all(&[1; 4096]).unwrap();
        let walks = kernel.lock().walks;
        let sample = obs.sample(Instant::now(), &pids);
        assert!(sample.active && sample.bytes >= 4096, "{sample:?}");
        assert_eq!(
            kernel.lock().walks,
            walks,
            "receiving in the kernel is no run"
        );
        holder.say("done");
    }

    #[test]
    fn a_socket_closed_and_its_number_reused_by_a_new_one_is_counted() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut holder = Holder::start(
            "exec 3<>/dev/tcp/127.0.0.1/$1; echo ready; read -r line; \
             exec 3<&-; exec 3<>/dev/tcp/127.0.0.1/$1; echo again; read -r line",
            port,
        );
        assert_eq!(holder.line(), "ready");
        let _first = accept(&listener);
        let (mut obs, kernel) = observer();
        let pids = [holder.pid()];
        obs.sample(Instant::now(), &pids);
        settle(&mut obs, &kernel, &pids);
        let before: Vec<u64> = obs.known.keys().copied().collect();
        // The same number of descriptors, fd 3 a new socket now.
        holder.say("go");
        assert_eq!(holder.line(), "again");
        let mut second = accept(&listener);
        second.write_all(&[2; 4096]).unwrap();
        wait_asleep(holder.pid()); // in `read` again: off the CPU, as if it had never run
        let sample = obs.sample(Instant::now(), &pids);
        let after: Vec<u64> = obs.known.keys().copied().collect();
        assert_eq!(sample.sockets, 1);
        assert_ne!(before, after, "the new socket, not the closed one");
        assert!(sample.active && sample.bytes >= 4096, "{sample:?}");
        holder.say("done");
    }

    #[test]
    fn a_socket_a_grandchild_opens_after_the_first_sample_is_counted() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // The grandchild reads the child's stdin, then connects.
        let mut holder = Holder::start(
            "bash -c 'read -r line; exec 3<>/dev/tcp/127.0.0.1/$0; echo connected; \
             read -r line' $1 <&0 & echo $!; wait",
            port,
        );
        let grandchild = Pid::parse(&holder.line()).expect("the grandchild's pid");
        let (mut obs, kernel) = observer();
        let pids = [holder.pid(), grandchild];
        obs.sample(Instant::now(), &pids);
        assert_eq!(settle(&mut obs, &kernel, &pids).sockets, 0);
        holder.say("go");
        assert_eq!(holder.line(), "connected");
        let mut server = accept(&listener);
        server.write_all(&[3; 4096]).unwrap();
        wait_asleep(grandchild);
        let sample = obs.sample(Instant::now(), &pids);
        assert_eq!(sample.sockets, 1, "{sample:?}");
        assert!(sample.active && sample.bytes >= 4096, "{sample:?}");
        holder.say("done");
    }

    #[test]
    fn a_process_with_threads_is_walked_at_every_sample() {
        // This test process has several threads (the test harness's): its walk never stands.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _server = accept(&listener);
        let (mut obs, kernel) = observer();
        let me = [Pid::current()];
        let parked = std::thread::spawn(|| std::thread::park_timeout(Duration::from_secs(5)));
        for _ in 0..5 {
            let walks = kernel.lock().walks;
            assert!(obs.sample(Instant::now(), &me).sockets >= 2);
            assert_eq!(kernel.lock().walks, walks + 1);
        }
        parked.thread().unpark();
        parked.join().unwrap();
    }

    #[test]
    fn a_running_process_is_walked_at_every_sample() {
        // Its run time moves only at the scheduler's ticks while it spins: being on the CPU
        // is what tells that it runs.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut holder = Holder::start(
            "exec 3<>/dev/tcp/127.0.0.1/$1; echo ready; while :; do :; done",
            port,
        );
        assert_eq!(holder.line(), "ready");
        let _server = accept(&listener);
        let (mut obs, kernel) = observer();
        let pids = [holder.pid()];
        for _ in 0..50 {
            let walks = kernel.lock().walks;
            assert_eq!(obs.sample(Instant::now(), &pids).sockets, 1);
            assert_eq!(kernel.lock().walks, walks + 1);
        }
    }

    #[test]
    fn processes_no_longer_asked_for_are_forgotten() {
        let (mut obs, kernel) = observer();
        let me = Pid::current();
        obs.sample(Instant::now(), &[me, Pid::new(1).expect("init")]);
        assert_eq!(kernel.lock().held.len(), 2);
        // Gone by the next sample after the first without it.
        obs.sample(Instant::now(), &[me]);
        obs.sample(Instant::now(), &[me]);
        assert_eq!(kernel.lock().held.len(), 1);
    }
}
