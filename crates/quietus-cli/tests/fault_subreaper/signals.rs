//! Fault scenarios, family "signals": trees that ignore, dodge or pre-empt the ladder's
//! signals, stopped processes, a child that crashes itself, `exec`.
//!
//! Already covered elsewhere, not repeated here:
//! - a lone shell ignoring TERM: `kill_ladder::child_ignoring_term_is_escalated_to_kill`;
//! - a shell ignoring INT and HUP with a three-step ladder:
//!   `kill_ladder::every_step_of_a_custom_ladder_is_climbed_in_order`;
//! - leftovers ignoring TERM after a normal exit:
//!   `leftovers::leftovers_ignoring_term_are_escalated_after_a_normal_exit`;
//! - death by TERM / KILL mapped to 143 / 137: `exit_status.rs`.
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::fault as fault_support;

use std::time::Duration;

use common::{HANDSHAKE, poll_until, wait_generously};
use fault_support::{
    LADDER_GRACE, LADDER_IDLE, Scenario, is_idle_timeout, ladder_config, subreaper_config,
};
use quietus::{KillLadder, Outcome, Signal};

/// Waits until `count` processes of the scenario are stopped (state `T`).
#[track_caller]
fn wait_stopped(s: &Scenario, count: usize) {
    assert!(
        poll_until(HANDSHAKE, || s
            .marker
            .pids()
            .iter()
            .filter(|p| p.state == 'T')
            .count()
            >= count),
        "expected {count} stopped process(es): {:#?}",
        s.marker.pids()
    );
}

#[test]
fn term_ignored_by_every_process_of_a_tree_is_escalated() {
    let s = Scenario::new("sig_term_tree");
    // A shell, two subshells, a perl and a python process, each ignoring TERM its own way.
    let script = "trap '' TERM; \
        (say sub-a; exec sleep 1000) & (say sub-b; exec sleep 1000) & \
        perl -e '$SIG{TERM} = q(IGNORE); open(my $l, q(>>), $ENV{SW_OUT}) or die; \
                 print $l qq(perl\\n); close $l; syswrite(STDOUT, qq(perl\\n)); sleep 1000' & \
        python3 -c 'import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.environ[\"SW_OUT\"], \"a\").write(\"python\\n\")
os.write(1, b\"python\\n\")
time.sleep(1000)' & \
        while [ $(wc -l < \"$SW_OUT\") -lt 4 ]; do sleep 0.01; done; say ready; wait";
    let session = s.spawn(script, ladder_config());
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated);
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(9),
        "{result:#?}"
    );
    assert!(result.ladder_time.expect("a ladder ran") >= LADDER_GRACE);
    assert!(!result.termination_unproven);
    assert!(result.output_complete);
    s.assert_no_leak();
    s.assert_accounted_unordered();
}

/// A non-interactive shell starts its background jobs with SIGINT ignored (POSIX): an
/// INT-first ladder kills the shell but not its jobs, and must go on to SIGKILL.
#[test]
fn int_first_ladder_against_background_jobs_goes_on_to_sigkill() {
    let s = Scenario::new("sig_int_jobs");
    let script = "sleep 1000 & sleep 1000 & say ready; wait";
    let session = s.spawn(
        script,
        ladder_config().kill_ladder(KillLadder::polite(Signal::INT, LADDER_GRACE)),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::INT, Signal::KILL]);
    assert!(result.escalated, "the jobs ignore INT: {result:#?}");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(2),
        "the shell itself died of INT"
    );
    assert_eq!(result.exit_code(), 124);
    s.assert_no_leak();
    s.assert_accounted();
}

