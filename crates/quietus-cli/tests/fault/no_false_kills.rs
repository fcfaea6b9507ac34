//! Fault scenarios, "no false kills": children that keep working through one signal only are
//! never ended early, across several runs (3 in CI, `QUIETUS_STRESS=N` for more; the runs go
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

use crate::support as common;
use crate::support::fault as fault_support;
use quietus::config::MonitorConfigBuilder;

use std::time::Duration;

use common::{ms, wait_generously};
use fault_support::{Scenario, repeats};
use quietus::{
    ActivitySource, FileWatchConfig, KillLadder, MonitorConfig, MonitorResult, Outcome, Signal,
};

const IDLE: Duration = Duration::from_millis(1000);
/// Signs of life: every half idle timeout, seven times (3.5 idle timeouts in all).
const BEATS: u32 = 7;

fn config(stat_scan: bool) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(IDLE)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
        .files(FileWatchConfig::builder().force_stat_scan(stat_scan))
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
                        events(&result, carrier.clone()) >= u64::from(BEATS) - 2,
                        "{carrier} carried the run: {result:#?}"
                    );
                    for other in [
                        ActivitySource::Output,
                        ActivitySource::Files,
                        ActivitySource::Keepalive,
                    ] {
                        if other != carrier {
                            assert_eq!(events(&result, other.clone()), 0, "{other}: {result:#?}");
                        }
                    }
                    if carrier != ActivitySource::Children {
                        assert_eq!(events(&result, ActivitySource::Children), 0, "{result:#?}");
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

/// The folder made by the program itself: a `mkdir` child is a descendant, and one that reads
/// a page from storage (a cold cache on a loaded machine) is rightly the children source's
/// activity, which this scenario must not have.
fn files_script() -> String {
    format!(
        "exec perl -MTime::HiRes=sleep -e 'mkdir q(.agent) or die; for my $i (1..{BEATS}) {{ \
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
    never_killed(
        "nfk_files_scan",
        &files_script(),
        true,
        ActivitySource::Files,
    );
}

/// Perl that burns `cpu` seconds of its own CPU time (not wall time: under load the burn takes
/// longer, the CPU it adds up to is the same).
fn burn(cpu: f64) -> String {
    format!(
        "my $b = clock_gettime(CLOCK_PROCESS_CPUTIME_ID) + {cpu}; \
         1 while clock_gettime(CLOCK_PROCESS_CPUTIME_ID) < $b;"
    )
}

/// A grandchild computing flat out (a compiler), the child itself waiting in silence.
#[test]
fn only_a_cpu_busy_grandchild_never_killed() {
    never_killed(
        "nfk_cpu",
        &format!(
            "perl -MTime::HiRes=time -e 'my $end = time + {secs}; 1 while time < $end' & wait",
            secs = half_idle_secs() * f64::from(BEATS)
        ),
        false,
        ActivitySource::Children,
    );
}

/// A grandchild working steadily at 8 % of one core (8 ms of CPU in every 100 ms): above the
/// default threshold of 5 %, so it is working.
#[test]
fn a_grandchild_steadily_at_eight_percent_of_a_core_never_killed() {
    never_killed(
        "nfk_cpu_8pct",
        &format!(
            "perl -MTime::HiRes=time,sleep,clock_gettime,CLOCK_PROCESS_CPUTIME_ID -e '\
               my $end = time + {secs}; my $slot = time; \
               while (time < $end) {{ {burn} $slot += 0.1; my $rest = $slot - time; \
                                     sleep $rest if $rest > 0 }}' & wait",
            secs = half_idle_secs() * f64::from(BEATS),
            burn = burn(0.008)
        ),
        false,
        ActivitySource::Children,
    );
}

/// A build-like child: a stream of short-lived busy processes (60 ms of CPU each, so each
/// lives about one check interval or less), started and reaped one after the other by the
/// child itself. Their CPU mostly shows as the child's reaped-children time.
#[test]
fn only_short_lived_busy_processes_never_killed() {
    never_killed(
        "nfk_short_lived",
        &format!(
            "end=$(( $(date +%s%N) / 1000000 + {ms} )); \
             while [ $(( $(date +%s%N) / 1000000 )) -lt $end ]; do \
               perl -MTime::HiRes=clock_gettime,CLOCK_PROCESS_CPUTIME_ID -e '{burn}'; \
               sleep 0.02; done",
            ms = (IDLE * BEATS / 2).as_millis(),
            burn = burn(0.06)
        ),
        false,
        ActivitySource::Children,
    );
}

/// Sessions side by side: three silent trees (with a background job and a setsid escapee each)
/// are ended at their idle timeout while three working children, started at the same time,
/// finish untouched. One session's ladder never reaches another session's processes.
#[test]
fn a_neighbours_ladder_never_hits_a_working_session() {
    for _ in 0..repeats(1) {
        let idle = ms(500);
        let silent: Vec<(Scenario, quietus::Session)> = (0..3)
            .map(|_| {
                let s = Scenario::new("nfk_neighbour_silent");
                let session = s.spawn(
                    "sleep 1000 & setsid sleep 1000 & say ready; wait",
                    MonitorConfig::builder()
                        .idle_timeout(idle)
                        .kill_ladder(KillLadder::polite(Signal::TERM, ms(300)))
                        .build()
                        .unwrap(),
                );
                (s, session)
            })
            .collect();
        let working: Vec<(Scenario, quietus::Session)> = (0..3)
            .map(|_| {
                let s = Scenario::new("nfk_neighbour_working");
                let session = s.spawn(
                    "i=0; while [ $i -lt 10 ]; do warn beat-$i; sleep 0.2; i=$((i+1)); done",
                    MonitorConfig::builder()
                        .idle_timeout(Duration::from_secs(5))
                        .build()
                        .unwrap(),
                );
                (s, session)
            })
            .collect();
        for (s, session) in &silent {
            let result = wait_generously(session);
            assert!(
                matches!(result.outcome, Outcome::IdleTimeout(_)),
                "{result:#?}"
            );
            s.assert_no_leak();
            s.assert_accounted();
        }
        for (s, session) in &working {
            let result = wait_generously(session);
            assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
            assert_eq!(result.exit_code(), 0, "untouched: {result:#?}");
            assert!(result.signals_sent.is_empty());
            s.assert_no_leak();
            s.assert_accounted();
        }
    }
}
