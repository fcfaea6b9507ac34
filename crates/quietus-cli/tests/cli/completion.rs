//! `--done-when-output`, `--done-when-file`, `--linger`, `--solo-cap`: the command's side of
//! completion and solo caps (exit status, summary line, report, events, options and their
//! variables).

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;

use cli_support::{assert_code, summary_line, sw, text};
use common::{Marker, assert_no_leak};
use serde_json::Value;

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&fs::read(path).expect("written")).expect("JSON")
}

#[test]
fn a_result_line_then_a_hang_exits_0_with_a_completed_report_and_event() {
    let marker = Marker::new("cli_done_output");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let events = dir.path().join("e.jsonl");
    let output = sw(&marker)
        .args(&[
            "--done-when-output",
            r#"^\{"type":"result""#,
            "--linger",
            "500ms",
            "--report",
            report.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ])
        .sh(r#"echo '{"type":"result","is_error":false}'; exec sleep 100000"#)
        .output();
    assert_code(&output, 0);
    let line = summary_line(&output.stderr);
    assert!(
        line.contains("ended after the work was done (output line on stdout"),
        "{line}"
    );
    let r = read_json(&report);
    assert_eq!(r["outcome"], "completed");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(r["completion"]["trigger"], "output");
    assert_eq!(r["completion"]["stream"], "stdout");
    assert_eq!(
        r["completion"]["matched"],
        r#"{"type":"result","is_error":false}"#
    );
    let lines = text(&fs::read(&events).unwrap());
    let completed: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "completed")
        .collect();
    assert_eq!(completed.len(), 1, "{lines}");
    assert_eq!(completed[0]["trigger"], "output");
    assert_no_leak(&marker);
}

#[test]
fn a_status_file_from_the_environment_then_a_hang_exits_0() {
    let marker = Marker::new("cli_done_file");
    let dir = tempfile::tempdir().unwrap();
    let output = sw(&marker)
        .env("QUIETUS_DONE_WHEN_FILE", "nothing.json:.agent/status.json")
        .env("QUIETUS_LINGER", "300ms")
        .dir(dir.path())
        .sh("mkdir -p .agent; echo '{}' > .agent/status.json; exec sleep 100000")
        .output();
    assert_code(&output, 0);
    assert!(
        summary_line(&output.stderr).contains("file "),
        "{}",
        text(&output.stderr)
    );
    assert_no_leak(&marker);
}

#[test]
fn a_program_that_completes_and_exits_3_keeps_3() {
    let marker = Marker::new("cli_done_exit3");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let output = sw(&marker)
        .args(&[
            "--done-when-output",
            "^RESULT",
            "--report",
            report.to_str().unwrap(),
        ])
        .sh("echo 'RESULT: failed'; exit 3")
        .output();
    assert_code(&output, 3);
    let r = read_json(&report);
    assert_eq!(r["outcome"], "exited");
    assert_eq!(r["completion"]["matched"], "RESULT: failed");
    assert_no_leak(&marker);
}

#[test]
fn a_spinning_grandchild_is_ended_after_its_solo_cap_and_the_report_says_capped() {
    let marker = Marker::new("cli_solo_cap");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let output = sw(&marker)
        .args(&[
            "-i",
            "1500ms",
            "--no-watch",
            "--report",
            report.to_str().unwrap(),
        ])
        .env("QUIETUS_SOLO_CAP", "children=2s")
        .sh("yes > /dev/null & wait")
        .output();
    assert_code(&output, 124);
    let line = summary_line(&output.stderr);
    assert!(line.contains("children capped"), "{line}");
    let r = read_json(&report);
    assert_eq!(r["capped"], serde_json::json!(["children"]));
    assert!(r["duration_ms"].as_u64().unwrap() >= 3500, "{r:#}");
    assert_no_leak(&marker);
}

/// QUIETUS_SOLO_CAP holds several caps separated by ':', as its help says (the variable's one
/// value was read as one cap and refused, 125, before the settings table read it).
#[test]
fn the_solo_cap_variable_holds_several_caps() {
    let marker = Marker::new("cli_solo_cap_list");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let output = sw(&marker)
        .args(&[
            "-i",
            "1500ms",
            "--no-watch",
            "--report",
            report.to_str().unwrap(),
        ])
        .env("QUIETUS_SOLO_CAP", "repeated_output=1m:children=2s")
        .sh("yes > /dev/null & wait")
        .output();
    assert_code(&output, 124);
    let r = read_json(&report);
    assert_eq!(r["capped"], serde_json::json!(["children"]), "{r:#}");
    assert_no_leak(&marker);
}

#[test]
fn bad_values_name_the_option() {
    let marker = Marker::new("cli_done_bad");
    for (args, needle) in [
        (vec!["--done-when-output", "(["], "--done-when-output"),
        (vec!["--solo-cap", "cpu=1m"], "\"cpu\" is not a source"),
        (vec!["--solo-cap", "a b=1m"], "is not a source"),
        (vec!["--probe", "output=true"], "--probe"),
        (vec!["--probe", "nocommand"], "is not NAME=COMMAND"),
        (vec!["--solo-cap", "children"], "is not SOURCE=D"),
        (vec!["--solo-cap", "children=soon"], "--solo-cap"),
        (vec!["--linger", "2h"], "--linger"),
    ] {
        let output = sw(&marker).args(&args).sh("true").output();
        assert_code(&output, 125);
        let err = text(&output.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let output = sw(&marker)
        .env("QUIETUS_SOLO_CAP", "children=1m:nope=2m")
        .sh("true")
        .output();
    assert_code(&output, 125);
    let err = text(&output.stderr);
    assert!(
        err.contains("QUIETUS_SOLO_CAP") && err.contains("nope"),
        "{err}"
    );
}

#[test]
fn a_probe_command_keeps_a_silent_program_alive_while_it_says_yes() {
    let marker = Marker::new("cli_probe");
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("busy"), "").unwrap();
    let report = dir.path().join("r.json");
    let running = sw(&marker)
        .args(&[
            "-i",
            "1500ms",
            "--no-watch",
            "--probe",
            "job=echo asked >> asked.txt; test -e busy",
            "--report",
            report.to_str().unwrap(),
        ])
        .dir(dir.path())
        .sh("exec sleep 100000")
        .spawn();
    let asked = dir.path().join("asked.txt");
    let times = || {
        fs::read_to_string(&asked)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    // Two stale decisions answered yes: the program lived through both.
    assert!(common::poll_until(common::GENEROUS, || times() >= 2));
    assert!(!report.exists() || fs::read(&report).unwrap().is_empty());
    fs::remove_file(dir.path().join("busy")).unwrap();
    let finished = running.wait();
    assert_eq!(
        finished.status.code(),
        Some(124),
        "{}",
        finished.stderr_text()
    );
    let r = read_json(&report);
    assert_eq!(r["probes"][0]["name"], "job");
    assert!(
        r["probes"][0]["activity_count"].as_u64().unwrap() >= 2,
        "{r:#}"
    );
    assert_no_leak(&marker);
}