/// INT ignored (python, explicitly), TERM honoured: an INT, TERM, KILL ladder stops at TERM.
#[test]
fn int_ignored_term_honoured_stops_at_the_second_step() {
    let s = Scenario::new("sig_int_ignored");
    let script = "exec python3 -c 'import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
open(os.environ[\"SW_OUT\"], \"a\").write(\"ready\\n\")
os.write(1, b\"ready\\n\")
time.sleep(1000)'";
    let session = s.spawn(
        script,
        ladder_config().kill_ladder(KillLadder::new([
            (Signal::INT, LADDER_GRACE),
            (Signal::TERM, Duration::from_secs(10)),
        ])),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::INT, Signal::TERM]);
    assert!(!result.escalated, "{result:#?}");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(15),
        "{result:#?}"
    );
    let ladder = result.ladder_time.expect("a ladder ran");
    assert!(
        ladder >= LADDER_GRACE,
        "INT's grace was waited out: {ladder:?}"
    );
    s.assert_no_leak();
    s.assert_accounted();
}

/// The child stops itself: silent, hence stale; the ladder's SIGCONT lets the pending TERM
/// act, so the polite step is enough.
#[test]
fn a_child_that_stopped_itself_is_ended_by_the_polite_step() {
    let s = Scenario::new("sig_stopped_leader");
    let session = s.spawn(
        "say ready; kill -STOP $$; say resumed-without-term",
        ladder_config(),
    );
    s.out.wait_for("ready");
    wait_stopped(&s, 1);
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent.first(), Some(&Signal::TERM));
    assert!(!result.escalated, "TERM acted once continued: {result:#?}");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(15),
        "{result:#?}"
    );
    assert!(
        !s.out.contains("resumed"),
        "TERM was pending when it resumed"
    );
    s.assert_no_leak();
    s.assert_accounted();
}

