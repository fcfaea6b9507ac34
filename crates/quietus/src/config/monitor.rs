//! Everything that decides when a supervised child is stale and how it is ended:
//! [`MonitorConfig`], made by its [`MonitorConfigBuilder`].

use std::collections::BTreeMap;
use std::time::Duration;

use super::capture::{CaptureConfig, CaptureConfigBuilder};
use super::check_range;
use super::children::{ChildWatchConfig, ChildWatchConfigBuilder};
use super::events::{EventConfig, EventConfigBuilder};
use super::files::{FileWatchConfig, FileWatchConfigBuilder};
use super::ladder::{Containment, KillLadder};
use crate::activity::ActivitySource;
use crate::completion::{CompletionConfig, CompletionConfigBuilder};
use crate::error::{ConfigError, ProbeProblem, Setting};
use crate::probe::Probe;

/// Accepted range of a solo cap.
const SOLO_CAP_MAX: Duration = Duration::from_secs(366 * 24 * 3600);
/// Accepted range of the idle timeout.
const IDLE_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(7 * 24 * 3600));
/// Accepted range of the input-wait timeout and notice: 100 ms to 1 day.
const INPUT_WAIT_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(24 * 3600));
/// Accepted range of the hard timeout.
const HARD_TIMEOUT_RANGE: (Duration, Duration) = (
    Duration::from_millis(1),
    Duration::from_secs(366 * 24 * 3600),
);
/// Accepted range of the check interval.
const CHECK_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(3600));
/// The longest drain cap and drain quiet.
const DRAIN_MAX: Duration = Duration::from_secs(600);
/// Accepted range of the kill confirmation's bound.
const CONFIRM_RANGE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(600));

/// Which activity sources count. Keepalives always count. Set with the builder's toggles
/// ([`MonitorConfigBuilder::watch_output`]…), read with [`MonitorConfig::watches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnabledSources {
    /// Reads from the child's stdout and stderr.
    pub(crate) output: bool,
    /// File activity under the watched roots.
    pub(crate) files: bool,
    /// CPU progress of the child's descendants.
    pub(crate) children: bool,
    /// Repeated output told apart from output.
    pub(crate) repeated_output: bool,
    /// Bytes moved on the tree's TCP sockets.
    pub(crate) network: bool,
}

impl Default for EnabledSources {
    fn default() -> Self {
        Self {
            output: true,
            files: true,
            children: true,
            repeated_output: false,
            network: true,
        }
    }
}

