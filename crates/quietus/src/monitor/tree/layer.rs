//! The process layer's operating-system side: how a session's tree is signalled, listed and
//! ended — by process group (plus the escapees the observer remembers and, in subreaper mode,
//! the orphans attributed to the session) or by the session's cgroup — behind the
//! [`ProcessLayer`] trait the ladder acts through (a fake one in its unit tests). How the tree
//! is started and held is the rest of `monitor::tree`.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

#[cfg(target_os = "linux")]
use super::SESSION_TAG;
use crate::pid::Pid;
use crate::process::{self, sys};
use crate::signal::Signal;
use crate::sources::children::{DescendantObserver, Identity};

/// The process operations the ladder needs: the operating system in a session
/// ([`OsProcesses`]), a fake in the unit tests. As `sources/children/` does with its
/// `ProcessSource`.
pub(in crate::monitor) trait ProcessLayer {
    /// Sends `signal` to every member of process group `pgid`.
    fn signal_group(&mut self, pgid: Pid, signal: Signal) -> io::Result<()>;
    /// Sends `signal` to the leader (by its pidfd where there is one).
    fn signal_pid(&mut self, pid: Pid, signal: Signal) -> io::Result<()>;
    /// Sends `signal` to the remembered descendant `identity` if it is still that process
    /// (through a pidfd opened and checked against the identity: a reused pid is never hit).
    fn signal_escapee(&mut self, identity: Identity, signal: Signal) -> io::Result<()>;
    /// Whether the session has a cgroup of its own: then the tree is its members.
    fn has_cgroup(&self) -> bool;
    /// Sends `signal` to every member of the session's cgroup.
    fn signal_cgroup(&mut self, signal: Signal) -> io::Result<()>;
    /// SIGKILLs every member of the session's cgroup at once (`cgroup.kill`).
    fn kill_cgroup(&mut self) -> io::Result<()>;
    /// Whether the session's cgroup still has a live member; `None` when it cannot be read.
    fn cgroup_populated(&mut self) -> Option<bool>;
    /// Live (not zombie) members of process group `pgid` other than `except`; `None` where
    /// the platform cannot enumerate them.
    fn group_members(&mut self, pgid: Pid, except: Pid) -> Option<Vec<Pid>>;
    /// Whether the process `identity` (pid and start time) still lives.
    fn alive(&mut self, identity: Identity) -> bool;
    /// Looks at the tree again: who left the group since the last look.
    fn sample(&mut self, now: Instant);
    /// Remembered descendants outside process group `pgid` (with a cgroup: outside it, the
    /// leader too) that still live (adopted orphans included), re-checked by identity.
    fn escapees(&mut self, pgid: Pid) -> Vec<Identity>;
    /// The process group process `pid` belongs to now, if it can be read.
    fn process_group_of(&mut self, pid: Pid) -> Option<Pid>;
    /// The process group of this (supervising) process: never signalled.
    fn own_group(&mut self) -> Option<Pid>;
    /// This (supervising) process's pid: never signalled.
    fn own_pid(&self) -> Pid;
}

/// The operating system's processes, seen through the session's descendant observer.
pub(in crate::monitor) struct OsProcesses {
    /// The session's id (for the orphan attribution).
    id: u64,
    /// Samples descendant CPU from the monitor thread, every check interval; remembers the
    /// escapees.
    pub(in crate::monitor) children: Option<DescendantObserver>,
    /// Subreaper mode: this session's tag.
    tag: Option<Vec<u8>>,
    /// Subreaper mode: orphans of this session adopted by this process (reaped when they die).
    adopted: Vec<Identity>,
    /// The session's cgroup, when it has one: then the tree is its members.
    pub(in crate::monitor) cgroup: Option<Arc<process::cgroup::Cgroup>>,
    /// The leader's pidfd, opened at the spawn (`None` on kernels without pidfds).
    leader: Option<(Pid, Arc<OwnedFd>)>,
    /// A pidfd per descendant signalled by pid, opened the first time and checked against its
    /// identity then (`None`: the process was gone, or the kernel has no pidfds).
    pidfds: HashMap<Identity, Option<OwnedFd>>,
}

