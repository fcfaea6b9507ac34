//! Linux parent-death signal: the child dies with its supervisor, and only then.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stallwatch::{MonitorConfig, Session};

const PATIENCE: Duration = Duration::from_secs(30);
const MARKER_VAR: &str = "SW_PDEATH_TEST_MARKER";

/// Pids of live (non-zombie) processes whose environment carries `MARKER_VAR=marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && env.split(|b| *b == 0).any(|var| var == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

fn wait_until_gone(marker: &str) -> Vec<u32> {
    let give_up = Instant::now() + PATIENCE;
    loop {
        let left = with_marker(marker);
        if left.is_empty() || Instant::now() > give_up {
            return left;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn child_dies_when_the_supervising_process_is_killed() {
    let marker = format!("pdeath-{}", std::process::id());
    // The supervising process: the stallwatch command, with a long idle timeout.
    let mut supervisor = Command::new(env!("CARGO_BIN_EXE_stallwatch"))
        .args([
            "--idle-timeout",
            "1h",
            "--",
            "sh",
            "-c",
            "echo ready; exec sleep 1000",
        ])
        .env(MARKER_VAR, &marker)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let supervisor_pid = supervisor.id();
    let mut line = String::new();
    BufReader::new(supervisor.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let before = with_marker(&marker);
    assert!(
        before.iter().any(|pid| *pid != supervisor_pid),
        "the supervised child is running: {before:?}"
    );
    // Kill the supervisor (a process this test started) without giving it any chance to clean
    // up: only the kernel's parent-death signal can end the child now.
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    let left = wait_until_gone(&marker);
    assert!(left.is_empty(), "child survived its supervisor: {left:?}");
}

#[test]
fn a_short_lived_spawning_thread_does_not_take_the_child_with_it() {
    let marker = format!("pdeath-thread-{}", std::process::id());
    let m2 = marker.clone();
    let session = std::thread::spawn(move || {
        let mut command = Command::new("sleep");
        command.arg("1000").env(MARKER_VAR, &m2);
        Session::spawn(command, MonitorConfig::default()).unwrap()
    })
    .join()
    .unwrap();
    // The thread that asked for the spawn is gone. Had the child been forked from it, the
    // parent-death signal would have killed it by now; give the kernel a moment to show that.
    let give_up = Instant::now() + Duration::from_millis(300);
    while Instant::now() < give_up {
        assert!(session.try_wait().is_none(), "child died with its thread");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(with_marker(&marker), vec![session.pid()]);
    session.kill();
    let result = session.wait();
    assert_eq!(result.signal(), Some(9));
    assert!(wait_until_gone(&marker).is_empty());
}
