//! What `tools/list` says of each tool: a description written for a model (when to use it,
//! what a stall diagnosis means, what to do next), the JSON Schema of its arguments and of its
//! structured result.

use serde_json::{Value, json};

use super::options::McpOptions;
use super::tools::{MAX_YIELD_MS, OUTPUT_RANGE};
use crate::settings::{self, Surface, controls};

const EXEC_COMMAND: &str = "\
Run a shell command under quietus's supervision and return its output. Use it for every \
shell command: builds, tests, installs, scripts, servers, interactive programs.

It returns as soon as the command exits or `yield_time_ms` passes (default 10 s, at most 30 s), whichever \
comes first. If it exited: `exit_code`, `outcome` and the output. If it still runs: \
`running: true` and a `session_id`; the command goes on in the background. Then call \
`write_stdin` with that session_id (empty `chars` to only collect new output, or text to type \
into it, e.g. an answer to a prompt followed by \"\\n\"), and `exec_control` to keep it alive, \
interrupt or stop it. Use `tty: true` for programs that need a terminal (prompts, pagers, \
REPLs, password or y/n questions).

A session is never ended for a fixed time while it works: only when its output, the files it \
writes, the CPU of its processes and its network traffic have ALL been quiet for \
`idle_timeout_ms` (default 5 min), or at `hard_timeout_ms`. Its whole process tree ends with it \
(background jobs too). When quietus ends a stalled command, `outcome` is `idle_timeout` (or \
`hard_timeout`, `input_wait`), `diagnosis` says why it was stuck (the deepest blocked \
process) and `advice` what to do, e.g. `waiting for input — \
sh (pid 812) reads stdin` (it asked a question: rerun with the answer given, a --yes flag, or \
tty: true and answer with write_stdin), `waiting on the network — … connected to 140.82.x.x:443` \
(a dead connection or server: check it, retry), `sleeping` (a sleep or wait that never ends), \
`waiting on a lock` (another process holds it). Exit code 124 means quietus ended it.

The output is the head and tail within `max_output_bytes` (default 4096), with the count of \
bytes left out. Once the output passes that cap, the complete output is written to a log file: \
`log.path` names it (read it with a command such as `tail`, `grep` or `sed -n`), `log.sha256` \
is its SHA-256 once the command ended.";

const WRITE_STDIN: &str = "\
Type characters into a running session started by exec_command, and/or collect its new \
output. Returns the output produced since the last answer for this session (head and tail \
within the session's max_output_bytes), and its state: still running, or ended with its exit \
code, outcome and stall diagnosis. `chars` is sent as is: end a line with \"\\n\"; \"\\u0003\" \
is Ctrl-C, \"\\u0004\" Ctrl-D on a terminal. Leave `chars` empty to only poll. Waits up to \
`yield_time_ms` (default 250 ms) for output or the end before answering. An ended session \
stays known for a while, so its last output and result can still be collected.";

const EXEC_CONTROL: &str = "\
Steer a session started by exec_command. Actions: `keepalive` (counts as activity now, so the \
idle timeout starts over; `extend_timeout_ms` also sets a new idle timeout for a command you \
know will be silent for long), `send_ctrl_c` (interrupt, as Ctrl-C), `terminate` (end its \
whole process tree: polite signal, grace period, then kill), `force_kill` (kill the tree now), \
`set_idle_timeout` (a new idle timeout, `timeout_ms`). Answers `status`: `ack` (done; call \
write_stdin to see the end), `no_such_session`, `already_terminated` (it has ended or is being \
ended) or `reject` (with a `note` saying why).";

const LIST_SESSIONS: &str = "\
List the sessions of exec_command, running and recently ended, one line each: \
`#03 running uptime=47.2s idle_left=212.8s bytes=8192 log=… cmd=npm run build` for a running \
one (idle_left: how long it may stay quiet before it is ended), and for an ended one its \
outcome, stall diagnosis and exit code, e.g. `#04 ended idle_timeout waiting for input — sh (pid 812) reads \
stdin … exit_code=124 …`. Use it to find a session_id you lost, or to see what still runs in the background.";

fn nullable(kind: &str) -> Value {
    json!([kind, "null"])
}

/// The structured result of `exec_command` and `write_stdin`.
fn exec_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer", "description": "The session, for write_stdin, exec_control and list_exec_sessions."},
            "running": {"type": "boolean", "description": "Whether the command still runs."},
            "state": {"type": "string", "enum": ["running", "grace", "ended"], "description": "running; grace: being ended (its kill ladder is under way); ended."},
            "exit_code": {"type": nullable("integer"), "description": "Once ended: the exit code (128+N for a signal N; 124 when quietus ended it for a stall or a timeout)."},
            "outcome": {"type": nullable("string"), "description": "Once ended: exited, idle_timeout, hard_timeout, input_wait, terminated or completed."},
            "diagnosis": {
                "type": ["object", "null"],
                "description": "Why a stalled command was stuck, from a look at its processes when it was judged stalled.",
                "properties": {
                    "kind": {"type": "string"},
                    "summary": {"type": "string", "description": "The cause: the deepest blocked process, what it does."},
                    "processes": {
                        "type": "array",
                        "description": "Every process of the tree read, the command's shell first: what each does, and the process of the tree each waits on.",
                        "items": {"type": "object", "properties": {
                            "pid": {"type": "integer"}, "name": {"type": "string"}, "state": {"type": "string"}, "kind": {"type": "string"},
                            "syscall": {"type": nullable("string")}, "target": {"type": nullable("string")}, "waits_on": {"type": nullable("integer")}
                        }}
                    }
                },
                "required": ["kind", "summary", "processes"]
            },
            "background_jobs_ended": {
                "type": "array",
                "description": "Processes still running when the command exited (background jobs), ended with it.",
                "items": {"type": "object", "properties": {"pid": {"type": "integer"}, "name": {"type": "string"}, "command": {"type": "string"}}}
            },
            "advice": {"type": nullable("string"), "description": "What to do next: how to continue a running session, or why quietus ended it and what to change."},
            "output": {"type": "string", "description": "Output since the last answer for this session: head and tail within max_output_bytes."},
            "output_bytes": {"type": "integer", "description": "Bytes of output since the last answer."},
            "omitted_bytes": {"type": "integer", "description": "Of those, bytes left out of `output` (read them in the log)."},
            "total_output_bytes": {"type": "integer", "description": "Bytes of output since the start."},
            "log": {
                "type": ["object", "null"],
                "description": "The complete output's log file, once the output passed max_output_bytes.",
                "properties": {
                    "path": {"type": "string"},
                    "sha256": {"type": nullable("string"), "description": "SHA-256 of the complete log, once the session ended."},
                    "bytes": {"type": "integer"},
                    "complete": {"type": "boolean", "description": "Whether the file holds every byte (false while it runs)."}
                },
                "required": ["path", "sha256", "bytes", "complete"]
            },
            "observed": {
                "type": "array",
                "description": "With observe: true, once ended: each moment quietus would have ended it, and why.",
                "items": {
                    "type": "object",
                    "properties": {
                        "at_ms": {"type": "integer"},
                        "outcome": {"type": "string"},
                        "why": {"type": "string"}
                    },
                    "required": ["at_ms", "outcome", "why"]
                }
            },
            "wall_time_ms": {"type": "integer", "description": "Time this call took."},
            "note": {"type": nullable("string")}
        },
        "required": ["session_id", "running", "state", "diagnosis", "background_jobs_ended", "advice", "output", "output_bytes", "omitted_bytes", "total_output_bytes", "wall_time_ms"]
    })
}

