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
use super::tap::{StreamSlot, Tap, stream_index};
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
use crate::outcome::{CompletionSeen, Containment, SupervisorDeath};
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
    pub(crate) config: MonitorConfig,
    pub(crate) clock: Arc<dyn Clock>,
    /// Whether `clock` is the real one (the session's own `SystemClock`): then the monitor can
    /// sleep in `poll` on the leader's pidfd instead of needing a waiter thread.
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
    let guarded = matches!(guardian, Some(Ok(_)));
    let spawned = spawn_in(command, &config, id, (entry, guarded), io);
    let (mut child, pty, combined_pipe, tag) = match spawned {
        Ok(spawned) => spawned,
        Err(e) => {
            // Nothing to guard: the cgroup goes with its handle, the guardian forgets it.
            drop(guardian);
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
/// parent-death signal), and spawns it with std's `Command`.
fn spawn_in(
    mut command: Command,
    config: &MonitorConfig,
    id: u64,
    held: (Option<sys::CgroupEntry>, bool),
    io: (Input, Option<(u16, u16)>, bool),
) -> io::Result<Spawned> {
    let ((entry, guarded), (stdin, pty_size, detached)) = (held, io);
    // A guardian that exists before the cgroup is made ends every member of it if this
    // process dies: the program needs no parent-death signal of its own, and so no fork from
    // the long-lived spawner thread (a thread start, and two hand-offs at every spawn).
    let parent_death = config.parent_death_signal && !guarded;
    let tag = subreaper_tag(&mut command, config, id);
    // From the main thread, the signal comes when the process dies, as from the spawner.
    let from_spawner = cfg!(target_os = "linux") && parent_death && !sys::on_main_thread();
    let lead = if detached {
        sys::Lead::Session
    } else {
        sys::Lead::Group
    };
    let (mut pty, combined_pipe, handoff) = attach_stdio(
        &mut command,
        parent_death,
        config,
        (stdin.into_stdio(), pty_size, lead),
        entry,
    )?;
    let (command, child) = spawn_leader(
        command,
        from_spawner,
        id,
        tag.as_ref(),
        pty.as_mut(),
        handoff,
    )?;
    log::debug!(
        "session {id}: spawned {:?} as pid {}",
        command.get_program(),
        child.id()
    );
    // The command still holds our copies of the pipes' write ends: close them, or the
    // readers would never see end-of-file.
    drop(command);
    Ok((child, pty, combined_pipe, tag))
}

/// The names of the reader threads started (tests).
#[cfg(test)]
static READER_THREADS: crate::sync::Mutex<Vec<String>> = crate::sync::Mutex::new(Vec::new());

#[cfg(test)]
thread_local! {
    /// How many waiter threads this thread started (tests).
    static WAITERS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
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

/// The session's cgroup as the configuration asks, with its place in the guardian (told just
/// before the cgroup is made): `None` for the group (with why not a cgroup under `Auto`); an
/// error of its own kind when a cgroup was required and cannot be had.
fn hold_tree(config: &MonitorConfig, id: u64) -> io::Result<Held> {
    let group = |why_not_cgroup| Held {
        cgroup: None,
        containment: Containment::Group {
            why_not_cgroup,
            supervisor_death: SupervisorDeath::NotNeeded,
        },
        guardian: None,
        entry: None,
    };
    if config.containment == ContainmentMode::Group {
        return Ok(group(None));
    }
    // The guardian is told of the cgroup just before it is made: from the cgroup's first
    // moment to its removal, something outside this process removes it (and ends its
    // members) if this process is killed.
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
                containment: Containment::Cgroup {
                    path,
                    supervisor_death: SupervisorDeath::NotNeeded,
                },
                guardian,
                entry: Some(entry),
            })
        }
        Err(why) => {
            drop(guardian); // forgets the session
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
    /// The session's place in the guardian, told of the cgroup (or why there is none).
    guardian: Option<Result<process::Guardian, String>>,
    /// What the child needs to start inside the cgroup.
    entry: Option<sys::CgroupEntry>,
}

/// With the parent-death signal asked for, the grandchildren should die with this process
/// too: the process's guardian SIGKILLs the group (and the cgroup's members, and removes the
/// cgroup) if this process vanishes. `None` when not asked for.
fn start_guardian(
    config: &MonitorConfig,
    id: u64,
    pid: Option<u32>,
    cgroup: Option<&std::path::Path>,
) -> Option<Result<process::Guardian, String>> {
    if !config.parent_death_signal {
        return None;
    }
    let guardian = process::Guardian::start(id, pid, cgroup);
    if let Err(why) = &guardian {
        log::info!("session {id}: no guardian: {why}");
    }
    Some(guardian)
}

/// The session's place in the guardian, taken before any reader thread (no output of the
/// child is passed on before it exists), unless the run is already over with nothing left to
/// guard: the leader exited and, adopting orphans and holding no cgroup, this process has no
/// child but it (and the library's own): every descendant still alive would be one. A program
/// that ends at once (`stallwatch -- true`) then costs no guardian. Returns it, what it means
/// for the supervisor's death, and whether the tree is provably gone.
fn guard_tree(
    config: &MonitorConfig,
    id: u64,
    pid: i32,
    processes: &mut OsProcesses,
    early: Option<Result<process::Guardian, String>>,
) -> (Option<process::Guardian>, SupervisorDeath, bool) {
    let guardian = match early {
        Some(early) => early, // in a cgroup: told before the program started
        None => {
            let gone = processes.cgroup.is_none()
                && sys::has_exited_no_reap(pid)
                && processes.leader_alone(pid);
            if gone {
                log::debug!("session {id}: pid {pid} already exited, alone: no guardian needed");
                return (None, SupervisorDeath::NotNeeded, true);
            }
            match start_guardian(config, id, Some(pid as u32), None) {
                Some(guardian) => guardian,
                None => return (None, SupervisorDeath::Nothing, false),
            }
        }
    };
    let death = process::guardian::supervisor_death(&guardian, config.parent_death_signal);
    (guardian.ok(), death, false)
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
    /// The session's place in the guardian, taken before the program (in a cgroup), if any.
    guardian: Option<Result<process::Guardian, String>>,
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
    fd: OwnedFd,
    sink: OutputSink,
    recorder: Option<Arc<crate::sync::Mutex<Recorder>>>,
    spill_writer: Option<SpillWriter>,
    spill: Option<SpillReport>,
    peek: Option<OwnedFd>,
}

impl StreamPipe {
    fn new(stream: Stream, pipe: Box<dyn io::Read + Send>, fd: OwnedFd, sink: OutputSink) -> Self {
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
    // On the real clock the monitor sleeps in `poll`, woken by messages and by the leader's
    // exit itself: no waiter thread, and one thread hand-off less between the exit and the
    // result. A test clock drives the monitor through its channel, the waiter through it too.
    let wakeup = streams
        .real_clock
        .then(|| sys::Wakeup::new(pid))
        .flatten()
        .map(Arc::new);
    let (control_tx, control_rx) = unbounded();
    let control_tx = ControlTx::new(control_tx, wakeup.clone());
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
    processes.hold(pid, streams.cgroup.take());
    let (guardian, supervisor_death, tree_gone) =
        guard_tree(&config, id, pid, &mut processes, streams.guardian.take());
    streams.containment.set_supervisor_death(supervisor_death);
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
        network,
        network_unavailable,
        unwatched: Vec::new(),
        reason: None,
        phase: Phase::Watching,
        wakeup: wakeup.clone(),
        stderr: None,
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
    // Sleeping in `poll`, the monitor starts the stderr reader once its pipe has something to
    // read: many programs never write there, and then it costs no thread. The stdout (or
    // combined, or terminal) reader starts at once: nearly every program writes there, and
    // its first line, often printed just before the exit, would otherwise wait for a thread's
    // start (measured: +0.06 to +0.11 ms of exit latency when both were started so).
    let mut monitor = monitor;
    if wakeup.is_some()
        && let Some(at) = readers.iter().position(|r| r.stream == Stream::Stderr)
    {
        monitor.stderr = Some(readers.swap_remove(at));
    }
    let child_tx = start_monitor(id, pid, monitor, shared.clone(), done_tx)?;
    for reader in readers {
        reader.start()?;
    }
    if wakeup.is_none() || tree_gone {
        start_waiter(id, pid, control_tx.clone(), tree_gone)?;
    }

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
                terminal.master_fd().try_clone_to_owned().map_err(read)?,
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
    // Duplicates of the read ends, only to ask how many unread bytes a pipe holds (FIONREAD)
    // while draining; they never read.
    for pipe in &mut pipes {
        pipe.peek = pipe.fd.try_clone().ok();
    }
    let stdin_tx = start_stdin_writer(id, streams.stdin.take())?;
    let mut recorders: [Option<Arc<crate::sync::Mutex<Recorder>>>; 2] = [None, None];
    let mut spills: [Option<Arc<crate::sync::Mutex<Spill>>>; 2] = [None, None];
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
        result: crate::sync::Mutex::new(None),
        pumps: pumps.clone(),
        recorders,
        combined,
        terminal: streams.terminal.clone(),
        emitter: streams.emitter.clone(),
        phase: std::sync::atomic::AtomicU8::new(Lifecycle::RUNNING),
        idle_timeout: AtomicU64::new(crate::clock::saturating_nanos(config.idle_timeout)),
        spills,
        stdin: crate::sync::Mutex::new(stdin_tx),
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
        let fd = reader.as_fd().try_clone_to_owned()?;
        pipes.push(StreamPipe::new(
            Stream::Combined,
            Box::new(reader),
            fd,
            stdout_sink,
        ));
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
        let out_fd = stdout.as_fd().try_clone_to_owned()?;
        let err_fd = stderr.as_fd().try_clone_to_owned()?;
        pipes.push(StreamPipe::new(
            Stream::Stdout,
            Box::new(stdout),
            out_fd,
            stdout_sink,
        ));
        pipes.push(StreamPipe::new(
            Stream::Stderr,
            Box::new(stderr),
            err_fd,
            stderr_sink,
        ));
    }
    Ok(pipes)
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
    pipe.recorder = Some(Arc::new(crate::sync::Mutex::new(Recorder::new(
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

/// One stream's reader, not started yet: its work, the thread's name, and a descriptor of
/// its pipe to wait on. The stderr reader of a monitor that sleeps in `poll` starts once the
/// pipe has something to read (a program that never writes there costs no thread for it, and
/// a stderr that ends empty is read to its end on the monitor's thread); the others start at
/// once.
pub(super) struct Reader {
    pub(super) stream: Stream,
    pub(super) name: String,
    /// The pipe (a duplicate of the read end the work reads).
    pub(super) fd: OwnedFd,
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

/// The waiter: tells the monitor when the leader exited (without reaping it). None when it
/// has exited already (`gone`: a zombie until the monitor reaps it), said at once then.
fn start_waiter(id: u64, pid: i32, exited: ControlTx, gone: bool) -> io::Result<()> {
    #[cfg(test)]
    WAITERS.with(|n| n.set(n.get() + u32::from(!gone)));
    if gone {
        let _ = exited.send(Control::ChildExited);
        return Ok(());
    }
    thread::Builder::new()
        .name(format!("stallwatch-wait-{id}"))
        .spawn(move || {
            if let Err(e) = sys::wait_exited_no_reap(pid) {
                log::error!("waiting for pid {pid}: {e}");
            }
            let _ = exited.send(Control::ChildExited);
        })
        .map_err(|e| SpawnError::thread("waiter", e))?;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod wakeup_tests {
    use std::time::Duration;

    use super::WAITERS;
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
        // A test clock keeps the waiter (its timers are channels, not `poll` timeouts).
        let (outcome, waiters, _) = run(script, true);
        assert_eq!(outcome, Outcome::Exited);
        assert_eq!(waiters, 1);
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
        // A test clock starts both at once.
        let session = Session::builder(Program::new("true"))
            .config(config)
            .clock(MockClock::new())
            .spawn()
            .expect("true starts");
        assert_eq!(session.wait().outcome, Outcome::Exited);
        let id = session.id();
        let started = super::READER_THREADS.lock().clone();
        assert!(
            started.contains(&format!("stallwatch-err-{id}")),
            "{started:?}"
        );
    }
}
