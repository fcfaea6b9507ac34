//! The kernel's socket diagnostics (Linux `NETLINK_SOCK_DIAG`, `inet_diag`): the byte counters
//! (`tcp_info`'s `bytes_received` and `bytes_acked`), the times of the last payload each way
//! and the peer of TCP sockets, by inode; for the diagnosis, the peers of UDP sockets and of
//! Unix sockets (`unix_diag`: the other end's inode and the path).
//!
//! Written by hand over rustix's netlink socket rather than with `netlink-packet-sock-diag`:
//! the request is one fixed 72-byte structure and the answer needs four fields at fixed
//! offsets, read here with bounds-checked slices; the crate would add five crates (its
//! packet core, utils, byteorder, anyhow, thiserror) for the same, and parses `tcp_info` only
//! behind a feature. Every length in an answer is checked before it is used: a short or
//! malformed message ends the parse with an error, never a panic.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

use super::TcpSocket;

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const AF_UNIX: u8 = 1;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `inet_diag_msg`: family, state, timer, retrans, id (48), expires, rqueue, wqueue, uid, inode.
const DIAG_MSG_LEN: usize = 72;
const REQ_LEN: usize = NLMSG_HDRLEN + 56;
/// `INET_DIAG_INFO`: the attribute carrying `struct tcp_info`.
const INET_DIAG_INFO: u16 = 2;
/// Offsets in `struct tcp_info` (Linux 4.1 and later; older kernels send it shorter).
const BYTES_ACKED: usize = 120;
const BYTES_RECEIVED: usize = 128;
/// `tcpi_last_data_sent` and `tcpi_last_data_recv`: milliseconds since the last payload.
const LAST_DATA_SENT: usize = 44;
const LAST_DATA_RECV: usize = 52;
/// `unix_diag_msg`: family, type, state, pad, inode, cookie.
const UNIX_MSG_LEN: usize = 16;
/// `unix_diag_req`: family, protocol, pad, states, inode, show, cookie.
const UNIX_REQ_LEN: usize = NLMSG_HDRLEN + 24;
/// `UDIAG_SHOW_NAME | UDIAG_SHOW_PEER`.
const UDIAG_SHOW: u32 = 1 | 4;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_PEER: u16 = 2;
/// Every TCP state but LISTEN (10): a listening socket moves no bytes and has no peer.
const STATES: u32 = 0xfff & !(1 << 10);
/// A dump that takes longer than this is abandoned (the kernel answers in microseconds).
const RECV_TIMEOUT: Duration = Duration::from_secs(1);

/// The receive buffer's size: a dump's answers come in batches of about this size.
const BUF_LEN: usize = 64 * 1024;

/// An open `NETLINK_SOCK_DIAG` socket and its receive buffer.
#[derive(Debug)]
pub(crate) struct SockDiag {
    fd: OwnedFd,
    /// Empty until the first look: opened as a session starts, the socket is first read on
    /// the monitor's thread, and zeroing 64 KiB (16 page faults) is no part of the spawn.
    buf: Vec<u8>,
}

