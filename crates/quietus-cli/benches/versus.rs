//! The `quietus` command against the tools it replaces, measured in one run on one machine.
//!
//! - spawn overhead: `quietus -i 1h -- true` vs GNU `timeout 1h true` vs `true` itself
//!   (whole-process wall time: start, run a program that exits at once, end), and the same
//!   paired (`versus_start_exit_paired/…` on stderr: wall and CPU ratios, ABBA rounds) with the
//!   exit latency of a program that exits at once and of one that runs 200 ms;
//! - exit latency: from the program's last action (printing the time, then exiting) to the
//!   supervisor's own exit;
//! - relay, whole process, paired (both sides back to back in each round, median of the
//!   per-round ratios, printed on stderr as `versus_relay_paired/…`): a 256 MiB file through
//!   `quietus -i 30s -- cat FILE` (default options: no log) vs `cat FILE | cat`, read by this
//!   process to end-of-file; and with a log (`--log-dir`: SHA-256 and a file write of every
//!   byte) vs `sha256sum FILE`, the limit of hashing the same bytes on this CPU;
//! - terminal relay, whole process, paired (printed on stderr as `versus_terminal_paired/…`):
//!   a program writing 64 MiB to its terminal (`head -c 67108864 /dev/zero`) under
//!   `quietus --pty -i 30s --` vs under util-linux `script -qfc`, both with stdin and stdout
//!   on `/dev/null`; the row is script's time / quietus's, quietus's throughput as a share
//!   of script's (issue 14);
//! - teardown of a 200-process tree with escapees: a `Session` whose child starts 200 sleeping
//!   descendants (20 of them in sessions of their own), from the first signal of the ladder to
//!   the whole tree confirmed gone (`MonitorResult::ladder_time`, so criterion's time is that).
//!
//! Every process measured is started here and ended here (the tree by the ladder itself).
//!
//! Run: `cargo bench --bench versus` (one paired group: `cargo bench --bench versus --
//! versus_terminal_paired`). A before/after in the same rounds, for a noisy machine:
//! `VERSUS_BEFORE=/path/to/older/quietus cargo bench --bench versus -- versus_start_exit_paired`
//! (rows `…_before` and `…_group_before`), and the same for `versus_relay_paired` (row
//! `default_vs_cat_pipe_before`) and `versus_terminal_paired` (row `pty_vs_script_before`).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use quietus::{CaptureConfig, KillLadder, MonitorConfig, Outcome, Session, Signal};

const QUIETUS: &str = env!("CARGO_BIN_EXE_quietus");
const RELAY_BYTES: u64 = 256 * 1024 * 1024;

fn run_quiet(command: &mut Command) {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the command runs");
    assert!(status.success(), "{command:?}: {status}");
}

fn spawn_overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("versus_spawn_and_exit");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("true_alone", |b| {
        b.iter(|| run_quiet(&mut Command::new("true")))
    });
    group.bench_function("gnu_timeout", |b| {
        b.iter(|| run_quiet(Command::new("timeout").args(["1h", "true"])))
    });
    group.bench_function("quietus", |b| {
        b.iter(|| run_quiet(Command::new(QUIETUS).args(["-i", "1h", "--", "true"])))
    });
    group.finish();
}

/// Exit latency: from the moment the program prints its last word and exits (`exec date
/// +%s%N`, so printing the wall-clock time is the very last thing it does) to the moment the
/// supervisor (`quietus` or GNU `timeout`) has exited and been waited for. Criterion's time
/// is that latency.
fn exit_latency(c: &mut Criterion) {
    let mut group = c.benchmark_group("versus_exit_latency");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(4));
    let measure = |program: &str, args: &[&str], iters: u64| {
        (0..iters).map(|_| exit_latency_of(program, args)).sum()
    };
    group.bench_function("gnu_timeout", |b| {
        b.iter_custom(|iters| measure("timeout", &["1h", "date", "+%s%N"], iters))
    });
    group.bench_function("quietus", |b| {
        b.iter_custom(|iters| measure(QUIETUS, &["-i", "1h", "--", "date", "+%s%N"], iters))
    });
    group.finish();
}

/// Runs a command line, reads its stdout to end-of-file, and returns how many bytes it printed.
fn read_all(program: &str, args: &[&str]) -> u64 {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the relay runs");
    let mut out = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = out.read(&mut buf).expect("reading the relay");
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    assert!(child.wait().expect("the relay ends").success());
    total
}

