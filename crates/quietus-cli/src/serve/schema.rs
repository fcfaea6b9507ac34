//! The `serve` protocol, machine-readably: `quietus serve --schema` prints this JSON Schema
//! (draft 2020-12) document, checked in at `docs/serve.schema.json`. Every method with its
//! params and result, every notification, every error code and `kind`, and the enums
//! (`Outcome`, `StallKind`, `Stream`, `State`, `Source`) under `$defs`. Clients generate their
//! types from it (TypeScript) or are tested against it (the Python package).
//!
//! The enums' values come from the library's own lists (`Outcome::NAMES`, `StallKind::ALL`,
//! `ActivitySource::ALL`…) and `process/start`'s settings from the settings table, so a value
//! added there is in the schema; a test fails when the checked-in file is not this output.

use quietus::diagnosis::StallKind;
use quietus::{ActivitySource, Outcome, SessionState, Stream};
use serde_json::{Map, Value, json};

use crate::jsonrpc::protocol;
use crate::settings::{self, Surface, controls};

/// Every error code, by name.
pub(crate) const ERROR_CODES: &[(&str, i64)] = &[
    ("parse_error", protocol::PARSE_ERROR),
    ("invalid_request", protocol::INVALID_REQUEST),
    ("method_not_found", protocol::METHOD_NOT_FOUND),
    ("invalid_params", protocol::INVALID_PARAMS),
    ("internal_error", protocol::INTERNAL_ERROR),
    ("spawn_failed", protocol::SPAWN_FAILED),
    ("duplicate_process", protocol::DUPLICATE_PROCESS),
    ("too_many_processes", protocol::TOO_MANY_PROCESSES),
    ("unknown_process", protocol::UNKNOWN_PROCESS),
    ("stdin_backlog", protocol::STDIN_BACKLOG),
];

/// The `data.kind` of a -32000 (spawn failed): the step that failed.
pub(crate) const SPAWN_FAILED_KINDS: &[&str] = &[
    "not_found",
    "program",
    "working_dir",
    "home",
    "log_dir",
    "terminal",
    "pipe",
    "thread",
    "other",
];

/// The methods: name, the `$defs` prefix of their params and result, description.
pub(crate) const METHODS: &[(&str, &str, &str)] = &[
    (
        "initialize",
        "Initialize",
        "The server's name, version and capabilities (optional for clients).",
    ),
    (
        "process/start",
        "ProcessStart",
        "Starts a supervised process under a name of the client's choosing; process/started follows the answer.",
    ),
    (
        "process/write",
        "ProcessWrite",
        "Writes bytes (base64 `data`) or UTF-8 `text` to the process's stdin; answered once the bytes were taken, in request order.",
    ),
    (
        "process/closeStdin",
        "ProcessCloseStdin",
        "Closes the process's stdin after the writes before it (a terminal gets its end-of-file character).",
    ),
    (
        "process/resize",
        "ProcessResize",
        "Resizes the process's terminal.",
    ),
    (
        "process/terminate",
        "ProcessTerminate",
        "Ends the process's tree: its own ladder, a graceful one with its own timeout, or `force` (KILL now).",
    ),
    (
        "process/wait",
        "ProcessWait",
        "Waits for the process's end (or `timeoutMs`); answers the command's report in camelCase.",
    ),
    (
        "process/snapshot",
        "ProcessSnapshot",
        "The output kept so far (head and tail, base64) and whether it still runs.",
    ),
    (
        "process/control",
        "ProcessControl",
        "Keepalive, Ctrl-C, terminate, force-kill or a new idle timeout.",
    ),
    (
        "process/list",
        "ProcessList",
        "Every process the server still holds, as objects and as one-line summaries.",
    ),
];

/// The notifications: name, `$defs` name of their params, description.
pub(crate) const NOTIFICATIONS: &[(&str, &str, &str)] = &[
    (
        "process/started",
        "ProcessStartedParams",
        "The process runs, with its pid.",
    ),
    (
        "process/output",
        "ProcessOutputParams",
        "A chunk of output (base64), throttled; `truncated` when chunks were dropped for a slow client.",
    ),
    (
        "process/activity",
        "ProcessActivityParams",
        "A source saw activity (throttled per source).",
    ),
    (
        "process/idleWarning",
        "ProcessIdleWarningParams",
        "Quiet for most of the idle timeout: `leftMs` before it is ended.",
    ),
    (
        "process/inputWait",
        "ProcessInputWaitParams",
        "The whole tree has waited on input for `waitedMs`, every source quiet.",
    ),
    (
        "process/observed",
        "ProcessObservedParams",
        "Observe mode: quietus would have ended the process now (`outcome`, `why`, the diagnosis); it runs on.",
    ),
    (
        "process/exited",
        "ProcessExitedParams",
        "The process ended: its outcome, exit code or signal.",
    ),
    (
        "process/closed",
        "ProcessClosedParams",
        "The last notification of the process.",
    ),
];

