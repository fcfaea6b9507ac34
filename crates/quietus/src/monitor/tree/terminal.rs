//! The terminal strategy: the program runs on a pseudo-terminal (its stdin, stdout and
//! stderr), leading a new session whose controlling terminal it is (and so a new process
//! group: its pgid is its pid, as on pipes).

use std::io;
use std::process::Command;

use super::{Attached, terminal_error};
use crate::process::pty::Pty;
use crate::process::sys;

/// The terminal's size and how the program starts on it.
pub(in crate::monitor) struct Start {
    /// Rows and columns.
    pub(in crate::monitor) size: (u16, u16),
    /// SIGKILL when the spawning thread dies (Linux).
    pub(in crate::monitor) parent_death: bool,
    /// The program's own ordered `execve`, if any.
    pub(in crate::monitor) exec: Option<sys::OrderedExec>,
    /// For a `Program`: whether its environment starts empty (`sys::spawn::Start::known`).
    pub(in crate::monitor) known: Option<bool>,
}

/// Gives the command a new terminal and makes the child lead a session on it (in the
/// session's cgroup when there is one), with the parent-death signal when asked.
pub(in crate::monitor) fn attach(
    command: &mut Command,
    start: Start,
    cgroup: Option<sys::CgroupEntry>,
) -> io::Result<Attached> {
    let (rows, cols) = start.size;
    let terminal = Pty::open(rows, cols).map_err(terminal_error("open"))?;
    let handoff = terminal
        .prepare(command, start.parent_death, cgroup, start.exec, start.known)
        .map_err(terminal_error("prepare"))?;
    Ok(Attached {
        pty: Some(terminal),
        combined: None,
        handoff,
    })
}
