//! The command line: options, their environment variables, and the [`MonitorConfig`] they make.
//!
//! Every option can also come from `QUIETUS_<OPTION>` (the long name in capitals, `-` as
//! `_`); the command line wins. Flags take `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`.
//! The repeatable `--watch` and `--exclude` take several values from their variable, separated
//! by `:` as in `PATH`. `-q` and `-v` take a count (`QUIETUS_VERBOSE=2` is `-vv`).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use super::terminal::PtySize;
use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser};

use crate::settings::{Draft, SettingValue, Surface};
use quietus::config::CompletionConfigBuilder;
use quietus::{
    ActivitySource, CaptureConfig, ChildWatchConfig, CompletionConfig, ConfigError, Containment,
    FileWatchConfig, KillLadder, MonitorConfig, Signal, error::Setting,
};

use quietus::outcome::HumanDuration;

/// How long after the start the command arms its file watches
/// ([`FileWatchConfig::arm_delay`]).
pub(crate) const COMMAND_ARM_DELAY: Duration = Duration::from_millis(50);

/// The separator of several values in one environment variable (`--watch`, `--exclude`).
pub(crate) const ENV_LIST_SEPARATOR: char = ':';

const ABOUT: &str = "Run PROGRAM and end its whole process tree only when it has truly stalled.";

const LONG_ABOUT: &str = "\
Run PROGRAM and end its whole process tree only when it has truly stalled: no output on stdout
or stderr, no file activity under the watched folders (default .agent), no CPU progress in its
descendants, and no bytes moving on its TCP sockets, all for longer than the idle timeout. A hard
timeout ends it even while active. Then quietus sends the first signal of the ladder (TERM) to
the whole tree (a cgroup of its own where one can be made, else the program's process group and
the descendants seen leaving it: --containment), waits the grace period, and sends KILL to what
is left.

The program's stdout and stderr pass through unchanged, byte for byte; its stdin is inherited.
When quietus ends the program it prints one line on stderr saying why.";

const AFTER_HELP: &str = "\
Every option can also be set with QUIETUS_<OPTION>, e.g. QUIETUS_IDLE_TIMEOUT=10m; the
command line wins. Exit status: the program's own; 124 after an idle or hard timeout; 128+N when
it died of signal N; 125 for quietus's own failures; 126 not executable; 127 not found; 1
when the program succeeded but writing its output through failed.
`quietus --help` says more; `quietus serve --help`: the process service (JSON-RPC);
`quietus mcp --help`: the MCP server that gives an agent supervised shell commands.

Example:
  quietus -i 10m -t 2h -- codex exec \"fix the failing tests\"";

const AFTER_LONG_HELP: &str = "\
ENVIRONMENT
  Every option can also be set with an environment variable QUIETUS_<OPTION>: the long
  name in capitals with '-' as '_'. The command line wins over the environment.
    QUIETUS_IDLE_TIMEOUT=10m      like --idle-timeout 10m
    QUIETUS_NO_CHILDREN=1         flags take 1/0, true/false, yes/no, on/off
    QUIETUS_WATCH=.agent:notes    repeatable options: values separated by ':' (as in PATH)
    QUIETUS_VERBOSE=2             like -vv (QUIETUS_QUIET=1 like -q)
  An empty variable counts as unset. RUST_LOG (env_logger syntax), when set, chooses which of
  quietus's own log messages are shown, whatever -q and -v say.

EXIT STATUS
  N       the program's own exit code, when it exited by itself
  124     quietus ended it: idle, hard or input-wait timeout (as GNU timeout)
  0       the work was done (--done-when-output, --done-when-file) and quietus ended the
          program after the linger
  128+N   it died of signal N that quietus did not send
  125     quietus's own failure: an invalid option (the message names it and what it
          accepts), a report that cannot be written, a part of its own that cannot be set up
          at the start (the log folder, the terminal, a thread…), termination that could not
          be confirmed
  126     PROGRAM exists but cannot be executed
  127     PROGRAM is not found
  1       the program exited 0, but writing its output through failed (a full disk: a write
          error on quietus's stdout or stderr; a broken pipe is passed on to the program
          instead); no other status is replaced
  When quietus itself receives HUP, INT, QUIT, TERM, USR1, USR2, ALRM, STKFLT, XCPU,
  VTALRM, PROF, IO or PWR, it passes that signal on to the program's whole tree (then KILL
  after the grace; a second INT kills at once). It then exits as the program did: with its exit
  code, or, when the program died of a signal, by the signal quietus received, so that a
  shell loop stops on Ctrl-C (as process 1, where that is not possible, it exits with 128+N).
  A signal quietus was started with ignored stays ignored and is not passed on (a script's
  background job has INT and QUIT ignored). XFSZ and PIPE are ignored; the fault signals (ILL,
  TRAP, ABRT, BUS, FPE, SEGV, SYS) are left alone, so a real fault is reported as usual;
  TSTP, TTIN and TTOU stop quietus until CONT.

THE PROCESS SERVICE
  `quietus serve` runs supervised processes for a client over stdio: JSON-RPC 2.0, one JSON
  object per line (`quietus serve --help`; the protocol is in docs/serve.md). To run a program
  named serve, write `quietus -- serve`.

THE MCP SERVER
  `quietus mcp` is a Model Context Protocol server on stdio: it gives an agent the tools
  exec_command, write_stdin, exec_control and list_exec_sessions, each shell command supervised
  as above (`quietus mcp --help`; docs/mcp.md). To run a program named mcp, write
  `quietus -- mcp`.

CONTAINERS
  As the container's first process (pid 1) quietus forwards signals and reaps the orphaned
  processes that the kernel hands to it. It does the same when it is a child subreaper.

EXAMPLES
  An agent step that is ended after 10 minutes without output, file activity in .agent, busy
  descendants or network traffic, and after 2 hours at most:
    quietus -i 10m -t 2h -- codex exec \"continue the plan in .agent/PLAN.md\"
  Watch two folders, ignore a cache, write a JSON report:
    quietus -w .agent -w notes --exclude 'cache/**' --report run.json -- claude -p \"go on\"
  Only output counts (a plain silence timeout):
    quietus --no-watch --no-children --no-network -i 30s -- ./flaky-test.sh";

