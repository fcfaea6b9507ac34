//! The children source (descendant CPU): [`DescendantObserver`] samples the CPU time of the child's
//! descendants and says whether real work happened between two samples.
//!
//! Rules (see the crate docs):
//! - identity of a process = (pid, start time): a reused pid is a new process;
//! - CPU of a process = user + system time, plus (Linux) the time of its reaped children, so
//!   a compile step that started and finished between two samples still counts — without
//!   counting twice a descendant that was seen alive and then reaped;
//! - activity = the sum of the positive per-identity deltas reaches the threshold (default 5 %
//!   of one core over the interval, and never less than 20 ms: two ticks of the kernel's 100 Hz
//!   accounting); a member that exits lowers no sum; a newly seen descendant that already used
//!   CPU earns one sample of startup grace (its whole CPU counts once);
//! - a process the machine starves is working, whatever CPU it got (50 busy processes on the
//!   machine leave a compiler far less than the threshold): one that was runnable (on a CPU or
//!   waiting in a run queue: `/proc/PID/schedstat`'s run time plus run delay) for at least
//!   half of a stretch of at least `RUNNABLE_SPAN`, or seen runnable (state R) at every look
//!   for at least `RUNNABLE_SPAN` (the run delay is only added up when the process gets a CPU
//!   again, so a long wait shows late);
//! - a tree the machine starves is working even when each of its processes lives too briefly
//!   to be seen runnable (a shell script, a version manager's chain of shims): with a cgroup,
//!   the time its processes waited for a CPU (`cpu.pressure`, reaped ones included) counts
//!   when it is at least half of the time between two samples (as for one starved process),
//!   once the tree has a descendant;
//! - bytes the descendants move that no other source sees count too (a tool writing into a
//!   pipe its parent reads, `out=$(tool)`; silent disk-bound work): what each wrote and read
//!   from storage (`/proc/PID/io`), per identity, from [`IO_FLOOR`] bytes within a second
//!   on (a sample counts only if it saw bytes itself);
//! - the direct child's own CPU, CPU demand and bytes do not count unless asked (an agent
//!   spinning in its event loop, or writing a heartbeat, is not progress); the CPU and the
//!   bytes of the children it reaped do (its whole `/proc/PID/io` less its threads' own);
//! - every identity seen is remembered while it lives, even after it left the tree (`setsid`,
//!   re-parented to init): the kill ladder signals those escapees by pid; their CPU no longer
//!   keeps the child alive.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::config::ChildWatchConfig;
use crate::pid::Pid;

/// One process as seen by a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcSample {
    pub(crate) pid: Pid,
    /// `None` when its parent is outside this pid namespace (or unknown).
    pub(crate) ppid: Option<Pid>,
    /// `None` when its group is outside this pid namespace (or unknown).
    pub(crate) pgrp: Option<Pid>,
    /// Opaque start time: with the pid, the identity.
    pub(crate) start_time: u64,
    /// User + system time.
    pub(crate) cpu: Duration,
    /// User + system time of reaped children (zero where the platform does not say).
    pub(crate) child_cpu: Duration,
    /// A zombie: exited, not yet reaped.
    pub(crate) dead: bool,
}

/// Where samples come from: `/proc` on Linux, `sysinfo` elsewhere, synthetic ones in tests.
pub(crate) trait ProcessSource: Send {
    /// The root (first) and all its current descendants. Empty when the root is gone.
    fn tree(&mut self, root: Pid) -> Vec<ProcSample>;
    /// One process by pid, wherever it is in the process table.
    fn process(&mut self, pid: Pid) -> Option<ProcSample>;
    /// A sample begins: what the source kept of the processes it read for the last one is
    /// stale (a walk of the tree begins one by itself).
    fn new_look(&mut self) {}
    /// Whether process `pid` is runnable now (state R), and how long its main thread has been
    /// runnable in all (on a CPU plus waiting for one; a source may leave it out for a process
    /// not runnable now). `None` where the platform does not say.
    fn runnable(&mut self, _pid: Pid) -> Option<RunState> {
        None
    }
    /// The bytes process `pid` moved so far that are progress (written, and read from
    /// storage), its reaped children's included. `None` where the platform does not say.
    fn moved_bytes(&mut self, _pid: Pid) -> Option<u64> {
        None
    }
    /// Of those, the ones its reaped children moved (the whole count less its own threads').
    fn reaped_moved_bytes(&mut self, _pid: Pid) -> Option<u64> {
        None
    }
}

/// The fewest bytes the descendants must move within [`IO_WINDOW`] to count as progress: a
/// short line. A sleeping or blocked process moves no byte, and a program's start reads,
/// which do not count; a stray byte now and then stays below it.
pub(crate) const IO_FLOOR: u64 = 16;

/// The stretch over which moved bytes are added up: short check intervals (100 ms) see a line
/// written every 300 ms as 11 bytes in one sample and none in the next two. A sample counts
/// only if it saw bytes itself, so the window never carries activity past the last write.
const IO_WINDOW: Duration = Duration::from_secs(1);

/// What [`ProcessSource::runnable`] says of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunState {
    /// Runnable now (state R: on a CPU or in a run queue).
    pub(crate) now: bool,
    /// Runnable in all so far (run time plus run delay), if read.
    pub(crate) total: Option<Duration>,
    /// The real instant it was read at: the process's run time and state are the machine's,
    /// so their stretches are measured on the machine's clock, not the session's (a mock
    /// clock moved a minute in a millisecond of real time must not make a process seen
    /// runnable twice "runnable for a minute"). `None`: judge at the sample's instant.
    pub(crate) at: Option<Instant>,
}

/// `/proc/PID/schedstat` (`<run time ns> <run delay ns> <slices>`): run time plus run delay.
#[cfg(target_os = "linux")]
fn read_runnable(pid: Pid) -> Option<Duration> {
    let mut buf = [0u8; 1024];
    let text = crate::process::sys::read_proc(&format!("/proc/{pid}/schedstat"), &mut buf)?;
    parse_schedstat(&text)
}

/// The run time plus run delay of a `schedstat` line.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_schedstat(text: &str) -> Option<Duration> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (ran, waited) = (fields.next()??, fields.next()??);
    Some(Duration::from_nanos(ran.saturating_add(waited)))
}

/// Never more processes than this in one tree: a fork bomb must not make sampling unbounded.
const MAX_TREE: usize = 20_000;

/// Linux: walks `/proc/<pid>/task/<tid>/children` from the root, so the cost grows with the
/// tree, not with the number of processes on the machine. Falls back to one pass over all of
/// `/proc` on kernels without that file.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub(crate) struct ProcFs {
    tick: Duration,
    scratch: Vec<Pid>,
    /// Whether each process read in this sample (by the walk, or one by one from a cgroup's
    /// members) was runnable (state R), so that the runnable look reads no `stat` twice.
    states: HashMap<Pid, bool>,
}

/// A process's `stat`, read by the `/proc` source (counted by its tests: each is a file read
/// at every check interval).
#[cfg(target_os = "linux")]
fn read_stat(pid: Pid) -> Option<crate::process::sys::ProcStat> {
    #[cfg(test)]
    STAT_READS.with(|n| n.set(n.get() + 1));
    crate::process::sys::read_stat(pid)
}

#[cfg(all(target_os = "linux", test))]
thread_local! {
    /// How many `stat` files the `/proc` source read on this thread.
    static STAT_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(target_os = "linux")]
impl ProcFs {
    pub(crate) fn new() -> Self {
        let per_second = crate::process::sys::clock_ticks_per_second().max(1);
        Self {
            tick: Duration::from_nanos(1_000_000_000 / per_second),
            scratch: Vec::new(),
            states: HashMap::new(),
        }
    }

