//! What the command does with the state it was started with (issue 28, items 1–4 and 11): a
//! parent that ignores SIGCHLD or blocks signals, a script's background job (INT and QUIT
//! ignored), a low descriptor limit; and what a terminal program gets (its signals, its
//! environment). The whole start state in every mode is the transparency suite's
//! (`tests/transparency`); these are the issue's own reproductions, with bash and Python
//! children and parents.

use crate::support as common;
use crate::support::cli as cli_support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use common::{GENEROUS, HANDSHAKE, Marker, SharedBuf, assert_no_leak, poll_until};

const QUIETUS: &str = env!("CARGO_BIN_EXE_quietus");

/// `bash -c 'SETUP; exec quietus ARGS'`: the parent's state is real (the shell sets it up
/// and becomes quietus).
fn under_bash(marker: &Marker, setup: &str, args: &[&str]) -> Command {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!("{setup}; exec \"$@\""))
        .arg("parent")
        .arg(QUIETUS)
        .args(args);
    cli_support::isolate(&mut command, marker);
    command
}

/// `python3 -c 'SETUP; os.execv(quietus, ARGS)'` (Python's own ignores of PIPE and XFSZ
/// undone first, as a shell would have them).
fn under_python(marker: &Marker, setup: &str, args: &[&str]) -> Command {
    let script = format!(
        "import os, resource, signal, sys\n\
         signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n\
         signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n\
         {setup}\n\
         os.execv(sys.argv[1], sys.argv[1:])\n"
    );
    let mut command = common::program("python3");
    command.arg("-c").arg(script).arg(QUIETUS).args(args);
    cli_support::isolate(&mut command, marker);
    command
}

/// Runs `command` to its end (stdin empty), bounded by [`GENEROUS`].
fn output(command: Command) -> std::process::Output {
    let mut command = assert_cmd::Command::from_std(command);
    command.timeout(GENEROUS);
    command.output().expect("it runs")
}

/// Starts `command` with stdin piped and stdout and stderr collected.
fn start(mut command: Command) -> (std::process::Child, SharedBuf, SharedBuf) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("it starts");
    let collect = |mut pipe: Box<dyn Read + Send>, into: SharedBuf| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    return;
                }
                into.push(&buf[..n]);
            }
        })
    };
    let (out, err) = (SharedBuf::new(), SharedBuf::new());
    let readers = [
        collect(Box::new(child.stdout.take().expect("piped")), out.clone()),
        collect(Box::new(child.stderr.take().expect("piped")), err.clone()),
    ];
    COLLECTORS
        .lock()
        .expect("the collectors")
        .extend(readers.map(|reader| (child.id(), reader)));
    (child, out, err)
}

/// The threads collecting each started child's stdout and stderr, by the child's pid: [`wait`]
/// lets them reach the end of their pipes, so the last line a program wrote is in the buffer
/// once the child is gone (on a loaded machine a collector may still be reading then).
static COLLECTORS: std::sync::Mutex<Vec<(u32, std::thread::JoinHandle<()>)>> =
    std::sync::Mutex::new(Vec::new());

fn wait(child: &mut std::process::Child, out: &SharedBuf, err: &SharedBuf) -> i32 {
    let mut status = None;
    poll_until(GENEROUS, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "no end within {GENEROUS:?}: {:?} {:?}",
            out.text(),
            err.text()
        );
    };
    // Its output read to the end (the pipes close once it and what it started are gone).
    let pid = child.id();
    let ended = poll_until(GENEROUS, || {
        COLLECTORS
            .lock()
            .expect("the collectors")
            .iter()
            .filter(|(of, _)| *of == pid)
            .all(|(_, reader)| reader.is_finished())
    });
    assert!(
        ended,
        "its output never ended: {:?} {:?}",
        out.text(),
        err.text()
    );
    COLLECTORS
        .lock()
        .expect("the collectors")
        .retain(|(of, _)| *of != pid);
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or(128 + status.signal().unwrap_or(0))
}

