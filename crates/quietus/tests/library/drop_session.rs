//! Dropping a running session takes its whole tree down.

use crate::support as common;

use std::time::Duration;

use common::{Marker, SharedBuf, assert_no_leak, ms};
use quietus::{KillLadder, MonitorConfig, Session, Signal};

#[test]
fn dropping_a_running_session_ends_its_tree() {
    let marker = Marker::new("drop_running");
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh("sleep 1000 & echo ready; sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    let up = marker.pids();
    assert!(up.len() >= 2, "sh and its sleepers are up: {up:#?}");
    drop(session);
    assert_no_leak(&marker);
}

#[test]
fn dropping_a_session_escalates_in_the_background() {
    let marker = Marker::new("drop_stubborn");
    let out = SharedBuf::new();
    let session = Session::builder(marker.sh("trap '' TERM; echo ready; sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    drop(session);
    assert_no_leak(&marker);
}

#[test]
fn dropping_a_finished_session_is_harmless() {
    let marker = Marker::new("drop_finished");
    let session =
        Session::spawn(marker.sh("exit 0"), MonitorConfig::default()).expect("sh can be spawned");
    let result = session.wait();
    assert_eq!(result.exit_code(), 0);
    drop(session);
    assert_no_leak(&marker);
}
