//! The log spill: once a stream passes a threshold, its complete content from byte 0 goes to a
//! log file (created new, never through a symlink, mode 0600, in a folder of mode 0700), and its
//! SHA-256 is kept.

use std::collections::{HashMap, HashSet};
use std::fs::{self, DirBuilder, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::config::LogRetention;
use crate::outcome::{LogDirError, LogDirProblem, LogFile, LogProblem};
use crate::own_files::OwnFiles;
use crate::stream::Stream;

/// The default log folder: the platform cache folder's `quietus/logs`
/// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS), else (no `HOME`)
/// the temp folder's `quietus-<uid>-logs`. Being a default, it must be the user's own: a
/// spawn refuses it when it belongs to someone else or others can write to it (as ssh refuses
/// such a folder), where a folder the caller chose only has to be usable.
pub(crate) fn default_log_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let cache = if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Caches"))
    } else {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".cache")))
    };
    match cache {
        Some(cache) => cache.join("quietus").join("logs"),
        None => std::env::temp_dir().join(format!(
            "quietus-{}-logs",
            crate::process::sys::effective_uid()
        )),
    }
}

/// Creates the log folder (mode 0700 for what is created), opens it once and checks that files
/// can be made in it, so an unusable folder is an error at spawn rather than lost output later;
/// the logs are then made relative to the folder opened, whatever its path leads to later.
/// The default folder (`is_default`) must moreover be the user's own, and is never reached
/// through a symbolic link: one planted there by another user is refused, even when it
/// points to a folder that would pass the check.
pub(crate) fn prepare_dir(dir: &Path, is_default: bool) -> Result<File, LogDirError> {
    let fail = |problem: LogDirProblem| LogDirError {
        path: dir.to_path_buf(),
        problem,
    };
    if is_default {
        check_the_way(dir).map_err(fail)?;
    }
    let created = DirBuilder::new().recursive(true).mode(0o700).create(dir);
    if is_default && fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(fail(LogDirProblem::SymbolicLink));
    }
    let folder = match (created, crate::process::sys::open_folder(dir, !is_default)) {
        (_, Ok(folder)) => folder,
        (_, Err(e)) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
            return Err(fail(LogDirProblem::NotAFolder));
        }
        (_, Err(e)) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(fail(LogDirProblem::SymbolicLink));
        }
        (Err(e), Err(_)) => return Err(fail(LogDirProblem::Create(e.into()))),
        (Ok(()), Err(e)) => return Err(fail(LogDirProblem::Read(e.into()))),
    };
    // The folder opened, not its path: what is checked is what the logs go to.
    let meta = folder
        .metadata()
        .map_err(|e| fail(LogDirProblem::Read(e.into())))?;
    if let Err(e) = crate::process::sys::check_folder_writable(&folder) {
        return Err(fail(LogDirProblem::NotWritable(e.into())));
    }
    if meta.permissions().readonly() {
        return Err(fail(LogDirProblem::ReadOnly));
    }
    if is_default {
        check_own(&meta).map_err(fail)?;
    }
    Ok(folder)
}

/// Before the default folder is created or entered, every folder on the way to it that exists
/// already — as the system resolves it, links included — must be this user's or root's, and
/// writable by others only when sticky (as `/tmp`), as ssh checks the folders on the way to its
/// files: else another user could swap a folder below one of theirs (a shared `HOME` whose
/// `~/.cache` is someone else's, `~/.cache/quietus` made a link to their folder) and the logs
/// would go where they choose. Once the way is safe, nobody else can change it.
fn check_the_way(dir: &Path) -> Result<(), LogDirProblem> {
    use std::os::unix::fs::MetadataExt;
    // The part that exists (a dangling link counts as existing: it is refused below, never
    // created through).
    let mut existing = dir;
    while fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
            _ => return Ok(()),
        }
    }
    let Ok(real) = fs::canonicalize(existing) else {
        // A dangling link or a loop on the way: opening the folder says which.
        return Err(LogDirProblem::SymbolicLink);
    };
    let uid = crate::process::sys::effective_uid();
    // The folder itself, when it exists, is checked as the log folder (its own words).
    let skip = usize::from(existing == dir);
    for folder in real.ancestors().skip(skip) {
        let meta = fs::metadata(folder).map_err(|e| LogDirProblem::Read(e.into()))?;
        let mode = meta.mode() & 0o7777;
        let writable_by_others = mode & 0o022 != 0 && mode & 0o1000 == 0;
        if (meta.uid() != uid && meta.uid() != 0) || writable_by_others {
            return Err(LogDirProblem::UnsafePath {
                folder: folder.to_path_buf(),
                owner: meta.uid(),
                mode,
            });
        }
    }
    Ok(())
}

