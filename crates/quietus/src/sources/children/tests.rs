//! The rules of the children source on scripted process tables: no processes.

use super::bytes::FILE_FLOOR;
use super::*;
use std::sync::Arc;

use crate::sync::Mutex;

/// A scripted process table, with the runnable time of the processes that have one.
#[derive(Clone, Default)]
struct Table(
    Arc<Mutex<Vec<ProcSample>>>,
    Arc<Mutex<HashMap<Pid, RunState>>>,
    /// Per pid: what it moved and where its descriptors lead.
    Arc<Mutex<HashMap<Pid, Bytes>>>,
    /// Per pid of several threads: each thread's run time and runnable time.
    Arc<Mutex<HashMap<Pid, Vec<ThreadRun>>>>,
);

/// One process's scripted bytes.
#[derive(Clone, Default)]
struct Bytes {
    /// Moved in all.
    whole: Moved,
    /// Of those, moved by its reaped children.
    reaped: Moved,
    /// Its descriptors.
    outlets: Vec<Outlet>,
    /// A quietus.
    supervisor: bool,
}

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
            ran: None,
            at: None,
        };
        self.1.lock().insert(pid(n), state);
    }

    /// The bytes `pid` wrote so far.
    fn set_moved(&self, n: u32, bytes: u64) {
        self.2.lock().entry(pid(n)).or_default().whole.written = bytes;
    }

    /// The storage bytes `pid` moved so far.
    fn set_storage(&self, n: u32, bytes: u64) {
        self.2.lock().entry(pid(n)).or_default().whole.storage = bytes;
    }

    /// The bytes `pid`'s reaped children wrote so far (part of its whole count).
    fn set_reaped_moved(&self, n: u32, bytes: u64) {
        self.2.lock().entry(pid(n)).or_default().reaped.written = bytes;
    }

    /// Where `pid`'s descriptors lead.
    fn set_outlets(&self, n: u32, outlets: &[Outlet]) {
        self.2.lock().entry(pid(n)).or_default().outlets = outlets.to_vec();
    }

    /// `pid` is a quietus.
    fn set_supervisor(&self, n: u32) {
        self.2.lock().entry(pid(n)).or_default().supervisor = true;
    }

    /// Runnable `ms` in all, and runnable now or not.
    fn set_runnable_now(&self, n: u32, ms: u64, now: bool) {
        let total = Some(Duration::from_millis(ms));
        self.1.lock().insert(
            pid(n),
            RunState {
                now,
                total,
                ran: None,
                at: None,
            },
        );
    }

    /// Runnable `ms` in all, of which it ran `ran_ms`, and runnable now or not.
    fn set_ran(&self, n: u32, ms: u64, ran_ms: u64, now: bool) {
        let state = RunState {
            now,
            total: Some(Duration::from_millis(ms)),
            ran: Some(Duration::from_millis(ran_ms)),
            at: None,
        };
        self.1.lock().insert(pid(n), state);
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

    fn thread_runs(&mut self, pid: Pid) -> Vec<ThreadRun> {
        self.3.lock().get(&pid).cloned().unwrap_or_default()
    }

    fn moved(&mut self, pid: Pid) -> Option<Moved> {
        self.2.lock().get(&pid).map(|b| b.whole)
    }

    fn own_moved(&mut self, pid: Pid) -> Option<Moved> {
        let table = self.2.lock();
        let b = table.get(&pid)?;
        Some(Moved {
            written: b.whole.written.saturating_sub(b.reaped.written),
            storage: b.whole.storage.saturating_sub(b.reaped.storage),
        })
    }

    fn outlets(&mut self, pid: Pid) -> Option<Vec<Outlet>> {
        self.2.lock().get(&pid).map(|b| b.outlets.clone())
    }

    fn supervisor(&mut self, pid: Pid) -> bool {
        self.2.lock().get(&pid).is_some_and(|b| b.supervisor)
    }
}

/// The writing end of pipe `inode`.
fn writes(inode: u64) -> Outlet {
    Outlet::Pipe {
        inode,
        writes: true,
    }
}

/// The reading end of pipe `inode`.
fn reads(inode: u64) -> Outlet {
    Outlet::Pipe {
        inode,
        writes: false,
    }
}

/// A file open for writing, `size` bytes long (its mark moves with it).
fn file(inode: u64, size: u64) -> Outlet {
    Outlet::File(bytes::FileMark {
        id: (1, inode),
        size,
        modified_ns: i64::try_from(size).unwrap_or(i64::MAX),
        accessed_ns: 0,
        reads_back: false,
    })
}

/// The same, last read at `accessed` (its access time, on the scale of `file`'s sizes).
fn read_file(inode: u64, size: u64, accessed: i64) -> Outlet {
    let Outlet::File(mark) = file(inode, size) else {
        unreachable!()
    };
    Outlet::File(bytes::FileMark {
        accessed_ns: accessed,
        ..mark
    })
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
    // The root runnable at every look counts too (the program's own work, starved), over a
    // second: an agent's UI waiting for a CPU at each frame is caught in state R at two looks
    // now and then.
    table.set_runnable_now(200, 5, false);
    table.set_runnable_now(100, 0, true);
    assert!(!obs.sample(t0 + ms(1500)).active, "R for no time yet");
    assert!(!obs.sample(t0 + ms(1700)).active, "R for 200 ms only");
    assert!(!obs.sample(t0 + ms(1900)).active, "R for 400 ms only");
    assert!(obs.sample(t0 + ms(2600)).active, "R for 1.1 s");
}

