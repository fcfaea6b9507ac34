//! Fault scenarios, "no false kills": children that keep working through one signal only are
//! never ended early, across several runs (3 in CI, `STALLWATCH_STRESS=N` for more; the runs go
//! three at a time, so they also load the machine a little).
//!
//! Each child works for 3.5 idle timeouts, showing a sign of life every half idle timeout
//! through exactly one channel, with every signal enabled as a user would have it, and then
//! exits 0. The report must show that the one channel carried the run and that the others saw
//! nothing.
//!
//! Already covered elsewhere (one run each, other sources not checked): regular stdout / stderr
//! (`activity_keeps_alive.rs`), file writes (`file_signal.rs`), a busy grandchild
//! (`children_signal.rs`).
#![cfg(target_os = "linux")]

mod common;
mod fault_support;

use std::time::Duration;

use common::{ms, wait_generously};
use fault_support::{Scenario, repeats};
use stallwatch::{
    ActivitySource, FileWatchConfig, KillLadder, MonitorConfig, MonitorResult, Outcome, Signal,
};

const IDLE: Duration = Duration::from_millis(1000);
/// Signs of life: every half idle timeout, seven times (3.5 idle timeouts in all).
const BEATS: u32 = 7;

fn config(stat_scan: bool) -> MonitorConfig {
    MonitorConfig::default()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .files(FileWatchConfig::default().force_stat_scan(stat_scan))
}

fn events(result: &MonitorResult, source: ActivitySource) -> u64 {
    result
        .activity
        .iter()
        .find(|s| s.source == source)
        .map_or(0, |s| s.events)
}

/// Runs `script` [`repeats`]`(3)` times, three at a time, and checks every run.
fn never_killed(name: &str, script: &str, stat_scan: bool, carrier: ActivitySource) {
    let runs = repeats(3);
    let mut done = 0;
    while done < runs {
        let batch = (runs - done).min(3);
        std::thread::scope(|scope| {
            for _ in 0..batch {
                scope.spawn(|| {
                    let s = Scenario::new(name);
                    let session = s.spawn(script, config(stat_scan));
                    let result = wait_generously(&session);
                    assert_eq!(
                        result.outcome,
                        Outcome::Exited,
                        "false kill of a child working through {carrier} only: {result:#?}"
                    );
                    assert_eq!(result.exit_code(), 0, "{result:#?}");
                    assert!(result.signals_sent.is_empty(), "{result:#?}");
                    assert!(result.runtime >= IDLE * 3, "{:?}", result.runtime);
                    assert!(
                        events(&result, carrier) >= u64::from(BEATS) - 2,
                        "{carrier} carried the run: {result:#?}"
                    );
                    for other in [
                        ActivitySource::Output,
                        ActivitySource::Files,
                        ActivitySource::Keepalive,
                    ] {
                        if other != carrier {
                            assert_eq!(events(&result, other), 0, "{other}: {result:#?}");
                        }
                    }
                    if carrier != ActivitySource::Children {
                        assert_eq!(
                            events(&result, ActivitySource::Children),
                            0,
                            "{result:#?}"
                        );
                    }
                    s.assert_no_leak();
                    s.assert_accounted();
                });
            }
        });
        done += batch;
    }
}

fn half_idle_secs() -> f64 {
    IDLE.as_secs_f64() / 2.0
}

#[test]
fn only_stderr_never_killed() {
    never_killed(
        "nfk_stderr",
        &format!(
            "exec perl -MTime::HiRes=sleep -e 'for my $i (1..{BEATS}) {{ \
               open(my $l, q(>>), $ENV{{SW_ERR}}) or die; print $l qq(beat $i\\n); close $l; \
               syswrite(STDERR, qq(beat $i\\n)); sleep {half} }}'",
            half = half_idle_secs()
        ),
        false,
        ActivitySource::Output,
    );
}

fn files_script() -> String {
    format!(
        "mkdir .agent; exec perl -MTime::HiRes=sleep -e 'for my $i (1..{BEATS}) {{ \
           open(my $f, q(>), q(.agent/progress.md)) or die; print $f qq(step $i\\n); \
           close $f; sleep {half} }}'",
        half = half_idle_secs()
    )
}

#[test]
fn only_file_writes_never_killed() {
    never_killed("nfk_files", &files_script(), false, ActivitySource::Files);
}

#[test]
fn only_file_writes_never_killed_stat_scan() {
    never_killed("nfk_files_scan", &files_script(), true, ActivitySource::Files);
}

/// A grandchild computing in bursts (30 ms of every 100 ms, a third of a core: a compiler
/// waiting on I/O now and then), the child itself waiting in silence.
#[test]
fn only_a_cpu_busy_grandchild_never_killed() {
    never_killed(
        "nfk_cpu",
        &format!(
            "perl -MTime::HiRes=time,sleep -e 'my $end = time + {secs}; \
               while (time < $end) {{ my $burst = time + 0.03; 1 while time < $burst; \
               sleep 0.07 }}' & wait",
            secs = half_idle_secs() * f64::from(BEATS)
        ),
        false,
        ActivitySource::Children,
    );
}
