//! The launcher: spawns the child as the leader of a new process group with its pipes, and
//! starts the reader, stdin, waiter and monitor threads. Returns what the session handle needs.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::ladder::{Ladder, Leader, OsProcesses};
use super::rules::Rules;
use super::run::{DoneGuard, Monitor, Phase, Timing};
use super::tap::{PipeEnd, SharedPipe, StreamSlot, Tap, stream_index};
use super::{SESSION_TAG, boot_ticks_now, end_session};
use crate::activity::{ActivityBoard, ActivitySource};
use crate::capture::spill::{self, Spill, SpillReport, SpillWriter};
use crate::capture::{HeadTail, Recorder};
use crate::clock::Clock;
use crate::completion::FileWatch;
use crate::config::{ContainmentMode, MonitorConfig};
use crate::contract::{Control, ControlTx, Lifecycle, Shared};
use crate::error::{SpawnError, SpawnErrorKind};
use crate::events::{ActivityEvents, Emitter, Event};
use crate::input_wait::InputWaitRule;
use crate::outcome::{CompletionSeen, Containment};
use crate::own_files::OwnFiles;
use crate::process::cgroup::Cgroup;
use crate::process::pty::Pty;
use crate::process::{self, ChildProcess, sys};
use crate::sources::children::DescendantObserver;
use crate::sources::files::FileActivityTracker;
use crate::sources::lines::{ChunkSeen, LineWatch};
use crate::sources::network::NetworkObserver;
use crate::sources::output::{ActivityTrackingReader, OutputSink, PumpState, pump};
use crate::stream::Stream;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the launcher needs to start one session: the parts of a validated builder.
pub(crate) struct Launch {
    /// The command, its environment already applied.
    pub(crate) command: Command,
    /// Whether `command` has no setting but its program, arguments, environment changes and
    /// working directory (a [`Program`](crate::Program)'s): it may start without std's fork.
    pub(crate) plain: bool,
    /// Whether the command's environment was cleared (an isolated environment): its
    /// variables are only those it sets.
    pub(crate) env_cleared: bool,
    pub(crate) config: MonitorConfig,
    pub(crate) clock: Arc<dyn Clock>,
    /// Whether `clock` is the real one (the session's own `SystemClock`): then the monitor's
    /// `poll` timeout reaches its deadlines, and no relay of the clock's timers is needed
    /// (`monitor::wait`).
    pub(crate) real_clock: bool,
    pub(crate) stdout: OutputSink,
    pub(crate) stderr: OutputSink,
    pub(crate) stdin: Input,
    /// The isolated home prepared for the child, for the result.
    pub(crate) home: Option<crate::environment::HomeReport>,
    /// Run the child on a pseudo-terminal of this size (rows, columns) instead of pipes.
    pub(crate) pty: Option<(u16, u16)>,
    /// Pipe mode: the child leads a session of its own, without a controlling terminal.
    pub(crate) detached: bool,
}

/// The child's stdin.
#[derive(Debug)]
pub(crate) enum Input {
    /// `/dev/null`.
    Null,
    /// This process's own.
    Inherit,
    /// A pipe the session feeds.
    Piped,
    /// What the caller gave (opaque to stallwatch).
    Given(Stdio),
}

impl Input {
    fn into_stdio(self) -> Stdio {
        match self {
            Input::Null => Stdio::null(),
            Input::Inherit => Stdio::inherit(),
            Input::Piped => Stdio::piped(),
            Input::Given(stdio) => stdio,
        }
    }
}

/// A launched session: the child runs, its threads are up, and the monitor owns the child.
pub(crate) struct Launched {
    pub(crate) id: u64,
    pub(crate) pid: u32,
    pub(crate) board: Arc<ActivityBoard>,
    pub(crate) control: ControlTx,
    /// Disconnects once the monitor stored the result.
    pub(crate) done: Receiver<()>,
    pub(crate) shared: Arc<Shared>,
}

/// Spawns the child and its threads; returns what the session handle needs.
pub(crate) fn launch(launch: Launch) -> io::Result<Launched> {
    let Launch {
        command,
        plain,
        env_cleared,
        config,
        clock,
        real_clock,
        stdout: stdout_sink,
        stderr: stderr_sink,
        stdin,
        home,
        pty: pty_size,
        detached,
    } = launch;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // A named log folder that cannot be used is an error now, not lost output later.
    let log_dir = spill::resolve_dir(&config.capture)?;
    let (board, emitter) = new_board(&clock, &config);
    // Armed before the spawn, so the child's first write already counts.
    let files = arm_files(&command, &config, &board)?;
    // Looked at before the spawn: what the child changes counts, what was there does not.
    let completion_files = completion_files(&command, &config)?;
    let lines = LineSetup::new(&config)?;

    // Made just before the spawn, the program is born in it; dropping it (a failed spawn)
    // removes it.
    let Held {
        cgroup,
        containment,
        guardian,
        entry,
    } = hold_tree(&config, id)?;
    let stdin_pipe = matches!(stdin, Input::Piped);
    let io = (stdin, pty_size, detached);
    let plain = plain.then_some(env_cleared);
    let spawned = spawn_in(command, plain, &config, id, (entry, guardian.as_ref()), io);
    let (mut child, pty, combined_pipe, tag) = match spawned {
        Ok(spawned) => spawned,
        Err(e) => {
            // Nothing to guard: the cgroup goes with its handle.
            guardian.into_iter().for_each(process::Guardian::release);
            return Err(e);
        }
    };
    let pid = child.id();
    emitter.lifecycle(Event::Started { pid, pgid: pid });
    let terminal = pty.map(Arc::new);
    let stdin = match &terminal {
        // Typed input goes to the terminal, always open for writing.
        Some(terminal) => Some(StdinTarget::Terminal(terminal.clone())),
        None if stdin_pipe => child.stdin.take().map(StdinTarget::Pipe),
        None => None,
    };
    let streams = Streams {
        terminal,
        combined: combined_pipe,
        log_dir,
        own_files: files.as_ref().map(FileActivityTracker::own_files),
        emitter,
        stdin,
        tag,
        home,
        lines,
        completion_files,
        guardian,
        cgroup,
        containment,
        real_clock,
    };

    let started = start_threads(
        id,
        &mut child,
        config,
        clock.clone(),
        board.clone(),
        files,
        streams,
        stdout_sink,
        stderr_sink,
    );
    hand_over(id, pid, board, child, started)
}

/// A spawned program: the child, its terminal, the read end of the one combined pipe, and the
/// subreaper tag it was given.
type Spawned = (
    ChildProcess,
    Option<Pty>,
    Option<std::io::PipeReader>,
    Option<Vec<u8>>,
);

