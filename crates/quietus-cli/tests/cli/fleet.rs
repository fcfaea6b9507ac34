//! For engines that act on an exit status and a short message only (issue 52): the exit
//! statuses chosen per outcome (`--exit-code-stall`, `--exit-code-hard-timeout`,
//! `--exit-code-input-wait`) and the line of `--termination-message FILE`, on every way out.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use cli_support::{assert_code, sw};
use common::{Marker, assert_no_leak};
use rustix::process::Signal as Sig;

/// A temporary folder and the termination message's path in it.
fn message_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("termination-log");
    (dir, path)
}

/// The termination message: one line, a newline at its end, at most 4 KiB.
#[track_caller]
fn read_message(path: &Path) -> String {
    let text = fs::read_to_string(path).expect("the termination message was written");
    assert!(text.len() <= 4096, "{} bytes", text.len());
    assert!(text.ends_with('\n'), "{text:?}");
    assert_eq!(text.lines().count(), 1, "{text:?}");
    text.trim_end().to_owned()
}

const CODES: [&str; 6] = [
    "--exit-code-stall",
    "3",
    "--exit-code-hard-timeout",
    "4",
    "--exit-code-input-wait",
    "5",
];

#[test]
fn a_stall_exits_with_its_own_status_and_says_why_in_the_message() {
    let marker = Marker::new("cli_fleet_stall");
    let (_dir, path) = message_path();
    // The file exists, with an earlier run's longer line (as /dev/termination-log exists).
    fs::write(&path, "x".repeat(5000)).unwrap();
    let output = sw(&marker)
        .args(&CODES)
        .args(&["-i", "700ms", "-g", "200ms"])
        .args(&["--termination-message", path.to_str().unwrap()])
        .sh("sleep 30")
        .output();
    assert_code(&output, 3);
    let line = read_message(&path);
    assert!(
        line.starts_with("quietus: idle_timeout, exit 3: ended after 700ms idle ("),
        "{line}"
    );
    assert!(
        line.contains("sleep"),
        "the diagnosis names the sleeper: {line}"
    );
    assert!(line.ends_with("; sent TERM"), "{line}");
    assert_no_leak(&marker);
}

#[test]
fn a_hard_timeout_exits_with_its_own_status() {
    let marker = Marker::new("cli_fleet_hard");
    let (_dir, path) = message_path();
    let output = sw(&marker)
        .args(&CODES)
        .args(&["-i", "60s", "-t", "500ms", "-g", "200ms"])
        .env("QUIETUS_TERMINATION_MESSAGE", &path)
        .sh("trap '' TERM; while :; do echo .; sleep 0.05; done")
        .output();
    assert_code(&output, 4);
    let line = read_message(&path);
    assert_eq!(
        line,
        "quietus: hard_timeout, exit 4: ended at the hard timeout of 500ms; sent TERM, then \
         KILL after 200ms"
    );
    assert_no_leak(&marker);
}

#[test]
fn an_input_wait_exits_with_its_own_status() {
    let marker = Marker::new("cli_fleet_input");
    let (_dir, path) = message_path();
    let running = sw(&marker)
        .args(&CODES)
        .args(&["-i", "60s", "--input-wait-timeout", "1s", "-g", "300ms"])
        .args(&["--termination-message", path.to_str().unwrap()])
        .sh("read x")
        .spawn_with(|cmd| {
            cmd.stdin(Stdio::piped());
        });
    let finished = running.wait();
    assert_eq!(
        finished.status.code(),
        Some(5),
        "{}",
        finished.stderr_text()
    );
    let line = read_message(&path);
    assert!(
        line.starts_with("quietus: input_wait, exit 5: ended after "),
        "{line}"
    );
    assert!(line.contains("reads stdin (a pipe)"), "{line}");
    assert_no_leak(&marker);
}

#[test]
fn a_clean_exit_keeps_its_status_whatever_the_codes_and_says_so() {
    let marker = Marker::new("cli_fleet_clean");
    let (_dir, path) = message_path();
    for (script, code, words) in [
        (
            "exit 0",
            0,
            "exited, exit 0: the program exited with status 0",
        ),
        (
            "exit 3",
            3,
            "exited, exit 3: the program exited with status 3",
        ),
        (
            "kill -KILL $$",
            137,
            "exited, exit 137: the program died of signal 9 (KILL)",
        ),
    ] {
        let output = sw(&marker)
            .args(&CODES)
            .args(&["-i", "60s", "--termination-message", path.to_str().unwrap()])
            .sh(script)
            .output();
        assert_code(&output, code);
        assert_eq!(read_message(&path), format!("quietus: {words}"), "{script}");
    }
    assert_no_leak(&marker);
}

