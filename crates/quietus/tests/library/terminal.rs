//! Terminal sessions (`SessionBuilder::pty`, issue 14): the child on a pseudo-terminal, with
//! resize, Ctrl-C through the terminal, typed input, and the terminal stream watched, kept and
//! logged. Real processes, each test with its own marker and the leak check.

use crate::support as common;
use crate::support::fault as fault_support;
use quietus::config::MonitorConfigBuilder;

use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    GENEROUS, MARKER_ENV, Marker, SharedBuf, assert_no_leak, ms, poll_until, wait_generously,
};
use fault_support::{fingerprint, ladder_config};
use quietus::{
    CaptureConfig, Event, MockClock, MonitorConfig, Outcome, Session, SessionState, Signal, Stream,
};

/// A terminal session of `script` (run by `sh -c` with the marker) writing to `buf`.
fn spawn_on_terminal(
    m: &Marker,
    script: &str,
    config: impl Into<MonitorConfigBuilder>,
) -> (Session, SharedBuf) {
    let buf = SharedBuf::new();
    let session = Session::builder(m.sh(script))
        .pty(24, 80)
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .expect("sh can be spawned on a terminal");
    (session, buf)
}

#[test]
fn the_child_has_a_tty_on_0_1_2_and_leads_its_session_and_group() {
    let m = Marker::new("tty-fds");
    let (session, buf) = spawn_on_terminal(
        &m,
        "test -t 0 && test -t 1 && test -t 2 && echo all-three-ttys; \
         set -- $(cut -d')' -f2 /proc/$$/stat); echo \"pid=$$ pgid=$3 sid=$4\"",
        MonitorConfig::default(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    let pid = session.pid();
    let text = buf.text();
    assert!(text.contains("all-three-ttys\r\n"), "{text:?}");
    assert!(
        text.contains(&format!("pid={pid} pgid={pid} sid={pid}")),
        "the child leads its own group and session: {text:?}"
    );
    assert!(session.is_terminal());
    let snapshot = session.output();
    let terminal = snapshot
        .terminal
        .expect("a terminal session keeps the terminal stream");
    assert_eq!(terminal.render_lossy(), text, "kept = delivered");
    assert!(snapshot.stdout.is_none() && snapshot.stderr.is_none());
    assert_eq!(session.output_bytes(Stream::Terminal), text.len() as u64);
    assert_eq!(session.output_bytes(Stream::Stderr), 0);
    assert_no_leak(&m);
}

#[test]
fn stty_shows_the_size_asked_for_and_the_new_one_after_a_resize() {
    let m = Marker::new("tty-size");
    let buf = SharedBuf::new();
    let session = Session::builder(m.sh(
        "stty size; trap 'stty size; echo winched; exit 0' WINCH; echo ready; \
         while :; do sleep 0.05; done",
    ))
    .pty(33, 101)
    .stdout(buf.sink())
    .spawn()
    .expect("sh can be spawned on a terminal");
    buf.wait_for("ready\r\n");
    assert_eq!(buf.text(), "33 101\r\nready\r\n");
    assert_eq!(session.terminal_size(), Some((33, 101)));
    session.resize(50, 132).expect("a terminal can be resized");
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "the shell saw SIGWINCH: {result:#?}");
    assert!(
        buf.text().ends_with("50 132\r\nwinched\r\n"),
        "{:?}",
        buf.text()
    );
    assert_eq!(
        session.resize(0, 10).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    assert_no_leak(&m);
}

#[test]
fn a_pipe_session_cannot_be_resized_and_its_interrupt_is_sigint_to_the_group() {
    let m = Marker::new("pipe-resize");
    let buf = SharedBuf::new();
    let session = Session::builder(m.sh("trap '' TERM; echo ready; exec sleep 100000"))
        .stdout(buf.sink())
        .spawn()
        .expect("sh can be spawned");
    buf.wait_for("ready\n");
    assert!(!session.is_terminal());
    assert_eq!(session.terminal_size(), None);
    let err = session.resize(24, 80).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    session.interrupt().expect("SIGINT can be sent");
    let result = wait_generously(&session);
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(2),
        "{result:#?}"
    );
    assert_no_leak(&m);
}

#[test]
fn ctrl_c_through_the_terminal_ends_a_child_that_only_dies_of_sigint() {
    let m = Marker::new("tty-ctrl-c");
    let (session, buf) = spawn_on_terminal(
        &m,
        "trap '' TERM HUP QUIT; echo ready; exec sleep 100000",
        MonitorConfig::default(),
    );
    buf.wait_for("ready\r\n");
    session.interrupt().expect("Ctrl-C can be typed");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(2),
        "{result:#?}"
    );
    assert!(result.signals_sent.is_empty(), "no ladder: {result:#?}");
    assert_no_leak(&m);
}

