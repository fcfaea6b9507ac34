//! The Model Context Protocol over the shared JSON-RPC framing: the lifecycle (`initialize`
//! and its version negotiation, `notifications/initialized`, `ping`), `tools/list`,
//! `tools/call` (checked here, run by the caller), `logging/setLevel`. Pure: a line in, the
//! answer (or the call to run) out.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::{Map, Value, json};

use super::options::McpOptions;
use super::schema;
use super::tools::{self, CallError, ToolCall};
use crate::jsonrpc::protocol::{self, RpcError};

/// The revisions spoken, newest first: a client asking for another gets the newest.
pub(crate) const VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// The logging levels of RFC 5424, as MCP names them, least severe first.
pub(crate) const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// What to do with one line from the client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// Send this line.
    Send(Value),
    /// Run this tool call (on a worker) and answer request `id` with its result.
    Call {
        /// The request's id.
        id: Value,
        /// The checked call.
        call: ToolCall,
        /// Whether the result carries `structuredContent` (revision 2025-06-18).
        structured: bool,
    },
    /// Nothing to answer (a notification).
    Nothing,
}

/// A tool's result before it is put in MCP's words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolOutput {
    /// The structured result (matches the tool's output schema).
    pub(crate) structured: Value,
    /// The same for a model that reads text.
    pub(crate) text: String,
    /// Whether the tool failed.
    pub(crate) is_error: bool,
}

impl ToolOutput {
    /// A failure the model can act on: `message` only, no structured result.
    pub(crate) fn error(message: impl Into<String>) -> Self {
        Self {
            structured: Value::Null,
            text: message.into(),
            is_error: true,
        }
    }
}

/// A `tools/call` result: a text block, the structured result when the revision has them,
/// `isError`.
pub(crate) fn call_result(output: ToolOutput, structured: bool) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": output.text}],
        "isError": output.is_error,
    });
    if structured && !output.structured.is_null() {
        result["structuredContent"] = output.structured;
    }
    result
}

/// The protocol state of one connection.
#[derive(Debug)]
pub(crate) struct Mcp {
    options: McpOptions,
    /// The negotiated revision (`None` before `initialize`: the newest is assumed).
    version: Option<&'static str>,
    /// The least severe level the client wants (index in [`LEVELS`]); shared with the
    /// threads that announce ended sessions.
    level: Arc<AtomicU8>,
}

impl Mcp {
    /// A connection with `options`, the logging level in `level`.
    pub(crate) fn new(options: McpOptions, level: Arc<AtomicU8>) -> Self {
        Self {
            options,
            version: None,
            level,
        }
    }

    /// The negotiated revision.
    pub(crate) fn version(&self) -> &'static str {
        self.version.unwrap_or(VERSIONS[0])
    }

    /// Reads one line and says what to do.
    pub(crate) fn handle_line(&mut self, line: &[u8]) -> Reply {
        let incoming = match protocol::parse_line(line) {
            Ok(incoming) => incoming,
            Err((id, error)) => return Reply::Send(protocol::error_response(id, error)),
        };
        let Some(id) = incoming.id else {
            // notifications/initialized, notifications/cancelled…: nothing to answer (a
            // cancelled call runs on; its answer is then ignored by the client).
            log::debug!("notification {}", incoming.method);
            return Reply::Nothing;
        };
        let answer = match incoming.method.as_str() {
            "initialize" => Ok(self.initialize(&incoming.params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(self.list_tools()),
            "tools/call" => return self.call(id, &incoming.params),
            "logging/setLevel" => self.set_level(&incoming.params),
            other => Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!(
                    "method not found: {other:?}; this server has initialize, ping, tools/list, \
                     tools/call and logging/setLevel"
                ),
            )),
        };
        Reply::Send(match answer {
            Ok(result) => protocol::response(id, result),
            Err(error) => protocol::error_response(id, error),
        })
    }

    fn initialize(&mut self, params: &Map<String, Value>) -> Value {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = VERSIONS
            .iter()
            .find(|v| Some(**v) == asked)
            .copied()
            .unwrap_or(VERSIONS[0]);
        self.version = Some(version);
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}, "logging": {}},
            "serverInfo": {"name": "stallwatch", "title": "stallwatch", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "Run shell commands with exec_command: a command is ended only when \
                it has really stalled (no output, file, CPU or network activity for its idle \
                timeout), with a diagnosis of why, and its whole process tree ends with it. \
                Continue a long or interactive command with write_stdin; steer it with \
                exec_control; list_exec_sessions shows every session."
        })
    }

    /// The tools, with only the fields the negotiated revision knows.
    fn list_tools(&self) -> Value {
        let mut tools = schema::tools(&self.options);
        let version = self.version();
        for tool in tools.as_array_mut().into_iter().flatten() {
            let Some(tool) = tool.as_object_mut() else {
                continue;
            };
            if version < "2025-06-18" {
                tool.remove("outputSchema");
                tool.remove("title");
            }
            if version < "2025-03-26" {
                tool.remove("annotations");
            }
        }
        json!({"tools": tools})
    }

    fn call(&self, id: Value, params: &Map<String, Value>) -> Reply {
        let structured = self.version() >= "2025-06-18";
        let name = match params.get("name") {
            Some(Value::String(name)) => name.as_str(),
            _ => {
                let error = RpcError::param("name", "missing or not a string (the tool's name)");
                return Reply::Send(protocol::error_response(id, error));
            }
        };
        let empty = Map::new();
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(arguments)) => arguments,
            Some(other) => {
                let message = format!(
                    "invalid arguments for {name}: {other} is not an object of named arguments"
                );
                let result = call_result(ToolOutput::error(message), structured);
                return Reply::Send(protocol::response(id, result));
            }
        };
        match tools::parse_call(name, arguments, &self.options) {
            Ok(call) => Reply::Call {
                id,
                call,
                structured,
            },
            Err(CallError::Arguments(message)) => {
                let result = call_result(ToolOutput::error(message), structured);
                Reply::Send(protocol::response(id, result))
            }
            Err(CallError::UnknownTool(name)) => Reply::Send(protocol::error_response(
                id,
                RpcError::new(
                    protocol::INVALID_PARAMS,
                    format!(
                        "unknown tool: {name:?}; the tools are exec_command, write_stdin, \
                         exec_control and list_exec_sessions"
                    ),
                ),
            )),
        }
    }

    fn set_level(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let level = params.get("level").and_then(Value::as_str);
        let index = LEVELS
            .iter()
            .position(|l| Some(*l) == level)
            .ok_or_else(|| {
                RpcError::param(
                    "level",
                    format!("{level:?} is not a level; it accepts {}", LEVELS.join(", ")),
                )
            })?;
        self.level.store(index as u8, Ordering::Relaxed);
        Ok(json!({}))
    }
}
