//! [`Session`]: the handle a caller holds on one supervised child.

use std::fmt;
use std::io;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};

use crate::activity::{ActivityBoard, ActivitySource};
use crate::capture::CapturedOutput;
use crate::clock::Clock;
use crate::config::{KillLadder, MonitorConfigBuilder, validate_idle_timeout};
use crate::contract::{Control, ControlTx, SessionState, Shared};
use crate::environment::Environment;
use crate::error::{ConfigError, SpawnError};
use crate::events::Event;
use crate::monitor::{self, Launch};
use crate::outcome::MonitorResult;
use crate::pid::Pid;
use crate::program::{Program, Stdin};
use crate::sources::output::OutputSink;
use crate::stream::Stream;

/// Configures and starts one supervised child. Made by [`Session::builder`].
pub struct SessionBuilder {
    command: Command,
    /// Whether `command` is a [`Program`]'s: no setting quietus cannot see.
    plain: bool,
    config: MonitorConfigBuilder,
    clock: Clock,
    stdout: OutputSink,
    stderr: OutputSink,
    stdin: Option<Stdin>,
    environment: Environment,
    pty: Option<(u16, u16)>,
    non_interactive: bool,
}

impl fmt::Debug for SessionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("command", &self.command)
            .field("config", &self.config)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .field("stdin", &self.stdin)
            .field("environment", &self.environment)
            .field("pty", &self.pty)
            .field("non_interactive", &self.non_interactive)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    /// The variables of the non-interactive profile ([`SessionBuilder::non_interactive`]): what
    /// makes common tools fail fast, or go on without asking, instead of waiting for an answer.
    pub const NON_INTERACTIVE_ENV: &'static [(&'static str, &'static str)] = &[
        // git: no username/password prompt on the terminal; no editor for commit, merge, tag or
        // rebase messages (`true` leaves the message as it is: an empty one aborts); no pager.
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_EDITOR", "true"),
        ("GIT_SEQUENCE_EDITOR", "true"),
        ("GIT_MERGE_AUTOEDIT", "no"),
        ("GIT_PAGER", "cat"),
        // git over ssh: never a password or host-key question (fails instead).
        ("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
        // Git Credential Manager: no dialog.
        ("GCM_INTERACTIVE", "never"),
        // ssh's askpass helper: never started.
        ("SSH_ASKPASS_REQUIRE", "never"),
        // man, systemctl, journalctl and anything else that pages.
        ("PAGER", "cat"),
        ("MANPAGER", "cat"),
        ("SYSTEMD_PAGER", "cat"),
        // apt and dpkg: no configuration questions.
        ("DEBIAN_FRONTEND", "noninteractive"),
        // npm and npx: no "Ok to proceed?" (npx installs the package and goes on).
        ("npm_config_yes", "true"),
        // pip: no prompt (for credentials, say): fails instead.
        ("PIP_NO_INPUT", "1"),
    ];

    /// The monitoring configuration (default: [`MonitorConfig::default`](crate::MonitorConfig::default)): a built one, or
    /// its builder, which [`spawn`](Self::spawn) builds.
    pub fn config(mut self, config: impl Into<MonitorConfigBuilder>) -> Self {
        self.config = config.into();
        self
    }

    /// The clock every duration is measured with (default: [`Clock::system`]). Tests pass a
    /// [`MockClock`](crate::MockClock) (or a [`Clock`] made from one).
    pub fn clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// Where the child's stdout goes (default: discarded, still counted as activity).
    pub fn stdout(mut self, sink: OutputSink) -> Self {
        self.stdout = sink;
        self
    }

    /// Where the child's stderr goes (default: discarded, still counted as activity).
    pub fn stderr(mut self, sink: OutputSink) -> Self {
        self.stderr = sink;
        self
    }

    /// The child's stdin (default: [`Stdin::Null`], whatever the command said):
    /// [`Stdin::Piped`] for a pipe the caller writes to, [`Stdin::Inherit`], or a
    /// [`Stdio`](std::process::Stdio) of the caller's (a file: `Stdin::from(Stdio::from(file))`, or just the
    /// `Stdio`).
    ///
    /// ```
    /// use quietus::{Program, Session, Stdin};
    ///
    /// let session = Session::builder(Program::new("cat")).stdin(Stdin::Piped).spawn()?;
    /// session.write_stdin(b"typed\n")?;
    /// session.close_stdin(); // cat sees end-of-file and exits
    /// assert_eq!(session.wait().exit_code(), 0);
    /// assert_eq!(session.output().stdout.unwrap().render_lossy(), "typed\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stdin(mut self, stdin: impl Into<Stdin>) -> Self {
        self.stdin = Some(stdin.into());
        self
    }

    /// Runs the child on a pseudo-terminal of `rows` x `cols` instead of pipes (default: pipes).
    ///
    /// The child leads a new session with the terminal as its controlling tty and as its
    /// stdin, stdout and stderr; its process group is still its pid, so the kill ladder and
    /// the escapee tracking work as in pipe mode. What it writes to the terminal is one stream,
    /// [`Stream::Terminal`] (raw bytes, escape sequences included): it counts as output
    /// activity, goes to the [`stdout`](Self::stdout) sink, is kept in
    /// [`CapturedOutput::terminal`](crate::CapturedOutput::terminal) and logged like a pipe.
    /// [`Session::write_stdin`] types into the terminal, [`Session::close_stdin`] sends
    /// end-of-file the terminal way, [`Session::interrupt`] sends Ctrl-C through it and
    /// [`Session::resize`] resizes it. The [`stderr`](Self::stderr) sink is not used, and
    /// [`stdin`](Self::stdin) other than [`Stdin::Null`] or [`Stdin::Piped`] cannot be combined
    /// with a terminal (the spawn fails with
    /// [`SpawnErrorKind::Config`](crate::error::SpawnErrorKind::Config), `InvalidInput`, as it does
    /// for a zero `rows` or `cols`); [`Stdin::Piped`] changes nothing (the terminal is always
    /// writable).
    ///
    /// ```
    /// use std::process::Command;
    /// use quietus::Session;
    ///
    /// let mut command = Command::new("sh");
    /// command.args(["-c", "test -t 0 && test -t 1 && echo tty; stty size"]);
    /// let session = Session::builder(command).pty(30, 100).spawn()?;
    /// session.wait();
    /// let text = session.output().terminal.unwrap().render_lossy();
    /// assert_eq!(text, "tty\r\n30 100\r\n"); // the terminal turns \n into \r\n
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn pty(mut self, rows: u16, cols: u16) -> Self {
        self.pty = Some((rows, cols));
        self
    }

    /// The non-interactive profile: a program that would ask a question fails at once (or
    /// goes on without asking) instead of waiting for an answer nobody gives.
    ///
    /// - stdin is `/dev/null` (whatever [`stdin`](Self::stdin) said): a `read` sees
    ///   end-of-file;
    /// - in pipe mode the child leads a session of its own without a controlling terminal, so
    ///   opening `/dev/tty` fails at once (ENXIO) even when the caller runs on a terminal (with
    ///   [`pty`](Self::pty) the terminal stays: only the variables apply);
    /// - the variables of [`NON_INTERACTIVE_ENV`](Self::NON_INTERACTIVE_ENV) are set, except
    ///   those the caller set (or removed) explicitly on the command, and `GIT_SSH_COMMAND`
    ///   when the child's git has an ssh command of its own: `GIT_SSH_COMMAND` or `GIT_SSH` in
    ///   its environment, or `core.sshCommand` configured (`git config --get core.sshCommand`
    ///   in its working directory).
    ///
    /// ```
    /// use std::process::Command;
    /// use quietus::Session;
    ///
    /// let mut command = Command::new("sh");
    /// let script = "read line || echo eof; (: </dev/tty) 2>/dev/null || echo no tty; echo $GIT_PAGER";
    /// command.args(["-c", script]);
    /// let session = Session::builder(command).non_interactive().spawn()?;
    /// assert_eq!(session.wait().exit_code(), 0);
    /// let text = session.output().stdout.unwrap().render_lossy();
    /// assert_eq!(text, "eof\nno tty\ncat\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn non_interactive(mut self) -> Self {
        self.non_interactive = true;
        self
    }

    /// The child's environment: an allowlist over an empty environment, overlays, an isolated
    /// home (default: [`Environment::inherit_all`], the command's own settings). Applied at
    /// [`spawn`](Self::spawn); the variables set on the command itself are kept.
    ///
    /// ```
    /// use std::process::Command;
    /// use quietus::{Environment, MonitorConfig, Session};
    ///
    /// let home = tempfile::tempdir()?;
    /// let mut command = Command::new("sh");
    /// command.args(["-c", "echo \"$HOME|$GREETING|${SECRET-unset}\""]);
    /// let session = Session::builder(command)
    ///     .environment(
    ///         Environment::empty()
    ///             .inherit("PATH")
    ///             .set("GREETING", "hi")
    ///             .home(home.path()),
    ///     )
    ///     .spawn()?;
    /// let result = session.wait();
    /// let stdout = session.output().stdout.unwrap().render_lossy();
    /// assert_eq!(stdout, format!("{}|hi|unset\n", home.path().display()));
    /// assert_eq!(result.home.unwrap().root, home.path());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn environment(mut self, environment: Environment) -> Self {
        self.environment = environment;
        self
    }

    /// Validates the configuration, prepares the environment, spawns the child as the leader
    /// of a new process group with stdout and stderr piped, and starts its reader and monitor
    /// threads.
    ///
    /// # Errors
    ///
    /// A [`SpawnError`] whose [`kind`](SpawnError::kind) says which step failed (an
    /// `io::Error` of the failure's kind by `From`, so `?` works in an `io::Result` function),
    /// and nothing is left running:
    ///
    /// - [`Config`](crate::error::SpawnErrorKind::Config): an invalid configuration, or settings that
    ///   do not go together (a [`ConfigError`] inside; `InvalidInput`; nothing is spawned);
    /// - [`Home`](crate::error::SpawnErrorKind::Home): an isolated home folder that cannot be created
    ///   (the message names it); a seed file that cannot be copied is not an error (see
    ///   [`IsolatedHome::failed`](crate::IsolatedHome::failed));
    /// - [`LogDir`](crate::error::SpawnErrorKind::LogDir): a named log folder that cannot be used;
    /// - [`Terminal`](crate::error::SpawnErrorKind::Terminal), [`Pipe`](crate::error::SpawnErrorKind::Pipe),
    ///   [`WorkingDir`](crate::error::SpawnErrorKind::WorkingDir): the terminal, the output pipes, or
    ///   the folder the watched roots are relative to cannot be had;
    /// - [`Program`](crate::error::SpawnErrorKind::Program): the spawn's own error, its kind kept
    ///   (`NotFound`, `PermissionDenied`…), with a message that names the program;
    /// - [`Thread`](crate::error::SpawnErrorKind::Thread): a thread that cannot be started (a child
    ///   already started is then killed and reaped).
    pub fn spawn(mut self) -> Result<Session, SpawnError> {
        let config = self.config.build().map_err(SpawnError::config)?;
        if self.pty.is_some() && matches!(self.stdin, Some(Stdin::Given(_) | Stdin::Inherit)) {
            return Err(SpawnError::config(ConfigError::StdinWithTerminal));
        }
        if let Some((rows, cols)) = self.pty
            && (rows == 0 || cols == 0)
        {
            return Err(SpawnError::config(ConfigError::TerminalSize { rows, cols }));
        }
        // What the caller set (or removed) on the command itself is never overridden.
        let explicit: Vec<std::ffi::OsString> =
            self.command.get_envs().map(|(k, _)| k.to_owned()).collect();
        let home = self.environment.apply(&mut self.command)?;
        if self.non_interactive {
            let own_ssh =
                crate::environment::has_own_ssh_command(&self.command, self.environment.clears());
            for (key, value) in Self::NON_INTERACTIVE_ENV {
                let users = explicit.iter().any(|k| k == key);
                if !users && (*key != "GIT_SSH_COMMAND" || !own_ssh) {
                    self.command.env(key, value);
                }
            }
            self.stdin = Some(Stdin::Null);
        }
        let clock = self.clock.clone();
        let exec = if self.plain {
            monitor::Exec::Ordered {
                env_cleared: self.environment.clears(),
            }
        } else {
            monitor::Exec::Std
        };
        let attach = match self.pty {
            Some((rows, cols)) => monitor::Attach::Terminal { rows, cols },
            None if self.non_interactive => monitor::Attach::Session,
            None => monitor::Attach::Group,
        };
        let launched = monitor::launch(Launch {
            command: self.command,
            exec,
            config,
            clock: self.clock,
            stdout: self.stdout,
            stderr: self.stderr,
            stdin: self.stdin.unwrap_or_default(),
            home,
            attach,
        })
        .map_err(SpawnError::from_step)?;
        Ok(Session {
            id: launched.id,
            pid: launched.pid,
            clock,
            board: launched.board,
            control: launched.control,
            done: launched.done,
            shared: launched.shared,
        })
    }

    /// The command to run.
    pub(crate) fn command(&self) -> &Command {
        &self.command
    }
}

