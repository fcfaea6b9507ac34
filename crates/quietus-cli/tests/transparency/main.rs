//! The transparency suite: what a program sees when quietus starts it, in every mode, from
//! a clean parent and from hostile ones, compared with the same program started directly by
//! the same parent (issue 28, "The child's start state").
//!
//! # How
//!
//! - **The probe** (`probe.rs` beside this file) prints its start state from `/proc/self`: argv,
//!   environment (raw, in order), signal mask, ignored and caught signals, capabilities,
//!   no_new_privs, affinity, umask, ids, nice, scheduling, oom_score_adj, cgroups, cwd,
//!   rlimits, descriptors. It is built once by this suite with `rustc` (always there when cargo
//!   is: it is the compiler that built this test) into `CARGO_TARGET_TMPDIR`, keyed by the
//!   hash of its source. Not an `examples/` target: `cargo test --test transparency` builds no
//!   example, and a `[[bin]]` would be installed with the crate.
//! - **The parent** is a few lines of Python run just before: it sets up a state (signals
//!   blocked or ignored, `RLIMIT_NOFILE`, an environment with duplicates, entries without `=`
//!   and non-UTF-8 bytes) and `execve`s, through ctypes, the direct probe or the quietus
//!   that starts it, with exactly the argv and environment given (Python's own ignores of PIPE
//!   and XFSZ and its INT handler are undone first). So the parent's state is real, and the
//!   direct run and the supervised run start from the same one.
//! - **The modes**: the command (pipes, `--pty`, `--containment group`, `--non-interactive`),
//!   the library's `Session` (pipes, terminal: this binary itself, started again as
//!   `--library-runner`, so it too runs under the hostile parent), and `serve` (pipes, terminal).
//!
//! # The intended differences (README, "What the program sees")
//!
//! Everything the probe prints is the same as the direct run's, but:
//! - `pid`, `ppid`: another process, another parent;
//! - `pgrp`: the program leads its own process group (pgid = pid); `session`: its own session
//!   in the terminal and non-interactive modes, quietus's otherwise;
//! - `tty_nr`, `tpgid`: the terminal modes give it a controlling terminal of its own (and it is
//!   in its foreground); the non-interactive mode gives none; the others keep quietus's;
//! - `cgroup`: in a cgroup of its own unless `--containment group` (the `0::` line);
//! - the standard streams' kinds: pipes of quietus's for stdout and stderr (in the direct
//!   run the suite gives pipes too), the terminal for all three in the terminal modes,
//!   `/dev/null` for stdin in the non-interactive mode and for the library's and serve's;
//! - `SigBlk`: empty, whatever quietus was started with;
//! - the environment: the variables quietus sets by contract (`QUIETUS_SESSION`, the
//!   non-interactive profile's), after the caller's, which keep their order, duplicates and
//!   bytes;
//! - serve: argv travels as JSON strings, so the serve cases use UTF-8 arguments.

#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use support::{GENEROUS, MARKER_ENV, Marker};

/// The probe's source: the suite builds it.
const PROBE_SOURCE: &str = include_str!("probe.rs");

/// The parent: `python3 -c LAUNCHER SPEC` (the spec is JSON, bytes as hex) sets up the
/// parent's state and `execve`s `path` with exactly `argv` and `env`.
const LAUNCHER: &str = r#"
import ctypes, json, os, resource, signal, sys
spec = json.load(open(sys.argv[1]))
for s in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
    signal.signal(s, signal.SIG_DFL)
for s in spec["ignore"]:
    signal.signal(s, signal.SIG_IGN)
if spec["nofile"]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (spec["nofile"], hard))
signal.pthread_sigmask(signal.SIG_SETMASK, spec["block"])
h = bytes.fromhex
argv = [h(a) for a in spec["argv"]]
env = [h(e) for e in spec["env"]]
A = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
E = (ctypes.c_char_p * (len(env) + 1))(*env, None)
libc = ctypes.CDLL(None, use_errno=True)
libc.execve(h(spec["path"]), A, E)
sys.exit("execve failed: " + os.strerror(ctypes.get_errno()))
"#;

/// Signal numbers (Linux).
const SIGHUP: i32 = 1;
const SIGINT: i32 = 2;
const SIGQUIT: i32 = 3;
const SIGUSR1: i32 = 10;
const SIGALRM: i32 = 14;
const SIGTERM: i32 = 15;
const SIGCHLD: i32 = 17;
const SIGWINCH: i32 = 28;

