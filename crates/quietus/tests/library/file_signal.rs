//! The file signal with real files in temporary folders: the tracker on its own, in both modes
//! (notify and forced stat-scan), and inside a session.

use crate::support as common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Marker, assert_no_leak, poll_until};
use quietus::sources::{ActivityBoard, FileActivityTracker};
use quietus::{ActivitySource, Clock, FileWatchConfig, MockClock, MonitorConfig, Outcome, Session};

const PATIENCE: Duration = Duration::from_secs(20);
/// How long a negative check waits for an event that must not come. inotify delivers in
/// microseconds; the stat scan below runs every 20 ms.
const QUIET_WINDOW: Duration = Duration::from_millis(300);
const SCAN: Duration = Duration::from_millis(20);

fn board() -> Arc<ActivityBoard> {
    Arc::new(ActivityBoard::new(Clock::system()))
}

fn count(board: &ActivityBoard) -> u64 {
    board.count(&ActivitySource::Files)
}

/// Waits until the file count exceeds `before`; panics after `PATIENCE`.
fn wait_above(board: &ActivityBoard, before: u64, what: &str) {
    assert!(
        poll_until(PATIENCE, || count(board) > before),
        "no file activity seen for: {what}"
    );
}

/// Asserts that the count stays at `expected` for the quiet window.
fn stays(board: &ActivityBoard, expected: u64, what: &str) {
    let until = Instant::now() + QUIET_WINDOW;
    while Instant::now() < until {
        assert_eq!(count(board), expected, "counted: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lets a tracker settle: waits until its count has not moved for the quiet window.
fn settle(board: &ActivityBoard) -> u64 {
    let mut last = count(board);
    let mut since = Instant::now();
    while since.elapsed() < QUIET_WINDOW {
        std::thread::sleep(Duration::from_millis(5));
        let now = count(board);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    last
}

fn tracker(dir: &Path, board: &Arc<ActivityBoard>, scan: bool) -> FileActivityTracker {
    let config = FileWatchConfig::builder()
        .force_stat_scan(scan)
        .build()
        .unwrap();
    let t = FileActivityTracker::start(&config, dir, board.clone(), SCAN).unwrap();
    assert_eq!(t.is_stat_scan(), scan);
    t
}

/// Every scenario runs in both modes.
fn both_modes(test: impl Fn(bool)) {
    test(false);
    test(true);
}

#[test]
fn writes_creates_renames_and_removes_count() {
    both_modes(|scan| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(".agent");
        fs::create_dir(&root).unwrap();
        let b = board();
        let _t = tracker(tmp.path(), &b, scan);
        let c = settle(&b);
        fs::write(root.join("plan.md"), "step 1").unwrap();
        wait_above(&b, c, "create");
        let c = settle(&b);
        fs::write(root.join("plan.md"), "step 1 and 2").unwrap();
        wait_above(&b, c, "modify");
        let c = settle(&b);
        // Atomic write-then-rename, the way editors and agents save files.
        fs::write(root.join(".plan.md.tmp"), "step 3").unwrap();
        fs::rename(root.join(".plan.md.tmp"), root.join("plan.md")).unwrap();
        wait_above(&b, c, "write-then-rename");
        let c = settle(&b);
        fs::remove_file(root.join("plan.md")).unwrap();
        wait_above(&b, c, "remove");
        let c = settle(&b);
        fs::create_dir_all(root.join("new/deeper")).unwrap();
        wait_above(&b, c, "new subfolder");
        let c = settle(&b);
        fs::write(root.join("new/deeper/notes.txt"), "x").unwrap();
        wait_above(&b, c, "file in a new subfolder");
    });
}

#[test]
fn reads_never_count() {
    both_modes(|scan| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(".agent");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("plan.md"), "plan").unwrap();
        fs::write(root.join("sub/notes.md"), "notes").unwrap();
        let b = board();
        let _t = tracker(tmp.path(), &b, scan);
        let c = settle(&b);
        for _ in 0..20 {
            assert_eq!(fs::read_to_string(root.join("plan.md")).unwrap(), "plan");
            let _ = fs::read_dir(&root).unwrap().count();
            let _ = fs::read(root.join("sub/notes.md")).unwrap();
            let _ = fs::metadata(root.join("plan.md")).unwrap();
        }
        stays(&b, c, "reading files and listing folders");
    });
}

#[test]
fn excluded_files_never_count() {
    both_modes(|scan| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(".agent");
        fs::create_dir_all(root.join("sub")).unwrap();
        let b = board();
        let t = tracker(tmp.path(), &b, scan);
        t.ignore_file(root.join("quietus-own.txt"));
        let c = settle(&b);
        for name in [
            "run.log",
            "sub/deep.log",
            ".plan.md.swp",
            "plan.md~",
            ".#plan.md",
            "quietus-own.txt",
        ] {
            fs::write(root.join(name), "noise").unwrap();
            fs::write(root.join(name), "more noise").unwrap();
        }
        fs::remove_file(root.join("run.log")).unwrap();
        // Activity outside the root, next to it, never counts either.
        fs::write(tmp.path().join("outside.md"), "x").unwrap();
        fs::create_dir(tmp.path().join(".agentish")).unwrap();
        stays(&b, c, "excluded files");
    });
}

