//! Fault scenarios, family "trees": process trees that try to outlive or dodge the ladder.
//!
//! Each scenario asserts the outcome, that no process carrying its marker survives, and that
//! every byte the tree wrote reached the sinks (see `tests/fault_support/mod.rs`).
//!
//! Already covered elsewhere, not repeated here:
//! - a plain double fork that stays in the group, `(sleep 1000 &)`:
//!   `children_signal::a_double_forked_daemon_is_gone_after_the_ladder`;
//! - a `setsid` escapee still in the tree: `children_signal::a_setsid_escapee_is_gone_after_the_ladder`,
//!   `leftovers::setsid_grandchild_is_ended_after_an_idle_timeout`;
//! - an escapee re-parented to init after it was seen:
//!   `children_signal::an_escapee_re_parented_to_init_is_gone_after_the_ladder`;
//! - a sleeper holding the pipes after the leader exited:
//!   `leftovers::background_sleeper_is_ended_and_wait_returns_promptly`,
//!   `leftovers::wait_does_not_hang_on_a_pipe_held_outside_the_group`.
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::cli::ScenarioCli;
use crate::support::fault as fault_support;

use std::time::{Duration, Instant};

use common::{HANDSHAKE, ms, wait_generously};
use fault_support::{LADDER_GRACE, Scenario, is_idle_timeout, ladder_config, subreaper_config};
use quietus::{KillLadder, Outcome, Signal};

