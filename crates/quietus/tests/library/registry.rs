//! The registry: several live sessions, summaries, control by id, pruning, shutdown.

use crate::support as common;
use quietus::config::MonitorConfigBuilder;

use std::collections::BTreeSet;
use std::thread;
use std::time::Duration;

use common::{
    GENEROUS, HANDSHAKE, Marker, SharedBuf, assert_no_leak, ms, poll_until, wait_generously,
};
use quietus::{
    CaptureConfig, ControlAction, ControlAnswer, KillLadder, MockClock, MonitorConfig, Outcome,
    Registry, Session, SessionBuilder, SessionState, SessionSummary, Signal,
};

/// No file or descendant signal: on a mock clock only output and keepalives move time marks.
fn quiet(idle: Duration) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(idle)
        .watch_files(false)
        .watch_children(false)
        .kill_ladder(KillLadder::polite(Signal::TERM, ms(1000)))
}

/// A builder whose stdout goes to `out` too.
fn builder(
    marker: &Marker,
    script: &str,
    config: impl Into<MonitorConfigBuilder>,
    out: &SharedBuf,
) -> SessionBuilder {
    Session::builder(marker.sh(script))
        .config(config)
        .stdout(out.sink())
}

fn summary(registry: &Registry, id: u32) -> SessionSummary {
    registry
        .list()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("session {id} is listed"))
}

#[allow(clippy::too_many_lines)] // a test or bench scenario: the 80-line rule is for the library and the command
#[test]
fn summaries_of_several_live_sessions_display_as_one_line_each() {
    let m = Marker::new("registry-summaries");
    let logs = tempfile::tempdir().unwrap();
    let clock = MockClock::new();
    // Sessions and registry on the same mock clock: uptimes and idle times are exact.
    let registry = Registry::with_clock(clock.clone());
    let config =
        quiet(Duration::from_secs(260)).capture(CaptureConfig::builder().log_dir(logs.path()));
    let scripts = [
        "echo ready; exec sleep 1000",
        "echo ready >&2; exec sleep 1000",
        "head -c 8186 /dev/zero; echo ready; exec sleep 1000",
    ];
    let mut outs = Vec::new();
    for (i, script) in scripts.iter().enumerate() {
        let out = SharedBuf::new();
        let id = registry
            .spawn(
                builder(&m, script, config.clone(), &out)
                    .stderr(out.sink())
                    .clock(clock.clone()),
            )
            .expect("sh can be spawned");
        assert_eq!(id, i as u32 + 1, "ids count from 1");
        outs.push(out);
    }
    for out in &outs {
        out.wait_for("ready");
    }
    // The sinks see a chunk just before it is counted, and the third stream's log is created
    // by its spill thread: wait until every count is in and the log exists.
    assert!(
        poll_until(HANDSHAKE, || {
            let list = registry.list();
            list.iter().map(|s| s.bytes).collect::<Vec<_>>() == [6, 6, 8192]
                && list[2].log.is_some()
        }),
        "{:?}",
        registry.list()
    );
    clock.advance(Duration::from_millis(47_200));
    let list = registry.list();
    assert_eq!(list.len(), 3);
    let lines: Vec<String> = list.iter().map(ToString::to_string).collect();
    let log = list[2].log.clone().expect("the third session has a log");
    assert!(log.starts_with(logs.path()));
    assert_eq!(
        lines,
        [
            "#01 running uptime=47.2s idle_left=212.8s bytes=6 log=- \
             cmd=sh -c echo ready; exec sleep 1000 sw-te…"
                .to_owned(),
            "#02 running uptime=47.2s idle_left=212.8s bytes=6 log=- \
             cmd=sh -c echo ready >&2; exec sleep 1000 s…"
                .to_owned(),
            format!(
                "#03 running uptime=47.2s idle_left=212.8s bytes=8192 log={} \
                 cmd=sh -c head -c 8186 /dev/zero; echo read…",
                log.display()
            ),
        ]
    );
    assert!(list.iter().all(|s| s.state == SessionState::Running));
    assert_eq!(list[0].command.chars().count(), 40);

    let ended = registry.shutdown_all();
    assert_eq!(
        ended.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    for (_, result) in &ended {
        assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    }
    let after = registry.list();
    assert_eq!(after.len(), 3, "finished sessions stay listed");
    for s in &after {
        assert_eq!(s.state, SessionState::Ended);
        assert_eq!(s.idle_left, None);
        assert!(
            s.to_string()
                .contains(" ended terminated exit_code=143 uptime=47.2s idle_left=- "),
            "{s}"
        );
        assert_eq!(s.exit_code, Some(143));
    }
    assert_no_leak(&m);
}

#[test]
fn keepalive_and_idle_timeout_actions_move_the_watchdog() {
    let m = Marker::new("registry-keepalive");
    let clock = MockClock::new();
    let registry = Registry::with_clock(clock.clone());
    let out = SharedBuf::new();
    let id = registry
        .spawn(
            builder(
                &m,
                "echo ready; exec sleep 1000",
                quiet(Duration::from_secs(60)),
                &out,
            )
            .clock(clock.clone()),
        )
        .unwrap();
    out.wait_for("ready");
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        summary(&registry, id).idle_left,
        Some(Duration::from_secs(30))
    );

    let keepalive = ControlAction::Keepalive;
    assert_eq!(registry.control(id, keepalive), ControlAnswer::Ack);
    assert_eq!(
        summary(&registry, id).idle_left,
        Some(Duration::from_secs(60))
    );

    // Invalid timeouts: rejected with the configuration error's words, nothing changed.
    let zero = Duration::ZERO;
    for action in [ControlAction::SetIdleTimeout(zero)] {
        match registry.control(id, action) {
            ControlAnswer::Rejected(reason) => {
                assert!(
                    matches!(reason, quietus::error::Rejection::InvalidSetting(_)),
                    "{reason:?}"
                );
                let reason = reason.to_string();
                assert!(reason.contains("idle_timeout"), "{reason}");
                assert!(reason.contains("between"), "{reason}");
            }
            other => panic!("{action:?} answered {other:?}"),
        }
    }
    let session = registry.get(id).expect("listed");
    assert_eq!(session.idle_timeout(), Duration::from_secs(60));

    // Keepalive, then a new timeout: counts as activity and replaces the timeout.
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        registry.control(id, ControlAction::Keepalive),
        ControlAnswer::Ack
    );
    let longer = ControlAction::SetIdleTimeout(Duration::from_secs(90));
    assert_eq!(registry.control(id, longer), ControlAnswer::Ack);
    assert!(poll_until(HANDSHAKE, || session.idle_timeout()
        == Duration::from_secs(90)));
    assert_eq!(
        summary(&registry, id).idle_left,
        Some(Duration::from_secs(90))
    );

    // A new timeout alone: not activity.
    clock.advance(Duration::from_secs(20));
    let set = ControlAction::SetIdleTimeout(Duration::from_secs(120));
    assert_eq!(registry.control(id, set), ControlAnswer::Ack);
    assert!(poll_until(HANDSHAKE, || session.idle_timeout()
        == Duration::from_secs(120)));
    assert_eq!(
        summary(&registry, id).idle_left,
        Some(Duration::from_secs(100))
    );

    // ...and in force: stale 120 s after the keepalive.
    assert!(clock.wait_for_timers(1, HANDSHAKE));
    clock.advance(Duration::from_secs(100));
    let result = wait_generously(&session);
    let Outcome::IdleTimeout(report) = &result.outcome else {
        panic!("expected an idle timeout: {result:#?}");
    };
    assert_eq!(report.idle_timeout, Duration::from_secs(120));
    assert_eq!(result.runtime, Duration::from_secs(160));
    assert_no_leak(&m);
}

