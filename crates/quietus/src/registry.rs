//! [`Registry`]: many sessions, each with a small [`u32`], listed, controlled by id,
//! pruned.

use std::collections::BTreeMap;
use std::fmt;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::Mutex;

use crate::clock::Clock;
use crate::contract::SessionState;
use crate::error::Rejection;
use crate::outcome::MonitorResult;
use crate::session::{Session, SessionBuilder};
use crate::stream::Stream;

/// How long a finished session stays listed by default.
const DEFAULT_RETENTION: Duration = Duration::from_secs(10 * 60);
/// How many finished sessions a registry keeps by default.
const DEFAULT_MAX_FINISHED: usize = 100;
/// The longest command preview in a [`SessionSummary`], in characters (`…` included).
const PREVIEW_CHARS: usize = 40;

/// Many supervised sessions, each known by a small [`u32`] (1, 2, 3… per registry).
///
/// The registry spawns sessions from [`SessionBuilder`]s, [`list`](Self::list)s them as one-line
/// [`SessionSummary`]s, steers them by id with [`control`](Self::control), and hands out the
/// [`Session`] itself with [`get`](Self::get) to wait on it or read its output.
///
/// Finished sessions stay listed for a retention time (default 10 minutes, counted from the
/// first registry call that sees the session finished, on the registry's own [`Clock`]), and at
/// most 100 of them are kept (the oldest go first). Pruning happens at the
/// start of every call; live sessions are never pruned.
///
/// A registry is `Send + Sync`: share it between threads behind an `Arc` or a reference. Its
/// lock is never held across a blocking call: waits happen on the [`Session`]s, outside it.
///
/// **Dropping the registry drops its sessions**, which takes down the trees still running (as
/// dropping a [`Session`] does); call [`shutdown_all`](Self::shutdown_all) to end them and wait.
///
/// ```
/// use std::process::Command;
/// use quietus::{ControlAction, ControlAnswer, SessionState, Registry, Session, Signal};
///
/// let registry = Registry::new();
/// let mut command = Command::new("sleep");
/// command.arg("1000");
/// let id = registry.spawn(Session::builder(command))?;
/// assert_eq!(id, 1);
/// let line = registry.list()[0].to_string(); // "#01 running uptime=0.0s idle_left=… cmd=sleep 1000"
/// assert!(line.starts_with("#01 running uptime="), "{line}");
/// assert_eq!(registry.control(id, ControlAction::Terminate), ControlAnswer::Ack);
/// let result = registry.get(id).unwrap().wait();
/// assert_eq!(result.signal(), Some(Signal::TERM));
/// assert_eq!(registry.list()[0].state, SessionState::Ended);
/// assert_eq!(registry.control(id, ControlAction::Kill), ControlAnswer::AlreadyEnded);
/// assert_eq!(registry.control(7, ControlAction::Kill), ControlAnswer::NoSuchSession);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Registry {
    clock: Clock,
    retention: Duration,
    max_finished: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next_id: u32,
    entries: BTreeMap<u32, Entry>,
}

struct Entry {
    session: Arc<Session>,
    command: String,
    /// When the registry first saw the session finished (its clock).
    finished_at: Option<Instant>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("Registry")
            .field("retention", &self.retention)
            .field("max_finished", &self.max_finished)
            .field("ids", &inner.entries.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// What to do to a session, by id: see [`Registry::control`]. Each action is the
/// [`Session`] method of the same name, for a caller that steers sessions by their number (a
/// harness's tool call, a protocol message) instead of holding them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlAction {
    /// [`Session::keepalive`]: counts as activity now.
    Keepalive,
    /// [`Session::interrupt`], Ctrl-C: SIGINT to the child's process group, or through the
    /// terminal of a terminal session (an agent CLI's "stop this turn"); no ladder follows.
    Interrupt,
    /// [`Session::terminate`]: the kill ladder (the configured polite signal, the grace
    /// period, SIGKILL).
    Terminate,
    /// [`Session::kill`]: SIGKILL now (in the middle of a ladder: skip to its SIGKILL).
    Kill,
    /// [`Session::set_idle_timeout`]: replaces the idle timeout for the checks to come (not
    /// counting as activity).
    SetIdleTimeout(Duration),
}

/// The registry's answer to a [`ControlAction`].
#[derive(Debug, Clone, PartialEq)]
pub enum ControlAnswer {
    /// Done (signals and ladders are asynchronous: [`Session::wait`] for the end).
    Ack,
    /// No session has this id (never had, or it was pruned).
    NoSuchSession,
    /// The session has ended, or is being ended by its kill ladder, so the action would change
    /// nothing. (During the ladder, [`ControlAction::Kill`] is still taken: it skips to SIGKILL.)
    AlreadyEnded,
    /// The action is invalid (an idle timeout out of range, say); nothing was changed.
    Rejected(Rejection),
}

impl fmt::Display for ControlAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlAnswer::Ack => f.write_str("ok"),
            ControlAnswer::NoSuchSession => f.write_str("no such session"),
            ControlAnswer::AlreadyEnded => f.write_str("already ended"),
            ControlAnswer::Rejected(reason) => write!(f, "rejected: {reason}"),
        }
    }
}

