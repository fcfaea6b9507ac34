//! Files, pipes and descriptors: access checks, the size and state of a pipe, a descriptor's
//! readiness, the clock file times are stamped with.

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Signal as RSignal, WaitIdOptions};

use crate::pid::Pid;

use super::*;

/// `O_NOFOLLOW`, for [`OpenOptionsExt::custom_flags`](std::os::unix::fs::OpenOptionsExt):
/// the open fails when the last part of the path is a symbolic link.
pub(crate) const O_NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;

/// Opens folder `dir` once, for files to be made relative to it (`O_DIRECTORY`; with
/// `follow` false, `O_NOFOLLOW` too: a symbolic link at `dir` is refused, `ELOOP`).
pub(crate) fn open_folder(dir: &Path, follow: bool) -> io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = rustix::fs::open(dir, flags, rustix::fs::Mode::empty())?;
    Ok(std::fs::File::from(fd))
}

/// Whether this process may create and open files in the open folder `dir`
/// (`access(W_OK | X_OK)` with the real user id, as the folder's permission bits and ACLs
/// say), on the folder itself whatever its path leads to now.
pub(crate) fn check_folder_writable(dir: &std::fs::File) -> io::Result<()> {
    rustix::fs::accessat(
        dir,
        ".",
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        rustix::fs::AtFlags::empty(),
    )
    .map_err(io::Error::from)
}

/// Creates file `name` in the open folder `dir`: new (never an existing file, never through
/// a symbolic link), write-only, with `mode` (less the umask).
pub(crate) fn create_new_in(
    dir: &std::fs::File,
    name: &str,
    mode: u32,
) -> io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // (`mode_t` is 16 bits on macOS)
    #[allow(clippy::unnecessary_cast)]
    let mode = rustix::fs::Mode::from_raw_mode(mode as rustix::fs::RawMode);
    let fd = rustix::fs::openat(dir, name, flags, mode)?;
    Ok(std::fs::File::from(fd))
}

/// Opens file `name` in the open folder `dir` for reading, not through a symbolic link.
pub(crate) fn open_in(dir: &std::fs::File, name: &str) -> io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty())?;
    Ok(std::fs::File::from(fd))
}

/// Removes file `name` from the open folder `dir`.
pub(crate) fn remove_in(dir: &std::fs::File, name: &str) -> io::Result<()> {
    rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty()).map_err(io::Error::from)
}

/// The names in the open folder `dir` that are plain files (not followed), with their
/// modification time and size.
pub(crate) fn files_in(
    dir: &std::fs::File,
) -> io::Result<Vec<(String, std::time::SystemTime, u64)>> {
    let mut found = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        let Ok(stat) = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
            continue;
        }
        let modified = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(stat.st_mtime).unwrap_or(0),
                u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
            );
        found.push((
            name.to_owned(),
            modified,
            u64::try_from(stat.st_size).unwrap_or(0),
        ));
    }
    Ok(found)
}

/// The filesystem type (`statfs`'s `f_type`, the kernel's magic number) of the filesystem
/// `path` is on.
pub(crate) fn filesystem_kind(path: &Path) -> Option<u64> {
    let stat = rustix::fs::statfs(path).ok()?;
    #[allow(clippy::cast_sign_loss, clippy::unnecessary_cast)] // a magic number, not a size
    Some(stat.f_type as u64)
}

/// Whether the filesystem of device `device` (a `st_dev`) is a `devtmpfs` (`/dev`), by
/// `/proc/self/mountinfo` (its `f_type` is tmpfs's).
#[allow(clippy::unnecessary_cast)] // `dev_t` is u64 on Linux, i32 on macOS
pub(crate) fn is_devtmpfs(device: u64) -> bool {
    let device = device as rustix::fs::Dev;
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let wanted = format!(
        "{}:{}",
        rustix::fs::major(device),
        rustix::fs::minor(device)
    );
    mounts.lines().any(|line| {
        let mut fields = line.split(' ');
        let same = fields.nth(2) == Some(wanted.as_str());
        same && line
            .split(" - ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with("devtmpfs "))
    })
}

/// Whether this process may write to file `path` (`access(W_OK)` with the real user id).
pub(crate) fn check_writable(path: &Path) -> io::Result<()> {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).map_err(io::Error::from)
}

