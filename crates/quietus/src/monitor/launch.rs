//! The launcher: starts one session in typed stages, each moving the one before it whole, so
//! that each is built once and a test can stop at any stage:
//!
//! 1. **held** ([`Held::new`]): the session's [`Core`] made (id, configuration, clock, board,
//!    emitter), what must be watched before the spawn armed (the log folder, the file
//!    tracker, the completion files, the line watch) and the tree's hold taken (a cgroup, the
//!    guardian's place). No process yet.
//! 2. **spawned** ([`Held::spawn`]): the program runs, leading a process group (or a session)
//!    of its own, on pipes or a terminal (`monitor::tree`).
//! 3. **wired** ([`Spawned::wire`]): its streams opened and recorded, the monitor made on the
//!    operating system's port ([`OsPort`]) with the tree's observers, its readers waiting for
//!    their pipes. Nothing of it runs yet.
//!
//! Every thread the session needs after the spawn (the monitor, the readers, the stdin writer,
//! the exit waiter where there is no pidfd) is started between stages 1 and 2, waiting for its
//! work ([`Spares`]): a thread that cannot be had fails the launch before anything runs.
//! Then [`Wired::start`] gives the monitor thread its work and the exit watch its own, and
//! [`hand_over`] gives the monitor its child (or, when that fails, kills and reaps it).

use std::io;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::core::Core;
use super::ladder::{Leader, OsProcesses};
use super::port::OsPort;
use super::reader::{
    LineSetup, ReaderWiring, StreamPipe, open_pipes, reader, reader_name, record_pipe,
    register_pipes,
};
use super::run::{DoneGuard, Facts, Monitor};
use super::stdin::{StdinTarget, start_stdin_writer};
use super::tap::{StreamSlot, stream_index};
use super::tree::guardian::Place;
use super::tree::{self, Attach, Exec, end_session, pipe_error, terminal_error};
use super::wait::Sleeper;
use crate::activity::{ActivityBoard, ActivitySource};
use crate::capture::spill;
use crate::clock::Clock;
use crate::completion::FileWatch;
use crate::config::MonitorConfig;
use crate::contract::{ControlTx, Shared};
use crate::environment::IsolatedHome;
use crate::error::{SpawnError, SpawnErrorKind};
use crate::events::Event;
use crate::outcome::{NetworkUnavailable, TreeHold};
use crate::pid::Pid;
use crate::process::ChildProcess;
use crate::process::cgroup::Cgroup;
use crate::process::pty::Pty;
use crate::process::spare::Spare;
use crate::process::sys::{self, Wakeup};
use crate::program::Stdin;
use crate::sources::children::DescendantObserver;
use crate::sources::files::FileActivityTracker;
use crate::sources::network::NetworkObserver;
use crate::sources::output::OutputSink;
use crate::sources::probes::Prober;
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
    pub(crate) home: Option<IsolatedHome>,
    /// Where the program's stdio goes, and what it leads.
    pub(crate) attach: Attach,
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
    let core = Core::new(NEXT_ID.fetch_add(1, Ordering::Relaxed), config, clock);
    let held = Held::new(core, &command)?;
    let io = StartIo {
        stdin,
        attach,
        exec,
    };
    let spares = Spares::start(&held.core, &io)?;
    let (mut child, spawned) = held.spawn(command, io)?;
    let (id, pid) = (spawned.held.core.id, spawned.pid);
    let sinks = Sinks {
        stdout,
        stderr,
        home,
    };
    let running = spawned
        .wire(&mut child, sinks, spares)
        .and_then(Wired::start);
    hand_over(id, pid, child, running)
}

/// The session's threads, started before the program (issue 51 item 1), each waiting for its
/// work: a thread the system refuses (a process limit, memory) then fails the launch with
/// nothing run, never a program whose output would have no reader.
struct Spares {
    monitor: Spare,
    /// One per stream slot ([`stream_index`]): stdout (or the combined pipe, or the terminal),
    /// stderr.
    readers: [Option<Spare>; 2],
    /// The stdin writer, when the caller feeds the child's stdin (always on a terminal).
    stdin: Option<Spare>,
    /// The exit waiter, where the system has no pidfds.
    waiter: Option<Spare>,
    /// The relay of a clock other than the real one.
    relay: Option<Spare>,
    /// The probes, each with its thread.
    prober: Prober,
}

