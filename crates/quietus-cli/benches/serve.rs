//! `quietus serve` (issue 16), measured against the library it is built on.
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
//! - scale: `serve_scale/…` lines on stderr: a server holding 100, then 1,000 sleeping sessions
//!   (each `sh -c 'sleep 600; sleep 600; sleep 600'`, idle timeout 1 h): its threads,
//!   descriptors and RSS (in all, and per session beyond an empty server), its idle CPU over
//!   30 s, the helper processes it started; how long the `n` took to start
//!   (`serve_scale/<n>/start_all`) and, at that load, 20 more starts one after the other
//!   (`…/one_more`: each `process/start` → its `process/started`, median and max; issue 50);
//!   then, under that load, 20 sessions of `sleep 600`
//!   with a 2 s idle timeout: how long after its deadline each stall ended (the report's
//!   `durationMs` minus the idle timeout: the ladder, the drain and the result included, in
//!   whole milliseconds), and what that is made of, from the server's own figures (its
//!   `quietus::timing` debug lines, written after each result): deadline → first signal,
//!   → tree gone, → result, in microseconds; with how long the server took to start the 20
//!   (a deadline that comes while it still starts the later ones shares the CPU with them).
//!   The server starts with the soft descriptor limit this bench was given
//!   (`SERVE_BENCH_NOFILE` sets it, e.g. 1024); sessions it refuses are counted.
//!   `SERVE_BENCH_SESSIONS` (e.g. `1000`) measures those sizes only.
//!
//! The server is one `quietus serve` process started here, ended here (its stdin closed).
//!
//! Run: `cargo bench --bench serve` (the scale part alone: `cargo bench --bench serve -- scale`)

#[path = "../../quietus/benches/common/paired.rs"]
mod paired;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use criterion::{Criterion, criterion_group};
use quietus::{MonitorConfig, Session};
use serde_json::{Value, json};

const QUIETUS: &str = env!("CARGO_BIN_EXE_quietus");

/// A `quietus serve` and its pipes.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(QUIETUS)
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the server starts");
        Server::of(child.stdin.take(), child)
    }

    /// A server that also writes its kill-precision figures (`quietus::timing` at debug
    /// level) on its stderr: they come on the receiver, the rest of its stderr goes on to ours.
    fn start_timed(args: &[&str]) -> (Server, Receiver<Timing>) {
        let mut child = Command::new(QUIETUS)
            .arg("serve")
            .args(args)
            .env("RUST_LOG", "warn,quietus::timing=debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stderr = BufReader::new(child.stderr.take().expect("piped"));
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                match Timing::parse(&line) {
                    Some(timing) => {
                        let _ = tx.send(timing);
                    }
                    None => eprintln!("{line}"),
                }
            }
        });
        (Server::of(child.stdin.take(), child), rx)
    }

    fn of(stdin: Option<ChildStdin>, mut child: Child) -> Server {
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

    paired::report_paired(
        "serve_start_exit_paired/ratio",
        ("serve", || serve_start_exit(&mut server, &mut n)),
        ("library", || library_start_exit()),
        41,
    );
}

criterion_group!(benches, round_trip, start_exit);

/// What `/proc` says of a process: threads, descriptors, resident memory (KiB), CPU ticks.
#[derive(Debug, Clone, Copy)]
struct Usage {
    threads: u64,
    fds: u64,
    rss_kib: u64,
    cpu_ticks: u64,
}

fn usage(pid: u32) -> Usage {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields[i].parse::<u64>().unwrap_or(0);
    Usage {
        threads: field("Threads:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64),
        rss_kib: field("VmRSS:"),
        cpu_ticks: ticks(11) + ticks(12),
    }
}

/// The children of `pid` by name (the sessions' programs, and any helper process).
fn children_by_name(pid: u32) -> std::collections::BTreeMap<String, usize> {
    let mut found = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let ppid = stat[close + 2..].split_whitespace().nth(1);
        if ppid == Some(&pid.to_string()) {
            *found.entry(stat[open + 1..close].to_owned()).or_insert(0) += 1;
        }
    }
    found
}

impl Server {
    /// Reads messages until `n` satisfy `count`; returns how many answers were errors.
    fn count_until(&mut self, n: usize, count: impl Fn(&Value) -> bool) -> usize {
        let (mut seen, mut errors) = (0, 0);
        let mut line = String::new();
        while seen + errors < n {
            line.clear();
            let read = self.stdout.read_line(&mut line).expect("the server writes");
            assert!(read > 0, "the server ended");
            let value: Value = serde_json::from_str(&line).expect("JSON");
            if value.get("error").is_some() {
                errors += 1;
            } else if count(&value) {
                seen += 1;
            }
        }
        errors
    }
}