/// Gives the command its stdio (`io`: stdin, the terminal's size, detached) and its start in
/// the session's cgroup (`held`: its entry and its guardian, which then replaces the
/// parent-death signal), and spawns it. A plain command (`plain`: whether its environment was
/// cleared) in pipe mode starts without std's fork where it can (`spawn_plain`).
fn spawn_in(
    mut command: Command,
    plain: Option<bool>,
    config: &MonitorConfig,
    id: u64,
    held: (Option<sys::CgroupEntry>, Option<&process::Guardian>),
    io: (Input, Option<(u16, u16)>, bool),
) -> io::Result<Spawned> {
    let ((entry, guardian), (stdin, pty_size, detached)) = (held, io);
    // A guardian that exists before the cgroup is made ends every member of it if this
    // process dies: the program needs no parent-death signal of its own, and so no fork from
    // the long-lived spawner thread (a thread start, and two hand-offs at every spawn).
    let parent_death = config.parent_death_signal && guardian.is_none();
    let tag = subreaper_tag(&mut command, config, id);
    // From the main thread, the signal comes when the process dies, as from the spawner.
    let from_spawner = cfg!(target_os = "linux") && parent_death && !sys::on_main_thread();
    let lead = if detached {
        sys::Lead::Session
    } else {
        sys::Lead::Group
    };
    let mut terminal = None;
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    let fast = match plain {
        Some(env_cleared) => {
            let start = PlainStart {
                env_cleared,
                lead,
                parent_death,
                from_spawner,
                cgroup: entry.as_ref(),
            };
            match pty_size {
                None => spawn_plain(&command, config, &stdin, start, id, tag.as_ref()),
                // The terminal's program starts as the pipes' does (the same environment,
                // dispositions and mask: issue 28).
                Some((rows, cols)) => {
                    let pty = Pty::open(rows, cols).map_err(terminal_error("open"))?;
                    let started = spawn_plain_terminal(&command, &pty, start, id, tag.as_ref());
                    terminal = started.as_ref().map(|_| {
                        let mut pty = pty;
                        pty.release_slave();
                        pty
                    });
                    started.map(|r| r.map(|child| (child, None)))
                }
            }
        }
        _ => None,
    };
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    let fast: Option<io::Result<(ChildProcess, Option<std::io::PipeReader>)>> = {
        let _ = plain;
        None
    };
    let (child, pty, combined_pipe) = match fast {
        Some(started) => {
            let (child, combined_pipe) = started?;
            (child, terminal, combined_pipe)
        }
        None => {
            let (mut pty, combined_pipe, handoff) = attach_stdio(
                &mut command,
                parent_death,
                config,
                (stdin.into_stdio(), pty_size, lead),
                entry,
            )?;
            let (returned, child) = spawn_leader(
                command,
                from_spawner,
                id,
                tag.as_ref(),
                pty.as_mut(),
                handoff,
            )?;
            // The command still holds our copies of the pipes' write ends: close them, or the
            // readers would never see end-of-file.
            command = returned;
            (child, pty, combined_pipe)
        }
    };
    let pid = child.id();
    log::debug!(
        "session {id}: spawned {:?} as pid {pid}",
        command.get_program()
    );
    drop(command);
    Ok((child, pty, combined_pipe, tag))
}

/// How a plain command starts, besides its stdio.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
struct PlainStart<'a> {
    env_cleared: bool,
    lead: sys::Lead,
    parent_death: bool,
    /// Started from the spawner thread (the parent-death signal from a thread that is not
    /// the main one).
    from_spawner: bool,
    cgroup: Option<&'a sys::CgroupEntry>,
}

/// The names of the reader threads started (tests).
#[cfg(test)]
static READER_THREADS: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());

/// The names of the reader threads started so far (tests).
#[cfg(test)]
pub(super) fn reader_threads() -> Vec<String> {
    READER_THREADS.lock().clone()
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
thread_local! {
    /// How many programs this thread started without std's fork (tests: which path a spawn
    /// took).
    static STARTED_PLAIN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Starts a plain command in pipe mode without std's fork (`sys::plain`), from the spawner
/// thread when `start` says so: makes its pipes (stdin as `stdin` says), spawns it known to
/// the orphan attribution as [`spawn_leader`] does. `None` when this path cannot start it (a
/// stdin stallwatch cannot see, an old kernel): the caller takes std's.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn spawn_plain(
    command: &Command,
    config: &MonitorConfig,
    stdin: &Input,
    start: PlainStart<'_>,
    id: u64,
    tag: Option<&Vec<u8>>,
) -> Option<io::Result<(ChildProcess, Option<std::io::PipeReader>)>> {
    use std::os::fd::AsFd;
    let (read_end, write_end): (Option<OwnedFd>, Option<OwnedFd>) = match stdin {
        Input::Null => match std::fs::File::open("/dev/null") {
            Ok(null) => (Some(null.into()), None),
            Err(e) => {
                let why = "cannot open /dev/null for the program's stdin";
                return Some(Err(SpawnError::new(SpawnErrorKind::Pipe, why, e).into()));
            }
        },
        Input::Inherit => (None, None),
        Input::Piped => match std::io::pipe() {
            Ok((read, write)) => (Some(read.into()), Some(write.into())),
            Err(e) => return Some(Err(pipe_error("make")(e).into())),
        },
        Input::Given(_) => return None, // a `Stdio` stallwatch cannot look into
    };
    let prepared = match sys::plain::prepare(command, start.env_cleared) {
        Ok(prepared) => prepared,
        Err(sys::plain::Refused::Unsupported) => return None,
        Err(sys::plain::Refused::Failed(e)) => {
            return Some(Err(process::describe_spawn_error(command, e)));
        }
    };
    let pipes = (|| -> io::Result<_> {
        let out = std::io::pipe()?;
        let err = if config.capture.combined {
            None
        } else {
            Some(std::io::pipe()?)
        };
        // The spawner thread gets a duplicate of the cgroup's directory (it must own it).
        let cgroup = match start.cgroup {
            Some(entry) if start.from_spawner => Some(entry.dir.try_clone()?),
            _ => None,
        };
        Ok((out, err, cgroup))
    })();
    let ((out_read, out_write), err, cgroup_copy) = match pipes {
        Ok(pipes) => pipes,
        Err(e) => return Some(Err(pipe_error("make")(e).into())),
    };
    let (err_read, err_write) = err.map_or((None, None), |(r, w)| (Some(r), Some(w)));
    // The child's ends, owned by whoever spawns, and closed there once it has: only the
    // program (and its descendants) keep them open.
    let child_ends = (read_end, out_write, err_write);
    let (lead, parent_death_signal) = (start.lead, start.parent_death);
    let run = move |cgroup: Option<std::os::fd::BorrowedFd<'_>>| {
        let (read_end, out_write, err_write) = &child_ends;
        let stdio = [
            read_end.as_ref().map(AsFd::as_fd),
            Some(out_write.as_fd()),
            Some(err_write.as_ref().map_or(out_write.as_fd(), AsFd::as_fd)),
        ];
        let plain = sys::plain::Start {
            stdio,
            lead,
            parent_death_signal,
            cgroup,
        };
        sys::plain::spawn(&prepared, &plain)
    };
    let gate = process::orphans::spawn_gate();
    let started = boot_ticks_now();
    let spawned = if start.from_spawner {
        process::on_spawner(move || run(cgroup_copy.as_ref().map(AsFd::as_fd)))
            .unwrap_or(Err(sys::plain::Refused::Unsupported))
    } else {
        run(start.cgroup.map(|entry| entry.dir.as_fd()))
    };
    let pid = match spawned {
        Ok(pid) => pid,
        Err(sys::plain::Refused::Unsupported) => return None,
        Err(sys::plain::Refused::Failed(e)) => {
            drop(gate);
            return Some(Err(process::describe_spawn_error(command, e)));
        }
    };
    process::orphans::register(id, started, tag.cloned());
    process::orphans::spawned(pid);
    process::orphans::set_leader(id, pid);
    drop(gate);
    #[cfg(test)]
    STARTED_PLAIN.with(|n| n.set(n.get() + 1));
    let (stdout, stderr, combined) = match err_read {
        Some(err_read) => (
            Some(OwnedFd::from(out_read).into()),
            Some(OwnedFd::from(err_read).into()),
            None,
        ),
        None => (None, None, Some(out_read)),
    };
    let stdin = write_end.map(Into::into);
    Some(Ok((
        ChildProcess::started(pid.unsigned_abs(), stdin, stdout, stderr),
        combined,
    )))
}

