//! The launcher: spawns the child as the leader of a new process group with its pipes, and
//! starts the reader, stdin, waiter and monitor threads. Returns what the session handle needs.

use std::io;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::end_session;
use super::ladder::{Leader, OsProcesses};
use super::port::{Memory, OsPort};
use super::reader::{
    LineSetup, ReaderWiring, StreamPipe, open_pipes, reader, record_pipe, register_pipes,
};
use super::rules::Rules;
use super::run::{DoneGuard, Facts, Files, LeaderState, Monitor, Phase, Timing};
use super::stdin::{StdinTarget, start_stdin_writer};
use super::tap::{StreamSlot, Tap, stream_index};
use super::tree::guardian::Place;
use super::tree::{self, pipe_error, terminal_error};
use crate::activity::{ActivityBoard, ActivitySource};
use crate::capture::Recorder;
use crate::capture::spill::{self, Spill};
use crate::clock::Clock;
use crate::completion::FileWatch;
use crate::config::MonitorConfig;
use crate::contract::{Control, ControlTx, SessionState, Shared};
use crate::error::{SpawnError, SpawnErrorKind};
use crate::events::{ActivityEvents, Emitter, Event};
use crate::input_wait::InputWaitRule;
use crate::outcome::{NetworkUnavailable, TreeHold};
use crate::own_files::OwnFiles;
use crate::pid::Pid;
use crate::process::cgroup::Cgroup;
use crate::process::pty::Pty;
use crate::process::{ChildProcess, sys};
use crate::program::Stdin;
use crate::sources::children::DescendantObserver;
use crate::sources::files::FileActivityTracker;
use crate::sources::network::NetworkObserver;
use crate::sources::output::{OutputSink, PumpState};
use crate::stream::Stream;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the launcher needs to start one session: the parts of a validated builder.
pub(crate) struct Launch {
    /// The command, its environment already applied.
    pub(crate) command: Command,
    /// How the command is executed.
    pub(crate) exec: Exec,
    pub(crate) config: MonitorConfig,
    pub(crate) clock: Clock,
    pub(crate) stdout: OutputSink,
    pub(crate) stderr: OutputSink,
    pub(crate) stdin: Stdin,
    /// The isolated home prepared for the child, for the result.
    pub(crate) home: Option<crate::environment::IsolatedHome>,
    /// Where the program's stdio goes, and what it leads.
    pub(crate) attach: Attach,
}

/// How the command is executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exec {
    /// std's `execvp` (a caller's `Command`).
    Std,
    /// A [`Program`](crate::Program)'s (every setting known): quietus's own `execve` keeps its
    /// environment in order, cleared first when it is an isolated one.
    Ordered { env_cleared: bool },
}

/// Where the program's stdio goes, and what it leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attach {
    /// Pipes; it leads a process group of its own.
    Group,
    /// Pipes; it leads a session of its own, without a controlling terminal (non-interactive).
    Session,
    /// A pseudo-terminal of this size.
    Terminal { rows: u16, cols: u16 },
}

/// A launched session: the child runs, its threads are up, and the monitor owns the child.
pub(crate) struct Launched {
    pub(crate) id: u64,
    pub(crate) pid: Pid,
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
        exec,
        config,
        clock,
        stdout,
        stderr,
        stdin,
        home,
        attach,
    } = launch;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let watching = watch_before_the_spawn(&command, &config, &clock)?;
    let stdin_pipe = matches!(stdin, Stdin::Piped);
    let io = StartIo {
        stdin,
        attach,
        exec,
    };
    let (held, started) = hold_and_start(command, &config, id, io)?;
    let tree::Started {
        mut child,
        pty,
        combined,
        tag,
    } = started;
    let pid = child.id();
    let Watching {
        log_dir,
        board,
        emitter,
        files,
        completion_files,
        lines,
    } = watching;
    emitter.lifecycle(Event::Started { pid, pgid: pid });
    let output = match pty {
        Some(pty) => Output::Terminal(Arc::new(pty)),
        None => Output::Pipes { combined },
    };
    let streams = Streams {
        stdin: stdin_target(&output, stdin_pipe, &mut child),
        output,
        log_dir,
        own_files: files.as_ref().map(FileActivityTracker::own_files),
        home,
        sinks: (stdout, stderr),
    };
    let hold = Hold {
        tag,
        guardian: held.guardian,
        cgroup: held.cgroup,
        containment: held.containment,
        completion_files,
    };
    let assembly = Assembly {
        id,
        real_clock: clock.is_system(),
        config,
        clock,
        board: board.clone(),
        emitter,
        lines,
        files,
        streams,
        hold,
    };
    let started = start_threads(&mut child, assembly);
    hand_over(id, pid, board, child, started)
}

