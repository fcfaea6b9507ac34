//! The `quietus` command: what the program writes passes through byte for byte, and the
//! exit status follows the contract (the program's own code, 124, 128+N, 125, 126, 127).

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::Output;
use std::time::{Duration, Instant};

use cli_support::{assert_code, own_lines, summary_line, sw, text};
use common::{Marker, assert_no_leak};

/// Deterministic pseudo-random bytes (xorshift), every byte value included.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out: Vec<u8> = (0..=255u8).collect();
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The program inherits quietus's environment as it is, in its order (what `execve` of
/// the same program from quietus's parent would give it), not a sorted copy; what
/// quietus adds (the session's tag, Linux) comes after.
#[test]
fn the_program_inherits_the_environment_in_order() {
    let marker = Marker::new("cli_pt_env_order");
    let marker_var = format!("{}={}", common::MARKER_ENV, marker.as_str());
    let output = std::process::Command::new("/usr/bin/env")
        .args(["-i", "ZZZ_LAST=1", &marker_var, "AAA_FIRST=2"])
        .args([env!("CARGO_BIN_EXE_quietus"), "-q", "-i", "30s", "--"])
        .arg("/usr/bin/env")
        .output()
        .expect("env runs quietus");
    assert_code(&output, 0);
    let out = text(&output.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..3],
        ["ZZZ_LAST=1", &marker_var, "AAA_FIRST=2"],
        "{out}"
    );
    assert!(
        lines[3..].iter().all(|l| l.starts_with("QUIETUS_SESSION=")),
        "{out}"
    );
    assert_no_leak(&marker);
}

#[test]
fn the_programs_own_exit_codes_pass_through() {
    let marker = Marker::new("cli_pt_codes");
    for code in [0, 1, 2, 42, 123, 255] {
        let output = sw(&marker)
            .args(&["-i", "10s"])
            .sh(&format!("exit {code}"))
            .output();
        assert_code(&output, code);
        assert!(output.stderr.is_empty(), "{:?}", text(&output.stderr));
    }
    assert_no_leak(&marker);
}

#[test]
fn large_binary_output_on_both_streams_passes_through_unchanged() {
    let marker = Marker::new("cli_pt_large");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = noise(8 * 1024 * 1024 + 17, 0x5eed);
    let err = noise(4 * 1024 * 1024 + 3, 0xfeed);
    fs::write(dir.path().join("out.bin"), &out).expect("write");
    fs::write(dir.path().join("err.bin"), &err).expect("write");
    // Both streams at once, interleaved by the scheduler.
    let output = sw(&marker)
        .args(&["-i", "10s"])
        .dir(dir.path())
        .sh("cat out.bin & cat err.bin >&2; wait")
        .output();
    assert_code(&output, 0);
    assert_eq!(output.stdout.len(), out.len());
    assert!(output.stdout == out, "stdout differs");
    assert_eq!(output.stderr.len(), err.len());
    assert!(output.stderr == err, "stderr differs");
    assert_no_leak(&marker);
}

#[test]
fn a_partial_line_arrives_while_the_program_still_runs() {
    let marker = Marker::new("cli_pt_partial");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let go = dir.path().join("go");
    let script = format!(
        "printf 'progress 50%%'; printf 'err-partial' >&2; \
         while [ ! -e '{}' ]; do sleep 0.01; done; printf ' done'",
        go.display()
    );
    let running = sw(&marker).args(&["-i", "20s"]).sh(&script).spawn();
    // No newline was written: it must still arrive, not wait in a buffer.
    running.stdout.wait_for("progress 50%");
    running.stderr.wait_for("err-partial");
    fs::write(&go, b"").expect("create the go file");
    let finished = running.wait();
    assert_eq!(finished.status.code(), Some(0), "{finished:?}");
    assert_eq!(finished.stdout, b"progress 50% done");
    assert_eq!(finished.stderr, b"err-partial");
    assert_no_leak(&marker);
}

#[test]
fn stdin_reaches_the_program_and_eof_too() {
    let marker = Marker::new("cli_pt_stdin");
    let mut cmd = assert_cmd::Command::cargo_bin("quietus").expect("built");
    let input = noise(300_000, 7);
    let output = cmd
        .args(["-i", "10s", "--"])
        .args(marker.sh_words("cat; echo eof-seen >&2"))
        .env(common::MARKER_ENV, marker.as_str())
        .env_remove("RUST_LOG")
        .timeout(common::GENEROUS)
        .write_stdin(input.clone())
        .output()
        .expect("runs");
    assert_code(&output, 0);
    assert!(output.stdout == input, "stdin came back changed");
    assert_eq!(text(&output.stderr), "eof-seen\n");
    assert_no_leak(&marker);
}

