//! The crate's errors, and the kinds and reasons they give (as `std::io` holds `io::Error`
//! and its `ErrorKind`): [`ConfigError`], an invalid setting (a value used by the
//! configuration and the types it parses, such as [`Signal`](crate::Signal)), which names its
//! [`Setting`]; [`SpawnError`], why a spawn failed, by [`SpawnErrorKind`], as walkdir does it:
//! the error type [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) returns, with
//! `From<SpawnError> for io::Error` (so `?` still works in a function that returns
//! `io::Result`); [`SystemError`], an operating system's error kept in a result or a reason (an
//! `io::Error` can be neither cloned nor compared); [`ProbeProblem`], what is wrong with a
//! probe; [`InvalidPid`], a number that is no process id; and [`Rejection`], why a
//! [`Registry`](crate::Registry) refused a control. The crate root re-exports the two a caller
//! meets every day, [`ConfigError`] and [`SpawnError`].
//!
//! Every error here prints each cause once: an error whose `source()` is its cause says only
//! what could not be done, and one that adds nothing to its cause is transparent (its text and
//! its source are its cause's), so a chain printed cause by cause repeats nothing.

use std::fmt;
use std::io;
use std::time::Duration;

pub use crate::pid::InvalidPid;
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
        reason: ProbeProblem,
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

/// What is wrong with a probe ([`ConfigError::InvalidProbe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeProblem {
    /// Its name is empty, longer than 64 characters, or has a character other than letters,
    /// digits, `_`, `-` and `.`.
    Name,
    /// Its name is a built-in source's (`output`, `files`…).
    BuiltInName,
    /// Another probe has the same name.
    DuplicateName,
    /// Its timeout is below 1 ms or above 10 minutes.
    Timeout,
}

impl fmt::Display for ProbeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProbeProblem::Name => "the name has a character that is not allowed, or its length",
            ProbeProblem::BuiltInName => "the name is a built-in source's",
            ProbeProblem::DuplicateName => "two probes have this name",
            ProbeProblem::Timeout => "the timeout is out of range",
        })
    }
}

/// Which part of a spawn failed: what [`SpawnError::kind`] says, roughly in the order of the
/// spawn's steps. Whatever the kind, nothing is left running: a failure before the program is
/// started starts nothing, and a child already started is killed and reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpawnErrorKind {
    /// An invalid setting: a [`MonitorConfigBuilder`](crate::config::MonitorConfigBuilder)
    /// given to the session's builder that does not
    /// [`build`](crate::config::MonitorConfigBuilder::build), or builder settings that do not go
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

/// An operating system's error, kept where a result or a reason must be cloned and compared (an
/// `io::Error` can be neither): its kind, its error number, and its text as the `io::Error`
/// said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemError {
    kind: io::ErrorKind,
    code: Option<i32>,
    text: String,
}

impl SystemError {
    /// The `io::ErrorKind`.
    pub fn kind(&self) -> io::ErrorKind {
        self.kind
    }

    /// The system's error number (`errno`), when there was one.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.code
    }
}

impl SystemError {
    /// An error a library below said in words only (no `io::Error` underneath).
    pub(crate) fn other(text: impl Into<String>) -> Self {
        SystemError {
            kind: io::ErrorKind::Other,
            code: None,
            text: text.into(),
        }
    }
}

impl From<&io::Error> for SystemError {
    fn from(e: &io::Error) -> Self {
        SystemError {
            kind: e.kind(),
            code: e.raw_os_error(),
            text: e.to_string(),
        }
    }
}

impl From<io::Error> for SystemError {
    fn from(e: io::Error) -> Self {
        SystemError::from(&e)
    }
}

impl fmt::Display for SystemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) failed: a
/// [`kind`](Self::kind), what could not be done, and the error underneath
/// ([`inner`](Self::inner), also `std::error::Error::source`).
///
/// Its text says what could not be done and not its cause, which is its `source()`: print the
/// chain (`error`, then each `source()`) to see both. A [`Config`](SpawnErrorKind::Config) or
/// [`LogDir`](SpawnErrorKind::LogDir) error adds nothing to its cause and is transparent: its
/// text is the cause's, and its `source()` the cause's own.
///
/// `From<SpawnError> for io::Error` gives an `io::Error` of the kind the failure had
/// ([`io_error_kind`](Self::io_error_kind): a missing program is `NotFound`, an invalid
/// configuration `InvalidInput`), so `?` in a function that returns `io::Result` keeps working.
///
/// ```
/// use std::process::Command;
/// use quietus::error::SpawnErrorKind;
/// use quietus::{MonitorConfig, Session};
///
/// let err = Session::spawn(Command::new("no-such-program-here"), MonitorConfig::default())
///     .unwrap_err();
/// assert_eq!(err.kind(), SpawnErrorKind::Program);
/// assert_eq!(err.io_error_kind(), std::io::ErrorKind::NotFound);
/// assert!(err.to_string().contains("no-such-program-here"), "{err}");
/// // The cause is the source, not repeated in the text.
/// let cause = std::error::Error::source(&err).expect("the system's error");
/// assert!(!err.to_string().contains(&cause.to_string()), "{err}");
/// let io_error = std::io::Error::from(err);
/// assert_eq!(io_error.kind(), std::io::ErrorKind::NotFound);
/// ```
#[derive(Debug)]
pub struct SpawnError {
    kind: SpawnErrorKind,
    /// What could not be done, without the cause's text; `None`: transparent.
    context: Option<String>,
    source: Box<dyn std::error::Error + Send + Sync>,
    /// The `io::ErrorKind` it becomes.
    io_kind: io::ErrorKind,
}