/// Rounds of the paired relay comparison (each moves 256 MiB four times).
const RELAY_ROUNDS: usize = 9;

/// The median of `values` (sorted in place).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Prints the median, min and max of the per-round ratios `a / b`, as row `what` of `group`.
fn report_ratio(group: &str, what: &str, a: &[Duration], b: &[Duration], target: &str) {
    let mut ratios: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    let secs = |d: &[Duration]| {
        let mut v: Vec<f64> = d.iter().map(Duration::as_secs_f64).collect();
        median(&mut v) * 1e3
    };
    let (ma, mb) = (secs(a), secs(b));
    let m = median(&mut ratios);
    eprintln!(
        "{group}/{what}: {} rounds; median {ma:.1} ms vs {mb:.1} ms; per-round \
         ratio median {m:.3} (min {:.3}, max {:.3}); target {target}",
        ratios.len(),
        ratios[0],
        ratios[ratios.len() - 1],
    );
}

/// Whether the paired rows named `group` run: under `cargo bench` only (not `--test`, not
/// `--list`), when no filter is given or a filter is part of `group`'s name.
fn paired_wanted(group: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    has("--bench")
        && !has("--test")
        && !has("--list")
        && (filters.is_empty() || filters.iter().any(|f| group.contains(f.as_str())))
}

/// The relay rows, whole process and paired (ABBA order in each round): outside criterion, so
/// both sides of a ratio see the same moment of a shared machine. Runs under `cargo bench`
/// only, when no filter is given or the filter matches `versus_relay_paired`.
#[allow(clippy::too_many_lines)] // a test or bench scenario: the 80-line rule is for the library and the command
fn relay_paired() {
    if !paired_wanted("versus_relay_paired") {
        return;
    }
    let dir = tempfile::tempdir().expect("a temp folder");
    let file = dir.path().join("relay.bin");
    // Bytes that do not compress or repeat (xorshift), written once.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = Vec::with_capacity(RELAY_BYTES as usize);
    while data.len() < RELAY_BYTES as usize {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        data.extend_from_slice(&state.to_le_bytes());
    }
    std::fs::write(&file, &data).expect("the relay file");
    drop(data);
    let file = file.to_str().expect("a UTF-8 temp path").to_owned();
    let logs = dir.path().join("logs");
    let logs = logs.to_str().expect("a UTF-8 temp path").to_owned();
    let pipeline = format!("cat '{file}' | cat");
    let plain = || assert_eq!(read_all("sh", &["-c", &pipeline]), RELAY_BYTES);
    let relay_by = |quietus: &str| {
        assert_eq!(
            read_all(quietus, &["-i", "30s", "--", "cat", &file]),
            RELAY_BYTES
        )
    };
    let relayed = || relay_by(QUIETUS);
    // The build measured before (`VERSUS_BEFORE`), in the same rounds.
    let before = quietus_before();
    let relayed_before = || {
        if let Some(before) = &before {
            relay_by(before);
        }
    };
    let hashed = || {
        read_all("sha256sum", &[&file]);
    };
    let logged = || {
        assert_eq!(
            read_all(
                QUIETUS,
                &["-i", "30s", "--log-dir", &logs, "--", "cat", &file]
            ),
            RELAY_BYTES
        );
    };
    let clean = || {
        for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    };
    let timed = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    // A warm-up of each: the file in the page cache, the binaries loaded.
    plain();
    relayed();
    relayed_before();
    hashed();
    logged();
    clean();
    let (mut p, mut r, mut h, mut l) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut b = Vec::new();
    for round in 0..RELAY_ROUNDS {
        if round % 2 == 0 {
            p.push(timed(&plain));
            r.push(timed(&relayed));
            b.push(timed(&relayed_before));
            h.push(timed(&hashed));
            l.push(timed(&logged));
        } else {
            l.push(timed(&logged));
            h.push(timed(&hashed));
            b.push(timed(&relayed_before));
            r.push(timed(&relayed));
            p.push(timed(&plain));
        }
        clean();
    }
    report_ratio(
        "versus_relay_paired",
        "default_vs_cat_pipe (quietus time / `cat FILE | cat` time)",
        &r,
        &p,
        "<= 1.2",
    );
    if before.is_some() {
        report_ratio(
            "versus_relay_paired",
            "default_vs_cat_pipe_before (the build of VERSUS_BEFORE, in the same rounds)",
            &b,
            &p,
            "<= 1.2",
        );
    }
    report_ratio(
        "versus_relay_paired",
        "logged_vs_sha256sum (`sha256sum FILE` time / quietus --log-dir time = share of sha256sum's speed)",
        &h,
        &l,
        ">= 0.8",
    );
}