/// rustc's shape without a cgroup: its main thread waits (asleep, its own schedstat flat)
/// while a worker thread is starved by other load (runnable all along, running a little).
/// Seen by its threads, it works; a pool of pollers (each runnable half the time for want of
/// a CPU, each running next to nothing) does not, however many threads.
#[test]
fn a_starved_worker_thread_is_work_a_pool_of_pollers_is_not() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0)]);
    table.set_runnable(100, 0);
    let run = |tid: u32, ran_ms: u64, total_ms: u64, at: Duration| ThreadRun {
        tid,
        ran: Duration::from_millis(ran_ms),
        total: Duration::from_millis(total_ms),
        at: t0 + at,
    };
    // The worker: 300 ms runnable per 300 ms, 30 ms of it on a CPU (10 % of a core).
    let worker = |i: u64| {
        vec![
            run(100, 0, 0, SEC / 10 * 3 * i as u32),
            run(101, 30 * i, 300 * i, SEC / 10 * 3 * i as u32),
        ]
    };
    table.3.lock().insert(pid(100), worker(0));
    assert!(!obs.sample(t0).active, "baseline");
    let mut active = false;
    for i in 1..=4u64 {
        table.3.lock().insert(pid(100), worker(i));
        active |= obs.sample(t0 + SEC / 10 * 3 * i as u32).active;
    }
    assert!(active, "the starved worker thread is work");
    // Eight pollers: each runnable 160 ms of 300 ms, each running 0.3 ms (0.1 % of a core).
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    table.set(&[p(100, 1, 1, 0, 0)]);
    table.set_runnable(100, 0);
    let pool = |i: u64| {
        (0..8)
            .map(|t| {
                let at = SEC / 10 * 3 * i as u32;
                ThreadRun {
                    tid: 200 + t,
                    ran: Duration::from_micros(300 * i),
                    total: Duration::from_millis(160 * i),
                    at: t0 + at,
                }
            })
            .collect::<Vec<_>>()
    };
    table.3.lock().insert(pid(100), pool(0));
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=6u64 {
        table.3.lock().insert(pid(100), pool(i));
        let s = obs.sample(t0 + SEC / 10 * 3 * i as u32);
        assert!(!s.active, "look {i}: pollers are no work");
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
        ran: None,
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

/// A program the machine starves (`xz` at a load of 21 on 2 cores: 20 % of a core, runnable
/// all the time) is working: the root's runnable time counts as a descendant's does.
#[test]
fn the_starved_root_counts_and_a_gone_process_is_forgotten() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
    table.set_ran(100, 0, 0, true);
    table.set_runnable(200, 0);
    obs.sample(t0);
    table.set_ran(100, 1000, 200, true);
    assert!(
        obs.sample(t0 + SEC).active,
        "runnable all the time, 20 % run"
    );
    // The child gone: forgotten (a new process with its pid starts a new stretch).
    table.set(&[p(100, 1, 1, 0, 0)]);
    table.set_ran(100, 2000, 400, true);
    obs.sample(t0 + SEC * 2);
    assert!(!obs.runnable.contains_key(&pid(200)));
}

/// A poller waking every 10 ms on a loaded machine waits for a CPU at every wake-up: runnable
/// 49 % of the time at nice 0 and 65 % at nice 19 (measured at a load of 21 on 2 cores), yet
/// it runs 0.2 % of a core. It would not use a real share of a core: not work, as the root
/// or as a descendant, however long it is seen runnable.
#[test]
fn a_poller_runnable_for_want_of_a_cpu_is_not_work() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
    table.set_ran(100, 0, 0, true);
    table.set_ran(200, 0, 0, true);
    obs.sample(t0);
    for i in 1..=5u64 {
        // 650 ms runnable and 2 ms run per second, in state R at every look.
        table.set_ran(100, 650 * i, 2 * i, true);
        table.set_ran(200, 650 * i, 2 * i, true);
        assert!(!obs.sample(t0 + SEC * i as u32).active, "second {i}");
    }
    // The same waits with a real share run (a starved compiler): work.
    table.set_ran(200, 650 * 6, 10 + 20, true);
    assert!(obs.sample(t0 + SEC * 6).active);
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

