//! Subreaper mode: which session an orphan re-parented to this process belongs to.
//!
//! A process re-parented to the supervisor belongs to a supervised tree whatever its
//! environment: it was orphaned below this process, and only the sessions' trees live below it
//! (besides the host program's own children). With one session (the `quietus` command)
//! every adopted orphan is that session's. With several, an orphan is attributed by the first
//! rule that applies, strongest evidence first:
//!
//! 1. **seen**: a session's descendant observer saw it (pid + start time) in its tree before
//!    it was re-parented: that session's;
//! 2. **tag**: it carries a session's `QUIETUS_SESSION` entry in its environment;
//! 3. **group**: its process group is a session's leader's (a group id cannot be reused while
//!    the group lives);
//! 4. **pipe**: one of its standard streams is one of a session's output pipes;
//! 5. **time**: it started (start time, clock ticks since boot) while exactly one session of
//!    this process was running — after that session's leader started and before it ended —
//!    and it is not in the supervising process's own process group (where the host program's
//!    own children are).
//!
//! An orphan attributed to a session that has ended is left alone; one no rule attributes is
//! left alone (and not reaped). Limits: rule 5 cannot tell a session's untagged daemon from an
//! orphan of the host program's own children, or from a child the host starts itself in a group
//! or session of its own, when exactly one session runs at the time; and an untagged orphan
//! that nobody saw, holding no session pipe and started while two sessions ran, is nobody's.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::pid::Pid;

/// A pipe, as `(device, inode)`.
pub(crate) type PipeId = (u64, u64);

/// An orphan of this process, as the rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Orphan {
    pub(crate) pid: Pid,
    /// Clock ticks since boot.
    pub(crate) start_time: u64,
    /// `None` when its group lies outside this pid namespace.
    pub(crate) pgrp: Option<Pid>,
    /// Its `QUIETUS_SESSION=…` environment entry, if any.
    pub(crate) tag: Option<Vec<u8>>,
    /// The pipes among its standard streams.
    pub(crate) pipes: Vec<PipeId>,
}

/// One session of this process.
#[derive(Debug, Clone, Default)]
struct Entry {
    id: u64,
    /// `None` until it is forked.
    leader: Option<Pid>,
    tag: Option<Vec<u8>>,
    /// The leader's start time (clock ticks since boot).
    started: u64,
    /// When the session ended (clock ticks since boot); `None` while it runs.
    ended: Option<u64>,
    pipes: Vec<PipeId>,
    /// The identities (pid, start time) its observer knows.
    seen: HashSet<(Pid, u64)>,
}

static SESSIONS: crate::sync::Mutex<Vec<Entry>> = crate::sync::Mutex::new(Vec::new());

/// Pids of this process's own children started by the library (leaders, guardians): never
/// orphans, never reaped by anybody but their owner.
static SPAWNED: crate::sync::Mutex<Vec<Pid>> = crate::sync::Mutex::new(Vec::new());

/// Whether some session made this process a subreaper (only then is there anything to
/// attribute, and the observers publish what they saw).
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// This process became a child subreaper.
pub(crate) fn set_adopting() {
    ADOPTING.store(true, Ordering::Release);
}

/// Whether orphans come back to this process (because a session asked for it).
pub(crate) fn adopting() -> bool {
    ADOPTING.load(Ordering::Acquire)
}

/// `pid` is a child the library started itself.
pub(crate) fn spawned(pid: Pid) {
    SPAWNED.lock().push(pid);
}

/// Whether `pid` is a child the library started itself (not an orphan).
pub(crate) fn is_spawned(pid: Pid) -> bool {
    SPAWNED.lock().contains(&pid)
}

/// `pid`, a child the library started itself, has been reaped.
pub(crate) fn reaped(pid: Pid) {
    SPAWNED.lock().retain(|p| *p != pid);
}

/// Held while a child of the library is forked and recorded ([`spawned`]), so that nobody
/// takes it for an orphan in the meantime.
static GATE: crate::sync::RwLock<()> = crate::sync::RwLock::new(());

/// Hold while forking a child of the library and until it is recorded with [`spawned`] (and its
/// session with [`register`] / [`set_leader`]).
pub(crate) fn spawn_gate() -> std::sync::RwLockWriteGuard<'static, ()> {
    GATE.write()
}

