//! `--probe NAME=COMMAND`: a probe that runs a shell command; exit status 0 means "active".
//!
//! The command runs in a process group of its own, with no input and its output discarded, and
//! is ended (the whole group, SIGKILL) when it takes longer than [`COMMAND_TIMEOUT`]. While it
//! runs, its pid is known to the zombie reaper, which leaves it alone (the probe reaps it).

use std::collections::HashSet;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use quietus::{Pid, Probe};

/// How long a probe command may run; also the probe's timeout.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// The pids of the probe commands running now: the reaper must not take their status.
static RUNNING: Mutex<Option<HashSet<Pid>>> = Mutex::new(None);

/// Whether `pid` is a probe command's (the reaper leaves it to the probe).
pub(crate) fn is_probe_command(pid: Pid) -> bool {
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_ref()
        .is_some_and(|pids| pids.contains(&pid))
}

/// A `--probe NAME=COMMAND` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeCommand {
    pub(crate) name: String,
    pub(crate) command: String,
}

/// `NAME=COMMAND`.
pub(crate) fn parse(text: &str) -> Result<ProbeCommand, String> {
    match text.split_once('=') {
        Some((name, command)) if !name.trim().is_empty() && !command.trim().is_empty() => {
            Ok(ProbeCommand {
                name: name.trim().to_owned(),
                command: command.to_owned(),
            })
        }
        _ => Err(format!(
            "{text:?} is not NAME=COMMAND: use ci_job='gh run view 42 --exit-status'"
        )),
    }
}

impl ProbeCommand {
    /// The library probe.
    pub(crate) fn probe(&self) -> Probe {
        let command = self.command.clone();
        let name = self.name.clone();
        Probe::new(self.name.clone(), move || run(&name, &command)).timeout(COMMAND_TIMEOUT)
    }
}

/// Runs `command` with `sh -c`; true when it exits 0 within the timeout.
fn run(name: &str, command: &str) -> bool {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = {
        // Held across the spawn: the reaper cannot look at the new pid before it is listed.
        let mut running = RUNNING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match cmd.spawn() {
            Ok(child) => {
                running
                    .get_or_insert_with(HashSet::new)
                    .insert(Pid::of(&child));
                child
            }
            Err(e) => {
                log::warn!("probe {name}: cannot run sh: {e}");
                return false;
            }
        }
    };
    let pid = Pid::of(&child);
    let give_up = Instant::now() + COMMAND_TIMEOUT;
    let answer = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < give_up => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                log::warn!("probe {name}: still running after {COMMAND_TIMEOUT:?}; killed");
                let _ = crate::sys::kill_group(pid);
                let _ = child.wait();
                break false;
            }
            Err(e) => {
                log::debug!("probe {name}: {e}");
                break false;
            }
        }
    };
    if let Some(pids) = RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_mut()
    {
        pids.remove(&pid);
    }
    answer
}
