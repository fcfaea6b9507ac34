//! Output capture, log spill and the event stream, with real children.

use crate::support as common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use common::{Marker, SharedBuf, assert_no_leak, ms, wait_generously};
use quietus::{CaptureConfig, Event, EventConfig, MonitorConfig, Outcome, Session, Signal, Stream};
use sha2::{Digest, Sha256};

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn capture_in(dir: &std::path::Path) -> CaptureConfig {
    CaptureConfig::builder().log_dir(dir).build().unwrap()
}

#[test]
fn tens_of_mib_of_random_binary_output_arrive_in_the_log_byte_for_byte() {
    let m = Marker::new("spill-random");
    let logs = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("source.bin");
    let script = format!("head -c 20000000 /dev/urandom | tee {}", source.display());
    let session = Session::builder(m.sh(&script))
        .config(
            MonitorConfig::builder()
                .capture(capture_in(logs.path()))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    assert_eq!(result.outcome, Outcome::Exited);
    assert_eq!(result.exit_code(), 0);
    let written = fs::read(&source).unwrap();
    assert_eq!(written.len(), 20_000_000);
    assert_eq!(result.logs.len(), 1, "{:?}", result.logs);
    let log = &result.logs[0];
    assert_eq!(log.stream, Stream::Stdout);
    assert!(!log.incomplete);
    assert_eq!(log.bytes, written.len() as u64);
    let logged = fs::read(&log.path).unwrap();
    assert_eq!(sha256_hex(&logged), sha256_hex(&written), "log content");
    assert_eq!(log.sha256, sha256_hex(&written), "reported hash");
    assert!(log.path.starts_with(logs.path()));
    assert_eq!(fs::metadata(&log.path).unwrap().mode() & 0o777, 0o600);
    // In memory only the caps: 512 KiB of head and 512 KiB of tail.
    let snapshot = session.output();
    let out = snapshot.stdout.clone().unwrap();
    assert_eq!(out.total, 20_000_000);
    assert_eq!(out.head, written[..512 * 1024]);
    assert_eq!(out.tail, written[written.len() - 512 * 1024..]);
    assert_eq!(out.omitted, 20_000_000 - 1024 * 1024);
    assert!(snapshot.truncated());
    assert_no_leak(&m);
}

#[test]
fn short_output_is_not_spilled_and_the_log_folder_is_private() {
    let m = Marker::new("no-spill");
    let base = tempfile::tempdir().unwrap();
    let logs = base.path().join("new/logs");
    let session = Session::builder(m.sh("echo short; echo err >&2"))
        .config(
            MonitorConfig::builder()
                .capture(capture_in(&logs))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    assert!(result.logs.is_empty());
    assert_eq!(fs::read_dir(&logs).unwrap().count(), 0);
    assert_eq!(fs::metadata(&logs).unwrap().mode() & 0o777, 0o700);
    let snapshot = session.output();
    assert_eq!(snapshot.stdout.as_ref().unwrap().render(), b"short\n");
    assert_eq!(snapshot.stderr.as_ref().unwrap().render(), b"err\n");
    assert!(!snapshot.running());
    assert_no_leak(&m);
}

#[test]
fn an_unusable_log_folder_is_an_error_at_spawn_and_nothing_runs() {
    let m = Marker::new("bad-log-dir");
    let base = tempfile::tempdir().unwrap();
    let file = base.path().join("a-file");
    fs::write(&file, "").unwrap();
    let witness = base.path().join("ran");
    let err = Session::builder(m.sh(&format!("touch {}", witness.display())))
        .config(
            MonitorConfig::builder()
                .capture(capture_in(&file.join("logs")))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap_err();
    assert!(err.to_string().contains("log folder"), "{err}");
    assert!(err.to_string().contains("a-file"), "{err}");
    // Told apart from the program's own spawn errors by its type, not its wording.
    let spawn_error = &err;
    assert_eq!(spawn_error.kind(), quietus::error::SpawnErrorKind::LogDir);
    let named = format!("log folder {}", file.join("logs").display());
    assert!(
        spawn_error.inner().to_string().contains(&named),
        "{spawn_error}"
    );
    assert!(!witness.exists(), "the child must not have run");
    assert_no_leak(&m);
}

#[test]
fn combined_mode_keeps_the_order_the_child_wrote() {
    let m = Marker::new("combined");
    let session = Session::builder(m.sh("echo one; echo two >&2; echo three; echo four >&2"))
        .config(
            MonitorConfig::builder()
                .capture(CaptureConfig::builder().combined(true))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0);
    let snapshot = session.output();
    assert!(snapshot.stdout.is_none() && snapshot.stderr.is_none());
    assert_eq!(
        snapshot.combined.unwrap().render_lossy(),
        "one\ntwo\nthree\nfour\n"
    );
    assert_eq!(session.output_bytes(Stream::Combined), 19);
    assert_no_leak(&m);
}

#[test]
fn the_omission_marker_states_the_exact_count() {
    let m = Marker::new("marker");
    let session = Session::builder(m.sh("head -c 10000 /dev/zero | tr '\\0' x"))
        .config(
            MonitorConfig::builder()
                .capture(CaptureConfig::builder().cap_per_stream(100))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap();
    wait_generously(&session);
    let out = session.output().stdout.unwrap();
    assert_eq!(out.omitted, 9900);
    let text = out.render_lossy();
    assert_eq!(
        text,
        format!(
            "{}\n[quietus: 9900 bytes omitted]\n{}",
            "x".repeat(50),
            "x".repeat(50)
        )
    );
    assert_no_leak(&m);
}

/// Checks the lifecycle rules on a complete event list.
fn assert_lifecycle(events: &[Event]) {
    assert!(
        matches!(events.first(), Some(Event::Started { .. })),
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&Event::Closed), "{events:?}");
    let exited = events
        .iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .count();
    assert_eq!(exited, 1, "Exited exactly once");
    let closed = events.iter().filter(|e| **e == Event::Closed).count();
    assert_eq!(closed, 1);
}

#[test]
fn event_order_with_a_reading_consumer() {
    let m = Marker::new("events");
    let session = Session::builder(m.sh("echo hello; echo oops >&2; exit 3"))
        .spawn()
        .unwrap();
    let events: Vec<Event> = session.events().iter().collect();
    assert_lifecycle(&events);
    let started = &events[0];
    assert_eq!(
        *started,
        Event::Started {
            pid: session.pid(),
            pgid: session.pid()
        }
    );
    let out: Vec<u8> = events
        .iter()
        .filter_map(|e| match e {
            Event::Output {
                stream: Stream::Stdout,
                bytes,
                ..
            } => Some(bytes.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(out, b"hello\n");
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Output { stream: Stream::Stderr, bytes, .. } if bytes == b"oops\n"
    )));
    let Some(Event::Exited { outcome, status }) =
        events.iter().find(|e| matches!(e, Event::Exited { .. }))
    else {
        unreachable!()
    };
    assert_eq!(*outcome, Outcome::Exited);
    assert_eq!(status.and_then(|s| s.code()), Some(3));
    assert_no_leak(&m);
}

#[test]
fn a_consumer_that_never_reads_does_not_slow_the_child_and_lifecycle_events_survive() {
    let m = Marker::new("never-reads");
    let logs = tempfile::tempdir().unwrap();
    // Hundreds of separate writes (each read is an Output and an Activity event with no
    // throttle), at the smallest channel capacity.
    let config = MonitorConfig::builder()
        .capture(capture_in(logs.path()))
        .events(EventConfig::builder().throttle(Duration::ZERO).capacity(32))
        .build()
        .unwrap();
    let session = Session::builder(m.sh(
        "i=0; while [ $i -lt 300 ]; do echo line $i; sleep 0.005; i=$((i+1)); done; head -c 100000 /dev/zero",
    ))
        .config(config)
        .spawn()
        .unwrap();
    let events = session.events(); // taken, never read while the child runs
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0);
    assert!(result.events_dropped > 0, "the channel overflowed");
    let mut events = events;
    let all: Vec<Event> = events.iter().collect();
    assert_lifecycle(&all);
    // What got in before the channel filled is the start, in order; nothing after it could.
    let seqs: Vec<u64> = all
        .iter()
        .filter_map(|e| match e {
            Event::Output { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert!(!seqs.is_empty() && seqs.len() < 300, "{seqs:?}");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    // The capture and the log hold everything regardless.
    assert_eq!(session.output().stdout.unwrap().total, result.logs[0].bytes);
    assert_no_leak(&m);
}

#[test]
fn a_lagging_consumer_sees_gaps_flagged() {
    let m = Marker::new("lagging");
    let config = MonitorConfig::builder()
        .events(EventConfig::builder().throttle(Duration::ZERO).capacity(32))
        .build()
        .unwrap();
    let session = Session::builder(
        m.sh("i=0; while [ $i -lt 300 ]; do echo line $i; sleep 0.005; i=$((i+1)); done"),
    )
    .config(config)
    .spawn()
    .unwrap();
    let mut events = session.events();
    // Not reading at all while the child writes its first 150 lines: the channel fills up.
    assert!(common::poll_until(Duration::from_secs(30), || {
        session
            .output()
            .stdout
            .is_some_and(|s| s.render_lossy().contains("line 150\n"))
    }));
    // Then catching up while it writes the rest.
    let mut all = Vec::new();
    while let Some(e) = events.recv_timeout(Duration::from_secs(30)) {
        all.push(e);
        if all.last() == Some(&Event::Closed) {
            break;
        }
    }
    assert_lifecycle(&all);
    let result = session.wait();
    assert!(result.events_dropped > 0);
    let outputs: Vec<(u64, bool)> = all
        .iter()
        .filter_map(|e| match e {
            Event::Output { seq, truncated, .. } => Some((*seq, *truncated)),
            _ => None,
        })
        .collect();
    // Wherever the sequence jumps, events were dropped, and the event after the gap says so.
    let gaps: Vec<&[(u64, bool)]> = outputs
        .windows(2)
        .filter(|w| w[1].0 != w[0].0 + 1)
        .collect();
    assert!(!gaps.is_empty(), "{outputs:?}");
    for gap in gaps {
        assert!(gap[1].1, "the event after a gap is flagged: {gap:?}");
    }
    assert_no_leak(&m);
}

#[test]
fn a_slow_consumer_sees_the_same_order() {
    let m = Marker::new("slow-consumer");
    let session = Session::builder(m.sh("for i in 1 2 3 4 5; do echo $i; done"))
        .config(
            MonitorConfig::builder()
                .events(EventConfig::builder().throttle(Duration::ZERO))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let mut events = session.events();
    let mut all = Vec::new();
    while let Some(e) = events.recv_timeout(Duration::from_secs(30)) {
        std::thread::sleep(ms(20)); // a slow consumer
        all.push(e);
        if all.last() == Some(&Event::Closed) {
            break;
        }
    }
    assert_lifecycle(&all);
    let text: Vec<u8> = all
        .iter()
        .filter_map(|e| match e {
            Event::Output { bytes, .. } => Some(bytes.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(text, b"1\n2\n3\n4\n5\n");
    assert_no_leak(&m);
}

#[test]
fn a_consumer_that_drops_the_receiver_changes_nothing() {
    let m = Marker::new("drops-receiver");
    let session = Session::builder(m.sh("echo a; echo b")).spawn().unwrap();
    drop(session.events());
    let result = wait_generously(&session);
    assert_eq!(result.exit_code(), 0);
    assert_eq!(session.output().stdout.unwrap().render(), b"a\nb\n");
    assert_no_leak(&m);
}

#[test]
fn idle_warning_then_the_ladder_signals_in_order() {
    let m = Marker::new("idle-warning");
    let out = SharedBuf::new();
    let idle = ms(600);
    let session = Session::builder(m.sh("echo ready; exec sleep 1000"))
        .config(
            MonitorConfig::builder()
                .idle_timeout(idle)
                .watch_children(false)
                .watch_files(false)
                .build()
                .unwrap(),
        )
        .stdout(out.sink())
        .spawn()
        .unwrap();
    let mut events = session.events();
    let all: Vec<Event> = events.iter().collect();
    assert_lifecycle(&all);
    let position = |f: &dyn Fn(&Event) -> bool| all.iter().position(f);
    let warning = position(&|e| matches!(e, Event::IdleWarning { .. })).expect("a warning");
    let term = position(&|e| {
        matches!(
            e,
            Event::Signal {
                signal: Signal::TERM,
                step: 0
            }
        )
    })
    .expect("TERM sent");
    let exited = position(&|e| matches!(e, Event::Exited { .. })).unwrap();
    assert!(warning < term && term < exited, "{all:?}");
    let Event::IdleWarning { left } = all[warning] else {
        unreachable!()
    };
    // Warned at 80 % of the timeout: at most 20 % left.
    assert!(left <= idle / 5 + ms(1), "{left:?}");
    assert_eq!(
        all.iter()
            .filter(|e| matches!(e, Event::IdleWarning { .. }))
            .count(),
        1
    );
    assert_no_leak(&m);
}

#[test]
fn output_events_are_throttled_and_capped() {
    let m = Marker::new("throttle");
    let started = Instant::now();
    // 40 lines over about 2 s.
    let session = Session::builder(
        m.sh("i=0; while [ $i -lt 40 ]; do echo line $i; sleep 0.05; i=$((i+1)); done"),
    )
    .config(
        MonitorConfig::builder()
            .events(EventConfig::builder().throttle(ms(300)).chunk_cap(4096))
            .build()
            .unwrap(),
    )
    .spawn()
    .unwrap();
    let all: Vec<Event> = session.events().iter().collect();
    let elapsed = started.elapsed();
    let outputs: Vec<&Event> = all
        .iter()
        .filter(|e| matches!(e, Event::Output { .. }))
        .collect();
    // At most one per 300 ms (plus the first and the final flush).
    let bound = (elapsed.as_millis() / 300) as usize + 2;
    assert!(outputs.len() <= bound, "{} events > {bound}", outputs.len());
    assert!(outputs.len() >= 2, "coalesced, not suppressed");
    let text: Vec<u8> = outputs
        .iter()
        .filter_map(|e| match e {
            Event::Output { bytes, .. } => Some(bytes.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let expected: String = (0..40).map(|i| format!("line {i}\n")).collect();
    assert_eq!(String::from_utf8(text).unwrap(), expected, "nothing lost");
    // Sequence numbers count up without gaps (nothing was dropped).
    for (i, e) in outputs.iter().enumerate() {
        let Event::Output { seq, .. } = e else {
            unreachable!()
        };
        assert_eq!(*seq, i as u64);
    }
    assert_no_leak(&m);
}

#[test]
fn utf8_boundaries_keep_every_event_valid_text() {
    let m = Marker::new("utf8");
    let session = Session::builder(
        m.sh("i=0; while [ $i -lt 200 ]; do printf 'héllo wörld € 😀 '; i=$((i+1)); done"),
    )
    .config(
        MonitorConfig::builder()
            .events(
                EventConfig::builder()
                    .throttle(Duration::ZERO)
                    .chunk_cap(7)
                    .utf8_boundaries(true),
            )
            .build()
            .unwrap(),
    )
    .spawn()
    .unwrap();
    let all: Vec<Event> = session.events().iter().collect();
    let mut seen = 0;
    for e in &all {
        if let Event::Output { bytes, .. } = e {
            assert!(std::str::from_utf8(bytes).is_ok(), "{bytes:?}");
            assert!(bytes.len() <= 7);
            seen += 1;
        }
    }
    assert!(seen > 0);
    assert_no_leak(&m);
}

/// A log folder the caller named that cannot be made (here: under a dangling symlink, where
/// `mkdir` says `NotFound`) fails the spawn with a kind of its own, never `NotFound`, the kind
/// of "program not found" (issue 13).
#[test]
fn a_named_log_folder_that_cannot_be_made_is_not_mistaken_for_a_missing_program() {
    let m = Marker::new("log-dir-kind");
    let base = tempfile::tempdir().unwrap();
    let dangling = base.path().join("dangling");
    std::os::unix::fs::symlink(base.path().join("nowhere"), &dangling).unwrap();
    let witness = base.path().join("ran");
    let err = Session::builder(m.sh(&format!("touch {}", witness.display())))
        .config(
            MonitorConfig::builder()
                .capture(capture_in(&dangling.join("logs")))
                .build()
                .unwrap(),
        )
        .spawn()
        .unwrap_err();
    assert_ne!(err.io_error_kind(), std::io::ErrorKind::NotFound, "{err}");
    assert_eq!(err.kind(), quietus::error::SpawnErrorKind::LogDir, "{err}");
    assert!(err.to_string().contains("log folder"), "{err}");
    assert!(!witness.exists(), "the child must not have run");
    assert_no_leak(&m);
}
