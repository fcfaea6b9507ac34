//! Support for the fault-injection suite (`tests/fault/`, `tests/fault_subreaper/`, issue 8).
//!
//! Every fault scenario proves three things:
//!
//! 1. **the right outcome** (asserted by the scenario itself);
//! 2. **no process of its own left alive**: the child runs with a unique [`Marker`] in its argv
//!    and environment, and [`Scenario::assert_no_leak`] scans `/proc` for it after the session
//!    returned;
//! 3. **every byte accounted for**: the child writes its output through a *ledger*. Shell
//!    scripts get two functions, `say` (stdout) and `warn` (stderr), that append each line to a
//!    ledger file before writing it to the stream, and bulk data goes through `tee -a
//!    "$SW_OUT"`. The test then compares the SHA-256 of the ledger with the SHA-256 of what the
//!    [`OutputSink`](quietus::OutputSink) callback received ([`Scenario::assert_accounted`]),
//!    or of their sorted lines when several processes write at once
//!    ([`Scenario::assert_accounted_unordered`]: the order between two writers is not defined,
//!    but no line may be lost, duplicated or torn).
//!
//! The stress switch: `QUIETUS_STRESS=N` repeats the racy scenarios N times ([`repeats`]).
//!
//! Scenarios that found a library bug stay in the suite, `#[ignore = "BUG: …"]`, with the cause;
//! the `src/…:line` references in those reasons are to the sources at commit 7ac04a5. Run them
//! with `cargo nextest run --run-ignored only -E 'binary(/^fault/)'`.
#![allow(dead_code)]

use quietus::config::MonitorConfigBuilder;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use quietus::{
    ChildWatchConfig, KillLadder, MonitorConfig, Outcome, Session, SessionBuilder, Signal,
};
use sha2::{Digest, Sha256};

#[allow(unused_imports)] // re-exported for the tests that name it `fault_support::…`
pub use super::wait_for_file;
use super::{Marker, SharedBuf, assert_no_leak};

/// The environment variable of the stress mode.
pub const STRESS_ENV: &str = "QUIETUS_STRESS";

/// How many times a racy scenario runs: `QUIETUS_STRESS=N` when set (never fewer than
/// `ci`), else `ci` (1 for most racy scenarios, 3 for the "no false kill" runs).
pub fn repeats(ci: usize) -> usize {
    std::env::var(STRESS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .map_or(ci, |n| n.max(ci))
}

/// The shell functions every scenario script can use. `say` and `warn` record a line in the
/// ledger first, then write it: a line in the stream is always in the ledger. Nested shells get
/// them with `eval "$SW_PRELUDE"`.
pub const PRELUDE: &str = r#"say() { printf '%s\n' "$*" >> "$SW_OUT"; printf '%s\n' "$*"; }
warn() { printf '%s\n' "$*" >> "$SW_ERR"; printf '%s\n' "$*" >&2; }
"#;

/// Length and SHA-256 of a byte stream.
#[derive(Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// Number of bytes.
    pub len: u64,
    /// SHA-256, lower-case hex.
    pub sha256: String,
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes, sha256 {}", self.len, self.sha256)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fingerprint of `bytes`.
pub fn fingerprint(bytes: &[u8]) -> Fingerprint {
    let mut hasher = Sha256::new();
    // In chunks, like the stream arrived: the digest does not depend on it.
    for chunk in bytes.chunks(1 << 20) {
        hasher.update(chunk);
    }
    Fingerprint {
        len: bytes.len() as u64,
        sha256: hex(&hasher.finalize()),
    }
}

/// The fingerprint of a file, read in chunks (a missing file is empty).
pub fn file_fingerprint(path: &Path) -> Fingerprint {
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    if let Ok(mut file) = fs::File::open(path) {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).expect("the ledger is readable");
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            len += n as u64;
        }
    }
    Fingerprint {
        len,
        sha256: hex(&hasher.finalize()),
    }
}

/// The fingerprint of the lines of `bytes`, sorted: equal for two streams that hold the same
/// lines in any order. A final line without a newline is kept as it is.
pub fn lines_fingerprint(bytes: &[u8]) -> Fingerprint {
    let mut lines: Vec<&[u8]> = bytes.split_inclusive(|b| *b == b'\n').collect();
    lines.sort_unstable();
    fingerprint(&lines.concat())
}

/// One fault scenario: a marker, a working directory for the child, two ledgers and two
/// capturing sinks.
pub struct Scenario {
    /// The unique marker of this scenario's processes.
    pub marker: Marker,
    /// The child's working directory (its `.agent` folder lives here).
    pub work: tempfile::TempDir,
    ledgers: tempfile::TempDir,
    /// What the stdout sink received.
    pub out: SharedBuf,
    /// What the stderr sink received.
    pub err: SharedBuf,
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scenario")
            .field("marker", &self.marker.as_str())
            .field("work", &self.work.path())
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// A scenario named `name` (the name goes into the marker).
    pub fn new(name: &str) -> Self {
        Self::with_ledgers_in(name, None)
    }