#[test]
fn idle_timeout_is_124_with_one_line() {
    let marker = Marker::new("cli_pt_124_idle");
    let started = Instant::now();
    let output = sw(&marker)
        .args(&["-i", "300ms"])
        .sh("printf 'a\\nb'; sleep 30")
        .output();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_code(&output, 124);
    assert_eq!(output.stdout, b"a\nb");
    // Nothing on stderr but the one line.
    assert_eq!(
        own_lines(&output.stderr).len(),
        1,
        "{:?}",
        text(&output.stderr)
    );
    assert_eq!(text(&output.stderr).lines().count(), 1);
    let line = summary_line(&output.stderr);
    assert!(
        line.starts_with("quietus: ended after 300ms idle ("),
        "{line}"
    );
    assert!(
        line.contains("output ") && line.contains("files "),
        "{line}"
    );
    assert!(
        line.contains("children ") && line.contains(" idle): "),
        "{line}"
    );
    assert!(line.ends_with("; sent TERM"), "{line}");
    assert_no_leak(&marker);
}

#[test]
fn hard_timeout_is_124_with_one_line() {
    let marker = Marker::new("cli_pt_124_hard");
    let started = Instant::now();
    let output = sw(&marker)
        .args(&["-i", "60s", "-t", "400ms"])
        .sh("while :; do echo busy; sleep 0.02; done")
        .output();
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_code(&output, 124);
    let line = summary_line(&output.stderr);
    assert_eq!(
        line,
        "quietus: ended at the hard timeout of 400ms; sent TERM"
    );
    assert_no_leak(&marker);
}

#[test]
fn a_stubborn_program_gets_kill_after_the_grace_and_the_line_says_so() {
    let marker = Marker::new("cli_pt_kill_after");
    let started = Instant::now();
    let output = sw(&marker)
        .args(&["-i", "250ms", "-g", "350ms"])
        .sh("trap '' TERM; echo ready; while :; do sleep 0.05; done")
        .output();
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert_code(&output, 124);
    let line = summary_line(&output.stderr);
    assert!(
        line.ends_with("; sent TERM, then KILL after 350ms"),
        "{line}"
    );
    assert_no_leak(&marker);
}

#[test]
fn death_by_a_signal_nobody_at_quietus_sent_is_128_plus_n() {
    let marker = Marker::new("cli_pt_128n");
    for (signal, code) in [("HUP", 129), ("INT", 130), ("USR1", 138), ("ALRM", 142)] {
        let output = sw(&marker)
            .args(&["-i", "10s"])
            .sh(&format!("kill -{signal} $$; sleep 5"))
            .output();
        assert_code(&output, code);
        // quietus did not end it: no summary line.
        assert!(own_lines(&output.stderr).is_empty(), "{signal}");
        // quietus exits with the code; it does not die of the signal itself.
        assert_eq!(output.status.signal(), None);
    }
    assert_no_leak(&marker);
}

#[test]
fn not_found_is_127_and_not_executable_is_126() {
    let marker = Marker::new("cli_pt_126_127");
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Not found: a bare name not on PATH, and a path that does not exist.
    let missing_path = dir.path().join("no-such-program");
    let missing_path = missing_path.to_string_lossy().into_owned();
    let bare = format!("{}-not-on-path", marker.as_str());
    for program in [bare.as_str(), missing_path.as_str()] {
        let output = sw(&marker).args(&["--", program, "x"]).output();
        assert_code(&output, 127);
        let stderr = text(&output.stderr);
        assert!(stderr.starts_with("quietus: "), "{stderr}");
        assert!(stderr.contains(program), "{stderr}");
    }
    // Cannot be executed: a file without the execute bit, and a directory.
    let script = dir.path().join("script.sh");
    fs::write(&script, "#!/bin/sh\necho ran\n").expect("write");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).expect("chmod");
    let script = script.to_string_lossy().into_owned();
    let folder = dir.path().to_string_lossy().into_owned();
    for program in [script.as_str(), folder.as_str()] {
        let output = sw(&marker).args(&["--", program]).output();
        assert_code(&output, 126);
        let stderr = text(&output.stderr);
        assert!(stderr.contains(program), "{stderr}");
        assert!(output.stdout.is_empty());
    }
    assert_no_leak(&marker);
}