impl SockDiag {
    /// Opens the diagnostics socket. Fails where the kernel has no socket diagnostics (the
    /// `inet_diag` module absent, a seccomp filter, a system other than Linux).
    pub(crate) fn open() -> io::Result<SockDiag> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        )?;
        rustix::net::sockopt::set_socket_timeout(
            &fd,
            rustix::net::sockopt::Timeout::Recv,
            Some(RECV_TIMEOUT),
        )?;
        Ok(SockDiag {
            fd,
            buf: Vec::new(),
        })
    }

    fn ensure_buffer(&mut self) {
        if self.buf.is_empty() {
            self.buf = vec![0; BUF_LEN];
        }
    }

    /// Every TCP socket of this network namespace (both families) whose inode `wanted` accepts.
    pub(crate) fn tcp_sockets(
        &mut self,
        wanted: &mut dyn FnMut(u64) -> bool,
        into: &mut HashMap<u64, TcpSocket>,
    ) -> io::Result<()> {
        for family in [AF_INET, AF_INET6] {
            self.dump(&dump_request(family, 1), wanted, into)?;
        }
        Ok(())
    }

    /// Every UDP socket of this network namespace (both families) whose inode `wanted`
    /// accepts (the peer is unspecified for a socket never connected).
    pub(crate) fn udp_sockets(
        &mut self,
        wanted: &mut dyn FnMut(u64) -> bool,
        into: &mut HashMap<u64, TcpSocket>,
    ) -> io::Result<()> {
        for family in [AF_INET, AF_INET6] {
            let mut request = dump_request(family, 1);
            request[17] = IPPROTO_UDP;
            request[18] = 0;
            request[20..24].copy_from_slice(&0xfffu32.to_ne_bytes());
            self.dump(&request, wanted, into)?;
        }
        Ok(())
    }

    /// Every Unix socket of this network namespace whose inode `wanted` accepts: its path and
    /// the inode of its other end.
    pub(crate) fn unix_sockets(
        &mut self,
        wanted: &mut dyn FnMut(u64) -> bool,
        into: &mut HashMap<u64, UnixSocket>,
    ) -> io::Result<()> {
        self.exchange(
            &unix_request(),
            parse_unix_answer,
            |s| s.inode,
            wanted,
            into,
        )
    }

    /// An inet dump (`request`: TCP or UDP, of one family).
    fn dump(
        &mut self,
        request: &[u8],
        wanted: &mut dyn FnMut(u64) -> bool,
        into: &mut HashMap<u64, TcpSocket>,
    ) -> io::Result<()> {
        self.exchange(request, parse_answer, |s| s.inode, wanted, into)
    }

    /// Sends one dump `request` and reads its answer to the end, keeping in `into` (by
    /// inode) every socket `parse` finds whose inode `wanted` accepts.
    fn exchange<T>(
        &mut self,
        request: &[u8],
        parse: fn(&[u8], &mut dyn FnMut(T)) -> Parsed,
        inode: fn(&T) -> u64,
        wanted: &mut dyn FnMut(u64) -> bool,
        into: &mut HashMap<u64, T>,
    ) -> io::Result<()> {
        self.ensure_buffer();
        rustix::net::sendto(
            &self.fd,
            request,
            SendFlags::empty(),
            &SocketAddrNetlink::new(0, 0),
        )?;
        loop {
            let (n, _) = rustix::net::recv(&self.fd, &mut self.buf[..], RecvFlags::empty())?;
            match parse(&self.buf[..n], &mut |s| {
                if wanted(inode(&s)) {
                    into.insert(inode(&s), s);
                }
            }) {
                Parsed::More => {}
                Parsed::Done => return Ok(()),
                Parsed::Error(e) => return Err(e),
            }
        }
    }
}

/// At most this many exact requests in one message batch (their answers, about 300 bytes
/// each, stay well within the socket's receive buffer).
const BATCH: usize = 128;

impl SockDiag {
    /// The sockets `known` (by their kernel key) as they are now, each asked for exactly: the
    /// cost grows with these sockets, not with the namespace's. A socket closed since is
    /// simply not found.
    pub(crate) fn lookup(
        &mut self,
        known: &[&TcpSocket],
        into: &mut HashMap<u64, TcpSocket>,
    ) -> io::Result<()> {
        self.ensure_buffer();
        let mut request = Vec::with_capacity(REQ_LEN * BATCH.min(known.len()));
        for batch in known.chunks(BATCH) {
            request.clear();
            for (seq, socket) in batch.iter().enumerate() {
                request.extend_from_slice(&exact_request(&socket.key, seq as u32));
            }
            rustix::net::sendto(
                &self.fd,
                &request,
                SendFlags::empty(),
                &SocketAddrNetlink::new(0, 0),
            )?;
            let mut answers = 0;
            while answers < batch.len() {
                let (n, _) = rustix::net::recv(&self.fd, &mut self.buf[..], RecvFlags::empty())?;
                answers += count_answers(&self.buf[..n], &mut |s| {
                    into.insert(s.inode, s);
                })?;
            }
        }
        Ok(())
    }
}

