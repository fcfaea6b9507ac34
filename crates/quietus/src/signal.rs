//! [`Signal`]: a Unix signal quietus can send (a value used by every layer).

use std::fmt;
use std::str::FromStr;

use crate::error::ConfigError;

/// A Unix signal: one quietus can send, by number (`Signal::TERM`, `"INT".parse()`,
/// `"15".parse()`), or the one a child died of ([`MonitorResult::signal`](crate::MonitorResult::signal)).
///
/// Only the standard signals 1..=31 are accepted to be sent; real-time signals are reserved by
/// libc (a child may still die of one: then its name is its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(i32);

impl Signal {
    /// SIGHUP.
    pub const HUP: Signal = Signal(crate::process::sys::SIGHUP);
    /// SIGINT.
    pub const INT: Signal = Signal(crate::process::sys::SIGINT);
    /// SIGQUIT.
    pub const QUIT: Signal = Signal(crate::process::sys::SIGQUIT);
    /// SIGKILL: cannot be caught; always the last step of a ladder.
    pub const KILL: Signal = Signal(crate::process::sys::SIGKILL);
    /// SIGTERM: the default first step of the ladder.
    pub const TERM: Signal = Signal(crate::process::sys::SIGTERM);
    /// SIGUSR1.
    pub const USR1: Signal = Signal(crate::process::sys::SIGUSR1);
    /// SIGUSR2.
    pub const USR2: Signal = Signal(crate::process::sys::SIGUSR2);
    /// SIGCONT: the ladder follows each polite step with it, so stopped processes act on it.
    pub const CONT: Signal = Signal(crate::process::sys::SIGCONT);

    /// The signal with this number, if this platform has it among the standard signals.
    pub fn from_number(number: i32) -> Option<Signal> {
        crate::process::sys::signal_is_known(number).then_some(Signal(number))
    }

    /// The signal a process died of, whatever its number (a real-time one included).
    pub(crate) fn received(number: i32) -> Signal {
        Signal(number)
    }

    /// The signal number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The short name without the `SIG` prefix (`"TERM"`), or the number for an unnamed one.
    pub fn name(self) -> String {
        crate::process::sys::signal_name(self.0)
            .map(str::to_owned)
            .unwrap_or_else(|| self.0.to_string())
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for Signal {
    type Err = ConfigError;

    /// Accepts `TERM`, `SIGTERM`, `term` or `15`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ConfigError::InvalidSignal {
            value: s.to_owned(),
        };
        let t = s.trim();
        if let Ok(n) = t.parse::<i32>() {
            return Signal::from_number(n).ok_or_else(bad);
        }
        let upper = t.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        crate::process::sys::signal_by_name(name)
            .map(Signal)
            .ok_or_else(bad)
    }
}