/// Everything that decides when a supervised child is stale and how it is ended.
///
/// Made by [`MonitorConfig::builder`], whose setters each say their default and whose
/// [`build`](MonitorConfigBuilder::build) checks every value: a `MonitorConfig` is valid. Its
/// getters read the values back by the setters' names. [`Default`] is the valid default
/// configuration. The other configuration types ([`FileWatchConfig`], [`ChildWatchConfig`],
/// [`CaptureConfig`], [`EventConfig`], [`CompletionConfig`]) are built the same way.
///
/// ```
/// use std::time::Duration;
/// use quietus::{KillLadder, MonitorConfig, Signal};
///
/// let config = MonitorConfig::builder()
///     .idle_timeout(Duration::from_secs(120))
///     .hard_timeout(Some(Duration::from_secs(3600)))
///     .kill_ladder(KillLadder::polite(Signal::INT, Duration::from_secs(10)))
///     .build()?;
/// assert_eq!(config.effective_check_interval(), Duration::from_secs(12));
/// # Ok::<(), quietus::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorConfig {
    pub(crate) idle_timeout: Duration,
    pub(crate) hard_timeout: Option<Duration>,
    pub(crate) kill_ladder: KillLadder,
    pub(crate) check_interval: Option<Duration>,
    pub(crate) keep_leftovers: bool,
    pub(crate) drain_cap: Duration,
    pub(crate) drain_quiet: Duration,
    pub(crate) kill_confirm_timeout: Duration,
    pub(crate) enabled: EnabledSources,
    pub(crate) files: FileWatchConfig,
    pub(crate) children: ChildWatchConfig,
    pub(crate) capture: CaptureConfig,
    pub(crate) events: EventConfig,
    pub(crate) parent_death_signal: bool,
    pub(crate) completion: CompletionConfig,
    pub(crate) probes: Vec<Probe>,
    pub(crate) solo_caps: BTreeMap<ActivitySource, Duration>,
    pub(crate) containment: Containment,
    pub(crate) input_wait_timeout: Option<Duration>,
    pub(crate) input_wait_notice: Option<Duration>,
    pub(crate) observe: bool,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(300),
            hard_timeout: None,
            kill_ladder: KillLadder::default(),
            check_interval: None,
            keep_leftovers: false,
            drain_cap: Duration::from_secs(2),
            drain_quiet: Duration::from_millis(100),
            kill_confirm_timeout: Duration::from_secs(5),
            enabled: EnabledSources::default(),
            files: FileWatchConfig::default(),
            children: ChildWatchConfig::default(),
            capture: CaptureConfig::default(),
            events: EventConfig::default(),
            parent_death_signal: true,
            completion: CompletionConfig::default(),
            probes: Vec::new(),
            solo_caps: BTreeMap::from([(
                ActivitySource::Children,
                Self::DEFAULT_CHILDREN_SOLO_CAP,
            )]),
            containment: Containment::Auto,
            input_wait_timeout: None,
            input_wait_notice: None,
            observe: false,
        }
    }
}

impl MonitorConfig {
    /// The default solo cap of the children source: 30 minutes (see
    /// [`MonitorConfigBuilder::solo_cap`]).
    pub const DEFAULT_CHILDREN_SOLO_CAP: Duration = Duration::from_secs(30 * 60);

    /// A builder, from the defaults.
    pub fn builder() -> MonitorConfigBuilder {
        MonitorConfigBuilder::default()
    }

    /// The idle timeout ([`MonitorConfigBuilder::idle_timeout`]).
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// The hard timeout, if any ([`MonitorConfigBuilder::hard_timeout`]).
    pub fn hard_timeout(&self) -> Option<Duration> {
        self.hard_timeout
    }

    /// The kill ladder ([`MonitorConfigBuilder::kill_ladder`]).
    pub fn kill_ladder(&self) -> &KillLadder {
        &self.kill_ladder
    }

    /// The check interval set, if any ([`MonitorConfigBuilder::check_interval`]; the one in
    /// force: [`effective_check_interval`](Self::effective_check_interval)).
    pub fn check_interval(&self) -> Option<Duration> {
        self.check_interval
    }

    /// Whether the leftovers are left running ([`MonitorConfigBuilder::keep_leftovers`]).
    pub fn keep_leftovers(&self) -> bool {
        self.keep_leftovers
    }

    /// Whether the session only observes ([`MonitorConfigBuilder::observe`]).
    pub fn observe(&self) -> bool {
        self.observe
    }

    /// The post-exit drain cap ([`MonitorConfigBuilder::drain_cap`]).
    pub fn drain_cap(&self) -> Duration {
        self.drain_cap
    }

    /// The post-exit drain's quiet ([`MonitorConfigBuilder::drain_quiet`]).
    pub fn drain_quiet(&self) -> Duration {
        self.drain_quiet
    }

    /// The bound on confirming the final SIGKILL
    /// ([`MonitorConfigBuilder::kill_confirm_timeout`]).
    pub fn kill_confirm_timeout(&self) -> Duration {
        self.kill_confirm_timeout
    }

    /// The file source's roots and filters ([`MonitorConfigBuilder::files`]).
    pub fn files(&self) -> &FileWatchConfig {
        &self.files
    }

    /// The children source's threshold and mode ([`MonitorConfigBuilder::children`]).
    pub fn children(&self) -> &ChildWatchConfig {
        &self.children
    }

