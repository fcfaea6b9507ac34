//! `quietus mcp`'s options: flags, their `QUIETUS_*` variables, and the settings they
//! make ([`McpOptions`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::settings::parse::{parse_duration, round_duration};
use crate::settings::{self, Draft, SettingValue};

const AFTER_HELP: &str = "\
Every option can also be set with its QUIETUS_* variable (shown with each option); the
command line wins. The tools, their schemas and examples are in docs/mcp.md. Exit status: 0 when
the client goes away (end of stdin, a closed stdout) or on TERM/INT/HUP, after every session was
ended; 125 for an invalid option.

Add it to an agent: claude mcp add quietus -- quietus mcp";

/// `quietus mcp`'s options.
#[derive(Debug, Parser)]
#[command(
    name = "quietus mcp",
    bin_name = "quietus mcp",
    version,
    about = "A Model Context Protocol server on stdio: supervised command execution as the tools \
             exec_command, write_stdin, exec_control and list_exec_sessions.",
    after_help = AFTER_HELP
)]
pub(crate) struct McpCli {
    /// Live sessions at most; an exec_command beyond it is refused (a tool error) until one
    /// ends.
    #[arg(long, value_name = "N", env = "QUIETUS_MCP_MAX_SESSIONS", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) max_sessions: u32,

    /// The shell that runs each command, as `SHELL -c CMD` (e.g. --shell "$SHELL" for the
    /// user's own, or bash).
    #[arg(
        long,
        value_name = "PROGRAM",
        env = "QUIETUS_MCP_SHELL",
        default_value = "sh"
    )]
    pub(crate) shell: OsString,

    /// The idle timeout of a command that names none (idle_timeout_ms): it is ended once its
    /// output, files, descendants' CPU and network have all been quiet this long. 1s to 1d
    /// (what exec_command accepts).
    #[arg(long, value_name = "D", env = "QUIETUS_MCP_IDLE_TIMEOUT", default_value = "5m",
          value_parser = parse_idle)]
    pub(crate) idle_timeout: Duration,

    /// The hard timeout of a command that names none (hard_timeout_ms): it is ended after this
    /// long even while active. `none` for no limit; else 1s to 366d (what exec_command
    /// accepts).
    #[arg(long, value_name = "D|none", env = "QUIETUS_MCP_HARD_TIMEOUT", default_value = "2h",
          value_parser = parse_hard)]
    pub(crate) hard_timeout: HardTimeout,

    /// Where each session's complete log goes once its output passes the inline cap (default:
    /// the platform cache folder's quietus/logs).
    #[arg(long, value_name = "DIR", env = "QUIETUS_LOG_DIR")]
    pub(crate) log_dir: Option<PathBuf>,

    /// Announce every session that ends while no tool call is waiting on it, with a
    /// notifications/message (logging; the client's logging/setLevel applies): "session 3 ended
    /// after 5m idle: waiting for input — …".
    #[arg(long, env = "QUIETUS_MCP_ANNOUNCE_ENDED", default_value_t = false,
          value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1,
          default_missing_value = "true")]
    pub(crate) announce_ended: bool,
}

/// The server's default hard timeout: a duration or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HardTimeout(pub(crate) Option<Duration>);

/// The range `exec_command` accepts for the table's setting `name` (its `mcp` range), which
/// the server's own default of it keeps to as well.
fn mcp_range(name: &str) -> (Duration, Duration) {
    settings::by_name(name)
        .and_then(settings::Def::mcp_range)
        .expect("a setting of the table, with a range")
}

/// `D` within `name`'s `mcp` range.
fn within(name: &str, text: &str, none: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    let (min, max) = mcp_range(name);
    if d < min || d > max {
        return Err(format!(
            "{text:?} is out of range; it accepts {none}{} to {}",
            round_duration(min),
            round_duration(max)
        ));
    }
    Ok(d)
}

fn parse_idle(text: &str) -> Result<Duration, String> {
    within("idle_timeout", text, "")
}

fn parse_hard(text: &str) -> Result<HardTimeout, String> {
    if text.trim() == "none" {
        return Ok(HardTimeout(None));
    }
    within("hard_timeout", text, "none or ").map(|d| HardTimeout(Some(d)))
}

