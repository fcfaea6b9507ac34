//! The diagnosis of a stall, from real programs: each kind is what the tree really did when
//! it was judged stale, in the stale report and as an event.
#![cfg(target_os = "linux")]

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::diagnosis::{Diagnosis, StallKind};
use quietus::{Event, MonitorConfig, Outcome, Session, SessionBuilder, Stdin};

fn config() -> MonitorConfigBuilder {
    MonitorConfig::builder()
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

/// `program ARGS…` with the marker in its environment.
fn marked(m: &Marker, program: &str, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.args(args).env(common::MARKER_ENV, m.as_str());
    command
}

/// The subject of `d` is the process named `leaf`; returns it.
fn names_the_leaf<'a>(
    d: &'a Diagnosis,
    kind: StallKind,
    leaf: &str,
) -> &'a quietus::diagnosis::ProcessDiagnosis {
    assert_eq!(d.kind, kind, "{d:#?}");
    let subject = d
        .processes
        .iter()
        .find(|p| {
            d.summary
                .contains(&format!(" — {} (pid {}) ", p.name, p.pid))
        })
        .unwrap_or_else(|| panic!("the summary names no process of the list: {d:#?}"));
    assert_eq!(subject.name, leaf, "{d:#?}");
    subject
}

#[test]
fn sleep_is_sleeping_and_a_shell_waiting_on_it_names_the_sleep() {
    let m = Marker::new("diag-sleep");
    let d = stall(
        &m,
        Session::builder(m.sh("echo ready; exec sleep 1000")),
        "ready",
    );
    assert_eq!(d.kind, StallKind::Sleeping, "{d:#?}");
    // Wrappers (dash, bash, python) waiting on the sleep: the sleep is named, the wrapper
    // stays in the list, waiting on it.
    let python = "import subprocess; print('ready', flush=True); subprocess.run(['sleep', '1000'])";
    for (shell, args) in [
        ("sh", vec!["-c", "echo ready; sleep 1000; echo"]),
        ("bash", vec!["-c", "echo ready; sleep 1000; echo"]),
        ("python3", vec!["-c", python]),
    ] {
        let m = Marker::new("diag-wrapped");
        let d = stall(&m, Session::builder(marked(&m, shell, &args)), "ready");
        let sleep = names_the_leaf(&d, StallKind::Sleeping, "sleep");
        assert_eq!(
            d.summary,
            format!(
                "sleeping — sleep (pid {}) sleeps (clock_nanosleep)",
                sleep.pid
            ),
            "{shell}"
        );
        assert_eq!(d.processes.len(), 2, "{d:#?}");
        let wrapper = &d.processes[0];
        assert_eq!(wrapper.kind, StallKind::WaitingOnChild, "{d:#?}");
        assert_eq!(wrapper.waits_on, Some(sleep.pid), "{d:#?}");
    }
}

/// A local HTTP/1.1 server outside the tree that answers every request on a connection it
/// keeps open (keep-alive), for `connections` connections.
fn keep_alive_server(connections: usize) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(answer).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

/// An agent-like python3 (an event loop in epoll on an idle keep-alive connection and on the
/// pipe from its tool) whose tool sleeps: the sleep is named, every run, never the
/// connection.
#[test]
fn an_idle_keep_alive_connection_is_never_the_cause() {
    const RUNS: usize = 3;
    let port = keep_alive_server(RUNS);
    let script = format!(
        "
import selectors, socket, subprocess
s = socket.create_connection(('127.0.0.1', {port}))
s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
got = b''
while not got.endswith(b'ok'):
    got += s.recv(4096)
p = subprocess.Popen(['sh', '-c', 'echo started; sleep 1000; echo done'], stdout=subprocess.PIPE)
p.stdout.readline()
sel = selectors.DefaultSelector()
sel.register(s, selectors.EVENT_READ)
sel.register(p.stdout, selectors.EVENT_READ)
print('ready', flush=True)
while True:
    sel.select()
"
    );
    for _ in 0..RUNS {
        let m = Marker::new("diag-keepalive");
        let d = stall(
            &m,
            Session::builder(marked(&m, "python3", &["-c", &script])),
            "ready",
        );
        names_the_leaf(&d, StallKind::Sleeping, "sleep");
        let agent = &d.processes[0];
        assert_eq!(
            agent.syscall.as_deref().map(|c| c.starts_with("epoll")),
            Some(true),
            "{d:#?}"
        );
        assert_ne!(agent.kind, StallKind::NetworkWait, "{d:#?}");
    }
}