#[test]
fn ctrl_c_reaches_a_job_a_shell_moved_to_another_group() {
    // `bash` with job control (`set -m`) runs `sleep` in a process group of its own and makes it the
    // terminal's foreground group: SIGINT to the session's group would miss it, Ctrl-C through
    // the terminal does not.
    let m = Marker::new("tty-job");
    let buf = SharedBuf::new();
    let mut command = Command::new("bash");
    command
        .args([
            "-c",
            "set -m; echo ready; sleep 100000; echo \"job-ended-$?\"",
            m.as_str(),
        ])
        .env(MARKER_ENV, m.as_str());
    let session = Session::builder(command)
        .pty(24, 80)
        .stdout(buf.sink())
        .spawn()
        .expect("bash can be spawned on a terminal");
    buf.wait_for("ready\r\n");
    // The job has its own group, in the foreground: wait for it.
    let pid = i64::from(session.pid().get());
    assert!(
        poll_until(GENEROUS, || foreground_group_of(session.pid())
            .is_some_and(|g| g != pid)),
        "the shell never moved a job to the foreground"
    );
    session.interrupt().expect("Ctrl-C can be typed");
    // The job died of the SIGINT and the run ended without any ladder (bash then ends
    // itself as if interrupted, as a non-interactive shell does).
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(result.signals_sent.is_empty(), "no ladder: {result:#?}");
    assert!(buf.text().starts_with("ready\r\n^C"), "{:?}", buf.text());
    assert_no_leak(&m);
}

/// The terminal's foreground process group as the child's `/proc/<pid>/stat` shows it
/// (`tpgid`, the 8th field).
fn foreground_group_of(pid: quietus::Pid) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(5)?.parse().ok()
}

#[test]
fn python_input_round_trips_a_typed_line() {
    let m = Marker::new("tty-python");
    let buf = SharedBuf::new();
    let mut command = common::program("python3");
    command
        .args(["-c", "print('ready'); print('got:' + input())"])
        .env(MARKER_ENV, m.as_str());
    let session = Session::builder(command)
        .pty(24, 80)
        .stdout(buf.sink())
        .spawn()
        .expect("python3 can be spawned on a terminal");
    // The whole line: the terminal's output processing (`\n` to `\r\n`) may hand over "ready"
    // and its line end in two reads, and an echo typed in between lands inside the line (seen
    // on a loaded machine: "readyhello terminal\r\n\r\n…"). So every handshake on a terminal
    // here waits for the line end.
    buf.wait_for("ready\r\n");
    session.write_stdin(b"hello terminal\n").unwrap();
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    // The terminal echoes the typed line, then the program prints it back.
    assert_eq!(
        buf.text(),
        "ready\r\nhello terminal\r\ngot:hello terminal\r\n"
    );
    assert_no_leak(&m);
}

#[test]
fn close_stdin_sends_end_of_file_the_terminal_way_after_a_partial_line() {
    let m = Marker::new("tty-eof");
    let (session, buf) = spawn_on_terminal(
        &m,
        "echo ready; n=$(wc -c); echo \"count=$n\"",
        MonitorConfig::default(),
    );
    buf.wait_for("ready\r\n");
    session.write_stdin(b"abc").unwrap(); // no newline: EOF twice (deliver, then end)
    session.close_stdin();
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    assert!(buf.text().contains("count=3\r\n"), "{:?}", buf.text());
    assert_eq!(
        session.write_stdin(b"late").unwrap_err().kind(),
        io::ErrorKind::NotConnected
    );
    assert_no_leak(&m);
}

#[test]
fn a_silent_program_on_a_terminal_is_ended_at_the_idle_timeout() {
    let m = Marker::new("tty-silent");
    let started = Instant::now();
    let (session, buf) = spawn_on_terminal(
        &m,
        "echo ready; exec sleep 100000",
        MonitorConfig::builder()
            .idle_timeout(ms(600))
            .build()
            .unwrap(),
    );
    buf.wait_for("ready\r\n");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(started.elapsed() >= ms(600));
    assert_no_leak(&m);
}