impl OsProcesses {
    pub(in crate::monitor) fn new(
        id: u64,
        children: Option<DescendantObserver>,
        tag: Option<Vec<u8>>,
    ) -> Self {
        Self {
            id,
            children,
            tag,
            adopted: Vec::new(),
            cgroup: None,
            leader: None,
            pidfds: HashMap::new(),
        }
    }

    /// Holds the tree in `cgroup` and signals the leader `pid` through a pidfd: `pidfd` (the
    /// monitor's own, shared: one descriptor per session), else one opened now (the leader is
    /// this process's child, not reaped before the ladder is done, so its pid is its own until
    /// then).
    pub(in crate::monitor) fn hold(
        &mut self,
        pid: Pid,
        cgroup: Option<Arc<process::cgroup::Cgroup>>,
        pidfd: Option<Arc<OwnedFd>>,
    ) {
        self.cgroup = cgroup;
        match pidfd.map_or_else(|| sys::pidfd_open(pid).map(Arc::new), Ok) {
            Ok(fd) => self.leader = Some((pid, fd)),
            Err(e) => log::debug!("session {}: no pidfd for pid {pid}: {e}", self.id),
        }
    }

    /// A pidfd of `identity`, opened the first time it is asked for and kept only when the
    /// process behind it has that identity (checked after the open: a pidfd names one
    /// process, so if the start time still matches, it is that process). `Err(Unsupported)`
    /// on kernels without pidfds.
    fn pidfd(&mut self, identity: Identity) -> io::Result<Option<BorrowedFd<'_>>> {
        if !self.pidfds.contains_key(&identity) {
            let fd = match sys::pidfd_open(identity.pid) {
                Ok(fd) => Some(fd),
                Err(e) if e.kind() == io::ErrorKind::Unsupported => return Err(e),
                Err(_) => None, // gone
            };
            let checked = fd.filter(|_| {
                self.children
                    .as_mut()
                    .is_some_and(|observer| observer.alive(identity))
            });
            self.pidfds.insert(identity, checked);
        }
        Ok(self
            .pidfds
            .get(&identity)
            .and_then(|fd| fd.as_ref().map(AsFd::as_fd)))
    }

    /// Subreaper mode: finds this session's orphans among this process's children (by the
    /// rules of `process::orphans`: seen, tag, group, pipe, start time) and remembers them and
    /// their descendants as escapees; reaps the ones that died. Returns how many new ones it
    /// found. Every session publishes what its observer saw, for the others' attribution.
    pub(in crate::monitor) fn collect_adopted(&mut self) -> usize {
        let Some(observer) = self.children.as_mut() else {
            return 0;
        };
        if process::orphans::adopting() {
            process::orphans::publish_seen(self.id, observer.identities());
        }
        if self.tag.is_none() {
            return 0;
        }
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))] // counted on Linux
        let mut found = 0;
        #[cfg(target_os = "linux")]
        {
            // No session forks while this looks: every child the library started is known.
            let _gate = process::orphans::attribution_gate();
            let own_group = sys::own_process_group();
            for pid in sys::own_children() {
                if process::orphans::is_spawned(pid) {
                    continue;
                }
                let Some(process) = observer.process(pid) else {
                    continue;
                };
                let identity = Identity {
                    pid,
                    start_time: process.start_time,
                };
                if process.dead {
                    if let Some(i) = self.adopted.iter().position(|p| *p == identity) {
                        self.adopted.swap_remove(i);
                        sys::reap_if_exited(pid);
                    }
                    continue;
                }
                if self.adopted.contains(&identity) {
                    continue;
                }
                let orphan = process::orphans::Orphan {
                    pid,
                    start_time: process.start_time,
                    pgrp: process.pgrp,
                    tag: sys::environ_entry(pid, SESSION_TAG),
                    pipes: sys::stdio_pipes(pid),
                };
                if process::orphans::owner(&orphan, own_group) == Some(self.id) {
                    log::debug!("session {}: adopted orphan pid {pid}", self.id);
                    self.adopted.push(identity);
                    found += 1;
                }
            }
            // An adopted orphan's own descendants are the tree's too (they come back here
            // when it dies, but the ladder should reach them at once).
            self.adopted.retain(|orphan| observer.adopt_tree(*orphan));
        }
        found
    }
}

