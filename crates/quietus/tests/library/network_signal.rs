//! The network source with real processes and a local server on 127.0.0.1: bytes moving on a
//! socket of the tree keep a silent child alive (received or sent, by the child or a
//! grandchild); an open connection that moves nothing does not; `watch_network(false)` gives
//! the behaviour without the source.
#![cfg(target_os = "linux")]

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::net::{Mode, Server};
use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::diagnosis::StallKind;
use quietus::{
    ActivitySource, MonitorConfig, MonitorResult, Outcome, Session, outcome::StaleReport,
};

/// Two seconds idle, sampled every 200 ms; the children source off, so that only the network
/// can keep the child alive. A trickle every 0.5 s leaves 1.5 s of slack for the VM's stalls.
fn config(idle: Duration) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(idle)
        .check_interval(Some(ms(200)))
        .watch_children(false)
        .kill_ladder(quietus::KillLadder::polite(quietus::Signal::TERM, ms(500)))
}

/// Connects fd 3 to the server (bash's /dev/tcp), says `ready`, then runs `then`.
fn connect(port: u16, then: &str) -> String {
    format!("exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; echo ready; {then}'")
}

fn run(
    m: &Marker,
    script: &str,
    config: impl Into<MonitorConfigBuilder>,
) -> (MonitorResult, Duration) {
    let out = SharedBuf::new();
    let started = Instant::now();
    let session = Session::builder(m.sh(script))
        .config(config)
        .stdout(out.sink())
        .spawn()
        .unwrap();
    out.wait_for("ready");
    (wait_generously(&session), started.elapsed())
}

fn stale(result: &MonitorResult) -> &StaleReport {
    match &result.outcome {
        Outcome::IdleTimeout(report) => report,
        other => panic!("expected an idle timeout, got {other:?}"),
    }
}

const TRICKLE: Mode = Mode::Trickle {
    chunk: 4096,
    every: Duration::from_millis(500),
    times: 12,
};

#[test]
fn a_silent_child_receiving_a_trickle_is_not_ended() {
    let m = Marker::new("net-trickle");
    let server = Server::start(TRICKLE);
    let (result, elapsed) = run(
        &m,
        &connect(server.port(), "exec cat <&3 >/dev/null"),
        config(ms(2000)),
    );
    let report = stale(&result);
    // Every chunk was written to a live connection: not ended while it received.
    assert_eq!(server.chunks.load(Ordering::Relaxed), 12, "{report}");
    // The 12th chunk moved 5.5 s after the first, and the timeout ran from there.
    assert!(elapsed >= ms(5500 + 2000), "{elapsed:?}");
    let network = report.get(ActivitySource::Network).unwrap();
    assert!(network.events >= 3, "{report}");
    assert!(network.idle >= ms(2000), "{report}");
    assert_no_leak(&m);
}

#[test]
fn a_grandchilds_socket_counts() {
    let m = Marker::new("net-grandchild");
    let server = Server::start(TRICKLE);
    // Only the grandchild (bash, then cat) holds the socket; the child waits for it.
    let grandchild = connect(server.port(), "exec cat <&3 >/dev/null");
    let (result, elapsed) = run(&m, &format!("({grandchild}) & wait"), config(ms(2000)));
    let report = stale(&result);
    assert_eq!(server.chunks.load(Ordering::Relaxed), 12, "{report}");
    // The 12th chunk moved 5.5 s after the first, and the timeout ran from there.
    assert!(elapsed >= ms(5500 + 2000), "{elapsed:?}");
    assert!(report.get(ActivitySource::Network).unwrap().events >= 3);
    assert_no_leak(&m);
}

#[test]
fn sending_counts() {
    let m = Marker::new("net-send");
    let server = Server::start(Mode::Sink);
    let send = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do head -c 4096 /dev/zero >&3; \
                sleep 0.5; done; exec sleep 1000";
    let (result, elapsed) = run(&m, &connect(server.port(), send), config(ms(2000)));
    let report = stale(&result);
    assert_eq!(server.bytes.load(Ordering::Relaxed), 12 * 4096, "{report}");
    // The 12th chunk moved 5.5 s after the first, and the timeout ran from there.
    assert!(elapsed >= ms(5500 + 2000), "{elapsed:?}");
    assert!(report.get(ActivitySource::Network).unwrap().events >= 3);
    assert_no_leak(&m);
}

#[test]
fn an_open_but_silent_connection_is_ended_at_the_idle_timeout() {
    let m = Marker::new("net-silent");
    let server = Server::start(Mode::Silent);
    let idle = ms(1500);
    let (result, elapsed) = run(
        &m,
        &connect(server.port(), "exec cat <&3 >/dev/null"),
        config(idle),
    );
    let report = stale(&result);
    let network = report.get(ActivitySource::Network).unwrap();
    assert_eq!(
        network.events, 0,
        "a socket is open, no byte moves: {report}"
    );
    assert!(network.available);
    assert!(
        elapsed >= idle && elapsed < Duration::from_secs(20),
        "{elapsed:?}"
    );
    let diagnosis = report.diagnosis.as_ref().expect("a diagnosis");
    assert_eq!(diagnosis.kind, StallKind::NetworkWait, "{diagnosis:#?}");
    assert!(
        diagnosis
            .summary
            .ends_with(&format!("reads TCP peer {}", server.addr)),
        "{}",
        diagnosis.summary
    );
    assert_no_leak(&m);
}

#[test]
fn without_the_network_source_a_trickle_does_not_keep_the_child_alive() {
    let m = Marker::new("net-off");
    let server = Server::start(Mode::Trickle {
        chunk: 4096,
        every: Duration::from_millis(500),
        times: 40,
    });
    let (result, elapsed) = run(
        &m,
        &connect(server.port(), "exec cat <&3 >/dev/null"),
        config(ms(1500)).watch_network(false),
    );
    let report = stale(&result);
    assert!(report.get(ActivitySource::Network).is_none(), "{report}");
    assert!(result.network_unavailable.is_none());
    // Ended while the server still had most of its 20 s of chunks to send.
    assert!(server.chunks.load(Ordering::Relaxed) < 30, "{elapsed:?}");
    assert_no_leak(&m);
}
