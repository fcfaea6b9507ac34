//! The ladder's rules against a fake process layer: no real process, no sleeping (the
//! session's clock is a `MockClock`).

use super::*;
use crate::clock::MockClock;
use crossbeam_channel::Receiver;

/// The pid `n` (a made-up process of the fake table).
const fn pid(n: u32) -> Pid {
    match Pid::new(n) {
        Some(pid) => pid,
        None => panic!("not a pid"),
    }
}

const LEADER: Pid = pid(4242);
const OWN_GROUP: Pid = pid(77);
const OWN_PID: Pid = pid(78);
const CONFIRM: Duration = Duration::from_secs(3);
const TERM: Signal = Signal::TERM;
const KILL: Signal = Signal::KILL;
const CONT: Signal = Signal::CONT;

/// What the ladder sent, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Group(Pid, Signal),
    Pid(Pid, Signal),
    /// A signal to every member of the cgroup.
    Cgroup(Signal),
    /// `cgroup.kill`.
    CgroupKill,
}

/// The session's cgroup, as the fake has it.
#[derive(Default)]
struct FakeCgroup {
    populated: bool,
    /// It cannot be read or written (removed under our feet, say).
    broken: bool,
}

/// A scripted process table: the leader's group members, the escapees it reports, the
/// processes that died.
#[derive(Default)]
struct Fake {
    members: Vec<Pid>,
    /// `None`: the platform cannot enumerate a group.
    cannot_enumerate: bool,
    escapees: Vec<Identity>,
    dead: Vec<Identity>,
    /// The group the leader joined after leaving its own (`None`: it leads its own).
    joined: Option<Pid>,
    sent: Vec<Sent>,
    samples: usize,
    /// The session's cgroup, when it has one.
    cgroup: Option<FakeCgroup>,
}

impl Fake {
    fn lives(&self, identity: Identity) -> bool {
        self.escapees.contains(&identity) && !self.dead.contains(&identity)
    }

    fn take_sent(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.sent)
    }
}

impl ProcessLayer for Fake {
    fn signal_group(&mut self, pgid: Pid, signal: Signal) -> io::Result<()> {
        self.sent.push(Sent::Group(pgid, signal));
        Ok(())
    }

    fn signal_pid(&mut self, pid: Pid, signal: Signal) -> io::Result<()> {
        self.sent.push(Sent::Pid(pid, signal));
        Ok(())
    }

    fn signal_escapee(&mut self, identity: Identity, signal: Signal) -> io::Result<()> {
        if !self.lives(identity) {
            return Err(io::ErrorKind::NotFound.into());
        }
        self.sent.push(Sent::Pid(identity.pid, signal));
        Ok(())
    }

    fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    fn signal_cgroup(&mut self, signal: Signal) -> io::Result<()> {
        let cgroup = self.cgroup.as_mut().ok_or(io::ErrorKind::NotFound)?;
        if cgroup.broken {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        self.sent.push(Sent::Cgroup(signal));
        Ok(())
    }

    fn kill_cgroup(&mut self) -> io::Result<()> {
        let cgroup = self.cgroup.as_mut().ok_or(io::ErrorKind::NotFound)?;
        if cgroup.broken {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        self.sent.push(Sent::CgroupKill);
        Ok(())
    }

    fn cgroup_populated(&mut self) -> Option<bool> {
        let cgroup = self.cgroup.as_ref()?;
        (!cgroup.broken).then_some(cgroup.populated)
    }

    fn group_members(&mut self, _pgid: Pid, except: Pid) -> Option<Vec<Pid>> {
        (!self.cannot_enumerate).then(|| {
            let mut members = self.members.clone();
            members.retain(|p| *p != except);
            members
        })
    }

    fn alive(&mut self, identity: Identity) -> bool {
        self.lives(identity)
    }

    fn sample(&mut self, _now: Instant) {
        self.samples += 1;
    }

    fn escapees(&mut self, _pgid: Pid) -> Vec<Identity> {
        let escapees = self.escapees.clone();
        escapees.into_iter().filter(|e| self.lives(*e)).collect()
    }

    fn process_group_of(&mut self, pid: Pid) -> Option<Pid> {
        Some(if pid == LEADER {
            self.joined.unwrap_or(pid)
        } else {
            pid
        })
    }

    fn own_group(&mut self) -> Option<Pid> {
        Some(OWN_GROUP)
    }

    fn own_pid(&self) -> Pid {
        OWN_PID
    }
}

fn escapee(pid: Pid) -> Identity {
    Identity {
        pid,
        start_time: 1000 + u64::from(pid.get()),
    }
}

fn step(signal: Signal, grace_ms: u64) -> KillStep {
    KillStep {
        signal,
        grace: Duration::from_millis(grace_ms),
    }
}

fn ladder_for(pgid: Pid, clock: &MockClock) -> (Ladder, Receiver<Event>) {
    let emitter = Arc::new(Emitter::new(64));
    let events = emitter.receiver();
    let ladder = Ladder::new(7, pgid, CONFIRM, Clock::from(clock), emitter);
    (ladder, events)
}

fn signal_events(events: &Receiver<Event>) -> Vec<(Signal, usize)> {
    events
        .try_iter()
        .filter_map(|e| match e {
            Event::Signal { signal, step } => Some((signal, step)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_polite_step_is_followed_by_sigcont_for_the_group_and_the_escapees() {
    let clock = MockClock::new();
    let (mut ladder, events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        escapees: vec![escapee(pid(500))],
        ..Fake::default()
    };
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 2000), step(Signal::KILL, 0)],
        None,
        false,
    );
    assert_eq!(
        fake.take_sent(),
        [
            Sent::Group(LEADER, TERM),
            Sent::Pid(pid(500), TERM),
            Sent::Pid(pid(500), CONT),
            Sent::Group(LEADER, CONT),
        ]
    );
    assert_eq!(ladder.signals_sent, [Signal::TERM]);
    assert!(!ladder.escalated);
    assert_eq!(signal_events(&events), [(Signal::TERM, 0)]);
}

#[test]
fn a_leader_that_left_its_group_is_signalled_by_pid_never_the_group_it_joined() {
    // It joined another group of its session, or even quietus's own.
    for joined in [pid(9000), OWN_GROUP] {
        let clock = MockClock::new();
        let t0 = clock.now();
        let (mut ladder, _events) = ladder_for(LEADER, &clock);
        let mut fake = Fake {
            members: vec![pid(4243)], // its old group still has a member
            joined: Some(joined),
            ..Fake::default()
        };
        ladder.start(
            &mut fake,
            vec![step(Signal::TERM, 2000), step(Signal::KILL, 0)],
            None,
            false,
        );
        assert_eq!(
            fake.take_sent(),
            [
                Sent::Group(LEADER, TERM),
                Sent::Pid(LEADER, TERM),
                Sent::Group(LEADER, CONT),
                Sent::Pid(LEADER, CONT),
            ],
            "joined {joined}"
        );
        ladder
            .step(&mut fake, t0 + Duration::from_secs(2), false)
            .expect("the leader still runs");
        assert_eq!(
            fake.take_sent(),
            [Sent::Group(LEADER, KILL), Sent::Pid(LEADER, KILL)],
            "joined {joined}"
        );
        assert_eq!(ladder.signals_sent, [Signal::TERM, Signal::KILL]);
    }
}

#[test]
fn a_leader_that_exited_is_never_signalled_by_pid() {
    // Its pid is only its own until it is reaped: once it exited, the group alone.
    let clock = MockClock::new();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        members: vec![pid(4243)],
        joined: Some(pid(9000)),
        ..Fake::default()
    };
    ladder.start(&mut fake, vec![step(Signal::KILL, 0)], None, true);
    assert_eq!(fake.take_sent(), [Sent::Group(LEADER, KILL)]);
}

#[test]
fn sigkill_gets_no_sigcont_and_marks_the_escalation() {
    let clock = MockClock::new();
    let (mut ladder, events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        escapees: vec![escapee(pid(500))],
        ..Fake::default()
    };
    ladder.start(&mut fake, vec![step(Signal::KILL, 0)], None, false);
    assert_eq!(
        fake.take_sent(),
        [Sent::Group(LEADER, KILL), Sent::Pid(pid(500), KILL)]
    );
    assert!(ladder.escalated);
    assert_eq!(signal_events(&events), [(Signal::KILL, 0)]);
}

#[test]
fn the_next_step_waits_for_the_grace_and_the_kill_for_its_confirmation() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        members: vec![LEADER, pid(4243)],
        ..Fake::default()
    };
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 2000), step(Signal::KILL, 0)],
        None,
        false,
    );
    fake.take_sent();
    // Inside the grace: nothing more is sent; wake at its end.
    let wake = ladder
        .step(&mut fake, t0 + Duration::from_secs(1), false)
        .expect("the tree is still there");
    assert_eq!(wake.at, t0 + Duration::from_secs(2));
    assert!(fake.take_sent().is_empty());
    // Grace over: SIGKILL, then the confirmation bound.
    let t2 = t0 + Duration::from_secs(2);
    let wake = ladder.step(&mut fake, t2, false).expect("still there");
    assert_eq!(fake.take_sent(), [Sent::Group(LEADER, KILL)]);
    assert_eq!(wake.at, t2 + CONFIRM);
    assert_eq!(ladder.signals_sent, [Signal::TERM, Signal::KILL]);
}

