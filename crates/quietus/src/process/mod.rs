//! Starting a program (the direct start of a `Program`, else std's `Command`; from the spawner
//! thread when the parent-death signal needs a long-lived thread), the child it becomes, and
//! the guardian. Raw OS calls live in [`sys`].

pub(crate) mod cgroup;
pub(crate) mod guardian;
pub(crate) mod orphans;
pub(crate) mod pty;
pub(crate) mod spare;
pub(crate) mod sys;

use std::io;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus};

use crate::pid::Pid;

use crossbeam_channel::{Sender, bounded, unbounded};

use sys::Handoff;

/// Work for the spawner thread.
type Job = Box<dyn FnOnce() + Send>;

/// The long-lived thread that forks every child started with the parent-death signal.
///
/// Linux delivers `PR_SET_PDEATHSIG` when the *thread* that forked the child exits, not the
/// process. A caller spawning from a short-lived thread would see its child killed when that
/// thread ends; forking from one thread that lives as long as the process avoids that. When it
/// cannot be started (a process limit), the spawn fails with nothing run, and the next spawn
/// tries again: never a fork from the caller's thread, whose end would kill the program
/// (issue 51 item 1).
fn spawner() -> io::Result<Sender<Job>> {
    static SPAWNER: crate::sync::Mutex<Option<Sender<Job>>> = crate::sync::Mutex::new(None);
    let mut spawner = SPAWNER.lock();
    if let Some(tx) = spawner.as_ref() {
        return Ok(tx.clone());
    }
    let (tx, rx) = unbounded::<Job>();
    std::thread::Builder::new()
        .name("quietus-spawner".into())
        .spawn(move || rx.into_iter().for_each(|job| job()))
        .map_err(|e| crate::error::SpawnError::thread("spawner", e))?;
    *spawner = Some(tx.clone());
    Ok(tx)
}

