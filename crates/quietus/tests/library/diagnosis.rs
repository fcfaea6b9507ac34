//! The diagnosis of a stall, from real programs: each kind is what the tree really did when
//! it was judged stale, in the stale report and as an event.
#![cfg(target_os = "linux")]

use crate::support as common;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::diagnosis::{Diagnosis, StallKind};
use quietus::{Event, MonitorConfig, Outcome, Session, SessionBuilder, Stdin};

fn config() -> MonitorConfig {
    MonitorConfig::default()
        .idle_timeout(ms(1000))
        .kill_ladder(quietus::KillLadder::polite(quietus::Signal::TERM, ms(300)))
}

/// Runs the builder's program until it is judged stale; its diagnosis, checked to be the same
/// in the report and in the event sent before the first signal.
fn stall(m: &Marker, builder: SessionBuilder, ready: &str) -> Diagnosis {
    let out = SharedBuf::new();
    let session = builder.config(config()).stdout(out.sink()).spawn().unwrap();
    let mut events = session.events();
    out.wait_for(ready);
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout: {:?}", result.outcome);
    };
    let diagnosis = report.diagnosis.clone().expect("a diagnosis");
    let sent: Vec<Diagnosis> = events
        .iter()
        .filter_map(|e| match e {
            Event::Diagnosis(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(sent.last(), Some(&diagnosis));
    assert_no_leak(m);
    diagnosis
}

#[test]
fn read_on_a_held_pipe_is_awaiting_input() {
    let m = Marker::new("diag-read");
    let builder = Session::builder(m.sh("echo ready; read x")).stdin(Stdin::Piped);
    let d = stall(&m, builder, "ready");
    assert_eq!(d.kind, StallKind::AwaitingInput, "{d:#?}");
    let pid = d.processes[0].pid;
    assert_eq!(
        d.summary,
        format!("waiting for input — sh (pid {pid}) reads stdin (a pipe)")
    );
    assert_eq!(d.processes[0].syscall.as_deref(), Some("read"));
    assert_eq!(d.processes[0].fd, Some(0));
}

#[test]
fn read_on_the_terminal_is_awaiting_input_naming_it() {
    let m = Marker::new("diag-tty");
    let builder = Session::builder(m.sh("echo ready; read x")).pty(24, 80);
    let d = stall(&m, builder, "ready");
    assert_eq!(d.kind, StallKind::AwaitingInput, "{d:#?}");
    let target = d.processes[0].target.clone().unwrap();
    assert!(target.starts_with("the terminal /dev/pts/"), "{target}");
}

#[test]
fn sleep_is_sleeping_and_a_shell_waiting_on_it_is_waiting_on_a_child() {
    let m = Marker::new("diag-sleep");
    let d = stall(
        &m,
        Session::builder(m.sh("echo ready; exec sleep 1000")),
        "ready",
    );
    assert_eq!(d.kind, StallKind::Sleeping, "{d:#?}");
    let m = Marker::new("diag-wait");
    let d = stall(
        &m,
        Session::builder(m.sh("echo ready; sleep 1000; echo")),
        "ready",
    );
    assert_eq!(d.kind, StallKind::WaitingOnChild, "{d:#?}");
    assert_eq!(d.processes.len(), 2, "{d:#?}");
    assert_eq!(d.processes[1].kind, StallKind::Sleeping);
}

#[test]
fn a_process_that_stops_itself_is_stopped() {
    let m = Marker::new("diag-stop");
    let d = stall(
        &m,
        Session::builder(m.sh("echo ready; kill -STOP $$")),
        "ready",
    );
    assert_eq!(d.kind, StallKind::Stopped, "{d:#?}");
    assert_eq!(d.processes[0].state, "stopped");
}

#[test]
fn a_deadlocked_python_is_lock_wait() {
    let m = Marker::new("diag-lock");
    let script = "exec python3 -c \"import threading; l = threading.Lock(); l.acquire(); \
                  print('locked', flush=True); l.acquire()\"";
    let d = stall(&m, Session::builder(m.sh(script)), "locked");
    assert_eq!(d.kind, StallKind::LockWait, "{d:#?}");
    assert_eq!(d.processes[0].syscall.as_deref(), Some("futex"));
}

#[test]
fn a_busy_loop_with_every_source_off_is_running() {
    let m = Marker::new("diag-busy");
    let out = SharedBuf::new();
    let session = Session::builder(m.sh("echo ready; while :; do :; done"))
        .config(config().watch_children(false).watch_files(false))
        .stdout(out.sink())
        .spawn()
        .unwrap();
    out.wait_for("ready");
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{:?}", result.outcome);
    };
    let d = report.diagnosis.clone().unwrap();
    assert_eq!(d.kind, StallKind::Running, "{d:#?}");
    assert_no_leak(&m);
}

/// A leader that only polls (python3 in `select` on the pipe from its child, as an agent CLI
/// waits on its tool) is not the subject: the tool's `sleep`, which the others wait on, is
/// named; the leader and the shell stay in `processes`.
#[test]
fn a_polling_leader_is_named_by_the_sleep_its_tool_waits_on() {
    let m = Marker::new("diag-leader");
    let script = "exec python3 -c \"
import select, subprocess, sys
p = subprocess.Popen(['sh', '-c', 'echo started; sleep 1000; echo done'], stdout=subprocess.PIPE)
p.stdout.readline()
print('ready', flush=True)
while True:
    r, _, _ = select.select([p.stdout], [], [], 30)
    if r and not p.stdout.read1(4096):
        sys.exit(0)
\"";
    let d = stall(&m, Session::builder(m.sh(script)), "ready");
    assert_eq!(d.kind, StallKind::Sleeping, "{d:#?}");
    let sleep = d.processes.iter().find(|p| p.name == "sleep").unwrap();
    assert_eq!(
        d.summary,
        format!(
            "sleeping — sleep (pid {}) sleeps (clock_nanosleep)",
            sleep.pid
        )
    );
    let names: Vec<&str> = d.processes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["python3", "sh", "sleep"], "{d:#?}");
    assert_eq!(d.processes[1].kind, StallKind::WaitingOnChild);
}