/// The program's own CPU counts (`quietus -- sort BIG`, `-- bash -c 'sort …'`), from
/// [`ROOT_CPU_THRESHOLD`] of a core on: an agent's spinner or event loop (8.5–15 % measured
/// while it waited on a stalled stream) stays below. With `include_self` it counts at the
/// descendants' threshold.
#[test]
fn the_programs_own_cpu_counts_from_the_root_threshold() {
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
    // A silent `sort`: a whole core.
    table.set(&[p(100, 1, 1, 900, 0)]);
    assert!(default.sample(t0 + SEC).active, "the program's own work");
    assert!(including.sample(t0 + SEC).active);
    // A spinner redrawn over a dead stream: 15 % of a core.
    table.set(&[p(100, 1, 1, 1050, 0)]);
    assert!(
        !default.sample(t0 + 2 * SEC).active,
        "a spinner is not work"
    );
    assert!(including.sample(t0 + 2 * SEC).active, "asked: 5 % counts");
    // Just above the root's threshold.
    table.set(&[p(100, 1, 1, 1050 + 310, 0)]);
    assert!(default.sample(t0 + 3 * SEC).active);
    // A 35 ms burst (a garbage collection) in 100 ms, over a spinner's 15 %: judged over a
    // second, no work.
    let ms = Duration::from_millis;
    let mut cpu = 1360;
    for i in 1..=10u64 {
        cpu += if i == 5 { 35 } else { 15 };
        table.set(&[p(100, 1, 1, cpu, 0)]);
        assert!(!default.sample(t0 + 3 * SEC + ms(100 * i)).active, "{i}");
    }
}

/// The same with a cgroup: the root's own CPU is its `stat`'s, the rest the cgroup's usage.
#[test]
fn with_a_cgroup_the_programs_own_cpu_counts_from_the_root_threshold() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let cgroup = scripted_cgroup(&mut obs);
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0)]);
    *cgroup.lock() = Some((0, 1));
    assert!(!obs.sample(t0).active, "baseline");
    table.set(&[p(100, 1, 1, 150, 0)]);
    *cgroup.lock() = Some((150, 1));
    assert!(!obs.sample(t0 + SEC).active, "15 %: a spinner");
    table.set(&[p(100, 1, 1, 1050, 0)]);
    *cgroup.lock() = Some((1050, 1));
    assert!(obs.sample(t0 + 2 * SEC).active, "90 %: work");
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

#[test]
fn a_starved_tree_of_short_lived_processes_is_cpu_demand() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let (cgroup, waited) = scripted_cgroup_waiting(&mut obs);
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0)]);
    *cgroup.lock() = Some((0, 2));
    assert!(!obs.sample(t0).active, "baseline");
    // A second of a shell script forking short processes on a starved machine: 20 ms of
    // CPU received (below the threshold), 900 ms spent waiting for a CPU.
    *cgroup.lock() = Some((20, 2));
    *waited.lock() = 900;
    let s = obs.sample(t0 + SEC);
    assert_eq!(s.cpu_waited, Duration::from_millis(900));
    assert!(s.active, "CPU asked for and not received is work");
    // Waits below half of the time (an event loop's short waits): not work.
    *cgroup.lock() = Some((40, 2));
    *waited.lock() = 900 + 300;
    assert!(!obs.sample(t0 + 2 * SEC).active);
    // A poller (niced, beside busy loops) waits for a CPU at every wake-up, 900 ms of the
    // second, and runs 2 ms: it would not use a real share of a core.
    *cgroup.lock() = Some((42, 2));
    *waited.lock() = 1200 + 900;
    assert!(
        !obs.sample(t0 + 3 * SEC).active,
        "a poller's waits are not demand"
    );
    // The root alone (its descendants gone), its threads starved (`rustc`'s LLVM threads,
    // its main thread asleep): the program's own work, starved.
    table.set(&[p(100, 1, 1, 20, 0)]);
    *cgroup.lock() = Some((62, 1));
    *waited.lock() = 2100 + 1000;
    assert!(obs.sample(t0 + 4 * SEC).active, "the program's own demand");
}

/// An agent's UI animating its spinner over a stalled stream on a loaded machine (real Claude
/// Code under a load of 4–6: 7–12 % of a core, its threads waiting for a CPU at each frame):
/// the tree waits for a CPU half the time, and gets a tenth of a core. Had it all the CPU it
/// asked for it would still use a tenth: no starved work. CPU demand is work only when the
/// tree wanted a CPU nearly all the time (run plus waited: a CPU-bound tree, starved); the
/// starved shell script of the test above wanted it 92 % of the time.
#[test]
fn a_spinner_waiting_for_a_cpu_half_the_time_is_not_cpu_demand() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let (cgroup, waited) = scripted_cgroup_waiting(&mut obs);
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0)]);
    *cgroup.lock() = Some((0, 1));
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=5u64 {
        // Each second: 100 ms run, 500 ms waited for a CPU.
        table.set(&[p(100, 1, 1, 100 * i, 0)]);
        *cgroup.lock() = Some((100 * i, 1));
        *waited.lock() = 500 * i;
        let s = obs.sample(t0 + SEC * u32::try_from(i).unwrap());
        assert!(!s.active, "second {i}: {s:?}");
    }
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
    table.set_moved(100, 8192);
    table.set_reaped_moved(100, 8192);
    assert!(!obs.sample(t0).active, "baseline");
    // The root read 600 KB of its own between the two reads: low by that much.
    table.set_reaped_moved(100, 0);
    assert!(!obs.sample(t0 + SEC).active, "a low reading");
    table.set_reaped_moved(100, 8192);
    let s = obs.sample(t0 + 2 * SEC);
    assert_eq!(s.moved_bytes, 0, "the reading recovered: nothing moved");
    assert!(!s.active);
    // A child reaped since that really wrote (where to is gone with it): at the files'
    // working rate.
    table.set_moved(100, 8192 + 40);
    table.set_reaped_moved(100, 8192 + 40);
    assert!(
        !obs.sample(t0 + 4 * SEC).active,
        "40 bytes: below the files' floor"
    );
    table.set_moved(100, 8232 + FILE_FLOOR);
    table.set_reaped_moved(100, 8232 + FILE_FLOOR);
    let s = obs.sample(t0 + 5 * SEC);
    assert_eq!(s.moved_bytes, FILE_FLOOR);
    assert!(s.active, "a `dd` that wrote and exited between two samples");
}

