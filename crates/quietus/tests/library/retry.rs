//! Retry on known failure signatures, with a fake agent program (a shell script in a temp
//! folder) that fails in the ways real ones do.

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{MARKER_ENV, Marker, assert_no_leak, ms};
use quietus::retry::{RetryPolicy, RetryReason};
use quietus::{CaptureConfig, KillLadder, MonitorConfig, Outcome, Session, SessionBuilder, Signal};

const SIGNATURE: &str = "state db missing rollout path";

/// A fake agent in a temp folder: `sh <dir>/fake-agent.sh MARKER`, with `$WORK` the folder.
struct Fake {
    dir: tempfile::TempDir,
    script: PathBuf,
}

impl Fake {
    fn new(body: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-agent.sh");
        fs::write(&script, body).unwrap();
        Self { dir, script }
    }

    fn work(&self) -> &Path {
        self.dir.path()
    }

    /// The builder for one attempt (run through `sh`: no exec of a file just written).
    fn builder(&self, marker: &Marker, config: impl Into<MonitorConfigBuilder>) -> SessionBuilder {
        let mut command = Command::new("sh");
        command
            .arg(&self.script)
            .arg(marker.as_str())
            .env(MARKER_ENV, marker.as_str())
            .env("WORK", self.work());
        Session::builder(command).config(config.into().watch_files(false))
    }

