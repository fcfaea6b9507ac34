//! The `stallwatch` command against the tools it replaces, measured in one run on one machine.
//!
//! - spawn overhead: `stallwatch -- true` vs GNU `timeout 1h true` vs `true` itself
//!   (whole-process wall time: start, run a program that exits at once, end);
//! - exit latency: from the program's last action (printing the time, then exiting) to the
//!   supervisor's own exit;
//! - relay throughput: 64 MiB from `head -c` through `stallwatch` vs through `cat`, read by this
//!   process to end-of-file;
//! - teardown of a 200-process tree with escapees: a `Session` whose child starts 200 sleeping
//!   descendants (20 of them in sessions of their own), from the first signal of the ladder to
//!   the whole tree confirmed gone (`MonitorResult::ladder_time`, so criterion's time is that).
//!
//! Every process measured is started here and ended here (the tree by the ladder itself).
//!
//! Run: `cargo bench --bench versus`

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stallwatch::{CaptureConfig, KillLadder, MonitorConfig, Outcome, Session, Signal};

const STALLWATCH: &str = env!("CARGO_BIN_EXE_stallwatch");
const RELAY_BYTES: u64 = 64 * 1024 * 1024;

fn run_quiet(command: &mut Command) {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the command runs");
    assert!(status.success(), "{command:?}: {status}");
}

fn spawn_overhead(c: &mut Criterion) {
    let logs = tempfile::tempdir().expect("a temp folder");
    let mut group = c.benchmark_group("versus_spawn_and_exit");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("true_alone", |b| {
        b.iter(|| run_quiet(&mut Command::new("true")))
    });
    group.bench_function("gnu_timeout", |b| {
        b.iter(|| run_quiet(Command::new("timeout").args(["1h", "true"])))
    });
    group.bench_function("stallwatch", |b| {
        b.iter(|| {
            run_quiet(
                Command::new(STALLWATCH)
                    .args(["--log-dir"])
                    .arg(logs.path())
                    .args(["--", "true"]),
            )
        })
    });
    group.finish();
}

/// Exit latency: from the moment the program prints its last word and exits (`exec date
/// +%s%N`, so printing the wall-clock time is the very last thing it does) to the moment the
/// supervisor (`stallwatch` or GNU `timeout`) has exited and been waited for. Criterion's time
/// is that latency.
fn exit_latency(c: &mut Criterion) {
    let logs = tempfile::tempdir().expect("a temp folder");
    let mut group = c.benchmark_group("versus_exit_latency");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    let measure = |program: &str, args: &[&str], iters: u64| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let output = Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .expect("the supervisor runs");
            let done = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970");
            let printed: u128 = String::from_utf8_lossy(&output.stdout)
                .trim()
                .parse()
                .expect("date printed nanoseconds");
            total += Duration::from_nanos(
                u64::try_from(done.as_nanos().saturating_sub(printed)).unwrap_or(u64::MAX),
            );
        }
        total
    };
    group.bench_function("gnu_timeout", |b| {
        b.iter_custom(|iters| measure("timeout", &["1h", "date", "+%s%N"], iters))
    });
    let log_dir = logs.path().to_str().expect("a UTF-8 temp path").to_owned();
    group.bench_function("stallwatch", |b| {
        b.iter_custom(|iters| {
            measure(
                STALLWATCH,
                &["--log-dir", &log_dir, "--", "date", "+%s%N"],
                iters,
            )
        })
    });
    group.finish();
}

/// Runs `head -c 64M /dev/zero` through `relay` (a command line taking the producer's words),
/// reads its stdout to the end, and checks the byte count.
fn relay_through(program: &str, args: &[&str]) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the relay runs");
    let mut out = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).expect("reading the relay");
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    assert!(child.wait().expect("the relay ends").success());
    assert_eq!(total, RELAY_BYTES);
}

fn relay(c: &mut Criterion) {
    let logs = tempfile::tempdir().expect("a temp folder");
    let size = RELAY_BYTES.to_string();
    let mut group = c.benchmark_group("versus_relay_64MiB");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Bytes(RELAY_BYTES));
    let pipeline = format!("head -c {size} /dev/zero | cat");
    group.bench_function("cat", |b| {
        b.iter(|| relay_through("sh", &["-c", &pipeline]))
    });
    let log_dir = logs.path().to_str().expect("a UTF-8 temp path").to_owned();
    group.bench_function("stallwatch", |b| {
        // The command as shipped: the output passes through and, past 4 KiB, is also logged
        // (SHA-256 and a file write per byte); the log is removed after each iteration.
        b.iter(|| {
            relay_through(
                "sh",
                &[
                    "-c",
                    &format!("{STALLWATCH} --log-dir {log_dir} -- head -c {size} /dev/zero"),
                ],
            );
            for entry in std::fs::read_dir(&log_dir)
                .expect("the log folder")
                .flatten()
            {
                let _ = std::fs::remove_file(entry.path());
            }
        })
    });
    group.finish();
}

/// The script of the 200-process tree: 180 sleepers in the group, 20 in sessions of their
/// own (escapees the observer sees at its samples), then silence.
const TREE: &str = "i=0; while [ $i -lt 180 ]; do sleep 1000 & i=$((i+1)); done; \
                    i=0; while [ $i -lt 20 ]; do setsid sleep 1000 & i=$((i+1)); done; \
                    echo ready; exec sleep 1000";

fn teardown(c: &mut Criterion) {
    let mut group = c.benchmark_group("versus_teardown");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("tree_of_200_with_20_escapees", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut command = Command::new("sh");
                command.args(["-c", TREE]);
                let config = MonitorConfig::default()
                    .idle_timeout(Duration::from_millis(1500))
                    .check_interval(Some(Duration::from_millis(200)))
                    .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(5)))
                    .capture(CaptureConfig::default().spill(false));
                let started = Instant::now();
                let session = Session::spawn(command, config).expect("the tree starts");
                let result = session.wait();
                assert!(
                    matches!(result.outcome, Outcome::IdleTimeout(_)),
                    "{result:?}"
                );
                assert!(!result.termination_unproven);
                let ladder = result.ladder_time.expect("a ladder ran");
                assert!(started.elapsed() < Duration::from_secs(60));
                total += ladder;
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, spawn_overhead, exit_latency, relay, teardown);
criterion_main!(benches);
