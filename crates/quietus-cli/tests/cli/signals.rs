//! Signals sent to `quietus` reach the program's tree (the program's own trap sees them), a
//! second INT kills at once, and adopted zombies are reaped when quietus can adopt orphans
//! (as a child subreaper here, and as pid 1 of a new pid namespace where `unshare` allows it).
//!
//! Two tests start quietus itself in an odd state through a `pre_exec` hook (a subreaper
//! parent, an adopted zombie): the only unsafe code outside the library's one fenced module.
#![allow(unsafe_code)]

use crate::support as common;
use crate::support::cli as cli_support;

use std::fs;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::{alive, summary_line, sw};
use common::{HANDSHAKE, Marker, assert_no_leak, poll_until};
use rustix::process::Signal as Sig;
use serde_json::Value;

const FORWARDED: [(Sig, &str); 4] = [
    (Sig::TERM, "TERM"),
    (Sig::INT, "INT"),
    (Sig::HUP, "HUP"),
    (Sig::QUIT, "QUIT"),
];

#[test]
fn the_programs_trap_sees_the_signal_sent_to_quietus() {
    for (signal, name) in FORWARDED {
        let marker = Marker::new("cli_sig_trap");
        let script = format!(
            "trap 'echo trapped {name}; exit 0' {name}; echo ready; \
             while :; do sleep 0.02; done"
        );
        let running = sw(&marker).args(&["-i", "60s"]).sh(&script).spawn();
        running.stdout.wait_for("ready\n");
        running.signal(signal);
        let finished = running.wait();
        assert_eq!(finished.stdout_text(), format!("ready\ntrapped {name}\n"));
        // The program handled it and exited 0: that is quietus's status too.
        assert_eq!(finished.status.code(), Some(0), "{name}: {finished:?}");
        assert_eq!(
            summary_line(&finished.stderr),
            format!("quietus: ended on request (received {name}); sent {name}")
        );
        assert_no_leak(&marker);
    }
}

#[test]
fn a_program_killed_by_the_passed_on_signal_makes_quietus_die_of_it() {
    for (signal, name) in FORWARDED {
        let marker = Marker::new("cli_sig_die");
        let running = sw(&marker)
            .args(&["-i", "60s"])
            .sh("echo ready; sleep 30")
            .spawn();
        running.stdout.wait_for("ready\n");
        running.signal(signal);
        let finished = running.wait();
        // As the program would have: killed by the signal (a shell shows 128+N), no core dump.
        assert_eq!(
            finished.status.signal(),
            Some(signal.as_raw()),
            "{name}: {finished:?}"
        );
        assert!(!finished.status.core_dumped(), "{name}");
        assert!(summary_line(&finished.stderr).contains(&format!("(received {name})")));
        assert_no_leak(&marker);
    }
}

