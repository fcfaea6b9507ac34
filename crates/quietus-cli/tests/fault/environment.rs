//! Fault scenarios, family "environment": the watched `.agent` folder missing, deleted,
//! replaced by a file, and the file signal without inotify (the documented switch
//! `FileWatchConfig::force_stat_scan`, the mode quietus falls back to when the system is out
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

use crate::support as common;
use crate::support::cli as cli_support;
use crate::support::fault as fault_support;
use quietus::config::MonitorConfigBuilder;

use std::fs;
use std::time::{Duration, Instant};

use common::{Marker, assert_no_leak, ms, wait_generously};
use fault_support::Scenario;
use quietus::{
    ActivitySource, CaptureConfig, FileWatchConfig, KillLadder, MonitorConfig, MonitorResult,
    Outcome, Signal, outcome::SourceActivity,
};

/// Writes come every quarter second: 1.25 s of slack for a stalled VM (this 2-core VM was seen
/// to stop a shell loop for 0.87 s, which a 0.6 s idle timeout took for a stall).
const IDLE: Duration = Duration::from_millis(1500);

fn config(stat_scan: bool) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
        .watch_children(false)
        .files(FileWatchConfig::builder().force_stat_scan(stat_scan))
}

fn files(result: &MonitorResult) -> SourceActivity {
    result
        .activity
        .iter()
        .find(|s| s.source == ActivitySource::Files)
        .expect("the file signal is on")
        .clone()
}

/// A script loop writing `.agent/plan.md` `n` times, every quarter second (idle / 6).
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
    let watch = FileWatchConfig::builder()
        .excludes(Vec::<String>::new())
        .build()
        .unwrap();
    let config = MonitorConfig::builder()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .drain_cap(ms(1000))
        .watch_children(false)
        .watch_output(false)
        .capture(
            CaptureConfig::builder()
                .spill_threshold(1024)
                .log_dir(s.work.path().join(".agent/logs")),
        )
        .files(watch)
        .build()
        .unwrap();
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

/// `quietus ARGS -- sh -c SCRIPT MARKER` in `work`, as an unprivileged user (root reads
/// folders of mode 000 all the same): as `nobody` through `setpriv` when the tests run as
/// root, with `work` handed over to it; as the current user otherwise.
fn run_unprivileged(
    marker: &Marker,
    work: &std::path::Path,
    args: &[&str],
    script: &str,
) -> std::process::Output {
    let root = rustix::process::geteuid().is_root();
    let mut command = if root {
        for entry in walk(work) {
            std::os::unix::fs::lchown(&entry, Some(NOBODY), Some(NOBODY))
                .expect("the workspace can be handed to nobody");
        }
        let mut command = std::process::Command::new("setpriv");
        command.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            env!("CARGO_BIN_EXE_quietus"),
        ]);
        command
    } else {
        std::process::Command::new(env!("CARGO_BIN_EXE_quietus"))
    };
    command
        .args(args)
        .arg("--")
        .args(marker.sh_words(script))
        .env("HOME", work)
        .env_remove("XDG_CACHE_HOME")
        .current_dir(work);
    cli_support::isolate(&mut command, marker);
    let mut command = assert_cmd::Command::from_std(command);
    command.timeout(common::GENEROUS);
    command.output().expect("quietus runs")
}

/// The uid and gid of `nobody` / `nogroup` on Linux.
const NOBODY: u32 = 65534;

/// `dir` and everything under it (links not followed).
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut all = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        if all[i].is_dir() && !all[i].is_symlink() {
            for entry in fs::read_dir(&all[i])
                .expect("a readable test folder")
                .flatten()
            {
                all.push(entry.path());
            }
        }
        i += 1;
    }
    all
}

/// The report's `unavailable` entries for `path` (ending with it).
fn unavailable_for<'a>(report: &'a serde_json::Value, path: &str) -> Vec<&'a serde_json::Value> {
    report["unavailable"]
        .as_array()
        .expect("unavailable is a list")
        .iter()
        .filter(|u| u["path"].as_str().is_some_and(|p| p.ends_with(path)))
        .collect()
}

/// A silent child writing `.agent/$1/progress` every 0.3 s, `$2` times.
const WRITER: &str = "w() { n=$2; while [ $n -gt 0 ]; do echo $n > \".agent/$1/progress\"; \
                      sleep 0.3; n=$((n-1)); done; }; ";