/// A tool's short lines read by a process of the tree (its agent, `out=$(tool)`, `tool |
/// gzip`) are progress whatever their rate: a 7-byte line every 2 s counts. (At least 16
/// bytes within a second counted before: such a tool was ended.)
#[test]
fn bytes_delivered_to_a_reader_in_the_tree_count_whatever_their_rate() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    // The agent (root) reads pipe 7; its tool writes it, and its stderr into quietus's
    // pipe 2 (read outside the tree).
    table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
    table.set_outlets(100, &[reads(7), writes(1), writes(2)]);
    table.set_outlets(200, &[writes(7), writes(2)]);
    table.set_moved(200, 1_000);
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=5u64 {
        table.set_moved(200, 1_000 + 7 * i);
        let s = obs.sample(t0 + 2 * SEC * i as u32);
        assert!(s.active, "line {i}");
        assert_eq!(s.moved_bytes, 7);
        assert!(!obs.sample(t0 + (2 * i + 1) as u32 * SEC).active, "no line");
    }
    // The root's own bytes count the same way: into its tool's stdin.
    table.set_outlets(100, &[reads(7), writes(1), writes(2), writes(8)]);
    table.set_outlets(200, &[writes(7), writes(2), reads(8)]);
    table.set_moved(100, 3);
    assert!(obs.sample(t0 + 20 * SEC).active, "the program's own bytes");
}

/// Bytes thrown away (`echo x >/dev/null` in a loop, `ls .agent >/dev/null`), written into
/// quietus's own pipes (the output source's), or to a socket with `write(2)` (a keep-alive
/// ping: the network source's, with its floor) never count, however often.
#[test]
fn bytes_thrown_away_or_seen_by_another_source_never_count() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[
        p(100, 1, 1, 0, 0),
        p(200, 100, 2, 0, 0),
        p(300, 100, 3, 0, 0),
    ]);
    // 200: stdout to /dev/null, stderr to quietus; 300: a socket and quietus's pipes.
    table.set_outlets(100, &[reads(0), writes(1), writes(2)]);
    table.set_outlets(200, &[reads(0), Outlet::Elsewhere, writes(2)]);
    table.set_outlets(300, &[reads(0), writes(1), writes(2), Outlet::Elsewhere]);
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=10u64 {
        table.set_moved(100, 30 * i); // the root's heartbeat on its own stdout
        table.set_moved(200, 200 * i);
        table.set_moved(300, 50 * i);
        let s = obs.sample(t0 + SEC * i as u32);
        assert!(!s.active, "second {i}");
        assert_eq!(s.moved_bytes, 0);
    }
    // A new `ls >/dev/null` each time: its first look counts whole, and it is nothing.
    table.set(&[p(100, 1, 1, 0, 0), p(400, 100, 4, 0, 0)]);
    table.set_outlets(400, &[reads(0), Outlet::Elsewhere, writes(2)]);
    table.set_moved(400, 120);
    assert!(!obs.sample(t0 + 11 * SEC).active);
}

/// A heartbeat appended to a log, an agent's bookkeeping of its own session and state
/// (codex: about 2 KB over 10 s) and a nested quietus's notifications to its client in the
/// tree are not progress; a file written at a working rate (`tar xf -` fed 4 KiB a second)
/// is.
#[test]
fn heartbeats_bookkeeping_and_a_nested_quietus_are_not_progress_files_at_a_working_rate_are() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    // 100: codex, reading its MCP server's pipe 9, writing its requests into pipe 10 and its
    // session log; 200: `sh -c`; 300: the heartbeat writer with its log open; 400: `quietus
    // mcp`, reading pipe 10 and writing pipe 9.
    table.set(&[
        p(100, 1, 1, 0, 0),
        p(200, 100, 2, 0, 0),
        p(300, 200, 3, 0, 0),
        p(400, 100, 4, 0, 0),
    ]);
    table.set_outlets(100, &[reads(9), writes(10), file(50, 0), writes(1)]);
    table.set_outlets(300, &[writes(1), file(51, 0)]);
    table.set_outlets(400, &[reads(10), writes(9)]);
    table.set_supervisor(400);
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=10u64 {
        table.set_moved(100, 200 * i);
        table.set_moved(300, 40 * i);
        table.set_moved(400, 37 * i);
        assert!(!obs.sample(t0 + SEC * i as u32).active, "second {i}");
    }
    // The nested quietus's tool prints a line into it: its tree's progress.
    table.set(&[
        p(100, 1, 1, 0, 0),
        p(200, 100, 2, 0, 0),
        p(300, 200, 3, 0, 0),
        p(400, 100, 4, 0, 0),
        p(500, 400, 5, 0, 0),
    ]);
    table.set_outlets(400, &[reads(10), writes(9), reads(12)]);
    table.set_outlets(500, &[writes(12)]);
    table.set_moved(500, 0);
    assert!(!obs.sample(t0 + SEC * 10 + SEC / 2).active, "first look");
    table.set_moved(500, 12);
    assert!(
        obs.sample(t0 + SEC * 11 - SEC / 4).active,
        "the nested tool's line"
    );
    // The writer extracts an archive: 4 KiB a second into files.
    for i in 1..=3u64 {
        table.set_moved(300, 400 + 4096 * i);
        table.set_outlets(300, &[writes(1), file(51, 4096 * i)]);
        let s = obs.sample(t0 + SEC * (10 + i) as u32);
        assert!(s.active, "second {i} of the extraction");
    }
}

