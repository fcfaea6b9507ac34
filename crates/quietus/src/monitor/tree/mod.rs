//! How a session's tree is started and held, one file per strategy (as process-wrap composes
//! its wrappers): the program leads a process group (or a session) on pipes ([`group`]) or on a
//! terminal ([`terminal`]), inside a cgroup of its own where one can be had ([`cgroup`]), and
//! the process's guardian is told of it ([`guardian`]). Every program is started by std's
//! `Command`; what the child does before `exec` is planned in `process::sys::spawn`.
//!
//! Signalling, listing and ending the tree go through [`layer::ProcessLayer`], which the ladder
//! (`monitor::ladder`) acts through: by process group and escapees, or by cgroup.

pub(super) mod cgroup;
pub(super) mod group;
pub(super) mod guardian;
pub(super) mod layer;
pub(super) mod terminal;

use std::io;
use std::process::Command;

use crate::config::MonitorConfig;
use crate::error::{SpawnError, SpawnErrorKind};
use crate::process::pty::Pty;
use crate::process::{self, ChildProcess, sys};

/// How the command is executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exec {
    /// std's `execvp` (a caller's `Command`).
    Std,
    /// A [`Program`](crate::Program)'s (every setting known): quietus's own `execve` keeps its
    /// environment in order, cleared first when it is an isolated one.
    Ordered { env_cleared: bool },
}

/// Where the program's stdio goes, and what it leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attach {
    /// Pipes; it leads a process group of its own.
    Group,
    /// Pipes; it leads a session of its own, without a controlling terminal (non-interactive).
    Session,
    /// A pseudo-terminal of this size.
    Terminal { rows: u16, cols: u16 },
}

/// How the program starts: its stdio, how it leads, and where.
pub(super) struct Plan {
    /// Its stdin (a terminal replaces it).
    pub(super) stdin: crate::program::Stdin,
    /// On pipes, leading a group or a session, or on a terminal.
    pub(super) attach: Attach,
    /// By std's `execvp`, or by quietus's own `execve` keeping a `Program`'s environment in
    /// order.
    pub(super) exec: Exec,
    /// What the child needs to start inside the session's cgroup.
    pub(super) cgroup: Option<sys::CgroupEntry>,
    /// Whether the guardian holds the tree from before the start (the cgroup's): then the
    /// program needs no parent-death signal of its own.
    pub(super) guarded: bool,
}

/// A started program: the child, its terminal, the read end of the one combined pipe, and the
/// subreaper tag it was given.
pub(super) struct Started {
    pub(super) child: ChildProcess,
    pub(super) pty: Option<Pty>,
    pub(super) combined: Option<std::io::PipeReader>,
    pub(super) tag: Option<Vec<u8>>,
}

/// What the spawn needs beside the command: the terminal, the read end of the one combined
/// pipe, and what tells which process runs the program.
pub(super) struct Attached {
    pub(super) pty: Option<Pty>,
    pub(super) combined: Option<std::io::PipeReader>,
    pub(super) handoff: Option<sys::Handoff>,
}

/// Gives the command its stdio and its start in the session's cgroup as `plan` says, and
/// spawns it with std's `Command` (from the spawner thread when the parent-death signal needs
/// a long-lived thread).
pub(super) fn start(
    mut command: Command,
    config: &MonitorConfig,
    id: u64,
    plan: Plan,
) -> io::Result<Started> {
    // A guardian that holds the cgroup from before the start ends every member of it if this
    // process dies: the program needs no parent-death signal of its own, and so no fork from
    // the long-lived spawner thread (a thread start, and two hand-offs at every spawn).
    let parent_death = config.parent_death_signal && !plan.guarded;
    let tag = subreaper_tag(&mut command, config, id);
    // From the main thread, the signal comes when the process dies, as from the spawner.
    let from_spawner = cfg!(target_os = "linux") && parent_death && !sys::on_main_thread();
    let exec = match plan.exec {
        Exec::Ordered { env_cleared } => sys::OrderedExec::of(&command, env_cleared)
            .map_err(|e| process::describe_spawn_error(&command, e))?,
        Exec::Std => None,
    };
    let known = match plan.exec {
        Exec::Ordered { env_cleared } => Some(env_cleared),
        Exec::Std => None,
    };
    let attached = match plan.attach {
        Attach::Terminal { rows, cols } => {
            drop(plan.stdin);
            let start = terminal::Start {
                size: (rows, cols),
                parent_death,
                exec,
                known,
            };
            terminal::attach(&mut command, start, plan.cgroup)?
        }
        Attach::Group | Attach::Session => {
            let lead = if matches!(plan.attach, Attach::Session) {
                sys::Lead::Session
            } else {
                sys::Lead::Group
            };
            let pipes = group::Pipes {
                stdin: plan.stdin,
                lead,
                parent_death,
                exec,
                known,
            };
            group::attach(&mut command, config, pipes, plan.cgroup)?
        }
    };
    let Attached {
        mut pty,
        combined,
        handoff,
    } = attached;
    let leader = Leader {
        from_spawner,
        id,
        tag: tag.as_ref(),
    };
    let (command, child) = spawn_leader(command, &leader, pty.as_mut(), handoff)?;
    log::debug!(
        "session {id}: spawned {:?} as pid {}",
        command.get_program(),
        child.id()
    );
    // The command still holds our copies of the pipes' write ends: close them, or the
    // readers would never see end-of-file.
    drop(command);
    Ok(Started {
        child,
        pty,
        combined,
        tag,
    })
}

