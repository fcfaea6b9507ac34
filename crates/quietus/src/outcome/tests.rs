#[test]
fn a_command_line_is_quoted_as_a_shell_reads_it_back() {
    assert_eq!(shell_line(b"sleep\x001000"), "sleep 1000");
    assert_eq!(
        shell_line(b"sh\x00-c\x00sleep 1000; : tag"),
        "sh -c 'sleep 1000; : tag'"
    );
    assert_eq!(shell_line(b"echo\x00\x00it's"), r"echo '' 'it'\''s'");
    assert_eq!(
        shell_line(b"a=b\x00/x/y.z\x00--k=v,w"),
        "a=b /x/y.z --k=v,w"
    );
    assert_eq!(shell_line(b""), "");
}

#[test]
fn names_lists_every_outcome() {
    // A new outcome fails to compile here until it has its name's place, then fails until
    // the name is in NAMES.
    let place = |o: &Outcome| match o {
        Outcome::Exited => 0,
        Outcome::Completed(_) => 1,
        Outcome::IdleTimeout(_) => 2,
        Outcome::HardTimeout { .. } => 3,
        Outcome::Terminated { .. } => 4,
        Outcome::InputWait(_) => 5,
    };
    assert_eq!(Outcome::NAMES.len(), 6);
    assert_eq!(
        Outcome::NAMES[place(&Outcome::Exited)],
        Outcome::Exited.name()
    );
    for (i, name) in Outcome::NAMES.iter().enumerate() {
        assert!(
            Outcome::NAMES[..i].iter().all(|n| n != name),
            "{name} twice"
        );
    }
}

use super::*;

fn result(outcome: Outcome, raw_wait_status: Option<i32>) -> MonitorResult {
    MonitorResult {
        outcome,
        status: raw_wait_status.map(ExitStatus::from_raw),
        pid: Pid::new(42).expect("a pid"),
        signals_sent: vec![],
        escalated: false,
        leftovers_killed: 0,
        leftovers: vec![],
        termination_unproven: false,
        runtime: Duration::ZERO,
        ladder_time: None,
        kill_latency: None,
        activity: vec![],
        logs: vec![],
        events_dropped: 0,
        output_complete: true,
        home: None,
        unwatched: Vec::new(),
        completion: None,
        containment: Containment::Group,
        cgroup: None,
        why_not_cgroup: None,
        supervisor_death: SupervisorDeath::NotNeeded,
        memory_peak: None,
        oom_kills: None,
        network_unavailable: None,
        children_unavailable: None,
        observations: Vec::new(),
        observations_dropped: 0,
    }
}

/// The signal a child died of is a `Signal` (issue 37), a real-time one included.
#[test]
fn the_death_signal_is_a_signal() {
    // A raw wait status of a death by signal n is n (no core dump).
    assert_eq!(
        result(Outcome::Exited, Some(15)).signal(),
        Some(Signal::TERM)
    );
    assert_eq!(
        result(Outcome::Exited, Some(9)).signal(),
        Some(Signal::KILL)
    );
    let realtime = result(Outcome::Exited, Some(34))
        .signal()
        .expect("a signal");
    assert_eq!(realtime.number(), 34);
    assert_eq!(realtime.name(), "34");
    assert_eq!(
        result(Outcome::Exited, Some(3 << 8)).signal(),
        None,
        "exit code 3"
    );
}

#[test]
fn exit_codes_follow_gnu_timeout() {
    assert_eq!(result(Outcome::Exited, Some(3 << 8)).exit_code(), 3);
    assert_eq!(result(Outcome::Exited, Some(9)).exit_code(), 137);
    let stale = Outcome::IdleTimeout(StaleReport {
        idle_timeout: Duration::from_secs(1),
        sources: vec![],
        children: None,
        capped: vec![],
        diagnosis: None,
    });
    let seen = CompletionSeen::Pattern {
        stream: crate::stream::Stream::Stdout,
        line: "done".into(),
        after: Duration::from_secs(1),
    };
    // Ended after completion: 0, whatever signal the ladder sent.
    assert_eq!(result(Outcome::Completed(seen), Some(15)).exit_code(), 0);
    assert_eq!(result(stale, Some(15)).exit_code(), 124);
    let hard = Outcome::HardTimeout {
        after: Duration::from_secs(1),
    };
    assert_eq!(result(hard, None).exit_code(), 124);
    assert_eq!(
        result(Outcome::Terminated { forced: false }, Some(15)).exit_code(),
        143
    );
    assert_eq!(
        result(Outcome::Terminated { forced: true }, None).exit_code(),
        125
    );
}

#[test]
fn human_durations() {
    assert_eq!(
        HumanDuration(Duration::from_millis(850)).to_string(),
        "850ms"
    );
    assert_eq!(
        HumanDuration(Duration::from_millis(4200)).to_string(),
        "4.2s"
    );
    assert_eq!(HumanDuration(Duration::from_secs(300)).to_string(), "5m0s");
    assert_eq!(
        HumanDuration(Duration::from_secs(3723)).to_string(),
        "1h2m3s"
    );
}

#[test]
fn report_displays_every_source() {
    let r = StaleReport {
        idle_timeout: Duration::from_secs(300),
        children: None,
        capped: vec![],
        diagnosis: None,
        sources: vec![
            SourceActivity {
                source: ActivitySource::Output,
                available: true,
                idle: Duration::from_secs(300),
                events: 3,
            },
            SourceActivity {
                source: ActivitySource::Files,
                available: false,
                idle: Duration::from_secs(300),
                events: 0,
            },
            SourceActivity {
                source: ActivitySource::Keepalive,
                available: true,
                idle: Duration::from_secs(432),
                events: 1,
            },
        ],
    };
    assert_eq!(
        r.to_string(),
        "output 5m0s, files unavailable, keepalive 7m12s idle"
    );
    let mut never_kept_alive = r.clone();
    never_kept_alive.sources[2].events = 0;
    assert_eq!(
        never_kept_alive.to_string(),
        "output 5m0s, files unavailable idle"
    );
    assert_eq!(r.get(ActivitySource::Output).unwrap().events, 3);
    let mut capped = r.clone();
    capped.capped = vec![ActivitySource::Output];
    assert_eq!(
        capped.to_string(),
        "output capped, files unavailable, keepalive 7m12s idle"
    );
}