/// The command line as clap sees it.
#[derive(Debug, Parser)]
#[command(
    name = "quietus",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    after_long_help = AFTER_LONG_HELP,
    override_usage = "quietus [OPTIONS] -- PROGRAM [ARGS]...",
    // The settings table's options come first (their display order is their place there).
    next_display_order = 100
)]
pub(crate) struct Cli {
    /// The first signal of the ladder, sent to the program's whole tree.
    ///
    /// A name with or without SIG, or a number: TERM, INT, HUP, 15, SIGUSR1.
    /// KILL skips the ladder: KILL at once.
    /// Refused: STOP, TSTP, TTIN, TTOU, CONT, CHLD, WINCH, URG (they end nothing).
    /// Example: -s INT
    #[arg(
        short,
        long,
        value_name = "SIG",
        env = "QUIETUS_SIGNAL",
        default_value = "TERM",
        value_parser = text(parse_signal),
        verbatim_doc_comment
    )]
    pub(crate) signal: Signal,

    /// A folder whose file activity counts; repeatable; replaces the default .agent.
    ///
    /// Watched recursively. Relative paths start from the current directory. A folder that
    /// does not exist yet is picked up when it is created. Creating, changing, renaming or
    /// removing a file counts; reading never does.
    /// Example: -w .agent -w notes
    #[arg(
        short,
        long,
        value_name = "PATH",
        env = "QUIETUS_WATCH",
        action = ArgAction::Append,
        value_parser = path(parse_watch),
        verbatim_doc_comment
    )]
    pub(crate) watch: Vec<PathBuf>,

    /// Files under the watched folders whose activity does not count; repeatable.
    ///
    /// Added to the defaults: *.log, *.swp, *~, .#*. A glob matches the path under its
    /// folder and the bare file name.
    /// Example: --exclude 'cache/**' --exclude '*.tmp'
    #[arg(
        long,
        value_name = "GLOB",
        env = "QUIETUS_EXCLUDE",
        action = ArgAction::Append,
        value_parser = text(parse_glob),
        verbatim_doc_comment
    )]
    pub(crate) exclude: Vec<String>,

    /// Run the program so that it cannot wait for an answer nobody gives.
    ///
    /// Its stdin is /dev/null; without --pty it has no controlling terminal (opening /dev/tty
    /// fails at once); and GIT_TERMINAL_PROMPT=0, GIT_EDITOR=true, GIT_PAGER=cat, PAGER=cat,
    /// GIT_SSH_COMMAND="ssh -o BatchMode=yes", DEBIAN_FRONTEND=noninteractive, npm_config_yes,
    /// PIP_NO_INPUT and a few more are set (see docs/cli.md).
    /// Example: --non-interactive
    #[arg(
        long,
        env = "QUIETUS_NON_INTERACTIVE",
        action = ArgAction::SetTrue,
        value_parser = text(parse_flag),
        verbatim_doc_comment
    )]
    pub(crate) non_interactive: bool,

    /// The work is done when a line of output matches this regular expression; repeatable.
    ///
    /// Matched against every line of stdout and stderr (or the terminal), whole, even when it
    /// arrives in pieces. Then the program has --linger to exit by itself; if it does not, it
    /// is ended and quietus exits 0 (outcome `completed`). A program that exits by itself
    /// keeps its own exit status. QUIETUS_DONE_WHEN_OUTPUT holds one expression (use | for
    /// several).
    /// Example: --done-when-output '^\{"type":"result"'
    #[arg(
        long,
        value_name = "REGEX",
        env = "QUIETUS_DONE_WHEN_OUTPUT",
        action = ArgAction::Append,
        allow_hyphen_values = true,
        value_parser = text(|regex| Ok(regex.to_owned())),
        verbatim_doc_comment
    )]
    pub(crate) done_when_output: Vec<String>,

    /// The work is done when this file appears or changes; repeatable.
    ///
    /// Relative to the current directory. A file already there at the start counts only once
    /// it changes. Looked at every check interval, at most every second. Then as with
    /// --done-when-output.
    /// Example: --done-when-file .agent/status.json
    #[arg(
        long,
        value_name = "PATH",
        env = "QUIETUS_DONE_WHEN_FILE",
        action = ArgAction::Append,
        value_parser = path(|p| Ok(PathBuf::from(p))),
        verbatim_doc_comment
    )]
    pub(crate) done_when_file: Vec<PathBuf>,

    /// The longest one source may keep a quiet program alive on its own; repeatable.
    ///
    /// SOURCE is output, files, children, repeated_output, keepalive or the NAME of a --probe;
    /// D a duration, or none for no cap. Past the idle timeout + D with every other source
    /// quiet, that source stops counting until another one is active, and the program is
    /// ended as stale. QUIETUS_SOLO_CAP takes several, separated by ':'.
    /// Default: children=30m (a silent program whose grandchild spins forever is ended; a
    /// silent build or test run shorter than that is not). repeated_output=D tells output
    /// that merely repeats itself (the same line, digits aside: a spinner, a retry loop)
    /// from real output and caps it.
    /// Example: --solo-cap children=10m --solo-cap repeated_output=2m
    #[arg(
        long,
        value_name = "SOURCE=D",
        env = "QUIETUS_SOLO_CAP",
        action = ArgAction::Append,
        value_parser = text(parse_solo_cap),
        verbatim_doc_comment
    )]
    pub(crate) solo_cap: Vec<SoloCap>,

    /// A probe: COMMAND (run with sh -c) says whether the program is still busy; repeatable.
    ///
    /// Asked only when the program is about to be ended as stale (at most once per check
    /// interval while it says yes): exit status 0 counts as activity of the source NAME
    /// (which --solo-cap can cap). It runs in a process group of its own with no input and
    /// its output discarded, for 10s at most (then it is killed and counts as no).
    /// Example: --probe ci_job='gh run view 42 --json status | grep -q in_progress'
    #[arg(
        long,
        value_name = "NAME=COMMAND",
        env = "QUIETUS_PROBE",
        action = ArgAction::Append,
        allow_hyphen_values = true,
        value_parser = text(super::probe::parse),
        verbatim_doc_comment
    )]
    pub(crate) probe: Vec<super::probe::ProbeCommand>,

    /// How the program's process tree is held: auto, cgroup or group.
    ///
    /// cgroup: a cgroup v2 of the run's own, entered before the program starts; no process of
    /// the tree can leave it (setsid, double fork, env -i), its CPU counts, and all of it is
    /// ended. Needs the right to create a cgroup under quietus's own (root, or a delegated
    /// one: systemd-run --user --scope -p Delegate=yes quietus …); without it, exit 125.
    /// group: the process group, plus the descendants seen leaving it.
    /// auto (default): cgroup where one can be made, else group; the report says which.
    /// Example: --containment cgroup
    #[arg(
        long,
        value_name = "MODE",
        env = "QUIETUS_CONTAINMENT",
        default_value = "auto",
        value_parser = text(parse_containment),
        verbatim_doc_comment
    )]
    pub(crate) containment: Containment,

    /// Write a JSON report of the run to FILE when done (- for stderr).
    ///
    /// FILE is created (or emptied) before the program starts. Fields: outcome, exit_code,
    /// signal, duration_ms, idle_ms {output, files, children, network}, ladder {signals_sent,
    /// escalated}, leftovers_killed, bytes {stdout, stderr}, pid, and more.
    /// Example: --report run.json
    #[arg(
        long,
        value_name = "FILE",
        env = "QUIETUS_REPORT",
        value_parser = path(parse_report),
        verbatim_doc_comment
    )]
    pub(crate) report: Option<PathBuf>,

    /// Write the event stream to FILE as JSON Lines while the program runs (- for stderr).
    ///
    /// One object per line, with the names of --report: {"event":"started","pid":…},
    /// {"event":"output","stream":"stdout","seq":…,"text":…,"bytes":…,"truncated":…},
    /// {"event":"activity","source":"files"}, {"event":"idle_warning","left_ms":…},
    /// {"event":"signal","signal":"TERM","step":0}, {"event":"exited","outcome":…},
    /// {"event":"closed"}. A slow reader never slows the program (output events are
    /// dropped and flagged instead).
    /// Example: --events events.jsonl
    #[arg(
        long,
        value_name = "FILE",
        env = "QUIETUS_EVENTS",
        value_parser = path(parse_report),
        verbatim_doc_comment
    )]
    pub(crate) events: Option<PathBuf>,

    /// Where the complete output goes once a stream passes 4 KiB (a log per stream, mode 0600).
    ///
    /// Default: no logs, unless --report is given: then the platform cache folder's
    /// quietus/logs ($XDG_CACHE_HOME or ~/.cache), or none with a warning if that folder
    /// cannot be used. The report lists the logs with their SHA-256. A folder named here that
    /// cannot be used stops quietus before the program starts (125). quietus's logs
    /// older than 7 days, then the oldest past 256 MiB in all, are deleted from the folder.
    /// Example: --log-dir ~/agent-logs
    #[arg(
        long,
        value_name = "DIR",
        env = "QUIETUS_LOG_DIR",
        value_parser = path(parse_log_dir),
        verbatim_doc_comment
    )]
    pub(crate) log_dir: Option<PathBuf>,

    /// Fewer of quietus's own messages: errors only, no line when it ends the program.
    ///
    /// -qq: not even errors (the exit status still tells).
    /// Example: -q
    #[arg(
        short,
        long,
        env = "QUIETUS_QUIET",
        action = ArgAction::Count,
        value_parser = text(parse_count),
        verbatim_doc_comment
    )]
    pub(crate) quiet: u8,

    /// More of quietus's own messages: -v what it does, -vv debug, -vvv trace.
    ///
    /// Example: -v
    #[arg(
        short,
        long,
        env = "QUIETUS_VERBOSE",
        action = ArgAction::Count,
        value_parser = text(parse_count),
        verbatim_doc_comment
    )]
    pub(crate) verbose: u8,

    /// Run the program on a terminal (a pseudo-terminal), as if typed at a shell prompt.
    ///
    /// Its size: quietus's own terminal's (and its resizes) when there is one, else
    /// --pty-size. quietus's stdin is typed into it (Ctrl-C too), what it prints goes to
    /// stdout byte for byte; quietus's own terminal is in raw mode meanwhile.
    /// Example: --pty -i 10m -- claude
    #[arg(
        long,
        env = "QUIETUS_PTY",
        action = ArgAction::SetTrue,
        value_parser = text(parse_flag),
        verbatim_doc_comment
    )]
    pub(crate) pty: bool,

    /// The terminal's size with --pty when quietus does not run on a terminal.
    ///
    /// Default: 24x80.
    /// Example: --pty-size 50x132
    #[arg(
        long,
        value_name = "ROWSxCOLS",
        env = "QUIETUS_PTY_SIZE",
        value_parser = text(parse_pty_size_value),
        verbatim_doc_comment
    )]
    pub(crate) pty_size: Option<PtySize>,

    /// The program to run, then its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub(crate) command: Vec<OsString>,
}

