//! How a supervised run ended: [`Outcome`] and the [`MonitorResult`] (exit codes), and what
//! they say of it: why it stalled ([`StaleReport`], each [`SourceActivity`]), what was seen done
//! ([`CompletionSeen`]), what observe mode saw ([`Observation`]), what was left behind
//! ([`Leftover`]), the logs ([`LogFile`], [`LogProblem`], [`LogDirError`],
//! [`LogDirProblem`]) and the reasons a source or the containment was not had
//! ([`UnwatchedFolder`], [`UnwatchedReason`], [`NetworkUnavailable`], [`CgroupUnavailable`],
//! [`ProcUnavailable`]). The crate root re-exports [`Outcome`] and [`MonitorResult`].

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use crate::activity::ActivitySource;
use crate::config::Containment;
use crate::error::SystemError;
use crate::pid::Pid;
pub use crate::process::cgroup::CgroupUnavailable;
use crate::process::guardian::GuardianUnavailable;
pub use crate::process::sys::proc::ProcUnavailable;
use crate::signal::Signal;
use crate::stream::Stream;

/// What one sample of the descendants found ([`DescendantObserver::sample`](crate::sources::DescendantObserver::sample), and
/// [`StaleReport::children`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ChildrenSample {
    /// Whether the CPU used since the previous sample reached the threshold.
    pub active: bool,
    /// Live descendants now (the direct child not included).
    pub descendants: usize,
    /// CPU used by the descendants since the previous sample (by the rules above).
    pub cpu_delta: Duration,
    /// CPU used in all by the descendants: the live ones and every one already reaped.
    pub descendant_cpu: Duration,
    /// Remembered descendants that left the tree and still live.
    pub escapees: usize,
    /// Bytes the descendants wrote, or read from storage, since the previous sample (the
    /// direct child's own only when its CPU counts too; its reaped children's always).
    pub moved_bytes: u64,
    /// With a cgroup: how long the tree's processes waited for a CPU since the previous
    /// sample (CPU asked for and not received); zero without one.
    pub cpu_waited: Duration,
}

/// A complete log of one stream ([`MonitorResult::logs`]; written by the capture's spill).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogFile {
    /// Which stream.
    pub stream: Stream,
    /// Where it is (when it could not be created: where it would have been).
    pub path: PathBuf,
    /// Lower-case hex SHA-256 of every byte read from the stream: the complete log's content.
    pub sha256: String,
    /// How many bytes were read from the stream: the complete log's length.
    pub bytes: u64,
    /// How many bytes the file really holds: `bytes` unless writing failed.
    pub written: u64,
    /// Whether the log lacks part of the stream: it could not be created or written
    /// (`written < bytes`), or the stream was still held open when the run ended (then the
    /// log holds every byte read, but the stream went on). The in-memory capture still holds
    /// head and tail.
    pub incomplete: bool,
    /// Why it is incomplete.
    pub error: Option<LogProblem>,
}

/// Why a [`LogFile`] lacks part of its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogProblem {
    /// The default log folder cannot be used (a spawn that named its folder fails instead):
    /// no log was written.
    Folder(LogDirError),
    /// The log file could not be created: no log was written.
    Create(SystemError),
    /// Writing it failed part way (a full device, say): it holds
    /// [`written`](LogFile::written) bytes.
    Write(SystemError),
    /// A process outside the tree still held the stream open when the run ended: the log
    /// holds every byte read until then, and the stream went on.
    StillOpen,
}

impl fmt::Display for LogProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogProblem::Folder(e) => write!(f, "not written: {e}"),
            LogProblem::Create(e) => write!(f, "cannot create it: {e}"),
            LogProblem::Write(e) => write!(f, "cannot write it: {e}"),
            LogProblem::StillOpen => f.write_str(
                "the stream was still open when the run ended (a process outside the tree \
                 held it); the log holds every byte read until then",
            ),
        }
    }
}

/// The log folder cannot be used: the [`inner`](crate::SpawnError::inner) error of the
/// [`SpawnError`](crate::SpawnError) of kind [`LogDir`](crate::error::SpawnErrorKind::LogDir) that a
/// spawn fails with when it named the folder (`err.inner().downcast_ref::<LogDirError>()`), and
/// what a log says when the default folder cannot be used ([`LogProblem::Folder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirError {
    pub(crate) path: PathBuf,
    pub(crate) problem: LogDirProblem,
}