fn string() -> Value {
    json!({"type": "string"})
}
fn integer() -> Value {
    json!({"type": "integer"})
}
fn nullable(t: &str) -> Value {
    json!({"type": [t, "null"]})
}
fn def(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}
fn enumeration(values: impl IntoIterator<Item = impl Into<String>>) -> Value {
    json!({"enum": values.into_iter().map(Into::into).collect::<Vec<String>>()})
}

/// An object with these properties, those in `required` required, no other (`open`: others
/// allowed).
fn object(properties: Value, required: &[&str], open: bool) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": open,
    })
}

/// A params object with `processId` and these properties.
fn with_process_id(mut properties: Value, required: &[&str]) -> Value {
    properties["processId"] = def("ProcessId");
    let mut all = vec!["processId"];
    all.extend_from_slice(required);
    object(properties, &all, false)
}

/// Every notification's params: the process's id, the context given at the start, and these.
fn notification(mut properties: Value, required: &[&str]) -> Value {
    properties["processId"] = def("ProcessId");
    properties["context"] =
        json!({"type": "object", "description": "process/start's `context`, when given."});
    let mut all = vec!["processId"];
    all.extend_from_slice(required);
    object(properties, &all, false)
}

/// The values of each enum.
fn enums(defs: &mut Map<String, Value>) {
    defs.insert(
        "Outcome".into(),
        enumeration(Outcome::NAMES.iter().copied()),
    );
    defs.insert(
        "StallKind".into(),
        enumeration(StallKind::ALL.iter().map(|k| k.name())),
    );
    let streams = [
        Stream::Stdout,
        Stream::Stderr,
        Stream::Combined,
        Stream::Terminal,
    ];
    defs.insert(
        "Stream".into(),
        enumeration(streams.iter().map(|s| s.name())),
    );
    let states = [
        SessionState::Running,
        SessionState::Grace,
        SessionState::Ended,
    ];
    defs.insert("State".into(), enumeration(states.iter().map(|s| s.name())));
    let mut sources: Vec<Value> = ActivitySource::ALL
        .iter()
        .map(|s| json!({"const": s.name()}))
        .collect();
    sources.push(json!({"type": "string", "description": "a probe's name"}));
    defs.insert(
        "Source".into(),
        json!({"anyOf": sources, "description": "An activity source: a built-in one, or a probe's name."}),
    );
    defs.insert(
        "ErrorKind".into(),
        enumeration(SPAWN_FAILED_KINDS.iter().copied()),
    );
    defs.insert(
        "WriteStatus".into(),
        enumeration(["accepted", "unknown_process", "stdin_closed"]),
    );
}

fn start_params() -> Value {
    let mut properties = json!({
        "argv": {"type": "array", "items": string(), "minItems": 1, "description": "The program and its arguments."},
        "cwd": string(),
        "env": {"type": "object", "additionalProperties": string(), "description": "Variables set on top of the environment."},
        "envMode": enumeration(["inherit", "isolated"]),
        "inheritEnv": {"type": "array", "items": string(), "description": "With envMode isolated: the variables kept (default [\"PATH\"])."},
        "home": {"type": "string", "description": "An isolated home folder."},
        "seed": {"type": "array", "items": object(json!({"from": string(), "to": string()}), &["from", "to"], false)},
        "io": {"oneOf": [
            object(json!({"pipe": object(json!({"stdin": enumeration(["open", "closed"])}), &[], false)}), &["pipe"], false),
            object(json!({"pty": object(json!({"rows": {"type": "integer", "minimum": 1, "maximum": 65535}, "cols": {"type": "integer", "minimum": 1, "maximum": 65535}}), &[], false)}), &["pty"], false)
        ]},
        "logThresholdBytes": {"type": "integer", "minimum": 0, "maximum": 1_u64 << 40, "description": "Bytes of a stream after which it goes to a log too (0: no log)."},
        "context": {"type": "object", "description": "Copied onto every notification of the process."},
    });
    for (key, schema) in settings::serve_properties() {
        properties[key] = schema;
    }
    with_process_id(properties, &["argv"])
}