#[test]
fn a_chatty_program_on_a_terminal_is_not_ended() {
    let m = Marker::new("tty-chatty");
    let started = Instant::now();
    let (session, buf) = spawn_on_terminal(
        &m,
        // A bar that grows (what it shows changes; a counter alone would not count).
        "i=0; bar=; while [ $i -lt 25 ]; do bar=\"$bar#\"; printf '%s %s\\r' $bar $i; \
         sleep 0.1; i=$((i+1)); done; echo done",
        MonitorConfig::builder()
            .idle_timeout(ms(1500))
            .build()
            .unwrap(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(started.elapsed() >= ms(2500), "{:?}", started.elapsed());
    assert!(buf.text().ends_with(" 24\rdone\r\n"), "{:?}", buf.text());
    assert_no_leak(&m);
}

#[test]
fn a_term_ignoring_tree_on_a_terminal_is_escalated_and_leaves_nothing() {
    let m = Marker::new("tty-tree");
    let (session, buf) = spawn_on_terminal(
        &m,
        "trap '' TERM HUP; (trap '' TERM HUP; sleep 100000) & \
         (trap '' TERM HUP; sh -c 'sleep 100000' \"$0\") & echo ready; wait",
        ladder_config(),
    );
    buf.wait_for("ready\r\n");
    assert!(m.pids().len() >= 3, "{:?}", m.pids());
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(
        result.escalated,
        "TERM was ignored: KILL followed: {result:#?}"
    );
    assert_eq!(
        result.signals_sent.first().copied(),
        Some(Signal::TERM),
        "{result:#?}"
    );
    assert_eq!(session.state(), SessionState::Ended);
    assert_no_leak(&m);
}

#[test]
fn a_grandchild_holding_the_terminal_open_does_not_hang_the_end() {
    // The sleeper leaves the session (setsid) but keeps the terminal as its stdout: the master
    // never reads the end. The drain stops at quiet output, as for a held pipe.
    let m = Marker::new("tty-held");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let up = dir.path().join("up");
    let started = Instant::now();
    let (session, buf) = spawn_on_terminal(
        &m,
        &format!(
            "setsid sh -c ': > \"$1\"; exec sleep 1000' held '{up}' & \
             while [ ! -e '{up}' ]; do sleep 0.01; done; echo bye",
            up = up.display()
        ),
        MonitorConfig::builder()
            .idle_timeout(Duration::from_secs(60))
            .drain_cap(ms(1000))
            .keep_leftovers(true)
            .build()
            .unwrap(),
    );
    let result = wait_generously(&session);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert_eq!(buf.text(), "bye\r\n");
    assert!(!result.output_complete, "{result:#?}");
    // Our own cleanup: the sleeper carries our marker (leftovers were kept).
    for p in m.pids() {
        let status = Command::new("kill")
            .arg("-KILL")
            .arg(p.pid.to_string())
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "{p:?}");
    }
    assert_no_leak(&m);
}

#[test]
fn the_terminal_log_has_the_sha256_of_the_delivered_bytes_and_output_events() {
    let m = Marker::new("tty-log");
    let logs = tempfile::tempdir().expect("a temporary directory");
    let config = MonitorConfig::builder()
        .capture(
            CaptureConfig::builder()
                .log_dir(logs.path())
                .spill_threshold(1024),
        )
        .build()
        .unwrap();
    let (session, buf) =
        spawn_on_terminal(&m, "seq 1 40000; printf '\\033[1mbold\\033[0m'", config);
    let mut events = session.events();
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0, "{result:#?}");
    let delivered = buf.bytes();
    assert!(delivered.ends_with(b"40000\r\n\x1b[1mbold\x1b[0m"));
    let [log] = &result.logs[..] else {
        panic!("one log: {:#?}", result.logs)
    };
    assert_eq!(log.stream, Stream::Terminal);
    assert!(!log.incomplete, "{log:#?}");
    let name = log.path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("terminal"), "{name}");
    let print = fingerprint(&delivered);
    assert_eq!(log.bytes, print.len);
    assert_eq!(log.sha256, print.sha256);
    assert_eq!(fingerprint(&std::fs::read(&log.path).unwrap()), print);
    let mut seen = Vec::new();
    for event in events.iter() {
        if let Event::Output { stream, bytes, .. } = event {
            assert_eq!(stream, Stream::Terminal);
            seen.extend_from_slice(&bytes);
        }
    }
    assert!(!seen.is_empty(), "Output events for the terminal");
    assert_no_leak(&m);
}

