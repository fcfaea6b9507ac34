//! Real processes on a real pseudo-terminal. Every test marks its processes with a unique
//! marker (argv `$0` and an environment variable every descendant inherits) and proves at the
//! end that none of them is left; a failing test SIGKILLs its own marked processes by pid.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::*;
use crate::pid::Pid;

const MARKER_ENV: &str = "QUIETUS_TEST_MARKER";
/// How long a handshake or an expected output may take on a loaded machine.
const HANDSHAKE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(10);

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A marker unique to one test; dropping it SIGKILLs (by pid) any process still carrying it.
struct Marker(String);

impl Marker {
    fn new(name: &str) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        Self(format!("sw-pty-{}-{name}-{n}", std::process::id()))
    }

    /// `sh -c SCRIPT MARKER`, with the marker in the environment too.
    fn sh(&self, script: &str) -> Command {
        self.shell("sh", script)
    }

    /// `SHELL -c SCRIPT MARKER`, with the marker in the environment too. The child starts
    /// with SIGINT and SIGQUIT at their defaults, whatever the parent of `cargo test` left: a
    /// command started with `&` by a script (or `nohup`) ignores them, every descendant inherits
    /// that, and a shell cannot undo an ignore it started with — Ctrl-C would then end nothing.
    fn shell(&self, shell: &str, script: &str) -> Command {
        for signal in [sys::SIGINT, sys::SIGQUIT] {
            sys::unsafe_calls::set_disposition(signal, false).expect("a signal's default");
        }
        let mut command = Command::new(shell);
        command
            .arg("-c")
            .arg(script)
            .arg(&self.0)
            .env(MARKER_ENV, &self.0);
        command
    }

    /// Live (not zombie) processes other than this one carrying the marker.
    fn pids(&self) -> Vec<(Pid, String)> {
        let entry = format!("{MARKER_ENV}={}", self.0);
        let own = Pid::current();
        let mut found = Vec::new();
        for dir in std::fs::read_dir("/proc")
            .expect("these tests need /proc")
            .flatten()
        {
            let Some(pid) = dir.file_name().to_str().and_then(Pid::parse) else {
                continue;
            };
            if pid == own {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let marked = cmdline.contains(&self.0)
                || environ.split(|b| *b == 0).any(|e| e == entry.as_bytes());
            if marked && sys::read_stat(pid).is_some_and(|s| !s.is_dead()) {
                found.push((pid, cmdline));
            }
        }
        found
    }

    /// Asserts, polling for a while, that none of this test's processes is left.
    #[track_caller]
    fn assert_no_leak(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.pids();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "leaked processes carrying {}: {left:?}",
                self.0
            );
            thread::sleep(POLL);
        }
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        for (pid, cmdline) in self.pids() {
            eprintln!("cleanup: SIGKILL to our marked pid {pid}: {cmdline}");
            let _ = sys::kill_pid(pid, sys::SIGKILL);
        }
    }
}

/// Everything the terminal delivered so far, read by a thread on a [`MasterReader`].
struct Transcript {
    chunks: Receiver<io::Result<Vec<u8>>>,
    bytes: Vec<u8>,
    ended: bool,
}

