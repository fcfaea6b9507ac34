//! `quietus [OPTIONS] -- PROGRAM [ARGS]…`: run a program and end its whole process tree
//! only when it has stalled. `quietus --help` and docs/cli.md describe the contract.

mod cli;
mod jsonrpc;
mod locks;
mod mcp;
mod probe;
mod report;
mod serve;
mod settings;
mod sys;

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::Arc;

use quietus::{
    MonitorResult, OutputSink, Program, Session, SpawnError, Stdin, error::SpawnErrorKind,
};

use cli::options::Options;
use cli::report_file::ReportTarget;
use cli::signals::SignalHandling;
use cli::termination::TerminationMessage;
use report::{Context, Exit, Relay, Report};

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // `quietus __guardian` (hidden): the guardian of a supervising process, started by it.
    if args
        .get(1)
        .is_some_and(|a| a == quietus::supervisor::GUARDIAN_SUBCOMMAND)
    {
        return ExitCode::from(u8::try_from(quietus::supervisor::run_guardian()).unwrap_or(1));
    }
    // `quietus __settings` (hidden): the settings table as JSON, for clients' tests (the
    // Python package checks its keyword arguments against it).
    if args.get(1).is_some_and(|a| a == settings::PRINT_SUBCOMMAND) {
        return match writeln!(io::stdout(), "{}", settings::table_json()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(quietus::MonitorResult::EXIT_INTERNAL as u8),
        };
    }
    // Whatever this process inherited (SIGCHLD ignored, a low descriptor limit), it can
    // supervise; the programs get what it was started with. Before any thread exists.
    let prepared = quietus::supervisor::prepare();
    // The guardian of this process's sessions is this very executable (`/proc/self/exe` names
    // it even if its file was replaced since the start).
    quietus::supervisor::use_own_executable(if cfg!(target_os = "linux") {
        std::path::PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe().unwrap_or_else(|_| "quietus".into())
    });
    // `quietus serve`: the process service (`quietus -- serve` runs a program `serve`).
    if args.get(1).is_some_and(|a| a == "serve") {
        init_logging(log::LevelFilter::Warn);
        log_prepared(&prepared);
        return serve::main(args);
    }
    // `quietus mcp`: the Model Context Protocol server (`quietus -- mcp` runs a program).
    if args.get(1).is_some_and(|a| a == "mcp") {
        init_logging(log::LevelFilter::Warn);
        return mcp::main(args);
    }
    let options = match Options::parse_from(args.clone()) {
        Ok(options) => options,
        Err(e) => {
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ => {
                    let message = cli::options::explain_error(&e, &args);
                    say(&message);
                    if let Some(path) = cli::termination::path_of_refused(&args) {
                        let words = message.trim_end().replace("\n\n", "; ");
                        let line = cli::termination::line(
                            "not_started",
                            Exit::Code(MonitorResult::EXIT_INTERNAL),
                            words.strip_prefix("error: ").unwrap_or(&words),
                        );
                        write_termination_message(TerminationMessage::new(&path), &line);
                    }
                    ExitCode::from(MonitorResult::EXIT_INTERNAL as u8)
                }
            };
        }
    };
    init_logging(options.log_level());
    log_prepared(&prepared);
    let mut termination = options
        .cli
        .termination_message
        .as_deref()
        .map(TerminationMessage::new);
    let (exit, line) = run(&options, &mut termination);
    // The line on every way out (a signal to quietus included: written before it dies of it).
    let written = termination.is_none_or(|target| write_termination_message(target, &line));
    let exit = if written {
        exit
    } else {
        Exit::Code(MonitorResult::EXIT_INTERNAL)
    };
    match exit {
        Exit::Code(code) => {
            ExitCode::from(u8::try_from(code).unwrap_or(MonitorResult::EXIT_INTERNAL as u8))
        }
        Exit::Signal(signal) => cli::signals::die_by(signal),
    }
}

/// Says (at debug level) why the start state could not be prepared: quietus goes on, and
/// fails later with a plain message if it needed it.
fn log_prepared(prepared: &io::Result<()>) {
    if let Err(e) = prepared {
        log::debug!("cannot prepare this process to supervise: {e}");
    }
}