#[test]
fn a_signal_to_quietus_is_in_the_message_before_it_dies_of_it() {
    let marker = Marker::new("cli_fleet_signal");
    let (_dir, path) = message_path();
    let running = sw(&marker)
        .args(&CODES)
        .args(&["-i", "60s", "--termination-message", path.to_str().unwrap()])
        .sh("echo ready; while :; do sleep 0.02; done")
        .spawn();
    running.stdout.wait_for("ready\n");
    running.signal(Sig::TERM);
    let finished = running.wait();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(finished.status.signal(), Some(15), "{finished:?}");
    let line = read_message(&path);
    assert!(
        line.starts_with("quietus: terminated, exit 143 (TERM): ended on request (received TERM)"),
        "{line}"
    );
    assert_no_leak(&marker);
}

#[test]
fn quietus_own_failures_are_in_the_message_too() {
    let marker = Marker::new("cli_fleet_failure");
    let (dir, path) = message_path();
    // A refused command line: the path is found all the same.
    let output = sw(&marker)
        .args(&[
            "--grace",
            "soon",
            "--termination-message",
            path.to_str().unwrap(),
        ])
        .sh("true")
        .output();
    assert_code(&output, 125);
    let line = read_message(&path);
    assert!(
        line.starts_with("quietus: not_started, exit 125: "),
        "{line}"
    );
    assert!(line.contains("--grace"), "{line}");
    // A report that cannot be written.
    let output = sw(&marker)
        .args(&["--termination-message", path.to_str().unwrap()])
        .args(&[
            "--report",
            dir.path().join("no/such/folder/r.json").to_str().unwrap(),
        ])
        .sh("true")
        .output();
    assert_code(&output, 125);
    let line = read_message(&path);
    assert!(
        line.starts_with(
            "quietus: not_started, exit 125: invalid value for --report: cannot write"
        ),
        "{line}"
    );
    // A program not found: its own status, 127.
    let output = sw(&marker)
        .args(&["--termination-message", path.to_str().unwrap()])
        .args(&["--", "/no/such/program"])
        .output();
    assert_code(&output, 127);
    let line = read_message(&path);
    assert!(
        line.starts_with("quietus: not_started, exit 127: "),
        "{line}"
    );
    assert_no_leak(&marker);
}

#[test]
fn reserved_and_invalid_exit_codes_are_refused() {
    let marker = Marker::new("cli_fleet_codes");
    for (flag, value) in [
        ("--exit-code-stall", "125"),
        ("--exit-code-hard-timeout", "126"),
        ("--exit-code-input-wait", "127"),
        ("--exit-code-stall", "0"),
        ("--exit-code-stall", "256"),
        ("--exit-code-stall", "x"),
    ] {
        let output = sw(&marker).args(&[flag, value]).sh("true").output();
        assert_code(&output, 125);
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains(flag), "{err}");
        assert!(err.contains("from 1 to 255 but 125, 126 and 127"), "{err}");
    }
    let output = sw(&marker)
        .env("QUIETUS_EXIT_CODE_STALL", "126")
        .sh("true")
        .output();
    assert_code(&output, 125);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("QUIETUS_EXIT_CODE_STALL"), "{err}");
    // The same file as the report: refused, the report's file left alone.
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    fs::write(&report, "kept").unwrap();
    let output = sw(&marker)
        .args(&["--report", report.to_str().unwrap()])
        .env("QUIETUS_TERMINATION_MESSAGE", &report)
        .sh("echo ran")
        .output();
    assert_code(&output, 125);
    assert!(output.stdout.is_empty(), "nothing ran");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("--termination-message (from QUIETUS_TERMINATION_MESSAGE)")
            && err.contains("is the same file as --report"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&report).unwrap(), "kept");
    // A termination message that cannot be written stops quietus before the program runs.
    let output = sw(&marker)
        .args(&["--termination-message", "/no/such/folder/log"])
        .sh("echo ran")
        .output();
    assert_code(&output, 125);
    assert!(output.stdout.is_empty(), "nothing ran");
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("cannot write the termination message"),
        "{err}"
    );
    assert_no_leak(&marker);
}

#[test]
fn the_job_in_docs_fleet_md_is_the_validated_manifest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = fs::read_to_string(root.join("docs/fleet.md")).expect("docs/fleet.md");
    let file = "deploy/kubernetes/indexed-job.yaml";
    let job = fs::read_to_string(root.join(file)).expect("the manifest");
    let open = format!("<!-- include {file} (a test checks it is the file) -->\n```yaml\n");
    let start = doc.find(&open).expect("docs/fleet.md includes the Job") + open.len();
    let end = start
        + doc[start..]
            .find("```\n<!-- /include -->")
            .expect("the include's end");
    assert_eq!(
        &doc[start..end],
        job,
        "docs/fleet.md's Job differs from {file}"
    );
    // The statuses it acts on are the ones the page and the manifest give quietus.
    for line in [
        "QUIETUS_EXIT_CODE_STALL\n              value: \"75\"",
        "QUIETUS_EXIT_CODE_HARD_TIMEOUT\n              value: \"76\"",
        "QUIETUS_TERMINATION_MESSAGE\n              value: \"/dev/termination-log\"",
    ] {
        assert!(job.contains(line), "{line}");
    }
}
