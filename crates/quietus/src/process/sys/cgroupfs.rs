//! The cgroup v2 file system: whether one is mounted at a path, and what a busy cgroup's
//! removal answers (the cgroup's own files are read and written in `process::cgroup`).

#![allow(unused_imports)] // one header for every theme of `sys`

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::process::{Signal as RSignal, WaitIdOptions};

use crate::pid::Pid;

use super::*;

/// Whether a cgroup v2 file system is mounted at `path` (its `statfs` magic number,
/// `CGROUP2_SUPER_MAGIC`). Linux only.
pub(crate) fn is_cgroup2_mount(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
        // `f_type` is an i64 here, a u32 or an i32 on other targets.
        #[allow(clippy::useless_conversion)]
        rustix::fs::statfs(path).is_ok_and(|fs| i64::from(fs.f_type) == CGROUP2_SUPER_MAGIC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// Whether `error` says a cgroup still has members or children (`EBUSY` on `rmdir`).
pub(crate) fn is_busy(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
}
