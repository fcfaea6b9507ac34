//! Fault scenarios, family "output": huge, odd, empty, closed and one-sided output streams.
//! Every scenario compares the SHA-256 of what the child wrote with what the sinks received.
//!
//! Already covered elsewhere, not repeated here:
//! - regular stderr ticks keeping a child alive: `activity_keeps_alive::regular_stderr_keeps_the_child_alive`;
//! - a 4 MiB burst of zeros: `activity_keeps_alive::a_large_burst_is_delivered_completely`;
//! - both streams closed and then silence: `idle_timeout::child_that_closed_its_output_is_still_ended_when_idle`;
//! - binary pass-through in the CLI: `cli::binary_stdout_passes_through_byte_for_byte`.
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::fault as fault_support;
use quietus::config::MonitorConfigBuilder;

use std::time::Duration;

use common::{ms, wait_generously};
use fault_support::{Scenario, file_fingerprint, fingerprint};
use quietus::{
    ActivitySource, CaptureConfig, KillLadder, MonitorConfig, MonitorResult, Outcome, Signal,
    Stream, outcome::LogProblem,
};

const IDLE: Duration = Duration::from_millis(500);

fn config() -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
}

/// The config of a scenario that ends by the child's exit and is not about idleness (the
/// bytes, the logs): an idle timeout as long as the test's own bound on the run, so a start
/// the machine starves cannot end it first (beside a loaded suite these runs ended at the
/// 500 ms idle timeout with no output event yet: the leader's own CPU is not the tree's
/// progress, and its pipeline had not started).
fn exit_config() -> MonitorConfigBuilder {
    config().idle_timeout(common::GENEROUS)
}

fn events(result: &MonitorResult, source: ActivitySource) -> u64 {
    result
        .activity
        .iter()
        .find(|s| s.source == source)
        .map_or(0, |s| s.events)
}

/// Compares received and written stdout in two threads (SHA-256 of an unoptimised build runs
/// at about 50 MB/s; the two digests take the time of one).
#[track_caller]
fn assert_big_stdout_accounted(s: &Scenario, expected_len: u64) {
    let received = s.out.bytes();
    let ledger = s.out_ledger();
    let (got, wrote) = std::thread::scope(|scope| {
        let wrote = scope.spawn(|| file_fingerprint(&ledger));
        (
            fingerprint(&received),
            wrote.join().expect("hashing the ledger"),
        )
    });
    assert_eq!(wrote.len, expected_len, "the child wrote it all");
    assert_eq!(got, wrote, "received (left) vs written (right)");
}

#[test]
fn a_hundred_mib_of_binary_output_arrives_intact() {
    const SIZE: u64 = 100 * 1024 * 1024;
    let s = Scenario::big("out_100mib");
    let session = s.spawn(
        &format!("head -c {SIZE} /dev/urandom | tee -a \"$SW_OUT\""),
        config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.output_complete);
    assert_eq!(session.output_bytes(Stream::Stdout), SIZE);
    s.assert_no_leak();
    assert_big_stdout_accounted(&s, SIZE);
    assert!(s.err.bytes().is_empty());
}

#[test]
fn one_fifty_mib_line_without_a_newline_arrives_intact() {
    const SIZE: u64 = 50 * 1024 * 1024;
    let s = Scenario::big("out_50mib_line");
    // base64 without wrapping: 4 characters for every 3 random bytes, no newline at all.
    let session = s.spawn(
        &format!(
            "head -c {} /dev/urandom | base64 -w0 | tee -a \"$SW_OUT\"",
            SIZE / 4 * 3
        ),
        exit_config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.output_complete);
    s.assert_no_leak();
    assert_big_stdout_accounted(&s, SIZE);
    assert!(!s.out.bytes().contains(&b'\n'), "one single line");
}