/// A stopped grandchild in the group.
#[test]
fn a_stopped_grandchild_is_ended_by_the_polite_step() {
    let s = Scenario::new("sig_stopped_grandchild");
    let session = s.spawn(
        "sleep 1000 & kill -STOP $!; say ready; wait",
        ladder_config(),
    );
    s.out.wait_for("ready");
    wait_stopped(&s, 1);
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert!(!result.escalated, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// A stopped grandchild in another session: it is signalled by pid, and continued by pid too.
#[test]
fn a_stopped_escapee_is_continued_and_ended_by_the_polite_step() {
    let s = Scenario::new("sig_stopped_escapee");
    let session = s.spawn(
        "setsid sh -c 'kill -STOP $$; exec sleep 1000' & say ready; wait",
        ladder_config(),
    );
    s.out.wait_for("ready");
    wait_stopped(&s, 1);
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert!(
        !result.escalated,
        "the escapee got TERM and SIGCONT by pid: {result:#?}"
    );
    s.assert_no_leak();
    s.assert_accounted();
}

/// Stopped and ignoring TERM: only SIGKILL (which acts on stopped processes) ends them.
#[test]
fn stopped_processes_ignoring_term_are_killed() {
    let s = Scenario::new("sig_stopped_stubborn");
    let session = s.spawn(
        "trap '' TERM; sleep 1000 & kill -STOP $!; say ready; kill -STOP $$; wait",
        ladder_config(),
    );
    s.out.wait_for("ready");
    wait_stopped(&s, 2);
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert!(result.escalated);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn a_child_killing_itself_with_sigsegv_is_reported_as_its_own_exit() {
    let s = Scenario::new("sig_segv_self");
    let session = s.spawn("say before-the-crash; kill -SEGV $$", ladder_config());
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert!(!result.outcome.ended_by_quietus());
    assert_eq!(result.signal().map(quietus::Signal::number), Some(11));
    assert_eq!(result.exit_code(), 128 + 11);
    assert!(result.signals_sent.is_empty(), "{result:#?}");
    assert!(result.output_complete);
    s.assert_no_leak();
    s.assert_accounted();
}

/// A real segmentation fault (a null read), with a background job left behind: the job is
/// ended, the crash's code kept.
#[test]
fn a_real_segfault_with_a_leftover_keeps_the_crash_code() {
    let s = Scenario::new("sig_segv_real");
    let session = s.spawn(
        "sleep 1000 & say before-the-crash; \
         exec python3 -c 'import ctypes; ctypes.string_at(0)'",
        ladder_config(),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(11),
        "{result:#?}"
    );
    assert_eq!(result.exit_code(), 139);
    assert_eq!(result.leftovers_killed, 1, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// `exec` replaces the shell by a program that ignores TERM: same pid, same group, the ladder
/// still ends it.
#[test]
fn exec_into_a_program_ignoring_term_keeps_the_pid_and_is_killed() {
    let s = Scenario::new("sig_exec");
    let session = s.spawn(
        "say shell; exec perl -e '$SIG{TERM} = q(IGNORE); \
         open(my $l, q(>>), $ENV{SW_OUT}) or die; print $l qq(perl\\n); close $l; \
         syswrite(STDOUT, qq(perl\\n)); sleep 1000'",
        ladder_config(),
    );
    s.out.wait_for("perl");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", session.pid())).unwrap_or_default();
    assert!(
        cmdline.starts_with(b"perl"),
        "the child's pid now runs perl: {:?}",
        String::from_utf8_lossy(&cmdline)
    );
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));
    s.assert_no_leak();
    s.assert_accounted();
}

/// After `exec`, the observer still watches the same pid: a busy child of the new program
/// keeps the silent tree alive, then it is ended one idle timeout after the work stopped.
#[test]
fn exec_into_a_program_with_a_busy_child_is_watched_across_the_exec() {
    let s = Scenario::new("sig_exec_busy");
    let work = Duration::from_millis(1500);
    let session = s.spawn(
        &format!(
            "say shell; exec perl -MTime::HiRes=time -e '
                if (fork() == 0) {{ my $end = time + {secs}; 1 while time < $end; exit 0 }}
                wait; sleep 1000'",
            secs = work.as_secs_f64()
        ),
        ladder_config(),
    );
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{result:#?}");
    };
    assert!(result.runtime >= work + LADDER_IDLE, "{:?}", result.runtime);
    let children = report
        .get(quietus::ActivitySource::Children)
        .expect("the children signal is on");
    assert!(children.events >= 1, "{report}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// The child answers TERM by starting a detached helper (a crash reporter, `git gc --auto`,
/// a state uploader) in a new session, then exits. The helper appeared after the ladder's
/// last look at the tree.
/// Caught by the opt-in subreaper mode (the orphan comes back to this process, tagged);
/// without it the kernel hands it to init before quietus can see it.
#[test]
fn a_helper_detached_by_the_term_handler_is_ended_too() {
    let s = Scenario::new("sig_term_spawns_helper");
    let session = s.spawn(
        "trap 'setsid sh -c \"eval \\\"\\$SW_PRELUDE\\\"; say helper-up; exec sleep 1000\" & \
               while ! grep -q helper-up \"$SW_OUT\"; do sleep 0.01; done; exit 0' TERM; \
         say ready; sleep 1000 & wait",
        subreaper_config(),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

/// The same with a helper that stays in the group: spawned after TERM was sent, it never got
/// TERM, but the group-wide SIGKILL at the end of the grace reaches it.
#[test]
fn a_helper_started_by_the_term_handler_in_the_group_is_ended() {
    let s = Scenario::new("sig_term_spawns_group_helper");
    let session = s.spawn(
        "trap 'sh -c \"eval \\\"\\$SW_PRELUDE\\\"; say helper-up; exec sleep 1000\" & \
               while ! grep -q helper-up \"$SW_OUT\"; do sleep 0.01; done; exit 0' TERM; \
         say ready; sleep 1000 & wait",
        ladder_config(),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    assert!(is_idle_timeout(&result.outcome), "{result:#?}");
    assert_eq!(result.signals_sent, vec![Signal::TERM, Signal::KILL]);
    s.assert_no_leak();
    s.assert_accounted();
}
