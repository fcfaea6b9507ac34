//! Cost of one descendant-CPU sample.
//!
//! Target (issue: descendant-CPU signal): one sample of a 10-process tree takes a median under
//! 200 µs on Linux, flat with the number of other processes on the machine. `sysinfo`'s full
//! process refresh (what a portable observer would do each sample) is measured beside it.
//!
//! The bench starts every process it measures (a tree of 10 and 100 or 1,000 unrelated
//! sleepers) and kills exactly those, by pid, when it is done.
//!
//! Run: `cargo bench --bench children`

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use quietus::ChildWatchConfig;
use quietus::sources::DescendantObserver;

/// `sh` with nine sleeping children: a 10-process tree.
fn tree_of_ten() -> Child {
    started_ready(Command::new("sh").args([
        "-c",
        "for i in 1 2 3 4 5 6 7 8 9; do sleep 1000 & done; echo ready; wait",
    ]))
}

/// Starts `command` with its stdout piped and returns once it printed its first line.
fn started_ready(command: &mut Command) -> Child {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the program");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("piped")),
        &mut line,
    )
    .expect("ready line");
    child
}

fn end_tree(mut tree: Child) {
    let root = tree.id();
    // The sleepers are the tree's children: list them, then end them and the root by pid.
    let children =
        std::fs::read_to_string(format!("/proc/{root}/task/{root}/children")).unwrap_or_default();
    for pid in children.split_whitespace() {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    let _ = tree.kill();
    let _ = tree.wait();
}

fn others(n: usize) -> Vec<Child> {
    (0..n)
        .map(|_| {
            Command::new("sleep")
                .arg("1000")
                .spawn()
                .expect("spawn a sleeper")
        })
        .collect()
}

/// A python3 with `threads` threads in all, every one asleep (an agent runtime's pool).
fn threaded(threads: usize) -> Child {
    let code = format!(
        "import threading, time\nfor _ in range({}):\n    \
         threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n\
         print('ready', flush=True)\ntime.sleep(1000)\n",
        threads - 1
    );
    started_ready(Command::new("python3").args(["-c", &code]))
}

fn end_others(others: Vec<Child>) {
    for mut c in others {
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("children_sample");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    for n in [100usize, 1000] {
        let extra = others(n);
        let tree = tree_of_ten();
        let mut observer =
            DescendantObserver::new(quietus::Pid::of(&tree), &ChildWatchConfig::default());
        let first = observer.sample(Instant::now());
        assert_eq!(first.descendants, 9, "the tree is complete");
        group.bench_with_input(
            BenchmarkId::new("quietus_tree_of_10", format!("{n}_others")),
            &n,
            |b, _| b.iter(|| observer.sample(Instant::now())),
        );
        let mut system = sysinfo::System::new();
        group.bench_with_input(
            BenchmarkId::new("sysinfo_full_refresh", format!("{n}_others")),
            &n,
            |b, _| {
                b.iter(|| {
                    system.refresh_processes_specifics(
                        sysinfo::ProcessesToUpdate::All,
                        true,
                        sysinfo::ProcessRefreshKind::nothing()
                            .with_cpu()
                            .without_tasks(),
                    )
                })
            },
        );
        end_tree(tree);
        end_others(extra);
    }
    // The runnable time of a process of several threads is read thread by thread: one process
    // of 1 thread against one of 16 (the program itself, asleep).
    for threads in [1usize, 16] {
        let program = threaded(threads);
        let mut observer =
            DescendantObserver::new(quietus::Pid::of(&program), &ChildWatchConfig::default());
        observer.sample(Instant::now());
        group.bench_with_input(
            BenchmarkId::new("quietus_one_process", format!("{threads}_threads")),
            &threads,
            |b, _| b.iter(|| observer.sample(Instant::now())),
        );
        end_others(vec![program]);
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