impl Spares {
    /// Starts the threads session `core` will need for a program started with `io`.
    fn start(core: &Core, io: &StartIo) -> io::Result<Spares> {
        let id = core.id;
        let terminal = matches!(io.attach, Attach::Terminal { .. });
        let streams = if terminal {
            [Some(Stream::Terminal), None]
        } else if core.config.capture.combined {
            [Some(Stream::Combined), None]
        } else {
            [Some(Stream::Stdout), Some(Stream::Stderr)]
        };
        let monitor = Spare::start(format!("quietus-mon-{id}"), "monitor")?;
        let mut readers = [None, None];
        for stream in streams.into_iter().flatten() {
            let name = reader_name(stream, id);
            readers[stream_index(stream)] = Some(Spare::start(name, "output reader")?);
        }
        let fed = terminal || matches!(io.stdin, Stdin::Piped);
        let stdin = fed
            .then(|| Spare::start(format!("quietus-in-{id}"), "stdin writer"))
            .transpose()?;
        let waiter = (!sys::pidfds())
            .then(|| Spare::start(format!("quietus-wait-{id}"), "waiter"))
            .transpose()?;
        let relay = (!core.clock.is_system())
            .then(|| Spare::start(format!("quietus-clock-{id}"), "clock relay"))
            .transpose()?;
        let prober = Prober::started(id, &core.config.probes)?;
        Ok(Spares {
            monitor,
            readers,
            stdin,
            waiter,
            relay,
            prober,
        })
    }
}

/// The program's stdio: its stdin, on a terminal or pipes, and how it is executed.
struct StartIo {
    stdin: Stdin,
    attach: Attach,
    exec: Exec,
}

/// Where the program's output goes, and the isolated home prepared for it (for the result).
struct Sinks {
    stdout: OutputSink,
    stderr: OutputSink,
    home: Option<IsolatedHome>,
}

/// Stage 1: the core made, what must be watched before the spawn armed (so that nothing of
/// the child's is missed), and the tree's hold taken. No process yet.
struct Held {
    core: Core,
    /// The log folder (a named one that cannot be used is an error now, not lost output).
    log_dir: Option<spill::LogDir>,
    /// The file tracker, armed before the spawn: the child's first write already counts.
    files: Option<FileActivityTracker>,
    /// The completion files as they were before the spawn: what the child changes counts.
    completion_files: Option<FileWatch>,
    /// The readers' line watch, if lines need looking at.
    lines: Option<LineSetup>,
    /// How the tree is held: its cgroup (made just before the spawn, so the program is born
    /// in it) and the session's place in the guardian.
    tree: tree::cgroup::Held,
}

impl Held {
    /// Stage 1 for `command`, which will start in its working directory.
    fn new(core: Core, command: &Command) -> io::Result<Held> {
        let config = &core.config;
        let log_dir = spill::resolve_dir(&config.capture)?;
        let files = arm_files(command, config, &core.board)?;
        let completion_files = completion_files(command, config)?;
        let lines = LineSetup::new(config)?;
        let tree = tree::cgroup::hold_tree(config, core.id)?;
        Ok(Held {
            core,
            log_dir,
            files,
            completion_files,
            lines,
            tree,
        })
    }

    /// Stage 2: starts the program with `io.stdin` on a terminal of its size or on pipes,
    /// detached or not, in the session's cgroup if it has one. On failure the cgroup goes
    /// with its handle, and the guardian forgets the session.
    fn spawn(mut self, command: Command, io: StartIo) -> io::Result<(ChildProcess, Spawned)> {
        let piped = matches!(io.stdin, Stdin::Piped);
        let plan = tree::Plan {
            stdin: io.stdin,
            attach: io.attach,
            exec: io.exec,
            cgroup: self.tree.entry.take(),
            guarded: matches!(self.tree.guardian, Place::Taken(_)),
        };
        let tree::Started {
            mut child,
            pty,
            combined,
            tag,
        } = tree::start(command, &self.core.config, self.core.id, plan)?;
        let pid = child.id();
        self.core
            .emitter
            .lifecycle(Event::Started { pid, pgid: pid });
        let output = match pty {
            Some(pty) => Output::Terminal(Arc::new(pty)),
            None => Output::Pipes { combined },
        };
        let stdin = stdin_target(&output, piped, &mut child);
        let spawned = Spawned {
            held: self,
            pid,
            output,
            stdin,
            tag,
        };
        Ok((child, spawned))
    }
}

/// Stage 2: the program runs (the caller holds the child, to end it if a later stage fails).
struct Spawned {
    held: Held,
    /// The leader, and its process group.
    pid: Pid,
    /// Where its output comes from.
    output: Output,
    /// The child's stdin, when the caller feeds it (always the terminal in a terminal session).
    stdin: Option<StdinTarget>,
    /// `QUIETUS_SESSION=…` given to the child in subreaper mode.
    tag: Option<Vec<u8>>,
}

