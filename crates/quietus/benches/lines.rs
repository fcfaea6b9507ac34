//! The cost of looking at output lines (issue 15): a session relaying 2 million short lines
//! (`seq 1 2000000`, 14.9 MB, the worst case: 7-byte lines), plain; with a completion pattern
//! that never matches (every line is tested); and with the repeated-output source on (every
//! line normalized and hashed).
//!
//! Run with `cargo bench --bench lines` (about a minute). Throughput is reported in bytes; the
//! paired medians printed at the end (30 rounds, each variant back to back with plain, order
//! alternating) are the numbers for docs/benchmarks.md.

use quietus::config::MonitorConfigBuilder;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use quietus::{CaptureConfig, CompletionConfig, MonitorConfig, Outcome, Session};

const LINES: &str = "2000000";
/// Bytes `seq 1 2000000` writes.
const BYTES: u64 = 14_888_896;

fn config(variant: &str) -> MonitorConfigBuilder {
    let base = MonitorConfig::builder()
        .watch_files(false)
        .capture(CaptureConfig::builder().spill(false));
    match variant {
        "plain" => base,
        "completion_pattern" => {
            base.completion(CompletionConfig::builder().output(r#"^\{"type":"result""#))
        }
        "repeated_output" => base.repeated_output(Some(Duration::from_secs(600))),
        other => unreachable!("{other}"),
    }
}

fn run(variant: &str) -> Duration {
    let mut command = Command::new("seq");
    command.args(["1", LINES]);
    let started = Instant::now();
    let session = Session::spawn(command, config(variant)).expect("spawn seq");
    let result = session.wait();
    let took = started.elapsed();
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(
        session.output_bytes(quietus::Stream::Stdout),
        BYTES,
        "every byte relayed"
    );
    took
}

fn lines(c: &mut Criterion) {
    let mut group = c.benchmark_group("lines");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.throughput(Throughput::Bytes(BYTES));
    for variant in ["plain", "completion_pattern", "repeated_output"] {
        group.bench_function(variant, |b| b.iter(|| run(variant)));
    }
    group.finish();
}

/// Each variant against plain, back to back, 30 rounds: the median ratio of the times.
fn paired() {
    for variant in ["completion_pattern", "repeated_output"] {
        let mut ratios = Vec::new();
        for round in 0..30 {
            let (plain, other) = if round % 2 == 0 {
                let p = run("plain");
                (p, run(variant))
            } else {
                let o = run(variant);
                (run("plain"), o)
            };
            ratios.push(other.as_secs_f64() / plain.as_secs_f64());
        }
        ratios.sort_by(f64::total_cmp);
        eprintln!(
            "lines_paired {variant}: median time {:.3}x plain (min {:.3}, max {:.3})",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
}

criterion_group!(benches, lines);

fn main() {
    benches();
    paired();
    Criterion::default().configure_from_args().final_summary();
}
