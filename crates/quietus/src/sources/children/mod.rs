//! The children source (the tree's own work): [`DescendantObserver`] samples the CPU time and
//! the bytes of the child and its descendants and says whether real work happened between two
//! samples. Activity is evidence that the work moves forward, whichever process does it.
//!
//! Rules (see the crate docs and `docs/design.md`, Children):
//! - identity of a process = (pid, start time): a reused pid is a new process;
//! - CPU of a process = user + system time, plus (Linux) the time of its reaped children, so
//!   a compile step that started and finished between two samples still counts — without
//!   counting twice a descendant that was seen alive and then reaped;
//! - activity = the sum of the descendants' positive per-identity deltas reaches the threshold
//!   (default 5 % of one core over the interval, and never less than 20 ms: two ticks of the
//!   kernel's 100 Hz accounting), or the direct child's own reaches [`ROOT_CPU_THRESHOLD`]
//!   (30 %: an agent's spinner uses up to 15 %, `sort` a whole core) — or the threshold too
//!   when asked (`include_self`); so does the program's face, wherever it runs: a process
//!   that drew its screen within 2 s (its standard output the terminal, nothing else written
//!   that counts: `bytes::Ledger::draws`; Gemini CLI's UI runs in a child of the process
//!   started); a member that exits lowers no sum; a newly seen descendant
//!   that already used CPU earns one sample of startup grace (its whole CPU counts once);
//! - a process the machine starves is working, whatever CPU it got (50 busy processes on the
//!   machine leave a compiler far less than the threshold): one that was runnable (on a CPU or
//!   waiting in a run queue: `/proc/PID/schedstat`'s run time plus run delay) for at least
//!   half of a stretch of at least `RUNNABLE_SPAN`, or seen runnable (state R) at every look
//!   for at least `RUNNABLE_SPAN` (the run delay is only added up when the process gets a CPU
//!   again, so a long wait shows late) — the direct child too — provided it ran a real share of
//!   a core meanwhile ([`demanding`]: a poller waits for a CPU at every wake-up and runs next
//!   to nothing); the program (the direct child, its face) only when runnable nearly all of
//!   the stretch, or seen runnable for a second ([`PROGRAM_RUNNABLE_SHARE`]: its UI waits for
//!   a CPU at each frame);
//! - a tree the machine starves is working even when each of its processes lives too briefly
//!   to be seen runnable (a shell script, a version manager's chain of shims): with a cgroup,
//!   the time its processes waited for a CPU (`cpu.pressure`, reaped ones included) counts
//!   when, with the CPU it ran, it fills nearly all the time between two samples (as for the
//!   program: the waits cannot be told apart by process), and it ran a real share of a core
//!   meanwhile — the direct child alone too (its threads);
//! - bytes no other source sees count by where they go (`bytes`): written into a pipe
//!   another process of the tree reads, any byte; files and storage at a working rate; bytes
//!   thrown away, written to quietus's own pipes or to a socket, and a nested quietus's, never;
//! - every identity seen is remembered while it lives, even after it left the tree (`setsid`,
//!   re-parented to init): the kill ladder signals those escapees by pid; their CPU no longer
//!   keeps the child alive.
//!
//! This file holds the rules (the bytes' in `bytes`) and the port they read processes through
//! ([`ProcessSource`]);
//! each backend lives in its own file (`procfs`: Linux's `/proc`; `portable`: `sysinfo`, on
//! macOS and with the `portable` feature), and `tests` tries the rules on scripted process
//! tables, without a process.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use crate::config::ChildWatchConfig;
use crate::pid::Pid;
pub(crate) use bytes::{Moved, Outlet};

mod bytes;
#[cfg(any(not(target_os = "linux"), test, feature = "portable"))]
mod portable;
#[cfg(target_os = "linux")]
mod procfs;
#[cfg(test)]
mod tests;

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
    /// Each thread of process `pid`, for a process of several threads (empty otherwise, and
    /// where the platform does not say): its main thread may wait while the others work.
    fn thread_runs(&mut self, _pid: Pid) -> Vec<ThreadRun> {
        Vec::new()
    }
    /// What process `pid` moved so far, its reaped children's included. `None` where the
    /// platform does not say.
    fn moved(&mut self, _pid: Pid) -> Option<Moved> {
        None
    }
    /// Of those, what its own threads moved (the whole count less its reaped children's).
    fn own_moved(&mut self, _pid: Pid) -> Option<Moved> {
        None
    }
    /// Where process `pid`'s descriptors lead (its pipes, the files it writes). `None` where
    /// the platform does not say, or when they cannot be read.
    fn outlets(&mut self, _pid: Pid) -> Option<Vec<Outlet>> {
        None
    }
    /// Whether process `pid` is a quietus (a nested one's messages are not progress).
    fn supervisor(&mut self, _pid: Pid) -> bool {
        false
    }
}