/// An MCP-server-like child reads JSON-RPC lines from its parent's pipe (its stdin) while
/// the parent sleeps: never an input wait; the parent's sleep is named. The same with a bash
/// pipeline whose reader waits on the sleeping writer.
#[test]
fn a_reader_of_its_parents_pipe_is_never_awaiting_input() {
    let script = "
import subprocess, sys, time
server = subprocess.Popen([sys.executable, '-c', 'import sys\\nfor line in sys.stdin: print(line, flush=True)'], stdin=subprocess.PIPE)
server.stdin.write(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\\n')
server.stdin.flush()
print('ready', flush=True)
time.sleep(1000)
";
    let m = Marker::new("diag-mcp-pipe");
    let d = stall(
        &m,
        Session::builder(marked(&m, "python3", &["-c", script])),
        "ready",
    );
    let parent = names_the_leaf(&d, StallKind::Sleeping, "python3");
    assert_eq!(parent.pid, d.processes[0].pid, "{d:#?}");
    let server = &d.processes[1];
    assert_eq!(server.kind, StallKind::WaitingOnChild, "{d:#?}");
    assert_eq!(server.waits_on, Some(parent.pid), "{d:#?}");
    assert!(
        d.processes
            .iter()
            .all(|p| p.kind != StallKind::AwaitingInput),
        "{d:#?}"
    );
    let m = Marker::new("diag-bash-pipe");
    let pipeline =
        "sleep 1000 | python3 -c 'import sys; print(\"ready\", flush=True); sys.stdin.readline()'";
    let d = stall(
        &m,
        Session::builder(marked(&m, "bash", &["-c", pipeline])),
        "ready",
    );
    let sleep = names_the_leaf(&d, StallKind::Sleeping, "sleep");
    let reader = d
        .processes
        .iter()
        .find(|p| p.name == "python3")
        .expect("the reader");
    assert_eq!(reader.kind, StallKind::WaitingOnChild, "{d:#?}");
    assert_eq!(reader.waits_on, Some(sleep.pid), "{d:#?}");
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

/// Every socket a stalled tree waits on is named (issue 43): a Unix socket with the process at
/// its other end (here this test process), a UDP peer that never answers, a connection the
/// peer closed under an event loop that never reads it.
#[test]
fn every_socket_a_stalled_tree_waits_on_is_named() {
    let dir = tempfile::tempdir().expect("a folder");
    let path = dir.path().join("srv.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("a Unix socket");
    let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
    let me = std::process::id();
    let comm = std::fs::read_to_string("/proc/self/comm").expect("comm");
    let script = format!(
        "import socket\nc = socket.socket(socket.AF_UNIX)\nc.connect({:?})\nc.sendall(b'x')\n\
         print('ready', flush=True)\nc.recv(1)\n",
        path.to_str().expect("UTF-8")
    );
    let m = Marker::new("diag-unix");
    let d = stall(
        &m,
        Session::builder(marked(&m, "python3", &["-c", &script])),
        "ready",
    );
    let _server_end = held.join().expect("the acceptor");
    assert_eq!(d.kind, StallKind::NetworkWait, "{d:#?}");
    assert_eq!(
        d.summary,
        format!(
            "waiting on the network — python3 (pid {}) waits on {} (pid {me}) over Unix socket \
             {} (recvfrom)",
            d.processes[0].pid,
            comm.trim_end(),
            path.display()
        )
    );

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("a UDP port");
    let peer = udp.local_addr().unwrap();
    let script = format!(
        "import socket\nu = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         u.connect(('127.0.0.1', {}))\nu.send(b'query')\nprint('ready', flush=True)\nu.recv(512)\n",
        peer.port()
    );
    let m = Marker::new("diag-udp");
    let d = stall(
        &m,
        Session::builder(marked(&m, "python3", &["-c", &script])),
        "ready",
    );
    assert_eq!(d.kind, StallKind::NetworkWait, "{d:#?}");
    assert!(
        d.summary.ends_with(&format!("reads UDP peer {peer}")),
        "{}",
        d.summary
    );

    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = tcp.local_addr().unwrap();
    // Accept, then close at once: the child's end is left in CLOSE_WAIT.
    let closer = std::thread::spawn(move || drop(tcp.accept()));
    let script = format!(
        "import os, selectors, socket\ns = socket.create_connection(('127.0.0.1', {}))\n\
         sel = selectors.DefaultSelector()\nfor _ in range(2):\n    r, w = os.pipe()\n    \
         sel.register(r, selectors.EVENT_READ)\nprint('ready', flush=True)\nwhile True:\n    \
         sel.select()\n",
        addr.port()
    );
    let m = Marker::new("diag-close-wait");
    let d = stall(
        &m,
        Session::builder(marked(&m, "python3", &["-c", &script])),
        "ready",
    );
    closer.join().expect("the closer");
    assert_eq!(d.kind, StallKind::NetworkWait, "{d:#?}");
    assert!(
        d.summary.ends_with(&format!(
            "on TCP peer {addr}, which closed the connection (CLOSE_WAIT)"
        )),
        "{}",
        d.summary
    );
}
