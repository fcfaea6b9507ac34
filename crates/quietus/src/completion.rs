//! Knowing when the work is done: [`CompletionConfig`] (output patterns, files, a line
//! callback, the linger), and the compiled matchers the readers and the monitor use.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::bytes::RegexSet;

use crate::error::{ConfigError, Setting};

/// A caller's test of one output line for completion (see [`CompletionConfigBuilder::on_line`](crate::config::CompletionConfigBuilder::on_line)).
#[derive(Clone)]
pub(crate) struct LineCallback(pub(crate) Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl fmt::Debug for LineCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LineCallback(..)")
    }
}

impl PartialEq for LineCallback {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How to recognise that the child's work is done, even though it does not exit. Made by
/// [`CompletionConfig::builder`].
///
/// Completion is seen at the first of: an output line (stdout, stderr, the combined stream or
/// the terminal; lines end at `\n` or `\r` and are matched whole, across read boundaries)
/// matching one of the [`output`](CompletionConfigBuilder::output) regular expressions or
/// accepted by the [`on_line`](CompletionConfigBuilder::on_line) callback; or one of the
/// [`files`](CompletionConfigBuilder::file) appearing or changing. The child then has
/// [`linger`](CompletionConfigBuilder::linger) to exit by itself; if it does not, it is ended
/// with the kill ladder and the outcome is [`Outcome::Completed`] (exit code 0). A child that
/// exits by itself keeps its own exit code, and [`MonitorResult::completion`] still says what
/// was seen.
///
/// ```
/// use std::time::Duration;
/// use quietus::{CompletionConfig, MonitorConfig};
///
/// let config = MonitorConfig::builder()
///     .completion(
///         CompletionConfig::builder()
///             .output(r#"^\{"type":"result""#) // the agent's final JSON line
///             .file(".agent/status.json")        // or its status file
///             .linger(Duration::from_secs(3)),
///     )
///     .build()?;
/// assert_eq!(config.completion().linger(), Duration::from_secs(3));
/// # Ok::<(), quietus::ConfigError>(())
/// ```
///
/// [`Outcome::Completed`]: crate::Outcome::Completed
/// [`MonitorResult::completion`]: crate::MonitorResult::completion
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionConfig {
    pub(crate) output: Vec<String>,
    pub(crate) files: Vec<PathBuf>,
    /// Called with every output line: `true` means the work is done.
    pub(crate) on_line: Option<LineCallback>,
    pub(crate) linger: Duration,
}

impl Default for CompletionConfig {
    fn default() -> Self {
        Self {
            output: Vec::new(),
            files: Vec::new(),
            on_line: None,
            linger: Duration::from_secs(5),
        }
    }
}

/// Builds a [`CompletionConfig`]; each setter says its default.
#[derive(Debug, Clone, PartialEq, Default)]
#[must_use]
pub struct CompletionConfigBuilder(pub(crate) CompletionConfig);

impl From<CompletionConfig> for CompletionConfigBuilder {
    fn from(config: CompletionConfig) -> Self {
        Self(config)
    }
}

impl CompletionConfigBuilder {
    /// Adds an output pattern: a regular expression ([`regex`](https://docs.rs/regex) syntax)
    /// matched against every output line, without its line end, as bytes (Unicode-aware:
    /// bytes that are not UTF-8 match no character, so a line need not be valid UTF-8 to match
    /// elsewhere). None by default.
    pub fn output(mut self, regex: impl Into<String>) -> Self {
        self.0.output.push(regex.into());
        self
    }

    /// Adds a file whose appearance, or change (size, modification time, identity) from what
    /// it was at the start, means the work is done. A relative path is taken from the child's
    /// working directory. Looked at every check interval, at most every second. None by
    /// default.
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.files.push(path.into());
        self
    }

    /// Sets the line callback, called with every output line: `true` means the work is done.
    /// None by default.
    pub fn on_line(mut self, f: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.0.on_line = Some(LineCallback(Arc::new(f)));
        self
    }

    /// How long the child may take to exit by itself once completion is seen (at most an
    /// hour). Default 5 s.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.0.linger = linger;
        self
    }

    /// The configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidPattern`] for a pattern that does not compile or an empty path,
    /// [`ConfigError::OutOfRange`] for a linger over an hour.
    pub fn build(self) -> Result<CompletionConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}