#[test]
fn a_last_polite_step_is_bounded_by_the_confirmation_not_its_grace() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake::default();
    ladder.start(&mut fake, vec![step(Signal::INT, 60_000)], None, false);
    let wake = ladder
        .step(&mut fake, t0, false)
        .expect("leader still runs");
    assert_eq!(wake.at, t0 + CONFIRM);
}

#[test]
fn kill_skips_the_remaining_polite_steps() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, events) = ladder_for(LEADER, &clock);
    let mut fake = Fake::default();
    ladder.start(
        &mut fake,
        vec![
            step(Signal::TERM, 10_000),
            step(Signal::INT, 10_000),
            step(Signal::KILL, 0),
        ],
        None,
        false,
    );
    fake.take_sent();
    assert!(ladder.skip_to_kill(t0));
    // The SIGKILL goes at once, without the INT in between.
    ladder.step(&mut fake, t0, false).expect("still there");
    assert_eq!(fake.take_sent(), [Sent::Group(LEADER, KILL)]);
    assert_eq!(ladder.signals_sent, [Signal::TERM, Signal::KILL]);
    assert_eq!(
        signal_events(&events),
        [(Signal::TERM, 0), (Signal::KILL, 2)]
    );
    // Nothing left to skip to.
    assert!(!ladder.skip_to_kill(t0));
}

#[test]
fn kill_before_any_ladder_has_nothing_to_skip() {
    let clock = MockClock::new();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    assert!(!ladder.skip_to_kill(clock.now()));
}

#[test]
fn a_descendant_escaping_during_the_ladder_gets_the_latest_signal_once() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake::default();
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 5000), step(Signal::KILL, 0)],
        None,
        false,
    );
    fake.take_sent();
    // A helper the TERM handler started in a session of its own.
    fake.escapees.push(escapee(pid(600)));
    ladder.step(&mut fake, t0, false).expect("still there");
    assert_eq!(
        fake.take_sent(),
        [Sent::Pid(pid(600), TERM), Sent::Pid(pid(600), CONT)]
    );
    assert_eq!(ladder.escapees, [escapee(pid(600))]);
    // Known now: not signalled again by the refresh.
    ladder.step(&mut fake, t0, false).expect("still there");
    assert!(fake.take_sent().is_empty());
    // After the SIGKILL, a newcomer gets SIGKILL alone.
    ladder
        .step(&mut fake, t0 + Duration::from_secs(5), false)
        .expect("still there");
    assert_eq!(
        fake.take_sent(),
        [Sent::Group(LEADER, KILL), Sent::Pid(pid(600), KILL)]
    );
    fake.escapees.push(escapee(pid(601)));
    ladder
        .step(&mut fake, t0 + Duration::from_secs(5), false)
        .expect("still there");
    assert_eq!(fake.take_sent(), [Sent::Pid(pid(601), KILL)]);
    assert!(fake.samples > 0, "the tree is looked at again");
}

#[test]
fn an_escapee_whose_identity_changed_is_left_alone() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        escapees: vec![escapee(pid(500))],
        ..Fake::default()
    };
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 1000), step(Signal::KILL, 0)],
        None,
        false,
    );
    fake.take_sent();
    // pid 500 died (and may have been reused): the next step does not reach it.
    fake.dead.push(escapee(pid(500)));
    ladder
        .step(&mut fake, t0 + Duration::from_secs(1), false)
        .expect("the leader still runs");
    assert_eq!(fake.take_sent(), [Sent::Group(LEADER, KILL)]);
}

#[test]
fn the_ladder_ends_when_the_whole_tree_is_gone_and_says_how_long_it_took() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        members: vec![pid(4243)],
        escapees: vec![escapee(pid(500))],
        ..Fake::default()
    };
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 5000), step(Signal::KILL, 0)],
        None,
        false,
    );
    let t1 = t0 + Duration::from_millis(40);
    // The leader lives: not gone, whatever else.
    assert!(ladder.step(&mut fake, t1, false).is_some());
    // The leader exited, a member lives.
    assert!(ladder.step(&mut fake, t1, true).is_some());
    // The member is gone, the escapee lives.
    fake.members.clear();
    assert!(ladder.step(&mut fake, t1, true).is_some());
    // Everything is gone.
    fake.dead.push(escapee(pid(500)));
    assert!(ladder.step(&mut fake, t1, true).is_none());
    assert_eq!(ladder.time, Some(Duration::from_millis(40)));
    assert!(!ladder.unproven);
    assert_eq!(ladder.signals_sent, [Signal::TERM], "no SIGKILL was needed");
}

