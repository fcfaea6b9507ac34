//! Relay throughput: quietus's output path against a plain read loop on the same kind of
//! pipe. Target (from the issue): quietus >= 85 % of plain.
//!
//! Two groups:
//!
//! - `relay_in_process`: an OS pipe inside this process; a writer thread pushes 64 MiB in 64 KiB
//!   writes. `plain_read` reads it with a bare `read` loop; `activity_tracking_reader` reads it
//!   through [`ActivityTrackingReader`] (stamping an [`ActivityBoard`] on the system [`Clock`]) and
//!   does the per-chunk bookkeeping of quietus's reader thread with an
//!   [`OutputSink::Discard`](quietus::OutputSink::Discard) sink (a "detached" flag check and
//!   the byte counter). Both use the same 64 KiB buffer. (The reader threads themselves, with
//!   their 256 KiB reads, capture and events, are measured end to end below.)
//! - `relay_end_to_end`: a real child, `dd if=/dev/zero bs=64K count=1024` (64 MiB in 64 KiB
//!   writes; GNU `head -c` would write in 8 KiB pieces and measure `head` more than the relay).
//!   `plain_command` is `std::process::Command` with a piped stdout read to end-of-file on the
//!   bench thread, then `wait()`; `quietus_session` (retention, log spill and events all on,
//!   logs in a temp folder removed after each iteration) is `Session::builder(..).stdout(Discard)
//!   .spawn()?.wait()`, so it also pays for quietus's spawn, threads, monitor and drain.
//!
//! Then, outside criterion, `relay_paired` runs both sides of each pair back to back for 40
//! rounds (alternating which goes first) and prints the median per-round ratio to stderr:
//! `end_to_end` (everything on), `end_to_end_no_spill` (the spill off), and
//! `end_to_end_no_spill_program`, the same with the child given as a [`quietus::Program`]
//! (the direct start, no fork of this process, where std's `Command` with quietus's hook forks). On a
//! shared machine the two criterion benches of a pair run seconds apart under different
//! background load, which can swing one of them by 2x; the paired ratio is the number to hold
//! against the 85 % target.
//!
//! Run with `cargo bench --bench relay` (about 50 s). Throughput is reported in bytes.

use std::fs::File;
use std::hint::black_box;
use std::io::{self, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group};
use quietus::sources::{ActivityBoard, ActivityTrackingReader};
use quietus::{
    ActivitySource, CaptureConfig, Clock, MonitorConfig, Outcome, OutputSink, Program, Session,
    Stream,
};

/// Bytes relayed per iteration.
const TOTAL: usize = 64 * 1024 * 1024;
/// One write on the writer side, and one read buffer on the reader side (quietus's reader
/// threads read 64 KiB at a time, the default Linux pipe capacity).
const CHUNK: usize = 64 * 1024;

/// A fresh pipe as two `File`s. `rustix::pipe::pipe` rather than `std::io::pipe`, which needs
/// Rust 1.87 while the crate's MSRV is 1.85.
fn pipe() -> (File, File) {
    let (read, write) = rustix::pipe::pipe().expect("creating a pipe");
    (File::from(read), File::from(write))
}

/// Starts a thread writing `TOTAL` bytes into `write` in `CHUNK` writes; the pipe closes (EOF
/// for the reader) when it ends.
fn start_writer(mut write: File) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let chunk = vec![0x5au8; CHUNK];
        for _ in 0..TOTAL / CHUNK {
            write
                .write_all(&chunk)
                .expect("writing into the bench pipe");
        }
    })
}

/// B: a bare read loop to end-of-file. Returns the byte count.
fn plain_read_loop(reader: &mut impl Read, buf: &mut [u8]) -> u64 {
    let mut total = 0u64;
    loop {
        match reader.read(buf) {
            Ok(0) => return total,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading the bench pipe: {e}"),
        }
    }
}

/// A: what one quietus reader thread does per chunk with a discarding sink: read through
/// the activity-tracking reader (stamp), drop the bytes, count them, check the session's
/// "detached" flag.
fn tracked_read_loop<R: Read>(
    reader: &mut ActivityTrackingReader<R>,
    buf: &mut [u8],
    detached: &AtomicBool,
    bytes: &AtomicU64,
) -> u64 {
    loop {
        let n = match reader.read(buf) {
            Ok(0) => return bytes.load(Ordering::Relaxed),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading the bench pipe: {e}"),
        };
        black_box(&buf[..n]); // the Discard sink
        bytes.fetch_add(n as u64, Ordering::Relaxed);
        if detached.load(Ordering::Acquire) {
            return bytes.load(Ordering::Relaxed);
        }
    }
}

