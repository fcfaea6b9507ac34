//! The method table, on top of a [`Registry`]: each request is read, checked and answered
//! here; `process/start`'s spawn (which arms the process's file watches, the longer the larger
//! the tree) and `process/wait` on a thread of their own, writes by the process's stdin writer
//! (in order), everything else at once. A request naming a process still being started waits
//! for that start (so requests for one process keep their order); no other request does.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::locks::Locked;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use crossbeam_channel::{Sender, TrySendError};
use quietus::{
    CapturedStream, ControlAnswer, KillLadder, MonitorConfig, MonitorResult, Pid, Registry,
    Session, SessionState, Signal, SpawnError, Stream, error::SpawnErrorKind,
};
use serde_json::{Map, Value, json};

use super::options::ServeOptions;
use super::process::{self, Forward, StdinJob, StdinMode};
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::protocol::{self, Params, RpcError};
use crate::report::{Context, Relay, Report};
use crate::settings::{Surface, controls};

/// What the server keeps about one process.
#[derive(Debug)]
struct Proc {
    id: u32,
    session: Arc<Session>,
    argv: Vec<String>,
    config: MonitorConfig,
    /// The stdin writer's queue (`None`: stdin closed from the start).
    stdin: Option<Sender<StdinJob>>,
}

impl Proc {
    /// The polite step's grace of the process's own ladder.
    fn grace(&self) -> Duration {
        self.config
            .kill_ladder()
            .steps()
            .next()
            .map_or(Duration::ZERO, |(_, grace)| grace)
    }

    /// Whether it ended or its kill ladder is under way.
    fn ended(&self) -> bool {
        self.session.state() != SessionState::Running
    }
}

/// The service: the registry, the processes by their client-chosen ids, the outbox.
#[derive(Debug)]
pub(crate) struct Server {
    options: ServeOptions,
    registry: Registry,
    outbox: Arc<Outbox>,
    procs: Mutex<HashMap<String, Arc<Proc>>>,
    /// The ids of the processes being started, each on a thread of its own.
    starting: Starting,
}

/// The ids of the processes whose `process/start` is under way (taken: a second start with
/// the same id is a duplicate, and each counts against `--max-processes`), and a signal when
/// one is done.
#[derive(Debug, Default)]
struct Starting {
    ids: Mutex<HashSet<String>>,
    done: Condvar,
}

