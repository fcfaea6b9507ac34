//! One process of the service: `process/start`'s parameters made into a
//! [`SessionBuilder`], and, once it runs, the threads that serve it — the event forwarder
//! (library events → notifications) and the stdin writer (ordered writes and close).

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use crossbeam_channel::{Receiver, Sender};
use quietus::{
    CaptureConfig, ConfigError, Environment, Event, EventConfig, MonitorConfig, Session,
    SessionBuilder, Stdin, Stream, error::Setting,
};
use serde_json::{Map, Value, json};

use super::options::ServeOptions;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::protocol::{self, Params, RpcError, STDIN_BACKLOG, notification, whole_number};
use crate::settings::{self, Draft, Surface};

/// The fields `process/start` accepts besides the settings table's
/// ([`crate::settings::SETTINGS`], each under its `serve` key).
pub(crate) const START_FIELDS: &[&str] = &[
    "processId",
    "argv",
    "cwd",
    "env",
    "envMode",
    "inheritEnv",
    "home",
    "seed",
    "io",
    "logThresholdBytes",
    "context",
];

/// Every field `process/start` accepts.
fn start_fields() -> Vec<String> {
    START_FIELDS
        .iter()
        .map(|f| (*f).to_owned())
        .chain(settings::keys(Surface::Serve))
        .collect()
}

/// How the child's input is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdinMode {
    /// No stdin (`/dev/null`), the library's default.
    Closed,
    /// A pipe fed by `process/write`.
    Open,
    /// A pseudo-terminal of this size.
    Terminal(u16, u16),
}

/// A checked `process/start`.
#[derive(Debug)]
pub(crate) struct Start {
    pub(crate) process_id: String,
    pub(crate) argv: Vec<String>,
    pub(crate) config: MonitorConfig,
    pub(crate) input: StdinMode,
    pub(crate) context: Option<Value>,
    /// The `cwd` asked for, if any: a spawn that fails for want of it answers `working_dir`.
    pub(crate) cwd: Option<std::path::PathBuf>,
    pub(crate) builder: SessionBuilder,
}

/// Reads and checks `process/start`'s parameters (defaults: the library's, with the server's
/// retention, log folder and throttle).
pub(crate) fn parse_start(
    map: &Map<String, Value>,
    options: &ServeOptions,
) -> Result<Start, RpcError> {
    let fields = start_fields();
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let params = Params::new(map, &fields)?;
    let process_id = params.process_id()?.to_owned();
    let argv: Vec<String> = match params.strings("argv")? {
        Some(argv) if argv.iter().any(|word| word.contains('\0')) => {
            // As `env`'s: a word with a NUL cannot be passed to a program (it was -32000, a
            // failed spawn, here and -32602 there).
            return Err(RpcError::param(
                "argv",
                "has a word with a NUL byte; it accepts strings without NUL",
            ));
        }
        Some(argv) if !argv.is_empty() && !argv[0].is_empty() => {
            argv.into_iter().map(str::to_owned).collect()
        }
        _ => {
            return Err(RpcError::param(
                "argv",
                "missing or empty; it accepts the program and its arguments, [\"npm\", \"test\"]",
            ));
        }
    };
    let input = parse_io(params.get("io"))?;
    let config = parse_config(&params, options)?;
    let context = match params.get("context") {
        None => None,
        Some(Value::Object(o)) => Some(Value::Object(o.clone())),
        Some(other) => {
            return Err(RpcError::param(
                "context",
                format!(
                    "{} is not an object; it accepts any JSON object",
                    protocol::quote(other)
                ),
            ));
        }
    };
    let mut command = quietus::Program::new(&argv[0]).args(&argv[1..]);
    let cwd = params.string("cwd")?.map(std::path::PathBuf::from);
    if let Some(cwd) = &cwd {
        command = command.current_dir(cwd);
    }
    let builder = Session::builder(command)
        .config(config.clone())
        .environment(parse_environment(&params)?);
    let builder = match input {
        StdinMode::Closed => builder,
        StdinMode::Open => builder.stdin(Stdin::Piped),
        StdinMode::Terminal(rows, cols) => builder.pty(rows, cols),
    };
    Ok(Start {
        process_id,
        argv,
        config,
        input,
        context,
        cwd,
        builder,
    })
}

