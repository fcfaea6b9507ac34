//! The monitor's port to the operating system: everything its loop asks of processes,
//! descriptors and threads — the sleep (`monitor::wait`), the output readers waiting to
//! start, the leader (its exit, its reaping), the tree's observers (descendant CPU, sockets,
//! the diagnosis), the cgroup, the guardian — behind one trait, as the ladder's
//! [`ProcessLayer`] is. The session runs on [`OsPort`]; the loop's unit tests run on a fake
//! (`monitor/run/tests.rs`), with no process and a `MockClock`.

use std::io;
use std::os::fd::AsFd;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::ladder::{Leader, OsProcesses, ProcessLayer};
use super::reader::Reader;
use super::wait::{Sleeper, Wake};
use crate::clock::Clock;
use crate::diagnosis::Diagnosis;
use crate::pid::Pid;
use crate::process::sys::{self, Woken};
use crate::process::{self, ChildProcess};
use crate::sources::children::ChildrenSample;
use crate::sources::network::NetworkObserver;
use crate::stream::Stream;

/// The memory figures of the session's cgroup, read before it is removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Memory {
    /// `memory.peak`, in bytes.
    pub(super) peak: Option<u64>,
    /// The OOM kills `memory.events` counted.
    pub(super) oom_kills: Option<u64>,
}

impl From<(Option<u64>, Option<u64>)> for Memory {
    fn from((peak, oom_kills): (Option<u64>, Option<u64>)) -> Self {
        Memory { peak, oom_kills }
    }
}

/// What one sample of the tree showed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct TreeSample {
    /// Its descendants' CPU moved.
    pub(super) cpu: bool,
    /// Its sockets moved bytes (the network source on).
    pub(super) network: bool,
}

/// What the leader left behind when it exited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Leftovers {
    /// Live members of its group (of its cgroup, escapees included, in a cgroup).
    pub(super) members: usize,
    /// Live descendants outside its group (none counted in a cgroup: they are members).
    pub(super) escapees: usize,
    /// The cgroup's memory figures, read when it was found empty and removed.
    pub(super) memory: Option<Memory>,
    /// The leftovers named (read before they are ended; at most a few dozen).
    pub(super) named: Vec<crate::outcome::Leftover>,
}

impl Leftovers {
    /// How many processes there are to end.
    pub(super) fn count(&self) -> usize {
        self.members + self.escapees
    }
}

/// A reader that could not be started: its stream is lost.
#[derive(Debug)]
pub(super) struct ReaderLost {
    pub(super) stream: Stream,
    pub(super) error: io::Error,
}

/// What the monitor's loop asks of the operating system.
pub(super) trait Port {
    /// Sleeps until `wake`, a message, the leader's exit (unless `leader_exited`), or a
    /// waiting reader's pipe being readable.
    fn sleep(&mut self, clock: &Clock, wake: Wake, leader_exited: bool) -> Woken;
    /// Starts the reader of `slot` (its pipe is readable); nothing when it has started.
    fn start_reader(&mut self, slot: usize) -> Result<(), ReaderLost>;
    /// The run is over: the readers not started yet start now, to take what comes next.
    fn start_readers_left(&mut self);
    /// Whether the leader has exited (not reaped; asked before the first sample).
    fn leader_exited(&mut self) -> bool;
    /// Reaps the leader (once): waits for it when it `exited`, else only looks.
    fn reap(&mut self, exited: bool) -> Option<ExitStatus>;
    /// The processes the ladder acts on.
    fn layer(&mut self) -> &mut dyn ProcessLayer;
    /// Whether the tree's descendants are observed (sampled).
    fn observes_tree(&self) -> bool;
    /// The first samples of the tree's CPU and sockets, the later ones' baseline.
    fn baseline(&mut self, now: Instant);
    /// Samples the tree (adopted orphans collected first); `None` when it is not observed.
    fn sample_tree(&mut self, now: Instant) -> Option<TreeSample>;
    /// The last sample of the descendants, for a stale report.
    fn last_children(&self) -> Option<ChildrenSample>;
    /// Whether the tree cannot be seen at all (no cgroup to read, no `/proc` of this pid
    /// namespace to walk): then a signalled tree is never confirmed gone.
    fn tree_unseen(&self) -> bool;
    /// One look at the tree as the last sample found it, classified; `recent`: how long ago
    /// the tree's last activity was, with the lag of the sampled sources; `redrawing`: its
    /// output went on showing nothing new since
    /// ([`diagnose_tree`](crate::diagnosis::diagnose_tree)).
    fn diagnose(&self, recent: Option<Duration>, redrawing: bool) -> Diagnosis;
    /// How many bytes process `pid` has read (`/proc/PID/io`), for the input-wait rule.
    fn read_count(&self, pid: Pid) -> Option<u64>;
    /// The leader exited: who it left behind (the cgroup removed when it is empty).
    fn leftovers(&mut self, now: Instant) -> Leftovers;
    /// The run is over: the cgroup's figures read (unless read at the leader's exit) and the
    /// cgroup removed, its members handed over first when the caller `keep`s them.
    fn let_go_of_cgroup(&mut self, keep: bool) -> Option<Memory>;
    /// The run is over: the session's place in the guardian is given up.
    fn release_guardian(&mut self);
    /// The session is over for the orphan attribution.
    fn session_over(&mut self);
}