    /// A scenario whose ledgers live in memory (`/dev/shm` when it exists), for big outputs.
    pub fn big(name: &str) -> Self {
        let shm = Path::new("/dev/shm");
        Self::with_ledgers_in(name, shm.is_dir().then_some(shm))
    }

    fn with_ledgers_in(name: &str, dir: Option<&Path>) -> Self {
        let ledgers = match dir {
            Some(dir) => tempfile::tempdir_in(dir),
            None => tempfile::tempdir(),
        }
        .expect("a temporary directory for the ledgers");
        let scenario = Self {
            marker: Marker::new(name),
            work: tempfile::tempdir().expect("a temporary working directory"),
            ledgers,
            out: SharedBuf::new(),
            err: SharedBuf::new(),
        };
        fs::write(scenario.out_ledger(), b"").expect("the stdout ledger can be created");
        fs::write(scenario.err_ledger(), b"").expect("the stderr ledger can be created");
        scenario
    }

    /// The stdout ledger (`$SW_OUT` in the script).
    pub fn out_ledger(&self) -> PathBuf {
        self.ledgers.path().join("stdout.ledger")
    }

    /// The stderr ledger (`$SW_ERR` in the script).
    pub fn err_ledger(&self) -> PathBuf {
        self.ledgers.path().join("stderr.ledger")
    }

    /// A path in the scratch area (outside the working directory), for handshake files.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.ledgers.path().join(name)
    }

    /// `sh -c PRELUDE+SCRIPT MARKER`, marker in the environment, ledgers in `SW_OUT` and
    /// `SW_ERR`, scratch folder in `SW_TMP`, working directory [`Self::work`].
    pub fn command(&self, script: &str) -> Command {
        let mut command = self.marker.sh(&format!("{PRELUDE}{script}"));
        command
            .env("SW_OUT", self.out_ledger())
            .env("SW_ERR", self.err_ledger())
            .env("SW_TMP", self.ledgers.path())
            .env("SW_PRELUDE", PRELUDE)
            .current_dir(self.work.path());
        command
    }

    /// A session builder for `script` with `config` and both capturing sinks.
    pub fn builder(&self, script: &str, config: impl Into<MonitorConfigBuilder>) -> SessionBuilder {
        Session::builder(self.command(script))
            .config(config)
            .stdout(self.out.sink())
            .stderr(self.err.sink())
    }

    /// Spawns `script` under `config` with both capturing sinks.
    pub fn spawn(&self, script: &str, config: impl Into<MonitorConfigBuilder>) -> Session {
        self.builder(script, config)
            .spawn()
            .expect("the scenario's child can be spawned")
    }

    /// The scenario's working directory.
    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// Asserts that each sink received exactly the bytes of its ledger, in order.
    #[track_caller]
    pub fn assert_accounted(&self) {
        let out = fingerprint(&self.out.bytes());
        let err = fingerprint(&self.err.bytes());
        assert_eq!(
            out,
            file_fingerprint(&self.out_ledger()),
            "stdout: received (left) vs written (right)"
        );
        assert_eq!(
            err,
            file_fingerprint(&self.err_ledger()),
            "stderr: received (left) vs written (right)"
        );
    }

    /// Asserts that each sink received exactly the lines of its ledger, in some order.
    #[track_caller]
    pub fn assert_accounted_unordered(&self) {
        for (what, received, ledger) in [
            ("stdout", self.out.bytes(), self.out_ledger()),
            ("stderr", self.err.bytes(), self.err_ledger()),
        ] {
            let written = fs::read(&ledger).expect("the ledger is readable");
            assert_eq!(
                lines_fingerprint(&received),
                lines_fingerprint(&written),
                "{what}: lines received (left) vs written (right); received {:?}…",
                String::from_utf8_lossy(&received[..received.len().min(200)])
            );
        }
    }

    /// Asserts that no process carrying the marker is alive (polling a while).
    #[track_caller]
    pub fn assert_no_leak(&self) {
        assert_no_leak(&self.marker);
    }
}

/// Idle timeout of the tree and signal scenarios: long enough for a loaded machine to finish a
/// handshake without looking stale, short enough to keep the suite fast.
pub const LADDER_IDLE: Duration = Duration::from_millis(500);
/// Grace of the polite step in those scenarios.
pub const LADDER_GRACE: Duration = Duration::from_millis(300);

/// The configuration of the tree and signal scenarios: TERM, [`LADDER_GRACE`], KILL.
pub fn ladder_config() -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(LADDER_IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, LADDER_GRACE))
        .drain_cap(Duration::from_millis(1000))
}

/// The same with the subreaper mode on (process-wide for the test binary that uses it: orphans
/// of its other tests come to it too, and go to the session they belong to by the rules of
/// `ChildWatchConfig::subreaper`; its tests' own direct children stay in its process group,
/// which rule 5 leaves alone).
pub fn subreaper_config() -> MonitorConfigBuilder {
    ladder_config().children(ChildWatchConfig::builder().subreaper(true))
}

/// Whether the run ended at the idle timeout.
pub fn is_idle_timeout(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::IdleTimeout(_))
}
