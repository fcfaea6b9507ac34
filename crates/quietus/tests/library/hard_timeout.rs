//! A hard deadline ends a child even while it is active.

use crate::support as common;

use std::time::Instant;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{KillLadder, MonitorConfig, Outcome, Session, Signal};

#[test]
fn hard_deadline_ends_a_chatty_child() {
    let marker = Marker::new("hard_chatty");
    let hard = ms(1000);
    let out = SharedBuf::new();
    let started = Instant::now();
    let session = Session::builder(marker.sh("while :; do echo chat; sleep 0.05; done"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(std::time::Duration::from_secs(60))
                .hard_timeout(Some(hard))
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    let elapsed = started.elapsed();

    assert_eq!(
        result.outcome,
        Outcome::HardTimeout { after: hard },
        "{result:#?}"
    );
    assert!(result.outcome.ended_by_quietus());
    assert_eq!(result.outcome.name(), "hard_timeout");
    assert!(result.runtime >= hard, "runtime {:?}", result.runtime);
    assert!(elapsed >= hard);
    assert_eq!(result.exit_code(), 124);
    assert_eq!(result.signals_sent.first(), Some(&Signal::TERM));
    assert!(result.kill_latency.is_some());
    assert!(out.contains("chat"), "it was chatty: {:?}", out.text());
    assert_no_leak(&marker);
}

#[test]
fn hard_deadline_wins_over_a_later_idle_timeout() {
    // Silent, but the hard deadline comes first.
    let marker = Marker::new("hard_before_idle");
    let hard = ms(400);
    let session = Session::spawn(
        marker.sh("sleep 1000"),
        MonitorConfig::builder()
            .idle_timeout(std::time::Duration::from_secs(60))
            .hard_timeout(Some(hard))
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::HardTimeout { after: hard });
    assert!(result.runtime >= hard);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}

#[test]
fn child_finishing_before_the_hard_deadline_is_not_touched() {
    let marker = Marker::new("hard_not_reached");
    let session = Session::spawn(
        marker.sh("echo hi; exit 0"),
        MonitorConfig::builder()
            .idle_timeout(ms(1000))
            .hard_timeout(Some(std::time::Duration::from_secs(30)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(result.signals_sent.is_empty());
    assert_eq!(result.exit_code(), 0);
    assert_no_leak(&marker);
}
