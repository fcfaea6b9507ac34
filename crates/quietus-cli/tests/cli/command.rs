//! The `quietus` command-line tool, run as a real process.

use crate::support as common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::{CLOSE_INHERITED_FDS, GENEROUS, MARKER_ENV, Marker, assert_no_leak};

/// `quietus ARGS...` with the marker in its environment (inherited by the whole tree), no
/// `RUST_LOG` from outside, and a generous safety timeout.
fn quietus(marker: &Marker, args: &[&str]) -> Output {
    let mut cmd = assert_cmd::Command::cargo_bin("quietus").expect("the binary is built");
    cmd.args(args)
        .env(MARKER_ENV, marker.as_str())
        .env_remove("RUST_LOG")
        .timeout(GENEROUS);
    cmd.output().expect("quietus runs")
}

/// `quietus OPTIONS -- sh -c SCRIPT MARKER`.
fn quietus_sh(marker: &Marker, options: &[&str], script: &str) -> Output {
    let words = marker.sh_words(script);
    let mut args: Vec<&str> = options.to_vec();
    args.push("--");
    args.extend(words.iter().map(String::as_str));
    quietus(marker, &args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_code(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "status {:?}\nstdout: {:?}\nstderr: {:?}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

#[test]
fn idle_child_is_ended_with_124_and_a_summary() {
    let marker = Marker::new("cli_idle");
    let started = Instant::now();
    let output = quietus_sh(&marker, &["-i", "500ms"], "echo hi; sleep 1000");
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_code(&output, 124);
    assert_eq!(text(&output.stdout), "hi\n");
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("quietus: ended after")),
        "{stderr:?}"
    );
    assert!(stderr.contains("sent TERM"), "{stderr:?}");
    assert_no_leak(&marker);
}

#[test]
fn long_options_work_too() {
    let marker = Marker::new("cli_long_options");
    let output = quietus_sh(
        &marker,
        &["--idle-timeout", "400ms", "--grace", "300ms"],
        "sleep 1000",
    );
    assert_code(&output, 124);
    assert_no_leak(&marker);
}

#[test]
fn stubborn_child_is_killed_after_the_grace() {
    let marker = Marker::new("cli_grace");
    let started = Instant::now();
    let output = quietus_sh(
        &marker,
        &["-i", "300ms", "-g", "300ms"],
        "trap '' TERM; echo ready; sleep 1000",
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert_code(&output, 124);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("sent TERM, then KILL"), "{stderr:?}");
    assert_no_leak(&marker);
}

#[test]
fn hard_timeout_ends_a_chatty_child_with_124() {
    let marker = Marker::new("cli_hard");
    let started = Instant::now();
    let output = quietus_sh(
        &marker,
        &["-i", "60s", "-t", "500ms", "-g", "500ms"],
        "while :; do echo chat; sleep 0.05; done",
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_code(&output, 124);
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("quietus: ended at the hard timeout")),
        "{stderr:?}"
    );
    assert!(text(&output.stdout).starts_with("chat\n"));
    assert_no_leak(&marker);
}

#[test]
fn exit_code_passes_through_silently() {
    let marker = Marker::new("cli_exit3");
    let output = quietus_sh(&marker, &["-i", "10s"], "exit 3");
    assert_code(&output, 3);
    assert_eq!(text(&output.stdout), "");
    assert_eq!(text(&output.stderr), "", "no summary for a normal exit");
    assert_no_leak(&marker);
}

#[test]
fn exit_zero_passes_through() {
    let marker = Marker::new("cli_exit0");
    let output = quietus_sh(&marker, &["-i", "10s"], "echo fine");
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "fine\n");
    assert_no_leak(&marker);
}

#[test]
fn death_by_signal_is_128_plus_n() {
    let marker = Marker::new("cli_signal");
    let output = quietus_sh(&marker, &["-i", "10s"], "kill -KILL $$");
    assert_code(&output, 137);
    let output = quietus_sh(&marker, &["-i", "10s"], "kill -TERM $$");
    assert_code(&output, 143);
    assert_no_leak(&marker);
}

#[test]
fn background_leftover_does_not_keep_the_cli_waiting() {
    let marker = Marker::new("cli_leftover");
    let started = Instant::now();
    let output = quietus_sh(&marker, &["-i", "60s", "-g", "1s"], "sleep 1000 & echo hi");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "hi\n");
    assert_no_leak(&marker);
}

