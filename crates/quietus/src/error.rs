//! The crate's errors: [`ConfigError`], an invalid setting (a value used by the configuration
//! and the types it parses, such as [`Signal`](crate::Signal)); and [`SpawnError`], why a spawn
//! failed, by kind, as walkdir does it: an error type of its own with a
//! [`kind`](SpawnError::kind), carried inside every `io::Error` that
//! [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) returns ([`SpawnError::of`]), and
//! `From<SpawnError> for io::Error`.

use std::fmt;
use std::io;
use std::time::Duration;

pub use crate::setting::Setting;

/// An invalid setting of a [`MonitorConfig`](crate::MonitorConfig), or settings of a
/// [`SessionBuilder`](crate::SessionBuilder) that do not go together. The message names the
/// setting and what it accepts; [`setting`](Self::setting) names it as a [`Setting`], for a
/// client that reports it in its own words (a command-line option, a JSON parameter).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duration outside its accepted range.
    OutOfRange {
        /// The setting.
        setting: Setting,
        /// The rejected value.
        value: Duration,
        /// Smallest accepted value.
        min: Duration,
        /// Largest accepted value.
        max: Duration,
    },
    /// The kill ladder has no step.
    EmptyLadder,
    /// SIGKILL appears before the last step of the ladder (nothing can follow it).
    KillBeforeEnd {
        /// Index of the offending step.
        step: usize,
    },
    /// A signal name or number that is not a standard signal.
    InvalidSignal {
        /// The rejected text.
        value: String,
    },
    /// A size outside its accepted range.
    SizeOutOfRange {
        /// The setting.
        setting: Setting,
        /// The rejected value.
        value: usize,
        /// Smallest accepted value.
        min: usize,
        /// Largest accepted value.
        max: usize,
    },
    /// A fraction outside 0 < f < 1.
    InvalidFraction {
        /// The setting.
        setting: Setting,
        /// The rejected value.
        value: f64,
    },
    /// A CPU threshold outside 0 < t <= 64 (cores), or not a number.
    InvalidThreshold {
        /// The rejected value.
        value: f64,
    },
    /// A glob that does not parse.
    InvalidGlob {
        /// [`Setting::FilesInclude`] or [`Setting::FilesExclude`].
        setting: Setting,
        /// The rejected pattern.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A terminal ([`SessionBuilder::pty`](crate::SessionBuilder::pty)) with no row or no
    /// column.
    TerminalSize {
        /// The rows asked for.
        rows: u16,
        /// The columns asked for.
        cols: u16,
    },
    /// [`SessionBuilder::stdin`](crate::SessionBuilder::stdin) in a terminal session, whose
    /// stdin is its terminal.
    StdinWithTerminal,
    /// [`Environment::seed`](crate::Environment::seed) without
    /// [`Environment::home`](crate::Environment::home) to copy the files into.
    SeedWithoutHome,
    /// A regular expression that does not parse (or an empty completion file path).
    InvalidPattern {
        /// [`Setting::CompletionOutput`] or [`Setting::CompletionFiles`].
        setting: Setting,
        /// The rejected pattern.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A probe whose name or timeout cannot be used.
    InvalidProbe {
        /// The probe's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A solo cap for a source that does not exist (a probe name no probe has).
    UnknownSource {
        /// The name given.
        name: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OutOfRange {
                setting,
                value,
                min,
                max,
            } => write!(
                f,
                "{setting} is {value:?}, but it must be between {min:?} and {max:?}"
            ),
            ConfigError::EmptyLadder => f.write_str(
                "kill_ladder is empty: it needs at least one (signal, grace) step \
                 (use KillLadder::immediate() for SIGKILL at once)",
            ),
            ConfigError::KillBeforeEnd { step } => write!(
                f,
                "kill_ladder step {step} is SIGKILL, but SIGKILL may only be the last step"
            ),
            ConfigError::InvalidSignal { value } => write!(
                f,
                "signal {value:?} is not a standard signal: use a name like TERM, INT, HUP \
                 (with or without SIG) or a number from 1 to 31"
            ),
            ConfigError::SizeOutOfRange {
                setting,
                value,
                min,
                max,
            } => write!(
                f,
                "{setting} is {value}, but it must be between {min} and {max}"
            ),
            ConfigError::InvalidFraction { setting, value } => write!(
                f,
                "{setting} is {value}, but it must be a fraction between 0 and 1 (exclusive)"
            ),
            ConfigError::InvalidThreshold { value } => write!(
                f,
                "children.cpu_threshold is {value}, but it must be a fraction of one core \
                 greater than 0 and at most 64 (0.05 = 5 %)"
            ),
            ConfigError::InvalidGlob {
                setting,
                pattern,
                reason,
            } => write!(
                f,
                "{setting} pattern {pattern:?} is not a valid glob ({reason}): use patterns like \
                 *.md, notes/**, **/*.tmp"
            ),
            ConfigError::TerminalSize { rows, cols } => write!(
                f,
                "invalid terminal size {rows}x{cols}: rows and columns must be at least 1"
            ),
            ConfigError::StdinWithTerminal => f.write_str(
                "a terminal session's stdin is its terminal: SessionBuilder::stdin does not apply",
            ),
            ConfigError::SeedWithoutHome => f.write_str(
                "Environment::seed copies files into the isolated home: set Environment::home",
            ),
            ConfigError::InvalidPattern { .. }
            | ConfigError::InvalidProbe { .. }
            | ConfigError::UnknownSource { .. } => self.fmt_rules(f),
        }
    }
}

impl ConfigError {
    /// The setting the error is about, where it is one setting (`None`: a signal name that
    /// does not parse, a terminal session given a stdin, a seed without a home).
    pub fn setting(&self) -> Option<Setting> {
        Some(match self {
            ConfigError::OutOfRange { setting, .. }
            | ConfigError::SizeOutOfRange { setting, .. }
            | ConfigError::InvalidFraction { setting, .. }
            | ConfigError::InvalidGlob { setting, .. }
            | ConfigError::InvalidPattern { setting, .. } => *setting,
            ConfigError::EmptyLadder | ConfigError::KillBeforeEnd { .. } => Setting::KillLadder,
            ConfigError::InvalidThreshold { .. } => Setting::ChildrenCpuThreshold,
            ConfigError::TerminalSize { .. } => Setting::PtySize,
            ConfigError::InvalidProbe { .. } => Setting::Probes,
            ConfigError::UnknownSource { .. } => Setting::SoloCap,
            ConfigError::InvalidSignal { .. }
            | ConfigError::StdinWithTerminal
            | ConfigError::SeedWithoutHome => return None,
        })
    }

    /// The messages of the completion, probe and solo-cap settings.
    fn fmt_rules(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidPattern {
                setting,
                pattern,
                reason,
            } => write!(
                f,
                "{setting} pattern {pattern:?} is not valid ({reason}): use a regular expression \
                 like ^\\{{\"type\":\"result\" or DONE$"
            ),
            ConfigError::InvalidProbe { name, reason } => write!(
                f,
                "probe {name:?} cannot be used: {reason} (a probe's name is 1 to 64 letters, \
                 digits, '_', '-' or '.', not the name of a built-in source, and its timeout \
                 1ms to 10m)"
            ),
            ConfigError::UnknownSource { name } => write!(
                f,
                "solo cap for {name:?}: no such source (use output, files, children, \
                 repeated_output, keepalive or the name of a configured probe)"
            ),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Which part of a spawn failed: what [`SpawnError::kind`] says, roughly in the order of the
/// spawn's steps. Whatever the kind, nothing is left running: a failure before the program is
/// started starts nothing, and a child already started is killed and reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpawnErrorKind {
    /// An invalid setting: a [`MonitorConfig`](crate::MonitorConfig) that does not
    /// [`validate`](crate::MonitorConfig::validate), or builder settings that do not go
    /// together ([`SessionBuilder::stdin`](crate::SessionBuilder::stdin) with
    /// [`pty`](crate::SessionBuilder::pty), a terminal with no row or column,
    /// [`Environment::seed`](crate::Environment::seed) without
    /// [`home`](crate::Environment::home)). The `io::ErrorKind` is `InvalidInput` and the
    /// [`inner`](SpawnError::inner) error a [`ConfigError`].
    Config,
    /// The isolated home ([`Environment::home`](crate::Environment::home)) or one of its XDG
    /// folders cannot be created; the message names the folder. (A seed file that cannot be
    /// copied is not an error: see [`IsolatedHome::failed`](crate::IsolatedHome::failed).)
    Home,
    /// The log folder the caller named
    /// ([`CaptureConfig::log_dir`](crate::CaptureConfig::log_dir)) cannot be used. (An unusable
    /// *default* folder is not an error: the run goes on without a log, and
    /// [`MonitorResult::logs`](crate::MonitorResult::logs) says why.) The `io::ErrorKind` is
    /// `PermissionDenied` when the folder is refused for its rights, else `Other` (never
    /// `NotFound`), and the message names the folder and what is wrong with it.
    LogDir,
    /// The pseudo-terminal of a terminal session
    /// ([`SessionBuilder::pty`](crate::SessionBuilder::pty)) cannot be opened or prepared (no
    /// pseudo-terminal left, too many open files).
    Terminal,
    /// The one pipe of the combined mode
    /// ([`CaptureConfig::combined`](crate::CaptureConfig::combined)) cannot be made, or the
    /// output pipes cannot be set up for reading (too many open files). (Separate stdout and
    /// stderr pipes are made by the system's spawn itself: a failure there is
    /// [`Program`](Self::Program).)
    Pipe,
    /// This process's working directory, against which the watched folders
    /// ([`FileWatchConfig::roots`](crate::FileWatchConfig::roots)) are resolved, cannot be read
    /// (it was removed).
    WorkingDir,
    /// The operating system did not start the program: not found (also when the command's
    /// working directory is missing), not executable… The `io::ErrorKind` is the system's
    /// (`NotFound`, `PermissionDenied`…), the message names the program, and the
    /// [`inner`](SpawnError::inner) error is the system's `io::Error`.
    Program,
    /// A thread of the session (a reader, the monitor, a log writer…) cannot be started. When
    /// the child was already running, it has been killed and reaped.
    Thread,
    /// [`Containment::Cgroup`](crate::Containment::Cgroup) was asked for and no cgroup
    /// can be made for the session (no cgroup2 mount, no right to create a cgroup under this
    /// process's own or to move a process into it); the message says why and what to do. The
    /// program was not started.
    Containment,
}

/// Why [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) failed: a
/// [`kind`](Self::kind), a message that says what could not be done, and the error underneath.
///
/// The spawn returns an `io::Error` (every `?` in a caller's code keeps working) that carries
/// this error: [`SpawnError::of`] finds it, and `std::error::Error::source` of the `io::Error`
/// is the [`inner`](Self::inner) error. The `io::Error` keeps the kind the failure had (a
/// missing program is `NotFound`, an invalid configuration `InvalidInput`) and its message is
/// this error's.
///
/// ```
/// use std::process::Command;
/// use quietus::{MonitorConfig, Session, SpawnError, SpawnErrorKind};
///
/// let err = Session::spawn(Command::new("no-such-program-here"), MonitorConfig::default())
///     .unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// let spawn_error = SpawnError::of(&err).expect("every spawn error carries one");
/// assert_eq!(spawn_error.kind(), SpawnErrorKind::Program);
/// assert!(err.to_string().contains("no-such-program-here"), "{err}");
/// ```
#[derive(Debug)]
pub struct SpawnError {
    kind: SpawnErrorKind,
    /// What could not be done, the underlying error included.
    message: String,
    source: Box<dyn std::error::Error + Send + Sync>,
    /// The `io::ErrorKind` it becomes.
    io_kind: io::ErrorKind,
}

impl SpawnError {
    /// An invalid setting: `InvalidInput`, with the setting's own message.
    pub(crate) fn config(e: ConfigError) -> Self {
        Self {
            kind: SpawnErrorKind::Config,
            message: e.to_string(),
            source: Box::new(e),
            io_kind: io::ErrorKind::InvalidInput,
        }
    }

    /// The log folder cannot be used. Its `io::ErrorKind` is `PermissionDenied` when the folder
    /// is refused for its rights (read-only, not writable, someone else's), else `Other`: never
    /// `NotFound`, the kind of "program not found".
    pub(crate) fn log_dir(e: io::Error) -> Self {
        let io_kind = match e.kind() {
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                io::ErrorKind::PermissionDenied
            }
            _ => io::ErrorKind::Other,
        };
        let source: Box<dyn std::error::Error + Send + Sync> = match e.into_inner() {
            Some(inner) => inner,
            None => Box::new(io::Error::other("the log folder cannot be used")),
        };
        Self {
            kind: SpawnErrorKind::LogDir,
            message: source.to_string(),
            source,
            io_kind,
        }
    }

    /// `what` could not be done because of `e`, whose `io::ErrorKind` is kept: the message is
    /// "`what`: `e`".
    pub(crate) fn new(kind: SpawnErrorKind, what: impl fmt::Display, e: io::Error) -> Self {
        Self {
            kind,
            message: format!("{what}: {e}"),
            io_kind: e.kind(),
            source: Box::new(e),
        }
    }

    /// The operating system did not start `program`: the message names it, with a hint for the
    /// two common kinds (which are kept, so `NotFound` and `PermissionDenied` can still be told
    /// apart).
    pub(crate) fn program(program: &std::ffi::OsStr, e: io::Error) -> Self {
        let hint = match e.kind() {
            io::ErrorKind::NotFound => " (program not found, or a missing working directory)",
            io::ErrorKind::PermissionDenied => " (not executable?)",
            _ => "",
        };
        let program = program.to_string_lossy();
        Self {
            kind: SpawnErrorKind::Program,
            message: format!("cannot run {program:?}: {e}{hint}"),
            io_kind: e.kind(),
            source: Box::new(e),
        }
    }

    /// The session's `what` thread (`"monitor"`, `"stdout reader"`…) cannot be started.
    pub(crate) fn thread(what: &str, e: io::Error) -> Self {
        Self::new(
            SpawnErrorKind::Thread,
            format_args!("cannot start quietus's {what} thread"),
            e,
        )
    }

    /// The `SpawnError` an `io::Error` from a spawn carries (`None` for any other `io::Error`).
    pub fn of(error: &io::Error) -> Option<&SpawnError> {
        error.get_ref()?.downcast_ref::<SpawnError>()
    }

    /// Which part of the spawn failed.
    pub fn kind(&self) -> SpawnErrorKind {
        self.kind
    }

    /// The underlying error: a [`ConfigError`] for [`SpawnErrorKind::Config`], what is
    /// wrong with the log folder for [`SpawnErrorKind::LogDir`], the system's
    /// `io::Error` for every other kind (`raw_os_error` and all). Also what
    /// `std::error::Error::source` gives, on this error and on the `io::Error` carrying it.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.source.as_ref()
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

impl From<SpawnError> for io::Error {
    /// An `io::Error` of the kind the failure had, carrying the `SpawnError`
    /// ([`SpawnError::of`] finds it again).
    fn from(e: SpawnError) -> Self {
        io::Error::new(e.io_kind, e)
    }
}