impl CompletionConfig {
    /// A builder, from the defaults (nothing is completion).
    pub fn builder() -> CompletionConfigBuilder {
        CompletionConfigBuilder::default()
    }

    /// The output patterns ([`CompletionConfigBuilder::output`]).
    pub fn output(&self) -> &[String] {
        &self.output
    }

    /// The completion files ([`CompletionConfigBuilder::file`]).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The linger ([`CompletionConfigBuilder::linger`]).
    pub fn linger(&self) -> Duration {
        self.linger
    }

    /// Whether output lines need to be looked at.
    pub(crate) fn watches_lines(&self) -> bool {
        !self.output.is_empty() || self.on_line.is_some()
    }

    /// Compiles the output patterns (`None` when there is none).
    pub(crate) fn patterns(&self) -> Result<Option<RegexSet>, ConfigError> {
        if self.output.is_empty() {
            return Ok(None);
        }
        for pattern in &self.output {
            regex::bytes::Regex::new(pattern).map_err(|e| ConfigError::InvalidPattern {
                setting: Setting::CompletionOutput,
                pattern: pattern.clone(),
                reason: first_line(&e.to_string()),
            })?;
        }
        RegexSet::new(&self.output)
            .map(Some)
            .map_err(|e| ConfigError::InvalidPattern {
                setting: Setting::CompletionOutput,
                pattern: self.output.join(" "),
                reason: first_line(&e.to_string()),
            })
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.patterns()?;
        if self.files.iter().any(|p| p.as_os_str().is_empty()) {
            return Err(ConfigError::InvalidPattern {
                setting: Setting::CompletionFiles,
                pattern: String::new(),
                reason: "an empty path".into(),
            });
        }
        let max = Duration::from_secs(3600);
        if self.linger > max {
            return Err(ConfigError::OutOfRange {
                setting: Setting::CompletionLinger,
                value: self.linger,
                min: Duration::ZERO,
                max,
            });
        }
        Ok(())
    }
}

/// The regex crate's messages span lines (a caret under the pattern); the last line says
/// what is wrong.
fn first_line(message: &str) -> String {
    message
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(message)
        .trim()
        .trim_start_matches("error: ")
        .to_owned()
}

/// What a completion file was at one look: absent, or its identity, size and modification
/// time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileState {
    Absent,
    Present {
        dev: u64,
        ino: u64,
        len: u64,
        mtime: (i64, i64),
    },
}

impl FileState {
    pub(crate) fn of(path: &Path) -> FileState {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) => FileState::Present {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                mtime: (m.mtime(), m.mtime_nsec()),
            },
            Err(_) => FileState::Absent,
        }
    }
}

/// The completion files, with what each was at the start; tells which one changed.
#[derive(Debug)]
pub(crate) struct FileWatch {
    files: Vec<(PathBuf, FileState)>,
}

impl FileWatch {
    /// Looks at every file once (relative ones from `base`, the child's working directory).
    pub(crate) fn start(files: &[PathBuf], base: &Path) -> Self {
        Self {
            files: files
                .iter()
                .map(|p| {
                    let path = base.join(p);
                    let state = FileState::of(&path);
                    (path, state)
                })
                .collect(),
        }
    }

    /// The first file that appeared or changed since the start.
    pub(crate) fn changed(&self) -> Option<&Path> {
        self.files
            .iter()
            .find(|(path, before)| FileState::of(path) != *before)
            .map(|(path, _)| path.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pattern_names_the_field_and_pattern() {
        let err = CompletionConfig::builder()
            .output("result(")
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("completion.output"), "{err}");
        assert!(err.contains("result("), "{err}");
        assert!(err.contains("unclosed"), "{err}");
    }

    #[test]
    fn file_watch_sees_appearance_and_change_but_not_the_old_state() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.json"), "{}").unwrap();
        let watch = FileWatch::start(
            &[PathBuf::from("status.json"), PathBuf::from("old.json")],
            dir.path(),
        );
        assert_eq!(watch.changed(), None, "a file already there does not count");
        std::fs::write(dir.path().join("status.json"), "{\"done\":true}").unwrap();
        assert_eq!(
            watch.changed(),
            Some(dir.path().join("status.json").as_path())
        );
        let watch = FileWatch::start(&[PathBuf::from("old.json")], dir.path());
        std::fs::write(dir.path().join("old.json"), "{\"done\":true}").unwrap();
        assert_eq!(watch.changed(), Some(dir.path().join("old.json").as_path()));
    }
}
