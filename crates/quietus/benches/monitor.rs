//! The monitor thread: how precisely it acts at the stale deadline, and what it costs while a
//! silent child sleeps.
//!
//! Both benches return a custom value from `iter_custom`, so criterion's "time" is *not* the
//! wall time of an iteration:
//!
//! - `monitor_kill/kill_latency`: one iteration = one supervised `sleep 1000` with a 50 ms idle
//!   timeout and the ladder `SIGTERM, 1 s, SIGKILL`; its value is
//!   [`MonitorResult::kill_latency`](quietus::MonitorResult::kill_latency), the time from the
//!   instant the child became stale to the first signal sent. Target: median under 5 ms.
//! - `monitor_idle/monitor_idle_cpu_per_second`: one iteration = one second of supervision of a
//!   silent `sleep 1000` under the default configuration (idle timeout 300 s); its value is the
//!   CPU time (user + system, every thread of this process, the bench harness included) spent
//!   during that second. Target: under 0.1 % of a core, i.e. under 1 ms of CPU per second.
//!
//! Criterion sizes its samples from the *wall* time of `iter_custom` (about 55 ms per kill,
//! about 1.2 s per supervised second with its set-up), so the sampling settings below give two
//! iterations per sample and keep the run around 30 s. Each group also prints its own summary
//! (min / median / p90 / max per iteration) to stderr.
//!
//! Run with `cargo bench --bench monitor`.

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use quietus::{KillLadder, MonitorConfig, Outcome, Session, Signal};

/// A child that never writes anything and runs far longer than any bench.
fn silent_child() -> Command {
    let mut command = Command::new("sleep");
    command.arg("1000");
    command
}

/// `min / median / p90 / max` of `values`, for the summaries printed to stderr.
fn summary(values: &mut [Duration]) -> String {
    values.sort();
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    format!(
        "n={} min={:?} median={:?} p90={:?} max={:?}",
        values.len(),
        at(0.0),
        at(0.5),
        at(0.9),
        at(1.0)
    )
}

// ---------------------------------------------------------------------------------------------
// Kill precision
// ---------------------------------------------------------------------------------------------

const KILL_IDLE_TIMEOUT: Duration = Duration::from_millis(50);

/// Supervises one silent child until quietus ends it for idleness; returns its kill latency.
fn one_kill() -> Duration {
    let config = MonitorConfig::builder()
        .idle_timeout(KILL_IDLE_TIMEOUT)
        .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(1)))
        .build()
        .unwrap();
    let session = Session::spawn(silent_child(), config).expect("spawning sleep");
    let result = session.wait();
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "sleep 1000 must end by the idle timeout, got {:?}",
        result.outcome
    );
    assert_eq!(
        result.signals_sent,
        [Signal::TERM],
        "SIGTERM is enough for sleep"
    );
    result
        .kill_latency
        .expect("an idle timeout records its kill latency")
}