/// A limit as a person writes it: `7d`, `1h`, `10ms` (falls back to `1h2m3s` style).
fn round_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        return HumanDuration(d).to_string();
    }
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    HumanDuration(d).to_string()
}

/// `d` to the nanosecond, in the units a user writes (`7d1ms`, `1h30m`, `1s500ms`): a
/// rejected value is shown as it was written, never rounded into an accepted one.
fn exact_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let nanos = u64::from(d.subsec_nanos());
    let parts = [
        (secs / 86400, "d"),
        (secs / 3600 % 24, "h"),
        (secs / 60 % 60, "m"),
        (secs % 60, "s"),
        (nanos / 1_000_000, "ms"),
        (nanos / 1_000 % 1_000, "us"),
        (nanos % 1_000, "ns"),
    ];
    let text: String = parts
        .iter()
        .filter(|(n, _)| *n != 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if text.is_empty() {
        "0s".to_owned()
    } else {
        text
    }
}

/// A count for -q / -v from the environment (`2` is `-vv`).
fn parse_count(text: &str) -> Result<u8, String> {
    text.trim()
        .parse::<u8>()
        .map_err(|_| format!("{text:?} is not a count: use 0, 1, 2 or 3 (as in -v, -vv, -vvv)"))
}

/// A `--pty-size` value (clap names the option and the value in the error).
fn parse_pty_size_value(text: &str) -> Result<PtySize, String> {
    text.parse()
}

/// A `--solo-cap SOURCE=D` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SoloCap {
    pub(crate) source: ActivitySource,
    pub(crate) cap: Option<Duration>,
}

