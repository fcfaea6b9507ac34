//! `quietus --pty` on a real terminal: each test runs quietus inside its own `tmux`
//! server (`tmux -L <unique socket>`, so it never touches anybody else's sessions), types keys
//! and resizes the window through tmux, and checks that the outer terminal's settings
//! (`stty -g`) are identical before and after, also when quietus is ended by SIGTERM.

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{GENEROUS, MARKER_ENV, Marker, assert_no_leak, poll_until};

/// A tmux server of this test's own, ended (only it, by its socket) on drop.
struct Tmux {
    socket: String,
    marker: String,
}

impl Tmux {
    /// Starts a server with one detached 30x100 window running `script` (by `sh -c`, with the
    /// marker as `$0` and `program` as `$1`).
    fn start_with_program(m: &Marker, script: &str, program: &str) -> Tmux {
        let tmux = Tmux {
            socket: m.as_str().to_owned(),
            marker: m.as_str().to_owned(),
        };
        let out = tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            "-c",
            script,
            m.as_str(),
            program,
        ]);
        assert!(out.status.success(), "tmux starts: {out:?}");
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut command = common::program("tmux");
        command.arg("-L").arg(&self.socket).args(args);
        command.env(MARKER_ENV, &self.marker).env("TERM", "xterm");
        for var in cli_support::option_vars() {
            command.env_remove(var);
        }
        command.env_remove("TMUX").env_remove("RUST_LOG");
        command.output().expect("tmux runs")
    }

    /// The pane's text now.
    fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "t"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (generously) until the pane shows `needle`.
    #[track_caller]
    fn wait_for(&self, needle: &str) {
        if !poll_until(GENEROUS, || self.screen().contains(needle)) {
            panic!("the pane never showed {needle:?}:\n{}", self.screen());
        }
    }

    /// Types `keys` (tmux key names: `Enter`, `C-c`, or literal text).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "{out:?}");
    }

    /// The terminal device of the pane.
    fn pane_tty(&self) -> String {
        let out = self.run(&["display-message", "-p", "-t", "t", "#{pane_tty}"]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let socket = self.run(&["display-message", "-p", "#{socket_path}"]);
        let _ = self.run(&["kill-server"]);
        // The server leaves its socket file behind: ours, by its unique name.
        let path = String::from_utf8_lossy(&socket.stdout).trim().to_owned();
        if path.ends_with(&self.socket) {
            let _ = fs::remove_file(path);
        }
    }
}

