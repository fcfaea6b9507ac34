//! The monitor's wait, driven through whole sessions: a session is above the monitor, so
//! these tests live in a file of their own, no part of the shipped code.

use std::time::Duration;

use super::WAITERS;
use crate::{
    clock::MockClock, config::MonitorConfig, outcome::Outcome, program::Program, session::Session,
};

use crate::clock::eventually;

/// Under a mock clock the monitor sleeps where production does: the stderr reader starts
/// from the monitor's `poll` once the program writes there (late, after a handshake on
/// stdout), and the leader's exit is seen through its pidfd, with no waiter thread. A
/// defect in either (a readable stderr pipe not starting its reader, the pidfd not
/// watched) leaves this run without its stderr or without its end; before, a mock clock
/// started both readers at once and waited with a thread, and never ran that code.
#[test]
fn a_mock_clock_session_runs_the_production_wait() {
    for shell in ["bash", "python3"] {
        let args: Vec<&str> = match shell {
            "bash" => vec!["-c", "echo ready; read -r _; echo late >&2; exit 3"],
            _ => vec![
                "-c",
                "import sys; print('ready', flush=True); sys.stdin.readline(); \
                 sys.stderr.write('late\\n'); sys.stderr.flush(); sys.exit(3)",
            ],
        };
        let clock = MockClock::new();
        let config = MonitorConfig::builder()
            .watch_files(false)
            .idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let waiters = WAITERS.with(|n| n.get());
        let session = Session::builder(Program::new(shell).args(args))
            .config(config)
            .clock(clock.clone())
            .stdin(crate::program::Stdin::Piped)
            .spawn()
            .expect("the shell starts");
        assert_eq!(WAITERS.with(|n| n.get()), waiters, "no waiter thread");
        let out = || session.output().stdout.map(|s| s.render_lossy());
        assert!(eventually(|| out().is_some_and(|o| o.contains("ready"))));
        let id = session.id();
        let err_reader = format!("quietus-err-{id}");
        let started = || crate::monitor::reader::reader_threads().contains(&err_reader);
        assert!(!started(), "{shell}: no stderr reader before a write there");
        session.write_stdin(b"go\n").expect("stdin open");
        // The mock clock never moves: only the pipe and the pidfd can wake the monitor.
        assert!(
            eventually(|| session.wait_timeout(Duration::ZERO).is_some()),
            "{shell}: the exit was seen"
        );
        let result = session.wait();
        assert_eq!(result.outcome, Outcome::Exited, "{shell}");
        assert_eq!(result.exit_code(), 3, "{shell}");
        assert!(result.output_complete, "{shell}");
        assert!(
            started(),
            "{shell}: the stderr reader started from the poll"
        );
        let err = session.output().stderr.expect("captured").render_lossy();
        assert_eq!(err, "late\n", "{shell}");
    }
}

/// A deadline on a mock clock wakes the same `poll` through the relay of its timers: the
/// idle timeout ends a silent program once the clock passes it, not before, and one timer
/// is armed for it however long the program sleeps.
#[test]
fn a_mock_clock_deadline_wakes_the_poll() {
    let clock = MockClock::new();
    let config = MonitorConfig::builder()
        .watch_files(false)
        .watch_children(false)
        .idle_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    let session = Session::builder(Program::new("sleep").args(["60"]))
        .config(config)
        .clock(clock.clone())
        .spawn()
        .expect("sleep starts");
    assert!(clock.wait_for_timers(1, Duration::from_secs(20)));
    clock.advance(Duration::from_secs(3599));
    assert!(clock.wait_for_timers(1, Duration::from_secs(20)));
    let armed = clock.timers_created();
    std::thread::sleep(Duration::from_millis(200));
    assert!(session.try_wait().is_none(), "{:?}", session.try_wait());
    assert_eq!(
        clock.timers_created(),
        armed,
        "no timer while the clock stands"
    );
    clock.advance(Duration::from_secs(1));
    let result = session.wait();
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        result.outcome
    );
}

/// The monitor's wake-ups as a session starts: no waiter thread, a reader only for a pipe
/// with something to read (tested from the wait, whose counters they read).
mod wakeup {
    use std::time::Duration;

