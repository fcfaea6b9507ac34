//! How the program's process starts, and what it does before `exec` (the start state, a new
//! process group or session, the parent-death signal, the entry into the session's cgroup),
//! planned here in safe code, as the plain data of `before_exec`: for a `Program` on stdio
//! quietus made ([`OwnIo`]), the direct start ([`Direct`], run by [`start_direct`] through
//! `unsafe_calls::start_direct`: no copy of this process, issue 50); else, and as its
//! fallback, std's `Command` with the hook of `unsafe_calls` (a fork).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::before_exec::{CgroupEntry, Direct, Lead, OrderedExec, PreExec, c_string};

/// What the spawn needs beside the command: the direct start, when this one can have it, and
/// the ends of the program's stdio quietus made itself; with a cgroup, how the forked process
/// of std's path tells quietus which process runs the program — the read end of a pipe
/// (non-blocking) to which it writes a pid before it exits (`clone3` worked) or `0` before it
/// goes on to `exec` itself (the fallback).
#[derive(Debug)]
pub(crate) struct Handoff {
    read: Option<OwnedFd>,
    /// The start without a copy of this process (`unsafe_calls::start_direct`); std's path
    /// (the command with its hook) is the fallback.
    pub(crate) direct: Option<Direct>,
    /// This process's ends of the pipes it made for the program ([`OwnIo`]).
    pub(crate) ends: Ends,
}

/// What the forked process said, read once std's spawn has returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leader {
    /// The program runs in this process, made by `clone3`; the forked one exited.
    Sibling(crate::pid::Pid),
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
        let Some(read) = &self.read else {
            return Leader::Unknown;
        };
        let mut pid = [0u8; 4];
        match rustix::io::read(read, &mut pid) {
            Ok(4) => match i32::from_ne_bytes(pid) {
                0 => Leader::Forked,
                p => super::from_raw(p).map_or(Leader::Unknown, Leader::Sibling),
            },
            _ => Leader::Unknown,
        }
    }
}

/// This process's ends of the pipes made for the program: what it writes to the program's
/// stdin, and reads from its stdout and stderr.
#[derive(Debug, Default)]
pub(crate) struct Ends {
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
}

/// The program's stdio made by quietus itself (a [`Program`](crate::Program) on pipes or a
/// terminal), so that a start without std's `Command` can give it: the descriptors the
/// program gets as 0, 1 and 2 (`None`: this process's own), each numbered 3 or more and
/// close-on-exec here, and this process's ends.
#[derive(Debug, Default)]
pub(crate) struct OwnIo {
    child: [Option<OwnedFd>; 3],
    ends: Ends,
}

/// What the program's stdin is, for [`OwnIo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnStdin {
    /// `/dev/null`, opened for reading (as std opens it).
    Null,
    /// This process's own.
    Inherit,
    /// A pipe whose write end this process keeps.
    Piped,
}

impl OwnIo {
    /// `stdin` as said, stdout and stderr on pipes of their own, or on `combined` (the write
    /// end of one pipe for both, whose read end the caller keeps).
    pub(crate) fn pipes(stdin: OwnStdin, combined: Option<OwnedFd>) -> io::Result<OwnIo> {
        let mut io = OwnIo::default();
        match stdin {
            OwnStdin::Null => {
                let null = rustix::fs::open(
                    c"/dev/null",
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )?;
                io.child[0] = Some(above_stdio(null)?);
            }
            OwnStdin::Inherit => {}
            OwnStdin::Piped => {
                let (read, write) = pipe_cloexec()?;
                io.child[0] = Some(read);
                io.ends.stdin = Some(write);
            }
        }
        if let Some(both) = combined {
            let both = above_stdio(both)?;
            io.child[2] = Some(both.try_clone()?);
            io.child[1] = Some(both);
        } else {
            let (read, write) = pipe_cloexec()?;
            io.child[1] = Some(write);
            io.ends.stdout = Some(read);
            let (read, write) = pipe_cloexec()?;
            io.child[2] = Some(write);
            io.ends.stderr = Some(read);
        }
        Ok(io)
    }

    /// The slave side of a terminal as the program's stdin, stdout and stderr.
    pub(crate) fn terminal(slave: &OwnedFd) -> io::Result<OwnIo> {
        let slave = above_stdio(slave.try_clone()?)?;
        Ok(OwnIo {
            child: [
                Some(slave.try_clone()?),
                Some(slave.try_clone()?),
                Some(slave),
            ],
            ends: Ends::default(),
        })
    }

