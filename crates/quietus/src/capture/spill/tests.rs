use super::*;

fn open_folder(dir: &Path) -> File {
    crate::process::sys::open_folder(dir, true).unwrap()
}
use std::os::unix::fs::MetadataExt;

#[test]
fn below_the_threshold_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut spill = Spill::new(Some(LogDir::open(dir.path())), 4096, 1, Stream::Stdout);
    spill.push(&[b'x'; 4096]);
    assert!(spill.log().is_none());
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn past_the_threshold_the_whole_stream_is_logged_with_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let mut spill = Spill::new(Some(LogDir::open(dir.path())), 10, 7, Stream::Stderr);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for chunk in data.chunks(333) {
        spill.push(chunk);
    }
    spill.finish();
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
    let spill = Spill::new(Some(LogDir::open(dir.path())), 10, 3, Stream::Stdout);
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
    assert_eq!(log.error, Some(LogProblem::StillOpen));
    assert!(log.error.unwrap().to_string().contains("still open"));
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
    let (_, probe) = create_log(
        dir.path(),
        &open_folder(dir.path()),
        9,
        Stream::Stdout,
        None,
    )
    .unwrap();
    let probe_name = probe.file_name().unwrap().to_string_lossy().into_owned();
    fs::remove_file(&probe).unwrap();
    let base = probe_name.trim_end_matches(".log").to_owned();
    std::os::unix::fs::symlink(&target, dir.path().join(format!("{base}.log"))).unwrap();
    let (mut file, path) = create_log(
        dir.path(),
        &open_folder(dir.path()),
        9,
        Stream::Stdout,
        None,
    )
    .unwrap();
    file.write_all(b"log").unwrap();
    assert_ne!(path, dir.path().join(format!("{base}.log")));
    assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
}

#[test]
fn a_folder_under_a_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    let err = prepare_dir(&file.join("logs"), false).unwrap_err();
    assert!(err.to_string().contains("log folder"), "{err}");
    let err = prepare_dir(&file, false).unwrap_err();
    assert!(err.to_string().contains("not a folder"), "{err}");
}

#[test]
fn prepared_folders_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("a/b/logs");
    prepare_dir(&logs, false).unwrap();
    assert_eq!(fs::metadata(&logs).unwrap().mode() & 0o777, 0o700);
}

/// A symbolic link planted at the default log folder is refused, even when it points to a
/// folder that passes every check (this user's own, mode 0700): checked without following
/// it, the log never goes where another user's link leads.
#[test]
fn a_link_planted_at_the_default_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("looks-fine");
    DirBuilder::new().mode(0o700).create(&target).unwrap();
    let planted = dir.path().join("quietus-logs");
    std::os::unix::fs::symlink(&target, &planted).unwrap();
    let budget = LogRetention::default();
    let degraded = resolve(None, || planted.clone(), &budget).unwrap().unwrap();
    let why = degraded
        .folder
        .as_ref()
        .expect_err("the planted link was used");
    assert!(why.to_string().contains("symbolic link"), "{why}");
    let mut spill = Spill::new(Some(degraded), 1, 1, Stream::Stdout);
    spill.push(b"secret output");
    assert!(spill.log().unwrap().incomplete);
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        0,
        "a log went there"
    );
    // A folder the caller names may be a link: it is the caller's choice.
    assert!(resolve(Some(planted.clone()), PathBuf::new, &budget).is_ok());
}

/// A shared `HOME` whose `~/.cache` someone else can change (issue 51, point 6): they made
/// `~/.cache/quietus` a link to a folder of theirs. The default folder is refused before
/// anything is created through the link; a folder on the way that others may write to
/// without a sticky bit is refused the same way; a sticky one (as `/tmp`) is fine.
#[test]
fn the_way_to_the_default_folder_is_checked_as_ssh_does() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let budget = LogRetention::default();
    let cache = dir.path().join("home/.cache");
    fs::create_dir_all(&cache).unwrap();
    let theirs = dir.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink(&theirs, cache.join("quietus")).unwrap();
    let default = cache.join("quietus/logs");
    let refused = |why: &str| {
        let log_dir = resolve(None, || default.clone(), &budget).unwrap().unwrap();
        let e = log_dir
            .folder
            .as_ref()
            .expect_err("the default folder was used");
        assert!(
            matches!(e.problem, LogDirProblem::UnsafePath { .. }),
            "{why}: {e}"
        );
        assert_eq!(
            fs::read_dir(&theirs).unwrap().count(),
            0,
            "{why}: made in theirs"
        );
    };
    // Others may write to the folder the link leads to.
    refused("a link to a folder others write to");
    // Someone else's ~/.cache (only root can make a folder another user's).
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o755)).unwrap();
    if crate::process::sys::effective_uid() == 0 {
        std::os::unix::fs::chown(&cache, Some(4242), Some(4242)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
        refused("someone else's ~/.cache");
        std::os::unix::fs::chown(&cache, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(0), Some(0)).unwrap();
    }
    // A way others may write to without a sticky bit, then with one.
    fs::remove_file(cache.join("quietus")).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
    refused("a ~/.cache others may write to");
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o1777)).unwrap();
    let log_dir = resolve(None, || default.clone(), &budget).unwrap().unwrap();
    assert!(log_dir.folder.is_ok(), "{:?}", log_dir.folder);
}

