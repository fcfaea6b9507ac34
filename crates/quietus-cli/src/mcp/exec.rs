//! The sessions behind the tools, on one [`Registry`]: `exec_command` spawns and waits up to
//! its yield window, `write_stdin` types and collects, `exec_control` steers, and
//! `list_exec_sessions` lists. Built on the library's public API only.

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::sync::{Condvar, Mutex};

use crate::locks::Locked;
use quietus::{
    CaptureConfig, ControlAnswer, KillLadder, OutputSink, Registry, Session, Signal, SpawnError,
    Stdin,
};
use serde_json::{Value, json};

use super::options::McpOptions;
use super::output::{Pending, Taken};
use super::protocol::{LEVELS, ToolOutput};
use super::render;
use super::session::ExecSession;
use super::tools::{ExecArgs, ToolCall};
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::protocol;

/// The terminal of a `tty: true` session: rows, columns.
const TERMINAL: (u16, u16) = (24, 120);

/// The longest a tool call waits before it answers, whatever `yield_time_ms` asks: MCP
/// clients give up on a call after 60 s by default (the TypeScript SDK's request timeout,
/// which Claude Code and most clients use; progress resets it only where the client asks for
/// that), and codex's own unified exec answers within 30 s. 30 s leaves the other half of the
/// clients' minute for the answer's journey on a loaded machine; a longer command goes on in
/// its session, collected with `write_stdin`.
pub(crate) const YIELD_CLAMP: Duration = Duration::from_secs(30);

/// How often a waiting call sends `notifications/progress`, when its caller gave a token.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// How often a waiting call looks whether its client abandoned it.
const CANCEL_CHECK: Duration = Duration::from_millis(100);

/// Answers remembered, so that one its client abandons after it was sent gives its output back.
const ANSWERS_KEPT: usize = 64;

/// One tool call under way: the request it answers, its progress token, whether its client
/// abandoned it (`notifications/cancelled`).
#[derive(Debug)]
pub(crate) struct CallContext {
    /// The request's id, as JSON text (the key of `notifications/cancelled`).
    request: String,
    /// The caller's progress token.
    progress: Option<Value>,
    cancelled: Arc<AtomicBool>,
}