/// The default log folder must be the user's own and closed to others: a folder someone else
/// owns, or one others can write to, could have its logs read, replaced or removed.
fn check_own(meta: &fs::Metadata) -> Result<(), LogDirProblem> {
    use std::os::unix::fs::MetadataExt;
    let uid = crate::process::sys::effective_uid();
    if meta.uid() != uid {
        return Err(LogDirProblem::OtherOwner {
            owner: meta.uid(),
            user: uid,
        });
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(LogDirProblem::WritableByOthers { mode });
    }
    Ok(())
}

impl LogDirError {
    /// The `io::ErrorKind` of a spawn that fails with it: `PermissionDenied` when the folder
    /// is refused for its rights (read-only, not writable, someone else's, a link), the
    /// system's otherwise, never `NotFound` (the kind of "program not found").
    pub(crate) fn io_kind(&self) -> io::ErrorKind {
        match &self.problem {
            LogDirProblem::NotAFolder => io::ErrorKind::NotADirectory,
            LogDirProblem::Create(e) | LogDirProblem::Read(e) | LogDirProblem::NotWritable(e) => {
                e.kind()
            }
            _ => io::ErrorKind::PermissionDenied,
        }
    }
}

/// The folder a session's spills write to (opened once: the logs are made relative to it), or,
/// for an unusable default folder, why they write nothing (the log entries then say so).
#[derive(Debug, Clone)]
pub(crate) struct LogDir {
    path: PathBuf,
    folder: Result<Arc<File>, LogDirError>,
}

impl LogDir {
    /// The usable folder `path`, opened (following a link: a folder the caller named).
    #[cfg(test)]
    pub(crate) fn open(path: &Path) -> LogDir {
        LogDir {
            path: path.to_path_buf(),
            folder: Ok(Arc::new(prepare_dir(path, false).expect("a usable folder"))),
        }
    }
}

/// The log folder of a session about to be spawned: `None` without spill; a folder the caller
/// named must be usable (else a [`SpawnError`](crate::SpawnError) of kind `LogDir`); an
/// unusable default folder is a warning and a folder that writes nothing. A usable folder gets
/// its retention budget applied.
pub(crate) fn resolve_dir(capture: &crate::config::CaptureConfig) -> io::Result<Option<LogDir>> {
    if !capture.spill {
        return Ok(None);
    }
    resolve(capture.log_dir.clone(), default_log_dir, &capture.retention)
}

fn resolve(
    named: Option<PathBuf>,
    default: impl FnOnce() -> PathBuf,
    retention: &LogRetention,
) -> io::Result<Option<LogDir>> {
    let is_default = named.is_none();
    let path = named.unwrap_or_else(default);
    match prepare_dir(&path, is_default) {
        Ok(folder) => {
            maybe_sweep(&path, &folder, retention);
            Ok(Some(LogDir {
                path,
                folder: Ok(Arc::new(folder)),
            }))
        }
        Err(e) if is_default => {
            log::warn!("{e}; no log is written (name a folder to have them)");
            Ok(Some(LogDir {
                path,
                folder: Err(e),
            }))
        }
        Err(e) => Err(crate::error::SpawnError::log_dir(io::Error::new(e.io_kind(), e)).into()),
    }
}

