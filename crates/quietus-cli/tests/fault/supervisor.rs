//! Fault scenarios, family "the supervisor's own faults": sinks that panic or block, a caller
//! that drops the session in the middle of a ladder (or from inside a sink), and a supervising
//! process that dies without any chance to clean up.
//!
//! Already covered elsewhere, not repeated here:
//! - a panicking sink inside the pump (no process): `src/signals/output.rs`,
//!   `a_panicking_sink_is_dropped_but_reading_goes_on`;
//! - dropping a running session, with and without escalation: `drop_session.rs`;
//! - SIGKILL of the `quietus` command ends its direct child:
//!   `parent_death::child_dies_when_the_supervising_process_is_killed`;
//! - TERM / INT / HUP to the `quietus` command take a tree with a grandchild down:
//!   `cli::signalling_quietus_takes_its_tree_down`.
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::cli::ScenarioCli;
use crate::support::fault as fault_support;
use quietus::config::MonitorConfigBuilder;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{GENEROUS, ms, poll_until, wait_generously};
use fault_support::{Scenario, file_fingerprint, fingerprint};
use quietus::{KillLadder, MonitorConfig, Outcome, OutputSink, Session, Signal, Stream};

const IDLE: Duration = Duration::from_millis(500);

fn config() -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
}

/// Asserts that `received` is a prefix of the ledger at `ledger` and returns the ledger's
/// length.
#[track_caller]
fn assert_prefix_of_ledger(received: &[u8], ledger: &std::path::Path) -> u64 {
    let written = std::fs::read(ledger).expect("the ledger is readable");
    assert!(
        received.len() <= written.len(),
        "received {} bytes, more than the {} written",
        received.len(),
        written.len()
    );
    assert_eq!(
        fingerprint(received),
        fingerprint(&written[..received.len()]),
        "what arrived is exactly the beginning of what was written"
    );
    written.len() as u64
}

/// The stdout sink panics at its third chunk. What must hold: the reader goes on reading (and
/// counting) everything, so the child neither blocks nor loses its output signal; the chunks
/// delivered before the panic are intact; the other stream is untouched; the monitor still
/// ends the silent child on time.
#[test]
fn a_sink_that_panics_loses_only_its_own_copy() {
    let s = Scenario::new("sup_panicking_sink");
    let got = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(Mutex::new(0u32));
    let (g, c) = (got.clone(), calls.clone());
    let sink = OutputSink::callback(move |chunk| {
        let mut calls = c
            .lock()
            .expect("not poisoned: the panic below happens after unlock");
        *calls += 1;
        let n = *calls;
        drop(calls);
        if n == 3 {
            panic!("fault injection: the stdout sink panics at its third chunk");
        }
        g.lock()
            .expect("never held across a panic")
            .extend_from_slice(chunk);
    });
    let session = s
        .builder(
            "head -c 4194304 /dev/urandom | tee -a \"$SW_OUT\"; \
             head -c 1048576 /dev/urandom | tee -a \"$SW_ERR\" >&2; exec sleep 1000",
            config(),
        )
        .stdout(sink)
        .spawn()
        .expect("spawns");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "the monitor ends the silent child all the same: {result:#?}"
    );
    assert!(result.runtime >= IDLE);
    assert!(!result.termination_unproven);
    assert!(result.output_complete);
    s.assert_no_leak();
    let received = got.lock().expect("not poisoned").clone();
    let written = assert_prefix_of_ledger(&received, &s.out_ledger());
    assert_eq!(written, 4194304);
    assert_eq!(
        *calls.lock().expect("not poisoned"),
        3,
        "dropped after the panic"
    );
    assert_eq!(
        session.output_bytes(Stream::Stdout),
        written,
        "every byte was still read"
    );
    // stderr had its own, healthy sink.
    assert_eq!(
        fingerprint(&s.err.bytes()),
        file_fingerprint(&s.err_ledger())
    );
}