/// Starts a plain command on `pty` without std's fork, as [`spawn_plain`] does with pipes: it
/// leads a new session whose controlling terminal is the slave, which is its stdin, stdout
/// and stderr; this process's copy of the slave is closed once the program runs. `None` when
/// this path cannot start it: the caller takes std's (with a terminal of its own).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn spawn_plain_terminal(
    command: &Command,
    pty: &Pty,
    start: PlainStart<'_>,
    id: u64,
    tag: Option<&Vec<u8>>,
) -> Option<io::Result<ChildProcess>> {
    let prepared = match sys::plain::prepare(command, start.env_cleared) {
        Ok(prepared) => prepared,
        Err(sys::plain::Refused::Unsupported) => return None,
        Err(sys::plain::Refused::Failed(e)) => {
            return Some(Err(process::describe_spawn_error(command, e)));
        }
    };
    // Owned copies: the spawner thread's job must own what it uses.
    let copies = (|| -> io::Result<_> {
        let slave = pty.slave_copy()?;
        let cgroup = match start.cgroup {
            Some(entry) if start.from_spawner => Some(entry.dir.try_clone()?),
            _ => None,
        };
        Ok((slave, cgroup))
    })();
    let (slave, cgroup_copy) = match copies {
        Ok(copies) => copies,
        Err(e) => return Some(Err(terminal_error("prepare")(e).into())),
    };
    let parent_death_signal = start.parent_death;
    let run = move |cgroup: Option<std::os::fd::BorrowedFd<'_>>| {
        let plain = sys::plain::Start {
            stdio: [Some(slave.as_fd()); 3],
            lead: sys::Lead::Terminal,
            parent_death_signal,
            cgroup,
        };
        sys::plain::spawn(&prepared, &plain)
    };
    let gate = process::orphans::spawn_gate();
    let started = boot_ticks_now();
    let spawned = if start.from_spawner {
        process::on_spawner(move || run(cgroup_copy.as_ref().map(AsFd::as_fd)))
            .unwrap_or(Err(sys::plain::Refused::Unsupported))
    } else {
        run(start.cgroup.map(|entry| entry.dir.as_fd()))
    };
    let pid = match spawned {
        Ok(pid) => pid,
        Err(sys::plain::Refused::Unsupported) => return None,
        Err(sys::plain::Refused::Failed(e)) => {
            drop(gate);
            return Some(Err(process::describe_spawn_error(command, e)));
        }
    };
    process::orphans::register(id, started, tag.cloned());
    process::orphans::spawned(pid);
    process::orphans::set_leader(id, pid);
    drop(gate);
    #[cfg(test)]
    STARTED_PLAIN.with(|n| n.set(n.get() + 1));
    Some(Ok(ChildProcess::started(
        pid.unsigned_abs(),
        None,
        None,
        None,
    )))
}

/// What the spawn needs beside the command: the terminal, the read end of the one combined
/// pipe, and what tells which process runs the program.
type Attached = (
    Option<Pty>,
    Option<std::io::PipeReader>,
    Option<sys::Handoff>,
);

/// Gives the command its terminal (the pseudo-terminal of `pty_size`, returned) or its pipes
/// (the read end of the one combined pipe returned, if combined) and `stdin`, and makes the
/// child lead its tree (in the session's cgroup when there is one), with the parent-death
/// signal when `parent_death`.
fn attach_stdio(
    command: &mut Command,
    parent_death: bool,
    config: &MonitorConfig,
    (stdin, pty_size, lead): (Stdio, Option<(u16, u16)>, sys::Lead),
    cgroup: Option<sys::CgroupEntry>,
) -> io::Result<Attached> {
    if let Some((rows, cols)) = pty_size {
        // The terminal is stdin, stdout and stderr; the child leads a new session on it (and
        // so a new process group: its pgid is its pid, as in pipe mode).
        let terminal = Pty::open(rows, cols).map_err(terminal_error("open"))?;
        let handoff = terminal
            .prepare(command, parent_death, cgroup)
            .map_err(terminal_error("prepare"))?;
        drop(stdin);
        return Ok((Some(terminal), None, handoff));
    }
    command.stdin(stdin);
    let combined_pipe = pipe_output(command, config).map_err(pipe_error("make"))?;
    let handoff = sys::configure(command, lead, parent_death, cgroup).map_err(|e| {
        SpawnError::new(
            SpawnErrorKind::Containment,
            "cannot prepare the program's start in its cgroup",
            e,
        )
    })?;
    Ok((None, combined_pipe, handoff))
}

/// The session's activity board, its output source on or off, and the event emitter that
/// observes it.
fn new_board(clock: &Arc<dyn Clock>, config: &MonitorConfig) -> (Arc<ActivityBoard>, Arc<Emitter>) {
    let probes: Vec<&'static str> = config
        .probes
        .iter()
        .filter_map(|p| match p.source() {
            ActivitySource::Probe(name) => Some(name),
            _ => None,
        })
        .collect();
    let board = Arc::new(ActivityBoard::with_probes(clock.clone(), &probes));
    board.set_enabled(ActivitySource::Output, config.enabled.output);
    board.set_enabled(
        ActivitySource::RepeatedOutput,
        config.watches(ActivitySource::RepeatedOutput),
    );
    let emitter = Arc::new(Emitter::new(config.events.capacity));
    board.observe(Arc::new(ActivityEvents::new(
        emitter.clone(),
        config.events.throttle,
    )));
    (board, emitter)
}

/// Spawns the child, known to the orphan attribution before the fork, and known as this
/// library's own child before any other session can look at this process's children. Returns
/// the command (it still holds the pipes' write ends) and the child. With `from_spawner`, from
/// the spawner thread (the parent-death signal comes when the forking thread dies).
fn spawn_leader(
    command: Command,
    from_spawner: bool,
    id: u64,
    tag: Option<&Vec<u8>>,
    pty: Option<&mut Pty>,
    handoff: Option<sys::Handoff>,
) -> io::Result<(Command, ChildProcess)> {
    let gate = process::orphans::spawn_gate();
    process::orphans::register(id, boot_ticks_now(), tag.cloned());
    let (mut command, spawned) = process::spawn(command, from_spawner, handoff);
    if let Some(pty) = pty {
        // Whether or not the spawn worked: this process keeps no copy of the slave, so the
        // master reads the end once the child's side is closed.
        pty.spawned(&mut command);
    }
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            drop(gate);
            end_session(id);
            return Err(process::describe_spawn_error(&command, e));
        }
    };
    let pid = child.id();
    process::orphans::spawned(pid as i32);
    process::orphans::set_leader(id, pid as i32);
    drop(gate);
    Ok((command, child))
}

/// Pipes the command's stdout and stderr; returns the read end of the one pipe of the
/// combined mode.
fn pipe_output(
    command: &mut Command,
    config: &MonitorConfig,
) -> io::Result<Option<std::io::PipeReader>> {
    Ok(if config.capture.combined {
        // One pipe for both streams keeps the order in which the child wrote them.
        let (reader, writer) = std::io::pipe()?;
        command.stdout(writer.try_clone()?).stderr(writer);
        Some(reader)
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    })
}

