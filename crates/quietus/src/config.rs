//! Configuration: [`MonitorConfig`], the [`KillLadder`], and validation into [`ConfigError`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::activity::ActivitySource;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{ConfigError, Setting};
use crate::signal::Signal;

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
/// (its grace is then ignored); SIGKILL anywhere else is an error, as is an empty ladder.
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

    fn validate(&self) -> Result<(), ConfigError> {
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

/// How a session holds its process tree ([`MonitorConfig::containment`]; the command's
/// `--containment`). See the crate docs, "How the tree is held".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Containment {
    /// A cgroup v2 of its own when this process can create one under its own cgroup (root, a
    /// delegated cgroup), else the process group (default). The result says which, and why not
    /// a cgroup: [`MonitorResult::containment`](crate::MonitorResult::containment).
    #[default]
    Auto,
    /// A cgroup v2 of its own, or the spawn fails with
    /// [`SpawnErrorKind::Containment`](crate::SpawnErrorKind::Containment).
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

/// Which activity sources count. Keepalives always count. Set with the builder toggles
/// ([`MonitorConfig::watch_output`]…), read with [`MonitorConfig::watches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnabledSources {
    /// Reads from the child's stdout and stderr.
    pub(crate) output: bool,
    /// File activity under the watched roots ([`MonitorConfig::files`]).
    pub(crate) files: bool,
    /// CPU progress of the child's descendants ([`MonitorConfig::children`]).
    pub(crate) children: bool,
    /// Repeated output told apart from output ([`MonitorConfig::repeated_output`]).
    pub(crate) repeated_output: bool,
    /// Bytes moved on the tree's TCP sockets ([`MonitorConfig::watch_network`]).
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

/// What is kept of the child's output: bounded head/tail buffers, and a complete log once the
/// output is long.
///
/// ```
/// use quietus::{CaptureConfig, MonitorConfig};
///
/// let config = MonitorConfig::default().capture(
///     CaptureConfig::default()
///         .cap_per_stream(64 * 1024) // keep 32 KiB of head and 32 KiB of tail
///         .log_dir("/tmp/agent-logs"),
/// );
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureConfig {
    /// See [`get_cap_per_stream`](Self::get_cap_per_stream).
    pub(crate) cap_per_stream: usize,
    /// See [`get_combined`](Self::get_combined).
    pub(crate) combined: bool,
    /// See [`get_spill`](Self::get_spill).
    pub(crate) spill: bool,
    /// See [`get_spill_threshold`](Self::get_spill_threshold).
    pub(crate) spill_threshold: u64,
    /// See [`get_log_dir`](Self::get_log_dir).
    pub(crate) log_dir: Option<PathBuf>,
    /// See [`get_retention`](Self::get_retention).
    pub(crate) retention: LogRetention,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            cap_per_stream: 1024 * 1024,
            combined: false,
            spill: true,
            spill_threshold: 4096,
            log_dir: None,
            retention: LogRetention::default(),
        }
    }
}

impl CaptureConfig {
    /// Sets the in-memory cap per stream.
    ///
    /// Bytes kept in memory per stream, half head, half tail. Default 1 MiB.
    pub fn cap_per_stream(mut self, bytes: usize) -> Self {
        self.cap_per_stream = bytes;
        self
    }

    /// Turns the combined mode on or off.
    ///
    /// stdout and stderr through one pipe, in the order the child wrote them. Default off.
    pub fn combined(mut self, combined: bool) -> Self {
        self.combined = combined;
        self
    }

    /// Turns the log spill on or off.
    ///
    /// Write the complete stream to a log file once it passes `spill_threshold`. Default on.
    pub fn spill(mut self, spill: bool) -> Self {
        self.spill = spill;
        self
    }

    /// Sets the spill threshold.
    ///
    /// Bytes of a stream after which it is spilled to a log. Default 4 KiB.
    pub fn spill_threshold(mut self, bytes: u64) -> Self {
        self.spill_threshold = bytes;
        self
    }

    /// Sets the log folder.
    ///
    /// Where logs go. `None` (default): the platform cache folder's `quietus/logs`
    /// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS; else the temp
    /// folder's `quietus-<uid>-logs`), refused unless it is the user's own; when that
    /// folder cannot be used, the run goes on without logs (a warning, and each
    /// [`LogFile`](crate::LogFile) says why), where a folder named here that cannot be used
    /// fails the spawn ([`SpawnErrorKind::LogDir`](crate::SpawnErrorKind::LogDir)).
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = Some(dir.into());
        self
    }

    /// Sets the log folder's retention budget.
    ///
    /// How much of quietus's own logs the log folder keeps. Default 7 days and 256 MiB.
    pub fn retention(mut self, retention: LogRetention) -> Self {
        self.retention = retention;
        self
    }
}

/// How the event stream ([`Session::events`](crate::Session::events)) behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct EventConfig {
    /// See [`get_throttle`](Self::get_throttle).
    pub(crate) throttle: Duration,
    /// See [`get_chunk_cap`](Self::get_chunk_cap).
    pub(crate) chunk_cap: usize,
    /// See [`get_utf8_boundaries`](Self::get_utf8_boundaries).
    pub(crate) utf8_boundaries: bool,
    /// See [`get_idle_warning`](Self::get_idle_warning).
    pub(crate) idle_warning: Option<f64>,
    /// See [`get_capacity`](Self::get_capacity).
    pub(crate) capacity: usize,
}

impl Default for EventConfig {
    fn default() -> Self {
        Self {
            throttle: Duration::from_millis(150),
            chunk_cap: 4096,
            utf8_boundaries: false,
            idle_warning: Some(0.8),
            capacity: 1024,
        }
    }
}

impl EventConfig {
    /// Sets the throttle interval.
    ///
    /// At most one `Output` event per stream, and one `Activity` event per source, per this
    /// interval. Default 150 ms.
    pub fn throttle(mut self, interval: Duration) -> Self {
        self.throttle = interval;
        self
    }