impl OsProcesses {
    /// After the leader exited (a zombie not reaped yet): whether its process group provably
    /// holds nothing else, so that the leftover look needs no scan of every process.
    ///
    /// It does in subreaper mode when this process has no child but the leader and the
    /// processes the library started itself (other sessions' leaders, guardians): every
    /// descendant of the leader that outlived it was handed to this process (or lives below
    /// one that was), so none lives. What this cannot see is a process that is *not* the
    /// leader's descendant and moved itself into the leader's group; only a process of the
    /// leader's own session can, which for a terminal session is the leader's own tree and for
    /// a pipe session is the session this process runs in (its shell's other jobs). Such a
    /// stranger is still ended by an idle or hard timeout's ladder, which signals the group.
    pub(in crate::monitor) fn leader_alone(&mut self, leader: Pid) -> bool {
        #[cfg(target_os = "linux")]
        {
            if !process::orphans::adopting() || self.children.is_none() {
                return false;
            }
            sys::own_children()
                .into_iter()
                .all(|pid| pid == leader || process::orphans::is_spawned(pid))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = leader;
            false
        }
    }
}

impl ProcessLayer for OsProcesses {
    fn signal_group(&mut self, pgid: Pid, signal: Signal) -> io::Result<()> {
        sys::kill_group(pgid, signal.number())
    }

    fn signal_pid(&mut self, pid: Pid, signal: Signal) -> io::Result<()> {
        match &self.leader {
            Some((leader, fd)) if *leader == pid => sys::pidfd_signal(fd.as_fd(), signal.number()),
            _ => sys::kill_pid(pid, signal.number()),
        }
    }

    fn signal_escapee(&mut self, identity: Identity, signal: Signal) -> io::Result<()> {
        match self.pidfd(identity) {
            Ok(Some(fd)) => return sys::pidfd_signal(fd, signal.number()),
            Ok(None) => return Err(io::ErrorKind::NotFound.into()),
            Err(_) => {}
        }
        // No pidfds: the identity is checked just before the signal.
        if self.alive(identity) {
            sys::kill_pid(identity.pid, signal.number())
        } else {
            Err(io::ErrorKind::NotFound.into())
        }
    }

    fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    fn signal_cgroup(&mut self, signal: Signal) -> io::Result<()> {
        match &self.cgroup {
            Some(cgroup) => cgroup.signal(signal.number()).map(|_| ()),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn kill_cgroup(&mut self) -> io::Result<()> {
        match &self.cgroup {
            Some(cgroup) => cgroup.kill(),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn cgroup_populated(&mut self) -> Option<bool> {
        self.cgroup.as_ref()?.populated().ok()
    }

    fn group_members(&mut self, pgid: Pid, except: Pid) -> Option<Vec<Pid>> {
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

    /// Remembered descendants that left the group (with a cgroup: the cgroup) and still live
    /// (re-checked by identity).
    fn escapees(&mut self, pgid: Pid) -> Vec<Identity> {
        self.collect_adopted();
        match self.children.as_mut() {
            Some(observer) if self.cgroup.is_some() => observer.outside_cgroup(),
            Some(observer) => observer.outside_group(pgid),
            None => Vec::new(),
        }
    }

    fn process_group_of(&mut self, pid: Pid) -> Option<Pid> {
        sys::process_group_of(pid)
    }

    fn own_group(&mut self) -> Option<Pid> {
        sys::own_process_group()
    }

    fn own_pid(&self) -> Pid {
        Pid::current()
    }
}