#[test]
fn interrupt_terminate_and_kill_by_id() {
    let m = Marker::new("registry-signals");
    let registry = Registry::new();
    let config = quiet(Duration::from_secs(60));
    let outs: Vec<SharedBuf> = (0..3).map(|_| SharedBuf::new()).collect();
    let interrupted = registry
        .spawn(builder(
            &m,
            "trap 'echo got-int; exit 3' INT; echo ready; sleep 1000",
            config.clone(),
            &outs[0],
        ))
        .unwrap();
    let terminated = registry
        .spawn(builder(
            &m,
            "echo ready; exec sleep 1000",
            config.clone(),
            &outs[1],
        ))
        .unwrap();
    let killed = registry
        .spawn(builder(&m, "echo ready; exec sleep 1000", config, &outs[2]))
        .unwrap();
    // Every id held, in order, with one look (what serve's room check reads).
    assert_eq!(registry.ids(), [interrupted, terminated, killed]);
    for out in &outs {
        out.wait_for("ready");
    }

    assert_eq!(
        registry.control(interrupted, ControlAction::Interrupt),
        ControlAnswer::Ack
    );
    let result = wait_generously(&registry.get(interrupted).unwrap());
    assert_eq!(result.outcome, Outcome::Exited, "{result:#?}");
    assert_eq!(result.exit_code(), 3, "the trap ran");
    assert!(outs[0].contains("got-int"));
    assert!(
        result.signals_sent.is_empty(),
        "no ladder after an interrupt"
    );

    assert_eq!(
        registry.control(terminated, ControlAction::Terminate),
        ControlAnswer::Ack
    );
    let result = wait_generously(&registry.get(terminated).unwrap());
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(result.signals_sent, [Signal::TERM]);

    assert_eq!(
        registry.control(killed, ControlAction::Kill),
        ControlAnswer::Ack
    );
    let result = wait_generously(&registry.get(killed).unwrap());
    assert_eq!(result.outcome, Outcome::Terminated { forced: true });
    assert_eq!(result.signal().map(quietus::Signal::number), Some(9));

    // Every action on an ended session, and on an id nobody has.
    let actions = [
        ControlAction::Keepalive,
        ControlAction::SetIdleTimeout(Duration::ZERO),
        ControlAction::Interrupt,
        ControlAction::Terminate,
        ControlAction::Kill,
        ControlAction::SetIdleTimeout(Duration::from_secs(5)),
    ];
    for id in [interrupted, terminated, killed] {
        for action in actions {
            assert_eq!(
                registry.control(id, action),
                ControlAnswer::AlreadyEnded,
                "#{id} {action:?}"
            );
        }
    }
    for action in actions {
        assert_eq!(registry.control(99, action), ControlAnswer::NoSuchSession);
    }
    assert!(registry.get(99).is_none());
    assert_no_leak(&m);
}

