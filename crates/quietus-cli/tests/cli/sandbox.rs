//! quietus where `/proc` cannot be trusted: a sandbox that mounts none, and a new pid
//! namespace that kept the host's. Each runs under `unshare` in namespaces of its own (a user
//! namespace, so no privilege is needed and nothing of the host changes); where this machine
//! does not allow them the test says SKIPPED.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::process::{Command, Stdio};

use common::{GENEROUS, Marker, assert_no_leak, poll_until};
use serde_json::Value;

/// `unshare` with a user namespace and `extra`, if this machine allows it (probed with `true`).
fn unshare(extra: &[&str]) -> Option<Command> {
    let mut args = vec!["--user", "--map-root-user"];
    args.extend_from_slice(extra);
    match common::program("unshare").args(&args).arg("true").output() {
        Ok(output) if output.status.success() => {
            let mut command = common::program("unshare");
            command.args(&args);
            Some(command)
        }
        other => {
            eprintln!("SKIPPED: unshare {args:?} is not allowed here ({other:?})");
            None
        }
    }
}

/// Runs `command` (quietus inside `unshare`) to its end; its report, and its stderr.
fn run(mut command: Command, marker: &Marker, report: &std::path::Path) -> (i32, Value, String) {
    cli_support::isolate(&mut command, marker);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("unshare starts");
    let mut status = None;
    poll_until(GENEROUS, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let output = child.wait_with_output().expect("its stderr");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let code = output.status.code().unwrap_or(-1);
    let report = fs::read_to_string(report).unwrap_or_default();
    let report = serde_json::from_str(&report)
        .unwrap_or_else(|e| panic!("no report ({e}); status {code}, stderr: {stderr}"));
    (code, report, stderr)
}

/// Whether the report lists `source` as unable to observe.
fn unavailable(report: &Value, source: &str) -> bool {
    report["unavailable"].as_array().is_some_and(|all| {
        all.iter()
            .any(|u| u["source"] == source && u["path"].is_null())
    })
}

/// No `/proc` at all (a tmpfs over it, in a mount namespace of the test's own): the children
/// and network sources say they cannot observe (a warning, and the report's `unavailable`),
/// and a stalled tree whose `setsid` escapee nothing can see is ended, but never reported as
/// confirmed gone: `termination_unproven`.
#[test]
fn without_proc_the_sources_say_they_are_blind_and_the_end_is_unproven() {
    let Some(mut command) = unshare(&["--mount", "--propagation", "private"]) else {
        return;
    };
    let marker = Marker::new("cli_sandbox_noproc");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let script = format!(
        "setsid sleep 30 </dev/null >/dev/null 2>&1 & sleep 30; : {}",
        marker.as_str()
    );
    command
        .args(["sh", "-c", "mount -t tmpfs none /proc && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_quietus"))
        .args(["-i", "2s", "-g", "1s", "--report"])
        .arg(&report)
        .args(["--", "bash", "-c", &script]);
    let (code, report, stderr) = run(command, &marker, &report);
    assert_eq!(report["outcome"], "idle_timeout", "{report:#}\n{stderr}");
    assert!(unavailable(&report, "children"), "{report:#}");
    assert!(unavailable(&report, "network"), "{report:#}");
    // The report says why, as stderr does (issue 51, point 13: its reason was null).
    let reason = |source: &str| {
        report["unavailable"]
            .as_array()
            .and_then(|all| all.iter().find(|u| u["source"] == source))
            .map(|u| u["reason"].clone())
    };
    assert_eq!(
        reason("children"),
        Some(Value::from("/proc is not mounted")),
        "{report:#}"
    );
    assert!(
        reason("network").is_some_and(|r| r.as_str().is_some_and(|r| !r.is_empty())),
        "{report:#}"
    );
    assert!(
        stderr.contains("children source unavailable: /proc is not mounted"),
        "{stderr}"
    );
    assert!(stderr.contains("network source unavailable"), "{stderr}");
    assert_eq!(report["termination_unproven"], true, "{report:#}");
    assert_eq!(
        code, 125,
        "an unproven end is quietus's own failure: {stderr}"
    );
    // The escapee is ours (it carries the marker): end it, then nothing is left.
    for p in marker.pids() {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(p.pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    poll_until(GENEROUS, || marker.pids().is_empty());
    assert_no_leak(&marker);
}

/// A new pid namespace that kept the host's `/proc` (`unshare --pid --fork` without
/// `--mount-proc`): the pids quietus knows are not the ones `/proc` shows. Nothing is judged
/// from a host process under the same number: the stalled bash dies of the polite signal and
/// the ladder sees it gone (no KILL after the whole grace), and the children source either
/// sees the tree through a cgroup or says it cannot (then the end is unproven).
#[test]
fn a_pid_namespace_with_the_hosts_proc_judges_nothing_from_host_processes() {
    let marker = Marker::new("cli_sandbox_pidns");
    for containment in ["auto", "group"] {
        let Some(mut command) = unshare(&["--pid", "--fork"]) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        let script = format!("sleep 30; : {}", marker.as_str());
        command
            .arg(env!("CARGO_BIN_EXE_quietus"))
            .args([
                "--containment",
                containment,
                "-i",
                "2s",
                "-g",
                "20s",
                "--report",
            ])
            .arg(&report)
            .args(["--", "bash", "-c", &script]);
        let (code, report, stderr) = run(command, &marker, &report);
        assert_eq!(report["outcome"], "idle_timeout", "{report:#}\n{stderr}");
        assert_eq!(
            report["ladder"]["signals_sent"],
            serde_json::json!(["TERM"]),
            "{containment}: the ladder waited for a host process: {report:#}"
        );
        // In a process group of its own, nothing shows the tree: said, and the end unproven.
        let blind = unavailable(&report, "children");
        assert_eq!(
            blind,
            containment == "group" || report["containment"]["backend"] == "group"
        );
        if blind {
            assert!(
                stderr.contains("another pid namespace"),
                "the warning says why: {stderr}"
            );
        }
        assert_eq!(report["termination_unproven"], blind, "{report:#}");
        assert_eq!(code, if blind { 125 } else { 124 }, "{stderr}");
    }
    assert_no_leak(&marker);
}

/// A watched folder holding a mount of another filesystem (a tmpfs, in a mount namespace of
/// the test's own): the watches stay on the root's filesystem. Writes inside the mount never
/// count (the program goes stale); writes beside it count, and so do writes in a folder made
/// after the arming beside the mount (watched then by the tracker's thread, as the folders
/// above the mount are watched alone).
#[test]
fn a_mount_inside_a_watched_folder_is_never_watched() {
    let marker = Marker::new("cli_sandbox_mount");
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join(".agent");
    fs::create_dir_all(agent.join("mnt")).unwrap();
    let writes = |file: &str| {
        format!(
            "i=0; while [ $i -lt 50 ]; do echo $i > {file}; i=$((i+1)); sleep 0.05; done; : {}",
            marker.as_str()
        )
    };
    let cases = [
        (writes(".agent/mnt/f"), 124, "writes inside the mount"),
        (writes(".agent/plan.md"), 0, "writes beside the mount"),
        (
            format!("sleep 0.3; mkdir .agent/new; {}", writes(".agent/new/f")),
            0,
            "writes in a folder made beside the mount",
        ),
    ];
    for (script, expected, what) in cases {
        let Some(mut command) = unshare(&["--mount", "--propagation", "private"]) else {
            return;
        };
        let report = dir.path().join("report.json");
        command
            .current_dir(dir.path())
            .args([
                "sh",
                "-c",
                "mount -t tmpfs none .agent/mnt && exec \"$@\"",
                "sh",
            ])
            .arg(env!("CARGO_BIN_EXE_quietus"))
            .args(["-i", "1500ms", "--no-children", "--report"])
            .arg(&report)
            .args(["--", "bash", "-c", &script]);
        let (code, report, stderr) = run(command, &marker, &report);
        assert_eq!(code, expected, "{what}: {report:#}\n{stderr}");
    }
    assert_no_leak(&marker);
}