/// A request for the one TCP socket whose kernel key is `key`, with `tcp_info`.
pub(crate) fn exact_request(key: &[u8; 49], seq: u32) -> [u8; REQ_LEN] {
    let mut r = dump_request(key[0], seq);
    r[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    r[20..24].copy_from_slice(&u32::MAX.to_ne_bytes()); // whatever its state now
    r[24..72].copy_from_slice(&key[1..]);
    r
}

/// Parses the answers to exact requests, one message per request (a socket, or an error such
/// as ENOENT for a socket closed since, which is no failure): hands the sockets to `found`,
/// returns how many answers there were. Fails only on a malformed buffer.
pub(crate) fn count_answers(mut b: &[u8], found: &mut dyn FnMut(TcpSocket)) -> io::Result<usize> {
    let mut answers = 0;
    while !b.is_empty() {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("malformed socket diagnostics answer: {what}"),
            )
        };
        let (Some(len), Some(kind)) = (u32_at(b, 0), u16_at(b, 4)) else {
            return Err(bad("short header"));
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            return Err(bad("bad message length"));
        }
        match kind {
            NLMSG_ERROR => answers += 1,
            SOCK_DIAG_BY_FAMILY => {
                found(
                    parse_socket(&b[NLMSG_HDRLEN..len])
                        .ok_or_else(|| bad("short inet_diag_msg"))?,
                );
                answers += 1;
            }
            _ => {}
        }
        b = b.get(align4(len)..).unwrap_or(&[]);
    }
    Ok(answers)
}

/// One Unix socket as `unix_diag` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnixSocket {
    /// Its inode.
    pub(crate) inode: u64,
    /// The path it is bound to (an accepted socket has its listener's), if any; an abstract
    /// name starts with `@`.
    pub(crate) path: Option<String>,
    /// The inode of its other end, if connected.
    pub(crate) peer: Option<u64>,
}

/// A dump request for every Unix socket, with its name and peer.
pub(crate) fn unix_request() -> [u8; UNIX_REQ_LEN] {
    let mut r = [0u8; UNIX_REQ_LEN];
    r[0..4].copy_from_slice(&(UNIX_REQ_LEN as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r[8..12].copy_from_slice(&1u32.to_ne_bytes());
    r[16] = AF_UNIX;
    r[20..24].copy_from_slice(&u32::MAX.to_ne_bytes()); // every state
    r[28..32].copy_from_slice(&UDIAG_SHOW.to_ne_bytes());
    r
}

/// Parses one buffer of a Unix dump's answer, handing every socket to `found`.
pub(crate) fn parse_unix_answer(b: &[u8], found: &mut dyn FnMut(UnixSocket)) -> Parsed {
    parse_messages(b, parse_unix, "short unix_diag_msg", found)
}

fn parse_unix(p: &[u8]) -> Option<UnixSocket> {
    if p.len() < UNIX_MSG_LEN {
        return None;
    }
    let mut socket = UnixSocket {
        inode: u64::from(u32_at(p, 4)?),
        path: None,
        peer: None,
    };
    let mut attrs = &p[UNIX_MSG_LEN..];
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0)?);
        let kind = u16_at(attrs, 2)?;
        if len < 4 || len > attrs.len() {
            return None;
        }
        let value = &attrs[4..len];
        match kind {
            UNIX_DIAG_NAME if !value.is_empty() => {
                // An abstract name starts with a NUL byte; a path ends with one.
                let path = match value.split_first() {
                    Some((0, rest)) => format!("@{}", String::from_utf8_lossy(rest)),
                    _ => String::from_utf8_lossy(value)
                        .trim_end_matches('\0')
                        .to_owned(),
                };
                socket.path = Some(path);
            }
            UNIX_DIAG_PEER => socket.peer = u32_at(value, 0).map(u64::from).filter(|p| *p != 0),
            _ => {}
        }
        attrs = attrs.get(align4(len)..).unwrap_or(&[]);
    }
    Some(socket)
}

