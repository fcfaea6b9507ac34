//! A cgroup v2 per session: the tree the kernel holds.
//!
//! Where this process may create a child of its own cgroup (root, a systemd-delegated slice, a
//! privileged container), each session gets one, named `quietus-<pid>-<session>`, and the
//! child is born in it (`clone3(CLONE_INTO_CGROUP)`, or enters it before `exec` where that
//! cannot be: `sys::spawn`).
//! From then on every descendant is born inside it, whatever it does with sessions, process
//! groups, its environment or its parent: the cgroup's members *are* the tree.
//!
//! - polite signals reach every member (found in `cgroup.procs`, signalled through a pidfd
//!   after its membership was checked, so a reused pid is never hit);
//! - SIGKILL is `cgroup.kill` (kernel 5.14), atomic against forks; before it, the cgroup is
//!   frozen and each member killed;
//! - "the tree is gone" is `populated 0` in `cgroup.events` (zombies are not members);
//! - the tree's CPU is `usage_usec` of `cpu.stat`, reaped children and escapees included;
//! - the memory peak and OOM kills come from `memory.peak` and `memory.events` where the memory
//!   controller is enabled for it;
//! - the cgroup is removed when the session ends ([`Cgroup::remove`], or its `Drop` as the last
//!   resort), by the guardian when this process is SIGKILLed.
//!
//! The files are the kernel's interface, read and written here; the system calls (pidfds,
//! signals) are in `sys`.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::sys;
use crate::error::SystemError;
use crate::pid::Pid;

/// Members never waited for longer than this to vanish after a `cgroup.kill` when the cgroup
/// is removed (they die as soon as they are scheduled; a process in uninterruptible sleep may
/// take longer, and then the cgroup is left to the guardian-less truth: an error in the log).
const REMOVE_WAIT: Duration = Duration::from_secs(5);

/// Never more levels of nested cgroups than this when listing members (a nested quietus
/// makes one level per nesting).
const MAX_DEPTH: usize = 16;

/// One session's cgroup.
#[derive(Debug)]
pub(crate) struct Cgroup {
    /// Its directory in the cgroup2 mount.
    path: PathBuf,
    /// The parent's directory: this process's own cgroup.
    parent: PathBuf,
    /// Its path as `/proc/<pid>/cgroup` shows it (`0::<rel>`), for the membership check.
    rel: String,
    /// Whether it was removed (or handed over): `Drop` has nothing left to do.
    removed: AtomicBool,
}

