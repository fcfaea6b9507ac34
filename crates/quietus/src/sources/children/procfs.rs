//! The children source's Linux backend: the tree, the CPU, the runnable state and the moved
//! bytes of each process from `/proc`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{MAX_TREE, Moved, Outlet, ProcSample, ProcessSource, RunState, ThreadRun};
use crate::pid::Pid;

/// `/proc/PID/schedstat` (`<run time ns> <run delay ns> <slices>`): the run time, and the
/// run time plus run delay.
fn read_runnable(pid: Pid) -> Option<(Duration, Duration)> {
    let mut buf = [0u8; 1024];
    let text = crate::process::sys::read_proc(&format!("/proc/{pid}/schedstat"), &mut buf)?;
    parse_schedstat(&text)
}

/// Each thread of `pid` (`/proc/PID/task/TID/schedstat`, at most [`MAX_THREADS_READ`]): its
/// run time, and its run time plus run delay.
fn read_thread_runs(pid: Pid) -> Vec<ThreadRun> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut buf = [0u8; 1024];
    let at = Instant::now();
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok()?.parse::<u32>().ok())
        .take(MAX_THREADS_READ)
        .filter_map(|tid| {
            let path = format!("/proc/{pid}/task/{tid}/schedstat");
            let text = crate::process::sys::read_proc(&path, &mut buf)?;
            let (ran, total) = parse_schedstat(&text)?;
            Some(ThreadRun {
                tid,
                ran,
                total,
                at,
            })
        })
        .collect()
}

/// The most threads of one process read for its runnable time.
const MAX_THREADS_READ: usize = 256;

/// The run time, and the run time plus run delay, of a `schedstat` line.
fn parse_schedstat(text: &str) -> Option<(Duration, Duration)> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (ran, waited) = (fields.next()??, fields.next()??);
    Some((
        Duration::from_nanos(ran),
        Duration::from_nanos(ran.saturating_add(waited)),
    ))
}

/// Linux: walks `/proc/<pid>/task/<tid>/children` from the root, so the cost grows with the
/// tree, not with the number of processes on the machine. Falls back to one pass over all of
/// `/proc` on kernels without that file.
#[derive(Debug)]
pub(crate) struct ProcFs {
    tick: Duration,
    scratch: Vec<Pid>,
    /// Whether each process read in this sample (by the walk, or one by one from a cgroup's
    /// members) was runnable (state R), so that the runnable look reads no `stat` twice.
    states: HashMap<Pid, (bool, u64)>,
}

/// A process's `stat`, read by the `/proc` source (counted by its tests: each is a file read
/// at every check interval).
fn read_stat(pid: Pid) -> Option<crate::process::sys::ProcStat> {
    #[cfg(test)]
    STAT_READS.with(|n| n.set(n.get() + 1));
    crate::process::sys::read_stat(pid)
}

#[cfg(test)]
thread_local! {
    /// How many `stat` files the `/proc` source read on this thread.
    static STAT_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl ProcFs {
    pub(crate) fn new() -> Self {
        let per_second = crate::process::sys::clock_ticks_per_second().max(1);
        Self {
            tick: Duration::from_nanos(1_000_000_000 / per_second),
            scratch: Vec::new(),
            states: HashMap::new(),
        }
    }

    fn convert(&self, stat: crate::process::sys::ProcStat) -> ProcSample {
        ProcSample {
            pid: stat.pid,
            ppid: stat.ppid,
            pgrp: stat.pgrp,
            start_time: stat.start_time,
            cpu: self.tick * u32::try_from(stat.cpu_ticks).unwrap_or(u32::MAX),
            child_cpu: self.tick * u32::try_from(stat.child_cpu_ticks).unwrap_or(u32::MAX),
            dead: stat.is_dead(),
        }
    }

    /// The whole-`/proc` fallback: parent links of every process.
    fn tree_by_scan(&mut self, root: Pid) -> Vec<ProcSample> {
        let mut all: Vec<ProcSample> = Vec::new();
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for entry in dir.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(Pid::parse) else {
                    continue;
                };
                if let Some(stat) = read_stat(pid) {
                    all.push(self.convert(stat));
                }
            }
        }
        let mut tree: Vec<ProcSample> = all.iter().filter(|p| p.pid == root).copied().collect();
        let mut index = 0;
        while index < tree.len() && tree.len() < MAX_TREE {
            let parent = tree[index].pid;
            tree.extend(
                all.iter()
                    .filter(|p| p.ppid == Some(parent) && p.pid != root),
            );
            index += 1;
        }
        tree
    }
}

