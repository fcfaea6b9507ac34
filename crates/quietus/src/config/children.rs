//! How the descendants' CPU counts as activity: [`ChildWatchConfig`].

use crate::error::ConfigError;

/// How descendant CPU counts as activity. Made by [`ChildWatchConfig::builder`].
///
/// Sampled every check interval, and once more at the stale deadline before the ladder starts.
/// Activity = the CPU the descendants used since the previous sample reaches `cpu_threshold` of
/// one core over the interval (and at least 20 ms, two ticks of the kernel's accounting). The
/// default, 5 %, lets an idly polling daemon (about 1 % of a core) go stale, while a compiler or
/// test run (tens of percent and more) keeps the child alive.
///
/// ```
/// use quietus::{ChildWatchConfig, MonitorConfig};
///
/// let config = MonitorConfig::builder()
///     .children(ChildWatchConfig::builder().cpu_threshold(0.10)) // a tenth of a core
///     .build()?;
/// assert_eq!(config.children().cpu_threshold(), 0.10);
/// # Ok::<(), quietus::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildWatchConfig {
    pub(crate) cpu_threshold: f64,
    pub(crate) include_self: bool,
    pub(crate) subreaper: bool,
}

impl Default for ChildWatchConfig {
    fn default() -> Self {
        Self {
            cpu_threshold: 0.05,
            include_self: false,
            subreaper: false,
        }
    }
}

impl ChildWatchConfig {
    /// A builder, from the defaults.
    pub fn builder() -> ChildWatchConfigBuilder {
        ChildWatchConfigBuilder::default()
    }

    /// The fraction of one core that counts as work
    /// ([`ChildWatchConfigBuilder::cpu_threshold`]).
    pub fn cpu_threshold(&self) -> f64 {
        self.cpu_threshold
    }

    /// Whether the direct child's own CPU counts ([`ChildWatchConfigBuilder::include_self`]).
    pub fn include_self(&self) -> bool {
        self.include_self
    }

    /// Whether the supervising process is made a subreaper
    /// ([`ChildWatchConfigBuilder::subreaper`]).
    pub fn subreaper(&self) -> bool {
        self.subreaper
    }

    /// Refuses a threshold outside `0 < t <= 64`.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let t = self.cpu_threshold;
        if t > 0.0 && t <= 64.0 {
            Ok(())
        } else {
            Err(ConfigError::InvalidThreshold { value: t })
        }
    }
}

/// Builds a [`ChildWatchConfig`]; each setter says its default.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[must_use]
pub struct ChildWatchConfigBuilder(pub(super) ChildWatchConfig);

impl From<ChildWatchConfig> for ChildWatchConfigBuilder {
    fn from(config: ChildWatchConfig) -> Self {
        Self(config)
    }
}

impl ChildWatchConfigBuilder {
    /// Fraction of one core (0 < t <= 64) that counts as work. Default 0.05.
    pub fn cpu_threshold(mut self, fraction: f64) -> Self {
        self.0.cpu_threshold = fraction;
        self
    }

    /// Linux: make the supervising process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so a
    /// descendant that double-forks away between two samples is re-parented to it, found and
    /// ended with the tree. **Process-wide and permanent**: every orphan of every child of the
    /// process then comes to it. Default off.
    ///
    /// A process re-parented to the supervisor belongs to the tree whatever its environment
    /// (`env -i`, `sudo`, `su -` drop variables). An orphan (never a session's leader nor a
    /// child quietus started itself) is attributed by the first rule that applies,
    /// strongest evidence first:
    ///
    /// 1. a session's descendant observer saw it in its tree (pid + start time) before it was
    ///    re-parented;
    /// 2. it carries a session's environment tag `QUIETUS_SESSION=<pid>.<id>` (given to the
    ///    child);
    /// 3. its process group is a session's leader's;
    /// 4. one of its standard streams is one of a session's output pipes;
    /// 5. it started (its start time) while exactly one session of this process was running
    ///    — after that session's leader started, before it ended — and it is not in the
    ///    supervising process's own process group.
    ///
    /// Orphans attributed to a session that has ended, and orphans no rule attributes, are
    /// left alone (and not reaped). A process that runs one session (the `quietus` command)
    /// thus ends every orphan it adopts. Limits of rule 5: it cannot tell a session's untagged
    /// daemon from an orphan of the host program's own children, or from a child the host
    /// starts itself in a group or session of its own, started while exactly one session runs;
    /// and an untagged daemon that nobody saw, that closed the session's pipes and that started
    /// while two sessions ran, is nobody's (it keeps running).
    pub fn subreaper(mut self, on: bool) -> Self {
        self.0.subreaper = on;
        self
    }

    /// Count the direct child's own CPU too (default: only its descendants and the children it
    /// reaped; an agent spinning in its event loop is not progress).
    pub fn include_self(mut self, include: bool) -> Self {
        self.0.include_self = include;
        self
    }

    /// The configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidThreshold`] for a threshold outside `0 < t <= 64`.
    pub fn build(self) -> Result<ChildWatchConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}
