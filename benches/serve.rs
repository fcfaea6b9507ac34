//! `stallwatch serve` (issue 16), measured against the library it is built on.
//!
//! - round trip: `process/write` of a short line to a `cat` child → the `process/output`
//!   notification carrying it back, read and decoded by the client (the server started with
//!   `--output-throttle 0ms`: with the default 150 ms throttle, a write less than 150 ms after
//!   the previous output waits for the interval);
//! - start and exit: `process/start` of `true` → its `process/closed` notification, against the
//!   library's own `Session::spawn` + `wait` of `true` (default configuration), paired: both
//!   back to back in each round, the median of the per-round ratios printed on stderr as
//!   `serve_start_exit_paired/…`.
//!
//! The server is one `stallwatch serve` process started here, ended here (its stdin closed).
//!
//! Run: `cargo bench --bench serve`

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use stallwatch::{MonitorConfig, Session};

const STALLWATCH: &str = env!("CARGO_BIN_EXE_stallwatch");

/// A `stallwatch serve` and its pipes.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(STALLWATCH)
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Server {
            child,
            stdin,
            stdout,
            next: 0,
        }
    }

    /// Sends a notification-style request (no answer is read: the caller reads what it needs).
    fn send(&mut self, method: &str, params: Value) {
        self.next += 1;
        let line = json!({"id": self.next, "method": method, "params": params}).to_string();
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(line.as_bytes()).expect("the server reads");
        stdin.write_all(b"\n").expect("the server reads");
        stdin.flush().expect("the server reads");
    }

    /// Reads messages until one satisfies `done`.
    fn until(&mut self, done: impl Fn(&Value) -> bool) {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).expect("the server writes");
            assert!(n > 0, "the server ended");
            let value: Value = serde_json::from_str(&line).expect("JSON");
            if done(&value) {
                return;
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take()); // the server ends every process and exits
        let _ = self.child.wait();
    }
}

fn round_trip(c: &mut Criterion) {
    let mut server = Server::start(&["--output-throttle", "0ms"]);
    server.send(
        "process/start",
        json!({"processId": "cat", "argv": ["cat"], "io": {"pipe": {"stdin": "open"}}}),
    );
    let mut n = 0u64;
    let mut group = c.benchmark_group("serve_round_trip");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("write_to_output_cat", |b| {
        b.iter(|| {
            n += 1;
            let token = format!("ping-{n}\n");
            server.send("process/write", json!({"processId": "cat", "text": token}));
            server.until(|v| {
                v["method"] == "process/output"
                    && v["params"]["data"]
                        .as_str()
                        .and_then(|d| BASE64.decode(d).ok())
                        .is_some_and(|d| d.ends_with(token.as_bytes()))
            });
        })
    });
    group.finish();
}

/// One start/exit pair through the server: `process/start` of `true` → `process/closed`.
fn serve_start_exit(server: &mut Server, n: &mut u64) -> Duration {
    *n += 1;
    let id = format!("t{n}");
    let begin = Instant::now();
    server.send("process/start", json!({"processId": id, "argv": ["true"]}));
    server.until(|v| v["method"] == "process/closed" && v["params"]["processId"] == id);
    begin.elapsed()
}

/// The library's own: `Session::spawn` of `true` → `wait`.
fn library_start_exit() -> Duration {
    let begin = Instant::now();
    let session =
        Session::spawn(Command::new("true"), MonitorConfig::default()).expect("true starts");
    let result = session.wait();
    assert_eq!(result.exit_code(), 0);
    begin.elapsed()
}

fn start_exit(c: &mut Criterion) {
    let mut server = Server::start(&[]);
    let mut n = 0u64;
    let mut group = c.benchmark_group("serve_start_exit");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("serve", |b| {
        b.iter(|| serve_start_exit(&mut server, &mut n))
    });
    group.bench_function("library", |b| b.iter(library_start_exit));
    group.finish();

    // Paired, ABBA rounds.
    let mut ratios = Vec::new();
    let mut serve_times = Vec::new();
    let mut library_times = Vec::new();
    for round in 0..41 {
        let (s, l) = if round % 2 == 0 {
            let s = serve_start_exit(&mut server, &mut n);
            (s, library_start_exit())
        } else {
            let l = library_start_exit();
            (serve_start_exit(&mut server, &mut n), l)
        };
        ratios.push(s.as_secs_f64() / l.as_secs_f64());
        serve_times.push(s);
        library_times.push(l);
    }
    eprintln!(
        "serve_start_exit_paired/ratio: median {:.2}x (serve {:?}, library {:?}, medians of 41 rounds)",
        median_f64(&mut ratios),
        median(&mut serve_times),
        median(&mut library_times)
    );
}

fn median_f64(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

criterion_group!(benches, round_trip, start_exit);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