/// The logs of this process still being written (the retention never deletes them; other
/// processes' are told by the lock their writer holds).
static LIVE: LazyLock<crate::sync::Mutex<HashSet<PathBuf>>> =
    LazyLock::new(|| crate::sync::Mutex::new(HashSet::new()));
/// When this process last applied the retention to each folder, and the bytes logged then.
static SWEPT: LazyLock<crate::sync::Mutex<HashMap<PathBuf, (Instant, u64)>>> =
    LazyLock::new(|| crate::sync::Mutex::new(HashMap::new()));
/// Bytes this process has written to logs.
static LOGGED: AtomicU64 = AtomicU64::new(0);
/// At most one sweep per folder per this interval, unless much was logged since.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

fn maybe_sweep(dir: &Path, folder: &File, retention: &LogRetention) {
    if retention.max_age().is_none() && retention.max_total_bytes().is_none() {
        return;
    }
    let logged = LOGGED.load(Ordering::Relaxed);
    let now = Instant::now();
    {
        let mut swept = SWEPT.lock();
        if let Some(&(at, logged_then)) = swept.get(dir) {
            let much = retention
                .max_total_bytes()
                .is_some_and(|max| logged - logged_then > max / 8);
            if now.duration_since(at) < SWEEP_EVERY && !much {
                return;
            }
        }
        swept.insert(dir.to_path_buf(), (now, logged));
    }
    match sweep(dir, folder, retention, SystemTime::now()) {
        Ok(0) => {}
        Ok(n) => log::debug!("log folder {}: {n} old logs deleted", dir.display()),
        Err(e) => log::debug!("log folder {}: retention not applied: {e}", dir.display()),
    }
}

/// Whether a file name is one quietus gives its logs:
/// `<16-char timestamp>-<pid>-s<session>-<stream>[-<n>].log`.
fn is_log_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".log") else {
        return false;
    };
    let mut parts = stem.split('-');
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let stamp = parts.next().unwrap_or_default();
    let stamp_ok = stamp.len() == 16
        && stamp.as_bytes()[8] == b'T'
        && stamp.ends_with('Z')
        && digits(&stamp[..8])
        && digits(&stamp[9..15]);
    let pid_ok = parts.next().is_some_and(digits);
    let session_ok = parts
        .next()
        .and_then(|s| s.strip_prefix('s'))
        .is_some_and(digits);
    let stream_ok = parts
        .next()
        .is_some_and(|s| matches!(s, "stdout" | "stderr" | "combined"));
    let rest: Vec<&str> = parts.collect();
    let rest_ok = rest.is_empty() || (rest.len() == 1 && digits(rest[0]));
    stamp_ok && pid_ok && session_ok && stream_ok && rest_ok
}

/// One of quietus's logs in a folder, as the retention sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogEntry {
    pub(crate) modified: SystemTime,
    pub(crate) bytes: u64,
    /// Being written: never deleted.
    pub(crate) live: bool,
}

/// Which logs the retention deletes, oldest first (indices into `logs`): those older than the
/// age limit, then the oldest while the total (live logs included) passes the size limit.
/// Live logs are never chosen.
pub(crate) fn to_delete(logs: &[LogEntry], now: SystemTime, budget: &LogRetention) -> Vec<usize> {
    let mut order: Vec<usize> = (0..logs.len()).collect();
    order.sort_by_key(|&i| logs[i].modified);
    let mut total: u64 = logs.iter().map(|l| l.bytes).sum();
    let mut chosen = Vec::new();
    for i in order {
        let log = &logs[i];
        if log.live {
            continue;
        }
        let too_old = budget
            .max_age()
            .is_some_and(|age| now.duration_since(log.modified).is_ok_and(|a| a > age));
        let too_big = budget.max_total_bytes().is_some_and(|max| total > max);
        if too_old || too_big {
            total -= log.bytes;
            chosen.push(i);
        }
    }
    chosen
}