/// The state a parent starts quietus (or the probe) with.
#[derive(Debug, Clone, Default)]
struct Parent {
    name: &'static str,
    /// Blocked signals.
    block: Vec<i32>,
    /// Ignored signals.
    ignore: Vec<i32>,
    /// The soft `RLIMIT_NOFILE`.
    nofile: Option<u64>,
    /// Extra environment entries, raw (after the base ones).
    env: Vec<Vec<u8>>,
    /// Extra arguments, raw.
    args: Vec<Vec<u8>>,
}

impl Parent {
    fn clean() -> Parent {
        Parent {
            name: "clean",
            ..Parent::default()
        }
    }

    /// Signals blocked (as coreutils' `timeout-blocked` test), INT and QUIT ignored (a
    /// script's background job), SIGCHLD ignored.
    fn signals() -> Parent {
        Parent {
            name: "signals",
            block: vec![SIGHUP, SIGINT, SIGALRM, SIGTERM, SIGCHLD, SIGUSR1, SIGWINCH],
            ignore: vec![SIGINT, SIGQUIT, SIGCHLD],
            ..Parent::default()
        }
    }

    /// `ulimit -n 64`.
    fn limits() -> Parent {
        Parent {
            name: "limits",
            nofile: Some(64),
            ..Parent::default()
        }
    }

    /// 5,000 variables, duplicates, entries without `=`, non-UTF-8 bytes in names, values and
    /// arguments.
    fn environment(utf8_args: bool) -> Parent {
        let mut env: Vec<Vec<u8>> = vec![
            b"DUP=first".to_vec(),
            b"NO_EQUALS_SIGN".to_vec(),
            b"Z_SORTS_LAST=1".to_vec(),
            b"A_SORTS_FIRST=1".to_vec(),
            b"BYTES=\xff\xfe".to_vec(),
            b"\xc3(NAME=latin".to_vec(),
            b"DUP=second".to_vec(),
            b"EMPTY=".to_vec(),
        ];
        env.extend((0..5000).map(|n| format!("MANY_{n}=value {n}").into_bytes()));
        let args = if utf8_args {
            vec![b"two words".to_vec(), b"".to_vec(), "é".as_bytes().to_vec()]
        } else {
            vec![b"two words".to_vec(), b"".to_vec(), b"\xff\x80".to_vec()]
        };
        Parent {
            name: "environment",
            env,
            args,
            ..Parent::default()
        }
    }
}

/// How the probe is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Direct,
    CliPipes,
    CliPty,
    CliGroup,
    CliNonInteractive,
    LibraryPipes,
    LibraryTerminal,
    ServePipes,
    ServeTerminal,
}

impl Mode {
    const SUPERVISED: [Mode; 8] = [
        Mode::CliPipes,
        Mode::CliPty,
        Mode::CliGroup,
        Mode::CliNonInteractive,
        Mode::LibraryPipes,
        Mode::LibraryTerminal,
        Mode::ServePipes,
        Mode::ServeTerminal,
    ];

    fn terminal(self) -> bool {
        matches!(
            self,
            Mode::CliPty | Mode::LibraryTerminal | Mode::ServeTerminal
        )
    }

    fn serve(self) -> bool {
        matches!(self, Mode::ServePipes | Mode::ServeTerminal)
    }

    /// Leads a session of its own.
    fn own_session(self) -> bool {
        self.terminal() || self == Mode::CliNonInteractive
    }

    /// It may run in a cgroup of its own (every mode but `--containment group`).
    fn cgroup_may_differ(self) -> bool {
        !matches!(self, Mode::Direct | Mode::CliGroup)
    }
}