/// `children=10m`, `output=none`.
fn parse_solo_cap(text: &str) -> Result<SoloCap, String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!(
            "{text:?} is not SOURCE=D: use children=10m, repeated_output=2m, output=none"
        ));
    };
    let name = name.trim();
    let probe_like = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !probe_like {
        return Err(format!(
            "{name:?} is not a source: use output, files, children, repeated_output, keepalive \
             or the NAME of a --probe"
        ));
    }
    // A built-in source, or a probe's name (checked against the probes with the rest).
    let source = ActivitySource::from_name(name);
    let cap = if value.trim().eq_ignore_ascii_case("none") {
        None
    } else {
        Some(parse_duration(value)?)
    };
    Ok(SoloCap { source, cap })
}

/// The parsed command line and where each value came from.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) cli: Cli,
    /// The values of the settings table's options (a default included).
    settings: Vec<(&'static crate::settings::Def, SettingValue)>,
    /// Ids of the options whose value came from the environment.
    from_env: HashSet<String>,
}

/// The command, as clap parses it: the options of [`Cli`], and first those of the settings
/// table ([`crate::settings::SETTINGS`]).
pub(crate) fn command() -> clap::Command {
    Cli::command().args(crate::settings::cli_args())
}

/// Every option id with an environment variable, and the variable (from [`command`]: each
/// option declares its own).
fn env_vars() -> &'static [(String, String)] {
    static VARS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    VARS.get_or_init(|| {
        command()
            .get_arguments()
            .filter_map(|a| {
                let var = a.get_env()?.to_str()?.to_owned();
                Some((a.get_id().as_str().to_owned(), var))
            })
            .collect()
    })
}

/// The environment variable of an option id.
pub(crate) fn env_var(id: &str) -> Option<&'static str> {
    env_vars()
        .iter()
        .find(|(i, _)| i == id)
        .map(|(_, v)| v.as_str())
}

impl Options {
    /// Parses `args` (the first is the program name) and the process's environment.
    pub(crate) fn parse_from(
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    ) -> Result<Options, clap::Error> {
        let mut command = command();
        // An empty variable counts as unset (clap would read it as an empty value).
        for (id, var) in env_vars() {
            let id = id.as_str();
            if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
                command = command.mut_arg(id, |arg| arg.env(None::<&str>));
            }
        }
        let matches = command.try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        let settings = crate::settings::SETTINGS
            .iter()
            .filter_map(|def| Some((def, def.read_matches(&matches)?)))
            .collect();
        let from_env = sources(&matches, ValueSource::EnvVariable);
        let from_command_line = sources(&matches, ValueSource::CommandLine);
        // A list from the environment is one value: split it like PATH.
        if from_env.contains("watch") {
            cli.watch = split_list(&cli.watch.concat_os())
                .into_iter()
                .map(PathBuf::from)
                .collect();
        }
        if from_env.contains("done_when_file") {
            cli.done_when_file = split_list(&cli.done_when_file.concat_os())
                .into_iter()
                .map(PathBuf::from)
                .collect();
        }
        if from_env.contains("solo_cap") {
            let all = std::env::var("QUIETUS_SOLO_CAP").unwrap_or_default();
            cli.solo_cap = all
                .split(ENV_LIST_SEPARATOR)
                .filter(|part| !part.trim().is_empty())
                .map(parse_solo_cap)
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    self::command().error(
                        clap::error::ErrorKind::ValueValidation,
                        format!(
                            "invalid value {all:?} for --solo-cap (from QUIETUS_SOLO_CAP): {e}"
                        ),
                    )
                })?;
        }
        if from_env.contains("exclude") {
            cli.exclude = split_list(&OsString::from(cli.exclude.concat()))
                .into_iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
        }
        // -q and -v: the command line wins as a whole (QUIETUS_QUIET=1 with -v is -v).
        if from_command_line.contains("quiet") || from_command_line.contains("verbose") {
            if !from_command_line.contains("quiet") {
                cli.quiet = 0;
            }
            if !from_command_line.contains("verbose") {
                cli.verbose = 0;
            }
        }
        Ok(Options {
            cli,
            settings,
            from_env,
        })
    }

    /// The value of the table's setting `name` (its default when it has one and was not given).
    pub(crate) fn setting(&self, name: &str) -> Option<SettingValue> {
        self.settings
            .iter()
            .find(|(def, _)| def.name == name)
            .map(|(_, value)| *value)
    }

    /// The grace between the first signal and KILL.
    pub(crate) fn grace(&self) -> Duration {
        match self.setting("grace") {
            Some(SettingValue::Duration(grace)) => grace,
            _ => KillLadder::default()
                .steps()
                .next()
                .map_or(Duration::ZERO, |s| s.1),
        }
    }

    /// Whether `--no-watch` was given.
    pub(crate) fn no_watch(&self) -> bool {
        self.setting("no_watch") == Some(SettingValue::Switch(true))
    }

    /// Whether option `id` took its value from its environment variable.
    pub(crate) fn is_from_env(&self, id: &str) -> bool {
        self.from_env.contains(id)
    }

    /// The monitoring configuration, or a message naming the option and what it accepts.
    pub(crate) fn config(&self) -> Result<MonitorConfig, String> {
        let cli = &self.cli;
        // The watches are armed 50 ms in (at most a tenth of the idle timeout): a program that
        // is done by then costs no watch, and what it wrote before is found by its times.
        let mut files = FileWatchConfig::builder().arm_delay(COMMAND_ARM_DELAY);
        if !cli.watch.is_empty() {
            files = files.roots(cli.watch.iter().cloned());
        }
        for glob in &cli.exclude {
            files = files.exclude(glob.clone());
        }
        // Nothing quietus writes counts as the program's activity, wherever it is.
        for own in [&cli.events, &cli.report].into_iter().flatten() {
            if own.as_os_str() != "-" {
                files = files.own_file(own.clone());
            }
        }
        let config = MonitorConfig::builder()
            .kill_ladder(KillLadder::polite(cli.signal, self.grace()))
            .containment(cli.containment)
            .files(files)
            // One session per quietus process: the subreaper mode costs nothing here and
            // catches daemons that double-fork away between two samples.
            .children(ChildWatchConfig::builder().subreaper(cfg!(target_os = "linux")));
        let mut draft = Draft::new(config, cli.signal);
        draft.completion = self.completion();
        // The settings table's options, each applied by its own entry.
        let Draft {
            config,
            signal,
            completion,
        } = self
            .settings
            .iter()
            .fold(draft, |draft, (def, value)| (def.apply)(draft, *value));
        let config = cli
            .probe
            .iter()
            .fold(config, |config, probe| config.probe(probe.probe()));
        let config = cli.solo_cap.iter().fold(config, |config, cap| {
            config.solo_cap(cap.source.clone(), cap.cap)
        });
        // Every byte passes through already: a second copy on disk only when asked for, by
        // naming a folder or by asking for a report (whose `log` entries list the logs).
        let config = match (&cli.log_dir, &cli.report) {
            (Some(dir), _) => config.capture(CaptureConfig::builder().log_dir(dir)),
            (None, Some(_)) => config,
            (None, None) => config.capture(CaptureConfig::builder().spill(false)),
        };
        Draft {
            config,
            signal,
            completion,
        }
        .build()
        .map_err(|e| self.option_error(&e))
    }

    /// How completion is recognised.
    fn completion(&self) -> CompletionConfigBuilder {
        let cli = &self.cli;
        let mut completion = CompletionConfig::builder();
        for regex in &cli.done_when_output {
            completion = completion.output(regex.clone());
        }
        for path in &cli.done_when_file {
            completion = completion.file(path.clone());
        }
        completion
    }

    /// The log level of quietus's own messages from -q and -v: warnings by default.
    pub(crate) fn log_level(&self) -> log::LevelFilter {
        let level = 2 + i32::from(self.cli.verbose) - i32::from(self.cli.quiet);
        match level {
            i32::MIN..=0 => log::LevelFilter::Off,
            1 => log::LevelFilter::Error,
            2 => log::LevelFilter::Warn,
            3 => log::LevelFilter::Info,
            4 => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    }

    /// Whether the one-line summary is shown (not with -q).
    pub(crate) fn summary_wanted(&self) -> bool {
        self.cli.quiet <= self.cli.verbose
    }

    /// A configuration error in the words of the command line.
    fn option_error(&self, error: &ConfigError) -> String {
        let (id, what) = match error {
            ConfigError::OutOfRange {
                setting,
                value,
                min,
                max,
            } => {
                // The table's option that sets it (solo caps have their own option).
                let id = match setting {
                    Setting::SoloCap => "solo_cap",
                    other => match crate::settings::by_setting(*other) {
                        Some(def) if def.key(Surface::Command).is_some() => def.name,
                        _ => return format!("invalid option: {error}"),
                    },
                };
                (
                    id,
                    format!(
                        "{} is out of range; it accepts {} to {}",
                        exact_duration(*value),
                        round_duration(*min),
                        round_duration(*max)
                    ),
                )
            }
            ConfigError::InvalidGlob {
                pattern, reason, ..
            } => (
                "exclude",
                format!(
                    "{pattern:?} is not a valid glob ({reason}); it accepts patterns like \
                     '*.tmp', 'cache/**', '**/*.bak'"
                ),
            ),
            ConfigError::InvalidPattern {
                pattern, reason, ..
            } => (
                "done_when_output",
                format!(
                    "{pattern:?} is not a valid regular expression ({reason}); it accepts \
                     patterns like '^DONE$', '\"type\":\"result\"'"
                ),
            ),
            ConfigError::UnknownSource { name } => (
                "solo_cap",
                format!(
                    "{name:?} is not a source; it accepts output, files, children, \
                     repeated_output, keepalive or the NAME of a --probe"
                ),
            ),
            ConfigError::InvalidProbe { name, reason } => (
                "probe",
                format!("{name:?} cannot be a probe's name ({reason})"),
            ),
            ConfigError::InvalidSignal { value } => (
                "signal",
                format!("{value:?} is not a signal; it accepts TERM, INT, HUP, SIGUSR1, 15…"),
            ),
            other => return format!("invalid option: {other}"),
        };
        format!("invalid value for {}: {what}", self.describe(id))
    }

    /// `--grace`, or `--grace (from QUIETUS_GRACE)` when the value came from there.
    pub(crate) fn describe(&self, id: &str) -> String {
        let long = format!("--{}", id.replace('_', "-"));
        match env_var(id) {
            Some(var) if self.is_from_env(id) => format!("{long} (from {var})"),
            _ => long,
        }
    }
}