/// Why a session has no cgroup of its own
/// ([`MonitorResult::why_not_cgroup`](crate::MonitorResult::why_not_cgroup), under
/// [`Containment::Auto`](crate::Containment::Auto); the cause of a
/// [`SpawnErrorKind::Containment`](crate::error::SpawnErrorKind::Containment) error under
/// [`Containment::Cgroup`](crate::Containment::Cgroup)). Its text is the one the report's
/// `why_not_cgroup` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CgroupUnavailable {
    /// Not Linux: cgroups are a Linux feature.
    NotLinux,
    /// The portable backend (the library's feature `portable`, on Linux) makes no cgroup.
    PortableBackend,
    /// A file of `/proc` that says where this process's cgroup is cannot be read.
    Unreadable {
        /// `/proc/self/cgroup` or `/proc/self/mountinfo`.
        file: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// This process is in no cgroup v2 (a cgroup v1 only system).
    NoCgroupV2,
    /// No cgroup2 file system is mounted.
    NotMounted,
    /// This process's cgroup is outside the cgroup2 mount (a container that mounts a
    /// sub-cgroup).
    OutsideMount {
        /// The process's cgroup, as `/proc/self/cgroup` says it.
        own: String,
        /// The cgroup2 mount.
        mount: PathBuf,
    },
    /// Processes cannot be moved out of this process's cgroup (no right to write its
    /// `cgroup.procs`).
    CannotMoveOut {
        /// This process's cgroup folder.
        parent: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// No cgroup can be created under this process's own.
    CannotCreate {
        /// This process's cgroup folder.
        parent: PathBuf,
        /// The system's error.
        error: SystemError,
    },
    /// The new cgroup cannot be opened to start the program in it.
    CannotOpen {
        /// The new cgroup's folder.
        path: PathBuf,
        /// The system's error.
        error: SystemError,
    },
}

impl std::fmt::Display for CgroupUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CgroupUnavailable::NotLinux => f.write_str("cgroups are a Linux feature"),
            CgroupUnavailable::PortableBackend => {
                f.write_str("the portable backend has no cgroups")
            }
            CgroupUnavailable::Unreadable { file, error } => {
                write!(f, "cannot read {}: {error}", file.display())
            }
            CgroupUnavailable::NoCgroupV2 => f.write_str("this process is in no cgroup v2"),
            CgroupUnavailable::NotMounted => f.write_str("no cgroup2 file system is mounted"),
            CgroupUnavailable::OutsideMount { own, mount } => write!(
                f,
                "this process's cgroup {own} is outside the cgroup2 mount at {}",
                mount.display()
            ),
            CgroupUnavailable::CannotMoveOut { parent, error } => write!(
                f,
                "cannot move processes out of this process's cgroup {}: {error}",
                parent.display()
            ),
            CgroupUnavailable::CannotCreate { parent, error } => {
                write!(f, "cannot create a cgroup in {}: {error}", parent.display())
            }
            CgroupUnavailable::CannotOpen { path, error } => {
                write!(f, "cannot open {}: {error}", path.display())
            }
        }
    }
}

/// A reason, not a chain: its text includes the system's error, which is no `source()`.
impl std::error::Error for CgroupUnavailable {}

/// This process's cgroup v2 directory, or why there is none.
pub(crate) fn own_dir() -> Result<(PathBuf, String), CgroupUnavailable> {
    if !cfg!(target_os = "linux") {
        return Err(CgroupUnavailable::NotLinux);
    }
    if cfg!(feature = "portable") {
        return Err(CgroupUnavailable::PortableBackend);
    }
    let mut buf = [0; 1024];
    let file = Path::new("/proc/self/cgroup");
    let own = sys::read_small(file, &mut buf).map_err(|e| CgroupUnavailable::Unreadable {
        file: file.to_owned(),
        error: e.into(),
    })?;
    let own = parse_own_cgroup(&own).ok_or(CgroupUnavailable::NoCgroupV2)?;
    if let Some(dir) = usual_dir(&own) {
        return Ok((dir, own));
    }
    own_dir_from_mountinfo(own)
}

/// The usual cgroup2 mounts: the whole hierarchy at `/sys/fs/cgroup`, or its hybrid place
/// `/sys/fs/cgroup/unified`.
const USUAL_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

/// The cgroup `own` in a usual mount ([`USUAL_MOUNTS`], told by its file system's magic
/// number) whose root is the hierarchy's (or the cgroup namespace's) root, if that folder
/// exists: a `statfs` or two instead of reading all of `/proc/self/mountinfo`, which the
/// kernel writes out mount by mount (about a third of a cgroup's set-up here). A mount of a
/// sub-cgroup (some containers) has no such folder: the mountinfo decides then.
fn usual_dir(own: &str) -> Option<PathBuf> {
    let mount = USUAL_MOUNTS
        .iter()
        .map(Path::new)
        .find(|m| sys::is_cgroup2_mount(m))?;
    dir_of(mount, "/", own).filter(|dir| dir.is_dir())
}

/// [`own_dir`] by the mount of `/proc/self/mountinfo`, for the own cgroup `own`.
fn own_dir_from_mountinfo(own: String) -> Result<(PathBuf, String), CgroupUnavailable> {
    let file = Path::new("/proc/self/mountinfo");
    let mountinfo = std::fs::read_to_string(file).map_err(|e| CgroupUnavailable::Unreadable {
        file: file.to_owned(),
        error: e.into(),
    })?;
    let (root, mount) = parse_mountinfo(&mountinfo).ok_or(CgroupUnavailable::NotMounted)?;
    match dir_of(&mount, &root, &own) {
        Some(dir) => Ok((dir, own)),
        None => Err(CgroupUnavailable::OutsideMount { own, mount }),
    }
}