/// What [`ProcessSource::thread_runs`] says of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadRun {
    /// Its id.
    pub(crate) tid: u32,
    /// The time it ran in all.
    pub(crate) ran: Duration,
    /// Runnable in all (run time plus run delay).
    pub(crate) total: Duration,
    /// The real instant it was read at (see [`RunState::at`]).
    pub(crate) at: Instant,
}

/// What [`ProcessSource::runnable`] says of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunState {
    /// Runnable now (state R: on a CPU or in a run queue).
    pub(crate) now: bool,
    /// Runnable in all so far (run time plus run delay), if read.
    pub(crate) total: Option<Duration>,
    /// Of that, the time it ran (on a CPU), if read.
    pub(crate) ran: Option<Duration>,
    /// The real instant it was read at: the process's run time and state are the machine's,
    /// so their stretches are measured on the machine's clock, not the session's (a mock
    /// clock moved a minute in a millisecond of real time must not make a process seen
    /// runnable twice "runnable for a minute"). `None`: judge at the sample's instant.
    pub(crate) at: Option<Instant>,
}

/// Never more processes than this in one tree: a fork bomb must not make sampling unbounded.
const MAX_TREE: usize = 20_000;

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
    /// The CPU of the tree that counts at the threshold (the descendants', and the root's
    /// own when asked), over recent samples.
    window: CpuWindow,
    /// The root's own CPU (unless it counts with the descendants'), judged at
    /// [`ROOT_CPU_THRESHOLD`].
    root_window: CpuWindow,
    /// The session's cgroup, when the tree is one: its CPU in all and its live members.
    cgroup: Option<CgroupReader>,
    /// With a cgroup: the root's own CPU at the last look (it stays once the root is reaped).
    root_cpu: Duration,
    /// With a cgroup: each member's start time and CPU at the last look (the CPU of the
    /// process that draws the program's screen is judged with the root's).
    member_cpu: HashMap<Pid, (u64, Duration)>,
    /// With a cgroup: the CPU that counts (the root's own only when asked), at the last look.
    cgroup_counted: Duration,
    /// The live processes of the tree at the last sample, the root first (the network
    /// source and the diagnosis look at these).
    pids: Vec<Pid>,
    /// Per live process: since when its runnable time is measured, and what it was then.
    runnable: HashMap<Pid, Runnable>,
    /// The same for each thread of a process of several threads.
    thread_runnable: HashMap<(Pid, u32), Runnable>,
    /// The bytes the tree's processes moved, by identity, and the recent samples.
    ledger: bytes::Ledger,
    /// With a cgroup: the time its processes had waited for a CPU at the last look.
    cgroup_waited: Option<Duration>,
    /// With a cgroup: every member seen, by identity (pid → start time), while it lives. One
    /// no longer a member but alive has left the cgroup (its pid written to another's
    /// `cgroup.procs`): it is still the tree's (issue 51 item 2).
    cgroup_members: HashMap<Pid, u64>,
}

/// One process's runnable time, measured over stretches of at least [`RUNNABLE_SPAN`].
#[derive(Debug, Clone, Copy)]
struct Runnable {
    /// The start of the stretch being measured, and the runnable time then (if read).
    since: Instant,
    at_start: Option<Duration>,
    /// The time it ran in all at the start of the stretch (if read).
    ran_at_start: Option<Duration>,
    /// Whether it was runnable for at least half of the last stretch measured, and ran a
    /// real share of a core meanwhile.
    starved_busy: bool,
    /// Whether it ran a real share of a core in the last stretch measured, or it is not
    /// known (see [`demanding`]).
    demanding: bool,
    /// Since when it was seen runnable (state R) at every look, if it is now.
    runnable_since: Option<Instant>,
}

/// The shortest stretch over which a process's runnable time is judged (shorter gaps between
/// samples, like the fresh sample at a stale decision, keep the last judgment).
const RUNNABLE_SPAN: Duration = Duration::from_millis(250);