/// A download stalled with its file open while its bar is redrawn on the terminal (pip under
/// `--pty` on a dead connection, rich's bar: about 6 KB a second to the terminal): the bytes
/// went to the terminal, not into the file, which has not moved since; the file moving again
/// is progress.
#[test]
fn bytes_of_a_writer_whose_open_file_does_not_move_are_not_file_progress() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0)]);
    // pip: the terminal (Elsewhere) and the wheel it downloads, 256 KiB so far.
    table.set_outlets(100, &[Outlet::Elsewhere, file(60, 262_144)]);
    assert!(!obs.sample(t0).active, "baseline");
    table.set_moved(100, 6000);
    assert!(
        obs.sample(t0 + SEC).active,
        "first look at the file: it may have just been written"
    );
    for i in 2..=10u64 {
        table.set_moved(100, 6000 * i);
        let s = obs.sample(t0 + SEC * i as u32);
        assert!(!s.active, "second {i}: only the bar moved");
    }
    // The transfer resumes: the file grows.
    table.set_outlets(100, &[Outlet::Elsewhere, file(60, 262_144 + 8192)]);
    table.set_moved(100, 6000 * 10 + 8192);
    assert!(obs.sample(t0 + 11 * SEC).active, "the file moved");
}

/// Storage pages read or dirtied count at a working rate, the root's own included: a
/// heartbeat dirties one page per writeback cycle, a silent `sort` of a big file reads
/// megabytes.
#[test]
fn storage_counts_at_a_working_rate_the_programs_own_included() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0)]);
    table.set_outlets(100, &[reads(0), writes(1), writes(2)]);
    table.set_storage(100, 0);
    assert!(!obs.sample(t0).active, "baseline");
    table.set_storage(100, 4096);
    assert!(!obs.sample(t0 + SEC).active, "one page");
    table.set_storage(100, 4096 + 4 * 1024 * 1024);
    assert!(obs.sample(t0 + 2 * SEC).active, "4 MiB read");
    assert!(
        !obs.sample(t0 + 3 * SEC).active,
        "nothing past the last read"
    );
}