    /// Sets the byte cap of one `Output` event.
    ///
    /// Bytes at most in one `Output` event. Default 4 KiB.
    pub fn chunk_cap(mut self, bytes: usize) -> Self {
        self.chunk_cap = bytes;
        self
    }

    /// Cuts `Output` events on UTF-8 boundaries (or not).
    ///
    /// Cut `Output` events only on UTF-8 character boundaries. Default off.
    pub fn utf8_boundaries(mut self, on: bool) -> Self {
        self.utf8_boundaries = on;
        self
    }

    /// Sets (or turns off) the idle-warning fraction.
    ///
    /// Send `IdleWarning` once this fraction of the idle timeout has passed in silence
    /// (`None`: never). Default 0.8.
    pub fn idle_warning(mut self, fraction: Option<f64>) -> Self {
        self.idle_warning = fraction;
        self
    }

    /// Sets the channel capacity.
    ///
    /// Channel capacity. Default 1024.
    pub fn capacity(mut self, events: usize) -> Self {
        self.capacity = events;
        self
    }
}

/// How descendant CPU counts as activity.
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
/// let config = MonitorConfig::default()
///     .children(ChildWatchConfig::default().cpu_threshold(0.10)); // a tenth of a core
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ChildWatchConfig {
    /// See [`get_cpu_threshold`](Self::get_cpu_threshold).
    pub(crate) cpu_threshold: f64,
    /// See [`get_include_self`](Self::get_include_self).
    pub(crate) include_self: bool,
    /// See [`get_subreaper`](Self::get_subreaper).
    pub(crate) subreaper: bool,
}

impl ChildWatchConfig {
    /// Sets the fraction of one core that counts as work.
    ///
    /// Fraction of one core (0 < t <= 64) that counts as work. Default 0.05.
    pub fn cpu_threshold(mut self, fraction: f64) -> Self {
        self.cpu_threshold = fraction;
        self
    }

    /// Turns the subreaper mode on or off (see [`subreaper`](Self::subreaper)).
    ///
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
        self.subreaper = on;
        self
    }

    /// Judges the direct child's own CPU as a descendant's.
    ///
    /// On: the direct child's own CPU counts at `cpu_threshold`, as its descendants' does. Off
    /// (the default): it counts from 30 % of a core, twice the most an agent CLI's spinner was
    /// measured at while it waited on a stalled stream (docs/design.md, Children).
    pub fn include_self(mut self, include: bool) -> Self {
        self.include_self = include;
        self
    }
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

/// Which folders' file activity counts, and which files in them.
///
/// Default: the root `.agent` (relative to the child's working directory), every file except
/// `*.log` and editor artefacts (`*.swp`, `*~`, `.#*`).
///
/// Globs follow [`globset`](https://docs.rs/globset) syntax and are matched against both the
/// path relative to its root and the bare file name, so `*.log` excludes logs at any depth.
///
/// ```
/// use quietus::{FileWatchConfig, MonitorConfig};
///
/// let files = FileWatchConfig::default()
///     .root("notes")        // .agent and notes
///     .include("*.md")      // only Markdown counts
///     .exclude("drafts/**");
/// let config = MonitorConfig::default().files(files);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileWatchConfig {
    /// See [`get_roots`](Self::get_roots).
    pub(crate) roots: Vec<PathBuf>,
    /// See [`get_include`](Self::get_include).
    pub(crate) include: Vec<String>,
    /// See [`get_exclude`](Self::get_exclude).
    pub(crate) exclude: Vec<String>,
    /// See [`get_force_stat_scan`](Self::get_force_stat_scan).
    pub(crate) force_stat_scan: bool,
    /// See [`get_own_files`](Self::get_own_files).
    pub(crate) own_files: Vec<PathBuf>,
    /// See [`get_arm_delay`](Self::get_arm_delay).
    pub(crate) arm_delay: Duration,
}

impl Default for FileWatchConfig {
    fn default() -> Self {
        Self {
            roots: vec![PathBuf::from(".agent")],
            include: Vec::new(),
            exclude: ["*.log", "*.swp", "*~", ".#*"]
                .into_iter()
                .map(String::from)
                .collect(),
            force_stat_scan: false,
            own_files: Vec::new(),
            arm_delay: Duration::ZERO,
        }
    }
}

impl FileWatchConfig {
    /// Adds a root (to the default `.agent`; [`roots`](Self::roots) replaces them).
    pub fn root(mut self, root: impl Into<PathBuf>) -> Self {
        self.roots.push(root.into());
        self
    }

