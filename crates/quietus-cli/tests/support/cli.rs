//! Helpers for the `quietus` command's tests (`tests/cli/`), on top of the prelude.
//!
//! Every run gets the test's marker in its environment (and, through `sh -c SCRIPT MARKER`, in
//! the child's argv), no `RUST_LOG` and none of the `QUIETUS_*` option variables from the
//! outside, so a developer's own settings never change a test.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Child, ExitStatus, Output, Stdio};
use std::thread;

use super::{GENEROUS, HANDSHAKE, MARKER_ENV, Marker, SharedBuf, poll_until};
#[allow(unused_imports)] // re-exported for the tests that name them `cli_support::…`
pub use super::{alive, ms};

/// Every option variable quietus reads: those its `--help` names (each option shows its own,
/// from the one definition of the options), read once from the binary, so a new option's
/// variable is cleared without a list here to keep up.
pub fn option_vars() -> &'static [String] {
    static VARS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    VARS.get_or_init(|| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_quietus"))
            .arg("--help")
            .env_clear()
            .output()
            .expect("quietus --help runs");
        let help = String::from_utf8_lossy(&output.stdout).into_owned();
        let mut named: Vec<String> = help
            .match_indices("QUIETUS_")
            .map(|(at, _)| {
                let rest = &help[at..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                    .unwrap_or(rest.len());
                rest[..end].to_owned()
            })
            .filter(|v| v.len() > "QUIETUS_".len()) // "QUIETUS_<OPTION>" in the prose
            .collect();
        named.sort_unstable();
        named.dedup();
        named
    })
}

/// Gives `cmd` (quietus, or a program that runs it) the marker in its environment, and
/// removes `RUST_LOG` and every option variable ([`option_vars`]) inherited from the outside.
pub fn isolate(cmd: &mut std::process::Command, marker: &Marker) {
    super::library::default_signals();
    cmd.env(MARKER_ENV, marker.as_str()).env_remove("RUST_LOG");
    for var in option_vars() {
        cmd.env_remove(var);
    }
}

/// A `quietus` command line being put together.
#[derive(Debug)]
pub struct Sw<'a> {
    marker: &'a Marker,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    dir: Option<&'a Path>,
}

/// `quietus` for this test's marker.
pub fn sw(marker: &Marker) -> Sw<'_> {
    Sw {
        marker,
        args: Vec::new(),
        envs: Vec::new(),
        dir: None,
    }
}

impl<'a> Sw<'a> {
    /// Options (and anything else) for quietus. A program of the prerequisites among them (a
    /// word of an argument: `-- python3 -c …`) must be there ([`super::prerequisites`]).
    #[track_caller]
    pub fn args(mut self, args: &[&str]) -> Self {
        for arg in args {
            super::prerequisites::require_for_script(arg);
        }
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// An environment variable for quietus (and so for the child).
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.envs.push((
            key.to_owned(),
            value.as_ref().to_string_lossy().into_owned(),
        ));
        self
    }

    /// The working directory of quietus (and of the child).
    pub fn dir(mut self, dir: &'a Path) -> Self {
        self.dir = Some(dir);
        self
    }

    /// `-- sh -c SCRIPT MARKER`.
    pub fn sh(mut self, script: &str) -> Self {
        self.args.push("--".to_owned());
        self.args.extend(self.marker.sh_words(script));
        self
    }

    fn std_command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_quietus"));
        cmd.args(&self.args);
        isolate(&mut cmd, self.marker);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        if let Some(dir) = self.dir {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// Runs it to the end (stdin empty), with a generous safety timeout.
    pub fn output(self) -> Output {
        let mut cmd = assert_cmd::Command::from_std(self.std_command());
        cmd.timeout(GENEROUS);
        cmd.output().expect("quietus runs")
    }

    /// Starts it in the background, stdout and stderr collected as they come.
    pub fn spawn(self) -> Running {
        self.spawn_with(|_| {})
    }

    /// The same, with a last touch to the `std::process::Command`.
    pub fn spawn_with(self, adjust: impl FnOnce(&mut std::process::Command)) -> Running {
        let mut cmd = self.std_command();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        adjust(&mut cmd);
        let mut child = cmd.spawn().expect("quietus starts");
        let stdout = SharedBuf::new();
        let stderr = SharedBuf::new();
        let readers = [
            collect(child.stdout.take().expect("piped"), stdout.clone()),
            collect(child.stderr.take().expect("piped"), stderr.clone()),
        ];
        Running {
            child,
            stdout,
            stderr,
            readers: Some(readers),
        }
    }
}

/// Reads `pipe` into `into` until end of file, in a thread of its own.
fn collect(mut pipe: impl Read + Send + 'static, into: SharedBuf) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => into.push(&buf[..n]),
            }
        }
    })
}