/// Subreaper mode: orphans come back to this process; a tag in their environment (among
/// other evidence: `process::orphans`) tells which session they belong to.
fn subreaper_tag(command: &mut Command, config: &MonitorConfig, id: u64) -> Option<Vec<u8>> {
    if config.children.subreaper {
        match sys::become_subreaper() {
            Ok(()) => {
                process::orphans::set_adopting();
                let value = format!("{}.{id}", std::process::id());
                command.env(SESSION_TAG, &value);
                Some(format!("{SESSION_TAG}={value}").into_bytes())
            }
            Err(e) => {
                log::warn!("session {id}: cannot become a child subreaper ({e}); going on without");
                None
            }
        }
    } else {
        None
    }
}

/// The file activity tracker, armed before the spawn so the child's first write already
/// counts; or, with an arming delay, armed by the monitor when the delay is over (what the
/// child changed before counts then).
fn arm_files(
    command: &Command,
    config: &MonitorConfig,
    board: &Arc<ActivityBoard>,
) -> io::Result<Option<FileActivityTracker>> {
    Ok(if config.enabled.files {
        let base = child_dir(command)?;
        let mut files = config.files.clone();
        files.arm_delay = config.effective_arm_delay();
        Some(FileActivityTracker::start_for_session(
            &files,
            &base,
            board.clone(),
            config.effective_check_interval(),
        )?)
    } else {
        None
    })
}

/// The completion files as they are before the spawn, if completion looks at files.
fn completion_files(command: &Command, config: &MonitorConfig) -> io::Result<Option<FileWatch>> {
    if config.completion.files.is_empty() {
        return Ok(None);
    }
    Ok(Some(FileWatch::start(
        &config.completion.files,
        &child_dir(command)?,
    )))
}

/// The child's working directory, as an absolute path.
fn child_dir(command: &Command) -> io::Result<std::path::PathBuf> {
    let cwd = std::env::current_dir().map_err(|e| {
        SpawnError::new(
            SpawnErrorKind::WorkingDir,
            "cannot read stallwatch's working directory",
            e,
        )
    })?;
    Ok(match command.get_current_dir() {
        Some(dir) => cwd.join(dir),
        None => cwd,
    })
}

/// The session's cgroup as the configuration asks, with its guardian (started just before the
/// cgroup is made): `None` for the group (with why not a cgroup under `Auto`); an error of its
/// own kind when a cgroup was required and cannot be had.
fn hold_tree(config: &MonitorConfig, id: u64) -> io::Result<Held> {
    let group = |why_not_cgroup| Held {
        cgroup: None,
        containment: Containment::Group { why_not_cgroup },
        guardian: None,
        entry: None,
    };
    if config.containment == ContainmentMode::Group {
        return Ok(group(None));
    }
    // The guardian starts just before the cgroup is made (the program's group is told to it
    // once it exists): from the cgroup's first moment to its removal, something outside this
    // process removes it (and ends its members) if this process is killed.
    let mut guardian = None;
    match Cgroup::create(id, |path| {
        guardian = start_guardian(config, id, None, Some(path));
    }) {
        Ok((cgroup, entry)) => {
            let path = cgroup.path().to_owned();
            log::debug!(
                "session {id}: holding the tree in the cgroup {}",
                path.display()
            );
            Ok(Held {
                cgroup: Some(Arc::new(cgroup)),
                containment: Containment::Cgroup { path },
                guardian,
                entry: Some(entry),
            })
        }
        Err(why) => {
            guardian.into_iter().for_each(process::Guardian::release);
            if config.containment == ContainmentMode::Cgroup {
                return Err(SpawnError::new(
                    SpawnErrorKind::Containment,
                    "--containment cgroup: no cgroup can be made for the session (run as root, \
                     or in a delegated cgroup: systemd-run --user --scope -p Delegate=yes …; or \
                     use --containment auto)",
                    io::Error::new(io::ErrorKind::PermissionDenied, why),
                )
                .into());
            }
            log::debug!("session {id}: no cgroup ({why}); holding the process group");
            Ok(group(Some(why)))
        }
    }
}

/// How the tree is held.
struct Held {
    /// The session's cgroup, if it has one.
    cgroup: Option<Arc<Cgroup>>,
    /// What the result says.
    containment: Containment,
    /// The guardian started with the cgroup.
    guardian: Option<process::Guardian>,
    /// What the child needs to start inside the cgroup.
    entry: Option<sys::CgroupEntry>,
}

/// With the parent-death signal asked for, the grandchildren should die with this process
/// too: a guardian outside it SIGKILLs the group (and the cgroup's members, and removes the
/// cgroup) if this process vanishes.
fn start_guardian(
    config: &MonitorConfig,
    id: u64,
    pid: Option<u32>,
    cgroup: Option<&std::path::Path>,
) -> Option<process::Guardian> {
    if cfg!(target_os = "linux") && config.parent_death_signal {
        process::Guardian::start(pid, cgroup)
            .inspect_err(|e| log::warn!("session {id}: no guardian: {e}"))
            .ok()
    } else {
        None
    }
}

/// The guardian, started before any reader thread (no output of the child is passed on before
/// it exists), unless the run is already over with nothing left to guard: the leader exited
/// and, adopting orphans and holding no cgroup, this process has no child but it (and the
/// library's own): every descendant still alive would be one. A program that ends at once
/// (`stallwatch -- true`) then costs no fork. Returns the guardian, and whether the tree is
/// provably gone.
fn guard_tree(
    config: &MonitorConfig,
    id: u64,
    pid: i32,
    processes: &mut OsProcesses,
    early: Option<process::Guardian>,
) -> (Option<process::Guardian>, bool) {
    if early.is_some() {
        return (early, false); // in a cgroup: started before the program
    }
    let gone =
        processes.cgroup.is_none() && sys::has_exited_no_reap(pid) && processes.leader_alone(pid);
    if gone {
        log::debug!("session {id}: pid {pid} already exited, alone: no guardian needed");
        return (None, true);
    }
    let cgroup = processes.cgroup.as_deref().map(Cgroup::path);
    (start_guardian(config, id, Some(pid as u32), cgroup), false)
}

/// Hands the child to the monitor thread, or (if the threads could not start) kills and
/// reaps it.
fn hand_over(
    id: u64,
    pid: u32,
    board: Arc<ActivityBoard>,
    mut child: ChildProcess,
    started: io::Result<Started>,
) -> io::Result<Launched> {
    match started {
        Ok((control, done, shared, monitor)) => match monitor.send(child) {
            // The monitor owns the child from here on.
            Ok(()) => Ok(Launched {
                id,
                pid,
                board,
                control,
                done,
                shared,
            }),
            Err(crossbeam_channel::SendError(mut child)) => {
                end_session(id);
                let _ = sys::kill_group(pid as i32, sys::SIGKILL);
                let _ = child.kill(); // by pid too: it may have left its group already
                let _ = child.wait();
                let stopped = io::Error::other("it stopped before it was handed the child");
                Err(SpawnError::thread("monitor", stopped).into())
            }
        },
        Err(e) => {
            end_session(id);
            let _ = sys::kill_group(pid as i32, sys::SIGKILL);
            let _ = child.kill(); // by pid too: it may have left its group already
            let _ = child.wait();
            match SpawnError::of(&e) {
                Some(_) => Err(e),
                None => Err(SpawnError::new(
                    SpawnErrorKind::Thread,
                    "cannot start stallwatch's threads",
                    e,
                )
                .into()),
            }
        }
    }
}

