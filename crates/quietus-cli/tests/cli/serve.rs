//! `quietus serve`: a test client drives the real binary over pipes — the method table,
//! every error code, the notification order, many processes at once, a client that vanishes or
//! never reads, the output filter, and the README's Python client.

use crate::support as common;
use crate::support::cli as cli_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::{GENEROUS, Marker, assert_no_leak, poll_until};
use crossbeam_channel::Receiver;
use serde_json::{Value, json};

/// The server's own option variables (a developer's settings never change a test).
const SERVE_VARS: [&str; 6] = [
    "QUIETUS_MAX_PROCESSES",
    "QUIETUS_RETAIN_BYTES",
    "QUIETUS_SHUTDOWN_GRACE",
    "QUIETUS_OUTPUT_NOTIFICATIONS",
    "QUIETUS_OUTPUT_THROTTLE",
    "QUIETUS_LOG_DIR",
];

/// `quietus serve ARGS` for this marker (the children inherit the marker).
fn serve_command(marker: &Marker, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quietus"));
    cmd.arg("serve").args(args);
    cli_support::isolate(&mut cmd, marker);
    for var in SERVE_VARS {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

/// The protocol as `quietus serve --schema` prints it, compiled: every message a [`Client`]
/// reads is validated against it (each answer against its method's result, each error against
/// `Error`, each notification against its params), so every exchange of this suite checks the
/// schema.
struct Schema {
    document: Value,
    validators: std::collections::HashMap<String, jsonschema::Validator>,
}

impl Schema {
    fn get() -> &'static Schema {
        static SCHEMA: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
        SCHEMA.get_or_init(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_quietus"))
                .args(["serve", "--schema"])
                .output()
                .expect("quietus serve --schema runs");
            assert!(out.status.success(), "{out:?}");
            let document: Value = serde_json::from_slice(&out.stdout).expect("the schema is JSON");
            let validators = document["$defs"]
                .as_object()
                .expect("$defs")
                .keys()
                .map(|name| {
                    let mut root = document.clone();
                    root["$ref"] = json!(format!("#/$defs/{name}"));
                    let validator = jsonschema::validator_for(&root)
                        .unwrap_or_else(|e| panic!("$defs/{name} compiles: {e}"));
                    (name.clone(), validator)
                })
                .collect();
            Schema {
                document,
                validators,
            }
        })
    }

    /// The `$defs` name a `{"$ref": "#/$defs/X"}` points to.
    fn target(reference: &Value) -> String {
        let r = reference["$ref"].as_str().expect("a $ref");
        r.trim_start_matches("#/$defs/").to_owned()
    }

    #[track_caller]
    fn check(&self, def: &str, value: &Value, message: &Value) {
        let validator = self
            .validators
            .get(def)
            .unwrap_or_else(|| panic!("the schema has no $defs/{def}"));
        if let Err(e) = validator.validate(value) {
            panic!(
                "a message the schema does not allow ({def}: {e} at {}): {message}",
                e.instance_path()
            );
        }
    }

    /// Checks one message from the server; `method` is the method of its request, if known.
    #[track_caller]
    fn check_message(&self, message: &Value, method: Option<&str>) {
        if let Some(name) = message.get("method").and_then(Value::as_str) {
            let entry = &self.document["notifications"][name];
            assert!(
                entry.is_object(),
                "a notification the schema lacks: {message}"
            );
            self.check(&Self::target(&entry["params"]), &message["params"], message);
        } else if let Some(error) = message.get("error") {
            self.check("Error", error, message);
        } else if let Some(result) = message.get("result") {
            let method = method.unwrap_or_else(|| panic!("an answer to no request: {message}"));
            let entry = &self.document["methods"][method];
            assert!(entry.is_object(), "a method the schema lacks: {method}");
            self.check(&Self::target(&entry["result"]), result, message);
        } else {
            panic!("neither a notification nor an answer: {message}");
        }
    }
}

/// A client of a running `quietus serve`.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Every message read so far, in order.
    seen: Vec<Value>,
    next_id: u64,
    /// The method of each request sent with an id (to check its answer against the schema).
    methods: std::collections::HashMap<String, String>,
}

impl Client {
    fn start(marker: &Marker, args: &[&str]) -> Client {
        let child = serve_command(marker, args)
            .spawn()
            .expect("the server starts");
        Client::from_child(child)
    }

    /// The client of a server started by the caller (its stdin and stdout piped).
    fn from_child(mut child: Child) -> Client {
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = crossbeam_channel::unbounded();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the server wrote a line that is not JSON ({e}): {line:?}")
                });
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Client {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            next_id: 0,
            methods: std::collections::HashMap::new(),
        }
    }

    fn send_line(&mut self, line: &str) {
        // (Several requests may go in one write, a line each.)
        for request in line.lines() {
            if let Ok(request) = serde_json::from_str::<Value>(request)
                && let (Some(id), Some(method)) = (request.get("id"), request["method"].as_str())
            {
                self.methods.insert(id.to_string(), method.to_owned());
            }
        }
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(line.as_bytes()).expect("the server reads");
        stdin.write_all(b"\n").expect("the server reads");
        stdin.flush().expect("the server reads");
    }

    /// The first message (seen or to come) matching `pred`, within `GENEROUS`.
    #[track_caller]
    fn find(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|v| pred(v)) {
            return found.clone();
        }
        let deadline = Instant::now() + GENEROUS;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(value) => {
                    let method = value
                        .get("id")
                        .and_then(|id| self.methods.get(&id.to_string()));
                    Schema::get().check_message(&value, method.map(String::as_str));
                    self.seen.push(value.clone());
                    if pred(&value) {
                        return value;
                    }
                }
                Err(_) => panic!("no {what} within {GENEROUS:?}; seen: {:#?}", self.seen),
            }
        }
    }

    /// Sends a request; returns the whole answer.
    #[track_caller]
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&request.to_string());
        let answer = self.find(&format!("answer to {method} #{id}"), |v| {
            v["id"] == json!(id) && v.get("method").is_none()
        });
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        answer
    }

    /// A request that must succeed: its result.
    #[track_caller]
    fn ok(&mut self, method: &str, params: Value) -> Value {
        let answer = self.call(method, params);
        assert!(answer.get("error").is_none(), "{method} failed: {answer}");
        answer["result"].clone()
    }

    /// A request that must fail: (code, message).
    #[track_caller]
    fn err(&mut self, method: &str, params: Value) -> (i64, String) {
        let answer = self.call(method, params);
        let error = &answer["error"];
        let code = error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {answer}"));
        (
            code,
            error["message"].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// Waits for `process/closed` of `process_id`; returns that process's notifications.
    #[track_caller]
    fn until_closed(&mut self, process_id: &str) -> Vec<Value> {
        self.find(&format!("process/closed of {process_id}"), |v| {
            v["method"] == "process/closed" && v["params"]["processId"] == process_id
        });
        self.notifications(process_id)
    }

    /// The notifications of `process_id` seen so far.
    fn notifications(&self, process_id: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|v| v.get("method").is_some() && v["params"]["processId"] == process_id)
            .cloned()
            .collect()
    }

    /// Closes the server's stdin and waits for it to end within `GENEROUS`.
    #[track_caller]
    fn hang_up(mut self) -> ExitStatus {
        drop(self.stdin.take());
        wait_exit(&mut self.child)
    }
}