#[test]
fn a_platform_that_cannot_enumerate_the_group_relies_on_the_leader() {
    let clock = MockClock::new();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        cannot_enumerate: true,
        ..Fake::default()
    };
    ladder.start(&mut fake, vec![step(Signal::TERM, 5000)], None, false);
    assert!(ladder.step(&mut fake, clock.now(), true).is_none());
    assert!(!ladder.unproven);
}

#[test]
fn a_tree_still_there_after_the_confirmation_bound_is_unproven() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        members: vec![pid(4243)], // in uninterruptible sleep, say
        ..Fake::default()
    };
    ladder.start(&mut fake, vec![step(Signal::KILL, 0)], None, false);
    let wake = ladder
        .step(&mut fake, t0 + CONFIRM - Duration::from_millis(1), true)
        .expect("still inside the bound");
    assert_eq!(wake.at, t0 + CONFIRM);
    assert!(!ladder.unproven);
    assert!(ladder.step(&mut fake, t0 + CONFIRM, true).is_none());
    assert!(ladder.unproven);
    assert_eq!(ladder.time, None);
    // No second SIGKILL: the ladder gives up and says so.
    assert_eq!(fake.take_sent(), [Sent::Group(LEADER, KILL)]);
}

#[test]
fn never_signals_group_1_or_its_own_group() {
    // 0 and negative numbers (every process, a group) are no `Pid`: not even expressible.
    for pgid in [pid(1), OWN_GROUP] {
        let clock = MockClock::new();
        let (mut ladder, _events) = ladder_for(pgid, &clock);
        let mut fake = Fake {
            escapees: vec![escapee(pid(500))],
            ..Fake::default()
        };
        ladder.start(
            &mut fake,
            vec![step(Signal::TERM, 10), step(Signal::KILL, 0)],
            None,
            false,
        );
        ladder
            .step(&mut fake, clock.now() + Duration::from_millis(10), false)
            .expect("the leader lives");
        let sent = fake.take_sent();
        assert!(
            !sent.iter().any(|s| matches!(s, Sent::Group(..))),
            "pgid {pgid}: {sent:?}"
        );
        // The escapee is still reached by pid.
        assert!(
            sent.contains(&Sent::Pid(pid(500), KILL)),
            "pgid {pgid}: {sent:?}"
        );
    }
}

#[test]
fn never_signals_pid_1_or_itself() {
    let clock = MockClock::new();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        escapees: vec![escapee(pid(1)), escapee(OWN_PID), escapee(pid(500))],
        ..Fake::default()
    };
    ladder.start(&mut fake, vec![step(Signal::KILL, 0)], None, false);
    assert_eq!(
        fake.take_sent(),
        [Sent::Group(LEADER, KILL), Sent::Pid(pid(500), KILL)]
    );
}

#[test]
fn polling_backs_off_from_5_ms_to_200_ms_and_starts_over_at_each_step() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake::default();
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 60_000), step(Signal::KILL, 0)],
        None,
        false,
    );
    let polls: Vec<u64> = (0..8)
        .map(|_| {
            let wake = ladder.step(&mut fake, t0, false).expect("running");
            wake.poll.expect("a poll").as_millis() as u64
        })
        .collect();
    assert_eq!(polls, [5, 10, 20, 40, 80, 160, 200, 200]);
    let wake = ladder
        .step(&mut fake, t0 + Duration::from_secs(60), false)
        .expect("running");
    assert_eq!(wake.poll, Some(POLL_MIN));
}

#[test]
fn the_kill_latency_is_measured_from_when_the_ladder_was_due() {
    let clock = MockClock::new();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake::default();
    let due = clock.now();
    clock.advance(Duration::from_millis(30));
    ladder.start(&mut fake, vec![step(Signal::TERM, 1000)], Some(due), false);
    assert_eq!(ladder.kill_latency, Some(Duration::from_millis(30)));
    assert_eq!(ladder.started, Some(due + Duration::from_millis(30)));
}

fn in_cgroup(populated: bool) -> Fake {
    Fake {
        cgroup: Some(FakeCgroup {
            populated,
            broken: false,
        }),
        ..Fake::default()
    }
}

