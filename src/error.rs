//! [`ConfigError`]: an invalid setting (a value used by the configuration and the types it
//! parses, such as [`Signal`](crate::Signal)).

use std::fmt;
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