/// The program's stdio: its stdin, on a terminal or pipes, and how it is executed.
struct StartIo {
    stdin: Stdin,
    attach: Attach,
    exec: Exec,
}

/// Holds the tree (a cgroup, made just before the spawn: the program is born in it, and
/// dropping it, after a failed spawn, removes it) and starts the program with `stdin` on a
/// terminal of its size or on pipes, detached or not.
fn hold_and_start(
    command: Command,
    config: &MonitorConfig,
    id: u64,
    io: StartIo,
) -> io::Result<(tree::cgroup::Held, tree::Started)> {
    let mut held = tree::cgroup::hold_tree(config, id)?;
    let plan = tree::Plan {
        stdin: io.stdin,
        attach: io.attach,
        exec: io.exec,
        cgroup: held.entry.take(),
        guarded: matches!(held.guardian, Place::Taken(_)),
    };
    // On failure the cgroup goes with its handle, and the guardian forgets the session.
    let started = tree::start(command, config, id, plan)?;
    Ok((held, started))
}

/// Where the stdin writer writes: typed input goes to the terminal (always open for writing);
/// else the child's stdin pipe, when the caller feeds it.
fn stdin_target(output: &Output, piped: bool, child: &mut ChildProcess) -> Option<StdinTarget> {
    match output {
        Output::Terminal(terminal) => Some(StdinTarget::Terminal(terminal.clone())),
        Output::Pipes { .. } if piped => child.stdin.take().map(StdinTarget::Pipe),
        Output::Pipes { .. } => None,
    }
}

/// What is set up before the spawn, so that nothing of the child's is missed.
struct Watching {
    log_dir: Option<spill::LogDir>,
    board: Arc<ActivityBoard>,
    emitter: Arc<Emitter>,
    files: Option<FileActivityTracker>,
    completion_files: Option<FileWatch>,
    lines: Option<LineSetup>,
}

/// The log folder, the board, the file tracker, the completion files and the line watch.
fn watch_before_the_spawn(
    command: &Command,
    config: &MonitorConfig,
    clock: &Clock,
) -> io::Result<Watching> {
    // A named log folder that cannot be used is an error now, not lost output later.
    let log_dir = spill::resolve_dir(&config.capture)?;
    let (board, emitter) = new_board(clock, config);
    Ok(Watching {
        log_dir,
        // Armed before the spawn, so the child's first write already counts.
        files: arm_files(command, config, &board)?,
        // Looked at before the spawn: what the child changes counts, what was there does not.
        completion_files: completion_files(command, config)?,
        lines: LineSetup::new(config)?,
        board,
        emitter,
    })
}