#[test]
fn a_mock_clock_drives_a_terminal_session() {
    let m = Marker::new("tty-mock");
    let clock = MockClock::new();
    let buf = SharedBuf::new();
    let session = Session::builder(m.sh("echo ready; exec sleep 100000"))
        .pty(24, 80)
        .clock(clock.clone())
        .stdout(buf.sink())
        .spawn()
        .expect("sh can be spawned on a terminal");
    buf.wait_for("ready\r\n");
    assert!(
        clock.wait_for_timers(1, GENEROUS),
        "the monitor armed a timer"
    );
    clock.advance(Duration::from_secs(299));
    assert!(clock.wait_for_timers(1, GENEROUS));
    assert!(
        session.try_wait().is_none(),
        "ended before the idle timeout"
    );
    clock.advance(Duration::from_secs(1));
    let result = session.wait();
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(result.runtime, Duration::from_secs(300));
    assert_no_leak(&m);
}

#[test]
fn stdin_cannot_be_both_a_file_and_the_terminal() {
    let m = Marker::new("tty-stdin");
    let err = Session::builder(m.sh("exit 0"))
        .pty(24, 80)
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap_err();
    assert_eq!(err.io_error_kind(), io::ErrorKind::InvalidInput);
    let err = Session::builder(m.sh("exit 0"))
        .pty(0, 80)
        .spawn()
        .unwrap_err();
    assert_eq!(err.io_error_kind(), io::ErrorKind::InvalidInput);
    assert_no_leak(&m);
}

/// A TUI over a stalled model stream, in bash: a braille spinner, an elapsed-time counter, the
/// window title and colours redrawn 10 times a second, nothing new shown.
const BASH_SPINNER: &str = "printf 'say hi\\r\\n'; echo ready; i=0; while :; do \
    for f in ⠋ ⠙ ⠹ ⠸ ⠼ ⠴; do \
    printf '\\033]0;%s agent\\007\\r\\033[3%sm%s\\033[0m Thinking... (esc to cancel, %ss)' \
    $f $((i % 7)) $f $i; sleep 0.1; done; i=$((i+1)); done";

/// The same in Python (Claude Code's frames: dingbat stars, the counter in its own colour).
const PY_SPINNER: &str = r#"
import sys, time, itertools
print('say hi\r'); print('ready\r'); sys.stdout.flush()
t0 = time.time()
for n, f in enumerate(itertools.cycle('·✢*✶✻✽✻✶*✢')):
    sys.stdout.write('\x1b[1G\x1b[38;5;%dm%s\x1b[39m Levitating… \x1b[38;5;246m(%ds)\x1b[39m'
                     % (131 + n % 5, f, time.time() - t0))
    sys.stdout.flush()
    time.sleep(0.15)
"#;

#[test]
fn a_spinner_and_a_counter_on_a_terminal_show_no_progress() {
    // Judged by the screen: the bytes never stop, the text never changes (spinner glyphs,
    // digits, colours and the title aside), so the tree is ended one idle timeout after the
    // prompt, bash and Python alike.
    for (name, program) in [("bash", None), ("python", Some(PY_SPINNER))] {
        let m = Marker::new(&format!("tty-spinner-{name}"));
        let started = Instant::now();
        let config = MonitorConfig::builder()
            .idle_timeout(ms(1500))
            .build()
            .unwrap();
        let (session, buf) = match program {
            None => {
                let mut command = Command::new("bash");
                command
                    .args(["-c", BASH_SPINNER, m.as_str()])
                    .env(MARKER_ENV, m.as_str());
                spawn_command_on_terminal(command, config)
            }
            Some(code) => {
                let mut command = Command::new("python3");
                command
                    .args(["-c", code, m.as_str()])
                    .env(MARKER_ENV, m.as_str());
                spawn_command_on_terminal(command, config)
            }
        };
        buf.wait_for("ready");
        let result = wait_generously(&session);
        assert!(
            matches!(result.outcome, Outcome::IdleTimeout(_)),
            "{name}: {result:#?}"
        );
        assert!(started.elapsed() >= ms(1500), "{name}");
        // It wrote all along.
        assert!(
            session.output_bytes(Stream::Terminal) > 300,
            "{name}: {}",
            session.output_bytes(Stream::Terminal)
        );
        assert_no_leak(&m);
    }
}