/// The share of its stretch a descendant must be runnable to be starved work: half.
const RUNNABLE_SHARE: f64 = 0.5;

/// The share of its stretch the program (the root, or the process drawing its screen) must be
/// runnable to be starved work: nearly all of it. Real work is runnable all the time (`sort`,
/// `xz`, a compiler's threads: 100 % at a load of 21 on 2 cores); an agent's UI redrawing its
/// spinner at 7–12 % of a core, waiting for a CPU at each frame, was runnable 16–30 % of the
/// time at a load of 5–6, and half of some 250 ms stretches (the zoo's `s_relaunched_tui_pty`,
/// 1 run of 8 ended 3 s late).
const PROGRAM_RUNNABLE_SHARE: f64 = 0.9;

/// Measures one process's (or thread's) runnable time `total` (and run time `ran`, if read) at
/// `now` against its stretch: once the stretch is [`RUNNABLE_SPAN`] long, whether it was
/// runnable for `share` of it (a process of the program's: [`PROGRAM_RUNNABLE_SHARE`], else
/// [`RUNNABLE_SHARE`]) while running a real share of a core; not read (asleep now), the stretch
/// starts again.
fn judge(
    seen: &mut Runnable,
    (total, ran): (Option<Duration>, Option<Duration>),
    now: Instant,
    threshold: f64,
    share: f64,
) {
    match (total, seen.at_start) {
        (Some(total), Some(at_start)) => {
            let span = now.saturating_duration_since(seen.since);
            if span >= RUNNABLE_SPAN {
                seen.demanding = match (ran, seen.ran_at_start) {
                    (Some(ran), Some(before)) => {
                        demanding(ran.saturating_sub(before), span, threshold)
                    }
                    _ => true,
                };
                seen.starved_busy =
                    seen.demanding && total.saturating_sub(at_start) >= span.mul_f64(share);
                seen.since = now;
                seen.at_start = Some(total);
                seen.ran_at_start = ran;
            }
        }
        // Not read (asleep now): the stretch starts again at its next look.
        (total, _) => {
            seen.starved_busy = false;
            seen.since = now;
            seen.at_start = total;
            seen.ran_at_start = ran;
        }
    }
}

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

/// The share of a core the root's own CPU must reach to count (unless it counts with its
/// descendants', `ChildWatchConfig::include_self`): twice the most an agent CLI's spinner or
/// event loop used while it waited on a stalled model stream (15 % of a core: Claude Code and
/// Gemini CLI, measured in issue 48; codex's whole tree 3–4 %), far below a program doing
/// real work on a free core (`sort`, `xz`: a whole core). On a loaded machine real work gets
/// less than this, and is seen runnable instead (`docs/design.md`, Children).
pub(crate) const ROOT_CPU_THRESHOLD: f64 = 0.30;

/// Whether `ran`, the CPU a process or a tree received over `span` while it waited for one,
/// shows it would use a real share of a core: a tenth of the threshold (0.5 % of a core). A
/// poller waking every 10 ms on a loaded machine waits for a CPU at every wake-up (runnable
/// 49 % of the time at nice 0 and 65 % at nice 19, measured at a load of 21 on 2 cores) and
/// runs at most 0.2 % of a core; `sort` and `xz` there were runnable all the time and ran
/// 20 %; a nice-19 shell script beside a busy loop on its CPU gets about 1.4 % (its weight,
/// 15, against 1024).
fn demanding(ran: Duration, span: Duration, threshold: f64) -> bool {
    ran >= span.mul_f64(threshold / 10.0)
}

/// The shortest stretch the root's own CPU is judged over: its share must hold for a second,
/// so that a garbage collection or a screen redraw of 20–30 ms in an agent's event loop (a
/// third of a core over the 67 ms a 30 % threshold would otherwise need) is no work.
const ROOT_CPU_WINDOW: Duration = Duration::from_secs(1);

/// What [`DescendantObserver::account`] found in one walk.
#[derive(Debug, Default)]
struct Accounted {
    /// The CPU that counts at the threshold: the descendants' (the root's own when asked).
    delta: Duration,
    /// The root's own CPU, when it does not count with the descendants'.
    root_delta: Duration,
    /// The descendants' CPU so far.
    descendant_cpu: Duration,
    /// The live descendants.
    descendants: usize,
}

/// CPU deltas over recent samples, judged against a share of a core.
#[derive(Debug, Default)]
struct CpuWindow {
    /// Recent samples (their start and CPU delta), spanning at least the minimum window.
    samples: std::collections::VecDeque<(Instant, Duration)>,
}