/// Stage 3: the monitor made, its readers waiting; nothing of it runs yet.
struct Wired {
    monitor: Monitor<OsPort>,
    /// How the tree is held, for the result.
    containment: TreeHold,
    /// The session's mailbox.
    control: ControlTx,
    /// What wakes the monitor (the leader's exit, where no descriptor tells of it).
    wakeup: Arc<Wakeup>,
    /// The monitor's thread, and the exit waiter's where there is no pidfd.
    threads: (Spare, Option<Spare>),
}

impl Spawned {
    /// Stage 3: opens the child's streams (to `sinks`), makes the monitor on the operating
    /// system's port, and gives it the readers to start once their pipes have something to
    /// read.
    fn wire(self, child: &mut ChildProcess, sinks: Sinks, spares: Spares) -> io::Result<Wired> {
        let Spawned {
            held,
            pid,
            output,
            stdin,
            tag,
        } = self;
        let Held {
            core,
            log_dir,
            files,
            completion_files,
            lines,
            tree,
        } = held;
        // The monitor sleeps in `poll` under every clock, woken by messages, by the leader's
        // exit itself (its pidfd: no waiter thread), by its clock's timers (`monitor::wait`).
        let Spares {
            monitor: monitor_thread,
            mut readers,
            stdin: stdin_thread,
            waiter,
            relay,
            prober,
        } = spares;
        let (sleeper, wakeup) = Sleeper::new(pid, relay)?;
        let (control_tx, control_rx) = unbounded();
        let control = ControlTx::new(control_tx, Some(wakeup.clone()));
        let streams = Streams {
            output,
            log_dir,
            own_files: files.as_ref().map(FileActivityTracker::own_files),
            stdin,
            sinks,
        };
        let opened = open_streams(&core, child, streams, stdin_thread)?;
        register_pipes(core.id, &opened.pipes);
        // The monitor first: its place in the guardian is taken before any reader can start.
        let os = os_port(&core, pid, sleeper, tree, tag);
        let mut monitor = Monitor::new(core, pid, Arc::new(opened.shared), control_rx, os.port)
            .with_streams(opened.slots)
            .with_watches(files, completion_files);
        monitor.tree_gone = os.tree_gone;
        monitor.network_unavailable = os.network_unavailable;
        monitor.children_unavailable = os.children_unavailable;
        monitor.rules.prober = prober;
        let wiring = ReaderWiring {
            id: monitor.core.id,
            control: &control,
            board: &monitor.core.board,
            emitter: &monitor.core.emitter,
            clock: &monitor.core.clock,
            lines: lines.as_ref(),
        };
        // The monitor starts each reader once its pipe has something to read: a program that
        // never writes to a stream (a sleeping one, or stderr for most) costs no thread for
        // it, so a server holds many sleeping sessions on few threads.
        for pipe in opened.pipes {
            let slot = stream_index(pipe.stream);
            let state = monitor.shared.pumps[slot].clone();
            let thread = readers[slot].take().ok_or_else(|| {
                let none = io::Error::other("no thread was started for it before the program");
                SpawnError::thread("output reader", none)
            })?;
            monitor.port.readers[slot] = Some(reader(&wiring, pipe, state, thread)?);
        }
        Ok(Wired {
            monitor,
            containment: os.containment,
            control,
            wakeup,
            threads: (monitor_thread, waiter),
        })
    }
}

impl Wired {
    /// Gives the monitor thread its work (it runs once it is handed the child) and starts the
    /// watch on the leader's exit where one is needed.
    fn start(self) -> io::Result<Running> {
        let Wired {
            monitor,
            containment,
            control,
            wakeup,
            threads: (thread, waiter),
        } = self;
        let (id, pid, tree_gone) = (monitor.core.id, monitor.pid, monitor.tree_gone);
        let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
        let launched = Launched {
            id,
            pid,
            board: monitor.core.board.clone(),
            control: control.clone(),
            done,
            shared: monitor.shared.clone(),
        };
        let child_tx = start_monitor(monitor, containment, done_tx, thread)?;
        super::wait::watch_exit(pid, &wakeup, control, tree_gone, waiter)?;
        Ok(Running {
            launched,
            monitor: child_tx,
        })
    }
}

/// The session's threads, started: what the session handle needs, and the way to hand the
/// monitor its child.
struct Running {
    launched: Launched,
    monitor: Sender<ChildProcess>,
}