/// A quietus process this test started.
#[derive(Debug)]
pub struct Running {
    pub child: Child,
    pub stdout: SharedBuf,
    pub stderr: SharedBuf,
    readers: Option<[thread::JoinHandle<()>; 2]>,
}

impl Running {
    /// quietus's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to this quietus process (our own).
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("a real pid");
        rustix::process::kill_process(pid, signal).expect("our quietus can be signalled");
    }

    /// Waits (bounded by [`GENEROUS`]) for quietus to exit and its output to be read; kills
    /// it (it is ours) and panics if it does not exit.
    #[track_caller]
    pub fn wait(mut self) -> Finished {
        let mut status = None;
        poll_until(GENEROUS, || {
            status = self.child.try_wait().expect("try_wait works");
            status.is_some()
        });
        let Some(status) = status else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "quietus did not exit within {GENEROUS:?}; stdout {:?}, stderr {:?}",
                self.stdout.text(),
                self.stderr.text()
            );
        };
        if let Some(readers) = self.readers.take() {
            for reader in readers {
                let _ = reader.join();
            }
        }
        Finished {
            status,
            stdout: self.stdout.bytes(),
            stderr: self.stderr.bytes(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A test that failed before `wait`: do not leave our own quietus behind.
        if self.readers.is_some() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A quietus process that ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    pub fn stdout_text(&self) -> String {
        text(&self.stdout)
    }

    pub fn stderr_text(&self) -> String {
        text(&self.stderr)
    }
}

/// Lossy text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the exit code, showing everything on failure.
#[track_caller]
pub fn assert_code(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "status {:?}\nstdout: {:?}\nstderr: {:?}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// The lines quietus itself wrote on stderr (`quietus: …`).
pub fn own_lines(stderr: &[u8]) -> Vec<String> {
    text(stderr)
        .lines()
        .filter(|l| l.starts_with("quietus: "))
        .map(str::to_owned)
        .collect()
}

/// The single summary line (`quietus: ended …`), asserting there is exactly one.
#[track_caller]
pub fn summary_line(stderr: &[u8]) -> String {
    let lines: Vec<String> = own_lines(stderr)
        .into_iter()
        .filter(|l| l.starts_with("quietus: ended"))
        .collect();
    assert_eq!(lines.len(), 1, "one summary line in {:?}", text(stderr));
    lines.into_iter().next().expect("one line")
}

/// Waits until `path` exists (bounded by [`HANDSHAKE`]); panics otherwise.
#[track_caller]
pub fn wait_for_file(path: &Path) {
    super::wait_for_file(path, HANDSHAKE);
}

/// The `quietus` command for a fault-suite scenario.
pub trait ScenarioCli {
    /// The `quietus` command running `script` (as [`Scenario::command`] builds it) with
    /// `options`: the scenario's marker, ledgers and working directory, no `RUST_LOG`, stdin
    /// empty, stdout and stderr captured.
    fn cli(&self, options: &[&str], script: &str) -> std::process::Command;
}

impl ScenarioCli for super::fault::Scenario {
    fn cli(&self, options: &[&str], script: &str) -> std::process::Command {
        let child = self.command(script);
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_quietus"));
        command
            .args(options)
            .arg("--")
            .arg(child.get_program())
            .args(child.get_args())
            .envs(child.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .current_dir(self.work_dir())
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null());
        command
    }
}

/// The inotify watches process `pid` holds now (`inotify wd:` lines of its descriptors).
pub fn inotify_watches(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_to_string(fd.path()).ok())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}
