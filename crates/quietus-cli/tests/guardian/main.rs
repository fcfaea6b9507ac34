//! The guardian and the parent-death signal: the child dies with its supervisor, and only
//! then; one guardian (this crate's `quietus` binary) serves every session of a process.
#![cfg(target_os = "linux")]

#[path = "../support/mod.rs"]
mod support;

use support as common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{MARKER_ENV, Marker, assert_no_leak};
use quietus::{Containment, MonitorConfig, Program, Session};

#[test]
fn child_dies_when_the_supervising_process_is_killed() {
    let marker = Marker::new("pdeath");
    // The supervising process: the quietus command, with a long idle timeout.
    let mut supervisor = Command::new(env!("CARGO_BIN_EXE_quietus"))
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
    let group = MonitorConfig::builder()
        .containment(Containment::Group)
        .build()
        .unwrap();
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
        assert_eq!(pids, vec![session.pid().get()]);
        session.kill();
        let result = session.wait();
        assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
        assert_no_leak(&marker);
    }
}

/// Children of this process named `name`, with their state letter (`Z`: a zombie).
fn children_named(name: &str) -> Vec<(u32, char)> {
    let me = std::process::id();
    let tasks = std::fs::read_dir(format!("/proc/{me}/task")).expect("own threads");
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            (comm == name).then(|| (pid, rest.chars().next().unwrap_or('?')))
        })
        .collect()
}

/// Three sessions of one process share one guardian (the installed `quietus`, started by
/// `exec`), each session's containment says so, and once the sessions are over no guardian of
/// theirs is left a zombie.
#[test]
fn one_guardian_serves_every_session_of_a_process() {
    quietus::supervisor::set_guardian_program(env!("CARGO_BIN_EXE_quietus"));
    let marker = Marker::new("one-guardian");
    let sessions: Vec<Session> = (0..3)
        .map(|_| {
            let program = Program::new("sh")
                .args(["-c", "exec sleep 1000"])
                .env(MARKER_ENV, marker.as_str());
            Session::builder(program)
                .config(
                    MonitorConfig::builder()
                        .idle_timeout(Duration::from_secs(3600))
                        .build()
                        .unwrap(),
                )
                .spawn()
                .expect("sh starts")
        })
        .collect();
    let three = common::poll_until(common::GENEROUS, || marker.pids().len() == 3);
    assert!(three, "the three sleepers run: {:?}", marker.pids());
    // Other tests of this process may start and stop sessions meanwhile (a guardian being
    // stopped as another starts), and the guardian of a quietus command another test
    // SIGKILLed may be handed to this process (a subreaper in some tests), live while it ends
    // that command's tree, then a zombie nobody here reaps: the live ones settle to one.
    let live = || {
        children_named("sw-guardian")
            .into_iter()
            .filter(|(_, state)| *state != 'Z')
            .map(|(pid, _)| pid)
            .collect::<Vec<u32>>()
    };
    let one = common::poll_until(common::GENEROUS, || live().len() == 1);
    let guardians = live();
    assert!(one && guardians.len() == 1, "one guardian: {guardians:?}");
    for session in &sessions {
        session.terminate();
    }
    for session in &sessions {
        let result = common::wait_generously(session);
        assert_eq!(
            result.supervisor_death,
            quietus::supervisor::SupervisorDeath::Guardian,
            "{result:?}"
        );
    }
    // Once no session needs it, it exits and is reaped (another test's sessions may keep it
    // running): it is never left a zombie.
    let reaped = common::poll_until(common::GENEROUS, || {
        children_named("sw-guardian")
            .iter()
            .all(|(pid, state)| !guardians.contains(pid) || *state != 'Z')
    });
    assert!(reaped, "{guardians:?}: {:?}", children_named("sw-guardian"));
    assert_no_leak(&marker);
}

/// The guardian closes every descriptor it inherited beyond its stdin, stdout and stderr
/// (issue 37: one `close_range`): a pipe's write end its supervisor's host left inheritable is
/// not held open for as long as the guardian runs.
#[test]
fn the_guardian_holds_no_inherited_descriptor() {
    use std::os::fd::AsRawFd;
    // Inheritable (no close-on-exec): the guardian's `exec` keeps it unless it closes it.
    let (read, write) = rustix::pipe::pipe().expect("a pipe");
    let (ours, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .expect("a socket pair");
    let mut guardian = Command::new(env!("CARGO_BIN_EXE_quietus"))
        .arg(quietus::supervisor::GUARDIAN_SUBCOMMAND)
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the guardian starts");
    // Its answer comes after the closing: from then on it holds what it will hold.
    let mut hello = [0u8; 64];
    let (n, _) = rustix::net::recv(&ours, &mut hello, rustix::net::RecvFlags::empty())
        .expect("the guardian answers");
    assert!(
        hello[..n].starts_with(b"quietus-guardian"),
        "{:?}",
        &hello[..n]
    );
    let pipe_inode = std::fs::metadata(format!("/proc/self/fd/{}", write.as_raw_fd()))
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .expect("our pipe");
    let held: Vec<(i32, Option<u64>)> = std::fs::read_dir(format!("/proc/{}/fd", guardian.id()))
        .expect("the guardian's descriptors")
        .flatten()
        .filter_map(|e| {
            let n: i32 = e.file_name().to_str()?.parse().ok()?;
            let inode = std::fs::metadata(e.path())
                .ok()
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
            Some((n, inode))
        })
        .collect();
    assert!(
        held.iter().all(|(_, inode)| *inode != Some(pipe_inode)),
        "the guardian holds the inherited pipe: {held:?}"
    );
    // Beyond 0, 1 and 2 only its own copy of the socket (the same inode as its stdin).
    let socket = held
        .iter()
        .find(|(n, _)| *n == 0)
        .and_then(|(_, inode)| *inode);
    assert!(
        held.iter().all(|(n, inode)| *n <= 2 || *inode == socket),
        "the guardian holds descriptors beyond 0, 1, 2 and its socket: {held:?}"
    );
    drop(ours); // end of its socket: holding nothing, it exits
    let status = guardian.wait().expect("the guardian exits");
    assert!(status.success(), "{status:?}");
    drop((read, write));
}
