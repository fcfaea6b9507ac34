//! `quietus --input-wait-timeout D` (and `QUIETUS_INPUT_WAIT_TIMEOUT`): a program that
//! reads a held stdin is ended after D with exit status 124, the outcome `input_wait` in the
//! report, one `input_wait` event and a summary line that names the reader.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::process::Stdio;

use cli_support::{assert_code, summary_line, sw, text};
use common::{Marker, assert_no_leak};
use serde_json::Value;

#[test]
fn a_held_stdin_is_ended_with_input_wait_in_the_report_and_the_events() {
    let m = Marker::new("cli-input-wait");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let events = dir.path().join("events.jsonl");
    let running = sw(&m)
        .env("QUIETUS_INPUT_WAIT_TIMEOUT", "1s")
        .args(&[
            "-i",
            "60s",
            "-g",
            "300ms",
            "--report",
            report.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ])
        .sh("read x")
        // quietus's stdin (and so the child's) is a pipe this test holds open.
        .spawn_with(|cmd| {
            cmd.stdin(Stdio::piped());
        });
    let finished = running.wait();
    assert_eq!(
        finished.status.code(),
        Some(124),
        "{}",
        finished.stderr_text()
    );
    let line = summary_line(&finished.stderr);
    assert!(
        line.contains("waiting for input — sh (pid ") && line.contains("reads stdin (a pipe)"),
        "{line}"
    );
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["outcome"], "input_wait", "{report}");
    // The diagnosis it was judged on, as an idle timeout's report has it.
    assert_eq!(report["diagnosis"]["kind"], "awaiting_input", "{report}");
    let readers: Vec<&Value> = report["diagnosis"]["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("the processes: {report}"))
        .iter()
        .filter(|p| p["name"] == "sh" && p["target"] == "stdin (a pipe)")
        .collect();
    assert_eq!(readers.len(), 1, "{report}");
    assert!(
        report["diagnosis"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("sh")),
        "{report}"
    );
    let lines: Vec<Value> = text(&fs::read(&events).unwrap())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let waits: Vec<&Value> = lines
        .iter()
        .filter(|e| e["event"] == "input_wait")
        .collect();
    assert_eq!(waits.len(), 1, "{lines:?}");
    assert_eq!(waits[0]["name"], "sh");
    assert_eq!(waits[0]["target"], "stdin (a pipe)");
    assert!(waits[0]["waited_ms"].as_u64().unwrap() >= 1000);
    assert_no_leak(&m);
}

#[test]
fn an_input_wait_timeout_out_of_range_is_refused() {
    let m = Marker::new("cli-input-wait-range");
    let out = sw(&m)
        .args(&["--input-wait-timeout", "10ms"])
        .sh("true")
        .output();
    assert_code(&out, 125);
    let err = text(&out.stderr);
    assert!(err.contains("--input-wait-timeout"), "{err}");
}

/// `--input-wait-notice` (here through its variable): one `input_wait` event in the events
/// stream while the program waits on its stdin, and the program goes on; the line this test
/// then writes reaches it, and it exits 0.
#[test]
fn a_notice_writes_the_event_and_the_program_goes_on() {
    let m = Marker::new("cli-input-wait-notice");
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let mut running = sw(&m)
        .env("QUIETUS_INPUT_WAIT_NOTICE", "500ms")
        .args(&["-i", "60s", "--events", events.to_str().unwrap()])
        .sh("read x; echo got $x")
        .spawn_with(|cmd| {
            cmd.stdin(Stdio::piped());
        });
    let told = || {
        fs::read(&events)
            .map(|b| text(&b).contains("\"input_wait\""))
            .unwrap_or(false)
    };
    assert!(
        common::poll_until(common::GENEROUS, told),
        "no input_wait event"
    );
    use std::io::Write;
    let mut stdin = running.child.stdin.take().expect("a piped stdin");
    stdin.write_all(b"hello\n").unwrap();
    drop(stdin);
    let finished = running.wait();
    assert_eq!(
        finished.status.code(),
        Some(0),
        "{}",
        finished.stderr_text()
    );
    assert_eq!(text(&finished.stdout), "got hello\n");
    let waits = text(&fs::read(&events).unwrap())
        .lines()
        .filter(|l| l.contains("\"input_wait\""))
        .count();
    assert_eq!(waits, 1, "once per episode");
    assert_no_leak(&m);
}

/// A terminal relay (`script`) reads the master side of its terminal (`/dev/ptmx`) while the
/// program on the terminal sleeps: not a wait for input; the program runs to its end.
#[test]
fn a_terminal_relay_is_not_ended_as_waiting_for_input() {
    let m = Marker::new("cli-input-wait-relay");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let inner = format!("sleep 4; echo finished {}", m.as_str());
    let out = sw(&m)
        .args(&[
            "-i",
            "60s",
            "--input-wait-timeout",
            "1s",
            "--report",
            report.to_str().unwrap(),
            "--",
            "script",
            "-qec",
            &inner,
            "/dev/null",
        ])
        .output();
    assert_code(&out, 0);
    assert!(
        text(&out.stdout).contains("finished"),
        "{}",
        text(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["outcome"], "exited", "{report}");
    assert_no_leak(&m);
}