impl CallContext {
    /// Whether the client abandoned the call (`notifications/cancelled`).
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// An answer sent: what it took from which session, in case its client abandoned it.
#[derive(Debug)]
struct Answered {
    request: String,
    exec: Arc<ExecSession>,
    taken: Taken,
    take: u64,
}

/// The tools' state: the registry, the sessions by id.
#[derive(Debug)]
pub(crate) struct Exec {
    options: McpOptions,
    registry: Registry,
    sessions: Mutex<HashMap<u32, Arc<ExecSession>>>,
    /// Held from the room check to the insertion, so the limit holds (and the shutdown sees
    /// every session).
    spawning: Mutex<()>,
    /// The shutdown began: no more spawns.
    closing: AtomicBool,
    outbox: Arc<Outbox>,
    level: Arc<AtomicU8>,
    /// `exec_command`s handed to a worker and not yet past their spawn: the shutdown waits
    /// for them, so a command sent just before the end of input is started, then ended.
    pub(crate) starting: InFlight,
    /// The calls under way, by request id: whether their client abandoned them.
    calls: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// The last answers that took output.
    answered: Mutex<std::collections::VecDeque<Answered>>,
}

impl Exec {
    /// The tools over a new registry; announcements go to `outbox` at `level` and above.
    pub(crate) fn new(options: McpOptions, outbox: Arc<Outbox>, level: Arc<AtomicU8>) -> Self {
        Self {
            options,
            registry: Registry::new(),
            sessions: Mutex::new(HashMap::new()),
            spawning: Mutex::new(()),
            closing: AtomicBool::new(false),
            outbox,
            level,
            starting: InFlight::default(),
            calls: Mutex::new(HashMap::new()),
            answered: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// A call for request `request` begins; `progress` is its caller's progress token.
    pub(crate) fn begin_call(&self, request: &Value, progress: Option<Value>) -> CallContext {
        let context = CallContext {
            request: request.to_string(),
            progress,
            cancelled: Arc::new(AtomicBool::new(false)),
        };
        self.calls
            .locked()
            .insert(context.request.clone(), context.cancelled.clone());
        context
    }

    /// The call is over (answered).
    pub(crate) fn end_call(&self, context: &CallContext) {
        self.end_request(&context.request);
    }

    /// The call for request `request` (as JSON text) is over.
    pub(crate) fn end_request(&self, request: &str) {
        self.calls.locked().remove(request);
    }

    /// The client abandoned request `request`: a call still waiting stops and leaves its
    /// output for the next answer; an answer already sent gives its output back, unless a
    /// later answer took output since.
    pub(crate) fn cancel(&self, request: &Value) {
        let key = request.to_string();
        if let Some(flag) = self.calls.locked().get(&key) {
            flag.store(true, Ordering::SeqCst);
        }
        let mut answered = self.answered.locked();
        if let Some(at) = answered.iter().position(|a| a.request == key)
            && let Some(a) = answered.remove(at)
        {
            let given = a.exec.pending.locked().give_back(a.taken, a.take);
            log::debug!("request {key} abandoned after its answer; output given back: {given}");
        }
    }

    /// Runs one checked call (blocking up to its yield window).
    pub(crate) fn run(self: &Arc<Self>, call: ToolCall, context: &CallContext) -> ToolOutput {
        match call {
            ToolCall::Exec(args) => self.exec(*args, context),
            ToolCall::Write {
                session_id,
                chars,
                yield_time,
            } => self.write(session_id, &chars, yield_time, context),
            ToolCall::Control {
                session_id,
                actions,
            } => {
                let answer = match self.find(session_id) {
                    Some(_) => {
                        crate::settings::controls::apply(&self.registry, session_id, actions)
                    }
                    None => ControlAnswer::NoSuchSession,
                };
                render::control(session_id, &answer)
            }
            ToolCall::List => {
                let summaries = self.registry.list();
                let sessions = self.sessions.locked().clone();
                render::list(&summaries, &sessions)
            }
        }
    }

    /// The session with this id, while the registry keeps it.
    fn find(&self, id: u32) -> Option<Arc<ExecSession>> {
        let mut sessions = self.sessions.locked();
        if self.registry.get(id).is_none() {
            sessions.remove(&id);
            return None;
        }
        sessions.get(&id).cloned()
    }

    fn exec(self: &Arc<Self>, args: ExecArgs, context: &CallContext) -> ToolOutput {
        let start = Instant::now();
        let spawned = self.spawn(&args);
        self.starting.end();
        let exec = match spawned {
            Ok(exec) => exec,
            Err(message) => return ToolOutput::error(message),
        };
        self.answer(&exec, start, args.yield_time, None, context)
    }

    /// Waits on `exec` up to `yield_time` (at most [`YIELD_CLAMP`]; less if it ends, or if
    /// the client abandons the call), sending progress when asked, then answers with its new
    /// output. An abandoned call takes no output: the next answer carries it.
    fn answer(
        &self,
        exec: &Arc<ExecSession>,
        start: Instant,
        yield_time: Duration,
        note: Option<String>,
        context: &CallContext,
    ) -> ToolOutput {
        exec.waiting.fetch_add(1, Ordering::SeqCst);
        let ended = self.wait_window(exec, yield_time.min(YIELD_CLAMP), context);
        let cancelled = context.cancelled();
        let note = if yield_time > YIELD_CLAMP && !ended && !cancelled {
            clamped(note, yield_time)
        } else {
            note
        };
        let (taken, take) = take_output(exec, cancelled);
        if ended && !cancelled {
            exec.end_told.store(true, Ordering::SeqCst);
        }
        exec.waiting.fetch_sub(1, Ordering::SeqCst);
        if !cancelled && taken.bytes > 0 {
            let mut answered = self.answered.locked();
            if answered.len() >= ANSWERS_KEPT {
                answered.pop_front();
            }
            answered.push_back(Answered {
                request: context.request.clone(),
                exec: exec.clone(),
                taken: taken.clone(),
                take,
            });
        }
        render::exec_answer(exec, &taken, start.elapsed(), note)
    }

    /// Waits on `exec` for `window`, checking for the client's cancellation and sending
    /// progress when asked; whether the session ended meanwhile.
    fn wait_window(&self, exec: &ExecSession, window: Duration, context: &CallContext) -> bool {
        let waited = Instant::now();
        let deadline = waited + window;
        let mut next_progress = waited + PROGRESS_EVERY;
        let mut sent = 0u32;
        while !context.cancelled() {
            let now = Instant::now();
            let Some(left) = deadline
                .checked_duration_since(now)
                .filter(|d| !d.is_zero())
            else {
                break;
            };
            let until_progress = next_progress.saturating_duration_since(now);
            let slice = left
                .min(CANCEL_CHECK)
                .min(until_progress.max(Duration::from_millis(1)));
            if exec.session.wait_timeout(slice).is_some() {
                return true;
            }
            if let Some(token) = &context.progress
                && Instant::now() >= next_progress
            {
                sent += 1;
                self.progress(exec, token, waited.elapsed(), window, sent);
                next_progress += PROGRESS_EVERY;
            }
        }
        false
    }

    /// One `notifications/progress` for a call waiting on `exec`: the seconds waited, out of
    /// the window, and what the command did so far.
    fn progress(
        &self,
        exec: &ExecSession,
        token: &Value,
        waited: Duration,
        window: Duration,
        sent: u32,
    ) {
        let bytes = exec.pending.locked().pending_bytes();
        let message = format!(
            "session {} still running after {}; {bytes} bytes of new output",
            exec.id,
            quietus::outcome::HumanDuration(exec.session.uptime())
        );
        log::debug!("progress {sent} for {token}: {message}");
        self.outbox.send(&protocol::notification(
            "notifications/progress",
            json!({
                "progressToken": token,
                "progress": waited.as_secs_f64(),
                "total": window.as_secs_f64(),
                "message": message,
            }),
        ));
    }

    /// Checks the room and the folder, and spawns.
    fn spawn(self: &Arc<Self>, args: &ExecArgs) -> Result<Arc<ExecSession>, String> {
        if let Some(dir) = &args.workdir
            && !dir.is_dir()
        {
            return Err(format!(
                "invalid arguments for exec_command: workdir: {} is not a folder",
                crate::jsonrpc::protocol::quote_str(&dir.to_string_lossy())
            ));
        }
        let pending = Arc::new(Mutex::new(Pending::new(args.max_output_bytes)));
        let builder = self.builder(args, pending.clone());
        let _spawning = self.spawning.locked();
        if self.closing.load(Ordering::SeqCst) {
            return Err(
                "the server is shutting down (its client went away, or it got a signal): \
                        the command was not started"
                    .to_owned(),
            );
        }
        let live = {
            let mut sessions = self.sessions.locked();
            sessions.retain(|id, _| self.registry.get(*id).is_some());
            sessions.values().filter(|s| s.result().is_none()).count()
        };
        if live >= self.options.max_sessions {
            return Err(format!(
                "too many sessions: {live} run, and the server's limit (--max-sessions) is {}. \
                 End one with exec_control (terminate), or wait for one to finish \
                 (list_exec_sessions shows them).",
                self.options.max_sessions
            ));
        }
        let id = self.registry.spawn(builder).map_err(spawn_message)?;
        let session = self
            .registry
            .get(id)
            .ok_or("internal error: the session ended and was forgotten at once")?;
        let exec = Arc::new(ExecSession {
            id,
            session,
            cmd: args.cmd.clone(),
            pending,
            grace: args
                .settings
                .grace
                .unwrap_or_else(crate::settings::default_grace),
            waiting: AtomicUsize::new(0),
            end_told: AtomicBool::new(false),
        });
        self.sessions.locked().insert(id, exec.clone());
        if self.options.announce_ended {
            self.watch_end(exec.clone());
        }
        Ok(exec)
    }

    /// The session's builder: `SHELL -c CMD`, the limits, the output into `pending`.
    fn builder(&self, args: &ExecArgs, pending: Arc<Mutex<Pending>>) -> quietus::SessionBuilder {
        let mut command = Command::new(&self.options.shell);
        command.arg("-c").arg(&args.cmd);
        if let Some(dir) = &args.workdir {
            command.current_dir(dir);
        }
        command.envs(args.env.iter().map(|(k, v)| (k, v)));
        let mut capture = CaptureConfig::builder()
            .combined(true)
            .cap_per_stream(64 * 1024)
            .spill_threshold(args.max_output_bytes as u64);
        if let Some(dir) = &self.options.log_dir {
            capture = capture.log_dir(dir);
        }
        // The settings table's (the server's defaults, the call's arguments); checked at the
        // spawn, which names the setting an argument out of range sets.
        let config = args.settings.clone().with(|c| c.capture(capture)).builder();
        let sink = OutputSink::callback(move |bytes| pending.locked().push(bytes));
        let builder = Session::builder(command).config(config).stdout(sink);
        if args.tty {
            builder.pty(TERMINAL.0, TERMINAL.1)
        } else {
            builder.stdin(Stdin::Piped)
        }
    }

    fn write(
        &self,
        id: u32,
        chars: &str,
        yield_time: Duration,
        context: &CallContext,
    ) -> ToolOutput {
        let start = Instant::now();
        let Some(exec) = self.find(id) else {
            return ToolOutput::error(format!(
                "no session has session_id {id} (it never existed, or ended long ago and was \
                 forgotten); list_exec_sessions shows the sessions"
            ));
        };
        let mut note = None;
        if !chars.is_empty() {
            if exec.result().is_some() {
                note = Some("the session had ended: the characters were not written".to_owned());
            } else if let Err(e) = exec.session.write_stdin(chars.as_bytes()) {
                note = Some(format!("the characters were not written: {e}"));
            }
        }
        self.answer(&exec, start, yield_time, note, context)
    }

    /// Announces the end of `exec` when no call waits on it (a thread per session).
    fn watch_end(self: &Arc<Self>, exec: Arc<ExecSession>) {
        let this = self.clone();
        let id = exec.id;
        let spawned = std::thread::Builder::new()
            .name(format!("quietus-mcp-end-{}", exec.id))
            .spawn(move || {
                let result = exec.session.wait();
                if exec.waiting.load(Ordering::SeqCst) > 0
                    || exec.end_told.swap(true, Ordering::SeqCst)
                {
                    return;
                }
                let (level, text) = render::announcement(&exec, &result);
                let wanted = this.level.load(Ordering::Relaxed) as usize;
                if LEVELS.iter().position(|l| *l == level).unwrap_or(0) >= wanted {
                    this.outbox.send(&protocol::notification(
                        "notifications/message",
                        json!({"level": level, "logger": "quietus", "data": text}),
                    ));
                }
            });
        if let Err(e) = spawned {
            log::warn!("session {id}: no end announcement: {e}");
        }
    }

    /// The client is gone or the server was told to stop: every live session gets its kill
    /// ladder (the grace cut to 5 s); waits until all are over (bounded).
    pub(crate) fn shutdown(&self) {
        self.starting.wait_for_none(Duration::from_secs(5));
        {
            let _spawning = self.spawning.locked();
            self.closing.store(true, Ordering::SeqCst);
        }
        let sessions: Vec<Arc<ExecSession>> = self.sessions.locked().values().cloned().collect();
        let live: Vec<&Arc<ExecSession>> =
            sessions.iter().filter(|s| s.result().is_none()).collect();
        let cap = Duration::from_secs(5);
        for exec in &live {
            let ladder = KillLadder::polite(Signal::TERM, exec.grace.min(cap));
            exec.session.terminate_with(&ladder);
        }
        let bound = cap + Duration::from_secs(10);
        for exec in live {
            if exec.session.wait_timeout(bound).is_none() {
                log::error!(
                    "session {} (pid {}) did not end within {bound:?} of the shutdown",
                    exec.id,
                    exec.session.pid()
                );
            }
        }
    }
}

/// A spawn error in words a model can act on.
fn spawn_message(e: SpawnError) -> String {
    let step = format!("{:?}", e.kind()).to_lowercase();
    format!(
        "the command could not be started ({step}): {}",
        crate::report::error_chain(&e)
    )
}

/// A count of things under way (tool calls; `exec_command`s not yet past their spawn),
/// and a wait for none.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    count: Mutex<usize>,
    changed: Condvar,
}

impl InFlight {
    pub(crate) fn begin(&self) {
        *self.count.locked() += 1;
    }

