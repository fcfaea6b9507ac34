//! Piped stdin: a round trip through `cat`, and a child that never reads.

use crate::support as common;

use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{GENEROUS, MARKER_ENV, Marker, SharedBuf, assert_no_leak, wait_generously};
use quietus::{MonitorConfig, Outcome, Session, Stdin};

fn cat(marker: &Marker) -> Command {
    let mut command = Command::new("cat");
    command.env(MARKER_ENV, marker.as_str());
    command
}

#[test]
fn a_round_trip_through_cat() {
    let m = Marker::new("stdin-cat");
    let session = Session::builder(cat(&m))
        .stdin(Stdin::Piped)
        .spawn()
        .expect("cat can be spawned");
    session.write_stdin(b"hello\n").unwrap();
    session.write_stdin(b"").unwrap();
    session.write_stdin(b"world\n").unwrap();
    session.close_stdin();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 0, "cat saw end-of-file and exited");
    let stdout = session.output().stdout.expect("separate streams");
    assert_eq!(stdout.render(), b"hello\nworld\n");
    let closed = session.write_stdin(b"late").unwrap_err();
    assert_eq!(closed.kind(), io::ErrorKind::NotConnected);
    assert_no_leak(&m);
}

#[test]
fn stdin_is_null_unless_piped() {
    let m = Marker::new("stdin-null");
    // cat of a null stdin ends at once.
    let session = Session::builder(cat(&m)).spawn().unwrap();
    let refused = session.write_stdin(b"x").unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::NotConnected);
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0);
    assert_eq!(session.output().total_bytes(), 0);
    assert_no_leak(&m);
}

#[test]
fn a_child_that_never_reads_never_blocks_the_writer_for_good() {
    let m = Marker::new("stdin-never-read");
    let out = SharedBuf::new();
    let session = Session::builder(m.sh("echo ready; exec sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
        )
        .stdin(Stdin::Piped)
        .stdout(out.sink())
        .spawn()
        .unwrap();
    out.wait_for("ready");
    // The pipe (64 KiB) and the queue (64 writes) fill up; then a write gives up after 5 s.
    let chunk = vec![b'x'; 256 * 1024];
    let started = Instant::now();
    let error = loop {
        match session.write_stdin(&chunk) {
            Ok(()) => assert!(started.elapsed() < GENEROUS, "writes never stop succeeding"),
            Err(e) => break e,
        }
    };
    let waited = started.elapsed();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
    assert!(waited >= Duration::from_secs(5), "gave up after {waited:?}");
    assert!(waited < GENEROUS, "took {waited:?}");
    assert!(session.try_wait().is_none(), "the child is unharmed");
    session.terminate();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert_no_leak(&m);
}

/// Another session's guardian (a fork of this process) is started while this session's stdin
/// pipe is open: it must hold no copy of its write end, or `cat` would never see end-of-file.
#[cfg(target_os = "linux")]
#[test]
fn another_sessions_guardian_holds_no_copy_of_this_stdin() {
    let m = Marker::new("stdin-guardian");
    let first = Session::builder(cat(&m))
        .stdin(Stdin::Piped)
        .spawn()
        .expect("cat can be spawned");
    let mut sleeper = Command::new("sleep");
    sleeper.arg("1000").env(MARKER_ENV, m.as_str());
    let second = Session::builder(sleeper)
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(3600))
                .build()
                .unwrap(),
        )
        .spawn()
        .expect("sleep can be spawned");
    first.write_stdin(b"bye\n").unwrap();
    first.close_stdin();
    let result = first
        .wait_timeout(GENEROUS)
        .expect("cat saw the end of its input while the other session ran");
    assert_eq!(result.outcome, Outcome::Exited);
    second.terminate();
    wait_generously(&second);
    assert_no_leak(&m);
}
