//! `--pty`: quietus's stdin typed into the program's terminal. (Quietus's own terminal's
//! resizes, SIGWINCH, are taken by the signal thread: `signals.rs`.)

use std::io::{self, Read};
use std::sync::Arc;

use quietus::Session;

/// Starts the thread that types quietus's stdin into the session's terminal, byte for byte
/// (so `printf '\003'`, or Ctrl-C typed on quietus's raw-mode terminal, interrupts the
/// program), before the program: it waits for the session, sent on the returned channel. At
/// the end of quietus's stdin, the terminal gets end-of-file the terminal way. The thread is
/// not joined: it may sit in a read of quietus's stdin until the process ends.
pub(crate) fn start_stdin() -> io::Result<crossbeam_channel::Sender<Arc<Session>>> {
    let started = crate::spare::start("quietus-stdin", move |session: Arc<Session>| {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("reading quietus's stdin: {e}");
                    break;
                }
            };
            if !type_in(&session, &buf[..n]) {
                return;
            }
        }
        session.close_stdin();
    });
    started.map(|(session, _thread)| session)
}

/// Queues `bytes` for the terminal, waiting as long as the program does not read; `false`
/// once the terminal takes no more input (the run is over).
fn type_in(session: &Session, bytes: &[u8]) -> bool {
    loop {
        match session.write_stdin(bytes) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                if session.try_wait().is_some() {
                    return false;
                }
            }
            Err(e) => {
                log::debug!("typing into the program's terminal: {e}");
                return false;
            }
        }
    }
}
