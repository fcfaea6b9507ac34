//! How the program's process starts: std's `Command`, and what the child does before `exec`
//! (a new process group or session, the parent-death signal, the entry into the session's
//! cgroup), planned here in safe code and run by the hook of `unsafe_calls`.
//!
//! A command that needs none of it but its group (`process_group(0)`) gets no hook at all, and
//! std may start it with `posix_spawn`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{Pid, Signal};

/// How the child leads its tree. In every case its process-group id is its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lead {
    /// The leader of a new process group.
    Group,
    /// The leader of a new session without a controlling terminal (the non-interactive
    /// profile): opening `/dev/tty` fails at once (ENXIO) instead of prompting.
    Session,
    /// The leader of a new session whose controlling terminal is its standard input, which
    /// the caller has already set to a terminal's slave side (std duplicates the slave onto
    /// fds 0, 1 and 2 before the hooks run).
    Terminal,
}

/// A session's cgroup as the child enters it: its directory (for `clone3(CLONE_INTO_CGROUP)`)
/// and its `cgroup.procs` (the fallback's way in), both opened before the fork.
#[derive(Debug)]
pub(crate) struct CgroupEntry {
    pub(crate) dir: OwnedFd,
    pub(crate) procs: OwnedFd,
}

impl CgroupEntry {
    /// The directory's descriptor number (what `clone3` takes).
    pub(super) fn dir_raw(&self) -> i32 {
        self.dir.as_raw_fd()
    }
}

/// What the hook does in the child, before `exec`: plain values and descriptors only.
#[derive(Debug)]
pub(crate) struct PreExec {
    pub(super) lead: Lead,
    /// The supervisor's pid, when the child must get SIGKILL as its spawning thread dies
    /// (Linux): the hook checks that this parent still lives.
    pub(super) parent: Option<Pid>,
    pub(super) cgroup: Option<CgroupEntry>,
    /// Born in the cgroup by `clone3` where the kernel can; `false` forces the write (tests).
    pub(super) try_clone3: bool,
}

/// How the forked process tells stallwatch which process runs the program: the read end of a
/// pipe (non-blocking) to which it writes a pid before it exits (`clone3` worked) or `0` before
/// it goes on to `exec` itself (the fallback).
#[derive(Debug)]
pub(crate) struct Handoff {
    read: OwnedFd,
}

/// What the forked process said, read once std's spawn has returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leader {
    /// The program runs in this process, made by `clone3`; the forked one exited.
    Sibling(i32),
    /// The forked process runs the program itself (it entered the cgroup by a write).
    Forked,
    /// Nothing was said: the forked process failed before (the spawn's error says why).
    Unknown,
}

impl Handoff {
    /// What the forked process said. Call it after std's spawn returned: by then the forked
    /// process has exited (or `exec`ed), so whatever it wrote is in the pipe and the read never
    /// waits.
    pub(crate) fn leader(&self) -> Leader {
        let mut pid = [0u8; 4];
        match rustix::io::read(&self.read, &mut pid) {
            Ok(4) => match i32::from_ne_bytes(pid) {
                0 => Leader::Forked,
                p if p > 0 => Leader::Sibling(p),
                _ => Leader::Unknown,
            },
            _ => Leader::Unknown,
        }
    }
}

/// Makes `command`'s child lead as `lead` asks, with the parent-death signal when asked (on
/// Linux: SIGKILL when the thread that spawned it dies), inside the session's cgroup when
/// given one. With a cgroup, the returned [`Handoff`] tells which process runs the program.
pub(crate) fn configure(
    command: &mut Command,
    lead: Lead,
    parent_death_signal: bool,
    cgroup: Option<CgroupEntry>,
) -> io::Result<Option<Handoff>> {
    plan(command, lead, parent_death_signal, cgroup, true)
}

/// [`configure`], with `try_clone3` false forcing the entry by a write (the tests cover that
/// path on kernels that have `clone3`).
pub(crate) fn plan(
    command: &mut Command,
    lead: Lead,
    parent_death_signal: bool,
    cgroup: Option<CgroupEntry>,
    try_clone3: bool,
) -> io::Result<Option<Handoff>> {
    let parent = (cfg!(target_os = "linux") && parent_death_signal).then(rustix::process::getpid);
    if lead == Lead::Group {
        // std's own way (also for `posix_spawn`); the hook, if any, needs no `setpgid`.
        command.process_group(0);
    }
    if cgroup.is_none() && parent.is_none() && lead == Lead::Group {
        return Ok(None); // nothing to do before `exec`: no hook
    }
    let (handoff, write) = match &cgroup {
        Some(_) => {
            let (read, write) = rustix::pipe::pipe_with(
                rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
            )?;
            (Some(Handoff { read }), Some(write))
        }
        None => (None, None),
    };
    let plan = PreExec {
        lead,
        parent,
        cgroup,
        try_clone3,
    };
    super::unsafe_calls::install(command, plan, write);
    Ok(handoff)
}

/// In a child before exec: a new process group, or a new session (with fd 0 as its
/// controlling terminal).
pub(super) fn lead_group(lead: Lead) -> io::Result<()> {
    match lead {
        Lead::Group => rustix::process::setpgid(None, None)?,
        Lead::Session => {
            rustix::process::setsid()?;
        }
        Lead::Terminal => {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
        }
    }
    Ok(())
}

/// In a child before exec, on Linux when asked (`parent`): SIGKILL when the thread that
/// spawned it dies; fails if `parent` is already gone (then the signal would never come).
pub(super) fn parent_death(parent: Option<Pid>) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    if let Some(parent) = parent {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::SRCH.raw_os_error(),
            ));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
    Ok(())
}

