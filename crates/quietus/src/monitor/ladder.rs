//! The kill ladder: signals the child's process group step by step (SIGCONT after each polite
//! step, SIGKILL at the end), reaches the escapees (descendants that left the group, orphans
//! adopted in subreaper mode) by pidfd, signals the leader by pidfd when it has left its group,
//! and tells when the whole tree is gone. With a cgroup of the session's own, the tree is the
//! cgroup's members instead: the polite steps go to each member, SIGKILL is `cgroup.kill`, and
//! the tree is gone when the cgroup is no longer populated. It acts through the process
//! layer's [`ProcessLayer`] (`monitor/tree/layer.rs`), so its rules are unit-tested with a fake
//! one. Also the leader's bookkeeping (reaping it).

use std::io;

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{POLL_MAX, POLL_MIN, Wake};
use crate::clock::Clock;
use crate::config::KillStep;
use crate::events::{Emitter, Event};
use crate::outcome::HumanDuration;
use crate::pid::Pid;
use crate::process::{self, ChildProcess};
use crate::signal::Signal;
use crate::sources::children::Identity;

pub(super) use super::tree::layer::{OsProcesses, ProcessLayer};

/// Sends `signal` to group `pgid`, refusing group 1 and our own group (as `sys` does too:
/// the rule is the ladder's, and tested here; a `Pid` is never 0 nor negative).
fn signal_group(ops: &mut dyn ProcessLayer, pgid: Pid, signal: Signal) -> io::Result<()> {
    if pgid.get() == 1 || Some(pgid) == ops.own_group() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    ops.signal_group(pgid, signal)
}

/// Sends `signal` to one process, refusing pid 1 and ourselves.
fn signal_pid(ops: &mut dyn ProcessLayer, pid: Pid, signal: Signal) -> io::Result<()> {
    if pid.get() == 1 || pid == ops.own_pid() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {pid}"),
        ));
    }
    ops.signal_pid(pid, signal)
}

/// Sends `signal` to the remembered descendant `identity`, refusing pid 1 and ourselves.
fn signal_identity(
    ops: &mut dyn ProcessLayer,
    identity: Identity,
    signal: Signal,
) -> io::Result<()> {
    if identity.pid.get() == 1 || identity.pid == ops.own_pid() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {}", identity.pid),
        ));
    }
    ops.signal_escapee(identity, signal)
}

/// Sends `signal` to the leader's process group `pgid` (the leader's pid) and, when the leader
/// has left that group (it may join another group of its session, even quietus's own), to
/// the leader by pid: never to the group it joined. `leader_running`: the leader has neither
/// exited nor been reaped, so its pid is still its own (it is not reaped before the ladder is
/// done). Its escapees are signalled by pid by the ladder (they are outside the group). The
/// result is the group's.
pub(super) fn signal_leader(
    ops: &mut dyn ProcessLayer,
    id: u64,
    pgid: Pid,
    leader_running: bool,
    signal: Signal,
) -> io::Result<()> {
    let group = signal_group(ops, pgid, signal);
    if leader_running && ops.process_group_of(pgid).is_some_and(|now| now != pgid) {
        match signal_pid(ops, pgid, signal) {
            Ok(()) => {
                log::debug!("session {id}: pid {pgid} left its group; signalled by pid");
                return Ok(());
            }
            Err(e) => log::debug!("session {id}: signal to pid {pgid}: {e}"),
        }
    }
    group
}

/// The supervised child, leader of its process group.
pub(super) struct Leader {
    /// The child, owned from the start of `run` until the end.
    pub(super) child: Option<ChildProcess>,
    /// Its status, once reaped.
    pub(super) status: Option<ExitStatus>,
    /// Whether it exited (seen by the waiter thread; not reaped until the ladder is done).
    pub(super) exited: bool,
}

impl Leader {
    pub(super) fn new() -> Self {
        Self {
            child: None,
            status: None,
            exited: false,
        }
    }

    /// Reaps the child (once): waits for it if it exited, else only looks.
    pub(super) fn reap(&mut self, id: u64, pid: Pid) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        process::orphans::reaped(pid);
        self.status = if self.exited {
            match child.wait() {
                Ok(status) => Some(status),
                Err(e) => {
                    log::error!("session {id}: reaping pid {pid}: {e}");
                    None
                }
            }
        } else {
            child.try_wait().ok().flatten()
        };
    }
}

/// The steps of a ladder under way.
#[derive(Debug)]
struct Steps {
    steps: Vec<KillStep>,
    /// Index of the next step to send.
    next: usize,
    /// When the current step's grace (or the SIGKILL confirmation bound) runs out.
    deadline: Instant,
    /// Poll interval for the group once the leader is gone (backs off to `POLL_MAX`).
    poll: Duration,
}