/// The rule of one process's written bytes, on recorded outlets.
#[test]
fn where_written_bytes_go() {
    let readers: HashMap<u64, Vec<Pid>> = [(7, vec![pid(100)]), (8, vec![pid(200)])].into();
    let to = |who: u32, outlets: &[Outlet]| {
        bytes::destination(outlets, &readers, &mut |reader| reader != pid(who))
    };
    assert_eq!(to(200, &[writes(7)]), bytes::Destination::Delivered);
    // A pipe only the writer itself reads is no delivery.
    assert_eq!(
        to(200, &[writes(8), file(50, 0)]),
        bytes::Destination::Files
    );
    assert_eq!(to(200, &[writes(9)]), bytes::Destination::Nowhere);
    assert_eq!(
        to(200, &[Outlet::Elsewhere, reads(7)]),
        bytes::Destination::Nowhere
    );
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
    // The root spins a spinner (150 ms): it does not count.
    table.set(&[p(100, 1, 1, 200, 0)]);
    *cgroup.lock() = Some((200, 3));
    assert!(!obs.sample(t0 + SEC).active, "the root's own CPU, 15 %");
    // An escapee works 600 ms.
    *cgroup.lock() = Some((800, 3));
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

/// A cgroup whose members the test sets (no CPU).
fn scripted_members(obs: &mut DescendantObserver) -> Arc<Mutex<Vec<Pid>>> {
    let members = Arc::new(Mutex::new(Vec::new()));
    let reader = members.clone();
    obs.use_cgroup(Box::new(move || {
        Some(CgroupReading {
            usage: Duration::ZERO,
            members: reader.lock().clone(),
            waited: None,
        })
    }));
    members
}

/// With a cgroup, a member seen that leaves it (its pid written to another cgroup's
/// `cgroup.procs`) is still the tree's: it and its descendants born outside are escapees, by
/// identity, until they die (issue 51 item 2); one that comes back is a member again, a pid
/// reused by another process is nobody, and a member that exits is forgotten.
#[test]
fn with_a_cgroup_a_member_that_left_it_and_its_descendants_are_escapees() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let members = scripted_members(&mut obs);
    let t0 = Instant::now();
    table.set(&[
        p(100, 1, 1, 0, 0),
        p(200, 100, 2, 0, 0),
        p(300, 100, 3, 0, 0),
    ]);
    *members.lock() = vec![pid(100), pid(200), pid(300)];
    assert_eq!(obs.sample(t0).escapees, 0, "all members");
    assert!(obs.outside_cgroup().is_empty());
    // 200 moves itself out and forks 400 there; 300 exits.
    table.set(&[
        p(100, 1, 1, 0, 0),
        p(200, 100, 2, 0, 0),
        p(400, 200, 4, 0, 0),
    ]);
    *members.lock() = vec![pid(100)];
    assert_eq!(obs.sample(t0 + SEC).escapees, 2);
    let mut outside = obs.outside_cgroup();
    outside.sort_by_key(|e| e.pid);
    let identity = |n: u32, start: u64| Identity {
        pid: pid(n),
        start_time: start,
    };
    assert_eq!(outside, [identity(200, 2), identity(400, 4)]);
    // 400 forks 500 later: found at the next look, never a member.
    table.set(&[
        p(100, 1, 1, 0, 0),
        p(200, 100, 2, 0, 0),
        p(400, 200, 4, 0, 0),
        p(500, 400, 5, 0, 0),
    ]);
    assert_eq!(obs.outside_cgroup().len(), 3);
    // 200 comes back: a member again; its descendants outside stay escapees.
    *members.lock() = vec![pid(100), pid(200)];
    obs.sample(t0 + 2 * SEC);
    let mut outside = obs.outside_cgroup();
    outside.sort_by_key(|e| e.pid);
    assert_eq!(outside, [identity(400, 4), identity(500, 5)]);
    // They die, and pid 400 is reused by a stranger: nobody is outside any more.
    table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0), p(400, 1, 9, 0, 0)]);
    assert!(obs.outside_cgroup().is_empty());
    assert_eq!(obs.sample(t0 + 3 * SEC).escapees, 0);
}

/// Real Claude Code 2.1 (`claude -p`, its Bash tool printing `tick<n>` every 2 s): the tool's
/// output goes to a regular file, which claude opens, reads and closes once a second (it
/// holds no descriptor to it between reads). 7 bytes every 2 s is far below the file floor,
/// but each one is read after it is written — the file's access time moves past its
/// modification time — as a pipe's reader would read it: delivered. The same heartbeat
/// appended to a log nobody reads stays no progress.
#[test]
fn a_file_read_as_it_grows_is_delivered_one_nobody_reads_is_not() {
    for read in [true, false] {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        // 100: claude; 200: the tool's bash, its stdout the file 70.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        table.set_outlets(200, &[read_file(70, 0, 0)]);
        assert!(!obs.sample(t0).active, "baseline");
        for i in 1..=5u64 {
            let size = 7 * i;
            // Written (the modification time is the size here), then read (a tick later) or not.
            let accessed = if read {
                i64::try_from(size).unwrap() + 1
            } else {
                0
            };
            table.set_moved(200, size);
            table.set_outlets(200, &[read_file(70, size, accessed)]);
            let s = obs.sample(t0 + SEC * (2 * i) as u32);
            // At the first look, read past its last write: delivered too.
            assert_eq!(s.active, read, "tick {i}, read: {read}: {s:?}");
        }
    }
}

/// The same, when a look lands between a write and its read (claude reads once a second, a
/// loaded machine later still): the write is seen at one look, its read at the next, where the
/// writer wrote nothing new. The bytes are delivered when they are read, at that next look;
/// judged only on the look that saw the write, the tool's lines 2 s apart were ended under load
/// (CI, once).
#[test]
fn a_write_read_after_the_look_that_saw_it_is_delivered_at_the_next_look() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let t0 = Instant::now();
    table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
    table.set_outlets(200, &[read_file(70, 7, 7)]);
    assert!(!obs.sample(t0).active, "baseline");
    for i in 2..=4u64 {
        let size = 7 * i;
        let before = 7 * (i - 1);
        // Written, not read yet: the access time is still the last read's.
        table.set_moved(200, size);
        table.set_outlets(200, &[read_file(70, size, i64::try_from(before).unwrap())]);
        let s = obs.sample(t0 + SEC * (2 * i - 1) as u32);
        assert!(!s.active, "tick {i}, written, not read: {s:?}");
        // Read since, nothing new written.
        table.set_outlets(200, &[read_file(70, size, i64::try_from(size).unwrap())]);
        let s = obs.sample(t0 + SEC * (2 * i) as u32);
        assert!(s.active, "tick {i}, read at the next look: {s:?}");
        // Nothing new: no progress.
        let s = obs.sample(t0 + SEC * (2 * i) as u32 + SEC / 2);
        assert!(!s.active, "tick {i}, nothing new: {s:?}");
    }
}