impl Starting {
    fn ids(&self) -> MutexGuard<'_, HashSet<String>> {
        self.ids.locked()
    }

    /// The start of `process_id` is over (started, or failed).
    fn finish(&self, process_id: &str) {
        self.ids().remove(process_id);
        self.done.notify_all();
    }

    /// Waits while `process_id` is being started (at once when it is not).
    fn wait_for(&self, process_id: &str) {
        let mut ids = self.ids();
        while ids.contains(process_id) {
            ids = self
                .done
                .wait(ids)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Waits until no start is under way (each start releases its id, even by a panic).
    fn wait_all(&self) {
        let mut ids = self.ids();
        while !ids.is_empty() {
            ids = self
                .done
                .wait(ids)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// Releases a start's id when dropped.
struct Release<'a>(&'a Starting, &'a str);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.finish(self.1);
    }
}

/// What a method gives back: an answer now, or one sent later by another thread.
type Answer = Option<Result<Value, RpcError>>;

impl Server {
    /// A server answering into `outbox`.
    pub(crate) fn new(options: ServeOptions, outbox: Arc<Outbox>) -> Self {
        Self {
            options,
            registry: Registry::new(),
            outbox,
            procs: Mutex::new(HashMap::new()),
            starting: Starting::default(),
        }
    }

    /// The processes by id. A panic elsewhere while the lock was held (none is expected) does
    /// not take the server down: the map is used as it was left.
    fn procs(&self) -> MutexGuard<'_, HashMap<String, Arc<Proc>>> {
        self.procs.locked()
    }

    /// Reads one line from the client and answers it (requests only; errors in notifications
    /// are logged).
    pub(crate) fn handle_line(self: &Arc<Self>, line: &[u8]) {
        let incoming = match protocol::parse_line(line) {
            Ok(incoming) => incoming,
            Err((id, error)) => {
                log::debug!("bad line: {}", error.message);
                self.outbox.send(&protocol::error_response(id, error));
                return;
            }
        };
        let id = incoming.id.clone();
        let answer = self.call(id.clone(), &incoming.method, &incoming.params);
        match (id, answer) {
            (Some(id), Some(Ok(result))) => self.outbox.send(&protocol::response(id, result)),
            (Some(id), Some(Err(error))) => {
                self.outbox.send(&protocol::error_response(id, error));
            }
            (None, Some(Err(error))) => {
                log::warn!("notification {}: {}", incoming.method, error.message)
            }
            _ => {}
        }
    }

    fn call(
        self: &Arc<Self>,
        id: Option<Value>,
        method: &str,
        params: &Map<String, Value>,
    ) -> Answer {
        let now = |r: Result<Value, RpcError>| Some(r);
        match method {
            "initialize" => now(Params::new(
                params,
                &["clientInfo", "protocolVersion", "capabilities"],
            )
            .map(|_| self.initialize())),
            "process/start" => self.start(id, params),
            "process/write" => self.write(id, params),
            "process/closeStdin" => self.close_stdin(id, params),
            "process/resize" => now(self.resize(params)),
            "process/terminate" => now(self.terminate(params)),
            "process/wait" => self.wait(id, params),
            "process/snapshot" => now(self.snapshot(params)),
            "process/control" => now(self.control(params)),
            "process/list" => now(Params::new(params, &[]).map(|_| self.list())),
            _ => now(Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!(
                    "method not found: {}; the methods are {}",
                    protocol::quote_str(method),
                    super::schema::METHODS
                        .iter()
                        .map(|(name, ..)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))),
        }
    }

    fn initialize(&self) -> Value {
        let o = &self.options;
        json!({
            "serverInfo": {"name": "quietus", "version": env!("CARGO_PKG_VERSION")},
            "capabilities": {
                "pty": cfg!(unix),
                "maxProcesses": o.max_processes,
                "retainedBytesPerStream": o.retain_bytes,
                "shutdownGraceMs": ms(o.shutdown_grace),
                "outputNotifications": o.output_description(),
                "outputThrottleMs": ms(o.output_throttle),
                "outputChunkBytes": quietus::EventConfig::default().chunk_cap(),
                "stdinQueue": process::STDIN_JOBS,
                "encoding": "base64",
            }
        })
    }

    /// The process with this client-chosen id, while the registry keeps it (once its start,
    /// if under way, is over).
    fn find(&self, process_id: &str) -> Option<Arc<Proc>> {
        self.starting.wait_for(process_id);
        self.procs().get(process_id).cloned()
    }

    /// `process/start`: the request is checked and its id taken here, then the spawn runs on
    /// a thread of its own, which answers (before the forwarder starts): the dispatcher goes
    /// on with other requests meanwhile.
    fn start(self: &Arc<Self>, id: Option<Value>, params: &Map<String, Value>) -> Answer {
        let start = match process::parse_start(params, &self.options) {
            Ok(start) => start,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = self.check_room(&start.process_id) {
            return Some(Err(e));
        }
        let process_id = start.process_id.clone();
        let taken = process_id.clone();
        let server = self.clone();
        let answer_to = id.clone();
        let started = std::thread::Builder::new()
            .name("quietus-serve-start".into())
            .spawn(move || {
                // Even if the spawn panicked, the id is released: a shutdown waits for it.
                let _release = Release(&server.starting, &process_id);
                let failed = match server.spawn(start) {
                    Ok((process_id, proc, forward)) => {
                        server.started(answer_to, process_id, proc, forward);
                        return;
                    }
                    Err(e) => e,
                };
                server.starting.finish(&process_id);
                if let Some(id) = answer_to {
                    server.outbox.send(&protocol::error_response(id, failed));
                }
            });
        match started {
            Ok(_) => None,
            Err(e) => {
                self.starting.finish(&taken);
                Some(Err(spawn_failed(
                    format!("cannot start a thread: {e}"),
                    "thread",
                )))
            }
        }
    }

    /// Spawns a checked start (its id taken by [`Server::check_room`]).
    fn spawn(&self, mut start: process::Start) -> Result<(String, Arc<Proc>, Forward), RpcError> {
        let cwd = start.cwd.take();
        let id = self
            .registry
            .spawn(start.builder)
            .map_err(|e| spawn_error(e, cwd.as_deref()))?;
        // The newest session is the last the registry prunes (it keeps 100 finished ones).
        let session = self.registry.get(id).ok_or_else(|| {
            RpcError::new(
                protocol::INTERNAL_ERROR,
                "internal error: the process ended and was forgotten at once",
            )
        })?;
        let stdin = match start.input {
            StdinMode::Closed => None,
            StdinMode::Open | StdinMode::Terminal(..) => Some(
                process::start_stdin_writer(session.clone(), self.outbox.clone()).map_err(|e| {
                    session.kill();
                    spawn_failed(format!("cannot start a thread: {e}"), "thread")
                })?,
            ),
        };
        let forward = Forward {
            process_id: start.process_id.clone(),
            context: start.context,
            output: self.options.output_filter.matches(&start.argv),
        };
        let proc = Arc::new(Proc {
            id,
            session,
            argv: start.argv,
            config: start.config,
            stdin,
        });
        Ok((start.process_id, proc, forward))
    }

    /// The id is free and the limit of live processes not reached: then the id is taken, as
    /// being started, until [`Starting::finish`].
    fn check_room(&self, process_id: &str) -> Result<(), RpcError> {
        let mut procs = self.procs();
        let mut starting = self.starting.ids();
        // Forget the processes the registry pruned (finished long ago): one look at the
        // registry for all of them (a look per process made each start O(n²): issue 50).
        let held = self.registry.ids();
        procs.retain(|_, p| held.binary_search(&p.id).is_ok());
        if procs.contains_key(process_id) || starting.contains(process_id) {
            return Err(RpcError::new(
                protocol::DUPLICATE_PROCESS,
                format!(
                    "duplicate processId: {process_id:?} is taken (by a live or recently \
                     finished process)"
                ),
            ));
        }
        let live = procs
            .values()
            .filter(|p| p.session.try_wait().is_none())
            .count()
            + starting.len();
        if live >= self.options.max_processes {
            return Err(RpcError::new(
                protocol::TOO_MANY_PROCESSES,
                format!(
                    "too many processes: {live} run, the server's limit (--max-processes) is {}",
                    self.options.max_processes
                ),
            ));
        }
        starting.insert(process_id.to_owned());
        Ok(())
    }

    /// Records the process (its start is over), answers, then starts the forwarder
    /// (`process/started` follows the answer).
    fn started(&self, id: Option<Value>, process_id: String, proc: Arc<Proc>, forward: Forward) {
        let session = proc.session.clone();
        self.procs().insert(process_id.clone(), proc);
        self.starting.finish(&process_id);
        if let Some(id) = id {
            let answer = json!({"processId": process_id, "pid": session.pid().get()});
            self.outbox.send(&protocol::response(id, answer));
        }
        if let Err(e) = process::start_forwarder(&session, forward, self.outbox.clone()) {
            log::error!("cannot start the event forwarder of {process_id:?}: {e}");
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// -32000 with the failed step's name.
fn spawn_failed(message: String, kind: &str) -> RpcError {
    RpcError {
        code: protocol::SPAWN_FAILED,
        message: format!("spawn failed: {message}"),
        data: Some(json!({"kind": kind})),
    }
}

/// A spawn error as the protocol says it: -32602 for settings that do not go together,
/// -32000 with the step's kind otherwise. The system's "not found" is the working directory's
/// (`working_dir`) when the `cwd` asked for is no folder (the system does not say which of
/// the two it missed), else the program's (`not_found`).
fn spawn_error(e: SpawnError, cwd: Option<&std::path::Path>) -> RpcError {
    let kind = e.kind();
    let message = crate::report::error_chain(&e);
    if kind == SpawnErrorKind::Config {
        return RpcError::new(
            protocol::INVALID_PARAMS,
            format!("invalid params: {message}"),
        );
    }
    let not_found = e.io_error_kind() == std::io::ErrorKind::NotFound;
    let name = match kind {
        SpawnErrorKind::Home => "home",
        SpawnErrorKind::LogDir => "log_dir",
        SpawnErrorKind::Terminal => "terminal",
        SpawnErrorKind::Pipe => "pipe",
        SpawnErrorKind::WorkingDir => "working_dir",
        SpawnErrorKind::Program if not_found && cwd.is_some_and(|d| !d.is_dir()) => {
            let dir = cwd.unwrap_or(std::path::Path::new("")).display();
            return spawn_failed(
                format!("the working directory {dir} is missing: {message}"),
                "working_dir",
            );
        }
        SpawnErrorKind::Program if not_found => "not_found",
        SpawnErrorKind::Program => "program",
        SpawnErrorKind::Thread => "thread",
        _ => "other",
    };
    spawn_failed(message, name)
}

/// `{"status": …}`.
fn status(word: &str) -> Value {
    json!({"status": word})
}

impl Server {
    /// `process/write {processId, data (base64) | text}`: queued for the stdin writer, which
    /// answers once the library took the bytes.
    fn write(&self, id: Option<Value>, params: &Map<String, Value>) -> Answer {
        let result = (|| {
            let params = Params::new(params, &["processId", "data", "text"])?;
            let process_id = params.process_id()?;
            let data = match (params.string("data")?, params.string("text")?) {
                (Some(data), None) => BASE64.decode(data).map_err(|e| {
                    RpcError::param(
                        "data",
                        format!("is not base64 ({e}); it accepts standard base64 with padding"),
                    )
                })?,
                (None, Some(text)) => text.as_bytes().to_vec(),
                _ => {
                    return Err(RpcError::param(
                        "data",
                        "give exactly one of data (base64 bytes) and text (UTF-8 text)",
                    ));
                }
            };
            Ok((process_id.to_owned(), data))
        })();
        let (process_id, data) = match result {
            Ok(ok) => ok,
            Err(e) => return Some(Err(e)),
        };
        self.to_stdin(&process_id, |id| StdinJob::Write(data, id), id)
    }

    /// `process/closeStdin {processId}`: after the writes queued before it.
    fn close_stdin(&self, id: Option<Value>, params: &Map<String, Value>) -> Answer {
        let process_id = match Params::new(params, &["processId"]).and_then(|p| p.process_id()) {
            Ok(process_id) => process_id.to_owned(),
            Err(e) => return Some(Err(e)),
        };
        self.to_stdin(&process_id, StdinJob::Close, id)
    }

    /// Hands a job to the process's stdin writer, or answers at once when it cannot.
    fn to_stdin(
        &self,
        process_id: &str,
        job: impl FnOnce(Option<Value>) -> StdinJob,
        id: Option<Value>,
    ) -> Answer {
        let Some(proc) = self.find(process_id) else {
            return Some(Ok(status("unknown_process")));
        };
        let Some(stdin) = &proc.stdin else {
            return Some(Ok(status("stdin_closed")));
        };
        match stdin.try_send(job(id)) {
            Ok(()) => None,
            Err(TrySendError::Full(_)) => Some(Err(RpcError::new(
                protocol::STDIN_BACKLOG,
                format!(
                    "stdin_backlog: {} writes already wait for {process_id:?} to read its stdin",
                    process::STDIN_JOBS
                ),
            ))),
            Err(TrySendError::Disconnected(_)) => Some(Ok(status("stdin_closed"))),
        }
    }

    /// `process/resize {processId, rows, cols}`.
    fn resize(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let params = Params::new(params, &["processId", "rows", "cols"])?;
        let process_id = params.process_id()?;
        let size = |field: &str| -> Result<u16, RpcError> {
            let n = protocol::whole_number(field, params.required(field)?, 1, u64::from(u16::MAX))?;
            Ok(u16::try_from(n).expect("checked to fit in u16"))
        };
        let (rows, cols) = (size("rows")?, size("cols")?);
        let Some(proc) = self.find(process_id) else {
            return Ok(status("unknown_process"));
        };
        if proc.session.try_wait().is_some() {
            return Ok(status("already_terminated"));
        }
        Ok(match proc.session.resize(rows, cols) {
            Ok(()) => status("accepted"),
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                json!({"status": "unsupported", "note": "only a process started with io {\"pty\": …} has a terminal to resize"})
            }
            Err(e) => json!({"status": "reject", "note": e.to_string()}),
        })
    }

    /// `process/terminate {processId, mode?}`: the process's ladder, a graceful one with its
    /// own timeout, or `"force"` (SIGKILL now).
    fn terminate(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        const ACCEPTS: &str = "it accepts \"force\" or {\"graceful\": {\"timeoutMs\": 0..3600000}}";
        let params = Params::new(params, &["processId", "mode"])?;
        let process_id = params.process_id()?;
        let grace = match params.get("mode") {
            None => None,
            Some(Value::String(s)) if s == "force" => Some(None),
            Some(mode) => {
                let timeout = mode
                    .get("graceful")
                    .filter(|g| g.is_object())
                    .ok_or_else(|| {
                        RpcError::param(
                            "mode",
                            format!("{} is not a mode; {ACCEPTS}", protocol::quote(mode)),
                        )
                    })?
                    .get("timeoutMs")
                    .unwrap_or(&Value::Null);
                let n = protocol::whole_number("mode.graceful.timeoutMs", timeout, 0, 3_600_000)?;
                Some(Some(Duration::from_millis(n)))
            }
        };
        let Some(proc) = self.find(process_id) else {
            return Ok(status("unknown_process"));
        };
        let forced = grace == Some(None);
        if proc.session.try_wait().is_some() || (!forced && proc.ended()) {
            return Ok(status("already_terminated"));
        }
        match grace {
            None => proc.session.terminate(),
            Some(None) => proc.session.kill(),
            Some(Some(grace)) => proc
                .session
                .terminate_with(&KillLadder::polite(Signal::TERM, grace)),
        }
        Ok(status("accepted"))
    }

    /// `process/wait {processId, timeoutMs?}`: on a thread of its own, answered there.
    fn wait(self: &Arc<Self>, id: Option<Value>, params: &Map<String, Value>) -> Answer {
        let checked = (|| {
            let params = Params::new(params, &["processId", "timeoutMs"])?;
            let process_id = params.process_id()?;
            let timeout = params.millis("timeoutMs")?;
            let proc = self
                .find(process_id)
                .ok_or_else(|| RpcError::unknown_process(process_id))?;
            Ok((process_id.to_owned(), timeout, proc))
        })();
        let (process_id, timeout, proc) = match checked {
            Ok(ok) => ok,
            Err(e) => return Some(Err(e)),
        };
        let id = id?; // a notification waits for nothing
        let outbox = self.outbox.clone();
        let waiter = std::thread::Builder::new()
            .name("quietus-serve-wait".into())
            .spawn(move || {
                let result = match timeout.filter(|t| *t < process::MAX_WAIT) {
                    Some(timeout) => proc.session.wait_timeout(timeout),
                    None => Some(proc.session.wait()),
                };
                let answer = match result {
                    Some(result) => finished(&process_id, &proc, &result),
                    None => json!({"processId": process_id, "running": true}),
                };
                outbox.send(&protocol::response(id, answer));
            });
        match waiter {
            Ok(_) => None,
            Err(e) => Some(Err(RpcError::new(
                protocol::INTERNAL_ERROR,
                format!("internal error: cannot start a thread: {e}"),
            ))),
        }
    }

    /// `process/snapshot {processId}`.
    fn snapshot(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let params = Params::new(params, &["processId"])?;
        let process_id = params.process_id()?;
        let proc = self
            .find(process_id)
            .ok_or_else(|| RpcError::unknown_process(process_id))?;
        let snapshot = proc.session.output();
        let encode = |s: &Option<CapturedStream>| s.as_ref().map(|s| BASE64.encode(s.render()));
        let count = |s: &Option<CapturedStream>, f: fn(&CapturedStream) -> u64| s.as_ref().map(f);
        Ok(json!({
            "processId": process_id,
            "running": snapshot.running(),
            "exitCode": snapshot.result.as_ref().map(MonitorResult::exit_code),
            "stdout": encode(&snapshot.stdout),
            "stderr": encode(&snapshot.stderr),
            "terminal": encode(&snapshot.terminal),
            "truncated": snapshot.truncated(),
            "omitted": {
                "stdout": count(&snapshot.stdout, |s| s.omitted),
                "stderr": count(&snapshot.stderr, |s| s.omitted),
                "terminal": count(&snapshot.terminal, |s| s.omitted),
            },
            "totalBytes": {
                "stdout": count(&snapshot.stdout, |s| s.total),
                "stderr": count(&snapshot.stderr, |s| s.total),
                "terminal": count(&snapshot.terminal, |s| s.total),
            },
        }))
    }

    /// `process/control {processId, action: {type, …}}` → ack, no_such_session,
    /// already_terminated or reject (with a note).
    fn control(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let params = Params::new(params, &["processId", "action"])?;
        let process_id = params.process_id()?;
        let actions = controls::parse_action(params.required("action")?, Surface::Serve)?;
        let Some(proc) = self.find(process_id) else {
            return Ok(status("no_such_session"));
        };
        Ok(match controls::apply(&self.registry, proc.id, actions) {
            ControlAnswer::Ack => status("ack"),
            ControlAnswer::NoSuchSession => status("no_such_session"),
            ControlAnswer::AlreadyEnded => status("already_terminated"),
            ControlAnswer::Rejected(note) => {
                json!({"status": "reject", "note": note.to_string()})
            }
        })
    }

    /// `process/list` → every process still held, as objects and as the registry's lines.
    fn list(&self) -> Value {
        let by_id: HashMap<u32, (String, Pid, Arc<Proc>)> = self
            .procs()
            .iter()
            .map(|(name, p)| (p.id, (name.clone(), p.session.pid(), p.clone())))
            .collect();
        let mut sessions = Vec::new();
        let mut lines = Vec::new();
        for summary in self.registry.list() {
            let Some((process_id, pid, proc)) = by_id.get(&summary.id) else {
                continue;
            };
            let bytes = summary
                .bytes
                .max(proc.session.output_bytes(Stream::Terminal));
            sessions.push(json!({
                "processId": process_id,
                "pid": pid.get(),
                "state": summary.state.name(),
                "uptimeMs": ms(summary.uptime),
                "idleLeftMs": summary.idle_left.map(ms),
                "bytes": bytes,
                "log": summary.log.as_ref().map(|p| p.display().to_string()),
                "cmd": summary.command,
            }));
            lines.push(summary.to_string());
        }
        json!({"sessions": sessions, "lines": lines})
    }

    /// The client is gone or the server was told to stop: every live process gets its kill
    /// ladder with the grace cut to the shutdown grace; waits until all are over (bounded).
    pub(crate) fn shutdown(&self) {
        // A start under way ends with its process recorded (or failed): it is ended too.
        self.starting.wait_all();
        let procs: Vec<Arc<Proc>> = self.procs().values().cloned().collect();
        let grace = self.options.shutdown_grace;
        let live: Vec<&Arc<Proc>> = procs
            .iter()
            .filter(|p| p.session.try_wait().is_none())
            .collect();
        for proc in &live {
            let ladder = KillLadder::polite(Signal::TERM, proc.grace().min(grace));
            proc.session.terminate_with(&ladder);
        }
        // The ladder, then the kill confirmation and the drain: bounded by the library.
        let bound = grace + Duration::from_secs(10);
        for proc in live {
            if proc.session.wait_timeout(bound).is_none() {
                log::error!(
                    "pid {} did not end within {bound:?} of the shutdown",
                    proc.session.pid()
                );
            }
        }
    }
}

/// `process/wait`'s answer for a finished run: the command's `--report`, in camelCase.
fn finished(process_id: &str, proc: &Proc, result: &MonitorResult) -> Value {
    let received = crate::report::Received::default();
    let session = &proc.session;
    let relay = Relay::of(session);
    let command = process::os_words(&proc.argv);
    // The idle timeout in force at the end (a control may have replaced the start's, and
    // checked it as the builder does).
    let config = quietus::config::MonitorConfigBuilder::from(proc.config.clone())
        .idle_timeout(session.idle_timeout())
        .build()
        .unwrap_or_else(|_| proc.config.clone());
    let context = Context {
        config: &config,
        command: &command,
    };
    let exit = crate::report::exit_for(result, &received, crate::report::ExitCodes::default());
    let report = Report::finished(context, result, &received, exit, &relay);
    let mut answer = protocol::camel_case_keys(serde_json::to_value(&report).unwrap_or_default());
    answer["processId"] = json!(process_id);
    answer["running"] = json!(false);
    answer
}
