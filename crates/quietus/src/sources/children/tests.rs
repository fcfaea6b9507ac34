//! The rules of the children source on scripted process tables: no processes.

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
    let mut obs = observer(&table, ChildWatchConfig::default().include_self(true));
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
    let mut obs = observer(&table, ChildWatchConfig::default().include_self(true));
    obs.sample(t0);
    table.set_moved(100, 13_196);
    assert_eq!(obs.sample(t0 + SEC).moved_bytes, 100);
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
    let mut obs = observer(&table, ChildWatchConfig::default().include_self(true));
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