/// Applies the retention to the open folder `folder` (at `dir`) now; returns how many logs it
/// deleted.
fn sweep(dir: &Path, folder: &File, budget: &LogRetention, now: SystemTime) -> io::Result<usize> {
    let mut names = Vec::new();
    let mut entries = Vec::new();
    {
        let live = LIVE.lock();
        // Not followed: a symlink or anything but a plain file is not a log of ours.
        for (name, modified, bytes) in crate::process::sys::files_in(folder)? {
            if !is_log_name(&name) {
                continue;
            }
            entries.push(LogEntry {
                modified,
                bytes,
                live: live.contains(&dir.join(&name)),
            });
            names.push(name);
        }
    }
    let mut deleted = 0;
    for i in to_delete(&entries, now, budget) {
        if delete_unless_locked(folder, &names[i]) {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Deletes log `name` of the open folder `folder` unless another process is writing it (its
/// writer holds an exclusive `flock` on it for as long as it writes: see [`lock_new_log`]).
fn delete_unless_locked(folder: &File, name: &str) -> bool {
    let Ok(file) = crate::process::sys::open_in(folder, name) else {
        return false;
    };
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return false; // being written
    }
    crate::process::sys::remove_in(folder, name).is_ok()
}

/// Locks a new log for as long as it is written, so another process's retention leaves it
/// alone; `false` when a retention deleted it between its creation and the lock (the caller
/// then makes another).
fn lock_new_log(file: &File) -> bool {
    if let Err(e) = rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive) {
        log::debug!("cannot lock a new log: {e}");
    }
    file.metadata().is_ok_and(|m| m.nlink() > 0)
}

/// `20261122T053012Z`, from the wall clock (only for naming files).
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Opens a new log file in the open folder `folder` (at `dir`): create-new (never overwrites,
/// never follows a symlink), mode 0600. On failure, the error and the first name it tried.
/// Each name is registered in `own` before it is tried, so the file tracker never counts the
/// log's creation or its writes as the child's activity.
fn create_log(
    dir: &Path,
    folder: &File,
    session: u64,
    stream: Stream,
    own: Option<&OwnFiles>,
) -> Result<(File, PathBuf), (io::Error, PathBuf)> {
    let base = format!(
        "{}-{}-s{session}-{}",
        timestamp(),
        std::process::id(),
        stream.name()
    );
    for attempt in 0..100 {
        let name = if attempt == 0 {
            format!("{base}.log")
        } else {
            format!("{base}-{attempt}.log")
        };
        let path = dir.join(&name);
        if let Some(own) = own {
            own.add(&path);
        }
        let opened = crate::process::sys::create_new_in(folder, &name, 0o600);
        match opened {
            Ok(file) => {
                if !lock_new_log(&file) {
                    continue; // deleted by a retention before it was locked: another name
                }
                // The mode asked for is filtered by the umask: make it exact.
                return match file.set_permissions(fs::Permissions::from_mode(0o600)) {
                    Ok(()) => {
                        LIVE.lock().insert(path.clone());
                        Ok((file, path))
                    }
                    Err(e) => Err((e, path)),
                };
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err((e, path)),
        }
    }
    Err((
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free log file name like {base}.log"),
        ),
        dir.join(format!("{base}.log")),
    ))
}

/// Chunks in flight between a reader and its spill thread, and again between the spill thread
/// and its log writer (at most this many × the read size, 2 MiB, in memory each); a disk slower than the child then slows the reader, never memory.
const IN_FLIGHT: usize = 32;

/// What a spill thread is handed.
enum Message {
    /// The next bytes of the stream.
    Chunk(Arc<[u8]>),
    /// Everything handed over before this is written and hashed: answer, and stop.
    Seal(crossbeam_channel::Sender<()>),
}

/// Closes the reader's side of a spill without losing a chunk the reader already holds.
#[derive(Debug, Default)]
struct Gate {
    /// The log is closed: later chunks are not logged.
    sealed: AtomicBool,
    /// The reader is between its look at `sealed` and the end of its hand-over.
    busy: AtomicBool,
}

/// The reader's end of a spill thread.
pub(crate) struct SpillWriter {
    tx: crossbeam_channel::Sender<Message>,
    gate: Arc<Gate>,
    lazy: Arc<LazyWorker>,
}

/// The spill thread before its start: it starts with the first chunk, so a stream that never
/// carries a byte (a sleeping program's) costs no thread.
struct LazyWorker {
    /// The thread's end of the channel, until it starts (`None` after, or once sealed
    /// without a chunk).
    rx: crate::sync::Mutex<Option<crossbeam_channel::Receiver<Message>>>,
    name: String,
    state: Arc<crate::sync::Mutex<Spill>>,
}

impl LazyWorker {
    /// Starts the thread if it has not started; `false` when it could not be (the caller
    /// then does its work itself).
    fn ensure_started(&self) -> bool {
        let mut rx = self.rx.lock();
        let Some(messages) = rx.take() else {
            return true;
        };
        let worker = self.state.clone();
        let started = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || {
                for message in messages {
                    match message {
                        Message::Chunk(chunk) => worker.lock().push_shared(chunk),
                        Message::Seal(ack) => {
                            worker.lock().finish();
                            let _ = ack.send(());
                            return;
                        }
                    }
                }
                worker.lock().finish();
            });
        if let Err(e) = started {
            log::warn!("no thread for the log spill ({e}); the reader logs itself");
            return false;
        }
        true
    }

    /// Whether the thread never started (and now never will): no chunk was handed over.
    fn never_started(&self) -> bool {
        self.rx.lock().take().is_some()
    }
}

impl SpillWriter {
    /// Hands a chunk to the spill thread (blocks only when [`IN_FLIGHT`] chunks wait), which
    /// starts with the first one. A chunk read after the log was closed
    /// ([`SpillReport::log`]) is not logged.
    pub(crate) fn push(&self, data: &[u8]) {
        // Sequentially consistent on both sides (see `SpillReport::log`): either this push
        // sees the seal and keeps out, or the seal sees `busy` and waits for the hand-over.
        self.gate.busy.store(true, Ordering::SeqCst);
        if !self.gate.sealed.load(Ordering::SeqCst) {
            if self.lazy.ensure_started() {
                let _ = self.tx.send(Message::Chunk(Arc::from(data)));
            } else {
                self.lazy.state.lock().push_shared(Arc::from(data));
            }
        }
        self.gate.busy.store(false, Ordering::SeqCst);
    }
}

/// The monitor's end of a spill thread: the log so far, and the way to close it.
pub(crate) struct SpillReport {
    pub(crate) state: Arc<crate::sync::Mutex<Spill>>,
    tx: crossbeam_channel::Sender<Message>,
    gate: Arc<Gate>,
    lazy: Arc<LazyWorker>,
}

impl SpillReport {
    /// Whether the reader is handing a chunk over right now: waiting for the spill thread to
    /// make room, so the log (not the pipe) is what it waits for.
    pub(crate) fn busy(&self) -> bool {
        self.gate.busy.load(Ordering::SeqCst)
    }

    /// Closes the log and returns it (`None` while the stream stayed under the threshold).
    /// Every chunk the reader handed over, or holds at this moment, is written and hashed
    /// first: this waits for the disk, never for a timer. `settled`: the reader reached
    /// end-of-file, so the log is the whole stream; otherwise it is marked incomplete.
    pub(crate) fn log(&self, settled: bool) -> Option<LogFile> {
        self.gate.sealed.store(true, Ordering::SeqCst);
        while self.gate.busy.load(Ordering::SeqCst) {
            // The reader holds a chunk read before the seal: it is on its way.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (ack_tx, ack_rx) = crossbeam_channel::bounded(1);
        if self.lazy.never_started() {
            self.state.lock().finish(); // no chunk came: nothing to wait for
        } else if self.tx.send(Message::Seal(ack_tx)).is_ok() {
            // Err: the spill thread is gone (already sealed); the state holds what it wrote.
            let _ = ack_rx.recv();
        }
        let mut log = self.state.lock().log()?;
        if !settled && !log.incomplete {
            log.incomplete = true;
            log.error = Some(LogProblem::StillOpen);
        }
        Some(log)
    }
}

/// Prepares the spill thread of one stream, started by its first chunk: hashing (SHA-256 is
/// slower than a pipe) runs there, beside the reader, not in its way; the log's disk writes
/// run on a thread of their own beside the hash (see [`FileWriter`]), so the two overlap.
/// Where the thread cannot start, the reader hashes and writes itself.
pub(crate) fn start(spill: Spill, name: String) -> std::io::Result<(SpillWriter, SpillReport)> {
    let (tx, rx) = crossbeam_channel::bounded::<Message>(IN_FLIGHT);
    let state = Arc::new(crate::sync::Mutex::new(spill));
    let gate = Arc::new(Gate::default());
    let lazy = Arc::new(LazyWorker {
        rx: crate::sync::Mutex::new(Some(rx)),
        name,
        state: state.clone(),
    });
    Ok((
        SpillWriter {
            tx: tx.clone(),
            gate: gate.clone(),
            lazy: lazy.clone(),
        },
        SpillReport {
            state,
            tx,
            gate,
            lazy,
        },
    ))
}

/// What the log file holds so far, shared by the spill and its file writer.
#[derive(Debug, Default)]
struct Written {
    /// Bytes in the file.
    bytes: u64,
    /// Why writing stopped.
    error: Option<LogProblem>,
}

/// The thread that writes a log file while the spill thread hashes the next chunk: started
/// when the log is created (a stream under the threshold never has one).
struct FileWriter {
    tx: Option<crossbeam_channel::Sender<Arc<[u8]>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Appends a chunk to the log; a failure ends the writing (the log is incomplete).
fn write_chunk(file: &File, path: &Path, data: &[u8], written: &crate::sync::Mutex<Written>) {
    if written.lock().error.is_some() {
        return;
    }
    let mut out = file;
    match out.write_all(data) {
        Ok(()) => {
            written.lock().bytes += data.len() as u64;
            LOGGED.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        Err(e) => {
            log::error!("writing log {}: {e}; the log is incomplete", path.display());
            let mut w = written.lock();
            // Part of the chunk may be in: the file's length says how much.
            w.bytes = file.metadata().map_or(w.bytes, |m| m.len());
            w.error = Some(LogProblem::Write(e.into()));
        }
    }
}

/// One stream's spill.
pub(crate) struct Spill {
    dir: Option<LogDir>,
    threshold: u64,
    session: u64,
    stream: Stream,
    pending: Vec<u8>,
    file: Option<(Arc<File>, PathBuf)>,
    writer: Option<FileWriter>,
    written: Arc<crate::sync::Mutex<Written>>,
    hasher: Sha256,
    total: u64,
    failed: bool,
    /// Why the log is incomplete, and the path it has or would have had.
    error: Option<(LogProblem, PathBuf)>,
    /// Where the log file is registered as quietus's own, when files are watched.
    own: Option<OwnFiles>,
}

impl Spill {
    /// `dir: None` disables spilling (the hash is still kept).
    pub(crate) fn new(dir: Option<LogDir>, threshold: u64, session: u64, stream: Stream) -> Self {
        Self {
            dir,
            threshold,
            session,
            stream,
            pending: Vec::new(),
            file: None,
            writer: None,
            written: Arc::default(),
            hasher: Sha256::new(),
            total: 0,
            failed: false,
            error: None,
            own: None,
        }
    }

    /// Registers the log file in `own` (the file tracker's list) before creating it.
    pub(crate) fn own_files(mut self, own: Option<OwnFiles>) -> Self {
        self.own = own;
        self
    }

    #[cfg(test)]
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.push_shared(Arc::from(data));
    }

    /// Hashes a chunk and hands it to the log's writer (once past the threshold).
    pub(crate) fn push_shared(&mut self, data: Arc<[u8]>) {
        if self.file.is_some() {
            // The writer copies it to the file while this hashes it.
            self.write(data.clone());
        }
        self.hasher.update(&data);
        self.total += data.len() as u64;
        if self.failed || self.file.is_some() {
            return;
        }
        let Some(dir) = self.dir.as_ref() else {
            return;
        };
        self.pending.extend_from_slice(&data);
        if self.total <= self.threshold {
            return;
        }
        match dir.folder.clone() {
            Err(why) => {
                self.failed = true;
                let path = dir.path.join(format!(
                    "{}-{}-s{}-{}.log",
                    timestamp(),
                    std::process::id(),
                    self.session,
                    self.stream.name()
                ));
                self.error = Some((LogProblem::Folder(why), path));
            }
            Ok(folder) => {
                let own = self.own.as_ref();
                match create_log(&dir.path, &folder, self.session, self.stream, own) {
                    Ok((file, path)) => {
                        let file = Arc::new(file);
                        self.writer = self.start_writer(&file, &path);
                        self.file = Some((file, path));
                        let pending = std::mem::take(&mut self.pending);
                        self.write(Arc::from(pending));
                    }
                    Err((e, path)) => {
                        log::error!(
                            "cannot create the log {}: {e}; output is kept in memory only",
                            path.display()
                        );
                        self.failed = true;
                        self.error = Some((LogProblem::Create(e.into()), path));
                    }
                }
            }
        }
        self.pending = Vec::new();
    }

    /// The log's writer thread; `None` (the spill thread then writes too) if none can start.
    fn start_writer(&self, file: &Arc<File>, path: &Path) -> Option<FileWriter> {
        let (tx, rx) = crossbeam_channel::bounded::<Arc<[u8]>>(IN_FLIGHT);
        let (file, path_buf, written) = (file.clone(), path.to_path_buf(), self.written.clone());
        let handle = std::thread::Builder::new()
            .name(format!("quietus-logw-{}", self.session))
            .spawn(move || {
                for chunk in rx {
                    write_chunk(&file, &path_buf, &chunk, &written);
                }
            })
            .inspect_err(|e| log::debug!("no log writer thread ({e}); writing inline"))
            .ok()?;
        Some(FileWriter {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    /// Appends to the open log, through its writer thread when there is one.
    fn write(&mut self, data: Arc<[u8]>) {
        let Some((file, path)) = self.file.as_ref() else {
            return;
        };
        if let Some(tx) = self.writer.as_ref().and_then(|w| w.tx.as_ref()) {
            let _ = tx.send(data);
        } else {
            write_chunk(file, path, &data, &self.written);
        }
    }

    /// Every chunk handed over is in the file: stops the writer, unlocks the log and lets the
    /// retention have it.
    pub(crate) fn finish(&mut self) {
        if let Some(mut writer) = self.writer.take() {
            drop(writer.tx.take());
            if let Some(handle) = writer.handle.take()
                && handle.join().is_err()
            {
                log::error!("the log writer thread panicked");
            }
        }
        if let Some((file, path)) = &self.file
            && LIVE.lock().remove(path)
        {
            let _ = rustix::fs::flock(&**file, rustix::fs::FlockOperation::Unlock);
        }
    }

    /// Where the log is, once started.
    pub(crate) fn path(&self) -> Option<PathBuf> {
        self.file.as_ref().map(|(_, p)| p.clone())
    }

    /// The log, if one was started (or could not be).
    pub(crate) fn log(&self) -> Option<LogFile> {
        let path = match (&self.file, &self.error) {
            (Some((file, path)), _) => {
                if self.writer.is_none()
                    && let Err(e) = file.sync_data()
                {
                    log::debug!("syncing log {}: {e}", path.display());
                }
                path.clone()
            }
            (None, Some((_, path))) => path.clone(),
            (None, None) => return None,
        };
        let written = self.written.lock();
        let error = self
            .error
            .as_ref()
            .map(|(why, _)| why.clone())
            .or_else(|| written.error.clone());
        let digest = self.hasher.clone().finalize();
        Some(LogFile {
            stream: self.stream,
            path,
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            bytes: self.total,
            written: written.bytes,
            incomplete: error.is_some(),
            error,
        })
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests;
