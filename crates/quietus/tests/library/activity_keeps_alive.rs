//! Output on stdout or stderr, even without a newline, keeps a child alive past many idle
//! timeouts.

use crate::support as common;

use std::time::Duration;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{MonitorConfig, Outcome, Session, Stream};

/// Idle timeout of these tests: the child prints every 100 ms, so a loaded machine has 900 ms
/// of slack before a gap could look like a stall.
const IDLE: Duration = Duration::from_millis(1000);
/// Ticks of 100 ms: about 3 idle timeouts in all.
const TICKS: u32 = 30;

fn ticking(what: &str) -> String {
    format!("i=0; while [ $i -lt {TICKS} ]; do {what}; sleep 0.1; i=$((i+1)); done; exit 0")
}

struct Run {
    out: SharedBuf,
    err: SharedBuf,
    result: quietus::MonitorResult,
    stdout_bytes: u64,
    stderr_bytes: u64,
}

fn run(marker: &Marker, script: &str) -> Run {
    let out = SharedBuf::new();
    let err = SharedBuf::new();
    let session = Session::builder(marker.sh(script))
        .config(MonitorConfig::builder().idle_timeout(IDLE).build().unwrap())
        .stdout(out.sink())
        .stderr(err.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    Run {
        stdout_bytes: session.output_bytes(Stream::Stdout),
        stderr_bytes: session.output_bytes(Stream::Stderr),
        out,
        err,
        result,
    }
}

fn assert_lived_and_exited_zero(run: &Run) {
    let r = &run.result;
    assert_eq!(r.outcome, Outcome::Exited, "{r:#?}");
    assert_eq!(r.status.and_then(|s| s.code()), Some(0), "{r:#?}");
    assert_eq!(r.exit_code(), 0);
    assert!(r.signals_sent.is_empty(), "{r:#?}");
    assert!(!r.escalated);
    assert!(
        r.runtime >= IDLE * 2,
        "the child outlived several idle timeouts: runtime {:?}",
        r.runtime
    );
    assert!(r.output_complete);
}

#[test]
fn regular_stdout_keeps_the_child_alive() {
    let marker = Marker::new("alive_stdout");
    let run = run(&marker, &ticking("echo tick"));
    assert_lived_and_exited_zero(&run);
    assert_eq!(run.out.text(), "tick\n".repeat(TICKS as usize));
    assert_eq!(run.err.text(), "");
    assert_eq!(run.stdout_bytes, 5 * u64::from(TICKS));
    assert_eq!(run.stderr_bytes, 0);
    assert_no_leak(&marker);
}

#[test]
fn regular_stderr_keeps_the_child_alive() {
    let marker = Marker::new("alive_stderr");
    let run = run(&marker, &ticking("echo tock >&2"));
    assert_lived_and_exited_zero(&run);
    assert_eq!(run.err.text(), "tock\n".repeat(TICKS as usize));
    assert_eq!(run.out.text(), "");
    assert_eq!(run.stdout_bytes, 0);
    assert_eq!(run.stderr_bytes, 5 * u64::from(TICKS));
    assert_no_leak(&marker);
}

#[test]
fn output_without_newline_counts() {
    let marker = Marker::new("alive_no_newline");
    let run = run(&marker, &ticking("printf ."));
    assert_lived_and_exited_zero(&run);
    assert_eq!(run.out.text(), ".".repeat(TICKS as usize));
    assert_no_leak(&marker);
}

#[test]
fn output_that_stops_is_then_ended_one_timeout_later() {
    let marker = Marker::new("alive_then_silent");
    let out = SharedBuf::new();
    let idle = ms(500);
    let session = Session::builder(marker.sh(
        "i=0; while [ $i -lt 10 ]; do echo tick; sleep 0.1; i=$((i+1)); done; echo done; sleep 1000",
    ))
    .config(MonitorConfig::builder().idle_timeout(idle).build().unwrap())
    .stdout(out.sink())
    .spawn()
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(
        out.contains("done"),
        "it printed to the end first: {:?}",
        out.text()
    );
    // Ten ticks of 100 ms, then the idle timeout.
    assert!(result.runtime >= ms(1000) + idle, "{:?}", result.runtime);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}

#[test]
fn output_does_not_count_when_the_output_signal_is_off() {
    let marker = Marker::new("alive_output_off");
    let idle = ms(500);
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh("while :; do echo tick; sleep 0.05; done"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(idle)
                .watch_output(false)
                .kill_ladder(quietus::KillLadder::polite(quietus::Signal::TERM, ms(500)))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout: {result:#?}");
    };
    assert!(
        report.get(quietus::ActivitySource::Output).is_none(),
        "a disabled source is not listed: {report:?}"
    );
    assert!(report.get(quietus::ActivitySource::Keepalive).is_some());
    assert!(result.runtime >= idle);
    assert!(out.contains("tick"), "output is still delivered");
    assert_no_leak(&marker);
}

#[test]
fn a_large_burst_is_delivered_completely() {
    let marker = Marker::new("alive_large_burst");
    let size: u64 = 4 * 1024 * 1024 + 3;
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh(&format!("head -c {size} /dev/zero; echo end >&2")))
        .config(MonitorConfig::builder().idle_timeout(IDLE).build().unwrap())
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.output_complete);
    let bytes = out.bytes();
    assert_eq!(bytes.len() as u64, size);
    assert!(bytes.iter().all(|b| *b == 0));
    assert_eq!(session.output_bytes(Stream::Stdout), size);
    assert_eq!(session.output_bytes(Stream::Stderr), 4);
    assert_no_leak(&marker);
}

/// An output callback that does not return holds the child back (quietus reads no more of
/// its output meanwhile): not a stall. The child (python3) prints 1 KiB every 0.1 s for 5 s
/// into its pipe; the callback blocks for 3.5 idle timeouts on its first chunk. The child runs
/// to its end, and the session says how long its output was held back.
#[test]
fn a_sink_that_blocks_does_not_make_the_child_idle() {
    let m = Marker::new("sink-blocks");
    let (entered_tx, entered) = crossbeam_channel::bounded::<()>(1);
    let (release, release_rx) = crossbeam_channel::bounded::<()>(1);
    let got = SharedBuf::new();
    let collected = got.clone();
    let mut first = true;
    let sink = quietus::OutputSink::callback(move |chunk: &[u8]| {
        if std::mem::take(&mut first) {
            let _ = entered_tx.send(());
            let _ = release_rx.recv();
        }
        collected.push(chunk);
    });
    let script = "exec python3 -c \"
import sys, time
for i in range(50):
    sys.stdout.write('%01023d\\n' % i)
    sys.stdout.flush()
    time.sleep(0.1)
sys.stdout.write('end-of-output\\n')
\"";
    let session = Session::builder(m.sh(script))
        .config(MonitorConfig::builder().idle_timeout(IDLE).build().unwrap())
        .stdout(sink)
        .spawn()
        .unwrap();
    entered
        .recv_timeout(common::HANDSHAKE)
        .expect("the first chunk");
    // The consumer does not take anything for 3.5 s (the scenario, not a wait for a condition).
    std::thread::sleep(ms(3500));
    release.send(()).unwrap();
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::Exited),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.exit_code(), 0);
    assert!(got.contains("end-of-output"));
    assert!(session.output_held_back() >= ms(3000));
    assert_no_leak(&m);
}
