//! Retry on known failure signatures: [`RetryPolicy`] runs a command again when an attempt
//! failed with one of the given patterns on its stderr.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::capture::{CapturedOutput, CapturedStream};
use crate::outcome::{MonitorResult, Outcome};
use crate::session::SessionBuilder;
use crate::stream::Stream;

/// Runs a command and runs it again when it fails with a known transient signature.
///
/// An attempt is retried when it **failed** (it exited with a code other than 0, or died of a
/// signal nobody in quietus sent) and its stderr contains one of the patterns (plain
/// substrings, searched in the complete stderr: the log file when the stream was spilled, else
/// the captured stderr; in combined mode the combined stream). At most
/// [`max_retries`](Self::max_retries) retries (default 1).
///
/// An idle or hard timeout is never retried unless [`retry_timeouts`](Self::retry_timeouts) is
/// on (then it is, signature or not: a stall rarely explains itself). A run ended on request
/// ([`Outcome::Terminated`]), or whose tree could not be proven gone, is never retried.
///
/// Every attempt is recorded in the [`RetryReport`], with its result, its captured output and
/// whether and why it was retried; the failed attempts' log files are left in place.
///
/// ```
/// use std::process::Command;
/// use quietus::Session;
/// use quietus::retry::{RetryPolicy, RetryReason};
///
/// let dir = tempfile::tempdir()?;
/// let sentinel = dir.path().join("second-time");
/// // Fails once with the known message, then succeeds.
/// let script = format!(
///     "if [ -e {0} ]; then echo done; else touch {0}; echo 'state db missing rollout path' >&2; exit 1; fi",
///     sentinel.display()
/// );
/// let report = RetryPolicy::new(["state db missing rollout path"]).run(|_attempt| {
///     let mut command = Command::new("sh");
///     command.args(["-c", &script]);
///     Session::builder(command)
/// })?;
/// assert!(report.succeeded());
/// assert_eq!(report.attempts.len(), 2);
/// assert_eq!(
///     report.attempts[0].reason,
///     Some(RetryReason::Signature("state db missing rollout path".into()))
/// );
/// assert!(report.attempts[0].retried);
/// assert_eq!(report.last().result.exit_code(), 0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    patterns: Vec<String>,
    max_retries: u32,
    retry_timeouts: bool,
}

/// Why an attempt qualified for a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// It failed and its stderr contained this pattern (the first of the list that matched).
    Signature(String),
    /// It ended in an idle or hard timeout, and timeouts are retried
    /// ([`RetryPolicy::retry_timeouts`]) — with no signature on its stderr.
    Timeout,
}

/// One attempt of a [`RetryPolicy::run`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RetryAttempt {
    /// 1 for the first run, 2 for the first retry…
    pub number: u32,
    /// How it ended (its logs in [`MonitorResult::logs`] are kept).
    pub result: MonitorResult,
    /// What was captured of its output.
    pub output: CapturedOutput,
    /// Why it qualified for a retry; `None` when it did not (it succeeded, or failed otherwise).
    pub reason: Option<RetryReason>,
    /// Whether a retry followed (`false` after a qualifying attempt when the retries were used
    /// up; `true` also when the retry could not be spawned, see
    /// [`RetryReport::retry_spawn_error`]).
    pub retried: bool,
}

/// Every attempt of a [`RetryPolicy::run`], the first one first.
#[derive(Debug)]
#[non_exhaustive]
pub struct RetryReport {
    /// The attempts, at least one.
    pub attempts: Vec<RetryAttempt>,
    /// The error of a retry that could not be spawned (the attempts before it are kept).
    pub retry_spawn_error: Option<crate::error::SpawnError>,
}

impl RetryReport {
    /// The last attempt made.
    pub fn last(&self) -> &RetryAttempt {
        // Invariant: `run` returns a report only after at least one attempt ran.
        self.attempts
            .last()
            .expect("a retry report holds at least one attempt")
    }

    /// Whether the last attempt succeeded: it exited on its own with code 0, or its work was
    /// done ([`Outcome::Completed`]: ended after the linger).
    pub fn succeeded(&self) -> bool {
        let result = &self.last().result;
        match result.outcome {
            Outcome::Exited => result.exit_code() == 0,
            Outcome::Completed(_) => !result.termination_unproven,
            _ => false,
        }
    }
}

impl RetryPolicy {
    /// Retries a failure whose stderr contains one of `patterns` (plain substrings, matched
    /// byte for byte; an empty pattern matches any failure), once.
    pub fn new<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Self {
        Self {
            patterns: patterns.into_iter().map(Into::into).collect(),
            max_retries: 1,
            retry_timeouts: false,
        }
    }

    /// How many times a command may be run again (default 1; 0 never retries).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// Whether an idle or hard timeout is retried too (default `false`).
    pub fn retry_timeouts(mut self, retry: bool) -> Self {
        self.retry_timeouts = retry;
        self
    }

