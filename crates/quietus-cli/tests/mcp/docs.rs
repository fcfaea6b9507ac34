//! docs/mcp.md's samples come from a run of this build: `quietus mcp` driven over its stdio
//! (JSON-RPC lines, no SDK needed), each sample between `<!-- sample:NAME … -->` and
//! `<!-- /sample:NAME -->` lines. The test fails when a sample differs from what the server
//! answers now — its fields, their values, its text — with what varies from run to run left
//! out of the comparison (pids, times, durations: every number in a string, and the numbers
//! of `pid`, `waits_on`, `wall_time_ms`). `QUIETUS_BLESS=1 cargo test -p quietus-cli --test
//! mcp docs_samples` rewrites them from the run.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{MARKER_ENV, Marker, assert_no_leak};

/// A `quietus mcp` server and the lines it writes.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Server {
    fn start(marker: &Marker, dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_quietus"))
            .arg("mcp")
            .current_dir(dir)
            .env(MARKER_ENV, marker.as_str())
            .env_remove("RUST_LOG")
            .env_remove("QUIETUS_MCP_SHELL")
            .env_remove("QUIETUS_MCP_IDLE_TIMEOUT")
            .env_remove("QUIETUS_MCP_HARD_TIMEOUT")
            .env_remove("QUIETUS_LOG_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("quietus mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; the line that answers it, as the server wrote it.
    fn call(&mut self, line: &str) -> String {
        let id = serde_json::from_str::<Value>(line).unwrap()["id"].clone();
        self.send(line);
        loop {
            let answer = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("an answer within 60 s");
            let value: Value = serde_json::from_str(&answer).unwrap();
            if value["id"] == id {
                return answer;
            }
        }
    }

    /// `exec_command` with `arguments`: the answer's result.
    fn exec(&mut self, id: u64, arguments: &Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "exec_command", "arguments": arguments}});
        let answer: Value = serde_json::from_str(&self.call(&request.to_string())).unwrap();
        answer["result"].clone()
    }

    fn hang_up(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

/// A value as docs/mcp.md shows it: compact, with a space after `:` and `,`.
fn compact(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), compact(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

/// A structured result as docs/mcp.md shows it: a field a line; an object field (the
/// diagnosis) opened a level; a non-empty list a line per item.
fn pretty(value: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if indent < 4 && !map.is_empty() => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{pad}  {}: {}",
                        Value::from(k.as_str()),
                        pretty(v, indent + 2)
                    )
                })
                .collect();
            format!("{{\n{}\n{pad}}}", fields.join(",\n"))
        }
        Value::Array(items) if !items.is_empty() => {
            let items: Vec<String> = items
                .iter()
                .map(|item| format!("{pad}  {}", compact(item)))
                .collect();
            format!("[\n{}\n{pad}]", items.join(",\n"))
        }
        other => compact(other),
    }
}

/// Every run of digits in `text` as `#`.
fn digits_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// `value` without what varies from run to run.
fn steady(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "pid" | "waits_on" | "wall_time_ms" if v.is_number() => json!(0),
                        _ => steady(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(steady).collect()),
        Value::String(s) => Value::String(digits_out(s)),
        other => other.clone(),
    }
}

/// A sample's text, steady: JSON samples (a value, or a value a line) compared as values,
/// others line by line with their digits out.
fn steady_text(text: &str) -> Vec<String> {
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n");
    if let Ok(value) = serde_json::from_str::<Value>(&body) {
        return vec![steady(&value).to_string()];
    }
    body.lines()
        .map(|line| match serde_json::from_str::<Value>(line) {
            Ok(value) => steady(&value).to_string(),
            Err(_) => digits_out(line),
        })
        .collect()
}

/// Checks (or with `QUIETUS_BLESS`, rewrites) each sample of docs/mcp.md.
fn check_samples(samples: &[(&str, String)]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mcp.md");
    let mut doc = std::fs::read_to_string(&path).unwrap();
    let bless = std::env::var_os("QUIETUS_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, generated) in samples {
        let open = format!(
            "<!-- sample:{name} (from a run: QUIETUS_BLESS=1 cargo test -p quietus-cli \
             --test mcp docs_samples rewrites it) -->\n"
        );
        let close = format!("<!-- /sample:{name} -->");
        let start = doc
            .find(&open)
            .unwrap_or_else(|| panic!("docs/mcp.md has no line {open}"))
            + open.len();
        let end = start
            + doc[start..]
                .find(&close)
                .unwrap_or_else(|| panic!("docs/mcp.md has no line {close}"));
        if bless {
            doc.replace_range(start..end, generated);
        } else if steady_text(&doc[start..end]) != steady_text(generated) {
            stale.push(format!(
                "--- sample {name} in docs/mcp.md:\n{}--- this build answers:\n{generated}",
                &doc[start..end]
            ));
        }
    }
    if bless {
        std::fs::write(&path, doc).unwrap();
    }
    assert!(
        stale.is_empty(),
        "docs/mcp.md's samples are not what the server answers: rerun with QUIETUS_BLESS=1\n{}",
        stale.join("\n")
    );
}

fn fenced(language: &str, body: &str) -> String {
    format!("```{language}\n{body}\n```\n")
}

#[test]
fn docs_samples_are_a_run_of_this_build() {
    let marker = Marker::new("mcp-docs-samples");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&marker, dir.path());
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec_command","arguments":{"cmd":"echo hi; echo err >&2; exit 3"}}}"#,
    ];
    let mut initialized: Value = serde_json::from_str(&server.call(requests[0])).unwrap();
    // The instructions abridged to their first words.
    let instructions = initialized["result"]["instructions"].as_str().unwrap();
    let first = instructions.split(':').next().unwrap();
    initialized["result"]["instructions"] = json!(format!("{first}: …"));
    server.send(requests[1]);
    let quick = server.call(requests[2]);
    let exchange_in = fenced("json", &requests.join("\n"));
    let exchange_out = fenced("json", &format!("{initialized}\n{quick}"));

    let sleeping = server.exec(
        3,
        &json!({"cmd": "echo started; sleep 1000", "idle_timeout_ms": 2000}),
    );
    let prompt = "python3 -c 'import sys; print(\"Continue? [y/N]\", flush=True); \
                  sys.stdin.readline()'";
    let input = server.exec(4, &json!({"cmd": prompt, "idle_timeout_ms": 2000}));
    let background = server.exec(5, &json!({"cmd": "sleep 600 & echo started"}));
    let text = sleeping["content"][0]["text"].as_str().unwrap().trim_end();
    let samples = [
        ("exchange-in", exchange_in),
        ("exchange-out", exchange_out),
        (
            "sleeping",
            fenced("json", &pretty(&sleeping["structuredContent"], 0)),
        ),
        (
            "input",
            fenced("json", &pretty(&input["structuredContent"], 0)),
        ),
        (
            "background",
            fenced("json", &pretty(&background["structuredContent"], 0)),
        ),
        ("text", fenced("text", text)),
    ];
    server.hang_up();
    check_samples(&samples);
    assert_no_leak(&marker);
}