/// One session of a [`Registry`] at one moment. Displays as one line, the line a harness shows
/// its model (the format lives here only; `quietus mcp`'s `list_exec_sessions` and `serve`'s
/// `process/list` show it too):
///
/// `#03 running uptime=47.2s idle_left=212.8s bytes=8192 log=/path/to.log cmd=npm run build`
///
/// and once the run is over, its outcome, what the stalled tree was doing (its diagnosis), and
/// its exit code after the state:
///
/// `#01 ended idle_timeout waiting on the network — node (pid 812) reads a TCP connection to
/// 10.0.0.5:443 exit_code=124 uptime=600.3s idle_left=- bytes=8192 log=- cmd=codex exec …`
///
/// (`-` for no idle time left to count — the ladder started or the run is over — and for no log;
/// times in seconds, rounded down to the tenth.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionSummary {
    /// The session's number in its registry (1, 2, 3…; shown `#01`).
    pub id: u32,
    /// The program and its arguments, at most 40 characters (cut with `…`), on one line.
    pub command: String,
    /// Running, in its kill ladder, or ended.
    pub state: SessionState,
    /// Time since the spawn (the whole runtime once ended), on the session's clock.
    pub uptime: Duration,
    /// How long the child may stay quiet before the watchdog fires (while running).
    pub idle_left: Option<Duration>,
    /// Bytes of output so far, stdout and stderr together.
    pub bytes: u64,
    /// The first log file of the session, once a stream passed the spill threshold.
    pub log: Option<PathBuf>,
    /// How the run ended, once it has.
    pub outcome: Option<crate::outcome::Outcome>,
    /// The exit code ([`MonitorResult::exit_code`]), once the run has ended.
    pub exit_code: Option<i32>,
}

/// `47.2s`: seconds with one decimal, rounded down.
struct Seconds(Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}s", self.0.as_secs(), self.0.subsec_millis() / 100)
    }
}

impl fmt::Display for SessionSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{:02} {}", self.id, self.state.name())?;
        if let Some(outcome) = &self.outcome {
            write!(f, " {}", outcome.name())?;
            if let Some(diagnosis) = outcome.diagnosis() {
                write!(f, " {}", one_line(&diagnosis.summary))?;
            }
        }
        if let Some(code) = self.exit_code {
            write!(f, " exit_code={code}")?;
        }
        write!(f, " uptime={} idle_left=", Seconds(self.uptime))?;
        match self.idle_left {
            Some(left) => write!(f, "{}", Seconds(left))?,
            None => f.write_str("-")?,
        }
        write!(f, " bytes={} log=", self.bytes)?;
        match &self.log {
            Some(path) => write!(f, "{}", path.display())?,
            None => f.write_str("-")?,
        }
        write!(f, " cmd={}", self.command)
    }
}

/// `text` on one line: control characters (line ends, tabs, escapes) become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `program arg1 arg2…` on one line (control characters become spaces), at most
/// [`PREVIEW_CHARS`] characters.
fn preview(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy()];
    words.extend(command.get_args().map(|a| a.to_string_lossy()));
    let line = one_line(&words.join(" "));
    if line.chars().count() <= PREVIEW_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(PREVIEW_CHARS - 1).collect();
    cut.push('…');
    cut
}