/// A clap error as text; when the rejected value came from an environment variable (not from
/// the command line `args`), the message says which: `invalid value 'x' for '--grace <D>' (from
/// QUIETUS_GRACE)`.
pub(crate) fn explain_error(error: &clap::Error, args: &[OsString]) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = error.to_string();
    let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) = (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidValue),
    ) else {
        return text;
    };
    // `--grace <D>`, `--no-watch`, `--verbose...`: the long name.
    let Some(long) = arg.strip_prefix("--").and_then(|a| {
        a.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .next()
    }) else {
        return text;
    };
    let id = long.replace('-', "_");
    let Some(var) = env_var(&id) else {
        return text;
    };
    let from_env = std::env::var_os(var).is_some_and(|v| v.to_string_lossy() == *value);
    let short = command()
        .get_arguments()
        .find(|a| a.get_id().as_str() == id)
        .and_then(|a| a.get_short());
    let before_program = args
        .iter()
        .skip(1)
        .take_while(|a| a.as_os_str() != "--")
        .filter_map(|a| a.to_str());
    let on_command_line = before_program.into_iter().any(|a| {
        a.strip_prefix("--")
            .is_some_and(|rest| rest == long || rest.starts_with(&format!("{long}=")))
            || short.is_some_and(|c| !a.starts_with("--") && a.starts_with('-') && a.contains(c))
    });
    if !from_env || on_command_line {
        return text;
    }
    let quoted = format!("'{arg}'");
    text.replacen(&quoted, &format!("{quoted} (from {var})"), 1)
}

/// A flag's value from the environment: 1/0, true/false, yes/no, on/off (any case).
fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" | "on" => Ok(true),
        "0" | "false" | "no" | "n" | "off" => Ok(false),
        _ => Err(format!(
            "{text:?} is not a yes or no: use 1/0, true/false, yes/no, on/off"
        )),
    }
}

/// The ids of the options whose value came from `source`.
fn sources(matches: &ArgMatches, source: ValueSource) -> HashSet<String> {
    matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) == Some(source))
        .map(|id| id.as_str().to_owned())
        .collect()
}

/// Splits `a:b::c` into `a`, `b`, `c` (empty entries dropped).
fn split_list(text: &std::ffi::OsStr) -> Vec<OsString> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    text.as_bytes()
        .split(|b| *b == ENV_LIST_SEPARATOR as u8)
        .filter(|part| !part.is_empty())
        .map(|part| OsString::from_vec(part.to_vec()))
        .collect()
}

