//! One session of `exec_command` as the tools hold it ([`ExecSession`]), and what its answers
//! read of it: its state's name, its stall diagnosis, its log.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quietus::diagnosis::Diagnosis;
use quietus::{MonitorResult, Outcome, Session, SessionState};
use serde_json::{Value, json};

use super::output::Pending;

/// One session of `exec_command`.
#[derive(Debug)]
pub(crate) struct ExecSession {
    pub(crate) id: u32,
    pub(crate) session: Arc<Session>,
    /// The command line as given.
    pub(crate) cmd: String,
    /// The output not yet answered.
    pub(super) pending: Arc<Mutex<Pending>>,
    /// The polite step's grace.
    pub(super) grace: Duration,
    /// Tool calls waiting on it now.
    pub(super) waiting: AtomicUsize,
    /// An answer (or an announcement) said it ended.
    pub(super) end_told: AtomicBool,
}

impl ExecSession {
    /// The result, once the run is over.
    pub(crate) fn result(&self) -> Option<MonitorResult> {
        self.session.try_wait()
    }
}

/// The lifecycle's name, `ended` once the result is in.
pub(crate) fn state_name(session: &Session, result: Option<&MonitorResult>) -> &'static str {
    match (result, session.state()) {
        (Some(_), _) | (None, SessionState::Ended) => "ended",
        (None, state) => state.name(),
    }
}

/// The stall diagnosis of an ended run: `(kind, summary)`.
pub(crate) fn diagnosis(result: &MonitorResult) -> Option<(String, String)> {
    full_diagnosis(result).map(|(d, summary)| (d.kind.name().to_owned(), summary))
}

/// The whole diagnosis of an ended run, and its one-line summary (for an input wait: the
/// reader named by the rule that caught it).
pub(crate) fn full_diagnosis(result: &MonitorResult) -> Option<(&Diagnosis, String)> {
    match &result.outcome {
        Outcome::IdleTimeout(report) => {
            let d = report.diagnosis.as_ref()?;
            Some((d, d.summary.clone()))
        }
        Outcome::InputWait(wait) => Some((
            &wait.diagnosis,
            format!(
                "waiting for input — {} (pid {}) reads {}",
                wait.name, wait.pid, wait.target
            ),
        )),
        _ => None,
    }
}

/// The log of the output: the file, its SHA-256 once ended.
pub(crate) fn log_of(exec: &ExecSession, result: Option<&MonitorResult>, total: u64) -> Value {
    if let Some(result) = result
        && let Some(log) = result.logs.first()
    {
        return json!({
            "path": log.path.display().to_string(),
            "sha256": log.sha256,
            "bytes": log.bytes,
            "complete": !log.incomplete,
        });
    }
    match exec.session.log_paths().into_iter().next() {
        Some(path) => json!({
            "path": path.display().to_string(),
            "sha256": null,
            "bytes": total,
            "complete": false,
        }),
        None => Value::Null,
    }
}