/// Runs `job` (a spawn) on the spawner thread and returns what it returned; an error when the
/// spawner cannot be had (the job did not run), or the job was lost (it panicked there).
pub(crate) fn on_spawner<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let (reply_tx, reply_rx) = bounded(1);
    spawner()?
        .send(Box::new(move || drop(reply_tx.send(job()))))
        .map_err(|_| io::Error::other("the quietus spawner thread stopped"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the quietus spawner thread lost the spawn"))
}

/// Spawns `command` (already configured), from the spawner thread when `from_spawner`.
///
/// With a [`sys::Handoff`] holding a direct start (`sys::spawn::Direct`: a `Program` on stdio
/// quietus made), the program starts without a copy of this process; where the kernel refuses
/// that, std's path runs as below. With a cgroup, the process std forked is not the program's:
/// it is reaped here, and the returned child is its sibling that runs the program. A failed
/// spawn leaves no process behind either way.
pub(crate) fn spawn(
    command: Command,
    from_spawner: bool,
    mut handoff: Option<Handoff>,
) -> (Command, io::Result<ChildProcess>) {
    let ends = handoff.as_mut().map(|h| std::mem::take(&mut h.ends));
    if let Some(direct) = handoff.as_mut().and_then(|h| h.direct.take()) {
        let start = move || sys::spawn::start_direct(&direct);
        let started = if from_spawner {
            match on_spawner(start) {
                Ok(started) => started,
                Err(e) => return (command, Err(e)),
            }
        } else {
            start()
        };
        if let Some(started) = started {
            let child = started.map(|pid| ChildProcess::started(pid, None, None, None));
            return (command, child.map(|child| child.with(ends)));
        }
    }
    let (command, spawned) = spawn_std(command, from_spawner);
    let child = match spawned {
        Ok(child) => Ok(ChildProcess::adopt(child, handoff.as_ref()).with(ends)),
        Err(e) => {
            if let Some(handoff) = &handoff {
                reap_failed_sibling(handoff);
            }
            Err(e)
        }
    };
    (command, child)
}

/// std's spawn, from the spawner thread when `from_spawner`.
fn spawn_std(mut command: Command, from_spawner: bool) -> (Command, io::Result<Child>) {
    if from_spawner {
        let answer = on_spawner(move || {
            let child = command.spawn();
            (command, child)
        });
        return answer.unwrap_or_else(|e| (Command::new(""), Err(e)));
    }
    let child = command.spawn();
    (command, child)
}

/// The spawn failed after the program's process was made (its `exec` failed: the error std
/// returned is its own): reaps it, as std reaped the process it forked.
fn reap_failed_sibling(handoff: &Handoff) {
    #[cfg(target_os = "linux")]
    if let sys::Leader::Sibling(pid) = handoff.leader()
        && let Err(e) = sys::reap_child(pid, true)
    {
        log::debug!("reaping pid {pid}, whose exec failed: {e}");
    }
    // Elsewhere the program always runs in the forked process (no `clone3`): nothing to reap.
    #[cfg(not(target_os = "linux"))]
    let _ = handoff;
}

/// A child the library started: the process that runs the program, and its pipes.
///
/// Like std's `Child`, which it replaces because the program's process is not always the one
/// std forked (`sys::spawn`). It is waited for by pid; once reaped it is never signalled.
#[derive(Debug)]
pub(crate) struct ChildProcess {
    pid: Pid,
    /// Its stdin, when piped.
    pub(crate) stdin: Option<ChildStdin>,
    /// Its stdout, when piped.
    pub(crate) stdout: Option<ChildStdout>,
    /// Its stderr, when piped.
    pub(crate) stderr: Option<ChildStderr>,
    /// Its status, once reaped.
    status: Option<ExitStatus>,
}

impl ChildProcess {
    /// The child std spawned, or (as `handoff` says) the sibling it made; the pipes are the
    /// same (the sibling inherited them).
    fn adopt(mut child: Child, handoff: Option<&Handoff>) -> ChildProcess {
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))] // a sibling's, on Linux
        let mut pid = Pid::of(&child);
        #[cfg(target_os = "linux")]
        if let Some(sys::Leader::Sibling(sibling)) = handoff.map(sys::Handoff::leader) {
            // The forked process exited right after making the sibling: reap it.
            if let Err(e) = child.wait() {
                log::debug!("reaping pid {pid}, which started the program: {e}");
            }
            pid = sibling;
        }
        #[cfg(not(target_os = "linux"))]
        let _ = handoff;
        ChildProcess::started(pid, stdin, stdout, stderr)
    }

    /// The child that runs the program, with its pipes.
    pub(crate) fn started(
        pid: Pid,
        stdin: Option<ChildStdin>,
        stdout: Option<ChildStdout>,
        stderr: Option<ChildStderr>,
    ) -> ChildProcess {
        ChildProcess {
            pid,
            stdin,
            stdout,
            stderr,
            status: None,
        }
    }

    /// With the pipes' ends quietus made itself (`sys::spawn::OwnIo`), where std made none.
    fn with(mut self, ends: Option<sys::spawn::Ends>) -> ChildProcess {
        if let Some(ends) = ends {
            self.stdin = self.stdin.or(ends.stdin.map(ChildStdin::from));
            self.stdout = self.stdout.or(ends.stdout.map(ChildStdout::from));
            self.stderr = self.stderr.or(ends.stderr.map(ChildStderr::from));
        }
        self
    }

    /// Its pid.
    pub(crate) fn id(&self) -> Pid {
        self.pid
    }

    /// Waits for it to exit and reaps it (closing its stdin first, as std does).
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = sys::reap_child(self.pid, true)?
            .ok_or_else(|| io::Error::other("waitpid returned no status"))?;
        self.status = Some(status);
        Ok(status)
    }

    /// Its status if it exited (and reaps it then), `None` while it runs.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = sys::reap_child(self.pid, false)?;
        }
        Ok(self.status)
    }

    /// SIGKILL, unless it was reaped already (its pid may belong to another process then).
    pub(crate) fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        sys::kill_pid(self.pid, sys::SIGKILL)
    }
}

/// A spawn error, with the program named in the message and the kind kept (so `NotFound` and
/// `PermissionDenied` can still be told apart): a [`SpawnErrorKind::Program`] error.
///
/// [`SpawnErrorKind::Program`]: crate::error::SpawnErrorKind::Program
pub(crate) fn describe_spawn_error(command: &Command, error: io::Error) -> io::Error {
    crate::error::SpawnError::program(command.get_program(), error).into()
}

pub(crate) use guardian::Guardian;
