//! The end of a run in words: the exit status quietus ends with ([`exit_for`]), the one-line
//! summary on stderr ([`summary`]), observe mode's lines, and an error with its causes
//! ([`error_chain`]).

use std::time::Duration;

use quietus::outcome::HumanDuration;
use quietus::{MonitorResult, Outcome, Signal, outcome::Observation};

use super::Relay;

/// The signals quietus received and passed on while the program ran (the command's
/// `SignalHandling::finish` says; `serve` and `mcp` pass none on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Received {
    /// The first signal quietus received and passed on.
    pub(crate) first: Option<Signal>,
    /// Whether a second INT killed the tree at once.
    pub(crate) forced: bool,
}

/// How quietus ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Exit with this code.
    Code(i32),
    /// Die of this signal (the one quietus received and passed on); 128+N as process 1.
    Signal(Signal),
}

impl Exit {
    /// The status a shell shows for it (`$?`).
    pub(crate) fn code(self) -> i32 {
        match self {
            Exit::Code(code) => code,
            Exit::Signal(signal) => 128 + signal.number(),
        }
    }
}

/// The exit statuses of the ends quietus chose (`--exit-code-stall`,
/// `--exit-code-hard-timeout`, `--exit-code-input-wait`): 124 each by default, as GNU
/// `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitCodes {
    /// An idle timeout.
    pub(crate) stall: i32,
    /// A hard timeout.
    pub(crate) hard_timeout: i32,
    /// An input-wait timeout.
    pub(crate) input_wait: i32,
}

impl Default for ExitCodes {
    fn default() -> Self {
        let timeout = MonitorResult::EXIT_TIMEOUT;
        ExitCodes {
            stall: timeout,
            hard_timeout: timeout,
            input_wait: timeout,
        }
    }
}

impl ExitCodes {
    /// The status of `result` without a signal received: the one chosen for its outcome
    /// when quietus ended it so, else the library's [`MonitorResult::exit_code`].
    fn of(self, result: &MonitorResult) -> i32 {
        match result.outcome {
            Outcome::IdleTimeout(_) => self.stall,
            Outcome::HardTimeout { .. } => self.hard_timeout,
            Outcome::InputWait(_) => self.input_wait,
            _ => result.exit_code(),
        }
    }
}

/// The exit status for a finished run.
///
/// - Timeouts: 124, or the status `codes` chose for a stall, a hard timeout, an input wait;
///   the child's own exit: its code, or 128+N when it died of signal N that
///   quietus did not send (the library's [`MonitorResult::exit_code`]).
/// - Ended because quietus received a signal S and passed it on: quietus only relayed
///   it, so the child's end is reported as if S had reached it directly: its own exit code when
///   it exited (it handled S), otherwise quietus dies of S itself (also when the ladder had
///   to follow up with KILL), so that its parent sees what it asked for.
/// - 125 when the end of the tree could not be confirmed (whatever the outcome: the tree may
///   still run, and a caller that retries on 124 should not start a second one beside it).
/// - Then [`with_relay`]: 1 instead of 0 when passing the output through failed.
pub(crate) fn exit_for(result: &MonitorResult, received: &Received, codes: ExitCodes) -> Exit {
    if result.termination_unproven {
        return Exit::Code(MonitorResult::EXIT_INTERNAL);
    }
    match (&result.outcome, received.first) {
        (Outcome::Terminated { .. }, Some(signal)) => match result.status {
            Some(status) => match status.code() {
                Some(code) => Exit::Code(code),
                None => Exit::Signal(signal),
            },
            None => Exit::Code(MonitorResult::EXIT_INTERNAL),
        },
        _ => Exit::Code(codes.of(result)),
    }
}

/// The status for a failed pass-through of a program that succeeded (as GNU coreutils exit
/// after a write error).
pub(crate) const EXIT_RELAY_FAILED: i32 = 1;

/// The exit status once the pass-through is known: a write error on quietus's own stdout or
/// stderr (a full disk; not a broken pipe, which reaches the program itself) turns a success
/// into [`EXIT_RELAY_FAILED`], so the output lost is not hidden; every other status (the
/// program's own failure, 124, 125, a signal) is kept as it is.
pub(crate) fn with_relay(exit: Exit, relay: &Relay) -> Exit {
    match exit {
        Exit::Code(0) if relay.failed() => Exit::Code(EXIT_RELAY_FAILED),
        other => other,
    }
}

