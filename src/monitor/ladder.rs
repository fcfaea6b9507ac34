//! The kill ladder: signals the child's process group step by step (SIGCONT after each polite
//! step, SIGKILL at the end), reaches the escapees (descendants that left the group, orphans
//! adopted in subreaper mode) by pid, and tells when the whole tree is gone. It acts through a
//! small [`ProcessLayer`], so its rules are unit-tested with a fake one. Also the leader's
//! bookkeeping: the supervised children of this process, and reaping the leader.

use std::io;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{POLL_MAX, POLL_MIN, Wake};
use crate::clock::Clock;
use crate::config::{KillStep, Signal};
use crate::events::{Emitter, Event};
use crate::outcome::HumanDuration;
use crate::process::sys;
use crate::signals::children::{DescendantObserver, Identity};

/// Pids of the supervised children of this process: never reaped by the subreaper janitor
/// (their `Child` reaps them).
pub(super) static LEADERS: parking_lot::Mutex<Vec<i32>> = parking_lot::Mutex::new(Vec::new());

/// The process operations the ladder needs: the operating system in a session
/// ([`OsProcesses`]), a fake in the unit tests. As `signals/children.rs` does with its
/// `ProcessSource`.
pub(crate) trait ProcessLayer {
    /// Sends `signal` to every member of process group `pgid`.
    fn signal_group(&mut self, pgid: i32, signal: i32) -> io::Result<()>;
    /// Sends `signal` to one process.
    fn signal_pid(&mut self, pid: i32, signal: i32) -> io::Result<()>;
    /// Live (not zombie) members of process group `pgid` other than `except`; `None` where
    /// the platform cannot enumerate them.
    fn group_members(&mut self, pgid: i32, except: i32) -> Option<Vec<i32>>;
    /// Whether the process `identity` (pid and start time) still lives.
    fn alive(&mut self, identity: Identity) -> bool;
    /// Looks at the tree again: who left the group since the last look.
    fn sample(&mut self, now: Instant);
    /// Remembered descendants outside process group `pgid` that still live (adopted orphans
    /// included), re-checked by identity.
    fn escapees(&mut self, pgid: i32) -> Vec<Identity>;
    /// The process group of this (supervising) process: never signalled.
    fn own_group(&mut self) -> i32;
    /// This (supervising) process's pid: never signalled.
    fn own_pid(&self) -> i32;
}

/// Sends `signal` to group `pgid`, refusing a pgid <= 1 and our own group (as `sys` does too:
/// the rule is the ladder's, and tested here).
fn signal_group(ops: &mut dyn ProcessLayer, pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 || pgid == ops.own_group() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    ops.signal_group(pgid, signal)
}

/// Sends `signal` to one process, refusing pid <= 1 and ourselves.
fn signal_pid(ops: &mut dyn ProcessLayer, pid: i32, signal: i32) -> io::Result<()> {
    if pid <= 1 || pid == ops.own_pid() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {pid}"),
        ));
    }
    ops.signal_pid(pid, signal)
}

/// The operating system's processes, seen through the session's descendant observer.
pub(super) struct OsProcesses {
    /// Samples descendant CPU from the monitor thread, every check interval; remembers the
    /// escapees.
    pub(super) children: Option<DescendantObserver>,
    /// Subreaper mode: this session's tag.
    tag: Option<Vec<u8>>,
    /// Subreaper mode: orphans of this session adopted by this process (reaped when they die).
    adopted: Vec<i32>,
}

impl OsProcesses {
    pub(super) fn new(children: Option<DescendantObserver>, tag: Option<Vec<u8>>) -> Self {
        Self {
            children,
            tag,
            adopted: Vec::new(),
        }
    }