/// quietus's own messages: `quietus: warning: …` on stderr. `RUST_LOG`, when set,
/// chooses the filter; otherwise `level` (from -q / -v) is the level of quietus's own messages (other
/// crates' at most warnings).
fn init_logging(level: log::LevelFilter) {
    let mut builder = env_logger::Builder::new();
    builder.format(|buf, record| {
        let level = match record.level() {
            log::Level::Error => "error: ",
            log::Level::Warn => "warning: ",
            log::Level::Info => "",
            log::Level::Debug => "debug: ",
            log::Level::Trace => "trace: ",
        };
        writeln!(buf, "quietus: {level}{}", record.args())
    });
    match std::env::var("RUST_LOG") {
        Ok(filter) if !filter.is_empty() => {
            builder.parse_filters(&filter);
        }
        _ => {
            builder
                .filter_level(level.min(log::LevelFilter::Warn))
                .filter_module("quietus", level);
        }
    }
    builder.init();
}

/// Writes the termination message; says so on stderr when it cannot.
fn write_termination_message(target: TerminationMessage, line: &str) -> bool {
    let path = target.path().display().to_string();
    match target.write(line) {
        Ok(()) => true,
        Err(e) => {
            say_line(&format!(
                "quietus: cannot write the termination message to {path}: {e}"
            ));
            false
        }
    }
}

/// quietus's own failure before the program ran: says `message`, and gives the exit (125)
/// with the termination message's line.
fn failed(message: &str) -> (Exit, String) {
    say_line(&format!("quietus: {message}"));
    let exit = Exit::Code(MonitorResult::EXIT_INTERNAL);
    (exit, cli::termination::line("not_started", exit, message))
}

/// Runs the program: quietus's exit and the termination message's line.
fn run(options: &Options, termination: &mut Option<TerminationMessage>) -> (Exit, String) {
    let cli = &options.cli;
    let config = match options.config() {
        Ok(config) => config,
        Err(message) => return failed(&message),
    };
    // Caught before anything else is done (a signal that arrives before the spawn is passed
    // on once the child runs), and before the report file is created (no signal leaves it
    // empty). quietus becomes a child subreaper at the spawn (Linux): it reaps what it
    // adopts.
    let reap = cli::reaper::adopts_orphans() || cfg!(target_os = "linux");
    let mut signals = SignalHandling::install(reap, cli.pty);
    if options.no_watch() && options.setting("watch").is_some() {
        log::warn!("--watch has no effect with --no-watch: file activity does not count");
    }
    let (report, events) = match open_targets(options, termination) {
        Ok(targets) => targets,
        Err(ending) => return ending,
    };
    let context = Context {
        config: &config,
        command: &cli.command,
    };

    // --pty: the program's terminal has quietus's own terminal's size when there is one.
    let pty_size = cli
        .pty
        .then(|| cli::terminal::initial_pty_size(cli::terminal::own_terminal_size(), cli.pty_size));
    // Restored when `raw` drops: on every way out of `run`, which returns before `main` passes
    // on a signal by dying of it.
    let mut raw = raw_mode(cli);
    let session = match spawn_program(cli, &config, pty_size) {
        Ok(session) => Arc::new(session),
        Err(e) => {
            restore_terminal(raw.take());
            let (exit, message) = spawn_failed(&e, cli, signals, report, context);
            return (exit, cli::termination::line("not_started", exit, &message));
        }
    };
    signals.start(session.clone(), options.grace());
    if pty_size.is_some() {
        cli::relay::start_stdin(session.clone());
    }
    // observe mode (issue 43): the events are read to say each observation at the moment.
    let say_observed = config.observe() && options.summary_wanted();
    let event_writer = (events.is_some() || say_observed)
        .then(|| {
            cli::events::start(events, session.events(), say_observed)
                .inspect_err(|e| log::warn!("cannot start the event writer: {e}"))
                .ok()
        })
        .flatten();
    let result = session.wait();
    if let Some(writer) = event_writer {
        let _ = writer.join(); // it ends after `Closed`, which comes before the result
    }
    let received = signals.finish();
    let _ = io::stdout().flush();
    restore_terminal(raw.take());
    finish(options, &session, &result, &received, report, context)
}

