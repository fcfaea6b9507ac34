//! The process-group strategy on pipes: the program leads a new process group (or, in the
//! non-interactive profile, a session without a controlling terminal) with its stdout and
//! stderr on pipes (or one combined pipe) the readers read.

use std::io;
use std::process::{Command, Stdio};

use super::{Attached, pipe_error};
use crate::config::MonitorConfig;
use crate::error::{SpawnError, SpawnErrorKind};
use crate::process::sys;
use crate::program::Stdin;

/// The program's stdin and how it leads.
pub(in crate::monitor) struct Pipes {
    pub(in crate::monitor) stdin: Stdin,
    pub(in crate::monitor) lead: sys::Lead,
    /// SIGKILL when the spawning thread dies (Linux).
    pub(in crate::monitor) parent_death: bool,
    /// The program's own ordered `execve`, if any.
    pub(in crate::monitor) exec: Option<sys::OrderedExec>,
    /// For a `Program`: whether its environment starts empty (`sys::spawn::Start::known`).
    pub(in crate::monitor) known: Option<bool>,
}

/// Gives the command its pipes (the read end of the one combined pipe returned, if combined)
/// and its stdin, and makes the child lead its tree (in the session's cgroup when there is
/// one).
pub(in crate::monitor) fn attach(
    command: &mut Command,
    config: &MonitorConfig,
    pipes: Pipes,
    cgroup: Option<sys::CgroupEntry>,
) -> io::Result<Attached> {
    let (combined, io) = match own_stdin(&pipes.stdin) {
        // quietus makes the program's stdio itself: a start without std's `Command` can give it.
        Some(stdin) => {
            let (combined, writer) = if config.capture.combined {
                // One pipe for both streams keeps the order in which the child wrote them.
                let (reader, writer) = std::io::pipe().map_err(pipe_error("make"))?;
                (Some(reader), Some(writer.into()))
            } else {
                (None, None)
            };
            let io = sys::spawn::OwnIo::pipes(stdin, writer).map_err(pipe_error("make"))?;
            (combined, Some(io))
        }
        None => {
            command.stdin(pipes.stdin.into_stdio());
            (
                pipe_output(command, config).map_err(pipe_error("make"))?,
                None,
            )
        }
    };
    let start = sys::spawn::Start {
        lead: pipes.lead,
        parent_death_signal: pipes.parent_death,
        cgroup,
        try_clone3: true,
        exec: pipes.exec,
        io,
        known: pipes.known,
    };
    let handoff = sys::spawn::plan(command, start).map_err(|e| {
        SpawnError::new(
            SpawnErrorKind::Containment,
            "cannot prepare the program's start in its cgroup",
            e,
        )
    })?;
    Ok(Attached {
        pty: None,
        combined,
        handoff,
    })
}

/// The program's stdin as quietus can make it itself (not a caller's `Stdio`, opaque).
fn own_stdin(stdin: &Stdin) -> Option<sys::spawn::OwnStdin> {
    match stdin {
        Stdin::Null => Some(sys::spawn::OwnStdin::Null),
        Stdin::Inherit => Some(sys::spawn::OwnStdin::Inherit),
        Stdin::Piped => Some(sys::spawn::OwnStdin::Piped),
        Stdin::Given(_) => None,
    }
}

/// Pipes the command's stdout and stderr; returns the read end of the one pipe of the
/// combined mode.
fn pipe_output(
    command: &mut Command,
    config: &MonitorConfig,
) -> io::Result<Option<std::io::PipeReader>> {
    Ok(if config.capture.combined {
        // One pipe for both streams keeps the order in which the child wrote them.
        let (reader, writer) = std::io::pipe()?;
        command.stdout(writer.try_clone()?).stderr(writer);
        Some(reader)
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    })
}