    /// Subreaper mode: finds this session's orphans among this process's children (by their
    /// tag) and remembers them as escapees; reaps the ones that died. Returns how many new
    /// ones it found.
    pub(super) fn collect_adopted(&mut self) -> usize {
        let (Some(tag), Some(observer)) = (self.tag.as_ref(), self.children.as_mut()) else {
            return 0;
        };
        let mut found = 0;
        #[cfg(target_os = "linux")]
        for pid in sys::own_children() {
            if LEADERS.lock().contains(&pid) {
                continue;
            }
            let Some(process) = observer.process(pid) else {
                continue;
            };
            if process.dead {
                if let Some(i) = self.adopted.iter().position(|p| *p == pid) {
                    self.adopted.swap_remove(i);
                    sys::reap_if_exited(pid);
                }
            } else if !self.adopted.contains(&pid) && sys::environ_has(pid, tag) {
                observer.adopt(process);
                self.adopted.push(pid);
                found += 1;
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (tag, observer);
        found
    }
}

impl ProcessLayer for OsProcesses {
    fn signal_group(&mut self, pgid: i32, signal: i32) -> io::Result<()> {
        sys::kill_group(pgid, signal)
    }

    fn signal_pid(&mut self, pid: i32, signal: i32) -> io::Result<()> {
        sys::kill_pid(pid, signal)
    }

    fn group_members(&mut self, pgid: i32, except: i32) -> Option<Vec<i32>> {
        sys::group_members(pgid, except)
    }

    fn alive(&mut self, identity: Identity) -> bool {
        self.children
            .as_mut()
            .is_some_and(|observer| observer.alive(identity))
    }

    fn sample(&mut self, now: Instant) {
        if let Some(observer) = self.children.as_mut() {
            observer.sample(now);
        }
    }

    /// Remembered descendants that left the group and still live (re-checked by identity).
    fn escapees(&mut self, pgid: i32) -> Vec<Identity> {
        self.collect_adopted();
        match self.children.as_mut() {
            Some(observer) => observer.outside_group(pgid),
            None => Vec::new(),
        }
    }

    fn own_group(&mut self) -> i32 {
        sys::own_process_group()
    }

    fn own_pid(&self) -> i32 {
        std::process::id() as i32
    }
}

/// The supervised child, leader of its process group.
pub(super) struct Leader {
    /// The child, owned from the start of `run` until the end.
    pub(super) child: Option<Child>,
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
    pub(super) fn reap(&mut self, id: u64, pid: i32) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        LEADERS.lock().retain(|p| *p != pid);
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
    pgid: i32,
    kill_confirm_timeout: Duration,
    clock: Arc<dyn Clock>,
    emitter: Arc<Emitter>,
    /// The steps under way, once started.
    steps: Option<Steps>,
    /// Descendants outside the process group that the ladder signals by pid.
    pub(super) escapees: Vec<Identity>,
    pub(super) signals_sent: Vec<Signal>,
    pub(super) escalated: bool,
    pub(super) leftovers_killed: usize,
    pub(super) unproven: bool,
    pub(super) kill_latency: Option<Duration>,
    pub(super) started: Option<Instant>,
    pub(super) time: Option<Duration>,
}

impl Ladder {
    pub(super) fn new(
        id: u64,
        pgid: i32,
        kill_confirm_timeout: Duration,
        clock: Arc<dyn Clock>,
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
            unproven: false,
            kill_latency: None,
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
    ) {
        let now = self.clock.now();
        self.escapees = ops.escapees(self.pgid);
        self.steps = Some(Steps {
            steps,
            next: 0,
            deadline: now,
            poll: POLL_MIN,
        });
        self.started = Some(now);
        // Send the first step at once.
        self.advance(ops, now);
        if let Some(due) = due {
            self.kill_latency = Some(self.clock.now().saturating_duration_since(due));
        }
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
    fn tree_gone(&mut self, ops: &mut dyn ProcessLayer, leader_exited: bool) -> bool {
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
                let _ = signal_pid(ops, e.pid, signal.number());
                if signal != Signal::KILL {
                    let _ = signal_pid(ops, e.pid, sys::SIGCONT);
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
            self.advance(ops, now);
        }
        let ladder = self.steps.as_mut()?;
        // Nothing tells us when group members or escapees die, or when a descendant escapes
        // during the grace: look again, backing off from 5 ms to 200 ms.
        let poll = ladder.poll;
        ladder.poll = (poll * 2).min(POLL_MAX);
        Some(Wake {
            at: ladder.deadline,
            poll: Some(poll),
        })
    }

    /// Sends the next step of the ladder.
    fn advance(&mut self, ops: &mut dyn ProcessLayer, now: Instant) {
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
        match signal_group(ops, self.pgid, step.signal.number()) {
            Ok(()) => log::debug!(
                "session {}: sent {} to group {}",
                self.id,
                step.signal,
                self.pgid
            ),
            Err(e) => log::debug!(
                "session {}: {} to group {}: {e}",
                self.id,
                step.signal,
                self.pgid
            ),
        }
        for escapee in &self.escapees {
            // Identity re-checked just before the signal: a reused pid is left alone.
            if ops.alive(*escapee) {
                let _ = signal_pid(ops, escapee.pid, step.signal.number());
                if step.signal != Signal::KILL {
                    let _ = signal_pid(ops, escapee.pid, sys::SIGCONT);
                }
            }
        }
        if step.signal != Signal::KILL {
            // A stopped process cannot act on a polite signal until it is continued.
            let _ = signal_group(ops, self.pgid, sys::SIGCONT);
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
}
