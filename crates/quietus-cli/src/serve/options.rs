//! `quietus serve`'s options: flags, their `QUIETUS_*` variables, and the settings they
//! make ([`ServeOptions`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use super::matching::CommandFilter;

const AFTER_HELP: &str = "\
Every option can also be set with QUIETUS_<OPTION>, e.g. QUIETUS_MAX_PROCESSES=8; the
command line wins. The protocol (methods, notifications, error codes) is in docs/serve.md.
Exit status: 0 when the client goes away (end of stdin, a closed stdout) or
on TERM/INT/HUP, after every process was ended; 125 for an invalid option.";

/// `quietus serve`'s options.
#[derive(Debug, Parser)]
#[command(
    name = "quietus serve",
    bin_name = "quietus serve",
    version,
    about = "Serve supervised processes over stdio: JSON-RPC 2.0, one JSON object per line.",
    after_help = AFTER_HELP
)]
pub(crate) struct ServeCli {
    /// Live processes at most; a process/start beyond it is rejected (-32002), not queued.
    /// The default, 1000, is what one server was measured to hold on 2 cores (sleeping
    /// sessions: 3 threads, about 4 descriptors and 90 KB each, docs/benchmarks.md);
    /// it needs a descriptor limit of about 6000.
    #[arg(long, value_name = "N", env = "QUIETUS_MAX_PROCESSES", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) max_processes: u32,

    /// Output kept in memory per process and stream, for process/snapshot (half head, half
    /// tail; the middle is counted). 0 to 1073741824.
    #[arg(long, value_name = "BYTES", env = "QUIETUS_RETAIN_BYTES", default_value_t = 1 << 20,
          value_parser = clap::value_parser!(u32).range(0..=(1 << 30)))]
    pub(crate) retain_bytes: u32,

    /// When the client goes away or the server gets TERM/INT/HUP, each process's grace
    /// between TERM and KILL is cut to this. Durations: 500ms, 5s, 1m.
    #[arg(long, value_name = "D", env = "QUIETUS_SHUTDOWN_GRACE", default_value = "5s",
          value_parser = parse_grace)]
    pub(crate) shutdown_grace: Duration,

    /// Which processes get process/output notifications: all, none, or program names
    /// separated by commas, matched on the base name through env, VAR=…, npx, pnpx, bunx,
    /// pnpm, npm exec and yarn (playwright matches `npx playwright test`).
    #[arg(long, value_name = "all|none|LIST", env = "QUIETUS_OUTPUT_NOTIFICATIONS",
          default_value = "all", value_parser = |s: &str| CommandFilter::parse(s))]
    pub(crate) output_notifications: CommandFilter,

    /// At most one process/output notification per process and stream per this interval
    /// (the library's event throttle). 0 to 1h.
    #[arg(long, value_name = "D", env = "QUIETUS_OUTPUT_THROTTLE", default_value = "150ms",
          value_parser = parse_grace)]
    pub(crate) output_throttle: Duration,

    /// Where complete logs go once a stream passes 4 KiB (default: the platform cache
    /// folder's quietus/logs, or none with a warning).
    #[arg(long, value_name = "DIR", env = "QUIETUS_LOG_DIR")]
    pub(crate) log_dir: Option<PathBuf>,

    /// Print the protocol as one JSON Schema document (methods, params, results,
    /// notifications, error codes and kinds, enums; docs/serve.schema.json) and exit.
    #[arg(long)]
    pub(crate) schema: bool,
}

fn parse_grace(text: &str) -> Result<Duration, String> {
    let d = crate::settings::parse::parse_duration(text)?;
    if d > Duration::from_secs(3600) {
        return Err(format!("{text:?} is out of range; it accepts 0 to 1h"));
    }
    Ok(d)
}

/// The server's settings.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    pub(crate) max_processes: usize,
    pub(crate) retain_bytes: usize,
    pub(crate) shutdown_grace: Duration,
    pub(crate) output_filter: CommandFilter,
    pub(crate) output_throttle: Duration,
    pub(crate) log_dir: Option<PathBuf>,
}

impl ServeOptions {
    /// `all`, `none` or the names, for `initialize`.
    pub(crate) fn output_description(&self) -> serde_json::Value {
        match &self.output_filter {
            CommandFilter::All => "all".into(),
            CommandFilter::None => "none".into(),
            CommandFilter::Names(names) => names.clone().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_have_their_variables_and_ranges() {
        let cli = ServeCli::try_parse_from([
            "serve",
            "--max-processes",
            "2",
            "--output-notifications",
            "codex,playwright",
        ])
        .unwrap();
        assert_eq!(cli.max_processes, 2);
        assert_eq!(
            cli.output_notifications,
            CommandFilter::Names(vec!["codex".into(), "playwright".into()])
        );
        assert_eq!(cli.shutdown_grace, Duration::from_secs(5));
        assert!(ServeCli::try_parse_from(["serve", "--max-processes", "0"]).is_err());
        assert!(ServeCli::try_parse_from(["serve", "--shutdown-grace", "2h"]).is_err());
        use clap::CommandFactory;
        ServeCli::command().debug_assert();
    }
}
