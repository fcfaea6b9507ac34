//! The two containment backends (issue 19), on the same 100-process tree (`sh` and 99 sleeping
//! children):
//!
//! - `containment_teardown/{cgroup,group}`: one iteration = one supervised tree ended by the
//!   ladder `SIGKILL`; its value is [`MonitorResult::ladder_time`](quietus::MonitorResult),
//!   from the signal to the tree confirmed gone (`cgroup.kill` then `populated 0`, against the
//!   group's SIGKILL then the scan of `/proc` for members). Criterion's "time" is that value,
//!   not the wall time of the iteration (which includes starting 100 processes).
//! - `containment_cpu_sample/{cgroup_cpu_stat,proc_walk}`: one CPU sample of the tree: what the
//!   cgroup backend reads (`cpu.stat`, `cgroup.procs`, the leader's `/proc/<pid>/stat`) against
//!   the observer's walk of `/proc` (`DescendantObserver::sample`).
//!
//! The cgroup halves need a cgroup (root); elsewhere they are left out with a note. Every
//! process is started by a session of the bench and ended by it; the cgroups are the
//! sessions' own and removed by them.
//!
//! Run: `cargo bench --bench containment`

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use quietus::sources::DescendantObserver;
use quietus::{ChildWatchConfig, Containment, KillLadder, MonitorConfig, Session, Signal};

/// `sh` with 99 sleeping children; it writes its cgroup (the `0::` line) to `ready` once all
/// are started.
fn tree_script(ready: &Path) -> String {
    format!(
        "i=0; while [ $i -lt 99 ]; do sleep 1000 & i=$((i + 1)); done; \
         grep '^0::' /proc/self/cgroup > {r}.tmp; mv {r}.tmp {r}; wait",
        r = ready.display()
    )
}

/// A supervised 100-process tree held by `mode`; returns the session and its cgroup line.
fn start_tree(mode: Containment, dir: &Path, n: usize) -> (Session, String) {
    let ready = dir.join(format!("ready-{n}"));
    let mut command = std::process::Command::new("sh");
    command.args(["-c", &tree_script(&ready)]);
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(3600))
        .watch_files(false)
        .containment(mode)
        .build()
        .unwrap();
    let session = Session::spawn(command, config).expect("sh runs");
    let give_up = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(Instant::now() < give_up, "the tree did not start");
        std::thread::sleep(Duration::from_millis(2));
    }
    let line = std::fs::read_to_string(&ready).expect("the cgroup line");
    (session, line.trim().to_owned())
}

/// The directory of the cgroup named by a `0::/…` line.
fn cgroup_dir(line: &str) -> PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let mount = mountinfo
        .lines()
        .find_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            let mount = PathBuf::from(before.split_whitespace().nth(4)?);
            (after.split_whitespace().next()? == "cgroup2").then_some(mount)
        })
        .expect("a cgroup2 mount");
    mount.join(line.trim_start_matches("0::").trim_start_matches('/'))
}

/// Whether this process can hold a tree in a cgroup.
fn cgroups_available(dir: &Path) -> bool {
    let (session, _) = start_tree(Containment::Auto, dir, usize::MAX);
    session.terminate_with(&KillLadder::polite(Signal::KILL, Duration::ZERO));
    let result = session.wait();
    result.containment == Containment::Cgroup
}

fn teardown(c: &mut Criterion, dir: &Path, cgroups: bool) {
    let mut group = c.benchmark_group("containment_teardown");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_millis(100));
    let mut modes = vec![("group", Containment::Group)];
    if cgroups {
        modes.insert(0, ("cgroup", Containment::Cgroup));
    }
    let mut n = 0;
    for (name, mode) in modes {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let (session, _) = start_tree(mode, dir, n);
                    session.terminate_with(&KillLadder::polite(Signal::KILL, Duration::ZERO));
                    let result = session.wait();
                    assert!(!result.termination_unproven);
                    total += result.ladder_time.expect("the tree was confirmed gone");
                }
                total
            })
        });
    }
    group.finish();
}

/// What the cgroup backend reads for one CPU sample.
fn cgroup_sample(cgroup: &Path, leader: quietus::Pid) -> (u64, usize, usize) {
    let stat = std::fs::read_to_string(cgroup.join("cpu.stat")).expect("cpu.stat");
    let usage = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec");
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).expect("cgroup.procs");
    let leader_stat = std::fs::read_to_string(format!("/proc/{leader}/stat")).expect("stat");
    (usage, procs.lines().count(), leader_stat.len())
}

fn cpu_sample(c: &mut Criterion, dir: &Path, cgroups: bool) {
    let mode = if cgroups {
        Containment::Cgroup
    } else {
        Containment::Group
    };
    let (session, line) = start_tree(mode, dir, 0);
    let mut group = c.benchmark_group("containment_cpu_sample");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    if cgroups {
        let cgroup = cgroup_dir(&line);
        assert_eq!(
            cgroup_sample(&cgroup, session.pid()).1,
            100,
            "the tree is complete"
        );
        group.bench_function("cgroup_cpu_stat", |b| {
            b.iter(|| cgroup_sample(&cgroup, session.pid()))
        });
    }
    let mut observer = DescendantObserver::new(session.pid(), &ChildWatchConfig::default());
    assert_eq!(observer.sample(Instant::now()).descendants, 99);
    group.bench_function("proc_walk", |b| b.iter(|| observer.sample(Instant::now())));
    group.finish();
    session.terminate_with(&KillLadder::polite(Signal::KILL, Duration::ZERO));
    session.wait();
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cgroups = cgroups_available(dir.path());
    if !cgroups {
        eprintln!("no cgroup can be made here (not root?): the cgroup halves are left out");
    }
    cpu_sample(c, dir.path(), cgroups);
    teardown(c, dir.path(), cgroups);
}

criterion_group!(benches, bench);
criterion_main!(benches);
