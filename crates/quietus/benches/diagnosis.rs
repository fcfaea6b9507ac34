//! Cost of one diagnosis (issue 18: at most 2 ms for a 50-process tree): the snapshot of every
//! process (stat, wchan, syscall of each thread, the descriptors) and the classification.
//!
//! The bench starts a shell with 49 sleeping children and kills exactly those, by pid.
//!
//! Run: `cargo bench --bench diagnosis`

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use quietus::Pid;
use quietus::diagnosis::StallKind;

/// The tree, ended by pid when dropped (also when an assertion fails).
struct Tree {
    root: std::process::Child,
    children: Vec<Pid>,
}

impl Drop for Tree {
    fn drop(&mut self) {
        for pid in &self.children {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        let _ = self.root.kill();
        let _ = self.root.wait();
    }
}

fn bench(c: &mut Criterion) {
    let mut root = Command::new("sh")
        .args([
            "-c",
            "for i in $(seq 49); do sleep 1000 & done; echo ready; wait",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the tree");
    let mut line = String::new();
    std::io::BufReader::new(root.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("ready line");
    let id = Pid::of(&root);
    let children: Vec<Pid> = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| Pid::new(p.parse().ok()?))
        .collect();
    let mut pids = vec![id];
    pids.extend(&children);
    let _tree = Tree { root, children };
    assert_eq!(pids.len(), 50, "the tree is complete");
    // The shell says `ready` just before its `wait`: look until it waits. The tree is then
    // named by its deepest cause, the sleeping children (the shell waits on them).
    let mut first = quietus::diagnosis::diagnose(&pids);
    for _ in 0..1000 {
        if first.processes[0].kind == StallKind::WaitingOnChild {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        first = quietus::diagnosis::diagnose(&pids);
    }
    assert_eq!(first.processes.len(), 50);
    assert_eq!(
        first.processes[0].kind,
        StallKind::WaitingOnChild,
        "{}",
        first.summary
    );
    assert_eq!(first.kind, StallKind::Sleeping, "{}", first.summary);

    let mut group = c.benchmark_group("diagnosis");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    group.bench_function("tree_of_50", |b| {
        b.iter(|| quietus::diagnosis::diagnose(&pids))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
