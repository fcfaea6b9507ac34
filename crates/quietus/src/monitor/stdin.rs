//! The stdin writer: a thread of its own that feeds the child's stdin pipe (or types into its
//! terminal), so that a child that does not read never blocks the caller.

use std::io;
use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::error::SpawnError;
use crate::process::pty::Pty;

use crate::process::spare::Spare;

/// Where the stdin writer writes.
pub(super) enum StdinTarget {
    /// The child's stdin pipe.
    Pipe(std::process::ChildStdin),
    /// The terminal the child runs on: bytes as typed keys.
    Terminal(Arc<Pty>),
}

impl StdinTarget {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            StdinTarget::Pipe(stdin) => io::Write::write_all(stdin, bytes),
            StdinTarget::Terminal(terminal) => terminal.write(bytes),
        }
    }

    /// The end of the input: a closed pipe, or EOF the terminal way.
    fn close(self, id: u64) {
        match self {
            // Dropping the pipe closes it: the child sees end-of-file.
            StdinTarget::Pipe(stdin) => drop(stdin),
            StdinTarget::Terminal(terminal) => {
                if let Err(e) = terminal.send_eof() {
                    log::debug!("session {id}: sending end-of-file through the terminal: {e}");
                }
            }
        }
    }
}

/// The stdin writer: a thread of its own (`thread`, started before the program), so a child
/// that does not read never blocks the caller (the queue is bounded; `write_stdin` gives up
/// after a while).
pub(super) fn start_stdin_writer(
    id: u64,
    stdin: Option<StdinTarget>,
    thread: Option<Spare>,
) -> io::Result<Option<Sender<Vec<u8>>>> {
    let Some(mut stdin) = stdin else {
        return Ok(None);
    };
    let no_thread = || {
        let gone = io::Error::other("no thread was started for it before the program");
        SpawnError::thread("stdin writer", gone)
    };
    let thread = thread.ok_or_else(no_thread)?;
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(64);
    thread
        .run(move || {
            for chunk in rx {
                if let Err(e) = stdin.write(&chunk) {
                    log::debug!("session {id}: writing the child's stdin: {e}");
                    return;
                }
            }
            // Every sender is gone: `close_stdin`, or the session ended.
            stdin.close(id);
        })
        .map_err(|_| no_thread())?;
    Ok(Some(tx))
}