/// One in-process iteration of B: a fresh pipe, a writer thread, a plain read loop.
fn plain_in_process(buf: &mut [u8]) {
    let (mut read, write) = pipe();
    let writer = start_writer(write);
    let n = plain_read_loop(&mut read, buf);
    writer.join().expect("the writer thread does not panic");
    assert_eq!(n, TOTAL as u64);
}

/// One in-process iteration of A: the same, read through quietus's reader path.
fn tracked_in_process(buf: &mut [u8], clock: &Clock) {
    let (read, write) = pipe();
    let board = Arc::new(ActivityBoard::new(clock.clone()));
    board.set_enabled(&ActivitySource::Output, true);
    let mut reader = ActivityTrackingReader::new(read, board.clone());
    let (detached, bytes) = (AtomicBool::new(false), AtomicU64::new(0));
    let writer = start_writer(write);
    let n = tracked_read_loop(&mut reader, buf, &detached, &bytes);
    writer.join().expect("the writer thread does not panic");
    assert_eq!(n, TOTAL as u64);
    assert_eq!(reader.bytes_read(), TOTAL as u64);
    assert!(board.count(&ActivitySource::Output) >= (TOTAL / CHUNK) as u64);
}

fn relay_in_process(c: &mut Criterion) {
    let mut group = c.benchmark_group("relay_in_process");
    group
        .throughput(Throughput::Bytes(TOTAL as u64))
        // Flat: every sample has the same iteration count, and the per-sample times (whose
        // median the results table quotes) are directly comparable.
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6));

    group.bench_function("plain_read", |b| {
        let mut buf = vec![0u8; CHUNK];
        b.iter(|| plain_in_process(&mut buf));
    });

    group.bench_function("activity_tracking_reader", |b| {
        let mut buf = vec![0u8; CHUNK];
        let clock: Clock = Clock::system();
        b.iter(|| tracked_in_process(&mut buf, &clock));
    });

    group.finish();
}

/// The child of the end-to-end group: 64 MiB of zeros on stdout in 64 KiB writes.
fn producer() -> Command {
    let mut command = Command::new("dd");
    command.args([
        "if=/dev/zero",
        &format!("bs={CHUNK}"),
        &format!("count={}", TOTAL / CHUNK),
        "status=none",
    ]);
    command
}

/// The same child as a [`Program`]: a session starts it without a fork of this process.
fn producer_program() -> Program {
    Program::new("dd").args([
        "if=/dev/zero".to_string(),
        format!("bs={CHUNK}"),
        format!("count={}", TOTAL / CHUNK),
        "status=none".to_string(),
    ])
}

/// One end-to-end iteration of B: `Command` with a piped stdout, read to EOF, then `wait()`.
fn plain_command(buf: &mut [u8]) {
    // The same stdio as a quietus session, except that stderr (empty here) is not piped and
    // read by a second thread.
    let mut child = producer()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning dd");
    let mut stdout = child.stdout.take().expect("stdout was piped");
    let n = plain_read_loop(&mut stdout, buf);
    let status = child.wait().expect("waiting for dd");
    assert!(status.success());
    assert_eq!(n, TOTAL as u64);
}

/// The folder the end-to-end sessions spill their logs into (removed after every iteration).
fn log_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("quietus-bench-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("bench log folder");
        dir
    })
}

/// One end-to-end iteration of A: the same child under a quietus session with everything on:
/// head/tail retention, the log spill (64 MiB written to a log in a temp folder, with its
/// SHA-256) and the event stream. The iteration includes removing the log.
fn quietus_session() {
    session_with(
        producer(),
        CaptureConfig::builder().log_dir(log_dir()).build().unwrap(),
    );
}

/// The same with the log spill off: head/tail retention and the event stream only.
fn quietus_session_no_spill() {
    session_with(
        producer(),
        CaptureConfig::builder().spill(false).build().unwrap(),
    );
}

/// The same, the child given as a [`Program`] (the direct start).
fn quietus_session_no_spill_program() {
    session_with(
        producer_program(),
        CaptureConfig::builder().spill(false).build().unwrap(),
    );
}

fn session_with(program: impl Into<Program>, capture: CaptureConfig) {
    let spill = capture.spill();
    let session = Session::builder(program)
        .config(MonitorConfig::builder().capture(capture).build().unwrap())
        .stdout(OutputSink::Discard)
        .spawn()
        .expect("spawning dd under quietus");
    let result = session.wait();
    assert_eq!(result.outcome, Outcome::Exited);
    assert!(result.status.is_some_and(|s| s.success()));
    assert!(result.output_complete);
    assert_eq!(session.output_bytes(Stream::Stdout), TOTAL as u64);
    if spill {
        assert_eq!(result.logs.len(), 1, "the output was spilled");
        assert_eq!(result.logs[0].bytes, TOTAL as u64);
    }
    for log in &result.logs {
        let _ = std::fs::remove_file(&log.path);
    }
}