impl Transcript {
    fn start(pty: &Pty) -> Self {
        let mut reader = pty.reader().expect("a copy of the master");
        let (tx, chunks) = crossbeam_channel::unbounded();
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(n) => {
                        let _ = tx.send(Ok(buf[..n].to_vec()));
                        if n == 0 {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        Self {
            chunks,
            bytes: Vec::new(),
            ended: false,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// Takes one chunk within `timeout`; false when none came.
    fn take(&mut self, timeout: Duration) -> bool {
        match self.chunks.recv_timeout(timeout) {
            Ok(Ok(chunk)) => {
                self.ended |= chunk.is_empty();
                self.bytes.extend_from_slice(&chunk);
                true
            }
            Ok(Err(e)) => panic!("reading the master failed: {e} (so far: {:?})", self.text()),
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => {
                assert!(self.ended, "the reader stopped without an end");
                false
            }
        }
    }

    /// Reads until `needle` occurs `count` times.
    #[track_caller]
    fn wait_count(&mut self, needle: &str, count: usize) {
        let deadline = Instant::now() + HANDSHAKE;
        while self.text().matches(needle).count() < count {
            assert!(
                !self.ended && Instant::now() < deadline,
                "no {count} x {needle:?} on the terminal; it showed {:?}",
                self.text()
            );
            self.take(POLL);
        }
    }

    #[track_caller]
    fn wait_for(&mut self, needle: &str) {
        self.wait_count(needle, 1);
    }

    /// Reads until the end (the master's EOF), which must come.
    #[track_caller]
    fn wait_end(&mut self) -> String {
        let deadline = Instant::now() + HANDSHAKE;
        while !self.ended {
            assert!(
                Instant::now() < deadline,
                "the terminal did not end; it showed {:?}",
                self.text()
            );
            self.take(POLL);
        }
        self.text()
    }
}

/// Waits (polling) for `child` to exit.
#[track_caller]
fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + HANDSHAKE;
    loop {
        if let Some(status) = child.try_wait().expect("our own child") {
            return status;
        }
        assert!(Instant::now() < deadline, "pid {} did not exit", child.id());
        thread::sleep(POLL);
    }
}

/// (session id, controlling tty number) from `/proc/<pid>/stat` fields 6 and 7.
fn session_and_tty(pid: Pid) -> (u32, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("a live child");
    let rest = &stat[stat.rfind(')').expect("stat has a name") + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    (
        fields[3].parse().expect("a session id"),
        fields[4].parse().expect("a tty number"),
    )
}

#[test]
fn the_child_has_the_terminal_on_0_1_2_and_leads_its_own_session_and_group() {
    let marker = Marker::new("tty012");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh(
        "if test -t 0 && test -t 1 && test -t 2; then echo all-three-tty; else echo not-a-tty; fi; \
         echo ready; exec sleep 1000",
    );
    let mut child = pty.spawn(&mut command, true).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");
    assert!(out.text().contains("all-three-tty"), "{:?}", out.text());

    let pid = Pid::of(&child);
    let stat = sys::read_stat(pid).expect("the live child");
    assert_eq!(stat.pgrp, Some(pid), "its process group is its pid");
    let (session, tty) = session_and_tty(pid);
    assert_eq!(session, pid.get(), "it leads a new session");
    assert_ne!(tty, 0, "it has a controlling terminal");
    assert_eq!(
        pty.foreground_group()
            .expect("the terminal's foreground group"),
        pid,
        "its group is the terminal's foreground group"
    );
    // Quietus's own session is untouched.
    assert_ne!(session_and_tty(Pid::current()).0, session);

    sys::kill_group(pid, sys::SIGKILL).expect("our own child's group");
    assert_eq!(wait_exit(&mut child).signal(), Some(sys::SIGKILL));
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn stty_size_shows_the_size_asked_for_and_the_new_one_after_a_resize() {
    let marker = Marker::new("size");
    let mut pty = Pty::open(31, 97).expect("a pseudo-terminal");
    assert_eq!(pty.size().expect("its size"), (31, 97));
    let mut command = marker.sh(
        "trap 'echo \"winch $(stty size)\"' WINCH; echo \"start $(stty size)\"; echo ready; \
         while :; do sleep 0.05; done",
    );
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");
    assert!(out.text().contains("start 31 97"), "{:?}", out.text());

    pty.resize(42, 133).expect("a resize");
    out.wait_for("winch 42 133");
    assert_eq!(pty.size().expect("its size"), (42, 133));
    pty.resize(7, 20).expect("a second resize");
    out.wait_for("winch 7 20");

    let pid = Pid::of(&child);
    sys::kill_group(pid, sys::SIGKILL).expect("our own child's group");
    wait_exit(&mut child);
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn ctrl_c_through_the_terminal_ends_a_child_that_only_dies_of_sigint() {
    let marker = Marker::new("intr");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("trap '' TERM HUP QUIT; echo ready; exec sleep 1000");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");

    assert_eq!(pty.interrupt().expect("a write"), 0x03, "the default VINTR");
    assert_eq!(wait_exit(&mut child).signal(), Some(sys::SIGINT));
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn ctrl_c_uses_the_interrupt_character_the_program_set() {
    let marker = Marker::new("intr-char");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    // ^X (0x18) is the interrupt character now; 0x03 is an ordinary byte.
    let mut command = marker.sh("stty intr '^X'; echo ready; exec sleep 1000");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");

    assert_eq!(pty.interrupt().expect("a write"), 0x18);
    assert_eq!(wait_exit(&mut child).signal(), Some(sys::SIGINT));
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn ctrl_c_reaches_a_job_a_shell_moved_to_another_group() {
    let marker = Marker::new("intr-job");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    // With job control the shell runs `sleep` in a group of its own and makes that group the
    // terminal's foreground group: a SIGINT to the shell's group would miss the job. The shell
    // goes on after the job and says how it ended. (dash re-raises SIGINT on itself once a
    // foreground job died of it, and bash ends the script: the trap keeps the shell going.)
    let mut command =
        marker.sh("trap : INT; set -m; echo ready; sleep 1000; echo \"job-ended:$?\"; exit 7");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");
    let shell = Pid::of(&child);
    let deadline = Instant::now() + HANDSHAKE;
    let job = loop {
        let group = pty.foreground_group().expect("the foreground group");
        if group != shell {
            break group;
        }
        assert!(Instant::now() < deadline, "the shell never started its job");
        thread::sleep(POLL);
    };
    assert_ne!(job, shell);

    pty.interrupt().expect("a write");
    out.wait_for(&format!("job-ended:{}", 128 + sys::SIGINT));
    assert_eq!(
        wait_exit(&mut child).code(),
        Some(7),
        "the shell was not interrupted"
    );
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn a_line_typed_into_the_terminal_round_trips_through_python() {
    let marker = Marker::new("python");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("exec python3 -c 'print(\"got:\" + input())'");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    let line = format!("line-{}", marker.0);
    pty.write(format!("{line}\n").as_bytes()).expect("a write");
    let text = out.wait_end();
    assert!(text.contains(&format!("got:{line}\r\n")), "{text:?}");
    assert!(wait_exit(&mut child).success(), "{text:?}");
    marker.assert_no_leak();
}

#[test]
fn eof_after_a_full_line_is_one_eof_character() {
    let marker = Marker::new("eof-line");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("echo ready; cat; echo first-done; cat; echo second-done");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");

    pty.write(b"full-line\n").expect("a write");
    assert_eq!(pty.send_eof().expect("a write"), 1);
    out.wait_for("first-done");
    // Had a second EOF been sent, the second cat would have ended already: it still copies.
    pty.write(b"probe-line\n").expect("a write");
    out.wait_count("probe-line", 2); // the terminal's echo and cat's copy
    assert!(!out.text().contains("second-done"), "{:?}", out.text());
    // Nothing written since the line end: one EOF again.
    assert_eq!(pty.send_eof().expect("a write"), 1);
    out.wait_for("second-done");
    assert!(wait_exit(&mut child).success());
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn eof_after_a_partial_line_delivers_it_and_then_ends_input_once() {
    let marker = Marker::new("eof-partial");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("echo ready; cat; echo first-done; cat; echo second-done");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");

    pty.write(b"partial").expect("a write");
    assert_eq!(pty.send_eof().expect("a write"), 2);
    out.wait_for("first-done");
    // The echo "partial", then cat's copy "partial" (no newline).
    assert!(out.text().contains("partialpartial"), "{:?}", out.text());
    pty.write(b"probe-line\n").expect("a write");
    out.wait_count("probe-line", 2);
    assert!(!out.text().contains("second-done"), "{:?}", out.text());
    assert_eq!(pty.send_eof().expect("a write"), 1);
    out.wait_for("second-done");
    assert!(wait_exit(&mut child).success());
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn eof_with_nothing_written_ends_cat() {
    let marker = Marker::new("eof-cat");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("echo ready; exec cat");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");
    assert_eq!(pty.send_eof().expect("a write"), 1);
    assert!(wait_exit(&mut child).success());
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn the_master_reads_the_end_not_an_error_once_the_child_exited_with_every_byte() {
    let marker = Marker::new("end");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("head -c 300000 /dev/zero | tr '\\0' x; echo; echo bye");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut reader = pty.reader().expect("a copy of the master");
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .expect("the end reads as EOF, not EIO");
    assert!(wait_exit(&mut child).success());
    assert_eq!(bytes.iter().filter(|b| **b == b'x').count(), 300_000);
    assert!(
        bytes.ends_with(b"\r\nbye\r\n"),
        "{:?}",
        &bytes[bytes.len().saturating_sub(20)..]
    );
    // And again: the end stays the end.
    assert_eq!(reader.read(&mut [0u8; 16]).expect("still EOF"), 0);
    marker.assert_no_leak();
}

#[test]
fn a_grandchild_holding_the_slave_keeps_the_master_open_until_it_goes() {
    let marker = Marker::new("holder");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    // The grandchild ignores the SIGHUP the kernel sends the foreground group when the session
    // leader exits, and keeps the slave (its stdin, stdout and stderr) open.
    // (Ignored before the fork, so the grandchild ignores it from its first instruction.)
    let mut command = marker.sh("trap '' HUP; sleep 1000 & echo \"holder=$!\"; echo ready");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    out.wait_for("ready");
    assert!(wait_exit(&mut child).success());
    let text = out.text();
    let holder = text
        .split("holder=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(Pid::parse)
        .unwrap_or_else(|| panic!("no holder pid in {text:?}"));

    // At least a second without an end while the holder lives (a lower bound only).
    let quiet_until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < quiet_until {
        out.take(POLL);
        assert!(
            !out.ended,
            "the master ended while a grandchild held the slave"
        );
    }
    assert!(sys::read_stat(holder).is_some_and(|s| !s.is_dead()));

    sys::kill_pid(holder, sys::SIGKILL).expect("our own grandchild");
    out.wait_end();
    marker.assert_no_leak();
}

#[test]
fn the_parent_keeps_no_copy_of_the_slave_after_the_spawn() {
    let marker = Marker::new("noslave");
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = marker.sh("echo done");
    let mut child = pty.spawn(&mut command, false).expect("sh runs");
    let mut out = Transcript::start(&pty);
    assert!(wait_exit(&mut child).success());
    // `command` is still alive here: had it kept its stdio copies, the end would never come.
    out.wait_end();
    drop(command);
    marker.assert_no_leak();
}

#[test]
fn a_terminal_runs_one_program_and_rejects_a_zero_size() {
    assert_eq!(
        Pty::open(0, 80).expect_err("zero rows").kind(),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        Pty::open(24, 0).expect_err("zero columns").kind(),
        io::ErrorKind::InvalidInput
    );
    let mut pty = Pty::open(1, 1).expect("the smallest terminal");
    assert_eq!(pty.size().expect("its size"), (1, 1));
    assert_eq!(
        pty.resize(0, 10).expect_err("zero rows").kind(),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(pty.size().expect("its size"), (1, 1), "unchanged");
    pty.resize(u16::MAX, u16::MAX).expect("the largest size");
    assert_eq!(pty.size().expect("its size"), (u16::MAX, u16::MAX));

    let mut command = Command::new("true");
    pty.spawned(&mut command);
    let again = pty
        .prepare(&mut command, false, None, None, None)
        .expect_err("the slave is gone");
    assert_eq!(again.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn a_failed_spawn_still_releases_the_slave() {
    let mut pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let mut command = Command::new("/nonexistent/quietus-pty-test");
    assert!(pty.spawn(&mut command, false).is_err());
    let mut reader = pty.reader().expect("a copy of the master");
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).expect("the end, at once");
    assert!(bytes.is_empty());
}

#[test]
fn line_ends_follow_the_terminal_settings() {
    let cooked = sys::LineDiscipline {
        canonical: true,
        signals: true,
        interrupt: Some(0x03),
        eof: Some(0x04),
        eol: [None, Some(b';')],
        cr_ends_line: true,
    };
    for byte in [b'\n', b'\r', 0x04, b';'] {
        assert!(cooked.ends_line(byte), "{byte:#x}");
    }
    for byte in [b'a', 0x03, 0x00, 0xff] {
        assert!(!cooked.ends_line(byte), "{byte:#x}");
    }
    let no_icrnl = sys::LineDiscipline {
        cr_ends_line: false,
        ..cooked
    };
    assert!(!no_icrnl.ends_line(b'\r'));
}

#[test]
fn the_master_reports_the_slave_line_discipline() {
    let pty = Pty::open(24, 80).expect("a pseudo-terminal");
    let discipline = sys::line_discipline(pty.master_fd()).expect("its settings");
    // A new pseudo-terminal is cooked: canonical, signals on, ^C and ^D.
    assert!(discipline.canonical && discipline.signals);
    assert_eq!(discipline.interrupt, Some(0x03));
    assert_eq!(discipline.eof, Some(0x04));
    assert!(discipline.cr_ends_line);
}