/// A sink that blocks on its first chunk until the test releases it. What must hold: the child
/// (stuck on a full pipe because the sink holds its output back: not idle, issue 28) is ended
/// on time by the hard timeout; `wait` returns within the drain cap although the reader is
/// still stuck; no process is left; once released, the sink has received an exact beginning of
/// the stream, and what never arrived is no more than what sat in the pipe (1 MiB) plus one
/// `tee` block.
#[test]
fn a_sink_that_blocks_does_not_keep_the_tree_alive_past_the_hard_timeout_or_wait_hanging() {
    let s = Scenario::new("sup_blocking_sink");
    let got = Arc::new(Mutex::new(Vec::new()));
    let (release, released) = mpsc::channel::<()>();
    let g = got.clone();
    let mut first = true;
    let sink = OutputSink::callback(move |chunk| {
        g.lock().expect("not poisoned").extend_from_slice(chunk);
        if first {
            first = false;
            let _ = released.recv(); // blocks until the test says so (or gives up)
        }
    });
    let drain_cap = ms(1000);
    let hard = ms(2000); // four idle timeouts
    let started = Instant::now();
    let session = s
        .builder(
            "head -c 8388608 /dev/urandom | tee -a \"$SW_OUT\"; say finished",
            config().drain_cap(drain_cap).hard_timeout(Some(hard)),
        )
        .stdout(sink)
        .spawn()
        .expect("spawns");
    let result = wait_generously(&session);
    let waited = started.elapsed();
    assert!(
        matches!(result.outcome, Outcome::HardTimeout { .. }),
        "{result:#?}"
    );
    assert!(result.runtime >= hard);
    assert!(session.output_held_back() >= hard - IDLE, "{result:#?}");
    assert!(!result.output_complete, "the reader is still stuck");
    assert!(waited < GENEROUS, "{waited:?}");
    s.assert_no_leak(); // while the sink is still blocked
    release.send(()).expect("the sink is waiting");
    // The stuck chunk completes; then the detached reader stops.
    assert!(poll_until(GENEROUS, || session
        .output_bytes(Stream::Stdout)
        == got.lock().expect("not poisoned").len() as u64));
    let received = got.lock().expect("not poisoned").clone();
    let written = assert_prefix_of_ledger(&received, &s.out_ledger());
    assert!(
        written - received.len() as u64 <= (1 << 20) + 65536,
        "{} bytes never arrived: more than the pipe could hold",
        written - received.len() as u64
    );
    assert!(!s.out.contains("finished"), "the child never got that far");
}

/// The same blocked sink, but the child writes a little and exits on its own: `wait` returns
/// after the drain instead of waiting for the sink.
#[test]
fn a_sink_blocked_when_the_child_exits_does_not_hang_wait() {
    let s = Scenario::new("sup_blocking_sink_exit");
    let got = Arc::new(Mutex::new(Vec::new()));
    let (release, released) = mpsc::channel::<()>();
    let g = got.clone();
    let sink = OutputSink::callback(move |chunk| {
        g.lock().expect("not poisoned").extend_from_slice(chunk);
        let _ = released.recv();
    });
    let session = s
        .builder(
            "head -c 100000 /dev/urandom | tee -a \"$SW_OUT\"; exit 6",
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .drain_cap(ms(1000))
                .build()
                .unwrap(),
        )
        .stdout(sink)
        .spawn()
        .expect("spawns");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 6);
    s.assert_no_leak();
    drop(release); // unblocks the sink for good
    assert!(poll_until(GENEROUS, || session
        .output_bytes(Stream::Stdout)
        == got.lock().expect("not poisoned").len() as u64));
    assert_prefix_of_ledger(&got.lock().expect("not poisoned"), &s.out_ledger());
}

/// The caller drops the session while the ladder waits out the grace of a child that caught
/// TERM: the ladder goes on in the background, and SIGKILL comes after the grace.
#[test]
fn dropping_the_session_mid_ladder_finishes_the_ladder() {
    let s = Scenario::new("sup_drop_mid_ladder");
    let grace = Duration::from_secs(2);
    let session = s.spawn(
        "exec perl -e 'sub say { open(my $l, q(>>), $ENV{SW_OUT}) or die; print $l @_; \
                                 close $l; syswrite(STDOUT, join(q(), @_)) } \
                       $SIG{TERM} = sub { say(qq(got-term\\n)) }; say(qq(ready\\n)); \
                       sleep 1 while 1'",
        config().kill_ladder(KillLadder::polite(Signal::TERM, grace)),
    );
    s.out.wait_for("ready");
    s.out.wait_for("got-term"); // the ladder is in its grace
    let dropping = Instant::now();
    drop(session);
    assert!(
        dropping.elapsed() < grace,
        "drop does not wait out the ladder: {:?}",
        dropping.elapsed()
    );
    assert!(
        !s.marker.pids().is_empty() || dropping.elapsed() >= grace,
        "nothing ends the child before the grace is over"
    );
    s.assert_no_leak();
    s.assert_accounted();
}