/// A dump request for the TCP sockets of `family`, with `tcp_info`.
pub(crate) fn dump_request(family: u8, seq: u32) -> [u8; REQ_LEN] {
    let mut r = [0u8; REQ_LEN];
    r[0..4].copy_from_slice(&(REQ_LEN as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r[8..12].copy_from_slice(&seq.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, ext (a bit per attribute: 1 << (INFO - 1)), pad,
    // states, then the socket id (zero: every socket).
    r[16] = family;
    r[17] = IPPROTO_TCP;
    r[18] = 1 << (INET_DIAG_INFO - 1);
    r[20..24].copy_from_slice(&STATES.to_ne_bytes());
    r
}

/// Where one buffer of a dump's answer leaves it.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// More messages follow.
    More,
    /// The dump is complete.
    Done,
    /// The kernel refused, or the answer is malformed.
    Error(io::Error),
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn malformed(what: &str) -> Parsed {
    Parsed::Error(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed socket diagnostics answer: {what}"),
    ))
}

/// Parses one buffer of netlink messages, handing every TCP socket to `found`.
pub(crate) fn parse_answer(b: &[u8], found: &mut dyn FnMut(TcpSocket)) -> Parsed {
    parse_messages(b, parse_socket, "short inet_diag_msg", found)
}

/// Walks one buffer of a dump's netlink messages: each answer is parsed by `parse` (`short`
/// names its failure) and handed to `found`; says whether the dump is done, failed, or goes
/// on in the next buffer.
fn parse_messages<T>(
    mut b: &[u8],
    parse: fn(&[u8]) -> Option<T>,
    short: &str,
    found: &mut dyn FnMut(T),
) -> Parsed {
    while !b.is_empty() {
        let (Some(len), Some(kind)) = (u32_at(b, 0), u16_at(b, 4)) else {
            return malformed("short header");
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            return malformed("bad message length");
        }
        let payload = &b[NLMSG_HDRLEN..len];
        match kind {
            NLMSG_DONE => return Parsed::Done,
            NLMSG_ERROR => {
                let code = u32_at(payload, 0).map_or(0, |c| c as i32);
                return Parsed::Error(io::Error::from_raw_os_error(code.saturating_neg()));
            }
            SOCK_DIAG_BY_FAMILY => match parse(payload) {
                Some(socket) => found(socket),
                None => return malformed(short),
            },
            _ => {}
        }
        b = b.get(align4(len)..).unwrap_or(&[]);
    }
    Parsed::More
}

/// One `inet_diag_msg` and its attributes. Counters stay 0 when `tcp_info` is absent or
/// too short to hold them (a kernel before 4.1).
fn parse_socket(p: &[u8]) -> Option<TcpSocket> {
    if p.len() < DIAG_MSG_LEN {
        return None;
    }
    let family = p[0];
    let port = |at: usize| u16::from_be_bytes([p[at], p[at + 1]]);
    let addr = |at: usize| -> IpAddr {
        if family == AF_INET6 {
            let mut o = [0u8; 16];
            o.copy_from_slice(&p[at..at + 16]);
            IpAddr::V6(Ipv6Addr::from(o))
        } else {
            IpAddr::V4(Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]))
        }
    };
    let mut key = [0u8; 49];
    key[0] = family;
    key[1..].copy_from_slice(&p[4..52]);
    let mut socket = TcpSocket {
        key,
        inode: u64::from(u32_at(p, 68)?),
        state: p[1],
        received: 0,
        acked: 0,
        local: SocketAddr::new(addr(8), port(4)),
        peer: SocketAddr::new(addr(24), port(6)),
        last_data: None,
    };
    let mut attrs = &p[DIAG_MSG_LEN..];
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0)?);
        let kind = u16_at(attrs, 2)?;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == INET_DIAG_INFO {
            let info = &attrs[4..len];
            socket.acked = u64_at(info, BYTES_ACKED).unwrap_or(0);
            socket.received = u64_at(info, BYTES_RECEIVED).unwrap_or(0);
            socket.last_data = u32_at(info, LAST_DATA_SENT).zip(u32_at(info, LAST_DATA_RECV));
        }
        attrs = attrs.get(align4(len)..).unwrap_or(&[]);
    }
    Some(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One `SOCK_DIAG_BY_FAMILY` message as the kernel lays it out.
    fn message(inode: u32, received: u64, acked: u64, info_len: usize) -> Vec<u8> {
        let mut p = vec![0u8; DIAG_MSG_LEN];
        p[0] = AF_INET;
        p[1] = 1; // established
        p[4..6].copy_from_slice(&40000u16.to_be_bytes());
        p[6..8].copy_from_slice(&8080u16.to_be_bytes());
        p[8..12].copy_from_slice(&[127, 0, 0, 1]);
        p[24..28].copy_from_slice(&[127, 0, 0, 2]);
        p[68..72].copy_from_slice(&inode.to_ne_bytes());
        let mut info = vec![0u8; info_len];
        if info_len >= 136 {
            info[LAST_DATA_SENT..LAST_DATA_SENT + 4].copy_from_slice(&30u32.to_ne_bytes());
            info[LAST_DATA_RECV..LAST_DATA_RECV + 4].copy_from_slice(&500u32.to_ne_bytes());
            info[BYTES_ACKED..BYTES_ACKED + 8].copy_from_slice(&acked.to_ne_bytes());
            info[BYTES_RECEIVED..BYTES_RECEIVED + 8].copy_from_slice(&received.to_ne_bytes());
        }
        p.extend_from_slice(&((4 + info_len) as u16).to_ne_bytes());
        p.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
        p.extend_from_slice(&info);
        p.resize(align4(p.len()), 0);
        wrap(SOCK_DIAG_BY_FAMILY, &p)
    }

    fn wrap(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn parses_sockets_counters_and_peers_then_done() {
        let mut buf = message(77, 4096, 12, 232);
        buf.extend(message(78, 1, 2, 104)); // an old kernel's short tcp_info
        buf.extend(wrap(NLMSG_DONE, &[0; 4]));
        let mut seen = Vec::new();
        assert!(matches!(
            parse_answer(&buf, &mut |s| seen.push(s)),
            Parsed::Done
        ));
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].inode, 77);
        assert_eq!((seen[0].received, seen[0].acked), (4096, 12));
        assert_eq!(seen[0].last_data, Some((30, 500)));
        assert_eq!(seen[0].peer, "127.0.0.2:8080".parse().unwrap());
        assert_eq!(seen[0].local, "127.0.0.1:40000".parse().unwrap());
        assert_eq!((seen[1].received, seen[1].acked), (0, 0));
    }

    #[test]
    fn errors_and_malformed_answers_never_panic() {
        let error = wrap(NLMSG_ERROR, &(-22i32).to_ne_bytes());
        match parse_answer(&error, &mut |_| {}) {
            Parsed::Error(e) => assert_eq!(e.raw_os_error(), Some(22)),
            other => panic!("{other:?}"),
        }
        let whole = message(1, 2, 3, 232);
        for cut in 0..whole.len() {
            let mut bad = whole[..cut].to_vec();
            if bad.len() >= 4 {
                // Claims the full length: longer than what is there.
                bad[0..4].copy_from_slice(&(whole.len() as u32).to_ne_bytes());
            }
            let _ = parse_answer(&bad, &mut |_| {});
        }
        assert!(matches!(
            parse_answer(&whole[..10], &mut |_| {}),
            Parsed::Error(_)
        ));
        assert!(matches!(parse_answer(&whole, &mut |_| {}), Parsed::More));
    }

    #[test]
    fn exact_requests_carry_the_key_and_answers_are_counted() {
        let buf = message(77, 4096, 12, 232);
        let mut socket = None;
        let _ = parse_answer(&buf, &mut |s| socket = Some(s));
        let socket = socket.unwrap();
        let r = exact_request(&socket.key, 3);
        assert_eq!(u16_at(&r, 6), Some(NLM_F_REQUEST));
        assert_eq!(r[16], AF_INET);
        assert_eq!(r[24..26], 40000u16.to_be_bytes());
        assert_eq!(r[28..32], [127, 0, 0, 1]);
        let mut answers = buf.clone();
        answers.extend(wrap(NLMSG_ERROR, &(-2i32).to_ne_bytes())); // closed since
        let mut seen = Vec::new();
        assert_eq!(
            count_answers(&answers, &mut |s| seen.push(s.inode)).unwrap(),
            2
        );
        assert_eq!(seen, vec![77]);
        assert!(count_answers(&answers[..20], &mut |_| {}).is_err());
    }

    /// One Unix socket's message: inode, then a name and a peer attribute.
    fn unix_message(inode: u32, name: &[u8], peer: u32) -> Vec<u8> {
        let mut p = vec![0u8; UNIX_MSG_LEN];
        p[0] = AF_UNIX;
        p[4..8].copy_from_slice(&inode.to_ne_bytes());
        for (kind, value) in [
            (UNIX_DIAG_NAME, name.to_vec()),
            (UNIX_DIAG_PEER, peer.to_ne_bytes().to_vec()),
        ] {
            p.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
            p.extend_from_slice(&kind.to_ne_bytes());
            p.extend_from_slice(&value);
            p.resize(align4(p.len()), 0);
        }
        wrap(SOCK_DIAG_BY_FAMILY, &p)
    }

    #[test]
    fn unix_sockets_give_their_path_and_peer_and_never_panic() {
        let mut buf = unix_message(500, b"/run/x.sock", 501);
        buf.extend(unix_message(502, b"\0abstract", 0));
        buf.extend(wrap(NLMSG_DONE, &[0; 4]));
        let mut seen = Vec::new();
        assert!(matches!(
            parse_unix_answer(&buf, &mut |s| seen.push(s)),
            Parsed::Done
        ));
        assert_eq!(seen[0].inode, 500);
        assert_eq!(seen[0].path.as_deref(), Some("/run/x.sock"));
        assert_eq!(seen[0].peer, Some(501));
        assert_eq!(seen[1].path.as_deref(), Some("@abstract"));
        assert_eq!(seen[1].peer, None);
        let whole = unix_message(1, b"/a", 2);
        for cut in 0..whole.len() {
            let mut bad = whole[..cut].to_vec();
            if bad.len() >= 4 {
                bad[0..4].copy_from_slice(&(whole.len() as u32).to_ne_bytes());
            }
            let _ = parse_unix_answer(&bad, &mut |_| {});
        }
        let r = unix_request();
        assert_eq!(r[16], AF_UNIX);
        assert_eq!(u32_at(&r, 28), Some(UDIAG_SHOW));
    }

    #[test]
    fn the_request_asks_for_tcp_info_of_every_state_but_listen() {
        let r = dump_request(AF_INET6, 9);
        assert_eq!(u32_at(&r, 0), Some(72));
        assert_eq!(u16_at(&r, 4), Some(SOCK_DIAG_BY_FAMILY));
        assert_eq!(r[16..19], [AF_INET6, IPPROTO_TCP, 2]);
        assert_eq!(u32_at(&r, 20), Some(0xfff & !(1 << 10)));
    }
}