#[test]
fn a_second_int_kills_at_once() {
    let marker = Marker::new("cli_sig_second_int");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let report = dir.path().join("report.json");
    let running = sw(&marker)
        .args(&["-i", "60s", "-g", "60s", "--report"])
        .args(&[report.to_str().expect("utf-8")])
        .sh("trap 'echo got INT' INT; echo ready; while :; do sleep 0.02; done")
        .spawn();
    running.stdout.wait_for("ready\n");
    running.signal(Sig::INT);
    // The program survives the first INT (its trap only prints)...
    running.stdout.wait_for("got INT\n");
    let second = Instant::now();
    running.signal(Sig::INT);
    let finished = running.wait();
    // ...and the second one ends it long before the 60 s grace.
    assert!(
        second.elapsed() < Duration::from_secs(30),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(
        finished.status.signal(),
        Some(Sig::INT.as_raw()),
        "{finished:?}"
    );
    assert_eq!(
        summary_line(&finished.stderr),
        "quietus: ended on request (received INT); sent INT, then KILL on a second INT"
    );
    let r: Value = serde_json::from_slice(&fs::read(&report).expect("report")).expect("JSON");
    assert_eq!(r["outcome"], "terminated");
    assert_eq!(r["received_signal"], "INT");
    assert_eq!(r["signal_name"], "KILL");
    assert_eq!(r["exit_code"], 130);
    assert_eq!(r["ladder"]["escalated"], true);
    assert_eq!(r["ladder"]["forced"], true);
    assert_no_leak(&marker);
}

#[test]
fn a_second_term_lets_the_grace_run() {
    let marker = Marker::new("cli_sig_second_term");
    let running = sw(&marker)
        .args(&["-i", "60s", "-g", "400ms"])
        .sh("trap '' TERM; echo ready; while :; do sleep 0.02; done")
        .spawn();
    running.stdout.wait_for("ready\n");
    let first = Instant::now();
    running.signal(Sig::TERM);
    running.signal(Sig::TERM);
    let finished = running.wait();
    assert!(first.elapsed() >= Duration::from_millis(400));
    assert_eq!(finished.status.signal(), Some(Sig::TERM.as_raw()));
    assert_eq!(
        summary_line(&finished.stderr),
        "quietus: ended on request (received TERM); sent TERM, then KILL after 400ms"
    );
    assert_no_leak(&marker);
}

/// Starts `quietus` as a child subreaper (set in the forked child before exec: preserved
/// across exec), so the kernel hands it the orphans of its program's tree.
#[test]
fn as_a_subreaper_it_reaps_adopted_zombies_but_not_its_child() {
    let marker = Marker::new("cli_sig_subreaper");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let orphan_file = dir.path().join("orphan.pid");
    let done = dir.path().join("done");
    let script = format!(
        "sh -c 'sleep 0.2 >/dev/null 2>&1 & echo $! > \"$1\"' \"$0\" '{orphan}'; echo ready; \
         while [ ! -e '{done}' ]; do sleep 0.01; done; exit 7",
        orphan = orphan_file.display(),
        done = done.display()
    );
    let mut running = sw(&marker)
        .args(&["-i", "60s", "-v"])
        .sh(&script)
        .spawn_with(|cmd| {
            // SAFETY: between fork and exec only one raw prctl system call is made (no
            // allocation, no lock), which is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
                    Ok(())
                });
            }
        });
    running.stdout.wait_for("ready\n");
    let orphan: u32 = fs::read_to_string(&orphan_file)
        .expect("the orphan's pid")
        .trim()
        .parse()
        .expect("a pid");
    // Its parent exited before "ready": it now belongs to quietus (unless already reaped).
    if let Some(ppid) = parent_of(orphan) {
        assert_eq!(ppid, running.pid(), "the orphan went to quietus");
    }
    // It exits after 0.2 s; quietus reaps it while the session still runs.
    assert!(
        poll_until(HANDSHAKE, || !Path::new(&format!("/proc/{orphan}"))
            .exists()),
        "the adopted zombie {orphan} was not reaped"
    );
    assert!(
        running.child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    // The supervised child's status was not stolen: its own 7 comes through.
    fs::write(&done, b"").expect("done");
    let finished = running.wait();
    assert_eq!(finished.status.code(), Some(7), "{finished:?}");
    assert!(
        !finished.stderr_text().contains("waiting for pid"),
        "{}",
        finished.stderr_text()
    );
    assert_no_leak(&marker);
}

/// A zombie child quietus has from before its start (a child of the process that exec'd
/// quietus, which exited before quietus could catch its CHLD) is reaped while the session
/// runs; quietus is no subreaper here. Its program, alive, is not.
#[test]
fn a_zombie_from_before_the_start_is_reaped() {
    let marker = Marker::new("cli_sig_zombie_before");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let done = dir.path().join("done");
    let script = format!(
        "echo ready; while [ ! -e '{done}' ]; do sleep 0.01; done; exit 7",
        done = done.display()
    );
    // The test's own fault, made in the program's process before its exec (clippy.toml
    // forbids these calls in quietus's code).
    #[allow(clippy::disallowed_methods)]
    let mut running = sw(&marker)
        .args(&["-i", "60s"])
        .sh(&script)
        .spawn_with(|cmd| {
            // SAFETY: between fork and exec only raw system calls are made (fork, _exit,
            // waitid), no allocation and no lock: async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    match libc::fork() {
                        -1 => return Err(std::io::Error::last_os_error()),
                        0 => libc::_exit(0),
                        pid => {
                            // A zombie before the exec: waited for without reaping it.
                            let pid = rustix::process::Pid::from_raw(pid).expect("a pid");
                            rustix::process::waitid(
                                rustix::process::WaitId::Pid(pid),
                                rustix::process::WaitIdOptions::EXITED
                                    | rustix::process::WaitIdOptions::NOWAIT,
                            )?;
                        }
                    }
                    Ok(())
                });
            }
        });
    running.stdout.wait_for("ready\n");
    let quietus = running.pid();
    assert!(
        poll_until(HANDSHAKE, || zombie_children(quietus).is_empty()),
        "quietus kept the zombie(s) {:?}",
        zombie_children(quietus)
    );
    assert!(
        running.child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    fs::write(&done, b"").expect("done");
    let finished = running.wait();
    assert_eq!(finished.status.code(), Some(7), "{finished:?}");
    assert_no_leak(&marker);
}

