//! What a row of the settings table is: a setting's type ([`Kind`]), its value as a surface
//! read it ([`SettingValue`]), its key on each surface or why it has none ([`Key`]), and the
//! configuration the rows are applied to ([`Draft`]).

use std::path::PathBuf;
use std::time::Duration;

use quietus::config::{CompletionConfigBuilder, FileWatchConfigBuilder, MonitorConfigBuilder};
use quietus::{ConfigError, Containment, KillLadder, MonitorConfig, Signal, error::Setting};

use super::parse::{SoloCap, human};
use crate::probe::ProbeCommand;

/// A setting's type, as every surface reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A duration: `D` on the command line (`1500ms`, `30s`, `5m`), integer milliseconds in
    /// JSON.
    Duration,
    /// A duration or none (`none` on the command line, `null` in JSON): off.
    DurationOrNone,
    /// On or off: a flag on the command line (its variable takes 1/0, true/false…), a boolean
    /// in JSON.
    Switch,
    /// An exit status quietus ends with: 1..=255 but not 125, 126 or 127 (quietus's own
    /// failure, a program that cannot be run, a program not found).
    ExitCode,
    /// A signal that ends a program: `TERM`, `SIGINT`, `15`.
    Signal,
    /// How the tree is held: `auto`, `cgroup` or `group`.
    Containment,
    /// Several values, each an [`Item`]: a repeatable option on the command line, an array
    /// of strings in JSON.
    List(Item),
}

/// What one value of a [`Kind::List`] setting is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// A folder (not empty); the variable holds several, separated by `:`.
    Folder,
    /// A file; the variable holds several, separated by `:`.
    File,
    /// A glob (not blank); the variable holds several, separated by `:`.
    Glob,
    /// A regular expression; the variable holds one (`|` joins several).
    Regex,
    /// `SOURCE=D`; a value (the variable's too) may hold several, separated by `:`.
    SoloCap,
    /// `NAME=COMMAND`; the variable holds one.
    Probe,
}

impl Item {
    /// Whether the environment variable holds several values, separated by `:` (as `PATH`).
    pub(crate) fn splits(self) -> bool {
        matches!(self, Item::Folder | Item::File | Item::Glob)
    }

    /// The value's name in the help: `PATH`, `GLOB`…
    pub(crate) fn value_name(self) -> &'static str {
        match self {
            Item::Folder | Item::File => "PATH",
            Item::Glob => "GLOB",
            Item::Regex => "REGEX",
            Item::SoloCap => "SOURCE=D",
            Item::Probe => "NAME=COMMAND",
        }
    }
}

/// A setting's value, read by a surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SettingValue {
    /// A [`Kind::Duration`].
    Duration(Duration),
    /// A [`Kind::DurationOrNone`].
    DurationOrNone(Option<Duration>),
    /// A [`Kind::Switch`].
    Switch(bool),
    /// A [`Kind::ExitCode`].
    ExitCode(u8),
    /// A [`Kind::Signal`].
    Signal(Signal),
    /// A [`Kind::Containment`].
    Containment(Containment),
    /// Folders or files ([`Item::Folder`], [`Item::File`]).
    Paths(Vec<PathBuf>),
    /// Globs or regular expressions ([`Item::Glob`], [`Item::Regex`]).
    Texts(Vec<String>),
    /// [`Item::SoloCap`]s.
    SoloCaps(Vec<SoloCap>),
    /// [`Item::Probe`]s.
    Probes(Vec<ProbeCommand>),
}

impl SettingValue {
    /// The duration, if the value is one (`None`: not a duration, or `none`).
    pub(crate) fn maybe(&self) -> Option<Duration> {
        match self {
            SettingValue::Duration(d) => Some(*d),
            SettingValue::DurationOrNone(d) => *d,
            _ => None,
        }
    }

    /// The duration, zero if the value is none.
    pub(crate) fn duration(&self) -> Duration {
        self.maybe().unwrap_or_default()
    }

    /// Whether the value is a switch turned on.
    pub(crate) fn on(&self) -> bool {
        matches!(self, SettingValue::Switch(true))
    }
}

/// The surfaces a setting is given on, for error messages that use the caller's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surface {
    /// The command line (or its environment variable).
    Command,
    /// `quietus serve`'s `process/start`.
    Serve,
    /// `quietus mcp`'s `exec_command`.
    Mcp,
}

/// A setting's key on one surface, or why the surface does not offer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// Its key there: `idle-timeout` (a flag, without `--`), `idleTimeoutMs`,
    /// `idle_timeout_ms`.
    On(&'static str),
    /// Not offered there, and why (what holds instead).
    Not(&'static str),
}

impl Key {
    /// The key, if the surface has one.
    pub(crate) fn on(self) -> Option<&'static str> {
        match self {
            Key::On(key) => Some(key),
            Key::Not(_) => None,
        }
    }
}