fn exec_input_schema(options: &McpOptions) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "cmd": {"type": "string", "minLength": 1, "description": "The command line, run by the shell (sh -c CMD)."},
            "workdir": {"type": "string", "description": "The folder to run it in (default: the server's)."},
            "tty": {"type": "boolean", "default": false, "description": "Run it on a terminal (for prompts and interactive programs); output then has terminal line endings (\\r\\n)."},
            "yield_time_ms": {"type": "integer", "minimum": 0, "maximum": MAX_YIELD_MS, "default": 10000, "description": "Return after this long if it still runs (it goes on in the background)."},
            "max_output_bytes": {"type": "integer", "minimum": OUTPUT_RANGE.0, "maximum": OUTPUT_RANGE.1, "default": 4096, "description": "Output in one answer at most (head and tail); beyond it the complete output goes to a log file."},
            "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Variables to set, over the server's environment."}
        },
        "required": ["cmd"],
        "additionalProperties": false
    });
    // The settings table's, under their mcp keys, with the server's defaults.
    for def in settings::SETTINGS {
        let Some(key) = def.key(Surface::Mcp) else {
            continue;
        };
        let mut property = def.json_schema(Surface::Mcp);
        property["default"] = match options.default_of(def.name) {
            Some(value) => value.to_json(),
            None => def.default_json(),
        };
        schema["properties"][key] = property;
    }
    schema
}