/// The mount root and mount point of the first cgroup2 file system in `/proc/self/mountinfo`
/// (a pure cgroup2 system at `/sys/fs/cgroup`, a hybrid one at `/sys/fs/cgroup/unified`…).
pub(crate) fn parse_mountinfo(text: &str) -> Option<(String, PathBuf)> {
    text.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split_ascii_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = before.split_ascii_whitespace().collect();
        let root = unescape(fields.get(3)?);
        let mount = unescape(fields.get(4)?);
        Some((root, PathBuf::from(mount)))
    })
}

/// `/proc` writes a space, tab, newline and backslash in a path as an octal escape (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 path in `/proc/<pid>/cgroup` (the `0::` line).
pub(crate) fn parse_own_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(|path| path.trim_end().to_owned())
}

/// The directory of cgroup `own` in a cgroup2 mount at `mount` whose root is `root`.
fn dir_of(mount: &Path, root: &str, own: &str) -> Option<PathBuf> {
    let rel = if root == "/" {
        own
    } else {
        let rest = own.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    Some(mount.join(rel.trim_start_matches('/')))
}

/// The `total=` of the `some` line of a pressure file (microseconds).
pub(crate) fn parse_pressure_some(text: &str) -> Option<Duration> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("total="))?;
    total.parse().ok().map(Duration::from_micros)
}

/// The value of `key` in a flat-keyed cgroup file (`cgroup.events`, `cpu.stat`,
/// `memory.events`: one `key value` per line).
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

impl Cgroup {
    /// Creates the cgroup of session `id` under this process's own cgroup, or says why it
    /// cannot be (no cgroup2 mount, no right to create or to move a process there).
    ///
    /// `before` is called with its path just before the directory is made: the guardian
    /// starts there, so that no moment of the cgroup's life is unguarded.
    ///
    /// Returns it with what the child needs to start inside it ([`Cgroup::entry`]), opened
    /// here: a cgroup that cannot be entered is no cgroup (under `auto`, the group then).
    pub(crate) fn create(
        id: u64,
        before: impl FnOnce(&Path),
    ) -> Result<(Cgroup, sys::CgroupEntry), CgroupUnavailable> {
        let (parent, own) = own_dir()?;
        let name = format!("quietus-{}-{id}", std::process::id());
        let path = parent.join(&name);
        // Entering it means writing to it and to the common ancestor's `cgroup.procs`.
        if let Err(e) = sys::check_writable(&parent.join("cgroup.procs")) {
            return Err(CgroupUnavailable::CannotMoveOut {
                parent,
                error: e.into(),
            });
        }
        Self::reclaim_stale(&parent);
        before(&path);
        if let Err(e) = std::fs::create_dir(&path) {
            return Err(CgroupUnavailable::CannotCreate {
                parent,
                error: e.into(),
            });
        }
        let rel = format!("{}/{name}", own.trim_end_matches('/'));
        let cgroup = Cgroup {
            path,
            parent,
            rel,
            removed: AtomicBool::new(false),
        };
        // Dropping it (an error) removes the empty directory.
        #[cfg(target_os = "linux")]
        {
            let entry = cgroup.entry().map_err(|e| CgroupUnavailable::CannotOpen {
                path: cgroup.path.clone(),
                error: e.into(),
            })?;
            Ok((cgroup, entry))
        }
        #[cfg(not(target_os = "linux"))]
        {
            drop(cgroup);
            Err(CgroupUnavailable::NotLinux)
        }
    }