/// --pty on a terminal: raw mode for the run, so every key (Ctrl-C too) reaches the program's
/// terminal as typed; restored when the guard drops.
fn raw_mode(cli: &cli::options::Cli) -> Option<cli::terminal::RawModeGuard> {
    if cli.pty {
        cli::terminal::RawModeGuard::on_stdin()
            .inspect_err(|e| log::warn!("cannot put the terminal in raw mode: {e}"))
            .ok()
            .flatten()
    } else {
        None
    }
}

/// The ending of a wait for a FIFO's reader that a signal gave up: quietus dies of it.
fn interrupted_ending(e: &io::Error) -> (Exit, String) {
    let exit = interrupted(e).unwrap_or(Exit::Code(MonitorResult::EXIT_INTERNAL));
    let words = format!("received a signal while waiting for a FIFO's reader: {e}");
    (exit, cli::termination::line("not_started", exit, &words))
}

/// Opens the files the options name: the termination message, the report and the events
/// (`Err`: quietus's ending, after saying why, when one cannot be written).
fn open_targets(
    options: &Options,
    termination: &mut Option<TerminationMessage>,
) -> Result<(Option<ReportTarget>, Option<cli::events::Target>), (Exit, String)> {
    let cli = &options.cli;
    if let Some(target) = termination.as_ref() {
        for (id, other) in [("report", &cli.report), ("events", &cli.events)] {
            if let Some(other) = other.as_deref()
                && is_same_file(target.path(), other)
            {
                let message = format!(
                    "invalid value for {}: {} is the same file as --{id} (each would overwrite \
                     the other); it accepts another file",
                    options.describe("termination_message"),
                    target.path().display()
                );
                *termination = None; // the other file's: not written
                return Err(failed(&message));
            }
        }
    }
    if let Some(target) = termination
        && let Err(e) = target.open()
    {
        let message = format!(
            "invalid value for {}: cannot write the termination message to {}: {e}",
            options.describe("termination_message"),
            target.path().display()
        );
        *termination = None; // nothing can be written there
        return Err(failed(&message));
    }
    if let (Some(report), Some(events)) = (cli.report.as_deref(), cli.events.as_deref())
        && is_same_file(report, events)
    {
        return Err(failed(&format!(
            "invalid value for {}: {} is the same file as --report (the report would \
             overwrite the events); it accepts another file, or - for stderr",
            options.describe("events"),
            events.display()
        )));
    }
    let report = match cli.report.as_deref().map(ReportTarget::open).transpose() {
        Ok(report) => report,
        Err(e) if interrupted(&e).is_some() => return Err(interrupted_ending(&e)),
        Err(e) => {
            return Err(failed(&format!(
                "invalid value for {}: cannot write the report to {}: {e}",
                options.describe("report"),
                cli.report
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )));
        }
    };
    let events = match cli
        .events
        .as_deref()
        .map(cli::events::Target::open)
        .transpose()
    {
        Ok(events) => events,
        Err(e) if interrupted(&e).is_some() => return Err(interrupted_ending(&e)),
        Err(e) => {
            return Err(failed(&format!(
                "invalid value for {}: cannot write the events to {}: {e}",
                options.describe("events"),
                cli.events
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )));
        }
    };
    Ok((report, events))
}

/// Whether `a` and `b` name the same file (`-`, stderr, is no file): the same path, the same
/// existing file (device and inode, whatever the spelling or link), or — for a file not created
/// yet — the same name in the same folder once the links on the way to it are followed as the
/// system would follow them when opening it (`s.json -> x.json`: the same file as `x.json`).
fn is_same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if a.as_os_str() == "-" || b.as_os_str() == "-" {
        return false;
    }
    if a == b {
        return true;
    }
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return (x.dev(), x.ino()) == (y.dev(), y.ino());
    }
    let (a, b) = (&final_target(a), &final_target(b));
    let place = |p: &std::path::Path| {
        let parent = match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => std::path::Path::new("."),
        };
        Some((
            std::fs::canonicalize(parent).ok()?,
            p.file_name()?.to_owned(),
        ))
    };
    place(a).is_some_and(|x| place(b).is_some_and(|y| x == y))
}