#[track_caller]
fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + GENEROUS;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("the server did not end within {GENEROUS:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// The bytes of a process's output notifications, in order, for one stream.
fn output_of(notes: &[Value], stream: &str) -> Vec<u8> {
    notes
        .iter()
        .filter(|n| n["method"] == "process/output" && n["params"]["stream"] == stream)
        .flat_map(|n| {
            BASE64
                .decode(n["params"]["data"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

fn sh(marker: &Marker, script: &str) -> Value {
    json!(marker.sh_words(script))
}

#[test]
fn serve_method_table() {
    let marker = Marker::new("serve-methods");
    let mut client = Client::start(&marker, &[]);
    let init = client.ok("initialize", json!({}));
    assert_eq!(init["serverInfo"]["name"], "quietus");
    assert_eq!(init["capabilities"]["pty"], true);
    assert_eq!(init["capabilities"]["maxProcesses"], 1000);

    let started = client.ok(
        "process/start",
        json!({"processId": "cat-1", "argv": ["cat"], "io": {"pipe": {"stdin": "open"}},
               "idleTimeoutMs": 60000, "context": {"runId": "r7", "toolCallId": 3}}),
    );
    assert_eq!(started["processId"], "cat-1");
    let pid = started["pid"].as_u64().expect("a pid");
    assert_eq!(
        client.ok(
            "process/write",
            json!({"processId": "cat-1", "text": "hello "})
        )["status"],
        "accepted"
    );
    let data = BASE64.encode(b"world\n");
    assert_eq!(
        client.ok("process/write", json!({"processId": "cat-1", "data": data}))["status"],
        "accepted"
    );
    client.find("the echoed output", |v| {
        v["method"] == "process/output"
            && output_of(std::slice::from_ref(v), "stdout").ends_with(b"world\n")
    });
    let snapshot = client.ok("process/snapshot", json!({"processId": "cat-1"}));
    assert_eq!(snapshot["running"], true);
    assert_eq!(snapshot["exitCode"], Value::Null);
    assert_eq!(
        BASE64.decode(snapshot["stdout"].as_str().unwrap()).unwrap(),
        b"hello world\n"
    );
    assert_eq!(snapshot["truncated"], false);
    assert_eq!(snapshot["omitted"]["stdout"], 0);

    let list = client.ok("process/list", json!({}));
    assert_eq!(list["sessions"][0]["processId"], "cat-1");
    assert_eq!(list["sessions"][0]["pid"], pid);
    assert_eq!(list["sessions"][0]["state"], "running");
    assert_eq!(list["sessions"][0]["bytes"], 12);
    assert_eq!(list["sessions"][0]["cmd"], "cat");
    let line = list["lines"][0].as_str().unwrap();
    assert!(
        line.starts_with("#01 running uptime=") && line.ends_with(" bytes=12 log=- cmd=cat"),
        "{line}"
    );

    steer(&mut client);
    wait_and_notify(&mut client);
    after_the_end(&mut client, &marker);
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// Controls and resize on the running `cat-1`.
fn steer(client: &mut Client) {
    let control = |client: &mut Client, action: Value| {
        client.ok(
            "process/control",
            json!({"processId": "cat-1", "action": action}),
        )
    };
    assert_eq!(
        control(client, json!({"type": "keepalive"}))["status"],
        "ack"
    );
    assert_eq!(
        control(
            client,
            json!({"type": "keepalive", "extendTimeoutMs": 90000})
        )["status"],
        "ack"
    );
    assert_eq!(
        control(
            client,
            json!({"type": "set_idle_timeout", "timeoutMs": 120000})
        )["status"],
        "ack"
    );
    let list = client.ok("process/list", json!({}));
    assert!(
        list["sessions"][0]["idleLeftMs"].as_u64().unwrap() > 90_000,
        "{list}"
    );
    let reject = control(client, json!({"type": "set_idle_timeout", "timeoutMs": 0}));
    assert_eq!(reject["status"], "reject");
    assert!(
        reject["note"].as_str().unwrap().contains("idle_timeout"),
        "{reject}"
    );
    // A keepalive with an invalid new timeout: rejected the same way, the timeout unchanged.
    let reject = control(client, json!({"type": "keepalive", "extendTimeoutMs": 0}));
    assert_eq!(reject["status"], "reject", "{reject}");
    assert!(
        reject["note"].as_str().unwrap().contains("idle_timeout"),
        "{reject}"
    );
    let list = client.ok("process/list", json!({}));
    assert!(
        list["sessions"][0]["idleLeftMs"].as_u64().unwrap() > 90_000,
        "{list}"
    );
    assert_eq!(
        client.ok(
            "process/resize",
            json!({"processId": "cat-1", "rows": 5, "cols": 5})
        )["status"],
        "unsupported"
    );
}

/// `cat-1` waited for, its notifications checked.
fn wait_and_notify(client: &mut Client) {
    let running = client.ok(
        "process/wait",
        json!({"processId": "cat-1", "timeoutMs": 50}),
    );
    assert_eq!(running, json!({"processId": "cat-1", "running": true}));
    assert_eq!(
        client.ok("process/closeStdin", json!({"processId": "cat-1"}))["status"],
        "accepted"
    );
    let result = client.ok("process/wait", json!({"processId": "cat-1"}));
    assert_eq!(result["running"], false);
    assert_eq!(result["outcome"], "exited");
    assert_eq!(result["exitCode"], 0);
    assert_eq!(result["bytes"]["stdout"], 12);
    assert_eq!(result["command"], json!(["cat"]));
    assert_eq!(
        result["idleTimeoutMs"], 120000,
        "the report gives the idle timeout in force at the end"
    );
    assert!(
        result["idleMs"]["output"].is_u64() && result["ladder"]["signalsSent"] == json!([]),
        "{result}"
    );

    let notes = client.until_closed("cat-1");
    assert!(
        notes
            .iter()
            .all(|n| n["params"]["context"] == json!({"runId": "r7", "toolCallId": 3})),
        "{notes:#?}"
    );
    let exited: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "process/exited")
        .collect();
    assert_eq!(exited.len(), 1);
    assert_eq!(exited[0]["params"]["outcome"], "exited");
    assert_eq!(exited[0]["params"]["exitCode"], 0);
    assert_eq!(exited[0]["params"]["signal"], Value::Null);
}

/// Answers for an ended process and for unknown ones.
fn after_the_end(client: &mut Client, marker: &Marker) {
    let control = |client: &mut Client, action: Value| {
        client.ok(
            "process/control",
            json!({"processId": "cat-1", "action": action}),
        )
    };
    // After the end.
    assert_eq!(
        client.ok(
            "process/write",
            json!({"processId": "cat-1", "text": "late"})
        )["status"],
        "stdin_closed"
    );
    assert_eq!(
        control(client, json!({"type": "terminate"}))["status"],
        "already_terminated"
    );
    assert_eq!(
        client.ok("process/terminate", json!({"processId": "cat-1"}))["status"],
        "already_terminated"
    );
    assert_eq!(
        client.ok("process/list", json!({}))["sessions"][0]["state"],
        "ended"
    );
    // Unknown processes.
    assert_eq!(
        client.ok("process/write", json!({"processId": "nope", "text": "x"}))["status"],
        "unknown_process"
    );
    assert_eq!(
        client.ok("process/closeStdin", json!({"processId": "nope"}))["status"],
        "unknown_process"
    );
    assert_eq!(
        client.ok("process/terminate", json!({"processId": "nope"}))["status"],
        "unknown_process"
    );
    assert_eq!(
        client.ok(
            "process/resize",
            json!({"processId": "nope", "rows": 1, "cols": 1})
        )["status"],
        "unknown_process"
    );
    assert_eq!(
        client.ok(
            "process/control",
            json!({"processId": "nope", "action": {"type": "force_kill"}})
        )["status"],
        "no_such_session"
    );
    // A closed stdin from the start.
    client.ok(
        "process/start",
        json!({"processId": "quiet", "argv": sh(marker, "exec cat")}),
    );
    assert_eq!(
        client.ok("process/write", json!({"processId": "quiet", "text": "x"}))["status"],
        "stdin_closed"
    );
    assert_eq!(
        client.ok("process/wait", json!({"processId": "quiet"}))["exitCode"],
        0,
        "cat read /dev/null"
    );
}

#[test]
fn serve_terminate_modes_and_ctrl_c() {
    let marker = Marker::new("serve-terminate");
    let mut client = Client::start(&marker, &[]);
    let sleeper = "echo ready; exec sleep 1000";
    let stubborn = "trap '' TERM; echo ready; while :; do sleep 1; done";
    let interruptible = "trap 'echo got-int; exit 3' INT; echo ready; while :; do sleep 0.1; done";
    for (name, script) in [
        ("plain", sleeper),
        ("force", sleeper),
        ("graceful", stubborn),
        ("ctrl-c", interruptible),
    ] {
        client.ok(
            "process/start",
            json!({"processId": name, "argv": sh(&marker, script), "idleTimeoutMs": 600000}),
        );
        client.find("ready", |v| {
            v["method"] == "process/output" && v["params"]["processId"] == name
        });
    }
    assert_eq!(
        client.ok("process/terminate", json!({"processId": "plain"}))["status"],
        "accepted"
    );
    assert_eq!(
        client.ok(
            "process/terminate",
            json!({"processId": "force", "mode": "force"})
        )["status"],
        "accepted"
    );
    let graceful = json!({"processId": "graceful", "mode": {"graceful": {"timeoutMs": 200}}});
    assert_eq!(
        client.ok("process/terminate", graceful)["status"],
        "accepted"
    );
    let ctrl_c = json!({"processId": "ctrl-c", "action": {"type": "send_ctrl_c"}});
    assert_eq!(client.ok("process/control", ctrl_c)["status"], "ack");

    let plain = client.ok("process/wait", json!({"processId": "plain"}));
    assert_eq!(
        (plain["outcome"].as_str(), plain["signal"].as_i64()),
        (Some("terminated"), Some(15)),
        "{plain}"
    );
    let force = client.ok("process/wait", json!({"processId": "force"}));
    assert_eq!(
        (force["outcome"].as_str(), force["signal"].as_i64()),
        (Some("terminated"), Some(9)),
        "{force}"
    );
    let graceful = client.ok("process/wait", json!({"processId": "graceful"}));
    assert_eq!(
        graceful["ladder"]["signalsSent"],
        json!(["TERM", "KILL"]),
        "{graceful}"
    );
    assert_eq!(graceful["ladder"]["escalated"], true);
    let ctrl_c = client.ok("process/wait", json!({"processId": "ctrl-c"}));
    assert_eq!(
        (ctrl_c["outcome"].as_str(), ctrl_c["exitCode"].as_i64()),
        (Some("exited"), Some(3)),
        "{ctrl_c}"
    );
    let exited = client.find("exited of force", |v| {
        v["method"] == "process/exited" && v["params"]["processId"] == "force"
    });
    assert_eq!(exited["params"]["signal"], 9);
    assert_eq!(exited["params"]["exitCode"], Value::Null);
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

#[cfg(target_os = "linux")]
#[test]
fn serve_terminal_sessions_resize() {
    let marker = Marker::new("serve-pty");
    let mut client = Client::start(&marker, &[]);
    let script = "stty size; read line; stty size; echo \"got $line\"";
    client.ok("process/start", json!({"processId": "tty", "argv": sh(&marker, script), "io": {"pty": {"rows": 30, "cols": 100}}}));
    client.find("the first size", |v| {
        v["method"] == "process/output"
            && String::from_utf8_lossy(&output_of(std::slice::from_ref(v), "terminal"))
                .contains("30 100")
    });
    assert_eq!(
        client.ok(
            "process/resize",
            json!({"processId": "tty", "rows": 40, "cols": 120})
        )["status"],
        "accepted"
    );
    assert_eq!(
        client.ok(
            "process/write",
            json!({"processId": "tty", "text": "typed\n"})
        )["status"],
        "accepted"
    );
    let result = client.ok("process/wait", json!({"processId": "tty"}));
    assert_eq!(result["exitCode"], 0, "{result}");
    let snapshot = client.ok("process/snapshot", json!({"processId": "tty"}));
    let terminal = String::from_utf8_lossy(
        &BASE64
            .decode(snapshot["terminal"].as_str().unwrap())
            .unwrap(),
    )
    .into_owned();
    assert!(
        terminal.contains("30 100\r\n") && terminal.ends_with("40 120\r\ngot typed\r\n"),
        "{terminal:?}"
    );
    assert_eq!(snapshot["stdout"], Value::Null);
    assert_eq!(snapshot["running"], false);
    assert_eq!(snapshot["exitCode"], 0);
    let err = client.err(
        "process/resize",
        json!({"processId": "tty", "rows": 0, "cols": 80}),
    );
    assert_eq!(err.0, -32602);
    assert!(
        err.1
            .contains("rows: 0 is out of range; it accepts a whole number from 1 to 65535"),
        "{}",
        err.1
    );
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// Sends a line whose error answer has no id (none could be read); its code.
#[track_caller]
fn raw_error(client: &mut Client, line: &str) -> i64 {
    client
        .seen
        .retain(|v| !(v.get("error").is_some() && v["id"].is_null()));
    client.send_line(line);
    let answer = client.find(&format!("the answer to {line}"), |v| {
        v.get("error").is_some() && v["id"].is_null()
    });
    answer["error"]["code"].as_i64().unwrap()
}

#[test]
fn serve_every_error_code() {
    let marker = Marker::new("serve-errors");
    let mut client = Client::start(&marker, &["--max-processes", "1"]);
    assert_eq!(raw_error(&mut client, "{\"id\": 1, \"method\": "), -32700);
    assert_eq!(raw_error(&mut client, "not json at all"), -32700);
    assert_eq!(
        raw_error(&mut client, "[{\"id\":1,\"method\":\"process/list\"}]"),
        -32600
    );
    assert_eq!(raw_error(&mut client, "\"process/list\""), -32600);
    assert_eq!(
        raw_error(
            &mut client,
            "{\"id\": {\"x\": 1}, \"method\": \"process/list\"}"
        ),
        -32600
    );
    // With a readable id, the error carries it.
    client.send_line("{\"id\": \"m\", \"params\": {}}");
    let missing = client.find("missing method", |v| v["id"] == "m");
    assert_eq!(missing["error"]["code"], -32600);
    client.send_line("{\"jsonrpc\": \"1.0\", \"id\": \"v\", \"method\": \"process/list\"}");
    assert_eq!(
        client.find("bad version", |v| v["id"] == "v")["error"]["code"],
        -32600
    );
    client.send_line("{\"id\": \"p\", \"method\": \"process/list\", \"params\": [1]}");
    assert_eq!(
        client.find("positional params", |v| v["id"] == "p")["error"]["code"],
        -32602
    );

    bad_params(&mut client);
    server_errors(&mut client, &marker);
    stdin_backlog(&mut client);
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// -32601 and -32602.
#[allow(clippy::too_many_lines)] // a test or bench scenario: the 80-line rule is for the library and the command
fn bad_params(client: &mut Client) {
    assert_eq!(client.err("process/explode", json!({})).0, -32601);
    // The field as the client wrote it, in its unit; a value of the wrong type is not "out of
    // range"; null only where the schema allows it; a NUL byte is -32602 in argv as in env
    // (issue 51, point 8).
    let cases: [(Value, &str); 17] = [
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeoutMs": true}),
            "idleTimeoutMs: true is not a whole number; it accepts a whole number from 1 to",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeoutMs": 1000.5}),
            "idleTimeoutMs: 1000.5 is not a whole number",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeoutMs": 0.0}),
            "idleTimeoutMs: 0.0 is out of range; it accepts a whole number from 1 to",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeoutMs": null}),
            "idleTimeoutMs: null is not a whole number",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "observe": null}),
            "observe: null is not valid; it accepts true or false",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "gracePeriodMs": -1}),
            "gracePeriodMs: -1 is out of range; it accepts a whole number from 0 to",
        ),
        (
            json!({"processId": "a", "argv": ["tr\0ue"]}),
            "argv: has a word with a NUL byte",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "env": {"A": "b\0"}}),
            "env.A: names must be non-empty without '=' or NUL",
        ),
        (json!({"argv": ["true"]}), "processId: missing (required)"),
        (
            json!({"processId": 7, "argv": ["true"]}),
            "processId: 7 is not a process id",
        ),
        (json!({"processId": "a"}), "argv: missing or empty"),
        (
            json!({"processId": "a", "argv": []}),
            "argv: missing or empty",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeoutMs": 0}),
            "idleTimeoutMs: 0 is out of range; it accepts a whole number from 1 to 604800000",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeoutMs": "5s"}),
            "idleTimeoutMs: \"5s\" is not a whole number; it accepts a whole number",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "io": "tty"}),
            "io: \"tty\" is not an io mode; it accepts",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "envMode": "clean"}),
            "envMode: \"clean\" is not an environment mode",
        ),
        (
            json!({"processId": "a", "argv": ["true"], "idleTimeout": 5}),
            "unknown field \"idleTimeout\"",
        ),
    ];
    let schema = Schema::get();
    let start_params = Schema::target(&schema.document["methods"]["process/start"]["params"]);
    for (params, wanted) in cases {
        let (code, message) = client.err("process/start", params.clone());
        assert_eq!(code, -32602, "{params}: {message}");
        // The published schema agrees (a NUL byte and a nonexistent program aside: no JSON
        // Schema can say them).
        if !params.to_string().contains("\\u0000") {
            assert!(
                !schema.validators[&start_params].is_valid(&params),
                "the schema accepts what the server refuses: {params}: {message}"
            );
        }
        assert!(
            message.contains(wanted),
            "{params}: {message:?} lacks {wanted:?}"
        );
    }
    let (code, message) = client.err(
        "process/control",
        json!({"processId": "a", "action": {"type": "explode"}}),
    );
    assert_eq!(code, -32602);
    assert!(
        message.contains("action: ") && message.contains("send_ctrl_c"),
        "{message}"
    );
    assert_eq!(
        client
            .err("process/write", json!({"processId": "a", "data": "!!"}))
            .0,
        -32602
    );
    assert_eq!(
        client
            .err(
                "process/terminate",
                json!({"processId": "a", "mode": "softly"})
            )
            .0,
        -32602
    );
}