#[test]
fn a_slow_answer_between_spinner_frames_is_kept_alive() {
    // The same spinner, and a word of the answer every 0.6 s for 4 s: text appears on the
    // screen, so the tree is not ended at its 1.5 s idle timeout.
    let m = Marker::new("tty-answer");
    let started = Instant::now();
    let code = r#"
import sys, time
print('ready\r'); sys.stdout.flush()
words = 'the answer is being written one word at a time by a slow model'.split()
for w in words[:7]:
    for f in '⠋⠙⠹⠸':
        sys.stdout.write('\x1b[s\x1b[10;1H%s Thinking...\x1b[u' % f)
        sys.stdout.flush()
        time.sleep(0.15)
    sys.stdout.write(w + ' ')
    sys.stdout.flush()
print('\r\ndone\r')
"#;
    let mut command = Command::new("python3");
    command
        .args(["-c", code, m.as_str()])
        .env(MARKER_ENV, m.as_str());
    let (session, buf) = spawn_command_on_terminal(
        command,
        MonitorConfig::builder()
            .idle_timeout(ms(1500))
            .build()
            .unwrap(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(started.elapsed() >= ms(4000), "{:?}", started.elapsed());
    assert!(buf.text().contains("done"), "{:?}", buf.text());
    assert_no_leak(&m);
}

/// A model server outside the tree that answers a request with its headers and one event,
/// then holds the stream open, saying nothing more (a stalled model stream).
fn stalled_stream_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf);
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n\
              event: message_start\ndata: {}\n\n",
        );
        // Held until the client goes.
        while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
    });
    port
}

#[test]
fn an_interactive_agent_over_a_stalled_stream_is_a_network_wait_not_awaiting_input() {
    // An agent's TUI on the terminal: one event loop on its terminal (keys) and its model
    // stream, the stream begun and stopped, its spinner and counter redrawn all along. It is
    // ended at the idle timeout, and it waits on the network, not on its terminal.
    let port = stalled_stream_server();
    let m = Marker::new("tty-agent-stalled");
    let code = format!(
        r#"
import selectors, socket, sys, time
s = socket.create_connection(('127.0.0.1', {port}))
s.sendall(b'POST /v1/messages HTTP/1.1\r\nHost: x\r\n\r\n')
got = b''
while b'message_start' not in got:
    got += s.recv(4096)
sel = selectors.DefaultSelector()
sel.register(sys.stdin, selectors.EVENT_READ)
sel.register(s, selectors.EVENT_READ)
print('ready\r'); sys.stdout.flush()
t0 = time.time()
n = 0
while True:
    for key, _ in sel.select(0.15):
        if key.fileobj is s and not s.recv(4096):
            sys.exit(0)
    n += 1
    sys.stdout.write('\x1b[1G%s Thinking... (%ds)' % ('|/-\\'[n % 4], time.time() - t0))
    sys.stdout.flush()
"#
    );
    let mut command = Command::new("python3");
    command
        .args(["-c", &code, m.as_str()])
        .env(MARKER_ENV, m.as_str());
    let (session, buf) = spawn_command_on_terminal(
        command,
        MonitorConfig::builder()
            .idle_timeout(ms(1500))
            .build()
            .unwrap(),
    );
    buf.wait_for("ready");
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{result:#?}");
    };
    let d = report.diagnosis.clone().expect("a diagnosis");
    assert_eq!(d.kind, quietus::diagnosis::StallKind::NetworkWait, "{d:#?}");
    assert!(d.summary.contains("TCP peer 127.0.0.1:"), "{}", d.summary);
    assert_no_leak(&m);
}

/// A terminal session of `command` writing to a buffer.
fn spawn_command_on_terminal(command: Command, config: MonitorConfig) -> (Session, SharedBuf) {
    let buf = SharedBuf::new();
    let session = Session::builder(command)
        .pty(24, 80)
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .expect("the program can be spawned on a terminal");
    (session, buf)
}