/// The children of `pid` that are zombies, from `/proc/<pid>/task/*/children`.
fn zombie_children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|child| {
            fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rfind(')')
                    .is_some_and(|end| stat[end + 1..].trim_start().starts_with('Z'))
            })
        })
        .collect()
}

/// The parent pid of `pid`, from `/proc/<pid>/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// `unshare` with a new user and pid namespace, then `setsid`: quietus becomes pid 1 and a
/// session leader, as a container runtime (runc, crun) starts a container's first process.
/// `None` (the test is skipped, saying so) where this machine does not allow it.
fn unshare_pid1(new_session: bool) -> Option<Command> {
    let args = [
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--mount-proc",
    ];
    let mut probe = common::program("unshare");
    probe.args(args);
    if new_session {
        probe.arg("setsid");
    }
    match probe.arg("true").output() {
        Ok(output) if output.status.success() => {
            let mut command = common::program("unshare");
            command.args(args);
            if new_session {
                command.arg("setsid");
            }
            Some(command)
        }
        other => {
            eprintln!(
                "SKIPPED: cannot create a user + pid namespace with unshare here ({other:?}); \
                 the reaping is covered by the subreaper test and the reaper's unit tests"
            );
            None
        }
    }
}

#[test]
fn as_pid_1_it_reaps_orphans_and_forwards_signals() {
    pid_1(true);
}

/// The same without `setsid`: quietus's process group is then the one of `unshare`,
/// outside the new pid namespace, where `getpgrp()` returns 0 (the library reads its group from
/// `/proc/self/stat` for that reason, and treats 0 as "not the child's group").
#[test]
fn as_pid_1_without_its_own_session() {
    pid_1(false);
}

fn pid_1(new_session: bool) {
    let Some(mut unshare) = unshare_pid1(new_session) else {
        return;
    };
    let marker = Marker::new("cli_sig_pid1");
    // Inside: quietus is pid 1; an orphan is handed to it; the program checks from inside
    // that the orphan's zombie goes away, then waits to be signalled.
    let script = "[ \"$PPID\" = 1 ] || { echo \"parent is $PPID, not 1\"; exit 50; }; \
         o=$(sh -c 'sleep 0.1 >/dev/null 2>&1 & echo $!'); i=0; \
         while [ -e /proc/$o ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; \
         if [ -e /proc/$o ]; then echo \"not reaped: $(cat /proc/$o/stat)\"; exit 51; fi; \
         echo reaped; sleep 30";
    unshare
        .arg(env!("CARGO_BIN_EXE_quietus"))
        .args(["-i", "60s", "--"])
        .args(marker.sh_words(script))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cli_support::isolate(&mut unshare, &marker);
    let mut child = unshare.spawn().expect("unshare starts");
    let stdout = child.stdout.take().expect("piped");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { return };
            let _ = lines_tx.send(line);
        }
    });
    let first = lines.recv_timeout(HANDSHAKE);
    if first.as_deref() != Ok("reaped") {
        let _ = child.kill(); // our own unshare
        let _ = child.wait();
        panic!("under pid 1 the program said {first:?}");
    }
    // quietus is unshare's child (its pid outside the namespace).
    let unshare_pid = child.id();
    let quietus: u32 =
        fs::read_to_string(format!("/proc/{unshare_pid}/task/{unshare_pid}/children"))
            .expect("unshare's children")
            .split_whitespace()
            .next()
            .expect("unshare runs quietus")
            .parse()
            .expect("a pid");
    assert!(alive(quietus));
    // TERM to quietus (pid 1 inside): passed on; the program dies of it; as pid 1
    // quietus cannot die of a signal, so it exits 128+15, which unshare passes on.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(quietus as i32).expect("pid"),
        Sig::TERM,
    )
    .expect("our own quietus");
    let mut status = None;
    poll_until(common::GENEROUS, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("quietus as pid 1 did not end after TERM");
    };
    let _ = reader.join();
    assert_eq!(status.code(), Some(143), "{status:?}");
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut stderr);
    assert!(
        stderr.contains("quietus: ended on request (received TERM); sent TERM"),
        "{stderr}"
    );
    assert_no_leak(&marker);
}

