//! The settings table: each setting a client can give a session, defined once (as ripgrep's
//! `crates/core/flags/defs.rs` defines each flag once): its name, type, range, default, the
//! command's flag and environment variable, its key in `serve`'s `process/start` and in `mcp`'s
//! `exec_command`, its doc line, and how it sets the library's [`MonitorConfig`].
//!
//! From this table come: the command's options for these settings (clap arguments,
//! [`cli_args`]) and their environment variables; `serve`'s parsing of them
//! ([`apply_json`]) and `mcp`'s ranges and schema entries ([`Def::json_schema`]); the error
//! messages of all three, which name the setting as the caller spelled it ([`Surface`]); the
//! `process/start` part of `quietus serve --schema`; and the rows of the option tables in
//! `docs/cli.md`, `docs/serve.md` and `docs/mcp.md` (a test fails when they differ).
//!
//! Adding a setting is one entry in [`SETTINGS`] whose `apply` calls the library's setter.

use std::time::Duration;

use clap::{Arg, ArgAction};
use quietus::config::{CompletionConfigBuilder, MonitorConfigBuilder};
use quietus::{ConfigError, KillLadder, MonitorConfig, Signal, error::Setting};
use serde_json::{Value as Json, json};

use crate::jsonrpc::protocol::{self, RpcError, whole_number};

pub(crate) mod parse;

use parse::{RESERVED_EXIT_CODES, human, parse_exit_code};

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
    /// failure, a program that cannot be run, a program not found). The command's alone.
    ExitCode,
}

/// A setting's value, read by a surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SettingValue {
    /// A [`Kind::Duration`].
    Duration(Duration),
    /// A [`Kind::DurationOrNone`].
    DurationOrNone(Option<Duration>),
    /// A [`Kind::Switch`].
    Switch(bool),
    /// A [`Kind::ExitCode`].
    ExitCode(u8),
}