/// The server's settings.
#[derive(Debug, Clone)]
pub(crate) struct McpOptions {
    /// Live sessions at most.
    pub(crate) max_sessions: usize,
    /// The shell (`SHELL -c CMD`).
    pub(crate) shell: OsString,
    /// The default idle timeout.
    pub(crate) idle_timeout: Duration,
    /// The default hard timeout.
    pub(crate) hard_timeout: Option<Duration>,
    /// The log folder (`None`: the library's default).
    pub(crate) log_dir: Option<PathBuf>,
    /// Whether ended sessions are announced.
    pub(crate) announce_ended: bool,
}

impl McpOptions {
    /// The settings a command starts from before its arguments: the library's defaults (the
    /// settings table's), with the server's idle and hard timeouts.
    pub(crate) fn settings(&self) -> Draft {
        self.defaults()
            .into_iter()
            .fold(Draft::default(), |draft, (name, value)| {
                let def = settings::by_name(name).expect("a setting of the table");
                (def.apply)(draft, value)
            })
    }

    /// The server's own defaults of the table's settings (`--idle-timeout`,
    /// `--hard-timeout`), by the settings' names.
    pub(crate) fn defaults(&self) -> [(&'static str, SettingValue); 2] {
        [
            ("idle_timeout", SettingValue::Duration(self.idle_timeout)),
            (
                "hard_timeout",
                SettingValue::DurationOrNone(self.hard_timeout),
            ),
        ]
    }

    /// The server's default of the table's setting `name`, if it has its own.
    pub(crate) fn default_of(&self, name: &str) -> Option<SettingValue> {
        self.defaults()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, value)| value)
    }
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            max_sessions: 32,
            shell: "sh".into(),
            idle_timeout: Duration::from_secs(300),
            hard_timeout: Some(Duration::from_secs(7200)),
            log_dir: None,
            announce_ended: false,
        }
    }
}

impl From<McpCli> for McpOptions {
    fn from(cli: McpCli) -> Self {
        Self {
            max_sessions: cli.max_sessions as usize,
            shell: cli.shell,
            idle_timeout: cli.idle_timeout,
            hard_timeout: cli.hard_timeout.0,
            log_dir: cli.log_dir,
            announce_ended: cli.announce_ended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_have_their_defaults_and_ranges() {
        let cli = McpCli::try_parse_from(["mcp"]).unwrap();
        let options = McpOptions::from(cli);
        assert_eq!(options.max_sessions, 32);
        assert_eq!(options.idle_timeout, Duration::from_secs(300));
        assert_eq!(options.hard_timeout, Some(Duration::from_secs(7200)));
        assert!(!options.announce_ended);
        let cli = McpCli::try_parse_from([
            "mcp",
            "--hard-timeout",
            "none",
            "--shell",
            "bash",
            "--announce-ended",
            "--idle-timeout",
            "90s",
        ])
        .unwrap();
        assert_eq!(cli.hard_timeout, HardTimeout(None));
        assert_eq!(cli.shell, "bash");
        assert!(cli.announce_ended);
        assert_eq!(cli.idle_timeout, Duration::from_secs(90));
        assert!(McpCli::try_parse_from(["mcp", "--idle-timeout", "500ms"]).is_err());
        assert!(McpCli::try_parse_from(["mcp", "--max-sessions", "0"]).is_err());
        assert!(McpCli::try_parse_from(["mcp", "--hard-timeout", "400d"]).is_err());
        // The server's ranges are exec_command's, from the settings table.
        assert_eq!(parse_idle("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_idle("1d"), Ok(Duration::from_secs(86_400)));
        let err = parse_idle("1d1ms").unwrap_err();
        assert!(err.contains("it accepts 1s to 1d"), "{err}");
        assert!(parse_idle("999ms").is_err());
        assert_eq!(
            parse_hard("366d").map(|h| h.0),
            Ok(Some(Duration::from_secs(366 * 86_400)))
        );
        let err = parse_hard("366d1ms").unwrap_err();
        assert!(err.contains("it accepts none or 1s to 366d"), "{err}");
        use clap::CommandFactory;
        McpCli::command().debug_assert();
    }
}