/// The logs are made in the folder that was checked: a folder moved away after the check,
/// and a link to another folder put in its place, leave the logs where they were checked.
#[test]
fn logs_go_to_the_folder_checked_whatever_its_path_leads_to_later() {
    let dir = tempfile::tempdir().unwrap();
    let checked = dir.path().join("logs");
    let budget = LogRetention::default();
    let log_dir = resolve(None, || checked.clone(), &budget).unwrap().unwrap();
    assert!(log_dir.folder.is_ok(), "{:?}", log_dir.folder);
    let moved = dir.path().join("moved");
    fs::rename(&checked, &moved).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &checked).unwrap();
    let mut spill = Spill::new(Some(log_dir), 1, 1, Stream::Stdout);
    spill.push(b"output past the threshold");
    spill.finish();
    assert!(!spill.log().unwrap().incomplete, "{:?}", spill.log());
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "followed the link"
    );
    assert_eq!(
        fs::read_dir(&moved).unwrap().count(),
        1,
        "not in the folder checked"
    );
}

fn entry(age_secs: u64, bytes: u64, live: bool, now: SystemTime) -> LogEntry {
    LogEntry {
        modified: now - Duration::from_secs(age_secs),
        bytes,
        live,
    }
}

/// The retention as a pure function of the files, the time and the budget: too old first,
/// then the oldest while over the size budget; a live log is never chosen, but counts.
#[test]
fn retention_deletes_the_too_old_then_the_oldest_over_budget_never_a_live_log() {
    let now = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let budget = LogRetention::new(Some(Duration::from_secs(100)), Some(1000));
    // Nothing to do: young and under budget.
    let logs = [entry(10, 400, false, now), entry(5, 500, false, now)];
    assert!(to_delete(&logs, now, &budget).is_empty());
    // One too old (whatever the size), the rest under budget.
    let logs = [entry(10, 400, false, now), entry(101, 1, false, now)];
    assert_eq!(to_delete(&logs, now, &budget), vec![1]);
    // Over budget: the oldest go until the rest fits (1500 → 1100 → 800).
    let logs = [
        entry(30, 300, false, now),
        entry(50, 400, false, now),
        entry(40, 300, false, now),
        entry(10, 500, false, now),
    ];
    assert_eq!(to_delete(&logs, now, &budget), vec![1, 2]);
    // The oldest is live: skipped (and still counted), the next ones go.
    let logs = [
        entry(200, 600, true, now),
        entry(50, 300, false, now),
        entry(10, 300, false, now),
    ];
    // 1200 → 900: under budget once the oldest that is not live is gone.
    assert_eq!(to_delete(&logs, now, &budget), vec![1]);
    // A clock that went back (mtime in the future) is not old.
    let logs = [entry(0, 10, false, now + Duration::from_secs(500))];
    assert!(to_delete(&logs, now, &budget).is_empty());
    // No limits: nothing goes.
    let logs = [entry(1_000_000, u64::MAX / 2, false, now)];
    assert!(to_delete(&logs, now, &LogRetention::keep_all()).is_empty());
}

#[test]
fn only_quietus_log_names_are_recognised() {
    for name in [
        "20261122T053012Z-4242-s1-stdout.log",
        "20261122T053012Z-1-s17-stderr-3.log",
        "20261122T053012Z-99-s2-combined.log",
    ] {
        assert!(is_log_name(name), "{name}");
    }
    for name in [
        "notes.log",
        "20261122T053012Z-4242-s1-stdout.txt",
        "20261122T053012Z-4242-s1-other.log",
        "20261122X053012Z-4242-s1-stdout.log",
        "20261122T053012Z-42a-s1-stdout.log",
        "20261122T053012Z-4242-1-stdout.log",
        "20261122T053012Z-4242-s1-stdout-x.log",
        "20261122T053012Z-4242-s1-stdout-1-2.log",
        "x20261122T053012Z-4242-s1-stdout.log",
    ] {
        assert!(!is_log_name(name), "{name}");
    }
    // What create_log makes is recognised.
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = create_log(
        dir.path(),
        &open_folder(dir.path()),
        5,
        Stream::Combined,
        None,
    )
    .unwrap();
    assert!(is_log_name(path.file_name().unwrap().to_str().unwrap()));
}

fn make_log(dir: &Path, name: &str, bytes: usize, age_secs: u64) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, vec![b'x'; bytes]).unwrap();
    let file = File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
        .unwrap();
    path
}