/// Hands the child to the monitor thread, or (if the threads could not start) kills and
/// reaps it.
fn hand_over(
    id: u64,
    pid: Pid,
    child: ChildProcess,
    running: io::Result<Running>,
) -> io::Result<Launched> {
    let error = match running {
        // The monitor owns the child from here on.
        Ok(running) => match running.monitor.send(child) {
            Ok(()) => return Ok(running.launched),
            Err(crossbeam_channel::SendError(child)) => {
                abandon(id, pid, child);
                let stopped = io::Error::other("it stopped before it was handed the child");
                return Err(SpawnError::thread("monitor", stopped).into());
            }
        },
        Err(e) => e,
    };
    abandon(id, pid, child);
    match SpawnError::of(&error) {
        Some(_) => Err(error),
        None => Err(SpawnError::new(
            SpawnErrorKind::Thread,
            "cannot start quietus's threads",
            error,
        )
        .into()),
    }
}

/// Ends a session whose threads could not start: its group and the child killed, the child
/// reaped.
fn abandon(id: u64, pid: Pid, mut child: ChildProcess) {
    end_session(id);
    let _ = sys::kill_group(pid, sys::SIGKILL);
    let _ = child.kill(); // by pid too: it may have left its group already
    let _ = child.wait();
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
    own_files: Option<crate::own_files::OwnFiles>,
    /// The child's stdin, when the caller feeds it.
    stdin: Option<StdinTarget>,
    sinks: Sinks,
}

/// The output streams, set up: the pipes for the reader threads, one slot per stream for the
/// monitor, and what the session and the monitor share.
struct Opened {
    pipes: Vec<StreamPipe>,
    slots: [Option<StreamSlot>; 2],
    shared: Shared,
}

/// Sets up the output streams: the pipes for the reader threads, one slot per stream for the
/// monitor, the stdin writer, and what the session and the monitor share.
fn open_streams(
    core: &Core,
    child: &mut ChildProcess,
    streams: Streams,
    stdin_thread: Option<Spare>,
) -> io::Result<Opened> {
    let Streams {
        output,
        log_dir,
        own_files,
        stdin,
        sinks,
    } = streams;
    let (mut pipes, terminal, combined) = match output {
        Output::Terminal(terminal) => {
            drop(sinks.stderr); // the terminal is one stream, to the stdout sink
            let pipe = terminal_pipe(&terminal, sinks.stdout)?;
            (vec![pipe], Some(terminal), false)
        }
        Output::Pipes { combined } => {
            let one = combined.is_some();
            let pipes = open_pipes(child, combined, sinks.stdout, sinks.stderr)
                .map_err(pipe_error("read"))?;
            (pipes, None, one)
        }
    };
    for pipe in &mut pipes {
        record_pipe(
            pipe,
            &core.config,
            log_dir.as_ref(),
            own_files.as_ref(),
            core.id,
        )?;
        // The read end, for the monitor to ask how many unread bytes the pipe holds
        // (FIONREAD) while draining; it never reads it.
        pipe.peek = Some(pipe.fd.clone());
    }
    let stdin_tx = start_stdin_writer(core.id, stdin, stdin_thread)?;
    let base = core.shared();
    let (mut recorders, mut spills) = (base.recorders.clone(), base.spills.clone());
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
    let shared = Shared {
        recorders,
        spills,
        combined,
        terminal,
        stdin: crate::sync::Mutex::new(stdin_tx),
        home: sinks.home,
        ..base
    };
    Ok(Opened {
        pipes,
        slots,
        shared,
    })
}

/// The operating system's side of the monitor, made: its port, how the tree is held, whether
/// the tree was gone before the monitor started, and why the network source sees nothing.
struct OsSide {
    port: OsPort,
    containment: TreeHold,
    tree_gone: bool,
    network_unavailable: Option<NetworkUnavailable>,
    /// Why the children source, though on, sees no process (no `/proc` of this pid namespace).
    children_unavailable: Option<crate::outcome::ProcUnavailable>,
}