/// Hold while looking at this process's children for orphans: no child of the library is
/// between its fork and [`spawned`] meanwhile.
pub(crate) fn attribution_gate() -> std::sync::RwLockReadGuard<'static, ()> {
    GATE.read()
}

/// A session is about to fork its leader, now (`started`, ticks since boot, taken before the
/// fork); it tags its child with `tag`.
pub(crate) fn register(id: u64, started: u64, tag: Option<Vec<u8>>) {
    SESSIONS.lock().push(Entry {
        id,
        leader: None,
        tag,
        started,
        ended: None,
        pipes: Vec::new(),
        seen: HashSet::new(),
    });
}

/// Session `id`'s leader is `pid`.
pub(crate) fn set_leader(id: u64, pid: Pid) {
    if let Some(entry) = SESSIONS.lock().iter_mut().find(|e| e.id == id) {
        entry.leader = Some(pid);
    }
}

/// Session `id`'s output pipes.
pub(crate) fn set_pipes(id: u64, pipes: Vec<PipeId>) {
    if let Some(entry) = SESSIONS.lock().iter_mut().find(|e| e.id == id) {
        entry.pipes = pipes;
    }
}

/// What session `id`'s observer knows now.
pub(crate) fn publish_seen(id: u64, seen: impl Iterator<Item = (Pid, u64)>) {
    let mut sessions = SESSIONS.lock();
    if let Some(entry) = sessions.iter_mut().find(|e| e.id == id) {
        entry.seen.clear();
        entry.seen.extend(seen);
    }
}

/// Session `id` ended at `now` (ticks since boot; `None`: unknown, taken as "just now" by the
/// next session's start). Forgets the ended sessions no running session overlaps.
pub(crate) fn end(id: u64, now: Option<u64>) {
    let mut sessions = SESSIONS.lock();
    if let Some(entry) = sessions.iter_mut().find(|e| e.id == id) {
        entry.ended = Some(now.unwrap_or(u64::MAX));
        entry.seen.clear();
    }
    prune(&mut sessions);
}

/// Forgets the ended sessions no running session overlaps: an ended session still matters
/// while an orphan could be mistaken for a running one's, that is while their lifetimes overlap.
fn prune(sessions: &mut Vec<Entry>) {
    let first_running = sessions
        .iter()
        .filter(|e| e.ended.is_none())
        .map(|e| e.started)
        .min();
    sessions.retain(|e| match (e.ended, first_running) {
        (None, _) => true,
        (Some(ended), Some(first)) => ended >= first,
        (Some(_), None) => false,
    });
}

/// The session `orphan` belongs to, if any (see the module docs); `own_group` is the
/// supervising process's process group (`None`: outside this pid namespace).
pub(crate) fn owner(orphan: &Orphan, own_group: Option<Pid>) -> Option<u64> {
    attribute(&SESSIONS.lock(), orphan, own_group)
}

