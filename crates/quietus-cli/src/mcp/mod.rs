//! `quietus mcp`: supervised command execution as Model Context Protocol tools, on stdio
//! (newline-delimited JSON-RPC 2.0, the framing of `quietus serve`). Built on the library's
//! public API ([`quietus::Registry`], [`quietus::Session`]) like the command; the
//! reference is `docs/mcp.md`.
//!
//! - `protocol`: the MCP lifecycle and methods, pure (a line in, the answer out);
//! - `tools`: reading a tool call's arguments; `schema`: the tools' descriptions and schemas;
//! - `exec`: the sessions behind the tools, on one registry; `session`: one of them;
//!   `render`: their answers;
//! - `output`: the output since the last answer, head and tail;
//! - `options`: the server's options (flags and `QUIETUS_*` variables).

mod exec;
mod options;
mod output;
mod protocol;
mod render;
mod schema;
mod session;
mod tools;

// The settings table's test walks every surface (`settings::tests`).
#[cfg(test)]
pub(crate) use {schema::tools, tools::parse_call};

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::time::Duration;

use crate::jsonrpc::{outbox::Outbox, protocol as rpc, stdio};
use options::McpCli;
pub(crate) use options::McpOptions;
use protocol::{Mcp, Reply};

/// `quietus mcp [OPTIONS]`: `args` start with the program name and `mcp`.
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    stdio::server_main("mcp", args, |cli: McpCli| serve(McpOptions::from(cli)))
}

/// Serves until the client goes away or a signal comes; ends every session.
fn serve(options: McpOptions) -> std::io::Result<()> {
    // Before any thread starts, so that every thread inherits the mask.
    let signals = stdio::Signals::block()?;
    let outbox = Arc::new(Outbox::default());
    // "info": announcements of ended sessions go out unless the client asks for less.
    let level = Arc::new(AtomicU8::new(1));
    let exec = Arc::new(exec::Exec::new(
        options.clone(),
        outbox.clone(),
        level.clone(),
    ));
    let mut mcp = Mcp::new(options, level);
    let calls = Arc::new(exec::InFlight::default());
    let ending = stdio::run("mcp", signals, &outbox, |line| {
        match mcp.handle_line(line) {
            Reply::Send(message) => outbox.send(&message),
            Reply::Nothing => {}
            Reply::Cancelled(request) => exec.cancel(&request),
            Reply::Call {
                id,
                call,
                structured,
                progress,
            } => {
                let context = exec.begin_call(&id, progress);
                call_on_worker(&exec, &outbox, &calls, id, call, structured, context)
            }
        }
    })?;
    log::info!("{ending}: ending every session");
    exec.shutdown();
    // The calls under way answer now that their sessions ended (a client that closed its
    // end of our stdin may still read).
    calls.wait_for_none(Duration::from_secs(5));
    // The last answers to a client still reading, briefly.
    outbox.drain(Duration::from_secs(1));
    // Threads blocked on a client that does not read, or on stdin, are not waited for.
    std::process::exit(0)
}

/// Runs a tool call on a thread of its own (an `exec_command` may wait its whole yield
/// window) and answers from there.
fn call_on_worker(
    exec: &Arc<exec::Exec>,
    outbox: &Arc<Outbox>,
    calls: &Arc<exec::InFlight>,
    id: serde_json::Value,
    call: tools::ToolCall,
    structured: bool,
    context: exec::CallContext,
) {
    let (worker, out, done) = (exec.clone(), outbox.clone(), calls.clone());
    let answer_id = id.clone();
    let is_exec = matches!(call, tools::ToolCall::Exec(_));
    calls.begin();
    if is_exec {
        exec.starting.begin();
    }
    let spawned = std::thread::Builder::new()
        .name("quietus-mcp-call".into())
        .spawn(move || {
            let result = protocol::call_result(worker.run(call, &context), structured);
            worker.end_call(&context);
            // A request its client cancelled gets no answer (the MCP specification); its
            // output stays for the next call (the run took none).
            if !context.cancelled() {
                out.send(&rpc::response(answer_id, result));
            }
            done.end();
        });
    if let Err(e) = spawned {
        exec.end_request(&id.to_string());
        calls.end();
        if is_exec {
            exec.starting.end();
        }
        outbox.send(&rpc::error_response(
            id,
            rpc::RpcError::new(
                -32603,
                format!("internal error: cannot start a thread: {e}"),
            ),
        ));
    }
}