    /// Replaces the roots (default: `.agent`).
    pub fn roots<P: Into<PathBuf>>(mut self, roots: impl IntoIterator<Item = P>) -> Self {
        self.roots = roots.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an include glob (none by default: every file counts).
    ///
    /// When not empty, only files matching one of these count.
    pub fn include(mut self, glob: impl Into<String>) -> Self {
        self.include.push(glob.into());
        self
    }

    /// Replaces the exclude globs (the default ones too: `*.log`, `*.swp`, `*~`, `.#*`).
    pub fn excludes<G: Into<String>>(mut self, globs: impl IntoIterator<Item = G>) -> Self {
        self.exclude = globs.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an exclude glob (to the defaults: `*.log`, `*.swp`, `*~`, `.#*`).
    ///
    /// Files matching one of these never count.
    pub fn exclude(mut self, glob: impl Into<String>) -> Self {
        self.exclude.push(glob.into());
        self
    }

    /// Arms the watches this long after the start ([`arm_delay`](Self::arm_delay)).
    ///
    /// Arm the watches this long after the start instead of before the spawn (at most a tenth
    /// of the idle timeout). A program that ends sooner costs no watch at all: no inotify
    /// instance, no notify thread, and no kernel teardown of the watches when quietus
    /// exits (about 10 ms on Linux, one SRCU grace period). What the program did to the
    /// watched folders before the arming still counts: at arming, one look at the roots finds
    /// every file and folder created, written, renamed in or changed (mode, owner) since the
    /// start, by their change times. A removal is the one change that leaves nothing to look
    /// at: a removal before the arming that is the program's only activity is not counted,
    /// so its stall is declared at most this delay early. Default: 0 (armed before the
    /// spawn); the `quietus` command uses 50 ms.
    pub fn arm_delay(mut self, delay: Duration) -> Self {
        self.arm_delay = delay;
        self
    }

    /// Forces (or not) the stat-scan mode.
    ///
    /// Stat-scan the roots at the check interval instead of using OS notifications (the mode
    /// quietus falls back to when the OS runs out of watches).
    pub fn force_stat_scan(mut self, force: bool) -> Self {
        self.force_stat_scan = force;
        self
    }

    /// Adds a file the caller writes itself, never counted as activity
    /// ([`get_own_files`](Self::get_own_files)).
    pub fn own_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.own_files.push(path.into());
        self
    }
}

/// The compiled [`include`](FileWatchConfig::include) and
/// [`exclude`](FileWatchConfig::exclude) globs, as the file tracker matches them.
#[derive(Debug, Clone)]
pub(crate) struct FileGlobs {
    /// `None` when no include glob is given: every file counts.
    pub(crate) include: Option<GlobSet>,
    pub(crate) exclude: GlobSet,
}

impl FileWatchConfig {
    /// Compiles the include and exclude globs (matched against the path relative to its root
    /// and against the file name; `*` crosses `/`).
    pub(crate) fn globs(&self) -> Result<FileGlobs, ConfigError> {
        let include = if self.include.is_empty() {
            None
        } else {
            Some(compile_globs(Setting::FilesInclude, &self.include)?)
        };
        Ok(FileGlobs {
            include,
            exclude: compile_globs(Setting::FilesExclude, &self.exclude)?,
        })
    }

    /// Checks that every include and exclude glob parses, without building the matchers (the
    /// costly part, which the file tracker does once, when it arms).
    pub(crate) fn check_globs(&self) -> Result<(), ConfigError> {
        for pattern in &self.include {
            parse_glob(Setting::FilesInclude, pattern)?;
        }
        for pattern in &self.exclude {
            parse_glob(Setting::FilesExclude, pattern)?;
        }
        Ok(())
    }
}

fn parse_glob(setting: Setting, pattern: &str) -> Result<globset::Glob, ConfigError> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map_err(|e| ConfigError::InvalidGlob {
            setting,
            pattern: pattern.to_owned(),
            reason: e.kind().to_string(),
        })
}

fn compile_globs(setting: Setting, patterns: &[String]) -> Result<GlobSet, ConfigError> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        set.add(parse_glob(setting, pattern)?);
    }
    set.build().map_err(|e| ConfigError::InvalidGlob {
        setting,
        pattern: patterns.join(" "),
        reason: e.to_string(),
    })
}

/// Everything that decides when a supervised child is stale and how it is ended.
///
/// One way to build it: `Default`, then the consuming setters, each of which says its default
/// (the fields are private; `get_*` reads a value back, as `std::process::Command` does). The
/// setters take any value; [`validate`](Self::validate) is the one place values are checked,
/// and it is called again at spawn, so an invalid configuration never starts a child. Every
/// other configuration type here ([`FileWatchConfig`], [`ChildWatchConfig`], [`CaptureConfig`],
/// [`EventConfig`], [`LogRetention`], [`CompletionConfig`](crate::CompletionConfig)) is built
/// the same way.
///
/// ```
/// use std::time::Duration;
/// use quietus::{KillLadder, MonitorConfig, Signal};
///
/// let config = MonitorConfig::default()
///     .idle_timeout(Duration::from_secs(120))
///     .hard_timeout(Some(Duration::from_secs(3600)))
///     .kill_ladder(KillLadder::polite(Signal::INT, Duration::from_secs(10)));
/// assert!(config.validate().is_ok());
/// assert_eq!(config.effective_check_interval(), Duration::from_secs(12));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MonitorConfig {
    /// See [`get_idle_timeout`](Self::get_idle_timeout).
    pub(crate) idle_timeout: Duration,
    /// See [`get_hard_timeout`](Self::get_hard_timeout).
    pub(crate) hard_timeout: Option<Duration>,
    /// See [`get_kill_ladder`](Self::get_kill_ladder).
    pub(crate) kill_ladder: KillLadder,
    /// See [`get_check_interval`](Self::get_check_interval).
    pub(crate) check_interval: Option<Duration>,
    /// See [`get_keep_leftovers`](Self::get_keep_leftovers).
    pub(crate) keep_leftovers: bool,
    /// See [`get_drain_cap`](Self::get_drain_cap).
    pub(crate) drain_cap: Duration,
    /// See [`get_drain_quiet`](Self::get_drain_quiet).
    pub(crate) drain_quiet: Duration,
    /// See [`get_kill_confirm_timeout`](Self::get_kill_confirm_timeout).
    pub(crate) kill_confirm_timeout: Duration,
    /// Which activity sources count (the `watch_*` toggles; [`MonitorConfig::watches`]).
    pub(crate) enabled: EnabledSources,
    /// See [`get_files`](Self::get_files).
    pub(crate) files: FileWatchConfig,
    /// See [`get_children`](Self::get_children).
    pub(crate) children: ChildWatchConfig,
    /// See [`get_capture`](Self::get_capture).
    pub(crate) capture: CaptureConfig,
    /// See [`get_events`](Self::get_events).
    pub(crate) events: EventConfig,
    /// See [`get_parent_death_signal`](Self::get_parent_death_signal).
    pub(crate) parent_death_signal: bool,
    /// See [`get_completion`](Self::get_completion).
    pub(crate) completion: crate::completion::CompletionConfig,
    /// See [`get_probes`](Self::get_probes).
    pub(crate) probes: Vec<crate::probe::Probe>,
    /// See [`get_solo_caps`](Self::get_solo_caps).
    pub(crate) solo_caps: BTreeMap<ActivitySource, Duration>,
    /// See [`get_containment`](Self::get_containment).
    pub(crate) containment: Containment,
    /// See [`get_input_wait_timeout`](Self::get_input_wait_timeout).
    pub(crate) input_wait_timeout: Option<Duration>,
    /// See [`get_input_wait_notice`](Self::get_input_wait_notice).
    pub(crate) input_wait_notice: Option<Duration>,
    /// See [`get_observe`](Self::get_observe).
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
            completion: crate::completion::CompletionConfig::default(),
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