/// -32000 to -32003.
fn server_errors(client: &mut Client, marker: &Marker) {
    let missing = client.call(
        "process/start",
        json!({"processId": "a", "argv": ["/nonexistent/program-x"]}),
    );
    assert_eq!(missing["error"]["code"], -32000, "{missing}");
    assert_eq!(missing["error"]["data"]["kind"], "not_found");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("program-x"),
        "{missing}"
    );

    // A missing `cwd` is the working directory's failure, as the README lists it.
    let no_dir = client.call(
        "process/start",
        json!({"processId": "a", "argv": ["true"], "cwd": "/nonexistent/dir-x"}),
    );
    assert_eq!(no_dir["error"]["code"], -32000, "{no_dir}");
    assert_eq!(no_dir["error"]["data"]["kind"], "working_dir", "{no_dir}");
    assert!(
        no_dir["error"]["message"]
            .as_str()
            .unwrap()
            .contains("dir-x"),
        "{no_dir}"
    );

    client.ok("process/start", json!({"processId": "a", "argv": sh(marker, "exec sleep 1000"), "io": {"pipe": {"stdin": "open"}}}));
    let (code, message) = client.err("process/start", json!({"processId": "a", "argv": ["true"]}));
    assert_eq!(code, -32001, "{message}");
    let (code, message) = client.err("process/start", json!({"processId": "b", "argv": ["true"]}));
    assert_eq!(code, -32002, "{message}");
    assert!(
        message.contains("limit (--max-processes) is 1"),
        "{message}"
    );
    let (code, message) = client.err("process/wait", json!({"processId": "zz"}));
    assert_eq!(code, -32003);
    assert!(message.contains("unknown_process"), "{message}");
    assert_eq!(
        client.err("process/snapshot", json!({"processId": "zz"})).0,
        -32003
    );
}