#[test]
fn in_a_cgroup_polite_steps_reach_every_member_and_the_kill_is_cgroup_kill() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, events) = ladder_for(LEADER, &clock);
    let mut fake = in_cgroup(true);
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 2000), step(Signal::KILL, 0)],
        None,
        false,
    );
    assert_eq!(fake.take_sent(), [Sent::Cgroup(TERM), Sent::Cgroup(CONT)]);
    assert!(ladder.escapees.is_empty());
    ladder
        .step(&mut fake, t0 + Duration::from_secs(2), false)
        .expect("still populated");
    assert_eq!(fake.take_sent(), [Sent::CgroupKill]);
    assert!(ladder.escalated);
    assert_eq!(
        signal_events(&events),
        [(Signal::TERM, 0), (Signal::KILL, 1)]
    );
}

#[test]
fn in_a_cgroup_a_process_that_left_it_gets_every_step_by_pid_and_the_tree_waits_for_it() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = in_cgroup(true);
    // With a cgroup, the escapees the observer reports are the members that left it
    // (issue 51 item 2): each step reaches them by pid too.
    let left = escapee(pid(500));
    fake.escapees.push(left);
    ladder.start(
        &mut fake,
        vec![step(Signal::TERM, 2000), step(Signal::KILL, 0)],
        None,
        false,
    );
    assert_eq!(
        fake.take_sent(),
        [
            Sent::Cgroup(TERM),
            Sent::Cgroup(CONT),
            Sent::Pid(pid(500), TERM),
            Sent::Pid(pid(500), CONT)
        ]
    );
    // The cgroup empty and the leader gone, the tree is not gone while the one that left
    // lives.
    fake.cgroup.as_mut().expect("a cgroup").populated = false;
    let t1 = t0 + Duration::from_millis(30);
    assert!(ladder.step(&mut fake, t1, true).is_some(), "it lives");
    ladder
        .step(&mut fake, t0 + Duration::from_secs(2), true)
        .expect("it still lives");
    assert_eq!(
        fake.take_sent(),
        [Sent::CgroupKill, Sent::Pid(pid(500), KILL)]
    );
    fake.dead.push(left);
    let t2 = t0 + Duration::from_millis(2050);
    assert!(ladder.step(&mut fake, t2, true).is_none(), "gone");
    assert_eq!(ladder.time, Some(Duration::from_millis(2050)));
}

#[test]
fn in_a_cgroup_the_tree_is_gone_when_it_is_no_longer_populated() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = in_cgroup(true);
    // Group members the fake reports are not looked at: the cgroup decides (no member left
    // it: no escapee).
    fake.members = vec![pid(4243)];
    ladder.start(&mut fake, vec![step(Signal::TERM, 5000)], None, false);
    let samples = fake.samples;
    let t1 = t0 + Duration::from_millis(30);
    assert!(
        ladder.step(&mut fake, t1, true).is_some(),
        "still populated"
    );
    fake.cgroup.as_mut().expect("a cgroup").populated = false;
    // The leader has not been seen exiting yet: not gone.
    assert!(ladder.step(&mut fake, t1, false).is_some());
    assert!(ladder.step(&mut fake, t1, true).is_none());
    assert_eq!(ladder.time, Some(Duration::from_millis(30)));
    assert_eq!(fake.samples, samples, "no look at the process table");
}

#[test]
fn a_cgroup_that_cannot_be_used_falls_back_to_the_group() {
    let clock = MockClock::new();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = Fake {
        cgroup: Some(FakeCgroup {
            populated: true,
            broken: true,
        }),
        members: vec![pid(4243)],
        ..Fake::default()
    };
    ladder.start(&mut fake, vec![step(Signal::KILL, 0)], None, false);
    assert_eq!(fake.take_sent(), [Sent::Group(LEADER, KILL)]);
    // The tree is judged the group way: a member lives.
    assert!(ladder.step(&mut fake, clock.now(), true).is_some());
    fake.members.clear();
    assert!(ladder.step(&mut fake, clock.now(), true).is_none());
}

#[test]
fn in_a_cgroup_the_ladder_looks_every_5_ms() {
    let clock = MockClock::new();
    let t0 = clock.now();
    let (mut ladder, _events) = ladder_for(LEADER, &clock);
    let mut fake = in_cgroup(true);
    ladder.start(&mut fake, vec![step(Signal::KILL, 0)], None, true);
    let polls: Vec<Option<Duration>> = (0..4)
        .map(|_| ladder.step(&mut fake, t0, true).expect("populated").poll)
        .collect();
    assert_eq!(polls, [Some(POLL_MIN); 4]);
}