impl SettingValue {
    /// The duration, if the value is one (`None`: a switch, or `none`).
    pub(crate) fn maybe(self) -> Option<Duration> {
        maybe(self)
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
    pub(crate) flag: Option<&'static str>,
    /// The command's short flag.
    pub(crate) short: Option<char>,
    /// The command's environment variable.
    pub(crate) env: Option<&'static str>,
    /// Its key in `serve`'s `process/start` params.
    pub(crate) serve: Option<&'static str>,
    /// Its key in `mcp`'s `exec_command` arguments, and the range the tool accepts when it
    /// is narrower than the library's (a model is kept to sensible values).
    pub(crate) mcp: Option<(&'static str, Option<(Duration, Duration)>)>,
    /// One line: what it does.
    pub(crate) doc: &'static str,
    /// More for the command's `--help` (examples), after the line.
    pub(crate) long_doc: &'static str,
    /// Sets it in the configuration being assembled.
    pub(crate) apply: fn(Draft, SettingValue) -> Draft,
}

/// A configuration being assembled from the settings: the library's builder, and the two
/// values an entry changes a part of (the ladder's first signal, which `grace` keeps; the
/// completion, whose linger `linger` sets), held apart because a builder is written, not
/// read. [`build`](Self::build) checks it whole.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draft {
    /// Everything else.
    pub(crate) config: MonitorConfigBuilder,
    /// The ladder's first signal.
    pub(crate) signal: Signal,
    /// How completion is recognised.
    pub(crate) completion: CompletionConfigBuilder,
}

impl std::default::Default for Draft {
    fn default() -> Self {
        Self::new(MonitorConfig::builder(), Signal::TERM)
    }
}

impl Draft {
    /// From `config`, whose ladder starts with `signal`.
    pub(crate) fn new(config: MonitorConfigBuilder, signal: Signal) -> Self {
        Self {
            config,
            signal,
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

    /// The configuration, every value checked by the library.
    pub(crate) fn build(self) -> Result<MonitorConfig, ConfigError> {
        self.config.completion(self.completion).build()
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

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
const DAY: u64 = 24 * 3600;

fn duration(value: SettingValue) -> Duration {
    match value {
        SettingValue::Duration(d) => d,
        SettingValue::DurationOrNone(d) => d.unwrap_or_default(),
        SettingValue::Switch(_) | SettingValue::ExitCode(_) => Duration::ZERO,
    }
}
fn maybe(value: SettingValue) -> Option<Duration> {
    match value {
        SettingValue::Duration(d) => Some(d),
        SettingValue::DurationOrNone(d) => d,
        SettingValue::Switch(_) | SettingValue::ExitCode(_) => None,
    }
}
fn on(value: SettingValue) -> bool {
    matches!(value, SettingValue::Switch(true))
}

/// Every setting, in the order the command's help shows them.
pub(crate) const SETTINGS: &[Def] = &[
    Def {
        name: "idle_timeout",
        setting: Some(Setting::IdleTimeout),
        kind: Kind::Duration,
        range: Some((ms(1), secs(7 * DAY))),
        default: Default::Value("5m"),
        flag: Some("idle-timeout"),
        short: Some('i'),
        env: Some("QUIETUS_IDLE_TIMEOUT"),
        serve: Some("idleTimeoutMs"),
        mcp: Some(("idle_timeout_ms", Some((secs(1), secs(DAY))))),
        doc: "End the program when every source (output, files, children, network) has been quiet this long.",
        long_doc: "Durations: 1500ms, 30s, 5m, 1h30m (a bare number is seconds).\nExample: -i 10m",
        apply: |d, v| d.with(|c| c.idle_timeout(duration(v))),
    },
    Def {
        name: "hard_timeout",
        setting: Some(Setting::HardTimeout),
        kind: Kind::DurationOrNone,
        range: Some((ms(1), secs(366 * DAY))),
        default: Default::Value("none"),
        flag: Some("hard-timeout"),
        short: Some('t'),
        env: Some("QUIETUS_HARD_TIMEOUT"),
        serve: Some("hardTimeoutMs"),
        mcp: Some(("hard_timeout_ms", Some((secs(1), secs(366 * DAY))))),
        doc: "End the program after this long even while it is active.",
        long_doc: "`none` turns off a hard timeout set in the environment.\nExample: -t 2h",
        apply: |d, v| d.with(|c| c.hard_timeout(maybe(v))),
    },
    Def {
        name: "input_wait_timeout",
        setting: Some(Setting::InputWaitTimeout),
        kind: Kind::DurationOrNone,
        range: Some((ms(100), secs(DAY))),
        default: Default::Value("none"),
        flag: Some("input-wait-timeout"),
        short: None,
        env: Some("QUIETUS_INPUT_WAIT_TIMEOUT"),
        serve: Some("inputWaitTimeoutMs"),
        mcp: None,
        doc: "End the program once its whole tree has waited on input this long, every source quiet.",
        long_doc: "Blocked reading its stdin or a terminal (a pager, an editor, a\n\
                   password prompt), its read count unchanged: the outcome is\n\
                   input_wait, exit status 124, after an input_wait event.\n\
                   Example: --input-wait-timeout 10s",
        apply: |d, v| d.with(|c| c.input_wait_timeout(maybe(v))),
    },
    Def {
        name: "input_wait_notice",
        setting: Some(Setting::InputWaitNotice),
        kind: Kind::DurationOrNone,
        range: Some((ms(100), secs(DAY))),
        default: Default::Value("none"),
        flag: Some("input-wait-notice"),
        short: None,
        env: Some("QUIETUS_INPUT_WAIT_NOTICE"),
        serve: Some("inputWaitNoticeMs"),
        mcp: None,
        doc: "Send an input_wait event once the whole tree has waited on input this long, and let it go on.",
        long_doc: "Once per episode (new input, or activity of any source, ends one), to\n\
                   the --events stream: a harness can answer the prompt or give up. With\n\
                   --input-wait-timeout too, the program is ended at that timeout.\n\
                   Example: --input-wait-notice 3s --events -",
        apply: |d, v| d.with(|c| c.input_wait_notice(maybe(v))),
    },
    Def {
        name: "grace",
        setting: Some(Setting::KillLadderGrace),
        kind: Kind::Duration,
        range: Some((Duration::ZERO, secs(3600))),
        default: Default::Value("5s"),
        flag: Some("grace"),
        short: Some('g'),
        env: Some("QUIETUS_GRACE"),
        serve: Some("gracePeriodMs"),
        mcp: Some(("grace_period_ms", Some((Duration::ZERO, secs(600))))),
        doc: "Time between the first signal and KILL, for the program to clean up.",
        long_doc: "0 sends KILL right after the first signal.\nExample: -g 30s",
        apply: |d, v| {
            let ladder = KillLadder::polite(d.signal, duration(v));
            d.with(|c| c.kill_ladder(ladder))
        },
    },
    Def {
        name: "check_interval",
        setting: Some(Setting::CheckInterval),
        kind: Kind::Duration,
        range: Some((ms(10), secs(3600))),
        default: Default::Words("idle timeout / 10, kept in 100ms..30s"),
        flag: Some("check-interval"),
        short: None,
        env: Some("QUIETUS_CHECK_INTERVAL"),
        serve: None,
        mcp: None,
        doc: "How often the descendants' CPU and network are sampled.",
        long_doc: "Also the stat-scan interval of watched folders when the OS is out of file watches.\n\
                   Example: --check-interval 2s",
        apply: |d, v| d.with(|c| c.check_interval(maybe(v))),
    },
    Def {
        name: "drain_cap",
        setting: Some(Setting::DrainCap),
        kind: Kind::Duration,
        range: Some((Duration::ZERO, secs(600))),
        default: Default::Value("2s"),
        flag: Some("drain-cap"),
        short: None,
        env: Some("QUIETUS_DRAIN_CAP"),
        serve: Some("drainCapMs"),
        mcp: None,
        doc: "After the program exits, how long at most to read output from pipes a leftover process still holds open.",
        long_doc: "A pipe nobody holds open any more is read to its end whatever the cap.\n\
                   Example: --drain-cap 10s",
        apply: |d, v| d.with(|c| c.drain_cap(duration(v))),
    },
    Def {
        name: "linger",
        setting: Some(Setting::CompletionLinger),
        kind: Kind::Duration,
        range: Some((Duration::ZERO, secs(3600))),
        default: Default::Value("5s"),
        flag: Some("linger"),
        short: None,
        env: Some("QUIETUS_LINGER"),
        serve: None,
        mcp: None,
        doc: "Once the work is done, how long the program may take to exit by itself.",
        long_doc: "Example: --linger 10s",
        apply: |mut d, v| {
            d.completion = d.completion.linger(duration(v));
            d
        },
    },
    Def {
        name: "keep_leftovers",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: they are ended"),
        flag: Some("keep-leftovers"),
        short: None,
        env: Some("QUIETUS_KEEP_LEFTOVERS"),
        serve: None,
        mcp: None,
        doc: "Leave the program's leftover process-group members running after it exits.",
        long_doc: "By default they are ended with the same ladder: a finished program leaves nothing.\n\
                   Example: --keep-leftovers",
        apply: |d, v| d.with(|c| c.keep_leftovers(on(v))),
    },
    Def {
        name: "observe",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: quietus ends what stalls"),
        flag: Some("observe"),
        short: None,
        env: Some("QUIETUS_OBSERVE"),
        serve: Some("observe"),
        mcp: Some(("observe", None)),
        doc: "Observe only: end nothing, say when and why quietus would have.",
        long_doc: "The idle timeout, the hard timeout, an input wait and completion's linger are\n\
                   recorded instead (a `quietus: would have ended …` line at the moment and at the end,\n\
                   an `observed` event, the report's `observed`); the program runs to its own end and\n\
                   quietus exits with its status. Its own exit and its leftovers are handled as always.\n\
                   Example: --observe -i 5m --events -",
        apply: |d, v| d.with(|c| c.observe(on(v))),
    },
    Def {
        name: "no_watch",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: file activity counts"),
        flag: Some("no-watch"),
        short: None,
        env: Some("QUIETUS_NO_WATCH"),
        serve: Some("noWatch"),
        mcp: None,
        doc: "File activity does not count (no folder is watched, whatever --watch says).",
        long_doc: "Example: --no-watch",
        apply: |d, v| d.with(|c| c.watch_files(!on(v))),
    },
    Def {
        name: "no_children",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: descendants' CPU counts"),
        flag: Some("no-children"),
        short: None,
        env: Some("QUIETUS_NO_CHILDREN"),
        serve: Some("noChildren"),
        mcp: None,
        doc: "CPU progress of the program's descendants does not count.",
        long_doc: "By default a busy grandchild (a compiler, a test run) keeps a silent program alive.\n\
                   Example: --no-children",
        apply: |d, v| d.with(|c| c.watch_children(!on(v))),
    },
    Def {
        name: "no_network",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: TCP bytes count"),
        flag: Some("no-network"),
        short: None,
        env: Some("QUIETUS_NO_NETWORK"),
        serve: Some("noNetwork"),
        mcp: None,
        doc: "Bytes moving on the program's TCP sockets do not count.",
        long_doc: "By default a silent download or a streamed answer (any process of the tree receiving\n\
                   or sending more than 1 KiB within 10s) keeps the program alive; an open connection\n\
                   that moves nothing does not. Linux socket diagnostics; elsewhere reported unavailable.\n\
                   Example: --no-network",
        apply: |d, v| d.with(|c| c.watch_network(!on(v))),
    },
    Def {
        name: "no_output",
        setting: None,
        kind: Kind::Switch,
        range: None,
        default: Default::Words("off: output counts"),
        flag: Some("no-output"),
        short: None,
        env: Some("QUIETUS_NO_OUTPUT"),
        serve: Some("noOutput"),
        mcp: None,
        doc: "Output does not count as activity (it still passes through).",
        long_doc: "With --no-watch --no-children --no-network too, -i is a plain timeout.\n\
                   Example: --no-output",
        apply: |d, v| d.with(|c| c.watch_output(!on(v))),
    },
    Def {
        name: "exit_code_stall",
        setting: None,
        kind: Kind::ExitCode,
        range: None,
        default: Default::Value("124"),
        flag: Some("exit-code-stall"),
        short: None,
        env: Some("QUIETUS_EXIT_CODE_STALL"),
        serve: None,
        mcp: None,
        doc: "quietus's exit status when it ended a stalled program (idle timeout).",
        long_doc: "For an engine that acts on exit codes alone (a Kubernetes podFailurePolicy, a\n\
                   CI retry rule): a stall retried, a hard timeout failed. docs/fleet.md.\n\
                   Example: --exit-code-stall 75",
        apply: |d, _| d,
    },
    Def {
        name: "exit_code_hard_timeout",
        setting: None,
        kind: Kind::ExitCode,
        range: None,
        default: Default::Value("124"),
        flag: Some("exit-code-hard-timeout"),
        short: None,
        env: Some("QUIETUS_EXIT_CODE_HARD_TIMEOUT"),
        serve: None,
        mcp: None,
        doc: "quietus's exit status when it ended the program at the hard timeout.",
        long_doc: "Example: --exit-code-hard-timeout 76",
        apply: |d, _| d,
    },
    Def {
        name: "exit_code_input_wait",
        setting: None,
        kind: Kind::ExitCode,
        range: None,
        default: Default::Value("124"),
        flag: Some("exit-code-input-wait"),
        short: None,
        env: Some("QUIETUS_EXIT_CODE_INPUT_WAIT"),
        serve: None,
        mcp: None,
        doc: "quietus's exit status when it ended the program at the input-wait timeout.",
        long_doc: "Example: --exit-code-input-wait 77",
        apply: |d, _| d,
    },
];

/// The setting named `name`.
pub(crate) fn by_name(name: &str) -> Option<&'static Def> {
    SETTINGS.iter().find(|d| d.name == name)
}

/// The setting the library calls `setting`.
pub(crate) fn by_setting(setting: Setting) -> Option<&'static Def> {
    SETTINGS.iter().find(|d| d.setting == Some(setting))
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

    /// The setting's key on `surface`: `--idle-timeout`, `idleTimeoutMs`, `idle_timeout_ms`.
    pub(crate) fn key(&self, surface: Surface) -> Option<String> {
        match surface {
            Surface::Command => self.flag.map(|f| format!("--{f}")),
            Surface::Serve => self.serve.map(str::to_owned),
            Surface::Mcp => self.mcp.map(|(k, _)| k.to_owned()),
        }
    }

    /// The range `mcp` accepts: its own where narrower, else the library's.
    pub(crate) fn mcp_range(&self) -> Option<(Duration, Duration)> {
        self.mcp.and_then(|(_, r)| r).or(self.range)
    }

    /// The setting's clap argument (its id is [`name`](Self::name)).
    fn arg(&self, order: usize) -> Option<Arg> {
        let flag = self.flag?;
        let help = match self.range_text(self.range) {
            Some(range) => format!("{} ({range}).", self.doc.trim_end_matches('.')),
            None => self.doc.to_owned(),
        };
        let mut facts = Vec::new();
        if let Some(range) = self.range_text(self.range) {
            let none = if self.kind == Kind::DurationOrNone {
                "; `none` turns it off"
            } else {
                ""
            };
            facts.push(format!("Accepts {range}{none}."));
        }
        if let Default::Words(words) = self.default {
            facts.push(format!("Default: {words}."));
        }
        let mut long_help = format!("{}\n\n", self.doc);
        if !facts.is_empty() {
            long_help.push_str(&facts.join(" "));
            long_help.push('\n');
        }
        long_help.push_str(self.long_doc);
        let mut arg = Arg::new(self.name)
            .long(flag)
            .help(help)
            .long_help(long_help)
            .display_order(order);
        if let Some(short) = self.short {
            arg = arg.short(short);
        }
        if let Some(env) = self.env {
            arg = arg.env(env);
        }
        arg = match self.kind {
            Kind::Duration => arg
                .value_name("D")
                .allow_hyphen_values(true)
                .value_parser(parse::duration_parser()),
            Kind::DurationOrNone => arg
                .value_name("D")
                .allow_hyphen_values(true)
                .value_parser(parse::duration_or_none_parser()),
            Kind::Switch => arg
                .action(ArgAction::SetTrue)
                .value_parser(parse::flag_parser()),
            Kind::ExitCode => arg
                .value_name("N")
                .value_parser(clap::builder::ValueParser::new(parse_exit_code)),
        };
        if let (Default::Value(value), false) = (self.default, self.kind == Kind::DurationOrNone) {
            arg = arg.default_value(value);
        }
        Some(arg)
    }

    /// The value clap read for this setting, if any (a switch: only when set).
    pub(crate) fn read_matches(&self, matches: &clap::ArgMatches) -> Option<SettingValue> {
        match self.kind {
            Kind::Duration => matches
                .get_one::<Duration>(self.name)
                .map(|d| SettingValue::Duration(*d)),
            Kind::DurationOrNone => matches
                .get_one::<Option<Duration>>(self.name)
                .map(|d| SettingValue::DurationOrNone(*d)),
            Kind::Switch => Some(SettingValue::Switch(matches.get_flag(self.name))),
            Kind::ExitCode => matches
                .get_one::<u8>(self.name)
                .map(|c| SettingValue::ExitCode(*c)),
        }
    }

    /// Reads the setting's JSON value on `surface` (`key` is how the caller spelled it).
    pub(crate) fn read_json(
        &self,
        key: &str,
        value: &Json,
        range: Option<(Duration, Duration)>,
    ) -> Result<SettingValue, RpcError> {
        let bad = |accepts: &str| {
            RpcError::param(
                key,
                format!(
                    "{} is not valid; it accepts {accepts}",
                    protocol::quote(value)
                ),
            )
        };
        let millis = |v: &Json| -> Result<Duration, RpcError> {
            let n = match range {
                Some((min, max)) => whole_number(key, v, ms_of(min), ms_of(max))?,
                None => whole_number(key, v, 0, u64::MAX)?,
            };
            Ok(Duration::from_millis(n))
        };
        match self.kind {
            Kind::Duration => millis(value).map(SettingValue::Duration),
            Kind::DurationOrNone if value.is_null() => Ok(SettingValue::DurationOrNone(None)),
            Kind::DurationOrNone => millis(value).map(|d| SettingValue::DurationOrNone(Some(d))),
            Kind::Switch => value
                .as_bool()
                .map(SettingValue::Switch)
                .ok_or_else(|| bad("true or false")),
            Kind::ExitCode => {
                let code = whole_number(key, value, 1, 255)?;
                u8::try_from(code)
                    .ok()
                    .filter(|c| !RESERVED_EXIT_CODES.contains(c))
                    .map(SettingValue::ExitCode)
                    .ok_or_else(|| bad("1 to 255 but 125, 126 and 127"))
            }
        }
    }

    /// The setting's JSON Schema on `surface` (integer milliseconds, or a boolean).
    pub(crate) fn json_schema(&self, surface: Surface) -> Json {
        let range = match surface {
            Surface::Mcp => self.mcp_range(),
            _ => self.range,
        };
        let mut schema = match self.kind {
            Kind::Duration => json!({"type": "integer"}),
            Kind::DurationOrNone => json!({"type": ["integer", "null"]}),
            Kind::Switch => json!({"type": "boolean"}),
            Kind::ExitCode => json!({"type": "integer", "minimum": 1, "maximum": 255,
                                     "not": {"enum": RESERVED_EXIT_CODES}}),
        };
        if let Some((min, max)) = range {
            schema["minimum"] = json!(ms_of(min));
            schema["maximum"] = json!(ms_of(max));
        }
        schema["description"] = json!(self.doc);
        schema
    }
}

/// A duration in whole milliseconds.
fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The command's arguments for every setting with a flag, shown first in `--help`.
pub(crate) fn cli_args() -> impl Iterator<Item = Arg> {
    SETTINGS.iter().enumerate().filter_map(|(i, d)| d.arg(i))
}

/// Every setting with a key on `surface`, read from the request's params and applied.
pub(crate) fn apply_json(
    mut config: Draft,
    params: &serde_json::Map<String, Json>,
    surface: Surface,
) -> Result<Draft, RpcError> {
    for def in SETTINGS {
        let Some(key) = def.key(surface) else {
            continue;
        };
        let Some(value) = params.get(&key) else {
            continue;
        };
        // The range in the caller's words (its key, milliseconds): mcp keeps a model to its
        // own, narrower one. null only where it means "none", as the schema says.
        let range = match surface {
            Surface::Mcp => def.mcp_range(),
            _ => def.range,
        };
        config = (def.apply)(config, def.read_json(&key, value, range)?);
    }
    Ok(config)
}

/// The keys of every setting on `surface`.
pub(crate) fn keys(surface: Surface) -> impl Iterator<Item = String> {
    SETTINGS.iter().filter_map(move |d| d.key(surface))
}

/// The `process/start` properties of the settings (for `serve --schema`).
pub(crate) fn serve_properties() -> serde_json::Map<String, Json> {
    SETTINGS
        .iter()
        .filter_map(|d| {
            let mut schema = d.json_schema(Surface::Serve);
            // The setting's name, for clients that name it in their own words (Python's
            // keyword arguments): an annotation JSON Schema validators ignore.
            schema["x-setting"] = json!(d.name);
            Some((d.serve?.to_owned(), schema))
        })
        .collect()
}

/// The key a [`quietus::ConfigError`] is reported under on `surface`: the setting's key there,
/// if the setting has one.
pub(crate) fn error_key(error: &quietus::ConfigError, surface: Surface) -> Option<String> {
    by_setting(error.setting()?)?.key(surface)
}

/// The hidden subcommand that prints [`table_json`]: `quietus __settings`.
pub(crate) const PRINT_SUBCOMMAND: &str = "__settings";

/// The table as JSON: one object per setting (`name`, `kind`, `range_ms`, `default`, `flag`,
/// `short`, `env`, `serve`, `mcp`, `mcp_range_ms`, `doc`), for clients' tests.
pub(crate) fn table_json() -> Json {
    let range =
        |r: Option<(Duration, Duration)>| r.map(|(min, max)| json!([ms_of(min), ms_of(max)]));
    let settings: Vec<Json> = SETTINGS
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "kind": match d.kind {
                    Kind::Duration => "duration",
                    Kind::DurationOrNone => "duration_or_none",
                    Kind::Switch => "switch",
                    Kind::ExitCode => "exit_code",
                },
                "range_ms": range(d.range),
                "default": match d.default {
                    Default::Value(v) => v,
                    Default::Words(w) => w,
                },
                "flag": d.key(Surface::Command),
                "short": d.short.map(|c| format!("-{c}")),
                "env": d.env,
                "serve": d.serve,
                "mcp": d.key(Surface::Mcp),
                "mcp_range_ms": range(d.mcp.and_then(|_| d.mcp_range())),
                "doc": d.doc,
            })
        })
        .collect();
    json!({"version": env!("CARGO_PKG_VERSION"), "settings": settings})
}