/// In the program's process born by `clone3`: it leads, and dies with stallwatch when asked.
pub(super) fn become_leader(lead: Lead, parent: Option<Pid>) -> io::Result<()> {
    lead_group(lead)?;
    parent_death(parent)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::process::{Command, Stdio};

    use super::*;
    use crate::process::cgroup::Cgroup;
    use crate::process::{self, ChildProcess};

    /// What the program's process says about itself: its pid, its `stat` fields 4–6 (parent,
    /// group, session) and its cgroup v2 path.
    const SELF_REPORT: &str = "read -r a b c ppid pgid sid rest < /proc/self/stat; \
                               echo \"$$ $ppid $pgid $sid\"; grep '^0::' /proc/self/cgroup";

    /// A session cgroup for one test (`id` apart from the library's own sessions), or `None`
    /// where this process may not make one — then it must not be root.
    fn cgroup(id: u64) -> Option<Cgroup> {
        match Cgroup::create(id, |_| {}) {
            Ok((cgroup, _)) => Some(cgroup),
            Err(why) => {
                assert!(
                    !rustix::process::geteuid().is_root(),
                    "root makes cgroups here: {why}"
                );
                None
            }
        }
    }

    /// Spawns the self report as `lead` in `cgroup`, by clone3 or by the fallback; returns the
    /// child and what it printed.
    fn run_self_report(cgroup: &Cgroup, lead: Lead, try_clone3: bool) -> (ChildProcess, String) {
        let mut command = Command::new("sh");
        command
            .args(["-c", SELF_REPORT])
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let entry = cgroup.entry().expect("the cgroup's files");
        let handoff = plan(&mut command, lead, true, Some(entry), try_clone3).expect("a pipe");
        let (_, spawned) = process::spawn(command, true, handoff);
        let mut child = spawned.expect("sh runs");
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("piped")
            .read_to_string(&mut out)
            .expect("its output");
        (child, out)
    }

    fn check_born_in(cgroup: &Cgroup, lead: Lead, try_clone3: bool) {
        let (mut child, out) = run_self_report(cgroup, lead, try_clone3);
        let status = child.wait().expect("reaped");
        assert!(status.success(), "{status:?}: {out}");
        let mut lines = out.lines();
        let ids: Vec<u32> = lines
            .next()
            .expect("the ids")
            .split(' ')
            .map(|n| n.parse().expect("a number"))
            .collect();
        let pid = child.id();
        assert_eq!(ids[0], pid, "the supervised pid runs the program: {out}");
        assert_eq!(ids[1], std::process::id(), "a child of this process: {out}");
        assert_eq!(ids[2], pid, "it leads its group: {out}");
        if lead == Lead::Session {
            assert_eq!(ids[3], pid, "it leads its session: {out}");
        } else {
            assert_ne!(ids[3], pid, "it stays in this process's session: {out}");
        }
        let name = cgroup.path().file_name().expect("a name").to_string_lossy();
        let line = lines.next().expect("the cgroup line");
        assert!(line.ends_with(&format!("/{name}")), "in {name}: {out}");
        // Reaped once: a second wait answers from memory, a kill signals nobody.
        assert_eq!(child.wait().expect("known"), status);
        child.kill().expect("no signal after the reap");
    }

    #[test]
    fn the_program_is_born_in_the_cgroup_and_leads_its_group() {
        if let Some(cgroup) = cgroup(9_100_001) {
            check_born_in(&cgroup, Lead::Group, true);
            check_born_in(&cgroup, Lead::Session, true);
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn with_clone3_the_forked_process_hands_over_to_a_sibling_and_exits() {
        if let Some(cgroup) = cgroup(9_100_004) {
            for (try_clone3, lead) in [(true, Lead::Group), (false, Lead::Group)] {
                let mut command = Command::new("true");
                let entry = cgroup.entry().expect("the cgroup's files");
                let handoff = plan(&mut command, lead, false, Some(entry), try_clone3)
                    .expect("a pipe")
                    .expect("a hand-off with a cgroup");
                let mut forked = command.spawn().expect("true runs");
                let leader = handoff.leader();
                if try_clone3 {
                    // This kernel (5.7 or later) has clone3 with CLONE_INTO_CGROUP.
                    let Leader::Sibling(pid) = leader else {
                        panic!("clone3 was not used: {leader:?}");
                    };
                    assert_ne!(pid.unsigned_abs(), forked.id());
                    assert!(forked.wait().expect("it exits").success());
                    let status = super::super::reap_child(pid, true).expect("our child");
                    assert!(status.expect("exited").success());
                } else {
                    assert_eq!(leader, Leader::Forked);
                    assert!(forked.wait().expect("it runs true").success());
                }
            }
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn without_clone3_the_forked_process_enters_and_runs_the_program() {
        if let Some(cgroup) = cgroup(9_100_002) {
            check_born_in(&cgroup, Lead::Group, false);
            check_born_in(&cgroup, Lead::Session, false);
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn a_program_that_cannot_be_run_fails_the_spawn_with_its_own_error() {
        if let Some(cgroup) = cgroup(9_100_003) {
            for try_clone3 in [true, false] {
                let mut command = Command::new("/no/such/program-enter");
                command.stdin(Stdio::null());
                let entry = cgroup.entry().expect("the cgroup's files");
                let handoff =
                    plan(&mut command, Lead::Group, true, Some(entry), try_clone3).expect("a pipe");
                let (_, spawned) = process::spawn(command, true, handoff);
                let err = spawned.expect_err("no such program");
                assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
            }
            // (That both processes are reaped is checked where no other test forks meanwhile:
            // tests/containment_loop.)
            assert!(!cgroup.populated().expect("its events"));
            cgroup.remove().expect("emptied");
        }
    }
}
