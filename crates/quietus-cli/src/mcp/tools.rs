//! The four tools: their definitions for `tools/list` (descriptions written for a model, JSON
//! Schemas of their input and structured output) and the reading of a `tools/call`'s
//! arguments into a [`ToolCall`] (pure: no session is touched here).

use std::path::PathBuf;
use std::time::Duration;

use quietus::ControlAction;
use serde_json::{Map, Value};

use super::options::McpOptions;
use crate::jsonrpc::protocol::{self, Params, RpcError, whole_number};
use crate::settings::{self, Draft, Surface, controls};

/// The fields `exec_command` accepts besides the settings table's (each under its `mcp` key).
const EXEC_FIELDS: &[&str] = &[
    "cmd",
    "workdir",
    "tty",
    "yield_time_ms",
    "max_output_bytes",
    "env",
];

/// The longest yield window (ms) a call may ask for.
pub(crate) const MAX_YIELD_MS: u64 = 300_000;
/// `max_output_bytes`' range.
pub(crate) const OUTPUT_RANGE: (u64, u64) = (256, 1 << 20);
/// A checked tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolCall {
    /// `exec_command`.
    Exec(Box<ExecArgs>),
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
    pub(crate) env: Vec<(String, String)>,
    /// The settings table's (idle and hard timeouts, grace, observe…): the server's
    /// defaults, and the arguments' under their `mcp` keys.
    pub(crate) settings: Draft,
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
            .map(|args| ToolCall::Exec(Box::new(args)))
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
    let fields: Vec<String> = EXEC_FIELDS
        .iter()
        .map(|f| (*f).to_owned())
        .chain(settings::keys(Surface::Mcp))
        .collect();
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let params = Params::new(arguments, &fields)?;
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
        env,
        settings: settings::apply_json(options.settings(), arguments, Surface::Mcp)?,
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
    let params = Params::new(arguments, &["session_id", "action"])?;
    Ok(ToolCall::Control {
        session_id: session_id(&params)?,
        actions: controls::parse_action(params.required("action")?, Surface::Mcp)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietus::{KillLadder, Signal};
    use serde_json::json;

    fn exec(arguments: Value) -> Result<ExecArgs, RpcError> {
        exec_args(arguments.as_object().unwrap(), &McpOptions::default())
    }

    /// The settings come through the settings table's MCP keys: the server's timeouts, the
    /// table's (the library's) grace of 5s and no observe mode when not given.
    #[test]
    fn exec_command_settings_come_through_the_table() {
        let config = exec(json!({"cmd": "x"})).unwrap().settings.build().unwrap();
        assert_eq!(config.idle_timeout(), Duration::from_secs(300));
        assert_eq!(config.hard_timeout(), Some(Duration::from_secs(7200)));
        assert_eq!(
            *config.kill_ladder(),
            KillLadder::polite(Signal::TERM, Duration::from_secs(5))
        );
        assert!(!config.observe());
        let config = exec(
            json!({"cmd": "x", "idle_timeout_ms": 2000, "grace_period_ms": 0,
                                 "hard_timeout_ms": null, "observe": true}),
        )
        .unwrap()
        .settings
        .build()
        .unwrap();
        assert_eq!(config.idle_timeout(), Duration::from_secs(2));
        assert_eq!(config.hard_timeout(), None);
        assert_eq!(
            *config.kill_ladder(),
            KillLadder::polite(Signal::TERM, Duration::ZERO)
        );
        assert!(config.observe());
        // A model's null for an argument it leaves out is no value (but none for the hard
        // timeout, where null means none).
        let config = exec(json!({"cmd": "x", "idle_timeout_ms": null, "observe": null}));
        assert_eq!(
            config.unwrap().settings.build().unwrap().idle_timeout(),
            Duration::from_secs(300)
        );
        let err = exec(json!({"cmd": "x", "grace_period_ms": 600_001})).unwrap_err();
        assert!(
            err.message
                .contains("grace_period_ms: 600001 is out of range"),
            "{}",
            err.message
        );
        // Every key the table gives mcp is an argument exec_command takes.
        for key in settings::keys(Surface::Mcp) {
            let err = exec(json!({"cmd": "x", key.clone(): "?"})).unwrap_err();
            assert!(err.message.contains(&key), "{key}: {}", err.message);
            assert!(
                !err.message.contains("unknown field"),
                "{key}: {}",
                err.message
            );
        }
    }
}