/// The markdown table of the settings with a key on `surface`, as the docs hold it.
#[cfg(test)]
pub(crate) fn docs_table(surface: Surface) -> String {
    let mut out =
        String::from("| setting | type | range | default | doc |\n|---|---|---|---|---|\n");
    for def in SETTINGS {
        let Some(key) = def.key(surface) else {
            continue;
        };
        let key = match (surface, def.short) {
            (Surface::Command, Some(short)) => format!("`-{short}, {key}`"),
            _ => format!("`{key}`"),
        };
        let kind = match (surface, def.kind) {
            (Surface::Command, Kind::Duration) => "D",
            (Surface::Command, Kind::DurationOrNone) => "D or `none`",
            (Surface::Command, Kind::Switch) => "flag",
            (_, Kind::ExitCode) => "integer",
            (_, Kind::Duration) => "integer (ms)",
            (_, Kind::DurationOrNone) => "integer (ms) or null",
            (_, Kind::Switch) => "boolean",
        };
        let range = match surface {
            Surface::Mcp => def.mcp_range(),
            _ => def.range,
        };
        let range = def.range_text(range).unwrap_or_default();
        let default = match def.default {
            Default::Value(v) => format!("`{v}`"),
            Default::Words(w) => w.to_owned(),
        };
        let env = match (surface, def.env) {
            (Surface::Command, Some(env)) => format!(" (`{env}`)"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "| {key}{env} | {kind} | {range} | {default} | {} |\n",
            def.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_the_librarys_and_every_range_is_the_one_it_checks() {
        let default = MonitorConfig::default();
        let applied = |value| {
            move |def: &Def| {
                (def.apply)(Draft::default(), value)
                    .build()
                    .expect("a value in range")
            }
        };
        for def in SETTINGS {
            if let (Default::Value(text), Kind::Duration) = (def.default, def.kind) {
                let value = parse::parse_duration(text).unwrap();
                let set = applied(SettingValue::Duration(value))(def);
                assert_eq!(set, default, "{}'s default", def.name);
            }
            if def.kind == Kind::Switch {
                let off = applied(SettingValue::Switch(false))(def);
                assert_eq!(off, default, "{} off is the default", def.name);
                let on = applied(SettingValue::Switch(true))(def);
                assert_ne!(on, default, "{} on changes something", def.name);
            }
            let Some((min, max)) = def.range else {
                continue;
            };
            let with = |d: Duration| {
                let value = match def.kind {
                    Kind::DurationOrNone => SettingValue::DurationOrNone(Some(d)),
                    _ => SettingValue::Duration(d),
                };
                (def.apply)(Draft::default(), value).build().map(drop)
            };
            assert_eq!(with(min), Ok(()), "{} accepts its minimum", def.name);
            assert_eq!(with(max), Ok(()), "{} accepts its maximum", def.name);
            let above = with(max + ms(1)).unwrap_err();
            assert_eq!(above.setting(), def.setting, "{}: {above}", def.name);
            if let Some(below) = min.checked_sub(ms(1)) {
                let below = with(below).unwrap_err();
                assert_eq!(below.setting(), def.setting, "{}: {below}", def.name);
            }
            if let Some((_, Some((mcp_min, mcp_max)))) = def.mcp {
                assert!(
                    min <= mcp_min && mcp_max <= max,
                    "{}: mcp's range is narrower",
                    def.name
                );
            }
        }
    }

    #[test]
    fn names_keys_and_settings_are_unique() {
        for surface in [Surface::Command, Surface::Serve, Surface::Mcp] {
            let mut keys: Vec<String> = keys(surface).collect();
            let count = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), count, "{surface:?}");
        }
        for (i, def) in SETTINGS.iter().enumerate() {
            assert!(SETTINGS[..i].iter().all(|d| d.name != def.name));
            if let Some(setting) = def.setting {
                assert!(SETTINGS[..i].iter().all(|d| d.setting != Some(setting)));
            }
            if let (Some(flag), Some(env)) = (def.flag, def.env) {
                assert_eq!(
                    env,
                    format!("QUIETUS_{}", flag.replace('-', "_").to_uppercase())
                );
                assert_eq!(
                    def.name,
                    flag.replace('-', "_"),
                    "the clap id is the flag's"
                );
            }
        }
    }

    #[test]
    fn json_values_are_read_with_the_callers_key_in_errors() {
        let def = by_name("idle_timeout").unwrap();
        let err = def
            .read_json("idle_timeout_ms", &json!(500), def.mcp_range())
            .unwrap_err();
        assert!(
            err.message.contains("idle_timeout_ms: 500 is out of range"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("a whole number from 1000 to 86400000"),
            "{}",
            err.message
        );
        let err = def
            .read_json("idleTimeoutMs", &json!("5m"), None)
            .unwrap_err();
        assert!(
            err.message
                .starts_with("invalid params: idleTimeoutMs: \"5m\""),
            "{}",
            err.message
        );
        let err = by_name("no_watch")
            .unwrap()
            .read_json("noWatch", &json!(1), None)
            .unwrap_err();
        assert!(
            err.message
                .contains("noWatch: 1 is not valid; it accepts true or false"),
            "{}",
            err.message
        );
        let hard = by_name("hard_timeout").unwrap();
        assert_eq!(
            hard.read_json("hardTimeoutMs", &Json::Null, hard.range)
                .unwrap(),
            SettingValue::DurationOrNone(None)
        );
    }

    /// The marker lines around a generated table in a doc.
    fn markers(surface: Surface) -> (String, String) {
        let name = match surface {
            Surface::Command => "command",
            Surface::Serve => "serve",
            Surface::Mcp => "mcp",
        };
        (
            format!(
                "<!-- settings:{name} (generated from crates/quietus-cli/src/settings.rs: \
                 QUIETUS_BLESS=1 cargo test -p quietus-cli settings rewrites it) -->"
            ),
            format!("<!-- /settings:{name} -->"),
        )
    }

    #[test]
    fn the_docs_tables_are_the_settings_table() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        for (file, surface) in [
            ("cli.md", Surface::Command),
            ("serve.md", Surface::Serve),
            ("mcp.md", Surface::Mcp),
        ] {
            let path = docs.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let (open, close) = markers(surface);
            let start = text
                .find(&open)
                .unwrap_or_else(|| panic!("{file} has no line {open}"));
            let end = text[start..]
                .find(&close)
                .map(|e| start + e)
                .unwrap_or_else(|| panic!("{file} has no line {close}"));
            let expected = format!("{open}\n{}{close}", docs_table(surface));
            if std::env::var_os("QUIETUS_BLESS").is_some() {
                let new = format!("{}{expected}{}", &text[..start], &text[end + close.len()..]);
                std::fs::write(&path, new).unwrap();
                continue;
            }
            assert_eq!(
                &text[start..end + close.len()],
                expected,
                "{file}'s settings table is not the settings table's: rerun with QUIETUS_BLESS=1"
            );
        }
    }
}
