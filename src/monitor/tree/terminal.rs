//! The terminal strategy: the program runs on a pseudo-terminal (its stdin, stdout and
//! stderr), leading a new session whose controlling terminal it is (and so a new process
//! group: its pgid is its pid, as on pipes).

use std::io;
use std::process::Command;

use super::{Attached, terminal_error};
use crate::process::pty::Pty;
use crate::process::sys;

/// Gives the command a new terminal of `(rows, cols)` and makes the child lead a session on it
/// (in the session's cgroup when there is one), with the parent-death signal when asked.
pub(in crate::monitor) fn attach(
    command: &mut Command,
    (rows, cols): (u16, u16),
    parent_death: bool,
    cgroup: Option<sys::CgroupEntry>,
) -> io::Result<Attached> {
    let terminal = Pty::open(rows, cols).map_err(terminal_error("open"))?;
    let handoff = terminal
        .prepare(command, parent_death, cgroup)
        .map_err(terminal_error("prepare"))?;
    Ok(Attached {
        pty: Some(terminal),
        combined: None,
        handoff,
    })
}