    fn convert(&self, stat: crate::process::sys::ProcStat) -> ProcSample {
        ProcSample {
            pid: stat.pid,
            ppid: stat.ppid,
            pgrp: stat.pgrp,
            start_time: stat.start_time,
            cpu: self.tick * u32::try_from(stat.cpu_ticks).unwrap_or(u32::MAX),
            child_cpu: self.tick * u32::try_from(stat.child_cpu_ticks).unwrap_or(u32::MAX),
            dead: stat.is_dead(),
        }
    }

    /// The whole-`/proc` fallback: parent links of every process.
    fn tree_by_scan(&mut self, root: Pid) -> Vec<ProcSample> {
        let mut all: Vec<ProcSample> = Vec::new();
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for entry in dir.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(Pid::parse) else {
                    continue;
                };
                if let Some(stat) = read_stat(pid) {
                    all.push(self.convert(stat));
                }
            }
        }
        let mut tree: Vec<ProcSample> = all.iter().filter(|p| p.pid == root).copied().collect();
        let mut index = 0;
        while index < tree.len() && tree.len() < MAX_TREE {
            let parent = tree[index].pid;
            tree.extend(
                all.iter()
                    .filter(|p| p.ppid == Some(parent) && p.pid != root),
            );
            index += 1;
        }
        tree
    }
}

#[cfg(target_os = "linux")]
impl ProcessSource for ProcFs {
    fn tree(&mut self, root: Pid) -> Vec<ProcSample> {
        self.states.clear();
        let Some(stat) = read_stat(root) else {
            return Vec::new();
        };
        self.states.insert(stat.pid, stat.state == b'R');
        let mut threads = vec![stat.threads];
        let mut tree = vec![self.convert(stat)];
        let mut index = 0;
        while index < tree.len() && tree.len() < MAX_TREE {
            let parent = tree[index].pid;
            self.scratch.clear();
            if crate::process::sys::children_of(parent, threads[index], &mut self.scratch).is_none()
                && index == 0
                && !tree[0].dead
            {
                return self.tree_by_scan(root);
            }
            // A process that vanished meanwhile has no children file: skip it.
            for i in 0..self.scratch.len() {
                let pid = self.scratch[i];
                if let Some(stat) = read_stat(pid) {
                    self.states.insert(stat.pid, stat.state == b'R');
                    threads.push(stat.threads);
                    tree.push(self.convert(stat));
                }
            }
            index += 1;
        }
        tree
    }

    fn process(&mut self, pid: Pid) -> Option<ProcSample> {
        let stat = read_stat(pid)?;
        self.states.insert(stat.pid, stat.state == b'R');
        Some(self.convert(stat))
    }

    fn new_look(&mut self) {
        self.states.clear();
    }

    /// From the last walk's `stat` (a cgroup's member not walked: its own `stat`); the
    /// `schedstat` only of a process runnable now (a sleeping one costs no read).
    fn runnable(&mut self, pid: Pid) -> Option<RunState> {
        let now = match self.states.get(&pid) {
            Some(runnable) => *runnable,
            None => read_stat(pid)?.state == b'R',
        };
        let total = if now { read_runnable(pid) } else { None };
        let at = Some(Instant::now());
        Some(RunState { now, total, at })
    }

    fn moved_bytes(&mut self, pid: Pid) -> Option<u64> {
        crate::process::sys::read_moved_bytes(pid)
    }

    fn reaped_moved_bytes(&mut self, pid: Pid) -> Option<u64> {
        // The whole count first: the own bytes added before the second read make the
        // difference low, never high (the observer keeps the most read so far).
        let whole = crate::process::sys::read_moved_bytes(pid)?;
        let own = crate::process::sys::read_own_moved_bytes(pid)?;
        Some(whole.saturating_sub(own))
    }
}

#[cfg(any(not(target_os = "linux"), test, feature = "portable"))]
/// Portable source: one long-lived `sysinfo::System`, refreshed with CPU only, no tasks. It does
/// not know reaped children's CPU, and its start times have a one-second resolution.
pub(crate) struct Sysinfo {
    system: sysinfo::System,
}

#[cfg(any(not(target_os = "linux"), test, feature = "portable"))]
impl fmt::Debug for Sysinfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sysinfo")
    }
}

#[cfg(any(not(target_os = "linux"), test, feature = "portable"))]
impl Sysinfo {
    pub(crate) fn new() -> Self {
        Self {
            system: sysinfo::System::new(),
        }
    }

    fn refresh(&mut self, which: sysinfo::ProcessesToUpdate<'_>) {
        let kind = sysinfo::ProcessRefreshKind::nothing()
            .with_cpu()
            .without_tasks();
        self.system.refresh_processes_specifics(which, true, kind);
    }

    fn convert(pid: Pid, p: &sysinfo::Process) -> ProcSample {
        ProcSample {
            pid,
            ppid: p.parent().and_then(|pp| Pid::new(pp.as_u32())),
            pgrp: crate::process::sys::process_group_of(pid),
            start_time: p.start_time(),
            cpu: Duration::from_millis(p.accumulated_cpu_time()),
            child_cpu: Duration::ZERO,
            dead: matches!(
                p.status(),
                sysinfo::ProcessStatus::Zombie | sysinfo::ProcessStatus::Dead
            ),
        }
    }
}

#[cfg(any(not(target_os = "linux"), test, feature = "portable"))]
impl ProcessSource for Sysinfo {
    fn tree(&mut self, root: Pid) -> Vec<ProcSample> {
        self.refresh(sysinfo::ProcessesToUpdate::All);
        let procs = self.system.processes();
        let Some(r) = procs.get(&sysinfo::Pid::from_u32(root.get())) else {
            return Vec::new();
        };
        let mut tree = vec![Self::convert(root, r)];
        let mut index = 0;
        while index < tree.len() && tree.len() < MAX_TREE {
            let parent = tree[index].pid.get();
            for (pid, p) in procs {
                if p.parent().map(|pp| pp.as_u32()) == Some(parent)
                    && pid.as_u32() != root.get()
                    && let Some(pid) = Pid::new(pid.as_u32())
                {
                    tree.push(Self::convert(pid, p));
                }
            }
            index += 1;
        }
        tree
    }

    fn process(&mut self, pid: Pid) -> Option<ProcSample> {
        let spid = sysinfo::Pid::from_u32(pid.get());
        self.refresh(sysinfo::ProcessesToUpdate::Some(&[spid]));
        self.system.process(spid).map(|p| Self::convert(pid, p))
    }
}

/// What one sample found: defined with the results it is part of
/// ([`StaleReport::children`](crate::outcome::StaleReport::children)).
pub use crate::outcome::ChildrenSample;

/// A process known by identity.
#[derive(Debug, Clone, Copy)]
struct Known {
    start_time: u64,
    ppid: Option<Pid>,
    pgrp: Option<Pid>,
    cpu: Duration,
    child_cpu: Duration,
    /// In the root's tree at the last sample (else an escapee).
    in_tree: bool,
}

/// A process that can be signalled safely: its pid and the start time it must still have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    pub(crate) pid: Pid,
    pub(crate) start_time: u64,
}

