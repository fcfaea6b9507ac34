//! The log spill: once a stream passes a threshold, its complete content from byte 0 goes to a
//! log file (created new, never through a symlink, mode 0600, in a folder of mode 0700), and its
//! SHA-256 is kept.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::own_files::OwnFiles;
use crate::stream::Stream;

/// A complete log of one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogFile {
    /// Which stream.
    pub stream: Stream,
    /// Where it is (when it could not be created: where it would have been).
    pub path: PathBuf,
    /// Lower-case hex SHA-256 of every byte read from the stream: the complete log's content.
    pub sha256: String,
    /// How many bytes were read from the stream: the complete log's length.
    pub bytes: u64,
    /// How many bytes the file really holds: `bytes` unless writing failed.
    pub written: u64,
    /// Whether the log lacks part of the stream: it could not be created or written
    /// (`written < bytes`), or the stream was still held open when the run ended (then the
    /// log holds every byte read, but the stream went on). The in-memory capture still holds
    /// head and tail.
    pub incomplete: bool,
    /// Why it is incomplete, in words.
    pub error: Option<String>,
}

/// The default log folder: the platform cache folder's `stallwatch/logs`
/// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS), else (no `HOME`)
/// the temp folder's `stallwatch-<uid>-logs`. Being a default, it must be the user's own: a
/// spawn refuses it when it belongs to someone else or others can write to it (as ssh refuses
/// such a folder), where a folder the caller chose only has to be usable.
pub fn default_log_dir() -> PathBuf {
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
        Some(cache) => cache.join("stallwatch").join("logs"),
        None => std::env::temp_dir().join(format!(
            "stallwatch-{}-logs",
            crate::process::sys::effective_uid()
        )),
    }
}

/// Creates the log folder (mode 0700 for what is created) and checks that files can be made in
/// it, so an unusable folder is an error at spawn rather than lost output later.
pub(crate) fn prepare_dir(dir: &Path) -> io::Result<()> {
    let fail = |kind: io::ErrorKind, problem: String| {
        io::Error::new(
            kind,
            LogDirError {
                path: dir.to_path_buf(),
                problem,
            },
        )
    };
    let created = DirBuilder::new().recursive(true).mode(0o700).create(dir);
    let meta = match (created, fs::metadata(dir)) {
        (_, Ok(meta)) => meta,
        (Err(e), Err(_)) => return Err(fail(e.kind(), format!("cannot create it: {e}"))),
        (Ok(()), Err(e)) => return Err(fail(e.kind(), format!("cannot read it: {e}"))),
    };
    if !meta.is_dir() {
        return Err(fail(io::ErrorKind::NotADirectory, "is not a folder".into()));
    }
    if let Err(e) = crate::process::sys::check_dir_writable(dir) {
        return Err(fail(e.kind(), format!("not writable: {e}")));
    }
    if meta.permissions().readonly() {
        return Err(fail(io::ErrorKind::PermissionDenied, "is read-only".into()));
    }
    if dir == default_log_dir() {
        check_own(&meta).map_err(|problem| fail(io::ErrorKind::PermissionDenied, problem))?;
    }
    Ok(())
}

/// The default log folder must be the user's own and closed to others: a folder someone else
/// owns, or one others can write to, could have its logs read, replaced or removed.
fn check_own(meta: &fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let uid = crate::process::sys::effective_uid();
    if meta.uid() != uid {
        return Err(format!(
            "belongs to user {}, not to this user ({uid}); the default log folder must be \
             the user's own",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "is writable by others (mode {mode:o}); the default log folder must be the \
             user's own"
        ));
    }
    Ok(())
}

/// The log folder cannot be used: the error inside the `io::Error` a spawn returns then, so a
/// caller can tell it from the program's own spawn error (`err.get_ref()` and
/// `downcast_ref::<LogDirError>()`).
#[derive(Debug)]
pub struct LogDirError {
    path: PathBuf,
    problem: String,
}