/// Where opening `path` for writing leads: each link at its end is followed (a relative target
/// read from the link's own folder), as the system does, at most 40 links deep (its own bound).
fn final_target(path: &std::path::Path) -> std::path::PathBuf {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&path) else {
            break;
        };
        path = match path.parent() {
            Some(folder) if target.is_relative() => folder.join(target),
            _ => target,
        };
    }
    path
}

/// The signal that gave up a wait for a FIFO's reader (`--report`, `--events`), if `error`
/// is one: quietus dies of it, as it would have at once without the wait.
fn interrupted(error: &io::Error) -> Option<Exit> {
    let signal = error
        .get_ref()?
        .downcast_ref::<cli::report_file::WaitInterrupted>()?;
    quietus::Signal::from_number(signal.0).map(Exit::Signal)
}

/// Spawns the program under supervision: on a terminal of `pty_size`, or with quietus's own
/// stdin and its output passed through to quietus's stdout and stderr.
fn spawn_program(
    cli: &cli::options::Cli,
    config: &quietus::MonitorConfig,
    pty_size: Option<cli::terminal::PtySize>,
) -> Result<Session, SpawnError> {
    let (program, args) = cli
        .command
        .split_first()
        .expect("clap requires at least one word after --");
    // A `Program`, not a `Command`: quietus sees every setting, so it starts the program
    // without forking itself.
    let mut command = Program::new(program).args(args);
    if cli.non_interactive {
        // A profile variable in quietus's own environment is the caller's choice for the
        // program (the command line's only way to set one): kept, as explicit.
        for (key, _) in quietus::SessionBuilder::NON_INTERACTIVE_ENV {
            if let Some(value) = std::env::var_os(key) {
                command = command.env(key, value);
            }
        }
    }
    let mut builder = Session::builder(command)
        .config(config.clone())
        .stdout(stdout_sink());
    if cli.non_interactive {
        // After the stdin below: the profile's /dev/null wins over the inherited stdin.
        builder = builder.non_interactive();
    }
    match pty_size {
        Some(size) => builder.pty(size.rows, size.cols),
        None => builder
            .stdin(Stdin::Inherit)
            .stderr(OutputSink::writer(io::stderr())),
    }
    .spawn()
}

/// The program could not be started: says why, writes the report, and gives quietus's exit
/// by the [`SpawnErrorKind`]: 127 or 126 when the system did not start the program (not found,
/// not executable), 125 when a part of quietus's own failed (configuration, log folder,
/// terminal, pipes, threads…).
fn spawn_failed(
    e: &SpawnError,
    cli: &cli::options::Cli,
    signals: SignalHandling,
    report: Option<ReportTarget>,
    context: Context<'_>,
) -> (Exit, String) {
    let kind = e.kind();
    let code = match kind {
        // Out of descriptors (anywhere in what the error wraps), processes or memory:
        // quietus's own want, not the program's.
        _ if sys::is_out_of_descriptors(e) => MonitorResult::EXIT_INTERNAL,
        SpawnErrorKind::Program if short_of_resources(e) => MonitorResult::EXIT_INTERNAL,
        SpawnErrorKind::Program if e.io_error_kind() == io::ErrorKind::NotFound => {
            MonitorResult::EXIT_NOT_FOUND
        }
        SpawnErrorKind::Program => MonitorResult::EXIT_CANNOT_EXECUTE,
        _ => MonitorResult::EXIT_INTERNAL, // quietus's own failure, not the program's
    };
    let message = report::error_chain(e);
    if code == MonitorResult::EXIT_INTERNAL && kind == SpawnErrorKind::Program {
        say_line(&format!(
            "quietus: {message}: quietus itself ran short, not the program"
        ));
    } else if kind == SpawnErrorKind::LogDir && cli.log_dir.is_none() {
        say_line(&format!("quietus: {message} (choose one with --log-dir)"));
    } else {
        say_line(&format!("quietus: {message}"));
    }
    let _ = signals.finish();
    if let Some(report) = report {
        write_report(report, &Report::not_started(context, code, message.clone()));
        // A report that cannot be written does not hide why the program did not run.
    }
    (Exit::Code(code), message)
}