/// Whether this process may run file `path` (`access(X_OK)`, a regular file).
pub(crate) fn check_executable(path: &Path) -> io::Result<()> {
    if !path.is_file() {
        return Err(io::ErrorKind::NotFound.into());
    }
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK).map_err(io::Error::from)
}

/// Waits until `fd` is readable (or at its end), at most `timeout`; whether it is.
pub(crate) fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let left = rustix::event::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&left)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Whether a raw OS error code says a system-wide or per-process limit was hit while adding a
/// watch: `ENOSPC` (inotify's watch limit), `EMFILE` or `ENFILE` (open files).
pub(crate) fn is_watch_limit_error(code: i32) -> bool {
    [
        rustix::io::Errno::NOSPC,
        rustix::io::Errno::MFILE,
        rustix::io::Errno::NFILE,
    ]
    .iter()
    .any(|errno| errno.raw_os_error() == code)
}

/// How many bytes sit unread in the pipe (or socket) `fd` reads (`FIONREAD`).
pub(crate) fn unread_bytes(fd: impl AsFd) -> io::Result<u64> {
    rustix::io::ioctl_fionread(fd).map_err(io::Error::from)
}

/// The effective user id of this process.
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Size quietus asks for the child's output pipes.
pub(crate) const PIPE_SIZE: usize = 1024 * 1024;

/// Grows a pipe to [`PIPE_SIZE`] where the platform allows it (Linux); failure is harmless.
pub(crate) fn grow_pipe(fd: std::os::fd::BorrowedFd<'_>) {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::pipe::fcntl_setpipe_size(fd, PIPE_SIZE) {
        log::debug!("cannot grow an output pipe to {PIPE_SIZE} bytes: {e}");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = fd;
}

/// Whether no process holds the write end of the pipe `fd` reads any more: once its unread
/// bytes are read, the reader sees end-of-file (`POLLHUP` on the read end).
pub(crate) fn pipe_hung_up(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
        && fds[0].revents().contains(rustix::event::PollFlags::HUP)
}

/// The (device, inode) of the pipe `fd` is an end of.
pub(crate) fn pipe_id(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|st| file_id(&st))
}

/// (device, inode) of a `stat`.
#[allow(clippy::unnecessary_cast)] // u64 on Linux; other widths elsewhere
pub(super) fn file_id(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// A pipe whose two ends are close-on-exec and non-blocking: one call on Linux (`pipe2`),
/// `pipe` then `fcntl` on each end elsewhere (macOS has no `pipe2`; no other thread of the
/// library forks between the two calls without also setting its own descriptors).
pub(crate) fn pipe_cloexec_nonblock() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        use rustix::pipe::PipeFlags;
        Ok(rustix::pipe::pipe_with(
            PipeFlags::CLOEXEC | PipeFlags::NONBLOCK,
        )?)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let (read, write) = rustix::pipe::pipe()?;
        for end in [&read, &write] {
            set_cloexec(end.as_fd())?;
            let flags = rustix::fs::fcntl_getfl(end)?;
            rustix::fs::fcntl_setfl(end, flags | rustix::fs::OFlags::NONBLOCK)?;
        }
        Ok((read, write))
    }
}

/// Marks `fd` close-on-exec, where the platform has no flag to ask for it when the descriptor
/// is made (macOS's `socketpair` and `posix_openpt`).
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_cloexec(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    let flags = rustix::io::fcntl_getfd(fd)?;
    rustix::io::fcntl_setfd(fd, flags | rustix::io::FdFlags::CLOEXEC)?;
    Ok(())
}