/// What the terminal row's program writes to its terminal: 64 MiB.
const TERMINAL_BYTES: u64 = 64 * 1024 * 1024;

/// Rounds of the paired terminal comparison (each runs both sides once).
const TERMINAL_ROUNDS: usize = 11;

/// The terminal relay row (issue 14), whole process and paired like the relay rows: a program
/// writing 64 MiB of zero bytes to its terminal (`head -c 67108864 /dev/zero`), under
/// `quietus --pty -i 30s --` and under util-linux `script -qfc … /dev/null`, each with
/// stdin and stdout on `/dev/null` (stderr too). Both are checked once to relay every byte
/// before the timed rounds. Prints script's time / quietus's time: quietus's throughput
/// as a share of script's.
///
/// The bytes counted are those the relay writes to its stdout, i.e. what the terminal's line
/// discipline hands to the master. Zero bytes hold no newline, so `ONLCR` (`\n` → `\r\n`)
/// adds none and the count is exactly what the program wrote. Stdin at end-of-file ends
/// neither relay early (checked with strace on util-linux 2.38.1): quietus types the
/// terminal's EOF character into the terminal, `script` writes `^D` into it, and both keep
/// relaying until the program's side of the terminal closes; `head` never reads its stdin.
fn terminal_paired() {
    if !paired_wanted("versus_terminal_paired") {
        return;
    }
    if !Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
    {
        eprintln!("versus_terminal_paired: skipped, util-linux `script` is not installed");
        return;
    }
    let program = format!("head -c {TERMINAL_BYTES} /dev/zero");
    let size = TERMINAL_BYTES.to_string();
    let under_quietus: [&str; 8] = ["--pty", "-i", "30s", "--", "head", "-c", &size, "/dev/zero"];
    let under_script: [&str; 3] = ["-qfc", &program, "/dev/null"];
    // The sanity check (and a warm-up of both): every byte reaches the relay's stdout.
    assert_eq!(read_all(QUIETUS, &under_quietus), TERMINAL_BYTES);
    assert_eq!(read_all("script", &under_script), TERMINAL_BYTES);
    let timed = |program: &str, args: &[&str]| {
        let start = Instant::now();
        run_quiet(Command::new(program).args(args));
        start.elapsed()
    };
    // The build measured before (`VERSUS_BEFORE`), in the same rounds.
    let before = quietus_before();
    let (mut sw, mut sc, mut sb) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..TERMINAL_ROUNDS {
        let mut earlier = || {
            if let Some(before) = &before {
                sb.push(timed(before, &under_quietus));
            }
        };
        if round % 2 == 0 {
            sw.push(timed(QUIETUS, &under_quietus));
            earlier();
            sc.push(timed("script", &under_script));
        } else {
            sc.push(timed("script", &under_script));
            earlier();
            sw.push(timed(QUIETUS, &under_quietus));
        }
    }
    report_ratio(
        "versus_terminal_paired",
        "pty_vs_script (`script -qfc` time / `quietus --pty` time = share of script's \
         throughput; 64 MiB to the terminal)",
        &sc,
        &sw,
        ">= 0.9",
    );
    if before.is_some() {
        report_ratio(
            "versus_terminal_paired",
            "pty_vs_script_before (the build of VERSUS_BEFORE, in the same rounds)",
            &sc,
            &sb,
            ">= 0.9",
        );
    }
    let mib_per_sec = |times: &[Duration]| {
        let mut v: Vec<f64> = times
            .iter()
            .map(|t| TERMINAL_BYTES as f64 / 1048576.0 / t.as_secs_f64())
            .collect();
        median(&mut v)
    };
    eprintln!(
        "versus_terminal_paired/throughput: quietus --pty {:.0} MiB/s, script -qfc {:.0} MiB/s \
         (medians)",
        mib_per_sec(&sw),
        mib_per_sec(&sc),
    );
}