/// On a real folder: only quietus's logs are touched, oldest first; a log held by its
/// writer's lock (another process's live log) and one of this process still being written
/// stay.
#[test]
fn sweeping_a_real_folder_keeps_other_files_and_live_logs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = make_log(d, "20200101T000000Z-1-s1-stdout.log", 10, 30 * 86_400);
    let foreign = make_log(d, "notes.log", 10, 30 * 86_400);
    let locked = make_log(d, "20200101T000000Z-2-s1-stdout.log", 10, 30 * 86_400);
    let holder = File::open(&locked).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let older_big = make_log(d, "20200102T000000Z-3-s1-stderr.log", 3000, 3600);
    let newer_big = make_log(d, "20200103T000000Z-3-s2-stderr.log", 3000, 60);
    // A live log of this process, the oldest of all.
    let mut spill = Spill::new(Some(LogDir::open(d)), 0, 77, Stream::Stdout);
    spill.push(&[b'y'; 100]);
    let live = spill.path().unwrap();
    // Its writer thread is done with the bytes before the mtime is set back.
    let started = Instant::now();
    while spill.written.lock().bytes < 100 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the writer wrote"
        );
        std::thread::yield_now();
    }
    File::options()
        .write(true)
        .open(&live)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(40 * 86_400))
        .unwrap();
    let budget = LogRetention::new(Some(Duration::from_secs(7 * 86_400)), Some(4000));
    let deleted = sweep(d, &open_folder(d), &budget, SystemTime::now()).unwrap();
    let left: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(deleted, 2, "the old one and the older big one: {left:?}");
    assert!(!old.exists() && !older_big.exists());
    for kept in [&foreign, &locked, &newer_big, &live] {
        assert!(kept.exists(), "{}", kept.display());
    }
    // Once the writer is done, its log is fair game.
    spill.finish();
    drop(holder);
    assert_eq!(
        sweep(d, &open_folder(d), &budget, SystemTime::now()).unwrap(),
        2
    );
    assert!(!live.exists() && !locked.exists() && foreign.exists());
}

/// A loop of runs, each leaving a 3 KiB log, never grows the folder past the budget (plus
/// the one log being written).
#[test]
fn a_loop_of_runs_stays_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let budget = LogRetention::new(LogRetention::default().max_age(), Some(10 * 1024));
    for run in 0..60 {
        let log_dir = resolve(Some(dir.path().into()), PathBuf::new, &budget)
            .unwrap()
            .unwrap();
        // The throttle is per process; a sweep as the spawn would make once it is due.
        sweep(
            dir.path(),
            &open_folder(dir.path()),
            &budget,
            SystemTime::now(),
        )
        .unwrap();
        let mut spill = Spill::new(Some(log_dir), 0, run, Stream::Stdout);
        spill.push(&[b'z'; 3 * 1024]);
        spill.finish();
        let total: u64 = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= 13 * 1024, "run {run}: {total} bytes");
    }
}

/// An unusable default folder is no error: the spill writes nothing and its log entry says
/// why; the same folder named by the caller is a spawn error of its own kind.
#[test]
fn an_unusable_default_folder_degrades_a_named_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, "").unwrap();
    let bad = file.join("logs");
    let budget = LogRetention::default();
    let degraded = resolve(None, || bad.clone(), &budget).unwrap().unwrap();
    assert!(degraded.folder.is_err());
    let mut spill = Spill::new(Some(degraded), 10, 1, Stream::Stdout);
    spill.push(b"short");
    assert!(spill.log().is_none(), "under the threshold: nothing to say");
    spill.push(&[b'x'; 100]);
    let log = spill.log().unwrap();
    assert!(log.incomplete);
    assert_eq!((log.bytes, log.written), (105, 0));
    let why = log.error.unwrap();
    assert!(
        matches!(&why, LogProblem::Folder(e) if e.path() == bad && *e.problem() == LogDirProblem::NotAFolder),
        "{why:?}"
    );
    let why = why.to_string();
    assert!(
        why.contains("not written") && why.contains("log folder"),
        "{why}"
    );
    assert!(log.path.starts_with(&bad));
    let err = resolve(Some(bad.clone()), PathBuf::new, &budget).unwrap_err();
    assert_ne!(err.kind(), io::ErrorKind::NotFound);
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<crate::error::SpawnError>())
        .unwrap();
    assert_eq!(inner.kind(), crate::error::SpawnErrorKind::LogDir);
}

/// The hash and the file write overlap: the log's writes run on a thread of their own.
#[test]
fn a_log_is_written_by_its_own_thread_and_complete_after_finish() {
    let dir = tempfile::tempdir().unwrap();
    let mut spill = Spill::new(Some(LogDir::open(dir.path())), 10, 4, Stream::Stdout);
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i % 249) as u8).collect();
    for chunk in data.chunks(65_536) {
        spill.push(chunk);
    }
    assert!(spill.writer.is_some(), "a writer thread");
    spill.finish();
    let log = spill.log().unwrap();
    assert_eq!(fs::read(&log.path).unwrap(), data);
    assert_eq!(
        (log.bytes, log.written),
        (data.len() as u64, data.len() as u64)
    );
    assert!(!LIVE.lock().contains(&log.path));
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
