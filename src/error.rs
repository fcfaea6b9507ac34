//! Why a spawn failed, by kind, as walkdir does it: an error type of its own with a
//! [`kind`](SpawnError::kind), carried inside the `io::Error` that
//! [`SessionBuilder::spawn`](crate::SessionBuilder::spawn) returns
//! (`err.get_ref()` and `downcast_ref::<SpawnError>()`), and `From<SpawnError> for io::Error`.

use std::fmt;
use std::io;

/// Which part of a spawn failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpawnErrorKind {
    /// The log folder the caller named ([`CaptureConfig::log_dir`](crate::CaptureConfig::log_dir))
    /// cannot be used. (An unusable *default* folder is not an error: the run goes on without a
    /// log, and [`MonitorResult::logs`](crate::MonitorResult::logs) says why.)
    LogDir,
}

/// A spawn failed before the program ran.
#[derive(Debug)]
pub struct SpawnError {
    kind: SpawnErrorKind,
    source: Box<dyn std::error::Error + Send + Sync>,
    /// The `io::ErrorKind` it becomes.
    io_kind: io::ErrorKind,
}

impl SpawnError {
    /// The log folder cannot be used. Its `io::ErrorKind` is `PermissionDenied` when the folder
    /// is refused for its rights (read-only, not writable, someone else's), else `Other`: never
    /// `NotFound`, the kind of "program not found".
    pub(crate) fn log_dir(e: io::Error) -> Self {
        let io_kind = match e.kind() {
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                io::ErrorKind::PermissionDenied
            }
            _ => io::ErrorKind::Other,
        };
        let source: Box<dyn std::error::Error + Send + Sync> = match e.into_inner() {
            Some(inner) => inner,
            None => Box::new(io::Error::other("the log folder cannot be used")),
        };
        Self {
            kind: SpawnErrorKind::LogDir,
            source,
            io_kind,
        }
    }

    /// Which part of the spawn failed.
    pub fn kind(&self) -> SpawnErrorKind {
        self.kind
    }

    /// The underlying error (for [`SpawnErrorKind::LogDir`]: a
    /// [`LogDirError`](crate::LogDirError)).
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.source.as_ref()
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

impl From<SpawnError> for io::Error {
    fn from(e: SpawnError) -> Self {
        io::Error::new(e.io_kind, e)
    }
}