/// The script of the 200-process tree: 180 sleepers in the group, 20 in sessions of their
/// own (escapees the observer sees at its samples), then silence.
const TREE: &str = "i=0; while [ $i -lt 180 ]; do sleep 1000 & i=$((i+1)); done; \
                    i=0; while [ $i -lt 20 ]; do setsid sleep 1000 & i=$((i+1)); done; \
                    echo ready; exec sleep 1000";

fn teardown(c: &mut Criterion) {
    let mut group = c.benchmark_group("versus_teardown");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("tree_of_200_with_20_escapees", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut command = Command::new("sh");
                command.args(["-c", TREE]);
                let config = MonitorConfig::builder()
                    .idle_timeout(Duration::from_millis(1500))
                    .check_interval(Some(Duration::from_millis(200)))
                    .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(5)))
                    .capture(CaptureConfig::builder().spill(false))
                    .build()
                    .unwrap();
                let started = Instant::now();
                let session = Session::spawn(command, config).expect("the tree starts");
                let result = session.wait();
                assert!(
                    matches!(result.outcome, Outcome::IdleTimeout(_)),
                    "{result:?}"
                );
                assert!(!result.termination_unproven);
                let ladder = result.ladder_time.expect("a ladder ran");
                assert!(started.elapsed() < Duration::from_secs(60));
                total += ladder;
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, spawn_overhead, exit_latency, teardown);

/// Rounds of the paired start-and-exit comparison.
const START_ROUNDS: usize = 41;

/// CPU time (user + system) of this process's waited-for children so far.
fn children_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let micros = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// Runs `program args` to the end (output thrown away); its wall time and its CPU time (with
/// every descendant it waited for).
fn wall_and_cpu(program: &str, args: &[&str]) -> (Duration, Duration) {
    let cpu = children_cpu();
    let start = Instant::now();
    run_quiet(Command::new(program).args(args));
    (start.elapsed(), children_cpu() - cpu)
}

/// Runs `program args`, whose last act is printing the wall-clock time in nanoseconds, and
/// returns how long after that the supervisor had exited and been waited for.
fn exit_latency_of(program: &str, args: &[&str]) -> Duration {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("the supervisor runs");
    let done = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    let printed: u128 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("date printed nanoseconds");
    Duration::from_nanos(u64::try_from(done.as_nanos().saturating_sub(printed)).unwrap_or(0))
}

/// The quietus binary of the paired start-and-exit rows: this build's, or the one
/// `VERSUS_QUIETUS` names (another build's).
fn quietus_under_test() -> String {
    std::env::var("VERSUS_QUIETUS").unwrap_or_else(|_| QUIETUS.to_owned())
}

/// Another build to measure in the same rounds, in group mode (`VERSUS_BEFORE`: a before and
/// after on the same machine state, rows `…_group_before`).
fn quietus_before() -> Option<String> {
    std::env::var("VERSUS_BEFORE").ok()
}

/// Per-round measurements of one side of the start-and-exit comparison.
#[derive(Default)]
struct StartExitSide {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
    /// Exit latency of a program that exits at once, and of one that runs 200 ms.
    now: Vec<Duration>,
    later: Vec<Duration>,
}

impl StartExitSide {
    /// One round: `true` for wall and CPU, then the two exit latencies, under `program` with
    /// `options` before the program (`timeout`'s `1h`, quietus's `-i 1h …`).
    fn round(&mut self, program: &str, options: &[&str]) {
        let args = |tail: &[&'static str]| -> Vec<String> {
            options.iter().chain(tail).map(|s| s.to_string()).collect()
        };
        let (w, c) = wall_and_cpu(program, &strs(&args(&["true"])));
        self.wall.push(w);
        self.cpu.push(c);
        let now = args(&["date", "+%s%N"]);
        self.now.push(exit_latency_of(program, &strs(&now)));
        let late = args(&["sh", "-c", "sleep 0.2; exec date +%s%N"]);
        self.later.push(exit_latency_of(program, &strs(&late)));
    }
}