impl CpuWindow {
    /// Whether `delta`, the CPU of the `elapsed` time up to `now`, reaches `threshold` of a
    /// core.
    ///
    /// The threshold is judged over a window of recent samples at least `MIN_CPU / threshold`
    /// long (400 ms at 5 %), so that short check intervals do not raise the bar: at 100 ms a
    /// single interval could only show work above 20 % of a core (two 10 ms ticks); and at
    /// least `at_least`.
    fn judge(
        &mut self,
        now: Instant,
        elapsed: Duration,
        delta: Duration,
        threshold: f64,
        at_least: Duration,
    ) -> bool {
        let start = now - elapsed;
        self.samples.push_back((start, delta));
        let min_window = MIN_CPU.div_f64(threshold).max(at_least);
        while self.samples.len() > 1
            && now.saturating_duration_since(self.samples[1].0) >= min_window
        {
            self.samples.pop_front();
        }
        let span = now
            .saturating_duration_since(self.samples[0].0)
            .max(min_window);
        let sum: Duration = self.samples.iter().map(|(_, d)| *d).sum();
        sum >= span.mul_f64(threshold)
    }
}

impl DescendantObserver {
    /// An observer of the descendants of `root_pid`, with this platform's source.
    pub fn new(root_pid: Pid, config: &ChildWatchConfig) -> Self {
        #[cfg(all(target_os = "linux", not(feature = "portable")))]
        let source: Box<dyn ProcessSource> = Box::new(procfs::ProcFs::new());
        #[cfg(any(not(target_os = "linux"), feature = "portable"))]
        let source: Box<dyn ProcessSource> = Box::new(portable::Sysinfo::new());
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
            window: CpuWindow::default(),
            root_window: CpuWindow::default(),
            cgroup: None,
            root_cpu: Duration::ZERO,
            member_cpu: HashMap::new(),
            cgroup_counted: Duration::ZERO,
            pids: Vec::new(),
            runnable: HashMap::new(),
            thread_runnable: HashMap::new(),
            ledger: bytes::Ledger::default(),
            cgroup_waited: None,
            cgroup_members: HashMap::new(),
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
        let root_before = self.root_cpu;
        if let Some(root) = root {
            self.root_cpu = self.root_cpu.max(root.cpu);
        }
        let root_delta = if first || self.include_root {
            Duration::ZERO
        } else {
            self.root_cpu.saturating_sub(root_before)
        };
        let found = self
            .ledger
            .sample(self.source.as_mut(), self.root, &read, (now, first));
        let face_delta = self.face_cpu(&read, now);
        let root_delta = if first || self.include_root {
            root_delta
        } else {
            root_delta + face_delta
        };
        let root_alive = root.is_some_and(|r| !r.dead);
        let descendant_cpu = usage.saturating_sub(self.root_cpu);
        let counted = if self.include_root {
            usage
        } else {
            descendant_cpu
        };
        let delta = if first {
            Duration::ZERO
        } else if self.include_root {
            counted.saturating_sub(self.cgroup_counted)
        } else {
            // The face's CPU is judged with the root's.
            counted
                .saturating_sub(self.cgroup_counted)
                .saturating_sub(face_delta)
        };
        self.cgroup_counted = self.cgroup_counted.max(counted);
        let descendants = members.saturating_sub(usize::from(root_alive));
        let cpu_waited = self.cpu_waited(waited, first);
        let busy = self.judge(now, elapsed, delta, root_delta);
        let starved = self.starved(cpu_waited, delta + root_delta, elapsed);
        let starved_busy = self.runnable_anyway(now);
        let moving = self.ledger.moving(now, found);
        let moved_bytes = if moving { found.total() } else { 0 };
        let active = !first && (busy || starved || starved_busy || moving);
        // Last: following who left reads `/proc` anew (the runnable look above is done).
        for p in read.iter().filter(|p| !p.dead) {
            self.cgroup_members.insert(p.pid, p.start_time);
        }
        let escapees = self.outside_cgroup().len();
        self.last = ChildrenSample {
            active,
            descendants,
            cpu_delta: delta,
            descendant_cpu,
            escapees,
            moved_bytes,
            cpu_waited,
        };
        self.last
    }

