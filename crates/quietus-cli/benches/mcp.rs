//! `quietus mcp` (issue 31), measured against the library it is built on.
//!
//! - exec_command: a `tools/call` of `exec_command {"cmd": "true"}` → its answer (exit code 0)
//!   read and parsed by the client, against the library's own `Session::spawn` + `wait` of the
//!   same command (`sh -c true`, the default configuration); paired: both back to back in each
//!   round, the median of the per-round ratios printed on stderr as `mcp_exec_paired/…`;
//! - `library_as_mcp`: the library with the session settings `exec_command` uses (one output
//!   pipe, a stdin pipe, a callback sink), to tell the server's own cost from theirs.
//!
//! The server is one `quietus mcp` process started here (its log folder a temporary one),
//! initialized, and ended here (its stdin closed).
//!
//! Run: `cargo bench --bench mcp`

#[path = "../../quietus/benches/common/paired.rs"]
mod paired;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use quietus::{CaptureConfig, MonitorConfig, OutputSink, Session, Stdin};
use serde_json::{Value, json};

const QUIETUS: &str = env!("CARGO_BIN_EXE_quietus");

/// A `quietus mcp` and its pipes.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
    _logs: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let logs = tempfile::tempdir().expect("a log folder");
        let mut child = Command::new(QUIETUS)
            .arg("mcp")
            .arg("--log-dir")
            .arg(logs.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut server = Server {
            child,
            stdin,
            stdout,
            next: 0,
            _logs: logs,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        server.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send_line(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("open");
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).expect("the server reads");
        stdin.flush().expect("the server reads");
    }

    /// Sends a request and reads lines until its answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).expect("the server writes");
            assert!(n > 0, "the server ended");
            let value: Value = serde_json::from_str(&line).expect("JSON");
            if value["id"] == id {
                return value;
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the server ends every session and exits
        let _ = self.child.wait();
    }
}

/// One `exec_command` of `true` through the server.
fn mcp_exec(server: &mut Server) -> Duration {
    let begin = Instant::now();
    let answer = server.request(
        "tools/call",
        json!({"name": "exec_command", "arguments": {"cmd": "true"}}),
    );
    let took = begin.elapsed();
    assert_eq!(
        answer["result"]["structuredContent"]["exit_code"], 0,
        "{answer}"
    );
    took
}

/// The library's own: `Session::spawn` of `sh -c true` → `wait`.
fn library_exec() -> Duration {
    let begin = Instant::now();
    let mut command = Command::new("sh");
    command.args(["-c", "true"]);
    let session = Session::spawn(command, MonitorConfig::default()).expect("sh starts");
    let result = session.wait();
    let took = begin.elapsed();
    assert_eq!(result.exit_code(), 0);
    took
}

/// The library with the session settings `exec_command` uses (one output pipe, a stdin pipe,
/// a callback sink, a 4 KiB log threshold): what the server adds beyond them is the rest.
fn library_exec_as_mcp() -> Duration {
    let begin = Instant::now();
    let mut command = Command::new("sh");
    command.args(["-c", "true"]);
    let capture = CaptureConfig::builder()
        .combined(true)
        .cap_per_stream(64 * 1024)
        .spill_threshold(4096)
        .build()
        .unwrap();
    let session = Session::builder(command)
        .config(MonitorConfig::builder().capture(capture).build().unwrap())
        .stdout(OutputSink::callback(|_| {}))
        .stdin(Stdin::Piped)
        .spawn()
        .expect("sh starts");
    let result = session.wait();
    let took = begin.elapsed();
    assert_eq!(result.exit_code(), 0);
    took
}

fn exec_command(c: &mut Criterion) {
    let mut server = Server::start();
    let mut group = c.benchmark_group("mcp_exec");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("mcp", |b| b.iter(|| mcp_exec(&mut server)));
    group.bench_function("library", |b| b.iter(library_exec));
    group.bench_function("library_as_mcp", |b| b.iter(library_exec_as_mcp));
    group.finish();

    paired::report_paired(
        "mcp_exec_paired/ratio",
        ("mcp", || mcp_exec(&mut server)),
        ("library", || library_exec()),
        41,
    );
}

criterion_group!(benches, exec_command);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
