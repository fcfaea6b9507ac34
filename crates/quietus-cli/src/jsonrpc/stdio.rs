//! The stdio loop of a JSON-RPC server: a reader thread for the client's lines (which stops
//! reading while too many answers wait), a writer thread (the [`Outbox`]'s), a thread that
//! hears TERM, INT and HUP; the calling thread hands each line to the server and returns when
//! the client goes away or a signal comes.

use std::io::{BufRead, Write};
use std::sync::Arc;

use crossbeam_channel::Sender;

use super::outbox::Outbox;
use super::protocol;

/// What the main loop hears: a client line, the end of either stream, a signal.
enum Heard {
    /// A line from the client (without its newline).
    Line(Vec<u8>),
    /// A line longer than [`MAX_LINE`] (skipped).
    TooLong,
    /// The client closed the server's stdin, or it failed.
    End,
    /// The client's end of stdout is gone.
    OutputGone,
    /// TERM, INT or HUP.
    Signal(i32),
}

/// Why [`run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// End of stdin (or a read error).
    EndOfInput,
    /// A write to stdout failed: the client's end is gone.
    OutputGone,
    /// TERM, INT or HUP (the number).
    Signal(i32),
}

/// Longest request line (bytes).
pub(crate) const MAX_LINE: usize = 64 * 1024 * 1024;

/// TERM, INT and HUP, blocked in the calling thread (and every thread it starts afterwards) to
/// be taken by [`run`]'s signal thread with `sigwait`: no handler. A signal quietus was
/// started with ignored stays ignored (not blocked, never taken). Call it before the server
/// starts any thread.
pub(crate) struct Signals(crate::sys::Waited);

impl Signals {
    /// Blocks TERM, INT and HUP (those not ignored) in the calling thread.
    pub(crate) fn block() -> std::io::Result<Signals> {
        use crate::sys::Sig;
        let wanted = crate::sys::not_ignored(vec![
            Sig::TERM.as_raw(),
            Sig::INT.as_raw(),
            Sig::HUP.as_raw(),
        ]);
        crate::sys::Waited::block(&wanted).map(Signals)
    }
}

/// Serves stdio: starts the writer of `outbox` on stdout, the signal thread and the reader,
/// then calls `handle` with every non-blank line (a line longer than [`MAX_LINE`] is answered
/// with a parse error) until the client goes away or a signal comes. `name` names the threads
/// (`quietus-<name>-in`, …).
pub(crate) fn run(
    name: &str,
    signals: Signals,
    outbox: &Arc<Outbox>,
    mut handle: impl FnMut(&[u8]),
) -> std::io::Result<Ending> {
    let (tx, rx) = crossbeam_channel::bounded::<Heard>(16);
    let gone = tx.clone();
    outbox.start_writer(unbuffered_stdout(), move || {
        let _ = gone.send(Heard::OutputGone);
    })?;
    start_signal_thread(name, signals, tx.clone())?;
    start_reader(name, outbox.clone(), tx)?;
    for input in rx {
        match input {
            Heard::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Heard::Line(line) => handle(&line),
            Heard::TooLong => outbox.send(&protocol::error_response(
                serde_json::Value::Null,
                protocol::RpcError::new(
                    protocol::PARSE_ERROR,
                    format!("parse error: a line longer than {MAX_LINE} bytes was skipped"),
                ),
            )),
            Heard::End => return Ok(Ending::EndOfInput),
            Heard::OutputGone => return Ok(Ending::OutputGone),
            Heard::Signal(n) => return Ok(Ending::Signal(n)),
        }
    }
    Ok(Ending::EndOfInput)
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::EndOfInput => f.write_str("end of input"),
            Ending::OutputGone => f.write_str("the client's end of stdout is gone"),
            Ending::Signal(n) => write!(f, "signal {n}"),
        }
    }
}

/// The server's stdout without a buffer of its own (the outbox writes whole lines).
fn unbuffered_stdout() -> Box<dyn Write + Send> {
    use std::os::fd::AsFd;
    match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout()),
    }
}

fn start_signal_thread(name: &str, signals: Signals, tx: Sender<Heard>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("quietus-{name}-signals"))
        .spawn(move || match signals.0.wait() {
            Ok(signal) => {
                let _ = tx.send(Heard::Signal(signal));
            }
            Err(e) => {
                log::warn!("cannot wait for signals ({e}); they take their usual action");
                signals.0.unblock();
            }
        })
        .map(drop)
}

/// Reads the client's lines; stops reading while too many answers wait for the client.
fn start_reader(name: &str, outbox: Arc<Outbox>, tx: Sender<Heard>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("quietus-{name}-in"))
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            loop {
                outbox.wait_for_room();
                let message = match read_line(&mut input) {
                    Ok(Some(Some(line))) => Heard::Line(line),
                    Ok(Some(None)) => Heard::TooLong,
                    Ok(None) | Err(_) => {
                        let _ = tx.send(Heard::End);
                        return;
                    }
                };
                if tx.send(message).is_err() {
                    return;
                }
            }
        })
        .map(drop)
}

/// One line without its newline (`Some(None)`: longer than [`MAX_LINE`], skipped to its end;
/// `None`: end of input). A last line without a newline counts.
fn read_line(input: &mut impl BufRead) -> std::io::Result<Option<Option<Vec<u8>>>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                None
            } else {
                Some((!too_long).then_some(line))
            });
        }
        let (chunk, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(buffer.len());
        input.consume(used);
        if done.is_some() {
            return Ok(Some((!too_long).then_some(line)));
        }
    }
}

/// A stdio server's `main`: parses its options (`args` start with the program name and the
/// subcommand's), then runs `serve` with them. Help and version exit 0; a bad option, or a
/// server that could not run, is quietus's own failure (125), said on stderr.
pub(crate) fn server_main<C: clap::Parser>(
    name: &str,
    args: Vec<std::ffi::OsString>,
    serve: impl FnOnce(C) -> std::io::Result<()>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let own_failure = ExitCode::from(quietus::MonitorResult::EXIT_INTERNAL as u8);
    let cli = match C::try_parse_from(args.into_iter().skip(1)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => own_failure,
            };
        }
    };
    match serve(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{name}: {e}");
            own_failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_whole_and_bounded() {
        let mut input = std::io::Cursor::new(b"{\"a\":1}\r\n\nlast".to_vec());
        assert_eq!(
            read_line(&mut input).unwrap(),
            Some(Some(b"{\"a\":1}\r".to_vec()))
        );
        assert_eq!(read_line(&mut input).unwrap(), Some(Some(Vec::new())));
        assert_eq!(read_line(&mut input).unwrap(), Some(Some(b"last".to_vec())));
        assert_eq!(read_line(&mut input).unwrap(), None);
        let mut long = vec![b'x'; MAX_LINE + 1];
        long.extend_from_slice(b"\nnext\n");
        let mut input = std::io::BufReader::new(std::io::Cursor::new(long));
        assert_eq!(read_line(&mut input).unwrap(), Some(None));
        assert_eq!(read_line(&mut input).unwrap(), Some(Some(b"next".to_vec())));
    }
}