/// The port of leader `pid`, with its observers, its ladder's processes (which signal the
/// leader through `sleeper`'s pidfd: one per session) and the session's place in the
/// guardian (taken here when the cgroup did not take it before the spawn). Its readers are
/// the caller's to give.
fn os_port(
    core: &Core,
    pid: Pid,
    sleeper: Sleeper,
    tree: tree::cgroup::Held,
    tag: Option<Vec<u8>>,
) -> OsSide {
    let (config, id) = (&core.config, core.id);
    let tree::cgroup::Held {
        cgroup,
        mut containment,
        guardian,
        entry: _,
    } = tree;
    let children = start_observer(pid, config, &core.board, cgroup.as_ref());
    let children_unavailable = children
        .as_ref()
        .filter(|_| config.enabled.children)
        .and_then(DescendantObserver::blind);
    let (network, network_unavailable) = start_network(config, &core.board);
    let mut processes = OsProcesses::new(id, children, tag);
    processes.hold(pid, cgroup, sleeper.leader_pidfd());
    let gone = || {
        processes.cgroup.is_none() && sys::has_exited_no_reap(pid) && processes.leader_alone(pid)
    };
    let guarded = tree::guardian::guard_tree(config, id, pid, gone, guardian);
    containment.set_supervisor_death(guarded.supervisor_death);
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
    OsSide {
        port,
        containment,
        tree_gone: guarded.tree_gone,
        network_unavailable,
        children_unavailable,
    }
}

/// Gives the monitor's `thread` its work; it runs once it receives the child on the returned
/// channel.
fn start_monitor(
    monitor: Monitor<OsPort>,
    containment: TreeHold,
    done_tx: Sender<()>,
    thread: Spare,
) -> io::Result<Sender<ChildProcess>> {
    let (id, pid) = (monitor.core.id, monitor.pid);
    let (child_tx, child_rx) = crossbeam_channel::bounded::<ChildProcess>(1);
    let facts = Facts { pid, containment };
    let kill_tree = Box::new(move || {
        let _ = sys::kill_group(pid, sys::SIGKILL);
    });
    let done = DoneGuard::new(monitor.shared.clone(), done_tx, facts, kill_tree);
    thread
        .run(move || {
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
        .map_err(|_| {
            end_session(id);
            SpawnError::thread("monitor", io::Error::other("it ended unused"))
        })?;
    Ok(child_tx)
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

/// The held stage, driven without a process: what is armed before the spawn, and what
/// refuses the launch before any process exists.
#[cfg(test)]
mod stage_tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::MockClock;
    use crate::completion::CompletionConfig;
    use crate::config::{CaptureConfig, Containment, MonitorConfigBuilder};

    /// A configuration that needs no process and no cgroup: the process group, no file
    /// tracker, no network, no log.
    fn quiet() -> MonitorConfigBuilder {
        MonitorConfig::builder()
            .capture(CaptureConfig::builder().spill(false))
            .containment(Containment::Group)
            .watch_files(false)
            .watch_network(false)
    }

    fn held(config: MonitorConfigBuilder, command: &Command) -> io::Result<Held> {
        let config = config.build().expect("valid");
        Held::new(
            Core::new(1, config, Clock::from(&MockClock::new())),
            command,
        )
    }

    #[test]
    fn the_held_stage_arms_what_the_configuration_asks_and_holds_the_group() {
        let dir = tempfile::tempdir().expect("a folder");
        let mut command = Command::new("true");
        command.current_dir(dir.path());
        let bare = held(quiet(), &command).expect("held");
        assert!(bare.files.is_none() && bare.completion_files.is_none());
        assert!(bare.log_dir.is_none());
        // Every pipe's lines are looked at: a line redrawn in place showing nothing new is no
        // output (issue 48), whatever the repeats source says.
        assert!(bare.lines.is_some(), "lines looked at on every pipe");
        assert!(bare.tree.cgroup.is_none() && bare.tree.entry.is_none());
        assert!(matches!(bare.tree.guardian, Place::Untaken));
        assert!(matches!(
            bare.tree.containment,
            TreeHold::Group {
                why_not_cgroup: None,
                ..
            }
        ));
        // Completion by a file (looked at relative to the child's folder) and by a line.
        let completion = CompletionConfig::builder().file("done").output("^ok$");
        let config = quiet()
            .completion(completion)
            .idle_timeout(Duration::from_secs(5));
        let watching = held(config, &command).expect("held");
        assert!(watching.completion_files.is_some());
        assert!(watching.lines.is_some(), "the readers look at lines");
        assert_eq!(watching.core.config.idle_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_named_log_folder_that_cannot_be_used_refuses_the_launch_before_the_spawn() {
        let dir = tempfile::tempdir().expect("a folder");
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").expect("a file");
        let capture = CaptureConfig::builder().spill(true).log_dir(&file);
        let refused = held(quiet().capture(capture), &Command::new("true"))
            .err()
            .expect("refused");
        let kind = SpawnError::of(&refused).map(SpawnError::kind);
        assert_eq!(kind, Some(SpawnErrorKind::LogDir), "{refused}");
    }
}