impl LogDirError {
    /// The folder.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &LogDirProblem {
        &self.problem
    }
}

impl fmt::Display for LogDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "log folder {}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for LogDirError {}

/// What is wrong with a log folder ([`LogDirError::problem`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogDirProblem {
    /// It is a file, not a folder.
    NotAFolder,
    /// The default folder is a symbolic link: it must be the user's own folder.
    SymbolicLink,
    /// It does not exist and cannot be created.
    Create(SystemError),
    /// It cannot be opened or looked at.
    Read(SystemError),
    /// No file can be made in it.
    NotWritable(SystemError),
    /// It is read-only.
    ReadOnly,
    /// The default folder belongs to another user.
    OtherOwner {
        /// Its owner's user id.
        owner: u32,
        /// This process's effective user id.
        user: u32,
    },
    /// Others can write to the default folder.
    WritableByOthers {
        /// Its permission bits.
        mode: u32,
    },
    /// A folder on the default folder's path (as the system resolves it) belongs to another
    /// user than this one or root, or others can write to it without its sticky bit: that
    /// user could swap the folders below it (a shared `HOME` whose `~/.cache` is someone
    /// else's), so the logs would go where they choose.
    UnsafePath {
        /// The folder on the way.
        folder: std::path::PathBuf,
        /// Its owner's user id.
        owner: u32,
        /// Its permission bits.
        mode: u32,
    },
}

impl fmt::Display for LogDirProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const OWN: &str = "the default log folder must be the user's own";
        match self {
            LogDirProblem::NotAFolder => f.write_str("is not a folder"),
            LogDirProblem::SymbolicLink => write!(f, "is a symbolic link; {OWN} folder"),
            LogDirProblem::Create(e) => write!(f, "cannot create it: {e}"),
            LogDirProblem::Read(e) => write!(f, "cannot read it: {e}"),
            LogDirProblem::NotWritable(e) => write!(f, "not writable: {e}"),
            LogDirProblem::ReadOnly => f.write_str("is read-only"),
            LogDirProblem::OtherOwner { owner, user } => write!(
                f,
                "belongs to user {owner}, not to this user ({user}); {OWN}"
            ),
            LogDirProblem::WritableByOthers { mode } => {
                write!(f, "is writable by others (mode {mode:o}); {OWN}")
            }
            LogDirProblem::UnsafePath {
                folder,
                owner,
                mode,
            } => write!(
                f,
                "the folder {} on its path belongs to user {owner} (mode {mode:o}): only this \
                 user or root may own a folder on the way to the default log folder, and others \
                 may write to it only when it is sticky",
                folder.display()
            ),
        }
    }
}

/// Why the network source, though on, could observe nothing
/// ([`MonitorResult::network_unavailable`]; the report's `unavailable`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NetworkUnavailable {
    /// No socket diagnostics (`NETLINK_SOCK_DIAG`) in this kernel or sandbox, or a system
    /// other than Linux.
    NoSocketDiagnostics(SystemError),
    /// The `/proc` quietus reads is not its own pid namespace's (none mounted, or the host's
    /// kept in a new pid namespace): the tree's sockets cannot be found.
    ForeignProc(ProcUnavailable),
}

impl fmt::Display for NetworkUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkUnavailable::NoSocketDiagnostics(e) => {
                write!(f, "no socket diagnostics (NETLINK_SOCK_DIAG): {e}")
            }
            NetworkUnavailable::ForeignProc(why) => {
                write!(f, "the tree's sockets cannot be found: {why}")
            }
        }
    }
}

/// How long one activity source had been idle when the child was judged stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceActivity {
    /// The source.
    pub source: ActivitySource,
    /// Whether the source could observe anything (`false`: a watched root is a file, say).
    pub available: bool,
    /// Time since its latest activity (since the spawn when it had none).
    pub idle: Duration,
    /// How many activity events it had recorded in all.
    pub events: u64,
}