/// `io`: `{"pipe": {"stdin": "open"|"closed"}}` or `{"pty": {"rows": R, "cols": C}}`.
fn parse_io(io: Option<&Value>) -> Result<StdinMode, RpcError> {
    const ACCEPTS: &str = "it accepts {\"pipe\": {\"stdin\": \"open\" | \"closed\"}} or \
                           {\"pty\": {\"rows\": 1..65535, \"cols\": 1..65535}}";
    let Some(io) = io else {
        return Ok(StdinMode::Closed);
    };
    let bad = || {
        RpcError::param(
            "io",
            format!("{} is not an io mode; {ACCEPTS}", protocol::quote(io)),
        )
    };
    let Some(object) = io.as_object().filter(|o| o.len() == 1) else {
        return Err(bad());
    };
    if let Some(pipe) = object.get("pipe") {
        return match pipe.get("stdin").and_then(Value::as_str) {
            Some("open") => Ok(StdinMode::Open),
            Some("closed") | None if pipe.is_object() => Ok(StdinMode::Closed),
            _ => Err(bad()),
        };
    }
    let pty = object.get("pty").ok_or_else(bad)?;
    let size = |field: &str| -> Result<u16, RpcError> {
        let value = pty.get(field).unwrap_or(&Value::Null);
        let n = whole_number(&format!("io.pty.{field}"), value, 1, u64::from(u16::MAX))?;
        Ok(u16::try_from(n).expect("checked to fit in u16"))
    };
    Ok(StdinMode::Terminal(size("rows")?, size("cols")?))
}

/// `env`, `envMode`, `inheritEnv`, `home`.
fn parse_environment(params: &Params<'_>) -> Result<Environment, RpcError> {
    let mut environment = match params.string("envMode")? {
        None | Some("inherit") => Environment::inherit_all(),
        Some("isolated") => {
            let names = params
                .strings("inheritEnv")?
                .unwrap_or_else(|| vec!["PATH"]);
            names
                .into_iter()
                .fold(Environment::empty(), |env, name| env.inherit(name))
        }
        Some(other) => {
            return Err(RpcError::param(
                "envMode",
                format!(
                    "{} is not an environment mode; it accepts \"inherit\" or \"isolated\"",
                    protocol::quote_str(other)
                ),
            ));
        }
    };
    if params.get("inheritEnv").is_some() && params.string("envMode")? != Some("isolated") {
        return Err(RpcError::param(
            "inheritEnv",
            "applies only with envMode \"isolated\" (inherit mode passes every variable)",
        ));
    }
    if let Some(home) = params.string("home")? {
        environment = environment.home(home);
    }
    for (from, to) in parse_seed(params.get("seed"))? {
        environment = environment.seed(from, to);
    }
    match params.get("env") {
        None => {}
        Some(Value::Object(vars)) => {
            for (name, value) in vars {
                let Some(value) = value.as_str() else {
                    return Err(RpcError::param(
                        &format!("env.{name}"),
                        format!(
                            "{} is not a string; it accepts string values",
                            protocol::quote(value)
                        ),
                    ));
                };
                if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
                    return Err(RpcError::param(
                        &format!("env.{name}"),
                        "names must be non-empty without '=' or NUL, values without NUL",
                    ));
                }
                environment = environment.set(name, value);
            }
        }
        Some(other) => {
            return Err(RpcError::param(
                "env",
                format!(
                    "{} is not an object; it accepts {{\"NAME\": \"value\", …}}",
                    protocol::quote(other)
                ),
            ));
        }
    }
    Ok(environment)
}

/// `seed`: `[{"from": "/path/file", "to": "relative/in/home"}, …]` (files copied into `home`).
fn parse_seed(seed: Option<&Value>) -> Result<Vec<(&str, &str)>, RpcError> {
    let Some(seed) = seed else {
        return Ok(Vec::new());
    };
    let bad = || {
        RpcError::param(
            "seed",
            format!(
                "{} is not a seed list; it accepts [{{\"from\": PATH, \"to\": PATH IN HOME}}, …]",
                protocol::quote(seed)
            ),
        )
    };
    let items = seed.as_array().ok_or_else(bad)?;
    items
        .iter()
        .map(|item| {
            let from = item.get("from").and_then(Value::as_str);
            let to = item.get("to").and_then(Value::as_str);
            from.zip(to).ok_or_else(bad)
        })
        .collect()
}