#[test]
fn missing_program_is_127_and_named() {
    let marker = Marker::new("cli_missing");
    let program = format!("{}-no-such-program", marker.as_str());
    let output = quietus(&marker, &["--", &program, "arg"]);
    assert_code(&output, 127);
    let stderr = text(&output.stderr);
    assert!(stderr.contains(&program), "{stderr:?}");
    assert!(stderr.starts_with("quietus: "), "{stderr:?}");
    assert_no_leak(&marker);
}

#[test]
fn non_executable_program_is_126_and_named() {
    let marker = Marker::new("cli_not_executable");
    let mut file = tempfile::Builder::new()
        .prefix("quietus-cli-not-executable-")
        .tempfile()
        .expect("a temporary file");
    file.write_all(b"#!/bin/sh\necho should-not-run\n")
        .expect("write the script");
    file.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .expect("chmod 0644");
    let path = file.into_temp_path();
    let path_text = path.to_string_lossy().into_owned();
    let output = quietus(&marker, &["--", &path_text]);
    assert_code(&output, 126);
    let stderr = text(&output.stderr);
    assert!(stderr.contains(&path_text), "{stderr:?}");
    assert_eq!(text(&output.stdout), "");
    assert_no_leak(&marker);
}

/// `sh -c 'PREPARE; exec quietus ARGS -- sh -c SCRIPT MARKER'`: quietus started by a
/// shell that first sets up what the test needs (a limit, a working directory).
fn quietus_after(marker: &Marker, prepare: &str, options: &[&str], script: &str) -> Output {
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &format!("{prepare}; exec \"$@\""), "sh"])
        .arg(env!("CARGO_BIN_EXE_quietus"))
        .args(options)
        .arg("--")
        .args(marker.sh_words(script));
    common::cli::isolate(&mut cmd, marker);
    let mut cmd = assert_cmd::Command::from_std(cmd);
    cmd.timeout(GENEROUS);
    cmd.output().expect("sh runs")
}

/// quietus's own working directory is gone (the watched folders are relative to it): its
/// own failure (125), not a missing program (127, as before issue 12's spawn error kinds).
#[test]
fn a_removed_working_directory_is_125_not_a_missing_program() {
    let marker = Marker::new("cli_removed_cwd");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let gone = dir.path().join("gone");
    fs::create_dir(&gone).expect("a folder to remove");
    let witness = dir.path().join("ran");
    let prepare = format!("cd '{0}' && rmdir '{0}'", gone.display());
    let output = quietus_after(
        &marker,
        &prepare,
        &[],
        &format!(": > '{}'", witness.display()),
    );
    assert_code(&output, 125);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("working directory"), "{stderr:?}");
    assert!(!witness.exists(), "the program must not have run");
    assert_no_leak(&marker);
}

/// A pseudo-terminal that cannot be opened (no descriptor left) is quietus's own failure
/// (125), not a program that cannot be executed (126, as before issue 12's spawn error kinds).
#[cfg(target_os = "linux")]
#[test]
fn a_terminal_that_cannot_be_opened_is_125_not_the_programs_fault() {
    let marker = Marker::new("cli_no_pty");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let witness = dir.path().join("ran");
    // Descriptors 0 to 5 at most: enough to load quietus and catch signals, not for a
    // terminal (any limit from 5 to 11 fails there, on opening or on preparing it).
    let prepare = "exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n 6";
    let output = quietus_after(
        &marker,
        prepare,
        &["--pty"],
        &format!(": > '{}'", witness.display()),
    );
    assert_code(&output, 125);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("pseudo-terminal"), "{stderr:?}");
    assert!(!witness.exists(), "the program must not have run");
    assert_no_leak(&marker);
}

#[test]
fn zero_idle_timeout_is_125_naming_the_option() {
    let marker = Marker::new("cli_zero_idle");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let witness = dir.path().join("ran");
    let script = format!(": > '{}'", witness.display());
    let output = quietus_sh(&marker, &["-i", "0s"], &script);
    assert_code(&output, 125);
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("idle-timeout") || stderr.contains("idle_timeout"),
        "{stderr:?}"
    );
    assert!(!witness.exists(), "nothing was run");
    assert_no_leak(&marker);
}