/// A [`SpawnErrorKind::Terminal`] error: the pseudo-terminal could not be `verb`ed.
fn terminal_error(verb: &'static str) -> impl Fn(io::Error) -> SpawnError + Copy {
    move |e| {
        SpawnError::new(
            SpawnErrorKind::Terminal,
            format_args!("cannot {verb} the pseudo-terminal"),
            e,
        )
    }
}

/// A [`SpawnErrorKind::Pipe`] error: the output pipes could not be `verb`ed.
fn pipe_error(verb: &'static str) -> impl Fn(io::Error) -> SpawnError {
    move |e| {
        SpawnError::new(
            SpawnErrorKind::Pipe,
            format_args!("cannot {verb} the output pipes"),
            e,
        )
    }
}

type Started = (ControlTx, Receiver<()>, Arc<Shared>, Sender<ChildProcess>);

/// How the output is read and recorded.
struct Streams {
    /// The terminal of a terminal session (no pipes then).
    terminal: Option<Arc<Pty>>,
    /// The read end of the one pipe of the combined mode.
    combined: Option<std::io::PipeReader>,
    log_dir: Option<spill::LogDir>,
    /// The file activity tracker's own files: the logs register there (they never count).
    own_files: Option<OwnFiles>,
    emitter: Arc<Emitter>,
    /// The child's stdin, when the caller feeds it (always the terminal in a terminal session).
    stdin: Option<StdinTarget>,
    /// `STALLWATCH_SESSION=…` given to the child in subreaper mode.
    tag: Option<Vec<u8>>,
    /// The isolated home prepared for the child, for the result.
    home: Option<crate::environment::HomeReport>,
    /// The readers' line watch, if lines need looking at.
    lines: Option<LineSetup>,
    /// The guardian started before the program (in a cgroup), if any.
    guardian: Option<process::Guardian>,
    /// The completion files, as they were before the spawn.
    completion_files: Option<FileWatch>,
    /// The session's cgroup, when it has one.
    cgroup: Option<Arc<Cgroup>>,
    /// How the tree is held, for the result.
    containment: Containment,
    /// Whether the session runs on the real clock (see [`Launch::real_clock`]).
    real_clock: bool,
}

/// One stream's pipe while the launcher sets it up: where it is read from, where it goes,
/// and what records it.
struct StreamPipe {
    stream: Stream,
    pipe: Box<dyn io::Read + Send>,
    fd: PipeEnd,
    sink: OutputSink,
    recorder: Option<Arc<parking_lot::Mutex<Recorder>>>,
    spill_writer: Option<SpillWriter>,
    spill: Option<SpillReport>,
    peek: Option<PipeEnd>,
}

impl StreamPipe {
    fn new(stream: Stream, pipe: Box<dyn io::Read + Send>, fd: PipeEnd, sink: OutputSink) -> Self {
        Self {
            stream,
            pipe,
            fd,
            sink,
            recorder: None,
            spill_writer: None,
            spill: None,
            peek: None,
        }
    }
}

#[allow(clippy::too_many_arguments)] // one call site; the parts of a session being assembled
fn start_threads(
    id: u64,
    child: &mut ChildProcess,
    config: MonitorConfig,
    clock: Arc<dyn Clock>,
    board: Arc<ActivityBoard>,
    files: Option<FileActivityTracker>,
    mut streams: Streams,
    stdout_sink: OutputSink,
    stderr_sink: OutputSink,
) -> io::Result<Started> {
    let pid = child.id() as i32;
    // The monitor sleeps in `poll` under every clock, woken by messages, by the leader's exit
    // itself (its pidfd: no waiter thread), by its clock's timers (`monitor::wait`).
    let (sleeper, wakeup) = super::wait::Sleeper::new(id, pid, streams.real_clock)?;
    let (control_tx, control_rx) = unbounded();
    let control_tx = ControlTx::new(control_tx, Some(wakeup.clone()));
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    let pumps: [Arc<PumpState>; 2] = Default::default(); // two distinct states

    let (pipes, slots, shared) = open_streams(
        id,
        child,
        &config,
        &mut streams,
        stdout_sink,
        stderr_sink,
        &pumps,
    )?;

    let children = start_observer(pid, &config, &board, streams.cgroup.as_ref());
    let (network, network_unavailable) = start_network(&config, &board);
    let mut processes = OsProcesses::new(id, children, streams.tag.take());
    processes.hold(pid, streams.cgroup.take(), wakeup.leader_pidfd());
    let (guardian, tree_gone) =
        guard_tree(&config, id, pid, &mut processes, streams.guardian.take());
    let board_clock = clock.clone();
    let rules = Rules::new(id, &config, streams.completion_files.take(), clock.now());
    let monitor = Monitor {
        input_wait: InputWaitRule::new(config.input_wait_notice, config.input_wait_timeout),
        rules,
        id,
        pid,
        timing: Timing::new(&config, &*clock, &board),
        ladder: Ladder::new(
            id,
            pid,
            config.kill_confirm_timeout,
            clock.clone(),
            streams.emitter.clone(),
        ),
        config,
        clock,
        board: board.clone(),
        control: control_rx,
        shared: shared.clone(),
        emitter: streams.emitter.clone(),
        tap: Tap::new(slots),
        leader: Leader::new(),
        processes,
        containment: streams.containment,
        memory: (None, None),
        guardian,
        tree_gone,
        files,
        handed_files: None,
        watches: super::run::Watches::Kept,
        network,
        network_unavailable,
        unwatched: Vec::new(),
        reason: None,
        phase: Phase::Watching,
        sleeper,
        readers: [None, None],
    };
    register_pipes(id, &pipes);
    let mut readers = Vec::new();
    for pipe in pipes {
        let state = pumps[stream_index(pipe.stream)].clone();
        let lines = streams.lines.clone();
        let (emitter, clock) = (&streams.emitter, &board_clock);
        readers.push(reader(
            id,
            pipe,
            state,
            &control_tx,
            &board,
            emitter,
            clock,
            lines,
        )?);
    }
    // The monitor starts each reader once its pipe has something to read: a program that
    // never writes to a stream (a sleeping one, or stderr for most) costs no thread for it,
    // so a server holds many sleeping sessions on few threads.
    let mut monitor = monitor;
    for reader in readers {
        let slot = stream_index(reader.stream);
        monitor.readers[slot] = Some(reader);
    }
    let child_tx = start_monitor(id, pid, monitor, shared.clone(), done_tx)?;
    super::wait::watch_exit(id, pid, &wakeup, control_tx.clone(), tree_gone)?;

    Ok((control_tx, done_rx, shared, child_tx))
}