impl SpawnError {
    /// An invalid setting: `InvalidInput`, transparent (the setting's own message).
    pub(crate) fn config(e: ConfigError) -> Self {
        Self {
            kind: SpawnErrorKind::Config,
            context: None,
            source: Box::new(e),
            io_kind: io::ErrorKind::InvalidInput,
        }
    }

    /// The log folder cannot be used. Its `io::ErrorKind` is `PermissionDenied` when the folder
    /// is refused for its rights (read-only, not writable, someone else's), else `Other`: never
    /// `NotFound`, the kind of "program not found". Transparent: the error names the folder.
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
            context: None,
            source,
            io_kind,
        }
    }

    /// `what` could not be done because of `e`, whose `io::ErrorKind` is kept: the text is
    /// `what`, the source `e`.
    pub(crate) fn new(kind: SpawnErrorKind, what: impl fmt::Display, e: io::Error) -> Self {
        Self {
            kind,
            context: Some(what.to_string()),
            io_kind: e.kind(),
            source: Box::new(e),
        }
    }

    /// `what` could not be done because of `why`, an error of the crate's own (a reason), as
    /// an `io::Error` of kind `io_kind`.
    pub(crate) fn because(
        kind: SpawnErrorKind,
        what: impl fmt::Display,
        why: impl std::error::Error + Send + Sync + 'static,
        io_kind: io::ErrorKind,
    ) -> Self {
        Self {
            kind,
            context: Some(what.to_string()),
            io_kind,
            source: Box::new(why),
        }
    }

    /// The operating system did not start `program`: the text names it, with a hint for the
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
            context: Some(format!("cannot run {program:?}{hint}")),
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

    /// The `SpawnError` an `io::Error` of the spawn's inner steps carries (`None` for any
    /// other `io::Error`).
    pub(crate) fn of(error: &io::Error) -> Option<&SpawnError> {
        error.get_ref()?.downcast_ref::<SpawnError>()
    }

    /// The `SpawnError` an inner step's `io::Error` carries, or, for an `io::Error` that
    /// carries none, the failure of quietus's threads it is.
    pub(crate) fn from_step(error: io::Error) -> SpawnError {
        if SpawnError::of(&error).is_none() {
            return SpawnError::new(
                SpawnErrorKind::Thread,
                "cannot start quietus's threads",
                error,
            );
        }
        let io_kind = error.kind();
        match error
            .into_inner()
            .map(|inner| inner.downcast::<SpawnError>())
        {
            Some(Ok(spawn)) => *spawn,
            Some(Err(other)) => SpawnError::new(
                SpawnErrorKind::Thread,
                "cannot start quietus's threads",
                io::Error::new(io_kind, other),
            ),
            None => SpawnError::new(
                SpawnErrorKind::Thread,
                "cannot start quietus's threads",
                io::Error::from(io_kind),
            ),
        }
    }

    /// Which part of the spawn failed.
    pub fn kind(&self) -> SpawnErrorKind {
        self.kind
    }

    /// The `io::ErrorKind` the failure had, the one `io::Error::from` gives: the system's for
    /// [`Program`](SpawnErrorKind::Program) (`NotFound`, `PermissionDenied`…),
    /// `InvalidInput` for [`Config`](SpawnErrorKind::Config).
    pub fn io_error_kind(&self) -> io::ErrorKind {
        self.io_kind
    }

    /// The underlying error: a [`ConfigError`] for [`SpawnErrorKind::Config`], what is
    /// wrong with the log folder for [`SpawnErrorKind::LogDir`], the reason for
    /// [`SpawnErrorKind::Containment`], the system's `io::Error` for every other kind
    /// (`raw_os_error` and all). For the kinds that are not transparent, also what
    /// `std::error::Error::source` gives.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.source.as_ref()
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.context {
            Some(context) => f.write_str(context),
            None => fmt::Display::fmt(&self.source, f),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.context {
            Some(_) => Some(self.source.as_ref()),
            None => self.source.source(),
        }
    }
}

