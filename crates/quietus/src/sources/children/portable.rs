//! The children source's portable backend (macOS, and Linux with the `portable` feature):
//! the tree and the CPU of each process from `sysinfo`.

use std::fmt;
use std::time::Duration;

use super::{MAX_TREE, ProcSample, ProcessSource};
use crate::pid::Pid;

/// Portable source: one long-lived `sysinfo::System`, refreshed with CPU only, no tasks. It does
/// not know reaped children's CPU, and its start times have a one-second resolution.
pub(crate) struct Sysinfo {
    system: ::sysinfo::System,
}

impl fmt::Debug for Sysinfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sysinfo")
    }
}

impl Sysinfo {
    pub(crate) fn new() -> Self {
        Self {
            system: ::sysinfo::System::new(),
        }
    }

    fn refresh(&mut self, which: ::sysinfo::ProcessesToUpdate<'_>) {
        let kind = ::sysinfo::ProcessRefreshKind::nothing()
            .with_cpu()
            .without_tasks();
        self.system.refresh_processes_specifics(which, true, kind);
    }

    fn convert(pid: Pid, p: &::sysinfo::Process) -> ProcSample {
        ProcSample {
            pid,
            ppid: p.parent().and_then(|pp| Pid::new(pp.as_u32())),
            pgrp: crate::process::sys::process_group_of(pid),
            start_time: p.start_time(),
            cpu: Duration::from_millis(p.accumulated_cpu_time()),
            child_cpu: Duration::ZERO,
            dead: matches!(
                p.status(),
                ::sysinfo::ProcessStatus::Zombie | ::sysinfo::ProcessStatus::Dead
            ),
        }
    }
}

impl ProcessSource for Sysinfo {
    fn tree(&mut self, root: Pid) -> Vec<ProcSample> {
        self.refresh(::sysinfo::ProcessesToUpdate::All);
        let procs = self.system.processes();
        let Some(r) = procs.get(&::sysinfo::Pid::from_u32(root.get())) else {
            return Vec::new();
        };
        let mut tree = vec![Self::convert(root, r)];
        let mut index = 0;
        while index < tree.len() && tree.len() < MAX_TREE {
            let parent = tree[index].pid.get();
            for (pid, p) in procs {
                if p.parent().map(|pp| pp.as_u32()) == Some(parent)
                    && pid.as_u32() != root.get()
                    && let Some(pid) = Pid::new(pid.as_u32())
                {
                    tree.push(Self::convert(pid, p));
                }
            }
            index += 1;
        }
        tree
    }

    fn process(&mut self, pid: Pid) -> Option<ProcSample> {
        let spid = ::sysinfo::Pid::from_u32(pid.get());
        self.refresh(::sysinfo::ProcessesToUpdate::Some(&[spid]));
        self.system.process(spid).map(|p| Self::convert(pid, p))
    }
}