/// Sets up the output streams: the pipes for the reader threads, one slot per stream for the
/// monitor, the stdin writer, and what the session and the monitor share.
#[allow(clippy::too_many_arguments)] // one call site; the parts of a session being assembled
#[allow(clippy::type_complexity)] // the three parts go three ways: readers, monitor, session
fn open_streams(
    id: u64,
    child: &mut ChildProcess,
    config: &MonitorConfig,
    streams: &mut Streams,
    stdout_sink: OutputSink,
    stderr_sink: OutputSink,
    pumps: &[Arc<PumpState>; 2],
) -> io::Result<(Vec<StreamPipe>, [Option<StreamSlot>; 2], Arc<Shared>)> {
    let combined = streams.combined.is_some();
    let read = terminal_error("read");
    let mut pipes = match &streams.terminal {
        Some(terminal) => {
            drop(stderr_sink); // the terminal is one stream, to the stdout sink
            vec![StreamPipe::new(
                Stream::Terminal,
                Box::new(terminal.reader().map_err(read)?),
                Arc::new(
                    terminal
                        .master_fd()
                        .try_clone_to_owned()
                        .map_err(read)?
                        .into(),
                ),
                stdout_sink,
            )]
        }
        None => open_pipes(child, streams.combined.take(), stdout_sink, stderr_sink)
            .map_err(pipe_error("read"))?,
    };
    for pipe in &mut pipes {
        record_pipe(
            pipe,
            config,
            streams.log_dir.as_ref(),
            streams.own_files.as_ref(),
            id,
        )?;
    }
    // The read ends, for the monitor to ask how many unread bytes a pipe holds (FIONREAD)
    // while draining; it never reads them.
    for pipe in &mut pipes {
        pipe.peek = Some(pipe.fd.clone());
    }
    let stdin_tx = start_stdin_writer(id, streams.stdin.take())?;
    let mut recorders: [Option<Arc<parking_lot::Mutex<Recorder>>>; 2] = [None, None];
    let mut spills: [Option<Arc<parking_lot::Mutex<Spill>>>; 2] = [None, None];
    let mut slots: [Option<StreamSlot>; 2] = [None, None];
    for pipe in &mut pipes {
        let index = stream_index(pipe.stream);
        recorders[index] = pipe.recorder.clone();
        spills[index] = pipe.spill.as_ref().map(|s| s.state.clone());
        slots[index] = pipe.recorder.clone().map(|recorder| StreamSlot {
            recorder,
            spill: pipe.spill.take(),
            peek: pipe.peek.take(),
            done: false,
        });
    }
    let shared = Arc::new(Shared {
        result: parking_lot::Mutex::new(None),
        pumps: pumps.clone(),
        recorders,
        combined,
        terminal: streams.terminal.clone(),
        emitter: streams.emitter.clone(),
        phase: std::sync::atomic::AtomicU8::new(Lifecycle::RUNNING),
        idle_timeout: AtomicU64::new(crate::clock::saturating_nanos(config.idle_timeout)),
        spills,
        stdin: parking_lot::Mutex::new(stdin_tx),
        home: streams.home.take(),
        caps: config.effective_caps(),
    });
    Ok((pipes, slots, shared))
}

/// The session's pipes, for the orphan attribution (an orphan holding one is the session's).
fn register_pipes(id: u64, pipes: &[StreamPipe]) {
    process::orphans::set_pipes(
        id,
        pipes
            .iter()
            // A terminal's master is no pipe: its identity is that of the multiplexer device,
            // shared by every terminal on the machine.
            .filter(|pipe| pipe.stream != Stream::Terminal)
            .filter_map(|pipe| sys::pipe_id(pipe.fd.as_fd()))
            .collect(),
    );
}

/// The observer always runs: besides descendant CPU (when that source is on) it remembers
/// the escapees the ladder must reach. Its baseline sample is the monitor's first act.
fn start_observer(
    pid: i32,
    config: &MonitorConfig,
    board: &ActivityBoard,
    cgroup: Option<&Arc<Cgroup>>,
) -> Option<DescendantObserver> {
    let mut observer = DescendantObserver::new(pid as u32, &config.children);
    if let Some(cgroup) = cgroup {
        // The tree's CPU in one read of `cpu.stat` (escapees and reaped children included),
        // its size from `cgroup.procs`.
        let cgroup = cgroup.clone();
        observer.use_cgroup(Box::new(move || {
            let cpu = cgroup.cpu_usage().ok()?;
            let members = cgroup.members().ok()?;
            Some((cpu, members))
        }));
    }
    board.set_enabled(ActivitySource::Children, config.enabled.children);
    Some(observer)
}

/// The network source when it is on (its baseline sample of the tree's sockets is the
/// monitor's first act), or why it cannot observe anything (then it is reported unavailable;
/// the spawn goes on).
fn start_network(
    config: &MonitorConfig,
    board: &ActivityBoard,
) -> (Option<NetworkObserver>, Option<String>) {
    board.set_enabled(ActivitySource::Network, config.enabled.network);
    if !config.enabled.network {
        return (None, None);
    }
    match NetworkObserver::open() {
        Ok(network) => (Some(network), None),
        Err(e) => {
            let reason = format!("no socket diagnostics (NETLINK_SOCK_DIAG): {e}");
            log::info!("network source unavailable: {reason}");
            board.set_available(ActivitySource::Network, false);
            (None, Some(reason))
        }
    }
}

/// The pipes to read: stdout and stderr, or the one combined pipe.
fn open_pipes(
    child: &mut ChildProcess,
    combined: Option<std::io::PipeReader>,
    stdout_sink: OutputSink,
    stderr_sink: OutputSink,
) -> io::Result<Vec<StreamPipe>> {
    let mut pipes: Vec<StreamPipe> = Vec::new();
    if let Some(reader) = combined {
        let (read, fd) = shared_pipe(reader);
        pipes.push(StreamPipe::new(Stream::Combined, read, fd, stdout_sink));
        drop(stderr_sink); // everything goes to the stdout sink in combined mode
    } else {
        // Both pipes exist: the command was given Stdio::piped() just before the spawn.
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("stdout not piped"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| io::Error::other("stderr not piped"))?;
        let (read, fd) = shared_pipe(stdout);
        pipes.push(StreamPipe::new(Stream::Stdout, read, fd, stdout_sink));
        let (read, fd) = shared_pipe(stderr);
        pipes.push(StreamPipe::new(Stream::Stderr, read, fd, stderr_sink));
    }
    Ok(pipes)
}

/// A pipe's read end as its reader reads it and as the monitor keeps it: one descriptor.
fn shared_pipe(end: impl Into<OwnedFd>) -> (Box<dyn io::Read + Send>, PipeEnd) {
    let end: PipeEnd = Arc::new(std::fs::File::from(end.into()));
    (Box::new(SharedPipe(end.clone())), end)
}

/// Grows the pipe, gives the stream its recorder and (with a log folder) its spill thread.
fn record_pipe(
    pipe: &mut StreamPipe,
    config: &MonitorConfig,
    log_dir: Option<&spill::LogDir>,
    own_files: Option<&OwnFiles>,
    id: u64,
) -> io::Result<()> {
    // Larger pipes: a chatty child fills 64 KiB (the Linux default) in microseconds, and
    // then every chunk costs a sleep and a wake-up on each side. Best effort (capped by
    // /proc/sys/fs/pipe-max-size for unprivileged users).
    let stream = pipe.stream;
    if stream != Stream::Terminal {
        sys::grow_pipe(pipe.fd.as_fd());
    }
    pipe.recorder = Some(Arc::new(parking_lot::Mutex::new(Recorder::new(
        stream,
        HeadTail::new(config.capture.cap_per_stream),
        &config.events,
    ))));
    if let Some(dir) = log_dir {
        let spill = Spill::new(
            Some(dir.clone()),
            config.capture.spill_threshold,
            id,
            stream,
        )
        .own_files(own_files.cloned());
        let short = match stream {
            Stream::Stderr => "err",
            Stream::Terminal => "tty",
            Stream::Stdout | Stream::Combined => "out",
        };
        let (writer, report) = spill::start(spill, format!("stallwatch-log{short}-{id}"))?;
        pipe.spill_writer = Some(writer);
        pipe.spill = Some(report);
    }
    Ok(())
}