    /// What is kept of the output ([`MonitorConfigBuilder::capture`]).
    pub fn capture(&self) -> &CaptureConfig {
        &self.capture
    }

    /// How the event stream behaves ([`MonitorConfigBuilder::events`]).
    pub fn events(&self) -> &EventConfig {
        &self.events
    }

    /// Whether the child gets the parent-death signal
    /// ([`MonitorConfigBuilder::parent_death_signal`]).
    pub fn parent_death_signal(&self) -> bool {
        self.parent_death_signal
    }

    /// How completion is recognised ([`MonitorConfigBuilder::completion`]).
    pub fn completion(&self) -> &CompletionConfig {
        &self.completion
    }

    /// The probes: pull-style activity sources, asked only when the child is about to be
    /// judged stale ([`MonitorConfigBuilder::probe`]).
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// The solo cap of each capped source ([`MonitorConfigBuilder::solo_cap`]).
    pub fn solo_caps(&self) -> &BTreeMap<ActivitySource, Duration> {
        &self.solo_caps
    }

    /// How the tree is held ([`MonitorConfigBuilder::containment`]).
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The input-wait timeout, if any ([`MonitorConfigBuilder::input_wait_timeout`]).
    pub fn input_wait_timeout(&self) -> Option<Duration> {
        self.input_wait_timeout
    }

    /// The input-wait notice, if any ([`MonitorConfigBuilder::input_wait_notice`]).
    pub fn input_wait_notice(&self) -> Option<Duration> {
        self.input_wait_notice
    }

    /// Whether `source` counts as activity (keepalives always do; a probe when it is
    /// configured).
    pub fn watches(&self, source: &ActivitySource) -> bool {
        match source {
            ActivitySource::Output => self.enabled.output,
            ActivitySource::Files => self.enabled.files,
            ActivitySource::Children => self.enabled.children,
            ActivitySource::RepeatedOutput => self.enabled.output && self.enabled.repeated_output,
            ActivitySource::Network => self.enabled.network,
            ActivitySource::Keepalive => true,
            ActivitySource::Probe(name) => self.probes.iter().any(|p| p.name() == &**name),
        }
    }

    /// The check interval in force: the configured one, or idle timeout / 10 clamped to
    /// 100 ms..=30 s.
    pub fn effective_check_interval(&self) -> Duration {
        self.check_interval_for(self.idle_timeout)
    }

    /// The check interval under `idle_timeout`: the configured one, else derived from it (the
    /// monitor's after [`Session::set_idle_timeout`](crate::Session::set_idle_timeout)).
    pub(crate) fn check_interval_for(&self, idle_timeout: Duration) -> Duration {
        self.check_interval.unwrap_or_else(|| {
            (idle_timeout / 10).clamp(Duration::from_millis(100), Duration::from_secs(30))
        })
    }

    /// The delay in force before the file watches are armed: the configured
    /// [`FileWatchConfig::arm_delay`], at most a tenth of the idle timeout.
    pub(crate) fn effective_arm_delay(&self) -> Duration {
        self.files.arm_delay.min(self.idle_timeout / 10)
    }

    /// The solo caps in force, for the verdict: only of sources that count.
    pub(crate) fn effective_caps(&self) -> Vec<(ActivitySource, Duration)> {
        self.solo_caps
            .iter()
            .filter(|(source, _)| self.watches(source))
            .map(|(source, cap)| (source.clone(), *cap))
            .collect()
    }