    /// Gives `command` the same stdio (std's path, the fallback): copies of the descriptors.
    fn give(&self, command: &mut Command) -> io::Result<()> {
        let stdio = |fd: &Option<OwnedFd>| -> io::Result<Stdio> {
            Ok(match fd {
                Some(fd) => Stdio::from(fd.try_clone()?),
                None => Stdio::inherit(),
            })
        };
        command
            .stdin(stdio(&self.child[0])?)
            .stdout(stdio(&self.child[1])?)
            .stderr(stdio(&self.child[2])?);
        Ok(())
    }
}

/// A pipe, both ends close-on-exec and numbered 3 or more.
fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = std::io::pipe()?; // close-on-exec, as std makes its own
    Ok((above_stdio(read.into())?, above_stdio(write.into())?))
}

/// `fd`, or a close-on-exec copy of it numbered 3 or more when it is 0, 1 or 2 (this process
/// closed its own): the direct start `dup2`s each onto 0, 1, 2 in turn, and must not overwrite
/// one it has yet to copy.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(fd.as_fd(), 3)?)
}

/// Whether the kernel refused the direct start once: not tried again (std's path for good).
static DIRECT_REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether this build has the direct start (Linux on x86_64: the one architecture whose
/// entry on a new stack is written here) and the kernel did not refuse it.
pub(crate) fn direct_available() -> bool {
    cfg!(all(target_os = "linux", target_arch = "x86_64"))
        && !DIRECT_REFUSED.load(Ordering::Relaxed)
}

/// Starts the program of `plan` without copying this process: its pid, an error (the
/// program's own — it could not be run — or the kernel's), or `None` when the kernel refuses
/// this start (before Linux 5.7, or a filter on `clone3`): then std's path runs it, from then
/// on.
pub(crate) fn start_direct(plan: &Direct) -> Option<io::Result<crate::pid::Pid>> {
    let started = super::unsafe_calls::start_direct(plan);
    if started.is_none() {
        DIRECT_REFUSED.store(true, Ordering::Relaxed);
    }
    started
}

/// Makes `command`'s child lead as `lead` asks, with the parent-death signal when asked (on
/// Linux: SIGKILL when the thread that spawned it dies), inside the session's cgroup when
/// given one, on the stdio of `io` when quietus made it. With a cgroup or `io`, the returned
/// [`Handoff`] tells which process runs the program and holds what the spawn needs.
pub(crate) fn configure(command: &mut Command, start: Start) -> io::Result<Option<Handoff>> {
    plan(command, start)
}

/// What [`plan`] makes the child do.
pub(crate) struct Start {
    pub(crate) lead: Lead,
    pub(crate) parent_death_signal: bool,
    pub(crate) cgroup: Option<CgroupEntry>,
    /// `false` forces the entry by a write (the tests cover that path on kernels with `clone3`)
    /// and std's path.
    pub(crate) try_clone3: bool,
    pub(crate) exec: Option<OrderedExec>,
    /// The program's stdio, when quietus made it (else the command's own).
    pub(crate) io: Option<OwnIo>,
    /// For a [`Program`](crate::Program), whose every setting quietus knows: whether its
    /// environment starts empty. Such a command on `io` may start directly.
    pub(crate) known: Option<bool>,
}

/// [`configure`] as `start` says. Every command gets the hook: std leaves the child the
/// spawning thread's signal mask, and the program must start with an empty one.
pub(crate) fn plan(command: &mut Command, start: Start) -> io::Result<Option<Handoff>> {
    let parent =
        (cfg!(target_os = "linux") && start.parent_death_signal).then(rustix::process::getpid);
    if start.lead == Lead::Group {
        // std's own way; the hook needs no `setpgid` then.
        command.process_group(0);
    }
    let (read, write) = match &start.cgroup {
        Some(_) => {
            let (read, write) = super::files::pipe_cloexec_nonblock()?;
            (Some(read), Some(write))
        }
        None => (None, None),
    };
    let (mut direct, mut ends) = (None, None);
    if let Some(io) = start.io {
        io.give(command)?;
        ends = Some(io.ends);
        if let Some(env_cleared) = start.known
            && start.try_clone3
            && direct_available()
        {
            direct = Some(Direct {
                lead: start.lead,
                parent,
                cgroup: start
                    .cgroup
                    .as_ref()
                    .map(|c| c.dir.try_clone())
                    .transpose()?,
                stdio: io.child,
                cwd: command
                    .get_current_dir()
                    .map(|d| c_string(d.as_os_str()))
                    .transpose()?,
                exec: OrderedExec::always(command, env_cleared)?,
                error: AtomicI32::new(0),
            });
        }
    }
    let handoff = (read.is_some() || ends.is_some()).then(|| Handoff {
        read,
        direct,
        ends: ends.unwrap_or_default(),
    });
    let plan = PreExec {
        lead: start.lead,
        parent,
        cgroup: start.cgroup,
        try_clone3: start.try_clone3,
        exec: start.exec,
    };
    super::unsafe_calls::install(command, plan, write);
    Ok(handoff)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
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
        let handoff = plan(
            &mut command,
            Start {
                lead,
                parent_death_signal: true,
                cgroup: Some(entry),
                try_clone3,
                exec: None,
                io: None,
                known: None,
            },
        )
        .expect("a pipe");
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
        let pid = child.id().get();
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
                let handoff = plan(
                    &mut command,
                    Start {
                        lead,
                        parent_death_signal: false,
                        cgroup: Some(entry),
                        try_clone3,
                        exec: None,
                        io: None,
                        known: None,
                    },
                )
                .expect("a pipe")
                .expect("a hand-off with a cgroup");
                let mut forked = command.spawn().expect("true runs");
                let leader = handoff.leader();
                if try_clone3 {
                    // This kernel (5.7 or later) has clone3 with CLONE_INTO_CGROUP.
                    let Leader::Sibling(pid) = leader else {
                        panic!("clone3 was not used: {leader:?}");
                    };
                    assert_ne!(pid, crate::pid::Pid::of(&forked));
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
                let handoff = plan(
                    &mut command,
                    Start {
                        lead: Lead::Group,
                        parent_death_signal: true,
                        cgroup: Some(entry),
                        try_clone3,
                        exec: None,
                        io: None,
                        known: None,
                    },
                )
                .expect("a pipe");
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

    /// Plans `command` on stdio quietus makes (stdin `stdin`, stdout and stderr on pipes) as a
    /// `Program`'s, in `cgroup` when given; `direct` false forces std's path.
    fn plan_own(
        command: &mut Command,
        lead: Lead,
        cgroup: Option<&Cgroup>,
        stdin: OwnStdin,
        direct: bool,
    ) -> Handoff {
        let start = Start {
            lead,
            parent_death_signal: true,
            cgroup: cgroup.map(|c| c.entry().expect("the cgroup's files")),
            try_clone3: direct,
            exec: None,
            io: Some(OwnIo::pipes(stdin, None).expect("pipes")),
            known: Some(false),
        };
        plan(command, start)
            .expect("planned")
            .expect("a hand-off with own stdio")
    }

    /// Spawns what [`plan_own`] planned and reads its stdout to the end.
    fn run_own(command: Command, handoff: Handoff) -> (io::Result<ChildProcess>, String) {
        let (_, mut spawned) = process::spawn(command, true, Some(handoff));
        let mut out = String::new();
        if let Ok(child) = &mut spawned {
            let stdout = child.stdout.as_mut().expect("our pipe");
            stdout.read_to_string(&mut out).expect("its output");
        }
        (spawned, out)
    }

    /// The self report's pid, parent, group and session.
    fn ids(out: &str) -> Vec<u32> {
        out.lines()
            .next()
            .expect("the ids")
            .split(' ')
            .map(|n| n.parse().expect("a number"))
            .collect()
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn a_program_starts_directly_without_a_copy_of_this_process() {
        // Issue 50: std's `Command` forked this process (and the hook's clone3 copied that
        // copy), a cost growing with this process's memory. A `Program` on stdio quietus made
        // starts by the direct start instead: one process, this one's child, leading its group.
        for lead in [Lead::Group, Lead::Session] {
            let mut command = Command::new("sh");
            command.args(["-c", SELF_REPORT]);
            let handoff = plan_own(&mut command, lead, None, OwnStdin::Null, true);
            assert!(handoff.direct.is_some(), "the direct start is planned");
            let (spawned, out) = run_own(command, handoff);
            let mut child = spawned.expect("sh runs");
            assert!(direct_available(), "the kernel took the direct start");
            assert!(child.wait().expect("reaped").success(), "{out}");
            let ids = ids(&out);
            let pid = child.id().get();
            assert_eq!(ids[0], pid, "the supervised pid runs the program: {out}");
            assert_eq!(ids[1], std::process::id(), "a child of this process: {out}");
            assert_eq!(ids[2], pid, "it leads its group: {out}");
            assert_eq!(ids[3] == pid, lead == Lead::Session, "its session: {out}");
        }
    }

    #[test]
    fn a_direct_start_is_born_in_the_cgroup_and_std_s_path_is_the_same() {
        if let Some(cgroup) = cgroup(9_100_005) {
            for direct in [true, false] {
                let mut command = Command::new("sh");
                command.args(["-c", SELF_REPORT]);
                let handoff = plan_own(
                    &mut command,
                    Lead::Group,
                    Some(&cgroup),
                    OwnStdin::Null,
                    direct,
                );
                assert_eq!(handoff.direct.is_some(), direct && direct_available());
                let (spawned, out) = run_own(command, handoff);
                let mut child = spawned.expect("sh runs");
                assert!(child.wait().expect("reaped").success(), "{out}");
                let ids = ids(&out);
                assert_eq!(ids[0], child.id().get(), "{out}");
                assert_eq!(ids[1], std::process::id(), "{out}");
                let name = cgroup.path().file_name().expect("a name").to_string_lossy();
                let line = out.lines().nth(1).expect("the cgroup line");
                assert!(line.ends_with(&format!("/{name}")), "in {name}: {out}");
            }
            cgroup.remove().expect("emptied");
        }
    }

    #[test]
    fn a_direct_start_reports_the_program_s_errors_as_std_does() {
        // Files closed before they run (a file open for writing cannot be `exec`ed).
        let folder = tempfile::tempdir().expect("a folder");
        let path = folder.path().join("no-shebang");
        std::fs::write(&path, "echo ran \"$0\" \"$1\"\n").expect("written");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("executable");
        let plain = folder.path().join("not-executable");
        std::fs::write(&plain, "true\n").expect("written");
        for direct in [true, false] {
            let start = |program: &OsStr, args: &[&str], cwd: Option<&str>| {
                let mut command = Command::new(program);
                command.args(args);
                if let Some(cwd) = cwd {
                    command.current_dir(cwd);
                }
                let handoff = plan_own(&mut command, Lead::Group, None, OwnStdin::Null, direct);
                run_own(command, handoff)
            };
            let kind = |(spawned, _): (io::Result<ChildProcess>, String)| {
                spawned.expect_err("it cannot run").kind()
            };
            let missing = start(OsStr::new("/no/such/program-direct"), &[], None);
            assert_eq!(kind(missing), io::ErrorKind::NotFound);
            let not_in_path = start(OsStr::new("no-such-program-direct"), &[], None);
            assert_eq!(kind(not_in_path), io::ErrorKind::NotFound);
            let not_executable = start(plain.as_os_str(), &[], None);
            assert_eq!(kind(not_executable), io::ErrorKind::PermissionDenied);
            let no_dir = start(OsStr::new("true"), &[], Some("/no/such/folder-direct"));
            assert_eq!(kind(no_dir), io::ErrorKind::NotFound);
            // A script without `#!` runs under /bin/sh, as `execvp` runs it.
            let (spawned, out) = start(path.as_os_str(), &["one"], None);
            assert!(
                spawned
                    .expect("sh runs it")
                    .wait()
                    .expect("reaped")
                    .success()
            );
            assert_eq!(
                out,
                format!("ran {} one\n", path.display()),
                "direct: {direct}"
            );
            // The working directory.
            let (spawned, out) = start(OsStr::new("pwd"), &[], Some("/usr"));
            assert!(spawned.expect("pwd runs").wait().expect("reaped").success());
            assert_eq!(out, "/usr\n", "direct: {direct}");
        }
    }

    #[test]
    fn a_direct_start_gives_the_program_its_stdin_pipe_and_no_blocked_signal() {
        for direct in [true, false] {
            let mut command = Command::new("sh");
            command.args(["-c", "grep -E '^SigBlk' /proc/self/status; cat"]);
            let mut handoff = plan_own(&mut command, Lead::Group, None, OwnStdin::Piped, direct);
            let stdin = handoff.ends.stdin.take().expect("our end of its stdin");
            std::thread::spawn(move || {
                let _ = rustix::io::write(&stdin, b"fed through the pipe\n");
            });
            let (spawned, out) = run_own(command, handoff);
            assert!(spawned.expect("sh runs").wait().expect("reaped").success());
            assert!(out.contains("SigBlk:\t0000000000000000\n"), "{out}");
            assert!(out.ends_with("fed through the pipe\n"), "{out}");
        }
    }
}
