//! The kill ladder: polite signals, grace, then SIGKILL for a tree that will not listen.

use crate::support as common;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::{GENEROUS, Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{KillLadder, MonitorConfig, Outcome, Session, Signal};

#[test]
fn child_ignoring_term_is_escalated_to_kill() {
    let marker = Marker::new("ladder_ignores_term");
    let idle = ms(500);
    let grace = ms(500);
    let out = SharedBuf::new();
    let started = Instant::now();
    // The trap is installed before `ready`; an ignored signal stays ignored in `sleep` too.
    let session = Session::builder(marker.sh("trap '' TERM; echo ready; sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(idle)
                .kill_ladder(KillLadder::polite(Signal::TERM, grace))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    let result = wait_generously(&session);

    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(result.escalated, "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    let status = result.status.expect("the leader was reaped");
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    assert_eq!(
        result.exit_code(),
        124,
        "a timeout stays 124 even after KILL"
    );
    assert!(
        result.runtime >= idle + grace,
        "runtime {:?}",
        result.runtime
    );
    assert!(started.elapsed() >= idle + grace);
    let ladder = result.ladder_time.expect("a ladder ran");
    assert!(ladder >= grace, "ladder time {ladder:?} < grace {grace:?}");
    assert!(!result.termination_unproven);
    assert_no_leak(&marker);
}

#[test]
fn every_step_of_a_custom_ladder_is_climbed_in_order() {
    let marker = Marker::new("ladder_custom");
    let out = SharedBuf::new();
    // Ignores INT and HUP, dies of TERM.
    let session = Session::builder(marker.sh("trap '' INT HUP; echo ready; sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(ms(300))
                .kill_ladder(KillLadder::new([
                    (Signal::INT, ms(200)),
                    (Signal::HUP, ms(200)),
                    (Signal::TERM, ms(1000)),
                ]))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(
        result.signals_sent[..3],
        [Signal::INT, Signal::HUP, Signal::TERM],
        "{result:#?}"
    );
    assert!(result.ladder_time.expect("a ladder ran") >= ms(400));
    assert!(result.runtime >= ms(300 + 400));
    assert_no_leak(&marker);
}

#[test]
fn immediate_ladder_sends_only_kill() {
    let marker = Marker::new("ladder_immediate");
    let session = Session::spawn(
        marker.sh("trap '' TERM; sleep 1000"),
        MonitorConfig::builder()
            .idle_timeout(ms(300))
            .kill_ladder(KillLadder::immediate())
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
    assert_eq!(result.signals_sent, vec![Signal::KILL]);
    assert!(result.escalated);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    assert_no_leak(&marker);
}

#[test]
fn kill_during_the_grace_skips_straight_to_sigkill() {
    let marker = Marker::new("ladder_kill_in_grace");
    let out = SharedBuf::new();
    let long_grace = Duration::from_secs(120);
    // TERM is caught (and reported), not obeyed; the loop keeps the shell responsive.
    let session = Session::builder(
        marker.sh("trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done"),
    )
    .config(
        MonitorConfig::builder()
            .idle_timeout(ms(300))
            .kill_ladder(KillLadder::polite(Signal::TERM, long_grace))
            .build()
            .unwrap(),
    )
    .stdout(out.sink())
    .spawn()
    .expect("sh can be spawned");
    out.wait_for("ready");
    // The ladder has sent TERM and is now waiting out its two-minute grace.
    out.wait_for("got-term");
    assert!(session.try_wait().is_none(), "still in its grace");
    let asked = Instant::now();
    session.kill();
    let result = wait_generously(&session);
    assert!(
        asked.elapsed() < GENEROUS,
        "did not wait out the {long_grace:?} grace"
    );
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "the first reason is kept: {result:#?}"
    );
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}