/// The session's activity board, its output source on or off, and the event emitter that
/// observes it.
fn new_board(clock: &Clock, config: &MonitorConfig) -> (Arc<ActivityBoard>, Arc<Emitter>) {
    let probes: Vec<Arc<str>> = config
        .probes
        .iter()
        .filter_map(|p| match p.source() {
            ActivitySource::Probe(name) => Some(name),
            _ => None,
        })
        .collect();
    let board = Arc::new(ActivityBoard::with_probes(clock.clone(), &probes));
    board.set_enabled(&ActivitySource::Output, config.enabled.output);
    board.set_enabled(
        &ActivitySource::RepeatedOutput,
        config.watches(&ActivitySource::RepeatedOutput),
    );
    let emitter = Arc::new(Emitter::new(config.events.capacity));
    board.observe(Arc::new(ActivityEvents::new(
        emitter.clone(),
        config.events.throttle,
    )));
    (board, emitter)
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
            "cannot read quietus's working directory",
            e,
        )
    })?;
    Ok(match command.get_current_dir() {
        Some(dir) => cwd.join(dir),
        None => cwd,
    })
}

/// Hands the child to the monitor thread, or (if the threads could not start) kills and
/// reaps it.
fn hand_over(
    id: u64,
    pid: Pid,
    board: Arc<ActivityBoard>,
    mut child: ChildProcess,
    started: io::Result<Running>,
) -> io::Result<Launched> {
    match started {
        Ok(Running {
            control,
            done,
            shared,
            monitor,
        }) => match monitor.send(child) {
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
                let _ = sys::kill_group(pid, sys::SIGKILL);
                let _ = child.kill(); // by pid too: it may have left its group already
                let _ = child.wait();
                let stopped = io::Error::other("it stopped before it was handed the child");
                Err(SpawnError::thread("monitor", stopped).into())
            }
        },
        Err(e) => {
            end_session(id);
            let _ = sys::kill_group(pid, sys::SIGKILL);
            let _ = child.kill(); // by pid too: it may have left its group already
            let _ = child.wait();
            match SpawnError::of(&e) {
                Some(_) => Err(e),
                None => Err(SpawnError::new(
                    SpawnErrorKind::Thread,
                    "cannot start quietus's threads",
                    e,
                )
                .into()),
            }
        }
    }
}

/// The session's threads, started: the control channel, the done channel, what the session
/// shares with the monitor, and the way to hand the monitor its child.
struct Running {
    control: ControlTx,
    done: Receiver<()>,
    shared: Arc<Shared>,
    monitor: Sender<ChildProcess>,
}

/// A session being assembled: what its threads start with.
struct Assembly {
    id: u64,
    config: MonitorConfig,
    clock: Clock,
    /// Whether the session runs on the real clock (see [`Launch::real_clock`]).
    real_clock: bool,
    board: Arc<ActivityBoard>,
    emitter: Arc<Emitter>,
    /// The readers' line watch, if lines need looking at.
    lines: Option<LineSetup>,
    files: Option<FileActivityTracker>,
    /// What the output streams open from.
    streams: Streams,
    /// How the tree is held, for the monitor.
    hold: Hold,
}

/// The output streams, set up: the pipes for the reader threads, one slot per stream for the
/// monitor, and what the session and the monitor share.
struct Opened {
    pipes: Vec<StreamPipe>,
    slots: [Option<StreamSlot>; 2],
    shared: Arc<Shared>,
}

/// Where the program's output comes from.
enum Output {
    /// The terminal of a terminal session (one stream, no pipes).
    Terminal(Arc<Pty>),
    /// Its stdout and stderr pipes, or, in the combined mode, the read end of the one pipe.
    Pipes {
        combined: Option<std::io::PipeReader>,
    },
}

/// What the output streams open from: how the output is read and recorded.
struct Streams {
    output: Output,
    log_dir: Option<spill::LogDir>,
    /// The file activity tracker's own files: the logs register there (they never count).
    own_files: Option<OwnFiles>,
    /// The child's stdin, when the caller feeds it (always the terminal in a terminal session).
    stdin: Option<StdinTarget>,
    /// The isolated home prepared for the child, for the result.
    home: Option<crate::environment::IsolatedHome>,
    /// Where stdout and stderr go.
    sinks: (OutputSink, OutputSink),
}

