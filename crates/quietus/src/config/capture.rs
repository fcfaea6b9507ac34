//! What is kept of the child's output: [`CaptureConfig`] and the log folder's
//! [`LogRetention`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check_size;
use crate::error::{ConfigError, Setting};

/// What is kept of the child's output: bounded head/tail buffers, and a complete log once the
/// output is long. Made by [`CaptureConfig::builder`].
///
/// ```
/// use quietus::{CaptureConfig, MonitorConfig};
///
/// let config = MonitorConfig::builder()
///     .capture(
///         CaptureConfig::builder()
///             .cap_per_stream(64 * 1024) // keep 32 KiB of head and 32 KiB of tail
///             .log_dir("/tmp/agent-logs"),
///     )
///     .build()?;
/// assert_eq!(config.capture().cap_per_stream(), 64 * 1024);
/// # Ok::<(), quietus::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureConfig {
    pub(crate) cap_per_stream: usize,
    pub(crate) combined: bool,
    pub(crate) spill: bool,
    pub(crate) spill_threshold: u64,
    pub(crate) log_dir: Option<PathBuf>,
    pub(crate) retention: LogRetention,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            cap_per_stream: 1024 * 1024,
            combined: false,
            spill: true,
            spill_threshold: 4096,
            log_dir: None,
            retention: LogRetention::default(),
        }
    }
}

impl CaptureConfig {
    /// A builder, from the defaults.
    pub fn builder() -> CaptureConfigBuilder {
        CaptureConfigBuilder::default()
    }

    /// Bytes kept in memory per stream ([`CaptureConfigBuilder::cap_per_stream`]).
    pub fn cap_per_stream(&self) -> usize {
        self.cap_per_stream
    }

    /// Whether stdout and stderr share one pipe ([`CaptureConfigBuilder::combined`]).
    pub fn combined(&self) -> bool {
        self.combined
    }

    /// Whether a long stream is spilled to a log ([`CaptureConfigBuilder::spill`]).
    pub fn spill(&self) -> bool {
        self.spill
    }

    /// Bytes of a stream after which it is spilled
    /// ([`CaptureConfigBuilder::spill_threshold`]).
    pub fn spill_threshold(&self) -> u64 {
        self.spill_threshold
    }

    /// The log folder named, if any ([`CaptureConfigBuilder::log_dir`]).
    pub fn log_dir(&self) -> Option<&Path> {
        self.log_dir.as_deref()
    }

    /// How much of its logs the log folder keeps ([`CaptureConfigBuilder::retention`]).
    pub fn retention(&self) -> LogRetention {
        self.retention
    }

    /// Refuses a cap over 1 GiB.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        check_size(
            Setting::CaptureCapPerStream,
            self.cap_per_stream,
            0,
            1 << 30,
        )
    }
}

/// Builds a [`CaptureConfig`]; each setter says its default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[must_use]
pub struct CaptureConfigBuilder(pub(super) CaptureConfig);

impl From<CaptureConfig> for CaptureConfigBuilder {
    fn from(config: CaptureConfig) -> Self {
        Self(config)
    }
}

impl CaptureConfigBuilder {
    /// Bytes kept in memory per stream, half head, half tail (at most 1 GiB). Default 1 MiB.
    pub fn cap_per_stream(mut self, bytes: usize) -> Self {
        self.0.cap_per_stream = bytes;
        self
    }

    /// stdout and stderr through one pipe, in the order the child wrote them. Default off.
    pub fn combined(mut self, combined: bool) -> Self {
        self.0.combined = combined;
        self
    }

    /// Write the complete stream to a log file once it passes the
    /// [`spill_threshold`](Self::spill_threshold). Default on.
    pub fn spill(mut self, spill: bool) -> Self {
        self.0.spill = spill;
        self
    }

    /// Bytes of a stream after which it is spilled to a log. Default 4 KiB.
    pub fn spill_threshold(mut self, bytes: u64) -> Self {
        self.0.spill_threshold = bytes;
        self
    }

    /// Where logs go. Unset (default): the platform cache folder's `quietus/logs`
    /// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS; else the temp
    /// folder's `quietus-<uid>-logs`), refused unless it is the user's own; when that
    /// folder cannot be used, the run goes on without logs (a warning, and each
    /// [`LogFile`](crate::outcome::LogFile) says why), where a folder named here that cannot be used
    /// fails the spawn ([`SpawnErrorKind::LogDir`](crate::error::SpawnErrorKind::LogDir)).
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.0.log_dir = Some(dir.into());
        self
    }

    /// How much of quietus's own logs the log folder keeps. Default 7 days and 256 MiB.
    pub fn retention(mut self, retention: LogRetention) -> Self {
        self.0.retention = retention;
        self
    }

    /// The configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::SizeOutOfRange`] for a cap over 1 GiB.
    pub fn build(self) -> Result<CaptureConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}

/// How much of the log folder quietus keeps: its own logs (files named like
/// `20261122T053012Z-4242-s1-stdout.log`; nothing else in the folder is touched) older than
/// `max_age`, then the oldest while all of them together pass `max_total_bytes`, are deleted,
/// never a log still being written (by this process or another). Applied at a spawn that
/// spills, at most once a minute per folder and process unless this process has logged an
/// eighth of the size budget since, so it costs one folder listing now and then.
///
/// Default: 7 days and 256 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    max_age: Option<Duration>,
    max_total_bytes: Option<u64>,
}

impl Default for LogRetention {
    fn default() -> Self {
        Self::new(
            Some(Duration::from_secs(7 * 24 * 3600)),
            Some(256 * 1024 * 1024),
        )
    }
}

impl LogRetention {
    /// Logs older than `max_age` (by modification time) go, then the oldest while quietus's
    /// logs in the folder pass `max_total_bytes` in all; `None` is no limit of that kind.
    pub fn new(max_age: Option<Duration>, max_total_bytes: Option<u64>) -> Self {
        Self {
            max_age,
            max_total_bytes,
        }
    }

    /// Keeps every log (no age and no size limit).
    pub fn keep_all() -> Self {
        Self::new(None, None)
    }

    /// The age limit (`None`: none).
    pub fn max_age(&self) -> Option<Duration> {
        self.max_age
    }

    /// The size limit, in bytes (`None`: none).
    pub fn max_total_bytes(&self) -> Option<u64> {
        self.max_total_bytes
    }
}