impl ProcessSource for ProcFs {
    fn tree(&mut self, root: Pid) -> Vec<ProcSample> {
        self.states.clear();
        let Some(stat) = read_stat(root) else {
            return Vec::new();
        };
        self.states
            .insert(stat.pid, (stat.state == b'R', stat.threads));
        let mut threads = vec![stat.threads];
        let mut tree = vec![self.convert(stat)];
        let mut index = 0;
        while index < tree.len() && tree.len() < MAX_TREE {
            let parent = tree[index].pid;
            self.scratch.clear();
            if crate::process::sys::children_of(parent, threads[index], &mut self.scratch).is_none()
                && index == 0
                && !tree[0].dead
            {
                return self.tree_by_scan(root);
            }
            // A process that vanished meanwhile has no children file: skip it.
            for i in 0..self.scratch.len() {
                let pid = self.scratch[i];
                if let Some(stat) = read_stat(pid) {
                    self.states
                        .insert(stat.pid, (stat.state == b'R', stat.threads));
                    threads.push(stat.threads);
                    tree.push(self.convert(stat));
                }
            }
            index += 1;
        }
        tree
    }

    fn process(&mut self, pid: Pid) -> Option<ProcSample> {
        let stat = read_stat(pid)?;
        self.states
            .insert(stat.pid, (stat.state == b'R', stat.threads));
        Some(self.convert(stat))
    }

    fn new_look(&mut self) {
        self.states.clear();
    }

    /// From the last walk's `stat` (a cgroup's member not walked: its own `stat`); the
    /// `schedstat` only of a process runnable now (a sleeping one costs no read).
    fn runnable(&mut self, pid: Pid) -> Option<RunState> {
        let now = match self.states.get(&pid) {
            Some((runnable, _)) => *runnable,
            None => read_stat(pid)?.state == b'R',
        };
        let read = if now { read_runnable(pid) } else { None };
        let (ran, total) = (read.map(|r| r.0), read.map(|r| r.1));
        let at = Some(Instant::now());
        Some(RunState {
            now,
            total,
            ran,
            at,
        })
    }

    /// Only for a process of several threads (the walk's `stat` says how many): rustc's LLVM
    /// workers, a runtime's pool; a single-threaded process costs no read.
    fn thread_runs(&mut self, pid: Pid) -> Vec<ThreadRun> {
        if self
            .states
            .get(&pid)
            .is_none_or(|(_, threads)| *threads < 2)
        {
            return Vec::new();
        }
        read_thread_runs(pid)
    }

    fn moved(&mut self, pid: Pid) -> Option<Moved> {
        let (written, storage) = crate::process::sys::read_io(pid)?;
        Some(Moved { written, storage })
    }

    fn own_moved(&mut self, pid: Pid) -> Option<Moved> {
        let (written, storage) = crate::process::sys::read_own_io(pid)?;
        Some(Moved { written, storage })
    }

    fn outlets(&mut self, pid: Pid) -> Option<Vec<Outlet>> {
        let mut links: Vec<(i32, String)> = Vec::new();
        crate::process::sys::fd_links(pid, &mut |fd, target| {
            links.push((fd, String::from_utf8_lossy(target).into_owned()));
        })
        .ok()?;
        Some(
            links
                .iter()
                .map(|(fd, target)| outlet(pid, *fd, target))
                .collect(),
        )
    }

    fn supervisor(&mut self, pid: Pid) -> bool {
        let mut buf = [0u8; 1024];
        crate::process::sys::read_proc(&format!("/proc/{pid}/comm"), &mut buf)
            .is_some_and(|comm| comm.trim_end() == "quietus")
    }
}