/// What quietus does with a signal it receives (docs/cli.md, "Signals").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Treatment {
    /// Passed on to the program's tree like TERM: the ladder, a complete report, and
    /// quietus then ends as the program did (here: dies of the same signal).
    Forwarded,
    /// Caught or ignored: no effect on the run.
    Ignored,
    /// A fault signal (SEGV…) sent from outside: not blocked (issue 28: a blocked fault signal
    /// loses Rust's own fault reports, the stack-overflow message among them), so it ends
    /// quietus as it ends any program, and the guardian ends the program's tree.
    Fatal,
    /// Job control: stops quietus until CONT; the run then goes on.
    Stops,
}

/// Every signal from 1 to 31 but KILL and STOP, its name, and its treatment.
fn signal_table() -> Vec<(Sig, &'static str, Treatment)> {
    use Treatment::*;
    vec![
        (Sig::HUP, "HUP", Forwarded),
        (Sig::INT, "INT", Forwarded),
        (Sig::QUIT, "QUIT", Forwarded),
        (Sig::ILL, "ILL", Fatal),
        (Sig::TRAP, "TRAP", Fatal),
        (Sig::ABORT, "ABRT", Fatal),
        (Sig::BUS, "BUS", Fatal),
        (Sig::FPE, "FPE", Fatal),
        (Sig::USR1, "USR1", Forwarded),
        (Sig::SEGV, "SEGV", Fatal),
        (Sig::USR2, "USR2", Forwarded),
        (Sig::PIPE, "PIPE", Ignored),
        (Sig::ALARM, "ALRM", Forwarded),
        (Sig::TERM, "TERM", Forwarded),
        (Sig::STKFLT, "STKFLT", Forwarded),
        (Sig::CHILD, "CHLD", Ignored),
        (Sig::CONT, "CONT", Ignored),
        (Sig::TSTP, "TSTP", Stops),
        (Sig::TTIN, "TTIN", Stops),
        (Sig::TTOU, "TTOU", Stops),
        (Sig::URG, "URG", Ignored),
        (Sig::XCPU, "XCPU", Forwarded),
        (Sig::XFSZ, "XFSZ", Ignored),
        (Sig::VTALARM, "VTALRM", Forwarded),
        (Sig::PROF, "PROF", Forwarded),
        (Sig::WINCH, "WINCH", Ignored),
        (Sig::IO, "IO", Forwarded),
        (Sig::POWER, "PWR", Forwarded),
        (Sig::SYS, "SYS", Fatal),
    ]
}

/// The state letter of `pid` in `/proc/<pid>/stat`.
fn state_of(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// The signal bit of `signal` in a `/proc` status mask line `field` (`SigBlk:`…).
fn mask_has(status: &str, field: &str, signal: Sig) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal.as_raw() - 1)) != 0)
}

/// Whether every thread of `pid` blocks `signal`.
fn blocked_everywhere(pid: u32, signal: Sig) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut threads = 0;
    for task in tasks.flatten() {
        let status = fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if status.is_empty() {
            continue; // a thread that just ended
        }
        threads += 1;
        if !mask_has(&status, "SigBlk:", signal) {
            return false;
        }
    }
    threads > 0
}

/// Whether process `pid` catches `signal` (`SigCgt`).
fn caught(pid: u32, signal: Sig) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    mask_has(&status, "SigCgt:", signal)
}