/// The monitoring configuration: the library's defaults, the server's settings, the request's.
fn parse_config(params: &Params<'_>, options: &ServeOptions) -> Result<MonitorConfig, RpcError> {
    let mut capture = CaptureConfig::builder().cap_per_stream(options.retain_bytes);
    if let Some(dir) = &options.log_dir {
        capture = capture.log_dir(dir);
    }
    match params.integer("logThresholdBytes", 0, 1 << 40)? {
        Some(0) => capture = capture.spill(false),
        Some(n) => capture = capture.spill_threshold(n),
        None => {}
    }
    let config = MonitorConfig::builder()
        .capture(capture)
        .events(EventConfig::builder().throttle(options.output_throttle));
    // The settings table's, each under its serve key.
    let draft = Draft::new(config);
    let draft = settings::apply_json(draft, params.map(), Surface::Serve)?;
    draft.build().map_err(|e| config_error(&e))
}

/// A [`ConfigError`] as -32602, named by the parameter that set the setting: the settings
/// table's key, else the field of its own that `process/start` reads it from.
pub(crate) fn config_error(error: &ConfigError) -> RpcError {
    let field = settings::error_key(error, Surface::Serve).unwrap_or_else(|| {
        match error.setting() {
            Some(Setting::FilesInclude | Setting::FilesExclude) => "watch",
            Some(Setting::PtySize) => "io.pty",
            _ => "params",
        }
        .to_owned()
    });
    RpcError::param(&field, error)
}

/// What the forwarder needs to know about its process.
#[derive(Debug, Clone)]
pub(crate) struct Forward {
    pub(crate) process_id: String,
    pub(crate) context: Option<Value>,
    /// Whether `process/output` notifications are sent for it.
    pub(crate) output: bool,
}

impl Forward {
    /// `params` with `processId` and the context.
    fn params(&self, mut params: Value) -> Value {
        params["processId"] = json!(self.process_id);
        if let Some(context) = &self.context {
            params["context"] = context.clone();
        }
        params
    }
}

/// Starts the thread that turns the session's events into notifications, in order:
/// `started`, `output`…, `exited` once, `closed` last.
///
/// The library sends `Exited` when the child is reaped and its last output after it (the
/// throttle's flush, what the drain reads): the forwarder holds `Exited` until `Closed`, so
/// that every `output` and `activity` notification of the process comes before its
/// `process/exited` (docs/serve.md). `process/wait`'s answer waits for the same end, so the
/// hold delays nothing a client waits for.
pub(crate) fn start_forwarder(
    session: &Session,
    forward: Forward,
    outbox: Arc<Outbox>,
) -> std::io::Result<()> {
    let mut events = session.events();
    std::thread::Builder::new()
        .name("quietus-serve-events".into())
        .spawn(move || {
            // Per stream: output notifications dropped since the last one sent.
            let mut dropped = [false; 4];
            let mut exited = None;
            while let Some(event) = events.recv() {
                match event {
                    Event::Exited { .. } => exited = Some(event),
                    Event::Closed => {
                        if let Some(exited) = exited.take() {
                            forward_event(exited, &forward, &outbox, &mut dropped);
                        }
                        forward_event(event, &forward, &outbox, &mut dropped);
                    }
                    _ => forward_event(event, &forward, &outbox, &mut dropped),
                }
            }
            // The stream ended without `Closed` (cannot happen): the exit is still told.
            if let Some(exited) = exited {
                forward_event(exited, &forward, &outbox, &mut dropped);
            }
        })
        .map(drop)
}

fn stream_slot(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
        Stream::Terminal => 2,
        _ => 3,
    }
}

