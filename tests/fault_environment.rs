//! Fault scenarios, family "environment": the watched `.agent` folder missing, deleted,
//! replaced by a file, and the file signal without inotify (the documented switch
//! `FileWatchConfig::force_stat_scan`, the mode stallwatch falls back to when the system is out
//! of inotify watches; exhausting the real per-user limit would disturb every other process of
//! the user, so it is not done here). Each file scenario runs in both modes.
//!
//! The children signal is off in these sessions: the scripts' `sleep` processes must not keep a
//! child alive in place of the file signal under test.
//!
//! Already covered elsewhere, not repeated here: the tracker on its own with a late, deleted and
//! re-created root, a root that is a file, symlinks inside the root, excluded files, reads
//! (`file_signal.rs`); file writes keeping a silent session alive in both modes
//! (`file_signal::file_writes_keep_a_silent_child_alive_in_both_modes`).
//!
//! An unusable log folder: `capture_events::an_unusable_log_folder_is_an_error_at_spawn_and_nothing_runs`
//! and `cli_events::an_unusable_log_dir_is_125_and_the_program_does_not_run`.
#![cfg(target_os = "linux")]

mod cli_support;
mod common;
mod fault_support;

use std::fs;
use std::time::{Duration, Instant};

use common::{Marker, assert_no_leak, ms, wait_generously};
use fault_support::Scenario;
use stallwatch::{
    ActivitySource, CaptureConfig, FileWatchConfig, KillLadder, MonitorConfig, MonitorResult,
    Outcome, Signal, SignalIdle,
};

const IDLE: Duration = Duration::from_millis(600);

fn config(stat_scan: bool) -> MonitorConfig {
    MonitorConfig::default()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
        .children_signal(false)
        .files(FileWatchConfig::default().force_stat_scan(stat_scan))
}

fn files(result: &MonitorResult) -> SignalIdle {
    *result
        .activity
        .iter()
        .find(|s| s.source == ActivitySource::Files)
        .expect("the file signal is on")
}

/// A script loop writing `.agent/plan.md` `n` times, every quarter second (idle / 2.4).
fn writes(n: u32) -> String {
    format!("i=0; while [ $i -lt {n} ]; do echo $i > .agent/plan.md; sleep 0.25; i=$((i+1)); done")
}

