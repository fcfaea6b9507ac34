//! The entrypoint as a pod sees the machine (issue 52): quietus as process 1 of its own pid
//! namespace, in its own mount namespace where `/sys/fs/cgroup` is read-only (an unprivileged
//! pod's), run by `unshare`. The exit statuses chosen per outcome and the termination message
//! for a stall, a hard timeout and a clean exit; the group fallback in the report.
//!
//! It needs the right to make namespaces (root, as here and in CI): when `unshare` is refused
//! the test fails saying why, it does not skip.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::path::Path;
use std::process::Output;

use common::{GENEROUS, Marker, assert_no_leak};
use serde_json::Value;

/// What the pod's entrypoint script does before it becomes quietus: remounts every mount at
/// or under `/sys/fs/cgroup` read-only (in this mount namespace only: propagation is
/// private), checks that none can be written, checks that it is process 1, then execs quietus.
const POD_INIT: &str = "mounts=$(awk '$5 ~ \"^/sys/fs/cgroup(/|$)\" {print $5}' /proc/self/mountinfo); \
    [ -n \"$mounts\" ] || { echo 'pod: no mount at /sys/fs/cgroup' >&2; exit 90; }; \
    for m in $mounts; do mount -o remount,ro,bind \"$m\" \
    || { echo \"pod: cannot make $m read-only\" >&2; exit 90; }; \
    if touch \"$m/quietus-pod-test\" 2>/dev/null; then \
    echo \"pod: $m is still writable\" >&2; exit 91; fi; done; \
    [ $$ -eq 1 ] || { echo \"pod: not process 1 but $$\" >&2; exit 92; }; \
    exec \"$@\"";

/// Runs `quietus ARGS -- sh -c SCRIPT MARKER` as a pod's entrypoint: `unshare --pid --fork
/// --mount --mount-proc` (private propagation: nothing leaks to the host's mounts).
fn in_pod(marker: &Marker, args: &[String], script: &str) -> Output {
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "--pid",
        "--fork",
        "--mount",
        "--mount-proc",
        "--propagation",
        "private",
        "sh",
        "-c",
        POD_INIT,
        "pod-init",
        env!("CARGO_BIN_EXE_quietus"),
    ]);
    cmd.args(args).arg("--").args(marker.sh_words(script));
    cli_support::isolate(&mut cmd, marker);
    let mut cmd = assert_cmd::Command::from_std(cmd);
    cmd.timeout(GENEROUS);
    let output = cmd.output().expect("unshare runs (util-linux)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("unshare failed") && !stderr.starts_with("unshare:"),
        "unshare was refused: this test needs the right to make pid and mount namespaces \
         (root or CAP_SYS_ADMIN, as in CI): {stderr}"
    );
    assert!(
        !matches!(output.status.code(), Some(90..=92)),
        "the pod's init failed: {stderr}"
    );
    output
}

fn read(path: &Path) -> String {
    let text = fs::read_to_string(path).expect("the termination message was written");
    assert!(text.len() <= 4096 && text.ends_with('\n'), "{text:?}");
    text.trim_end().to_owned()
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).expect("the report")).expect("JSON")
}

#[test]
fn as_a_pods_entrypoint_a_stall_a_hard_timeout_and_a_clean_exit_say_their_own() {
    let marker = Marker::new("cli_pod");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let message = dir.path().join("termination-log");
    let report_path = dir.path().join("report.json");
    let (message_arg, report_arg) = (message.to_str().unwrap(), report_path.to_str().unwrap());
    let common_args = [
        "--exit-code-stall",
        "75",
        "--exit-code-hard-timeout",
        "76",
        "--termination-message",
        message_arg,
        "--report",
        report_arg,
        "-g",
        "300ms",
    ];
    let with = |more: &[&'static str]| -> Vec<String> {
        common_args
            .iter()
            .chain(more)
            .map(|s| (*s).to_owned())
            .collect()
    };

    // A stall: the program sleeps, quiet.
    let output = in_pod(&marker, &with(&["-i", "1s"]), "echo ppid=$PPID; sleep 30");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(75), "{stderr}");
    assert_eq!(output.stdout, b"ppid=1\n", "quietus was process 1");
    let line = read(&message);
    assert!(
        line.starts_with("quietus: idle_timeout, exit 75: ended after 1s idle ("),
        "{line}"
    );
    assert!(line.contains("sleep (pid "), "the diagnosis: {line}");
    assert!(line.ends_with("; sent TERM"), "{line}");
    // The group fallback: no cgroup could be made on a read-only /sys/fs/cgroup.
    let r = report(&report_path);
    assert_eq!(r["containment"]["backend"], "group", "{r}");
    let why = r["containment"]["why_not_cgroup"]
        .as_str()
        .expect("why not a cgroup");
    let cgroup2 = fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .any(|l| l.contains(" /sys/fs/cgroup") && l.contains(" - cgroup2 "));
    if cgroup2 {
        // Where the host has cgroup v2, it was there, read-only: the fallback says so.
        assert!(why.contains("Read-only file system"), "{why}");
    }
    assert_eq!(r["exit_code"], 75);

    // A hard timeout: busy all along, ended at 1s.
    let output = in_pod(
        &marker,
        &with(&["-i", "60s", "-t", "1s"]),
        "trap '' TERM; while :; do echo .; sleep 0.05; done",
    );
    assert_eq!(
        output.status.code(),
        Some(76),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        read(&message),
        "quietus: hard_timeout, exit 76: ended at the hard timeout of 1s; sent TERM, then KILL \
         after 300ms"
    );
    assert_eq!(report(&report_path)["outcome"], "hard_timeout");

    // A clean exit: the program's own status, and a line that says so.
    let output = in_pod(&marker, &with(&["-i", "60s"]), "echo ppid=$PPID; exit 0");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.stdout, b"ppid=1\n");
    assert_eq!(
        read(&message),
        "quietus: exited, exit 0: the program exited with status 0"
    );
    assert_no_leak(&marker);
}