/// The Python child that says how SIGCHLD is handled in it.
const SAYS_SIGCHLD: &str =
    "import signal; print('SIGCHLD ignored', signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN)";

#[test]
fn a_parent_that_ignores_sigchld_breaks_no_run_and_the_program_keeps_the_ignore() {
    let marker = Marker::new("sigchld-ignored");
    let modes: [&[&str]; 3] = [&[], &["--pty"], &["--containment", "group"]];
    for mode in modes {
        let mut args = vec!["-i", "10s", "--no-watch"];
        args.extend_from_slice(mode);
        args.extend(["--", "python3", "-c", SAYS_SIGCHLD]);
        let parents = [
            under_bash(&marker, "trap '' CHLD", &args),
            under_python(
                &marker,
                "signal.signal(signal.SIGCHLD, signal.SIG_IGN)",
                &args,
            ),
        ];
        for parent in parents {
            let what = format!("{parent:?}");
            let out = output(parent);
            cli_support::assert_code(&out, 0);
            let text = cli_support::text(&out.stdout);
            assert!(text.contains("SIGCHLD ignored True"), "{what}: {text:?}");
        }
    }
    assert_no_leak(&marker);
}

#[test]
fn a_parent_that_blocks_signals_leaves_quietus_passing_them_on_and_the_program_unblocked() {
    // coreutils' timeout-blocked case: ALRM, TERM, INT, CHLD (and HUP) blocked by the parent.
    let marker = Marker::new("blocked-parent");
    let script = "trap 'echo got TERM; exit 7' TERM; grep SigBlk /proc/self/status; \
                  echo ready; while :; do sleep 0.05; done";
    for mode in [&[][..], &["--pty"]] {
        let mut args = vec!["-i", "1h", "--no-watch"];
        args.extend_from_slice(mode);
        args.extend(["--", "bash", "-c", script, marker.as_str()]);
        let parent = under_python(
            &marker,
            "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM, signal.SIGTERM, \
             signal.SIGINT, signal.SIGCHLD, signal.SIGHUP])",
            &args,
        );
        let (mut child, out, err) = start(parent);
        assert!(
            poll_until(HANDSHAKE, || out.text().contains("ready")),
            "{mode:?}: {:?} {:?}",
            out.text(),
            err.text()
        );
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("ours");
        let code = wait(&mut child, &out, &err);
        let text = out.text();
        assert!(
            text.contains("SigBlk:\t0000000000000000"),
            "{mode:?}: {text:?}"
        );
        assert!(
            text.contains("got TERM"),
            "{mode:?}: {text:?} {:?}",
            err.text()
        );
        assert_eq!(
            code, 7,
            "{mode:?}: the program's own exit, after the TERM passed on"
        );
    }
    assert_no_leak(&marker);
}

#[test]
fn a_terminal_program_sees_the_ladder_s_term_and_timeout_s_alarm() {
    let marker = Marker::new("pty-signals");
    // The ladder's TERM reaches a bash program's trap (it was blocked: KILL after the grace).
    let script = "trap 'echo cleaned up; exit 0' TERM; echo ready; sleep 30 & wait";
    let out = cli_support::sw(&marker)
        .args(&["--pty", "-i", "1s", "--grace", "20s", "--no-watch"])
        .args(&["--", "bash", "-c", script, marker.as_str()])
        .output();
    let text = cli_support::text(&out.stdout);
    assert!(
        text.contains("cleaned up"),
        "{text:?} {:?}",
        cli_support::text(&out.stderr)
    );
    cli_support::assert_code(&out, 124);
    // `timeout` gets its ALRM (it was blocked: the sleep ran its 6 s and timeout said 0).
    let out = cli_support::sw(&marker)
        .args(&[
            "--pty",
            "-i",
            "1m",
            "--no-watch",
            "--",
            "timeout",
            "1",
            "sleep",
            "6",
        ])
        .output();
    cli_support::assert_code(&out, 124);
    assert_no_leak(&marker);
}