#[test]
fn a_root_created_late_then_deleted_and_created_again_keeps_counting() {
    both_modes(|scan| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("work/.agent");
        let b = board();
        let config = FileWatchConfig::builder()
            .roots(["work/.agent"])
            .force_stat_scan(scan)
            .build()
            .unwrap();
        let _t = FileActivityTracker::start(&config, tmp.path(), b.clone(), SCAN).unwrap();
        let c = settle(&b);
        // Unrelated activity in the watched ancestor does not count.
        fs::write(tmp.path().join("README"), "x").unwrap();
        stays(&b, c, "a sibling of the missing root");
        fs::create_dir_all(&root).unwrap();
        wait_above(&b, c, "the root appearing (two levels deep)");
        let c = settle(&b);
        fs::write(root.join("plan.md"), "1").unwrap();
        wait_above(&b, c, "a write in the late root");
        let c = settle(&b);
        fs::remove_dir_all(&root).unwrap();
        wait_above(&b, c, "the root deleted");
        let c = settle(&b);
        fs::create_dir(&root).unwrap();
        wait_above(&b, c, "the root created again");
        let c = settle(&b);
        fs::write(root.join("plan.md"), "2").unwrap();
        wait_above(&b, c, "a write in the re-created root");
    });
}

#[test]
fn a_root_that_is_a_file_is_unavailable_not_active() {
    both_modes(|scan| {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(".agent"), "I am a file").unwrap();
        let b = board();
        let _t = tracker(tmp.path(), &b, scan);
        assert!(b.is_enabled(&ActivitySource::Files));
        assert!(!b.is_available(&ActivitySource::Files));
        stays(&b, 0, "a root that is a file");
    });
}

#[test]
fn symlinks_are_not_followed_out_of_the_root() {
    both_modes(|scan| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(".agent");
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&root).unwrap();
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join("link")).unwrap();
        let b = board();
        let _t = tracker(tmp.path(), &b, scan);
        let c = settle(&b);
        fs::write(elsewhere.join("busy.md"), "x").unwrap();
        stays(&b, c, "a write behind a symlink");
    });
}

#[test]
fn stamps_carry_the_clock_time_of_the_event() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(".agent");
    fs::create_dir(&root).unwrap();
    let clock = MockClock::new();
    let b = Arc::new(ActivityBoard::new(Clock::from(&clock)));
    let _t = tracker(tmp.path(), &b, false);
    clock.advance(Duration::from_secs(3600));
    fs::write(root.join("plan.md"), "x").unwrap();
    wait_above(&b, 0, "write");
    assert_eq!(
        b.last(&ActivitySource::Files),
        b.origin() + Duration::from_secs(3600)
    );
}

#[test]
fn stat_scan_stamps_on_the_mock_clock_schedule() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(".agent");
    fs::create_dir(&root).unwrap();
    let clock = MockClock::new();
    let b = Arc::new(ActivityBoard::new(Clock::from(&clock)));
    let config = FileWatchConfig::builder()
        .force_stat_scan(true)
        .build()
        .unwrap();
    let _t = FileActivityTracker::start(&config, tmp.path(), b.clone(), Duration::from_secs(30))
        .unwrap();
    assert!(clock.wait_for_timers(1, PATIENCE));
    fs::write(root.join("plan.md"), "x").unwrap();
    // Nothing is seen until the next scan: the scanner runs on the clock, not on its own.
    stays(&b, 0, "a write before the scan");
    clock.advance(Duration::from_secs(30));
    wait_above(&b, 0, "the scan after the write");
    assert_eq!(
        b.last(&ActivitySource::Files),
        b.origin() + Duration::from_secs(30)
    );
}

fn silent_writer(dir: &Path, file: &str, period: &str, rounds: u32, marker: &Marker) -> Command {
    let mut c = marker.sh(&format!(
        "mkdir -p .agent; i=0; while [ $i -lt {rounds} ]; do echo $i > .agent/{file}; \
         sleep {period}; i=$((i+1)); done"
    ));
    c.current_dir(dir);
    c
}

