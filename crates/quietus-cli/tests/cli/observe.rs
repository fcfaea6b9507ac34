//! `quietus --observe` (and `QUIETUS_OBSERVE`, issue 43): nothing is ended; the summary
//! lines, the report's `observed` and the `observed` events say when and why quietus would
//! have ended the program, which runs to its own end and gives quietus its own exit status.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;

use cli_support::{own_lines, sw, text};
use common::{Marker, assert_no_leak};
use serde_json::Value;

fn events_of(path: &std::path::Path) -> Vec<Value> {
    text(&fs::read(path).unwrap())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_quiet_stretch_is_observed_and_the_program_runs_to_its_end() {
    let m = Marker::new("cli-observe-idle");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let events = dir.path().join("events.jsonl");
    // bash, silent for 3 s between two lines: stale after 1 s.
    let output = sw(&m)
        .args(&[
            "--observe",
            "-i",
            "1s",
            "--report",
            report.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            "echo x; sleep 3; echo y",
            m.as_str(),
        ])
        .output();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&output.stdout), "x\ny\n", "{stderr}");
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["outcome"], "exited", "{report}");
    assert_eq!(report["exit_code"], 0, "{report}");
    assert_eq!(report["ladder"]["signals_sent"], Value::Array(vec![]));
    let observed = report["observed"].as_array().expect("observed: an array");
    assert!(!observed.is_empty(), "{report}");
    let first = &observed[0];
    assert_eq!(first["outcome"], "idle_timeout", "{report}");
    assert!(first["at_ms"].as_u64().unwrap() >= 1000, "{report}");
    assert!(first["idle_ms"]["output"].as_u64().unwrap() >= 1000);
    assert!(first["diagnosis"]["kind"].is_string(), "{report}");
    assert!(
        first["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("ended after 1s idle (")),
        "{report}"
    );
    // One event per observation, the same entries.
    let sent: Vec<Value> = events_of(&events)
        .into_iter()
        .filter(|e| e["event"] == "observed")
        .collect();
    assert_eq!(sent.len(), observed.len(), "{sent:?}");
    assert_eq!(sent[0]["at_ms"], first["at_ms"]);
    // Said at the moment, and once more at the end; never "ended".
    let lines = own_lines(&output.stderr);
    let said = lines
        .iter()
        .filter(|l| l.starts_with("quietus: would have ended after 1s idle ("))
        .count();
    assert_eq!(said, observed.len(), "{lines:?}");
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("quietus: observed only: would have ended it ")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("quietus: ended")),
        "{lines:?}"
    );
    assert_no_leak(&m);
}

#[test]
fn the_hard_timeout_from_the_environment_is_observed_once_and_the_status_is_the_programs() {
    let m = Marker::new("cli-observe-hard");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    // python, printing every 200 ms for 2.5 s (never idle), then exiting 3.
    let script = "import sys, time\n\
                  for _ in range(13):\n    print('tick', flush=True); time.sleep(0.2)\n\
                  sys.exit(3)";
    let output = sw(&m)
        .env("QUIETUS_OBSERVE", "1")
        .args(&[
            "-i",
            "60s",
            "--hard-timeout",
            "1s",
            "--report",
            report.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            script,
            m.as_str(),
        ])
        .output();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_eq!(text(&output.stdout).lines().count(), 13, "{stderr}");
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["outcome"], "exited", "{report}");
    let observed = report["observed"].as_array().expect("observed: an array");
    assert_eq!(observed.len(), 1, "{report}");
    assert_eq!(observed[0]["outcome"], "hard_timeout", "{report}");
    assert!(observed[0]["at_ms"].as_u64().unwrap() >= 1000, "{report}");
    assert!(observed[0]["diagnosis"].is_null(), "{report}");
    assert!(
        stderr.contains("quietus: would have ended at the hard timeout of 1s"),
        "{stderr}"
    );
    assert_no_leak(&m);
}

#[test]
fn without_observe_the_report_lists_no_observation() {
    let m = Marker::new("cli-observe-off");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let output = sw(&m)
        .args(&["-i", "60s", "--report", report.to_str().unwrap()])
        .sh("echo hi")
        .output();
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["observed"], Value::Array(vec![]), "{report}");
    assert_no_leak(&m);
}

/// One input wait is one observation however long it lasts (issue 51, point 4: `sh -c 'read
/// x'` fed nothing for 4 s was recorded five times at a 500 ms input-wait timeout). The
/// program's stdin stays open, unread, for 2.5 s after the first observation — five more
/// looks' worth — then closes.
#[test]
fn an_input_wait_is_observed_once_per_episode() {
    use std::process::{Command, Stdio};
    let m = Marker::new("cli-observe-input");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let events = dir.path().join("events.jsonl");
    let mut command = Command::new(env!("CARGO_BIN_EXE_quietus"));
    cli_support::isolate(&mut command, &m);
    command
        .args([
            "--observe",
            "-i",
            "1h",
            "--input-wait-timeout",
            "500ms",
            "--report",
        ])
        .arg(&report)
        .arg("--events")
        .arg(&events)
        .args(["--", "bash", "-c", "read x; echo done", m.as_str()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut quietus = command.spawn().expect("quietus starts");
    let observed = || {
        fs::read(&events).is_ok_and(|b| {
            text(&b)
                .lines()
                .any(|l| l.contains("\"observed\"") && l.contains("input_wait"))
        })
    };
    assert!(
        common::poll_until(common::GENEROUS, observed),
        "no input wait observed"
    );
    std::thread::sleep(std::time::Duration::from_millis(2500));
    drop(quietus.stdin.take());
    let output = quietus.wait_with_output().expect("quietus ends");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    let waits = report["observed"]
        .as_array()
        .expect("observed: an array")
        .iter()
        .filter(|o| o["outcome"] == "input_wait")
        .count();
    assert_eq!(waits, 1, "one episode, one observation: {report:#}");
    assert_no_leak(&m);
}