/// -32004, and the server is fine after it.
fn stdin_backlog(client: &mut Client) {
    // -32004: a child that never reads its stdin, and more writes than fit in the queues.
    let chunk = BASE64.encode(vec![b'x'; 256 * 1024]);
    let first = client.next_id + 1;
    for _ in 0..400 {
        client.next_id += 1;
        let request = json!({"id": client.next_id, "method": "process/write", "params": {"processId": "a", "data": chunk}});
        client.send_line(&request.to_string());
    }
    let backlog = client.find("a stdin backlog error", |v| v["error"]["code"] == -32004);
    assert!(
        backlog["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("stdin_backlog: "),
        "{backlog}"
    );
    assert!(backlog["id"].as_u64().unwrap() >= first);
    // The server and its process are fine.
    assert_eq!(
        client.ok("process/list", json!({}))["sessions"][0]["state"],
        "running"
    );
}

#[test]
fn serve_write_to_a_child_that_never_reads_times_out_with_32004() {
    // One write at a time, each answered before the next is sent: the server's own queue
    // never fills, the library's does (the child never reads), and the write that finds it
    // full is answered after the library's 5 s wait with -32004.
    let marker = Marker::new("serve-stdin-wait");
    let mut client = Client::start(&marker, &[]);
    client.ok(
        "process/start",
        json!({"processId": "deaf", "argv": sh(&marker, "exec sleep 1000"), "io": {"pipe": {"stdin": "open"}}}),
    );
    let chunk = BASE64.encode(vec![b'y'; 64 * 1024]);
    let mut accepted = 0;
    let (code, message) = loop {
        assert!(
            accepted < 1000,
            "every write accepted: the queue never filled"
        );
        let answer = client.call("process/write", json!({"processId": "deaf", "data": chunk}));
        match answer.get("error") {
            None => {
                assert_eq!(answer["result"]["status"], "accepted", "{answer}");
                accepted += 1;
            }
            Some(error) => {
                break (
                    error["code"].as_i64().expect("a code"),
                    error["message"].as_str().unwrap_or_default().to_owned(),
                );
            }
        }
    };
    assert_eq!(code, -32004, "{message}");
    assert!(
        message.starts_with("stdin_backlog: ") && message.contains("stayed full for 5s"),
        "the library's timeout, not the server's queue: {message}"
    );
    // The library queues 64 writes before the child would have to read.
    assert!(accepted >= 64, "{accepted} writes accepted first");
    assert_eq!(
        client.ok("process/list", json!({}))["sessions"][0]["state"],
        "running"
    );
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

#[test]
fn serve_notification_order_per_process() {
    let marker = Marker::new("serve-order");
    let mut client = Client::start(&marker, &["--output-throttle", "10ms"]);
    let script = "for i in 1 2 3 4 5; do echo out-$i; echo err-$i >&2; sleep 0.05; done; exit 4";
    for name in ["p1", "p2", "p3"] {
        client.ok(
            "process/start",
            json!({"processId": name, "argv": sh(&marker, script)}),
        );
    }
    for name in ["p1", "p2", "p3"] {
        let notes = client.until_closed(name);
        let methods: Vec<&str> = notes
            .iter()
            .map(|n| n["method"].as_str().unwrap())
            .collect();
        assert_eq!(methods.first(), Some(&"process/started"), "{methods:?}");
        assert_eq!(methods.last(), Some(&"process/closed"), "{methods:?}");
        assert_eq!(
            methods.iter().filter(|m| **m == "process/exited").count(),
            1,
            "{methods:?}"
        );
        assert_eq!(
            methods.iter().filter(|m| **m == "process/started").count(),
            1,
            "{methods:?}"
        );
        let exited = notes
            .iter()
            .find(|n| n["method"] == "process/exited")
            .unwrap();
        assert_eq!(exited["params"]["exitCode"], 4);
        assert_eq!(
            output_of(&notes, "stdout"),
            b"out-1\nout-2\nout-3\nout-4\nout-5\n"
        );
        assert_eq!(
            output_of(&notes, "stderr"),
            b"err-1\nerr-2\nerr-3\nerr-4\nerr-5\n"
        );
        for stream in ["stdout", "stderr"] {
            let seqs: Vec<u64> = notes
                .iter()
                .filter(|n| n["method"] == "process/output" && n["params"]["stream"] == stream)
                .map(|n| n["params"]["seq"].as_u64().unwrap())
                .collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{stream}: {seqs:?}");
            assert!(
                notes.iter().all(|n| n["params"]["truncated"] != true),
                "nothing dropped: {notes:#?}"
            );
        }
    }
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// A process's output and activity notifications all come before its `process/exited`
/// (docs/serve.md): the library sends its last output (the throttle's flush) after its
/// `Exited` event, and the server holds `process/exited` until that output is sent. Twenty
/// short processes at once, with the default throttle (the last flush at the end of the run).
#[test]
fn serve_output_comes_before_exited_for_every_process() {
    let marker = Marker::new("serve-exited-last");
    let mut client = Client::start(&marker, &[]);
    let names: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let script = format!("echo out-{i}; echo err-{i} >&2; exit 3");
        client.ok(
            "process/start",
            json!({"processId": name, "argv": sh(&marker, &script)}),
        );
    }
    for (i, name) in names.iter().enumerate() {
        let notes = client.until_closed(name);
        let methods: Vec<&str> = notes
            .iter()
            .map(|n| n["method"].as_str().unwrap())
            .collect();
        let exited = methods
            .iter()
            .position(|m| *m == "process/exited")
            .unwrap_or_else(|| panic!("{name}: no process/exited: {methods:?}"));
        assert!(
            methods[exited..]
                .iter()
                .all(|m| *m != "process/output" && *m != "process/activity"),
            "{name}: output or activity after process/exited: {methods:?}"
        );
        assert_eq!(
            &methods[exited..],
            ["process/exited", "process/closed"],
            "{name}"
        );
        assert_eq!(output_of(&notes, "stdout"), format!("out-{i}\n").as_bytes());
        assert_eq!(output_of(&notes, "stderr"), format!("err-{i}\n").as_bytes());
    }
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// A start that arms a large watch (the whole of `/`: walked up to the bound of one
/// session's watches, then refused as too large) does not hold up the server: a
/// `process/list` sent right behind it is answered first, and a request naming the process
/// being started waits for its start (it is found).
#[test]
fn serve_a_start_with_a_large_watch_does_not_hold_up_other_requests() {
    let marker = Marker::new("serve-slow-start");
    let mut client = Client::start(&marker, &[]);
    client.ok(
        "process/start",
        json!({"processId": "quick", "argv": sh(&marker, "sleep 30")}),
    );
    let start = json!({"jsonrpc": "2.0", "id": 100, "method": "process/start", "params": {
        "processId": "large", "argv": sh(&marker, "sleep 30"), "watch": ["/"],
    }});
    let list = json!({"jsonrpc": "2.0", "id": 101, "method": "process/list", "params": {}});
    let snapshot = json!({"jsonrpc": "2.0", "id": 102, "method": "process/snapshot",
        "params": {"processId": "large"}});
    client.send_line(&format!("{start}\n{list}\n{snapshot}"));
    client.find("the start's answer", |v| v["id"] == 100);
    client.find("the snapshot's answer", |v| v["id"] == 102);
    let answers: Vec<u64> = client
        .seen
        .iter()
        .filter(|v| v.get("method").is_none())
        .filter_map(|v| v["id"].as_u64())
        .filter(|id| *id >= 100)
        .collect();
    assert_eq!(
        answers.first(),
        Some(&101),
        "the list waited for the start: {answers:?}"
    );
    let listed = client.seen.iter().find(|v| v["id"] == 101).unwrap();
    let names: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["processId"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["quick"], "{listed}");
    let snapshot = client.seen.iter().find(|v| v["id"] == 102).unwrap();
    assert!(snapshot.get("error").is_none(), "{snapshot}");
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

#[test]
fn serve_fifty_processes_at_once() {
    let marker = Marker::new("serve-fifty");
    let mut client = Client::start(&marker, &[]);
    for i in 0..50 {
        let script = format!("echo start-{i}; sleep 0.5; echo end-{i}");
        client.ok(
            "process/start",
            json!({"processId": format!("p{i}"), "argv": sh(&marker, &script)}),
        );
    }
    let list = client.ok("process/list", json!({}));
    assert_eq!(list["sessions"].as_array().unwrap().len(), 50);
    assert_eq!(list["lines"].as_array().unwrap().len(), 50);
    for i in 0..50 {
        let name = format!("p{i}");
        let notes = client.until_closed(&name);
        assert_eq!(
            output_of(&notes, "stdout"),
            format!("start-{i}\nend-{i}\n").as_bytes(),
            "{name}"
        );
        let result = client.ok("process/wait", json!({"processId": name}));
        assert_eq!(result["exitCode"], 0, "{result}");
    }
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// Three long sleepers, then the client goes away in `how`; the server ends them and exits 0.
fn client_goes_away(name: &str, how: impl FnOnce(&mut Client)) {
    let marker = Marker::new(name);
    let mut client = Client::start(&marker, &["--shutdown-grace", "300ms"]);
    let stubborn = "trap '' TERM; echo ready; while :; do sleep 1; done";
    for (i, script) in [
        "echo ready; exec sleep 1000",
        stubborn,
        "echo ready; sleep 1000 & wait",
    ]
    .iter()
    .enumerate()
    {
        let id = format!("s{i}");
        client.ok(
            "process/start",
            json!({"processId": id, "argv": sh(&marker, script), "gracePeriodMs": 60000}),
        );
        client.find("ready", |v| {
            v["method"] == "process/output" && v["params"]["processId"] == id
        });
    }
    assert!(
        marker.pids().len() >= 4,
        "the server and its processes run: {:?}",
        marker.pids()
    );
    how(&mut client);
    let status = wait_exit(&mut client.child);
    assert!(status.success(), "{status:?}");
    assert_no_leak(&marker);
}

#[test]
fn serve_client_closes_stdin() {
    client_goes_away("serve-eof", |client| drop(client.stdin.take()));
}

#[test]
fn serve_client_vanishes() {
    // Both ends closed, as when the client process dies: the next line the server writes
    // fails (the answer to the request in flight), or its stdin ends.
    client_goes_away("serve-vanish", |client| {
        let stdin = client.stdin.as_mut().unwrap();
        let _ = stdin.write_all(b"{\"id\": 99, \"method\": \"process/list\"}\n");
        let (_, rx) = crossbeam_channel::bounded(0);
        client.lines = rx; // the reader thread's receiver is dropped with it
        drop(client.stdin.take());
    });
}

#[test]
fn serve_stdout_closed_while_stdin_stays_open() {
    let marker = Marker::new("serve-stdout-gone");
    let mut cmd = serve_command(&marker, &["--shutdown-grace", "300ms"]);
    cmd.stdout(Stdio::null()); // replaced below by a pipe whose read end is closed
    let (reader, writer) = std::io::pipe().expect("a pipe");
    cmd.stdout(writer);
    let mut child = cmd.spawn().expect("the server starts");
    drop(reader);
    let mut stdin = child.stdin.take().unwrap();
    let start = json!({"id": 1, "method": "process/start", "params": {"processId": "x", "argv": marker.sh_words("exec sleep 1000")}});
    // The first answer fails to be written: the server ends the process and exits, while its
    // stdin is still open.
    let _ = stdin.write_all(format!("{start}\n").as_bytes());
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status:?}");
    drop(stdin);
    assert_no_leak(&marker);
}

#[test]
fn serve_sigterm_ends_every_process() {
    client_goes_away("serve-sigterm", |client| {
        let pid = rustix::process::Pid::from_raw(client.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .expect("signal the server");
    });
}

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn serve_client_that_never_reads() {
    let marker = Marker::new("serve-never-reads");
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let done = dir.path().join("done");
    let mut cmd = serve_command(
        &marker,
        &[
            "--output-throttle",
            "0ms",
            "--log-dir",
            logs.to_str().unwrap(),
        ],
    );
    let mut child = cmd.spawn().expect("the server starts");
    let stdout = child.stdout.take().unwrap(); // held, never read (until the end)
    let mut stdin = child.stdin.take().unwrap();
    // 128 MiB of output, and a mark when it is all written.
    let script = format!("head -c 134217728 /dev/zero; touch {}", done.display());
    let start = json!({"id": 1, "method": "process/start", "params": {"processId": "loud", "argv": marker.sh_words(&script), "logThresholdBytes": 0}});
    stdin.write_all(format!("{start}\n").as_bytes()).unwrap();
    let mut peak = 0;
    let finished = poll_until(Duration::from_secs(120), || {
        peak = peak.max(rss_kib(child.id()));
        done.exists()
    });
    assert!(
        finished,
        "the child was slowed down: it did not write 128 MiB within 120 s"
    );
    eprintln!("peak RSS of the server: {peak} KiB");
    assert!(peak < 64 * 1024, "the server's memory grew to {peak} KiB");
    // Reading now: the answer, then notifications, some of them marked as following a drop.
    let (tx, rx) = crossbeam_channel::unbounded();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).unwrap());
        }
    });
    let wait = json!({"id": 2, "method": "process/wait", "params": {"processId": "loud"}});
    stdin.write_all(format!("{wait}\n").as_bytes()).unwrap();
    let mut truncated = false;
    let result = loop {
        let v = rx.recv_timeout(GENEROUS).expect("the server answers");
        truncated |= v["method"] == "process/output" && v["params"]["truncated"] == true;
        if v["id"] == 2 {
            break v;
        }
    };
    assert_eq!(
        result["result"]["bytes"]["stdout"], 134217728u64,
        "{result}"
    );
    assert_eq!(result["result"]["exitCode"], 0);
    while let Ok(v) = rx.recv_timeout(Duration::from_millis(500)) {
        truncated |= v["method"] == "process/output" && v["params"]["truncated"] == true;
    }
    assert!(
        truncated,
        "no output notification said that notifications were dropped"
    );
    drop(stdin);
    assert!(wait_exit(&mut child).success());
    assert_no_leak(&marker);
}

