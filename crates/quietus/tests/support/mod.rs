//! The one prelude of the real-process integration tests (`tests/*/main.rs` include it with
//! `#[path]`; the command's crate includes it from its own `tests/support/mod.rs`): markers,
//! polling, the shared output buffer; [`fault`] is the fault suite's scenario kit;
//! [`prerequisites`] says what a test needs beyond Rust (and how to install it) before it runs.
//!
//! Every test gets a unique [`Marker`]. The child is started with the marker both in its argv
//! (as `$0` of `sh -c SCRIPT MARKER`, so every forked subshell shows it too) and in the
//! environment variable [`MARKER_ENV`], which every descendant inherits even across `exec`.
//! [`assert_no_leak`] scans `/proc/*/cmdline` and `/proc/*/environ` for it, so a test proves that
//! no process of its own survived, without ever looking at (or touching) anybody else's.
//!
//! No helper sleeps for a fixed time to wait for a condition: they poll with a deadline.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use quietus::{MonitorResult, OutputSink, Session};

pub mod fault;
pub mod net;
pub mod prerequisites;

#[allow(unused_imports)] // each suite names those it needs
pub use prerequisites::{program, require, require_python_venv};

/// The environment variable that carries the marker into every descendant.
pub const MARKER_ENV: &str = "QUIETUS_TEST_MARKER";

/// How long a readiness handshake may take on a loaded machine.
pub const HANDSHAKE: Duration = Duration::from_secs(20);

/// How long a run that should end soon may take at most before the test gives up (a generous
/// upper bound; the real time is far below it).
pub const GENEROUS: Duration = Duration::from_secs(30);

/// How long processes may take to disappear after their tree was ended (a loaded 2-core box).
pub const LEAK_GRACE: Duration = Duration::from_secs(10);

/// A bash prologue that closes every descriptor above 2 the shell inherited, for a scenario that
/// needs a clean descriptor table (a descriptor limit counts by number): a test never depends on
/// what its parent left open (an IDE, a CI runner, `time -o FILE`'s fd 3, `exec 3>…`). Bash only
/// (`{var}>&-`); prepend it to the script.
pub const CLOSE_INHERITED_FDS: &str = "for fd in /proc/$$/fd/*; do fd=${fd##*/}; \
     if [ \"$fd\" -gt 2 ]; then exec {fd}>&-; fi; done; ";

/// How often polling helpers look again.
const POLL: Duration = Duration::from_millis(10);

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Sets every signal the parent of `cargo test` left ignored back to its default, once per test
/// process, so that every process a test starts begins as under a clean parent. An ignore is
/// inherited across `fork` and `exec`, and a program keeps an ignore it started with: `nohup
/// cargo test` ignores HUP and a script's `cargo test &` INT and QUIT, and then quietus (which
/// keeps an inherited ignore, as documented) rightly ignores the HUP a test sends it — eight
/// command tests failed so under `nohup`. A test about an inherited ignore sets it up itself.
/// SIGPIPE is left alone: Rust's runtime ignores it in this process, and `std::process::Command`
/// sets it back to its default in every child. (clippy.toml keeps hand-made signal handling out
/// of quietus's code; this is the test process's own.)
#[allow(unsafe_code, clippy::disallowed_methods)]
pub fn default_signals() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for signal in 1..32 {
            if [libc::SIGKILL, libc::SIGSTOP, libc::SIGPIPE].contains(&signal) {
                continue;
            }
            // SAFETY: `sigaction` with a null new action only reads the disposition into a
            // zeroed `struct sigaction` this frame owns.
            let ignored = unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                    && old.sa_sigaction == libc::SIG_IGN
            };
            if ignored {
                // SAFETY: SIG_DFL installs no handler (no code of ours runs on delivery); the
                // action is a zeroed `struct sigaction` (empty mask, no flags) this frame owns.
                unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(signal, &action, std::ptr::null_mut());
                }
            }
        }
    });
}

/// A marker unique to one test (process id, test name, counter), and a safety net: dropping it
/// SIGKILLs any process that still carries it (only those, so a failing test cleans up after
/// itself without touching anything it did not start).
#[derive(Debug)]
pub struct Marker {
    text: String,
}

impl Marker {
    /// `sw-test-<pid>-<name>-<n>`. Every test that starts a process makes one first, so this
    /// is also where the test process's signals are set back to their defaults
    /// ([`default_signals`]).
    pub fn new(test_name: &str) -> Self {
        default_signals();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        Self {
            text: format!("sw-test-{}-{}-{}", std::process::id(), test_name, n),
        }
    }

    /// The marker text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `sh -c SCRIPT MARKER` with the marker in the environment too. The script sees the
    /// marker as `$0`.
    /// The programs of [`prerequisites::PREREQUISITES`] the script runs must be there.
    #[track_caller]
    pub fn sh(&self, script: &str) -> Command {
        prerequisites::require_for_script(script);
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(script)
            .arg(&self.text)
            .env(MARKER_ENV, &self.text);
        command
    }

    /// The same, as an `assert_cmd` command line for the CLI: `sh -c SCRIPT MARKER` words.
    #[track_caller]
    pub fn sh_words(&self, script: &str) -> Vec<String> {
        prerequisites::require_for_script(script);
        vec![
            "sh".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
            self.text.clone(),
        ]
    }