fn session_id_schema() -> Value {
    json!({"type": "integer", "minimum": 1, "description": "The session_id exec_command gave."})
}

fn control_input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "session_id": session_id_schema(),
            "action": controls::action_schema(Surface::Mcp)
        },
        "required": ["session_id", "action"],
        "additionalProperties": false
    })
}

fn list_output_schema() -> Value {
    let log = json!({"type": nullable("string")});
    json!({
        "type": "object",
        "properties": {
            "sessions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "session_id": {"type": "integer"},
                        "state": {"type": "string", "enum": ["running", "grace", "ended"]},
                        "running": {"type": "boolean"},
                        "line": {"type": "string"},
                        "cmd": {"type": "string"},
                        "uptime_ms": {"type": "integer"},
                        "idle_left_ms": {"type": nullable("integer")},
                        "bytes": {"type": "integer"},
                        "log": log,
                        "exit_code": {"type": nullable("integer")},
                        "outcome": {"type": nullable("string")},
                        "diagnosis": {"type": nullable("string")},
                        "background_jobs_ended": {"type": "array", "items": {"type": "object"}, "description": "Processes ended when it exited (its background jobs): pid, name, command."},
                        "advice": {"type": nullable("string"), "description": "What to do next with it."}
                    },
                    "required": ["session_id", "state", "running", "line", "cmd", "uptime_ms", "bytes"]
                }
            },
            "lines": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["sessions", "lines"]
    })
}

/// The four tools, as the latest revision describes a tool.
pub(crate) fn tools(options: &McpOptions) -> Value {
    let control_output = json!({
        "type": "object",
        "properties": {
            "session_id": {"type": "integer"},
            "status": {"type": "string", "enum": ["ack", "no_such_session", "already_terminated", "reject"]},
            "note": {"type": nullable("string")}
        },
        "required": ["session_id", "status"]
    });
    json!([
        {
            "name": "exec_command",
            "title": "Run a supervised shell command",
            "description": EXEC_COMMAND,
            "inputSchema": exec_input_schema(options),
            "outputSchema": exec_output_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
        },
        {
            "name": "write_stdin",
            "title": "Type into a session, collect its output",
            "description": WRITE_STDIN,
            "inputSchema": {
                "type": "object",
                "properties": {
                    "session_id": session_id_schema(),
                    "chars": {"type": "string", "default": "", "description": "What to type (\"\" to only poll)."},
                    "yield_time_ms": {"type": "integer", "minimum": 0, "maximum": MAX_YIELD_MS, "default": 250, "description": "Wait this long at most for output or the end."}
                },
                "required": ["session_id"],
                "additionalProperties": false
            },
            "outputSchema": exec_output_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
        },
        {
            "name": "exec_control",
            "title": "Keep alive, interrupt or end a session",
            "description": EXEC_CONTROL,
            "inputSchema": control_input_schema(),
            "outputSchema": control_output,
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false}
        },
        {
            "name": "list_exec_sessions",
            "title": "List command sessions",
            "description": LIST_SESSIONS,
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
            "outputSchema": list_output_schema(),
            "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }
    ])
}