/// A running (or finished) supervised child.
///
/// Get one from [`Session::spawn`] or [`Session::builder`]. The monitor thread decides on its
/// own when the child is stale and ends its process tree; the session lets the caller wait for
/// the [`MonitorResult`], send keepalives, and end the child early.
///
/// **Dropping a running session takes its tree down**: the monitor starts the kill ladder and
/// carries it through in the background. Call [`wait`](Self::wait) first to let the child run.
pub struct Session {
    id: u64,
    pid: Pid,
    clock: Clock,
    board: Arc<ActivityBoard>,
    control: ControlTx,
    done: Receiver<()>,
    shared: Arc<Shared>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("pid", &self.pid)
            .field("finished", &self.finished().is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Spawns `command` under supervision with `config`, the system clock, and discarding
    /// sinks. See [`SessionBuilder::spawn`] for the errors.
    pub fn spawn(
        command: impl Into<Program>,
        config: impl Into<MonitorConfigBuilder>,
    ) -> Result<Session, SpawnError> {
        Session::builder(command).config(config).spawn()
    }

    /// A builder for `command` (a [`Program`], or a std [`Command`]), to choose sinks, stdin,
    /// clock and configuration.
    pub fn builder(command: impl Into<Program>) -> SessionBuilder {
        let (command, plain) = command.into().into_parts();
        SessionBuilder {
            command,
            plain,
            config: MonitorConfigBuilder::default(),
            clock: Clock::system(),
            stdout: OutputSink::Discard,
            stderr: OutputSink::Discard,
            stdin: None,
            environment: Environment::inherit_all(),
            pty: None,
            non_interactive: false,
        }
    }

    /// This session's id, unique within the process (it names the session's threads, its log
    /// lines and its `QUIETUS_SESSION` tag); not public: the one id a caller meets is a
    /// [`Registry`](crate::Registry)'s number.
    #[cfg(test)]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The child's pid, which is also its process-group id.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Counts as activity now.
    pub fn keepalive(&self) {
        self.board.stamp(&ActivitySource::Keepalive);
    }

    /// Starts the kill ladder on the child's tree now (returns at once; [`wait`](Self::wait)
    /// for the result). The outcome becomes [`Outcome::Terminated`](crate::Outcome::Terminated)
    /// unless the run had already ended for another reason.
    pub fn terminate(&self) {
        let _ = self.control.send(Control::Terminate);
    }

    /// Like [`terminate`](Self::terminate), with `ladder` instead of the configured one (for
    /// example to pass on a signal the supervisor itself received: `KillLadder::polite(INT, 5s)`).
    pub fn terminate_with(&self, ladder: &KillLadder) {
        let _ = self
            .control
            .send(Control::TerminateWith(ladder.effective()));
    }

    /// Sends SIGKILL to the child's tree now and returns at once, without waiting
    /// ([`wait`](Self::wait) for the result). In the middle of a ladder, skips straight to its
    /// SIGKILL. The outcome becomes [`Outcome::Terminated`](crate::Outcome::Terminated)
    /// `{ forced: true }` unless the run had already ended for another reason.
    ///
    /// Like std's `Child::kill`, it only sends the signal; to end the tree with the ladder and
    /// wait for it, call [`terminate`](Self::terminate) then [`wait`](Self::wait).
    pub fn kill(&self) {
        let _ = self.control.send(Control::Kill);
    }

    /// Where the session is in its life.
    pub fn state(&self) -> SessionState {
        self.shared.state()
    }

    /// Time since the spawn (by the session's clock); the whole runtime once finished.
    pub fn uptime(&self) -> Duration {
        match self.finished() {
            Some(result) => result.runtime,
            None => self
                .clock
                .now()
                .saturating_duration_since(self.board.origin()),
        }
    }

    /// The idle timeout in force (it changes with [`set_idle_timeout`](Self::set_idle_timeout)).
    pub fn idle_timeout(&self) -> Duration {
        self.shared.idle_timeout()
    }

    /// How long the child may stay quiet before the watchdog fires, while it runs (`None` once
    /// the ladder started or the run is over).
    pub fn idle_left(&self) -> Option<Duration> {
        if self.state() != SessionState::Running {
            return None;
        }
        let last = crate::verdict::last_activity(&self.board.read(), &self.shared.caps);
        Some((last + self.idle_timeout()).saturating_duration_since(self.clock.now()))
    }

    /// The log files written so far (a stream gets one once it passes the spill threshold).
    pub fn log_paths(&self) -> Vec<std::path::PathBuf> {
        self.shared
            .spills
            .iter()
            .flatten()
            .filter_map(|s| s.lock().path())
            .collect()
    }

    /// Replaces the idle timeout from now on (without counting as activity).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (and no change) when `idle_timeout` is out of range.
    pub fn set_idle_timeout(&self, idle_timeout: Duration) -> Result<(), ConfigError> {
        validate_idle_timeout(idle_timeout)?;
        self.replace_idle_timeout(idle_timeout);
        Ok(())
    }

    /// Publishes a validated idle timeout (readable at once through
    /// [`idle_timeout`](Self::idle_timeout)) and tells the monitor, which re-plans.
    fn replace_idle_timeout(&self, idle_timeout: Duration) {
        self.shared.set_idle_timeout(idle_timeout);
        let _ = self.control.send(Control::IdleTimeoutChanged);
    }

    /// Sends `signal` to the child's whole process group now (while it runs; no ladder
    /// follows), and to the child by pid when it has left that group (never to the group it
    /// joined, nor to quietus's own). For example [`Signal::INT`](crate::Signal::INT) to interrupt an agent's turn.
    pub fn signal(&self, signal: crate::signal::Signal) {
        let _ = self.control.send(Control::Signal(signal));
    }

    /// Queues `data` for the child's stdin (see [`Stdin::Piped`]; in a terminal
    /// session, [`SessionBuilder::pty`], the bytes are typed into the terminal). Returns once
    /// the data is queued; waits at most 5 s when the queue (64 writes) is full because the
    /// child does not read.
    ///
    /// # Errors
    ///
    /// `NotConnected` when stdin is not piped or was closed; `BrokenPipe` when the child no
    /// longer reads it (it exited or closed it); `TimedOut` when the queue stayed full.
    pub fn write_stdin(&self, data: &[u8]) -> io::Result<()> {
        self.write_stdin_timeout(data, STDIN_QUEUE_WAIT)
    }

    /// [`write_stdin`](Self::write_stdin), waiting at most `wait` (zero: not at all) for room
    /// in the queue when the child does not read. A server answering many writes for a child
    /// that stopped reading refuses the ones behind the first timeout at once this way.
    ///
    /// # Errors
    ///
    /// As [`write_stdin`](Self::write_stdin); `TimedOut` when the queue stayed full for `wait`.
    pub fn write_stdin_timeout(&self, data: &[u8], wait: Duration) -> io::Result<()> {
        let guard = self.shared.stdin.lock();
        let Some(tx) = guard.as_ref() else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the child's stdin is not piped (Stdin::Piped) or was closed",
            ));
        };
        let tx = tx.clone();
        drop(guard);
        match tx.send_timeout(data.to_vec(), wait) {
            Ok(()) => Ok(()),
            Err(crossbeam_channel::SendTimeoutError::Timeout(_)) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the child is not reading its stdin (the queue stayed full for {})",
                    crate::outcome::HumanDuration(wait)
                ),
            )),
            Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the child no longer reads its stdin",
            )),
        }
    }

    /// Closes the child's stdin once the queued data is written (the child sees end-of-file).
    /// In a terminal session the terminal stays open: end-of-file is sent the terminal way
    /// (its EOF character at the start of a line; twice after a partial line, the first
    /// delivering it).
    pub fn close_stdin(&self) {
        self.shared.stdin.lock().take();
    }

    /// Whether the child runs on a pseudo-terminal ([`SessionBuilder::pty`]).
    pub fn is_terminal(&self) -> bool {
        self.shared.terminal.is_some()
    }

    /// The size of the child's terminal, (rows, columns); `None` in a pipe session or when it
    /// cannot be read.
    pub fn terminal_size(&self) -> Option<(u16, u16)> {
        self.shared.terminal.as_ref()?.size().ok()
    }

    /// Resizes the child's terminal to `rows` x `cols`; the kernel sends SIGWINCH to the
    /// terminal's foreground process group.
    ///
    /// # Errors
    ///
    /// `Unsupported` in a pipe session; `InvalidInput` for a zero dimension; the system's
    /// error otherwise.
    pub fn resize(&self, rows: u16, cols: u16) -> io::Result<()> {
        match &self.shared.terminal {
            Some(terminal) => terminal.resize(rows, cols),
            None => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "only a terminal session (SessionBuilder::pty) can be resized",
            )),
        }
    }

    /// Ctrl-C. In a terminal session, through the terminal: its interrupt character (0x03),
    /// so the line discipline sends SIGINT to the terminal's foreground process group — the
    /// right group even when a shell in the child moved a job into another one; a program
    /// that turned signals off (raw mode) reads the byte 0x03 itself, as from a key press. In
    /// a pipe session, SIGINT to the child's process group ([`signal`](Self::signal)).
    ///
    /// # Errors
    ///
    /// Terminal sessions only: the terminal cannot be written (the run is over).
    pub fn interrupt(&self) -> io::Result<()> {
        match &self.shared.terminal {
            Some(terminal) => terminal.interrupt().map(drop),
            None => {
                self.signal(crate::signal::Signal::INT);
                Ok(())
            }
        }
    }

    /// Bytes read so far from one of the child's streams (in combined mode, `Stdout` and
    /// `Combined` both give the combined count and `Stderr` 0; in a terminal session, likewise
    /// for the terminal stream).
    pub fn output_bytes(&self, stream: Stream) -> u64 {
        let index = match (stream, self.one_stream()) {
            (Stream::Stderr, true) => return 0,
            (Stream::Stderr, false) => 1,
            _ => 0,
        };
        self.shared.pumps[index]
            .bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of one stream that its sink accepted so far (counted like
    /// [`output_bytes`](Self::output_bytes)). Less than `output_bytes` once the sink failed
    /// ([`sink_error`](Self::sink_error)) or its reader went away (a broken pipe).
    pub fn delivered_bytes(&self, stream: Stream) -> u64 {
        self.pump(stream).map_or(0, |p| {
            p.delivered.load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// How long the output was held back by its consumer so far: the time writes to the
    /// output sinks were in flight (those of 50 ms or more) (a [`Writer`](crate::OutputSink::Writer) whose reader does
    /// not read, a [`Callback`](crate::OutputSink::Callback) that does not return). Meanwhile
    /// the child, blocked on a full pipe, is not idle (the hard timeout still applies).
    pub fn output_held_back(&self) -> Duration {
        self.board.held_back()
    }

    /// Why the sink of one stream stopped taking bytes (a write error, a panic), if it did.
    /// A broken pipe (the sink's reader went away) is not an error here: it is passed on to
    /// the child.
    pub fn sink_error(&self, stream: Stream) -> Option<String> {
        self.pump(stream)?.sink_error.lock().clone()
    }

    /// Whether the child's output is one stream (combined, or a terminal).
    fn one_stream(&self) -> bool {
        self.shared.combined || self.shared.terminal.is_some()
    }

    /// The pump state of a stream (`None`: stderr in combined and terminal modes).
    fn pump(&self, stream: Stream) -> Option<&crate::sources::output::PumpState> {
        let index = match (stream, self.one_stream()) {
            (Stream::Stderr, true) => return None,
            (Stream::Stderr, false) => 1,
            _ => 0,
        };
        Some(&self.shared.pumps[index])
    }

    /// What has been captured so far (head and tail of each stream, omitted counts), and the
    /// result once the run is over. Cheap enough to call at any time: it copies at most the
    /// capture caps.
    pub fn output(&self) -> CapturedOutput {
        // The result first: captured output that carries a result also carries all the output.
        let result = self.shared.result.get().cloned();
        let captured = |slot: usize| {
            self.shared.recorders[slot]
                .as_ref()
                .map(|r| r.lock().capture.captured())
        };
        if self.shared.terminal.is_some() {
            CapturedOutput {
                stdout: None,
                stderr: None,
                combined: None,
                terminal: captured(0),
                result,
            }
        } else if self.shared.combined {
            CapturedOutput {
                stdout: None,
                stderr: None,
                combined: captured(0),
                terminal: None,
                result,
            }
        } else {
            CapturedOutput {
                stdout: captured(0),
                stderr: captured(1),
                combined: None,
                terminal: None,
                result,
            }
        }
    }

    /// The event stream: `Started` first, `Exited` once, `Closed` last. Every call gives a
    /// handle on the same bounded channel (an event goes to one receiver); a slow or absent
    /// consumer never slows the child.
    ///
    /// ```
    /// use std::process::Command;
    /// use quietus::{Event, MonitorConfig, Session};
    ///
    /// let mut command = Command::new("echo");
    /// command.arg("hello");
    /// let session = Session::spawn(command, MonitorConfig::default())?;
    /// let events: Vec<Event> = session.events().iter().collect(); // ends after Closed
    /// assert!(matches!(events.first(), Some(Event::Started { .. })));
    /// assert_eq!(events.last(), Some(&Event::Closed));
    /// assert!(events.iter().any(|e| matches!(e, Event::Output { bytes, .. } if bytes == b"hello\n")));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn events(&self) -> EventReceiver {
        EventReceiver {
            rx: self.shared.emitter.receiver(),
            closed: false,
        }
    }

    /// Blocks until the run is over: the child ended (on its own or by the ladder) and its
    /// output was drained.
    pub fn wait(&self) -> MonitorResult {
        // The monitor drops its sender after storing the result, which ends this recv.
        let _ = self.done.recv();
        self.stored_result()
    }

    /// The result if the run is over, without blocking.
    pub fn try_wait(&self) -> Option<MonitorResult> {
        self.shared.result.get().cloned()
    }

    /// Waits at most `timeout` (measured by the session's clock).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<MonitorResult> {
        match self.clock.now().checked_add(timeout) {
            Some(deadline) => self.wait_deadline(deadline),
            // A timeout beyond what an `Instant` can hold is no timeout at all.
            None => Some(self.wait()),
        }
    }

    /// The result once the run is over, without copying it (one atomic load).
    pub(crate) fn finished(&self) -> Option<&MonitorResult> {
        self.shared.result.get()
    }

    /// Waits until `deadline` (an instant of the session's clock) at the latest.
    pub fn wait_deadline(&self, deadline: Instant) -> Option<MonitorResult> {
        let timer = self.clock.at(deadline);
        select! {
            recv(self.done) -> _ => Some(self.stored_result()),
            recv(timer) -> _ => self.try_wait(),
        }
    }

    fn stored_result(&self) -> MonitorResult {
        // Invariant: `done` disconnects only after the monitor stored the result, and the
        // monitor always stores one (even when its own thread could not finish normally).
        self.shared
            .result
            .get()
            .cloned()
            .expect("the monitor stores the result before closing its done channel")
    }
}

/// How long [`Session::write_stdin`] waits for room in a full queue.
const STDIN_QUEUE_WAIT: Duration = Duration::from_secs(5);

/// The receiving end of [`Session::events`]: blocking, non-blocking and timed receives, and an
/// iterator that ends after [`Event::Closed`].
#[derive(Debug, Clone)]
pub struct EventReceiver {
    rx: Receiver<Event>,
    closed: bool,
}

impl EventReceiver {
    /// The next event, blocking; `None` after `Closed`.
    pub fn recv(&mut self) -> Option<Event> {
        self.take(|rx| rx.recv().ok())
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.take(|rx| rx.try_recv().ok())
    }

    /// The next event, waiting at most `timeout` (real time).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Event> {
        self.take(|rx| rx.recv_timeout(timeout).ok())
    }

    /// Receives with `receive` unless `Closed` was already seen, and remembers seeing it.
    fn take(&mut self, receive: impl FnOnce(&Receiver<Event>) -> Option<Event>) -> Option<Event> {
        if self.closed {
            return None;
        }
        let event = receive(&self.rx)?;
        self.closed = event == Event::Closed;
        Some(event)
    }

    /// Blocking iterator that ends after `Closed`.
    pub fn iter(&mut self) -> impl Iterator<Item = Event> + '_ {
        std::iter::from_fn(move || self.recv())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.finished().is_none() {
            let _ = self.control.send(Control::Terminate);
        }
    }
}