    pub(crate) fn end(&self) {
        let mut count = self.count.locked();
        *count = count.saturating_sub(1);
        drop(count);
        self.changed.notify_all();
    }

    /// Waits until no call is under way, or `timeout` passed.
    pub(crate) fn wait_for_none(&self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut count = self.count.locked();
        while *count > 0 {
            let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
                return;
            };
            count = match self.changed.wait_timeout(count, left) {
                Ok((count, _)) => count,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// `note`, with what a call that asked to wait `yield_time` (more than [`YIELD_CLAMP`]) is to
/// know: it waited less, and the command goes on.
fn clamped(note: Option<String>, yield_time: Duration) -> Option<String> {
    let clamped = format!(
        "yield_time_ms {} is more than MCP clients wait for a tool call: this call waited {} \
         ms at most; the command goes on, collect its output with write_stdin",
        yield_time.as_millis(),
        YIELD_CLAMP.as_millis()
    );
    Some(match note {
        Some(earlier) => format!("{earlier}; {clamped}"),
        None => clamped,
    })
}

/// The output `exec` has for this answer, and which take it is; none for a cancelled call
/// (nobody reads its answer: the output stays for the next one).
fn take_output(exec: &ExecSession, cancelled: bool) -> (Taken, u64) {
    let mut pending = exec.pending.locked();
    if cancelled {
        let nothing = Taken {
            text: String::new(),
            bytes: 0,
            omitted: 0,
            total: 0,
        };
        (nothing, pending.takes())
    } else {
        (pending.take(), pending.takes())
    }
}