#[test]
fn the_program_sees_its_arguments_unchanged() {
    let marker = Marker::new("cli_pt_argv");
    // Words that look like quietus options after `--` belong to the program.
    let output = sw(&marker)
        .args(&["-i", "10s"])
        .sh("printf '[%s]' \"$@\"")
        .args(&["-i", "--report", "x y", "", "--"])
        .output();
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "[-i][--report][x y][][--]");
    assert_no_leak(&marker);
}

/// quietus with its stdout on `/dev/full` (every write fails with ENOSPC), a report in
/// `report`: its exit status and stderr.
fn to_a_full_device(marker: &Marker, report: &std::path::Path, script: &str) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_quietus"));
    cmd.args(["-q", "--report", report.to_str().expect("utf-8"), "--"])
        .args(marker.sh_words(script))
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create("/dev/full").expect("/dev/full opens"))
        .stderr(std::process::Stdio::piped());
    cli_support::isolate(&mut cmd, marker);
    let child = cmd.spawn().expect("quietus starts");
    child.wait_with_output().expect("quietus ends")
}

/// Issue 11 item 5. A write error on the pass-through (not a broken pipe) is not hidden: a
/// program that succeeded makes quietus exit 1 (as GNU coreutils do on a write error), any
/// other status is kept; the report shows the bytes read vs delivered and the error.
#[test]
fn a_failed_write_to_stdout_is_exit_1_and_in_the_report() {
    let marker = Marker::new("cli_pt_full");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let report = dir.path().join("report.json");
    let output = to_a_full_device(&marker, &report, "head -c 3000000 /dev/zero");
    assert_code(&output, 1);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let r: serde_json::Value =
        serde_json::from_slice(&fs::read(&report).expect("a report")).expect("JSON");
    assert_eq!(r["exit_code"], 1);
    assert_eq!(r["outcome"], "exited");
    assert_eq!(r["bytes"]["stdout"], 3_000_000);
    assert_eq!(r["delivered"]["stdout"], 0);
    let error = r["pass_through_errors"]["stdout"]
        .as_str()
        .expect("the error");
    assert!(error.contains("No space left on device"), "{error}");
    assert_eq!(r["pass_through_errors"]["stderr"], serde_json::Value::Null);

    // The program's own failure is not masked.
    let output = to_a_full_device(&marker, &report, "head -c 100000 /dev/zero; exit 3");
    assert_code(&output, 3);
    assert_no_leak(&marker);
}

/// Backpressure from quietus's own reader is not a stall: the consumer of quietus's
/// stdout stops reading (its pipe full, quietus's write blocks, quietus reads no more of
/// the program's output) for 3 idle timeouts while the program keeps printing (into its own
/// 1 MiB pipe: the bytes waiting there count once, at the first deadline, not at the second);
/// the program runs to its end, and the report says how long the output was held back.
#[test]
fn a_consumer_that_stops_reading_does_not_make_the_program_idle() {
    use std::io::Read;
    let m = Marker::new("cli_pt_backpressure");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    // 200 KiB at once (more than the pipe to this test holds), then 1 KiB every 0.1 s for 7 s.
    let script = "head -c 204800 /dev/zero | tr '\\0' x
        for i in $(seq 1 70); do printf '%01023d\\n' \"$i\"; sleep 0.1; done
        echo end-of-output";
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_quietus"));
    cli_support::isolate(&mut cmd, &m);
    let mut child = cmd
        .args(["-i", "2s", "--report", report.to_str().unwrap(), "--"])
        .args(["bash", "-c", script, m.as_str()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // The consumer does not read for 6 s (the scenario itself, not a wait for a condition).
    std::thread::sleep(Duration::from_secs(6));
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(started.elapsed() >= Duration::from_secs(7));
    assert_eq!(out.len(), 204_800 + 70 * 1024 + "end-of-output\n".len());
    assert!(out.ends_with(b"end-of-output\n"));
    let r: serde_json::Value = serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["outcome"], "exited", "{r:#}");
    let held = r["output_held_back_ms"].as_u64().unwrap();
    assert!(held >= 2000, "{r:#}");
    assert_no_leak(&m);
}
