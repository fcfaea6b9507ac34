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

use super::wait::{POLL_MAX, POLL_MIN, Wake};
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
        // Outside the group, or, with a cgroup, outside it (members that left it, issue 51).
        self.escapees = ops.escapees(self.pgid);
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
    /// With a cgroup: the leader has exited, the cgroup is not populated (zombies are not
    /// members), and no process that left it lives (no scan of every process: the ones
    /// remembered are looked at).
    fn tree_gone(&mut self, ops: &mut dyn ProcessLayer, leader_exited: bool) -> bool {
        if ops.has_cgroup()
            && let Some(populated) = ops.cgroup_populated()
        {
            if !leader_exited || populated {
                return false;
            }
            self.refresh_escapees(ops);
            self.escapees.retain(|e| ops.alive(*e));
            return self.escapees.is_empty();
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
        // A cgroup's newcomers are members, reached by the next step; the processes that
        // left it are followed without a sample of the tree.
        if !ops.has_cgroup() {
            ops.sample(self.clock.now());
        }
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
        // The processes that left the cgroup (the leader among them, if it did).
        self.signal_escapees(ops, signal);
    }

    /// `signal` (and SIGCONT after a polite one) to each escapee, by identity.
    fn signal_escapees(&self, ops: &mut dyn ProcessLayer, signal: Signal) {
        for escapee in &self.escapees {
            // Through a pidfd checked against the identity: a reused pid is left alone.
            let _ = signal_identity(ops, *escapee, signal);
            if signal != Signal::KILL {
                let _ = signal_identity(ops, *escapee, Signal::CONT);
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
        self.signal_escapees(ops, signal);
        if signal != Signal::KILL {
            // A stopped process cannot act on a polite signal until it is continued.
            let _ = signal_leader(ops, id, pgid, running, Signal::CONT);
        }
    }
}

#[cfg(test)]
mod tests;