/// How the session held its process tree, inside the crate; a [`MonitorResult`] shows it as
/// [`containment`](MonitorResult::containment), [`cgroup`](MonitorResult::cgroup),
/// [`why_not_cgroup`](MonitorResult::why_not_cgroup) and
/// [`supervisor_death`](MonitorResult::supervisor_death).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TreeHold {
    /// A cgroup v2 of the session's own, entered before the program started.
    Cgroup {
        /// Its directory.
        path: PathBuf,
        /// What would have ended the tree had the supervising process died.
        supervisor_death: SupervisorDeath,
    },
    /// The process group, plus the descendants seen leaving it.
    Group {
        /// Why not a cgroup (`None` when the group was asked for).
        why_not_cgroup: Option<CgroupUnavailable>,
        /// What would have ended the tree had the supervising process died.
        supervisor_death: SupervisorDeath,
    },
}

impl TreeHold {
    /// [`Containment::Cgroup`] or [`Containment::Group`].
    pub(crate) fn mode(&self) -> Containment {
        match self {
            TreeHold::Cgroup { .. } => Containment::Cgroup,
            TreeHold::Group { .. } => Containment::Group,
        }
    }

    /// The cgroup's directory, for a cgroup.
    pub(crate) fn cgroup(&self) -> Option<PathBuf> {
        match self {
            TreeHold::Cgroup { path, .. } => Some(path.clone()),
            TreeHold::Group { .. } => None,
        }
    }

    /// Why not a cgroup, for a group taken under [`Containment::Auto`].
    pub(crate) fn why_not_cgroup(&self) -> Option<CgroupUnavailable> {
        match self {
            TreeHold::Cgroup { .. } => None,
            TreeHold::Group { why_not_cgroup, .. } => why_not_cgroup.clone(),
        }
    }

    /// Sets what would have ended the tree had the supervising process died.
    pub(crate) fn set_supervisor_death(&mut self, death: SupervisorDeath) {
        match self {
            TreeHold::Cgroup {
                supervisor_death, ..
            }
            | TreeHold::Group {
                supervisor_death, ..
            } => *supervisor_death = death,
        }
    }

    /// What would have ended the tree had the supervising process died.
    pub(crate) fn supervisor_death(&self) -> &SupervisorDeath {
        match self {
            TreeHold::Cgroup {
                supervisor_death, ..
            }
            | TreeHold::Group {
                supervisor_death, ..
            } => supervisor_death,
        }
    }
}

/// What ends a session's tree if the supervising process dies without ending it (SIGKILL, a
/// crash): [`MonitorResult::supervisor_death`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SupervisorDeath {
    /// The process's guardian (`quietus __guardian`, one per supervising process): it
    /// SIGKILLs the whole process group, or every member of the cgroup and removes it.
    Guardian,
    /// No guardian could be had: only the leader gets SIGKILL (the parent-death signal); its
    /// descendants may live on, and a cgroup left behind is reclaimed (its members killed, the
    /// folder removed) by the next quietus started in the same cgroup.
    LeaderOnly {
        /// Why there was no guardian (no `quietus` program found, say).
        why_no_guardian: GuardianUnavailable,
    },
    /// Nothing: the parent-death signal was turned off
    /// ([`MonitorConfig::parent_death_signal`](crate::MonitorConfig::parent_death_signal)).
    Nothing,
    /// The run was over before any guardian was needed (the leader had exited, alone).
    NotNeeded,
}

/// Why a child was judged stale: every enabled source and how long it had been idle.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StaleReport {
    /// The idle timeout in force.
    pub idle_timeout: Duration,
    /// Every enabled source.
    pub sources: Vec<SourceActivity>,
    /// The descendants at the fresh sample taken at the deadline (children source on).
    pub children: Option<ChildrenSample>,
    /// The sources that were still active but had kept the child alive alone past their solo
    /// cap ([`MonitorConfigBuilder::solo_cap`](crate::config::MonitorConfigBuilder::solo_cap)), so they no longer
    /// counted.
    pub capped: Vec<ActivitySource>,
    /// What the tree was doing when it was judged stale: one snapshot of its processes,
    /// classified as one kind (Linux; elsewhere the kind is `Unknown`).
    pub diagnosis: Option<crate::diagnosis::Diagnosis>,
}

impl StaleReport {
    /// The entry of one source, if it was enabled.
    pub fn get(&self, source: ActivitySource) -> Option<&SourceActivity> {
        self.sources.iter().find(|s| s.source == source)
    }
}

