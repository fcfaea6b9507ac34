//! Completion: a result line, a status file or a callback says the work is done; a child that
//! then hangs is ended after the linger as `Completed` (exit code 0), one that exits by itself
//! keeps its own code.

use crate::support as common;

use std::time::Duration;

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{CompletionConfig, Event, MockClock, MonitorConfig, Outcome, Session, Stream};

const RESULT: &str = r#"^\{"type":"result""#;

#[test]
fn a_result_line_then_a_hang_ends_completed_with_exit_0_within_the_linger() {
    let m = Marker::new("done-result");
    let buf = SharedBuf::new();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(120))
        .completion(CompletionConfig::builder().output(RESULT).linger(ms(1500)))
        .build()
        .unwrap();
    // The result line arrives in two writes, with a pause between them.
    let script = r#"echo '{"type":"assistant","text":"working"}'
printf '{"type":"res'; sleep 0.3; echo 'ult","subtype":"success"}'
exec sleep 100000"#;
    let session = Session::builder(m.sh(script))
        .config(config)
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    let mut events = session.events();
    let result = wait_generously(&session);
    let Outcome::Completed(seen) = &result.outcome else {
        panic!("expected completed, got {:?}", result.outcome);
    };
    assert_eq!(seen.name(), "output");
    assert_eq!(seen.stream(), Some(Stream::Stdout));
    assert_eq!(seen.matched(), r#"{"type":"result","subtype":"success"}"#);
    assert_eq!(result.completion.as_ref(), Some(seen));
    assert_eq!(result.exit_code(), 0, "completed work is a success");
    assert_eq!(
        result.signal().map(quietus::Signal::number),
        Some(15),
        "ended by the ladder"
    );
    // Ended after the linger, long before the idle timeout.
    assert!(result.runtime >= seen.after() + ms(1500), "{result:?}");
    assert!(result.runtime < Duration::from_secs(60), "{result:?}");
    let completed: Vec<_> = std::iter::from_fn(|| events.try_recv())
        .filter(|e| matches!(e, Event::Completed { .. }))
        .collect();
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert_no_leak(&m);
}

#[test]
fn a_status_file_then_a_hang_ends_completed() {
    let m = Marker::new("done-file");
    let dir = tempfile::tempdir().unwrap();
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(120))
        .completion(
            CompletionConfig::builder()
                .file(".agent/status.json")
                .linger(ms(500)),
        )
        .build()
        .unwrap();
    let mut command = m.sh(
        "mkdir -p .agent; sleep 0.2; echo '{\"state\":\"done\"}' > .agent/status.json; \
         exec sleep 100000",
    );
    command.current_dir(dir.path());
    let session = Session::spawn(command, config).unwrap();
    let result = wait_generously(&session);
    let Outcome::Completed(seen) = &result.outcome else {
        panic!("expected completed, got {:?}", result.outcome);
    };
    assert_eq!(seen.name(), "file");
    assert_eq!(seen.stream(), None);
    assert!(seen.matched().ends_with(".agent/status.json"), "{seen:?}");
    assert_eq!(result.exit_code(), 0);
    assert!(result.runtime < Duration::from_secs(60), "{result:?}");
    assert_no_leak(&m);
}

#[test]
fn a_stale_status_file_from_before_the_start_does_not_count() {
    let m = Marker::new("done-old-file");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("status.json"), "{\"state\":\"done\"}").unwrap();
    let config = MonitorConfig::builder()
        .idle_timeout(ms(1500))
        .watch_children(false)
        .completion(CompletionConfig::builder().file("status.json"))
        .build()
        .unwrap();
    let mut command = m.sh("exec sleep 100000");
    command.current_dir(dir.path());
    let result = wait_generously(&Session::spawn(command, config).unwrap());
    assert!(
        matches!(result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.completion, None);
    assert_no_leak(&m);
}