fn kill_precision(c: &mut Criterion) {
    let mut group = c.benchmark_group("monitor_kill");
    // About 55 ms of wall time per iteration: 20 samples of 2 kills, about 2.5 s in all.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(2));
    let mut seen = Vec::new();
    group.bench_function("kill_latency", |b| {
        // Criterion's time per iteration = the kill latency (stale deadline -> first signal).
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let latency = one_kill();
                seen.push(latency);
                total += latency;
            }
            total
        });
    });
    group.finish();
    if !seen.is_empty() {
        eprintln!(
            "monitor_kill/kill_latency (idle timeout {KILL_IDLE_TIMEOUT:?}, stale deadline -> \
             SIGTERM sent, per kill): {}",
            summary(&mut seen)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Idle CPU
// ---------------------------------------------------------------------------------------------

/// One iteration: one second of supervision.
const SECOND: Duration = Duration::from_secs(1);
/// Time left after the spawn for the session's threads to start and block before the window.
const SETTLE: Duration = Duration::from_millis(200);

/// CPU time of one thread of this process: the first field of `/proc/self/task/<tid>/schedstat`
/// (nanoseconds spent on a CPU, user + system), and the thread's name.
///
/// Why this source: the crate's rustix features ("process,thread,fs,pipe") have neither
/// `getrusage` nor `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`; `/proc/self/stat` counts in
/// 10 ms ticks, too coarse for a 1 ms budget; `/proc/self/schedstat` covers only the main
/// thread, hence the sum over `task/`. A thread that ends inside the window would be missed, but
/// none does: a session's threads live until its child is gone.
fn thread_cpu(tid: &str) -> Option<(String, u64)> {
    let stat = fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    let name = fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
    Some((name.trim().to_owned(), nanos))
}

/// tid -> (name, CPU nanoseconds).
type CpuSnapshot = BTreeMap<String, (String, u64)>;

/// The calling thread's tid.
fn my_tid() -> String {
    rustix::thread::gettid().as_raw_nonzero().to_string()
}

/// Every thread of this process except the caller.
fn other_threads_cpu() -> CpuSnapshot {
    let me = my_tid();
    fs::read_dir("/proc/self/task")
        .expect("/proc/self/task is readable on Linux")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|tid| *tid != me)
        .filter_map(|tid| thread_cpu(&tid).map(|t| (tid, t)))
        .collect()
}

/// The calling thread's own CPU time, by its schedstat. The kernel brings that counter up to
/// date only at scheduling events, so it is exact right after the thread woke up, and stale by
/// the whole current run otherwise: the start of a window therefore sleeps briefly before
/// reading it, and the end reads it first thing after the window's sleep.
fn my_cpu() -> (String, (String, u64)) {
    let me = my_tid();
    let cpu = thread_cpu(&me).expect("a thread can read its own schedstat");
    (me, ("bench harness (this thread)".to_owned(), cpu.1))
}

/// The snapshot that opens a window: the other threads, then (after a 1 ms sleep that brings
/// this thread's counter up to date, including the reads just made) this thread.
fn window_start() -> CpuSnapshot {
    let mut snapshot = other_threads_cpu();
    thread::sleep(Duration::from_millis(1));
    let (me, cpu) = my_cpu();
    snapshot.insert(me, cpu);
    snapshot
}

/// The snapshot that closes a window: this thread first, then the others (whose reading cost
/// falls after the window).
fn window_end() -> CpuSnapshot {
    let (me, cpu) = my_cpu();
    let mut snapshot = other_threads_cpu();
    snapshot.insert(me, cpu);
    snapshot
}

/// A thread's name without its session number (`quietus-mon-3` -> `quietus-mon`).
fn thread_kind(name: &str) -> String {
    name.trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches('-')
        .to_owned()
}

/// Supervises a silent `sleep 1000` for `seconds` seconds and returns the CPU time this process
/// used meanwhile, adding each thread kind's share to `by_kind`.
fn idle_cpu(seconds: u64, by_kind: &mut BTreeMap<String, Duration>) -> Duration {
    let session = Session::spawn(silent_child(), MonitorConfig::default()).expect("spawning sleep");
    thread::sleep(SETTLE);

    let before = window_start();
    let started = Instant::now();
    thread::sleep(SECOND * u32::try_from(seconds).expect("a handful of seconds"));
    let after = window_end();
    let wall = started.elapsed();

    assert!(
        session.try_wait().is_none(),
        "the child must still be supervised at the end of the window"
    );
    session.kill();
    let result = session.wait();
    assert_eq!(result.outcome, Outcome::Terminated { forced: true });

    let mut total = 0u64;
    for (tid, (name, end)) in &after {
        // A thread started inside the window counts from zero.
        let start = before.get(tid).map_or(0, |(_, ns)| *ns);
        let used = end.saturating_sub(start);
        total += used;
        *by_kind.entry(thread_kind(name)).or_default() += Duration::from_nanos(used);
    }
    // Scale to exactly `seconds` seconds (the sleep overshoots by a little).
    Duration::from_nanos(total).mul_f64(seconds as f64 / wall.as_secs_f64())
}

fn idle_cpu_per_second(c: &mut Criterion) {
    let mut group = c.benchmark_group("monitor_idle");
    // About 1.2 s of wall time per iteration (1 s window + settle): 10 samples of 2 iterations,
    // each sample one session watched for a 2 s window, about 25 s in all.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    let mut seen = Vec::new();
    let mut by_kind = BTreeMap::new();
    let mut supervised = Duration::ZERO;
    group.bench_function("monitor_idle_cpu_per_second", |b| {
        // Criterion's time per iteration = CPU time per second of supervision.
        b.iter_custom(|seconds| {
            let cpu = idle_cpu(seconds, &mut by_kind);
            seen.push(cpu.div_f64(seconds as f64));
            supervised += SECOND * u32::try_from(seconds).expect("a handful of seconds");
            cpu
        });
    });
    group.finish();
    if !seen.is_empty() {
        let secs = supervised.as_secs_f64();
        let shares: Vec<String> = by_kind
            .iter()
            .map(|(kind, cpu)| format!("{kind} {:?}/s", cpu.div_f64(secs)))
            .collect();
        eprintln!(
            "monitor_idle/monitor_idle_cpu_per_second (CPU per second of supervision, per \
             session window): {} | by thread over {secs:.0} s: {}",
            summary(&mut seen),
            shares.join(", ")
        );
    }
}

criterion_group!(benches, kill_precision, idle_cpu_per_second);
criterion_main!(benches);