/// Samples the CPU time of a process's descendants and tells real work from mere existence.
///
/// Usable on its own; a [`Session`](crate::Session) runs one from its monitor thread every
/// check interval when the children source is on (the default).
///
/// ```
/// use std::process::Command;
/// use std::time::{Duration, Instant};
/// use quietus::{ChildWatchConfig, Pid};
/// use quietus::sources::DescendantObserver;
///
/// let mut child = Command::new("sh")
///     .args(["-c", "sleep 5 & wait"])
///     .spawn()?;
/// let mut observer = DescendantObserver::new(Pid::of(&child), &ChildWatchConfig::default());
/// let t0 = Instant::now();
/// observer.sample(t0); // the first sample is a baseline
/// let give_up = t0 + Duration::from_secs(10);
/// let mut sample = observer.sample(Instant::now());
/// while sample.descendants == 0 && Instant::now() < give_up {
///     sample = observer.sample(Instant::now());
/// }
/// assert_eq!(sample.descendants, 1); // the sleeper...
/// assert!(!sample.active); // ...which does no work
/// child.kill()?;
/// child.wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct DescendantObserver {
    source: Box<dyn ProcessSource>,
    root: Pid,
    include_root: bool,
    threshold: f64,
    known: HashMap<Pid, Known>,
    last_at: Option<Instant>,
    last: ChildrenSample,
    /// Recent samples (their instant and CPU delta), spanning at least the minimum window.
    window: std::collections::VecDeque<(Instant, Duration)>,
    /// The session's cgroup, when the tree is one: its CPU in all and its live members.
    cgroup: Option<CgroupReader>,
    /// With a cgroup: the root's own CPU at the last look (it stays once the root is reaped).
    root_cpu: Duration,
    /// With a cgroup: the CPU that counts (the root's own only when asked), at the last look.
    cgroup_counted: Duration,
    /// The live processes of the tree at the last sample, the root first (the network
    /// source and the diagnosis look at these).
    pids: Vec<Pid>,
    /// Per live process: since when its runnable time is measured, and what it was then.
    runnable: HashMap<Pid, Runnable>,
    /// Per live process (by identity: pid, start time): the bytes it had moved at the last
    /// sample.
    moved: HashMap<Pid, (u64, u64)>,
    /// With a cgroup: the time its processes had waited for a CPU at the last look.
    cgroup_waited: Option<Duration>,
    /// The bytes moved per sample within the last [`IO_WINDOW`].
    moved_window: std::collections::VecDeque<(Instant, u64)>,
}

/// One process's runnable time, measured over stretches of at least [`RUNNABLE_SPAN`].
#[derive(Debug, Clone, Copy)]
struct Runnable {
    /// The start of the stretch being measured, and the runnable time then (if read).
    since: Instant,
    at_start: Option<Duration>,
    /// Whether it was runnable for at least half of the last stretch measured.
    starved_busy: bool,
    /// Since when it was seen runnable (state R) at every look, if it is now.
    runnable_since: Option<Instant>,
}

/// The shortest stretch over which a process's runnable time is judged (shorter gaps between
/// samples, like the fresh sample at a stale decision, keep the last judgment).
const RUNNABLE_SPAN: Duration = Duration::from_millis(250);

/// One look at the session's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupReading {
    /// CPU used in all (`usage_usec` of `cpu.stat`).
    pub(crate) usage: Duration,
    /// The live members.
    pub(crate) members: Vec<Pid>,
    /// How long its processes waited for a CPU in all (`cpu.pressure`), where the kernel
    /// says.
    pub(crate) waited: Option<Duration>,
}

/// Reads the session's cgroup; `None` when it cannot be read (then the walk of `/proc` takes
/// over for that sample).
pub(crate) type CgroupReader = Box<dyn FnMut() -> Option<CgroupReading> + Send>;

impl fmt::Debug for DescendantObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DescendantObserver")
            .field("root", &self.root)
            .field("known", &self.known.len())
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

/// The floor of the threshold: two ticks of the kernel's 100 Hz CPU accounting, so one stray
/// tick of an idle process never looks like work. Short check intervals pool their samples
/// until this floor is a small enough share of the window (see `sample`).
const MIN_CPU: Duration = Duration::from_millis(20);

impl DescendantObserver {
    /// An observer of the descendants of `root_pid`, with this platform's source.
    pub fn new(root_pid: Pid, config: &ChildWatchConfig) -> Self {
        #[cfg(all(target_os = "linux", not(feature = "portable")))]
        let source: Box<dyn ProcessSource> = Box::new(ProcFs::new());
        #[cfg(any(not(target_os = "linux"), feature = "portable"))]
        let source: Box<dyn ProcessSource> = Box::new(Sysinfo::new());
        Self::with_source(root_pid, config, source)
    }

    pub(crate) fn with_source(
        root: Pid,
        config: &ChildWatchConfig,
        source: Box<dyn ProcessSource>,
    ) -> Self {
        Self {
            source,
            root,
            include_root: config.include_self,
            threshold: config.cpu_threshold,
            known: HashMap::new(),
            last_at: None,
            last: ChildrenSample::default(),
            window: std::collections::VecDeque::new(),
            cgroup: None,
            root_cpu: Duration::ZERO,
            cgroup_counted: Duration::ZERO,
            pids: Vec::new(),
            runnable: HashMap::new(),
            moved: HashMap::new(),
            cgroup_waited: None,
            moved_window: std::collections::VecDeque::new(),
        }
    }

    /// Why this observer cannot see the tree, if it cannot: no cgroup to read and no `/proc`
    /// of this pid namespace to walk (none mounted, or the host's kept in a new pid
    /// namespace). It then sees no descendant, no CPU and no escapee.
    pub(crate) fn blind(&self) -> Option<crate::process::sys::proc::ProcUnavailable> {
        if self.cgroup.is_some() || cfg!(not(target_os = "linux")) {
            return None;
        }
        crate::process::sys::proc_view().why_not()
    }

    /// Samples the tree's CPU from its cgroup instead of walking `/proc`: exact, escapees and
    /// reaped children included, one read per sample (plus the root's own CPU, which does not
    /// count unless asked).
    pub(crate) fn use_cgroup(&mut self, reader: CgroupReader) {
        self.cgroup = Some(reader);
    }

    /// One sample from the cgroup: `usage` its CPU in all, `members` its live processes.
    fn sample_cgroup(
        &mut self,
        now: Instant,
        elapsed: Duration,
        first: bool,
        reading: CgroupReading,
    ) -> ChildrenSample {
        let CgroupReading {
            usage,
            members,
            waited,
        } = reading;
        // The tree is the cgroup's members, the root first (the network source and the
        // diagnosis look at these).
        self.pids.clear();
        self.pids
            .extend(members.iter().filter(|p| **p == self.root));
        self.pids
            .extend(members.iter().filter(|p| **p != self.root));
        let members = members.len();
        // Each member's `stat` once: for its identity (the moved bytes) and, kept by the
        // source, for the runnable look.
        self.source.new_look();
        let read: Vec<ProcSample> = self
            .pids
            .clone()
            .into_iter()
            .filter_map(|pid| self.source.process(pid))
            .collect();
        let root = match read.iter().find(|p| p.pid == self.root) {
            Some(root) => Some(*root),
            None => self.source.process(self.root), // no longer a member: exited
        };
        if let Some(root) = root {
            self.root_cpu = self.root_cpu.max(root.cpu);
        }
        let root_alive = root.is_some_and(|r| !r.dead);
        let descendant_cpu = usage.saturating_sub(self.root_cpu);
        let counted = if self.include_root {
            usage
        } else {
            descendant_cpu
        };
        let delta = if first {
            Duration::ZERO
        } else {
            counted.saturating_sub(self.cgroup_counted)
        };
        self.cgroup_counted = self.cgroup_counted.max(counted);
        let descendants = members.saturating_sub(usize::from(root_alive));
        let cpu_waited = self.cpu_waited(waited, first);
        let busy = self.judge(now, elapsed, delta);
        // CPU asked for and not received: a starved tree of short-lived processes, waiting
        // for a CPU at least half of the time (the rule for one starved process, over the
        // whole tree). Only with a descendant: the direct child's own waits are not progress,
        // and an event loop's many short waits on a loaded machine stay well below half.
        let starved =
            (descendants > 0 || self.include_root) && cpu_waited >= MIN_CPU.max(elapsed / 2);
        let starved_busy = self.runnable_anyway(now);
        let members: Vec<(Pid, u64)> = read.iter().map(|p| (p.pid, p.start_time)).collect();
        let moved_bytes = self.moved_bytes(&members, first);
        let moving = self.moving(now, moved_bytes);
        let active = !first && (busy || starved || starved_busy || moving);
        self.last = ChildrenSample {
            active,
            descendants,
            cpu_delta: delta,
            descendant_cpu,
            escapees: 0, // nothing escapes a cgroup
            moved_bytes,
            cpu_waited,
        };
        self.last
    }