/// The kill ladder of one session, and what it did (for the result).
pub(super) struct Ladder {
    id: u64,
    /// The leader's pid, which is the group's id.
    pgid: Pid,
    kill_confirm_timeout: Duration,
    clock: Clock,
    emitter: Arc<Emitter>,
    /// The steps under way, once started.
    steps: Option<Steps>,
    /// Descendants outside the process group that the ladder signals by pid.
    pub(super) escapees: Vec<Identity>,
    pub(super) signals_sent: Vec<Signal>,
    pub(super) escalated: bool,
    pub(super) leftovers_killed: usize,
    /// The leftovers, named before they were ended.
    pub(super) leftovers: Vec<crate::outcome::Leftover>,
    pub(super) unproven: bool,
    pub(super) kill_latency: Option<Duration>,
    /// When the ladder should have started (a deadline), if it had one.
    pub(super) due: Option<Instant>,
    pub(super) started: Option<Instant>,
    pub(super) time: Option<Duration>,
}

impl Ladder {
    pub(super) fn new(
        id: u64,
        pgid: Pid,
        kill_confirm_timeout: Duration,
        clock: Clock,
        emitter: Arc<Emitter>,
    ) -> Self {
        Self {
            id,
            pgid,
            kill_confirm_timeout,
            clock,
            emitter,
            steps: None,
            escapees: Vec::new(),
            signals_sent: Vec::new(),
            escalated: false,
            leftovers_killed: 0,
            leftovers: Vec::new(),
            unproven: false,
            kill_latency: None,
            due: None,
            started: None,
            time: None,
        }
    }

    /// Starts the ladder: remembers the escapees and sends the first step at once. `due` is
    /// when the ladder should have started (for the kill latency).
    pub(super) fn start(
        &mut self,
        ops: &mut dyn ProcessLayer,
        steps: Vec<KillStep>,
        due: Option<Instant>,
        leader_exited: bool,
    ) {
        let now = self.clock.now();
        // In a cgroup nothing escapes: its members are the tree.
        self.escapees = if ops.has_cgroup() {
            Vec::new()
        } else {
            ops.escapees(self.pgid)
        };
        self.steps = Some(Steps {
            steps,
            next: 0,
            deadline: now,
            poll: POLL_MIN,
        });
        self.started = Some(now);
        // Send the first step at once.
        self.advance(ops, now, leader_exited);
        if let Some(due) = due {
            self.kill_latency = Some(self.clock.now().saturating_duration_since(due));
            self.due = Some(due);
        }
    }

    /// After a deadline: how long after it the first signal went out and the tree was gone
    /// (none when the ladder had no deadline or did not see the tree go).
    pub(super) fn after_deadline(&self) -> Option<(Instant, Duration, Option<Duration>)> {
        let due = self.due?;
        let gone = self
            .started
            .zip(self.time)
            .map(|(started, time)| (started + time).saturating_duration_since(due));
        Some((due, self.kill_latency?, gone))
    }

    /// Skips the remaining polite steps: the SIGKILL goes out at the next step. Returns whether
    /// there was a step left to skip to.
    pub(super) fn skip_to_kill(&mut self, now: Instant) -> bool {
        match &mut self.steps {
            Some(ladder) if ladder.next < ladder.steps.len() => {
                // Skip the remaining polite steps.
                ladder.next = ladder.steps.len() - 1;
                ladder.deadline = now;
                true
            }
            _ => false,
        }
    }

    /// Whether the whole tree is gone: the leader has exited, no other group member lives, and
    /// no escapee the ladder signalled lives.
    /// With a cgroup: the leader has exited and the cgroup is not populated (zombies are not
    /// members), no scan of any process.
    fn tree_gone(&mut self, ops: &mut dyn ProcessLayer, leader_exited: bool) -> bool {
        if ops.has_cgroup()
            && let Some(populated) = ops.cgroup_populated()
        {
            return leader_exited && !populated;
        }
        self.refresh_escapees(ops);
        if !leader_exited
            || !ops
                .group_members(self.pgid, self.pgid)
                .is_none_or(|members| members.is_empty())
        {
            return false;
        }
        self.escapees.retain(|e| ops.alive(*e));
        if !self.escapees.is_empty() {
            return false;
        }
        // Everything known is dead. A process's children are re-parented before it dies, so
        // one more look now finds any that came back (to a subreaper) while we checked.
        self.refresh_escapees(ops);
        self.escapees.is_empty()
    }

    /// During the ladder: looks at the tree again, so a descendant that escaped since the
    /// ladder started (a helper a TERM handler starts in a new session, a killed daemon's
    /// workers coming back to a subreaper) gets the latest signal too.
    fn refresh_escapees(&mut self, ops: &mut dyn ProcessLayer) {
        if ops.has_cgroup() {
            return; // every newcomer is a member, reached by the next step
        }
        let now = self.clock.now();
        ops.sample(now);
        let known = self.escapees.clone();
        let fresh: Vec<Identity> = ops
            .escapees(self.pgid)
            .into_iter()
            .filter(|e| !known.contains(e))
            .collect();
        if fresh.is_empty() {
            return;
        }
        if let Some(signal) = self.signals_sent.last().copied() {
            for e in &fresh {
                let _ = signal_identity(ops, *e, signal);
                if signal != Signal::KILL {
                    let _ = signal_identity(ops, *e, Signal::CONT);
                }
            }
        }
        self.escapees.extend(fresh);
    }

