//! The guardian strategy: the session's tree is told to the process's guardian (one per
//! supervising process, `process::guardian`), which ends it if this process dies.

use crate::config::MonitorConfig;
use crate::outcome::SupervisorDeath;
use crate::pid::Pid;
use crate::process;
use crate::process::guardian::GuardianUnavailable;

/// With the parent-death signal asked for, the grandchildren should die with this process
/// too: the process's guardian SIGKILLs the group (and the cgroup's members, and removes the
/// cgroup) if this process vanishes. [`Place::Untaken`] when not asked for.
pub(super) fn start_guardian(
    config: &MonitorConfig,
    id: u64,
    pid: Option<Pid>,
    cgroup: Option<&std::path::Path>,
) -> Place {
    if !config.parent_death_signal {
        return Place::Untaken;
    }
    match process::Guardian::start(id, pid, cgroup) {
        Ok(guardian) => Place::Taken(guardian),
        Err(why) => {
            log::info!("session {id}: no guardian: {why}");
            Place::Refused(why)
        }
    }
}

/// The session's place in the process's guardian.
pub(in crate::monitor) enum Place {
    /// Not asked for (no parent-death signal), or not yet: without a cgroup, it is taken once
    /// the program runs ([`guard_tree`]).
    Untaken,
    /// Taken: the guardian ends the tree if this process dies.
    Taken(process::Guardian),
    /// The guardian could not be had: why.
    Refused(GuardianUnavailable),
}

/// The session's place in the guardian, and what it means for the supervisor's death.
pub(in crate::monitor) struct Guarded {
    pub(in crate::monitor) guardian: Option<process::Guardian>,
    pub(in crate::monitor) supervisor_death: SupervisorDeath,
    /// The run was already over, its tree provably gone.
    pub(in crate::monitor) tree_gone: bool,
}

/// The session's place in the guardian, taken before any reader thread (no output of the
/// child is passed on before it exists), unless the run is already over with nothing left to
/// guard (`gone` says so: the leader exited and, adopting orphans and holding no cgroup, this
/// process has no child but it and the library's own, so every descendant still alive would be
/// one). A program that ends at once (`quietus -- true`) then costs no guardian. `early` is
/// the place taken before a cgroup was made.
pub(in crate::monitor) fn guard_tree(
    config: &MonitorConfig,
    id: u64,
    pid: Pid,
    gone: impl FnOnce() -> bool,
    early: Place,
) -> Guarded {
    let place = match early {
        Place::Untaken if gone() => {
            log::debug!("session {id}: pid {pid} already exited, alone: no guardian needed");
            return Guarded {
                guardian: None,
                supervisor_death: SupervisorDeath::NotNeeded,
                tree_gone: true,
            };
        }
        Place::Untaken => start_guardian(config, id, Some(pid), None),
        early => early, // in a cgroup: told before the program started
    };
    let guardian = match place {
        Place::Untaken => {
            return Guarded {
                guardian: None,
                supervisor_death: SupervisorDeath::Nothing,
                tree_gone: false,
            };
        }
        Place::Taken(guardian) => Ok(guardian),
        Place::Refused(why) => Err(why),
    };
    Guarded {
        supervisor_death: supervisor_death(&guardian, config.parent_death_signal),
        guardian: guardian.ok(),
        tree_gone: false,
    }
}

/// What a session's containment says about the supervisor's death, given its guardian (or why
/// there is none) and whether the leader gets the parent-death signal.
fn supervisor_death<G>(
    guardian: &Result<G, GuardianUnavailable>,
    parent_death_signal: bool,
) -> SupervisorDeath {
    match guardian {
        Ok(_) => SupervisorDeath::Guardian,
        Err(why) if parent_death_signal => SupervisorDeath::LeaderOnly {
            why_no_guardian: why.clone(),
        },
        Err(_) => SupervisorDeath::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_guardian_the_leader_alone_dies_with_the_supervisor() {
        let none: Result<(), GuardianUnavailable> = Err(GuardianUnavailable::NoProgram);
        assert_eq!(
            supervisor_death(&none, true),
            SupervisorDeath::LeaderOnly {
                why_no_guardian: GuardianUnavailable::NoProgram
            }
        );
        assert_eq!(supervisor_death(&none, false), SupervisorDeath::Nothing);
        assert_eq!(supervisor_death(&Ok(()), true), SupervisorDeath::Guardian);
    }
}