fn wait_result() -> Value {
    // The command's report in camelCase: its main fields typed, the rest open.
    let properties = json!({
        "processId": def("ProcessId"),
        "running": {"type": "boolean"},
        "outcome": def("Outcome"),
        "exitCode": integer(),
        "signal": nullable("integer"),
        "signalName": nullable("string"),
        "durationMs": integer(),
        "idleTimeoutMs": integer(),
        "hardTimeoutMs": nullable("integer"),
        "diagnosis": {"oneOf": [{"type": "null"}, {
            "type": "object",
            "properties": {"kind": def("StallKind"), "summary": string()},
            "required": ["kind", "summary"]
        }]},
        "pid": nullable("integer"),
        "command": {"type": "array", "items": string()},
        "observed": {"type": "array", "items": object(
            json!({"atMs": integer(), "outcome": def("Outcome"), "why": string()}),
            &["atMs", "outcome", "why"],
            true,
        )},
        "leftovers": {"type": "array", "items": object(
            json!({"pid": integer(), "name": string(), "command": string()}),
            &["pid", "name", "command"],
            true,
        )},
    });
    json!({"oneOf": [
        object(json!({"processId": def("ProcessId"), "running": {"const": true}}), &["processId", "running"], false),
        object(properties, &["processId", "running", "outcome", "exitCode", "durationMs", "observed", "leftovers"], true),
    ]})
}

fn snapshot_result() -> Value {
    let streams = || {
        object(
            json!({"stdout": nullable("integer"), "stderr": nullable("integer"), "terminal": nullable("integer")}),
            &["stdout", "stderr", "terminal"],
            false,
        )
    };
    object(
        json!({
            "processId": def("ProcessId"),
            "running": {"type": "boolean"},
            "exitCode": nullable("integer"),
            "stdout": nullable("string"),
            "stderr": nullable("string"),
            "terminal": nullable("string"),
            "truncated": {"type": "boolean"},
            "omitted": streams(),
            "totalBytes": streams(),
        }),
        &[
            "processId",
            "running",
            "exitCode",
            "stdout",
            "stderr",
            "terminal",
            "truncated",
            "omitted",
            "totalBytes",
        ],
        false,
    )
}

fn control_params() -> Value {
    with_process_id(
        json!({"action": controls::action_schema(Surface::Serve)}),
        &["action"],
    )
}

fn list_result() -> Value {
    let session = object(
        json!({
            "processId": def("ProcessId"),
            "pid": integer(),
            "state": def("State"),
            "uptimeMs": integer(),
            "idleLeftMs": nullable("integer"),
            "bytes": integer(),
            "log": nullable("string"),
            "cmd": string(),
        }),
        &[
            "processId",
            "pid",
            "state",
            "uptimeMs",
            "idleLeftMs",
            "bytes",
            "log",
            "cmd",
        ],
        false,
    );
    object(
        json!({"sessions": {"type": "array", "items": session}, "lines": {"type": "array", "items": string()}}),
        &["sessions", "lines"],
        false,
    )
}

/// `initialize`'s answer: the server and what it can do.
fn initialize_result() -> Value {
    let capabilities = object(
        json!({
            "pty": {"type": "boolean"},
            "maxProcesses": integer(),
            "retainedBytesPerStream": integer(),
            "shutdownGraceMs": integer(),
            "outputNotifications": {"oneOf": [enumeration(["all", "none"]), {"type": "array", "items": string()}]},
            "outputThrottleMs": integer(),
            "outputChunkBytes": integer(),
            "stdinQueue": integer(),
            "encoding": {"const": "base64"},
        }),
        &[
            "pty",
            "maxProcesses",
            "retainedBytesPerStream",
            "shutdownGraceMs",
            "outputNotifications",
            "outputThrottleMs",
            "outputChunkBytes",
            "stdinQueue",
            "encoding",
        ],
        false,
    );
    object(
        json!({
            "serverInfo": object(json!({"name": {"const": "quietus"}, "version": string()}), &["name", "version"], false),
            "capabilities": capabilities,
        }),
        &["serverInfo", "capabilities"],
        false,
    )
}

fn methods(defs: &mut Map<String, Value>) {
    let entries = [
        (
            "InitializeParams",
            object(
                json!({"clientInfo": {}, "protocolVersion": {}, "capabilities": {}}),
                &[],
                false,
            ),
        ),
        ("InitializeResult", initialize_result()),
        ("ProcessStartParams", start_params()),
        (
            "ProcessStartResult",
            object(
                json!({"processId": def("ProcessId"), "pid": integer()}),
                &["processId", "pid"],
                false,
            ),
        ),
        (
            "ProcessWriteParams",
            with_process_id(
                json!({"data": {"type": "string", "contentEncoding": "base64"}, "text": string()}),
                &[],
            ),
        ),
        (
            "ProcessWriteResult",
            object(json!({"status": def("WriteStatus")}), &["status"], false),
        ),
        ("ProcessCloseStdinParams", with_process_id(json!({}), &[])),
        (
            "ProcessCloseStdinResult",
            object(json!({"status": def("WriteStatus")}), &["status"], false),
        ),
    ];
    for (name, schema) in entries {
        defs.insert(name.into(), schema);
    }
}

