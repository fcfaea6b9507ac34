//! Spawning in a new process group, and signalling the tree. Raw OS calls live in [`sys`].

pub(crate) mod cgroup;
pub(crate) mod orphans;
pub(crate) mod pty;
pub(crate) mod sys;

use std::io;
use std::process::{Child, Command};
use std::sync::OnceLock;

use crossbeam_channel::{Sender, bounded, unbounded};

type SpawnRequest = (Command, Sender<(Command, io::Result<Child>)>);

/// The long-lived thread that forks every child started with the parent-death signal.
///
/// Linux delivers `PR_SET_PDEATHSIG` when the *thread* that forked the child exits, not the
/// process. A caller spawning from a short-lived thread would see its child killed when that
/// thread ends; forking from one thread that lives as long as the process avoids that.
fn spawner() -> &'static Sender<SpawnRequest> {
    static SPAWNER: OnceLock<Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = unbounded::<SpawnRequest>();
        let started = std::thread::Builder::new()
            .name("stallwatch-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let child = command.spawn();
                    let _ = reply.send((command, child));
                }
            });
        if let Err(e) = started {
            log::error!("cannot start the spawner thread: {e}; spawning from the caller's thread");
        }
        tx
    })
}

/// Spawns `command` (already configured), from the spawner thread when `from_spawner`.
pub(crate) fn spawn(command: Command, from_spawner: bool) -> (Command, io::Result<Child>) {
    let mut command = command;
    if from_spawner {
        let (reply_tx, reply_rx) = bounded(1);
        match spawner().send((command, reply_tx)) {
            Ok(()) => {
                if let Ok(answer) = reply_rx.recv() {
                    return answer;
                }
                // The spawner thread is gone together with the command; this cannot happen
                // while the thread runs its endless loop, but never panic over it.
                return (
                    Command::new(""),
                    Err(io::Error::other("the stallwatch spawner thread stopped")),
                );
            }
            Err(crossbeam_channel::SendError((c, _))) => command = c,
        }
    }
    let child = command.spawn();
    (command, child)
}

/// A spawn error, with the program named in the message and the kind kept (so `NotFound` and
/// `PermissionDenied` can still be told apart): a [`SpawnErrorKind::Program`] error.
///
/// [`SpawnErrorKind::Program`]: crate::SpawnErrorKind::Program
pub(crate) fn describe_spawn_error(command: &Command, error: io::Error) -> io::Error {
    crate::error::SpawnError::program(command.get_program(), error).into()
}

/// A watchman for the process group of a session, outside this process: if the supervising
/// process dies without ending the session (a crash, SIGKILL), the guardian SIGKILLs the whole
/// group, grandchildren included (the parent-death signal only reaches the direct child), and,
/// when the session has a cgroup, every member of the cgroup (`cgroup.kill`; frozen and killed
/// one by one before kernel 5.14), then removes the cgroup.
///
/// It is a tiny `sh` in a process group of its own, reading one line from a pipe whose write
/// end only this process holds: `done` when the session ended properly (the guardian then
/// exits quietly), end-of-file when this process died.
#[derive(Debug)]
pub(crate) struct Guardian {
    child: Child,
    tx: Option<std::io::PipeWriter>,
}

/// The guardian's whole program: POSIX `sh`, and `rmdir` and `sleep` for a cgroup.
const GUARDIAN_SCRIPT: &str = r#"read line; [ "$line" = done ] && exit 0
kill -9 "-$1" 2>/dev/null
[ -n "$2" ] || exit 0
if ! echo 1 2>/dev/null >"$2/cgroup.kill"; then
  echo 1 2>/dev/null >"$2/cgroup.freeze"
  for p in $(cat "$2/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  echo 0 2>/dev/null >"$2/cgroup.freeze"
fi
i=0
while [ $i -lt 200 ]; do
  rmdir "$2" 2>/dev/null && exit 0
  [ -d "$2" ] || exit 0
  sleep 0.05 2>/dev/null || sleep 1
  i=$((i + 1))
done"#;

impl Guardian {
    /// Starts the guardian of process group `pgid` and, when there is one, of `cgroup` (its
    /// directory).
    pub(crate) fn start(pgid: u32, cgroup: Option<&std::path::Path>) -> io::Result<Guardian> {
        let (rx, tx) = std::io::pipe()?;
        let mut command = Command::new("/bin/sh");
        command
            .args([
                "-c",
                GUARDIAN_SCRIPT,
                "stallwatch-guardian",
                &pgid.to_string(),
            ])
            .arg(cgroup.map(std::path::Path::as_os_str).unwrap_or_default())
            .stdin(rx)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // Its own group: the session's ladder, and a terminal's Ctrl-C, do not reach it.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // Our own child, not an orphan to attribute to a session.
        let gate = orphans::spawn_gate();
        let child = command.spawn()?;
        orphans::spawned(child.id() as i32);
        drop(gate);
        Ok(Guardian {
            child,
            tx: Some(tx),
        })
    }

    /// The session ended properly: the guardian exits without signalling. It is reaped on a
    /// short-lived thread of its own, so a session that ends while the guardian's `sh` is
    /// still starting does not wait for it.
    pub(crate) fn release(mut self) {
        if let Some(mut tx) = self.tx.take() {
            let _ = std::io::Write::write_all(&mut tx, b"done\n");
        }
        let mut child = self.child;
        let reaper = std::thread::Builder::new()
            .name("stallwatch-guardian".into())
            .spawn(move || {
                let _ = child.wait();
                orphans::reaped(child.id() as i32);
            });
        if let Err(e) = reaper {
            log::debug!("cannot start a thread to reap the guardian ({e}); it stays a zombie");
        }
    }
}