/// Where the stdin writer writes.
enum StdinTarget {
    /// The child's stdin pipe.
    Pipe(std::process::ChildStdin),
    /// The terminal the child runs on: bytes as typed keys.
    Terminal(Arc<Pty>),
}

impl StdinTarget {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            StdinTarget::Pipe(stdin) => io::Write::write_all(stdin, bytes),
            StdinTarget::Terminal(terminal) => terminal.write(bytes),
        }
    }

    /// The end of the input: a closed pipe, or EOF the terminal way.
    fn close(self, id: u64) {
        match self {
            // Dropping the pipe closes it: the child sees end-of-file.
            StdinTarget::Pipe(stdin) => drop(stdin),
            StdinTarget::Terminal(terminal) => {
                if let Err(e) = terminal.send_eof() {
                    log::debug!("session {id}: sending end-of-file through the terminal: {e}");
                }
            }
        }
    }
}

/// The stdin writer: a thread of its own, so a child that does not read never blocks the
/// caller (the queue is bounded; `write_stdin` gives up after a while).
fn start_stdin_writer(id: u64, stdin: Option<StdinTarget>) -> io::Result<Option<Sender<Vec<u8>>>> {
    Ok(match stdin {
        Some(mut stdin) => {
            let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(64);
            thread::Builder::new()
                .name(format!("stallwatch-in-{id}"))
                .spawn(move || {
                    for chunk in rx {
                        if let Err(e) = stdin.write(&chunk) {
                            log::debug!("session {id}: writing the child's stdin: {e}");
                            return;
                        }
                    }
                    // Every sender is gone: `close_stdin`, or the session ended.
                    stdin.close(id);
                })
                .map_err(|e| SpawnError::thread("stdin writer", e))?;
            Some(tx)
        }
        None => None,
    })
}

/// Starts the monitor thread; it runs once it receives the child on the returned channel.
fn start_monitor(
    id: u64,
    pid: i32,
    monitor: Monitor,
    shared: Arc<Shared>,
    done_tx: Sender<()>,
) -> io::Result<Sender<ChildProcess>> {
    let (child_tx, child_rx) = crossbeam_channel::bounded::<ChildProcess>(1);
    let done = DoneGuard {
        shared,
        done: Some(done_tx),
        pid,
        containment: monitor.containment.clone(),
    };
    thread::Builder::new()
        .name(format!("stallwatch-mon-{id}"))
        .spawn(move || {
            // The starter sends the child right after all threads are up; if it cannot (it
            // failed), this channel disconnects and the monitor ends without touching anything.
            if let Ok(child) = child_rx.recv() {
                monitor.run(child, done);
            } else {
                done.disarm();
                end_session(id);
            }
        })
        .inspect_err(|_| end_session(id))
        .map_err(|e| SpawnError::thread("monitor", e))?;
    Ok(child_tx)
}

/// One stream's reader, not started yet: its work, the thread's name, and its pipe to wait
/// on. The monitor starts it once the pipe has something to read: a program that never
/// writes to a stream costs no thread for it, and a stream that ends empty is read to its
/// end on the monitor's thread.
pub(super) struct Reader {
    pub(super) stream: Stream,
    pub(super) name: String,
    /// The pipe (the read end the work reads, shared with it).
    pub(super) fd: PipeEnd,
    /// Reads to the end: stamps the board, records, spills, passes on, then says it is done.
    pub(super) work: Box<dyn FnOnce() + Send>,
}

impl Reader {
    /// Runs the work on a thread of its own.
    pub(super) fn start(self) -> io::Result<()> {
        let Reader { name, fd, work, .. } = self;
        drop(fd);
        #[cfg(test)]
        READER_THREADS.lock().push(name.clone());
        thread::Builder::new()
            .name(name)
            .spawn(work)
            .map(drop)
            .map_err(|e| SpawnError::thread("output reader", e).into())
    }
}

/// One stream's reader: reads, stamps the board, records, spills, passes on.
#[allow(clippy::too_many_arguments)] // one call site; the parts of one reader
fn reader(
    id: u64,
    pipe: StreamPipe,
    state: Arc<PumpState>,
    control: &ControlTx,
    board: &Arc<ActivityBoard>,
    emitter: &Arc<Emitter>,
    clock: &Arc<dyn Clock>,
    lines: Option<LineSetup>,
) -> io::Result<Reader> {
    let StreamPipe {
        stream,
        pipe,
        fd,
        sink,
        recorder,
        spill_writer: spill,
        ..
    } = pipe;
    let control = control.clone();
    let board = board.clone();
    let recorder = recorder.ok_or_else(|| io::Error::other("no recorder for a stream"))?;
    let emitter = emitter.clone();
    let clock = clock.clone();
    let short = match stream {
        Stream::Stdout | Stream::Combined => "out",
        Stream::Stderr => "err",
        Stream::Terminal => "tty",
    };
    let mut sink = sink;
    let work = move || {
        let mut watch = lines.map(|setup| ReaderLines::new(setup, stream, &board));
        let mut reader = ActivityTrackingReader::new(pipe, board);
        if watch.as_ref().is_some_and(|w| w.repeats) {
            reader = reader.unstamped(); // the line watch stamps output or repeats
        }
        let mut notified: Option<Instant> = None;
        let pending_control = control.clone();
        let lines_control = control.clone();
        let watch_ref = &mut watch;
        let mut record = move |chunk: &[u8]| {
            if let Some(watch) = watch_ref.as_mut() {
                watch.feed(chunk, &lines_control);
            }
            if let Some(spill) = &spill {
                spill.push(chunk);
            }
            let due = recorder.lock().record(chunk, clock.now(), &emitter);
            if let Some(due) = due
                && notified != Some(due)
            {
                notified = Some(due);
                let _ = pending_control.send(Control::OutputPending(due));
            }
        };
        pump(&mut reader, &mut sink, &state, stream, &mut record);
        drop(record);
        if let Some(watch) = watch.as_mut() {
            watch.finish(&control);
        }
        let _ = control.send(Control::ReaderDone(stream));
    };
    Ok(Reader {
        stream,
        name: format!("stallwatch-{short}-{id}"),
        fd,
        work: Box::new(work),
    })
}

/// What every reader needs to look at lines: the compiled completion patterns, the line
/// callback, and whether repeats are told apart.
#[derive(Clone)]
pub(super) struct LineSetup {
    patterns: Option<regex::bytes::RegexSet>,
    callback: Option<crate::completion::LineCallback>,
    repeats: bool,
}

impl LineSetup {
    /// `None` when no line needs looking at.
    fn new(config: &MonitorConfig) -> io::Result<Option<Self>> {
        let repeats = config.watches(ActivitySource::RepeatedOutput);
        if !config.completion.watches_lines() && !repeats {
            return Ok(None);
        }
        let patterns = config
            .completion
            .patterns()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Some(Self {
            patterns,
            callback: config.completion.on_line.clone(),
            repeats,
        }))
    }
}

/// One reader's line watch: it stamps output or repeats (repeats told apart), and tells the
/// monitor of completion.
struct ReaderLines {
    watch: LineWatch,
    repeats: bool,
    stream: Stream,
    board: Arc<ActivityBoard>,
}

impl ReaderLines {
    fn new(setup: LineSetup, stream: Stream, board: &Arc<ActivityBoard>) -> Self {
        Self {
            watch: LineWatch::new(setup.patterns, setup.callback, setup.repeats),
            repeats: setup.repeats,
            stream,
            board: board.clone(),
        }
    }

