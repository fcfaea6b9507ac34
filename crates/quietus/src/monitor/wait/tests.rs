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
