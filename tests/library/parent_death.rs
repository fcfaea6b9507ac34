//! Linux parent-death signal: the child dies with its supervisor, and only then.
#![cfg(target_os = "linux")]

use crate::support as common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{MARKER_ENV, Marker, assert_no_leak};
use stallwatch::{ContainmentMode, MonitorConfig, Program, Session};

#[test]
fn child_dies_when_the_supervising_process_is_killed() {
    let marker = Marker::new("pdeath");
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
        .env(MARKER_ENV, marker.as_str())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let supervisor_pid = supervisor.id();
    let mut line = String::new();
    BufReader::new(supervisor.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let before = marker.pids();
    assert!(
        before.iter().any(|p| p.pid != supervisor_pid),
        "the supervised child is running: {before:?}"
    );
    // Kill the supervisor (a process this test started) without giving it any chance to clean
    // up: only the kernel's parent-death signal (and the guardian outside the supervisor) can
    // end the child now.
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    assert_no_leak(&marker);
}

#[test]
fn a_short_lived_spawning_thread_does_not_take_the_child_with_it() {
    // The default (a cgroup and its guardian where this process may make one), and the
    // group with the parent-death signal, for a std command and for a `Program` (started
    // from the spawner thread without a fork).
    let group = MonitorConfig::default().containment(ContainmentMode::Group);
    for (config, plain) in [
        (MonitorConfig::default(), false),
        (group.clone(), false),
        (group, true),
    ] {
        let marker = Marker::new("pdeath-thread");
        let text = marker.as_str().to_owned();
        let session = std::thread::spawn(move || {
            if plain {
                let program = Program::new("sleep").arg("1000").env(MARKER_ENV, text);
                return Session::spawn(program, config).unwrap();
            }
            let mut command = Command::new("sleep");
            command.arg("1000").env(MARKER_ENV, text);
            Session::spawn(command, config).unwrap()
        })
        .join()
        .unwrap();
        // The thread that asked for the spawn is gone. Had the child been forked from it, the
        // parent-death signal would have killed it by now; give the kernel a moment to show
        // that.
        let give_up = Instant::now() + Duration::from_millis(300);
        while Instant::now() < give_up {
            assert!(session.try_wait().is_none(), "child died with its thread");
            std::thread::sleep(Duration::from_millis(20));
        }
        let pids: Vec<u32> = marker.pids().iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![session.pid()]);
        session.start_kill();
        let result = session.wait();
        assert_eq!(result.signal(), Some(9));
        assert_no_leak(&marker);
    }
}
