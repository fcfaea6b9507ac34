//! What a diagnosis reads on Linux: a snapshot of each process, and what its sockets are
//! (the kernel's socket tables, the other end of a Unix socket and who holds it).

#[allow(clippy::wildcard_imports)]
use super::*;

/// One snapshot of each of the processes `pids` (at most [`MAX_PROCESSES`], within
/// [`BUDGET`]: those left are marked not read).
#[cfg(target_os = "linux")]
pub(super) fn snapshots(pids: &[Pid]) -> Vec<ProcSnap> {
    let start = std::time::Instant::now();
    let mut snaps = Vec::with_capacity(pids.len().min(MAX_PROCESSES));
    for &pid in pids.iter().take(MAX_PROCESSES) {
        if start.elapsed() >= BUDGET {
            snaps.push(ProcSnap {
                error: Some(ReadingProblem::OutOfTime),
                ..ProcSnap::empty(pid)
            });
            continue;
        }
        snaps.push(crate::process::sys::snapshot::snapshot(pid));
    }
    snaps
}

/// The sockets the processes of `snaps` hold, by inode, as one socket-diagnostics dump
/// describes them (TCP, then UDP, then Unix for the rest).
#[cfg(target_os = "linux")]
pub(super) fn describe_sockets(snaps: &[ProcSnap]) -> std::collections::HashMap<u64, Sock> {
    use std::collections::{HashMap, HashSet};

    use crate::process::sys;
    let held: HashSet<u64> = snaps
        .iter()
        .flat_map(|s| s.fds.iter())
        .filter_map(|(_, link)| sys::socket_inode(link.as_bytes()))
        .collect();
    let mut socks: HashMap<u64, Sock> = HashMap::new();
    if held.is_empty() {
        return socks;
    }
    let Ok(mut diag) = sys::sockdiag::SockDiag::open() else {
        return socks;
    };
    let mut tcp = HashMap::new();
    let _ = diag.tcp_sockets(&mut |inode| held.contains(&inode), &mut tcp);
    for (inode, s) in tcp {
        let (peer, state, last_data) = (s.peer, s.state, s.last_data);
        socks.insert(
            inode,
            Sock::Tcp {
                peer,
                local: Some(s.local),
                state,
                last_data,
                unanswered: s.received == 0 && s.acked > 0,
            },
        );
    }
    let mut udp = HashMap::new();
    let _ = diag.udp_sockets(
        &mut |inode| held.contains(&inode) && !socks.contains_key(&inode),
        &mut udp,
    );
    for (inode, s) in udp {
        socks.insert(
            inode,
            Sock::Udp {
                peer: s.peer,
                local: s.local,
            },
        );
    }
    if held.iter().any(|inode| !socks.contains_key(inode)) {
        describe_unix(&mut diag, snaps, &held, &mut socks);
    }
    socks
}

/// The Unix sockets of `held` into `socks`: each with its path (its own, or the listener's of
/// its other end) and the process outside the tree holding its other end.
#[cfg(target_os = "linux")]
fn describe_unix(
    diag: &mut crate::process::sys::sockdiag::SockDiag,
    snaps: &[ProcSnap],
    held: &std::collections::HashSet<u64>,
    socks: &mut std::collections::HashMap<u64, Sock>,
) {
    use std::collections::{HashMap, HashSet};
    // Every Unix socket: a connected client's socket has no path of its own, its
    // other end (the accepted socket) has the listener's.
    let mut unix = HashMap::new();
    let _ = diag.unix_sockets(&mut |_| true, &mut unix);
    // The other ends no process of the tree holds: who does, outside it.
    let outside: HashSet<u64> = held
        .iter()
        .filter_map(|inode| unix.get(inode)?.peer)
        .filter(|peer| !held.contains(peer))
        .collect();
    let tree: HashSet<Pid> = snaps.iter().map(|s| s.pid).collect();
    let holders = holders_of(&outside, &tree);
    for inode in held {
        let Some(s) = unix.get(inode) else { continue };
        let path = s
            .path
            .clone()
            .or_else(|| s.peer.and_then(|p| unix.get(&p)?.path.clone()));
        let holder = s.peer.and_then(|p| holders.get(&p).cloned());
        socks.insert(
            *inode,
            Sock::Unix {
                path,
                peer: s.peer,
                holder,
            },
        );
    }
}

/// The processes outside `tree` holding the sockets `inodes`, by a walk of `/proc` (bounded
/// in time; processes of other users are not readable, and are not found).
#[cfg(target_os = "linux")]
fn holders_of(
    inodes: &std::collections::HashSet<u64>,
    tree: &std::collections::HashSet<Pid>,
) -> std::collections::HashMap<u64, (Pid, String)> {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};
    /// What earlier walks found (or did not) for a socket: the input-wait rule diagnoses a
    /// quiet tree several times a second, and a peer held by another user's process (a
    /// daemon running as root) is never found: one walk per socket every 5 s at most.
    type Known = HashMap<u64, (std::time::Instant, Option<(Pid, String)>)>;
    static KNOWN: Mutex<Option<Known>> = Mutex::new(None);
    const AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
    let mut found = HashMap::new();
    if inodes.is_empty() {
        return found;
    }
    let start = std::time::Instant::now();
    let mut wanted = inodes.clone();
    {
        let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
        let known = known.get_or_insert_with(HashMap::new);
        known.retain(|_, (at, _)| start.duration_since(*at) < AGAIN_AFTER);
        for inode in inodes {
            if let Some((_, holder)) = known.get(inode) {
                wanted.remove(inode);
                if let Some(holder) = holder {
                    found.insert(*inode, holder.clone());
                }
            }
        }
    }
    if wanted.is_empty() {
        return found;
    }
    let before = found.len();
    // This process first (a caller serving its own tree), then every process in pid order.
    let all = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    let others = all.filter_map(|entry| Pid::parse(entry.file_name().to_str()?));
    let me = Pid::current();
    for pid in std::iter::once(me).chain(others.filter(|p| *p != me)) {
        if found.len() - before == wanted.len() || start.elapsed() >= HOLDER_BUDGET {
            break;
        }
        if tree.contains(&pid) {
            continue;
        }
        let mut hits = Vec::new();
        let _ = crate::process::sys::fd_links(pid, &mut |_, link| {
            if let Some(inode) = crate::process::sys::socket_inode(link)
                && wanted.contains(&inode)
            {
                hits.push(inode);
            }
        });
        if hits.is_empty() {
            continue;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|n| n.trim_end().to_owned())
            .unwrap_or_else(|_| "?".to_owned());
        for inode in hits {
            found.entry(inode).or_insert((pid, name.clone()));
        }
    }
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let known = known.get_or_insert_with(HashMap::new);
    for inode in wanted {
        known.insert(inode, (start, found.get(&inode).cloned()));
    }
    found
}