#[test]
fn file_writes_keep_a_silent_child_alive_in_both_modes() {
    both_modes(|scan| {
        let m = Marker::new(if scan {
            "files-alive-scan"
        } else {
            "files-alive"
        });
        let tmp = tempfile::tempdir().unwrap();
        let idle = Duration::from_millis(800);
        let config = MonitorConfig::builder()
            .idle_timeout(idle)
            .check_interval(Some(Duration::from_millis(50)))
            .files(FileWatchConfig::builder().force_stat_scan(scan))
            .build()
            .unwrap();
        // Writes every 0.25 s for 3 s: several idle timeouts, never a word on stdout.
        let started = Instant::now();
        let session =
            Session::spawn(silent_writer(tmp.path(), "plan.md", "0.25", 12, &m), config).unwrap();
        let result = session.wait();
        assert_eq!(result.outcome, Outcome::Exited, "scan={scan}");
        assert_eq!(result.exit_code(), 0);
        assert!(started.elapsed() >= Duration::from_secs(3));
        assert_no_leak(&m);
    });
}

#[test]
fn excluded_writes_do_not_keep_a_child_alive() {
    let m = Marker::new("files-excluded");
    let tmp = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(500);
    let config = MonitorConfig::builder().idle_timeout(idle).build().unwrap();
    let started = Instant::now();
    fs::create_dir(tmp.path().join(".agent")).unwrap(); // its creation would count
    let session = Session::spawn(
        silent_writer(tmp.path(), "run.log", "0.1", 1000, &m),
        config,
    )
    .unwrap();
    let result = session.wait();
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{:?}", result.outcome);
    };
    let files = report.get(ActivitySource::Files).expect("files enabled");
    assert_eq!(files.events, 0, "{report}");
    assert!(files.idle >= idle);
    assert!(files.available);
    assert!(started.elapsed() >= idle);
    assert!(started.elapsed() < PATIENCE, "ended in time");
    assert_no_leak(&m);
}

#[test]
fn the_report_says_how_long_files_were_idle_and_how_many_events() {
    let m = Marker::new("files-report");
    let tmp = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(500);
    let config = MonitorConfig::builder().idle_timeout(idle).build().unwrap();
    // Three writes, then silence.
    fs::create_dir(tmp.path().join(".agent")).unwrap(); // watched from the start
    let mut c = m.sh("for i in 1 2 3; do echo $i > .agent/plan.md; done; exec sleep 1000");
    c.current_dir(tmp.path());
    let result = Session::spawn(c, config).unwrap().wait();
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{:?}", result.outcome);
    };
    let files = report.get(ActivitySource::Files).unwrap();
    assert!(files.events >= 3, "{report}");
    assert!(files.idle >= idle, "{report}");
    assert!(report.to_string().contains("files "), "{report}");
    assert_no_leak(&m);
}

#[test]
fn the_file_signal_can_be_turned_off() {
    let m = Marker::new("files-off");
    let tmp = tempfile::tempdir().unwrap();
    let idle = Duration::from_millis(500);
    let config = MonitorConfig::builder()
        .idle_timeout(idle)
        .watch_files(false)
        .build()
        .unwrap();
    let session = Session::spawn(
        silent_writer(tmp.path(), "plan.md", "0.1", 1000, &m),
        config,
    )
    .unwrap();
    let result = session.wait();
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("{:?}", result.outcome);
    };
    assert!(report.get(ActivitySource::Files).is_none());
    assert_no_leak(&m);
}

#[test]
fn invalid_globs_are_a_config_error_at_spawn() {
    let config = MonitorConfig::builder().files(FileWatchConfig::builder().include("[unclosed"));
    let err = Session::spawn(Command::new("true"), config).unwrap_err();
    assert_eq!(err.io_error_kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("files.include"), "{err}");
}

/// With an arming delay the session's monitor arms the watches itself when the delay is over
/// (no tracker thread runs before): a write made well after the arming counts. On a frozen
/// test clock, so that no stale decision (which arms too) can be what armed them: the delay is
/// real time.
#[test]
fn a_delayed_arming_in_a_session_watches_what_comes_after_it() {
    let m = Marker::new("files-late-arming");
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join(".agent")).unwrap();
    let ready = tmp.path().join("armed");
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(600))
        .watch_output(false)
        .files(FileWatchConfig::builder().arm_delay(Duration::from_millis(100)))
        .build()
        .unwrap();
    // The write waits for the test's word, given once the arming is long past.
    let mut c = m.sh(&format!(
        "while [ ! -e '{ready}' ]; do sleep 0.01; done; echo x > .agent/late.md; \
         exec sleep 100000",
        ready = ready.display()
    ));
    c.current_dir(tmp.path());
    let session = Session::builder(c)
        .config(config)
        .clock(clock.clone())
        .spawn()
        .unwrap();
    let mut events = session.events();
    std::thread::sleep(Duration::from_millis(600)); // the 100 ms arming, generously past
    fs::write(&ready, b"").unwrap(); // outside the watched folder: does not count
    let deadline = Instant::now() + PATIENCE;
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        seen = matches!(
            events.recv_timeout(Duration::from_millis(100)),
            Some(quietus::Event::Activity {
                source: ActivitySource::Files
            })
        );
    }
    session.terminate();
    let result = session.wait();
    assert!(seen, "the write after the arming did not count: {result:?}");
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert_no_leak(&m);
}