#[test]
fn out_of_range_values_name_the_command_line_option() {
    let marker = Marker::new("cli_range_option_name");
    for (option, value, name) in [
        ("-i", "0s", "--idle-timeout"),
        ("-t", "0s", "--hard-timeout"),
        ("-g", "2h", "--grace"),
    ] {
        let output = quietus_sh(&marker, &[option, value], "exit 0");
        assert_code(&output, 125);
        let stderr = text(&output.stderr);
        assert!(stderr.contains(name), "{option} {value}: {stderr:?}");
    }
    assert_no_leak(&marker);
}

#[test]
fn unparsable_durations_are_125_naming_the_option() {
    let marker = Marker::new("cli_banana");
    for (option, value, name) in [
        ("-i", "banana", "--idle-timeout"),
        ("-t", "banana", "--hard-timeout"),
        ("-g", "5parsecs", "--grace"),
        ("-i", "", "--idle-timeout"),
    ] {
        let output = quietus_sh(&marker, &[option, value], "exit 0");
        assert_code(&output, 125);
        let stderr = text(&output.stderr);
        assert!(stderr.contains(name), "{option} {value:?}: {stderr:?}");
        assert!(
            value.is_empty() || stderr.contains(value),
            "{option} {value:?}: {stderr:?}"
        );
    }
    assert_no_leak(&marker);
}

#[test]
fn missing_program_argument_is_125() {
    let marker = Marker::new("cli_no_program");
    let output = quietus(&marker, &["-i", "1s"]);
    assert_code(&output, 125);
    assert!(!output.stderr.is_empty());
    let output = quietus(&marker, &["--no-such-option", "--", "true"]);
    assert_code(&output, 125);
    assert!(text(&output.stderr).contains("--no-such-option"));
    assert_no_leak(&marker);
}

#[test]
fn version_and_help_exit_zero() {
    let marker = Marker::new("cli_version_help");
    let output = quietus(&marker, &["--version"]);
    assert_code(&output, 0);
    assert!(
        text(&output.stdout).contains(env!("CARGO_PKG_VERSION")),
        "{:?}",
        text(&output.stdout)
    );
    let output = quietus(&marker, &["--help"]);
    assert_code(&output, 0);
    let help = text(&output.stdout);
    for word in ["--idle-timeout", "--hard-timeout", "--grace", "124"] {
        assert!(help.contains(word), "{word} missing from {help}");
    }
    assert_no_leak(&marker);
}

#[test]
fn binary_stdout_passes_through_byte_for_byte() {
    let marker = Marker::new("cli_binary");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let copy = dir.path().join("sent");
    let script = format!("head -c 1000000 /dev/urandom | tee '{}'", copy.display());
    let output = quietus_sh(&marker, &["-i", "10s"], &script);
    assert_code(&output, 0);
    let sent = fs::read(&copy).expect("tee wrote its copy");
    assert_eq!(sent.len(), 1_000_000);
    assert_eq!(output.stdout.len(), sent.len());
    assert!(output.stdout == sent, "stdout differs from what was sent");
    assert_no_leak(&marker);
}

#[test]
fn odd_bytes_without_trailing_newline_pass_through() {
    let marker = Marker::new("cli_odd_bytes");
    let output = quietus_sh(
        &marker,
        &["-i", "10s"],
        r"printf 'a\000b\001\377\r\nno-newline'; printf 'err\377tail' >&2",
    );
    assert_code(&output, 0);
    assert_eq!(output.stdout, b"a\0b\x01\xff\r\nno-newline");
    assert_eq!(output.stderr, b"err\xfftail");
    assert_no_leak(&marker);
}

#[test]
fn stdin_is_passed_to_the_child() {
    let marker = Marker::new("cli_stdin");
    let mut cmd = assert_cmd::Command::cargo_bin("quietus").expect("the binary is built");
    let words = marker.sh_words("cat");
    let output = cmd
        .args(["-i", "10s", "--"])
        .args(&words)
        .env(MARKER_ENV, marker.as_str())
        .env_remove("RUST_LOG")
        .timeout(GENEROUS)
        .write_stdin("fed through stdin\n")
        .output()
        .expect("quietus runs");
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "fed through stdin\n");
    assert_no_leak(&marker);
}