#[test]
fn during_the_ladder_only_kill_is_taken() {
    let m = Marker::new("registry-grace");
    let clock = MockClock::new();
    let registry = Registry::with_clock(clock.clone());
    let out = SharedBuf::new();
    // Ignores TERM; the grace period (60 s on the mock clock) never runs out on its own.
    let config = quiet(Duration::from_secs(60))
        .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(60)));
    let id = registry
        .spawn(
            builder(
                &m,
                "trap '' TERM; echo ready; while :; do sleep 1; done",
                config,
                &out,
            )
            .clock(clock.clone()),
        )
        .unwrap();
    out.wait_for("ready");
    assert_eq!(
        registry.control(id, ControlAction::Terminate),
        ControlAnswer::Ack
    );
    assert!(poll_until(HANDSHAKE, || summary(&registry, id).state
        == SessionState::Grace));
    let line = summary(&registry, id).to_string();
    assert!(
        line.starts_with("#01 grace uptime=0.0s idle_left=- "),
        "{line}"
    );
    for action in [
        ControlAction::Keepalive,
        ControlAction::Interrupt,
        ControlAction::Terminate,
        ControlAction::SetIdleTimeout(Duration::from_secs(5)),
    ] {
        assert_eq!(
            registry.control(id, action),
            ControlAnswer::AlreadyEnded,
            "{action:?}"
        );
    }
    assert_eq!(
        registry.control(id, ControlAction::Kill),
        ControlAnswer::Ack
    );
    let result = wait_generously(&registry.get(id).unwrap());
    assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert!(result.escalated);
    assert_no_leak(&m);
}

#[test]
fn finished_sessions_are_pruned_after_the_retention_time() {
    let m = Marker::new("registry-retention");
    let clock = MockClock::new();
    let registry = Registry::with_clock(clock.clone());
    let live_out = SharedBuf::new();
    let live = registry
        .spawn(builder(
            &m,
            "echo ready; exec sleep 1000",
            quiet(Duration::from_secs(3600)),
            &live_out,
        ))
        .unwrap();
    live_out.wait_for("ready");
    let done = registry
        .spawn(Session::builder(m.sh("exit 0")).config(quiet(Duration::from_secs(60))))
        .unwrap();
    wait_generously(&registry.get(done).unwrap());
    assert_eq!(registry.list().len(), 2, "seen finished now");

    clock.advance(Duration::from_secs(10 * 60) - ms(1));
    assert_eq!(registry.list().len(), 2, "kept for ten minutes");
    clock.advance(ms(1));
    let ids: Vec<u32> = registry.list().iter().map(|s| s.id).collect();
    assert_eq!(ids, [live], "the finished one is gone, the live one stays");
    assert!(registry.get(done).is_none());
    assert_eq!(
        registry.control(done, ControlAction::Kill),
        ControlAnswer::NoSuchSession
    );

    // A registry with a shorter retention.
    let short = Registry::with_clock(clock.clone()).retention(Duration::from_secs(5));
    let id = short
        .spawn(Session::builder(m.sh("exit 0")).config(quiet(Duration::from_secs(60))))
        .unwrap();
    wait_generously(&short.get(id).unwrap());
    assert!(short.get(id).is_some());
    clock.advance(Duration::from_secs(5));
    assert!(short.list().is_empty());
    // Ids are never reused.
    let next = short
        .spawn(Session::builder(m.sh("exit 0")).config(quiet(Duration::from_secs(60))))
        .unwrap();
    assert_eq!(next, 2);
    wait_generously(&short.get(next).unwrap());

    assert_eq!(registry.shutdown_all().len(), 1);
    assert_no_leak(&m);
}