fn relay_end_to_end(c: &mut Criterion) {
    let mut group = c.benchmark_group("relay_end_to_end");
    group
        .throughput(Throughput::Bytes(TOTAL as u64))
        // Flat: every sample has the same iteration count, and the per-sample times (whose
        // median the results table quotes) are directly comparable.
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));

    group.bench_function("plain_command", |b| {
        let mut buf = vec![0u8; CHUNK];
        b.iter(|| plain_command(&mut buf));
    });

    group.bench_function("quietus_session", |b| {
        b.iter(quietus_session);
    });

    group.finish();
}

// ---------------------------------------------------------------------------------------------
// Paired comparison
// ---------------------------------------------------------------------------------------------

/// Rounds of the paired comparison, per mode.
const PAIRED_ROUNDS: usize = 40;

/// Times `f` once.
fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// The median of `values` (sorted in place).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Prints the median of `plain time / quietus time` over rounds that run both sides back to
/// back (alternating which goes first), i.e. quietus's throughput as a share of plain's.
fn report_paired(what: &str, plain: &[Duration], tracked: &[Duration]) {
    let mut ratios: Vec<f64> = plain
        .iter()
        .zip(tracked)
        .map(|(p, t)| p.as_secs_f64() / t.as_secs_f64())
        .collect();
    let gib = |d: f64| TOTAL as f64 / d / (1u64 << 30) as f64;
    let mut p: Vec<f64> = plain.iter().map(Duration::as_secs_f64).collect();
    let mut t: Vec<f64> = tracked.iter().map(Duration::as_secs_f64).collect();
    let (mp, mt) = (median(&mut p), median(&mut t));
    eprintln!(
        "relay_paired/{what}: {PAIRED_ROUNDS} rounds; median plain {:.2} ms ({:.2} GiB/s), \
         quietus {:.2} ms ({:.2} GiB/s); median per-round quietus/plain throughput {:.1} %",
        mp * 1e3,
        gib(mp),
        mt * 1e3,
        gib(mt),
        median(&mut ratios) * 100.0
    );
}

/// Sequential criterion groups see a shared machine's background load at different times; this
/// comparison runs plain and quietus back to back in each round (ABBA order), so both sides
/// see the same conditions, and reports the median per-round ratio to stderr.
///
/// Runs only under `cargo bench` (not `cargo test --benches`, not `--list`), and only when no
/// name filter is given or the filter matches `relay_paired`.
fn relay_paired() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !has("--bench")
        || has("--test")
        || has("--list")
        || !(filters.is_empty() || filters.iter().any(|f| "relay_paired".contains(f.as_str())))
    {
        return;
    }

    let mut buf = vec![0u8; CHUNK];
    let clock: Clock = Clock::system();
    let (mut plain, mut tracked) = (Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        if round % 2 == 0 {
            plain.push(timed(|| plain_in_process(&mut buf)));
            tracked.push(timed(|| tracked_in_process(&mut buf, &clock)));
        } else {
            tracked.push(timed(|| tracked_in_process(&mut buf, &clock)));
            plain.push(timed(|| plain_in_process(&mut buf)));
        }
    }
    report_paired("in_process", &plain, &tracked);

    let (mut plain, mut tracked) = (Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        if round % 2 == 0 {
            plain.push(timed(|| plain_command(&mut buf)));
            tracked.push(timed(quietus_session));
        } else {
            tracked.push(timed(quietus_session));
            plain.push(timed(|| plain_command(&mut buf)));
        }
    }
    report_paired("end_to_end", &plain, &tracked);

    let (mut plain, mut tracked) = (Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        if round % 2 == 0 {
            plain.push(timed(|| plain_command(&mut buf)));
            tracked.push(timed(quietus_session_no_spill));
        } else {
            tracked.push(timed(quietus_session_no_spill));
            plain.push(timed(|| plain_command(&mut buf)));
        }
    }
    report_paired("end_to_end_no_spill", &plain, &tracked);

    let (mut plain, mut tracked) = (Vec::new(), Vec::new());
    for round in 0..PAIRED_ROUNDS {
        if round % 2 == 0 {
            plain.push(timed(|| plain_command(&mut buf)));
            tracked.push(timed(quietus_session_no_spill_program));
        } else {
            tracked.push(timed(quietus_session_no_spill_program));
            plain.push(timed(|| plain_command(&mut buf)));
        }
    }
    report_paired("end_to_end_no_spill_program", &plain, &tracked);
}

criterion_group!(benches, relay_in_process, relay_end_to_end);

fn main() {
    benches();
    relay_paired();
    Criterion::default().configure_from_args().final_summary();
    let _ = std::fs::remove_dir_all(log_dir());
}