#[test]
fn serve_output_notifications_for_matching_commands_only() {
    let marker = Marker::new("serve-filter");
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("playwright");
    std::fs::write(&program, "#!/bin/sh\necho from-playwright\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut client = Client::start(&marker, &["--output-notifications", "playwright,codex"]);
    let wrapped = json!(["env", "FOO=1", program.to_str().unwrap(), marker.as_str()]);
    client.ok("process/start", json!({"processId": "pw", "argv": wrapped}));
    client.ok(
        "process/start",
        json!({"processId": "other", "argv": sh(&marker, "echo from-other")}),
    );
    let pw = client.until_closed("pw");
    assert_eq!(output_of(&pw, "stdout"), b"from-playwright\n");
    let other = client.until_closed("other");
    assert!(
        other.iter().all(|n| n["method"] != "process/output"),
        "{other:#?}"
    );
    assert!(other.iter().any(|n| n["method"] == "process/exited"));
    let snapshot = client.ok("process/snapshot", json!({"processId": "other"}));
    assert_eq!(
        BASE64.decode(snapshot["stdout"].as_str().unwrap()).unwrap(),
        b"from-other\n"
    );
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// Runs the first `python` block of `doc` (a path from the repository's root) as a client of this
/// build's `quietus serve`; returns its stdout once it exited 0 and left nothing behind.
fn run_python_block(doc: &str, marker_name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(doc);
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find("```python\n")
        .unwrap_or_else(|| panic!("{doc} has a Python example"))
        + "```python\n".len();
    let end = start + text[start..].find("```").expect("the block ends");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, &text[start..end]).unwrap();
    let marker = Marker::new(marker_name);
    let mut cmd = common::program("python3");
    cmd.arg(&script)
        .env("QUIETUS", env!("CARGO_BIN_EXE_quietus"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cli_support::isolate(&mut cmd, &marker);
    let mut child = cmd.spawn().expect("python3 runs");
    let status = wait_exit(&mut child);
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}\nstdout: {out}\nstderr: {err}");
    assert_no_leak(&marker);
    out
}

#[test]
fn serve_docs_python_client_runs() {
    let out = run_python_block("docs/serve.md", "serve-python");
    assert!(out.contains("hello from the child"), "{out}");
    assert!(out.contains("exited: exited, code 0"), "{out}");
}

#[test]
fn serve_readme_python_client_runs() {
    // The README's client: a child that prints a line, then goes silent past its idle timeout.
    let out = run_python_block("README.md", "serve-readme-python");
    assert!(out.contains("testing\n"), "{out}");
    assert!(
        out.contains("outcome: idle_timeout exit code: 124"),
        "{out}"
    );
}

#[test]
fn serve_idle_timeout_warns_then_ends() {
    let marker = Marker::new("serve-idle");
    let mut client = Client::start(&marker, &[]);
    let params = json!({"processId": "silent", "argv": sh(&marker, "exec sleep 1000"),
                        "idleTimeoutMs": 1500, "noChildren": true, "noWatch": true});
    client.ok("process/start", params);
    let notes = client.until_closed("silent");
    let methods: Vec<&str> = notes
        .iter()
        .map(|n| n["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "process/started",
            "process/idleWarning",
            "process/exited",
            "process/closed"
        ],
        "{notes:#?}"
    );
    let left = notes[1]["params"]["leftMs"].as_u64().unwrap();
    assert!(left <= 1500, "{left}");
    assert_eq!(notes[2]["params"]["outcome"], "idle_timeout");
    assert_eq!(notes[2]["params"]["signal"], 15);
    assert_eq!(notes[2]["params"]["exitCode"], Value::Null);
    let result = client.ok("process/wait", json!({"processId": "silent"}));
    assert_eq!(result["outcome"], "idle_timeout");
    assert_eq!(result["exitCode"], 124, "the command's status convention");
    assert_eq!(result["ladder"]["signalsSent"], json!(["TERM"]));
    let snapshot = client.ok("process/snapshot", json!({"processId": "silent"}));
    assert_eq!(snapshot["exitCode"], 124);
    assert_eq!(snapshot["running"], false);
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

#[test]
fn serve_input_wait_timeout_notifies_then_ends() {
    let marker = Marker::new("serve-input-wait");
    let mut client = Client::start(&marker, &[]);
    // Its stdin is an open pipe nobody writes to.
    let params = json!({"processId": "asks", "argv": sh(&marker, "read x"),
                        "io": {"pipe": {"stdin": "open"}},
                        "idleTimeoutMs": 60000, "inputWaitTimeoutMs": 1000});
    client.ok("process/start", params);
    let notes = client.until_closed("asks");
    let waits: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "process/inputWait")
        .collect();
    assert_eq!(waits.len(), 1, "{notes:#?}");
    assert_eq!(waits[0]["params"]["name"], "sh");
    assert_eq!(waits[0]["params"]["target"], "stdin (a pipe)");
    assert!(waits[0]["params"]["waitedMs"].as_u64().unwrap() >= 1000);
    let result = client.ok("process/wait", json!({"processId": "asks"}));
    assert_eq!(result["outcome"], "input_wait");
    assert_eq!(result["exitCode"], 124);
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

#[test]
fn serve_isolated_environment_home_seed_and_cwd() {
    let marker = Marker::new("serve-env");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let seed = dir.path().join("seed.txt");
    std::fs::write(&seed, "seeded\n").unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut client = Client::start(&marker, &[]);
    let script =
        "echo \"$HOME|$GREETING|${QUIETUS_TEST_MARKER-unset}|$(pwd)\"; cat \"$HOME/in/seed.txt\"";
    client.ok(
        "process/start",
        json!({"processId": "env", "argv": sh(&marker, script), "envMode": "isolated",
               "inheritEnv": ["PATH"], "home": home, "env": {"GREETING": "hi"}, "cwd": work,
               "seed": [{"from": seed, "to": "in/seed.txt"}]}),
    );
    assert_eq!(
        client.ok("process/wait", json!({"processId": "env"}))["exitCode"],
        0
    );
    let snapshot = client.ok("process/snapshot", json!({"processId": "env"}));
    let stdout = BASE64.decode(snapshot["stdout"].as_str().unwrap()).unwrap();
    let wanted = format!("{}|hi|unset|{}\nseeded\n", home.display(), work.display());
    assert_eq!(String::from_utf8_lossy(&stdout), wanted);
    let (code, message) = client.err(
        "process/start",
        json!({"processId": "env2", "argv": ["true"], "seed": [{"from": seed, "to": "x"}]}),
    );
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("Environment::home"), "{message}");
    let (code, message) = client.err(
        "process/start",
        json!({"processId": "env3", "argv": ["true"], "inheritEnv": ["PATH"]}),
    );
    assert_eq!(code, -32602);
    assert!(
        message.contains("inheritEnv: applies only with envMode"),
        "{message}"
    );
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

#[test]
fn serve_options_from_flags_and_variables() {
    let marker = Marker::new("serve-options");
    let output = serve_command(&marker, &["--max-processes", "0"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("the server runs");
    assert_eq!(output.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--max-processes"), "{stderr}");
    let mut cmd = serve_command(&marker, &["--output-notifications", "codex"]);
    cmd.env("QUIETUS_MAX_PROCESSES", "3")
        .env("QUIETUS_SHUTDOWN_GRACE", "250ms")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("the server starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"id\": 1, \"method\": \"initialize\"}\n")
        .unwrap();
    drop(stdin);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let init: Value = serde_json::from_str(&line).unwrap();
    let capabilities = &init["result"]["capabilities"];
    assert_eq!(capabilities["maxProcesses"], 3, "{init}");
    assert_eq!(capabilities["shutdownGraceMs"], 250);
    assert_eq!(capabilities["outputNotifications"], json!(["codex"]));
    assert!(wait_exit(&mut child).success());
    assert_no_leak(&marker);
}

/// The schema's enums are the values the server sends, and the checked-in file is the binary's:
/// a test of the schema itself; every other test here checks each message against it.
#[test]
fn serve_schema_is_printed_and_checked_in() {
    let schema = Schema::get();
    let checked_in: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/serve.schema.json"
        ))
        .expect("docs/serve.schema.json"),
    )
    .expect("JSON");
    assert_eq!(
        checked_in, schema.document,
        "docs/serve.schema.json is the binary's --schema"
    );
    let names = |def: &str| {
        schema.document["$defs"][def]["enum"]
            .as_array()
            .unwrap()
            .clone()
    };
    assert!(names("StallKind").contains(&json!("awaiting_input")));
    assert!(names("Outcome").contains(&json!("idle_timeout")));
    // A message the schema must refuse: the check is not vacuous.
    let bad = json!({"jsonrpc": "2.0", "method": "process/exited", "params": {"processId": "a", "outcome": "stalled", "exitCode": 1, "signal": null}});
    assert!(
        !schema.validators["ProcessExitedParams"].is_valid(&bad["params"]),
        "an outcome the schema lacks is refused"
    );
    let good =
        json!({"processId": "a", "outcome": "idle_timeout", "exitCode": 124, "signal": null});
    assert!(schema.validators["ProcessExitedParams"].is_valid(&good));
    // Every method the schema names is served (none answers "method not found"), and the
    // server's list of methods is the schema's.
    let marker = Marker::new("serve-schema-methods");
    let mut client = Client::start(&marker, &[]);
    let methods = schema.document["methods"].as_object().unwrap();
    for method in methods.keys() {
        let answer = client.call(method, json!({}));
        assert_ne!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
    let (code, message) = client.err("process/nothing", json!({}));
    assert_eq!(code, -32601);
    for method in methods.keys() {
        assert!(
            message.contains(method.as_str()),
            "{message} lists {method}"
        );
    }
}

#[test]
fn serve_observe_notifies_and_the_program_runs_to_its_end() {
    let marker = Marker::new("serve-observe");
    let mut client = Client::start(&marker, &[]);
    // bash, silent for 3 s between two lines: stale after 1 s, observed, not ended.
    let params = json!({"processId": "watched",
                        "argv": ["bash", "-c", "echo x; sleep 3; echo y; exit 4", marker.as_str()],
                        "idleTimeoutMs": 1000, "observe": true});
    client.ok("process/start", params);
    let notes = client.until_closed("watched");
    let observed: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "process/observed")
        .collect();
    assert!(!observed.is_empty(), "{notes:#?}");
    assert_eq!(
        observed[0]["params"]["outcome"], "idle_timeout",
        "{notes:#?}"
    );
    assert!(observed[0]["params"]["atMs"].as_u64().unwrap() >= 1000);
    assert!(observed[0]["params"]["diagnosis"]["kind"].is_string());
    let exited = notes
        .iter()
        .find(|n| n["method"] == "process/exited")
        .expect("exited");
    assert_eq!(exited["params"]["outcome"], "exited");
    assert_eq!(exited["params"]["exitCode"], 4);
    let result = client.ok("process/wait", json!({"processId": "watched"}));
    assert_eq!(result["outcome"], "exited");
    assert_eq!(result["exitCode"], 4, "the program's own status");
    assert_eq!(
        result["observed"].as_array().map(Vec::len),
        Some(observed.len()),
        "{result}"
    );
    assert_eq!(result["observed"][0]["atMs"], observed[0]["params"]["atMs"]);
    let snapshot = client.ok("process/snapshot", json!({"processId": "watched"}));
    let stdout = BASE64.decode(snapshot["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(stdout, b"x\ny\n");
    // A bad value is a precise error.
    let (code, message) = client.err(
        "process/start",
        json!({"processId": "bad", "argv": ["true"], "observe": "yes"}),
    );
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("observe"), "{message}");
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// An error answer quotes at most a short prefix of what was sent (issue 51, point 9): a 10 MiB
/// method name, field name or value gets an error line of a few hundred bytes.
#[test]
fn serve_errors_quote_a_short_prefix_of_what_was_sent() {
    let marker = Marker::new("serve-quote");
    let mut client = Client::start(&marker, &[]);
    let huge = "x".repeat(10 << 20);
    let answers = [
        client.call(&huge, json!({})),
        client.call("process/list", json!({ huge.as_str(): 1 })),
        client.call("process/wait", json!({"processId": 7, "timeoutMs": 1})),
        client.call(
            "process/start",
            json!({"processId": "q", "argv": ["true"], "env": huge}),
        ),
    ];
    for answer in &answers {
        let line = answer.to_string();
        assert!(
            answer.get("error").is_some(),
            "{}",
            &line[..line.len().min(300)]
        );
        assert!(line.len() < 1024, "{} bytes: {}", line.len(), &line[..300]);
    }
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// Writes queued behind one that found the child not reading are refused at once, not one per
/// 5 s wait (issue 51, point 10: 74 writes of 64 KiB, the 8 that did not fit answered at 5, 10,
/// 15… s; 256 would have taken 21 minutes). Exactly one write waits out the library's 5 s; every
/// other refusal says it was refused at once; a close sent after them keeps its place.
#[test]
fn serve_writes_behind_a_timed_out_one_are_refused_at_once() {
    let marker = Marker::new("serve-stdin-burst");
    let mut client = Client::start(&marker, &[]);
    client.ok(
        "process/start",
        json!({"processId": "deaf", "argv": sh(&marker, "exec sleep 1000"), "io": {"pipe": {"stdin": "open"}}}),
    );
    let chunk = BASE64.encode(vec![b'z'; 64 * 1024]);
    let first = client.next_id + 1;
    let writes = 80;
    let mut lines = String::new();
    for _ in 0..writes {
        client.next_id += 1;
        let request = json!({"id": client.next_id, "method": "process/write", "params": {"processId": "deaf", "data": chunk}});
        lines.push_str(&request.to_string());
        lines.push('\n');
    }
    client.next_id += 1;
    let close = client.next_id;
    lines.push_str(
        &json!({"id": close, "method": "process/closeStdin", "params": {"processId": "deaf"}})
            .to_string(),
    );
    client.send_line(&lines);
    let closed = client.find("the close's answer", |v| v["id"] == json!(close));
    assert_eq!(closed["result"]["status"], "accepted", "{closed}");
    let answers: Vec<Value> = (first..first + writes)
        .map(|id| {
            client.find(&format!("the answer to write {id}"), |v| {
                v["id"] == json!(id)
            })
        })
        .collect();
    let refusals: Vec<&str> = answers
        .iter()
        .filter_map(|a| a["error"]["message"].as_str())
        .collect();
    let waited = refusals
        .iter()
        .filter(|m| m.contains("stayed full"))
        .count();
    let at_once = refusals
        .iter()
        .filter(|m| m.contains("refused at once"))
        .count();
    assert!(!refusals.is_empty(), "every write accepted: {answers:?}");
    assert_eq!(waited, 1, "one write waits out the 5 s: {refusals:#?}");
    assert_eq!(at_once, refusals.len() - 1, "{refusals:#?}");
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}

/// `dir` with `n` folders inside it (`n + 1` to watch).
fn folders(dir: &std::path::Path, n: usize) {
    for i in 0..n {
        std::fs::create_dir(dir.join(format!("f{i}"))).expect("a folder");
    }
}

/// The `unavailable` entries of a finished process's answer about `root`.
fn unavailable_about(answer: &Value, root: &std::path::Path) -> Vec<Value> {
    let root = root.display().to_string();
    (answer["unavailable"].as_array().expect("unavailable"))
        .iter()
        .filter(|u| u["path"].as_str() == Some(root.as_str()))
        .cloned()
        .collect()
}

/// The sessions of one server watch at most a bound of folders together, as one session does
/// (issue 51 item 15: two roots of 7,000 folders each took 14,562 watches): a root that does
/// not fit in what the other sessions left is not watched, and its process's `unavailable`
/// says why; once they end, it fits again. The bound is the test hook
/// `QUIETUS_TEST_PROCESS_WATCH_BOUND` (65,536 folders otherwise; no setting of its own).
#[test]
fn serve_sessions_watch_at_most_the_servers_bound_of_folders_together() {
    let marker = Marker::new("serve-watch-bound");
    let (a, b) = (
        tempfile::tempdir().expect("a folder"),
        tempfile::tempdir().expect("a folder"),
    );
    folders(a.path(), 20);
    folders(b.path(), 20);
    let mut command = serve_command(&marker, &[]);
    command.env("QUIETUS_TEST_PROCESS_WATCH_BOUND", "30");
    let child = command.spawn().expect("the server starts");
    let server = child.id();
    let mut client = Client::from_child(child);
    // Each root (21 folders) fits in a session's bound and in the server's 30 alone, not
    // both: the first is watched, the second refused while the first is.
    let start = |client: &mut Client, id: &str, root: &std::path::Path, script: &str| {
        client.ok(
            "process/start",
            json!({"processId": id, "argv": sh(&marker, script), "idleTimeoutMs": 60_000,
                   "watch": [root.display().to_string()]}),
        );
    };
    start(&mut client, "a", a.path(), "sleep 2");
    // The first arms its watches (after its arming delay) before the second starts: the
    // server holds its 21 folders' watches.
    assert!(
        common::poll_until(common::GENEROUS, || cli_support::inotify_watches(server)
            >= 21),
        "the first root's watches were not armed"
    );
    start(&mut client, "b", b.path(), "sleep 1");
    let wait = |client: &mut Client, id: &str| {
        client.ok(
            "process/wait",
            json!({"processId": id, "timeoutMs": 30_000}),
        )
    };
    let second = wait(&mut client, "b");
    let refused = unavailable_about(&second, b.path());
    assert_eq!(refused.len(), 1, "{second}");
    let why = refused[0]["reason"].as_str().expect("a reason");
    assert!(
        why.contains("other sessions of this process") && why.contains("30"),
        "{why}"
    );
    let first = wait(&mut client, "a");
    assert!(unavailable_about(&first, a.path()).is_empty(), "{first}");
    // The first one over, its folders are the server's again once its watches are gone (a
    // session lets go of its watches on a thread of its own, beside its result): the second
    // root fits.
    assert!(
        common::poll_until(common::GENEROUS, || cli_support::inotify_watches(server)
            < 21),
        "the first root's watches were not let go of"
    );
    start(&mut client, "b2", b.path(), "sleep 1");
    let again = wait(&mut client, "b2");
    assert!(unavailable_about(&again, b.path()).is_empty(), "{again}");
    assert!(client.hang_up().success());
    assert_no_leak(&marker);
}