/// Accepted range of a solo cap.
const SOLO_CAP_MAX: Duration = Duration::from_secs(366 * 24 * 3600);

/// Accepted range of the idle timeout.
const IDLE_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(7 * 24 * 3600));
/// Accepted range of the hard timeout.
/// The input-wait timeout's accepted range: 100 ms to 1 day.
const INPUT_WAIT_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(24 * 3600));
const HARD_TIMEOUT_RANGE: (Duration, Duration) = (
    Duration::from_millis(1),
    Duration::from_secs(366 * 24 * 3600),
);
const MAX_GRACE: Duration = Duration::from_secs(3600);
const CHECK_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(3600));
const DRAIN_MAX: Duration = Duration::from_secs(600);
const CONFIRM_RANGE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(600));

fn check_size(setting: Setting, value: usize, min: usize, max: usize) -> Result<(), ConfigError> {
    if value < min || value > max {
        Err(ConfigError::SizeOutOfRange {
            setting,
            value,
            min,
            max,
        })
    } else {
        Ok(())
    }
}

fn check_range(
    setting: Setting,
    value: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), ConfigError> {
    if value < min || value > max {
        Err(ConfigError::OutOfRange {
            setting,
            value,
            min,
            max,
        })
    } else {
        Ok(())
    }
}

impl MonitorConfig {
    /// The default solo cap of the children source: 30 minutes (see
    /// [`solo_cap`](Self::solo_cap)).
    pub const DEFAULT_CHILDREN_SOLO_CAP: Duration = Duration::from_secs(30 * 60);

