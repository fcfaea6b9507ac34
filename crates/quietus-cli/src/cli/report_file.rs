//! Where `--report` goes: a file opened (created or emptied) before the program starts, or
//! stderr; a FIFO waited on for its reader.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::report::Report;

/// Where the report goes, opened before the child starts (so a path that cannot be written
/// fails at once, with 125, and a stale report from an earlier run never lingers).
#[derive(Debug)]
pub(crate) enum ReportTarget {
    /// A file, created or emptied.
    File(File, PathBuf),
    /// `-`: quietus's stderr.
    Stderr,
}

impl ReportTarget {
    /// Opens `path` for the report (`-`: stderr).
    pub(crate) fn open(path: &Path) -> io::Result<ReportTarget> {
        if path.as_os_str() == "-" {
            return Ok(ReportTarget::Stderr);
        }
        let file = open_for_writing(path, "--report")?;
        Ok(ReportTarget::File(file, path.to_owned()))
    }

    /// Writes `report` as pretty JSON and a newline.
    pub(crate) fn write(self, report: &Report) -> io::Result<()> {
        let mut text = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
        text.push(b'\n');
        match self {
            ReportTarget::File(mut file, _) => {
                file.write_all(&text)?;
                file.flush()
            }
            ReportTarget::Stderr => {
                let mut stderr = io::stderr().lock();
                stderr.write_all(&text)?;
                stderr.flush()
            }
        }
    }

    /// The path, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            ReportTarget::File(_, path) => path.display().to_string(),
            ReportTarget::Stderr => "stderr".to_owned(),
        }
    }
}

/// Opens `path` for writing, created or emptied, for `option`. A FIFO nobody reads yet would
/// block the open in silence: it is opened without blocking first, and when no reader is
/// there, quietus says that it waits for one (before the program starts) and then waits,
/// until a reader comes or INT, TERM, HUP or QUIT arrives (an error carrying
/// [`WaitInterrupted`]).
pub(crate) fn open_for_writing(path: &Path, option: &str) -> io::Result<File> {
    match crate::sys::open_truncated(path, true) {
        Ok(file) => Ok(file),
        Err(e) if crate::sys::is_fifo_without_reader(&e) => {
            log::warn!(
                "{option} {} is a FIFO: waiting for a reader to open it before starting the \
                 program (INT, TERM, HUP or QUIT gives up)",
                path.display()
            );
            wait_for_reader(path)
        }
        Err(e) => Err(e),
    }
}

/// The signal that ended a wait for a FIFO's reader ([`open_for_writing`]): quietus dies
/// of it, the program not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitInterrupted(pub(crate) i32);

impl std::fmt::Display for WaitInterrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "signal {} while waiting for a reader", self.0)
    }
}

impl std::error::Error for WaitInterrupted {}

/// Opens the FIFO `path` once a reader has it open: looks again every 50 ms, between waits
/// for a signal that gives up.
fn wait_for_reader(path: &Path) -> io::Result<File> {
    let signals = crate::sys::Interrupting::new()?;
    loop {
        match crate::sys::open_truncated(path, true) {
            Err(e) if crate::sys::is_fifo_without_reader(&e) => {}
            other => return other,
        }
        if let Some(signal) = signals.wait(std::time::Duration::from_millis(50))? {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                WaitInterrupted(signal),
            ));
        }
    }
}