/// The caller drops the session from inside its own stdout sink (on the reader thread).
#[test]
fn dropping_the_session_from_inside_its_sink_ends_the_tree() {
    let s = Scenario::new("sup_drop_in_sink");
    let slot: Arc<Mutex<Option<Session>>> = Arc::new(Mutex::new(None));
    let seen = s.out.clone();
    let mut record = s.out.sink();
    let in_sink = slot.clone();
    let sink = OutputSink::callback(move |chunk| {
        if let OutputSink::Callback(f) = &mut record {
            f(chunk);
        }
        if seen.contains("ready") {
            let session = in_sink.lock().expect("not poisoned").take();
            drop(session); // on the reader thread, in the middle of a delivery
        }
    });
    let go = s.scratch("go");
    let session = s
        .builder(
            &format!(
                "sleep 1000 & while [ ! -e '{go}' ]; do sleep 0.01; done; say ready; wait",
                go = go.display()
            ),
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .stdout(sink)
        .spawn()
        .expect("spawns");
    *slot.lock().expect("not poisoned") = Some(session);
    std::fs::write(&go, b"").expect("the go file");
    s.out.wait_for("ready");
    assert!(
        poll_until(GENEROUS, || slot.lock().expect("not poisoned").is_none()),
        "the sink took the session"
    );
    s.assert_no_leak();
    s.assert_accounted();
}

/// Runs the `quietus` command on `script` with the scenario's marker and ledgers, and reads
/// its first stdout line (the handshake).
fn supervise(s: &Scenario, script: &str) -> std::process::Child {
    s.cli(&["--idle-timeout", "1h"], script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("quietus starts")
}

/// A crash of the supervising program (SIGKILL: no handler, no destructor runs). On Linux the
/// direct child dies with it (`PR_SET_PDEATHSIG`); the question here is its own children.
#[test]
fn a_crash_of_the_supervising_program_takes_the_grandchildren_too() {
    let s = Scenario::new("sup_crash_grandchild");
    let mut supervisor = supervise(
        &s,
        "sleep 1000 & (trap '' TERM; exec sleep 1000) & say ready; wait",
    );
    let mut line = String::new();
    BufReader::new(supervisor.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("the handshake");
    assert_eq!(line, "ready\n");
    assert_eq!(
        std::fs::read(s.out_ledger()).expect("the ledger"),
        line.as_bytes(),
        "what the child wrote is what the supervisor passed on"
    );
    let up = s.marker.pids();
    assert!(up.len() >= 4, "quietus, sh and two sleepers: {up:#?}");
    supervisor
        .kill()
        .expect("SIGKILL to our own quietus process");
    supervisor.wait().expect("reaped");
    s.assert_no_leak();
}

/// Same, with the direct child only (the control case of the scenario above, so that a fix
/// for grandchildren keeps this working): the child dies with its supervisor.
#[test]
fn a_crash_of_the_supervising_program_takes_the_direct_child() {
    let s = Scenario::new("sup_crash_child");
    let mut supervisor = supervise(&s, "say ready; exec sleep 1000");
    let mut line = String::new();
    BufReader::new(supervisor.stdout.take().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("the handshake");
    assert_eq!(line, "ready\n");
    assert_eq!(
        std::fs::read(s.out_ledger()).expect("the ledger"),
        line.as_bytes(),
        "what the child wrote is what the supervisor passed on"
    );
    supervisor
        .kill()
        .expect("SIGKILL to our own quietus process");
    supervisor.wait().expect("reaped");
    s.assert_no_leak();
}

/// In group mode a process that left the tree's group (`setsid`) dies with a SIGKILLed
/// supervisor too (issue 51, point 3): the guardian held only the group, and the `setsid`
/// child survived, while docs/cli.md promised the whole tree. It is told of every process the
/// descendants' sample sees outside the group. The escapee is given 1.5 s — fifteen samples at
/// the 100 ms check interval — to be seen before the crash.
#[test]
fn a_crash_in_group_mode_takes_the_setsid_escapees_too() {
    let s = Scenario::new("sup_crash_escapee");
    for shell in ["sh", "bash"] {
        let script = format!("{shell} -c 'setsid sleep 1000 & sleep 1001 & echo ready; wait'");
        let mut supervisor = s
            .cli(
                &[
                    "--idle-timeout",
                    "1h",
                    "--containment",
                    "group",
                    "--check-interval",
                    "100ms",
                ],
                &script,
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("quietus starts");
        let mut line = String::new();
        BufReader::new(supervisor.stdout.take().expect("stdout is piped"))
            .read_line(&mut line)
            .expect("the handshake");
        assert_eq!(line, "ready\n");
        assert!(
            poll_until(GENEROUS, || s
                .marker
                .pids()
                .iter()
                .filter(|p| p.cmdline.starts_with("sleep 100"))
                .count()
                == 2),
            "the sleepers run: {:#?}",
            s.marker.pids()
        );
        std::thread::sleep(Duration::from_millis(1500));
        supervisor
            .kill()
            .expect("SIGKILL to our own quietus process");
        supervisor.wait().expect("reaped");
        s.assert_no_leak();
    }
}

/// The idle timeout of the scenarios below (python's start on a loaded machine comes first).
const JOIN_IDLE: Duration = Duration::from_secs(3);

/// The leader moves itself into the supervisor's own process group, then becomes a silent
/// `sleep`. (`exec python3`: the leader itself, same pid.)
const JOIN_SUPERVISOR_GROUP: &str = "exec python3 -c '
import os
os.setpgid(0, os.getpgid(os.getppid()))
with open(os.environ[\"SW_OUT\"], \"a\") as l:
    l.write(\"joined\\n\")
os.write(1, b\"joined\\n\")
os.execvp(\"sleep\", [\"sleep\", \"1000\"])
'";

/// A process in this test's own process group (the supervisor's group for the library, and
/// the `quietus` command's group too, as the command is started without a group of its
/// own) that writes down every catchable signal it receives.
struct Sentinel {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Sentinel {
    fn start(s: &Scenario) -> Sentinel {
        let log = s.scratch("sentinel.log");
        let ready = s.scratch("sentinel.ready");
        let mut traps = String::new();
        for signal in ["HUP", "INT", "QUIT", "TERM", "USR1", "USR2", "CONT"] {
            traps.push_str(&format!("trap 'echo {signal} >> \"$1\"' {signal}; "));
        }
        let child = s
            .marker
            .sh(&format!(
                "{traps}: > \"$2\"; while :; do sleep 1 & wait; done"
            ))
            .arg(&log)
            .arg(&ready)
            .stdin(Stdio::null())
            .spawn()
            .expect("the sentinel starts");
        fault_support::wait_for_file(&ready, common::HANDSHAKE);
        Sentinel { child, log }
    }

    /// Asserts that the sentinel lives and received no signal; then ends it (our own child).
    #[track_caller]
    fn assert_untouched_and_stop(mut self) {
        assert!(
            self.child.try_wait().expect("our child").is_none(),
            "the sentinel in the supervisor's group was killed"
        );
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            log.is_empty(),
            "the supervisor's own group was signalled: {log}"
        );
        self.child.kill().expect("our own sentinel");
        self.child.wait().expect("reaped");
    }
}

/// Library: the leader joins the supervisor's (this test's) process group. The ladder never
/// signals that group; it ends the leader by pid, and the outcome is a plain idle timeout.
#[test]
fn a_leader_that_joins_the_supervisors_group_is_ended_by_pid() {
    let s = Scenario::new("sup_join_group");
    let sentinel = Sentinel::start(&s);
    // Long enough for python to start and join on a loaded machine before it looks stale.
    let session = s.spawn(JOIN_SUPERVISOR_GROUP, config().idle_timeout(JOIN_IDLE));
    s.out.wait_for("joined");
    let own_group = rustix::process::getpgrp().as_raw_pid();
    let leader_group = std::fs::read_to_string(format!("/proc/{}/stat", session.pid()))
        .expect("the leader's stat")
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(2).map(str::to_owned))
        .expect("a pgrp field");
    assert_eq!(leader_group, own_group.to_string(), "it joined our group");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(!result.termination_unproven, "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM], "{result:#?}");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(15),
        "ended by TERM: {result:#?}"
    );
    sentinel.assert_untouched_and_stop();
    s.assert_no_leak();
    s.assert_accounted();
}

/// The same under the `quietus` command: exit 124 (idle timeout), not 125 ("termination
/// unproven"), and quietus's group (here, this test's) is never signalled.
#[test]
fn the_command_ends_a_leader_that_joins_its_group_by_pid() {
    let s = Scenario::new("sup_cli_join_group");
    let sentinel = Sentinel::start(&s);
    let output = s
        .cli(&["-i", "3s", "-g", "300ms"], JOIN_SUPERVISOR_GROUP) // JOIN_IDLE
        .output()
        .expect("quietus runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(124), "{stderr}");
    assert!(!stderr.contains("unproven"), "{stderr}");
    sentinel.assert_untouched_and_stop();
    s.assert_no_leak();
    assert_eq!(
        fingerprint(&output.stdout),
        file_fingerprint(&s.out_ledger()),
        "every byte the child wrote was passed on"
    );
}
