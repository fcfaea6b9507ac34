//! What a descriptor a process waits on is, in the words the diagnosis gives: a pipe and who
//! holds its other end, a terminal, a file, a socket and its peer; and whether a connection has
//! an exchange under way.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Whether a connection has an exchange under way for a program that also watches its
/// terminal: a request unanswered, or (its output still redrawing a wait) its last bytes moved
/// with the tree's last activity; never one the peer closed.
pub(super) fn under_way(class: Class, tree: &Tree<'_>) -> bool {
    match class {
        Class::Tcp {
            closed: false,
            outstanding,
            recent,
            ..
        } => outstanding || (recent && tree.redrawing),
        _ => false,
    }
}

/// The descriptors of a poll, select or epoll set, described. A relay watching its own input
/// as well as a terminal master passes that input on to the program on the terminal: what the
/// relay reads is the program's question, not its own (that program, reading the slave side,
/// is the one awaiting input, if any); the master comes first.
pub(super) fn described_set(
    fds: &[i32],
    snap: &ProcSnap,
    tree: &Tree<'_>,
) -> Vec<(i32, Class, String)> {
    let mut described: Vec<(i32, Class, String)> = fds
        .iter()
        .map(|fd| {
            let (class, target) = describe(*fd, snap, tree);
            (*fd, class, target)
        })
        .collect();
    if let Some(at) = described.iter().position(|(_, c, _)| *c == Class::Relay) {
        described.rotate_left(at);
        for (_, class, _) in &mut described {
            if *class == Class::Input {
                *class = Class::Other;
            }
        }
    }
    described
}

/// The network of a watched set, the most telling first: what it watches, and a connection
/// the peer closed that it never reads, watched or not (a loop that dropped it from its set).
pub(super) fn network_of(
    described: &[(i32, Class, String)],
    fds: &[i32],
    snap: &ProcSnap,
    tree: &Tree<'_>,
) -> Vec<(i32, Class, String)> {
    let mut network: Vec<(i32, Class, String)> = described
        .iter()
        .filter(|(_, c, _)| matches!(c, Class::Tcp { .. } | Class::Socket))
        .cloned()
        .chain(
            sockets_of(snap, tree)
                .into_iter()
                .filter(|(fd, c, _)| rank(*c) == 0 && !fds.contains(fd)),
        )
        .collect();
    network.sort_by_key(|(fd, class, _)| (rank(*class), since(*class), *fd));
    network
}

/// What descriptor `fd` of the process is.
pub(super) fn describe(fd: i32, snap: &ProcSnap, tree: &Tree<'_>) -> (Class, String) {
    let me = snap.pid;
    let Some((_, link)) = snap.fds.iter().find(|(n, _)| *n == fd) else {
        return (
            Class::Other,
            format!("descriptor {fd} (not open, or unreadable)"),
        );
    };
    if link == "/dev/ptmx" || link == "/dev/pts/ptmx" {
        return (
            Class::Relay,
            format!("the terminal master {link} (a relay)"),
        );
    }
    let terminal =
        link.starts_with("/dev/pts/") || link.starts_with("/dev/tty") || link == "/dev/console";
    if terminal {
        return (Class::Input, format!("the terminal {link}"));
    }
    if let Some(inode) = crate::process::sys::socket_inode(link.as_bytes()) {
        return describe_socket(fd, inode, me, tree);
    }
    let pipe = link.starts_with("pipe:");
    let fifo = snap.fifos.contains(&fd);
    if pipe || fifo {
        let what = if pipe { "a pipe" } else { "the FIFO" };
        let name = if pipe {
            String::new()
        } else {
            format!(" {link}")
        };
        if let Some(writer) = Tree::other(tree.writers.get(link.as_str()), me) {
            return (
                Class::Process(writer),
                format!("{what}{name} written by {}", tree.who(writer)),
            );
        }
        return match (fd, pipe) {
            (0, true) => (Class::Input, "stdin (a pipe)".to_owned()),
            (_, false) => (
                Class::Input,
                format!("the FIFO {link} (no writer in the tree)"),
            ),
            _ => (Class::Other, "a pipe".to_owned()),
        };
    }
    match link.as_str() {
        "/dev/null" => (Class::Other, "/dev/null".to_owned()),
        "anon_inode:[eventpoll]" => (Class::Other, "an epoll set".to_owned()),
        l => (Class::Other, l.to_owned()),
    }
}

/// What socket `inode` (descriptor `fd` of process `me`) is.
fn describe_socket(fd: i32, inode: u64, me: Pid, tree: &Tree<'_>) -> (Class, String) {
    match (tree.peers)(inode) {
        Some(sock @ Sock::Tcp { peer, state, .. }) => {
            // A loopback connection between two processes of the tree (a UI and its daemon):
            // its other end is a process, not the network.
            if let Some(holders) = tree.tcp_locals.get(&peer) {
                return match Tree::other(Some(holders), me) {
                    Some(pid) => (
                        Class::Process(pid),
                        format!("{} over TCP {peer}", tree.who(pid)),
                    ),
                    None => (Class::Other, format!("a TCP connection to itself ({peer})")),
                };
            }
            let class = Class::Tcp {
                outstanding: sock.outstanding(),
                recent: sock.recent(tree.recent),
                since: sock.since_last_data(),
                closed: sock.closed(),
            };
            let target = match state {
                TCP_CLOSE_WAIT => {
                    format!("TCP peer {peer}, which closed the connection (CLOSE_WAIT)")
                }
                TCP_SYN_SENT => format!("TCP peer {peer} (connecting)"),
                _ => format!("TCP peer {peer}"),
            };
            (class, target)
        }
        Some(Sock::Udp { peer, .. }) if peer.port() != 0 => {
            (Class::Socket, format!("UDP peer {peer}"))
        }
        Some(Sock::Udp { local, .. }) => (
            Class::Socket,
            format!("UDP socket {local} (not connected to one peer)"),
        ),
        Some(Sock::Unix { path, peer, holder }) => {
            let over = path.map_or_else(
                || "a Unix socket".to_owned(),
                |p| format!("Unix socket {p}"),
            );
            let inside = peer.and_then(|p| Tree::other(tree.sockets.get(&p), me));
            // Both ends held by this process (a socket pair it wakes itself with: an async
            // runtime's waker): nobody else is at the other end.
            let own_pair = inside.is_none()
                && peer.is_some_and(|p| tree.sockets.get(&p).is_some_and(|h| h.contains(&me)));
            if own_pair {
                return (
                    Class::Other,
                    format!("{over} whose other end it holds itself"),
                );
            }
            match (inside, holder) {
                (Some(pid), _) => (
                    Class::Process(pid),
                    format!("{} over {over}", tree.who(pid)),
                ),
                (None, Some((pid, name))) => {
                    (Class::Socket, format!("{name} (pid {pid}) over {over}"))
                }
                (None, None) if fd == 0 => (Class::Input, format!("stdin ({over})")),
                (None, None) if peer.is_some() => (
                    Class::Socket,
                    format!("a process outside the tree over {over}"),
                ),
                (None, None) => (Class::Listener, format!("{over} (listening)")),
            }
        }
        None if fd == 0 => (Class::Input, "stdin (a socket)".to_owned()),
        None => (Class::Other, "a Unix socket or other socket".to_owned()),
    }
}