#[test]
fn ctrl_c_typed_into_the_terminal_interrupts_a_python_program() {
    let marker = Marker::new("pty-ctrl-c");
    let script = "import time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n\
                  except KeyboardInterrupt:\n    print('interrupted', flush=True)\n    raise SystemExit(3)";
    let mut command = Command::new(QUIETUS);
    command.args([
        "--pty",
        "-i",
        "1h",
        "--no-watch",
        "--",
        "python3",
        "-c",
        script,
    ]);
    command.arg(marker.as_str());
    cli_support::isolate(&mut command, &marker);
    let (mut child, out, err) = start(command);
    assert!(
        poll_until(HANDSHAKE, || out.text().contains("ready")),
        "{:?} {:?}",
        out.text(),
        err.text()
    );
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(b"\x03").expect("quietus reads");
    stdin.flush().expect("written");
    let code = wait(&mut child, &out, &err);
    assert!(out.text().contains("interrupted"), "{:?}", out.text());
    assert_eq!(code, 3, "{:?}", err.text());
    assert_no_leak(&marker);
}

#[test]
fn quietus_blocks_no_fault_signal() {
    let marker = Marker::new("no-fault-block");
    // The program's parent is quietus: its main thread's mask, once it is out of the
    // start (around which it blocks every signal for a moment).
    let script = "for i in $(seq 400); do m=$(grep SigBlk /proc/$PPID/status); \
                  case $m in *fffffffffffbfeff) sleep 0.05;; *) break;; esac; done; echo $m; \
                  grep SigCgt /proc/$PPID/status";
    let out = cli_support::sw(&marker)
        .args(&["--no-watch"])
        .sh(script)
        .output();
    cli_support::assert_code(&out, 0);
    let text = cli_support::text(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or_else(|| panic!("no {name} in {text:?}"))
    };
    let mask = field("SigBlk:");
    // Rust's stack-overflow handler is there (SEGV and BUS caught), and can run.
    let caught = field("SigCgt:");
    assert!(
        caught & (1 << 10) != 0 && caught & (1 << 6) != 0,
        "{text:?}"
    );
    for (name, number) in [
        ("ILL", 4),
        ("TRAP", 5),
        ("ABRT", 6),
        ("BUS", 7),
        ("FPE", 8),
        ("SEGV", 11),
        ("SYS", 31),
    ] {
        assert_eq!(mask & (1 << (number - 1)), 0, "{name} blocked: {mask:x}");
    }
    assert_no_leak(&marker);
}

#[test]
fn a_script_s_background_job_does_not_pass_on_the_int_it_ignores() {
    // `setsid bash -c 'quietus … & wait'`, then Ctrl-C to the script's group: the
    // background job has INT ignored (bash without job control), and so has its program.
    let marker = Marker::new("background-int");
    let dir = tempfile::tempdir().expect("a folder");
    let report = dir.path().join("report.json");
    let pid_file = dir.path().join("quietus.pid");
    let program = "trap 'echo got USR1; exit 0' USR1; echo ready; while :; do sleep 0.05; done";
    let script = format!(
        "\"$0\" -i 1h --no-watch --grace 20s --report '{}' -- bash -c \"{program}\" {} & \
         echo $! > '{}'; wait",
        report.display(),
        marker.as_str(),
        pid_file.display()
    );
    let mut command = Command::new("setsid");
    command.args(["bash", "-c", &script, QUIETUS]);
    cli_support::isolate(&mut command, &marker);
    let (mut child, out, err) = start(command);
    assert!(
        poll_until(HANDSHAKE, || out.text().contains("ready")
            && pid_file.exists()),
        "{:?} {:?}",
        out.text(),
        err.text()
    );
    let quietus: i32 = std::fs::read_to_string(&pid_file)
        .expect("its pid")
        .trim()
        .parse()
        .expect("a pid");
    // setsid made the shell the leader of a new session and group: its pid is the group.
    let group = rustix::process::Pid::from_raw(child.id() as i32).expect("a pid");
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).expect("ours");
    // Then USR1 to quietus: its first signal to pass on, unless it took the INT.
    let pid = rustix::process::Pid::from_raw(quietus).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::USR1).expect("ours");
    assert!(
        poll_until(GENEROUS, || report.exists()
            && std::fs::read_to_string(&report)
                .is_ok_and(|r| r.ends_with('\n') || r.ends_with('}'))),
        "no report: {:?} {:?}",
        out.text(),
        err.text()
    );
    let _ = wait(&mut child, &out, &err);
    let text = std::fs::read_to_string(&report).expect("the report");
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let sent = find(&report, "signals_sent").expect("the ladder's signals");
    assert_eq!(sent, &serde_json::json!(["USR1"]), "{text}");
    assert!(out.text().contains("got USR1"), "{:?}", out.text());
    assert_no_leak(&marker);
}

