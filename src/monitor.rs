//! The monitor thread: sleeps until the next instant its decision can change (or a control
//! message), asks the verdict, and runs the kill ladder.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, never, select, unbounded};

use crate::activity::{ActivityBoard, ActivitySource};
use crate::capture::spill::{self, Spill, SpillReport, SpillWriter};
use crate::capture::{HeadTail, Recorder};
use crate::clock::Clock;
use crate::config::{KillStep, LeftoverPolicy, MonitorConfig, Signal};
use crate::events::{Emitter, Event};
use crate::outcome::{DescendantSummary, HumanDuration, MonitorResult, Outcome};
use crate::process::{self, sys};
use crate::session::{Lifecycle, Session, SessionBuilder, Shared};
use crate::signals::children::{DescendantObserver, Identity};
use crate::signals::files::FileActivityTracker;
use crate::signals::output::{ActivityTrackingReader, OutputSink, PumpState, Stream, pump};
use crate::verdict::{self, Limits, Verdict};

/// Messages to the monitor. Sources never call the monitor; they stamp the board or send here.
#[derive(Debug)]
pub(crate) enum Control {
    SetIdleTimeout(Duration),
    Terminate,
    /// Terminate with this ladder instead of the configured one.
    TerminateWith(Vec<KillStep>),
    Kill,
    ChildExited,
    ReaderDone(Stream),
    /// A reader holds back output for an `Output` event due at this instant.
    OutputPending(Instant),
    /// Send this signal to the group (no ladder).
    Signal(Signal),
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Spawns the child and its threads; returns the session.
pub(crate) fn start(mut builder: SessionBuilder) -> io::Result<Session> {
    let stdin_pipe = builder.wants_stdin_pipe();
    let home = builder.take_home_report();
    let (mut command, config, clock, stdout_sink, stderr_sink, stdin) = builder.into_parts();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // A named log folder that cannot be used is an error now, not lost output later.
    let log_dir = crate::capture::spill::resolve_dir(&config.capture)?;
    command.stdin(stdin);
    let combined_pipe = if config.capture.combined {
        // One pipe for both streams keeps the order in which the child wrote them.
        let (reader, writer) = std::io::pipe()?;
        command.stdout(writer.try_clone()?).stderr(writer);
        Some(reader)
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    sys::configure_command(&mut command, config.parent_death_signal);
    // Subreaper mode: orphans come back to this process; a tag in their environment (among
    // other evidence: `process::orphans`) tells which session they belong to.
    let tag = if config.children.subreaper {
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
    };

    let board = Arc::new(ActivityBoard::new(clock.clone()));
    board.set_enabled(ActivitySource::Output, config.enabled.output);
    let emitter = Arc::new(Emitter::new(config.events.capacity));
    board.send_events(emitter.clone(), config.events.throttle);

    // Armed before the spawn, so the child's first write already counts.
    let files = if config.enabled.files {
        let base = match command.get_current_dir() {
            Some(dir) => std::env::current_dir()?.join(dir),
            None => std::env::current_dir()?,
        };
        Some(FileActivityTracker::start(
            &config.files,
            &base,
            board.clone(),
            config.effective_check_interval(),
        )?)
    } else {
        None
    };

    let from_spawner = cfg!(target_os = "linux") && config.parent_death_signal;
    // Known to the orphan attribution before the fork, and the leader known as this library's
    // own child before any other session can look at this process's children.
    let gate = process::orphans::spawn_gate();
    process::orphans::register(id, boot_ticks_now(), tag.clone());
    let (command, spawned) = process::spawn(command, from_spawner);
    let mut child = match spawned {
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
    // With the parent-death signal asked for, the grandchildren should die with this process
    // too: a guardian outside it SIGKILLs the group if this process vanishes.
    let guardian = if cfg!(target_os = "linux") && config.parent_death_signal {
        process::Guardian::start(pid)
            .inspect_err(|e| log::warn!("session {id}: no guardian for group {pid}: {e}"))
            .ok()
    } else {
        None
    };
    log::debug!(
        "session {id}: spawned {:?} as pid {pid}",
        command.get_program()
    );
    // The command still holds our copies of the pipes' write ends: close them, or the readers
    // would never see end-of-file.
    drop(command);
    emitter.lifecycle(Event::Started { pid, pgid: pid });
    let stdin = if stdin_pipe { child.stdin.take() } else { None };
    let streams = Streams {
        combined: combined_pipe,
        log_dir,
        emitter,
        stdin,
        tag,
        guardian,
        home,
    };

    match start_threads(
        id,
        &mut child,
        config,
        clock.clone(),
        board.clone(),
        files,
        streams,
        stdout_sink,
        stderr_sink,
    ) {
        Ok((control, done, shared, monitor)) => match monitor.send(child) {
            // The monitor owns the child from here on.
            Ok(()) => Ok(Session::new(id, pid, clock, board, control, done, shared)),
            Err(crossbeam_channel::SendError(mut child)) => {
                end_session(id);
                let _ = sys::kill_group(pid as i32, sys::SIGKILL);
                let _ = child.kill(); // by pid too: it may have left its group already
                let _ = child.wait();
                Err(io::Error::other(
                    "the stallwatch monitor thread stopped at start",
                ))
            }
        },
        Err(e) => {
            end_session(id);
            let _ = sys::kill_group(pid as i32, sys::SIGKILL);
            let _ = child.kill(); // by pid too: it may have left its group already
            let _ = child.wait();
            Err(io::Error::new(
                e.kind(),
                format!("cannot start stallwatch's threads: {e}"),
            ))
        }
    }
}

type Started = (Sender<Control>, Receiver<()>, Arc<Shared>, Sender<Child>);

/// How the output is read and recorded.
struct Streams {
    /// The read end of the one pipe of the combined mode.
    combined: Option<std::io::PipeReader>,
    log_dir: Option<spill::LogDir>,
    emitter: Arc<Emitter>,
    /// The child's stdin, when the caller feeds it.
    stdin: Option<std::process::ChildStdin>,
    /// `STALLWATCH_SESSION=…` given to the child in subreaper mode.
    tag: Option<Vec<u8>>,
    /// Ends the group if this process dies.
    guardian: Option<process::Guardian>,
    /// The isolated home prepared for the child, for the result.
    home: Option<crate::environment::HomeReport>,
}

/// The environment variable that tags a session's processes in subreaper mode.
const SESSION_TAG: &str = "STALLWATCH_SESSION";

#[allow(clippy::too_many_arguments)] // one call site; the parts of a session being assembled
fn start_threads(
    id: u64,
    child: &mut Child,
    config: MonitorConfig,
    clock: Arc<dyn Clock>,
    board: Arc<ActivityBoard>,
    files: Option<FileActivityTracker>,
    streams: Streams,
    stdout_sink: OutputSink,
    stderr_sink: OutputSink,
) -> io::Result<Started> {
    let pid = child.id() as i32;
    let (control_tx, control_rx) = unbounded();
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    let pumps = [
        Arc::new(PumpState::default()),
        Arc::new(PumpState::default()),
    ];

    // The pipes to read: stdout and stderr, or the one combined pipe.
    let mut pipes: Vec<(Stream, Box<dyn io::Read + Send>, OwnedFd, OutputSink)> = Vec::new();
    let combined = streams.combined.is_some();
    if let Some(reader) = streams.combined {
        let fd = reader.as_fd().try_clone_to_owned()?;
        pipes.push((Stream::Combined, Box::new(reader), fd, stdout_sink));
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
        pipes.push((Stream::Stdout, Box::new(stdout), out_fd, stdout_sink));
        pipes.push((Stream::Stderr, Box::new(stderr), err_fd, stderr_sink));
    }
    let mut peek: [Option<OwnedFd>; 2] = [None, None];
    let mut spill_writers: [Option<SpillWriter>; 2] = [None, None];
    let mut spills: [Option<SpillReport>; 2] = [None, None];
    let mut recorders: [Option<Arc<parking_lot::Mutex<Recorder>>>; 2] = [None, None];
    for (stream, _, fd, _) in &pipes {
        // Larger pipes: a chatty child fills 64 KiB (the Linux default) in microseconds, and
        // then every chunk costs a sleep and a wake-up on each side. Best effort (capped by
        // /proc/sys/fs/pipe-max-size for unprivileged users).
        sys::grow_pipe(fd.as_fd());
        let index = stream_index(*stream);
        recorders[index] = Some(Arc::new(parking_lot::Mutex::new(Recorder::new(
            *stream,
            HeadTail::new(config.capture.cap_per_stream),
            &config.events,
        ))));
        if let Some(dir) = &streams.log_dir {
            let spill = Spill::new(
                Some(dir.clone()),
                config.capture.spill_threshold,
                id,
                *stream,
            );
            let short = if *stream == Stream::Stderr {
                "err"
            } else {
                "out"
            };
            let (writer, report) = spill::start(spill, format!("stallwatch-log{short}-{id}"))?;
            spill_writers[index] = Some(writer);
            spills[index] = Some(report);
        }
    }
    // Duplicates of the read ends, only to ask how many unread bytes a pipe holds (FIONREAD)
    // while draining; they never read.
    for (stream, _, fd, _) in &mut pipes {
        peek[stream_index(*stream)] = fd.try_clone().ok();
    }
    // The stdin writer: a thread of its own, so a child that does not read never blocks the
    // caller (the queue is bounded; `write_stdin` gives up after a while).
    let stdin_tx = match streams.stdin {
        Some(mut stdin) => {
            let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(64);
            thread::Builder::new()
                .name(format!("stallwatch-in-{id}"))
                .spawn(move || {
                    for chunk in rx {
                        if let Err(e) = io::Write::write_all(&mut stdin, &chunk) {
                            log::debug!("session {id}: writing the child's stdin: {e}");
                            break;
                        }
                    }
                    // Dropping `stdin` closes it: the child sees end-of-file.
                })?;
            Some(tx)
        }
        None => None,
    };
    let shared = Arc::new(Shared {
        result: parking_lot::Mutex::new(None),
        pumps: pumps.clone(),
        recorders: recorders.clone(),
        combined,
        emitter: streams.emitter.clone(),
        phase: std::sync::atomic::AtomicU8::new(Lifecycle::RUNNING),
        idle_timeout: AtomicU64::new(crate::clock::saturating_nanos(config.idle_timeout)),
        spills: [
            spills[0].as_ref().map(|s| s.state.clone()),
            spills[1].as_ref().map(|s| s.state.clone()),
        ],
        stdin: parking_lot::Mutex::new(stdin_tx),
        home: streams.home,
    });

    // The observer always runs: besides descendant CPU (when that signal is on) it remembers
    // the escapees the ladder must reach.
    let children = {
        let mut observer = DescendantObserver::new(pid as u32, &config.children);
        observer.sample(clock.now()); // the baseline
        board.set_enabled(ActivitySource::Children, config.enabled.children);
        Some(observer)
    };
    let interval = config.effective_check_interval();
    let next_sample = clock.now() + interval;
    let board_clock = clock.clone();
    let (child_tx, child_rx) = crossbeam_channel::bounded::<Child>(1);
    let monitor = Monitor {
        id,
        pid,
        idle_timeout: config.idle_timeout,
        hard_deadline: config.hard_timeout.map(|d| board.origin() + d),
        config,
        clock,
        board: board.clone(),
        control: control_rx,
        shared: shared.clone(),
        peek,
        waiting_counted_at: None,
        emitter: streams.emitter.clone(),
        recorders: recorders.clone(),
        spills,
        flush_due: None,
        warned_for: None,
        child: None,
        status: None,
        tag: streams.tag,
        adopted: Vec::new(),
        guardian: streams.guardian,
        _files: files,
        children,
        interval,
        next_sample,
        sampled_at: None,
        escapees: Vec::new(),
        reason: None,
        leader_exited: false,
        readers_done: [false, combined],
        phase: Phase::Watching,
        signals_sent: Vec::new(),
        escalated: false,
        leftovers_killed: 0,
        unproven: false,
        kill_latency: None,
        ladder_started: None,
        ladder_time: None,
        timer: None,
    };
    let done = DoneGuard {
        shared: shared.clone(),
        done: Some(done_tx),
        pid,
    };
    process::orphans::set_pipes(
        id,
        pipes
            .iter()
            .filter_map(|(_, _, fd, _)| sys::pipe_id(fd.as_fd()))
            .collect(),
    );
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
        .inspect_err(|_| end_session(id))?;

    for (stream, pipe, fd, sink) in pipes {
        drop(fd);
        let index = stream_index(stream);
        let state = pumps[index].clone();
        let control = control_tx.clone();
        let board = board.clone();
        let recorder = recorders[index]
            .clone()
            .ok_or_else(|| io::Error::other("no recorder for a stream"))?;
        let emitter = streams.emitter.clone();
        let clock = board_clock.clone();
        let spill = spill_writers[index].take();
        let short = match stream {
            Stream::Stdout | Stream::Combined => "out",
            Stream::Stderr => "err",
        };
        let mut sink = sink;
        thread::Builder::new()
            .name(format!("stallwatch-{short}-{id}"))
            .spawn(move || {
                let mut reader = ActivityTrackingReader::new(pipe, board);
                let mut notified: Option<Instant> = None;
                let pending_control = control.clone();
                let mut record = move |chunk: &[u8]| {
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
                let _ = control.send(Control::ReaderDone(stream));
            })?;
    }

    let exited = control_tx.clone();
    thread::Builder::new()
        .name(format!("stallwatch-wait-{id}"))
        .spawn(move || {
            if let Err(e) = sys::wait_exited_no_reap(pid) {
                log::error!("waiting for pid {pid}: {e}");
            }
            let _ = exited.send(Control::ChildExited);
        })?;

    Ok((control_tx, done_rx, shared, child_tx))
}

/// Now in clock ticks since boot, the unit of process start times (0 where unknown: a session
/// then counts as running since boot, which only makes the attribution more cautious).
fn boot_ticks_now() -> u64 {
    #[cfg(target_os = "linux")]
    {
        sys::boot_ticks_now().unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The session is over for the orphan attribution (`process::orphans`).
fn end_session(id: u64) {
    #[cfg(target_os = "linux")]
    let now = sys::boot_ticks_now().map(|t| t + 1); // one tick of margin: /proc/uptime rounds
    #[cfg(not(target_os = "linux"))]
    let now = None;
    process::orphans::end(id, now);
}

fn stream_index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout | Stream::Combined => 0,
        Stream::Stderr => 1,
    }
}

/// Publishes the result and closes the done channel; if the monitor thread unwinds before it
/// could, it still kills the group and publishes an "unproven" result, so no waiter hangs.
struct DoneGuard {
    shared: Arc<Shared>,
    done: Option<Sender<()>>,
    pid: i32,
}

impl DoneGuard {
    fn publish(mut self, result: MonitorResult) {
        *self.shared.result.lock() = Some(result);
        self.done.take();
    }

    fn disarm(mut self) {
        self.done.take();
    }
}

impl Drop for DoneGuard {
    fn drop(&mut self) {
        if self.done.is_some() && self.shared.result.lock().is_none() {
            log::error!(
                "stallwatch monitor for pid {} failed; killing its group",
                self.pid
            );
            let _ = sys::kill_group(self.pid, sys::SIGKILL);
            *self.shared.result.lock() = Some(MonitorResult {
                outcome: Outcome::Terminated { forced: true },
                status: None,
                pid: self.pid as u32,
                signals_sent: vec![Signal::KILL],
                escalated: true,
                leftovers_killed: 0,
                termination_unproven: true,
                runtime: Duration::ZERO,
                ladder_time: None,
                kill_latency: None,
                activity: Vec::new(),
                logs: Vec::new(),
                events_dropped: 0,
                output_complete: false,
                home: self.shared.home.clone(),
            });
        }
    }
}

/// Why the run ends; the first one found is kept.
#[derive(Debug, Clone)]
enum Reason {
    Exited,
    Outcome(Outcome),
}

#[derive(Debug)]
enum Phase {
    Watching,
    Ending(Ladder),
    Draining {
        since: Instant,
        cap: Instant,
        /// The last look at the readers past the cap: when (real time) and the bytes each had
        /// read ([`Monitor::own_backlog`]).
        looked: Option<(std::time::Instant, [u64; 2])>,
    },
    Done,
}

#[derive(Debug)]
struct Ladder {
    steps: Vec<KillStep>,
    /// Index of the next step to send.
    next: usize,
    /// When the current step's grace (or the SIGKILL confirmation bound) runs out.
    deadline: Instant,
    /// Poll interval for the group once the leader is gone (backs off to `POLL_MAX`).
    poll: Duration,
}

/// When the monitor wakes next.
#[derive(Debug, Clone, Copy)]
struct Wake {
    /// A deadline on the session's clock (idle, hard, grace, drain).
    at: Instant,
    /// A real-time re-check of operating-system state (group members gone, pipes emptied).
    ///
    /// Deliberately not on the session's clock: the OS makes progress in real time, and a
    /// frozen mock clock must not stall the monitor while a killed process finishes dying.
    poll: Option<Duration>,
}

impl Wake {
    fn at(at: Instant) -> Self {
        Self { at, poll: None }
    }
}

/// While a ladder waits for group members other than the (already exited) leader, it checks
/// them at 5 ms, doubling up to 200 ms: quick for the common case, cheap for a slow one.
const POLL_MIN: Duration = Duration::from_millis(5);
const POLL_MAX: Duration = Duration::from_millis(200);
/// The session-clock timer while the drain waits for its own backlog (which only real-time
/// polls and `ReaderDone` end): far away, and the same instant every time, so it is re-used.
const BACKLOG_TIMER: Duration = Duration::from_secs(365 * 24 * 3600);

struct Monitor {
    id: u64,
    pid: i32,
    config: MonitorConfig,
    idle_timeout: Duration,
    hard_deadline: Option<Instant>,
    clock: Arc<dyn Clock>,
    board: Arc<ActivityBoard>,
    control: Receiver<Control>,
    shared: Arc<Shared>,
    peek: [Option<OwnedFd>; 2],
    /// When bytes found waiting in a pipe at a stale decision were last counted as output.
    waiting_counted_at: Option<Instant>,
    emitter: Arc<Emitter>,
    recorders: [Option<Arc<parking_lot::Mutex<Recorder>>>; 2],
    /// The log spill threads' results, per stream slot.
    spills: [Option<SpillReport>; 2],
    /// The earliest instant a held-back `Output` event is due.
    flush_due: Option<Instant>,
    /// The last activity instant an `IdleWarning` was sent for (once per idle spell).
    warned_for: Option<Instant>,
    /// The child, owned from the start of `run` until the end.
    child: Option<Child>,
    /// Its status, once reaped.
    status: Option<ExitStatus>,
    /// Subreaper mode: this session's tag.
    tag: Option<Vec<u8>>,
    /// Subreaper mode: orphans of this session adopted by this process (reaped when they die).
    adopted: Vec<Identity>,
    /// Released (told `done`) when the run is over.
    guardian: Option<process::Guardian>,
    /// Stamps the board from its own thread; stopped when the monitor ends.
    _files: Option<FileActivityTracker>,
    /// Samples descendant CPU from this thread, every `interval`.
    children: Option<DescendantObserver>,
    interval: Duration,
    next_sample: Instant,
    sampled_at: Option<Instant>,
    /// Descendants outside the process group that the ladder signals by pid.
    escapees: Vec<Identity>,
    reason: Option<Reason>,
    leader_exited: bool,
    readers_done: [bool; 2],
    phase: Phase,
    signals_sent: Vec<Signal>,
    escalated: bool,
    leftovers_killed: usize,
    unproven: bool,
    kill_latency: Option<Duration>,
    ladder_started: Option<Instant>,
    ladder_time: Option<Duration>,
    timer: Option<(Instant, Receiver<Instant>)>,
}

impl Monitor {
    fn run(mut self, child: Child, done: DoneGuard) {
        self.child = Some(child);
        let mut control = self.control.clone();
        loop {
            // Whatever was sent before this wake-up is taken into account before deciding
            // (`select!` picks a ready timer and a ready message in random order).
            while let Ok(msg) = control.try_recv() {
                self.handle(msg);
            }
            let now = self.clock.now();
            self.flush_output(now, false);
            let Some(mut wake) = self.step(now) else {
                break;
            };
            if let Some(due) = self.flush_due {
                wake.at = wake.at.min(due);
            }
            let timer = self.timer(wake.at);
            let poll = wake.poll.map_or_else(never, crossbeam_channel::after);
            select! {
                recv(control) -> msg => match msg {
                    Ok(msg) => self.handle(msg),
                    // Every sender is gone (cannot happen while the waiter thread lives);
                    // go on with timers alone rather than spin.
                    Err(_) => control = never(),
                },
                recv(timer) -> _ => {}
                recv(poll) -> _ => {}
            }
        }
        end_session(self.id);
        for pump in &self.shared.pumps {
            pump.detached.store(true, Ordering::Release);
        }
        if self.child.is_some() {
            self.reap(); // not reaped at the drain: cannot happen, but never leave a zombie
        }
        let now = self.clock.now();
        self.flush_output(now, true);
        self.shared.stdin.lock().take(); // nobody reads it any more
        if let Some(guardian) = self.guardian.take() {
            guardian.release();
        }
        let result = self.result();
        log::debug!("session {}: {:?}", self.id, result);
        self.emitter.lifecycle(Event::Closed);
        done.publish(result);
    }

    /// Sends held-back `Output` events that are due (all of them when `all`).
    fn flush_output(&mut self, now: Instant, all: bool) {
        if !all && self.flush_due.is_none_or(|due| due > now) {
            return;
        }
        let mut next: Option<Instant> = None;
        for recorder in self.recorders.iter().flatten() {
            let mut recorder = recorder.lock();
            if !recorder.has_pending() {
                continue;
            }
            match recorder.due() {
                Some(due) if due > now && !all => {
                    next = Some(next.map_or(due, |n: Instant| n.min(due)));
                }
                _ => recorder.flush(now, &self.emitter),
            }
        }
        self.flush_due = next;
    }

    /// The wake-up timer for `at`, re-used while the deadline is unchanged.
    fn timer(&mut self, at: Instant) -> Receiver<Instant> {
        match &self.timer {
            Some((deadline, rx)) if *deadline == at => rx.clone(),
            _ => {
                let rx = self.clock.at(at);
                self.timer = Some((at, rx.clone()));
                rx
            }
        }
    }

    fn handle(&mut self, msg: Control) {
        match msg {
            // The session already published it in `shared.idle_timeout`.
            Control::SetIdleTimeout(timeout) => self.idle_timeout = timeout,
            Control::Signal(signal) => {
                if !self.leader_exited
                    && !matches!(self.phase, Phase::Draining { .. } | Phase::Done)
                    && let Err(e) = self.signal_group(signal.number())
                {
                    log::debug!("session {}: {signal} to group {}: {e}", self.id, self.pid);
                }
            }
            Control::ChildExited => self.leader_exited = true,
            Control::OutputPending(due) => {
                self.flush_due = Some(self.flush_due.map_or(due, |d| d.min(due)));
            }
            Control::ReaderDone(stream) => {
                let index = stream_index(stream);
                self.readers_done[index] = true;
                // The reader closed its end: close ours too, or the pipe would stay open.
                self.peek[index] = None;
            }
            Control::Terminate => {
                let steps = self.config.kill_ladder.effective();
                self.terminate(steps);
            }
            Control::TerminateWith(steps) => self.terminate(steps),
            Control::Kill => {
                let kill_only = vec![KillStep {
                    signal: Signal::KILL,
                    grace: Duration::ZERO,
                }];
                match &mut self.phase {
                    Phase::Watching if !self.leader_exited => {
                        self.set_reason(Reason::Outcome(Outcome::Terminated { forced: true }));
                        self.start_ladder(kill_only, None);
                    }
                    Phase::Ending(ladder) if ladder.next < ladder.steps.len() => {
                        // Skip the remaining polite steps.
                        ladder.next = ladder.steps.len() - 1;
                        ladder.deadline = self.clock.now();
                    }
                    _ => {}
                }
            }
        }
    }

    fn terminate(&mut self, steps: Vec<KillStep>) {
        if matches!(self.phase, Phase::Watching) && !self.leader_exited {
            self.set_reason(Reason::Outcome(Outcome::Terminated { forced: false }));
            self.start_ladder(steps, None);
        }
    }

    fn set_reason(&mut self, reason: Reason) {
        if self.reason.is_none() {
            self.reason = Some(reason);
        }
    }

    /// Advances the state machine at `now`; returns the next instant to wake at, or `None`
    /// when the run is over.
    fn step(&mut self, now: Instant) -> Option<Wake> {
        loop {
            match &mut self.phase {
                Phase::Watching => {
                    if self.leader_exited {
                        self.set_reason(Reason::Exited);
                        self.after_leader_exit(now);
                        continue;
                    }
                    if self.children.is_some() && now >= self.next_sample {
                        self.sample_children(now);
                    }
                    let limits = Limits {
                        idle_timeout: self.idle_timeout,
                        hard_deadline: self.hard_deadline,
                    };
                    let snapshot = self.board.snapshot();
                    match verdict::decide(&snapshot, now, limits) {
                        Verdict::Wait { until } => {
                            let mut until = match self.children {
                                Some(_) => until.min(self.next_sample),
                                None => until,
                            };
                            if let Some(warn_at) = self.idle_warning(&snapshot, now) {
                                until = until.min(warn_at);
                            }
                            return Some(Wake::at(until));
                        }
                        Verdict::Stale {
                            deadline,
                            mut report,
                        } => {
                            // A descendant working right now is never killed for want of a
                            // poll: one fresh sample first.
                            if self.children.is_some()
                                && self.sampled_at != Some(now)
                                && self.sample_children(now)
                            {
                                continue;
                            }
                            if self.output_waiting(now) {
                                continue;
                            }
                            let children_on = self.config.enabled.children;
                            report.children =
                                self.children.as_ref().filter(|_| children_on).map(|o| {
                                    let last = o.last();
                                    DescendantSummary {
                                        count: last.descendants,
                                        cpu: last.descendant_cpu,
                                        escapees: last.escapees,
                                    }
                                });
                            log::info!(
                                "session {}: pid {} stale after {} ({report})",
                                self.id,
                                self.pid,
                                HumanDuration(self.idle_timeout)
                            );
                            self.set_reason(Reason::Outcome(Outcome::IdleTimeout(report)));
                            self.start_ladder(self.config.kill_ladder.effective(), Some(deadline));
                        }
                        Verdict::HardDeadline { deadline } => {
                            let after = self.config.hard_timeout.unwrap_or_default();
                            log::info!(
                                "session {}: pid {} reached its hard timeout of {}",
                                self.id,
                                self.pid,
                                HumanDuration(after)
                            );
                            self.set_reason(Reason::Outcome(Outcome::HardTimeout { after }));
                            self.start_ladder(self.config.kill_ladder.effective(), Some(deadline));
                        }
                    }
                }
                Phase::Ending(_) => {
                    if let Some(wake) = self.step_ladder(now) {
                        return Some(wake);
                    }
                }
                Phase::Draining { since, cap, .. } => {
                    let (since, cap) = (*since, *cap);
                    if self.readers_done.iter().all(|d| *d) {
                        self.phase = Phase::Done;
                        continue;
                    }
                    let last_output = self.board.last(ActivitySource::Output).max(since);
                    let quiet_at = last_output + self.config.drain_quiet;
                    let quiet = now >= quiet_at && self.pipes_empty();
                    if now >= cap || quiet {
                        // The cap and the quiet rule are for pipes that strangers hold open.
                        if let Some(wake) = self.own_backlog(since) {
                            return Some(wake);
                        }
                        if quiet {
                            log::debug!(
                                "session {}: output quiet after exit; not waiting for end-of-file",
                                self.id
                            );
                        }
                        self.phase = Phase::Done;
                        continue;
                    }
                    // Bytes still sit in a pipe: look again shortly (real time: the reader
                    // thread empties the pipe in real time, whatever the clock says).
                    let poll = (now >= quiet_at).then_some(POLL_MIN);
                    return Some(Wake {
                        at: if now >= quiet_at {
                            cap
                        } else {
                            quiet_at.min(cap)
                        },
                        poll,
                    });
                }
                Phase::Done => return None,
            }
        }
    }

    /// Sends the idle warning when its time has come in this idle spell; otherwise returns
    /// when it will (if it still has to be sent).
    fn idle_warning(
        &mut self,
        snapshot: &crate::activity::BoardSnapshot,
        now: Instant,
    ) -> Option<Instant> {
        let fraction = self.config.events.idle_warning?;
        let last = verdict::last_activity(snapshot);
        if self.warned_for == Some(last) {
            return None;
        }
        let warn_at = last + self.idle_timeout.mul_f64(fraction);
        if now < warn_at {
            return Some(warn_at);
        }
        self.warned_for = Some(last);
        let left = (last + self.idle_timeout).saturating_duration_since(now);
        self.emitter.lifecycle(Event::IdleWarning { left });
        None
    }

    /// Subreaper mode: finds this session's orphans among this process's children (by the
    /// rules of `process::orphans`: seen, tag, group, pipe, start time) and remembers them and
    /// their descendants as escapees; reaps the ones that died. Returns how many new ones it
    /// found. Every session publishes what its observer saw, for the others' attribution.
    fn collect_adopted(&mut self) -> usize {
        let Some(observer) = self.children.as_mut() else {
            return 0;
        };
        if process::orphans::adopting() {
            process::orphans::publish_seen(self.id, observer.identities());
        }
        if self.tag.is_none() {
            return 0;
        }
        let mut found = 0;
        #[cfg(target_os = "linux")]
        {
            // No session forks while this looks: every child the library started is known.
            let _gate = process::orphans::attribution_gate();
            let own_group = sys::own_process_group();
            for pid in sys::own_children() {
                if process::orphans::is_spawned(pid) {
                    continue;
                }
                let Some(process) = observer.process(pid) else {
                    continue;
                };
                let identity = Identity {
                    pid,
                    start_time: process.start_time,
                };
                if process.dead {
                    if let Some(i) = self.adopted.iter().position(|p| *p == identity) {
                        self.adopted.swap_remove(i);
                        sys::reap_if_exited(pid);
                    }
                    continue;
                }
                if self.adopted.contains(&identity) {
                    continue;
                }
                let orphan = process::orphans::Orphan {
                    pid,
                    start_time: process.start_time,
                    pgrp: process.pgrp,
                    tag: sys::environ_entry(pid, SESSION_TAG),
                    pipes: sys::stdio_pipes(pid),
                };
                if process::orphans::owner(&orphan, own_group) == Some(self.id) {
                    log::debug!("session {}: adopted orphan pid {pid}", self.id);
                    self.adopted.push(identity);
                    found += 1;
                }
            }
            // An adopted orphan's own descendants are the tree's too (they come back here
            // when it dies, but the ladder should reach them at once).
            self.adopted.retain(|orphan| observer.adopt_tree(*orphan));
        }
        found
    }

    /// Samples descendant CPU; stamps the board when it shows work. Returns whether it did.
    fn sample_children(&mut self, now: Instant) -> bool {
        self.collect_adopted();
        let Some(observer) = self.children.as_mut() else {
            return false;
        };
        let sample = observer.sample(now);
        self.sampled_at = Some(now);
        self.next_sample = now + self.interval;
        let active = sample.active && self.config.enabled.children;
        if active {
            self.board.stamp_at(ActivitySource::Children, now);
        }
        active
    }

    /// Remembered descendants that left the group and still live (re-checked by identity).
    fn live_escapees(&mut self) -> Vec<Identity> {
        self.collect_adopted();
        let pgid = self.pid;
        match self.children.as_mut() {
            Some(observer) => observer.outside_group(pgid),
            None => Vec::new(),
        }
    }

    /// The leader exited while being watched: take the leftovers down, or leave them.
    fn after_leader_exit(&mut self, now: Instant) {
        if self.config.leftovers == LeftoverPolicy::KillLadder {
            if let Some(observer) = self.children.as_mut() {
                observer.sample(now); // who is left, now that the leader is gone
            }
            let members = sys::group_members(self.pid, self.pid).unwrap_or_default();
            let escapees = self.live_escapees().len();
            let leftovers = members.len() + escapees;
            if leftovers > 0 {
                log::info!(
                    "session {}: pid {} exited, leaving {} group member(s) and {} escaped \
                     descendant(s); ending them",
                    self.id,
                    self.pid,
                    members.len(),
                    escapees
                );
                self.leftovers_killed = leftovers;
                self.start_ladder(self.config.kill_ladder.effective(), None);
                return;
            }
        }
        self.start_drain(now);
    }

    fn start_drain(&mut self, now: Instant) {
        self.shared
            .phase
            .store(Lifecycle::TERMINATED, Ordering::Release);
        // The ladder is done (or was not needed): now the leader may be reaped.
        self.reap();
        self.emitter.lifecycle(Event::Exited {
            outcome: self.outcome(),
            status: self.status,
        });
        self.phase = Phase::Draining {
            since: now,
            cap: now + self.config.drain_cap,
            looked: None,
        };
    }

    /// At a stale decision: bytes the child wrote that no reader has taken yet (stallwatch was
    /// stopped, or a reader is slow) are output too. They count once, stamped at `now`; when the
    /// readers then record nothing for a whole idle timeout (a reader held by its sink), the
    /// same waiting bytes do not keep the child alive again.
    fn output_waiting(&mut self, now: Instant) -> bool {
        if !self.config.enabled.output || self.pipes_empty() {
            return false;
        }
        let last_output = self.board.last(ActivitySource::Output);
        if self.waiting_counted_at == Some(last_output) {
            return false;
        }
        log::debug!(
            "session {}: output waits unread in a pipe at the idle deadline; it counts",
            self.id
        );
        self.board.stamp_at(ActivitySource::Output, now);
        self.waiting_counted_at = Some(self.board.last(ActivitySource::Output));
        true
    }

    /// Past the drain cap (or the quiet rule): whether a reader still works through a pipe
    /// that nobody holds open any more, so that its end-of-file is only a matter of stallwatch's
    /// own pace (the log spill's disk and hash, or a sink that is slow but moving), not a
    /// stranger's. Then the drain goes on, bounded by the disk: every byte written before the
    /// tree ended is read and logged. A reader that neither moved since the last look (at least
    /// [`POLL_MAX`] earlier) nor waits for its log spill is stuck in its sink: the drain ends.
    fn own_backlog(&mut self, since: Instant) -> Option<Wake> {
        let read = [0, 1].map(|i| self.shared.pumps[i].bytes.load(Ordering::Relaxed));
        let Phase::Draining { looked, .. } = &self.phase else {
            return None;
        };
        let looked = *looked;
        let real_now = std::time::Instant::now();
        if looked.is_some_and(|(at, _)| real_now.saturating_duration_since(at) < POLL_MAX) {
            // Woken early (another reader finished): judge on a full interval.
            let nobody_holds = (0..2).any(|i| !self.readers_done[i] && self.hung_up(i));
            return nobody_holds.then_some(Wake {
                at: since + BACKLOG_TIMER,
                poll: Some(POLL_MAX),
            });
        }
        let waiting = (0..2).any(|i| {
            !self.readers_done[i]
                && self.hung_up(i)
                && (looked.is_none_or(|(_, before)| before[i] != read[i])
                    || self.spills[i].as_ref().is_some_and(|s| s.busy()))
        });
        if let Phase::Draining { looked, .. } = &mut self.phase {
            *looked = Some((real_now, read));
        }
        if waiting {
            log::debug!(
                "session {}: the tree is gone but a reader is still behind; reading on",
                self.id
            );
        }
        // Real time: the readers work in real time, whatever the clock says.
        waiting.then_some(Wake {
            at: since + BACKLOG_TIMER,
            poll: Some(POLL_MAX),
        })
    }

    /// Whether nobody holds the write end of pipe `index` any more.
    fn hung_up(&self, index: usize) -> bool {
        self.peek[index]
            .as_ref()
            .is_some_and(|fd| sys::pipe_hung_up(fd.as_fd()))
    }

    /// Whether no unread byte sits in either pipe.
    fn pipes_empty(&self) -> bool {
        self.peek.iter().enumerate().all(|(i, fd)| {
            self.readers_done[i]
                || fd
                    .as_ref()
                    .is_none_or(|fd| rustix::io::ioctl_fionread(fd).is_ok_and(|n| n == 0))
        })
    }

    fn start_ladder(&mut self, steps: Vec<KillStep>, due: Option<Instant>) {
        let now = self.clock.now();
        self.shared.phase.store(Lifecycle::GRACE, Ordering::Release);
        self.escapees = self.live_escapees();
        self.phase = Phase::Ending(Ladder {
            steps,
            next: 0,
            deadline: now,
            poll: POLL_MIN,
        });
        self.ladder_started = Some(now);
        // Send the first step at once.
        self.advance_ladder(now);
        if let Some(due) = due {
            self.kill_latency = Some(self.clock.now().saturating_duration_since(due));
        }
    }

    /// Whether the whole tree is gone: the leader has exited, no other group member lives, and
    /// no escapee the ladder signalled lives.
    fn tree_gone(&mut self) -> bool {
        self.refresh_escapees();
        if !self.leader_exited
            || !sys::group_members(self.pid, self.pid).is_none_or(|members| members.is_empty())
        {
            return false;
        }
        if let Some(observer) = self.children.as_mut() {
            self.escapees.retain(|e| observer.alive(*e));
        }
        if !self.escapees.is_empty() {
            return false;
        }
        // Everything known is dead. A process's children are re-parented before it dies, so
        // one more look now finds any that came back (to a subreaper) while we checked.
        self.refresh_escapees();
        self.escapees.is_empty()
    }

    /// During the ladder: looks at the tree again, so a descendant that escaped since the
    /// ladder started (a helper a TERM handler starts in a new session, a killed daemon's
    /// workers coming back to a subreaper) gets the latest signal too.
    fn refresh_escapees(&mut self) {
        let now = self.clock.now();
        if let Some(observer) = self.children.as_mut() {
            observer.sample(now);
        }
        let known = self.escapees.clone();
        let fresh: Vec<Identity> = self
            .live_escapees()
            .into_iter()
            .filter(|e| !known.contains(e))
            .collect();
        if fresh.is_empty() {
            return;
        }
        if let Some(signal) = self.signals_sent.last().copied() {
            for e in &fresh {
                let _ = sys::kill_pid(e.pid, signal.number());
                if signal != Signal::KILL {
                    let _ = sys::kill_pid(e.pid, sys::SIGCONT);
                }
            }
        }
        self.escapees.extend(fresh);
    }

    fn step_ladder(&mut self, now: Instant) -> Option<Wake> {
        if self.tree_gone() {
            self.ladder_time = self
                .ladder_started
                .map(|t| now.saturating_duration_since(t));
            self.start_drain(now);
            return None;
        }
        let Phase::Ending(ladder) = &self.phase else {
            return None;
        };
        if now >= ladder.deadline {
            if ladder.next >= ladder.steps.len() {
                log::error!(
                    "session {}: SIGKILL sent to group {} but it is not gone after {}",
                    self.id,
                    self.pid,
                    HumanDuration(self.config.kill_confirm_timeout)
                );
                self.unproven = true;
                self.start_drain(now);
                return None;
            }
            self.advance_ladder(now);
        }
        let Phase::Ending(ladder) = &mut self.phase else {
            return None;
        };
        // Nothing tells us when group members or escapees die, or when a descendant escapes
        // during the grace: look again, backing off from 5 ms to 200 ms.
        let poll = ladder.poll;
        ladder.poll = (poll * 2).min(POLL_MAX);
        Some(Wake {
            at: ladder.deadline,
            poll: Some(poll),
        })
    }

    /// Sends the next step of the ladder.
    fn advance_ladder(&mut self, now: Instant) {
        let Phase::Ending(ladder) = &mut self.phase else {
            return;
        };
        let Some(step) = ladder.steps.get(ladder.next).copied() else {
            return;
        };
        let index = ladder.next;
        ladder.next += 1;
        ladder.poll = POLL_MIN;
        ladder.deadline = if step.signal == Signal::KILL || ladder.next == ladder.steps.len() {
            now + self.config.kill_confirm_timeout
        } else {
            now + step.grace
        };
        match self.signal_group(step.signal.number()) {
            Ok(()) => log::debug!(
                "session {}: sent {} to group {}",
                self.id,
                step.signal,
                self.pid
            ),
            Err(e) => log::debug!(
                "session {}: {} to group {}: {e}",
                self.id,
                step.signal,
                self.pid
            ),
        }
        if let Some(observer) = self.children.as_mut() {
            for escapee in &self.escapees {
                // Identity re-checked just before the signal: a reused pid is left alone.
                if observer.alive(*escapee) {
                    let _ = sys::kill_pid(escapee.pid, step.signal.number());
                    if step.signal != Signal::KILL {
                        let _ = sys::kill_pid(escapee.pid, sys::SIGCONT);
                    }
                }
            }
        }
        if step.signal != Signal::KILL {
            // A stopped process cannot act on a polite signal until it is continued.
            let _ = self.signal_group(sys::SIGCONT);
        }
        self.signals_sent.push(step.signal);
        self.emitter.lifecycle(Event::Signal {
            signal: step.signal,
            step: index,
        });
        if step.signal == Signal::KILL {
            self.escalated = true;
        }
    }

    /// Sends `signal` to the leader's process group and, when the leader has left that group
    /// (it may join another group of its session, even stallwatch's own), to the leader by pid:
    /// never to the group it joined. Its pid is still its own: the leader is not reaped before
    /// the ladder is done. Its escapees are signalled by pid by the ladder (they are outside
    /// the group). The result is the group's.
    fn signal_group(&self, signal: i32) -> io::Result<()> {
        let group = sys::kill_group(self.pid, signal);
        if self.child.is_some()
            && !self.leader_exited
            && sys::process_group_of(self.pid).is_some_and(|pgid| pgid != self.pid)
        {
            match sys::kill_pid(self.pid, signal) {
                Ok(()) => {
                    log::debug!(
                        "session {}: pid {} left its group; signalled by pid",
                        self.id,
                        self.pid
                    );
                    return Ok(());
                }
                Err(e) => log::debug!("session {}: signal to pid {}: {e}", self.id, self.pid),
            }
        }
        group
    }

    /// Reaps the child (once): waits for it if it exited, else only looks.
    fn reap(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = self.pid;
        process::orphans::reaped(pid);
        self.status = if self.leader_exited {
            match child.wait() {
                Ok(status) => Some(status),
                Err(e) => {
                    log::error!("session {}: reaping pid {}: {e}", self.id, self.pid);
                    None
                }
            }
        } else {
            child.try_wait().ok().flatten()
        };
    }

    fn outcome(&self) -> Outcome {
        match self.reason.clone() {
            Some(Reason::Outcome(outcome)) => outcome,
            Some(Reason::Exited) | None => Outcome::Exited,
        }
    }

    fn result(&self) -> MonitorResult {
        let now = self.clock.now();
        MonitorResult {
            outcome: self.outcome(),
            status: self.status,
            pid: self.pid as u32,
            signals_sent: self.signals_sent.clone(),
            escalated: self.escalated,
            leftovers_killed: self.leftovers_killed,
            termination_unproven: self.unproven,
            runtime: now.saturating_duration_since(self.board.origin()),
            ladder_time: self.ladder_time,
            kill_latency: self.kill_latency,
            activity: verdict::report(&self.board.snapshot(), now, self.idle_timeout).signals,
            logs: self
                .spills
                .iter()
                .enumerate()
                .filter_map(|(i, spill)| {
                    // Every chunk read is written and hashed first (bounded by the disk).
                    spill.as_ref()?.log(self.readers_done[i])
                })
                .collect(),
            events_dropped: self.emitter.dropped(),
            output_complete: self.readers_done.iter().all(|d| *d),
            home: self.shared.home.clone(),
        }
    }
}