/// A setting's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Default {
    /// A value, as the command writes it: the command's clap default too.
    Value(&'static str),
    /// Not a value (off, or derived from another setting): the words the docs show.
    Words(&'static str),
}

/// One setting.
#[derive(Debug)]
pub(crate) struct Def {
    /// The setting's name, also its clap id: `idle_timeout`.
    pub(crate) name: &'static str,
    /// The library setting a [`quietus::ConfigError`] names it by, if any.
    pub(crate) setting: Option<Setting>,
    /// Its type.
    pub(crate) kind: Kind,
    /// Its accepted range (durations), as the library checks it.
    pub(crate) range: Option<(Duration, Duration)>,
    /// Its default, as the command writes it (`5m`, `none`), or in words (`off`, `idle / 10,
    /// kept in 100ms..30s`) when it is not a value.
    pub(crate) default: Default,
    /// The command's long flag (without `--`).
    pub(crate) flag: Key,
    /// The command's short flag.
    pub(crate) short: Option<char>,
    /// The command's environment variable.
    pub(crate) env: Option<&'static str>,
    /// Its key in `serve`'s `process/start` params.
    pub(crate) serve: Key,
    /// Its key in `mcp`'s `exec_command` arguments.
    pub(crate) mcp: Key,
    /// The range `mcp` accepts when it is narrower than the library's (a model is kept to
    /// sensible values).
    pub(crate) mcp_range: Option<(Duration, Duration)>,
    /// One line: what it does.
    pub(crate) doc: &'static str,
    /// More for the command's `--help` (examples), after the line.
    pub(crate) long_doc: &'static str,
    /// Sets it in the configuration being assembled.
    pub(crate) apply: fn(Draft, SettingValue) -> Draft,
}

impl Def {
    /// The range as the docs and messages write it: `1ms..7d` (an exit status's: `1..255, not
    /// 125..127`).
    pub(crate) fn range_text(&self, range: Option<(Duration, Duration)>) -> Option<String> {
        if self.kind == Kind::ExitCode {
            return Some("1..255, not 125..127".to_owned());
        }
        range.map(|(min, max)| format!("{}..{}", human(min), human(max)))
    }

    /// The setting's [`Key`] on `surface`.
    pub(crate) fn surface(&self, surface: Surface) -> Key {
        match surface {
            Surface::Command => self.flag,
            Surface::Serve => self.serve,
            Surface::Mcp => self.mcp,
        }
    }

    /// The setting's key on `surface`: `--idle-timeout`, `idleTimeoutMs`, `idle_timeout_ms`.
    pub(crate) fn key(&self, surface: Surface) -> Option<String> {
        let key = self.surface(surface).on()?;
        Some(match surface {
            Surface::Command => format!("--{key}"),
            Surface::Serve | Surface::Mcp => key.to_owned(),
        })
    }

    /// The range `mcp` accepts: its own where narrower, else the library's.
    pub(crate) fn mcp_range(&self) -> Option<(Duration, Duration)> {
        self.mcp_range.or(self.range)
    }

    /// The range on `surface`.
    pub(crate) fn range_on(&self, surface: Surface) -> Option<(Duration, Duration)> {
        match surface {
            Surface::Mcp => self.mcp_range(),
            Surface::Command | Surface::Serve => self.range,
        }
    }
}

/// A configuration being assembled from the settings: the library's builder, and the parts
/// an entry changes a piece of (the ladder's first signal and its grace; the folders watched;
/// the completion rules), held apart because a builder is written, not read.
/// [`build`](Self::build) checks it whole.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draft {
    /// Everything else.
    pub(crate) config: MonitorConfigBuilder,
    /// The ladder's first signal, if a setting chose it.
    pub(crate) signal: Option<Signal>,
    /// The grace before KILL, if a setting chose it.
    pub(crate) grace: Option<Duration>,
    /// The file watch, if a setting changed it.
    pub(crate) files: Option<FileWatchConfigBuilder>,
    /// How completion is recognised.
    pub(crate) completion: CompletionConfigBuilder,
}

impl std::default::Default for Draft {
    fn default() -> Self {
        Self::new(MonitorConfig::builder())
    }
}

impl Draft {
    /// From `config`.
    pub(crate) fn new(config: MonitorConfigBuilder) -> Self {
        Self {
            config,
            signal: None,
            grace: None,
            files: None,
            completion: CompletionConfigBuilder::default(),
        }
    }

    /// With `set` applied to the builder.
    pub(crate) fn with(
        mut self,
        set: impl FnOnce(MonitorConfigBuilder) -> MonitorConfigBuilder,
    ) -> Self {
        self.config = set(self.config);
        self
    }

    /// With `set` applied to the file watch (the library's default one if none was set).
    pub(crate) fn with_files(
        mut self,
        set: impl FnOnce(FileWatchConfigBuilder) -> FileWatchConfigBuilder,
    ) -> Self {
        self.files = Some(set(self.files.take().unwrap_or_default()));
        self
    }

    /// The builder, the parts held apart put back in.
    pub(crate) fn builder(self) -> MonitorConfigBuilder {
        let mut config = self.config.completion(self.completion);
        if self.signal.is_some() || self.grace.is_some() {
            let grace = self.grace.unwrap_or_else(default_grace);
            config = config.kill_ladder(KillLadder::polite(
                self.signal.unwrap_or(Signal::TERM),
                grace,
            ));
        }
        if let Some(files) = self.files {
            config = config.files(files);
        }
        config
    }

    /// The configuration, every value checked by the library.
    pub(crate) fn build(self) -> Result<MonitorConfig, ConfigError> {
        self.builder().build()
    }
}

/// The library's grace between the ladder's first signal and KILL.
pub(crate) fn default_grace() -> Duration {
    KillLadder::default()
        .steps()
        .next()
        .map_or(Duration::ZERO, |(_, grace)| grace)
}
