//! Supervise a child process and end its whole process tree only when it has truly stalled.
//!
//! Agent CLIs (codex, claude, gemini, opencode…) run unattended in loops can hang forever —
//! waiting on input nobody gives, a stuck tool, a dead connection — or look idle while they
//! really work. A plain timeout kills good work; no timeout leaves runaway processes. This crate
//! runs the child on plain OS threads (no async runtime) and ends its tree only when **every**
//! activity source has been quiet for the idle timeout:
//!
//! - **output**: a read of more than 0 bytes from its stdout, stderr or terminal;
//! - **files**: a create, modify, rename, remove or metadata change under the watched folders
//!   (default `.agent`; never a read), see [`FileWatchConfig`];
//! - **children**: CPU progress of its descendants (a compiler, a test run), see
//!   [`ChildWatchConfig`];
//! - **network**: bytes moving on the TCP sockets of its tree (never "a socket is open");
//! - **keepalive**: an explicit [`Session::keepalive`] from the caller.
//!
//! Then a [`Diagnosis`](diagnosis::Diagnosis) says why it stalled, and a kill ladder (a polite signal, a grace,
//! SIGKILL) ends the whole tree. A hard timeout ends it even while it is active. Everything is
//! configured on one [`MonitorConfig`], and every duration runs on a [`Clock`], so an
//! orchestrator unit-tests its own loop with a [`MockClock`]. The `quietus` command (a
//! drop-in for GNU `timeout`) and its JSON-RPC service `quietus serve` are clients of this
//! API; their reference is in the repository's `docs/cli.md` and `docs/serve.md`.
//!
//! The default feature `cli` builds the command and pulls its dependencies (clap, serde,
//! serde_json, env_logger, nix). A library user turns it off:
//!
//! ```toml
//! [dependencies]
//! quietus = { version = "0.1", default-features = false }
//! ```
//!
//! # Tutorial
//!
//! ## Spawn and wait
//!
//! [`Session::spawn`] takes what to run (a std `Command`, or a [`Program`], its shorter form,
//! which also keeps the environment's order) and a [`MonitorConfig`]; [`Session::wait`] returns a [`MonitorResult`] whose [`Outcome`] says how
//! the run ended:
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use quietus::{MonitorConfig, Outcome, Session};
//!
//! let mut command = Command::new("sh");
//! command.args(["-c", "echo working; sleep 30"]);
//! let config = MonitorConfig::builder()
//!     .idle_timeout(Duration::from_millis(300))
//!     .build()?; // every value checked: a `ConfigError` names the one refused
//! let session = Session::spawn(command, config)?;
//! let result = session.wait();
//! // Silent for 300 ms after its one line: ended, the way GNU `timeout` reports it.
//! assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
//! assert_eq!(result.exit_code(), 124);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## A keepalive, an output sink, and stopping on request
//!
//! The orchestrator often knows better than any source: [`Session::keepalive`] counts as
//! activity. [`SessionBuilder`] chooses where the output goes and how the tree is ended;
//! [`Session::terminate`] runs the ladder now and returns at once:
//!
//! ```
//! use std::process::Command;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use quietus::{KillLadder, MonitorConfig, Outcome, OutputSink, Session, Signal};
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let sink = seen.clone();
//! let mut command = Command::new("sh");
//! command.args(["-c", "echo started; exec sleep 30"]);
//! let session = Session::builder(command)
//!     .config(
//!         MonitorConfig::builder()
//!             .idle_timeout(Duration::from_secs(60))
//!             .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(2))),
//!     )
//!     .stdout(OutputSink::callback(move |chunk| sink.lock().unwrap().extend_from_slice(chunk)))
//!     .stderr(OutputSink::writer(std::io::stderr()))
//!     .spawn()?;
//! session.keepalive(); // the orchestrator knows the child is fine
//! session.terminate(); // ...and then decides to stop it: TERM, 2 s, KILL
//! let result = session.wait();
//! assert_eq!(result.outcome, Outcome::Terminated { forced: false });
//! assert_eq!(result.signal(), Some(Signal::TERM));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## A test on a mock clock
//!
//! Test your own orchestration without waiting: give the builder a [`MockClock`] and move time
//! by hand. The monitor runs the same code as in production; [`MockClock::wait_for_timers`]
//! tells when it is parked on its next deadline, so the test never sleeps.
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use quietus::{MockClock, MonitorConfig, Outcome, Session};
//!
//! let clock = MockClock::new();
//! let mut command = Command::new("sleep");
//! command.arg("1000");
//! let session = Session::builder(command)
//!     .config(MonitorConfig::default()) // 300 s idle timeout
//!     .clock(clock.clone())
//!     .spawn()?;
//! assert!(clock.wait_for_timers(1, Duration::from_secs(10)));
//! clock.advance(Duration::from_secs(299));
//! assert!(clock.wait_for_timers(1, Duration::from_secs(10)));
//! assert!(session.try_wait().is_none());
//! clock.advance(Duration::from_secs(1)); // five minutes of silence, in no time at all
//! let result = session.wait();
//! assert!(matches!(result.outcome, Outcome::IdleTimeout(_)));
//! assert_eq!(result.runtime, Duration::from_secs(300));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## Many sessions
//!
//! Run several children at once and steer them by a small id with a [`Registry`]: its
//! one-line summaries are what a harness shows its model; give each child a clean
//! [`Environment`] (an allowlist over an empty environment, an isolated home):
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use quietus::{
//!     ControlAction, ControlAnswer, Environment, SessionState, MonitorConfig, Registry, Session, Signal,
//! };
//!
//! let home = tempfile::tempdir()?;
//! let registry = Registry::new();
//! for seconds in ["1000", "2000"] {
//!     let mut command = Command::new("sleep");
//!     command.arg(seconds);
//!     let builder = Session::builder(command)
//!         .config(MonitorConfig::builder().idle_timeout(Duration::from_secs(600)))
//!         .environment(Environment::empty().inherit("PATH").home(home.path()));
//!     registry.spawn(builder)?;
//! }
//! let lines: Vec<String> = registry.list().iter().map(ToString::to_string).collect();
//! assert!(lines[0].starts_with("#01 running uptime="), "{lines:?}");
//! assert!(lines[1].ends_with(" log=- cmd=sleep 2000"), "{lines:?}");
//! let longer = ControlAction::SetIdleTimeout(Duration::from_secs(1800));
//! assert_eq!(registry.control(1, longer), ControlAnswer::Ack);
//! assert_eq!(registry.control(2, ControlAction::Kill), ControlAnswer::Ack);
//! assert_eq!(registry.get(2).unwrap().wait().signal(), Some(Signal::KILL));
//! assert_eq!(registry.control(2, ControlAction::Terminate), ControlAnswer::AlreadyEnded);
//! let ended = registry.shutdown_all(); // #01: the ladder, and wait
//! assert_eq!(ended.len(), 1);
//! assert!(registry.list().iter().all(|s| s.state == SessionState::Ended));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## Where next
//!
//! - Keep the output bounded, log it whole with its SHA-256, follow it live:
//!   [`CaptureConfig`], [`Session::output`], [`Session::events`].
//! - Done but hanging, busy but stuck: [`CompletionConfig`],
//!   [`MonitorConfigBuilder::solo_cap`](config::MonitorConfigBuilder::solo_cap), [`Probe`].
//! - A program that wants a terminal: [`SessionBuilder::pty`]; one that must not wait for an
//!   answer: [`SessionBuilder::non_interactive`], [`MonitorConfig::input_wait_timeout`].
//! - Run again on a known transient failure: [`retry::RetryPolicy`]. Why a spawn failed:
//!   [`SpawnError`].
//! - Steer a session: its verbs are [`Session::keepalive`], [`Session::set_idle_timeout`],
//!   [`Session::interrupt`], [`Session::signal`], [`Session::terminate`] and
//!   [`Session::kill`] — one for each action, and a [`ControlAction`] of the same name for a
//!   [`Registry`]; what it reads is [`Stdin`].
//!
//! The root holds what a caller starts from; modules hold the rest: [`config`] (every
//! configuration type and its builder), [`error`] (the errors with their kinds and reasons, as
//! `std::io` holds `ErrorKind`: [`SpawnErrorKind`](error::SpawnErrorKind),
//! [`Setting`](error::Setting)…), [`outcome`] (what a result says: the stale report, the logs,
//! the leftovers, why a source was unavailable), [`diagnosis`] (what a stalled tree was
//! doing), [`retry`], [`sources`] (the activity sources alone, to build a monitor of your own)
//! and [`supervisor`] (what the supervising process sets up, and its guardian). The
//! repository's `docs/library.md` walks through each with an example.
//!
//! # Theory of operation
//!
//! Data flows one way: child → activity sources → [`ActivityBoard`](sources::ActivityBoard) →
//! monitor → verdict → kill ladder → [`MonitorResult`].
//!
//! - **Sources only stamp the board** (atomics): the reader threads at every non-empty read,
//!   the file tracker from `notify` (or a stat scan), the monitor's samples of the descendants'
//!   CPU and the tree's TCP bytes, [`Session::keepalive`]. None calls the monitor.
//! - **One monitor thread per session** sleeps until the exact instant its decision can change
//!   (or a control message), and asks the *verdict*, a pure function of a reading of the board, the
//!   time and the limits: every staleness rule (idle and hard timeouts, solo caps, completion's
//!   linger, when to ask a probe) is tested without threads, processes or sleeping.
//! - **Before any signal** it takes one fresh sample of the descendants and the network and
//!   looks at the bytes waiting in the pipes, then a snapshot of the tree for the
//!   [`Diagnosis`](diagnosis::Diagnosis). The first reason to end wins.
//! - **The ladder** reaches the whole tree: a cgroup v2 of the session's own where one can be
//!   made ([`Containment`]), else the process group and the escapees seen. A single process
//!   is signalled through a pidfd checked against its start time; the leader is not reaped
//!   before the ladder is done; an end that cannot be confirmed is
//!   [`termination_unproven`](MonitorResult::termination_unproven), never a hang.
//! - **Start and guard**: every program starts through std's `Command` (born in its cgroup by
//!   `clone3(CLONE_INTO_CGROUP)` from the `pre_exec` hook; the crate's only `unsafe` code is
//!   that hook's). If the supervisor dies, one guardian per supervising process ([`supervisor`]) — the
//!   `quietus` binary started by `exec`, never a fork of the host — ends every live tree;
//!   without one the leader still gets the parent-death signal, and
//!   [`MonitorResult::supervisor_death`] says which held.
//! - **Output** goes to the sink first, then to a bounded head/tail buffer, a complete log with
//!   its SHA-256, and an event channel that never slows the child.
//! - **Time**: every duration is measured on the session's [`Clock`], so a [`MockClock`] test
//!   runs what production runs.
//!
//! Exit codes follow GNU `timeout` ([`MonitorResult::exit_code`]). The whole story — each
//! source, the rule, the ladder, how the tree is held, the network source, the diagnosis, and
//! the rooms of the code, with the reasons — is the repository's `docs/design.md`.
#![warn(unreachable_pub)]
// Outside Linux the Linux backend's pure parts (the diagnosis's classifier and its parsers, the
// cgroup hand-off, the orphan attribution) are compiled but not called: they are tested on Linux,
// and kept compiling everywhere so a platform that gains the source uses them as they are.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]
// The same with the portable backend on Linux (feature `portable`): the Linux sources it
// replaces stay compiled, unused.
#![cfg_attr(feature = "portable", allow(dead_code, unused_imports))]

mod activity;
mod capture;
mod clock;
mod completion;
mod contract;
mod environment;
mod events;
mod input_wait;
mod monitor;
mod own_files;
mod pid;
mod probe;
mod process;
mod program;
mod registry;
mod session;
mod setting;
mod signal;
mod stream;
mod sync;
mod verdict;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// The library guide's Rust examples (`docs/library.md`), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
struct LibraryGuideDoctests;

/// The command's reference (`docs/cli.md`): its code blocks are shell, JSON and text, none is
/// Rust; included so that a Rust example added there is compiled too.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/cli.md")]
struct CliReferenceDoctests;

/// The theory of operation (`docs/design.md`), for the same reason.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/design.md")]
struct DesignDoctests;

/// The `serve` protocol (`docs/serve.md`; its Python client is run by the `cli` tests).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/serve.md")]
struct ServeDoctests;

pub mod config;
pub mod diagnosis;
pub mod error;
pub mod outcome;
pub mod retry;
pub mod sources;

pub use activity::ActivitySource;
pub use capture::{CapturedOutput, CapturedStream};
pub use clock::{Clock, MockClock};
pub use completion::CompletionConfig;
pub use config::{
    CaptureConfig, ChildWatchConfig, Containment, EventConfig, FileWatchConfig, KillLadder,
    MonitorConfig,
};
pub use contract::SessionState;
pub use environment::{Environment, IsolatedHome};
pub use error::{ConfigError, SpawnError};
pub use events::Event;
pub use outcome::{MonitorResult, Outcome};
pub use pid::Pid;
pub use probe::Probe;
pub use program::{Program, Stdin};
pub use registry::{ControlAction, ControlAnswer, Registry, SessionSummary};
pub use session::{EventReceiver, Session, SessionBuilder};
pub use signal::Signal;
pub use sources::output::OutputSink;
pub use stream::Stream;

/// The supervising process itself: how it makes itself fit to supervise ([`prepare`](supervisor::prepare)), and its
/// guardian — one helper process per supervising process that ends every live session's tree
/// if the supervisor dies ([`SupervisorDeath`](supervisor::SupervisorDeath)).
pub mod supervisor {
    pub use crate::outcome::SupervisorDeath;
    pub use crate::process::guardian::GuardianUnavailable;
    pub use crate::process::guardian::{
        PROGRAM_VARIABLE as GUARDIAN_VARIABLE, SUBCOMMAND as GUARDIAN_SUBCOMMAND,
        set_program as set_guardian_program,
    };

    /// For a binary that serves as its own guardian (the `quietus` command and `serve`):
    /// `program` is this very executable, whose answer need not be waited for. Not for other
    /// use.
    #[doc(hidden)]
    pub fn use_own_executable(program: impl Into<std::path::PathBuf>) {
        crate::process::guardian::use_own_executable(program.into());
    }

    /// The guardian's own life, for a binary that serves as one (`quietus __guardian`):
    /// returns its exit status. Not for other use.
    #[doc(hidden)]
    pub fn run_guardian() -> i32 {
        crate::process::sys::unsafe_calls::close_inherited(3);
        crate::process::guardian::run()
    }

    /// Makes this process fit to supervise whatever state it was started with, as the
    /// `quietus` command and `quietus serve` do first thing. Call it once, early in
    /// `main`, before other threads start; later calls do nothing.
    ///
    /// - SIGCHLD ignored → its default action: with SIGCHLD ignored the kernel reaps children
    ///   itself, and no session could learn its program's exit status (coreutils' `timeout`
    ///   does the same).
    /// - The soft limit of open descriptors (`RLIMIT_NOFILE`) → the hard limit: each session
    ///   holds pipes, a pidfd, its cgroup's files and watches.
    ///
    /// Every program a session starts afterwards gets the state this process was started
    /// with: the signals ignored then are ignored again (SIGCHLD among them), and the soft
    /// limit is the original one. (SIGPIPE aside: the Rust runtime ignores it before `main`,
    /// and programs get its default action, as from std.) Without this call a session's
    /// program inherits this process's state as it is. Linux; elsewhere it does nothing.
    ///
    /// # Errors
    ///
    /// When `/proc/self/status` cannot be read, or SIGCHLD's action cannot be set.
    pub fn prepare() -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            let done = crate::process::sys::start_state::prepare_supervisor()?;
            if done.sigchld_restored {
                log::debug!(
                    "SIGCHLD was ignored: its default action for quietus, ignored again for the programs"
                );
            }
            if let Some((from, to)) = done.nofile_raised {
                log::debug!(
                    "descriptor limit raised from {from} to {to} (the programs get {from})"
                );
            }
        }
        Ok(())
    }
}