/// How the tree is held, for the monitor.
struct Hold {
    /// `QUIETUS_SESSION=…` given to the child in subreaper mode.
    tag: Option<Vec<u8>>,
    /// The session's place in the guardian, taken before the program (in a cgroup), if any.
    guardian: Place,
    /// The session's cgroup, when it has one.
    cgroup: Option<Arc<Cgroup>>,
    /// How the tree is held, for the result.
    containment: TreeHold,
    /// The completion files, as they were before the spawn.
    completion_files: Option<FileWatch>,
}

/// What the monitor is made of beside its streams' slots.
struct MonitorParts {
    id: u64,
    config: MonitorConfig,
    clock: Clock,
    board: Arc<ActivityBoard>,
    emitter: Arc<Emitter>,
    files: Option<FileActivityTracker>,
    hold: Hold,
    control: Receiver<Control>,
    sleeper: super::wait::Sleeper,
}

/// Starts the session's threads around `child`: opens its streams, makes the monitor (not
/// running until it is handed the child), the readers, and the waiter where one is needed.
fn start_threads(child: &mut ChildProcess, parts: Assembly) -> io::Result<Running> {
    let Assembly {
        id,
        config,
        clock,
        real_clock,
        board,
        emitter,
        lines,
        files,
        streams,
        hold,
    } = parts;
    let pid = child.id();
    // The monitor sleeps in `poll` under every clock, woken by messages, by the leader's exit
    // itself (its pidfd: no waiter thread), by its clock's timers (`monitor::wait`).
    let (sleeper, wakeup) = super::wait::Sleeper::new(id, pid, real_clock)?;
    let (control_tx, control_rx) = unbounded();
    let control_tx = ControlTx::new(control_tx, Some(wakeup.clone()));
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    let pumps: [Arc<PumpState>; 2] = Default::default(); // two distinct states
    let opened = open_streams(id, child, &config, (streams, &emitter), &pumps)?;
    register_pipes(id, &opened.pipes);
    let shared = opened.shared.clone();
    // The monitor first: its place in the guardian is taken before any reader can start.
    let parts = MonitorParts {
        id,
        config,
        clock: clock.clone(),
        board: board.clone(),
        emitter: emitter.clone(),
        files,
        hold,
        control: control_rx,
        sleeper,
    };
    let (mut monitor, containment) = new_monitor(pid, parts, (opened.slots, shared.clone()));
    let wiring = ReaderWiring {
        id,
        control: &control_tx,
        board: &board,
        emitter: &emitter,
        clock: &clock,
        lines: lines.as_ref(),
    };
    // The monitor starts each reader once its pipe has something to read: a program that
    // never writes to a stream (a sleeping one, or stderr for most) costs no thread for it,
    // so a server holds many sleeping sessions on few threads.
    for pipe in opened.pipes {
        let slot = stream_index(pipe.stream);
        let state = pumps[slot].clone();
        monitor.port.readers[slot] = Some(reader(&wiring, pipe, state)?);
    }
    let tree_gone = monitor.tree_gone;
    let child_tx = start_monitor((monitor, containment), shared.clone(), done_tx)?;
    super::wait::watch_exit(id, pid, &wakeup, control_tx.clone(), tree_gone)?;
    Ok(Running {
        control: control_tx,
        done: done_rx,
        shared,
        monitor: child_tx,
    })
}