/// Whether the system's error inside the spawn error `e` is a shortage of this process's (or
/// the machine's) resources: descriptors (`EMFILE`, `ENFILE`), processes (`EAGAIN`), memory
/// (`ENOMEM`).
fn short_of_resources(e: &SpawnError) -> bool {
    use rustix::io::Errno;
    let Some(system) = e.inner().downcast_ref::<io::Error>() else {
        return false;
    };
    system.raw_os_error().is_some_and(|errno| {
        [Errno::MFILE, Errno::NFILE, Errno::AGAIN, Errno::NOMEM]
            .iter()
            .any(|known| known.raw_os_error() == errno)
    })
}

/// After the run: quietus's exit, the lines it owes (incomplete logs, the summary) and the
/// report; and the termination message's line.
fn finish(
    options: &Options,
    session: &Session,
    result: &quietus::MonitorResult,
    received: &report::Received,
    report: Option<ReportTarget>,
    context: Context<'_>,
) -> (Exit, String) {
    let relay = Relay::of(session);
    let exit = report::exit_for(result, received, options.exit_codes());
    let exit = report::with_relay(exit, &relay);
    let words = cli::termination::finished_words(result, received, options.grace());
    for log in result.logs.iter().filter(|l| l.incomplete) {
        log::error!(
            "the {} log {} is incomplete ({} of {} bytes in it): {}",
            log.stream.name(),
            log.path.display(),
            log.written,
            log.bytes,
            log.error
                .as_ref()
                .map_or_else(|| "unknown reason".to_owned(), ToString::to_string)
        );
    }
    if options.summary_wanted()
        && let Some(line) = report::summary(result, received, options.grace())
    {
        say_line(&line);
    }
    if options.summary_wanted()
        && let Some(line) = report::observed_summary(result)
    {
        say_line(&line); // observe mode (issue 43)
    }
    if let Some(report) = report {
        let report_data = Report::finished(context, result, received, exit, &relay);
        if !write_report(report, &report_data) {
            let exit = Exit::Code(MonitorResult::EXIT_INTERNAL);
            let words = format!("{words}; the report could not be written");
            return (
                exit,
                cli::termination::line(result.outcome.name(), exit, &words),
            );
        }
    }
    (
        exit,
        cli::termination::line(result.outcome.name(), exit, &words),
    )
}

/// The pass-through sink of the program's stdout: quietus's stdout without a buffer in
/// between (a duplicate of descriptor 1), so the bytes counted as delivered are the bytes the
/// device took; `io::stdout()` if the duplicate cannot be made.
fn stdout_sink() -> OutputSink {
    use std::os::fd::AsFd;
    match io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => OutputSink::writer(std::fs::File::from(fd)),
        Err(_) => OutputSink::writer(io::stdout()),
    }
}

/// Puts quietus's own terminal back as it was (before quietus writes its own lines).
fn restore_terminal(raw: Option<cli::terminal::RawModeGuard>) {
    if let Some(mut raw) = raw
        && let Err(e) = raw.restore()
    {
        say_line(&format!(
            "quietus: cannot restore the terminal's settings: {e} (`stty sane` repairs it)"
        ));
    }
}

/// Writes the report; says so on stderr when it cannot.
fn write_report(target: ReportTarget, report: &Report) -> bool {
    let name = target.describe();
    match target.write(report) {
        Ok(()) => true,
        Err(e) => {
            say_line(&format!("quietus: cannot write the report to {name}: {e}"));
            false
        }
    }
}

/// Writes `text` to stderr; a closed or full stderr is not worth a panic (`eprintln!` would).
fn say(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// Writes `line` and a newline to stderr, ignoring failure.
fn say_line(line: &str) {
    let mut stderr = io::stderr().lock();
    let _ = stderr.write_all(line.as_bytes());
    let _ = stderr.write_all(b"\n");
}