impl Registry {
    /// An empty registry measuring retention on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Clock::system())
    }

    /// An empty registry measuring retention on `clock` (tests pass a
    /// [`MockClock`](crate::MockClock)). The sessions keep their own clocks
    /// ([`SessionBuilder::clock`]).
    pub fn with_clock(clock: impl Into<Clock>) -> Self {
        Self {
            clock: clock.into(),
            retention: DEFAULT_RETENTION,
            max_finished: DEFAULT_MAX_FINISHED,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// How long a finished session stays listed (default 10 minutes).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How many finished sessions stay listed at most (default 100); beyond it the ones that
    /// finished first are pruned.
    pub fn max_finished(mut self, count: usize) -> Self {
        self.max_finished = count;
        self
    }

    /// Spawns a session (see [`SessionBuilder::spawn`]) and returns its id: 1 for the first,
    /// then 2, 3… (an id is never reused, and a failed spawn takes none).
    ///
    /// # Errors
    ///
    /// Those of [`SessionBuilder::spawn`].
    pub fn spawn(&self, builder: SessionBuilder) -> Result<u32, crate::error::SpawnError> {
        let command = preview(builder.command());
        // Spawned outside the lock: a spawn forks and starts threads.
        let session = Arc::new(builder.spawn()?);
        let mut inner = self.inner.lock();
        self.prune(&mut inner);
        inner.next_id += 1;
        let id = inner.next_id;
        inner.entries.insert(
            id,
            Entry {
                session,
                command,
                finished_at: None,
            },
        );
        Ok(id)
    }

    /// Every session still held, by id.
    pub fn list(&self) -> Vec<SessionSummary> {
        // Summaries are made outside the lock: a session's log path waits for its spill thread.
        let sessions: Vec<(u32, String, Arc<Session>)> = {
            let mut inner = self.inner.lock();
            self.prune(&mut inner);
            inner
                .entries
                .iter()
                .map(|(id, e)| (*id, e.command.clone(), e.session.clone()))
                .collect()
        };
        sessions
            .into_iter()
            .map(|(id, command, session)| {
                let result = session.finished();
                SessionSummary {
                    id,
                    command,
                    state: session.state(),
                    uptime: session.uptime(),
                    idle_left: session.idle_left(),
                    bytes: session.output_bytes(Stream::Stdout)
                        + session.output_bytes(Stream::Stderr),
                    log: session.log_paths().into_iter().next(),
                    exit_code: result.map(MonitorResult::exit_code),
                    outcome: result.map(|r| r.outcome.clone()),
                }
            })
            .collect()
    }

    /// The session with this id, to [`wait`](Session::wait) on it, take a
    /// [`output`](Session::output) or follow its [`events`](Session::events). `None` when
    /// no session has the id (any more).
    pub fn get(&self, id: u32) -> Option<Arc<Session>> {
        let mut inner = self.inner.lock();
        self.prune(&mut inner);
        inner.entries.get(&id).map(|e| e.session.clone())
    }

    /// The ids of every session still held (running, or finished and not yet pruned), in
    /// order: one pruning for all of them, where a [`get`](Registry::get) per id prunes each
    /// time (a server holding 1,000 sessions asked 1,000 times per start: issue 50).
    pub fn ids(&self) -> Vec<u32> {
        let mut inner = self.inner.lock();
        self.prune(&mut inner);
        inner.entries.keys().copied().collect()
    }

    /// Applies `action` to the session `id`.
    ///
    /// Answers [`NoSuchSession`](ControlAnswer::NoSuchSession) for an unknown id,
    /// [`AlreadyEnded`](ControlAnswer::AlreadyEnded) when the session has ended or
    /// its kill ladder is under way (except for `Kill`, which then skips to SIGKILL),
    /// [`Rejected`](ControlAnswer::Rejected) for an idle timeout out of range (with the
    /// [`ConfigError`](crate::ConfigError)'s message), and [`Ack`](ControlAnswer::Ack)
    /// otherwise.
    pub fn control(&self, id: u32, action: ControlAction) -> ControlAnswer {
        let Some(session) = self.get(id) else {
            return ControlAnswer::NoSuchSession;
        };
        match (session.state(), action) {
            (SessionState::Ended, _) => return ControlAnswer::AlreadyEnded,
            (SessionState::Grace, ControlAction::Kill) => {}
            (SessionState::Grace, _) => return ControlAnswer::AlreadyEnded,
            (SessionState::Running, _) => {}
        }
        let rejected = |why| ControlAnswer::Rejected(why);
        match action {
            ControlAction::Keepalive => session.keepalive(),
            ControlAction::Interrupt => {
                if let Err(e) = session.interrupt() {
                    return rejected(Rejection::CannotInterrupt(e.into()));
                }
            }
            ControlAction::Terminate => session.terminate(),
            ControlAction::Kill => session.kill(),
            ControlAction::SetIdleTimeout(timeout) => {
                if let Err(e) = session.set_idle_timeout(timeout) {
                    return rejected(Rejection::InvalidSetting(e));
                }
            }
        }
        ControlAnswer::Ack
    }

    /// Ends every live session with its kill ladder and waits until all are over; returns
    /// their results by id. Sessions spawned meanwhile are ended too. The finished sessions
    /// stay listed (until pruned).
    pub fn shutdown_all(&self) -> Vec<(u32, MonitorResult)> {
        let mut ended = Vec::new();
        loop {
            let live: Vec<(u32, Arc<Session>)> = {
                let mut inner = self.inner.lock();
                self.prune(&mut inner);
                inner
                    .entries
                    .iter()
                    .filter(|(_, e)| e.finished_at.is_none())
                    .map(|(id, e)| (*id, e.session.clone()))
                    .collect()
            };
            if live.is_empty() {
                return ended;
            }
            for (_, session) in &live {
                session.terminate();
            }
            for (id, session) in live {
                ended.push((id, session.wait()));
            }
        }
    }

    /// Notes the sessions that finished, then drops those finished longer ago than the
    /// retention and, beyond the count cap, those that finished first.
    fn prune(&self, inner: &mut Inner) {
        let now = self.clock.now();
        for entry in inner.entries.values_mut() {
            if entry.finished_at.is_none() && entry.session.finished().is_some() {
                entry.finished_at = Some(now);
            }
        }
        let retention = self.retention;
        inner.entries.retain(|_, e| {
            e.finished_at
                .is_none_or(|at| now.saturating_duration_since(at) < retention)
        });
        let mut finished: Vec<(Instant, u32)> = inner
            .entries
            .iter()
            .filter_map(|(id, e)| e.finished_at.map(|at| (at, *id)))
            .collect();
        if finished.len() > self.max_finished {
            finished.sort_unstable();
            let excess = finished.len() - self.max_finished;
            for (_, id) in &finished[..excess] {
                inner.entries.remove(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn registry_is_send_and_sync() {
        assert_send_sync::<Registry>();
        assert_send_sync::<SessionSummary>();
    }

    #[test]
    fn previews_are_one_short_line() {
        let mut command = Command::new("npm");
        command.args(["run", "build"]);
        assert_eq!(preview(&command), "npm run build");
        let mut long = Command::new("sh");
        long.args([
            "-c",
            "echo one\necho two; sleep 1000; echo three; echo four",
        ]);
        let p = preview(&long);
        assert_eq!(p.chars().count(), 40);
        assert_eq!(p, "sh -c echo one echo two; sleep 1000; ec…");
    }

    #[test]
    fn summary_line_format() {
        let mut summary = SessionSummary {
            id: 3,
            command: "npm run build".into(),
            state: SessionState::Running,
            uptime: Duration::from_millis(47_250),
            idle_left: Some(Duration::from_millis(212_800)),
            bytes: 8192,
            log: Some(PathBuf::from("/tmp/x.log")),
            outcome: None,
            exit_code: None,
        };
        assert_eq!(
            summary.to_string(),
            "#03 running uptime=47.2s idle_left=212.8s bytes=8192 log=/tmp/x.log cmd=npm run build"
        );
        summary.id = 123;
        summary.state = SessionState::Ended;
        summary.idle_left = None;
        summary.log = None;
        summary.uptime = Duration::from_millis(50);
        summary.outcome = Some(crate::outcome::Outcome::Terminated { forced: false });
        summary.exit_code = Some(143);
        assert_eq!(
            summary.to_string(),
            "#123 ended terminated exit_code=143 uptime=0.0s idle_left=- bytes=8192 log=- cmd=npm run build"
        );
        // A stall: its diagnosis, on the same one line.
        summary.outcome = Some(crate::outcome::Outcome::IdleTimeout(
            crate::outcome::StaleReport {
                idle_timeout: Duration::from_secs(2),
                sources: Vec::new(),
                children: None,
                capped: Vec::new(),
                diagnosis: Some(crate::diagnosis::Diagnosis {
                    kind: crate::diagnosis::StallKind::AwaitingInput,
                    summary: "waiting for input —\nsh (pid 7) reads stdin".into(),
                    processes: Vec::new(),
                }),
            },
        ));
        summary.exit_code = Some(124);
        assert_eq!(
            summary.to_string(),
            "#123 ended idle_timeout waiting for input — sh (pid 7) reads stdin exit_code=124 \
             uptime=0.0s idle_left=- bytes=8192 log=- cmd=npm run build"
        );
    }
}