/// A session's kill precision as the server logs it: how long after its deadline (µs) its
/// first signal went out, its tree was gone (-1: not seen) and its result was out.
#[derive(Debug, Clone, Copy)]
struct Timing {
    pid: u64,
    signal: i64,
    gone: i64,
    result: i64,
}

impl Timing {
    /// `quietus: debug: session 7 pid 123: after its deadline, first signal 812 us, tree
    /// gone 1163 us, result 1401 us`.
    fn parse(line: &str) -> Option<Timing> {
        let rest = line.split_once(": session ")?.1;
        let pid = rest
            .split_once(" pid ")?
            .1
            .split_once(':')?
            .0
            .parse()
            .ok()?;
        let figure = |name: &str| -> Option<i64> {
            let after = line.split_once(name)?.1.trim_start();
            after.split_once(" us")?.0.parse().ok()
        };
        Some(Timing {
            pid,
            signal: figure("first signal")?,
            gone: figure("tree gone")?,
            result: figure("result")?,
        })
    }
}

/// One scale measurement: `n` sleeping sessions, then 20 stalls under that load.
fn scale_at(n: usize) {
    let max = (n + 50).to_string();
    let (mut server, timings) = Server::start_timed(&["--max-processes", &max]);
    std::thread::sleep(Duration::from_millis(500));
    let empty = usage(server.child.id());
    let sent = Instant::now();
    for i in 0..n {
        let argv = ["sh", "-c", "sleep 600; sleep 600; sleep 600"];
        let params =
            json!({"processId": format!("s{i}"), "argv": argv, "idleTimeoutMs": 3_600_000});
        server.send("process/start", params);
    }
    let refused = server.count_until(n, |v| v["method"] == "process/started");
    let all = sent.elapsed();
    let held = n - refused;
    std::thread::sleep(Duration::from_secs(3)); // the arming delays over, every watch made
    eprintln!(
        "serve_scale/{n}/start_all: {n} sessions started in {:.2} s ({:.2} ms each on average)",
        all.as_secs_f64(),
        all.as_secs_f64() * 1000.0 / n as f64
    );
    one_more_starts(&mut server, n);
    let pid = server.child.id();
    let full = usage(pid);
    let window = Duration::from_secs(30);
    std::thread::sleep(window);
    let after = usage(pid);
    let ticks_per_second = 100.0; // USER_HZ
    let cpu = (after.cpu_ticks - full.cpu_ticks) as f64 / ticks_per_second / window.as_secs_f64();
    let per = |all: u64, base: u64| (all.saturating_sub(base)) as f64 / held.max(1) as f64;
    eprintln!(
        "serve_scale/{n}: {held} sessions held ({refused} refused); threads {} ({:.2}/session), \
         descriptors {} ({:.2}/session), RSS {:.1} MB ({:.1} KB/session), idle CPU {:.3} % of a \
         core over {window:?}; children {:?}",
        full.threads,
        per(full.threads, empty.threads),
        full.fds,
        per(full.fds, empty.fds),
        full.rss_kib as f64 / 1024.0,
        per(full.rss_kib, empty.rss_kib),
        cpu * 100.0,
        children_by_name(pid),
    );
    stalls_under_load(&mut server, &timings, n);
}

/// 20 more sessions (`sleep 600`, idle timeout 1 h) on a server holding `n`, one after the
/// other: each `process/start` → its `process/started`, median and max.
fn one_more_starts(server: &mut Server, n: usize) {
    const MORE: usize = 20;
    let mut times = Vec::new();
    for i in 0..MORE {
        let id = format!("more{i}");
        let params = json!({"processId": id, "argv": ["sleep", "600"], "idleTimeoutMs": 3_600_000});
        let sent = Instant::now();
        server.send("process/start", params);
        server.until(|v| v["method"] == "process/started" && v["params"]["processId"] == id);
        times.push(sent.elapsed());
    }
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    eprintln!(
        "serve_scale/{n}/one_more: {MORE} starts (process/start → process/started, one after \
         the other): median {:.2} ms, max {:.2} ms",
        ms(times[MORE / 2]),
        ms(times[MORE - 1])
    );
}