trait ConcatOs {
    fn concat_os(&self) -> OsString;
}

impl ConcatOs for Vec<PathBuf> {
    /// The one value clap read from the environment, as it was.
    fn concat_os(&self) -> OsString {
        let mut all = OsString::new();
        for p in self {
            all.push(p.as_os_str());
        }
        all
    }
}

/// Parses a duration in quietus's one grammar (docs/cli.md, "Durations"), the same on every
/// surface: a bare number is seconds (`7`, `1.5`); otherwise one or more `NUMBER UNIT` parts,
/// the units `d`, `h`, `m`, `s`, `ms`, each at most once and from the largest down (`1h30m`,
/// `1s500ms`; not `1s1m` or `1m1m`); a number is digits with at most one point. The total is a
/// whole number of milliseconds (`1.5ms`, `0.0001s` are finer than quietus counts), and one
/// too large to hold is out of range, not "not a duration".
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let bad = || {
        let negative = if t
            .strip_prefix('-')
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
        {
            "a duration cannot be negative; "
        } else {
            ""
        };
        format!(
            "{text:?} is not a duration: {negative}use a number with a unit (d, h, m, s, ms, \
             from the largest down), like 1500ms, 30s, 5m, 1h30m"
        )
    };
    let is_number =
        |n: &str| n.contains(|c: char| c.is_ascii_digit()) && n.matches('.').count() <= 1;
    // The parts: (number, unit); a bare number is seconds.
    let mut parts = Vec::new();
    let mut rest = t;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(split);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        if !is_number(number) || (unit.is_empty() && !parts.is_empty()) {
            return Err(bad());
        }
        parts.push((number, unit));
        rest = tail;
    }
    let finer = || {
        format!(
            "{text:?} is finer than a millisecond: durations are whole milliseconds (1ms, \
             1500ms, 1.5s)"
        )
    };
    let too_long =
        || format!("{text:?} is out of range: longer than any duration quietus can hold");
    if parts.is_empty() {
        return Err(bad());
    }
    // Exact arithmetic in nanoseconds (u128): `0.1s` is 100ms, never 99.999….
    let mut total_ns: u128 = 0;
    let mut previous = u128::MAX;
    for (number, unit) in &parts {
        let scale_ns: u128 = match *unit {
            "" if parts.len() == 1 => 1_000_000_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return Err(bad()),
        };
        if scale_ns >= previous {
            return Err(bad());
        }
        previous = scale_ns;
        let part = match part_ns(number, scale_ns) {
            Ok(ns) => ns,
            Err(PartError::TooLong) => return Err(too_long()),
            Err(PartError::Finer) => return Err(finer()),
        };
        total_ns = total_ns.checked_add(part).ok_or_else(too_long)?;
    }
    if !total_ns.is_multiple_of(1_000_000) {
        return Err(finer());
    }
    u64::try_from(total_ns / 1_000_000)
        .map(Duration::from_millis)
        .map_err(|_| too_long())
}

/// Why one part of a duration is refused.
enum PartError {
    /// More than a `u128` of nanoseconds holds.
    TooLong,
    /// Not a whole number of nanoseconds.
    Finer,
}

/// `number` (digits with at most one point) times `scale_ns`, exactly, in nanoseconds.
fn part_ns(number: &str, scale_ns: u128) -> Result<u128, PartError> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let mut value: u128 = 0;
    for d in whole.bytes().chain(fraction.bytes()) {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u128::from(d - b'0')))
            .ok_or(PartError::TooLong)?;
    }
    let scaled = value.checked_mul(scale_ns).ok_or(PartError::TooLong)?;
    let divisor = u32::try_from(fraction.len())
        .ok()
        .and_then(|n| 10u128.checked_pow(n))
        .ok_or(PartError::Finer)?;
    if !scaled.is_multiple_of(divisor) {
        return Err(PartError::Finer);
    }
    Ok(scaled / divisor)
}

/// A duration, or `none` (off).
fn parse_hard_timeout(text: &str) -> Result<Option<Duration>, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    parse_duration(text)
        .map(Some)
        .map_err(|e| format!("{e}, or none"))
}

/// The value parser of a duration option of the settings table.
pub(crate) fn duration_parser() -> impl TypedValueParser<Value = Duration> {
    text(parse_duration)
}

/// The value parser of a duration-or-`none` option of the settings table.
pub(crate) fn duration_or_none_parser() -> impl TypedValueParser<Value = Option<Duration>> {
    text(parse_hard_timeout)
}

/// The value parser of a flag of the settings table (its variable takes 1/0, yes/no…).
pub(crate) fn flag_parser() -> impl TypedValueParser<Value = bool> {
    text(parse_flag)
}

/// The signals whose default action does not end a process: it stops (STOP, TSTP, TTIN,
/// TTOU), goes on (CONT) or ignores them (CHLD, WINCH, URG). As the ladder's first signal,
/// each would only wait out the grace before KILL (or stop the program, not end it).
const NOT_ENDING: [&str; 8] = [
    "STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "WINCH", "URG",
];

/// `TERM`, `SIGTERM`, `term`, `15`; not a signal that cannot end a process ([`NOT_ENDING`]).
fn parse_signal(text: &str) -> Result<Signal, String> {
    let signal = text.parse::<Signal>().map_err(|_| {
        format!(
            "{text:?} is not a signal: use a name with or without SIG (TERM, INT, HUP, QUIT, \
             USR1…) or a number from 1 to 31"
        )
    })?;
    let name = signal.name();
    if NOT_ENDING
        .iter()
        .any(|n| name.trim_start_matches("SIG") == *n)
    {
        let shown = if text.trim().eq_ignore_ascii_case(&name) {
            format!("{text:?}")
        } else {
            format!("{text:?} ({name})")
        };
        return Err(format!(
            "{shown} does not end a program (by default it stops it, or nothing \
             happens): use TERM, INT, HUP, QUIT, USR1… or KILL"
        ));
    }
    Ok(signal)
}

/// A glob of `--exclude`: not empty (an empty one matches nothing).
fn parse_glob(glob: &str) -> Result<String, String> {
    if glob.trim().is_empty() {
        return Err(format!(
            "{glob:?} is an empty glob and matches nothing: give a pattern, like 'cache/**' or \
             '*.tmp'"
        ));
    }
    Ok(glob.to_owned())
}