/// The first value under `key` anywhere in `value`.
fn find<'v>(value: &'v serde_json::Value, key: &str) -> Option<&'v serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|v| find(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| find(v, key)),
        _ => None,
    }
}

#[test]
fn the_terminal_keeps_the_environment_s_order() {
    let marker = Marker::new("pty-env-order");
    let mut command = Command::new("env");
    command.args(["-i", "B=2", "A=1"]);
    command.arg(format!("{}={}", common::MARKER_ENV, marker.as_str()));
    command.args([QUIETUS, "--pty", "--no-watch", "-q", "--", "/usr/bin/env"]);
    let out = output(command);
    cli_support::assert_code(&out, 0);
    let text = cli_support::text(&out.stdout).replace("\r\n", "\n");
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split('=').next())
        .filter(|n| *n == "A" || *n == "B")
        .collect();
    assert_eq!(names, ["B", "A"], "{text:?}");
    assert_no_leak(&marker);
}

/// The soft and hard descriptor limits in a `/proc/PID/limits` text.
fn open_files(limits: &str) -> (String, String) {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("{limits:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[3].to_owned(), words[4].to_owned())
}

#[test]
fn quietus_raises_its_descriptor_limit_and_the_program_gets_the_one_it_was_started_with() {
    let marker = Marker::new("nofile");
    let program = "import os, resource\n\
                   print('program', resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n\
                   print(open('/proc/%d/limits' % os.getppid()).read())";
    for mode in [&[][..], &["--pty"]] {
        let mut args = vec!["--no-watch"];
        args.extend_from_slice(mode);
        args.extend(["--", "python3", "-c", program]);
        let out = output(under_bash(&marker, "ulimit -Sn 64", &args));
        cli_support::assert_code(&out, 0);
        let text = cli_support::text(&out.stdout).replace("\r\n", "\n");
        assert!(text.contains("program 64\n"), "{mode:?}: {text:?}");
        let (soft, hard) = open_files(&text);
        assert_eq!(soft, hard, "{mode:?}: quietus's own limit: {text}");
    }
    assert_no_leak(&marker);
}

#[test]
fn serve_starts_many_processes_from_a_low_soft_descriptor_limit() {
    use std::io::BufRead;
    let marker = Marker::new("serve-nofile");
    let mut command = under_bash(&marker, "ulimit -Sn 128", &["serve"]);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("serve starts");
    let mut stdin = child.stdin.take().expect("piped");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    // About 16 descriptors each: 24 need three times the soft limit.
    let count = 24;
    for n in 0..count {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "process/start",
            "params": {"processId": format!("p{n}"),
                       "argv": marker.sh_words("exec sleep 60"), "idleTimeoutMs": 600_000}});
        writeln!(stdin, "{request}").expect("serve reads");
    }
    let mut answered = 0;
    while answered < count {
        let line = lines.next().expect("serve answers").expect("a line");
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if value.get("id").is_some() && value.get("method").is_none() {
            assert!(value.get("error").is_none(), "{value}");
            answered += 1;
        }
    }
    drop(stdin);
    let ended = poll_until(GENEROUS, || matches!(child.try_wait(), Ok(Some(_))));
    if !ended {
        let _ = child.kill();
    }
    let _ = child.wait();
    assert!(ended, "serve did not end when its input did");
    assert_no_leak(&marker);
}