/// The probe, built once per source.
fn probe_path() -> &'static Path {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        PROBE_SOURCE.hash(&mut hasher);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join(format!("transparency-probe-{:016x}", hasher.finish()));
        if path.exists() {
            return path;
        }
        let source = dir.join(format!("transparency-probe-{}.rs", std::process::id()));
        std::fs::write(&source, PROBE_SOURCE).expect("the probe's source is written");
        let building = dir.join(format!("transparency-probe-{}.bin", std::process::id()));
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let out = Command::new(rustc)
            .args(["--edition", "2021", "-O", "-o"])
            .arg(&building)
            .arg(&source)
            .output()
            .expect("rustc runs");
        assert!(
            out.status.success(),
            "the probe does not build: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Another test binary building it at the same time: the rename is atomic.
        std::fs::rename(&building, &path).expect("the probe is in place");
        let _ = std::fs::remove_file(&source);
        path
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The base environment of every run: `PATH`, `HOME`, `LANG`, the marker.
fn base_env(marker: &Marker) -> Vec<Vec<u8>> {
    let mut env = Vec::new();
    for name in ["PATH", "HOME", "LANG"] {
        if let Some(value) = std::env::var_os(name) {
            let mut entry = format!("{name}=").into_bytes();
            entry.extend_from_slice(value.as_bytes());
            env.push(entry);
        }
    }
    env.push(format!("{MARKER_ENV}={}", marker.as_str()).into_bytes());
    env
}

/// The `python3 -c LAUNCHER SPEC` command that starts `argv` (its first word the path) as
/// `parent` says, with `env`.
fn launcher(parent: &Parent, argv: &[Vec<u8>], env: &[Vec<u8>], spec_dir: &Path) -> Command {
    let list = |items: &[Vec<u8>]| {
        let words: Vec<String> = items.iter().map(|i| format!("\"{}\"", hex(i))).collect();
        format!("[{}]", words.join(","))
    };
    let numbers = |items: &[i32]| {
        let words: Vec<String> = items.iter().map(i32::to_string).collect();
        format!("[{}]", words.join(","))
    };
    let spec = format!(
        "{{\"path\":\"{}\",\"argv\":{},\"env\":{},\"block\":{},\"ignore\":{},\"nofile\":{}}}",
        hex(&argv[0]),
        list(argv),
        list(env),
        numbers(&parent.block),
        numbers(&parent.ignore),
        parent.nofile.map_or("null".to_owned(), |n| n.to_string()),
    );
    let file = tempfile::Builder::new()
        .prefix("spec-")
        .suffix(".json")
        .tempfile_in(spec_dir)
        .expect("a spec file");
    std::fs::write(file.path(), spec).expect("the spec is written");
    let (_, path) = file.keep().expect("kept");
    let mut command = Command::new("python3");
    command.arg("-c").arg(LAUNCHER).arg(path);
    command
}

/// One run's dump, and the probe's pid.
#[derive(Debug, Clone)]
struct Dump {
    lines: Vec<(String, String)>,
}

impl Dump {
    fn parse(output: &[u8], what: &str) -> Dump {
        let text = String::from_utf8_lossy(output).replace("\r\n", "\n");
        let start = text
            .find("arg\t")
            .unwrap_or_else(|| panic!("{what}: no dump in {:?}", cut(&text)));
        let end = text[start..]
            .find("\nend\t")
            .unwrap_or_else(|| panic!("{what}: the dump has no end: {:?}", cut(&text)));
        let lines = text[start..start + end]
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('\t').unwrap_or((l, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect();
        Dump { lines }
    }

    fn all(&self, key: &str) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn one(&self, key: &str) -> &str {
        self.all(key).first().copied().unwrap_or("-")
    }
}

/// At most the first 1,000 characters of `text`, for a message.
fn cut(text: &str) -> String {
    text.chars().take(1000).collect()
}

/// The names of the variables quietus sets by contract in `mode`.
fn contract_names(mode: Mode) -> Vec<String> {
    let mut names = vec!["QUIETUS_SESSION".to_owned()];
    if mode == Mode::CliNonInteractive {
        names.extend(
            quietus::SessionBuilder::NON_INTERACTIVE_ENV
                .iter()
                .map(|(k, _)| (*k).to_owned()),
        );
    }
    names
}

/// Every difference between `direct` and `supervised` that is not intended in `mode`.
#[allow(clippy::too_many_lines)] // a test or bench scenario: the 80-line rule is for the library and the command
fn differences(mode: Mode, direct: &Dump, supervised: &Dump) -> Vec<String> {
    let mut wrong = Vec::new();
    let pid = supervised.one("pid");
    // Compared one by one below; the rest must be equal.
    let special: BTreeSet<&str> = [
        "pid", "ppid", "pgrp", "session", "tty_nr", "tpgid", "cgroup", "fd", "env", "SigBlk",
    ]
    .into_iter()
    .collect();
    let plain = |dump: &Dump| -> Vec<(String, String)> {
        dump.lines
            .iter()
            .filter(|(k, _)| !special.contains(k.as_str()))
            .cloned()
            .collect()
    };
    let (a, b) = (plain(direct), plain(supervised));
    if a != b {
        for (x, y) in a.iter().zip(&b) {
            if x != y {
                wrong.push(format!("{}: direct {:?}, supervised {:?}", x.0, x.1, y.1));
            }
        }
        if a.len() != b.len() {
            wrong.push(format!("{} lines direct, {} supervised", a.len(), b.len()));
        }
    }
    if supervised.one("SigBlk") != "0000000000000000" {
        wrong.push(format!(
            "signal mask {} (empty expected)",
            supervised.one("SigBlk")
        ));
    }
    if supervised.one("pgrp") != pid {
        wrong.push(format!(
            "pgrp {} is not its pid {pid}",
            supervised.one("pgrp")
        ));
    }
    let session = if mode.own_session() {
        pid
    } else {
        direct.one("session")
    };
    if supervised.one("session") != session {
        wrong.push(format!(
            "session {}, expected {session}",
            supervised.one("session")
        ));
    }
    if mode.terminal() {
        if supervised.one("tty_nr") == "0" || supervised.one("tpgid") != pid {
            wrong.push(format!(
                "no terminal of its own: tty_nr {}, tpgid {}",
                supervised.one("tty_nr"),
                supervised.one("tpgid")
            ));
        }
    } else if mode == Mode::CliNonInteractive {
        if supervised.one("tty_nr") != "0" {
            wrong.push(format!(
                "a controlling terminal {}",
                supervised.one("tty_nr")
            ));
        }
    } else if supervised.one("tty_nr") != direct.one("tty_nr") {
        wrong.push(format!(
            "controlling terminal {}, direct {}",
            supervised.one("tty_nr"),
            direct.one("tty_nr")
        ));
    }
    let cgroups = |dump: &Dump, v2: bool| -> Vec<String> {
        dump.all("cgroup")
            .into_iter()
            .filter(|l| l.starts_with("0::") == v2)
            .map(str::to_owned)
            .collect()
    };
    if cgroups(direct, false) != cgroups(supervised, false)
        || (!mode.cgroup_may_differ() && cgroups(direct, true) != cgroups(supervised, true))
    {
        wrong.push(format!(
            "cgroups {:?}, direct {:?}",
            supervised.all("cgroup"),
            direct.all("cgroup")
        ));
    }
    wrong.extend(environment_differences(mode, direct, supervised));
    wrong.extend(descriptor_differences(mode, direct, supervised));
    wrong
}

/// The environment: the caller's exactly, then the contract's variables the caller did not set.
fn environment_differences(mode: Mode, direct: &Dump, supervised: &Dump) -> Vec<String> {
    let name = |entry: &str| entry.split('=').next().unwrap_or(entry).to_owned();
    let own: BTreeSet<String> = direct.all("env").into_iter().map(name).collect();
    let contract = contract_names(mode);
    let theirs = supervised.all("env");
    let kept: Vec<&str> = theirs
        .iter()
        .copied()
        .filter(|e| own.contains(&name(e)) || !contract.contains(&name(e)))
        .collect();
    let mut wrong = Vec::new();
    if kept != direct.all("env") {
        let first = kept
            .iter()
            .zip(direct.all("env"))
            .position(|(a, b)| *a != b)
            .unwrap_or(kept.len().min(direct.all("env").len()));
        wrong.push(format!(
            "environment differs from entry {first} on: supervised {:?}, direct {:?} \
             ({} and {} entries)",
            kept.get(first..(first + 3).min(kept.len())),
            direct
                .all("env")
                .get(first..(first + 3).min(direct.all("env").len())),
            kept.len(),
            direct.all("env").len()
        ));
    }
    wrong
}

/// The descriptors: the same beyond the standard streams; those as the mode gives them.
fn descriptor_differences(mode: Mode, direct: &Dump, supervised: &Dump) -> Vec<String> {
    // "N kind target": pipes, sockets and terminals by kind only (their inodes differ).
    let fds = |dump: &Dump| -> Vec<(u32, String, String)> {
        dump.all("fd")
            .into_iter()
            .filter_map(|l| {
                let mut words = l.splitn(3, ' ');
                let n = words.next()?.parse().ok()?;
                let kind = words.next()?.to_owned();
                let target = match kind.as_str() {
                    "pipe" | "socket" | "terminal" => String::new(),
                    _ => words.next().unwrap_or("").to_owned(),
                };
                Some((n, kind, target))
            })
            .collect()
    };
    let (a, b) = (fds(direct), fds(supervised));
    let mut wrong = Vec::new();
    let beyond = |v: &[(u32, String, String)]| -> Vec<(u32, String, String)> {
        v.iter().filter(|f| f.0 > 2).cloned().collect()
    };
    if beyond(&a) != beyond(&b) {
        wrong.push(format!(
            "descriptors {:?}, direct {:?}",
            beyond(&b),
            beyond(&a)
        ));
    }
    let kinds = |v: &[(u32, String, String)]| -> Vec<String> {
        (0..3)
            .map(|n| {
                v.iter()
                    .find(|f| f.0 == n)
                    .map_or("closed".to_owned(), |f| f.1.clone())
            })
            .collect()
    };
    let expected: Vec<String> = if mode.terminal() {
        vec!["terminal".into(); 3]
    } else {
        // The suite gives the direct run /dev/null and two pipes; quietus gives the same
        // kinds (its stdin, or /dev/null; its output pipes).
        kinds(&a)
    };
    if kinds(&b) != expected {
        wrong.push(format!("stdio {:?}, expected {expected:?}", kinds(&b)));
    }
    wrong
}

/// The words that start the probe, and the probe's own arguments.
fn probe_argv(parent: &Parent) -> Vec<Vec<u8>> {
    let mut argv = vec![probe_path().as_os_str().as_bytes().to_vec()];
    argv.push(b"probe-arg".to_vec());
    argv.extend(parent.args.iter().cloned());
    argv
}

fn quietus() -> Vec<u8> {
    env!("CARGO_BIN_EXE_quietus").as_bytes().to_vec()
}

/// Runs the probe as `mode` says from `parent`; returns its dump.
fn run(mode: Mode, parent: &Parent, marker: &Marker, scratch: &Path) -> Dump {
    let mut env = base_env(marker);
    env.extend(parent.env.iter().cloned());
    let probe = probe_argv(parent);
    let words =
        |list: &[&str]| -> Vec<Vec<u8>> { list.iter().map(|w| w.as_bytes().to_vec()).collect() };
    let what = format!("{mode:?} from the {} parent", parent.name);
    let argv: Vec<Vec<u8>> = match mode {
        Mode::Direct => probe,
        Mode::CliPipes | Mode::CliPty | Mode::CliGroup | Mode::CliNonInteractive => {
            let mut argv = vec![quietus()];
            argv.extend(words(&["-q", "-i", "60s", "--no-watch"]));
            argv.extend(words(match mode {
                Mode::CliPty => &["--pty"][..],
                Mode::CliGroup => &["--containment", "group"],
                Mode::CliNonInteractive => &["--non-interactive"],
                _ => &[],
            }));
            argv.push(b"--".to_vec());
            argv.extend(probe);
            argv
        }
        Mode::LibraryPipes | Mode::LibraryTerminal => {
            let me = std::env::current_exe().expect("this test binary");
            let mut argv = vec![
                me.as_os_str().as_bytes().to_vec(),
                b"--library-runner".to_vec(),
            ];
            argv.push(if mode == Mode::LibraryTerminal {
                b"terminal".to_vec()
            } else {
                b"pipes".to_vec()
            });
            argv.extend(probe);
            argv
        }
        Mode::ServePipes | Mode::ServeTerminal => {
            let dump = run_serve(mode, parent, &env, &probe, scratch, &what);
            support::assert_no_leak(marker);
            return dump;
        }
    };
    let mut command = launcher(parent, &argv, &env, scratch);
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let out = wait_output(child, &what);
    support::assert_no_leak(marker);
    Dump::parse(&out, &what)
}

/// Waits for `child` within `GENEROUS`; its stdout (stderr is printed when it failed).
fn wait_output(mut child: std::process::Child, what: &str) -> Vec<u8> {
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + GENEROUS;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: did not end within {GENEROUS:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = out.join().expect("read");
    let err = err.join().expect("read");
    assert!(
        status.success(),
        "{what}: {status}; stderr: {}; stdout: {}",
        cut(&String::from_utf8_lossy(&err)),
        cut(&String::from_utf8_lossy(&out))
    );
    out
}

/// `quietus serve` started by `parent`, asked to start the probe (UTF-8 argv only: JSON).
fn run_serve(
    mode: Mode,
    parent: &Parent,
    env: &[Vec<u8>],
    probe: &[Vec<u8>],
    scratch: &Path,
    what: &str,
) -> Dump {
    use base64::Engine;
    let argv = vec![quietus(), b"serve".to_vec()];
    let mut child = launcher(parent, &argv, env, scratch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let words: Vec<serde_json::Value> = probe
        .iter()
        .map(|w| serde_json::Value::from(String::from_utf8(w.clone()).expect("UTF-8 for serve")))
        .collect();
    let io = if mode == Mode::ServeTerminal {
        serde_json::json!({"pty": {"rows": 24, "cols": 80}})
    } else {
        serde_json::json!({"pipe": {"stdin": "closed"}})
    };
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "process/start",
        "params": {"processId": "probe", "argv": words, "io": io, "idleTimeoutMs": 60000}});
    let mut stdin = child.stdin.take().expect("piped");
    writeln!(stdin, "{request}").expect("serve reads");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut next = |what_for: &str| -> serde_json::Value {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("{what}: serve ended before {what_for}"))
            .expect("serve writes lines");
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        assert!(value.get("error").is_none(), "{what}: {value}");
        value
    };
    while next("the exit")["method"] != "process/exited" {}
    // The whole output, from a snapshot once the process is over (its output read to the
    // end; the notifications are throttled).
    let deadline = Instant::now() + GENEROUS;
    let mut id = 1;
    let answer = loop {
        id += 1;
        let snapshot = serde_json::json!({"jsonrpc": "2.0", "id": id,
            "method": "process/snapshot", "params": {"processId": "probe"}});
        writeln!(stdin, "{snapshot}").expect("serve reads");
        let answer = loop {
            let value = next("the snapshot");
            if value["id"] == id {
                break value;
            }
        };
        if answer["result"]["running"] == false {
            break answer;
        }
        assert!(Instant::now() < deadline, "{what}: still running: {answer}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let stream = if mode == Mode::ServeTerminal {
        "terminal"
    } else {
        "stdout"
    };
    let data = answer["result"][stream].as_str().unwrap_or_default();
    let output = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    drop(stdin);
    let status = child.wait().expect("serve ends");
    assert!(status.success(), "{what}: serve {status}");
    Dump::parse(&output, what)
}

/// `--library-runner pipes|terminal PROBE ARGS…`: runs the probe in a library session, its
/// output to this process's stdout.
fn library_runner(args: &[OsString]) -> std::process::ExitCode {
    // As the docs ask of a process that may have inherited SIGCHLD ignored.
    if let Err(e) = quietus::supervisor::prepare() {
        eprintln!("library runner: {e}");
        return std::process::ExitCode::from(125);
    }
    let terminal = args[0] == "terminal";
    let program = quietus::Program::new(&args[1]).args(&args[2..]);
    let config = quietus::MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(60))
        .watch_files(false)
        .build()
        .unwrap();
    let mut builder = quietus::Session::builder(program)
        .config(config)
        .stdout(quietus::OutputSink::writer(std::io::stdout()));
    if terminal {
        builder = builder.pty(24, 80);
    } else {
        builder = builder.stderr(quietus::OutputSink::writer(std::io::stderr()));
    }
    let session = match builder.spawn() {
        Ok(session) => session,
        Err(e) => {
            eprintln!("library runner: {e}");
            return std::process::ExitCode::from(125);
        }
    };
    let result = session.wait();
    std::process::ExitCode::from(u8::try_from(result.exit_code()).unwrap_or(1))
}

/// One parent: every mode against the direct run; the failures.
fn check_parent(parent: &Parent, modes: &[Mode]) -> Vec<String> {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let marker = Marker::new(&format!("transparency-{}", parent.name));
    let direct = run(Mode::Direct, parent, &marker, scratch.path());
    let mut failures = Vec::new();
    for &mode in modes {
        let supervised = run(mode, parent, &marker, scratch.path());
        for difference in differences(mode, &direct, &supervised) {
            failures.push(format!(
                "{mode:?} from the {} parent: {difference}",
                parent.name
            ));
        }
    }
    failures
}

/// A named check of the suite.
type Case = (&'static str, fn() -> Vec<String>);

fn every_mode_from_a_clean_parent() -> Vec<String> {
    check_parent(&Parent::clean(), &Mode::SUPERVISED)
}

fn every_mode_from_a_parent_that_blocks_and_ignores_signals() -> Vec<String> {
    check_parent(&Parent::signals(), &Mode::SUPERVISED)
}

fn every_mode_from_a_parent_with_ulimit_n_64() -> Vec<String> {
    check_parent(&Parent::limits(), &Mode::SUPERVISED)
}

fn every_mode_with_an_odd_environment_and_non_utf8_arguments() -> Vec<String> {
    let not_serve: Vec<Mode> = Mode::SUPERVISED
        .into_iter()
        .filter(|m| !m.serve())
        .collect();
    let mut failures = check_parent(&Parent::environment(false), &not_serve);
    let serve: Vec<Mode> = Mode::SUPERVISED.into_iter().filter(|m| m.serve()).collect();
    failures.extend(check_parent(&Parent::environment(true), &serve));
    failures
}

/// The suite's own check: a difference that is not intended is found (the comparison could
/// fail).
fn the_comparison_finds_a_changed_variable_and_a_blocked_mask() -> Vec<String> {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let marker = Marker::new("transparency-self-check");
    let direct = run(Mode::Direct, &Parent::clean(), &marker, scratch.path());
    let mut changed = direct.clone();
    for line in &mut changed.lines {
        if line.0 == "env" && line.1.starts_with("PATH=") {
            line.1.push_str(":/changed");
        }
        if line.0 == "SigBlk" {
            line.1 = "0000000000000002".into();
        }
        if line.0 == "pgrp" {
            // As a supervised program's (its own group): not a difference.
            line.1 = direct.one("pid").to_owned();
        }
    }
    let found = differences(Mode::CliGroup, &direct, &changed);
    let mut failures = Vec::new();
    if !found.iter().any(|d| d.contains("environment")) {
        failures.push(format!("a changed PATH was not found: {found:?}"));
    }
    if !found.iter().any(|d| d.contains("signal mask")) {
        failures.push(format!("a blocked INT was not found: {found:?}"));
    }
    failures
}

const CASES: &[Case] = &[
    (
        "the_comparison_finds_a_changed_variable_and_a_blocked_mask",
        the_comparison_finds_a_changed_variable_and_a_blocked_mask,
    ),
    (
        "every_mode_from_a_clean_parent",
        every_mode_from_a_clean_parent,
    ),
    (
        "every_mode_from_a_parent_that_blocks_and_ignores_signals",
        every_mode_from_a_parent_that_blocks_and_ignores_signals,
    ),
    (
        "every_mode_from_a_parent_with_ulimit_n_64",
        every_mode_from_a_parent_with_ulimit_n_64,
    ),
    (
        "every_mode_with_an_odd_environment_and_non_utf8_arguments",
        every_mode_with_an_odd_environment_and_non_utf8_arguments,
    ),
];

/// A small harness (`harness = false`: this binary is also the library runner, started again
/// by the suite under each parent). Arguments not starting with `-` filter the cases by name,
/// as libtest's do; `--list` lists them.
fn main() -> std::process::ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().map(OsString::as_os_str) == Some(OsStr::new("--library-runner")) {
        return library_runner(&args[1..]);
    }
    // libtest's options are accepted and ignored, with the value of those that take one.
    const WITH_VALUE: [&str; 6] = [
        "--test-threads",
        "--skip",
        "--color",
        "--format",
        "--logfile",
        "-Z",
    ];
    let words: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let filters: Vec<String> = words
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with('-') && (*i == 0 || !WITH_VALUE.contains(&words[i - 1])))
        .map(|(_, a)| (*a).to_owned())
        .collect();
    let chosen: Vec<&Case> = CASES
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f)))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return std::process::ExitCode::SUCCESS;
    }
    println!("running {} transparency checks", chosen.len());
    let mut failed = 0;
    for (name, case) in chosen {
        let failures = match std::panic::catch_unwind(case) {
            Ok(failures) => failures,
            Err(panic) => vec![
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".to_owned()),
            ],
        };
        if failures.is_empty() {
            println!("test {name} ... ok");
        } else {
            failed += 1;
            println!("test {name} ... FAILED");
            for failure in failures {
                println!("    {failure}");
            }
        }
    }
    if failed > 0 {
        println!("{failed} transparency check(s) failed");
        return std::process::ExitCode::FAILURE;
    }
    println!("transparency: all checks passed");
    std::process::ExitCode::SUCCESS
}