    use super::super::WAITERS;
    use crate::{
        clock::MockClock, config::MonitorConfig, outcome::Outcome, program::Program,
        session::Session,
    };

    /// Starts `sh -c script` (a grandchild keeps the output pipes open after the leader's
    /// exit) and waits; returns the outcome and how many waiter threads the start made.
    fn run(script: &str, mock: bool) -> (Outcome, u32, Duration) {
        let before = WAITERS.with(|n| n.get());
        let config = MonitorConfig::builder()
            .watch_files(false)
            .idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let mut builder = Session::builder(Program::new("sh").args(["-c", script])).config(config);
        if mock {
            builder = builder.clock(MockClock::new());
        }
        let session = builder.spawn().expect("sh starts");
        let waiters = WAITERS.with(|n| n.get()) - before;
        let started = std::time::Instant::now();
        let result = session.wait();
        (result.outcome, waiters, started.elapsed())
    }

    #[test]
    fn on_the_real_clock_the_leaders_exit_wakes_the_monitor_without_a_waiter_thread() {
        // The leader exits while a grandchild holds its pipes for 30 s: only the exit (its
        // pidfd) can tell the monitor, which then ends the grandchild as a leftover.
        let script = "sleep 30 & echo started";
        let (outcome, waiters, took) = run(script, false);
        assert_eq!(outcome, Outcome::Exited);
        assert_eq!(waiters, 0, "no waiter thread on the real clock");
        assert!(
            took < Duration::from_secs(20),
            "the exit was seen: {took:?}"
        );
        // A test clock runs the same wait: the pidfd, no waiter either.
        let (outcome, waiters, _) = run(script, true);
        assert_eq!(outcome, Outcome::Exited);
        assert_eq!(waiters, 0);
    }

    #[test]
    fn the_stderr_reader_thread_starts_only_if_the_program_writes_there() {
        let config = MonitorConfig::builder().watch_files(false).build().unwrap();
        let script = "sleep 0.2; echo out; sleep 0.2";
        let session = Session::builder(Program::new("sh").args(["-c", script]))
            .config(config.clone())
            .spawn()
            .expect("sh starts");
        let result = session.wait();
        assert_eq!(result.outcome, Outcome::Exited);
        assert!(
            result.output_complete,
            "both streams were read to their end"
        );
        let out = session.output().stdout.expect("captured").render_lossy();
        assert_eq!(out, "out\n");
        let id = session.id();
        let started = super::super::super::reader::READER_THREADS.lock().clone();
        assert!(
            started.contains(&format!("quietus-out-{id}")),
            "{started:?}"
        );
        assert!(
            !started.contains(&format!("quietus-err-{id}")),
            "{started:?}"
        );
        // Written to: started, and everything read.
        let script = "sleep 0.2; echo err >&2; sleep 0.2";
        let session = Session::builder(Program::new("sh").args(["-c", script]))
            .config(config.clone())
            .spawn()
            .expect("sh starts");
        let result = session.wait();
        assert!(result.output_complete);
        let err = session.output().stderr.expect("captured").render_lossy();
        assert_eq!(err, "err\n");
        let id = session.id();
        let started = super::super::super::reader::READER_THREADS.lock().clone();
        assert!(
            started.contains(&format!("quietus-err-{id}")),
            "{started:?}"
        );
        // A test clock starts them the same way: only once a pipe has something to read (a
        // program that writes nothing is read to its end on the monitor's thread).
        let session = Session::builder(Program::new("true"))
            .config(config)
            .clock(MockClock::new())
            .spawn()
            .expect("true starts");
        assert_eq!(session.wait().outcome, Outcome::Exited);
        let id = session.id();
        let started = super::super::super::reader::READER_THREADS.lock().clone();
        assert!(
            !started.contains(&format!("quietus-out-{id}")),
            "{started:?}"
        );
        assert!(
            !started.contains(&format!("quietus-err-{id}")),
            "{started:?}"
        );
    }
}

/// A session's delayed file arming (the survey of its roots, the look at what changed since
/// the start) runs on the files source's own thread: a walk of a huge tree under I/O load —
/// here an arming held by the test for as long as it likes — never holds the monitor, whose
/// deadlines come on time, on the session's clock.
mod files_arming {
    use std::time::Duration;