impl fmt::Display for StaleReport {
    /// `output 5m0s, keepalive 7m12s idle` (`children capped` for a source past its solo
    /// cap). Keepalive is left out when the caller never sent
    /// one (it would only repeat the session's age).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self
            .sources
            .iter()
            .filter(|s| s.source != ActivitySource::Keepalive || s.events > 0);
        for (i, s) in shown.enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if self.capped.contains(&s.source) {
                write!(f, "{} capped", s.source)?;
            } else if s.available {
                write!(f, "{} {}", s.source, HumanDuration(s.idle))?;
            } else {
                write!(f, "{} unavailable", s.source)?;
            }
        }
        f.write_str(" idle")
    }
}

/// A duration the way people read it, as every message of quietus writes one (the
/// [`Outcome`]'s and the [`StaleReport`]'s `Display`, the command's summary, the MCP server's
/// answers): whole milliseconds under a second, tenths of a second under a minute, then
/// minutes and seconds, and hours.
///
/// ```
/// use std::time::Duration;
/// use quietus::outcome::HumanDuration;
///
/// let shown = |ms| HumanDuration(Duration::from_millis(ms)).to_string();
/// assert_eq!(shown(850), "850ms");
/// assert_eq!(shown(4_200), "4.2s");
/// assert_eq!(shown(5_000), "5s");
/// assert_eq!(shown(300_000), "5m0s");
/// assert_eq!(shown(3_723_000), "1h2m3s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let secs = d.as_secs();
        if secs == 0 {
            return write!(f, "{}ms", d.as_millis());
        }
        if secs < 60 {
            let tenths = d.subsec_millis() / 100;
            return if tenths == 0 {
                write!(f, "{secs}s")
            } else {
                write!(f, "{secs}.{tenths}s")
            };
        }
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h{m}m{s}s")
        } else {
            write!(f, "{m}m{s}s")
        }
    }
}

/// What a line that told completion matched (inside the crate; public as the variants of
/// [`CompletionSeen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompletionTrigger {
    /// One of the patterns.
    Output,
    /// The line callback.
    Callback,
}

/// Completion as it was seen ([`CompletionConfig`](crate::CompletionConfig)): what told it,
/// and when (after the spawn).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionSeen {
    /// An output line matched one of the patterns
    /// ([`CompletionConfig::output`](crate::CompletionConfig::output)).
    Pattern {
        /// The stream of the line.
        stream: crate::stream::Stream,
        /// The line (lossy UTF-8, at most 1 KiB).
        line: String,
        /// When, after the spawn.
        after: Duration,
    },
    /// The line callback accepted an output line
    /// ([`CompletionConfigBuilder::on_line`](crate::config::CompletionConfigBuilder::on_line)).
    Callback {
        /// The stream of the line.
        stream: crate::stream::Stream,
        /// The line (lossy UTF-8, at most 1 KiB).
        line: String,
        /// When, after the spawn.
        after: Duration,
    },
    /// A completion file appeared or changed
    /// ([`CompletionConfigBuilder::file`](crate::config::CompletionConfigBuilder::file)).
    File {
        /// The file.
        path: PathBuf,
        /// When, after the spawn.
        after: Duration,
    },
}

impl CompletionSeen {
    /// A line that told completion.
    pub(crate) fn line(
        trigger: CompletionTrigger,
        stream: crate::stream::Stream,
        line: String,
        after: Duration,
    ) -> Self {
        match trigger {
            CompletionTrigger::Output => CompletionSeen::Pattern {
                stream,
                line,
                after,
            },
            CompletionTrigger::Callback => CompletionSeen::Callback {
                stream,
                line,
                after,
            },
        }
    }