/// The monitor of leader `pid`, with its observers, its ladder (which signals the leader
/// through `sleeper`'s pidfd: one per session) and its place in the guardian (not running
/// yet; its readers are the caller's to give).
fn new_monitor(
    pid: Pid,
    parts: MonitorParts,
    (slots, shared): ([Option<StreamSlot>; 2], Arc<Shared>),
) -> (Monitor<OsPort>, TreeHold) {
    let MonitorParts {
        id,
        config,
        clock,
        board,
        emitter,
        files,
        hold,
        control,
        sleeper,
    } = parts;
    let Hold {
        tag,
        guardian,
        cgroup,
        mut containment,
        completion_files,
    } = hold;
    let children = start_observer(pid, &config, &board, cgroup.as_ref());
    let (network, network_unavailable) = start_network(&config, &board);
    let mut processes = OsProcesses::new(id, children, tag);
    processes.hold(pid, cgroup, sleeper.leader_pidfd());
    let gone = || {
        processes.cgroup.is_none() && sys::has_exited_no_reap(pid) && processes.leader_alone(pid)
    };
    let guarded = tree::guardian::guard_tree(&config, id, pid, gone, guardian);
    containment.set_supervisor_death(guarded.supervisor_death);
    let rules = Rules::new(id, &config, completion_files, clock.now());
    let port = OsPort {
        id,
        pid,
        sleeper,
        readers: [None, None],
        leader: Leader::new(),
        guardian: guarded.guardian,
        processes,
        network,
    };
    let monitor = Monitor {
        observer: super::observe::Observer::new(config.observe), // observe mode (issue 43)
        input_wait: InputWaitRule::new(config.input_wait_notice, config.input_wait_timeout),
        rules,
        id,
        pid,
        timing: Timing::new(&config, &clock, &board),
        config,
        clock,
        board,
        control,
        shared,
        emitter,
        tap: Tap::new(slots),
        leader: LeaderState::Running,
        memory: Memory::default(),
        tree_gone: guarded.tree_gone,
        files: files.map_or(Files::Off, |files| Files::Watching(Box::new(files))),
        network_unavailable,
        phase: Phase::Watching,
        port,
    };
    (monitor, containment)
}

/// The terminal's one output stream: its master, read by one reader, to the stdout sink.
fn terminal_pipe(terminal: &Arc<Pty>, sink: OutputSink) -> io::Result<StreamPipe> {
    let read = terminal_error("read");
    Ok(StreamPipe::new(
        Stream::Terminal,
        Box::new(terminal.reader().map_err(read)?),
        Arc::new(
            terminal
                .master_fd()
                .try_clone_to_owned()
                .map_err(read)?
                .into(),
        ),
        sink,
    ))
}

/// Sets up the output streams: the pipes for the reader threads, one slot per stream for the
/// monitor, the stdin writer, and what the session and the monitor share.
fn open_streams(
    id: u64,
    child: &mut ChildProcess,
    config: &MonitorConfig,
    (streams, emitter): (Streams, &Arc<Emitter>),
    pumps: &[Arc<PumpState>; 2],
) -> io::Result<Opened> {
    let Streams {
        output,
        log_dir,
        own_files,
        stdin,
        home,
        sinks: (stdout_sink, stderr_sink),
    } = streams;
    let (mut pipes, terminal, combined) = match output {
        Output::Terminal(terminal) => {
            drop(stderr_sink); // the terminal is one stream, to the stdout sink
            let pipe = terminal_pipe(&terminal, stdout_sink)?;
            (vec![pipe], Some(terminal), false)
        }
        Output::Pipes { combined } => {
            let one = combined.is_some();
            let pipes = open_pipes(child, combined, stdout_sink, stderr_sink)
                .map_err(pipe_error("read"))?;
            (pipes, None, one)
        }
    };
    for pipe in &mut pipes {
        record_pipe(pipe, config, log_dir.as_ref(), own_files.as_ref(), id)?;
    }
    // The read ends, for the monitor to ask how many unread bytes a pipe holds (FIONREAD)
    // while draining; it never reads them.
    for pipe in &mut pipes {
        pipe.peek = Some(pipe.fd.clone());
    }
    let stdin_tx = start_stdin_writer(id, stdin)?;
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
        result: std::sync::OnceLock::new(),
        pumps: pumps.clone(),
        recorders,
        combined,
        terminal,
        emitter: emitter.clone(),
        phase: std::sync::atomic::AtomicU8::new(SessionState::RUNNING),
        idle_timeout: AtomicU64::new(crate::clock::saturating_nanos(config.idle_timeout)),
        spills,
        stdin: crate::sync::Mutex::new(stdin_tx),
        home,
        caps: config.effective_caps(),
    });
    Ok(Opened {
        pipes,
        slots,
        shared,
    })
}

