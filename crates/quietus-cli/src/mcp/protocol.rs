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
        /// The caller's `_meta.progressToken`: it wants `notifications/progress` while the call
        /// waits.
        progress: Option<Value>,
    },
    /// The client abandoned request `id` (`notifications/cancelled`, as clients send when
    /// their time limit passes): what its answer took must reach the next answer.
    Cancelled(Value),
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
            // notifications/initialized…: nothing to answer. A cancelled call stops waiting
            // and keeps its output for the next answer (the client ignores this one).
            log::debug!("notification {}", incoming.method);
            if incoming.method == "notifications/cancelled"
                && let Some(request) = incoming.params.get("requestId")
            {
                return Reply::Cancelled(request.clone());
            }
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
                    "method not found: {}; this server has initialize, ping, tools/list, \
                     tools/call and logging/setLevel",
                    protocol::quote_str(other)
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
            "serverInfo": {"name": "quietus", "title": "quietus", "version": env!("CARGO_PKG_VERSION")},
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
                    "invalid arguments for {name}: {} is not an object of named arguments",
                    protocol::quote(other)
                );
                let result = call_result(ToolOutput::error(message), structured);
                return Reply::Send(protocol::response(id, result));
            }
        };
        let progress = params
            .get("_meta")
            .and_then(|meta| meta.get("progressToken"))
            .filter(|token| token.is_string() || token.is_i64() || token.is_u64())
            .cloned();
        match tools::parse_call(name, arguments, &self.options) {
            Ok(call) => Reply::Call {
                id,
                call,
                structured,
                progress,
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
                        "unknown tool: {}; the tools are exec_command, write_stdin, \
                         exec_control and list_exec_sessions",
                        protocol::quote_str(&name)
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
                    format!(
                        "{} is not a level; it accepts {}",
                        level.map_or_else(|| "null".to_owned(), protocol::quote_str),
                        LEVELS.join(", ")
                    ),
                )
            })?;
        self.level.store(index as u8, Ordering::Relaxed);
        Ok(json!({}))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use quietus::ControlAction;

    use super::*;
    use crate::mcp::tools::ExecArgs;

    fn server() -> (Mcp, Arc<AtomicU8>) {
        let level = Arc::new(AtomicU8::new(1));
        (Mcp::new(McpOptions::default(), level.clone()), level)
    }

    /// The line the server sends for `line`.
    fn sent(mcp: &mut Mcp, line: &str) -> Value {
        match mcp.handle_line(line.as_bytes()) {
            Reply::Send(value) => value,
            other => panic!("expected a line to send for {line}, got {other:?}"),
        }
    }

    fn initialize(mcp: &mut Mcp, version: &str) -> Value {
        sent(
            mcp,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
            }})
            .to_string(),
        )
    }

    fn call(name: &str, arguments: Value) -> String {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}).to_string()
    }

    #[test]
    fn initialize_answers_the_version_asked_or_the_newest() {
        for (asked, answered) in [
            ("2025-06-18", "2025-06-18"),
            ("2025-03-26", "2025-03-26"),
            ("2024-11-05", "2024-11-05"),
            ("2025-11-25", "2025-06-18"),
            ("1999-01-01", "2025-06-18"),
        ] {
            let (mut mcp, _) = server();
            let answer = initialize(&mut mcp, asked);
            assert_eq!(answer["id"], 1);
            assert_eq!(answer["result"]["protocolVersion"], answered, "{asked}");
            assert_eq!(mcp.version(), answered);
            assert_eq!(
                answer["result"]["capabilities"],
                json!({"tools": {"listChanged": false}, "logging": {}})
            );
            assert_eq!(answer["result"]["serverInfo"]["name"], "quietus");
        }
    }

    #[test]
    fn ping_notifications_and_unknown_methods() {
        let (mut mcp, _) = server();
        assert_eq!(
            sent(&mut mcp, r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#),
            json!({"jsonrpc": "2.0", "id": "p", "result": {}})
        );
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert_eq!(mcp.handle_line(note.as_bytes()), Reply::Nothing);
        let note =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#;
        assert_eq!(mcp.handle_line(note.as_bytes()), Reply::Cancelled(json!(3)));
        for method in ["server/discover", "resources/list", "process/start"] {
            let line = json!({"jsonrpc": "2.0", "id": 4, "method": method}).to_string();
            let answer = sent(&mut mcp, &line);
            assert_eq!(
                answer["error"]["code"],
                protocol::METHOD_NOT_FOUND,
                "{method}"
            );
        }
        let answer = sent(&mut mcp, "{not json");
        assert_eq!(answer["error"]["code"], protocol::PARSE_ERROR);
        assert_eq!(answer["id"], Value::Null);
        // A huge unknown method or tool name is quoted by a short prefix, not echoed whole.
        initialize(&mut mcp, "2025-06-18");
        let huge = "m".repeat(10 << 20);
        for line in [
            json!({"jsonrpc": "2.0", "id": 5, "method": huge}),
            json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": huge}}),
        ] {
            let answer = sent(&mut mcp, &line.to_string()).to_string();
            assert!(
                answer.len() < 1024,
                "{} bytes: {}",
                answer.len(),
                &answer[..200]
            );
        }
    }

    #[test]
    fn tools_list_has_the_four_tools_with_the_fields_of_the_revision() {
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let (mut mcp, _) = server();
        initialize(&mut mcp, "2025-06-18");
        let tools = sent(&mut mcp, list)["result"]["tools"].clone();
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "exec_command",
                "write_stdin",
                "exec_control",
                "list_exec_sessions"
            ]
        );
        for tool in tools.as_array().unwrap() {
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
            assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
            assert!(tool["description"].as_str().unwrap().len() > 200, "{tool}");
        }
        assert_eq!(tools[0]["inputSchema"]["required"], json!(["cmd"]));
        assert_eq!(
            tools[0]["inputSchema"]["properties"]["idle_timeout_ms"]["default"],
            300_000
        );
        let (mut old, _) = server();
        initialize(&mut old, "2025-03-26");
        let tools = sent(&mut old, list)["result"]["tools"].clone();
        assert!(tools[0].get("outputSchema").is_none());
        assert!(tools[0].get("annotations").is_some());
        let (mut oldest, _) = server();
        initialize(&mut oldest, "2024-11-05");
        let tools = sent(&mut oldest, list)["result"]["tools"].clone();
        assert!(tools[0].get("annotations").is_none());
        assert!(tools[0].get("inputSchema").is_some());
    }

    #[test]
    fn a_good_call_is_handed_over_with_its_defaults() {
        let (mut mcp, _) = server();
        initialize(&mut mcp, "2025-06-18");
        let reply = mcp.handle_line(call("exec_command", json!({"cmd": "make"})).as_bytes());
        let expected = ExecArgs {
            cmd: "make".into(),
            workdir: None,
            tty: false,
            yield_time: Duration::from_secs(10),
            max_output_bytes: 4096,
            env: Vec::new(),
            settings: crate::settings::Draft::new(
                quietus::MonitorConfig::builder()
                    .idle_timeout(Duration::from_secs(300))
                    .hard_timeout(Some(Duration::from_secs(7200))),
            ),
        };
        assert_eq!(
            reply,
            Reply::Call {
                id: json!(7),
                call: ToolCall::Exec(Box::new(expected)),
                structured: true,
                progress: None
            }
        );
        let reply = mcp.handle_line(
            call(
                "exec_command",
                json!({"cmd": "x", "hard_timeout_ms": null, "tty": true, "env": {"A": "1"}}),
            )
            .as_bytes(),
        );
        let Reply::Call {
            call: ToolCall::Exec(args),
            ..
        } = reply
        else {
            panic!("{reply:?}")
        };
        assert_eq!(args.settings.build().unwrap().hard_timeout(), None);
        assert!(args.tty);
        assert_eq!(args.env, [("A".to_owned(), "1".to_owned())]);
        let reply = mcp.handle_line(
            call(
                "exec_control",
                json!({"session_id": 3, "action": {"type": "keepalive", "extend_timeout_ms": 60000}}),
            )
            .as_bytes(),
        );
        assert_eq!(
            reply,
            Reply::Call {
                id: json!(7),
                call: ToolCall::Control {
                    session_id: 3,
                    actions: vec![
                        ControlAction::Keepalive,
                        ControlAction::SetIdleTimeout(Duration::from_secs(60))
                    ]
                },
                structured: true,
                progress: None
            }
        );
        let reply = mcp.handle_line(call("write_stdin", json!({"session_id": 2})).as_bytes());
        assert_eq!(
            reply,
            Reply::Call {
                id: json!(7),
                call: ToolCall::Write {
                    session_id: 2,
                    chars: String::new(),
                    yield_time: Duration::from_millis(250)
                },
                structured: true,
                progress: None
            }
        );
    }

    #[test]
    fn a_progress_token_is_handed_over_with_the_call() {
        let (mut mcp, _) = server();
        initialize(&mut mcp, "2025-06-18");
        for (token, kept) in [(json!("abc"), true), (json!(7), true), (json!([1]), false)] {
            let line = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
                "name": "list_exec_sessions", "arguments": {}, "_meta": {"progressToken": token}
            }})
            .to_string();
            let Reply::Call { progress, .. } = mcp.handle_line(line.as_bytes()) else {
                panic!("a call")
            };
            assert_eq!(progress, kept.then_some(token));
        }
    }

    #[test]
    fn bad_arguments_are_tool_errors_and_unknown_tools_protocol_errors() {
        let (mut mcp, _) = server();
        initialize(&mut mcp, "2025-06-18");
        for (name, arguments, words) in [
            ("exec_command", json!({}), "cmd: missing"),
            (
                "exec_command",
                json!({"cmd": ""}),
                "cmd: \"\" is not a command",
            ),
            (
                "exec_command",
                json!({"cmd": "x", "idle_timeout_ms": 5}),
                "idle_timeout_ms: 5 is out of range; it accepts a whole number from 1000 to 86400000",
            ),
            (
                "exec_command",
                json!({"cmd": "x", "colour": 1}),
                "unknown field \"colour\"",
            ),
            (
                "exec_command",
                json!({"cmd": "x", "env": {"A": 1}}),
                "env: \"A\": 1 is not accepted",
            ),
            (
                "write_stdin",
                json!({"session_id": "one"}),
                "session_id: \"one\" is not a whole number",
            ),
            (
                "exec_control",
                json!({"session_id": 1, "action": {"type": "explode"}}),
                "is not an action",
            ),
            (
                "exec_control",
                json!({"session_id": 1, "action": {"type": "set_idle_timeout"}}),
                "timeout_ms: missing",
            ),
            (
                "list_exec_sessions",
                json!({"all": true}),
                "unknown field \"all\"",
            ),
        ] {
            let answer = sent(&mut mcp, &call(name, arguments.clone()));
            let result = &answer["result"];
            assert_eq!(result["isError"], true, "{name} {arguments}: {answer}");
            let text = result["content"][0]["text"].as_str().unwrap();
            assert!(
                text.starts_with(&format!("invalid arguments for {name}: ")),
                "{text}"
            );
            assert!(text.contains(words), "{name} {arguments}: {text}");
            assert!(result.get("structuredContent").is_none());
        }
        let answer = sent(&mut mcp, &call("rm_rf", json!({})));
        assert_eq!(answer["error"]["code"], protocol::INVALID_PARAMS);
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("unknown tool: \"rm_rf\"")
        );
        let answer = sent(&mut mcp, &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "exec_command", "arguments": [1]}}).to_string());
        assert_eq!(answer["result"]["isError"], true);
    }

    #[test]
    fn results_carry_structured_content_from_2025_06_18_on() {
        let output = ToolOutput {
            structured: json!({"status": "ack"}),
            text: "ack".into(),
            is_error: false,
        };
        assert_eq!(
            call_result(output.clone(), true),
            json!({"content": [{"type": "text", "text": "ack"}], "isError": false, "structuredContent": {"status": "ack"}})
        );
        assert_eq!(
            call_result(output, false),
            json!({"content": [{"type": "text", "text": "ack"}], "isError": false})
        );
        let (mut mcp, _) = server();
        initialize(&mut mcp, "2025-03-26");
        let reply = mcp.handle_line(call("list_exec_sessions", json!({})).as_bytes());
        assert_eq!(
            reply,
            Reply::Call {
                id: json!(7),
                call: ToolCall::List,
                structured: false,
                progress: None
            }
        );
    }

    #[test]
    fn set_level_is_kept_and_checked() {
        let (mut mcp, level) = server();
        let line = |l: &str| {
            json!({"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": l}})
                .to_string()
        };
        assert_eq!(sent(&mut mcp, &line("error"))["result"], json!({}));
        assert_eq!(level.load(Ordering::Relaxed), 4);
        let answer = sent(&mut mcp, &line("loud"));
        assert_eq!(answer["error"]["code"], protocol::INVALID_PARAMS);
        assert_eq!(level.load(Ordering::Relaxed), 4);
    }
}
