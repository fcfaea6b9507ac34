//! The moved-bytes rule of the children source: which bytes the tree's processes move are
//! progress, by where they go and who reads them (see the module docs above and
//! `docs/design.md`, Children).
//!
//! - bytes written into a pipe whose reading end another process of the tree holds (a tool's
//!   lines read by its agent, `out=$(tool)`, `tool | gzip`) are delivered: any byte counts;
//! - bytes written by a process that holds a file open for writing (only: a file it also holds
//!   open for reading, a database and its journal, is its own state, read back by itself, and
//!   what it writes there is bookkeeping, never progress) count at a working rate,
//!   [`FILE_FLOOR`] within [`WINDOW`] (a heartbeat line, an agent's own bookkeeping stay
//!   below it), as long as one of the files it holds moved since the last look (its size or
//!   its modification time; a file first seen): a download stalled with its file open while
//!   its bar is redrawn on the terminal writes nothing into files; so do the bytes the root's
//!   reaped children wrote (where they went is gone with them);
//! - pages read from or written to storage count at [`STORAGE_FLOOR`] within [`WINDOW`];
//! - nothing else: bytes thrown away (`/dev/null`), written to quietus's own pipes or
//!   terminal (the output source's), to a socket (the network source's, whatever call moved
//!   them), and whatever a quietus in the tree writes (its notifications to its client).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::{ProcSample, ProcessSource};
use crate::pid::Pid;

/// The fewest bytes written into files (and by the root's reaped children) within [`WINDOW`]
/// that are progress: 2 KiB a second. A stalled agent's own bookkeeping (codex: about 2 KB
/// over 10 s to its session log and state, measured in issue 48) and a heartbeat line stay
/// below; an extraction fed 4 KiB a second (`tar xf -`) and any storage-bound tool are above.
pub(crate) const FILE_FLOOR: u64 = 4096;

/// The fewest bytes of storage pages (read from a disk, or dirtied) within [`WINDOW`] that are
/// progress: one appended line dirties a whole page (4 KiB) once per writeback cycle, so the
/// floor is sixteen pages.
pub(crate) const STORAGE_FLOOR: u64 = 64 * 1024;

/// The stretch over which file and storage bytes are added up: short check intervals
/// (100 ms) split a burst over several samples. A sample counts only if it saw bytes itself,
/// so the window never carries activity past the last write.
pub(crate) const WINDOW: Duration = Duration::from_secs(2);

/// What a process moved so far (`/proc/PID/io`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Bytes written with `write` and its kin, wherever they went (`wchar`).
    pub(crate) written: u64,
    /// Bytes read from or written to storage (`read_bytes` + `write_bytes`).
    pub(crate) storage: u64,
}

impl Moved {
    /// Field by field, the larger.
    fn max(self, other: Moved) -> Moved {
        Moved {
            written: self.written.max(other.written),
            storage: self.storage.max(other.storage),
        }
    }

    /// Field by field, what `self` has more than `before`.
    fn since(self, before: Moved) -> Moved {
        Moved {
            written: self.written.saturating_sub(before.written),
            storage: self.storage.saturating_sub(before.storage),
        }
    }
}

/// Where one descriptor of a process leads, as far as the bytes it writes are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outlet {
    /// A pipe or a FIFO, open for writing (else for reading).
    Pipe {
        /// The pipe's inode: the same on both ends.
        inode: u64,
        /// Open for writing.
        writes: bool,
    },
    /// A regular file open for writing, as it stood at the look.
    File(FileMark),
    /// A terminal as its standard output, open for writing: it draws a screen (the session's,
    /// which the output source judges).
    Terminal,
    /// Anything else: `/dev/null`, a terminal (the output source's), a socket (the network
    /// source's), a file open for reading only.
    Elsewhere,
}

/// How many looks after a write its read may come and still deliver it: a reader polling
/// once a second, delayed on a loaded machine, reads within a look or two.
const UNREAD_LOOKS: u8 = 4;