impl LogDirError {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Display for LogDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "log folder {}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for LogDirError {}

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

/// Opens a new log file: create-new (never overwrites, never follows a symlink), mode 0600.
/// On failure, the error and the first name it tried.
/// Each name is registered in `own` before it is tried, so the file tracker never counts the
/// log's creation or its writes as the child's activity.
fn create_log(
    dir: &Path,
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
        let path = dir.join(name);
        if let Some(own) = own {
            own.add(&path);
        }
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(crate::process::sys::O_NOFOLLOW)
            .open(&path);
        match opened {
            Ok(file) => {
                // The mode asked for is filtered by the umask: make it exact.
                return match file.set_permissions(fs::Permissions::from_mode(0o600)) {
                    Ok(()) => Ok((file, path)),
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

/// Chunks in flight between a reader and its spill thread (at most this many × the read size,
/// 8 MiB, in memory); a disk slower than the child then slows the reader, never memory.
const IN_FLIGHT: usize = 32;

/// What a spill thread is handed.
enum Message {
    /// The next bytes of the stream.
    Chunk(Vec<u8>),
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
}

impl SpillWriter {
    /// Hands a chunk to the spill thread (blocks only when [`IN_FLIGHT`] chunks wait). A chunk
    /// read after the log was closed ([`SpillReport::log`]) is not logged.
    pub(crate) fn push(&self, data: &[u8]) {
        // Sequentially consistent on both sides (see `SpillReport::log`): either this push
        // sees the seal and keeps out, or the seal sees `busy` and waits for the hand-over.
        self.gate.busy.store(true, Ordering::SeqCst);
        if !self.gate.sealed.load(Ordering::SeqCst) {
            let _ = self.tx.send(Message::Chunk(data.to_vec()));
        }
        self.gate.busy.store(false, Ordering::SeqCst);
    }
}

/// The monitor's end of a spill thread: the log so far, and the way to close it.
pub(crate) struct SpillReport {
    pub(crate) state: Arc<parking_lot::Mutex<Spill>>,
    tx: crossbeam_channel::Sender<Message>,
    gate: Arc<Gate>,
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
        if self.tx.send(Message::Seal(ack_tx)).is_ok() {
            // Err: the spill thread is gone (already sealed); the state holds what it wrote.
            let _ = ack_rx.recv();
        }
        let mut log = self.state.lock().log()?;
        if !settled && !log.incomplete {
            log.incomplete = true;
            log.error = Some(
                "the stream was still open when the run ended (a process outside the tree \
                 held it); the log holds every byte read until then"
                    .to_owned(),
            );
        }
        Some(log)
    }
}

/// Starts the spill thread of one stream: hashing (SHA-256 is slower than a pipe) and disk
/// writes run there, beside the reader, not in its way.
pub(crate) fn start(spill: Spill, name: String) -> std::io::Result<(SpillWriter, SpillReport)> {
    let (tx, rx) = crossbeam_channel::bounded::<Message>(IN_FLIGHT);
    let state = Arc::new(parking_lot::Mutex::new(spill));
    let gate = Arc::new(Gate::default());
    let worker = state.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        for message in rx {
            match message {
                Message::Chunk(chunk) => worker.lock().push(&chunk),
                Message::Seal(ack) => {
                    let _ = ack.send(());
                    break;
                }
            }
        }
    })?;
    Ok((
        SpillWriter {
            tx: tx.clone(),
            gate: gate.clone(),
        },
        SpillReport { state, tx, gate },
    ))
}

/// One stream's spill.
pub(crate) struct Spill {
    dir: Option<PathBuf>,
    threshold: u64,
    session: u64,
    stream: Stream,
    pending: Vec<u8>,
    file: Option<(File, PathBuf)>,
    hasher: Sha256,
    total: u64,
    /// Bytes in the file.
    written: u64,
    failed: bool,
    /// Why the log is incomplete, and the path it has or would have had.
    error: Option<(String, PathBuf)>,
    /// Where the log file is registered as stallwatch's own, when files are watched.
    own: Option<OwnFiles>,
}

impl Spill {
    /// `dir: None` disables spilling (the hash is still kept).
    pub(crate) fn new(dir: Option<PathBuf>, threshold: u64, session: u64, stream: Stream) -> Self {
        Self {
            dir,
            threshold,
            session,
            stream,
            pending: Vec::new(),
            file: None,
            hasher: Sha256::new(),
            total: 0,
            written: 0,
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

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.hasher.update(data);
        self.total += data.len() as u64;
        if self.failed {
            return;
        }
        if self.file.is_some() {
            self.write(data);
            return;
        }
        let Some(dir) = self.dir.as_ref() else {
            return;
        };
        self.pending.extend_from_slice(data);
        if self.total > self.threshold {
            match create_log(dir, self.session, self.stream, self.own.as_ref()) {
                Ok(file) => {
                    self.file = Some(file);
                    let pending = std::mem::take(&mut self.pending);
                    self.write(&pending);
                }
                Err((e, path)) => {
                    log::error!(
                        "cannot create the log {}: {e}; output is kept in memory only",
                        path.display()
                    );
                    self.failed = true;
                    self.error = Some((format!("cannot create it: {e}"), path));
                }
            }
            self.pending = Vec::new();
        }
    }

    /// Appends to the open log; a failure ends the writing (the log is incomplete).
    fn write(&mut self, data: &[u8]) {
        let Some((file, path)) = self.file.as_mut() else {
            return;
        };
        match file.write_all(data) {
            Ok(()) => self.written += data.len() as u64,
            Err(e) => {
                log::error!("writing log {}: {e}; the log is incomplete", path.display());
                // Part of the chunk may be in: the file's length says how much.
                self.written = file.metadata().map_or(self.written, |m| m.len());
                self.failed = true;
                self.error = Some((format!("cannot write it: {e}"), path.clone()));
            }
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
                if let Err(e) = file.sync_data() {
                    log::debug!("syncing log {}: {e}", path.display());
                }
                path.clone()
            }
            (None, Some((_, path))) => path.clone(),
            (None, None) => return None,
        };
        let digest = self.hasher.clone().finalize();
        Some(LogFile {
            stream: self.stream,
            path,
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            bytes: self.total,
            written: self.written,
            incomplete: self.failed,
            error: self.error.as_ref().map(|(why, _)| why.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn below_the_threshold_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::new(Some(dir.path().into()), 4096, 1, Stream::Stdout);
        spill.push(&[b'x'; 4096]);
        assert!(spill.log().is_none());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn past_the_threshold_the_whole_stream_is_logged_with_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::new(Some(dir.path().into()), 10, 7, Stream::Stderr);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for chunk in data.chunks(333) {
            spill.push(chunk);
        }
        let log = spill.log().unwrap();
        assert_eq!(fs::read(&log.path).unwrap(), data);
        let expected: String = Sha256::digest(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(log.sha256, expected);
        assert_eq!(log.bytes, data.len() as u64);
        let meta = fs::metadata(&log.path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let name = log.path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.contains("-s7-stderr") && name.ends_with(".log"),
            "{name}"
        );
    }

    /// Closing the log waits for every chunk handed over, however slow the writer, and keeps
    /// out what comes after; a stream still open is marked incomplete, with the reason.
    #[test]
    fn closing_the_log_writes_every_chunk_handed_over_and_nothing_after() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(Some(dir.path().into()), 10, 3, Stream::Stdout);
        let (writer, report) = start(spill, "spill-test".into()).unwrap();
        let data: Vec<u8> = (0..(8 * IN_FLIGHT * 4096) as u32)
            .map(|i| (i % 253) as u8)
            .collect();
        for chunk in data.chunks(4096) {
            writer.push(chunk);
        }
        let log = report.log(false).unwrap();
        writer.push(b"after the seal");
        assert_eq!(fs::read(&log.path).unwrap(), data);
        assert_eq!(
            (log.bytes, log.written),
            (data.len() as u64, data.len() as u64)
        );
        assert!(log.incomplete);
        assert!(log.error.unwrap().contains("still open"));
        assert_eq!(
            report.log(true).unwrap().bytes,
            data.len() as u64,
            "sealed once"
        );
    }

    #[test]
    fn create_new_never_follows_or_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        fs::write(&target, "precious").unwrap();
        // Plant symlinks at every name the next log could take in this second.
        let (_, probe) = create_log(dir.path(), 9, Stream::Stdout, None).unwrap();
        let probe_name = probe.file_name().unwrap().to_string_lossy().into_owned();
        fs::remove_file(&probe).unwrap();
        let base = probe_name.trim_end_matches(".log").to_owned();
        std::os::unix::fs::symlink(&target, dir.path().join(format!("{base}.log"))).unwrap();
        let (mut file, path) = create_log(dir.path(), 9, Stream::Stdout, None).unwrap();
        file.write_all(b"log").unwrap();
        assert_ne!(path, dir.path().join(format!("{base}.log")));
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn a_folder_under_a_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "").unwrap();
        let err = prepare_dir(&file.join("logs")).unwrap_err();
        assert!(err.to_string().contains("log folder"), "{err}");
        let err = prepare_dir(&file).unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
    }

    #[test]
    fn prepared_folders_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("a/b/logs");
        prepare_dir(&logs).unwrap();
        assert_eq!(fs::metadata(&logs).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn timestamps_look_right() {
        let t = timestamp();
        assert_eq!(t.len(), 16, "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && t.contains('T'),
            "{t}"
        );
    }
}
