//! Group members left behind by a child that exited: ended by default, kept on request, and
//! never a reason for `wait` to hang on a pipe they hold open.

use crate::support as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Marker, SharedBuf, assert_no_leak, ms, poll_until, wait_generously};
use quietus::{ChildWatchConfig, Containment, KillLadder, MonitorConfig, Outcome, Session, Signal};

/// Far below the sleeper's 1000 s, far above what a loaded machine needs.
const PROMPT: Duration = Duration::from_secs(15);

/// A script that starts a sleeper in its own session (outside the child's process group) and
/// runs `then` only once the sleeper has really left the group (it creates `up` after setsid).
fn escaped_sleeper(up: &std::path::Path, then: &str) -> String {
    format!(
        "setsid sh -c ': > \"$1\"; exec sleep 1000' escaped '{up}' & \
         while [ ! -e '{up}' ]; do sleep 0.01; done; {then}",
        up = up.display()
    )
}

#[test]
fn background_sleeper_is_ended_and_wait_returns_promptly() {
    let marker = Marker::new("leftover_killed");
    let out = SharedBuf::new();
    let started = Instant::now();
    // The sleeper inherits stdout/stderr: it holds the pipes open after `sh` exits.
    let session = Session::builder(marker.sh("sleep 1000 & echo hi"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    let elapsed = started.elapsed();
    assert!(elapsed < PROMPT, "wait took {elapsed:?}");
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.leftovers_killed >= 1, "{result:#?}");
    // Named before they were ended: what the caller (a model, through `mcp`) is told.
    assert_eq!(
        result.leftovers.len(),
        result.leftovers_killed,
        "{result:#?}"
    );
    let sleep = result.leftovers.iter().find(|l| l.name == "sleep");
    assert_eq!(
        sleep.map(|l| l.command.as_str()),
        Some("sleep 1000"),
        "{result:#?}"
    );
    assert_eq!(result.signals_sent.first(), Some(&Signal::TERM));
    assert!(
        result.output_complete,
        "the pipes closed once the sleeper died"
    );
    assert_eq!(out.text(), "hi\n");
    assert_no_leak(&marker);
}

/// A leftover's command line keeps its quoting (issue 51, point 12): `sh -c 'sleep 1000; : tag'`
/// was reported as `sh -c sleep 1000; : tag`, which reads back as another command.
#[test]
fn a_leftovers_command_line_is_quoted_as_a_shell_reads_it_back() {
    let marker = Marker::new("leftover_quoted");
    let session = Session::builder(marker.sh("sh -c 'sleep 1000; : tag' & echo hi"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .stdout(SharedBuf::new().sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    let job = result.leftovers.iter().find(|l| l.command.contains("tag"));
    assert_eq!(
        job.map(|l| l.command.as_str()),
        Some("sh -c 'sleep 1000; : tag'"),
        "{result:#?}"
    );
    assert_no_leak(&marker);
}

/// Adopting orphans (subreaper mode) and holding the process group: when the leader exits, a
/// sleeper left in its group and one that left it (setsid, its parent gone: adopted) are both
/// ended; the look that skips the scans (no child but the leader) must not miss them.
#[test]
fn adopted_and_group_leftovers_are_ended_when_adopting_orphans() {
    let marker = Marker::new("leftover_adopted");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let up = dir.path().join("up");
    let script = escaped_sleeper(&up, "sleep 1000 >/dev/null 2>&1 & echo hi");
    let session = Session::builder(marker.sh(&script))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .containment(Containment::Group)
                .children(ChildWatchConfig::builder().subreaper(true))
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
                .build()
                .unwrap(),
        )
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(result.leftovers_killed >= 2, "{result:#?}");
    assert!(
        result
            .leftovers
            .iter()
            .filter(|l| l.name == "sleep")
            .count()
            >= 2,
        "{result:#?}"
    );
    assert_no_leak(&marker);
}

#[test]
fn kept_sleeper_survives_and_wait_still_returns_promptly() {
    let marker = Marker::new("leftover_kept");
    let out = SharedBuf::new();
    let started = Instant::now();
    let session = Session::builder(marker.sh("sleep 1000 & echo hi"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .keep_leftovers(true)
                .drain_cap(ms(500))
                .drain_quiet(ms(100))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    let elapsed = started.elapsed();
    assert!(elapsed < PROMPT, "wait took {elapsed:?}");
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert_eq!(result.leftovers_killed, 0);
    assert!(result.signals_sent.is_empty(), "{result:#?}");
    assert!(
        !result.output_complete,
        "the sleeper still holds the pipes: {result:#?}"
    );
    assert_eq!(out.text(), "hi\n");

    // The sleeper is still alive: the only process left with our marker (sh is gone). Its
    // fork may not have reached `exec sleep` yet on a loaded machine: poll for that.
    let mut left = marker.pids();
    poll_until(Duration::from_secs(10), || {
        left = marker.pids();
        left.len() == 1 && left[0].cmdline.starts_with("sleep")
    });
    assert_eq!(left.len(), 1, "{left:#?}");
    let sleeper = &left[0];
    assert!(
        sleeper.cmdline.starts_with("sleep"),
        "expected the sleeper: {sleeper:?}"
    );
    assert_ne!(sleeper.pid, result.pid.get());

    // Our own cleanup: this pid carries our marker, so it is ours to kill.
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(sleeper.pid.to_string())
        .status()
        .expect("kill(1) runs");
    assert!(status.success());
    assert_no_leak(&marker);
    drop(session);
}

#[test]
fn leftovers_ignoring_term_are_escalated_after_a_normal_exit() {
    let marker = Marker::new("leftover_stubborn");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let up = dir.path().join("up");
    let out = SharedBuf::new();
    let grace = ms(300);
    // The subshell ignores TERM and says so through a file; the leader exits only once that
    // stubborn leftover is really in place.
    let script = format!(
        "(trap '' TERM; : > '{up}'; exec sleep 1000) & \
         while [ ! -e '{up}' ]; do sleep 0.01; done; echo bye",
        up = up.display()
    );
    let session = Session::builder(marker.sh(&script))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .kill_ladder(KillLadder::polite(Signal::TERM, grace))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert_eq!(out.text(), "bye\n");
    assert_eq!(result.leftovers_killed, 1, "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated);
    assert!(result.ladder_time.expect("a ladder ran") >= grace);
    assert!(result.output_complete, "{result:#?}");
    assert_no_leak(&marker);
}

#[test]
fn exit_code_is_kept_when_leftovers_are_ended() {
    let marker = Marker::new("leftover_exit_code");
    let session = Session::spawn(
        marker.sh("sleep 1000 & exit 3"),
        MonitorConfig::builder()
            .idle_timeout(Duration::from_secs(60))
            .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
            .build()
            .unwrap(),
    )
    .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(
        result.exit_code(),
        3,
        "the leader's own code, not the leftover's"
    );
    assert!(result.leftovers_killed >= 1, "{result:#?}");
    assert_no_leak(&marker);
}

#[test]
fn wait_does_not_hang_on_a_pipe_held_outside_the_group() {
    // A grandchild in its own session holds stdout open after the leader exited: the drain
    // stops at quiet output instead of waiting for an end-of-file that never comes.
    let marker = Marker::new("leftover_outside_group");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = SharedBuf::new();
    let started = Instant::now();
    let session = Session::builder(marker.sh(&escaped_sleeper(&dir.path().join("up"), "echo hi")))
        .config(
            MonitorConfig::builder()
                .idle_timeout(Duration::from_secs(60))
                .drain_cap(ms(1000))
                // Leftovers kept, so the escapee (which the descendant observer may have seen)
                // holds the pipe: this test is about the drain alone (ending escapees as
                // leftovers: tests/children_signal.rs).
                .keep_leftovers(true),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    let result = wait_generously(&session);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert_eq!(out.text(), "hi\n");
    assert!(!result.output_complete, "{result:#?}");

    // Our own cleanup: the session sleeper carries our marker, so it is ours to kill (it is
    // outside the group, and leftovers were kept).
    for p in marker.pids() {
        let status = Command::new("kill")
            .arg("-KILL")
            .arg(p.pid.to_string())
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "{p:?}");
    }
    assert_no_leak(&marker);
}

#[test]
fn setsid_grandchild_is_ended_after_an_idle_timeout() {
    // DESIGN.md, "Ending a child": descendants that left the group (setsid, double fork) are
    // signalled by pid too.
    let marker = Marker::new("leftover_setsid");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = SharedBuf::new();
    let script = escaped_sleeper(&dir.path().join("up"), "echo ready; sleep 1000");
    let session = Session::builder(marker.sh(&script))
        .config(
            MonitorConfig::builder()
                .idle_timeout(ms(500))
                .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
                .drain_cap(ms(500))
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .expect("sh can be spawned");
    out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    assert_no_leak(&marker);
}