/// The words of a command line, borrowed.
fn strs(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

/// Prints the median per-round difference `a - b` of exit latencies, as row `what`.
fn report_latency(group: &str, what: &str, a: &[Duration], b: &[Duration]) {
    let mut diffs: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| (a.as_secs_f64() - b.as_secs_f64()) * 1e3)
        .collect();
    let m = median(&mut diffs);
    let ms = |d: &[Duration]| {
        let mut v: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        median(&mut v)
    };
    eprintln!(
        "{group}/{what}: {} rounds; median {:.2} ms vs {:.2} ms; per-round difference \
         median {m:+.2} ms (min {:+.2}, max {:+.2}); target <= +1 ms",
        diffs.len(),
        ms(a),
        ms(b),
        diffs[0],
        diffs[diffs.len() - 1],
    );
}

/// Start and exit against GNU `timeout`, whole process, paired (ABBA in each round): default
/// options (`quietus -i 1h -- true`) and `--containment group`, vs `timeout 1h true`, in
/// wall time and in CPU time; and the exit latency (the program's last act → the supervisor
/// exited) of a program that exits at once and of one that runs 200 ms (past the command's
/// file-watch arming), in both modes.
fn start_exit_paired() {
    const GROUP: &str = "versus_start_exit_paired";
    if !paired_wanted(GROUP) {
        return;
    }
    let sw = quietus_under_test();
    let ours: &[&str] = &["-i", "1h", "--"];
    // The process group holding the tree: no cgroup to make, enter and remove.
    let ours_group: &[&str] = &["-i", "1h", "--containment", "group", "--"];
    let theirs: &[&str] = &["1h"];
    // Warm-up: the binaries in the page cache.
    for _ in 0..3 {
        wall_and_cpu(&sw, &["-i", "1h", "--", "true"]);
        wall_and_cpu("timeout", &["1h", "true"]);
    }
    let before = quietus_before();
    let [
        mut cgroup,
        mut group,
        mut timeout,
        mut earlier,
        mut earlier_group,
    ]: [StartExitSide; 5] = Default::default();
    for round in 0..START_ROUNDS {
        let mut one = |first: bool| {
            if first {
                cgroup.round(&sw, ours);
                group.round(&sw, ours_group);
                if let Some(before) = &before {
                    earlier.round(before, ours);
                    earlier_group.round(before, ours_group);
                }
            } else {
                timeout.round("timeout", theirs);
            }
        };
        one(round % 2 == 0);
        one(round % 2 != 0);
    }
    report_ratio(GROUP, "wall", &cgroup.wall, &timeout.wall, "<= 1.5");
    report_ratio(GROUP, "cpu", &cgroup.cpu, &timeout.cpu, "<= 2");
    report_ratio(GROUP, "wall_group", &group.wall, &timeout.wall, "<= 1.5");
    report_ratio(GROUP, "cpu_group", &group.cpu, &timeout.cpu, "<= 2");
    report_latency(GROUP, "exit_latency_at_once", &cgroup.now, &timeout.now);
    report_latency(
        GROUP,
        "exit_latency_after_200ms",
        &cgroup.later,
        &timeout.later,
    );
    report_latency(
        GROUP,
        "exit_latency_at_once_group",
        &group.now,
        &timeout.now,
    );
    report_latency(
        GROUP,
        "exit_latency_after_200ms_group",
        &group.later,
        &timeout.later,
    );
    if before.is_some() {
        report_before(GROUP, "", &earlier, &timeout);
        report_before(GROUP, "_group", &earlier_group, &timeout);
    }
}

/// The rows of the build measured before (`VERSUS_BEFORE`), in one mode (`mode`: `""` for the
/// default, `"_group"`).
fn report_before(group: &str, mode: &str, earlier: &StartExitSide, timeout: &StartExitSide) {
    let row = |what: &str| format!("{what}{mode}_before");
    report_ratio(group, &row("wall"), &earlier.wall, &timeout.wall, "<= 1.5");
    report_ratio(group, &row("cpu"), &earlier.cpu, &timeout.cpu, "<= 2");
    let (now, later) = (&earlier.now, &earlier.later);
    report_latency(group, &row("exit_latency_at_once"), now, &timeout.now);
    report_latency(
        group,
        &row("exit_latency_after_200ms"),
        later,
        &timeout.later,
    );
}

fn main() {
    benches();
    start_exit_paired();
    relay_paired();
    terminal_paired();
    Criterion::default().configure_from_args().final_summary();
}