/// Gemini CLI 0.61 relaunches itself (`node gemini` → `node --max-old-space-size=… gemini`):
/// its UI, a descendant, animated its spinner over a stalled model stream at 12.0–12.4 % of a
/// core, writing 22 KB/s to the terminal and nothing else, the parent at 0 % (issue 48, real
/// readings every 5 s). The process that draws the program's screen is the program's face:
/// its CPU counts at the program's threshold wherever it runs.
#[test]
fn the_process_drawing_the_programs_screen_counts_from_the_root_threshold() {
    let table = Table::default();
    let t0 = Instant::now();
    let half = Duration::from_millis(500);
    // The parent holds the terminal too and writes 8 bytes now and then; the UI holds the
    // terminal and its sockets (elsewhere).
    let ui_outlets = [Outlet::Terminal, Outlet::Elsewhere, Outlet::Elsewhere];
    table.set_outlets(100, &[Outlet::Terminal, Outlet::Elsewhere]);
    table.set_outlets(200, &ui_outlets);
    table.set(&[p(100, 1, 1, 900, 0), p(200, 100, 5, 2400, 0)]);
    table.set_moved(100, 1000);
    table.set_moved(200, 400_000);
    let mut obs = observer(&table, ChildWatchConfig::default());
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=20u64 {
        // 62 ms a half second (12.4 %) and 11 KB to the terminal.
        table.set(&[p(100, 1, 1, 900, 0), p(200, 100, 5, 2400 + 62 * i, 0)]);
        table.set_moved(100, 1000 + 8 * (i / 10));
        table.set_moved(200, 400_000 + 11_250 * i);
        let s = obs.sample(t0 + half * u32::try_from(i).unwrap());
        assert!(
            !s.active,
            "{i}: a spinner drawn by a descendant is no work: {s:?}"
        );
    }
    // Real work in it (a whole core) still counts.
    let at = t0 + half * 21;
    table.set(&[
        p(100, 1, 1, 900, 0),
        p(200, 100, 5, 2400 + 62 * 20 + 450, 0),
    ]);
    table.set_moved(200, 400_000 + 11_250 * 21);
    assert!(
        obs.sample(at).active,
        "the program's work, wherever it runs"
    );
    // A descendant that draws nothing (a compile step writing its object file) counts at
    // 5 %: 62 ms a half second is work.
    let mut t = at;
    table.set_outlets(300, &[Outlet::Terminal, file(40, 4096)]);
    let mut procs = vec![p(100, 1, 1, 900, 0), p(300, 100, 9, 0, 0)];
    table.set(&procs);
    obs.sample(t);
    for i in 1..=4u64 {
        t += half;
        procs[1] = p(300, 100, 9, 62 * i, 0);
        table.set(&procs);
        table.set_moved(300, 10 * i);
        table.set_outlets(300, &[Outlet::Terminal, file(40, 4096 + 10 * i)]);
        assert!(obs.sample(t).active, "{i}: 12 % of a core, drawing nothing");
    }
}

/// The same with a cgroup: the face's CPU is its `stat`'s, out of the cgroup's usage.
#[test]
fn with_a_cgroup_the_process_drawing_the_screen_counts_from_the_root_threshold() {
    let table = Table::default();
    let mut obs = observer(&table, ChildWatchConfig::default());
    let cgroup = scripted_cgroup(&mut obs);
    let t0 = Instant::now();
    let half = Duration::from_millis(500);
    // Members: 1000 (the UI, the root's child) and 1001 (unread); the root 100 is found by pid.
    table.set_outlets(1000, &[Outlet::Terminal, Outlet::Elsewhere]);
    table.set(&[p(100, 1, 1, 900, 0), p(1000, 100, 5, 2400, 0)]);
    table.set_moved(1000, 400_000);
    *cgroup.lock() = Some((3300, 2));
    assert!(!obs.sample(t0).active, "baseline");
    for i in 1..=10u64 {
        table.set(&[p(100, 1, 1, 900, 0), p(1000, 100, 5, 2400 + 62 * i, 0)]);
        table.set_moved(1000, 400_000 + 11_250 * i);
        *cgroup.lock() = Some((3300 + 62 * i, 2));
        let s = obs.sample(t0 + half * u32::try_from(i).unwrap());
        assert!(!s.active, "{i}: {s:?}");
    }
    // Another member working at 12 % still counts.
    table.set(&[p(100, 1, 1, 900, 0), p(1000, 100, 5, 2400 + 62 * 11, 0)]);
    table.set_moved(1000, 400_000 + 11_250 * 11);
    *cgroup.lock() = Some((3300 + 62 * 11 + 62, 2));
    assert!(obs.sample(t0 + half * 11).active);
}

/// A file its writer holds open for reading and writing, `size` bytes long, last read at
/// `accessed`: a database or its journal (SQLite opens both `O_RDWR`).
fn own_state(inode: u64, size: u64, accessed: i64) -> Outlet {
    let Outlet::File(mark) = read_file(inode, size, accessed) else {
        unreachable!()
    };
    Outlet::File(bytes::FileMark {
        reads_back: true,
        ..mark
    })
}

