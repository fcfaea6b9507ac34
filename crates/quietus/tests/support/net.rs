//! A local TCP server on 127.0.0.1 for the network-source tests: it accepts one connection
//! and then trickles bytes to it, reads what it is sent, or holds it open in silence. Its
//! thread ends by itself once the peer is gone.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

/// What the server does with the connection it accepts.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// Sends `chunk` bytes every `every`, `times` times, then holds the connection in silence.
    Trickle {
        chunk: usize,
        every: Duration,
        times: u32,
    },
    /// Reads (and counts) everything it is sent.
    Sink,
    /// Sends nothing, reads nothing: an open but silent connection.
    Silent,
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Bytes sent to the peer (trickle) or received from it (sink), so far.
    pub bytes: Arc<AtomicU64>,
    /// Chunks the trickle has written.
    pub chunks: Arc<AtomicU64>,
}

impl Server {
    /// Listens on 127.0.0.1 (an ephemeral port) and serves one connection in `mode`.
    pub fn start(mode: Mode) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let bytes = Arc::new(AtomicU64::new(0));
        let chunks = Arc::new(AtomicU64::new(0));
        let (b, c) = (bytes.clone(), chunks.clone());
        thread::spawn(move || {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let mut buf = vec![0u8; 64 * 1024];
            if let Mode::Trickle {
                chunk,
                every,
                times,
            } = mode
            {
                let data = vec![b'x'; chunk];
                for _ in 0..times {
                    if conn.write_all(&data).is_err() {
                        return;
                    }
                    b.fetch_add(chunk as u64, Ordering::Relaxed);
                    c.fetch_add(1, Ordering::Relaxed);
                    thread::sleep(every);
                }
            }
            // Sink, Silent, and a trickle that is done: until the peer is gone. Silent and a
            // finished trickle read nothing (the peer sends nothing), so this only waits.
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if matches!(mode, Mode::Sink) {
                    b.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        });
        Server {
            addr,
            bytes,
            chunks,
        }
    }

    /// The port, for the child's script.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}