    /// `output` (a pattern), `callback` or `file`: the word the command's report uses.
    pub fn name(&self) -> &'static str {
        match self {
            CompletionSeen::Pattern { .. } => "output",
            CompletionSeen::Callback { .. } => "callback",
            CompletionSeen::File { .. } => "file",
        }
    }

    /// When it was seen, after the spawn.
    pub fn after(&self) -> Duration {
        match self {
            CompletionSeen::Pattern { after, .. }
            | CompletionSeen::Callback { after, .. }
            | CompletionSeen::File { after, .. } => *after,
        }
    }

    /// The line that matched, or the file's path (lossy UTF-8).
    pub fn matched(&self) -> String {
        match self {
            CompletionSeen::Pattern { line, .. } | CompletionSeen::Callback { line, .. } => {
                line.clone()
            }
            CompletionSeen::File { path, .. } => path.to_string_lossy().into_owned(),
        }
    }

    /// The stream of the line (`None` for a file).
    pub fn stream(&self) -> Option<crate::stream::Stream> {
        match self {
            CompletionSeen::Pattern { stream, .. } | CompletionSeen::Callback { stream, .. } => {
                Some(*stream)
            }
            CompletionSeen::File { .. } => None,
        }
    }
}

impl fmt::Display for CompletionSeen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompletionSeen::Pattern {
                stream,
                line,
                after,
            }
            | CompletionSeen::Callback {
                stream,
                line,
                after,
            } => write!(
                f,
                "{} line on {} {:?} after {}",
                self.name(),
                stream.name(),
                line,
                HumanDuration(*after)
            ),
            CompletionSeen::File { path, after } => {
                write!(f, "file {} after {}", path.display(), HumanDuration(*after))
            }
        }
    }
}

/// Why the run ended. Fixed the first time a reason is found; never overwritten.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The child exited on its own (with a code or by a signal quietus did not send).
    Exited,
    /// Every enabled source was stale for the idle timeout.
    IdleTimeout(StaleReport),
    /// The hard timeout passed.
    HardTimeout {
        /// The configured hard timeout.
        after: Duration,
    },
    /// Completion was seen and the child did not exit by itself within the linger (or went
    /// stale, or reached the hard timeout, meanwhile): quietus ended it. The work is done:
    /// exit code 0.
    Completed(CompletionSeen),
    /// The caller asked for the end ([`Session::terminate`](crate::Session::terminate) or
    /// [`Session::kill`](crate::Session::kill), or dropped the session).
    Terminated {
        /// `true` for an immediate SIGKILL, `false` for the ladder.
        forced: bool,
    },
    /// The whole tree was blocked on input for the input-wait timeout while every source was
    /// quiet ([`MonitorConfig::input_wait_timeout`](crate::MonitorConfig::input_wait_timeout)):
    /// a question nobody will answer. A stall (exit code 124 in the command).
    InputWait(crate::diagnosis::InputWait),
}

impl Outcome {
    /// Whether quietus (rather than the child itself) decided the end.
    pub fn ended_by_quietus(&self) -> bool {
        !matches!(self, Outcome::Exited)
    }

    /// What the tree was doing when it was judged stalled: the diagnosis of an idle timeout
    /// (Linux), or of an input wait; `None` for the other outcomes.
    pub fn diagnosis(&self) -> Option<&crate::diagnosis::Diagnosis> {
        match self {
            Outcome::IdleTimeout(report) => report.diagnosis.as_ref(),
            Outcome::InputWait(wait) => Some(&wait.diagnosis),
            _ => None,
        }
    }

    /// Every [`name`](Self::name) an outcome has (for a client's list: `quietus serve
    /// --schema`).
    pub const NAMES: &'static [&'static str] = &[
        "exited",
        "completed",
        "idle_timeout",
        "hard_timeout",
        "terminated",
        "input_wait",
    ];

    /// Short machine name: `exited`, `idle_timeout`, `hard_timeout`, `completed`,
    /// `terminated`, `input_wait`.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Exited => "exited",
            Outcome::Completed(_) => "completed",
            Outcome::IdleTimeout(_) => "idle_timeout",
            Outcome::HardTimeout { .. } => "hard_timeout",
            Outcome::Terminated { .. } => "terminated",
            Outcome::InputWait(_) => "input_wait",
        }
    }
}