    /// Sets the idle timeout.
    ///
    /// End the child once every enabled source has been stale this long. Default 300 s.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets (or clears) the input-wait timeout ([`input_wait_timeout`](Self::input_wait_timeout)):
    /// end a child whose whole tree waits on input this long, every source quiet.
    ///
    /// End the child once the whole tree has been blocked on input (its stdin or a terminal,
    /// with its read count unchanged) for this long while every source is quiet: the outcome
    /// [`Outcome::InputWait`](crate::Outcome::InputWait), after an
    /// [`Event::InputWait`](crate::Event::InputWait). Default `None` (off).
    pub fn input_wait_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.input_wait_timeout = timeout;
        self
    }

    /// Sets (or clears) the input-wait notice ([`input_wait_notice`](Self::input_wait_notice)):
    /// an event, once per episode, when the whole tree waits on input this long, every source
    /// quiet; the child goes on.
    ///
    /// Send an [`Event::InputWait`](crate::Event::InputWait) once the whole tree has been
    /// blocked on input for this long while every source is quiet, once per episode, and go
    /// on: a harness can answer the prompt or give up. Default `None` (off: looking costs a
    /// snapshot of the tree every quarter of this, at most every 250 ms, while it is quiet).
    pub fn input_wait_notice(mut self, notice: Option<Duration>) -> Self {
        self.input_wait_notice = notice;
        self
    }

    /// Sets (or clears) the hard timeout.
    ///
    /// End the child after this long even while active. Default none.
    pub fn hard_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.hard_timeout = timeout;
        self
    }

    /// Sets the kill ladder.
    ///
    /// How the tree is ended. Default SIGTERM, 5 s, SIGKILL.
    pub fn kill_ladder(mut self, ladder: KillLadder) -> Self {
        self.kill_ladder = ladder;
        self
    }

    /// Sets the sampling interval of polled sources (`None`: derived from the idle timeout).
    ///
    /// Periodic sampling interval for polled sources (children). `None` (default): idle timeout / 10,
    /// clamped to 100 ms..=30 s.
    pub fn check_interval(mut self, interval: Option<Duration>) -> Self {
        self.check_interval = interval;
        self
    }

    /// Leaves the members of the tree still alive after the child exited running (`true`)
    /// instead of ending them with the kill ladder (`false`, the default).
    ///
    /// Whether the members of the tree still alive after the child itself exited are left
    /// running (`true`) instead of ended with the kill ladder (`false`, the default: a finished
    /// child leaves nothing behind).
    pub fn keep_leftovers(mut self, keep: bool) -> Self {
        self.keep_leftovers = keep;
        self
    }

    /// Observe mode (`false`, the default): quietus ends nothing on its own decision (idle
    /// timeout, hard timeout, input wait, completion); it records when and why it would have
    /// ([`MonitorResult::observations`](crate::MonitorResult::observations),
    /// [`Event::Observed`](crate::Event::Observed)) and the program runs to its own end. The
    /// leader's own exit, the leftovers after it and the caller's terminate and kill act as
    /// always.
    pub fn observe(mut self, on: bool) -> Self {
        self.observe = on;
        self
    }

    /// Sets the post-exit drain cap.
    ///
    /// After the child exits, how long at most to keep reading output from pipes that a
    /// grandchild still holds open. Default 2 s. A pipe nobody holds open any more is read to
    /// its end whatever the cap (quietus's own log backlog is not a reason to cut it).
    pub fn drain_cap(mut self, cap: Duration) -> Self {
        self.drain_cap = cap;
        self
    }

    /// Sets how long the post-exit drain waits for quiet output.
    ///
    /// After the child exits, stop draining once output has been quiet this long. Default 100 ms.
    pub fn drain_quiet(mut self, quiet: Duration) -> Self {
        self.drain_quiet = quiet;
        self
    }

    /// Sets the bound on confirming the final SIGKILL.
    ///
    /// How long after the final SIGKILL to wait for the tree to be confirmed gone before the
    /// result says "termination unproven". Default 5 s.
    pub fn kill_confirm_timeout(mut self, timeout: Duration) -> Self {
        self.kill_confirm_timeout = timeout;
        self
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

    /// Sets (`Some`) or removes (`None`) the solo cap of `source` ([`get_solo_caps`](Self::get_solo_caps)).
    /// Capping [`ActivitySource::RepeatedOutput`] turns that source on
    /// ([`repeated_output`](Self::repeated_output)).
    pub fn solo_cap(mut self, source: ActivitySource, cap: Option<Duration>) -> Self {
        match cap {
            Some(cap) => {
                if source == ActivitySource::RepeatedOutput {
                    self.enabled.repeated_output = true;
                }
                self.solo_caps.insert(source, cap);
            }
            None => {
                self.solo_caps.remove(&source);
            }
        }
        self
    }

    /// Opt-in: output that merely repeats itself (the same line as one of the last 16
    /// different lines, once runs of digits are set aside, so counters and timestamps do not
    /// make a line new: a spinner, a "retrying in 5s" loop) is the source
    /// [`ActivitySource::RepeatedOutput`] instead of [`ActivitySource::Output`], with this solo
    /// cap (`None`: the source is off, every read is output). Lines end at `\n` or `\r`; a
    /// read that completes no line (a partial line) is output.
    pub fn repeated_output(mut self, cap: Option<Duration>) -> Self {
        self.enabled.repeated_output = cap.is_some();
        match cap {
            Some(cap) => self.solo_caps.insert(ActivitySource::RepeatedOutput, cap),
            None => self.solo_caps.remove(&ActivitySource::RepeatedOutput),
        };
        self
    }

    /// Sets how completion is recognised.
    ///
    /// How to recognise that the work is done (nothing by default).
    pub fn completion(mut self, completion: crate::completion::CompletionConfig) -> Self {
        self.completion = completion;
        self
    }

    /// Adds a probe.
    pub fn probe(mut self, probe: crate::probe::Probe) -> Self {
        self.probes.push(probe);
        self
    }

    /// The solo caps in force, for the verdict: only of sources that count.
    pub(crate) fn effective_caps(&self) -> Vec<(ActivitySource, Duration)> {
        self.solo_caps
            .iter()
            .filter(|(source, _)| self.watches(source))
            .map(|(source, cap)| (source.clone(), *cap))
            .collect()
    }

    /// Checks the probes, the solo caps and the completion settings.
    fn validate_rules(&self) -> Result<(), ConfigError> {
        self.completion.validate()?;
        for (i, probe) in self.probes.iter().enumerate() {
            probe.validate()?;
            if self.probes[..i].iter().any(|p| p.name() == probe.name()) {
                return Err(ConfigError::InvalidProbe {
                    name: probe.name().to_owned(),
                    reason: crate::error::ProbeProblem::DuplicateName,
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

    /// Turns the output source on or off.
    pub fn watch_output(mut self, enabled: bool) -> Self {
        self.enabled.output = enabled;
        self
    }

    /// Turns the file source on or off (on by default; tuned with [`files`](Self::files)).
    pub fn watch_files(mut self, enabled: bool) -> Self {
        self.enabled.files = enabled;
        self
    }

    /// Tunes the file source: its roots and filters. Only [`watch_files`](Self::watch_files)
    /// turns it on or off.
    ///
    /// The files source's roots and filters (used while it is on: [`watch_files`](Self::watch_files)).
    pub fn files(mut self, files: FileWatchConfig) -> Self {
        self.files = files;
        self
    }

    /// Turns the descendant-CPU source on or off (on by default; tuned with
    /// [`children`](Self::children)).
    pub fn watch_children(mut self, enabled: bool) -> Self {
        self.enabled.children = enabled;
        self
    }

    /// Turns the network source on or off: bytes received or sent on the TCP sockets held by
    /// any process of the tree (Linux socket diagnostics; elsewhere the source is reported
    /// unavailable). On by default.
    pub fn watch_network(mut self, enabled: bool) -> Self {
        self.enabled.network = enabled;
        self
    }

    /// Tunes the descendant-CPU source: its threshold and its subreaper mode. Only
    /// [`watch_children`](Self::watch_children) turns it on or off.
    ///
    /// The children source's threshold (used while it is on:
    /// [`watch_children`](Self::watch_children)).
    pub fn children(mut self, children: ChildWatchConfig) -> Self {
        self.children = children;
        self
    }

    /// Sets output retention and log spill.
    ///
    /// Output retention and log spill.
    pub fn capture(mut self, capture: CaptureConfig) -> Self {
        self.capture = capture;
        self
    }

    /// Sets the event stream's behaviour.
    ///
    /// The event stream.
    pub fn events(mut self, events: EventConfig) -> Self {
        self.events = events;
        self
    }

    /// Sets how the tree is held (a cgroup, the process group, or whichever can be had).
    ///
    /// How the tree is held: a cgroup of the session's own, or the process group. Default
    /// [`Containment::Auto`].
    pub fn containment(mut self, mode: Containment) -> Self {
        self.containment = mode;
        self
    }

    /// Turns the Linux parent-death signal on or off.
    ///
    /// Linux: the child gets SIGKILL if the supervising process dies (its parent-death signal,
    /// or in a cgroup the guardian, which ends every member). Default on.
    pub fn parent_death_signal(mut self, enabled: bool) -> Self {
        self.parent_death_signal = enabled;
        self
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

    /// Checks every setting: the one place values are validated (the setters take any value;
    /// [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) calls this again). The error
    /// names the setting ([`ConfigError::setting`]) and the accepted range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_idle_timeout(self.idle_timeout)?;
        if let Some(hard) = self.hard_timeout {
            check_range(
                Setting::HardTimeout,
                hard,
                HARD_TIMEOUT_RANGE.0,
                HARD_TIMEOUT_RANGE.1,
            )?;
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
            check_range(
                Setting::CheckInterval,
                interval,
                CHECK_INTERVAL_RANGE.0,
                CHECK_INTERVAL_RANGE.1,
            )?;
        }
        check_range(Setting::DrainCap, self.drain_cap, Duration::ZERO, DRAIN_MAX)?;
        check_range(
            Setting::DrainQuiet,
            self.drain_quiet,
            Duration::ZERO,
            DRAIN_MAX,
        )?;
        check_range(
            Setting::KillConfirmTimeout,
            self.kill_confirm_timeout,
            CONFIRM_RANGE.0,
            CONFIRM_RANGE.1,
        )?;
        if self.enabled.files {
            self.files.check_globs()?;
            check_range(
                Setting::FilesArmDelay,
                self.files.arm_delay,
                Duration::ZERO,
                Duration::from_secs(10),
            )?;
        }
        let t = self.children.cpu_threshold;
        if !(t > 0.0 && t <= 64.0) {
            return Err(ConfigError::InvalidThreshold { value: t });
        }
        check_size(
            Setting::CaptureCapPerStream,
            self.capture.cap_per_stream,
            0,
            1 << 30,
        )?;
        check_size(Setting::EventsChunkCap, self.events.chunk_cap, 1, 1 << 20)?;
        check_size(Setting::EventsCapacity, self.events.capacity, 32, 1 << 20)?;
        check_range(
            Setting::EventsThrottle,
            self.events.throttle,
            Duration::ZERO,
            Duration::from_secs(3600),
        )?;
        if let Some(f) = self.events.idle_warning
            && !(f > 0.0 && f < 1.0)
        {
            return Err(ConfigError::InvalidFraction {
                setting: Setting::EventsIdleWarning,
                value: f,
            });
        }
        self.validate_rules()
    }
}

/// Validates an idle timeout on its own (also used when a keepalive replaces it).
pub(crate) fn validate_idle_timeout(timeout: Duration) -> Result<(), ConfigError> {
    check_range(
        Setting::IdleTimeout,
        timeout,
        IDLE_TIMEOUT_RANGE.0,
        IDLE_TIMEOUT_RANGE.1,
    )
}

/// How much of the log folder quietus keeps: its own logs (files named like
/// `20261122T053012Z-4242-s1-stdout.log`; nothing else in the folder is touched) older than
/// `max_age`, then the oldest while all of them together pass `max_total_bytes`, are deleted,
/// never a log still being written (by this process or another). Applied at a spawn that
/// spills, at most once a minute per folder and process unless this process has logged an
/// eighth of the size budget since, so it costs one folder listing now and then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogRetention {
    /// See [`get_max_age`](Self::get_max_age).
    pub(crate) max_age: Option<Duration>,
    /// See [`get_max_total_bytes`](Self::get_max_total_bytes).
    pub(crate) max_total_bytes: Option<u64>,
}

impl Default for LogRetention {
    fn default() -> Self {
        Self {
            max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            max_total_bytes: Some(256 * 1024 * 1024),
        }
    }
}

impl LogRetention {
    /// Keeps every log (no age and no size limit).
    pub fn keep_all() -> Self {
        Self {
            max_age: None,
            max_total_bytes: None,
        }
    }

    /// Sets the age limit.
    ///
    /// Logs older than this (by modification time) go. `None`: no age limit. Default 7 days.
    pub fn max_age(mut self, age: Option<Duration>) -> Self {
        self.max_age = age;
        self
    }

    /// Sets the size limit.
    ///
    /// The oldest logs go while quietus's logs in the folder pass this many bytes in all.
    /// `None`: no size limit. Default 256 MiB.
    pub fn max_total_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_total_bytes = bytes;
        self
    }
}

/// Reading back what the setters set (named as `std::process::Command`'s `get_*`, the setters
/// holding the plain names).
impl CaptureConfig {
    /// The value set by [`cap_per_stream`](Self::cap_per_stream).
    pub fn get_cap_per_stream(&self) -> usize {
        self.cap_per_stream
    }

    /// The value set by [`combined`](Self::combined).
    pub fn get_combined(&self) -> bool {
        self.combined
    }

    /// The value set by [`spill`](Self::spill).
    pub fn get_spill(&self) -> bool {
        self.spill
    }

    /// The value set by [`spill_threshold`](Self::spill_threshold).
    pub fn get_spill_threshold(&self) -> u64 {
        self.spill_threshold
    }

    /// The value set by [`log_dir`](Self::log_dir).
    pub fn get_log_dir(&self) -> Option<&std::path::Path> {
        self.log_dir.as_deref()
    }

    /// The value set by [`retention`](Self::retention).
    pub fn get_retention(&self) -> LogRetention {
        self.retention
    }
}

/// Reading back what the setters set (named as `std::process::Command`'s `get_*`, the setters
/// holding the plain names).
impl EventConfig {
    /// The value set by [`throttle`](Self::throttle).
    pub fn get_throttle(&self) -> Duration {
        self.throttle
    }

    /// The value set by [`chunk_cap`](Self::chunk_cap).
    pub fn get_chunk_cap(&self) -> usize {
        self.chunk_cap
    }

    /// The value set by [`utf8_boundaries`](Self::utf8_boundaries).
    pub fn get_utf8_boundaries(&self) -> bool {
        self.utf8_boundaries
    }

    /// The value set by [`idle_warning`](Self::idle_warning).
    pub fn get_idle_warning(&self) -> Option<f64> {
        self.idle_warning
    }

    /// The value set by [`capacity`](Self::capacity).
    pub fn get_capacity(&self) -> usize {
        self.capacity
    }
}

/// Reading back what the setters set (named as `std::process::Command`'s `get_*`, the setters
/// holding the plain names).
impl ChildWatchConfig {
    /// The value set by [`cpu_threshold`](Self::cpu_threshold).
    pub fn get_cpu_threshold(&self) -> f64 {
        self.cpu_threshold
    }

    /// The value set by [`include_self`](Self::include_self).
    pub fn get_include_self(&self) -> bool {
        self.include_self
    }

    /// The value set by [`subreaper`](Self::subreaper).
    pub fn get_subreaper(&self) -> bool {
        self.subreaper
    }
}

/// Reading back what the setters set (named as `std::process::Command`'s `get_*`, the setters
/// holding the plain names).
impl FileWatchConfig {
    /// Folders watched recursively; relative ones are taken from the child's working directory.
    pub fn get_roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The value set by [`include`](Self::include).
    pub fn get_include(&self) -> &[String] {
        &self.include
    }

    /// The value set by [`exclude`](Self::exclude).
    pub fn get_exclude(&self) -> &[String] {
        &self.exclude
    }

    /// The value set by [`force_stat_scan`](Self::force_stat_scan).
    pub fn get_force_stat_scan(&self) -> bool {
        self.force_stat_scan
    }

    /// Files the caller itself writes during the run (an event log, a report): changes to
    /// them never count as the child's activity, whatever their name, their folder and the
    /// globs. They are matched by identity, not by name: each path is resolved once at the
    /// start (symbolic links followed; a file that does not exist yet by its resolved folder),
    /// and an event counts as "own" when it concerns that resolved path, under whichever
    /// spelling of a watched root it arrives. Relative paths are taken from the current
    /// directory of this process (where the caller opens them), not the child's.
    ///
    /// The session's own log files need not be listed: the library registers each one itself
    /// before creating it. The `quietus` command lists its `--events` and `--report` files.
    pub fn get_own_files(&self) -> &[PathBuf] {
        &self.own_files
    }

    /// The value set by [`arm_delay`](Self::arm_delay).
    pub fn get_arm_delay(&self) -> Duration {
        self.arm_delay
    }
}

/// Reading back what the setters set (named as `std::process::Command`'s `get_*`, the setters
/// holding the plain names).
impl MonitorConfig {
    /// The value set by [`idle_timeout`](Self::idle_timeout).
    pub fn get_idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// The value set by [`hard_timeout`](Self::hard_timeout).
    pub fn get_hard_timeout(&self) -> Option<Duration> {
        self.hard_timeout
    }

    /// The value set by [`kill_ladder`](Self::kill_ladder).
    pub fn get_kill_ladder(&self) -> &KillLadder {
        &self.kill_ladder
    }

    /// The value set by [`check_interval`](Self::check_interval).
    pub fn get_check_interval(&self) -> Option<Duration> {
        self.check_interval
    }

    /// The value set by [`keep_leftovers`](Self::keep_leftovers).
    pub fn get_keep_leftovers(&self) -> bool {
        self.keep_leftovers
    }

    /// The value set by [`observe`](Self::observe).
    pub fn get_observe(&self) -> bool {
        self.observe
    }

    /// The value set by [`drain_cap`](Self::drain_cap).
    pub fn get_drain_cap(&self) -> Duration {
        self.drain_cap
    }

    /// The value set by [`drain_quiet`](Self::drain_quiet).
    pub fn get_drain_quiet(&self) -> Duration {
        self.drain_quiet
    }

    /// The value set by [`kill_confirm_timeout`](Self::kill_confirm_timeout).
    pub fn get_kill_confirm_timeout(&self) -> Duration {
        self.kill_confirm_timeout
    }

    /// The value set by [`files`](Self::files).
    pub fn get_files(&self) -> &FileWatchConfig {
        &self.files
    }

    /// The value set by [`children`](Self::children).
    pub fn get_children(&self) -> &ChildWatchConfig {
        &self.children
    }

    /// The value set by [`capture`](Self::capture).
    pub fn get_capture(&self) -> &CaptureConfig {
        &self.capture
    }

    /// The value set by [`events`](Self::events).
    pub fn get_events(&self) -> &EventConfig {
        &self.events
    }

    /// The value set by [`parent_death_signal`](Self::parent_death_signal).
    pub fn get_parent_death_signal(&self) -> bool {
        self.parent_death_signal
    }

    /// The value set by [`completion`](Self::completion).
    pub fn get_completion(&self) -> &crate::completion::CompletionConfig {
        &self.completion
    }

    /// Pull-style activity sources, asked only when the child is about to be judged stale.
    pub fn get_probes(&self) -> &[crate::probe::Probe] {
        &self.probes
    }

    /// The solo cap of each capped source: the longest that source may keep the child alive
    /// on its own, past the idle timeout, while every other source is quiet (its activity
    /// counts only up to the cap after the latest activity of any other source; it counts
    /// again once another source is active). Set with [`solo_cap`](Self::solo_cap).
    ///
    /// Default: children [`DEFAULT_CHILDREN_SOLO_CAP`](Self::DEFAULT_CHILDREN_SOLO_CAP) (30 minutes), nothing else. A silent
    /// agent whose grandchild spins forever is then ended 30 minutes after the idle timeout,
    /// while a silent build or test run in a grandchild is left alone for the idle timeout +
    /// 30 minutes: longer than the tool-call limits of the agent CLIs themselves (10 minutes
    /// at most for a shell command in the common ones), so a grandchild that works silently
    /// for longer is no longer a tool call of a working agent.
    pub fn get_solo_caps(&self) -> &BTreeMap<ActivitySource, Duration> {
        &self.solo_caps
    }

    /// The value set by [`containment`](Self::containment).
    pub fn get_containment(&self) -> Containment {
        self.containment
    }

    /// The value set by [`input_wait_timeout`](Self::input_wait_timeout).
    pub fn get_input_wait_timeout(&self) -> Option<Duration> {
        self.input_wait_timeout
    }

    /// The value set by [`input_wait_notice`](Self::input_wait_notice).
    pub fn get_input_wait_notice(&self) -> Option<Duration> {
        self.input_wait_notice
    }
}

/// Reading back what the setters set (named as `std::process::Command`'s `get_*`, the setters
/// holding the plain names).
impl LogRetention {
    /// The value set by [`max_age`](Self::max_age).
    pub fn get_max_age(&self) -> Option<Duration> {
        self.max_age
    }

    /// The value set by [`max_total_bytes`](Self::max_total_bytes).
    pub fn get_max_total_bytes(&self) -> Option<u64> {
        self.max_total_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_documented_values() {
        let c = MonitorConfig::default();
        c.validate().unwrap();
        assert_eq!(c.idle_timeout, Duration::from_secs(300));
        assert_eq!(c.effective_check_interval(), Duration::from_secs(30));
        assert_eq!(
            c.kill_ladder.effective(),
            vec![
                KillStep {
                    signal: Signal::TERM,
                    grace: Duration::from_secs(5)
                },
                KillStep {
                    signal: Signal::KILL,
                    grace: Duration::ZERO
                }
            ]
        );
    }

    #[test]
    fn tuning_a_source_does_not_turn_it_on() {
        let off = MonitorConfig::default()
            .watch_files(false)
            .watch_children(false)
            .files(FileWatchConfig::default().root("work"))
            .children(ChildWatchConfig::default().cpu_threshold(0.5));
        assert!(!off.watches(&ActivitySource::Files));
        assert!(!off.watches(&ActivitySource::Children));
        let on = MonitorConfig::default().children(ChildWatchConfig::default());
        assert!(on.watches(&ActivitySource::Children), "on by default");
    }

    #[test]
    fn check_interval_is_clamped() {
        let short = MonitorConfig::default().idle_timeout(Duration::from_millis(200));
        assert_eq!(short.effective_check_interval(), Duration::from_millis(100));
        let long = MonitorConfig::default().idle_timeout(Duration::from_secs(3600));
        assert_eq!(long.effective_check_interval(), Duration::from_secs(30));
    }

    #[test]
    fn zero_idle_timeout_names_the_field_and_range() {
        let err = MonitorConfig::default()
            .idle_timeout(Duration::ZERO)
            .validate()
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("idle_timeout"), "{text}");
        assert!(text.contains("1ms") && text.contains("604800s"), "{text}");
    }

    #[test]
    fn input_wait_timeout_is_validated() {
        for bad in [
            Duration::from_millis(10),
            Duration::from_secs(2 * 24 * 3600),
        ] {
            let err = MonitorConfig::default()
                .input_wait_timeout(Some(bad))
                .validate()
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    ConfigError::OutOfRange {
                        setting: Setting::InputWaitTimeout,
                        ..
                    }
                ),
                "{err:?}"
            );
        }
        let ok = MonitorConfig::default().input_wait_timeout(Some(Duration::from_secs(10)));
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(MonitorConfig::default().input_wait_timeout, None);
    }

    #[test]
    fn every_error_names_its_setting_as_a_type() {
        let cases = [
            (
                MonitorConfig::default().input_wait_notice(Some(Duration::from_millis(1))),
                Setting::InputWaitNotice,
            ),
            (
                MonitorConfig::default()
                    .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(7200))),
                Setting::KillLadderGrace,
            ),
            (
                MonitorConfig::default().kill_ladder(KillLadder::new([])),
                Setting::KillLadder,
            ),
            (
                MonitorConfig::default().events(EventConfig::default().capacity(1)),
                Setting::EventsCapacity,
            ),
            (
                MonitorConfig::default().events(EventConfig::default().idle_warning(Some(2.0))),
                Setting::EventsIdleWarning,
            ),
            (
                MonitorConfig::default().children(ChildWatchConfig::default().cpu_threshold(0.0)),
                Setting::ChildrenCpuThreshold,
            ),
            (
                MonitorConfig::default().files(FileWatchConfig::default().include("a[")),
                Setting::FilesInclude,
            ),
        ];
        for (config, setting) in cases {
            let err = config.validate().unwrap_err();
            assert_eq!(err.setting(), Some(setting), "{err}");
            assert!(err.to_string().contains(setting.path()), "{err}");
        }
    }

    #[test]
    fn absurd_hard_timeout_is_rejected() {
        let err = MonitorConfig::default()
            .hard_timeout(Some(Duration::from_secs(10 * 365 * 24 * 3600)))
            .validate()
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::OutOfRange {
                setting: Setting::HardTimeout,
                ..
            }
        ));
    }

    #[test]
    fn ladder_errors() {
        let empty = MonitorConfig::default().kill_ladder(KillLadder::new([]));
        assert_eq!(empty.validate(), Err(ConfigError::EmptyLadder));
        let early_kill = MonitorConfig::default().kill_ladder(KillLadder::new([
            (Signal::KILL, Duration::ZERO),
            (Signal::TERM, Duration::from_secs(1)),
        ]));
        assert_eq!(
            early_kill.validate(),
            Err(ConfigError::KillBeforeEnd { step: 0 })
        );
        let long_grace = MonitorConfig::default()
            .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(7200)));
        assert!(long_grace.validate().is_err());
        let explicit_kill = MonitorConfig::default().kill_ladder(KillLadder::new([
            (Signal::INT, Duration::from_secs(1)),
            (Signal::KILL, Duration::from_secs(1)),
        ]));
        explicit_kill.validate().unwrap();
        assert_eq!(explicit_kill.kill_ladder.effective().len(), 2);
        assert_eq!(KillLadder::immediate().effective().len(), 1);
    }

    #[test]
    fn bad_glob_names_field_and_pattern() {
        let config = FileWatchConfig {
            exclude: vec!["a[".into()],
            ..FileWatchConfig::default()
        };
        let err = config.globs().unwrap_err().to_string();
        assert!(err.contains("files.exclude") && err.contains("a["), "{err}");
    }

    #[test]
    fn signal_parsing() {
        assert_eq!("TERM".parse::<Signal>().unwrap(), Signal::TERM);
        assert_eq!("sigint".parse::<Signal>().unwrap(), Signal::INT);
        assert_eq!("9".parse::<Signal>().unwrap(), Signal::KILL);
        assert_eq!(Signal::HUP.to_string(), "HUP");
        assert!("0".parse::<Signal>().is_err());
        assert!("64".parse::<Signal>().is_err());
        let err = "NOPE".parse::<Signal>().unwrap_err();
        assert!(err.to_string().contains("NOPE"));
    }
}