/// `write(fd, "", 0)` on a pipe moves no byte and wakes no reader: it is not activity.
#[test]
fn zero_byte_writes_are_not_activity() {
    let s = Scenario::new("out_zero_writes");
    let session = s.spawn_ready(
        "exec python3 -c 'import os, time
open(os.environ[\"SW_OUT\"], \"a\").write(\"ready\\n\")
os.write(1, b\"ready\\n\")
while True:
    assert os.write(1, b\"\") == 0 and os.write(2, b\"\") == 0
    time.sleep(0.0005)'",
        config(),
    );
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("empty writes kept the child alive: {result:#?}");
    };
    let output = report.get(ActivitySource::Output).expect("output is on");
    assert_eq!(output.events, 1, "only the ready line: {report}");
    assert!(output.idle >= IDLE, "{report}");
    assert!(result.runtime >= IDLE);
    s.assert_no_leak();
    s.assert_accounted();
}

/// The shell version: `printf ''` in a tight loop, on both streams. The loop spins a whole
/// core, which the children source now counts as the program's own work (issue 48): this is
/// about the output source, so it alone judges.
#[test]
fn printf_nothing_in_a_loop_is_not_activity() {
    let s = Scenario::new("out_printf_empty");
    let session = s.spawn_ready(
        "say ready; while :; do printf ''; printf '' >&2; done",
        config().watch_children(false),
    );
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(events(&result, ActivitySource::Output), 1, "{result:#?}");
    assert!(result.runtime >= IDLE);
    s.assert_no_leak();
    s.assert_accounted();
}

/// Ticks on stderr every 150 ms (well under the idle timeout) for 1.2 s after stdout was
/// closed: the closed stream is not a reason to end the child, the working one keeps it alive.
#[test]
fn stdout_closed_early_while_stderr_keeps_working() {
    let s = Scenario::new("out_stdout_closed");
    let session = s.spawn(
        "say before-close; exec 1>&-; \
         i=0; while [ $i -lt 8 ]; do warn tick-$i; sleep 0.15; i=$((i+1)); done; exit 0",
        config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.signals_sent.is_empty(), "{result:#?}");
    assert!(result.runtime >= ms(1200), "{:?}", result.runtime);
    assert!(events(&result, ActivitySource::Output) >= 9, "{result:#?}");
    assert!(result.output_complete);
    s.assert_no_leak();
    s.assert_accounted();
}

/// Both streams closed, the work goes on in `.agent` files: still alive, then exits.
#[test]
fn both_streams_closed_while_files_keep_working() {
    let s = Scenario::new("out_all_closed_files");
    let session = s.spawn(
        "say before-close; exec >&- 2>&-; mkdir -p .agent; \
         i=0; while [ $i -lt 8 ]; do echo $i > .agent/progress; sleep 0.15; i=$((i+1)); done",
        // A write every 0.15 s judged with 1.2 s of slack: at 500 ms one gap between two
        // writes outlasted the timeout beside a loaded suite (files idle 558 ms).
        config().idle_timeout(IDLE + ms(1200)),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.runtime >= ms(1200), "{:?}", result.runtime);
    assert!(events(&result, ActivitySource::Files) >= 8, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// The leader closes stdout while a grandchild still writes to it.
#[test]
fn the_leader_closes_stdout_while_a_grandchild_still_writes_to_it() {
    let s = Scenario::new("out_shared_stdout");
    let session = s.spawn(
        "(i=0; while [ $i -lt 8 ]; do say grandchild-$i; sleep 0.1; i=$((i+1)); done) & \
         exec 1>&-; warn leader-closed-stdout; wait; warn leader-done",
        config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.output_complete);
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn stderr_only_binary_output_arrives_intact() {
    let s = Scenario::new("out_stderr_only");
    let session = s.spawn(
        "head -c 8388608 /dev/urandom | tee -a \"$SW_ERR\" >&2",
        exit_config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert_eq!(session.output_bytes(Stream::Stdout), 0);
    assert_eq!(session.output_bytes(Stream::Stderr), 8388608);
    s.assert_no_leak();
    s.assert_accounted();
}

/// Both pipes filled at the same time by two writers: neither reader waits on the other.
#[test]
fn both_pipes_full_at_once_arrive_intact() {
    let s = Scenario::big("out_both_full");
    let session = s.spawn(
        "head -c 16777216 /dev/urandom | tee -a \"$SW_OUT\" & \
         head -c 16777216 /dev/urandom | tee -a \"$SW_ERR\" >&2 & wait",
        exit_config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.output_complete);
    s.assert_no_leak();
    s.assert_accounted();
}

/// A child that answers TERM with a last 2 MB burst and a clean exit during the grace: the
/// burst is delivered in full, the polite step was enough. (The sleeper runs in the background:
/// a foreground job killed by TERM would make the shell itself print `Terminated`.)
#[test]
fn the_last_words_written_during_the_grace_are_delivered() {
    let s = Scenario::new("out_last_words");
    let grace = Duration::from_secs(10);
    let session = s.spawn(
        "trap 'head -c 2000000 /dev/urandom | tee -a \"$SW_OUT\"; exit 0' TERM; \
         say ready; sleep 1000 & wait",
        config().kill_ladder(KillLadder::polite(Signal::TERM, grace)),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(result.signals_sent, vec![Signal::TERM]);
    assert!(!result.escalated);
    assert_eq!(result.status.and_then(|s| s.code()), Some(0), "{result:#?}");
    assert!(result.ladder_time.expect("a ladder ran") < grace);
    assert!(result.output_complete);
    s.assert_no_leak();
    s.assert_accounted();
}

/// Killed in the middle of a stream by the hard timeout: what arrived and what was written
/// agree byte for byte. `tee` writes each block to stdout before the ledger, so the ledger is
/// a prefix of what arrived, at most one block (8 KiB here; 64 KiB allowed) shorter.
#[test]
fn a_stream_cut_by_the_hard_timeout_loses_and_garbles_nothing() {
    let s = Scenario::new("out_cut");
    let session = s.spawn(
        "while :; do head -c 65536 /dev/urandom; sleep 0.01; done | tee -a \"$SW_OUT\"",
        config().hard_timeout(Some(ms(700))),
    );
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::HardTimeout { .. }),
        "{result:#?}"
    );
    assert_eq!(result.exit_code(), 124);
    assert!(result.output_complete);
    s.assert_no_leak();
    let received = s.out.bytes();
    let written = file_fingerprint(&s.out_ledger());
    assert!(written.len > 0, "the child wrote before the deadline");
    assert!(
        received.len() as u64 >= written.len && received.len() as u64 - written.len <= 65536,
        "received {} bytes, the ledger holds {}",
        received.len(),
        written.len
    );
    assert_eq!(
        fingerprint(&received[..written.len as usize]),
        written,
        "the common part is identical"
    );
    assert_eq!(session.output_bytes(Stream::Stdout), received.len() as u64);
}

/// Issue 11 item 4. The log spill (SHA-256 and the disk, slower than a pipe) still has
/// megabytes to write when the child exits; a drain cap of zero makes the end come at once.
/// Nobody holds the pipe open, so the cap does not apply: every byte read is logged and hashed
/// before `wait` returns, and the output is complete.
#[test]
fn a_log_backlog_outlasting_the_drain_cap_is_written_whole() {
    const SIZE: u64 = 48 * 1024 * 1024;
    let s = Scenario::big("out_spill_backlog");
    let logs = tempfile::tempdir().expect("a log folder");
    let session = s.spawn(
        &format!("head -c {SIZE} /dev/urandom | tee -a \"$SW_OUT\""),
        // Not about idleness: beside a loaded suite the pipeline paused 500 ms mid-stream.
        exit_config()
            .drain_cap(Duration::ZERO)
            .capture(CaptureConfig::builder().log_dir(logs.path())),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(result.output_complete, "{result:#?}");
    assert_eq!(result.logs.len(), 1, "{:?}", result.logs);
    let log = &result.logs[0];
    assert!(!log.incomplete, "{log:?}");
    assert_eq!(log.error, None);
    assert_eq!(log.bytes, SIZE, "{log:?}");
    let ledger = file_fingerprint(&s.out_ledger());
    assert_eq!(ledger.len, SIZE);
    assert_eq!(file_fingerprint(&log.path), ledger, "log (left) vs written");
    assert_eq!(log.sha256, ledger.sha256, "the reported hash");
    s.assert_no_leak();
}

/// Issue 11 item 9. The log folder disappears before the stream reaches the spill threshold:
/// the log cannot be created. The run goes on (output kept in memory), and the result still
/// lists the stream's log, marked incomplete, with the error.
#[test]
fn a_log_that_could_not_be_created_is_listed_with_its_error() {
    let s = Scenario::new("out_log_dir_gone");
    let base = tempfile::tempdir().expect("a temporary directory");
    let logs = base.path().join("logs");
    let session = s.spawn(
        &format!(
            "rmdir '{}' && head -c 20000 /dev/urandom | tee -a \"$SW_OUT\"",
            logs.display()
        ),
        exit_config().capture(CaptureConfig::builder().log_dir(&logs)),
    );
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    assert!(result.output_complete);
    assert_eq!(result.logs.len(), 1, "{:?}", result.logs);
    let log = &result.logs[0];
    assert_eq!(log.stream, Stream::Stdout);
    assert!(log.incomplete, "{log:?}");
    let error = log.error.as_ref().expect("the error is reported");
    assert!(
        matches!(error, LogProblem::Create(e) if e.kind() == std::io::ErrorKind::NotFound),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("No such file or directory"),
        "{error}"
    );
    assert!(log.path.starts_with(&logs), "{log:?}");
    assert!(!log.path.exists());
    assert_eq!(log.written, 0, "{log:?}");
    assert_eq!(log.bytes, 20000, "{log:?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// Issue 11 item 5, library side. A sink that fails (a full device): reading goes on, and the
/// session says how many bytes reached the sink and why the rest did not.
#[test]
fn a_sink_on_a_full_device_reports_delivered_bytes_and_the_error() {
    let s = Scenario::new("out_sink_full");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full opens");
    let session = s
        .builder(
            "head -c 3000000 /dev/urandom | tee -a \"$SW_OUT\"",
            exit_config(),
        )
        .stdout(quietus::OutputSink::writer(full))
        .spawn()
        .expect("spawns");
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    assert!(result.output_complete);
    let written = file_fingerprint(&s.out_ledger()).len;
    assert_eq!(session.output_bytes(Stream::Stdout), written);
    assert_eq!(session.delivered_bytes(Stream::Stdout), 0);
    let error = session
        .sink_error(Stream::Stdout)
        .expect("the failure is kept");
    let quietus::sources::SinkError::Write(system) = &error else {
        panic!("a write error: {error:?}");
    };
    assert_eq!(system.kind(), std::io::ErrorKind::StorageFull, "{error}");
    assert!(
        error.to_string().contains("No space left on device"),
        "{error}"
    );
    assert_eq!(session.sink_error(Stream::Stderr), None);
    s.assert_no_leak();
}