    /// Advances the ladder at `now`: the next step when this one's time is up. Returns when to
    /// look again, or `None` once the ladder is over: the tree is gone (`time` set), or the
    /// SIGKILL's confirmation bound ran out with the tree still there (`unproven`).
    pub(super) fn step(
        &mut self,
        ops: &mut dyn ProcessLayer,
        now: Instant,
        leader_exited: bool,
    ) -> Option<Wake> {
        if self.tree_gone(ops, leader_exited) {
            self.time = self.started.map(|t| now.saturating_duration_since(t));
            return None;
        }
        let ladder = self.steps.as_ref()?;
        if now >= ladder.deadline {
            if ladder.next >= ladder.steps.len() {
                log::error!(
                    "session {}: SIGKILL sent to group {} but it is not gone after {}",
                    self.id,
                    self.pgid,
                    HumanDuration(self.kill_confirm_timeout)
                );
                self.unproven = true;
                return None;
            }
            self.advance(ops, now, leader_exited);
        }
        let ladder = self.steps.as_mut()?;
        // Nothing tells us when group members or escapees die, or when a descendant escapes
        // during the grace: look again, backing off from 5 ms to 200 ms. A cgroup's look is one
        // read of `cgroup.events` (about 10 µs), not a scan: every 5 ms.
        let poll = ladder.poll;
        if !ops.has_cgroup() {
            ladder.poll = (poll * 2).min(POLL_MAX);
        }
        Some(Wake {
            at: ladder.deadline,
            poll: Some(poll),
        })
    }

    /// Sends the next step of the ladder (to the leader by pid too while it runs outside its
    /// group: the leader is not reaped before the ladder is done).
    fn advance(&mut self, ops: &mut dyn ProcessLayer, now: Instant, leader_exited: bool) {
        let Some(ladder) = &mut self.steps else {
            return;
        };
        let Some(step) = ladder.steps.get(ladder.next).copied() else {
            return;
        };
        let index = ladder.next;
        ladder.next += 1;
        ladder.poll = POLL_MIN;
        ladder.deadline = if step.signal == Signal::KILL || ladder.next == ladder.steps.len() {
            now + self.kill_confirm_timeout
        } else {
            now + step.grace
        };
        if ops.has_cgroup() {
            self.send_to_cgroup(ops, step.signal);
        } else {
            self.send_to_group(ops, step.signal, leader_exited);
        }
        self.signals_sent.push(step.signal);
        self.emitter.lifecycle(Event::Signal {
            signal: step.signal,
            step: index,
        });
        if step.signal == Signal::KILL {
            self.escalated = true;
        }
    }

    /// One step to the session's cgroup: a polite signal (and SIGCONT) to every member, or
    /// `cgroup.kill`. Where the cgroup cannot be acted on, the group way.
    fn send_to_cgroup(&mut self, ops: &mut dyn ProcessLayer, signal: Signal) {
        let sent = if signal == Signal::KILL {
            ops.kill_cgroup()
        } else {
            ops.signal_cgroup(signal)
                .and_then(|()| ops.signal_cgroup(Signal::CONT))
        };
        match sent {
            Ok(()) => log::debug!("session {}: sent {signal} to the cgroup", self.id),
            Err(e) => {
                log::warn!("session {}: {signal} to the cgroup: {e}", self.id);
                let _ = signal_group(ops, self.pgid, signal);
            }
        }
    }

    /// One step to the leader's group, the leader by pid while it runs outside it, and the
    /// escapees.
    fn send_to_group(&mut self, ops: &mut dyn ProcessLayer, signal: Signal, leader_exited: bool) {
        let (id, pgid, running) = (self.id, self.pgid, !leader_exited);
        match signal_leader(ops, id, pgid, running, signal) {
            Ok(()) => log::debug!(
                "session {}: sent {} to group {}",
                self.id,
                signal,
                self.pgid
            ),
            Err(e) => log::debug!(
                "session {}: {} to group {}: {e}",
                self.id,
                signal,
                self.pgid
            ),
        }
        for escapee in &self.escapees {
            // Through a pidfd checked against the identity: a reused pid is left alone.
            let _ = signal_identity(ops, *escapee, signal);
            if signal != Signal::KILL {
                let _ = signal_identity(ops, *escapee, Signal::CONT);
            }
        }
        if signal != Signal::KILL {
            // A stopped process cannot act on a polite signal until it is continued.
            let _ = signal_leader(ops, id, pgid, running, Signal::CONT);
        }
    }
}

#[cfg(test)]
mod tests {
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
        // An escapee the observer knows of is a member like any other: no signal by pid.
        fake.escapees.push(escapee(pid(500)));
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
    fn in_a_cgroup_the_tree_is_gone_when_it_is_no_longer_populated() {
        let clock = MockClock::new();
        let t0 = clock.now();
        let (mut ladder, _events) = ladder_for(LEADER, &clock);
        let mut fake = in_cgroup(true);
        // Group members and escapees the fake reports are not looked at: the cgroup decides.
        fake.members = vec![pid(4243)];
        fake.escapees.push(escapee(pid(500)));
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
}