    fn feed(&mut self, chunk: &[u8], control: &ControlTx) {
        let seen = self.watch.feed(chunk);
        if self.repeats {
            self.board.stamp(if seen.fresh {
                ActivitySource::Output
            } else {
                ActivitySource::RepeatedOutput
            });
        }
        self.tell(seen, control);
    }

    fn finish(&mut self, control: &ControlTx) {
        let seen = self.watch.finish();
        self.tell(seen, control);
    }

    fn tell(&self, seen: ChunkSeen, control: &ControlTx) {
        if let Some((trigger, matched)) = seen.completed {
            let after = self
                .board
                .clock()
                .now()
                .saturating_duration_since(self.board.origin());
            let _ = control.send(Control::Completed(CompletionSeen {
                trigger,
                stream: Some(self.stream),
                matched,
                after,
            }));
        }
    }
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use std::process::Command;

    use super::STARTED_PLAIN;
    use crate::config::{ContainmentMode, MonitorConfig};
    use crate::{Program, Session};

    /// Runs `builder`'s child to its end; returns whether it started without std's fork.
    fn started_plain(builder: crate::SessionBuilder) -> bool {
        let before = STARTED_PLAIN.with(|n| n.get());
        let session = builder.spawn().expect("it starts");
        let after = STARTED_PLAIN.with(|n| n.get());
        assert_eq!(session.wait().exit_code(), 0);
        after > before
    }

    #[test]
    fn a_program_in_pipe_mode_starts_without_a_fork_and_a_command_with_one() {
        // Group mode without the parent-death signal: no spawner thread, on any machine.
        let config = MonitorConfig::default()
            .watch_files(false)
            .containment(ContainmentMode::Group)
            .parent_death_signal(false);
        let program = || Program::new("true");
        assert!(started_plain(
            Session::builder(program()).config(config.clone())
        ));
        assert!(started_plain(
            Session::builder(program())
                .config(config.clone())
                .stdin_piped()
        ));
        assert!(started_plain(
            Session::builder(program())
                .config(config.clone())
                .non_interactive()
        ));
        // A terminal too: its program starts as the pipes' does (issue 28).
        let terminal = Session::builder(program())
            .config(config.clone())
            .pty(24, 80);
        assert!(started_plain(terminal));
        // What stallwatch cannot see goes through std: a caller's command, a stdin of the
        // caller's.
        let command = Session::builder(Command::new("true")).config(config.clone());
        assert!(!started_plain(command));
        let given = Session::builder(program())
            .config(config)
            .stdin(std::process::Stdio::null());
        assert!(!started_plain(given));
        // With the parent-death signal, from this thread (not the main one): through the
        // spawner thread, still without a fork.
        let config = MonitorConfig::default()
            .watch_files(false)
            .containment(ContainmentMode::Group);
        assert!(started_plain(Session::builder(program()).config(config)));
    }

    #[test]
    fn in_a_cgroup_a_program_starts_without_a_fork_from_any_thread() {
        let config = MonitorConfig::default().watch_files(false);
        let builder = Session::builder(Program::new("true")).config(config.clone());
        let session = builder.spawn().expect("it starts");
        let contained = matches!(
            session.wait().containment,
            crate::Containment::Cgroup { .. }
        );
        if contained {
            // The guardian replaces the parent-death signal: no spawner thread needed.
            let builder = Session::builder(Program::new("true")).config(config);
            assert!(started_plain(builder));
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod wakeup_tests {
    use std::time::Duration;

    use crate::monitor::wait::WAITERS;
    use crate::{MockClock, MonitorConfig, Outcome, Program, Session};

    /// Starts `sh -c script` (a grandchild keeps the output pipes open after the leader's
    /// exit) and waits; returns the outcome and how many waiter threads the start made.
    fn run(script: &str, mock: bool) -> (Outcome, u32, Duration) {
        let before = WAITERS.with(|n| n.get());
        let config = MonitorConfig::default()
            .watch_files(false)
            .idle_timeout(Duration::from_secs(60));
        let mut builder = Session::builder(Program::new("sh").args(["-c", script])).config(config);
        if mock {
            builder = builder.clock(MockClock::new());
        }
        let session = builder.spawn().expect("sh starts");
        let waiters = WAITERS.with(|n| n.get()) - before;
        let started = std::time::Instant::now();
        let result = session.wait();
        (result.outcome, waiters, started.elapsed())
    }

    #[test]
    fn on_the_real_clock_the_leaders_exit_wakes_the_monitor_without_a_waiter_thread() {
        // The leader exits while a grandchild holds its pipes for 30 s: only the exit (its
        // pidfd) can tell the monitor, which then ends the grandchild as a leftover.
        let script = "sleep 30 & echo started";
        let (outcome, waiters, took) = run(script, false);
        assert_eq!(outcome, Outcome::Exited);
        assert_eq!(waiters, 0, "no waiter thread on the real clock");
        assert!(
            took < Duration::from_secs(20),
            "the exit was seen: {took:?}"
        );
        // A test clock runs the same wait: the pidfd, no waiter either.
        let (outcome, waiters, _) = run(script, true);
        assert_eq!(outcome, Outcome::Exited);
        assert_eq!(waiters, 0);
    }

    #[test]
    fn the_stderr_reader_thread_starts_only_if_the_program_writes_there() {
        let config = MonitorConfig::default().watch_files(false);
        let script = "sleep 0.2; echo out; sleep 0.2";
        let session = Session::builder(Program::new("sh").args(["-c", script]))
            .config(config.clone())
            .spawn()
            .expect("sh starts");
        let result = session.wait();
        assert_eq!(result.outcome, Outcome::Exited);
        assert!(
            result.output_complete,
            "both streams were read to their end"
        );
        let out = session.snapshot().stdout.expect("captured").render_lossy();
        assert_eq!(out, "out\n");
        let id = session.id();
        let started = super::READER_THREADS.lock().clone();
        assert!(
            started.contains(&format!("stallwatch-out-{id}")),
            "{started:?}"
        );
        assert!(
            !started.contains(&format!("stallwatch-err-{id}")),
            "{started:?}"
        );
        // Written to: started, and everything read.
        let script = "sleep 0.2; echo err >&2; sleep 0.2";
        let session = Session::builder(Program::new("sh").args(["-c", script]))
            .config(config.clone())
            .spawn()
            .expect("sh starts");
        let result = session.wait();
        assert!(result.output_complete);
        let err = session.snapshot().stderr.expect("captured").render_lossy();
        assert_eq!(err, "err\n");
        let id = session.id();
        let started = super::READER_THREADS.lock().clone();
        assert!(
            started.contains(&format!("stallwatch-err-{id}")),
            "{started:?}"
        );
        // A test clock starts them the same way: only once a pipe has something to read (a
        // program that writes nothing is read to its end on the monitor's thread).
        let session = Session::builder(Program::new("true"))
            .config(config)
            .clock(MockClock::new())
            .spawn()
            .expect("true starts");
        assert_eq!(session.wait().outcome, Outcome::Exited);
        let id = session.id();
        let started = super::READER_THREADS.lock().clone();
        assert!(
            !started.contains(&format!("stallwatch-out-{id}")),
            "{started:?}"
        );
        assert!(
            !started.contains(&format!("stallwatch-err-{id}")),
            "{started:?}"
        );
    }
}