/// The methods that act on a running process (resize, terminate, wait, snapshot, control,
/// list).
fn process_methods(defs: &mut Map<String, Value>) {
    let entries = [
        (
            "ProcessResizeParams",
            with_process_id(
                json!({"rows": {"type": "integer", "minimum": 1, "maximum": 65535}, "cols": {"type": "integer", "minimum": 1, "maximum": 65535}}),
                &["rows", "cols"],
            ),
        ),
        (
            "ProcessResizeResult",
            status(
                &[
                    "accepted",
                    "unknown_process",
                    "already_terminated",
                    "unsupported",
                    "reject",
                ],
                true,
            ),
        ),
        (
            "ProcessTerminateParams",
            with_process_id(
                json!({"mode": {"oneOf": [
                    {"const": "force"},
                    object(json!({"graceful": object(json!({"timeoutMs": {"type": "integer", "minimum": 0, "maximum": 3_600_000}}), &["timeoutMs"], false)}), &["graceful"], false)
                ]}}),
                &[],
            ),
        ),
        (
            "ProcessTerminateResult",
            status(
                &["accepted", "already_terminated", "unknown_process"],
                false,
            ),
        ),
        (
            "ProcessWaitParams",
            with_process_id(json!({"timeoutMs": {"type": "integer", "minimum": 0}}), &[]),
        ),
        ("ProcessWaitResult", wait_result()),
        ("ProcessSnapshotParams", with_process_id(json!({}), &[])),
        ("ProcessSnapshotResult", snapshot_result()),
        ("ProcessControlParams", control_params()),
        (
            "ProcessControlResult",
            status(
                &["ack", "no_such_session", "already_terminated", "reject"],
                true,
            ),
        ),
        ("ProcessListParams", object(json!({}), &[], false)),
        ("ProcessListResult", list_result()),
    ];
    for (name, schema) in entries {
        defs.insert(name.into(), schema);
    }
}

/// An answer with a `status` of `values` (and a `note` where it has one).
fn status(values: &[&str], note: bool) -> Value {
    let mut properties = json!({"status": enumeration(values.iter().copied())});
    if note {
        properties["note"] = string();
    }
    object(properties, &["status"], false)
}

fn notifications(defs: &mut Map<String, Value>) {
    let entries = [
        (
            "ProcessStartedParams",
            notification(json!({"pid": integer()}), &["pid"]),
        ),
        (
            "ProcessOutputParams",
            notification(
                json!({
                    "seq": integer(),
                    "stream": def("Stream"),
                    "data": {"type": "string", "contentEncoding": "base64"},
                    "truncated": {"type": "boolean"},
                }),
                &["seq", "stream", "data", "truncated"],
            ),
        ),
        (
            "ProcessActivityParams",
            notification(json!({"source": def("Source")}), &["source"]),
        ),
        (
            "ProcessIdleWarningParams",
            notification(json!({"leftMs": integer()}), &["leftMs"]),
        ),
        (
            "ProcessInputWaitParams",
            notification(
                json!({
                    "pid": integer(),
                    "name": string(),
                    "target": string(),
                    "waitedMs": integer(),
                }),
                &["pid", "name", "target", "waitedMs"],
            ),
        ),
        (
            "ProcessObservedParams",
            notification(
                json!({
                    "atMs": integer(),
                    "outcome": def("Outcome"),
                    "why": string(),
                    "idleMs": {"type": ["object", "null"]},
                    "capped": {"type": ["array", "null"]},
                    "diagnosis": {"oneOf": [{"type": "null"}, {
                        "type": "object",
                        "properties": {"kind": def("StallKind"), "summary": string()},
                        "required": ["kind", "summary"]
                    }]},
                }),
                &["atMs", "outcome", "why"],
            ),
        ),
        (
            "ProcessExitedParams",
            notification(
                json!({
                    "outcome": def("Outcome"),
                    "exitCode": nullable("integer"),
                    "signal": nullable("integer"),
                }),
                &["outcome", "exitCode", "signal"],
            ),
        ),
        ("ProcessClosedParams", notification(json!({}), &[])),
    ];
    for (name, schema) in entries {
        defs.insert(name.into(), schema);
    }
}