/// What tells whether a file moved between two looks: its identity, size and modification
/// time (`fstat` of the descriptor, through `/proc/PID/fd/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileMark {
    /// The device and inode: the file, whatever its name.
    pub(crate) id: (u64, u64),
    /// Its size in bytes.
    pub(crate) size: u64,
    /// Its modification time, in nanoseconds since the epoch.
    pub(crate) modified_ns: i64,
    /// Its access time, in nanoseconds since the epoch. Under `relatime` (Linux's default) a
    /// read moves it only when it is older than the modification time: the first read after
    /// a write. It never moves under `noatime`.
    pub(crate) accessed_ns: i64,
    /// The writer holds it open for reading too (`O_RDWR`): a database and its journal, the
    /// program's own state, which it reads back itself (so its access time tells nothing of
    /// another reader). What it writes there is its bookkeeping: no outlet for progress.
    pub(crate) reads_back: bool,
}

impl FileMark {
    /// The same file with the same content as `other` (the access time aside).
    fn same_content(&self, other: &Self) -> bool {
        self.id == other.id && self.size == other.size && self.modified_ns == other.modified_ns
    }
}

/// What the files a process holds open for writing did since its last look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FilesSeen {
    /// One is new to it, or moved (size, modification time).
    moved: bool,
    /// One that moved was also read since (its access time moved): someone reads what it
    /// writes, as a reader at a pipe's other end does.
    read: bool,
}

/// What one process's written bytes are, by its outlets and the tree's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Destination {
    /// Into a pipe another process of the tree reads.
    Delivered,
    /// Into a file it holds open for writing only (or nothing better).
    Files,
    /// Nowhere that counts.
    Nowhere,
}

/// Where the bytes `pid` wrote went, from its outlets and the pipes the processes of the
/// tree read (`readers`: per pipe inode, the pids holding its reading end; `keeps(reader)`:
/// whether that reader keeps what `pid` writes — another process, and no quietus `pid` is a
/// client of).
pub(crate) fn destination(
    outlets: &[Outlet],
    readers: &HashMap<u64, Vec<Pid>>,
    keeps: &mut dyn FnMut(Pid) -> bool,
) -> Destination {
    let delivered = outlets.iter().any(|o| match o {
        Outlet::Pipe {
            inode,
            writes: true,
        } => readers
            .get(inode)
            .is_some_and(|pids| pids.iter().any(|p| keeps(*p))),
        _ => false,
    });
    if delivered {
        Destination::Delivered
    } else if outlets
        .iter()
        .any(|o| matches!(o, Outlet::File(mark) if !mark.reads_back))
    {
        Destination::Files
    } else {
        Destination::Nowhere
    }
}

/// Whether a process with these descriptors draws the program's screen: its standard output
/// is a terminal (the session's, whose screen the output source judges). A process whose
/// output goes elsewhere (`xz > /dev/null`, a tool writing into its agent's pipe) draws
/// nothing, whatever else it holds.
fn draws_screen(outlets: &[Outlet]) -> bool {
    outlets.contains(&Outlet::Terminal)
}

/// Whether `ancestor` is an ancestor of `pid` by the tree's parent links.
fn ancestor(parents: &HashMap<Pid, Pid>, ancestor: Pid, pid: Pid) -> bool {
    let mut at = pid;
    for _ in 0..parents.len() {
        match parents.get(&at) {
            Some(&parent) if parent == ancestor => return true,
            Some(&parent) => at = parent,
            None => return false,
        }
    }
    false
}

/// What one sample found the tree moved that counts, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// Written into a pipe a process of the tree reads.
    pub(crate) delivered: u64,
    /// Written into files (and by the root's reaped children).
    pub(crate) files: u64,
    /// Storage pages read or dirtied.
    pub(crate) storage: u64,
}

impl Found {
    /// All of it.
    pub(crate) fn total(self) -> u64 {
        self.delivered
            .saturating_add(self.files)
            .saturating_add(self.storage)
    }
}

/// The counts of the tree's processes by identity, and the recent samples of the windowed
/// kinds.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Per live process: its start time, its own counts and (the root) its reaped children's,
    /// the most read so far.
    counts: HashMap<Pid, (u64, Moved, Moved)>,
    /// Recent samples: instant, file bytes, storage bytes.
    window: VecDeque<(Instant, u64, u64)>,
    /// Per live process: the files it held open for writing at its last look.
    marks: HashMap<Pid, Vec<FileMark>>,
    /// Per live process: the bytes it wrote into files that moved and were not read yet, and
    /// how many more looks wait for their read. A look may land between a write and its
    /// reader's read; the bytes are delivered at the look that sees the read.
    unread: HashMap<Pid, (u64, u8)>,
    /// Per live process that drew the program's screen (wrote, its standard output a terminal,
    /// and nothing that counts): its start time and when it was last seen doing so.
    faces: HashMap<Pid, (u64, Instant)>,
}

