//! The crate's errors: [`ConfigError`], an invalid setting (a value used by the configuration
//! and the types it parses, such as [`Signal`](crate::Signal)); and [`SpawnError`], why a spawn
//! failed, by kind, as walkdir does it: an error type of its own with a
//! [`kind`](SpawnError::kind), carried inside the `io::Error` that
//! [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) returns
//! (`err.get_ref()` and `downcast_ref::<SpawnError>()`), and `From<SpawnError> for io::Error`.

use std::fmt;
use std::io;
use std::time::Duration;

/// An invalid setting. The message names the field and what it accepts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duration outside its accepted range.
    OutOfRange {
        /// The field, as named in [`MonitorConfig`](crate::MonitorConfig).
        field: &'static str,
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
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: usize,
        /// Smallest accepted value.
        min: usize,
        /// Largest accepted value.
        max: usize,
    },
    /// A fraction outside 0 < f < 1.
    InvalidFraction {
        /// The field.
        field: &'static str,
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
        /// `files.include` or `files.exclude`.
        field: &'static str,
        /// The rejected pattern.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OutOfRange {
                field,
                value,
                min,
                max,
            } => write!(
                f,
                "{field} is {value:?}, but it must be between {min:?} and {max:?}"
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
                field,
                value,
                min,
                max,
            } => write!(
                f,
                "{field} is {value}, but it must be between {min} and {max}"
            ),
            ConfigError::InvalidFraction { field, value } => write!(
                f,
                "{field} is {value}, but it must be a fraction between 0 and 1 (exclusive)"
            ),
            ConfigError::InvalidThreshold { value } => write!(
                f,
                "children.cpu_threshold is {value}, but it must be a fraction of one core \
                 greater than 0 and at most 64 (0.05 = 5 %)"
            ),
            ConfigError::InvalidGlob {
                field,
                pattern,
                reason,
            } => write!(
                f,
                "{field} pattern {pattern:?} is not a valid glob ({reason}): use patterns like \
                 *.md, notes/**, **/*.tmp"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Which part of a spawn failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpawnErrorKind {
    /// The log folder the caller named ([`CaptureConfig::log_dir`](crate::CaptureConfig::log_dir))
    /// cannot be used. (An unusable *default* folder is not an error: the run goes on without a
    /// log, and [`MonitorResult::logs`](crate::MonitorResult::logs) says why.)
    LogDir,
}

/// A spawn failed before the program ran.
#[derive(Debug)]
pub struct SpawnError {
    kind: SpawnErrorKind,
    source: Box<dyn std::error::Error + Send + Sync>,
    /// The `io::ErrorKind` it becomes.
    io_kind: io::ErrorKind,
}

impl SpawnError {
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
            source,
            io_kind,
        }
    }

    /// Which part of the spawn failed.
    pub fn kind(&self) -> SpawnErrorKind {
        self.kind
    }

    /// The underlying error (for [`SpawnErrorKind::LogDir`]: a
    /// [`LogDirError`](crate::LogDirError)).
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.source.as_ref()
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

impl From<SpawnError> for io::Error {
    fn from(e: SpawnError) -> Self {
        io::Error::new(e.io_kind, e)
    }
}