/// Who spawns the leader, for which session.
struct Leader<'a> {
    /// From the spawner thread (the parent-death signal comes when the forking thread dies).
    from_spawner: bool,
    id: u64,
    /// The subreaper tag the session's orphans carry.
    tag: Option<&'a Vec<u8>>,
}

/// Spawns the child, known to the orphan attribution before the fork, and known as this
/// library's own child before any other session can look at this process's children. Returns
/// the command (it still holds the pipes' write ends) and the child.
fn spawn_leader(
    command: Command,
    leader: &Leader<'_>,
    pty: Option<&mut Pty>,
    handoff: Option<sys::Handoff>,
) -> io::Result<(Command, ChildProcess)> {
    let id = leader.id;
    let gate = process::orphans::spawn_gate();
    process::orphans::register(id, boot_ticks_now(), leader.tag.cloned());
    let (mut command, spawned) = process::spawn(command, leader.from_spawner, handoff);
    if let Some(pty) = pty {
        // Whether or not the spawn worked: this process keeps no copy of the slave, so the
        // master reads the end once the child's side is closed.
        pty.spawned(&mut command);
    }
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            drop(gate);
            end_session(id);
            return Err(process::describe_spawn_error(&command, e));
        }
    };
    let pid = child.id();
    process::orphans::spawned(pid);
    process::orphans::set_leader(id, pid);
    drop(gate);
    Ok((command, child))
}

/// Subreaper mode: orphans come back to this process; a tag in their environment (among
/// other evidence: `process::orphans`) tells which session they belong to.
fn subreaper_tag(command: &mut Command, config: &MonitorConfig, id: u64) -> Option<Vec<u8>> {
    if config.children.subreaper {
        match sys::become_subreaper() {
            Ok(()) => {
                process::orphans::set_adopting();
                let value = format!("{}.{id}", std::process::id());
                command.env(SESSION_TAG, &value);
                Some(format!("{SESSION_TAG}={value}").into_bytes())
            }
            Err(e) => {
                log::warn!("session {id}: cannot become a child subreaper ({e}); going on without");
                None
            }
        }
    } else {
        None
    }
}

/// A [`SpawnErrorKind::Terminal`] error: the pseudo-terminal could not be `verb`ed.
pub(super) fn terminal_error(verb: &'static str) -> impl Fn(io::Error) -> SpawnError + Copy {
    move |e| {
        SpawnError::new(
            SpawnErrorKind::Terminal,
            format_args!("cannot {verb} the pseudo-terminal"),
            e,
        )
    }
}

/// A [`SpawnErrorKind::Pipe`] error: the output pipes could not be `verb`ed.
pub(super) fn pipe_error(verb: &'static str) -> impl Fn(io::Error) -> SpawnError {
    move |e| {
        SpawnError::new(
            SpawnErrorKind::Pipe,
            format_args!("cannot {verb} the output pipes"),
            e,
        )
    }
}

/// The environment variable that tags a session's processes in subreaper mode.
pub(super) const SESSION_TAG: &str = "QUIETUS_SESSION";

/// Now in clock ticks since boot, the unit of process start times (0 where unknown: a session
/// then counts as running since boot, which only makes the attribution more cautious).
pub(in crate::monitor) fn boot_ticks_now() -> u64 {
    #[cfg(target_os = "linux")]
    {
        crate::process::sys::boot_ticks_now().unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The session is over for the orphan attribution (`process::orphans`).
pub(in crate::monitor) fn end_session(id: u64) {
    #[cfg(target_os = "linux")]
    let now = crate::process::sys::boot_ticks_now().map(|t| t + 1); // one tick of margin: both are whole ticks
    #[cfg(not(target_os = "linux"))]
    let now = None;
    crate::process::orphans::end(id, now);
}