    /// How many times the fake ran (it appends a line to `$WORK/runs`).
    fn runs(&self) -> usize {
        fs::read_to_string(self.work().join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    }
}

#[test]
fn a_failure_with_the_signature_is_retried_once_and_then_succeeds() {
    let m = Marker::new("retry-then-ok");
    let fake = Fake::new(&format!(
        r#"echo run >> "$WORK/runs"
if [ -e "$WORK/sentinel" ]; then echo "all good"; exit 0; fi
touch "$WORK/sentinel"
echo "thread main: error: {SIGNATURE} /tmp/x (os error 2)" >&2
exit 1
"#
    ));
    let mut numbers = Vec::new();
    let report = RetryPolicy::new(["unrelated failure", SIGNATURE])
        .run(|attempt| {
            numbers.push(attempt);
            fake.builder(&m, MonitorConfig::default())
        })
        .expect("sh can be spawned");
    assert_eq!(numbers, [1, 2]);
    assert_eq!(fake.runs(), 2);
    assert!(report.succeeded(), "{report:#?}");
    assert!(report.retry_spawn_error.is_none());
    let [first, second] = &report.attempts[..] else {
        panic!("two attempts: {report:#?}");
    };
    assert_eq!(first.number, 1);
    assert_eq!(first.result.exit_code(), 1);
    assert_eq!(first.reason, Some(RetryReason::Signature(SIGNATURE.into())));
    assert!(first.retried);
    let first_stderr = first.output.stderr.as_ref().unwrap().render_lossy();
    assert!(
        first_stderr.contains(SIGNATURE),
        "the failed attempt's output is kept"
    );
    assert_eq!(second.number, 2);
    assert_eq!(second.result.exit_code(), 0);
    assert_eq!(second.reason, None);
    assert!(!second.retried);
    assert_eq!(
        second.output.stdout.as_ref().unwrap().render_lossy(),
        "all good\n"
    );
    assert_eq!(report.last().number, 2);
    assert_no_leak(&m);
}

#[test]
fn a_failure_that_persists_is_retried_once_then_reported() {
    let m = Marker::new("retry-always");
    let fake = Fake::new(&format!(
        "echo run >> \"$WORK/runs\"\necho '{SIGNATURE}' >&2\nexit 2\n"
    ));
    let report = RetryPolicy::new([SIGNATURE])
        .run(|_| fake.builder(&m, MonitorConfig::default()))
        .unwrap();
    assert_eq!(fake.runs(), 2, "the first run and one retry");
    assert!(!report.succeeded());
    assert_eq!(report.attempts.len(), 2);
    for attempt in &report.attempts {
        assert_eq!(attempt.result.outcome, Outcome::Exited);
        assert_eq!(attempt.result.exit_code(), 2);
        assert_eq!(
            attempt.reason,
            Some(RetryReason::Signature(SIGNATURE.into()))
        );
    }
    assert!(report.attempts[0].retried);
    assert!(!report.attempts[1].retried, "the retries are used up");
    assert_eq!(report.last().result.exit_code(), 2);

    // A larger count.
    let report = RetryPolicy::new([SIGNATURE])
        .max_retries(2)
        .run(|_| fake.builder(&m, MonitorConfig::default()))
        .unwrap();
    assert_eq!(report.attempts.len(), 3);
    assert_eq!(fake.runs(), 5);
    assert_no_leak(&m);
}

#[test]
fn a_failure_without_the_signature_and_a_success_are_not_retried() {
    let m = Marker::new("retry-other");
    let fake = Fake::new(
        "echo run >> \"$WORK/runs\"\necho 'error: rate limited' >&2\nexit \"${CODE:-1}\"\n",
    );
    let report = RetryPolicy::new([SIGNATURE])
        .run(|_| fake.builder(&m, MonitorConfig::default()))
        .unwrap();
    assert_eq!(report.attempts.len(), 1);
    assert_eq!(report.attempts[0].reason, None);
    assert!(!report.attempts[0].retried);
    assert_eq!(report.last().result.exit_code(), 1);

    // The signature on the stderr of a success is no failure.
    let ok = Fake::new(&format!("echo '{SIGNATURE}' >&2\nexit 0\n"));
    let report = RetryPolicy::new([SIGNATURE])
        .run(|_| ok.builder(&m, MonitorConfig::default()))
        .unwrap();
    assert_eq!(report.attempts.len(), 1);
    assert!(report.succeeded());
    assert_no_leak(&m);
}

#[test]
fn the_signature_is_found_in_the_log_when_memory_kept_only_head_and_tail() {
    let m = Marker::new("retry-log");
    let logs = tempfile::tempdir().unwrap();
    // 5000 bytes, the signature, 5000 bytes: the 1 KiB capture keeps neither end's middle.
    let fake = Fake::new(&format!(
        r#"echo run >> "$WORK/runs"
if [ -e "$WORK/sentinel" ]; then exit 0; fi
touch "$WORK/sentinel"
{{ head -c 5000 /dev/zero | tr '\0' a; echo '{SIGNATURE}'; head -c 5000 /dev/zero | tr '\0' b; }} >&2
exit 1
"#
    ));
    let config = MonitorConfig::builder()
        .capture(
            CaptureConfig::builder()
                .cap_per_stream(1024)
                .log_dir(logs.path()),
        )
        .build()
        .unwrap();
    let report = RetryPolicy::new([SIGNATURE])
        .run(|_| fake.builder(&m, config.clone()))
        .unwrap();
    assert!(report.succeeded(), "{report:#?}");
    let first = &report.attempts[0];
    let captured = first.output.stderr.as_ref().unwrap();
    assert!(captured.truncated());
    assert!(
        !captured.render_lossy().contains(SIGNATURE),
        "not in memory"
    );
    assert_eq!(first.reason, Some(RetryReason::Signature(SIGNATURE.into())));
    let log = &first.result.logs[0];
    assert!(
        fs::read_to_string(&log.path).unwrap().contains(SIGNATURE),
        "the failed attempt's log is kept"
    );
    assert_no_leak(&m);
}

#[test]
fn timeouts_are_retried_only_when_asked() {
    let m = Marker::new("retry-timeout");
    // Says the signature, then stalls.
    let fake = Fake::new(&format!(
        "echo run >> \"$WORK/runs\"\necho '{SIGNATURE}' >&2\nexec sleep 1000\n"
    ));
    // The signature must be out before the idle timeout ends the attempt: RetryPolicy spawns
    // each attempt itself, so no handshake can hold the timeout off, and 300 ms was shorter
    // than a shell's start on a loaded machine. 1.5 s leaves the start 1.2 s more.
    let config = MonitorConfig::builder()
        .idle_timeout(ms(1500))
        .watch_children(false)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
        .build()
        .unwrap();
    let report = RetryPolicy::new([SIGNATURE])
        .run(|_| fake.builder(&m, config.clone()))
        .unwrap();
    assert_eq!(report.attempts.len(), 1, "{report:#?}");
    assert!(matches!(
        report.last().result.outcome,
        Outcome::IdleTimeout(_)
    ));
    assert_eq!(report.last().reason, None);
    assert_eq!(report.last().result.exit_code(), 124);

    let report = RetryPolicy::new([SIGNATURE])
        .retry_timeouts(true)
        .run(|_| fake.builder(&m, config.clone()))
        .unwrap();
    assert_eq!(report.attempts.len(), 2);
    assert_eq!(
        report.attempts[0].reason,
        Some(RetryReason::Signature(SIGNATURE.into()))
    );
    assert!(report.attempts[0].retried);

    // Without a signature: retried as a timeout.
    let report = RetryPolicy::new(["something else"])
        .retry_timeouts(true)
        .run(|_| fake.builder(&m, config.clone()))
        .unwrap();
    assert_eq!(report.attempts.len(), 2);
    assert_eq!(report.attempts[0].reason, Some(RetryReason::Timeout));
    assert!(matches!(
        report.attempts[1].result.outcome,
        Outcome::IdleTimeout(_)
    ));
    assert_eq!(fake.runs(), 5);
    assert_no_leak(&m);
}

#[test]
fn spawn_errors_end_the_run() {
    let missing = || Session::builder(Command::new("/nonexistent/quietus-fake-agent"));
    let error = RetryPolicy::new([SIGNATURE])
        .run(|_| missing())
        .unwrap_err();
    assert_eq!(error.io_error_kind(), std::io::ErrorKind::NotFound);

    // A retry that cannot be spawned: the attempts so far are reported with the error.
    let m = Marker::new("retry-spawn-error");
    let fake = Fake::new(&format!("echo '{SIGNATURE}' >&2\nexit 1\n"));
    let report = RetryPolicy::new([SIGNATURE])
        .run(|attempt| match attempt {
            1 => fake.builder(&m, MonitorConfig::default()),
            _ => missing(),
        })
        .unwrap();
    assert_eq!(report.attempts.len(), 1);
    assert!(report.attempts[0].retried);
    let error = report
        .retry_spawn_error
        .as_ref()
        .expect("the retry's error");
    assert_eq!(error.io_error_kind(), std::io::ErrorKind::NotFound);
    assert!(!report.succeeded());
    assert_no_leak(&m);
}

#[test]
fn completed_work_is_a_success_and_never_retried() {
    let marker = Marker::new("retry-completed");
    let fake = Fake::new("echo 'RESULT ok'; exec sleep 100000\n");
    let config = MonitorConfig::builder()
        .idle_timeout(std::time::Duration::from_secs(120))
        .completion(
            quietus::CompletionConfig::builder()
                .output("^RESULT")
                .linger(ms(200)),
        )
        .build()
        .unwrap();
    let report = RetryPolicy::new([""])
        .retry_timeouts(true)
        .run(|_| fake.builder(&marker, config.clone()))
        .unwrap();
    assert_eq!(report.attempts.len(), 1);
    assert!(matches!(
        report.last().result.outcome,
        Outcome::Completed(_)
    ));
    assert!(report.succeeded());
    assert_no_leak(&marker);
}
