//! `quietus serve`: the process service over stdio. JSON-RPC 2.0, one JSON object per
//! line, on stdin and stdout (logs on stderr): start supervised processes under names of the
//! client's choosing, write to them, resize, snapshot, steer, wait, list; output and lifecycle
//! notifications. Built on the library's public API ([`quietus::Registry`],
//! [`quietus::Session`]) like the command; docs/serve.md documents the protocol.
//!
//! - `dispatch`: the method table over a registry;
//! - `process`: `process/start`'s parameters, the event forwarder and the stdin writer;
//! - `options`: the server's options (flags and `QUIETUS_*` variables);
//! - `schema`: the protocol as a JSON Schema document (`quietus serve --schema`);
//! - `matching`: which program a command line runs, through `env`/`npx`/`pnpm`… wrappers.
//!
//! The JSON-RPC framing, the outbox and the stdio loop are [`crate::jsonrpc`]'s, shared with
//! `quietus mcp`.

mod dispatch;
mod matching;
mod options;
mod process;
mod schema;

// The settings table's test walks every surface (`settings::tests`).
#[cfg(test)]
pub(crate) use {matching::CommandFilter, process::parse_start};

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::jsonrpc::{outbox, stdio};
use options::ServeCli;
pub(crate) use options::ServeOptions;

/// `quietus serve [OPTIONS]`: `args` start with the program name and `serve`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    stdio::server_main("serve", args, |cli: ServeCli| {
        if cli.schema {
            use std::io::Write;
            return std::io::stdout()
                .lock()
                .write_all(schema::text().as_bytes());
        }
        serve(ServeOptions {
            max_processes: cli.max_processes as usize,
            retain_bytes: cli.retain_bytes as usize,
            shutdown_grace: cli.shutdown_grace,
            output_filter: cli.output_notifications,
            output_throttle: cli.output_throttle,
            log_dir: cli.log_dir,
        })
    })
}

/// Runs the service until the client goes away or a signal comes; ends every process.
fn serve(options: ServeOptions) -> std::io::Result<()> {
    // Before any thread starts, so that every thread inherits the mask.
    let signals = stdio::Signals::block()?;
    let outbox = Arc::new(outbox::Outbox::default());
    let grace = options.shutdown_grace;
    let server = Arc::new(dispatch::Server::new(options, outbox.clone()));
    let ending = stdio::run("serve", signals, &outbox, |line| server.handle_line(line))?;
    log::info!("{ending}: ending every process");
    server.shutdown();
    // The last notifications (exited, closed) to a client still reading, briefly.
    outbox.drain(grace.min(Duration::from_secs(1)));
    // Threads blocked on a client that does not read, or on stdin, are not waited for.
    std::process::exit(0)
}