    /// Whether `bytes`, moved in the sample at `now`, are progress: some were, and with the
    /// other samples of the last [`IO_WINDOW`] they reach [`IO_FLOOR`].
    fn moving(&mut self, now: Instant, bytes: u64) -> bool {
        self.moved_window.push_back((now, bytes));
        while self
            .moved_window
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > IO_WINDOW)
        {
            self.moved_window.pop_front();
        }
        let sum: u64 = self.moved_window.iter().map(|(_, b)| *b).sum();
        bytes > 0 && sum >= IO_FLOOR
    }

    /// The time the cgroup's processes waited for a CPU since the last look.
    fn cpu_waited(&mut self, waited: Option<Duration>, first: bool) -> Duration {
        let Some(waited) = waited else {
            return Duration::ZERO;
        };
        let before = self.cgroup_waited.replace(waited);
        match before {
            Some(before) if !first => waited.saturating_sub(before),
            _ => Duration::ZERO,
        }
    }

    /// The bytes the live processes `tree` (pid, start time) moved since the last sample (the
    /// root's own only when its own CPU counts; what its reaped children moved always); a
    /// process seen for the first time after the baseline counts whole (it may have started
    /// and written between two samples). Forgets the processes no longer there.
    fn moved_bytes(&mut self, tree: &[(Pid, u64)], first: bool) -> u64 {
        self.moved
            .retain(|pid, (start, _)| tree.contains(&(*pid, *start)));
        let mut sum = 0u64;
        for &(pid, start_time) in tree {
            let bytes = if pid == self.root && !self.include_root {
                self.source.reaped_moved_bytes(pid)
            } else {
                self.source.moved_bytes(pid)
            };
            let Some(bytes) = bytes else {
                continue;
            };
            // The counts only grow; a reading can come out low (the root's reaped children's
            // bytes are its whole count less its own, read one after the other, and its own
            // may grow in between), never high: the most read so far is the count, and a low
            // reading followed by a right one moves nothing.
            let known = self
                .moved
                .get(&pid)
                .filter(|(start, _)| *start == start_time);
            let (before, count) = match known {
                Some(&(_, before)) => (Some(before), before.max(bytes)),
                None => (None, bytes),
            };
            self.moved.insert(pid, (start_time, count));
            sum = sum.saturating_add(match before {
                Some(before) => bytes.saturating_sub(before),
                None if first => 0,
                None => bytes,
            });
        }
        sum
    }

    /// The live processes of the tree at the last sample, the root first.
    pub(crate) fn pids(&self) -> &[Pid] {
        &self.pids
    }

    /// The latest sample.
    pub fn last(&self) -> ChildrenSample {
        self.last
    }

    /// Takes a sample at `now` (the caller's clock). The first sample is a baseline and never
    /// active.
    pub fn sample(&mut self, now: Instant) -> ChildrenSample {
        let first = self.last_at.is_none();
        let elapsed = self
            .last_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.last_at = Some(now);
        if let Some(reading) = self.cgroup.as_mut().and_then(|read| read()) {
            return self.sample_cgroup(now, elapsed, first, reading);
        }

        let tree = self.source.tree(self.root);
        self.pids.clear();
        self.pids
            .extend(tree.iter().filter(|p| !p.dead).map(|p| p.pid));
        let in_tree: HashMap<Pid, ProcSample> = tree.iter().map(|p| (p.pid, *p)).collect();
        let (credit, escapees) = self.sort_out_missing(&in_tree);
        let (delta, descendant_cpu, descendants) = self.account(&tree, &credit, first);
        let busy = self.judge(now, elapsed, delta);
        let starved_busy = self.runnable_anyway(now);
        let live: Vec<(Pid, u64)> = tree
            .iter()
            .filter(|p| !p.dead)
            .map(|p| (p.pid, p.start_time))
            .collect();
        let moved_bytes = self.moved_bytes(&live, first);
        let moving = self.moving(now, moved_bytes);
        let active = !first && (busy || starved_busy || moving);
        self.last = ChildrenSample {
            active,
            descendants,
            cpu_delta: delta,
            descendant_cpu,
            escapees,
            moved_bytes,
            cpu_waited: Duration::ZERO,
        };
        self.last
    }

    /// Known identities no longer in the tree: escapees if alive, else gone. CPU of a gone one
    /// already seen is deducted from its parent's reaped-children time, so a busy grandchild
    /// that exits is not credited twice. Returns that credit by parent pid, and the escapees.
    fn sort_out_missing(
        &mut self,
        in_tree: &HashMap<Pid, ProcSample>,
    ) -> (HashMap<Pid, Duration>, usize) {
        let mut credit: HashMap<Pid, Duration> = HashMap::new();
        let mut gone = Vec::new();
        let mut escapees = 0;
        for (&pid, known) in self.known.iter_mut() {
            let same = |p: &ProcSample| p.start_time == known.start_time;
            if in_tree.get(&pid).is_some_and(same) {
                continue;
            }
            match self.source.process(pid) {
                Some(p) if same(&p) && !p.dead => {
                    known.in_tree = false;
                    known.ppid = p.ppid;
                    known.pgrp = p.pgrp;
                    escapees += 1;
                }
                _ => {
                    if let Some(parent) = known.ppid {
                        *credit.entry(parent).or_default() += known.cpu + known.child_cpu;
                    }
                    gone.push(pid);
                }
            }
        }
        for pid in gone {
            self.known.remove(&pid);
        }
        (credit, escapees)
    }

    /// The CPU the tree used since the last sample (minus `credit`, the reaped CPU already
    /// counted), its descendants' CPU so far, and how many live descendants it has; remembers
    /// every process of the tree.
    fn account(
        &mut self,
        tree: &[ProcSample],
        credit: &HashMap<Pid, Duration>,
        first: bool,
    ) -> (Duration, Duration, usize) {
        let mut delta = Duration::ZERO;
        let mut descendant_cpu = Duration::ZERO;
        let mut descendants = 0;
        for p in tree {
            let is_root = p.pid == self.root;
            let own_counts = !is_root || self.include_root;
            if !is_root && !p.dead {
                descendants += 1;
            }
            descendant_cpu += if is_root {
                p.child_cpu // what the child reaped: descendants' work too
            } else {
                p.cpu + p.child_cpu
            };
            let reaped_credit = credit.get(&p.pid).copied().unwrap_or_default();
            match self.known.get(&p.pid) {
                Some(k) if k.start_time == p.start_time => {
                    if own_counts {
                        delta += p.cpu.saturating_sub(k.cpu);
                    }
                    delta += p
                        .child_cpu
                        .saturating_sub(k.child_cpu)
                        .saturating_sub(reaped_credit);
                }
                _ if !first => {
                    // Newly seen (or a reused pid): one sample of startup grace.
                    if own_counts {
                        delta += p.cpu;
                    }
                    if !is_root {
                        delta += p.child_cpu;
                    }
                }
                _ => {}
            }
            self.known.insert(
                p.pid,
                Known {
                    start_time: p.start_time,
                    ppid: p.ppid,
                    pgrp: p.pgrp,
                    cpu: p.cpu,
                    child_cpu: p.child_cpu,
                    in_tree: true,
                },
            );
        }
        (delta, descendant_cpu, descendants)
    }

    /// Whether `delta`, the CPU of the `elapsed` time up to `now`, makes the tree active.
    ///
    /// The threshold is judged over a window of recent samples at least `MIN_CPU / threshold`
    /// long (400 ms at 5 %), so that short check intervals do not raise the bar: at 100 ms a
    /// single interval could only show work above 20 % of a core (two 10 ms ticks).
    fn judge(&mut self, now: Instant, elapsed: Duration, delta: Duration) -> bool {
        let start = now - elapsed;
        self.window.push_back((start, delta));
        let min_window = MIN_CPU.div_f64(self.threshold);
        while self.window.len() > 1 && now.saturating_duration_since(self.window[1].0) >= min_window
        {
            self.window.pop_front();
        }
        let span = now
            .saturating_duration_since(self.window[0].0)
            .max(min_window);
        let sum: Duration = self.window.iter().map(|(_, d)| *d).sum();
        sum >= span.mul_f64(self.threshold)
    }

    /// Whether a live process of the tree (the root only when its own CPU counts) was runnable
    /// for at least half of its last measured stretch: working, however little CPU the machine
    /// gave it. Forgets the processes no longer in the tree.
    fn runnable_anyway(&mut self, now: Instant) -> bool {
        let pids: Vec<Pid> = self
            .pids
            .iter()
            .copied()
            .filter(|pid| *pid != self.root || self.include_root)
            .collect();
        self.runnable.retain(|pid, _| pids.contains(pid));
        let mut any = false;
        for pid in pids {
            let Some(state) = self.source.runnable(pid) else {
                continue;
            };
            let runnable_now = state.now;
            let now = state.at.unwrap_or(now);
            let seen = self.runnable.entry(pid).or_insert(Runnable {
                since: now,
                at_start: state.total,
                starved_busy: false,
                runnable_since: None,
            });
            match (state.total, seen.at_start) {
                (Some(total), Some(at_start)) => {
                    let span = now.saturating_duration_since(seen.since);
                    if span >= RUNNABLE_SPAN {
                        seen.starved_busy = total.saturating_sub(at_start) >= span / 2;
                        seen.since = now;
                        seen.at_start = Some(total);
                    }
                }
                // Not read (asleep now): the stretch starts again at its next look.
                (total, _) => {
                    seen.starved_busy = false;
                    seen.since = now;
                    seen.at_start = total;
                }
            }
            seen.runnable_since = if runnable_now {
                seen.runnable_since.or(Some(now))
            } else {
                None
            };
            let runnable_for = seen
                .runnable_since
                .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
            any |= seen.starved_busy || runnable_for >= RUNNABLE_SPAN;
        }
        any
    }

    /// Remembers `process` (an orphan of this tree re-parented to the subreaper) as an escapee.
    pub(crate) fn adopt(&mut self, process: ProcSample) {
        self.known.entry(process.pid).or_insert(Known {
            start_time: process.start_time,
            ppid: process.ppid,
            pgrp: process.pgrp,
            cpu: process.cpu,
            child_cpu: process.child_cpu,
            in_tree: false,
        });
    }

    /// Remembers the adopted orphan `root` and all its current descendants as escapees.
    /// Returns whether `root` is still that process (alive, or a zombie not reaped yet).
    pub(crate) fn adopt_tree(&mut self, root: Identity) -> bool {
        let tree = self.source.tree(root.pid);
        match tree.first() {
            Some(p) if p.pid == root.pid && p.start_time == root.start_time => {}
            _ => return false,
        }
        for process in tree {
            if !process.dead {
                self.adopt(process);
            }
        }
        true
    }

    /// The identities (pid, start time) this observer knows: the tree and its escapees.
    pub(crate) fn identities(&self) -> impl Iterator<Item = (Pid, u64)> + '_ {
        self.known.iter().map(|(pid, k)| (*pid, k.start_time))
    }

    /// The sample of one process by pid, from this observer's source.
    pub(crate) fn process(&mut self, pid: Pid) -> Option<ProcSample> {
        self.source.process(pid)
    }

    /// Live remembered descendants outside process group `pgid` (they would escape a signal to
    /// the group), re-checked by identity now. The root itself is never included.
    pub(crate) fn outside_group(&mut self, pgid: Pid) -> Vec<Identity> {
        let mut out = Vec::new();
        let candidates: Vec<(Pid, u64)> = self
            .known
            .iter()
            .filter(|(pid, k)| **pid != self.root && (k.pgrp != Some(pgid) || !k.in_tree))
            .map(|(pid, k)| (*pid, k.start_time))
            .collect();
        for (pid, start_time) in candidates {
            match self.source.process(pid) {
                Some(p) if p.start_time == start_time && !p.dead => {
                    if p.pgrp != Some(pgid) {
                        out.push(Identity { pid, start_time });
                    }
                }
                _ => {
                    self.known.remove(&pid);
                }
            }
        }
        out
    }

    /// Whether the process `identity` still lives.
    pub(crate) fn alive(&mut self, identity: Identity) -> bool {
        self.source
            .process(identity.pid)
            .is_some_and(|p| p.start_time == identity.start_time && !p.dead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::sync::Mutex;

    /// A scripted process table, with the runnable time of the processes that have one.
    #[derive(Clone, Default)]
    struct Table(
        Arc<Mutex<Vec<ProcSample>>>,
        Arc<Mutex<HashMap<Pid, RunState>>>,
        /// Per pid: bytes moved in all, and of those by reaped children.
        Arc<Mutex<HashMap<Pid, (u64, u64)>>>,
    );

    impl Table {
        fn set(&self, procs: &[ProcSample]) {
            *self.0.lock() = procs.to_vec();
        }

        /// Runnable `ms` in all, asleep now.
        fn set_runnable(&self, n: u32, ms: u64) {
            let total = Some(Duration::from_millis(ms));
            let state = RunState {
                now: false,
                total,
                at: None,
            };
            self.1.lock().insert(pid(n), state);
        }

        /// The bytes `pid` moved so far.
        fn set_moved(&self, n: u32, bytes: u64) {
            self.2.lock().entry(pid(n)).or_default().0 = bytes;
        }

        /// The bytes `pid`'s reaped children moved so far (part of its whole count).
        fn set_reaped_moved(&self, n: u32, bytes: u64) {
            self.2.lock().entry(pid(n)).or_default().1 = bytes;
        }

        /// Runnable `ms` in all, and runnable now or not.
        fn set_runnable_now(&self, n: u32, ms: u64, now: bool) {
            let total = Some(Duration::from_millis(ms));
            self.1.lock().insert(
                pid(n),
                RunState {
                    now,
                    total,
                    at: None,
                },
            );
        }
    }

    impl ProcessSource for Table {
        fn tree(&mut self, root: Pid) -> Vec<ProcSample> {
            let all = self.0.lock().clone();
            let mut tree: Vec<ProcSample> = all.iter().filter(|p| p.pid == root).copied().collect();
            let mut i = 0;
            while i < tree.len() {
                let parent = tree[i].pid;
                tree.extend(all.iter().filter(|p| p.ppid == Some(parent)));
                i += 1;
            }
            tree
        }

        fn process(&mut self, pid: Pid) -> Option<ProcSample> {
            self.0.lock().iter().find(|p| p.pid == pid).copied()
        }

        fn runnable(&mut self, pid: Pid) -> Option<RunState> {
            self.1.lock().get(&pid).copied()
        }

        fn moved_bytes(&mut self, pid: Pid) -> Option<u64> {
            self.2.lock().get(&pid).map(|m| m.0)
        }

        fn reaped_moved_bytes(&mut self, pid: Pid) -> Option<u64> {
            self.2.lock().get(&pid).map(|m| m.1)
        }
    }

    /// The pid `n` (a made-up process of the table).
    fn pid(n: u32) -> Pid {
        Pid::new(n).expect("a pid")
    }

    fn p(n: u32, ppid: u32, start: u64, cpu_ms: u64, child_ms: u64) -> ProcSample {
        ProcSample {
            pid: pid(n),
            ppid: Pid::new(ppid),
            pgrp: Pid::new(100),
            start_time: start,
            cpu: Duration::from_millis(cpu_ms),
            child_cpu: Duration::from_millis(child_ms),
            dead: false,
        }
    }

    fn observer(table: &Table, config: ChildWatchConfig) -> DescendantObserver {
        DescendantObserver::with_source(pid(100), &config, Box::new(table.clone()))
    }

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn busy_grandchild_is_activity_sleeping_one_is_not() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[
            p(100, 1, 1, 0, 0),
            p(200, 100, 2, 0, 0),
            p(300, 200, 3, 0, 0),
        ]);
        assert!(!obs.sample(t0).active, "baseline");
        // 1 s later: the grandchild used 800 ms (busy), the child 0.
        table.set(&[
            p(100, 1, 1, 0, 0),
            p(200, 100, 2, 0, 0),
            p(300, 200, 3, 800, 0),
        ]);
        let s = obs.sample(t0 + SEC);
        assert!(s.active);
        assert_eq!(s.descendants, 2);
        assert_eq!(s.cpu_delta, Duration::from_millis(800));
        // Then it sleeps: no delta.
        let s = obs.sample(t0 + 2 * SEC);
        assert!(!s.active);
        assert_eq!(s.cpu_delta, Duration::ZERO);
    }

    #[test]
    fn a_starved_busy_grandchild_is_activity_an_idle_one_is_not() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        let tree = |grandchild_cpu_ms| {
            [
                p(100, 1, 1, 0, 0),
                p(200, 100, 2, 0, 0),
                p(300, 200, 3, grandchild_cpu_ms, 0),
            ]
        };
        table.set(&tree(0));
        for pid in [100, 200, 300] {
            table.set_runnable(pid, 0);
        }
        assert!(!obs.sample(t0).active, "baseline");
        // Each second the grandchild gets 10 ms of CPU (1 %, below the 5 % threshold) and
        // waits 980 ms in a run queue: runnable 99 % of the time, starved by other load.
        let mut active = Vec::new();
        for s in 1..=4u64 {
            table.set(&tree(10 * s));
            table.set_runnable(300, 990 * s);
            let sample = obs.sample(t0 + SEC * s as u32);
            assert_eq!(sample.cpu_delta, Duration::from_millis(10));
            active.push(sample.active);
        }
        assert_eq!(active, [true; 4]);
        // A fresh sample 10 ms later (the one at a stale decision) keeps the judgment.
        assert!(obs.sample(t0 + SEC * 4 + Duration::from_millis(10)).active);
        // Then it sleeps: runnable 1 % of the time (a poller's wake-ups), not active.
        table.set_runnable(300, 990 * 4 + 10);
        assert!(!obs.sample(t0 + SEC * 5).active);
        // Runnable just under half of the stretch is not enough; at half it is.
        table.set_runnable(300, 990 * 4 + 10 + 499);
        assert!(!obs.sample(t0 + SEC * 6).active);
        table.set_runnable(300, 990 * 4 + 10 + 499 + 500);
        assert!(obs.sample(t0 + SEC * 7).active);
    }

    #[test]
    fn a_process_seen_runnable_at_every_look_for_a_stretch_is_activity() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        // Starved so long it has not had a CPU since the first look: its run delay, added up
        // only when it gets one, does not move; it is in state R at every look.
        table.set_runnable_now(200, 5, true);
        assert!(!obs.sample(t0).active, "baseline");
        assert!(!obs.sample(t0 + ms(200)).active, "R for 200 ms only");
        assert!(obs.sample(t0 + ms(400)).active, "R for 400 ms");
        assert!(obs.sample(t0 + ms(600)).active);
        // One look asleep ends the streak; R again starts a new one.
        table.set_runnable_now(200, 5, false);
        assert!(!obs.sample(t0 + ms(800)).active);
        table.set_runnable_now(200, 5, true);
        assert!(!obs.sample(t0 + ms(1000)).active);
        assert!(!obs.sample(t0 + ms(1200)).active, "R for 200 ms only");
        assert!(obs.sample(t0 + ms(1300)).active);
        // The root runnable at every look does not count (its own CPU does not).
        table.set_runnable_now(200, 5, false);
        table.set_runnable_now(100, 0, true);
        for at in [1500, 1700, 1900, 2100] {
            assert!(!obs.sample(t0 + ms(at)).active);
        }
    }

    #[test]
    fn runnable_stretches_are_measured_on_the_machines_clock_not_the_sessions() {
        // A mock clock moves 49 s between two looks taken 1 ms apart in real time: a process
        // in state R at both was runnable for 1 ms, not for 49 s (a session under a mock
        // clock was kept alive for ever by a shell seen starting its next `sleep`).
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        let real = |ms: u64| RunState {
            now: true,
            total: Some(Duration::from_millis(5)),
            at: Some(t0 + Duration::from_millis(ms)),
        };
        table.1.lock().insert(pid(200), real(0));
        assert!(!obs.sample(t0).active, "baseline");
        table.1.lock().insert(pid(200), real(1));
        assert!(!obs.sample(t0 + Duration::from_secs(49)).active);
        table.1.lock().insert(pid(200), real(2));
        assert!(!obs.sample(t0 + Duration::from_secs(98)).active);
        // Runnable at every look for 300 ms of real time: working, whatever the session's
        // clock says.
        table.1.lock().insert(pid(200), real(302));
        assert!(obs.sample(t0 + Duration::from_secs(98)).active);
    }

    #[test]
    fn the_starved_root_counts_only_when_asked_and_a_gone_process_is_forgotten() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        table.set_runnable(100, 0);
        table.set_runnable(200, 0);
        obs.sample(t0);
        obs.sample(t0 + SEC);
        // The root spins (runnable all the time): its own CPU does not count, nor its wait.
        table.set_runnable(100, 2000);
        assert!(!obs.sample(t0 + SEC * 2).active);
        let mut obs = observer(
            &table,
            ChildWatchConfig::builder()
                .include_self(true)
                .build()
                .unwrap(),
        );
        table.set_runnable(100, 0);
        obs.sample(t0);
        obs.sample(t0 + SEC);
        table.set_runnable(100, 1000);
        assert!(obs.sample(t0 + SEC * 2).active);
        // The child gone: forgotten (a new process with its pid starts a new stretch).
        table.set(&[p(100, 1, 1, 0, 0)]);
        table.set_runnable(100, 1000);
        obs.sample(t0 + SEC * 3);
        assert!(!obs.runnable.contains_key(&pid(200)));
    }

    #[test]
    fn schedstat_lines_parse_to_run_time_plus_delay() {
        assert_eq!(
            parse_schedstat("19263796 1757176041 10\n"),
            Some(Duration::from_nanos(19_263_796 + 1_757_176_041))
        );
        assert_eq!(parse_schedstat("garbage"), None);
        assert_eq!(parse_schedstat("12"), None);
    }

    #[test]
    fn an_idle_poller_at_one_percent_does_not_count() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        obs.sample(t0);
        for i in 1..=30u64 {
            // 1 % of a core over 30 s intervals: 300 ms each.
            table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 300 * i, 0)]);
            assert!(!obs.sample(t0 + 30 * SEC * i as u32).active);
        }
    }

    #[test]
    fn the_direct_childs_own_cpu_counts_only_when_asked() {
        let table = Table::default();
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0)]);
        let mut default = observer(&table, ChildWatchConfig::default());
        let mut including = observer(
            &table,
            ChildWatchConfig {
                include_self: true,
                ..ChildWatchConfig::default()
            },
        );
        default.sample(t0);
        including.sample(t0);
        table.set(&[p(100, 1, 1, 900, 0)]);
        assert!(!default.sample(t0 + SEC).active);
        assert!(including.sample(t0 + SEC).active);
    }

    #[test]
    fn reaped_grandchildren_are_credited_once() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0)]);
        obs.sample(t0);
        // A compile step started and finished between two samples: only the child's cutime
        // shows it.
        table.set(&[p(100, 1, 1, 0, 700)]);
        let s = obs.sample(t0 + SEC);
        assert!(s.active, "{s:?}");
        assert_eq!(s.cpu_delta, Duration::from_millis(700));
        // A grandchild seen busy, then reaped: its CPU moves into the child's cutime, which
        // must not count a second time.
        table.set(&[p(100, 1, 1, 0, 700), p(300, 100, 9, 500, 0)]);
        assert!(obs.sample(t0 + 2 * SEC).active, "startup grace");
        table.set(&[p(100, 1, 1, 0, 700), p(300, 100, 9, 900, 0)]);
        assert_eq!(
            obs.sample(t0 + 3 * SEC).cpu_delta,
            Duration::from_millis(400)
        );
        table.set(&[p(100, 1, 1, 0, 700 + 910)]);
        let s = obs.sample(t0 + 4 * SEC);
        assert_eq!(
            s.cpu_delta,
            Duration::from_millis(10),
            "only the unseen part"
        );
        assert!(!s.active);
    }

    #[test]
    fn a_member_exiting_is_not_negative_activity() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[
            p(100, 1, 1, 0, 0),
            p(200, 100, 2, 5000, 0),
            p(201, 100, 3, 0, 0),
        ]);
        obs.sample(t0);
        // 200 exits (re-parented zombie reaped elsewhere) while 201 works.
        table.set(&[p(100, 1, 1, 0, 0), p(201, 100, 3, 600, 0)]);
        let s = obs.sample(t0 + SEC);
        assert!(s.active);
        assert_eq!(s.cpu_delta, Duration::from_millis(600));
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 9000, 0)]);
        obs.sample(t0);
        // Same pid, new start time, less CPU: not a negative delta, but a new process whose CPU
        // counts once (startup grace).
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 7, 60, 0)]);
        let s = obs.sample(t0 + SEC);
        assert_eq!(s.cpu_delta, Duration::from_millis(60));
        assert!(s.active);
        // And the reused pid outside the tree is never mistaken for the old identity.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 1, 8, 0, 0)]);
        obs.sample(t0 + 2 * SEC);
        assert!(obs.outside_group(pid(100)).is_empty());
    }

    #[test]
    fn escapees_are_remembered_and_do_not_keep_the_child_alive() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        obs.sample(t0);
        // 200 calls setsid and is re-parented to init, then burns CPU.
        let mut escaped = p(200, 1, 2, 5000, 0);
        escaped.pgrp = Some(pid(200));
        table.set(&[p(100, 1, 1, 0, 0), escaped]);
        let s = obs.sample(t0 + SEC);
        assert!(!s.active);
        assert_eq!(s.escapees, 1);
        assert_eq!(s.descendants, 0);
        assert_eq!(
            obs.outside_group(pid(100)),
            vec![Identity {
                pid: pid(200),
                start_time: 2
            }]
        );
        // It dies: forgotten.
        table.set(&[p(100, 1, 1, 0, 0)]);
        obs.sample(t0 + 2 * SEC);
        assert!(obs.outside_group(pid(100)).is_empty());
    }

    #[test]
    fn the_threshold_scales_with_the_interval_and_has_a_floor() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        obs.sample(t0);
        // 100 ms interval: 5 % would be 5 ms, but the floor is 20 ms.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 10, 0)]);
        assert!(!obs.sample(t0 + Duration::from_millis(100)).active);
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 30, 0)]);
        assert!(obs.sample(t0 + Duration::from_millis(200)).active);
    }

    #[test]
    fn short_intervals_pool_samples_so_modest_work_counts() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        obs.sample(t0);
        // 8 % of a core, sampled every 100 ms, seen in whole 10 ms ticks (8 ms per interval:
        // a single interval shows 0 or 10 ms, never the 20 ms floor).
        let mut seen_active = false;
        for i in 1..=20u64 {
            let total = 8 * i / 10 * 10;
            table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, total, 0)]);
            seen_active |= obs.sample(t0 + Duration::from_millis(100 * i)).active;
        }
        assert!(seen_active, "8 % of a core is work");
        // 1 % of a core: one tick a second never is.
        let mut obs = observer(&table, ChildWatchConfig::default());
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        obs.sample(t0);
        for i in 1..=50u64 {
            let ticks = i / 10; // one 10 ms tick per second
            table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, ticks * 10, 0)]);
            assert!(
                !obs.sample(t0 + Duration::from_millis(100 * i)).active,
                "at {i}"
            );
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn procfs_and_sysinfo_see_the_same_tree() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & echo ready; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let root = Pid::of(&child);
        let mut procfs = ProcFs::new();
        let mut sys = Sysinfo::new();
        let mut a: Vec<Pid> = procfs.tree(root).iter().map(|p| p.pid).collect();
        let mut b: Vec<Pid> = sys.tree(root).iter().map(|p| p.pid).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a.len(), 3, "{a:?}");
        assert_eq!(a, b);
        assert_eq!(procfs.tree_by_scan(root).len(), 3);
        // This test's own processes (not in a group of their own): ended by pid.
        for pid in a {
            let _ = crate::process::sys::kill_pid(pid, crate::process::sys::SIGKILL);
        }
        let _ = child.wait();
    }

    /// A scripted cgroup: its CPU in all (ms) and its live members; `None`: unreadable.
    fn scripted_cgroup(obs: &mut DescendantObserver) -> Arc<Mutex<Option<(u64, usize)>>> {
        scripted_cgroup_waiting(obs).0
    }

    /// The same, with the time its processes waited for a CPU in all (ms).
    #[allow(clippy::type_complexity)]
    fn scripted_cgroup_waiting(
        obs: &mut DescendantObserver,
    ) -> (Arc<Mutex<Option<(u64, usize)>>>, Arc<Mutex<u64>>) {
        let script = Arc::new(Mutex::new(None::<(u64, usize)>));
        let waited = Arc::new(Mutex::new(0u64));
        let (reader, waits) = (script.clone(), waited.clone());
        obs.use_cgroup(Box::new(move || {
            let waited = Some(Duration::from_millis(*waits.lock()));
            reader.lock().map(|(ms, members)| {
                // Pids that stand for members: the root, then made-up others.
                let members = (1000..).take(members).map(pid).collect();
                CgroupReading {
                    usage: Duration::from_millis(ms),
                    members,
                    waited,
                }
            })
        }));
        (script, waited)
    }

    /// A sample from a cgroup reads each member's `stat` once: its identity (for the moved
    /// bytes), the root's CPU and the runnable look all come from that one read (a sleeping
    /// root's was read twice, a runnable descendant's twice too).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_cgroup_sample_reads_each_members_stat_once() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let root = Pid::of(&child);
        let mut obs = DescendantObserver::with_source(
            root,
            &ChildWatchConfig::default(),
            Box::new(ProcFs::new()),
        );
        obs.use_cgroup(Box::new(move || {
            Some(CgroupReading {
                usage: Duration::ZERO,
                members: vec![root],
                waited: None,
            })
        }));
        let t0 = Instant::now();
        for i in 0..3 {
            let before = STAT_READS.with(std::cell::Cell::get);
            obs.sample(t0 + i * SEC);
            let reads = STAT_READS.with(std::cell::Cell::get) - before;
            assert_eq!(reads, 1, "sample {i}: one member, {reads} stat reads");
        }
        child.kill().expect("our own sleep");
        child.wait().expect("reaped");
    }

    #[test]
    fn a_starved_tree_of_short_lived_processes_is_cpu_demand() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let (cgroup, waited) = scripted_cgroup_waiting(&mut obs);
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0)]);
        *cgroup.lock() = Some((0, 2));
        assert!(!obs.sample(t0).active, "baseline");
        // A second of a shell script forking short processes on a starved machine: 8 ms of
        // CPU received (below the threshold), 900 ms spent waiting for a CPU.
        *cgroup.lock() = Some((8, 2));
        *waited.lock() = 900;
        let s = obs.sample(t0 + SEC);
        assert_eq!(s.cpu_waited, Duration::from_millis(900));
        assert!(s.active, "CPU asked for and not received is work");
        // Waits below half of the time (an event loop's short waits): not work.
        *cgroup.lock() = Some((10, 2));
        *waited.lock() = 900 + 300;
        assert!(!obs.sample(t0 + 2 * SEC).active);
        // The root alone (its descendants gone): its own waits never count.
        *cgroup.lock() = Some((10, 1));
        *waited.lock() = 1200 + 1000;
        assert!(!obs.sample(t0 + 3 * SEC).active);
    }

    /// What the root's reaped children moved is its whole count less its own threads', read
    /// one after the other: the root's own bytes between the two reads (a program's start
    /// reading its libraries from storage) make one reading low, never high. The reading
    /// that follows, right again, is no bytes moved: the count is the most read so far. (Each
    /// such pair read as progress: a child that only wrote files got one children event at
    /// its start on a loaded machine.)
    #[test]
    fn a_low_reading_of_the_reaped_childrens_bytes_is_not_progress_when_it_recovers() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0)]);
        table.set_reaped_moved(100, 4096);
        assert!(!obs.sample(t0).active, "baseline");
        // The root read 600 KB of its own between the two reads: low by that much.
        table.set_reaped_moved(100, 0);
        assert!(!obs.sample(t0 + SEC).active, "a low reading");
        table.set_reaped_moved(100, 4096);
        let s = obs.sample(t0 + 2 * SEC);
        assert_eq!(s.moved_bytes, 0, "the reading recovered: nothing moved");
        assert!(!s.active);
        // A child reaped since that really moved bytes still counts.
        table.set_reaped_moved(100, 4096 + 40);
        let s = obs.sample(t0 + 3 * SEC);
        assert_eq!(s.moved_bytes, 40);
        assert!(s.active);
    }

    #[test]
    fn bytes_a_descendant_writes_into_its_parent_are_progress_the_roots_are_not() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        // The root (an agent) and its tool, whose output the root reads from a pipe.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        table.set_moved(100, 5_000);
        table.set_moved(200, 7_000);
        assert!(!obs.sample(t0).active, "baseline");
        // The tool writes a 40-byte line at next to no CPU.
        table.set_moved(200, 7_040);
        let s = obs.sample(t0 + SEC);
        assert_eq!(s.moved_bytes, 40);
        assert!(s.active);
        // The root writes a heartbeat to its log: not progress of the tree.
        table.set_moved(100, 9_000);
        let s = obs.sample(t0 + 2 * SEC);
        assert_eq!(s.moved_bytes, 0);
        assert!(!s.active);
        // Fewer bytes than the floor within a second: not a line of progress.
        table.set_moved(200, 7_040 + IO_FLOOR - 1);
        assert!(!obs.sample(t0 + 3 * SEC).active);
        // Short samples add up within the window: 11 bytes, nothing, 11 bytes.
        let mut moved = 7_040 + IO_FLOOR - 1;
        let at = |n: u64| t0 + 4 * SEC + Duration::from_millis(100 * n);
        moved += 11;
        table.set_moved(200, moved);
        assert!(!obs.sample(at(2)).active, "11 bytes alone");
        assert!(!obs.sample(at(3)).active, "nothing moved in this sample");
        moved += 11;
        table.set_moved(200, moved);
        assert!(obs.sample(at(4)).active, "22 bytes within the window");
        assert!(!obs.sample(at(5)).active, "no activity past the last write");
        // A new process (same pid reused, new start time) counts whole from its first look;
        // one seen at the baseline does not.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 9, 0, 0)]);
        table.set_moved(200, 64);
        assert_eq!(obs.sample(t0 + 6 * SEC).moved_bytes, 64);
        // What the root's reaped children moved (a `dd` that wrote and exited between two
        // samples) is the tree's progress, though in the root's count.
        table.set_moved(100, 9_000 + 4096);
        table.set_reaped_moved(100, 4096);
        assert_eq!(obs.sample(t0 + 7 * SEC).moved_bytes, 4096);
        // When the root's CPU counts, its bytes do too.
        let mut obs = observer(
            &table,
            ChildWatchConfig::builder()
                .include_self(true)
                .build()
                .unwrap(),
        );
        obs.sample(t0);
        table.set_moved(100, 13_196);
        assert_eq!(obs.sample(t0 + SEC).moved_bytes, 100);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_io_gives_written_bytes_and_storage_reads() {
        let io = "rchar: 6976\nwchar: 120\nsyscr: 10\nsyscw: 3\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
        assert_eq!(crate::process::sys::parse_moved_bytes(io), Some(4216));
        assert_eq!(crate::process::sys::parse_moved_bytes("rchar: 1\n"), None);
        // This very process has written nothing by `write` perhaps, but the file reads.
        assert!(crate::process::sys::read_moved_bytes(Pid::current()).is_some());
    }

    #[test]
    fn with_a_cgroup_the_tree_cpu_is_its_usage_without_the_root_and_no_walk() {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let cgroup = scripted_cgroup(&mut obs);
        let t0 = Instant::now();
        // The root alone in the table: an escapee (setsid, re-parented) is not in its tree,
        // and the reaped children are nowhere; the cgroup's usage has them all.
        table.set(&[p(100, 1, 1, 50, 0)]);
        *cgroup.lock() = Some((50, 3));
        let s = obs.sample(t0);
        assert!(!s.active, "baseline");
        assert_eq!(s.descendants, 2, "the members but the root");
        assert_eq!(s.descendant_cpu, Duration::ZERO);
        // The root spins (900 ms): it does not count.
        table.set(&[p(100, 1, 1, 950, 0)]);
        *cgroup.lock() = Some((950, 3));
        assert!(!obs.sample(t0 + SEC).active, "the root's own CPU");
        // An escapee works 600 ms.
        *cgroup.lock() = Some((1550, 3));
        let s = obs.sample(t0 + 2 * SEC);
        assert!(s.active);
        assert_eq!(s.cpu_delta, Duration::from_millis(600));
        assert_eq!(s.descendant_cpu, Duration::from_millis(600));
        assert_eq!(s.escapees, 0, "nothing escapes a cgroup");
    }

    #[test]
    fn with_a_cgroup_the_root_counts_when_asked_and_the_walk_covers_an_unreadable_one() {
        let table = Table::default();
        let mut obs = observer(
            &table,
            ChildWatchConfig::builder()
                .include_self(true)
                .build()
                .unwrap(),
        );
        let cgroup = scripted_cgroup(&mut obs);
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0)]);
        *cgroup.lock() = Some((0, 1));
        obs.sample(t0);
        table.set(&[p(100, 1, 1, 500, 0)]);
        *cgroup.lock() = Some((500, 1));
        let s = obs.sample(t0 + SEC);
        assert!(s.active, "the root's CPU, asked for");
        assert_eq!(s.descendants, 0);
        // The cgroup cannot be read: this sample walks the tree instead.
        *cgroup.lock() = None;
        table.set(&[p(100, 1, 1, 500, 0), p(200, 100, 2, 0, 0)]);
        assert_eq!(obs.sample(t0 + 2 * SEC).descendants, 1);
    }
}
