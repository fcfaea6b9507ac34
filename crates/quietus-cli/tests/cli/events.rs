//! `quietus --events FILE` (JSON Lines) and `--log-dir DIR` (complete logs with SHA-256).

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;

use cli_support::{assert_code, sw, text};
use common::{Marker, assert_no_leak};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn lines(bytes: &[u8]) -> Vec<Value> {
    text(bytes)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn kind(v: &Value) -> &str {
    v["event"].as_str().expect("an event name")
}

#[test]
fn events_file_is_json_lines_from_started_to_closed() {
    let m = Marker::new("cli-events");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let out = sw(&m)
        .args(&[
            "-i",
            "500ms",
            "-g",
            "200ms",
            "--events",
            path.to_str().unwrap(),
        ])
        .sh("echo hello; echo oops >&2; exec sleep 1000")
        .output();
    assert_code(&out, 124);
    let events = lines(&fs::read(&path).unwrap());
    assert_eq!(kind(&events[0]), "started", "{events:?}");
    assert_eq!(kind(events.last().unwrap()), "closed");
    let pid = events[0]["pid"].as_u64().unwrap();
    assert_eq!(events[0]["pgid"].as_u64().unwrap(), pid);
    assert!(events.iter().any(|e| kind(e) == "output"
        && e["stream"] == "stdout"
        && e["text"] == "hello\n"
        && e["bytes"] == 6));
    assert!(
        events
            .iter()
            .any(|e| kind(e) == "output" && e["stream"] == "stderr")
    );
    assert!(
        events
            .iter()
            .any(|e| kind(e) == "idle_warning" && e["left_ms"].is_u64())
    );
    assert!(
        events
            .iter()
            .any(|e| kind(e) == "signal" && e["signal"] == "TERM" && e["step"] == 0)
    );
    let exited: Vec<&Value> = events.iter().filter(|e| kind(e) == "exited").collect();
    assert_eq!(exited.len(), 1);
    assert_eq!(exited[0]["outcome"], "idle_timeout");
    assert_eq!(exited[0]["signal_name"], "TERM");
    // The program's own output still passes through untouched.
    assert_eq!(out.stdout, b"hello\n");
    assert_no_leak(&m);
}

#[test]
fn events_to_stderr_with_a_dash() {
    let m = Marker::new("cli-events-stderr");
    let out = sw(&m).args(&["--events", "-"]).sh("echo hi").output();
    assert_code(&out, 0);
    let events = lines(&out.stderr);
    assert_eq!(kind(&events[0]), "started");
    assert_eq!(kind(events.last().unwrap()), "closed");
    assert!(
        events
            .iter()
            .any(|e| kind(e) == "exited" && e["outcome"] == "exited" && e["exit_code"] == 0)
    );
    assert_no_leak(&m);
}

#[test]
fn an_unwritable_events_file_is_125_before_the_program_runs() {
    let m = Marker::new("cli-events-bad");
    let dir = tempfile::tempdir().unwrap();
    let witness = dir.path().join("ran");
    let out = sw(&m)
        .args(&["--events", "/nonexistent-folder/events.jsonl"])
        .sh(&format!("touch {}", witness.display()))
        .output();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("--events"),
        "{}",
        text(&out.stderr)
    );
    assert!(!witness.exists());
    assert_no_leak(&m);
}

#[test]
fn log_dir_holds_the_complete_output_and_the_report_its_sha256() {
    let m = Marker::new("cli-log-dir");
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let report = dir.path().join("report.json");
    let out = sw(&m)
        .args(&[
            "--log-dir",
            logs.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ])
        .sh("head -c 300000 /dev/urandom")
        .output();
    assert_code(&out, 0);
    assert_eq!(out.stdout.len(), 300_000);
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    let log = &report["log"].as_array().expect("a log list")[0];
    assert_eq!(log["stream"], "stdout");
    assert_eq!(log["bytes"], 300_000);
    let path = log["path"].as_str().unwrap();
    assert!(path.starts_with(logs.to_str().unwrap()), "{path}");
    let expected: String = Sha256::digest(&out.stdout)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(log["sha256"], expected.as_str());
    assert_eq!(fs::read(path).unwrap(), out.stdout);
    assert_no_leak(&m);
}

