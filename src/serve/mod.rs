//! `stallwatch serve`: the process service over stdio. JSON-RPC 2.0, one JSON object per
//! line, on stdin and stdout (logs on stderr): start supervised processes under names of the
//! client's choosing, write to them, resize, snapshot, steer, wait, list; output and lifecycle
//! notifications. Built on the library's public API ([`stallwatch::Registry`],
//! [`stallwatch::Session`]) like the command; docs/serve.md documents the protocol.
//!
//! - `protocol`: the JSON-RPC framing, error codes and parameter checks;
//! - `dispatch`: the method table over a registry;
//! - `process`: `process/start`'s parameters, the event forwarder and the stdin writer;
//! - `outbox`: the bounded queue to the client and its writer thread;
//! - `options`: the server's options (flags and `STALLWATCH_*` variables);
//! - `matching`: which program a command line runs, through `env`/`npx`/`pnpm`… wrappers.

mod dispatch;
mod matching;
mod options;
mod outbox;
mod process;
mod protocol;

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use crossbeam_channel::Sender;

use options::{ServeCli, ServeOptions};

/// What the main loop hears about.
enum Input {
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

/// Longest request line (bytes).
const MAX_LINE: usize = 64 * 1024 * 1024;

/// `stallwatch serve [OPTIONS]`: `args` start with the program name and `serve`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let cli = match ServeCli::try_parse_from(args.into_iter().skip(1)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(stallwatch::EXIT_INTERNAL as u8),
            };
        }
    };
    let options = ServeOptions {
        max_processes: cli.max_processes as usize,
        retain_bytes: cli.retain_bytes as usize,
        shutdown_grace: cli.shutdown_grace,
        output_filter: cli.output_notifications,
        output_throttle: cli.output_throttle,
        log_dir: cli.log_dir,
    };
    match serve(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("serve: {e}");
            ExitCode::from(stallwatch::EXIT_INTERNAL as u8)
        }
    }
}

/// Runs the service until the client goes away or a signal comes; ends every process.
fn serve(options: ServeOptions) -> std::io::Result<()> {
    // Blocked before the first thread starts, so every thread inherits the mask, and taken by
    // one thread (`sigwait`): no handler. An inherited ignore is respected (not blocked).
    let wanted = crate::cli::signals::not_ignored(vec![
        crate::cli::sys::Sig::TERM.as_raw(),
        crate::cli::sys::Sig::INT.as_raw(),
        crate::cli::sys::Sig::HUP.as_raw(),
    ]);
    let signals = crate::cli::sys::Waited::block(&wanted)?;
    let (tx, rx) = crossbeam_channel::bounded::<Input>(16);
    let outbox = Arc::new(outbox::Outbox::default());
    let gone = tx.clone();
    outbox.start_writer(unbuffered_stdout(), move || {
        let _ = gone.send(Input::OutputGone);
    })?;
    start_signal_thread(signals, tx.clone())?;
    start_reader(outbox.clone(), tx)?;
    let grace = options.shutdown_grace;
    let server = Arc::new(dispatch::Server::new(options, outbox.clone()));
    for input in rx {
        match input {
            Input::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Input::Line(line) => server.handle_line(&line),
            Input::TooLong => outbox.send(&protocol::error_response(
                serde_json::Value::Null,
                protocol::RpcError::new(
                    protocol::PARSE_ERROR,
                    format!("parse error: a line longer than {MAX_LINE} bytes was skipped"),
                ),
            )),
            Input::End => {
                log::info!("end of input: ending every process");
                break;
            }
            Input::OutputGone => {
                log::info!("the client's end of stdout is gone: ending every process");
                break;
            }
            Input::Signal(n) => {
                log::info!("signal {n}: ending every process");
                break;
            }
        }
    }
    server.shutdown();
    // The last notifications (exited, closed) to a client still reading, briefly.
    outbox.drain(grace.min(Duration::from_secs(1)));
    // Threads blocked on a client that does not read, or on stdin, are not waited for.
    std::process::exit(0)
}

/// The server's stdout without a buffer of its own (the outbox writes whole lines).
fn unbuffered_stdout() -> Box<dyn Write + Send> {
    use std::os::fd::AsFd;
    match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout()),
    }
}

fn start_signal_thread(signals: crate::cli::sys::Waited, tx: Sender<Input>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("stallwatch-serve-signals".into())
        .spawn(move || match signals.wait() {
            Ok(signal) => {
                let _ = tx.send(Input::Signal(signal));
            }
            Err(e) => {
                log::warn!("cannot wait for signals ({e}); they take their usual action");
                signals.unblock();
            }
        })
        .map(drop)
}

/// Reads the client's lines; stops reading while too many answers wait for the client.
fn start_reader(outbox: Arc<outbox::Outbox>, tx: Sender<Input>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("stallwatch-serve-in".into())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            loop {
                outbox.wait_for_room();
                let message = match read_line(&mut input) {
                    Ok(Some(Some(line))) => Input::Line(line),
                    Ok(Some(None)) => Input::TooLong,
                    Ok(None) | Err(_) => {
                        let _ = tx.send(Input::End);
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