/// The one line printed when quietus ended the child, e.g.
/// `quietus: ended after 5m0s idle (output 5m0s, files 7m12s, children 5m0s idle); sent
/// TERM, then KILL after 5s`. `None` when the child ended by itself.
pub(crate) fn summary(
    result: &MonitorResult,
    received: &Received,
    grace: Duration,
) -> Option<String> {
    let why = why_ended(&result.outcome, received)?;
    let mut line = format!("quietus: {why}; {}", ladder_words(result, received, grace));
    if result.leftovers_killed > 0 {
        line.push_str(&format!(
            "; {} leftover process(es) ended",
            result.leftovers_killed
        ));
    }
    if result.termination_unproven {
        line.push_str("; termination unproven: the tree may still run");
    }
    Some(line)
}

/// Observe mode (issue 43): the line printed at the moment quietus would have ended the run,
/// e.g. `quietus: would have ended after 3s idle (output 3s idle): sh (pid 7) sleeps`.
pub(crate) fn observed_line(observation: &Observation) -> String {
    format!(
        "quietus: would have {} (at {}; observing only)",
        why_ended(&observation.would_have_ended, &Received::default())
            .unwrap_or_else(|| "ended".to_owned()),
        HumanDuration(observation.at)
    )
}

/// Observe mode (issue 43): the last line when quietus would have ended the run at least
/// once, e.g. `quietus: observed only: would have ended it 2 times, first after 3s idle (…): …`.
pub(crate) fn observed_summary(result: &MonitorResult) -> Option<String> {
    let first = result.observations.first()?;
    Some(format!(
        "quietus: observed only: would have ended it {} time(s), first at {}: {}; it ran to its \
         own end",
        result.observations.len() as u64 + result.observations_dropped,
        HumanDuration(first.at),
        why_ended(&first.would_have_ended, &Received::default())
            .unwrap_or_else(|| "ended".to_owned()),
    ))
}

/// Why quietus ended the run (or would have), in words: `ended after 5m0s idle (…): …`;
/// `None` when the child ended by itself.
pub(super) fn why_ended(outcome: &Outcome, received: &Received) -> Option<String> {
    Some(match outcome {
        Outcome::IdleTimeout(report) => match &report.diagnosis {
            Some(diagnosis) => format!(
                "ended after {} idle ({report}): {}",
                HumanDuration(report.idle_timeout),
                diagnosis.summary
            ),
            None => format!(
                "ended after {} idle ({report})",
                HumanDuration(report.idle_timeout)
            ),
        },
        Outcome::HardTimeout { after } => {
            format!("ended at the hard timeout of {}", HumanDuration(*after))
        }
        Outcome::Terminated { .. } => match received.first {
            Some(signal) => format!("ended on request (received {signal})"),
            None => "ended on request".to_owned(),
        },
        Outcome::Completed(seen) => {
            format!("ended after the work was done ({seen}) and the linger passed")
        }
        Outcome::InputWait(wait) => format!(
            "ended after {} waiting for input — {} (pid {}) reads {}",
            HumanDuration(wait.waited),
            wait.name,
            wait.pid,
            wait.target
        ),
        _ => return None,
    })
}

/// `sent TERM`, `sent TERM, then KILL after 5s`, `sent INT, then KILL on a second INT`.
fn ladder_words(result: &MonitorResult, received: &Received, grace: Duration) -> String {
    let mut words = String::from("sent ");
    for (i, signal) in result.signals_sent.iter().enumerate() {
        if i > 0 {
            words.push_str(", then ");
        }
        words.push_str(&signal.name());
        if i > 0 && *signal == Signal::KILL {
            if received.forced {
                words.push_str(" on a second INT");
            } else {
                words.push_str(&format!(" after {}", HumanDuration(grace)));
            }
        }
    }
    if result.signals_sent.is_empty() {
        words.push_str("nothing");
    }
    words
}

/// An error and each of its causes, once each, joined by `: ` (the library's errors say what
/// could not be done, and leave the cause to `source()`).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}