fn missing_for_the_whole_run(stat_scan: bool) {
    let s = Scenario::new("env_missing");
    // Busy next to the root, never in it.
    let session = s.spawn(
        "say ready; while :; do echo x > notes.md; mkdir -p other; sleep 0.05; done",
        config(stat_scan),
    );
    s.out.wait_for("ready");
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{result:#?}");
    };
    let files = report.get(ActivitySource::Files).expect("files are on");
    assert_eq!(files.events, 0, "{report}");
    assert!(files.available, "a missing root is normal: {report}");
    assert!(files.idle >= IDLE, "{report}");
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_missing_for_the_whole_run() {
    missing_for_the_whole_run(false);
}

#[test]
fn agent_missing_for_the_whole_run_stat_scan() {
    missing_for_the_whole_run(true);
}

fn deleted_and_recreated(stat_scan: bool) {
    let s = Scenario::new("env_recreated");
    let session = s.spawn(
        &format!(
            "mkdir .agent; {}; rm -rf .agent; sleep 0.25; mkdir .agent; {}; say done",
            writes(4),
            writes(8)
        ),
        config(stat_scan),
    );
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.runtime >= ms(3000), "{:?}", result.runtime);
    assert!(files(&result).events >= 6, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_deleted_mid_run_and_recreated_keeps_counting() {
    deleted_and_recreated(false);
}

#[test]
fn agent_deleted_mid_run_and_recreated_keeps_counting_stat_scan() {
    deleted_and_recreated(true);
}

fn deleted_for_good(stat_scan: bool) {
    let s = Scenario::new("env_deleted");
    let session = s.spawn(
        &format!(
            "mkdir .agent; {}; rm -rf .agent; exec sleep 1000",
            writes(4)
        ),
        config(stat_scan),
    );
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{result:#?}"
    );
    // Alive through the writes, ended an idle timeout after the last sign of life.
    assert!(result.runtime >= ms(1000) + IDLE, "{:?}", result.runtime);
    let files = files(&result);
    assert!(files.available, "{result:#?}");
    assert!(files.events >= 2, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_deleted_mid_run_for_good_is_then_stale() {
    deleted_for_good(false);
}

#[test]
fn agent_deleted_mid_run_for_good_is_then_stale_stat_scan() {
    deleted_for_good(true);
}

/// `.agent` becomes a file that the child keeps rewriting: the file signal reports
/// "unavailable", and the rewrites never count as activity.
fn replaced_by_a_file(stat_scan: bool) {
    let s = Scenario::new("env_replaced");
    let session = s.spawn(
        &format!(
            "mkdir .agent; {}; rm -rf .agent; echo 0 > .agent; say replaced; \
             i=0; while :; do echo $i > .agent; sleep 0.05; i=$((i+1)); done",
            writes(4)
        ),
        config(stat_scan),
    );
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("rewriting a root that is a file kept the child alive: {result:#?}");
    };
    let files = report.get(ActivitySource::Files).expect("files are on");
    assert!(!files.available, "{report}");
    assert!(files.idle >= IDLE, "{report}");
    assert!(report.to_string().contains("files unavailable"), "{report}");
    assert!(result.runtime >= ms(1000) + IDLE, "{:?}", result.runtime);
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_replaced_by_a_file_is_unavailable_never_active() {
    replaced_by_a_file(false);
}

#[test]
fn agent_replaced_by_a_file_is_unavailable_never_active_stat_scan() {
    replaced_by_a_file(true);
}

/// `.agent` starts as a file (unavailable), then the child turns it into a folder and works
/// in it: the folder must be picked up like a late-created root.
fn file_turned_into_a_folder(stat_scan: bool) {
    let s = Scenario::new("env_file_to_folder");
    fs::write(s.work.path().join(".agent"), "a file, for now").expect("a file in the workspace");
    let session = s.spawn(
        &format!("rm .agent; mkdir .agent; {}; say done", writes(10)),
        config(stat_scan),
    );
    let result = wait_generously(&session);
    assert_eq!(
        result.outcome,
        Outcome::Exited,
        "writes in the new folder did not count: {result:#?}"
    );
    assert_eq!(result.exit_code(), 0);
    let files = files(&result);
    assert!(files.available, "{result:#?}");
    assert!(files.events >= 8, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_file_turned_into_a_folder_is_watched() {
    file_turned_into_a_folder(false);
}

#[test]
fn agent_file_turned_into_a_folder_is_watched_stat_scan() {
    file_turned_into_a_folder(true);
}

/// Mid-run: folder, then a file, then a folder again, with work in it.
fn folder_file_folder(stat_scan: bool) {
    let s = Scenario::new("env_flip");
    let session = s.spawn(
        &format!(
            "mkdir .agent; {}; rm -rf .agent; echo x > .agent; sleep 0.25; rm .agent; \
             mkdir .agent; {}; say done",
            writes(3),
            writes(10)
        ),
        config(stat_scan),
    );
    let result = wait_generously(&session);
    assert_eq!(
        result.outcome,
        Outcome::Exited,
        "writes in the folder that came back did not count: {result:#?}"
    );
    assert!(files(&result).available, "{result:#?}");
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_folder_file_folder_keeps_counting() {
    folder_file_folder(false);
}

#[test]
fn agent_folder_file_folder_keeps_counting_stat_scan() {
    folder_file_folder(true);
}

/// A symbolic link as the root itself (`.agent -> shared/agent`, a common set-up when several
/// checkouts share one agent folder): the work done in the linked folder should count, or at
/// the least the signal must say it is unavailable rather than look idle.
fn symlinked_root(stat_scan: bool) {
    let s = Scenario::new("env_symlink_root");
    let target = s.work.path().join("shared/agent");
    fs::create_dir_all(&target).expect("the link's target");
    std::os::unix::fs::symlink("shared/agent", s.work.path().join(".agent"))
        .expect("a symlink in the workspace");
    let session = s.spawn(&format!("{}; say done", writes(10)), config(stat_scan));
    let result = wait_generously(&session);
    let files = files(&result);
    assert_eq!(
        result.outcome,
        Outcome::Exited,
        "work in a symlinked .agent did not count (files {files:?})"
    );
    s.assert_no_leak();
    s.assert_accounted();
}

#[test]
fn agent_as_a_symlink_to_a_folder_counts() {
    symlinked_root(false);
}

#[test]
fn agent_as_a_symlink_to_a_folder_counts_stat_scan() {
    symlinked_root(true);
}

/// The fallback mode on a big tree (2000 files in 50 folders): a same-size rewrite of one deep
/// file (only the nanosecond mtime changes) keeps the child alive; then it is ended an idle
/// timeout after the work stopped.
#[test]
fn stat_scan_sees_same_size_rewrites_deep_in_a_big_tree() {
    let s = Scenario::new("env_stat_big");
    let root = s.work.path().join(".agent");
    for d in 0..50 {
        let dir = root.join(format!("d{d:02}/sub"));
        fs::create_dir_all(&dir).expect("a folder of the big tree");
        for f in 0..40 {
            fs::write(dir.join(format!("f{f:02}.txt")), "0000").expect("a file of the big tree");
        }
    }
    let session = s.spawn(
        "i=0; while [ $i -lt 8 ]; do printf %04d $i > .agent/d37/sub/f21.txt; sleep 0.25; \
         i=$((i+1)); done; exec sleep 1000",
        config(true),
    );
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{result:#?}");
    };
    // The eighth and last rewrite happens at least 7 × 0.25 s after the start.
    assert!(result.runtime >= ms(1750) + IDLE, "{:?}", result.runtime);
    let files = report.get(ActivitySource::Files).expect("files are on");
    assert!(files.events >= 5, "{report}");
    assert!(files.available);
    s.assert_no_leak();
    s.assert_accounted();
}

/// Issue 11, item 1: the command's own `--events` and `--report` files inside the watched
/// folder. Every `idle_warning` line written to the events file used to count as the child's
/// file activity, so a child that only sleeps was never ended.
#[test]
fn own_events_and_report_files_in_the_watched_folder_are_not_activity() {
    let marker = Marker::new("env_own_files_cli");
    let work = tempfile::tempdir().expect("a working directory");
    fs::create_dir(work.path().join(".agent")).expect("the watched folder");
    let started = Instant::now();
    let out = cli_support::sw(&marker)
        .dir(work.path())
        .args(&[
            "-i",
            "1s",
            "-g",
            "200ms",
            "--events",
            ".agent/ev.jsonl",
            "--report",
            ".agent/report.json",
        ])
        .sh("echo ready; exec sleep 20")
        .output();
    let elapsed = started.elapsed();
    cli_support::assert_code(&out, 124);
    assert!(elapsed >= ms(1000), "{elapsed:?}");
    // Generous: the bug kept it alive until the sleep ended (20 s), and exited 0.
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    let events = fs::read_to_string(work.path().join(".agent/ev.jsonl")).expect("the events");
    assert!(events.contains("\"idle_warning\""), "{events}");
    let report = fs::read_to_string(work.path().join(".agent/report.json")).expect("the report");
    let report: serde_json::Value = serde_json::from_str(&report).expect("the report is JSON");
    assert_eq!(report["outcome"], "idle_timeout", "{report}");
    assert_eq!(report["activity_count"]["files"], 0, "{report}");
    assert_no_leak(&marker);
}

/// Issue 11, item 1, in the library: the session's own log files, in a log folder inside the
/// watched folder and with no exclude glob that would hide them by name, are not activity.
/// The output signal is off, so only the file signal could keep this chatty child alive.
#[test]
fn own_log_files_in_the_watched_folder_are_not_activity() {
    let s = Scenario::new("env_own_logs");
    let mut watch = FileWatchConfig::default();
    watch.exclude.clear();
    let config = MonitorConfig::default()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
        .children_signal(false)
        .output_signal(false)
        .capture(
            CaptureConfig::default()
                .spill_threshold(1024)
                .log_dir(s.work.path().join(".agent/logs")),
        )
        .files(watch);
    fs::create_dir(s.work.path().join(".agent")).expect("the watched folder");
    // 40 × 0.1 s of output, 2 KiB at first (past the spill threshold), then a line each time.
    let session = s.spawn(
        "head -c 2048 /dev/zero | tr '\\0' x; echo; i=0; \
         while [ $i -lt 40 ]; do echo line $i; sleep 0.1; i=$((i+1)); done",
        config,
    );
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "the session's own log writes kept the child alive: {result:#?}"
    );
    assert_eq!(files(&result).events, 0, "{result:#?}");
    assert!(
        result
            .logs
            .iter()
            .any(|log| log.path.starts_with(s.work.path().join(".agent/logs"))),
        "{result:#?}"
    );
    s.assert_no_leak();
}