/// The settings of the terminal `tty` now (`stty -g`).
fn stty_of(tty: &str) -> String {
    let out = Command::new("stty")
        .arg("-g")
        .arg("-F")
        .arg(tty)
        .output()
        .expect("stty runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `stty -g > before; quietus --pty ARGS -- PROGRAM…; stty -g > after`, then the exit
/// status on screen and a shell that waits (so the pane stays for the checks).
fn around_quietus(dir: &Path, quietus_words: &str) -> String {
    format!(
        "stty -g > '{d}/before'; {words}; echo \"sw-exit=$?\"; stty -g > '{d}/after'; \
         echo all-done; exec sleep 100000",
        d = dir.display(),
        words = quietus_words,
    )
}

fn quietus() -> &'static str {
    env!("CARGO_BIN_EXE_quietus")
}

fn read(path: PathBuf) -> String {
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}

#[test]
fn typed_keys_a_resize_and_ctrl_c_reach_the_program_and_the_terminal_is_restored() {
    let m = Marker::new("cli-tty-keys");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path().display().to_string();
    let program = format!(
        "echo ready-for-keys; IFS= read -r line; echo \"typed:[$line]\"; \
         trap 'stty size > {d}/size; echo winched' WINCH; echo waiting-for-resize; \
         while :; do sleep 0.05; done"
    );
    let script = around_quietus(
        dir.path(),
        &format!("'{sw}' --pty -- sh -c \"$1\" \"$0\"", sw = quietus()),
    );
    // `$1` of the pane's shell is the program (quoted once, by tmux's argv).
    let tmux = Tmux::start_with_program(&m, &script, &program);
    tmux.wait_for("ready-for-keys");
    let tty = tmux.pane_tty();
    let before = read(dir.path().join("before"));
    assert_ne!(
        stty_of(&tty),
        before,
        "raw mode on quietus's terminal during the run"
    );
    tmux.keys(&["-l", "hello keys"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("typed:[hello keys]");
    tmux.wait_for("waiting-for-resize");
    let out = tmux.run(&["resize-window", "-t", "t", "-x", "120", "-y", "40"]);
    assert!(out.status.success(), "{out:?}");
    tmux.wait_for("winched");
    assert_eq!(read(dir.path().join("size")), "40 120");
    tmux.keys(&["C-c"]);
    tmux.wait_for("all-done");
    assert!(tmux.screen().contains("sw-exit=130"), "{}", tmux.screen());
    assert_eq!(
        read(dir.path().join("after")),
        before,
        "stty -g before and after"
    );
    drop(tmux);
    assert_no_leak(&m);
}

#[test]
fn the_terminal_is_restored_when_quietus_is_ended_by_sigterm() {
    let m = Marker::new("cli-tty-term");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path().display().to_string();
    let program = "echo ready-for-term; exec sleep 100000".to_owned();
    let script = around_quietus(
        dir.path(),
        &format!(
            "sh -c 'echo $$ > \"$1\"/swpid; shift; exec \"$@\"' \"$0\" '{d}' '{sw}' --pty -- \
             sh -c \"$1\" \"$0\"",
            sw = quietus()
        ),
    );
    let tmux = Tmux::start_with_program(&m, &script, &program);
    tmux.wait_for("ready-for-term");
    let before = read(dir.path().join("before"));
    assert_ne!(stty_of(&tmux.pane_tty()), before, "raw mode during the run");
    let pid = read(dir.path().join("swpid"));
    // Our own quietus (its pid written by the wrapper the test started), by pid.
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    tmux.wait_for("all-done");
    assert!(tmux.screen().contains("sw-exit=143"), "{}", tmux.screen());
    assert_eq!(
        read(dir.path().join("after")),
        before,
        "stty -g before and after"
    );
    drop(tmux);
    assert_no_leak(&m);
}

#[test]
fn printf_ctrl_c_into_quietus_interrupts_the_program() {
    // No terminal around quietus: its stdin (a pipe) is typed into the program's terminal.
    let m = Marker::new("cli-tty-pipe");
    let mut command = Command::new(quietus());
    command
        .args(["--pty", "--pty-size", "33x77", "--"])
        .args(m.sh_words(
            "stty size; trap '' TERM HUP; echo ready; IFS= read -r l; echo \"got:$l\"; \
             exec sleep 100000",
        ))
        .env(MARKER_ENV, m.as_str())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for var in cli_support::option_vars() {
        command.env_remove(var);
    }
    let mut child = command.spawn().expect("quietus starts");
    let stdin = child.stdin.take().expect("piped");
    // Each input only once the program is ready for it (the terminal echoes typed input as
    // it arrives): the line after "ready", Ctrl-C once the line was read (then `sleep` runs
    // in the foreground).
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut stdout = stdout;
        let mut stdin = stdin;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let mut steps: Vec<(&str, &[u8])> =
            vec![("ready\r\n", b"line one\n"), ("got:line one\r\n", b"\x03")];
        steps.reverse();
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if let Some((after, input)) = steps.last()
                && String::from_utf8_lossy(&seen).contains(after)
            {
                stdin.write_all(input).unwrap();
                stdin.flush().unwrap();
                steps.pop();
            }
        }
        seen
    });
    let status = child.wait().expect("quietus ends");
    let seen = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    assert_eq!(status.code(), Some(130), "{seen:?}");
    assert!(
        seen.starts_with("33 77\r\nready\r\nline one\r\ngot:line one\r\n"),
        "{seen:?}"
    );
    assert_no_leak(&m);
}