fn forward_event(event: Event, forward: &Forward, outbox: &Outbox, dropped: &mut [bool; 4]) {
    let send =
        |method: &str, params: Value| outbox.send(&notification(method, forward.params(params)));
    match event {
        Event::Started { pid, .. } => send("process/started", json!({"pid": pid.get()})),
        Event::Output {
            stream,
            seq,
            bytes,
            truncated,
        } if forward.output => {
            let slot = stream_slot(stream);
            let params = forward.params(json!({
                "seq": seq,
                "stream": stream.name(),
                "data": BASE64.encode(&bytes),
                "truncated": truncated || dropped[slot],
            }));
            dropped[slot] = !outbox.offer(&notification("process/output", params));
        }
        Event::Activity { source } => {
            let params = forward.params(json!({"source": source.name()}));
            outbox.offer(&notification("process/activity", params));
        }
        Event::IdleWarning { left } => send(
            "process/idleWarning",
            json!({"leftMs": u64::try_from(left.as_millis()).unwrap_or(u64::MAX)}),
        ),
        Event::InputWait(wait) => send(
            "process/inputWait",
            json!({
                "pid": wait.pid.get(),
                "name": wait.name,
                "target": wait.target,
                "waitedMs": u64::try_from(wait.waited.as_millis()).unwrap_or(u64::MAX),
            }),
        ),
        Event::Exited { outcome, status } => {
            use std::os::unix::process::ExitStatusExt;
            send(
                "process/exited",
                json!({
                    "outcome": outcome.name(),
                    "exitCode": status.and_then(|s| s.code()),
                    "signal": status.and_then(|s| s.signal()),
                }),
            );
        }
        Event::Observed(observation) => send(
            // observe mode (issue 43): the report's `observed` entry
            "process/observed",
            crate::jsonrpc::protocol::camel_case_keys(
                serde_json::to_value(crate::report::ObservedJson::new(&observation))
                    .unwrap_or_default(),
            ),
        ),
        Event::Closed => send("process/closed", json!({})),
        _ => {}
    }
}

/// A job for a process's stdin writer.
#[derive(Debug)]
pub(crate) enum StdinJob {
    /// Write these bytes, then answer the request `id` (none for a notification).
    Write(Vec<u8>, Option<Value>),
    /// Close stdin once the writes before are done, then answer.
    Close(Option<Value>),
}

/// Writes waiting for one child's stdin at most (beyond: -32004).
pub(crate) const STDIN_JOBS: usize = 256;

/// Starts the thread that feeds the child's stdin in request order; answers each job.
pub(crate) fn start_stdin_writer(
    session: Arc<Session>,
    outbox: Arc<Outbox>,
) -> std::io::Result<Sender<StdinJob>> {
    let (tx, rx): (Sender<StdinJob>, Receiver<StdinJob>) = crossbeam_channel::bounded(STDIN_JOBS);
    std::thread::Builder::new()
        .name("quietus-serve-stdin".into())
        .spawn(move || {
            let answer = |id: Option<Value>, answer: Result<Value, RpcError>| {
                if let Some(id) = id {
                    outbox.send(&match answer {
                        Ok(result) => crate::jsonrpc::protocol::response(id, result),
                        Err(error) => crate::jsonrpc::protocol::error_response(id, error),
                    });
                }
            };
            // After a write waited out the library's 5 s (the child does not read), the next
            // ones wait for no room: each is queued if the child has read since, or refused at
            // once — not after a wait of its own (74 writes took 5 s per refusal).
            let mut deaf = false;
            for job in rx {
                match job {
                    StdinJob::Write(data, id) => {
                        let wait = if deaf { Duration::ZERO } else { STDIN_WAIT };
                        let written = session.write_stdin_timeout(&data, wait);
                        deaf =
                            matches!(&written, Err(e) if e.kind() == std::io::ErrorKind::TimedOut);
                        answer(id, write_answer(written, wait));
                    }
                    StdinJob::Close(id) => {
                        session.close_stdin();
                        answer(id, Ok(json!({"status": "accepted"})));
                    }
                }
            }
        })?;
    Ok(tx)
}

/// How long a write waits for room in the library's queue (as `Session::write_stdin`).
const STDIN_WAIT: Duration = Duration::from_secs(5);

/// `process/write`'s answer for what the library said.
fn write_answer(written: std::io::Result<()>, waited: Duration) -> Result<Value, RpcError> {
    match written {
        Ok(()) => Ok(json!({"status": "accepted"})),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut && waited.is_zero() => {
            Err(RpcError::new(
                STDIN_BACKLOG,
                "stdin_backlog: refused at once: the child has not read its stdin since a write \
                 before this one waited 5s for it",
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            Err(RpcError::new(STDIN_BACKLOG, format!("stdin_backlog: {e}")))
        }
        Err(_) => Ok(json!({"status": "stdin_closed"})),
    }
}

/// Longest wait a `process/wait` may ask for (beyond: no timeout).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// The command's words for the report.
pub(crate) fn os_words(argv: &[String]) -> Vec<OsString> {
    argv.iter().map(OsString::from).collect()
}