/// Everything known about a finished supervised run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MonitorResult {
    /// Why it ended.
    pub outcome: Outcome,
    /// The child's exit status, once reaped. `None` only when termination is unproven.
    pub status: Option<ExitStatus>,
    /// The child's pid (also its process-group id).
    pub pid: Pid,
    /// Every signal sent to the tree by the ladder, in order.
    pub signals_sent: Vec<Signal>,
    /// Whether the ladder had to go as far as SIGKILL.
    pub escalated: bool,
    /// Group members still alive after the child's own exit that quietus ended.
    pub leftovers_killed: usize,
    /// Those processes (group members and escaped descendants: background jobs, daemons the
    /// command left), as they were just before they were ended; at most 32 named.
    pub leftovers: Vec<Leftover>,
    /// SIGKILL was sent but the tree could not be confirmed gone within the bound.
    pub termination_unproven: bool,
    /// From spawn to the end of the run (output drained).
    pub runtime: Duration,
    /// From the first ladder signal to the tree confirmed gone, when a ladder ran.
    pub ladder_time: Option<Duration>,
    /// For a timeout: from the instant the child became stale (or the hard deadline) to the
    /// first signal sent.
    pub kill_latency: Option<Duration>,
    /// Every enabled source at the end of the run: how long it had been idle and how many
    /// events it had recorded.
    pub activity: Vec<SourceActivity>,
    /// The complete logs of the streams that passed the spill threshold.
    pub logs: Vec<LogFile>,
    /// Best-effort events (`Output`, `Activity`) dropped because the consumer fell behind.
    pub events_dropped: u64,
    /// Whether the output pipes reached end-of-file (`false`: the drain stopped at quiet output
    /// or the drain cap because something still held them open).
    pub output_complete: bool,
    /// The isolated home the child was given, with the files seeded into it and those that
    /// could not be (see [`Environment::home`](crate::Environment::home)).
    pub home: Option<crate::environment::IsolatedHome>,
    /// The folders of the files source's roots that could not be watched during the run (no
    /// permission, say), with why and for how long: activity in them could not be seen then.
    /// Empty when everything was watched (or the files source was off).
    pub unwatched: Vec<UnwatchedFolder>,
    /// Completion, when it was seen ([`CompletionConfig`](crate::CompletionConfig)), whatever
    /// ended the run: a child that exits by itself after it keeps its own exit code.
    pub completion: Option<CompletionSeen>,
    /// How the tree was held: [`Containment::Cgroup`] (a cgroup of its own, every process of
    /// the tree in it, removed at the end) or [`Containment::Group`] (the process group, plus
    /// the descendants seen leaving it); never `Auto`.
    pub containment: Containment,
    /// The session's cgroup directory (which no longer exists), for [`Containment::Cgroup`].
    pub cgroup: Option<PathBuf>,
    /// Why not a cgroup, when [`Containment::Auto`] fell back to the group (`None` when the
    /// group was asked for, or a cgroup was had).
    pub why_not_cgroup: Option<CgroupUnavailable>,
    /// What would have ended the tree had the supervising process died (SIGKILL, a crash).
    pub supervisor_death: SupervisorDeath,
    /// The highest memory use of the whole tree, in bytes, where the session had a cgroup with
    /// the memory controller enabled (kernel 5.19 and later).
    pub memory_peak: Option<u64>,
    /// How many processes of the tree the kernel's OOM killer ended, where the session had a
    /// cgroup with the memory controller enabled.
    pub oom_kills: Option<u64>,
    /// Why the network source, though on, could observe nothing (no socket diagnostics in
    /// this kernel or sandbox, no `/proc` of this pid namespace to find the tree's sockets
    /// in, a system other than Linux); `None` when it could, or was off.
    pub network_unavailable: Option<NetworkUnavailable>,
    /// Why the children source, though on, could see no process of the tree (no `/proc` of
    /// this pid namespace: none mounted, or the host's kept in a new pid namespace); `None`
    /// when it could, or was off.
    pub children_unavailable: Option<ProcUnavailable>,
    /// In observe mode ([`MonitorConfig::observe`](crate::MonitorConfig::observe)): every
    /// moment quietus would have ended the run, in order — the first
    /// [`MAX_OBSERVATIONS`] of them (empty otherwise, and
    /// when it never would have). The outcome itself is then the program's own.
    pub observations: Vec<Observation>,
    /// In observe mode: how many observations came after the first
    /// [`MAX_OBSERVATIONS`] and were not kept (each was still
    /// sent as an event).
    pub observations_dropped: u64,
}