#[test]
fn beyond_the_count_cap_the_oldest_finished_sessions_go_first() {
    let m = Marker::new("registry-cap");
    let clock = MockClock::new();
    let registry = Registry::with_clock(clock.clone()).max_finished(2);
    let live_out = SharedBuf::new();
    let live = registry
        .spawn(builder(
            &m,
            "echo ready; exec sleep 1000",
            quiet(Duration::from_secs(3600)),
            &live_out,
        ))
        .unwrap();
    live_out.wait_for("ready");
    let mut listed = Vec::new();
    for _ in 0..4 {
        let id = registry
            .spawn(Session::builder(m.sh("exit 0")).config(quiet(Duration::from_secs(60))))
            .unwrap();
        wait_generously(&registry.get(id).unwrap());
        let ids: Vec<u32> = registry.list().iter().map(|s| s.id).collect();
        listed.push(ids);
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(
        listed,
        [
            vec![live, 2],
            vec![live, 2, 3],
            vec![live, 3, 4], // 2 finished first
            vec![live, 4, 5],
        ]
    );
    let ended = registry.shutdown_all();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].0, live);
    assert_eq!(
        registry.list().len(),
        2,
        "the cap holds for the newly finished too"
    );
    assert_no_leak(&m);
}

#[test]
fn sessions_spawned_from_several_threads_are_all_shut_down() {
    let m = Marker::new("registry-shutdown");
    let registry = Registry::new();
    let outs: Vec<SharedBuf> = (0..4).map(|_| SharedBuf::new()).collect();
    let ids: BTreeSet<u32> = thread::scope(|scope| {
        let spawners: Vec<_> = outs
            .iter()
            .map(|out| {
                let registry = &registry;
                let m = &m;
                scope.spawn(move || {
                    // A grandchild in the group too.
                    registry
                        .spawn(builder(
                            m,
                            "sleep 1000 & echo ready; wait",
                            quiet(Duration::from_secs(60)),
                            out,
                        ))
                        .expect("sh can be spawned")
                })
            })
            .collect();
        spawners.into_iter().map(|s| s.join().unwrap()).collect()
    });
    assert_eq!(ids, BTreeSet::from([1, 2, 3, 4]));
    for out in &outs {
        out.wait_for("ready");
    }
    assert_eq!(
        m.pids().len(),
        8,
        "four shells, four sleeps: {:#?}",
        m.pids()
    );
    let started = std::time::Instant::now();
    let ended = registry.shutdown_all();
    assert!(started.elapsed() < GENEROUS);
    assert_eq!(ended.len(), 4);
    for (_, result) in &ended {
        assert_eq!(result.outcome, Outcome::Terminated { forced: false });
    }
    assert!(
        registry
            .list()
            .iter()
            .all(|s| s.state == SessionState::Ended)
    );
    assert!(registry.shutdown_all().is_empty(), "nothing left to end");
    assert_no_leak(&m);
}

#[test]
fn the_registry_lock_is_not_held_while_shutdown_waits() {
    let m = Marker::new("registry-no-lock");
    let clock = MockClock::new();
    let registry = Registry::with_clock(clock.clone());
    let out = SharedBuf::new();
    let config = quiet(Duration::from_secs(60))
        .kill_ladder(KillLadder::polite(Signal::TERM, Duration::from_secs(60)));
    let id = registry
        .spawn(
            builder(
                &m,
                "trap '' TERM; echo ready; while :; do sleep 1; done",
                config,
                &out,
            )
            .clock(clock.clone()),
        )
        .unwrap();
    out.wait_for("ready");
    thread::scope(|scope| {
        let shutdown = scope.spawn(|| registry.shutdown_all());
        // shutdown_all is blocked in the grace period; the registry still answers.
        assert!(poll_until(HANDSHAKE, || summary(&registry, id).state
            == SessionState::Grace));
        assert_eq!(
            registry.control(id, ControlAction::Interrupt),
            ControlAnswer::AlreadyEnded
        );
        assert!(!shutdown.is_finished());
        assert!(clock.wait_for_timers(1, HANDSHAKE));
        clock.advance(Duration::from_secs(60)); // the grace runs out: SIGKILL
        let ended = shutdown.join().unwrap();
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].1.signals_sent, [Signal::TERM, Signal::KILL]);
    });
    assert_no_leak(&m);
}
