//! `stallwatch serve`: the process service over stdio. JSON-RPC 2.0, one JSON object per
//! line, on stdin and stdout (logs on stderr): start supervised processes under names of the
//! client's choosing, write to them, resize, snapshot, steer, wait, list; output and lifecycle
//! notifications. Built on the library's public API ([`stallwatch::Registry`],
//! [`stallwatch::Session`]) like the command; the README documents the protocol.
//!
//! - `protocol`: the JSON-RPC framing, error codes and parameter checks;
//! - `dispatch`: the method table over a registry;
//! - `process`: `process/start`'s parameters, the event forwarder and the stdin writer;
//! - `outbox`: the bounded queue to the client and its writer thread;
//! - `matching`: which program a command line runs, through `env`/`npx`/`pnpm`… wrappers.

mod dispatch;
mod matching;
mod outbox;
mod process;
mod protocol;

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use crossbeam_channel::Sender;

use matching::CommandFilter;

const AFTER_HELP: &str = "\
Every option can also be set with STALLWATCH_<OPTION>, e.g. STALLWATCH_MAX_PROCESSES=8; the
command line wins. The protocol (methods, notifications, error codes) is in the README, section
\"stallwatch serve\". Exit status: 0 when the client goes away (end of stdin, a closed stdout) or
on TERM/INT/HUP, after every process was ended; 125 for an invalid option.";

/// `stallwatch serve`'s options.
#[derive(Debug, Parser)]
#[command(
    name = "stallwatch serve",
    bin_name = "stallwatch serve",
    version,
    about = "Serve supervised processes over stdio: JSON-RPC 2.0, one JSON object per line.",
    after_help = AFTER_HELP
)]
struct ServeCli {
    /// Live processes at most; a process/start beyond it is rejected (-32002), not queued.
    #[arg(long, value_name = "N", env = "STALLWATCH_MAX_PROCESSES", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_processes: u32,

    /// Output kept in memory per process and stream, for process/snapshot (half head, half
    /// tail; the middle is counted). 0 to 1073741824.
    #[arg(long, value_name = "BYTES", env = "STALLWATCH_RETAIN_BYTES", default_value_t = 1 << 20,
          value_parser = clap::value_parser!(u32).range(0..=(1 << 30)))]
    retain_bytes: u32,

    /// When the client goes away or the server gets TERM/INT/HUP, each process's grace
    /// between TERM and KILL is cut to this. Durations: 500ms, 5s, 1m.
    #[arg(long, value_name = "D", env = "STALLWATCH_SHUTDOWN_GRACE", default_value = "5s",
          value_parser = parse_grace)]
    shutdown_grace: Duration,

    /// Which processes get process/output notifications: all, none, or program names
    /// separated by commas, matched on the base name through env, VAR=…, npx, pnpx, bunx,
    /// pnpm, npm exec and yarn (playwright matches `npx playwright test`).
    #[arg(long, value_name = "all|none|LIST", env = "STALLWATCH_OUTPUT_NOTIFICATIONS",
          default_value = "all", value_parser = |s: &str| CommandFilter::parse(s))]
    output_notifications: CommandFilter,

    /// At most one process/output notification per process and stream per this interval
    /// (the library's event throttle). 0 to 1h.
    #[arg(long, value_name = "D", env = "STALLWATCH_OUTPUT_THROTTLE", default_value = "150ms",
          value_parser = parse_grace)]
    output_throttle: Duration,

    /// Where complete logs go once a stream passes 4 KiB (default: the platform cache
    /// folder's stallwatch/logs, or none with a warning).
    #[arg(long, value_name = "DIR", env = "STALLWATCH_LOG_DIR")]
    log_dir: Option<PathBuf>,
}

fn parse_grace(text: &str) -> Result<Duration, String> {
    let d = crate::cli::options::parse_duration(text)?;
    if d > Duration::from_secs(3600) {
        return Err(format!("{text:?} is out of range; it accepts 0 to 1h"));
    }
    Ok(d)
}

/// The server's settings.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    pub(crate) max_processes: usize,
    pub(crate) retain_bytes: usize,
    pub(crate) shutdown_grace: Duration,
    pub(crate) output_filter: CommandFilter,
    pub(crate) output_throttle: Duration,
    pub(crate) log_dir: Option<PathBuf>,
}

impl ServeOptions {
    /// `all`, `none` or the names, for `initialize`.
    pub(crate) fn output_description(&self) -> serde_json::Value {
        match &self.output_filter {
            CommandFilter::All => "all".into(),
            CommandFilter::None => "none".into(),
            CommandFilter::Names(names) => names.clone().into(),
        }
    }
}

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
    let (tx, rx) = crossbeam_channel::bounded::<Input>(16);
    let outbox = Arc::new(outbox::Outbox::default());
    let gone = tx.clone();
    outbox.start_writer(unbuffered_stdout(), move || {
        let _ = gone.send(Input::OutputGone);
    })?;
    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ])?;
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

fn start_signal_thread(
    mut signals: signal_hook::iterator::Signals,
    tx: Sender<Input>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("stallwatch-serve-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let _ = tx.send(Input::Signal(signal));
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

    #[test]
    fn options_have_their_variables_and_ranges() {
        let cli = ServeCli::try_parse_from([
            "serve",
            "--max-processes",
            "2",
            "--output-notifications",
            "codex,playwright",
        ])
        .unwrap();
        assert_eq!(cli.max_processes, 2);
        assert_eq!(
            cli.output_notifications,
            CommandFilter::Names(vec!["codex".into(), "playwright".into()])
        );
        assert_eq!(cli.shutdown_grace, Duration::from_secs(5));
        assert!(ServeCli::try_parse_from(["serve", "--max-processes", "0"]).is_err());
        assert!(ServeCli::try_parse_from(["serve", "--shutdown-grace", "2h"]).is_err());
        use clap::CommandFactory;
        ServeCli::command().debug_assert();
    }
}