/// The messages themselves: a response (result or error) and a notification.
fn envelopes(defs: &mut Map<String, Value>) {
    let codes: Vec<i64> = ERROR_CODES.iter().map(|(_, code)| *code).collect();
    defs.insert(
        "ProcessId".into(),
        json!({"type": "string", "description": "The client's name for a process."}),
    );
    defs.insert(
        "Error".into(),
        object(
            json!({
                "code": {"enum": codes},
                "message": string(),
                "data": object(json!({"kind": def("ErrorKind"), "status": {"const": "unknown_process"}}), &[], false),
            }),
            &["code", "message"],
            false,
        ),
    );
}

/// The whole document.
pub(crate) fn schema() -> Value {
    let mut defs = Map::new();
    enums(&mut defs);
    methods(&mut defs);
    process_methods(&mut defs);
    notifications(&mut defs);
    envelopes(&mut defs);
    let methods: Map<String, Value> = METHODS
        .iter()
        .map(|(name, prefix, description)| {
            (
                (*name).to_owned(),
                json!({
                    "params": def(&format!("{prefix}Params")),
                    "result": def(&format!("{prefix}Result")),
                    "description": description,
                }),
            )
        })
        .collect();
    let notifications: Map<String, Value> = NOTIFICATIONS
        .iter()
        .map(|(name, params, description)| {
            (
                (*name).to_owned(),
                json!({"params": def(params), "description": description}),
            )
        })
        .collect();
    let codes: Map<String, Value> = ERROR_CODES
        .iter()
        .map(|(name, code)| ((*name).to_owned(), json!(code)))
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "quietus serve protocol",
        "version": env!("CARGO_PKG_VERSION"),
        "methods": methods,
        "notifications": notifications,
        "errors": {"codes": codes, "kinds": SPAWN_FAILED_KINDS},
        "$defs": defs,
    })
}

/// The document as `serve --schema` prints it (and as `docs/serve.schema.json` holds it).
pub(crate) fn text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).expect("a JSON value prints");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(name: &str) -> Vec<String> {
        let schema = schema();
        schema["$defs"][name]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} is an enum"))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_checked_in_schema_is_the_binarys() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/serve.schema.json");
        if std::env::var_os("QUIETUS_BLESS").is_some() {
            std::fs::write(&path, text()).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == text(),
            "docs/serve.schema.json is not `quietus serve --schema`'s output: rerun with QUIETUS_BLESS=1"
        );
    }

    #[test]
    fn every_enum_value_of_the_library_is_in_the_schema() {
        // Exhaustive matches: a new variant of these fails to compile here until it is
        // named, and the schema takes its values from the same lists.
        let stream = |s: Stream| match s {
            Stream::Stdout | Stream::Stderr | Stream::Combined | Stream::Terminal => s.name(),
        };
        let state = |s: SessionState| match s {
            SessionState::Running | SessionState::Grace | SessionState::Ended => s.name(),
        };
        let streams = values("Stream");
        for s in [
            Stream::Stdout,
            Stream::Stderr,
            Stream::Combined,
            Stream::Terminal,
        ] {
            assert!(streams.contains(&stream(s).to_owned()), "{}", s.name());
        }
        let states = values("State");
        for s in [
            SessionState::Running,
            SessionState::Grace,
            SessionState::Ended,
        ] {
            assert!(states.contains(&state(s).to_owned()));
        }
        let kinds = values("StallKind");
        assert_eq!(kinds.len(), StallKind::ALL.len());
        for kind in StallKind::ALL {
            assert!(kinds.contains(&kind.name().to_owned()), "{}", kind.name());
        }
        assert_eq!(values("Outcome"), Outcome::NAMES);
        assert!(
            kinds.contains(&"awaiting_input".to_owned()) && kinds.contains(&"running".to_owned())
        );
    }

    #[test]
    fn every_method_and_notification_has_its_defs() {
        let schema = schema();
        for (name, prefix, _) in METHODS {
            for part in ["Params", "Result"] {
                assert!(
                    schema["$defs"].get(format!("{prefix}{part}")).is_some(),
                    "{name} {part}"
                );
            }
        }
        for (name, params, _) in NOTIFICATIONS {
            assert!(schema["$defs"].get(*params).is_some(), "{name}");
        }
        // process/start takes the settings table's keys.
        let start = &schema["$defs"]["ProcessStartParams"]["properties"];
        for key in settings::keys(settings::Surface::Serve) {
            assert!(start.get(&key).is_some(), "{key}");
        }
    }
}
