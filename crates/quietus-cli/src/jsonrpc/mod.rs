//! The JSON-RPC 2.0 framing shared by the stdio servers, `quietus serve` and
//! `quietus mcp`: one JSON object per line on stdin and stdout, logs on stderr.
//!
//! - `protocol`: parsing a line, answers, error codes and parameter checks;
//! - `outbox`: the bounded queue to the client and its writer thread;
//! - `stdio`: the loop that reads the client's lines, watches for TERM/INT/HUP and says why it
//!   ended.

pub(crate) mod outbox;
pub(crate) mod protocol;
pub(crate) mod stdio;
