//! `stallwatch [OPTIONS] -- PROGRAM [ARGS]…`: run a program and end its whole process tree
//! only when it has stalled.

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use stallwatch::{
    ConfigError, EXIT_CANNOT_EXECUTE, EXIT_INTERNAL, EXIT_NOT_FOUND, HumanDuration, KillLadder,
    MonitorConfig, MonitorResult, Outcome, OutputSink, Session, Signal,
};

/// Run PROGRAM and end its whole process tree only when it has truly stalled: no output on
/// stdout or stderr for the idle timeout. A hard timeout ends it even while active.
///
/// Exit status: the program's own; 124 when stallwatch ended it for a timeout; 128+N when it
/// died of signal N; 125 for stallwatch's own failures (bad options); 126 when PROGRAM cannot
/// be executed; 127 when it is not found.
#[derive(Debug, Parser)]
#[command(
    name = "stallwatch",
    version,
    after_help = "Examples:\n  stallwatch --idle-timeout 3s -- sh -c 'echo working; sleep 10'\n  \
                  stallwatch -i 10m -t 2h -- codex exec \"fix the tests\""
)]
struct Cli {
    /// End the program when it has been silent this long (e.g. 300ms, 30s, 5m, 1h30m).
    #[arg(short, long, value_name = "D", default_value = "5m", value_parser = parse_duration)]
    idle_timeout: Duration,

    /// End the program after this long even when active (e.g. 2h).
    #[arg(short = 't', long, value_name = "D", value_parser = parse_duration)]
    hard_timeout: Option<Duration>,

    /// Time between the polite signal (TERM) and SIGKILL (e.g. 5s).
    #[arg(short, long, value_name = "D", default_value = "5s", value_parser = parse_duration)]
    grace: Duration,

    /// The program to run, then its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    command: Vec<OsString>,
}

/// Parses `1500ms`, `30s`, `5m`, `2h`, `1h30m`, `1.5s`; a bare number is seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("{text:?} is not a duration: use a number with a unit, like 1500ms, 30s, 5m, 1h30m")
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(split);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        total += Duration::try_from_secs_f64(number * scale).map_err(|_| bad())?;
        rest = tail;
    }
    Ok(total)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(EXIT_INTERNAL as u8),
            };
        }
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .format_target(false)
        .init();
    ExitCode::from(run(cli) as u8)
}

fn run(cli: Cli) -> i32 {
    let config = MonitorConfig::default()
        .idle_timeout(cli.idle_timeout)
        .hard_timeout(cli.hard_timeout)
        .kill_ladder(KillLadder::polite(Signal::TERM, cli.grace));
    if let Err(e) = config.validate() {
        eprintln!("stallwatch: {}", option_error(&e));
        return EXIT_INTERNAL;
    }
    let (program, args) = cli
        .command
        .split_first()
        .expect("clap requires at least one word after --");
    let mut command = Command::new(program);
    command.args(args);
    let session = Session::builder(command)
        .config(config)
        .stdin(Stdio::inherit())
        .stdout(OutputSink::writer(io::stdout()))
        .stderr(OutputSink::writer(io::stderr()))
        .spawn();
    let session = match session {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stallwatch: {e}");
            return match e.kind() {
                io::ErrorKind::NotFound => EXIT_NOT_FOUND,
                io::ErrorKind::InvalidInput => EXIT_INTERNAL,
                _ => EXIT_CANNOT_EXECUTE,
            };
        }
    };
    let session = Arc::new(session);
    let forwarding = forward_signals(&session, cli.grace);
    let result = session.wait();
    if let Some(handle) = forwarding {
        handle.close();
    }
    let _ = io::stdout().flush();
    if let Some(line) = summary(&result) {
        eprintln!("{line}");
    }
    result.exit_code()
}

/// Passes TERM, INT, HUP and QUIT sent to stallwatch on to the child's whole tree: the same
/// signal first, then the rest of the ladder after the grace. A second INT kills at once.
fn forward_signals(
    session: &Arc<Session>,
    grace: Duration,
) -> Option<signal_hook::iterator::Handle> {
    let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGQUIT])
    {
        Ok(signals) => signals,
        Err(e) => {
            log::warn!("cannot catch signals ({e}); they will not be passed on to the child");
            return None;
        }
    };
    let handle = signals.handle();
    let session = session.clone();
    let started = std::thread::Builder::new()
        .name("stallwatch-signals".into())
        .spawn(move || {
            let mut received = 0;
            for number in signals.forever() {
                received += 1;
                let Some(signal) = Signal::from_number(number) else {
                    continue;
                };
                if received == 1 {
                    log::info!("received {signal}; passing it on to the child's tree");
                    session.terminate_with(&KillLadder::polite(signal, grace));
                } else if number == SIGINT {
                    log::info!("second INT: killing the child's tree");
                    session.kill();
                }
            }
        });
    match started {
        Ok(_) => Some(handle),
        Err(e) => {
            log::warn!("cannot start the signal thread ({e})");
            None
        }
    }
}

/// A configuration error in the words of the command line.
fn option_error(error: &ConfigError) -> String {
    match error {
        ConfigError::OutOfRange {
            field,
            value,
            min,
            max,
        } => {
            let option = match *field {
                "idle_timeout" => "--idle-timeout",
                "hard_timeout" => "--hard-timeout",
                "kill_ladder.grace" => "--grace",
                other => other,
            };
            format!(
                "invalid value for {option}: {} is out of range; it accepts {} to {}",
                HumanDuration(*value),
                HumanDuration(*min),
                HumanDuration(*max)
            )
        }
        other => format!("invalid option: {other}"),
    }
}

/// The one line printed when stallwatch ended the child.
fn summary(result: &MonitorResult) -> Option<String> {
    let why = match &result.outcome {
        Outcome::IdleTimeout(report) => format!(
            "ended after {} idle ({report})",
            HumanDuration(report.idle_timeout)
        ),
        Outcome::HardTimeout { after } => {
            format!("ended at the hard timeout of {}", HumanDuration(*after))
        }
        _ => return None,
    };
    let sent: Vec<String> = result.signals_sent.iter().map(|s| s.to_string()).collect();
    let mut line = format!("stallwatch: {why}; sent {}", sent.join(", then "));
    if result.termination_unproven {
        line.push_str("; termination unproven");
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        for bad in ["", "5x", "ms", "-1s", "1h30", "abc"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
