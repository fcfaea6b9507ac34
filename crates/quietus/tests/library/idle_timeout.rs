//! A silent child is ended once the idle timeout has passed since its last output.

use crate::support as common;

use std::time::Instant;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{ActivitySource, KillLadder, MonitorConfig, MonitorResult, Outcome, Session, Signal};

#[test]
fn silent_child_is_ended_at_the_idle_timeout() {
    let marker = Marker::new("idle_silent");
    let idle = ms(500);
    let out = SharedBuf::new();
    let started = Instant::now();
    let session = Session::builder(marker.sh("echo ready; sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(idle)
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    let result = wait_generously(&session);
    let elapsed = started.elapsed();

    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {result:#?}");
    };
    assert_eq!(report.idle_timeout, idle);
    let output = report
        .get(ActivitySource::Output)
        .expect("the output source is enabled by default and listed");
    assert!(
        output.idle >= idle,
        "output idle {:?} < {idle:?}",
        output.idle
    );
    assert!(
        output.events >= 1,
        "the `ready` line was one output event: {report:?}"
    );
    let keepalive = report
        .get(ActivitySource::Keepalive)
        .expect("keepalive is always listed");
    assert!(keepalive.idle >= idle, "{report:?}");
    assert_eq!(keepalive.events, 0);

    assert!(result.runtime >= idle, "runtime {:?}", result.runtime);
    assert!(elapsed >= idle);
    assert_eq!(result.exit_code(), MonitorResult::EXIT_TIMEOUT);
    assert_eq!(result.exit_code(), 124);
    assert_eq!(
        result.signals_sent.first(),
        Some(&Signal::TERM),
        "{result:#?}"
    );
    assert!(result.kill_latency.is_some(), "{result:#?}");
    assert!(result.ladder_time.is_some(), "{result:#?}");
    assert!(!result.termination_unproven);
    assert!(result.status.is_some(), "the leader was reaped");
    assert_eq!(result.pid, session.pid());
    assert!(result.output_complete, "the killed tree closed its pipes");
    assert_eq!(out.text(), "ready\n");
    assert_no_leak(&marker);
}

#[test]
fn child_that_never_prints_is_stale_one_timeout_after_spawn() {
    let marker = Marker::new("idle_never_prints");
    let idle = ms(400);
    let started = Instant::now();
    let session = Session::spawn(
        marker.sh("sleep 1000"),
        MonitorConfig::builder()
            .idle_timeout(idle)
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(started.elapsed() >= idle);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {result:#?}");
    };
    let output = report.get(ActivitySource::Output).expect("output listed");
    assert_eq!(output.events, 0);
    assert!(output.idle >= idle);
    assert!(result.runtime >= idle);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}

#[test]
fn grandchildren_of_a_silent_child_are_ended_too() {
    let marker = Marker::new("idle_grandchildren");
    let out = SharedBuf::new();
    // Two background sleepers and a foreground one, all in the child's process group.
    let session = Session::builder(
        marker.sh("sleep 1000 & sleep 1000 & (sleep 1000; :) & echo ready; sleep 1000"),
    )
    .config(
        MonitorConfig::builder()
            .idle_timeout(ms(500))
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    )
    .stdout(out.sink())
    .spawn()
    .expect("sh can be spawned");
    out.wait_for("ready");
    assert!(
        marker.pids().len() >= 4,
        "the whole tree is up and carries the marker: {:#?}",
        marker.pids()
    );
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(result.exit_code(), 124);
    assert!(result.output_complete, "{result:#?}");
    assert_no_leak(&marker);
}

#[test]
fn child_that_closed_its_output_is_still_ended_when_idle() {
    // End-of-file on both pipes is not an exit: the silent process is still judged and ended.
    let marker = Marker::new("idle_closed_output");
    let idle = ms(400);
    let session = Session::spawn(
        marker.sh("exec >&- 2>&-; sleep 1000"),
        MonitorConfig::builder()
            .idle_timeout(idle)
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(result.runtime >= idle);
    assert!(result.output_complete);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}