fn attribute(sessions: &[Entry], orphan: &Orphan, own_group: Option<Pid>) -> Option<u64> {
    let identity = (orphan.pid, orphan.start_time);
    if let Some(e) = sessions.iter().find(|e| e.seen.contains(&identity)) {
        return Some(e.id);
    }
    if let Some(tag) = &orphan.tag
        && let Some(e) = sessions.iter().find(|e| e.tag.as_ref() == Some(tag))
    {
        return Some(e.id);
    }
    if let Some(e) = sessions
        .iter()
        .find(|e| e.leader.is_some_and(|l| l.get() > 1) && e.leader == orphan.pgrp)
    {
        return Some(e.id);
    }
    if let Some(e) = sessions
        .iter()
        .find(|e| e.pipes.iter().any(|p| orphan.pipes.contains(p)))
    {
        return Some(e.id);
    }
    if orphan.pgrp == own_group {
        return None;
    }
    let mut running_then = sessions.iter().filter(|e| {
        e.started <= orphan.start_time && e.ended.is_none_or(|end| orphan.start_time <= end)
    });
    match (running_then.next(), running_then.next()) {
        (Some(e), None) => Some(e.id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(n: u32) -> Pid {
        Pid::new(n).expect("a pid")
    }

    fn entry(id: u32, started: u64, ended: Option<u64>) -> Entry {
        Entry {
            id: u64::from(id),
            leader: Some(pid(1000 + id)),
            tag: Some(format!("QUIETUS_SESSION=9.{id}").into_bytes()),
            started,
            ended,
            pipes: vec![(12, 500 + u64::from(id))],
            seen: HashSet::new(),
        }
    }

    fn orphan(start_time: u64) -> Orphan {
        Orphan {
            pid: pid(4242),
            start_time,
            pgrp: Some(pid(4242)),
            tag: None,
            pipes: Vec::new(),
        }
    }

    const OWN_GROUP: Option<Pid> = Pid::new(77);

    #[test]
    fn one_running_session_owns_an_untagged_orphan_started_during_its_run() {
        let sessions = [entry(1, 100, None)];
        assert_eq!(attribute(&sessions, &orphan(150), OWN_GROUP), Some(1));
        assert_eq!(attribute(&sessions, &orphan(100), OWN_GROUP), Some(1));
        // Started before the session: not its.
        assert_eq!(attribute(&sessions, &orphan(99), OWN_GROUP), None);
        // In the supervisor's own group: the host's own children live there.
        let mut own = orphan(150);
        own.pgrp = OWN_GROUP;
        assert_eq!(attribute(&sessions, &own, OWN_GROUP), None);
    }

    #[test]
    fn two_sessions_running_at_the_orphans_start_make_it_nobodys() {
        // 2 ended since, but it ran when the orphan started: ambiguous.
        let sessions = [entry(1, 100, None), entry(2, 120, Some(200))];
        assert_eq!(attribute(&sessions, &orphan(150), OWN_GROUP), None);
        // Started after 2 ended: only 1 ran.
        assert_eq!(attribute(&sessions, &orphan(250), OWN_GROUP), Some(1));
        // Started before 2 began: only 1 ran.
        assert_eq!(attribute(&sessions, &orphan(110), OWN_GROUP), Some(1));
        // Only an ended session ran then: its, so no running session takes it.
        let sessions = [entry(1, 300, None), entry(2, 120, Some(200))];
        assert_eq!(attribute(&sessions, &orphan(150), OWN_GROUP), Some(2));
    }

    #[test]
    fn stronger_evidence_wins_over_time() {
        let mut sessions = [entry(1, 100, None), entry(2, 120, None)];
        let mut o = orphan(150);
        assert_eq!(attribute(&sessions, &o, OWN_GROUP), None);
        o.pipes = vec![(12, 502)];
        assert_eq!(attribute(&sessions, &o, OWN_GROUP), Some(2), "pipe");
        o.pgrp = Some(pid(1001));
        assert_eq!(attribute(&sessions, &o, OWN_GROUP), Some(1), "group");
        o.tag = sessions[1].tag.clone();
        assert_eq!(attribute(&sessions, &o, OWN_GROUP), Some(2), "tag");
        sessions[0].seen.insert((pid(4242), 150));
        assert_eq!(attribute(&sessions, &o, OWN_GROUP), Some(1), "seen");
        // The same pid with another start time was not seen.
        let mut reused = orphan(160);
        reused.tag = Some(b"QUIETUS_SESSION=other.1".to_vec()); // a foreign tag: no evidence
        assert_eq!(attribute(&sessions, &reused, OWN_GROUP), None);
    }

    #[test]
    fn ended_sessions_are_forgotten_once_no_running_session_overlaps_them() {
        let mut sessions = vec![entry(1, 100, Some(200)), entry(2, 150, None)];
        prune(&mut sessions);
        assert_eq!(sessions.len(), 2, "1 overlaps 2");
        let mut sessions = vec![entry(1, 100, Some(140)), entry(2, 150, None)];
        prune(&mut sessions);
        assert_eq!(sessions.iter().map(|e| e.id).collect::<Vec<_>>(), vec![2]);
        let mut sessions = vec![entry(1, 100, Some(140))];
        prune(&mut sessions);
        assert!(sessions.is_empty(), "nothing runs");
    }
}