impl Ledger {
    /// What the live processes `tree` (pid, start time) moved since the last sample that
    /// counts (a process seen for the first time after the baseline counts whole: it may
    /// have started and written between two samples). Forgets the processes no longer there.
    pub(crate) fn sample(
        &mut self,
        source: &mut dyn ProcessSource,
        root: Pid,
        tree: &[ProcSample],
        look: (Instant, bool),
    ) -> Found {
        let (now, first) = look;
        self.counts.retain(|pid, (start, _, _)| {
            tree.iter().any(|p| p.pid == *pid && p.start_time == *start)
        });
        let counts = &self.counts;
        self.marks.retain(|pid, _| counts.contains_key(pid));
        self.unread.retain(|pid, _| counts.contains_key(pid));
        self.faces
            .retain(|pid, (start, _)| counts.get(pid).is_some_and(|(known, _, _)| known == start));
        let mut found = Found::default();
        let mut writers: Vec<(Pid, u64)> = Vec::new();
        for &ProcSample {
            pid, start_time, ..
        } in tree
        {
            let Some(whole) = source.moved(pid) else {
                continue;
            };
            // The root's reaped children's part is its whole count less its own threads',
            // read one after the other: low, never high, when the root moved bytes between.
            let (own, reaped) = if pid == root {
                let own = source.own_moved(pid).unwrap_or(whole);
                (own, whole.since(own))
            } else {
                (whole, Moved::default())
            };
            let known = self
                .counts
                .get(&pid)
                .filter(|(start, _, _)| *start == start_time)
                .map(|&(_, own, reaped)| (own, reaped));
            let (d_own, d_reaped) = match known {
                Some((own_before, reaped_before)) => {
                    let kept = (own_before.max(own), reaped_before.max(reaped));
                    self.counts.insert(pid, (start_time, kept.0, kept.1));
                    (own.since(own_before), reaped.since(reaped_before))
                }
                None => {
                    self.counts.insert(pid, (start_time, own, reaped));
                    if first {
                        continue;
                    }
                    (own, reaped)
                }
            };
            found.storage += d_own.storage + d_reaped.storage;
            found.files += d_reaped.written;
            if d_own.written > 0 || self.unread.contains_key(&pid) {
                writers.push((pid, d_own.written));
            }
        }
        if !writers.is_empty() {
            self.place(source, tree, (&writers, now), &mut found);
        }
        found
    }

    /// Whether process `pid` (its start time `start`) drew the program's screen (wrote, its
    /// standard output a terminal, and into no pipe the tree reads nor file that moved) within
    /// [`WINDOW`] of `now`: the program's face (Gemini CLI's
    /// UI runs in a child of the process started), whose CPU counts at the program's
    /// threshold wherever it runs.
    pub(crate) fn draws(&self, pid: Pid, start: u64, now: Instant) -> bool {
        self.faces.get(&pid).is_some_and(|&(known, at)| {
            known == start && now.saturating_duration_since(at) <= WINDOW
        })
    }

    /// Whether the live process `pid` drew the program's screen within [`WINDOW`] of `now`
    /// ([`Self::draws`], the identity checked at the last sample).
    pub(crate) fn draws_now(&self, pid: Pid, now: Instant) -> bool {
        self.faces
            .get(&pid)
            .is_some_and(|&(_, at)| now.saturating_duration_since(at) <= WINDOW)
    }

