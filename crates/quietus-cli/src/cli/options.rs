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
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser};

use crate::settings::parse::{exact_duration, parse_flag, path, round_duration, text};
use crate::settings::{Draft, SettingValue, Surface};
use quietus::{
    CaptureConfig, ChildWatchConfig, ConfigError, FileWatchConfig, MonitorConfig, error::Setting,
};

/// How long after the start the command arms its file watches
/// ([`FileWatchConfig::arm_delay`]).
pub(crate) const COMMAND_ARM_DELAY: Duration = Duration::from_millis(50);

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

    /// Write one line on why the run ended to FILE, on every way out (at most 4 KiB).
    ///
    /// The outcome, quietus's exit status, why quietus ended the program (the diagnosis of a
    /// stall) and the signals it sent, e.g. `quietus: idle_timeout, exit 124: ended after
    /// 5m idle (…): sh (pid 7) sleeps; sent TERM`. FILE is created (or emptied) before the
    /// program starts. For Kubernetes' terminationMessagePath: the line is the pod's
    /// status's message (docs/fleet.md).
    /// Example: --termination-message /dev/termination-log
    #[arg(
        long,
        value_name = "FILE",
        env = "QUIETUS_TERMINATION_MESSAGE",
        value_parser = path(parse_termination_message),
        verbatim_doc_comment
    )]
    pub(crate) termination_message: Option<PathBuf>,

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
    pub(crate) fn setting(&self, name: &str) -> Option<&SettingValue> {
        self.settings
            .iter()
            .find(|(def, _)| def.name == name)
            .map(|(_, value)| value)
    }

    /// The grace between the first signal and KILL.
    pub(crate) fn grace(&self) -> Duration {
        match self.setting("grace") {
            Some(SettingValue::Duration(grace)) => *grace,
            _ => crate::settings::default_grace(),
        }
    }

    /// The exit statuses chosen for a stall, a hard timeout and an input wait.
    pub(crate) fn exit_codes(&self) -> crate::report::ExitCodes {
        let code = |name: &str, default: i32| match self.setting(name) {
            Some(SettingValue::ExitCode(code)) => i32::from(*code),
            _ => default,
        };
        let default = crate::report::ExitCodes::default();
        crate::report::ExitCodes {
            stall: code("exit_code_stall", default.stall),
            hard_timeout: code("exit_code_hard_timeout", default.hard_timeout),
            input_wait: code("exit_code_input_wait", default.input_wait),
        }
    }

    /// Whether `--no-watch` was given.
    pub(crate) fn no_watch(&self) -> bool {
        self.setting("no_watch").is_some_and(SettingValue::on)
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
        // Nothing quietus writes counts as the program's activity, wherever it is.
        for own in [&cli.events, &cli.report].into_iter().flatten() {
            if own.as_os_str() != "-" {
                files = files.own_file(own.clone());
            }
        }
        let config = MonitorConfig::builder()
            // One session per quietus process: the subreaper mode costs nothing here and
            // catches daemons that double-fork away between two samples.
            .children(ChildWatchConfig::builder().subreaper(cfg!(target_os = "linux")));
        // Every byte passes through already: a second copy on disk only when asked for, by
        // naming a folder or by asking for a report (whose `log` entries list the logs).
        let config = match (&cli.log_dir, &cli.report) {
            (Some(dir), _) => config.capture(CaptureConfig::builder().log_dir(dir)),
            (None, Some(_)) => config,
            (None, None) => config.capture(CaptureConfig::builder().spill(false)),
        };
        let mut draft = Draft::new(config);
        draft.files = Some(files);
        // The settings table's options, each applied by its own entry.
        self.settings
            .iter()
            .fold(draft, |draft, (def, value)| {
                (def.apply)(draft, value.clone())
            })
            .build()
            .map_err(|e| self.option_error(&e))
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
        // The table's option that sets the setting the library names (the first signal is
        // the ladder's).
        let setting = match error {
            ConfigError::InvalidSignal { .. } => Some(Setting::KillLadder),
            _ => error.setting(),
        };
        let Some(def) = setting
            .and_then(crate::settings::by_setting)
            .filter(|def| def.key(Surface::Command).is_some())
        else {
            return format!("invalid option: {error}");
        };
        let what = match error {
            ConfigError::OutOfRange {
                value, min, max, ..
            } => format!(
                "{} is out of range; it accepts {} to {}",
                exact_duration(*value),
                round_duration(*min),
                round_duration(*max)
            ),
            ConfigError::InvalidGlob {
                pattern, reason, ..
            } => format!(
                "{pattern:?} is not a valid glob ({reason}); it accepts patterns like '*.tmp', \
                 'cache/**', '**/*.bak'"
            ),
            ConfigError::InvalidPattern {
                pattern, reason, ..
            } => format!(
                "{pattern:?} is not a valid regular expression ({reason}); it accepts patterns \
                 like '^DONE$', '\"type\":\"result\"'"
            ),
            ConfigError::UnknownSource { name } => format!(
                "{name:?} is not a source; it accepts output, files, children, repeated_output, \
                 keepalive or the NAME of a --probe"
            ),
            ConfigError::InvalidProbe { name, reason } => {
                format!("{name:?} cannot be a probe's name ({reason})")
            }
            ConfigError::InvalidSignal { value } => {
                format!("{value:?} is not a signal; it accepts TERM, INT, HUP, SIGUSR1, 15…")
            }
            other => return format!("invalid option: {other}"),
        };
        format!("invalid value for {}: {what}", self.describe(def.name))
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

/// The ids of the options whose value came from `source`.
fn sources(matches: &ArgMatches, source: ValueSource) -> HashSet<String> {
    matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) == Some(source))
        .map(|id| id.as_str().to_owned())
        .collect()
}

/// A non-empty log folder.
fn parse_log_dir(path: &OsStr) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("an empty path is not a folder: give one like /var/log/agents".to_owned());
    }
    Ok(PathBuf::from(path))
}

/// A non-empty path (no `-`: the line is for a file an engine reads).
fn parse_termination_message(path: &OsStr) -> Result<PathBuf, String> {
    if path.is_empty() || path == "-" {
        return Err("give a file like /dev/termination-log".to_owned());
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
    use quietus::{ActivitySource, KillLadder, Signal};

    #[test]
    fn counts() {
        assert_eq!(parse_count("2"), Ok(2));
        assert!(parse_count("lots").unwrap_err().contains("-vv"));
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
            let Some(flag) = def.flag.on() else { continue };
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