impl From<SpawnError> for io::Error {
    /// An `io::Error` of the kind the failure had, carrying the `SpawnError` (its text and
    /// its source are the `SpawnError`'s; `get_ref` and `downcast_ref` find it again).
    fn from(e: SpawnError) -> Self {
        io::Error::new(e.io_kind, e)
    }
}

impl From<ConfigError> for io::Error {
    /// An `io::Error` of kind `InvalidInput`, carrying the [`SpawnError`] the configuration
    /// would have failed a spawn with: a builder's `build()?` in a function that returns
    /// `io::Result`.
    fn from(e: ConfigError) -> Self {
        SpawnError::config(e).into()
    }
}

/// Why the registry rejected a [`ControlAction`](crate::ControlAction)
/// ([`ControlAnswer::Rejected`](crate::ControlAnswer::Rejected)); nothing was changed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// The new setting is invalid ([`ControlAction::SetIdleTimeout`](crate::ControlAction::SetIdleTimeout) out of range).
    InvalidSetting(ConfigError),
    /// The terminal cannot be written ([`ControlAction::Interrupt`](crate::ControlAction::Interrupt) in a terminal session
    /// whose run is over).
    CannotInterrupt(SystemError),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::InvalidSetting(e) => e.fmt(f),
            Rejection::CannotInterrupt(e) => e.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error of a chain, in order.
    fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut texts = vec![error.to_string()];
        let mut next = error.source();
        while let Some(e) = next {
            texts.push(e.to_string());
            next = e.source();
        }
        texts
    }

    /// No error of the chain repeats the text of the cause that follows it.
    fn assert_each_cause_once(error: &(dyn std::error::Error + 'static)) {
        let texts = chain(error);
        for pair in texts.windows(2) {
            assert!(
                !pair[0].contains(&pair[1]),
                "{:?} repeats its cause {:?} (chain {texts:?})",
                pair[0],
                pair[1]
            );
        }
    }

    fn missing() -> io::Error {
        io::Error::from_raw_os_error(2)
    }

    #[test]
    fn a_spawn_error_prints_each_cause_once() {
        let errors = [
            SpawnError::program("absent".as_ref(), missing()),
            SpawnError::thread("monitor", io::Error::other("no thread left")),
            SpawnError::new(
                SpawnErrorKind::Pipe,
                "cannot make the output pipe",
                missing(),
            ),
            SpawnError::config(ConfigError::EmptyLadder),
            SpawnError::log_dir(io::Error::other("the log folder /x is read-only")),
            SpawnError::from_step(io::Error::other("a step without a kind")),
        ];
        for error in errors {
            assert_each_cause_once(&error);
            let text = error.to_string();
            let io_error = io::Error::from(error);
            assert_eq!(io_error.to_string(), text, "the io::Error says the same");
            assert_each_cause_once(&io_error);
        }
    }

    #[test]
    fn the_cause_is_the_source_or_the_text_never_both() {
        let error = SpawnError::program("absent".as_ref(), missing());
        let cause = std::error::Error::source(&error).expect("the system's error");
        assert_eq!(cause.to_string(), missing().to_string());
        assert!(error.to_string().contains("absent"), "{error}");
        assert!(error.to_string().contains("program not found"), "{error}");
        // Transparent: the setting's own message, nothing under it.
        let config = SpawnError::config(ConfigError::EmptyLadder);
        assert_eq!(config.to_string(), ConfigError::EmptyLadder.to_string());
        assert!(std::error::Error::source(&config).is_none());
        assert!(config.inner().downcast_ref::<ConfigError>().is_some());
    }

    #[test]
    fn a_step_keeps_its_spawn_error() {
        let step: io::Error =
            SpawnError::new(SpawnErrorKind::Terminal, "no terminal", missing()).into();
        let back = SpawnError::from_step(step);
        assert_eq!(back.kind(), SpawnErrorKind::Terminal);
        assert_eq!(back.io_error_kind(), io::ErrorKind::NotFound);
        assert_eq!(back.to_string(), "no terminal");
        let other = SpawnError::from_step(io::Error::other("plain"));
        assert_eq!(other.kind(), SpawnErrorKind::Thread);
    }

    #[test]
    fn a_system_error_keeps_kind_number_and_text() {
        let e = SystemError::from(missing());
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(e.raw_os_error(), Some(2));
        assert_eq!(e.to_string(), missing().to_string());
    }
}