/// Where descriptor `fd` of `pid`, linked to `target`, leads.
fn outlet(pid: Pid, fd: i32, target: &str) -> Outlet {
    // Its access mode (`flags` in fdinfo): 0 read only, 1 write only, 2 read and write.
    let mode = || {
        let mut buf = [0u8; 1024];
        crate::process::sys::read_proc(&format!("/proc/{pid}/fdinfo/{fd}"), &mut buf)
            .and_then(|info| crate::process::sys::snapshot::access_mode(&info))
    };
    let writes = || mode().is_some_and(|m| m != 0);
    if let Some(inode) = target
        .strip_prefix("pipe:[")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
    {
        return Outlet::Pipe {
            inode,
            writes: writes(),
        };
    }
    if !target.starts_with('/') || target == "/dev/null" {
        return Outlet::Elsewhere;
    }
    let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")) else {
        return Outlet::Elsewhere;
    };
    let kind = meta.file_type();
    if std::os::unix::fs::FileTypeExt::is_fifo(&kind) {
        Outlet::Pipe {
            inode: std::os::unix::fs::MetadataExt::ino(&meta),
            writes: writes(),
        }
    } else if let Some(mode @ (1 | 2)) = kind.is_file().then(mode).flatten() {
        use std::os::unix::fs::MetadataExt;
        Outlet::File(super::bytes::FileMark {
            reads_back: mode == 2,
            id: (meta.dev(), meta.ino()),
            size: meta.size(),
            modified_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
            accessed_ns: meta
                .atime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.atime_nsec()),
        })
    } else if fd == 1
        && std::os::unix::fs::FileTypeExt::is_char_device(&kind)
        && (target.starts_with("/dev/pts/") || target.starts_with("/dev/tty"))
        && writes()
    {
        Outlet::Terminal
    } else {
        Outlet::Elsewhere
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::config::ChildWatchConfig;
    use crate::sources::children::portable::Sysinfo;
    use crate::sources::children::{CgroupReading, DescendantObserver};

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_process_of_several_threads_is_runnable_by_all_its_threads() {
        // rustc's shape: the main thread waits while a worker runs (or waits for a CPU). The
        // leader's own schedstat (this test process's main thread, waiting for the tests)
        // shows none of it; the threads' sum shows all of it.
        let pid = Pid::current();
        let (_, leader_before) = read_runnable(pid).unwrap();
        let sum = |runs: Vec<ThreadRun>| runs.iter().map(|r| r.total).sum::<Duration>();
        let threads_before = sum(read_thread_runs(pid));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = stop.clone();
        let worker = std::thread::spawn(move || {
            let mut n = 0u64;
            while !spin.load(std::sync::atomic::Ordering::Relaxed) {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        });
        // Read while the worker lives (a thread gone takes its counts with it), until the
        // threads' sum shows 250 ms: the worker is runnable all along, on a CPU or waiting for
        // one, so it does within a few tenths of a second however loaded the machine is.
        let started = std::time::Instant::now();
        let mut threads = Duration::ZERO;
        while threads < Duration::from_millis(250) && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
            threads = sum(read_thread_runs(pid)).saturating_sub(threads_before);
        }
        let (_, leader_after) = read_runnable(pid).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        worker.join().unwrap();
        let leader = leader_after.saturating_sub(leader_before);
        assert!(threads >= Duration::from_millis(250), "{threads:?}");
        // The leader (this thread, asleep between looks) shows next to none of it.
        assert!(leader < Duration::from_millis(100), "{leader:?}");
    }

    #[test]
    fn schedstat_lines_parse_to_run_time_plus_delay() {
        assert_eq!(
            parse_schedstat("19263796 1757176041 10\n"),
            Some((
                Duration::from_nanos(19_263_796),
                Duration::from_nanos(19_263_796 + 1_757_176_041)
            ))
        );
        assert_eq!(parse_schedstat("garbage"), None);
        assert_eq!(parse_schedstat("12"), None);
    }

    #[test]
    fn procfs_and_sysinfo_see_the_same_tree() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & echo ready; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let root = Pid::of(&child);
        let mut procfs = ProcFs::new();
        let mut sys = Sysinfo::new();
        let mut a: Vec<Pid> = procfs.tree(root).iter().map(|p| p.pid).collect();
        let mut b: Vec<Pid> = sys.tree(root).iter().map(|p| p.pid).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a.len(), 3, "{a:?}");
        assert_eq!(a, b);
        assert_eq!(procfs.tree_by_scan(root).len(), 3);
        // This test's own processes (not in a group of their own): ended by pid.
        for pid in a {
            let _ = crate::process::sys::kill_pid(pid, crate::process::sys::SIGKILL);
        }
        let _ = child.wait();
    }

    /// A sample from a cgroup reads each member's `stat` once: its identity (for the moved
    /// bytes), the root's CPU and the runnable look all come from that one read (a sleeping
    /// root's was read twice, a runnable descendant's twice too).
    #[test]
    fn a_cgroup_sample_reads_each_members_stat_once() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let root = Pid::of(&child);
        let mut obs = DescendantObserver::with_source(
            root,
            &ChildWatchConfig::default(),
            Box::new(ProcFs::new()),
        );
        obs.use_cgroup(Box::new(move || {
            Some(CgroupReading {
                usage: Duration::ZERO,
                members: vec![root],
                waited: None,
            })
        }));
        let t0 = Instant::now();
        for i in 0..3 {
            let before = STAT_READS.with(std::cell::Cell::get);
            obs.sample(t0 + i * SEC);
            let reads = STAT_READS.with(std::cell::Cell::get) - before;
            assert_eq!(reads, 1, "sample {i}: one member, {reads} stat reads");
        }
        child.kill().expect("our own sleep");
        child.wait().expect("reaped");
    }

    #[test]
    fn proc_io_gives_written_bytes_and_storage_reads() {
        let io = "rchar: 6976\nwchar: 120\nsyscr: 10\nsyscw: 3\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
        assert_eq!(crate::process::sys::parse_io(io), Some((120, 4096)));
        assert_eq!(crate::process::sys::parse_io("rchar: 1\n"), None);
        // This very process has written nothing by `write` perhaps, but the file reads.
        assert!(ProcFs::new().moved(Pid::current()).is_some());
    }

    /// Where this process's own descriptors lead, read as the observer reads another's: a
    /// pipe's two ends by inode, a file open for writing, `/dev/null` and a file open for
    /// reading only elsewhere.
    #[test]
    fn outlets_name_pipes_by_inode_files_written_and_the_rest() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let (reader, writer) = std::io::pipe().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let written = std::fs::File::create(dir.path().join("out")).unwrap();
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        let read_only = std::fs::File::open(dir.path().join("out")).unwrap();
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", reader.as_raw_fd()))
            .unwrap()
            .ino();
        let mut procfs = ProcFs::new();
        let outlets: std::collections::HashMap<i32, Outlet> = [
            reader.as_raw_fd(),
            writer.as_raw_fd(),
            written.as_raw_fd(),
            null.as_raw_fd(),
            read_only.as_raw_fd(),
        ]
        .into_iter()
        .map(|fd| {
            let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
            (fd, outlet(Pid::current(), fd, &target.to_string_lossy()))
        })
        .collect();
        let pipe = |writes| Outlet::Pipe { inode, writes };
        assert_eq!(outlets[&reader.as_raw_fd()], pipe(false));
        assert_eq!(outlets[&writer.as_raw_fd()], pipe(true));
        let Outlet::File(mark) = outlets[&written.as_raw_fd()] else {
            panic!("a file written: {:?}", outlets[&written.as_raw_fd()]);
        };
        let meta = std::fs::metadata(dir.path().join("out")).unwrap();
        assert_eq!(mark.id, (meta.dev(), meta.ino()));
        assert_eq!(mark.size, 0);
        // A write moves the mark: its size.
        std::io::Write::write_all(&mut &written, b"moved").unwrap();
        let target = std::fs::read_link(format!("/proc/self/fd/{}", written.as_raw_fd())).unwrap();
        let again = outlet(
            Pid::current(),
            written.as_raw_fd(),
            &target.to_string_lossy(),
        );
        assert!(
            matches!(again, Outlet::File(m) if m.size == 5 && m.id == mark.id),
            "{again:?}"
        );
        assert!(!mark.reads_back, "written only: {mark:?}");
        assert_eq!(outlets[&null.as_raw_fd()], Outlet::Elsewhere);
        assert_eq!(outlets[&read_only.as_raw_fd()], Outlet::Elsewhere);
        // A file open for reading and writing (a database): read back by its writer.
        let both = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("out"))
            .unwrap();
        let target = std::fs::read_link(format!("/proc/self/fd/{}", both.as_raw_fd())).unwrap();
        let both = outlet(Pid::current(), both.as_raw_fd(), &target.to_string_lossy());
        assert!(
            matches!(both, Outlet::File(m) if m.reads_back && m.id == mark.id),
            "{both:?}"
        );
        // The whole list holds them too.
        let all = procfs.outlets(Pid::current()).unwrap();
        assert!(all.contains(&pipe(true)) && all.contains(&pipe(false)));
        assert!(all.iter().any(|o| matches!(o, Outlet::File(_))));
        // This process is no quietus.
        assert!(!procfs.supervisor(Pid::current()));
    }
}