    /// With a cgroup: the CPU the members that draw the program's screen (not the root) used
    /// since the last look (`read`: the members' `stat` now); remembers every member's.
    fn face_cpu(&mut self, read: &[ProcSample], now: Instant) -> Duration {
        let mut delta = Duration::ZERO;
        let before = std::mem::take(&mut self.member_cpu);
        for p in read.iter().filter(|p| p.pid != self.root) {
            if let Some(&(start, cpu)) = before.get(&p.pid)
                && start == p.start_time
                && self.ledger.draws(p.pid, p.start_time, now)
            {
                delta += p.cpu.saturating_sub(cpu);
            }
            self.member_cpu.insert(p.pid, (p.start_time, p.cpu));
        }
        delta
    }

    /// With a cgroup: the live processes of the tree outside it, re-checked by identity now —
    /// the members seen that left it (the root too), and their descendants, found now (born
    /// outside the cgroup, they never were members). The ladder signals them by pid, as a
    /// group's escapees (issue 51 item 2: a child that moved itself to another cgroup
    /// outlived the run, reported clean). A member that left and came back is a member again.
    pub(crate) fn outside_cgroup(&mut self) -> Vec<Identity> {
        let members: HashSet<Pid> = self.pids.iter().copied().collect();
        let gone: Vec<Identity> = (self.cgroup_members.iter())
            .filter(|(pid, _)| !members.contains(pid))
            .map(|(pid, start_time)| Identity {
                pid: *pid,
                start_time: *start_time,
            })
            .collect();
        for left in gone {
            // Remembered with its descendants as they are now; forgotten once it is gone.
            if !self.adopt_tree(left) {
                self.cgroup_members.remove(&left.pid);
            }
        }
        let candidates: Vec<Identity> = (self.known.iter())
            .filter(|(pid, k)| !k.in_tree && !members.contains(pid))
            .map(|(pid, k)| Identity {
                pid: *pid,
                start_time: k.start_time,
            })
            .collect();
        let mut out = Vec::new();
        for identity in candidates {
            if self.alive(identity) {
                out.push(identity);
            } else {
                self.known.remove(&identity.pid);
            }
        }
        out
    }