/// The observer always runs: besides descendant CPU (when that source is on) it remembers
/// the escapees the ladder must reach. Its baseline sample is the monitor's first act.
fn start_observer(
    pid: Pid,
    config: &MonitorConfig,
    board: &ActivityBoard,
    cgroup: Option<&Arc<Cgroup>>,
) -> Option<DescendantObserver> {
    let mut observer = DescendantObserver::new(pid, &config.children);
    if let Some(cgroup) = cgroup {
        // The tree's CPU in one read of `cpu.stat` (escapees and reaped children included),
        // its size from `cgroup.procs`, the CPU it waited for from `cpu.pressure`.
        let cgroup = cgroup.clone();
        observer.use_cgroup(Box::new(move || {
            Some(crate::sources::children::CgroupReading {
                usage: cgroup.cpu_usage().ok()?,
                members: cgroup.members().ok()?,
                waited: cgroup.cpu_waited().ok(),
            })
        }));
    }
    board.set_enabled(&ActivitySource::Children, config.enabled.children);
    if config.enabled.children
        && let Some(why) = observer.blind()
    {
        log::warn!("children source unavailable: {why}; the descendants are not seen");
        board.set_available(&ActivitySource::Children, false);
    }
    Some(observer)
}

/// The network source when it is on (its baseline sample of the tree's sockets is the
/// monitor's first act), or why it cannot observe anything (then it is reported unavailable;
/// the spawn goes on).
fn start_network(
    config: &MonitorConfig,
    board: &ActivityBoard,
) -> (Option<NetworkObserver>, Option<NetworkUnavailable>) {
    board.set_enabled(&ActivitySource::Network, config.enabled.network);
    if !config.enabled.network {
        return (None, None);
    }
    match NetworkObserver::open() {
        Ok(network) => (Some(network), None),
        Err(e) => {
            // No `/proc` of this pid namespace (the observer refused to open), or no socket
            // diagnostics.
            #[cfg(target_os = "linux")]
            let foreign = crate::process::sys::proc_view().why_not();
            #[cfg(not(target_os = "linux"))]
            let foreign: Option<crate::process::sys::proc::ProcUnavailable> = None;
            let reason = match foreign {
                Some(why) => NetworkUnavailable::ForeignProc(why),
                None => NetworkUnavailable::NoSocketDiagnostics((&e).into()),
            };
            log::info!("network source unavailable: {reason}");
            board.set_available(&ActivitySource::Network, false);
            (None, Some(reason))
        }
    }
}

/// Starts the monitor thread; it runs once it receives the child on the returned channel.
fn start_monitor(
    (monitor, containment): (Monitor<OsPort>, TreeHold),
    shared: Arc<Shared>,
    done_tx: Sender<()>,
) -> io::Result<Sender<ChildProcess>> {
    let (id, pid) = (monitor.id, monitor.pid);
    let (child_tx, child_rx) = crossbeam_channel::bounded::<ChildProcess>(1);
    let facts = Facts { pid, containment };
    let kill_tree = Box::new(move || {
        let _ = sys::kill_group(pid, sys::SIGKILL);
    });
    let done = DoneGuard::new(shared, done_tx, facts, kill_tree);
    thread::Builder::new()
        .name(format!("quietus-mon-{id}"))
        .spawn(move || {
            // The starter sends the child right after all threads are up; if it cannot (it
            // failed), this channel disconnects and the monitor ends without touching anything.
            if let Ok(child) = child_rx.recv() {
                let mut monitor = monitor;
                monitor.port.adopt(child);
                monitor.run(done);
            } else {
                done.disarm();
                end_session(id);
            }
        })
        .inspect_err(|_| end_session(id))
        .map_err(|e| SpawnError::thread("monitor", e))?;
    Ok(child_tx)
}
