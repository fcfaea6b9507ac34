//! A probe, as a setting ([`MonitorConfigBuilder::probe`](crate::config::MonitorConfigBuilder::probe)): a named
//! check the monitor asks at a stale decision. The asking (threads, time bounds) is the source's
//! (`sources/probes.rs`); the setting is here, below the configuration that holds it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::activity::ActivitySource;
use crate::error::{ConfigError, ProbeProblem};

/// A named check the monitor asks when — and only when — it is about to judge the child
/// stale: `true` counts as activity of the source [`ActivitySource::probe`]`(name)`, reported
/// like the others (idle time, count, `Activity` events). While it keeps saying yes it is
/// asked at most once per check interval (a yes less than an interval old still holds).
///
/// The check runs on a thread of its own (`quietus-probe-<session>`) and the monitor waits
/// for it at most [`timeout`](Self::timeout) on the session's clock: a check that is slow, or
/// still busy with an earlier call, counts as "no", and one that panics counts as "no". The
/// kill path never waits longer than the timeout for it.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use quietus::{MonitorConfig, Probe};
///
/// // The orchestrator knows a tool call is in flight in the agent's JSON stream.
/// let tool_call_open = Arc::new(AtomicBool::new(false));
/// let open = tool_call_open.clone();
/// let config = MonitorConfig::builder()
///     .probe(Probe::new("tool_call", move || open.load(Ordering::Relaxed)))
///     .build()?;
/// assert_eq!(config.probes()[0].name(), "tool_call");
/// # Ok::<(), quietus::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Probe {
    pub(crate) name: String,
    pub(crate) check: Arc<dyn Fn() -> bool + Send + Sync>,
    pub(crate) timeout: Duration,
}

impl fmt::Debug for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Probe")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Probe {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.timeout == other.timeout
            && Arc::ptr_eq(&self.check, &other.check)
    }
}

/// The default time a probe may take: 2 s.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

impl Probe {
    /// A probe named `name` (1 to 64 letters, digits, `_`, `-`, `.`; not a built-in source's
    /// name) running `check`, with a 2 s timeout.
    pub fn new(name: impl Into<String>, check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            name: name.into(),
            check: Arc::new(check),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Sets how long the monitor waits for an answer (1 ms to 10 min; default 2 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The probe's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The activity source of this probe.
    pub fn source(&self) -> ActivitySource {
        ActivitySource::probe(&self.name)
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |reason: ProbeProblem| ConfigError::InvalidProbe {
            name: self.name.clone(),
            reason,
        };
        let name_ok = (1..=64).contains(&self.name.len())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !name_ok {
            return Err(invalid(ProbeProblem::Name));
        }
        if ActivitySource::ALL.iter().any(|s| s.name() == self.name) {
            return Err(invalid(ProbeProblem::BuiltInName));
        }
        if self.timeout < Duration::from_millis(1) || self.timeout > Duration::from_secs(600) {
            return Err(invalid(ProbeProblem::Timeout));
        }
        Ok(())
    }
}