/// The operating system's side of one session.
pub(super) struct OsPort {
    pub(super) id: u64,
    pub(super) pid: Pid,
    /// What the monitor sleeps on: messages poke it, the leader's exit wakes it, and so do
    /// the output pipes whose readers have not started.
    pub(super) sleeper: Sleeper,
    /// Each stream's reader (by slot) until it starts: once its pipe has something to read.
    pub(super) readers: [Option<Reader>; 2],
    /// The child (leader of its group), handed over when the monitor starts.
    pub(super) leader: Leader,
    /// This session's place in the process's guardian, released when the run is over.
    pub(super) guardian: Option<process::Guardian>,
    /// The processes the ladder acts on, the descendant observer, the cgroup.
    pub(super) processes: OsProcesses,
    /// The network source (on, and able to observe).
    pub(super) network: Option<NetworkObserver>,
}

impl OsPort {
    /// The monitor owns the child from here on.
    pub(super) fn adopt(&mut self, child: ChildProcess) {
        self.leader.child = Some(child);
    }

    /// Which members the leader left: none known when the cgroup is found empty and no process
    /// seen in it left it.
    fn members_left(&mut self, now: Instant) -> Leftovers {
        let mut left = Leftovers::default();
        // In a cgroup, its removal says in one call that no process is left in it (the leader
        // is a zombie, no member); the members seen that left it are looked at by identity
        // (issue 51 item 2), no scan of every process. What it measured is read first.
        let alone = match &self.processes.cgroup {
            Some(cgroup) => {
                left.memory = Some(cgroup.memory().into());
                let empty = cgroup.populated().is_ok_and(|populated| !populated);
                let cgroup = cgroup.clone();
                if empty {
                    // One look at the (empty) cgroup: who was a member at the last sample
                    // and is now outside it.
                    self.processes.sample(now);
                }
                empty && self.processes.escapees(self.pid).is_empty() && {
                    // Removed now that nothing can come back to it (else at the session's end).
                    let _ = cgroup.remove_if_empty();
                    true
                }
            }
            None => self.processes.leader_alone(self.pid),
        };
        if alone {
            return left; // no scan of every process needed
        }
        self.processes.sample(now); // who is left, now that the leader is gone
        let members = match &self.processes.cgroup {
            // Every process of the tree, escapees included.
            Some(cgroup) => cgroup.members().unwrap_or_default(),
            None => self
                .processes
                .group_members(self.pid, self.pid)
                .unwrap_or_default(),
        };
        // Outside the group, or outside the cgroup (members that left it).
        let escaped: Vec<Pid> = (self.processes.escapees(self.pid).iter())
            .map(|e| e.pid)
            .collect();
        left.members = members.len();
        left.escapees = escaped.len();
        left.named = crate::outcome::Leftover::read_all(members.into_iter().chain(escaped));
        left
    }
}

impl Port for OsPort {
    fn sleep(&mut self, clock: &Clock, wake: Wake, leader_exited: bool) -> Woken {
        let pipes = self
            .readers
            .each_ref()
            .map(|reader| reader.as_ref().map(|reader| reader.fd.as_fd()));
        self.sleeper.sleep(clock, wake, leader_exited, pipes)
    }