/// Issue 11, item 3: `.agent` made unreadable (mode 000) for a second mid-run, then readable
/// again, while the child keeps working in it. The re-arm on the mode change used to fail
/// and drop the root for good: the child was ended for idleness while it worked.
#[test]
fn agent_unreadable_for_a_second_mid_run_is_watched_again() {
    let marker = Marker::new("env_perm_mid_run");
    let work = tempfile::tempdir().expect("a workspace");
    fs::create_dir(work.path().join(".agent")).expect("the watched folder");
    let out = run_unprivileged(
        &marker,
        work.path(),
        &[
            "-i",
            "4s",
            "-g",
            "200ms",
            "--no-children",
            "--report",
            "report.json",
        ],
        &format!("{WRITER} w . 4; chmod 000 .agent; sleep 1; chmod 755 .agent; w . 12"),
    );
    cli_support::assert_code(&out, 0);
    let report = fs::read_to_string(work.path().join("report.json")).expect("the report");
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(report["outcome"], "exited", "{report}");
    assert!(
        report["activity_count"]["files"].as_u64() >= Some(12),
        "{report}"
    );
    // Whatever was not watched on the way is said, and is watched again at the end.
    for gap in unavailable_for(&report, ".agent") {
        assert_eq!(gap["at_end"], false, "{report}");
    }
    assert_no_leak(&marker);
}

/// Issue 11, item 3: `.agent` unreadable when the run starts, readable half a second later.
/// It used to be dropped at the start and never watched.
#[test]
fn agent_unreadable_at_start_is_watched_once_readable() {
    let marker = Marker::new("env_perm_start");
    let work = tempfile::tempdir().expect("a workspace");
    let agent = work.path().join(".agent");
    fs::create_dir(&agent).expect("the watched folder");
    fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o000))
        .expect("the mode can be changed");
    let out = run_unprivileged(
        &marker,
        work.path(),
        &[
            "-i",
            "4s",
            "-g",
            "200ms",
            "--no-children",
            "--report",
            "report.json",
        ],
        &format!("sleep 0.5; chmod 755 .agent; {WRITER} w . 12"),
    );
    cli_support::assert_code(&out, 0);
    let report = fs::read_to_string(work.path().join("report.json")).expect("the report");
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(report["outcome"], "exited", "{report}");
    assert!(
        report["activity_count"]["files"].as_u64() >= Some(12),
        "{report}"
    );
    // The report says it was not watched at first, for about the half second, then was.
    let gaps = unavailable_for(&report, ".agent");
    assert_eq!(gaps.len(), 1, "{report}");
    assert_eq!(gaps[0]["at_end"], false, "{report}");
    assert!(gaps[0]["unwatched_ms"].as_u64() >= Some(400), "{report}");
    assert_no_leak(&marker);
}

/// Issue 11, item 3: one unreadable folder among 30 in `.agent` (the first one the walk
/// meets): the recursive watch used to stop there, leaving every folder after it unwatched.
/// The child works in the 29 others in turn; the report names the one not watched, for the
/// whole run.
#[test]
fn one_unreadable_folder_among_thirty_leaves_the_others_watched() {
    let marker = Marker::new("env_perm_sub");
    let work = tempfile::tempdir().expect("a workspace");
    let agent = work.path().join(".agent");
    for d in 0..30 {
        fs::create_dir_all(agent.join(format!("d{d:02}"))).expect("a folder");
    }
    // The walk goes in directory order: make the first folder it meets the unreadable one.
    let first = fs::read_dir(&agent)
        .expect("the folder")
        .flatten()
        .next()
        .expect("30 folders")
        .file_name()
        .to_string_lossy()
        .into_owned();
    let others: Vec<String> = (0..30)
        .map(|d| format!("d{d:02}"))
        .filter(|d| *d != first)
        .collect();
    let unreadable = agent.join(&first);
    fs::set_permissions(
        &unreadable,
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .expect("the mode can be changed");
    let out = run_unprivileged(
        &marker,
        work.path(),
        &[
            "-i",
            "3s",
            "-g",
            "200ms",
            "--no-children",
            "--report",
            "report.json",
        ],
        &format!("{WRITER} for d in {}; do w $d 1; done", others.join(" ")),
    );
    fs::set_permissions(
        &unreadable,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("the mode can be changed back");
    cli_support::assert_code(&out, 0);
    let report = fs::read_to_string(work.path().join("report.json")).expect("the report");
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(report["outcome"], "exited", "{report}");
    let gaps = unavailable_for(&report, &format!(".agent/{first}"));
    assert_eq!(gaps.len(), 1, "{report}");
    assert_eq!(gaps[0]["source"], "files", "{report}");
    assert_eq!(gaps[0]["at_end"], true, "{report}");
    let duration = report["duration_ms"].as_u64().expect("a duration");
    // Not watched for the whole run (give or take the start).
    assert!(
        gaps[0]["unwatched_ms"].as_u64().expect("a duration") + 1000 >= duration,
        "{report}"
    );
    assert!(
        gaps[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("denied")),
        "{report}"
    );
    assert_no_leak(&marker);
}