/// One run: a program with a `setsid` escapee, `signal` sent to quietus after the
/// handshake, then (when the signal does not end the run) the program told to finish.
#[allow(clippy::too_many_lines)] // a test or bench scenario: the 80-line rule is for the library and the command
fn one_signal(signal: Sig, name: &str, treatment: Treatment) -> Result<(), String> {
    let marker = Marker::new(&format!("cli_sig_all_{name}"));
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let report = dir.path().join("report.json");
    let running = sw(&marker)
        .dir(dir.path())
        .args(&["-i", "60s", "-g", "1s", "--check-interval", "100ms"])
        .args(&["--report", report.to_str().expect("a UTF-8 temporary path")])
        // The program checks that it did not inherit quietus's blocked signals.
        .sh(
            "grep -q 'SigBlk:.*[1-9a-f]' /proc/self/status && echo masked; \
             setsid sleep 1000 & echo ready; while [ ! -e done ]; do sleep 0.05; done; exit 0",
        )
        // A process group of its own, with its parent (this test) in another group of the
        // same session: the group is not orphaned, so the stop signals do stop it.
        .spawn_with(|cmd| {
            cmd.process_group(0);
        });
    running.stdout.wait_for("ready\n");
    let pid = running.pid();
    if treatment == Treatment::Fatal && blocked_everywhere(pid, signal) {
        return Err(format!("{name}: blocked in every thread of quietus"));
    }
    if treatment == Treatment::Fatal && caught(pid, signal) {
        // SEGV and BUS: Rust's runtime catches them to report a stack overflow; one that is
        // no overflow gets its default action back, and the faulting code runs again (a
        // real fault then ends the process). Sent from outside, the first is taken so.
        running.signal(signal);
        if !poll_until(HANDSHAKE, || !caught(pid, signal)) {
            return Err(format!("{name}: Rust's handler kept it"));
        }
    }
    running.signal(signal);
    match treatment {
        Treatment::Forwarded => {}
        Treatment::Fatal => {
            let finished = running.wait();
            if finished.status.signal() != Some(signal.as_raw()) {
                return Err(format!("{name}: quietus did not die of it: {finished:?}"));
            }
            // The guardian ends the tree, the escapee too.
            assert_no_leak(&marker);
            return Ok(());
        }
        Treatment::Stops => {
            if !poll_until(HANDSHAKE, || state_of(pid) == Some('T')) {
                return Err(format!("{name}: quietus did not stop"));
            }
            running.signal(Sig::CONT);
            if !poll_until(HANDSHAKE, || state_of(pid) != Some('T')) {
                return Err(format!("{name}: quietus did not continue"));
            }
        }
        Treatment::Ignored => {}
    }
    if treatment != Treatment::Forwarded {
        fs::write(dir.path().join("done"), b"").map_err(|e| e.to_string())?;
    }
    let finished = running.wait();
    if finished.stdout_text() != "ready\n" {
        return Err(format!(
            "{name}: the program said {:?}",
            finished.stdout_text()
        ));
    }
    let text = fs::read(&report).map_err(|e| format!("{name}: no report: {e}"))?;
    let r: Value = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "{name}: the report is not JSON ({e}): {:?}; {finished:?}",
            String::from_utf8_lossy(&text)
        )
    })?;
    let check = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{name}: {what}; status {:?}, report {r}, stderr {:?}",
                finished.status,
                finished.stderr_text()
            ))
        }
    };
    match treatment {
        Treatment::Forwarded => {
            // Dies of it (raised at the thread that unblocked it); or exits with 128+N, which
            // a shell sees the same way.
            check(
                finished.status.signal() == Some(signal.as_raw())
                    || finished.status.code() == Some(128 + signal.as_raw()),
                "quietus ends as the program did, by the signal it passed on",
            )?;
            check(!finished.status.core_dumped(), "no core dump")?;
            check(r["outcome"] == "terminated", "outcome terminated")?;
            check(r["received_signal"] == name, "received_signal")?;
            check(r["exit_code"] == 128 + signal.as_raw(), "exit_code 128+N")?;
            check(
                r["ladder"]["signals_sent"][0] == name,
                "the ladder starts with the signal received",
            )?;
        }
        _ => {
            check(finished.status.code() == Some(0), "the program's own 0")?;
            check(r["outcome"] == "exited", "outcome exited")?;
            check(r["received_signal"].is_null(), "nothing passed on")?;
            check(r["exit_code"] == 0, "exit_code 0")?;
            check(
                r["leftovers_killed"].as_u64() >= Some(1),
                "the escapee is ended after the exit",
            )?;
        }
    }
    assert_no_leak(&marker);
    Ok(())
}

/// Issue 11, item 6: every signal from 1 to 31 that quietus can catch is either passed on
/// like TERM (the ladder, a complete report, nothing left) or has no effect on the run; none
/// kills quietus outright. Runs a few at a time.
#[test]
fn every_signal_is_passed_on_or_has_no_effect() {
    let table = signal_table();
    assert_eq!(table.len(), 29, "1 to 31 but KILL and STOP");
    let mut failures = Vec::new();
    for batch in table.chunks(6) {
        let handles: Vec<_> = batch
            .iter()
            .map(|&(signal, name, treatment)| {
                std::thread::spawn(move || one_signal(signal, name, treatment))
            })
            .collect();
        for handle in handles {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(e),
                Err(panic) => failures.push(format!("panicked: {panic:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
