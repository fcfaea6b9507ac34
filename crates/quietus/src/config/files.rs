//! Which folders' file activity counts, and which files in them: [`FileWatchConfig`], and
//! its globs compiled for the file tracker.

use std::path::PathBuf;
use std::time::Duration;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::check_range;
use crate::error::{ConfigError, Setting};

/// The longest arming delay.
const MAX_ARM_DELAY: Duration = Duration::from_secs(10);

/// Which folders' file activity counts, and which files in them. Made by
/// [`FileWatchConfig::builder`].
///
/// Default: the root `.agent` (relative to the child's working directory), every file except
/// `*.log` and editor artefacts (`*.swp`, `*~`, `.#*`).
///
/// Globs follow [`globset`](https://docs.rs/globset) syntax and are matched against both the
/// path relative to its root and the bare file name, so `*.log` excludes logs at any depth.
///
/// ```
/// use quietus::{FileWatchConfig, MonitorConfig};
///
/// let files = FileWatchConfig::builder()
///     .root("notes")        // .agent and notes
///     .include("*.md")      // only Markdown counts
///     .exclude("drafts/**");
/// let config = MonitorConfig::builder().files(files).build()?;
/// assert_eq!(config.files().include(), ["*.md"]);
/// # Ok::<(), quietus::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWatchConfig {
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) include: Vec<String>,
    pub(crate) exclude: Vec<String>,
    pub(crate) force_stat_scan: bool,
    pub(crate) own_files: Vec<PathBuf>,
    pub(crate) arm_delay: Duration,
}

impl Default for FileWatchConfig {
    fn default() -> Self {
        Self {
            roots: vec![PathBuf::from(".agent")],
            include: Vec::new(),
            exclude: ["*.log", "*.swp", "*~", ".#*"]
                .into_iter()
                .map(String::from)
                .collect(),
            force_stat_scan: false,
            own_files: Vec::new(),
            arm_delay: Duration::ZERO,
        }
    }
}

impl FileWatchConfig {
    /// A builder, from the defaults.
    pub fn builder() -> FileWatchConfigBuilder {
        FileWatchConfigBuilder::default()
    }

    /// Folders watched recursively; relative ones are taken from the child's working
    /// directory ([`FileWatchConfigBuilder::root`]).
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The include globs ([`FileWatchConfigBuilder::include`]).
    pub fn include(&self) -> &[String] {
        &self.include
    }

    /// The exclude globs ([`FileWatchConfigBuilder::exclude`]).
    pub fn exclude(&self) -> &[String] {
        &self.exclude
    }

    /// Whether the roots are stat-scanned ([`FileWatchConfigBuilder::force_stat_scan`]).
    pub fn force_stat_scan(&self) -> bool {
        self.force_stat_scan
    }

    /// The files the caller writes itself ([`FileWatchConfigBuilder::own_file`]).
    pub fn own_files(&self) -> &[PathBuf] {
        &self.own_files
    }

    /// The delay before the watches are armed ([`FileWatchConfigBuilder::arm_delay`]).
    pub fn arm_delay(&self) -> Duration {
        self.arm_delay
    }

    /// Checks that every glob parses and the arming delay is at most 10 s.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        self.check_globs()?;
        check_range(
            Setting::FilesArmDelay,
            self.arm_delay,
            Duration::ZERO,
            MAX_ARM_DELAY,
        )
    }

    /// Compiles the include and exclude globs (matched against the path relative to its root
    /// and against the file name; `*` crosses `/`).
    pub(crate) fn globs(&self) -> Result<FileGlobs, ConfigError> {
        let include = if self.include.is_empty() {
            None
        } else {
            Some(compile_globs(Setting::FilesInclude, &self.include)?)
        };
        Ok(FileGlobs {
            include,
            exclude: compile_globs(Setting::FilesExclude, &self.exclude)?,
        })
    }

    /// Checks that every include and exclude glob parses, without building the matchers (the
    /// costly part, which the file tracker does once, when it arms).
    pub(crate) fn check_globs(&self) -> Result<(), ConfigError> {
        for pattern in &self.include {
            parse_glob(Setting::FilesInclude, pattern)?;
        }
        for pattern in &self.exclude {
            parse_glob(Setting::FilesExclude, pattern)?;
        }
        Ok(())
    }
}

/// Builds a [`FileWatchConfig`]; each setter says its default.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[must_use]
pub struct FileWatchConfigBuilder(pub(super) FileWatchConfig);

