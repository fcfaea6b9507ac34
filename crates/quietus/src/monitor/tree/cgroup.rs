//! The cgroup strategy: a cgroup v2 of the session's own, made just before the spawn, the
//! program born in it (`process::sys::spawn`); where none can be had under `auto`, the process
//! group, and the result says why.

use std::io;
use std::sync::Arc;

use super::guardian::{Place, start_guardian};
use crate::config::{Containment, MonitorConfig};
use crate::error::{SpawnError, SpawnErrorKind};
use crate::outcome::{SupervisorDeath, TreeHold};
use crate::process::cgroup::Cgroup;
use crate::process::sys;

/// The session's cgroup as the configuration asks, with its place in the guardian (told just
/// before the cgroup is made): `None` for the group (with why not a cgroup under `Auto`); an
/// error of its own kind when a cgroup was required and cannot be had.
pub(in crate::monitor) fn hold_tree(config: &MonitorConfig, id: u64) -> io::Result<Held> {
    let group = |why_not_cgroup| Held {
        cgroup: None,
        containment: TreeHold::Group {
            why_not_cgroup,
            supervisor_death: SupervisorDeath::NotNeeded,
        },
        guardian: Place::Untaken,
        entry: None,
    };
    if config.containment == Containment::Group {
        return Ok(group(None));
    }
    // The guardian is told of the cgroup just before it is made: from the cgroup's first
    // moment to its removal, something outside this process removes it (and ends its
    // members) if this process is killed.
    let mut guardian = Place::Untaken;
    match Cgroup::create(id, |path| {
        guardian = start_guardian(config, id, None, Some(path));
    }) {
        Ok((cgroup, entry)) => {
            let path = cgroup.path().to_owned();
            log::debug!(
                "session {id}: holding the tree in the cgroup {}",
                path.display()
            );
            Ok(Held {
                cgroup: Some(Arc::new(cgroup)),
                containment: TreeHold::Cgroup {
                    path,
                    supervisor_death: SupervisorDeath::NotNeeded,
                },
                guardian,
                entry: Some(entry),
            })
        }
        Err(why) => {
            drop(guardian); // forgets the session
            if config.containment == Containment::Cgroup {
                return Err(SpawnError::because(
                    SpawnErrorKind::Containment,
                    "--containment cgroup: no cgroup can be made for the session (run as root, \
                     or in a delegated cgroup: systemd-run --user --scope -p Delegate=yes …; or \
                     use --containment auto)",
                    why,
                    io::ErrorKind::PermissionDenied,
                )
                .into());
            }
            log::debug!("session {id}: no cgroup ({why}); holding the process group");
            Ok(group(Some(why)))
        }
    }
}

/// How the tree is held.
pub(in crate::monitor) struct Held {
    /// The session's cgroup, if it has one.
    pub(in crate::monitor) cgroup: Option<Arc<Cgroup>>,
    /// What the result says.
    pub(in crate::monitor) containment: TreeHold,
    /// The session's place in the guardian, told of the cgroup (or why there is none).
    pub(in crate::monitor) guardian: Place,
    /// What the child needs to start inside the cgroup.
    pub(in crate::monitor) entry: Option<sys::CgroupEntry>,
}
