//! How a tree is ended and held: the [`KillLadder`] and the [`Containment`] mode.

use std::time::Duration;

use super::check_range;
use crate::error::{ConfigError, Setting};
use crate::signal::Signal;

/// The longest grace of a step of the ladder.
const MAX_GRACE: Duration = Duration::from_secs(3600);

/// One step of the [`KillLadder`]: send `signal` to the whole tree, then wait up to `grace` for
/// it to end before the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KillStep {
    /// The signal sent at this step.
    pub(crate) signal: Signal,
    /// How long to wait for the tree to end before the next step.
    pub(crate) grace: Duration,
}

/// The escalation used to end a process tree: each step's signal goes to the whole process
/// group, then quietus waits out the step's grace; after the last step comes SIGKILL.
///
/// Default: SIGTERM, 5 s grace, then SIGKILL. A ladder may end with an explicit SIGKILL step
/// (its grace is then ignored); SIGKILL anywhere else is an error, as is an empty ladder or a
/// grace over an hour: [`MonitorConfigBuilder::build`](super::MonitorConfigBuilder::build)
/// refuses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillLadder {
    steps: Vec<KillStep>,
}

impl Default for KillLadder {
    fn default() -> Self {
        Self::new([(Signal::TERM, Duration::from_secs(5))])
    }
}

impl KillLadder {
    /// A ladder from `(signal, grace)` steps; SIGKILL follows the last one.
    pub fn new(steps: impl IntoIterator<Item = (Signal, Duration)>) -> Self {
        Self {
            steps: steps
                .into_iter()
                .map(|(signal, grace)| KillStep { signal, grace })
                .collect(),
        }
    }

    /// A ladder of one polite signal, `grace`, then SIGKILL.
    pub fn polite(signal: Signal, grace: Duration) -> Self {
        Self::new([(signal, grace)])
    }

    /// A ladder that sends SIGKILL at once.
    pub fn immediate() -> Self {
        Self::new([(Signal::KILL, Duration::ZERO)])
    }

    /// The configured steps, `(signal, grace)`, without the implicit final SIGKILL.
    pub fn steps(&self) -> impl ExactSizeIterator<Item = (Signal, Duration)> + '_ {
        self.steps.iter().map(|s| (s.signal, s.grace))
    }

    /// The steps actually sent: the configured ones, then SIGKILL unless the last already is.
    pub(crate) fn effective(&self) -> Vec<KillStep> {
        let mut steps = self.steps.clone();
        if steps.last().map(|s| s.signal) != Some(Signal::KILL) {
            steps.push(KillStep {
                signal: Signal::KILL,
                grace: Duration::ZERO,
            });
        }
        steps
    }

    /// Refuses an empty ladder, SIGKILL before the last step, and a grace over an hour.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.steps.is_empty() {
            return Err(ConfigError::EmptyLadder);
        }
        for (index, step) in self.steps.iter().enumerate() {
            if step.signal == Signal::KILL && index + 1 != self.steps.len() {
                return Err(ConfigError::KillBeforeEnd { step: index });
            }
            check_range(
                Setting::KillLadderGrace,
                step.grace,
                Duration::ZERO,
                MAX_GRACE,
            )?;
        }
        Ok(())
    }
}

/// How a session holds its process tree
/// ([`MonitorConfigBuilder::containment`](super::MonitorConfigBuilder::containment); the
/// command's `--containment`). See the crate docs, "How the tree is held".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Containment {
    /// A cgroup v2 of its own when this process can create one under its own cgroup (root, a
    /// delegated cgroup), else the process group (default). The result says which, and why not
    /// a cgroup: [`MonitorResult::containment`](crate::MonitorResult::containment).
    #[default]
    Auto,
    /// A cgroup v2 of its own, or the spawn fails with
    /// [`SpawnErrorKind::Containment`](crate::error::SpawnErrorKind::Containment).
    Cgroup,
    /// The process group, the descendants seen leaving it, and (in subreaper mode) the
    /// orphans re-parented to this process: no cgroup even where one could be made.
    Group,
}

impl Containment {
    /// The mode's name, as `--containment` takes it: `auto`, `cgroup`, `group`.
    pub fn as_str(self) -> &'static str {
        match self {
            Containment::Auto => "auto",
            Containment::Cgroup => "cgroup",
            Containment::Group => "group",
        }
    }
}
