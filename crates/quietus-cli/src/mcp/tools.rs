//! The four tools: their definitions for `tools/list` (descriptions written for a model, JSON
//! Schemas of their input and structured output) and the reading of a `tools/call`'s
//! arguments into a [`ToolCall`] (pure: no session is touched here).

use std::path::PathBuf;
use std::time::Duration;

use quietus::ControlAction;
use serde_json::{Map, Value};

use super::options::McpOptions;
use crate::jsonrpc::protocol::{self, Params, RpcError, whole_number};
use crate::settings::{self, SettingValue, Surface};

/// The longest yield window (ms) a call may ask for.
pub(crate) const MAX_YIELD_MS: u64 = 300_000;
/// `max_output_bytes`' range.
pub(crate) const OUTPUT_RANGE: (u64, u64) = (256, 1 << 20);
/// The range (ms) `mcp` accepts for the idle timeout, from the settings table (also the range
/// of `exec_control`'s timeouts).
pub(crate) fn idle_range() -> (u64, u64) {
    let (min, max) = settings::by_name("idle_timeout")
        .and_then(settings::Def::mcp_range)
        .expect("the settings table has the idle timeout, with a range");
    (min.as_millis() as u64, max.as_millis() as u64)
}

/// The settings table's setting `name` in a tool's arguments (under its `mcp` key, within
/// its `mcp` range), if given.
fn setting(params: &Params<'_>, name: &str) -> Result<Option<SettingValue>, RpcError> {
    let def = settings::by_name(name).expect("a setting of the table");
    let key = def.key(Surface::Mcp).expect("a setting mcp reads");
    match params.map().get(&key) {
        None => Ok(None),
        Some(Value::Null) if def.kind != settings::Kind::DurationOrNone => Ok(None),
        Some(value) => def.read_json(&key, value, def.mcp_range()).map(Some),
    }
}

/// A checked tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolCall {
    /// `exec_command`.
    Exec(ExecArgs),
    /// `write_stdin`.
    Write {
        /// The session.
        session_id: u32,
        /// What to type (may be empty: only poll).
        chars: String,
        /// How long to wait for output or the end.
        yield_time: Duration,
    },
    /// `exec_control`.
    Control {
        /// The session.
        session_id: u32,
        /// What to do, in order (a keepalive that extends the idle timeout is two actions).
        actions: Vec<ControlAction>,
    },
    /// `list_exec_sessions`.
    List,
}

/// `exec_command`'s arguments, defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExecArgs {
    pub(crate) cmd: String,
    pub(crate) workdir: Option<PathBuf>,
    pub(crate) tty: bool,
    pub(crate) yield_time: Duration,
    pub(crate) max_output_bytes: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) hard_timeout: Option<Duration>,
    pub(crate) grace: Duration,
    pub(crate) env: Vec<(String, String)>,
    /// Observe mode (issue 43): end nothing, say when and why quietus would have.
    pub(crate) observe: bool,
}

/// Why a call was not made.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallError {
    /// No tool has this name: a protocol error (-32602).
    UnknownTool(String),
    /// The arguments are wrong: a tool result with `isError: true`, this message.
    Arguments(String),
}

/// Reads `tools/call {name, arguments}`.
pub(crate) fn parse_call(
    name: &str,
    arguments: &Map<String, Value>,
    options: &McpOptions,
) -> Result<ToolCall, CallError> {
    let message = |e: RpcError| {
        let text = e.message.trim_start_matches("invalid params: ").to_owned();
        CallError::Arguments(format!("invalid arguments for {name}: {text}"))
    };
    match name {
        "exec_command" => exec_args(arguments, options)
            .map(ToolCall::Exec)
            .map_err(message),
        "write_stdin" => write_args(arguments).map_err(message),
        "exec_control" => control_args(arguments).map_err(message),
        "list_exec_sessions" => Params::new(arguments, &[])
            .map(|_| ToolCall::List)
            .map_err(message),
        other => Err(CallError::UnknownTool(other.to_owned())),
    }
}

fn millis(
    params: &Params<'_>,
    field: &str,
    range: (u64, u64),
) -> Result<Option<Duration>, RpcError> {
    Ok(params
        .integer(field, range.0, range.1)?
        .map(Duration::from_millis))
}