fn parse_containment(text: &str) -> Result<Containment, String> {
    match text {
        "auto" => Ok(Containment::Auto),
        "cgroup" => Ok(Containment::Cgroup),
        "group" => Ok(Containment::Group),
        _ => Err(format!(
            "{text:?} is not a containment: use auto, cgroup or group"
        )),
    }
}

/// A value parser for text: `parse` on the value, which must be UTF-8 (the error then names
/// the option, or its variable, like any invalid value).
fn text<T: Clone + Send + Sync + 'static>(
    parse: fn(&str) -> Result<T, String>,
) -> impl TypedValueParser<Value = T> {
    OsStringValueParser::new().try_map(move |value| match value.to_str() {
        Some(text) => parse(text),
        None => Err(format!(
            "{:?} is not valid UTF-8, and this value must be text",
            value.to_string_lossy()
        )),
    })
}

/// A value parser for paths: any bytes (Linux paths need not be UTF-8), checked by `check`.
fn path(check: fn(&OsStr) -> Result<PathBuf, String>) -> impl TypedValueParser<Value = PathBuf> {
    OsStringValueParser::new().try_map(move |value| check(&value))
}

/// A non-empty folder to watch.
fn parse_watch(path: &OsStr) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("an empty path is not a folder: give one like .agent or notes".to_owned());
    }
    Ok(PathBuf::from(path))
}

/// A non-empty log folder.
fn parse_log_dir(path: &OsStr) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("an empty path is not a folder: give one like /var/log/agents".to_owned());
    }
    Ok(PathBuf::from(path))
}