#[test]
fn an_unusable_log_dir_is_125_and_the_program_does_not_run() {
    let m = Marker::new("cli-log-dir-bad");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    let witness = dir.path().join("ran");
    let out = sw(&m)
        .env("QUIETUS_LOG_DIR", file.join("logs"))
        .sh(&format!("touch {}", witness.display()))
        .output();
    assert_code(&out, 125);
    assert!(
        text(&out.stderr).contains("log folder"),
        "{}",
        text(&out.stderr)
    );
    assert!(!witness.exists());
    assert_no_leak(&m);
}

/// `--events` on a FIFO nobody reads yet: quietus says why it waits (instead of hanging in
/// silence), and runs the program once a reader comes.
#[test]
fn an_events_fifo_without_a_reader_is_announced_and_then_served() {
    let m = Marker::new("cli-events-fifo");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("events.fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .expect("mkfifo");
    let running = sw(&m)
        .args(&["--events", fifo.to_str().unwrap()])
        .sh("echo hi")
        .spawn();
    running.stderr.wait_for("waiting for a reader");
    let reader = std::thread::spawn(move || fs::read(&fifo).expect("the FIFO is readable"));
    let finished = running.wait();
    assert_eq!(finished.status.code(), Some(0), "{finished:?}");
    let lines = String::from_utf8(reader.join().expect("the reader thread")).unwrap();
    let last: Value = serde_json::from_str(lines.lines().last().expect("lines")).unwrap();
    assert_eq!(last["event"], "closed", "{lines}");
    assert_no_leak(&m);
}

/// A wait for a FIFO's reader (`--events`, `--report`) is quietus's own: INT, TERM and HUP
/// end it (quietus dies of the signal, the program never started), where only KILL did.
#[test]
fn a_wait_for_a_fifos_reader_is_given_up_at_int_term_or_hup() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    for (option, signal) in [
        ("--events", rustix::process::Signal::TERM),
        ("--report", rustix::process::Signal::INT),
        ("--events", rustix::process::Signal::HUP),
    ] {
        let m = Marker::new("cli-fifo-interrupted");
        let fifo = dir.path().join(format!("{}.fifo", signal.as_raw()));
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .expect("mkfifo");
        let running = sw(&m)
            .args(&[option, fifo.to_str().unwrap()])
            .sh("echo started")
            .spawn();
        running.stderr.wait_for("waiting for a reader");
        running.signal(signal);
        let finished = running.wait();
        assert_eq!(
            finished.status.signal(),
            Some(signal.as_raw()),
            "{option}: {finished:?}"
        );
        assert!(!text(&finished.stdout).contains("started"), "{finished:?}");
        assert_no_leak(&m);
    }
}

/// Without `--log-dir` or `--report` the command writes no log: every byte already passed
/// through, and a second copy on disk is only made when asked for (issue 13).
#[test]
fn without_log_dir_or_report_no_log_is_written() {
    let m = Marker::new("cli-no-logs");
    let cache = tempfile::tempdir().unwrap();
    let out = sw(&m)
        .env("XDG_CACHE_HOME", cache.path())
        .sh("head -c 300000 /dev/zero")
        .output();
    assert_code(&out, 0);
    assert_eq!(out.stdout.len(), 300_000);
    assert!(
        !cache.path().join("quietus").exists(),
        "no log folder, no log"
    );
    assert_no_leak(&m);
}

/// With `--report` but an unusable default folder: a warning, the program runs, and the
/// report's `log` entry says why there is no file; never a refusal to run.
#[test]
fn a_report_with_an_unusable_default_folder_runs_and_says_why_there_is_no_log() {
    let m = Marker::new("cli-degraded-logs");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, "").unwrap();
    let report = dir.path().join("report.json");
    let out = sw(&m)
        .env("XDG_CACHE_HOME", &file)
        .args(&["--report", report.to_str().unwrap()])
        .sh("head -c 10000 /dev/zero")
        .output();
    assert_code(&out, 0);
    assert_eq!(out.stdout.len(), 10_000);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("log folder"), "{stderr}");
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    let log = &report["log"].as_array().expect("a log list")[0];
    assert_eq!(log["bytes"], 10_000);
    assert_eq!(log["written"], 0);
    let error = log["error"].as_str().expect("why there is no log");
    assert!(error.contains("log folder"), "{error}");
    assert_no_leak(&m);
}