/// A moment quietus would have ended the run, had it not only been observing
/// ([`MonitorConfig::observe`](crate::MonitorConfig::observe)): in
/// [`MonitorResult::observations`] and sent as [`Event::Observed`](crate::Event::Observed).
///
/// The idle timeout is observed once per stretch of quiet (after an observation, quiet starts
/// over: the next one comes only after another full idle timeout), an input wait once per
/// episode, the hard timeout and completion's end once at most.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Observation {
    /// When, after the spawn.
    pub at: Duration,
    /// The outcome the run would have had: [`Outcome::IdleTimeout`] (with its stale report and
    /// diagnosis, as for a real end), [`Outcome::HardTimeout`], [`Outcome::InputWait`] or
    /// [`Outcome::Completed`].
    pub would_have_ended: Outcome,
}

impl Observation {
    /// What the tree was doing then (an idle timeout or an input wait), as for a real end.
    pub fn diagnosis(&self) -> Option<&crate::diagnosis::Diagnosis> {
        self.would_have_ended.diagnosis()
    }
}

/// A part of a watched tree that could not be watched (or, in the stat-scan mode, read), in
/// [`MonitorResult::unwatched`]: activity in it could not be seen while it lasted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnwatchedFolder {
    /// The folder: a root, or a folder inside one.
    pub path: PathBuf,
    /// Why, the last time it was looked at.
    pub reason: UnwatchedReason,
    /// How long it went unwatched in total, up to the end of the run (or now).
    pub duration: Duration,
    /// Whether it was still unwatched at the end of the run (or now).
    pub still: bool,
}

/// Why a part of a watched tree was not watched ([`UnwatchedFolder::reason`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnwatchedReason {
    /// A root is a file, not a folder.
    NotAFolder,
    /// It is on a pseudo-filesystem (`proc`, `sysfs`, `cgroup2`…), which quietus never
    /// watches.
    PseudoFilesystem {
        /// The filesystem's kind.
        kind: &'static str,
    },
    /// It holds more folders than are left of the most one session watches.
    TooManyFolders {
        /// The bound it passed.
        bound: usize,
    },
    /// It holds more folders than the other sessions of this process (a server's) left of the
    /// most they watch together.
    TooManyFoldersInProcess {
        /// The process's bound.
        bound: usize,
    },
    /// The include and exclude patterns are too many for the matcher: nothing is watched.
    TooManyPatterns,
    /// The system refused to watch or read it (no permission, say).
    System(SystemError),
}

impl fmt::Display for UnwatchedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnwatchedReason::NotAFolder => f.write_str("is not a folder"),
            UnwatchedReason::PseudoFilesystem { kind } => {
                write!(
                    f,
                    "is on a pseudo-filesystem ({kind}), which quietus never watches"
                )
            }
            UnwatchedReason::TooManyFolders { bound } => write!(
                f,
                "has more than {bound} folders to watch, what is left of the most one session \
                 watches; name a smaller folder to watch"
            ),
            UnwatchedReason::TooManyFoldersInProcess { bound } => write!(
                f,
                "has more folders to watch than the other sessions of this process (a server's) \
                 left of the {bound} they may watch together; name a smaller folder to watch"
            ),
            UnwatchedReason::TooManyPatterns => {
                f.write_str("the include and exclude patterns are too many for the matcher")
            }
            UnwatchedReason::System(e) => write!(f, "{e}"),
        }
    }
}

/// A process left running after the child's own exit, which quietus ended (a background job
/// such as `sleep 600 &`, a daemon the command started).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leftover {
    /// Its pid.
    pub pid: Pid,
    /// Its name (`comm`).
    pub name: String,
    /// Its command line as a shell would read it back: words joined by spaces, a word with
    /// spaces or other characters special to a shell in single quotes (`sh -c 'sleep 1000; :
    /// tag'`); at most 200 characters, empty if unreadable (a process that is exiting).
    pub command: String,
}