#[test]
fn a_child_that_completes_and_exits_by_itself_keeps_its_code() {
    let m = Marker::new("done-exit3");
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(120))
        .completion(
            CompletionConfig::builder()
                .output(RESULT)
                .linger(Duration::from_secs(60)),
        )
        .build()
        .unwrap();
    let script = r#"echo '{"type":"result","subtype":"error"}' >&2; sleep 0.2; exit 3"#;
    let result = wait_generously(&Session::spawn(m.sh(script), config).unwrap());
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 3);
    let seen = result.completion.expect("completion was seen");
    assert_eq!(seen.stream(), Some(Stream::Stderr));
    assert_no_leak(&m);
}

#[test]
fn the_line_callback_tells_completion() {
    let m = Marker::new("done-callback");
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(120))
        .completion(
            CompletionConfig::builder()
                .on_line(|line| line.split_whitespace().last() == Some("ALL-DONE"))
                .linger(ms(300)),
        )
        .build()
        .unwrap();
    let script = "echo 'step 1'; echo 'ALL-DONE not yet'; echo 'it is ALL-DONE'; \
                  exec sleep 100000";
    let result = wait_generously(&Session::spawn(m.sh(script), config).unwrap());
    let Outcome::Completed(seen) = &result.outcome else {
        panic!("expected completed, got {:?}", result.outcome);
    };
    assert_eq!(seen.name(), "callback");
    assert_eq!(seen.matched(), "it is ALL-DONE");
    assert_no_leak(&m);
}

#[test]
fn the_linger_is_measured_on_the_session_clock() {
    let m = Marker::new("done-mock");
    let clock = MockClock::new();
    let buf = SharedBuf::new();
    let config = MonitorConfig::builder()
        .watch_children(false)
        .watch_files(false)
        .completion(
            CompletionConfig::builder()
                .output("^DONE$")
                .linger(Duration::from_secs(10)),
        )
        .build()
        .unwrap();
    let t0 = clock.now(); // the mock clock stands still: the spawn's instant
    let session = Session::builder(m.sh("echo DONE; exec sleep 100000"))
        .config(config)
        .clock(clock.clone())
        .stdout(buf.sink())
        .spawn()
        .unwrap();
    buf.wait_for("DONE");
    // The reader saw the line at mock time 0: the monitor plans the linger's end.
    assert!(clock.wait_for_deadline(t0 + Duration::from_secs(10), Duration::from_secs(30)));
    clock.advance(Duration::from_secs(9));
    assert!(clock.wait_for_deadline(t0 + Duration::from_secs(10), Duration::from_secs(30)));
    assert!(session.try_wait().is_none(), "ended before the linger");
    clock.advance(Duration::from_secs(1));
    let result = wait_generously(&session);
    assert!(
        matches!(result.outcome, Outcome::Completed(_)),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.kill_latency, Some(Duration::ZERO));
    assert_no_leak(&m);
}

#[test]
fn a_bad_pattern_is_a_config_error() {
    let m = Marker::new("done-bad");
    let config = MonitorConfig::builder().completion(CompletionConfig::builder().output("(["));
    let err = Session::spawn(m.sh("true"), config).unwrap_err();
    assert_eq!(err.io_error_kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("completion.output"), "{err}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_result_line_on_a_terminal_is_seen_too() {
    let m = Marker::new("done-pty");
    let config = MonitorConfig::builder()
        .idle_timeout(Duration::from_secs(120))
        .completion(
            CompletionConfig::builder()
                .output("^RESULT done$")
                .linger(ms(300)),
        )
        .build()
        .unwrap();
    let session = Session::builder(m.sh("echo 'RESULT done'; exec sleep 100000"))
        .config(config)
        .pty(24, 80)
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    let Outcome::Completed(seen) = &result.outcome else {
        panic!("expected completed, got {:?}", result.outcome);
    };
    // The terminal ends lines with \r\n: the line is matched without either.
    assert_eq!(seen.stream(), Some(Stream::Terminal));
    assert_eq!(seen.matched(), "RESULT done");
    assert_no_leak(&m);
}