    /// On a thread of its own when the pipe holds bytes; here when it is at its end with
    /// nothing left (the reading is then one `read` of nothing, and its end-of-stream steps).
    fn start_reader(&mut self, slot: usize) -> Result<(), ReaderLost> {
        let Some(reader) = self.readers[slot].take() else {
            return Ok(());
        };
        if sys::unread_bytes(&reader.fd).is_ok_and(|n| n == 0) {
            (reader.work)();
            return Ok(());
        }
        let stream = reader.stream;
        reader.start().map_err(|error| ReaderLost { stream, error })
    }

    fn start_readers_left(&mut self) {
        for reader in self.readers.iter_mut().filter_map(Option::take) {
            let stream = reader.stream;
            if let Err(e) = reader.start() {
                log::debug!(
                    "session {}: the {} is not read on: {e}",
                    self.id,
                    stream.name()
                );
            }
        }
    }

    fn leader_exited(&mut self) -> bool {
        sys::has_exited_no_reap(self.pid)
    }

    fn reap(&mut self, exited: bool) -> Option<ExitStatus> {
        self.leader.exited = exited;
        self.leader.reap(self.id, self.pid);
        self.leader.status
    }

    fn layer(&mut self) -> &mut dyn ProcessLayer {
        &mut self.processes
    }

    fn observes_tree(&self) -> bool {
        self.processes.children.is_some()
    }

    fn baseline(&mut self, now: Instant) {
        if let Some(observer) = self.processes.children.as_mut() {
            observer.sample(now);
            if let Some(network) = self.network.as_mut() {
                network.sample(now, observer.pids());
            }
        }
    }

    fn sample_tree(&mut self, now: Instant) -> Option<TreeSample> {
        self.processes.collect_adopted();
        let cgroup = self.processes.has_cgroup();
        let observer = self.processes.children.as_mut()?;
        let cpu = observer.sample(now).active;
        let network = self
            .network
            .as_mut()
            .is_some_and(|network| network.sample(now, observer.pids()).active);
        // The guardian knows the tree's group or cgroup only: it is told of every process seen
        // outside it, so that a SIGKILLed supervisor leaves none of them (in a cgroup: the
        // members that left it, issue 51). The leader leads the group.
        if let Some(guardian) = self.guardian.as_mut() {
            let outside = if cgroup {
                observer.outside_cgroup()
            } else {
                observer.outside_group(self.pid)
            };
            if !outside.is_empty() {
                guardian.escapees(outside.into_iter().map(|e| (e.pid, e.start_time)));
            }
        }
        Some(TreeSample { cpu, network })
    }

    fn last_children(&self) -> Option<ChildrenSample> {
        self.processes.children.as_ref().map(|o| o.last())
    }

    fn tree_unseen(&self) -> bool {
        self.processes
            .children
            .as_ref()
            .is_some_and(|c| c.blind().is_some())
    }

    fn diagnose(&self, recent: Option<Duration>, redrawing: bool) -> Diagnosis {
        let root = [self.pid];
        let pids = self
            .processes
            .children
            .as_ref()
            .map_or(&root[..], |o| o.pids());
        let pids = if pids.is_empty() { &root[..] } else { pids };
        let network = self.network.as_ref();
        crate::diagnosis::diagnose_tree(
            pids,
            &|inode| network.and_then(|n| n.peer(inode)),
            recent,
            redrawing,
        )
    }

    fn read_count(&self, pid: Pid) -> Option<u64> {
        sys::read_count(pid)
    }

    fn leftovers(&mut self, now: Instant) -> Leftovers {
        self.members_left(now)
    }

    /// Leftovers the caller keeps move to this process's own cgroup first; anything else
    /// still in it (an unproven termination) is killed by the removal.
    fn let_go_of_cgroup(&mut self, keep: bool) -> Option<Memory> {
        let cgroup = self.processes.cgroup.take()?;
        // Read before the removal at the leader's exit, if there was one.
        let memory = (!cgroup.is_removed()).then(|| cgroup.memory().into());
        if keep
            && cgroup.populated().unwrap_or(false)
            && let Err(e) = cgroup.release_members()
        {
            log::warn!("session {}: cannot hand over the leftovers: {e}", self.id);
        }
        if let Err(e) = cgroup.remove() {
            log::error!(
                "session {}: cannot remove the cgroup {}: {e}",
                self.id,
                cgroup.path().display()
            );
        }
        memory
    }

    fn release_guardian(&mut self) {
        if let Some(guardian) = self.guardian.take() {
            guardian.release();
        }
    }

    fn session_over(&mut self) {
        super::tree::end_session(self.id);
    }
}