    /// Checks every setting (what [`MonitorConfigBuilder::build`] does).
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        validate_idle_timeout(self.idle_timeout)?;
        if let Some(hard) = self.hard_timeout {
            let (min, max) = HARD_TIMEOUT_RANGE;
            check_range(Setting::HardTimeout, hard, min, max)?;
        }
        self.kill_ladder.validate()?;
        for (setting, wait) in [
            (Setting::InputWaitTimeout, self.input_wait_timeout),
            (Setting::InputWaitNotice, self.input_wait_notice),
        ] {
            if let Some(wait) = wait {
                check_range(setting, wait, INPUT_WAIT_RANGE.0, INPUT_WAIT_RANGE.1)?;
            }
        }
        if let Some(interval) = self.check_interval {
            let (min, max) = CHECK_INTERVAL_RANGE;
            check_range(Setting::CheckInterval, interval, min, max)?;
        }
        check_range(Setting::DrainCap, self.drain_cap, Duration::ZERO, DRAIN_MAX)?;
        check_range(
            Setting::DrainQuiet,
            self.drain_quiet,
            Duration::ZERO,
            DRAIN_MAX,
        )?;
        let (min, max) = CONFIRM_RANGE;
        check_range(
            Setting::KillConfirmTimeout,
            self.kill_confirm_timeout,
            min,
            max,
        )?;
        if self.enabled.files {
            self.files.validate()?;
        }
        self.children.validate()?;
        self.capture.validate()?;
        self.events.validate()?;
        self.validate_rules()
    }

    /// Checks the probes, the solo caps and the completion settings.
    fn validate_rules(&self) -> Result<(), ConfigError> {
        self.completion.validate()?;
        for (i, probe) in self.probes.iter().enumerate() {
            probe.validate()?;
            if self.probes[..i].iter().any(|p| p.name() == probe.name()) {
                return Err(ConfigError::InvalidProbe {
                    name: probe.name().to_owned(),
                    reason: ProbeProblem::DuplicateName,
                });
            }
        }
        for (source, cap) in &self.solo_caps {
            if let ActivitySource::Probe(name) = source
                && !self.probes.iter().any(|p| p.name() == &**name)
            {
                return Err(ConfigError::UnknownSource {
                    name: name.to_string(),
                });
            }
            check_range(Setting::SoloCap, *cap, Duration::ZERO, SOLO_CAP_MAX)?;
        }
        Ok(())
    }
}

/// Validates an idle timeout on its own (also used when a control replaces it).
pub(crate) fn validate_idle_timeout(timeout: Duration) -> Result<(), ConfigError> {
    let (min, max) = IDLE_TIMEOUT_RANGE;
    check_range(Setting::IdleTimeout, timeout, min, max)
}

/// Builds a [`MonitorConfig`]: each setter says its default and range, and
/// [`build`](Self::build) checks them all. From a configuration in hand:
/// `MonitorConfigBuilder::from(config)`.
#[derive(Debug, Clone, PartialEq, Default)]
#[must_use]
pub struct MonitorConfigBuilder(MonitorConfig);

impl From<MonitorConfig> for MonitorConfigBuilder {
    fn from(config: MonitorConfig) -> Self {
        Self(config)
    }
}