    /// Live processes carrying this marker.
    pub fn pids(&self) -> Vec<MarkedProcess> {
        marked_processes(&self.text)
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        // Safety net only: a passing test has already proven that nothing carries the marker.
        for p in marked_processes(&self.text) {
            eprintln!(
                "cleanup: SIGKILL to pid {} carrying our marker {}: {}",
                p.pid, self.text, p.cmdline
            );
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(p.pid.to_string())
                .status();
        }
    }
}

/// A live process that carries a test's marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedProcess {
    /// Its pid.
    pub pid: u32,
    /// Its state letter from `/proc/<pid>/stat`.
    pub state: char,
    /// Its argv, words joined by spaces.
    pub cmdline: String,
}

/// The state letter of `/proc/<pid>/stat` (the field after the parenthesised name).
fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    stat[close + 1..].trim_start().chars().next()
}

/// Whether the process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|state| state != 'Z' && state != 'X' && state != 'x')
}

/// Every live (not zombie, not dead) process other than this one whose argv contains `marker`
/// or whose environment has `MARKER_ENV=marker`.
pub fn marked_processes(marker: &str) -> Vec<MarkedProcess> {
    let own = std::process::id();
    let env_entry = format!("{MARKER_ENV}={marker}");
    let mut found = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        panic!("cannot read /proc: these tests need Linux procfs");
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let in_argv = cmdline.contains(marker);
        // Another user's process cannot be read: it cannot be ours either.
        let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let in_env = environ
            .split(|b| *b == 0)
            .any(|e| e == env_entry.as_bytes());
        if !(in_argv || in_env) {
            continue;
        }
        let Some(state) = proc_state(pid) else {
            continue; // gone meanwhile
        };
        if state == 'Z' || state == 'X' || state == 'x' {
            continue;
        }
        found.push(MarkedProcess {
            pid,
            state,
            cmdline: cmdline.trim_end().to_owned(),
        });
    }
    found
}

/// Asserts that no live process carries `marker`, polling for up to [`LEAK_GRACE`] (processes
/// being killed may take a moment to go on a loaded machine). Lists the offenders on failure.
#[track_caller]
pub fn assert_no_leak(marker: &Marker) {
    let deadline = Instant::now() + LEAK_GRACE;
    loop {
        let left = marker.pids();
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "leaked processes carrying marker {} after {:?}: {:#?}",
                marker.as_str(),
                LEAK_GRACE,
                left
            );
        }
        thread::sleep(POLL);
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
pub fn poll_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL);
    }
}

/// A byte buffer shared with an [`OutputSink::callback`].
#[derive(Debug, Clone, Default)]
pub struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink appending every chunk to this buffer.
    pub fn sink(&self) -> OutputSink {
        let buf = self.clone();
        OutputSink::callback(move |chunk| buf.push(chunk))
    }

    /// Appends `chunk` (what a sink or a pipe reader received).
    pub fn push(&self, chunk: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend_from_slice(chunk)
    }

    /// A copy of the bytes so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The bytes so far, as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// Whether the buffer contains `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        self.text().contains(needle)
    }

    /// Readiness handshake: waits up to [`HANDSHAKE`] for `needle` to appear; panics (showing
    /// what arrived) if it does not.
    #[track_caller]
    pub fn wait_for(&self, needle: &str) {
        if !poll_until(HANDSHAKE, || self.contains(needle)) {
            panic!(
                "the child did not print {needle:?} within {HANDSHAKE:?}; got {:?}",
                self.text()
            );
        }
    }
}

/// Spawns `builder` under `config`, stdout into `out`, with the idle timeout held off until the
/// child printed `ready` (the readiness handshake, up to [`HANDSHAKE`]) and in force from that
/// line on. For a test whose subject comes after the child's start: on a loaded machine the
/// start alone (an exec, an interpreter behind a chain of version-manager shims, each too
/// short-lived to be seen waiting for a CPU) can outlast a short idle timeout, and the run then
/// ends before the test began.
#[track_caller]
pub fn spawn_ready(
    builder: quietus::SessionBuilder,
    config: impl Into<quietus::config::MonitorConfigBuilder>,
    out: &SharedBuf,
    ready: &str,
) -> Session {
    let config = config.into().build().expect("the test's config is valid");
    let idle = config.idle_timeout();
    let session = builder
        .config(quietus::config::MonitorConfigBuilder::from(config).idle_timeout(HANDSHAKE))
        .stdout(out.sink())
        .spawn()
        .expect("the test's child can be spawned");
    out.wait_for(ready);
    session
        .set_idle_timeout(idle)
        .expect("the test's idle timeout is valid");
    session
}

/// Waits for the run to end within [`GENEROUS`]; panics otherwise (the session is then dropped,
/// which takes the tree down, and the marker's drop cleans up whatever is left).
#[track_caller]
pub fn wait_generously(session: &Session) -> MonitorResult {
    match session.wait_timeout(GENEROUS) {
        Some(result) => result,
        None => panic!(
            "session of pid {} did not end within {GENEROUS:?}",
            session.pid()
        ),
    }
}

/// Waits (polling, bounded by `timeout`) until `path` exists; panics otherwise.
#[track_caller]
pub fn wait_for_file(path: &Path, timeout: Duration) {
    assert!(
        poll_until(timeout, || path.exists()),
        "{} did not appear within {timeout:?}",
        path.display()
    );
}

/// Milliseconds, for readable durations in scripts.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
