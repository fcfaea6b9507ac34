//! Whether a process has run since an earlier look, from three `/proc` files kept open: the
//! run time of its main thread in nanoseconds (`schedstat`), where it waits (`wchan`) and its
//! number of threads (the link count of its `task` folder). Each look is one `pread` or one
//! `fstat` on an open descriptor, one or two microseconds at most (`wchan`, the dearest, costs
//! less than half of `stat`). Its descriptor folder (`fd`) is kept open too, and read again
//! from its start without the path's lookup.
//!
//! The files stay bound to the process they were opened for: once it is gone (and its pid
//! possibly reused) every read fails, so a probe never describes another process.

use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags};

/// The open `/proc/PID/{schedstat,wchan,task,fd}` of one process.
#[derive(Debug)]
pub(crate) struct RunProbe {
    schedstat: OwnedFd,
    wchan: OwnedFd,
    task: OwnedFd,
    fd: rustix::fs::Dir,
}

impl RunProbe {
    /// Opens the probe of process `pid`. Fails when it is gone, or where the kernel keeps no
    /// run time (`schedstat` needs `CONFIG_SCHED_INFO`).
    pub(crate) fn open(pid: crate::pid::Pid) -> io::Result<RunProbe> {
        let open = |name: &str, dir: bool| {
            let flags = OFlags::RDONLY | OFlags::CLOEXEC;
            let flags = if dir {
                flags | OFlags::DIRECTORY
            } else {
                flags
            };
            rustix::fs::open(format!("/proc/{pid}/{name}"), flags, Mode::empty())
        };
        Ok(RunProbe {
            schedstat: open("schedstat", false)?,
            wchan: open("wchan", false)?,
            task: open("task", true)?,
            fd: rustix::fs::Dir::new(super::open_fd_dir(pid)?)?,
        })
    }

    /// The run time of the process's main thread, in nanoseconds: exact, and it grows
    /// whenever the thread leaves the CPU after running (or at the scheduler's next tick
    /// while it runs). `None` where the kernel reports none (0: no scheduler statistics).
    pub(crate) fn run_time(&self) -> io::Result<Option<u64>> {
        let mut buf = [0u8; 96];
        let n = rustix::io::pread(&self.schedstat, &mut buf[..], 0)?;
        Ok(parse_run_time(&buf[..n]))
    }

    /// Whether the main thread is off the CPU, waiting: the kernel names where it waits only
    /// for a thread that is neither running nor runnable *and* no longer on a CPU (not in the
    /// middle of leaving it). `0` — running, runnable, a zombie, or a kernel that will not
    /// say (no symbols, no permission) — is not off the CPU.
    pub(crate) fn off_cpu(&self) -> io::Result<bool> {
        let mut buf = [0u8; 128];
        let n = rustix::io::pread(&self.wchan, &mut buf[..], 0)?;
        Ok(names_a_wait(&buf[..n]))
    }

    /// Every descriptor of the process and what its link names, as [`super::fd_links`].
    pub(crate) fn fd_links(&mut self, found: &mut dyn FnMut(i32, &[u8])) -> io::Result<()> {
        super::read_fd_links(&mut self.fd, found)
    }

    /// The number of threads of the process (its `task` folder links `.`, `..` and one folder
    /// per thread).
    pub(crate) fn threads(&self) -> io::Result<u64> {
        let st = rustix::fs::fstat(&self.task)?;
        #[allow(clippy::unnecessary_cast)] // u64 on most targets
        Ok((st.st_nlink as u64).saturating_sub(2))
    }
}

/// The first field of `/proc/PID/schedstat` (`run_time wait_time timeslices`), when not 0.
pub(crate) fn parse_run_time(text: &[u8]) -> Option<u64> {
    let first = text.split(|b| b.is_ascii_whitespace()).next()?;
    let ns: u64 = std::str::from_utf8(first).ok()?.parse().ok()?;
    (ns > 0).then_some(ns)
}

/// Whether a `/proc/PID/wchan` text names a wait (a kernel function), not `0`.
pub(crate) fn names_a_wait(text: &[u8]) -> bool {
    let text = text.trim_ascii();
    !text.is_empty() && text != b"0"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_run_time_and_wait_and_refuses_nonsense() {
        assert_eq!(parse_run_time(b"1715944 387216 1\n"), Some(1_715_944));
        assert_eq!(parse_run_time(b"0 0 0\n"), None, "no scheduler statistics");
        assert_eq!(parse_run_time(b""), None);
        assert_eq!(parse_run_time(b"x 1 2"), None);
        assert!(names_a_wait(b"hrtimer_nanosleep"));
        assert!(names_a_wait(b"do_sys_poll\n"));
        assert!(!names_a_wait(b"0"), "running, or not said");
        assert!(!names_a_wait(b""));
    }

    #[test]
    fn a_sleeping_process_keeps_its_run_time_and_a_woken_one_does_not() {
        use std::io::{BufRead, BufReader, Write};
        use std::process::{Command, Stdio};
        let mut child = Command::new("sh")
            .args(["-c", "echo ready; read line; echo again; read line"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let mut probe = RunProbe::open(crate::pid::Pid::of(&child)).unwrap();
        assert_eq!(probe.threads().unwrap(), 1);
        // Its descriptors, read twice from the folder kept open: the same each time.
        let mut fds = Vec::new();
        for _ in 0..2 {
            let mut seen = Vec::new();
            probe.fd_links(&mut |fd, _| seen.push(fd)).unwrap();
            seen.sort();
            fds.push(seen);
        }
        assert_eq!(fds[0], fds[1]);
        assert!(fds[0].starts_with(&[0, 1, 2]), "{fds:?}");
        // Once it sleeps in `read`, its run time stands still.
        let settled = (0..500).find_map(|_| {
            let before = probe.run_time().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let off = probe.off_cpu().unwrap();
            (off && probe.run_time().unwrap() == before).then_some(before)
        });
        let before = settled.expect("the child settles in read");
        assert!(before.is_some());
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_ne!(probe.run_time().unwrap(), before, "it ran to answer");
        drop(stdin);
        child.wait().unwrap();
        assert!(
            probe.run_time().is_err(),
            "a reaped process is no more read"
        );
    }
}