    use crate::activity::ActivitySource;
    use crate::clock::{MockClock, eventually};
    use crate::config::{FileWatchConfig, MonitorConfig};
    use crate::outcome::Outcome;
    use crate::program::Program;
    use crate::session::Session;
    use crate::sources::files::hold_arming;

    /// Real time the test waits for the arming to begin (`eventually`'s bound for the rest).
    const BOUND: Duration = Duration::from_secs(20);

    /// `sleep 60` under a mock clock, its files source watching `root` (armed 50 ms after the
    /// start, real time), the children source off.
    fn session(root: &std::path::Path, idle: u64, hard: Option<u64>) -> (MockClock, Session) {
        let clock = MockClock::new();
        let config = MonitorConfig::builder()
            .watch_children(false)
            .idle_timeout(Duration::from_secs(idle))
            .hard_timeout(hard.map(Duration::from_secs))
            .files(
                FileWatchConfig::builder()
                    .root(root)
                    .arm_delay(Duration::from_millis(50)),
            )
            .build()
            .unwrap();
        let session = Session::builder(Program::new("sleep").args(["60"]))
            .config(config)
            .clock(clock.clone())
            .spawn()
            .expect("sleep starts");
        (clock, session)
    }

    /// The hard deadline ends the run while the arming is held (before, the monitor ran the
    /// arming itself and waited with it: no result until the walk ended).
    #[test]
    fn a_held_arming_never_holds_the_hard_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".agent");
        std::fs::create_dir(&root).unwrap();
        let held = hold_arming(&root);
        let (clock, session) = session(&root, 3600, Some(5));
        let thread = held.came(BOUND).expect("the arming began");
        clock.advance(Duration::from_secs(6));
        // Real time (a wait on the session's clock would never end: it stands).
        let ended = eventually(|| session.try_wait().is_some());
        drop(held); // the arming goes on, then the tracker is let go of
        assert!(ended, "no result while the arming was held");
        let result = session.wait();
        assert_eq!(
            result.outcome,
            Outcome::HardTimeout {
                after: Duration::from_secs(5)
            }
        );
        assert_eq!(
            thread, "quietus-files",
            "the arming ran on the files thread"
        );
    }

    /// At the idle deadline the look at what changed before the arming is still under way: the
    /// decision waits for it (the monitor's loop going on meanwhile), and what it finds counts.
    #[test]
    fn at_the_idle_deadline_a_held_arming_is_waited_for_and_what_it_finds_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".agent");
        std::fs::create_dir(&root).unwrap();
        let held = hold_arming(&root);
        let (clock, session) = session(&root, 10, None);
        held.came(BOUND).expect("the arming began");
        // Written after the start (50 ms of real time ago at least), before the look.
        std::fs::write(root.join("plan.md"), "written before the arming").unwrap();
        clock.advance(Duration::from_secs(11));
        assert_eq!(
            session.idle_left(),
            Some(Duration::ZERO),
            "idle deadline passed"
        );
        // The stale decision was asked and put off three times (the walk still held).
        assert!(
            eventually(|| held.asked() >= 3),
            "no stale decision asked the files source"
        );
        assert!(
            session.try_wait().is_none(),
            "ended at the idle deadline before the look at the files was done"
        );
        drop(held);
        // The write counts at the arming, stamped now (11 s): quiet for 10 s more.
        assert!(
            eventually(|| session.idle_left() == Some(Duration::from_secs(10))),
            "the write before the arming did not count: {:?}",
            session.idle_left()
        );
        clock.advance(Duration::from_secs(10));
        assert!(
            eventually(|| session.try_wait().is_some()),
            "the idle deadline after it"
        );
        let result = session.wait();
        let Outcome::IdleTimeout(report) = &result.outcome else {
            panic!("{:?}", result.outcome);
        };
        let files = report.get(ActivitySource::Files).expect("files on");
        assert_eq!(files.events, 1, "{report:?}");
        assert_eq!(files.idle, Duration::from_secs(10), "{report:?}");
    }
}