    /// Adds each writer's bytes where they went.
    fn place(
        &mut self,
        source: &mut dyn ProcessSource,
        tree: &[ProcSample],
        (writers, now): (&[(Pid, u64)], Instant),
        found: &mut Found,
    ) {
        let mut outlets: HashMap<Pid, Vec<Outlet>> = HashMap::new();
        let mut readers: HashMap<u64, Vec<Pid>> = HashMap::new();
        let parents: HashMap<Pid, Pid> =
            tree.iter().filter_map(|p| Some((p.pid, p.ppid?))).collect();
        let mut supervisors: HashMap<Pid, bool> = HashMap::new();
        for &ProcSample { pid, .. } in tree {
            let Some(list) = source.outlets(pid) else {
                continue;
            };
            for outlet in &list {
                if let Outlet::Pipe {
                    inode,
                    writes: false,
                } = outlet
                {
                    readers.entry(*inode).or_default().push(pid);
                }
            }
            outlets.insert(pid, list);
        }
        for &(pid, bytes) in writers {
            let mut supervisor =
                |p: Pid| *supervisors.entry(p).or_insert_with(|| source.supervisor(p));
            if supervisor(pid) {
                continue; // a nested quietus's messages
            }
            // A reader keeps the bytes unless it is the writer, or a quietus the writer is a
            // client of (an agent's requests to `quietus mcp`; what a quietus's own tree
            // writes into it, its ancestor, is that tree's progress).
            let mut keeps = |reader: Pid| {
                reader != pid && (!supervisor(reader) || ancestor(&parents, reader, pid))
            };
            let list = outlets.get(&pid).map_or(&[][..], Vec::as_slice);
            let to = destination(list, &readers, &mut keeps);
            if to != Destination::Files {
                self.unread.remove(&pid);
            }
            if to == Destination::Nowhere
                && draws_screen(list)
                && let Some(p) = tree.iter().find(|p| p.pid == pid)
            {
                self.faces.insert(pid, (p.start_time, now));
            }
            match to {
                Destination::Delivered => found.delivered += bytes,
                Destination::Files => match self.files_seen(pid, list) {
                    // A file another process reads as it grows (an agent polling the file its
                    // tool's output goes to: Claude Code 2.1): delivered, at any rate, with
                    // what was written before and read only now.
                    FilesSeen { read: true, .. } => {
                        let (before, _) = self.unread.remove(&pid).unwrap_or_default();
                        found.delivered += bytes + before;
                    }
                    FilesSeen { moved: true, .. } => {
                        found.files += bytes;
                        let (before, _) = self.unread.get(&pid).copied().unwrap_or_default();
                        self.unread.insert(pid, (before + bytes, UNREAD_LOOKS));
                    }
                    FilesSeen { moved: false, .. } => {
                        // Unread still: wait a few looks more, then forget (a log nobody
                        // reads must not bring each look to every descriptor of the tree).
                        if let Some((_, looks)) = self.unread.get_mut(&pid) {
                            *looks = looks.saturating_sub(1);
                            if *looks == 0 {
                                self.unread.remove(&pid);
                            }
                        }
                    }
                },
                Destination::Nowhere => {}
            }
        }
    }

    /// Whether one of the files `pid` holds open for writing (`outlets`) is new to it or
    /// moved (size, modification time) since its last look, and whether one that moved, or
    /// holds bytes not read yet, was read since (its access time moved: the first read after
    /// a write; for a file not seen before, its access time is past its modification time);
    /// remembers them for the next look.
    fn files_seen(&mut self, pid: Pid, outlets: &[Outlet]) -> FilesSeen {
        let now: Vec<FileMark> = outlets
            .iter()
            .filter_map(|o| match o {
                Outlet::File(mark) if !mark.reads_back => Some(*mark),
                _ => None,
            })
            .collect();
        let before = self.marks.get(&pid).map_or(&[][..], Vec::as_slice);
        let unread = self.unread.contains_key(&pid);
        let mut seen = FilesSeen::default();
        for mark in &now {
            let moved = !before.iter().any(|b| b.same_content(mark));
            seen.moved |= moved;
            let read_since = match before.iter().find(|b| b.id == mark.id) {
                Some(b) => mark.accessed_ns > b.accessed_ns,
                // First seen: read after its last write (its creation sets both times alike).
                None => mark.size > 0 && mark.accessed_ns > mark.modified_ns,
            };
            seen.read |= (moved || unread) && read_since;
        }
        self.marks.insert(pid, now);
        seen
    }

    /// Whether `found`, at `now`, is progress: a byte delivered, or files or storage at their
    /// working rates within [`WINDOW`] (a sample counts only if it saw such bytes itself).
    pub(crate) fn moving(&mut self, now: Instant, found: Found) -> bool {
        self.window.push_back((now, found.files, found.storage));
        while self
            .window
            .front()
            .is_some_and(|(at, _, _)| now.saturating_duration_since(*at) > WINDOW)
        {
            self.window.pop_front();
        }
        let files: u64 = self.window.iter().map(|w| w.1).sum();
        let storage: u64 = self.window.iter().map(|w| w.2).sum();
        found.delivered > 0
            || (found.files > 0 && files >= FILE_FLOOR)
            || (found.storage > 0 && storage >= STORAGE_FLOOR)
    }
}