/// The words of a command line (NUL-separated, as `/proc/PID/cmdline` holds them) as a shell
/// would read them back: a word with a character a shell treats specially is put in single
/// quotes (`sh -c 'sleep 1000; : tag'`), an empty word is `''`.
fn shell_line(words: &[u8]) -> String {
    if words.is_empty() {
        return String::new();
    }
    words
        .split(|b| *b == 0)
        .map(|w| {
            let word = String::from_utf8_lossy(w);
            let plain = |c: char| c.is_alphanumeric() || "_@%+=:,./-".contains(c);
            if !word.is_empty() && word.chars().all(plain) {
                word.into_owned()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// At most this many observations are kept in a result ([`MonitorResult::observations`]): a
/// 1 ms idle timeout observed 4,404 times in 6 s made a 5 MB report.
pub const MAX_OBSERVATIONS: usize = 100;

/// At most this many leftovers are named in a result.
const MAX_LEFTOVERS: usize = 32;
/// How long naming the leftovers waits, at most, for those caught between fork and exec.
const EXEC_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

impl Leftover {
    /// Reads the processes `pids` (those already gone are left out).
    pub(crate) fn read_all(pids: impl IntoIterator<Item = Pid>) -> Vec<Leftover> {
        let deadline = std::time::Instant::now() + EXEC_WAIT;
        pids.into_iter()
            .take(MAX_LEFTOVERS)
            .filter_map(|pid| Self::read(pid, deadline))
            .collect()
    }

    /// Reads process `pid`. One forked and not yet past its `exec` (a shell's `sleep 600 &`
    /// caught between the two: still a copy of the shell) is looked at again until `deadline`,
    /// so that it is named by what it runs.
    #[cfg(target_os = "linux")]
    fn read(pid: Pid, deadline: std::time::Instant) -> Option<Leftover> {
        /// `PF_FORKNOEXEC` in the flags of `/proc/PID/stat`: forked, no exec since.
        const FORKNOEXEC: u64 = 0x40;
        let flags = || -> Option<u64> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after = stat.get(stat.rfind(')')? + 1..)?;
            after.split_whitespace().nth(6)?.parse().ok()
        };
        // In the middle of its exec a process has no command line yet, for a few
        // microseconds: that too is looked at again.
        let mut words;
        loop {
            words = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let forked = flags().is_some_and(|f| f & FORKNOEXEC != 0);
            if (!words.is_empty() && !forked) || std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        let command: String = shell_line(words.strip_suffix(&[0]).unwrap_or(&words))
            .chars()
            .take(200)
            .collect();
        Some(Leftover {
            pid,
            name: name.trim_end().to_owned(),
            command,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn read(pid: Pid, _deadline: std::time::Instant) -> Option<Leftover> {
        Some(Leftover {
            pid,
            name: String::new(),
            command: String::new(),
        })
    }
}

impl MonitorResult {
    /// Exit code for "quietus ended the child" (idle or hard timeout, input wait), as GNU
    /// `timeout` uses.
    pub const EXIT_TIMEOUT: i32 = 124;
    /// Exit code for quietus's own failures (bad options, termination unproven…).
    pub const EXIT_INTERNAL: i32 = 125;
    /// Exit code when the program exists but cannot be executed.
    pub const EXIT_CANNOT_EXECUTE: i32 = 126;
    /// Exit code when the program is not found.
    pub const EXIT_NOT_FOUND: i32 = 127;

    /// The child's exit code, or the signal that ended it, as a shell would show it.
    fn status_code(&self) -> Option<i32> {
        let status = self.status?;
        status
            .code()
            .or_else(|| status.signal().map(|sig| 128 + sig))
    }

    /// The exit code a `timeout`-like tool should return: 124 when quietus ended the child
    /// for a timeout or an input wait; 0 when it ended it after completion ([`Outcome::Completed`]); otherwise the child's own code, or 128+N when it died of signal N
    /// (after [`Outcome::Terminated`] that is usually 128+15); 125 when the status is unknown.
    pub fn exit_code(&self) -> i32 {
        match self.outcome {
            Outcome::IdleTimeout(_) | Outcome::HardTimeout { .. } | Outcome::InputWait(_) => {
                Self::EXIT_TIMEOUT
            }
            Outcome::Completed(_) => 0,
            Outcome::Exited | Outcome::Terminated { .. } => {
                self.status_code().unwrap_or(Self::EXIT_INTERNAL)
            }
        }
    }

    /// The signal that killed the child, if it died of one.
    pub fn signal(&self) -> Option<Signal> {
        self.status.and_then(|s| s.signal()).map(Signal::received)
    }
}

#[cfg(test)]
mod tests;
