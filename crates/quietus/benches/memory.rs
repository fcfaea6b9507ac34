//! Peak memory while a child writes 2 GiB through a session with retention, log spill and
//! events all on.
//!
//! Target (issue: output capture and events): the supervisor's peak resident memory grows by at
//! most the capture caps (2 × 1 MiB by default) plus 16 MiB.
//!
//! Not a timing bench, so it does not use criterion's timer: it runs the session once and reports
//! the growth of this process's peak resident set (`VmHWM` in `/proc/self/status`) over what it
//! was just before the spawn, and fails (exit code 1) when the target is missed. The log
//! (2 GiB, in a temp folder) is removed afterwards.
//!
//! Run: `cargo bench --bench memory`

use std::process::Command;
use std::time::Instant;

use quietus::{CaptureConfig, MonitorConfig, OutputSink, Session};

const TOTAL: u64 = 2 * 1024 * 1024 * 1024;

/// A field of `/proc/self/status` in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("field in /proc/self/status")
}

/// Resets the peak resident set to the current one (Linux: write 5 to clear_refs).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() {
    // `cargo bench --no-run` never gets here; `cargo test --benches` passes `--bench`-less args.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let logs = std::env::temp_dir().join(format!("quietus-memory-bench-{}", std::process::id()));
    let capture = CaptureConfig::builder().log_dir(&logs).build().unwrap();
    let caps_kib = 2 * capture.cap_per_stream() as u64 / 1024;
    let mut command = Command::new("head");
    command.args(["-c", &TOTAL.to_string(), "/dev/zero"]);

    let before = status_kib("VmRSS:");
    let reset = reset_peak();
    let baseline = if reset { before } else { status_kib("VmHWM:") };
    let started = Instant::now();
    let session = Session::builder(command)
        .config(MonitorConfig::builder().capture(capture).build().unwrap())
        .stdout(OutputSink::Discard)
        .spawn()
        .expect("spawn head");
    let events = session.events(); // held, never read: the worst case for the channel
    let result = session.wait();
    let elapsed = started.elapsed();
    drop(events);
    let peak = status_kib("VmHWM:");
    let growth = peak.saturating_sub(baseline);
    let budget = caps_kib + 16 * 1024;
    let logged: u64 = result.logs.iter().map(|l| l.bytes).sum();
    let _ = std::fs::remove_dir_all(&logs);
    assert_eq!(logged, TOTAL, "the whole output was logged");
    println!(
        "memory/peak_growth_2GiB: {growth} KiB (budget: caps {caps_kib} KiB + 16384 KiB = {budget} KiB; \
         baseline {baseline} KiB, peak {peak} KiB, peak reset: {reset}); 2 GiB relayed, logged and \
         hashed in {:.2} s ({:.0} MiB/s); {} events dropped",
        elapsed.as_secs_f64(),
        TOTAL as f64 / (1 << 20) as f64 / elapsed.as_secs_f64(),
        result.events_dropped
    );
    if growth > budget {
        eprintln!("memory/peak_growth_2GiB: over budget");
        std::process::exit(1);
    }
}