/// A daemon made the classic way (fork, `setsid`, fork, the middle process exits) within a few
/// milliseconds of the start: it has left both the process group and the child's tree before
/// the descendant observer's first periodic sample, so quietus never learns its pid.
/// Caught by the opt-in subreaper mode (the orphan comes back to this process, tagged);
/// without it the kernel hands it to init before quietus can see it.
#[test]
fn a_daemon_that_escapes_before_the_first_sample_is_ended() {
    let s = Scenario::new("tree_fast_daemon");
    let session = s.spawn(
        "setsid sh -c 'eval \"$SW_PRELUDE\"; (say daemon-up; exec sleep 1000) & exit 0'; \
         while ! grep -q daemon-up \"$SW_OUT\"; do sleep 0.01; done; say ready; exec sleep 1000",
        subreaper_config(),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// The same escape through `exec setsid`: util-linux `setsid` forks when it is a group leader
/// (the child is one) and its parent exits at once, so the child "exits" within milliseconds
/// while the real program runs on in a new session.
/// Caught by the opt-in subreaper mode (the orphan comes back to this process, tagged);
/// without it the kernel hands it to init before quietus can see it.
#[test]
fn exec_setsid_program_is_not_left_running() {
    let s = Scenario::new("tree_exec_setsid");
    let session = s.spawn(
        "exec setsid sh -c 'eval \"$SW_PRELUDE\"; say escaped; exec sleep 1000'",
        subreaper_config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// A `setsid` subtree of three processes that all ignore TERM, inside the child's tree: only
/// SIGKILL by pid ends them (the group signal cannot reach another session).
#[test]
fn a_setsid_subtree_ignoring_term_is_killed_by_pid() {
    let s = Scenario::new("tree_setsid_stubborn");
    let up = s.scratch("up");
    let script = format!(
        "setsid sh -c 'eval \"$SW_PRELUDE\"; trap \"\" TERM; \
                       (say worker-a; exec sleep 1000) & (say worker-b; exec sleep 1000) & \
                       : > \"{up}\"; wait' & \
         while [ ! -e '{up}' ]; do sleep 0.01; done; say ready; exec sleep 1000",
        up = up.display()
    );
    let session = s.spawn(&script, ladder_config());
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated, "the subtree ignores TERM: {result:#?}");
    let Outcome::IdleTimeout(report) = &result.outcome else {
        unreachable!()
    };
    // The setsid shell and its two workers, still in the tree (so not counted as escapees,
    // which are those that left it), outside the group.
    let summary = report.children.expect("the children signal is on");
    assert!(summary.descendants >= 3, "{summary:?}");
    assert!(result.ladder_time.expect("a ladder ran") >= LADDER_GRACE);
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// `nohup … &` makes its program ignore SIGHUP: a HUP-first ladder must go on to SIGKILL.
#[test]
fn nohup_background_jobs_survive_a_hup_ladder_until_sigkill() {
    let s = Scenario::new("tree_nohup");
    let script = "nohup sh -c 'eval \"$SW_PRELUDE\"; say nohup-a; exec sleep 1000' & \
                  nohup sh -c 'eval \"$SW_PRELUDE\"; say nohup-b; exec sleep 1000' & \
                  while [ $(grep -c nohup \"$SW_OUT\") -lt 2 ]; do sleep 0.01; done; \
                  say ready; wait";
    let session = s.spawn(
        script,
        ladder_config().kill_ladder(KillLadder::polite(Signal::HUP, LADDER_GRACE)),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::HUP, Signal::KILL]);
    assert!(result.escalated, "nohup'ed jobs ignore HUP: {result:#?}");
    // The leader itself does not ignore HUP: it died of the polite step.
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(1),
        "{result:#?}"
    );
    assert_eq!(result.exit_code(), 124);
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// The 200 children of one script, each writing a line, started at once; half of them ignore
/// TERM.
const MANY: usize = 200;

fn many_children_script(then: &str) -> String {
    format!(
        "i=0; while [ $i -lt {MANY} ]; do \
           if [ $((i % 2)) -eq 0 ]; then (trap '' TERM; say child-$i; exec sleep 1000) & \
           else (say child-$i; exec sleep 1000) & fi; i=$((i+1)); done; \
         while [ $(grep -c child- \"$SW_OUT\") -lt {MANY} ]; do sleep 0.02; done; {then}"
    )
}

#[test]
fn two_hundred_children_at_once_are_all_ended() {
    let s = Scenario::new("tree_200");
    let session = s.spawn(&many_children_script("say ready; wait"), ladder_config());
    s.out.wait_for("ready");
    assert!(s.marker.pids().len() > MANY, "the whole tree is up");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated, "half of them ignore TERM");
    assert!(!result.termination_unproven, "{result:#?}");
    assert!(result.output_complete, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted_unordered();
    assert_eq!(s.out.text().lines().count(), MANY + 1);
}

#[test]
fn two_hundred_children_left_behind_by_a_leader_that_exits_are_all_ended() {
    let s = Scenario::new("tree_200_left");
    let session = s.spawn(&many_children_script("say bye; exit 5"), ladder_config());
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 5, "the leader's own code");
    assert_eq!(result.leftovers_killed, MANY, "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.output_complete, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// A grandchild writes a payload, then lingers holding stdout after the leader exited: the
/// leftover is ended and every byte of the payload is delivered.
#[test]
fn a_grandchild_holding_stdout_after_the_child_exits_loses_no_byte() {
    let s = Scenario::new("tree_holder");
    let done = s.scratch("payload-done");
    let script = format!(
        "(head -c 3000000 /dev/urandom | tee -a \"$SW_OUT\"; : > '{done}'; exec sleep 1000) & \
         while [ ! -e '{done}' ]; do sleep 0.01; done; exit 0",
        done = done.display()
    );
    let started = Instant::now();
    let session = s.spawn(
        &script,
        ladder_config().kill_ladder(KillLadder::polite(Signal::TERM, LADDER_GRACE)),
    );
    let result = wait_generously(&session);
    assert!(started.elapsed() < HANDSHAKE, "{:?}", started.elapsed());
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert_eq!(result.leftovers_killed, 1, "{result:#?}");
    assert!(result.output_complete, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// With `keep_leftovers(true)`, a grandchild that keeps writing after the leader exited is
/// drained to its end-of-file: nothing it wrote is cut off.
#[test]
fn a_grandchild_writing_after_the_child_exits_is_drained_to_the_end() {
    let s = Scenario::new("tree_late_writer");
    let script = "(i=0; while [ $i -lt 40 ]; do say late-$i; sleep 0.02; i=$((i+1)); done) & \
                  say leader-bye; exit 0";
    let session = s.spawn(
        script,
        ladder_config()
            .keep_leftovers(true)
            .drain_quiet(ms(1500))
            .drain_cap(Duration::from_secs(20)),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.signals_sent.is_empty(), "{result:#?}");
    assert!(
        result.output_complete,
        "drained to end-of-file: {result:#?}"
    );
    assert!(s.out.contains("late-39"), "{}", s.out.text());
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// A grandchild moves to a process group of its own (`setpgrp` in perl) and ignores TERM; it
/// stays in the child's tree, so the observer knows it and the ladder kills it by pid.
#[test]
fn a_grandchild_in_its_own_process_group_is_killed_by_pid() {
    let s = Scenario::new("tree_setpgid_perl");
    let script = "perl -e 'setpgrp(0, 0) or die; $SIG{TERM} = q(IGNORE); \
                  open(my $l, q(>>), $ENV{SW_OUT}) or die; print $l qq(moved\\n); close $l; \
                  syswrite(STDOUT, qq(moved\\n)); sleep 1000' & \
                  while ! grep -q moved \"$SW_OUT\"; do sleep 0.01; done; say ready; wait";
    let session = s.spawn(script, ladder_config());
    s.out.wait_for("ready");
    let moved = s
        .marker
        .pids()
        .into_iter()
        .find(|p| p.cmdline.starts_with("perl"))
        .expect("the perl grandchild runs");
    let pgrp = std::fs::read_to_string(format!("/proc/{}/stat", moved.pid))
        .expect("the grandchild's stat")
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(2).map(str::to_owned))
        .expect("a pgrp field");
    assert_eq!(pgrp, moved.pid.to_string(), "it leads its own group");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// python3 `os.setpgid(0, 0)` and then a child of its own in that new group: the whole
/// sub-group is ended.
#[test]
fn a_new_process_group_with_children_of_its_own_is_ended() {
    let s = Scenario::new("tree_setpgid_python");
    let script = "python3 -c '
import os, time
os.setpgid(0, 0)
if os.fork() == 0:
    time.sleep(1000)
    os._exit(0)
with open(os.environ[\"SW_OUT\"], \"a\") as l:
    l.write(\"regrouped\\n\")
os.write(1, b\"regrouped\\n\")
time.sleep(1000)
' & while ! grep -q regrouped \"$SW_OUT\"; do sleep 0.01; done; say ready; wait";
    let session = s.spawn(script, ladder_config());
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert!(!result.termination_unproven, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// A grandchild changes its process group and the leader exits at once: the grandchild is out
/// of the group and, re-parented to init, out of the tree before any sample.
/// Caught by the opt-in subreaper mode (the orphan comes back to this process, tagged);
/// without it the kernel hands it to init before quietus can see it.
#[test]
fn a_regrouped_grandchild_of_a_child_that_exits_at_once_is_ended() {
    let s = Scenario::new("tree_setpgid_orphan");
    let script = "perl -e 'setpgrp(0, 0) or die; \
                  open(my $l, q(>>), $ENV{SW_OUT}) or die; print $l qq(moved\\n); close $l; \
                  syswrite(STDOUT, qq(moved\\n)); sleep 1000' & \
                  while ! grep -q moved \"$SW_OUT\"; do sleep 0.01; done; exit 0";
    let session = s.spawn(script, subreaper_config());
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// A `setsid` escapee still in the tree, with the children signal turned off (a user who does
/// not want CPU to count as activity): the ladder should still hunt it down.
#[test]
fn a_setsid_escapee_is_ended_with_the_children_signal_off() {
    let s = Scenario::new("tree_setsid_no_children");
    let up = s.scratch("up");
    let script = format!(
        "setsid sh -c ': > \"{up}\"; exec sleep 1000' & \
         while [ ! -e '{up}' ]; do sleep 0.01; done; say ready; exec sleep 1000",
        up = up.display()
    );
    let session = s.spawn(&script, ladder_config().watch_children(false));
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// With `keep_leftovers(true)`, a grandchild that never stops writing after the leader exited:
/// `wait` returns at the drain cap, and at most one more chunk reaches the sink afterwards.
/// Every line that arrived is the beginning of what was written, in order.
#[test]
fn an_endless_writer_left_behind_does_not_keep_wait_past_the_drain_cap() {
    let s = Scenario::new("tree_endless_writer");
    let drain_cap = ms(800);
    let started = Instant::now();
    let session = s.spawn(
        "(i=0; while :; do say endless-$i; i=$((i+1)); done) & say leader-bye; exit 0",
        ladder_config().keep_leftovers(true).drain_cap(drain_cap),
    );
    let result = wait_generously(&session);
    assert!(started.elapsed() < HANDSHAKE, "{:?}", started.elapsed());
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(!result.output_complete, "{result:#?}");
    let at_return = s.out.bytes().len();
    // Our own cleanup: the writer carries our marker. Stopping it also ends its writes.
    for p in s.marker.pids() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &p.pid.to_string()])
            .status();
    }
    s.assert_no_leak();
    let received = s.out.bytes();
    assert!(
        received.len() - at_return <= 256 * 1024,
        "{} bytes arrived after wait returned",
        received.len() - at_return
    );
    let written = std::fs::read(s.out_ledger()).expect("the ledger");
    // Two writers: the leader's line may sit anywhere; the writer's lines are in order.
    let endless: Vec<&[u8]> = received
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| l.starts_with(b"endless-"))
        .collect();
    let written_endless: Vec<&[u8]> = written
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| l.starts_with(b"endless-"))
        .collect();
    assert!(!endless.is_empty());
    assert!(endless.len() <= written_endless.len());
    assert_eq!(
        fault_support::fingerprint(&endless.concat()),
        fault_support::fingerprint(&written_endless[..endless.len()].concat()),
        "the lines that arrived are the first ones written, in order"
    );
}

/// A daemon started through `env -i` (like `sudo` with `env_reset` or `su -`) loses the
/// `QUIETUS_SESSION` tag; util-linux `setsid -f` forks it into a session of its own and
/// returns at once, so it is re-parented to the supervisor before any sample. A process
/// re-parented to the supervisor belongs to the tree whatever its environment. (The test marker
/// is passed on by hand, so the leak check still sees the daemon.)
const UNTAGGED_DAEMON: &str = "env -i \"QUIETUS_TEST_MARKER=$QUIETUS_TEST_MARKER\" \
                               setsid -f sleep 1000";

/// Polls until a `sleep 1000` carrying the scenario's marker runs outside the leader's process
/// group: the untagged daemon is up.
fn wait_for_untagged_daemon(s: &Scenario) {
    let up = common::poll_until(HANDSHAKE, || {
        s.marker.pids().into_iter().any(|p| {
            p.cmdline == "sleep 1000"
                && std::fs::read(format!("/proc/{}/environ", p.pid))
                    .is_ok_and(|env| !env.windows(18).any(|w| w == b"QUIETUS_SESSION"))
        })
    });
    assert!(
        up,
        "the untagged daemon did not start: {:#?}",
        s.marker.pids()
    );
}

/// Library, idle timeout: the untagged daemon (it keeps the session's output pipes) is ended
/// with the tree.
#[test]
fn an_untagged_setsid_daemon_is_ended_at_the_idle_timeout() {
    let s = Scenario::new("tree_untagged_daemon_idle");
    let session = s.spawn(
        &format!("{UNTAGGED_DAEMON}; say ready; exec sleep 1000"),
        subreaper_config(),
    );
    s.out.wait_for("ready");
    wait_for_untagged_daemon(&s);
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert!(!result.termination_unproven, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// Library, normal exit 0: the untagged daemon left behind is a leftover, ended by the ladder.
#[test]
fn an_untagged_setsid_daemon_is_ended_after_a_normal_exit() {
    let s = Scenario::new("tree_untagged_daemon_exit");
    let session = s.spawn(
        &format!("{UNTAGGED_DAEMON}; say bye; exit 0"),
        subreaper_config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.leftovers_killed >= 1, "{result:#?}");
    assert!(!result.termination_unproven, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// The same daemon under the `quietus` command, its standard streams on `/dev/null` (so
/// nothing but its re-parenting ties it to the session): the command runs one session, so
/// every orphan it adopts is that session's. Ended at the idle timeout (exit 124) and after a
/// normal exit 0 of the child.
#[test]
fn the_command_ends_an_untagged_daemon_with_its_streams_closed() {
    let daemon = format!("{UNTAGGED_DAEMON} </dev/null >/dev/null 2>&1");
    for (name, then, code) in [
        ("tree_cli_untagged_idle", "say ready; exec sleep 1000", 124),
        ("tree_cli_untagged_exit", "say bye; exit 0", 0),
    ] {
        let s = Scenario::new(name);
        let output = s
            .cli(&["-i", "1s", "-g", "300ms"], &format!("{daemon}; {then}"))
            .output()
            .expect("quietus runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{name}: {stderr}");
        assert!(!stderr.contains("unproven"), "{name}: {stderr}");
        s.assert_no_leak();
        assert_eq!(
            fault_support::fingerprint(&output.stdout),
            fault_support::file_fingerprint(&s.out_ledger()),
            "{name}: every byte the child wrote was passed on"
        );
    }
}