fn exec_args(arguments: &Map<String, Value>, options: &McpOptions) -> Result<ExecArgs, RpcError> {
    let params = Params::new(
        arguments,
        &[
            "cmd",
            "workdir",
            "tty",
            "yield_time_ms",
            "max_output_bytes",
            "idle_timeout_ms",
            "hard_timeout_ms",
            "grace_period_ms",
            "env",
            "observe",
        ],
    )?;
    let cmd = match params.required("cmd")? {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        other => {
            return Err(RpcError::param(
                "cmd",
                format!(
                    "{} is not a command; it accepts a non-empty string",
                    protocol::quote(other)
                ),
            ));
        }
    };
    let hard_timeout = match setting(&params, "hard_timeout")? {
        None => options.hard_timeout,
        Some(value) => value.maybe(),
    };
    let env = match params.get("env") {
        None => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v.as_str() {
                Some(v) if !k.is_empty() && !k.contains(['=', '\0']) && !v.contains('\0') => {
                    Ok((k.clone(), v.to_owned()))
                }
                _ => Err(RpcError::param(
                    "env",
                    format!(
                        "{}: {} is not accepted; env maps variable names (no '=') to string \
                         values",
                        protocol::quote_str(k),
                        protocol::quote(v)
                    ),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(RpcError::param(
                "env",
                format!(
                    "{} is not an object; it accepts {{\"NAME\": \"value\", …}}",
                    protocol::quote(other)
                ),
            ));
        }
    };
    Ok(ExecArgs {
        cmd,
        workdir: params.string("workdir")?.map(PathBuf::from),
        tty: params.boolean("tty")?.unwrap_or(false),
        yield_time: millis(&params, "yield_time_ms", (0, MAX_YIELD_MS))?
            .unwrap_or(Duration::from_secs(10)),
        max_output_bytes: params
            .integer("max_output_bytes", OUTPUT_RANGE.0, OUTPUT_RANGE.1)?
            .unwrap_or(4096) as usize,
        idle_timeout: setting(&params, "idle_timeout")?
            .and_then(SettingValue::maybe)
            .unwrap_or(options.idle_timeout),
        hard_timeout,
        grace: setting(&params, "grace")?
            .and_then(SettingValue::maybe)
            .unwrap_or(Duration::from_secs(5)),
        env,
        observe: params.boolean("observe")?.unwrap_or(false),
    })
}

fn session_id(params: &Params<'_>) -> Result<u32, RpcError> {
    let n = whole_number(
        "session_id",
        params.required("session_id")?,
        1,
        u32::MAX.into(),
    )?;
    Ok(u32::try_from(n).expect("checked to fit"))
}

fn write_args(arguments: &Map<String, Value>) -> Result<ToolCall, RpcError> {
    let params = Params::new(arguments, &["session_id", "chars", "yield_time_ms"])?;
    Ok(ToolCall::Write {
        session_id: session_id(&params)?,
        chars: params.string("chars")?.unwrap_or_default().to_owned(),
        yield_time: millis(&params, "yield_time_ms", (0, MAX_YIELD_MS))?
            .unwrap_or(Duration::from_millis(250)),
    })
}

fn control_args(arguments: &Map<String, Value>) -> Result<ToolCall, RpcError> {
    const ACCEPTS: &str = "it accepts {\"type\": \"keepalive\", \"extend_timeout_ms\"?}, \
        {\"type\": \"send_ctrl_c\"}, {\"type\": \"terminate\"}, {\"type\": \"force_kill\"} or \
        {\"type\": \"set_idle_timeout\", \"timeout_ms\"}";
    let params = Params::new(arguments, &["session_id", "action"])?;
    let session_id = session_id(&params)?;
    let action = params.required("action")?;
    let bad = || {
        RpcError::param(
            "action",
            format!("{} is not an action; {ACCEPTS}", protocol::quote(action)),
        )
    };
    let object = action.as_object().ok_or_else(bad)?;
    let kind = object.get("type").and_then(Value::as_str).ok_or_else(bad)?;
    let known: &[&str] = match kind {
        "keepalive" => &["type", "extend_timeout_ms"],
        "set_idle_timeout" => &["type", "timeout_ms"],
        _ => &["type"],
    };
    let fields = Params::new(object, known)
        .map_err(|e| RpcError::param("action", e.message.trim_start_matches("invalid params: ")))?;
    let timeout = |field: &str| {
        millis(&fields, field, idle_range()).map_err(|e| {
            RpcError::param(
                "action",
                e.message.trim_start_matches("invalid params: ").to_owned(),
            )
        })
    };
    let actions = match kind {
        "keepalive" => std::iter::once(ControlAction::Keepalive)
            .chain(timeout("extend_timeout_ms")?.map(ControlAction::SetIdleTimeout))
            .collect(),
        "send_ctrl_c" => vec![ControlAction::Interrupt],
        "terminate" => vec![ControlAction::Terminate],
        "force_kill" => vec![ControlAction::Kill],
        "set_idle_timeout" => vec![ControlAction::SetIdleTimeout(
            timeout("timeout_ms")?.ok_or_else(|| {
                RpcError::param(
                    "action.timeout_ms",
                    "missing (required by set_idle_timeout)",
                )
            })?,
        )],
        _ => return Err(bad()),
    };
    Ok(ToolCall::Control {
        session_id,
        actions,
    })
}