    /// Whether the cgroup's tree asked for CPU and did not receive it (`cpu_waited` over
    /// `elapsed`, having received `received`): a starved tree of short-lived processes, or a
    /// program whose threads work while its main thread waits for them (`rustc`: LLVM in its
    /// threads), wanting a CPU (run or waited for) nearly all of the time, as the program must
    /// ([`PROGRAM_RUNNABLE_SHARE`]: the waits cannot be told apart by process, and the
    /// program's count). A CPU-bound tree, starved, wants it all the time (the shell script of
    /// the zoo's `w_starved_tree`); an agent's UI redrawing its spinner on a loaded machine
    /// waits at each frame, half the time or more at a load of 4–6 (real Claude Code: 7–12 %
    /// of a core run), and would use a tenth of a core given all it asks; a poller's waits may
    /// reach it, but it would not use a real share of a core ([`demanding`]).
    fn starved(&self, cpu_waited: Duration, received: Duration, elapsed: Duration) -> bool {
        demanding(received, elapsed, self.threshold)
            && cpu_waited >= MIN_CPU
            && received + cpu_waited >= elapsed.mul_f64(PROGRAM_RUNNABLE_SHARE)
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
        // The bytes first: they say which processes draw the program's screen.
        let live: Vec<ProcSample> = tree.iter().filter(|p| !p.dead).copied().collect();
        let found = self
            .ledger
            .sample(self.source.as_mut(), self.root, &live, (now, first));
        let Accounted {
            delta,
            root_delta,
            descendant_cpu,
            descendants,
        } = self.account(&tree, &credit, (now, first));
        let busy = self.judge(now, elapsed, delta, root_delta);
        let starved_busy = self.runnable_anyway(now);
        let moving = self.ledger.moving(now, found);
        let moved_bytes = if moving { found.total() } else { 0 };
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
    /// counted; the root's own apart unless it counts as a descendant's), its descendants'
    /// CPU so far, and how many live descendants it has; remembers every process of the tree.
    fn account(
        &mut self,
        tree: &[ProcSample],
        credit: &HashMap<Pid, Duration>,
        (now, first): (Instant, bool),
    ) -> Accounted {
        let mut out = Accounted::default();
        for p in tree {
            let is_root = p.pid == self.root;
            // The program's own CPU (the root's, and its face's: the process that draws its
            // screen) goes to its own window unless it counts as a descendant's.
            let program = is_root || self.ledger.draws(p.pid, p.start_time, now);
            let own = if program && !self.include_root {
                &mut out.root_delta
            } else {
                &mut out.delta
            };
            if !is_root && !p.dead {
                out.descendants += 1;
            }
            out.descendant_cpu += if is_root {
                p.child_cpu // what the child reaped: descendants' work too
            } else {
                p.cpu + p.child_cpu
            };
            let reaped_credit = credit.get(&p.pid).copied().unwrap_or_default();
            match self.known.get(&p.pid) {
                Some(k) if k.start_time == p.start_time => {
                    *own += p.cpu.saturating_sub(k.cpu);
                    out.delta += p
                        .child_cpu
                        .saturating_sub(k.child_cpu)
                        .saturating_sub(reaped_credit);
                }
                _ if !first => {
                    // Newly seen (or a reused pid): one sample of startup grace.
                    *own += p.cpu;
                    if !is_root {
                        out.delta += p.child_cpu;
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
        out
    }

    /// Whether `delta` (the tree's CPU that counts at the threshold) or `root_delta` (the
    /// root's own, at [`ROOT_CPU_THRESHOLD`]), the CPU of the `elapsed` time up to `now`,
    /// make the tree active.
    fn judge(
        &mut self,
        now: Instant,
        elapsed: Duration,
        delta: Duration,
        root_delta: Duration,
    ) -> bool {
        let tree = self
            .window
            .judge(now, elapsed, delta, self.threshold, Duration::ZERO);
        let root = self.root_window.judge(
            now,
            elapsed,
            root_delta,
            ROOT_CPU_THRESHOLD,
            ROOT_CPU_WINDOW,
        );
        tree || (root && !self.include_root)
    }

    /// Whether a live process of the tree (the root too) was runnable for at least half of its
    /// last measured stretch (a process of the program's: nearly all of it, or seen runnable
    /// at every look for [`ROOT_CPU_WINDOW`]): working, however little CPU the machine gave
    /// it. Forgets the processes no longer in the tree.
    fn runnable_anyway(&mut self, now: Instant) -> bool {
        let pids: Vec<Pid> = self.pids.clone();
        self.runnable.retain(|pid, _| pids.contains(pid));
        self.thread_runnable
            .retain(|(pid, _), _| pids.contains(pid));
        let mut any = false;
        for pid in pids {
            let Some(state) = self.source.runnable(pid) else {
                continue;
            };
            let runnable_now = state.now;
            let program = pid == self.root || self.ledger.draws_now(pid, now);
            let (share, span) = if program {
                (PROGRAM_RUNNABLE_SHARE, ROOT_CPU_WINDOW)
            } else {
                (RUNNABLE_SHARE, RUNNABLE_SPAN)
            };
            let now = state.at.unwrap_or(now);
            let seen = self.runnable.entry(pid).or_insert(Runnable {
                since: now,
                at_start: state.total,
                ran_at_start: state.ran,
                starved_busy: false,
                demanding: true,
                runnable_since: None,
            });
            judge(seen, (state.total, state.ran), now, self.threshold, share);
            seen.runnable_since = if runnable_now {
                seen.runnable_since.or(Some(now))
            } else {
                None
            };
            let runnable_for = seen
                .runnable_since
                .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
            any |= seen.starved_busy || (seen.demanding && runnable_for >= span);
            any |= self.threads_starved(pid, share);
        }
        any
    }

    /// Whether a thread of `pid` (a process of several threads) was runnable for at least half
    /// of its last measured stretch while it ran a real share of a core: each thread is judged
    /// as a process is, so a pool of pollers is no more work than one poller.
    fn threads_starved(&mut self, pid: Pid, share: f64) -> bool {
        let runs = self.source.thread_runs(pid);
        self.thread_runnable
            .retain(|(p, tid), _| *p != pid || runs.iter().any(|r| r.tid == *tid));
        let mut any = false;
        for run in runs {
            let seen = self
                .thread_runnable
                .entry((pid, run.tid))
                .or_insert(Runnable {
                    since: run.at,
                    at_start: Some(run.total),
                    ran_at_start: Some(run.ran),
                    starved_busy: false,
                    demanding: true,
                    runnable_since: None,
                });
            let read = (Some(run.total), Some(run.ran));
            judge(seen, read, run.at, self.threshold, share);
            any |= seen.starved_busy;
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