    /// An existing cgroup at `path`, made by another quietus process (a guardian ends it,
    /// a later start reclaims it): only to kill its members and remove it.
    pub(crate) fn existing(path: PathBuf) -> Cgroup {
        let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Cgroup {
            path,
            parent,
            rel: String::new(),
            removed: AtomicBool::new(false),
        }
    }

    /// Ends and removes the cgroups `quietus-<pid>-<n>` in folder `parent` whose process
    /// `pid` is gone: a supervisor killed without a guardian (none could be started) left them
    /// and, perhaps, processes in them. Once per process, at its first cgroup.
    ///
    /// Only from the initial pid namespace, whose `/proc` sees every process: a supervisor in
    /// another one names its cgroups with pids this `/proc` does not show. And only a cgroup
    /// whose members are all of this pid namespace (another namespace's live session is left
    /// alone), and, when empty, older than [`STALE_AFTER`] (one made just now by a supervisor
    /// of another namespace, its program not yet in it, is left alone).
    fn reclaim_stale(parent: &Path) {
        static DONE: std::sync::Once = std::sync::Once::new();
        DONE.call_once(|| {
            let own_ns = std::fs::read_link("/proc/self/ns/pid").ok();
            if own_ns.as_deref() != Some(Path::new(INITIAL_PID_NAMESPACE)) {
                return;
            }
            let Ok(entries) = std::fs::read_dir(parent) else {
                return;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("quietus-"))
                    .and_then(|rest| rest.split('-').next())
                    .and_then(Pid::parse)
                else {
                    continue;
                };
                if pid == Pid::current() || Path::new(&format!("/proc/{pid}")).exists() {
                    continue; // its supervisor lives (or the pid is another's now: left alone)
                }
                if !is_stale(&entry.path(), own_ns.as_deref()) {
                    continue;
                }
                log::info!(
                    "reclaiming the cgroup {} of a dead supervisor",
                    entry.path().display()
                );
                if let Err(e) = reclaim_tree(&entry.path()) {
                    log::debug!("cannot reclaim the cgroup {}: {e}", entry.path().display());
                }
            }
        });
    }

    /// Its directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// What the child needs to start inside it: the directory, for `clone3(CLONE_INTO_CGROUP)`,
    /// opened as a path only, and its `cgroup.procs` for writing (the way in where `clone3`
    /// cannot be had); both close-on-exec.
    #[cfg(target_os = "linux")]
    pub(crate) fn entry(&self) -> io::Result<sys::CgroupEntry> {
        use rustix::fs::OFlags;
        let dir = rustix::fs::open(
            &self.path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let procs = rustix::fs::open(
            self.path.join("cgroup.procs"),
            OFlags::WRONLY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(sys::CgroupEntry { dir, procs })
    }

    fn read(&self, name: &str) -> io::Result<String> {
        let mut buf = [0; 1024];
        Ok(sys::read_small(&self.path.join(name), &mut buf)?.into_owned())
    }

    fn write(path: &Path, value: &[u8]) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .write_all(value)
    }

    /// Whether any process lives in it (or in a cgroup below it): `populated` of
    /// `cgroup.events`. Zombies are not members.
    pub(crate) fn populated(&self) -> io::Result<bool> {
        let events = self.read("cgroup.events")?;
        keyed(&events, "populated")
            .map(|n| n != 0)
            .ok_or_else(|| io::Error::other("cgroup.events without `populated`"))
    }

    /// The live members: its `cgroup.procs` and those of the cgroups below it.
    pub(crate) fn members(&self) -> io::Result<Vec<Pid>> {
        let mut out = Vec::new();
        collect_members(&self.path, 0, &mut out)?;
        Ok(out.into_iter().flatten().collect())
    }

    /// CPU used by every process that ever ran in it, reaped or not (`usage_usec` of
    /// `cpu.stat`).
    pub(crate) fn cpu_usage(&self) -> io::Result<Duration> {
        let stat = self.read("cpu.stat")?;
        keyed(&stat, "usage_usec")
            .map(Duration::from_micros)
            .ok_or_else(|| io::Error::other("cpu.stat without `usage_usec`"))
    }

    /// How long, in all, at least one of its processes was runnable but waiting for a CPU
    /// (`total` of the `some` line of `cpu.pressure`, pressure stall information): the CPU the
    /// tree asked for and did not get, reaped processes included. An error where the kernel
    /// keeps no pressure information (built without PSI, or booted with `psi=0`).
    pub(crate) fn cpu_waited(&self) -> io::Result<Duration> {
        let text = self.read("cpu.pressure")?;
        parse_pressure_some(&text)
            .ok_or_else(|| io::Error::other("cpu.pressure without a `some` total"))
    }

    /// The memory peak in bytes and the number of OOM kills, where the memory controller is
    /// enabled for it (`memory.peak`, kernel 5.19; `oom_kill` of `memory.events`).
    pub(crate) fn memory(&self) -> (Option<u64>, Option<u64>) {
        let peak = self
            .read("memory.peak")
            .ok()
            .and_then(|t| t.trim().parse().ok());
        let ooms = self
            .read("memory.events")
            .ok()
            .and_then(|t| keyed(&t, "oom_kill"));
        (peak, ooms)
    }

    /// Sends `signal` to every member, each through a pidfd opened before its membership is
    /// checked (`/proc/<pid>/cgroup`): a pid reused by a stranger is never signalled. Returns
    /// how many were signalled.
    pub(crate) fn signal(&self, signal: i32) -> io::Result<usize> {
        let mut sent = 0;
        for pid in self.members()? {
            if pid.get() == 1 || pid == Pid::current() {
                continue;
            }
            if self.signal_member(pid, signal).is_ok() {
                sent += 1;
            }
        }
        Ok(sent)
    }

    fn signal_member(&self, pid: Pid, signal: i32) -> io::Result<()> {
        match sys::pidfd_open(pid) {
            Ok(pidfd) => {
                // The pidfd names one process; if it still is `pid` and a member, the signal
                // reaches it; if it died meanwhile, the signal reaches nobody.
                if !self.is_member(pid) {
                    return Err(io::ErrorKind::NotFound.into());
                }
                sys::pidfd_signal(pidfd.as_fd(), signal)
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                // Kernels before 5.3: checked just before, as the group backend does.
                if !self.is_member(pid) {
                    return Err(io::ErrorKind::NotFound.into());
                }
                sys::kill_pid(pid, signal)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether process `pid` is in this cgroup or one below it now: by its `/proc/PID/cgroup`,
    /// or, without a `/proc` of this pid namespace (where `pid` would name another process
    /// or none), by the cgroup's own member list, whose pids are this namespace's.
    fn is_member(&self, pid: Pid) -> bool {
        if sys::proc_view().why_not().is_some() {
            return self.members().is_ok_and(|members| members.contains(&pid));
        }
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|text| parse_own_cgroup(&text))
            .is_some_and(|own| {
                own == self.rel
                    || own
                        .strip_prefix(&self.rel)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
    }

    /// SIGKILLs every member at once: `cgroup.kill`, or (before kernel 5.14) freeze, SIGKILL
    /// each member, thaw.
    pub(crate) fn kill(&self) -> io::Result<()> {
        match Self::write(&self.path.join("cgroup.kill"), b"1") {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        let freeze = self.path.join("cgroup.freeze");
        let frozen = Self::write(&freeze, b"1").is_ok();
        let killed = self.signal(sys::SIGKILL);
        if frozen {
            // A frozen process dies of SIGKILL all the same; thawed for good measure.
            Self::write(&freeze, b"0")?;
        }
        killed.map(|_| ())
    }

    /// Moves every member back to the parent cgroup (this process's own): the leftovers a
    /// caller asked to keep outlive the session's cgroup.
    pub(crate) fn release_members(&self) -> io::Result<()> {
        let procs = self.parent.join("cgroup.procs");
        for pid in self.members()? {
            if let Err(e) = Self::write(&procs, pid.to_string().as_bytes()) {
                log::debug!("cannot move pid {pid} out of {}: {e}", self.path.display());
            }
        }
        Ok(())
    }

    /// Removes the cgroup and any below it (depth first): kills what is left in it first,
    /// waits (bounded) for the members to vanish, then `rmdir`. Members that outlast the wait
    /// (frozen by a v1 freezer, they die only once thawed) are moved to this process's own
    /// cgroup, so that the session's is removed all the same. Idempotent.
    pub(crate) fn remove(&self) -> io::Result<()> {
        if self.removed.load(Ordering::Acquire) {
            return Ok(());
        }
        // The removal first: it fails (`EBUSY`) only while something is left in it, and the
        // usual end (nothing left) then costs no read of `cgroup.events`.
        let give_up = Instant::now() + REMOVE_WAIT;
        let mut pause = Duration::from_micros(200);
        let mut killed = false;
        let mut moved_out = false;
        loop {
            match remove_tree(&self.path, 0) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) if sys::is_busy(&e) && Instant::now() < give_up => {
                    if !killed && self.populated().unwrap_or(false) {
                        self.kill()?;
                        killed = true;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(e) if sys::is_busy(&e) && !moved_out => {
                    // Killed and still there (a member frozen by a v1 freezer cannot die
                    // until thawed: termination unproven). Moved to this process's own
                    // cgroup, where its pending SIGKILL ends it once thawed: the session's
                    // cgroup, empty then, is not left behind.
                    moved_out = true;
                    self.release_members()?;
                    log::warn!(
                        "members of {} survived SIGKILL; moved to {} to remove it",
                        self.path.display(),
                        self.parent.display()
                    );
                }
                Err(e) => return Err(e),
            }
        }
        self.removed.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes it if nothing is left in it; says whether it did. Its removal proves in one
    /// call what `populated 0` says in a read: no process is in it (a zombie is no member) or
    /// below it. `false`: something is left (`EBUSY`: processes, or cgroups the program made).
    pub(crate) fn remove_if_empty(&self) -> io::Result<bool> {
        match remove_tree(&self.path, 0) {
            Ok(()) => {
                self.removed.store(true, Ordering::Release);
                Ok(true)
            }
            Err(e) if sys::is_busy(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether it was removed.
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }
}

impl Drop for Cgroup {
    /// The last resort (a failed spawn, a monitor that unwound): nothing of the session
    /// outlives it, and no empty cgroup is left behind.
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            log::error!("cannot remove the cgroup {}: {e}", self.path.display());
        }
    }
}

/// The link `/proc/<pid>/ns/pid` names for the initial pid namespace (its inode is fixed:
/// `PROC_PID_INIT_INO`).
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// An empty cgroup of a dead supervisor is left this long before it is reclaimed.
const STALE_AFTER: Duration = Duration::from_secs(10);

/// Whether the cgroup `dir` (its supervisor gone from this pid namespace's view) may be
/// reclaimed: every member, below it too, is of this pid namespace (`own_ns`); with none, the
/// folder is older than [`STALE_AFTER`].
fn is_stale(dir: &Path, own_ns: Option<&Path>) -> bool {
    let mut members = Vec::new();
    if collect_members(dir, 0, &mut members).is_err() {
        return false;
    }
    if members.is_empty() {
        return std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .is_ok_and(|at| at.elapsed().is_ok_and(|age| age >= STALE_AFTER));
    }
    // A member of another pid namespace is listed as 0: no `Pid`.
    members.iter().all(|pid| {
        pid.is_some_and(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/pid"))
                .ok()
                .as_deref()
                == own_ns
        })
    })
}

/// Kills every member of the cgroup `dir` and of the cgroups below it (`cgroup.kill`, which
/// reaches the cgroups below too) and removes them, the deepest first ([`remove_tree`]),
/// without waiting: a member not dead yet leaves its cgroup for the next time.
fn reclaim_tree(dir: &Path) -> io::Result<()> {
    let _ = Cgroup::write(&dir.join("cgroup.kill"), b"1");
    match remove_tree(dir, 0) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the cgroup `dir` and the cgroups below it, depth first: a cgroup with a cgroup
/// below it cannot be removed (`EBUSY`), and a nested quietus killed with the tree leaves
/// its session's cgroup, empty, below this one. Each `rmdir` fails (`EBUSY`) while a process
/// is in that cgroup; a cgroup already gone counts as removed, below (the first error is
/// kept); `dir` itself gone is `NotFound`, as `rmdir` says.
fn remove_tree(dir: &Path, depth: usize) -> io::Result<()> {
    match std::fs::remove_dir(dir) {
        Err(e) if sys::is_busy(&e) && depth < MAX_DEPTH => {
            let mut below = Ok(());
            for entry in std::fs::read_dir(dir)?.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    match remove_tree(&entry.path(), depth + 1) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound && below.is_ok() => {
                            below = Err(e);
                        }
                        _ => {}
                    }
                }
            }
            below?;
            std::fs::remove_dir(dir)
        }
        other => other,
    }
}

/// Appends the pids of `cgroup.procs` in `dir` and in the cgroups below it (`None` for a
/// member outside this pid namespace, which the file lists as 0).
fn collect_members(dir: &Path, depth: usize, out: &mut Vec<Option<Pid>>) -> io::Result<()> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs"))?;
    out.extend(text.split_ascii_whitespace().map(Pid::parse));
    if depth >= MAX_DEPTH {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            // A cgroup removed meanwhile has no members to add.
            let _ = collect_members(&entry.path(), depth + 1, out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dead supervisor's cgroup is reclaimed only when its members are of this pid
    /// namespace (a process shown as 0 is of another one) and, when empty, once it is old: a
    /// quietus in a pid namespace of its own (`unshare --pid`) reclaimed a live `serve`'s
    /// session (tests/cli serve_write_to_a_child_that_never_reads_times_out_with_32004 failed
    /// in the whole suite).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_stale_cgroup_is_one_whose_members_are_all_of_this_pid_namespace() {
        let own = std::fs::read_link("/proc/self/ns/pid").expect("our pid namespace");
        let dir = tempfile::tempdir().expect("a folder");
        let procs = dir.path().join("cgroup.procs");
        std::fs::write(&procs, format!("{}\n", std::process::id())).unwrap();
        assert!(
            is_stale(dir.path(), Some(&own)),
            "a member of this namespace"
        );
        std::fs::write(&procs, format!("{}\n0\n", std::process::id())).unwrap();
        assert!(
            !is_stale(dir.path(), Some(&own)),
            "a member of another namespace"
        );
        std::fs::write(&procs, "").unwrap();
        assert!(!is_stale(dir.path(), Some(&own)), "empty, made just now");
        assert!(
            !is_stale(&dir.path().join("gone"), Some(&own)),
            "unreadable"
        );
    }

    #[test]
    fn finds_a_hybrid_cgroup2_mount_among_v1_ones() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            parse_mountinfo(text),
            Some(("/".to_owned(), PathBuf::from("/sys/fs/cgroup/unified")))
        );
    }

    #[test]
    fn a_pure_v2_mount_with_optional_fields_and_escapes() {
        let text = "29 1 0:26 /sub /sys/fs/my\\040cgroup rw shared:4 master:1 - cgroup2 none rw\n";
        assert_eq!(
            parse_mountinfo(text),
            Some(("/sub".to_owned(), PathBuf::from("/sys/fs/my cgroup")))
        );
        assert_eq!(parse_mountinfo("1 0 0:1 / / rw - ext4 /dev/sda rw\n"), None);
    }

    #[test]
    fn the_own_cgroup_is_the_0_line() {
        let text = "4:memory:/x\n0::/user.slice/session-2.scope\n";
        assert_eq!(
            parse_own_cgroup(text).as_deref(),
            Some("/user.slice/session-2.scope")
        );
        assert_eq!(parse_own_cgroup("4:memory:/x\n"), None);
    }

    #[test]
    fn the_directory_is_the_own_path_under_the_mount_root() {
        let mount = Path::new("/sys/fs/cgroup");
        assert_eq!(
            dir_of(mount, "/", "/"),
            Some(PathBuf::from("/sys/fs/cgroup/"))
        );
        assert_eq!(
            dir_of(mount, "/", "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/a/b"))
        );
        assert_eq!(
            dir_of(mount, "/a", "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/b"))
        );
        assert_eq!(dir_of(mount, "/a", "/ab"), None);
        assert_eq!(dir_of(mount, "/a", "/c"), None);
    }

    #[test]
    fn the_usual_mount_gives_the_folder_mountinfo_gives() {
        let own = parse_own_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
        let Some(own) = own else {
            return; // no cgroup v2 here: nothing to compare (the next assertion needs one)
        };
        let by_mountinfo = own_dir_from_mountinfo(own.clone());
        match usual_dir(&own) {
            Some(dir) => assert_eq!(Ok((dir, own)), by_mountinfo),
            // Not at a usual place: the mountinfo must be what finds it, if anything.
            None => assert!(
                !USUAL_MOUNTS
                    .iter()
                    .any(|m| sys::is_cgroup2_mount(Path::new(m)))
                    || by_mountinfo.is_err(),
                "{by_mountinfo:?}"
            ),
        }
    }

    #[test]
    fn reads_the_some_total_of_a_pressure_file() {
        let text = "some avg10=96.67 avg60=97.53 avg300=85.62 total=615478192\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            parse_pressure_some(text),
            Some(Duration::from_micros(615_478_192))
        );
        assert_eq!(parse_pressure_some("full total=3\n"), None);
        assert_eq!(parse_pressure_some("some avg10=1.00\n"), None);
    }

    #[test]
    fn reads_flat_keyed_files() {
        let events = "populated 1\nfrozen 0\n";
        assert_eq!(keyed(events, "populated"), Some(1));
        assert_eq!(keyed(events, "frozen"), Some(0));
        assert_eq!(keyed(events, "missing"), None);
        let stat = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n";
        assert_eq!(keyed(stat, "usage_usec"), Some(123_456));
        assert_eq!(keyed(stat, "usage"), None);
    }

    /// A cgroup over a plain folder holding `files` (already "removed": its `Drop` leaves the
    /// folder alone).
    fn fake(dir: &Path, files: &[(&str, &str)]) -> Cgroup {
        for (name, text) in files {
            std::fs::write(dir.join(name), text).expect("a fake cgroup file");
        }
        Cgroup {
            path: dir.to_owned(),
            parent: dir.to_owned(),
            rel: "/fake".to_owned(),
            removed: AtomicBool::new(true),
        }
    }

    #[test]
    fn memory_figures_where_the_controller_is_on_none_elsewhere() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let cgroup = fake(
            dir.path(),
            &[
                ("memory.peak", "7340032\n"),
                ("memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\n"),
                ("cpu.stat", "usage_usec 2500\nuser_usec 2000\n"),
                ("cgroup.events", "populated 0\nfrozen 0\n"),
            ],
        );
        assert_eq!(cgroup.memory(), (Some(7_340_032), Some(1)));
        assert_eq!(
            cgroup.cpu_usage().expect("cpu.stat"),
            Duration::from_micros(2500)
        );
        assert!(!cgroup.populated().expect("cgroup.events"));
        let bare = tempfile::tempdir().expect("a temporary directory");
        let cgroup = fake(bare.path(), &[("cgroup.events", "frozen 0\n")]);
        assert_eq!(cgroup.memory(), (None, None));
        assert!(cgroup.populated().is_err(), "no `populated` line");
        assert!(cgroup.cpu_usage().is_err(), "no cpu.stat");
    }
}