    /// Runs attempts until one does not qualify for a retry or the retries are used up. The
    /// `factory` makes each attempt's session from its number (1, 2…), so every attempt gets a
    /// fresh [`Command`](std::process::Command); it blocks until the last attempt is over.
    ///
    /// # Errors
    ///
    /// The first attempt's spawn error. A retry that cannot be spawned ends the run with the
    /// attempts made so far and the error in [`RetryReport::retry_spawn_error`].
    pub fn run(
        &self,
        mut factory: impl FnMut(u32) -> SessionBuilder,
    ) -> Result<RetryReport, crate::error::SpawnError> {
        let mut report = RetryReport {
            attempts: Vec::new(),
            retry_spawn_error: None,
        };
        let mut number = 1;
        loop {
            let session = match factory(number).spawn() {
                Ok(session) => session,
                Err(e) if number == 1 => return Err(e),
                Err(e) => {
                    log::warn!("retry {} could not be spawned: {e}", number - 1);
                    report.retry_spawn_error = Some(e);
                    return Ok(report);
                }
            };
            let result = session.wait();
            let output = session.output();
            let reason = self.reason(&result, &output);
            let retried = reason.is_some() && number <= self.max_retries;
            if let Some(reason) = reason.as_ref().filter(|_| retried) {
                log::info!(
                    "attempt {number} (pid {}) ended {} with exit code {} ({reason:?}): \
                     running it again",
                    result.pid,
                    result.outcome.name(),
                    result.exit_code()
                );
            }
            report.attempts.push(RetryAttempt {
                number,
                result,
                output,
                reason,
                retried,
            });
            if !retried {
                return Ok(report);
            }
            number += 1;
        }
    }

    /// Why this attempt qualifies for a retry, if it does.
    fn reason(&self, result: &MonitorResult, output: &CapturedOutput) -> Option<RetryReason> {
        if result.termination_unproven {
            return None; // the tree may still live: do not start another one beside it
        }
        match result.outcome {
            Outcome::Exited if result.exit_code() != 0 => {
                self.signature(result, output).map(RetryReason::Signature)
            }
            Outcome::IdleTimeout(_) | Outcome::HardTimeout { .. } if self.retry_timeouts => Some(
                self.signature(result, output)
                    .map_or(RetryReason::Timeout, RetryReason::Signature),
            ),
            _ => None,
        }
    }

    /// The first pattern found in the attempt's complete stderr.
    fn signature(&self, result: &MonitorResult, output: &CapturedOutput) -> Option<String> {
        if self.patterns.is_empty() {
            return None;
        }
        let patterns: Vec<&[u8]> = self.patterns.iter().map(|p| p.as_bytes()).collect();
        let mut found = vec![false; patterns.len()];
        let is_stderr = |s: Stream| matches!(s, Stream::Stderr | Stream::Combined);
        let log = result.logs.iter().find(|l| is_stderr(l.stream));
        let complete_log = match log {
            Some(log) => match search_file(&log.path, &patterns, &mut found) {
                Ok(()) => !log.incomplete,
                Err(e) => {
                    log::warn!("cannot read the log {}: {e}", log.path.display());
                    false
                }
            },
            None => false,
        };
        if !complete_log {
            // No log (short output, or spill off), or a partial one: the capture's head and
            // tail (each searched on its own: the omitted middle lies between them).
            let captured: Option<&CapturedStream> = output
                .streams()
                .find(|(stream, _)| is_stderr(*stream))
                .map(|(_, c)| c);
            if let Some(captured) = captured {
                search_bytes(&captured.head, &patterns, &mut found);
                search_bytes(&captured.tail, &patterns, &mut found);
            }
        }
        found
            .iter()
            .position(|f| *f)
            .map(|i| self.patterns[i].clone())
    }
}

/// Marks the patterns found in `data`.
fn search_bytes(data: &[u8], patterns: &[&[u8]], found: &mut [bool]) {
    for (pattern, found) in patterns.iter().zip(found.iter_mut()) {
        if !*found {
            *found = pattern.is_empty() || data.windows(pattern.len()).any(|w| w == *pattern);
        }
    }
}

/// Marks the patterns found in the file, read in chunks (a log can be far larger than memory
/// should hold); a pattern across two chunks is found too.
fn search_file(path: &Path, patterns: &[&[u8]], found: &mut [bool]) -> io::Result<()> {
    let overlap = patterns
        .iter()
        .map(|p| p.len())
        .max()
        .unwrap_or(0)
        .saturating_sub(1);
    let mut file = File::open(path)?;
    let mut chunk = vec![0u8; 256 * 1024];
    let mut window: Vec<u8> = Vec::with_capacity(chunk.len() + overlap);
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        window.extend_from_slice(&chunk[..n]);
        search_bytes(&window, patterns, found);
        if found.iter().all(|f| *f) {
            return Ok(());
        }
        let keep = overlap.min(window.len());
        window.drain(..window.len() - keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_found_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut data = vec![b'x'; 256 * 1024 - 3];
        data.extend_from_slice(b"state db missing rollout path");
        data.extend_from_slice(&[b'y'; 1000]);
        std::fs::write(&path, &data).unwrap();
        let patterns: [&[u8]; 3] = [b"absent", b"state db missing rollout path", b"yyy"];
        let mut found = [false; 3];
        search_file(&path, &patterns, &mut found).unwrap();
        assert_eq!(found, [false, true, true]);
    }

    #[test]
    fn an_empty_pattern_matches_anything() {
        let mut found = [false, false];
        search_bytes(b"", &[b"", b"a"], &mut found);
        assert_eq!(found, [true, false]);
    }
}