/// `quietus OPTIONS -- sh -c SCRIPT MARKER` started in the background (stdout piped), for
/// tests that must act while it runs.
fn spawn_quietus(marker: &Marker, options: &[&str], script: &str) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_quietus"))
        .args(options)
        .arg("--")
        .args(marker.sh_words(script))
        .env(MARKER_ENV, marker.as_str())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("quietus starts")
}

/// Waits (bounded) for our own quietus process to exit; if it does not, kills it (it is a
/// process this test started) so the test can report instead of hanging.
fn wait_or_kill(quietus: &mut std::process::Child, bound: Duration) -> Option<ExitStatus> {
    let mut status = None;
    common::poll_until(bound, || {
        status = quietus.try_wait().expect("try_wait works");
        status.is_some()
    });
    if status.is_none() {
        let _ = quietus.kill();
        let _ = quietus.wait();
    }
    status
}

#[test]
fn broken_stdout_pipe_ends_the_run() {
    let marker = Marker::new("cli_broken_pipe");
    let mut quietus = spawn_quietus(&marker, &["-i", "5s", "-g", "500ms"], "yes");
    let mut stdout = quietus.stdout.take().expect("stdout is piped");
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).expect("yes prints");
    assert_eq!(&first, b"y\ny\ny\ny\ny\n");
    drop(stdout); // like `head -c 10` exiting
    let status = wait_or_kill(&mut quietus, Duration::from_secs(15));
    assert!(
        status.is_some(),
        "quietus kept running after its stdout was closed"
    );
    assert_no_leak(&marker);
}

#[test]
fn signalling_quietus_takes_its_tree_down() {
    for signal in ["-TERM", "-INT", "-HUP"] {
        let marker = Marker::new("cli_signalled");
        let mut quietus = spawn_quietus(
            &marker,
            &["-i", "60s", "-g", "500ms"],
            "sleep 1000 & echo ready; sleep 1000",
        );
        let stdout = quietus.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reads the handshake");
        assert_eq!(line, "ready\n");
        let kill = std::process::Command::new("kill")
            .arg(signal)
            .arg(quietus.id().to_string()) // our own quietus process
            .status()
            .expect("kill(1) runs");
        assert!(kill.success());
        let status = wait_or_kill(&mut quietus, Duration::from_secs(15));
        assert!(status.is_some(), "quietus ignored {signal}");
        assert_no_leak(&marker);
    }
}

/// Out of descriptors (a limit of `n`, soft and hard, so that raising it is no way out), in
/// pipe and terminal mode: whatever step runs short (the terminal, the pipes, the system's
/// spawn), it is quietus's own failure, 125, said on stderr; never 126 ("cannot be
/// executed"), which names the program. The limit counts descriptors by number, so bash first
/// closes every descriptor above 2 it inherited (an IDE's, a CI runner's, `time -o FILE`'s fd 3):
/// the lowest limits mean the same under any parent.
#[test]
fn running_out_of_descriptors_is_quietuss_own_failure_in_every_mode() {
    let marker = Marker::new("cli-out-of-fds");
    // EMFILE in the words of the C library both are built with: glibc's "Too many open files",
    // musl's "No file descriptors available".
    let emfile = std::io::Error::from_raw_os_error(libc::EMFILE).to_string();
    let emfile = emfile.split(" (os error").next().expect("a message");
    let mut short = 0;
    for mode in ["", "--pty"] {
        for n in 4..40 {
            let script = format!(
                "{CLOSE_INHERITED_FDS}ulimit -n {n} && exec \"$0\" {mode} -i 5s -- sh -c 'exit 0' {}",
                marker.as_str()
            );
            let output = std::process::Command::new("bash")
                .args(["-c", &script, env!("CARGO_BIN_EXE_quietus")])
                .env(MARKER_ENV, marker.as_str())
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .output()
                .expect("bash runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            match output.status.code() {
                Some(0) => {}
                Some(125) => {
                    assert!(stderr.contains(emfile), "{n} {mode}: {stderr}");
                    short += 1;
                }
                other => panic!("limit {n} {mode:?}: exit {other:?}: {stderr}"),
            }
        }
    }
    assert!(short > 0, "some limit was too low to run");
    assert_no_leak(&marker);
}