/// Real codex 0.171 while its model stream stalls (issue 48 item 6): its TUI and its daemon
/// hold their SQLite databases and journals open for reading and writing, and the daemon
/// commits a row of its own state and reads it back (a 4 KiB page and a frame header: 4120
/// bytes per commit, measured on a fixture doing the same). The journal's access time moves
/// at every look, its writer's own reads: no other process reads what it writes. Its
/// bookkeeping is no progress, whatever its rate; the same bytes into a file it only writes,
/// which another process reads as it grows, are delivered.
#[test]
fn an_agent_writing_and_reading_back_its_own_database_is_not_progress() {
    for reads_back in [true, false] {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        // 100: the TUI; 200: its daemon, its journal the file 70.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        let outlet = |size: u64| {
            let at = i64::try_from(size).unwrap();
            if reads_back {
                own_state(70, size, at)
            } else {
                read_file(70, size, at)
            }
        };
        table.set_outlets(200, &[outlet(0)]);
        assert!(!obs.sample(t0).active, "baseline");
        for i in 1..=10u64 {
            let size = 4120 * i;
            table.set_moved(200, size);
            table.set_outlets(200, &[outlet(size)]);
            let s = obs.sample(t0 + SEC * u32::try_from(i).unwrap() / 2);
            assert_eq!(
                s.active, !reads_back,
                "commit {i}, reads back: {reads_back}: {s:?}"
            );
        }
    }
}

/// A tool that starts, writes its first line and has it read by its agent between two looks:
/// the first look that sees the tool sees the file already read past its last write (under
/// `relatime` its access time is at or after its modification time). That write was
/// delivered; judged only against a previous look, the tool's first line never counted, and
/// its agent was ended before its second line was read (the zoo's `w_agent_tails_tool_file`,
/// 2 of 6 runs under load).
#[test]
fn a_new_writer_whose_file_was_read_after_its_first_write_is_delivered() {
    for read in [true, false] {
        let table = Table::default();
        let mut obs = observer(&table, ChildWatchConfig::default());
        let t0 = Instant::now();
        table.set(&[p(100, 1, 1, 0, 0)]);
        assert!(!obs.sample(t0).active, "baseline: the agent alone");
        // The tool appears, has written 6 bytes (modification time 6), read at 7 or not.
        table.set(&[p(100, 1, 1, 0, 0), p(200, 100, 2, 0, 0)]);
        table.set_moved(200, 6);
        table.set_outlets(200, &[read_file(70, 6, if read { 7 } else { 0 })]);
        let s = obs.sample(t0 + SEC);
        assert_eq!(s.active, read, "read: {read}: {s:?}");
    }
}

/// On a loaded machine the program (the root, or the process drawing its screen) is starved
/// work only when runnable nearly all the time: the zoo's `s_relaunched_tui_pty` UI, drawing
/// at 7–9 % of a core at a load of 5–6, was runnable 16–30 % of the time and half of some
/// 250 ms stretches, and was kept alive 3 s (1 run of 8). A descendant drawing nothing is
/// starved work from half, as before.
#[test]
fn the_program_is_starved_work_only_when_runnable_nearly_all_the_time() {
    let table = Table::default();
    let t0 = Instant::now();
    let half = Duration::from_millis(500);
    table.set_outlets(100, &[Outlet::Terminal]);
    table.set_outlets(200, &[Outlet::Terminal, Outlet::Elsewhere]);
    table.set_outlets(300, &[reads(9)]);
    let procs = |i: u64| {
        [
            p(100, 1, 1, 0, 0),
            p(200, 100, 5, 40 * i, 0),
            p(300, 100, 7, 0, 0),
        ]
    };
    table.set(&procs(0));
    table.set_moved(200, 0);
    for n in [100, 200, 300] {
        table.set_ran(n, 0, 0, false);
    }
    let mut obs = observer(&table, ChildWatchConfig::default());
    assert!(!obs.sample(t0).active, "baseline");
    // The face draws at 8 % of a core and is runnable 60 % of each half second; so is the
    // root (its own CPU unseen): no work.
    for i in 1..=6u64 {
        table.set(&procs(i));
        table.set_moved(200, 10_000 * i);
        table.set_ran(200, 300 * i, 40 * i, false);
        table.set_ran(100, 300 * i, 40 * i, false);
        let s = obs.sample(t0 + half * u32::try_from(i).unwrap());
        assert!(!s.active, "{i}: a spinner waiting for a CPU: {s:?}");
    }
    // Runnable all the time: the program's real work, starved.
    table.set(&procs(7));
    table.set_moved(200, 70_000);
    table.set_ran(200, 300 * 6 + 490, 40 * 7, false);
    table.set_ran(100, 300 * 6, 40 * 6, false);
    assert!(obs.sample(t0 + half * 7).active, "starved work");
    // A descendant drawing nothing (a tool reading a pipe) runnable 60 %: starved work.
    let mut obs = observer(&table, ChildWatchConfig::default());
    table.set_ran(300, 0, 0, false);
    table.set_ran(100, 0, 0, false);
    obs.sample(t0);
    table.set_ran(300, 300, 40, false);
    assert!(
        obs.sample(t0 + half).active,
        "half is enough for a descendant"
    );
}