impl From<FileWatchConfig> for FileWatchConfigBuilder {
    fn from(config: FileWatchConfig) -> Self {
        Self(config)
    }
}

impl FileWatchConfigBuilder {
    /// Adds a root (to the default `.agent`; [`roots`](Self::roots) replaces them).
    pub fn root(mut self, root: impl Into<PathBuf>) -> Self {
        self.0.roots.push(root.into());
        self
    }

    /// Replaces the roots (default: `.agent`).
    pub fn roots<P: Into<PathBuf>>(mut self, roots: impl IntoIterator<Item = P>) -> Self {
        self.0.roots = roots.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an include glob: when there is one, only files matching one of them count. None by
    /// default: every file counts.
    pub fn include(mut self, glob: impl Into<String>) -> Self {
        self.0.include.push(glob.into());
        self
    }

    /// Adds an exclude glob, to the defaults (`*.log`, `*.swp`, `*~`, `.#*`): files matching
    /// one never count.
    pub fn exclude(mut self, glob: impl Into<String>) -> Self {
        self.0.exclude.push(glob.into());
        self
    }

    /// Replaces the exclude globs (the default ones too).
    pub fn excludes<G: Into<String>>(mut self, globs: impl IntoIterator<Item = G>) -> Self {
        self.0.exclude = globs.into_iter().map(Into::into).collect();
        self
    }

    /// Arm the watches this long after the start instead of before the spawn (at most 10 s,
    /// and in force at most a tenth of the idle timeout). A program that ends sooner costs no
    /// watch at all: no inotify instance, no notify thread, and no kernel teardown of the
    /// watches when quietus exits (about 10 ms on Linux, one SRCU grace period). What the
    /// program did to the watched folders before the arming still counts: at arming, one look
    /// at the roots finds every file and folder created, written, renamed in or changed (mode,
    /// owner) since the start, by their change times. A removal is the one change that leaves
    /// nothing to look at: a removal before the arming that is the program's only activity is
    /// not counted, so its stall is declared at most this delay early. Default: 0 (armed
    /// before the spawn); the `quietus` command uses 50 ms.
    pub fn arm_delay(mut self, delay: Duration) -> Self {
        self.0.arm_delay = delay;
        self
    }

    /// Stat-scan the roots at the check interval instead of using OS notifications (the mode
    /// quietus falls back to when the OS runs out of watches). Default off.
    pub fn force_stat_scan(mut self, force: bool) -> Self {
        self.0.force_stat_scan = force;
        self
    }

    /// Adds a file the caller itself writes during the run (an event log, a report): changes
    /// to it never count as the child's activity, whatever its name, its folder and the globs.
    /// It is matched by identity, not by name: the path is resolved once at the start
    /// (symbolic links followed; a file that does not exist yet by its resolved folder), and
    /// an event counts as "own" when it concerns that resolved path, under whichever spelling
    /// of a watched root it arrives. A relative path is taken from the current directory of
    /// this process (where the caller opens it), not the child's.
    ///
    /// The session's own log files need not be listed: the library registers each one itself
    /// before creating it. The `quietus` command lists its `--events` and `--report` files.
    pub fn own_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.own_files.push(path.into());
        self
    }

    /// The configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidGlob`] for a glob that does not parse,
    /// [`ConfigError::OutOfRange`] for an arming delay over 10 s.
    pub fn build(self) -> Result<FileWatchConfig, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}

/// The compiled [`include`](FileWatchConfig::include) and
/// [`exclude`](FileWatchConfig::exclude) globs, as the file tracker matches them.
#[derive(Debug, Clone)]
pub(crate) struct FileGlobs {
    /// `None` when no include glob is given: every file counts.
    pub(crate) include: Option<GlobSet>,
    pub(crate) exclude: GlobSet,
}

fn parse_glob(setting: Setting, pattern: &str) -> Result<globset::Glob, ConfigError> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .map_err(|e| ConfigError::InvalidGlob {
            setting,
            pattern: pattern.to_owned(),
            reason: e.kind().to_string(),
        })
}

fn compile_globs(setting: Setting, patterns: &[String]) -> Result<GlobSet, ConfigError> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        set.add(parse_glob(setting, pattern)?);
    }
    set.build().map_err(|e| ConfigError::InvalidGlob {
        setting,
        pattern: patterns.join(" "),
        reason: e.to_string(),
    })
}