/// A non-empty path, or `-` (stderr).
fn parse_report(path: &OsStr) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("an empty path: give a file like run.json, or - for stderr".to_owned());
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietus::ActivitySource;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86400)));
        for bad in ["", "5x", "ms", "-1s", "1h30", "abc", "1e400s", "s5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(
            parse_duration("-5s")
                .unwrap_err()
                .contains("cannot be negative")
        );
        assert!(!parse_duration("-v").unwrap_err().contains("negative"));
    }

    /// One grammar (issue 51, point 7): units from the largest down, each once; whole
    /// milliseconds; a number too large is out of range, not "not a duration".
    #[test]
    fn the_one_grammar_of_durations() {
        assert_eq!(parse_duration("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_duration("1d2h3m4s5ms"),
            Ok(Duration::from_millis(93_784_005))
        );
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("0.001"), Ok(Duration::from_millis(1)));
        for out_of_order in ["1s1m", "1m1m", "1ms1s", "5ms5ms", "1h1d"] {
            let e = parse_duration(out_of_order).unwrap_err();
            assert!(e.contains("is not a duration"), "{out_of_order}: {e}");
            assert!(e.contains("largest down"), "{out_of_order}: {e}");
        }
        for finer in ["1.5ms", "0.0001s", "0.0005"] {
            let e = parse_duration(finer).unwrap_err();
            assert!(e.contains("finer than a millisecond"), "{finer}: {e}");
        }
        for unit in ["500us", "5ns", "1w", "1.2.3s", "1s.", "."] {
            let e = parse_duration(unit).unwrap_err();
            assert!(e.contains("is not a duration"), "{unit}: {e}");
        }
        for huge in [
            "99999999999999999999d",
            "999999999999999999999999999999999999999999s",
        ] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("is out of range"), "{huge}: {e}");
        }
    }

    proptest::proptest! {
        /// Every whole-millisecond duration reads back from the words quietus shows it in.
        #[test]
        fn every_duration_shown_reads_back(ms in 0u64..(400 * 86_400_000)) {
            let d = Duration::from_millis(ms);
            proptest::prop_assert_eq!(parse_duration(&exact_duration(d)), Ok(d));
        }

        /// Whatever the text, the parser answers (never panics); what it accepts is whole
        /// milliseconds, and its parts' units run from the largest down.
        #[test]
        fn any_text_is_answered(text in "[0-9.]{0,6}(d|h|m|s|ms|us|x)?([0-9.]{0,4}(d|h|m|s|ms))?") {
            if let Ok(d) = parse_duration(&text) {
                proptest::prop_assert_eq!(d.subsec_nanos() % 1_000_000, 0);
                let units: Vec<&str> = text
                    .split(|c: char| c.is_ascii_digit() || c == '.')
                    .filter(|u| !u.is_empty())
                    .collect();
                let rank = |u: &str| ["d", "h", "m", "s", "ms"].iter().position(|x| *x == u);
                let ranks: Vec<_> = units.iter().map(|u| rank(u)).collect();
                proptest::prop_assert!(ranks.iter().all(Option::is_some), "{text}");
                proptest::prop_assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{text}");
            }
        }
    }

    #[test]
    fn limits_read_like_durations() {
        assert_eq!(round_duration(Duration::from_secs(7 * 86400)), "7d");
        assert_eq!(round_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(round_duration(Duration::from_secs(90)), "90s");
        assert_eq!(round_duration(Duration::from_millis(10)), "10ms");
        assert_eq!(round_duration(Duration::ZERO), "0ms");
        assert_eq!(round_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn a_rejected_value_reads_as_it_was_written() {
        for written in ["7d1ms", "8d", "1h30m", "1s500ms", "0s", "25h"] {
            let parsed = parse_duration(written).unwrap();
            let shown = exact_duration(parsed);
            assert_eq!(parse_duration(&shown), Ok(parsed), "{written} -> {shown}");
        }
        assert_eq!(exact_duration(parse_duration("7d1ms").unwrap()), "7d1ms");
        assert_eq!(exact_duration(Duration::from_secs(90_000)), "1d1h");
        assert_eq!(exact_duration(Duration::from_nanos(1_001)), "1us1ns");
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("2"), Ok(2));
        assert!(parse_count("lots").unwrap_err().contains("-vv"));
    }

    #[test]
    fn flags() {
        for yes in ["1", "true", "YES", "on", "y"] {
            assert_eq!(parse_flag(yes), Ok(true), "{yes}");
        }
        for no in ["0", "false", "No", "off", "n"] {
            assert_eq!(parse_flag(no), Ok(false), "{no}");
        }
        let err = parse_flag("maybe").unwrap_err();
        assert!(err.contains("maybe") && err.contains("1/0"), "{err}");
    }

    #[test]
    fn hard_timeout_accepts_none() {
        assert_eq!(parse_hard_timeout("none"), Ok(None));
        assert_eq!(
            parse_hard_timeout("2h"),
            Ok(Some(Duration::from_secs(7200)))
        );
        let err = parse_hard_timeout("soon").unwrap_err();
        assert!(err.contains("none"), "{err}");
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("TERM"), Ok(Signal::TERM));
        assert_eq!(parse_signal("sigint"), Ok(Signal::INT));
        assert_eq!(parse_signal("1"), Ok(Signal::HUP));
        let err = parse_signal("NOPE").unwrap_err();
        assert!(err.contains("NOPE") && err.contains("TERM"), "{err}");
    }

    #[test]
    fn lists_split_like_path() {
        assert_eq!(
            split_list(std::ffi::OsStr::new("a:b::c/d:")),
            vec![
                OsString::from("a"),
                OsString::from("b"),
                OsString::from("c/d")
            ]
        );
        assert!(split_list(std::ffi::OsStr::new(":")).is_empty());
    }

    #[test]
    fn every_env_var_names_a_real_option() {
        let command = command();
        for (id, var) in env_vars() {
            let arg = command
                .get_arguments()
                .find(|a| a.get_id().as_str() == *id)
                .unwrap_or_else(|| panic!("no option {id}"));
            let long = arg.get_long().expect("every option has a long name");
            assert_eq!(
                *var,
                format!("QUIETUS_{}", long.replace('-', "_").to_uppercase())
            );
        }
        let with_env = command
            .get_arguments()
            .filter(|a| a.get_env().is_some())
            .count();
        assert_eq!(with_env, env_vars().len());
        assert!(env_var("idle_timeout") == Some("QUIETUS_IDLE_TIMEOUT"));
    }

    #[test]
    fn the_tables_settings_are_options_with_their_flag_variable_default_and_doc() {
        let command = command();
        for def in crate::settings::SETTINGS {
            let Some(flag) = def.flag else { continue };
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(flag))
                .unwrap_or_else(|| panic!("no option --{flag}"));
            assert_eq!(arg.get_id().as_str(), def.name);
            assert_eq!(arg.get_short(), def.short, "--{flag}");
            assert_eq!(arg.get_env().and_then(|v| v.to_str()), def.env, "--{flag}");
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.starts_with(def.doc.trim_end_matches('.')),
                "--{flag}: {help}"
            );
            let defaults: Vec<_> = arg.get_default_values().iter().collect();
            match def.default {
                crate::settings::Default::Value(v)
                    if def.kind != crate::settings::Kind::DurationOrNone =>
                {
                    assert_eq!(defaults, [v], "--{flag}")
                }
                _ => assert!(defaults.is_empty(), "--{flag}"),
            }
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn defaults_make_the_library_defaults() {
        let options = Options::parse_from(["quietus", "--", "true"]).unwrap();
        // Only meaningful without QUIETUS_* in the test's environment.
        if env_vars()
            .iter()
            .all(|(_, var)| std::env::var_os(var).is_none())
        {
            // The library defaults, but for the subreaper mode the command turns on (Linux)
            // and the log spill it leaves off (no --log-dir, no --report).
            let expected = MonitorConfig::builder()
                .files(FileWatchConfig::builder().arm_delay(COMMAND_ARM_DELAY))
                .children(ChildWatchConfig::builder().subreaper(cfg!(target_os = "linux")))
                .capture(CaptureConfig::builder().spill(false))
                .build()
                .unwrap();
            assert_eq!(options.config().unwrap(), expected);
            assert_eq!(options.log_level(), log::LevelFilter::Warn);
            assert!(options.summary_wanted());
        }
    }

    #[test]
    fn options_make_the_config() {
        let options = Options::parse_from([
            "quietus",
            "-i",
            "2s",
            "-t",
            "1m",
            "-g",
            "300ms",
            "-s",
            "INT",
            "-w",
            "a",
            "-w",
            "b",
            "--exclude",
            "*.tmp",
            "--no-children",
            "--no-network",
            "--check-interval",
            "250ms",
            "--keep-leftovers",
            "-vv",
            "--",
            "prog",
            "--flag-of-prog",
        ])
        .unwrap();
        let config = options.config().unwrap();
        assert_eq!(config.idle_timeout(), Duration::from_secs(2));
        assert_eq!(config.hard_timeout(), Some(Duration::from_secs(60)));
        assert_eq!(
            *config.kill_ladder(),
            KillLadder::polite(Signal::INT, Duration::from_millis(300))
        );
        assert_eq!(config.files().roots(), [PathBuf::from("a"), "b".into()]);
        assert!(config.files().exclude().contains(&"*.log".to_owned()));
        assert!(config.files().exclude().contains(&"*.tmp".to_owned()));
        assert!(
            config.watches(&ActivitySource::Files)
                && config.watches(&ActivitySource::Output)
                && !config.watches(&ActivitySource::Children)
                && !config.watches(&ActivitySource::Network)
        );
        assert_eq!(config.check_interval(), Some(Duration::from_millis(250)));
        assert!(config.keep_leftovers());
        assert_eq!(options.log_level(), log::LevelFilter::Debug);
        assert_eq!(
            options.cli.command,
            vec![OsString::from("prog"), "--flag-of-prog".into()]
        );
        assert_eq!(options.describe("grace"), "--grace");
    }

    #[test]
    fn out_of_range_names_the_option_and_range() {
        let options =
            Options::parse_from(["quietus", "--check-interval", "1ms", "--", "x"]).expect("parses");
        let err = options.config().unwrap_err();
        assert!(err.contains("--check-interval"), "{err}");
        assert!(err.contains("it accepts 10ms to 1h"), "{err}");
    }

    #[test]
    fn quiet_and_verbose_levels() {
        let quiet = Options::parse_from(["quietus", "-q", "--", "x"]).unwrap();
        assert_eq!(quiet.log_level(), log::LevelFilter::Error);
        assert!(!quiet.summary_wanted());
        let silent = Options::parse_from(["quietus", "-qq", "--", "x"]).unwrap();
        assert_eq!(silent.log_level(), log::LevelFilter::Off);
        let verbose = Options::parse_from(["quietus", "-v", "--", "x"]).unwrap();
        assert_eq!(verbose.log_level(), log::LevelFilter::Info);
        assert!(verbose.summary_wanted());
    }
}