impl MonitorConfigBuilder {
    /// End the child once every enabled source has been stale this long (1 ms to 7 days).
    /// Default 300 s.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.0.idle_timeout = timeout;
        self
    }

    /// End the child once the whole tree has been blocked on input (its stdin or a terminal,
    /// with its read count unchanged) for this long (100 ms to 1 day) while every source is
    /// quiet: the outcome [`Outcome::InputWait`](crate::Outcome::InputWait), after an
    /// [`Event::InputWait`](crate::Event::InputWait). Default `None` (off).
    pub fn input_wait_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.0.input_wait_timeout = timeout;
        self
    }

    /// Send an [`Event::InputWait`](crate::Event::InputWait) once the whole tree has been
    /// blocked on input for this long (100 ms to 1 day) while every source is quiet, once per
    /// episode, and go on: a harness can answer the prompt or give up. Default `None` (off:
    /// looking costs a snapshot of the tree every quarter of this, at most every 250 ms, while
    /// it is quiet).
    pub fn input_wait_notice(mut self, notice: Option<Duration>) -> Self {
        self.0.input_wait_notice = notice;
        self
    }

    /// End the child after this long even while active (1 ms to 366 days). Default none.
    pub fn hard_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.0.hard_timeout = timeout;
        self
    }

    /// How the tree is ended. Default SIGTERM, 5 s, SIGKILL.
    pub fn kill_ladder(mut self, ladder: KillLadder) -> Self {
        self.0.kill_ladder = ladder;
        self
    }

    /// Sampling interval of the polled sources (10 ms to 1 h). `None` (default): idle timeout
    /// / 10, clamped to 100 ms..=30 s.
    pub fn check_interval(mut self, interval: Option<Duration>) -> Self {
        self.0.check_interval = interval;
        self
    }

    /// Whether the members of the tree still alive after the child itself exited are left
    /// running (`true`) instead of ended with the kill ladder (`false`, the default: a finished
    /// child leaves nothing behind).
    pub fn keep_leftovers(mut self, keep: bool) -> Self {
        self.0.keep_leftovers = keep;
        self
    }

    /// Observe mode (`false`, the default): quietus ends nothing on its own decision (idle
    /// timeout, hard timeout, input wait, completion); it records when and why it would have
    /// ([`MonitorResult::observations`](crate::MonitorResult::observations),
    /// [`Event::Observed`](crate::Event::Observed)) and the program runs to its own end. The
    /// leader's own exit, the leftovers after it and the caller's terminate and kill act as
    /// always.
    pub fn observe(mut self, on: bool) -> Self {
        self.0.observe = on;
        self
    }

    /// After the child exits, how long at most to keep reading output from pipes that a
    /// grandchild still holds open (at most 10 min). Default 2 s. A pipe nobody holds open any
    /// more is read to its end whatever the cap (quietus's own log backlog is not a reason to
    /// cut it).
    pub fn drain_cap(mut self, cap: Duration) -> Self {
        self.0.drain_cap = cap;
        self
    }

    /// After the child exits, stop draining once output has been quiet this long (at most
    /// 10 min). Default 100 ms.
    pub fn drain_quiet(mut self, quiet: Duration) -> Self {
        self.0.drain_quiet = quiet;
        self
    }

    /// How long after the final SIGKILL to wait for the tree to be confirmed gone before the
    /// result says "termination unproven" (10 ms to 10 min). Default 5 s.
    pub fn kill_confirm_timeout(mut self, timeout: Duration) -> Self {
        self.0.kill_confirm_timeout = timeout;
        self
    }

    /// Sets (`Some`) or removes (`None`) the solo cap of `source`: the longest that source
    /// may keep the child alive on its own, past the idle timeout, while every other source is
    /// quiet (its activity counts only up to the cap after the latest activity of any other
    /// source; it counts again once another source is active). At most 366 days; a probe's
    /// source must be a configured [`probe`](Self::probe). Capping
    /// [`ActivitySource::RepeatedOutput`] turns that source on
    /// ([`repeated_output`](Self::repeated_output)).
    ///
    /// Default: children
    /// [`DEFAULT_CHILDREN_SOLO_CAP`](MonitorConfig::DEFAULT_CHILDREN_SOLO_CAP) (30 minutes),
    /// nothing else. A silent agent whose grandchild spins forever is then ended 30 minutes
    /// after the idle timeout, while a silent build or test run in a grandchild is left alone
    /// for the idle timeout + 30 minutes: longer than the tool-call limits of the agent CLIs
    /// themselves (10 minutes at most for a shell command in the common ones), so a grandchild
    /// that works silently for longer is no longer a tool call of a working agent.
    pub fn solo_cap(mut self, source: ActivitySource, cap: Option<Duration>) -> Self {
        match cap {
            Some(cap) => {
                if source == ActivitySource::RepeatedOutput {
                    self.0.enabled.repeated_output = true;
                }
                self.0.solo_caps.insert(source, cap);
            }
            None => {
                self.0.solo_caps.remove(&source);
            }
        }
        self
    }

    /// Opt-in: output that merely repeats itself (the same line as one of the last 16
    /// different lines, once runs of digits are set aside, so counters and timestamps do not
    /// make a line new: a spinner, a "retrying in 5s" loop) is the source
    /// [`ActivitySource::RepeatedOutput`] instead of [`ActivitySource::Output`], with this solo
    /// cap (`None`, the default: the source is off, every read is output). Lines end at `\n`
    /// or `\r`; a read that completes no line (a partial line) is output.
    pub fn repeated_output(mut self, cap: Option<Duration>) -> Self {
        self.0.enabled.repeated_output = cap.is_some();
        match cap {
            Some(cap) => self.0.solo_caps.insert(ActivitySource::RepeatedOutput, cap),
            None => self.0.solo_caps.remove(&ActivitySource::RepeatedOutput),
        };
        self
    }

    /// How to recognise that the work is done. Default: nothing is.
    pub fn completion(mut self, completion: impl Into<CompletionConfigBuilder>) -> Self {
        self.0.completion = completion.into().0;
        self
    }

    /// Adds a probe. None by default.
    pub fn probe(mut self, probe: Probe) -> Self {
        self.0.probes.push(probe);
        self
    }

    /// Turns the output source on or off. On by default.
    pub fn watch_output(mut self, enabled: bool) -> Self {
        self.0.enabled.output = enabled;
        self
    }

    /// Turns the file source on or off. On by default; tuned with [`files`](Self::files).
    pub fn watch_files(mut self, enabled: bool) -> Self {
        self.0.enabled.files = enabled;
        self
    }

    /// The file source's roots and filters, used while it is on (only
    /// [`watch_files`](Self::watch_files) turns it on or off; checked only then).
    pub fn files(mut self, files: impl Into<FileWatchConfigBuilder>) -> Self {
        self.0.files = files.into().0;
        self
    }

    /// Turns the descendant-CPU source on or off. On by default; tuned with
    /// [`children`](Self::children).
    pub fn watch_children(mut self, enabled: bool) -> Self {
        self.0.enabled.children = enabled;
        self
    }

    /// The descendant-CPU source's threshold and subreaper mode, used while it is on (only
    /// [`watch_children`](Self::watch_children) turns it on or off).
    pub fn children(mut self, children: impl Into<ChildWatchConfigBuilder>) -> Self {
        self.0.children = children.into().0;
        self
    }

    /// Turns the network source on or off: bytes received or sent on the TCP sockets held by
    /// any process of the tree (Linux socket diagnostics; elsewhere the source is reported
    /// unavailable). On by default.
    pub fn watch_network(mut self, enabled: bool) -> Self {
        self.0.enabled.network = enabled;
        self
    }

    /// Output retention and log spill. Default: [`CaptureConfig::default`].
    pub fn capture(mut self, capture: impl Into<CaptureConfigBuilder>) -> Self {
        self.0.capture = capture.into().0;
        self
    }

    /// The event stream's behaviour. Default: [`EventConfig::default`].
    pub fn events(mut self, events: impl Into<EventConfigBuilder>) -> Self {
        self.0.events = events.into().0;
        self
    }

    /// How the tree is held: a cgroup of the session's own, or the process group. Default
    /// [`Containment::Auto`].
    pub fn containment(mut self, mode: Containment) -> Self {
        self.0.containment = mode;
        self
    }

    /// Linux: the child gets SIGKILL if the supervising process dies (its parent-death signal,
    /// or in a cgroup the guardian, which ends every member). Default on.
    pub fn parent_death_signal(mut self, enabled: bool) -> Self {
        self.0.parent_death_signal = enabled;
        self
    }

    /// The configuration, every value checked.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first setting refused
    /// ([`ConfigError::setting`]) and, for a value out of range, the range.
    pub fn build(self) -> Result<MonitorConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}