/// 20 sessions of `sleep 600` with a 2 s idle timeout, on a server holding `n`: how long after
/// its deadline each ended, and what that is made of.
fn stalls_under_load(server: &mut Server, timings: &Receiver<Timing>, n: usize) {
    const STALLS: usize = 20;
    const IDLE_MS: u64 = 2000;
    let sent = Instant::now();
    for i in 0..STALLS {
        let params = json!({"processId": format!("stall{i}"), "argv": ["sleep", "600"],
                            "idleTimeoutMs": IDLE_MS});
        server.send("process/start", params);
    }
    for i in 0..STALLS {
        server.send("process/wait", json!({"processId": format!("stall{i}")}));
    }
    let (mut late, mut pids) = (Vec::new(), Vec::new());
    let mut started = None;
    let mut line = String::new();
    while late.len() < STALLS {
        line.clear();
        let read = server
            .stdout
            .read_line(&mut line)
            .expect("the server writes");
        assert!(read > 0, "the server ended");
        let value: Value = serde_json::from_str(&line).expect("JSON");
        if value["method"] == "process/started"
            && value["params"]["processId"]
                .as_str()
                .is_some_and(|id| id.starts_with("stall"))
        {
            pids.push(value["params"]["pid"].as_u64().expect("pid"));
            if pids.len() == STALLS {
                started = Some(sent.elapsed());
            }
        }
        let result = &value["result"];
        if result["running"] == false && result["outcome"] == "idle_timeout" {
            let duration = result["durationMs"].as_u64().expect("durationMs");
            late.push(duration.saturating_sub(IDLE_MS));
        }
    }
    late.sort_unstable();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "serve_scale/{n}/stalls: machine load average {}",
        load.trim()
    );
    eprintln!(
        "serve_scale/{n}/stalls: {STALLS} stalls (idle timeout {IDLE_MS} ms) ended after their \
         deadline by: median {} ms, max {} ms (durationMs - idle timeout, whole ms: the \
         ladder, drain and result included); the server took {:?} to start the {STALLS}",
        late[STALLS / 2],
        late[STALLS - 1],
        started.unwrap_or_default(),
    );
    report_breakdown(n, timings, &pids);
}

/// The server's own figures for the sessions `pids`: after the deadline, the first signal,
/// the tree gone, the result (median and max, ms).
fn report_breakdown(n: usize, timings: &Receiver<Timing>, pids: &[u64]) {
    let mut found: Vec<Timing> = Vec::new();
    // Written just after each result: they are all there within moments of the last one.
    while found.len() < pids.len() {
        match timings.recv_timeout(Duration::from_secs(5)) {
            Ok(timing) if pids.contains(&timing.pid) => found.push(timing),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    if found.is_empty() {
        eprintln!("serve_scale/{n}/stalls: no timing figures from the server");
        return;
    }
    let spread = |pick: fn(&Timing) -> i64| {
        let mut all: Vec<i64> = found.iter().map(pick).collect();
        all.sort_unstable();
        let ms = |us: i64| us as f64 / 1000.0;
        format!(
            "median {:.1} ms, max {:.1} ms",
            ms(all[all.len() / 2]),
            ms(all[all.len() - 1])
        )
    };
    eprintln!(
        "serve_scale/{n}/stalls: after the deadline ({} stalls, the server's figures): first \
         signal {}; tree gone {}; result {}",
        found.len(),
        spread(|t| t.signal),
        spread(|t| t.gone),
        spread(|t| t.result),
    );
    let mut each: Vec<String> = found
        .iter()
        .map(|t| format!("{}/{}/{}", t.signal, t.gone, t.result))
        .collect();
    each.sort_by_key(|s| s.rsplit('/').next().and_then(|r| r.parse::<i64>().ok()));
    eprintln!(
        "serve_scale/{n}/stalls: each (first signal/tree gone/result, us): {}",
        each.join(" ")
    );
}

/// The scale rows, unless a filter that is not `scale` was given.
fn scale() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.is_some_and(|f| !"serve_scale".contains(&f)) {
        return;
    }
    if let Some(soft) = std::env::var("SERVE_BENCH_NOFILE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), hard).expect("setrlimit");
    }
    let sizes: Vec<usize> = match std::env::var("SERVE_BENCH_SESSIONS") {
        Ok(list) => list
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect(),
        Err(_) => vec![100, 1000],
    };
    for n in sizes {
        scale_at(n);
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if !filter.as_deref().is_some_and(|f| "serve_scale".contains(f)) {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
    scale();
}
