//! A silent child is ended once the idle timeout has passed since its last output.

use crate::support as common;

use std::time::Instant;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{ActivitySource, KillLadder, MonitorConfig, MonitorResult, Outcome, Session, Signal};

#[test]
fn silent_child_is_ended_at_the_idle_timeout() {
    let marker = Marker::new("idle_silent");
    let idle = ms(500);
    let out = SharedBuf::new();
    let started = Instant::now();
    let session = Session::builder(marker.sh("echo ready; sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(idle)
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    let result = wait_generously(&session);
    let elapsed = started.elapsed();

    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {result:#?}");
    };
    assert_eq!(report.idle_timeout, idle);
    let output = report
        .get(ActivitySource::Output)
        .expect("the output source is enabled by default and listed");
    assert!(
        output.idle >= idle,
        "output idle {:?} < {idle:?}",
        output.idle
    );
    assert!(
        output.events >= 1,
        "the `ready` line was one output event: {report:?}"
    );
    let keepalive = report
        .get(ActivitySource::Keepalive)
        .expect("keepalive is always listed");
    assert!(keepalive.idle >= idle, "{report:?}");
    assert_eq!(keepalive.events, 0);

    assert!(result.runtime >= idle, "runtime {:?}", result.runtime);
    assert!(elapsed >= idle);
    assert_eq!(result.exit_code(), MonitorResult::EXIT_TIMEOUT);
    assert_eq!(result.exit_code(), 124);
    assert_eq!(
        result.signals_sent.first(),
        Some(&Signal::TERM),
        "{result:#?}"
    );
    assert!(result.kill_latency.is_some(), "{result:#?}");
    assert!(result.ladder_time.is_some(), "{result:#?}");
    assert!(!result.termination_unproven);
    assert!(result.status.is_some(), "the leader was reaped");
    assert_eq!(result.pid, session.pid());
    assert!(result.output_complete, "the killed tree closed its pipes");
    assert_eq!(out.text(), "ready\n");
    assert_no_leak(&marker);
}

#[test]
fn child_that_never_prints_is_stale_one_timeout_after_spawn() {
    let marker = Marker::new("idle_never_prints");
    let idle = ms(400);
    let started = Instant::now();
    let session = Session::spawn(
        marker.sh("sleep 1000"),
        MonitorConfig::builder()
            .idle_timeout(idle)
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(started.elapsed() >= idle);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout, got {result:#?}");
    };
    let output = report.get(ActivitySource::Output).expect("output listed");
    assert_eq!(output.events, 0);
    assert!(output.idle >= idle);
    assert!(result.runtime >= idle);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}

#[test]
fn grandchildren_of_a_silent_child_are_ended_too() {
    let marker = Marker::new("idle_grandchildren");
    let out = SharedBuf::new();
    // Two background sleepers and a foreground one, all in the child's process group.
    let session = common::spawn_ready(
        Session::builder(
            marker.sh("sleep 1000 & sleep 1000 & (sleep 1000; :) & echo ready; sleep 1000"),
        ),
        MonitorConfig::builder()
            .idle_timeout(ms(500))
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
        &out,
        "ready",
    );
    assert!(
        marker.pids().len() >= 4,
        "the whole tree is up and carries the marker: {:#?}",
        marker.pids()
    );
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_eq!(result.exit_code(), 124);
    assert!(result.output_complete, "{result:#?}");
    assert_no_leak(&marker);
}

#[test]
fn child_that_closed_its_output_is_still_ended_when_idle() {
    // End-of-file on both pipes is not an exit: the silent process is still judged and ended.
    let marker = Marker::new("idle_closed_output");
    let idle = ms(400);
    let session = Session::spawn(
        marker.sh("exec >&- 2>&-; sleep 1000"),
        MonitorConfig::builder()
            .idle_timeout(idle)
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(500)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert!(result.runtime >= idle);
    assert!(result.output_complete);
    assert_eq!(result.exit_code(), 124);
    assert_no_leak(&marker);
}

#[test]
fn a_bar_redrawn_beside_a_file_held_open_that_does_not_move_is_ended() {
    // pip on a dead connection: its download file open for writing, unmoved, while its bar is
    // redrawn in place some 4 KB a second: those bytes went to quietus's pipe, not the file.
    let pad = "=".repeat(150);
    let bash = format!(
        "exec 3>partial; echo started >&3; echo ready; \
         while :; do printf '\\r%s 0.3/1.0 MB 0.0 kB/s eta 0:00:0%s' {pad} $((RANDOM % 9)); \
         sleep 0.05; done"
    );
    let python = format!(
        "import sys, time, random\nf = open('partial', 'w'); f.write('started'); f.flush()\n\
         print('ready', flush=True)\nwhile True:\n    \
         sys.stdout.write('\\r{pad} 0.3/1.0 MB 0.0 kB/s eta 0:00:0%d' % random.randrange(9))\n    \
         sys.stdout.flush(); time.sleep(0.05)\n"
    );
    for (name, program, code) in [("bash", "bash", bash), ("python", "python3", python)] {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("idle_bar_open_file_{name}");
        let (out, _) = ended_at_the_idle_timeout(&marker, program, &code, Some(dir.path()));
        assert!(out.text().len() > 3000, "{name}: it wrote all along");
    }
}

/// Runs `program -c code` (its stdout and stderr kept, in `dir` if given) under an idle
/// timeout of 1.5 s once it printed `ready`, and asserts it was ended for it, no sooner, with
/// nothing left behind; its stdout and stderr.
fn ended_at_the_idle_timeout(
    name: &str,
    program: &str,
    code: &str,
    dir: Option<&std::path::Path>,
) -> (SharedBuf, SharedBuf) {
    let marker = Marker::new(name);
    let (out, err) = (SharedBuf::new(), SharedBuf::new());
    let started = Instant::now();
    let mut command = std::process::Command::new(program);
    command
        .args(["-c", code, marker.as_str()])
        .env(common::MARKER_ENV, marker.as_str());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let session = Session::builder(command)
        .config(
            MonitorConfig::builder()
                .idle_timeout(ms(1500))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .stderr(err.sink())
        .spawn()
        .expect("the program can be spawned");
    out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{name}: {result:#?}"
    );
    assert!(started.elapsed() >= ms(1500), "{name}");
    assert_no_leak(&marker);
    (out, err)
}

#[test]
fn a_heartbeat_line_is_ended_and_a_count_of_work_is_not() {
    // A nested supervisor's messages about a wait, and a retry loop's failures: a line every
    // 0.2 s whose only change is a number, which says it waits or tries again. Ended one idle
    // timeout after its first line, bash and Python alike.
    let bash = "echo ready; i=0; while :; do i=$((i+1)); \
                echo \"[supervisor] job 1 still running (${i}s)\" >&2; sleep 0.2; done";
    let python = "import sys, time\nprint('ready', flush=True)\nn = 0\nwhile True:\n    \
                  n += 1\n    \
                  sys.stderr.write('attempt %d failed: Connection refused; retrying\\n' % n)\n    \
                  sys.stderr.flush(); time.sleep(0.2)\n";
    for (name, program, code) in [("bash", "bash", bash), ("python", "python3", python)] {
        let marker = format!("idle_heartbeat_{name}");
        let (_, err) = ended_at_the_idle_timeout(&marker, program, code, None);
        assert!(
            err.text().lines().count() >= 5,
            "{name}: it wrote all along"
        );
    }
    // A count of work, a line every 0.3 s for 3 s (`compiling unit N`), is kept alive.
    let marker = Marker::new("idle_count_of_work");
    let session = Session::builder(marker.sh(
        "i=0; while [ $i -lt 10 ]; do i=$((i+1)); echo \"compiling unit $i\"; sleep 0.3; done",
    ))
    .config(
        MonitorConfig::builder()
            .idle_timeout(ms(1500))
            .build()
            .unwrap(),
    )
    .spawn()
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_no_leak(&marker);
}

#[test]
fn a_spinner_redrawn_in_place_on_a_pipe_is_ended_and_a_growing_bar_is_not() {
    // npm's spinner on a dead connection: `\r`, a braille frame, the same text, ten times a
    // second on stdout, a pipe: no new text (spinner glyphs and digits aside), so it is ended
    // one idle timeout after its first frame, bash and Python alike.
    let bash = "echo ready; while :; do for f in ⠋ ⠙ ⠹ ⠸ ⠼ ⠴; do \
                printf '\\r%s idealTree: timing 3 ms' $f; sleep 0.1; done; done";
    let python = "import sys, time\nprint('ready', flush=True)\nwhile True:\n    \
                  for f in '|/-\\\\':\n        \
                  sys.stdout.write('\\r%s Downloading 1.2/4.5 MB 0.0 kB/s' % f)\n        \
                  sys.stdout.flush(); time.sleep(0.1)\n";
    for (name, program, code) in [("bash", "bash", bash), ("python", "python3", python)] {
        let marker = format!("idle_cr_spinner_{name}");
        let (out, _) = ended_at_the_idle_timeout(&marker, program, code, None);
        assert!(out.text().len() > 300, "{name}: it wrote all along");
    }
    // A bar that grows a step every 0.3 s (its percentage moving every 0.1 s) is kept alive.
    let marker = Marker::new("idle_cr_bar");
    let session = Session::builder(marker.sh(
        "i=0; bar=; while [ $i -lt 30 ]; do [ $((i % 3)) = 0 ] && bar=\"$bar#\"; \
         printf '\\r[%-10s] %s%%' \"$bar\" $((i * 10 / 3)); sleep 0.1; i=$((i+1)); done; echo",
    ))
    .config(
        MonitorConfig::builder()
            .idle_timeout(ms(1500))
            .build()
            .unwrap(),
    )
    .spawn()
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_no_leak(&marker);
}
