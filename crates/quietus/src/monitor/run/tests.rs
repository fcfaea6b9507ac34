//! The monitor loop against a fake port: no process, no thread, no sleeping. The session's
//! clock is a `MockClock` the fake's sleep moves to each wake-up's deadline; its process table
//! is scripted (when the leader exits, which signals end it, who it leaves behind), and it
//! records what the monitor asked of it (signals, reaping, the session state at each sleep).

use crate::config::MonitorConfigBuilder;
use std::cell::RefCell;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::super::Wake;
use super::super::ladder::{Ladder, ProcessLayer};
use super::super::port::{Leftovers, Memory, Port, ReaderLost, TreeSample};
use super::super::rules::Rules;
use super::super::tap::{StreamSlot, Tap};
use super::phase::{Drain, Move, Phase};
use super::result::{DoneGuard, Facts};
use super::{Files, LeaderState, Monitor, Timing};
use crate::activity::{ActivityBoard, ActivitySource};
use crate::clock::{Clock, MockClock};
use crate::config::{KillLadder, KillStep, MonitorConfig};
use crate::contract::{Control, SessionState, Shared};
use crate::diagnosis::{Diagnosis, ProcessDiagnosis, StallKind};
use crate::events::Event;
use crate::input_wait::InputWaitRule;
use crate::outcome::{CompletionSeen, MonitorResult, Outcome, TreeHold};
use crate::pid::Pid;
use crate::process::sys::{SIGCONT, SIGKILL, SIGTERM, Woken};
use crate::signal::Signal;
use crate::sources::children::{ChildrenSample, Identity};
use crate::stream::Stream;

/// The pid `n` (a made-up process of the scripted world).
const fn pid(n: u32) -> Pid {
    match Pid::new(n) {
        Some(pid) => pid,
        None => panic!("not a pid"),
    }
}

const LEADER: Pid = pid(4242);
/// More sleeps than any run here needs: a loop that does not end fails instead of hanging.
const MAX_SLEEPS: usize = 10_000;

/// A signal the monitor sent, and to what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Group(Pid, i32),
    Pid(Pid, i32),
}

/// The scripted process table, and what the monitor asked of it.
#[derive(Default)]
struct World {
    /// The leader exits by itself at this instant.
    exit_at: Option<Instant>,
    /// The leader has exited.
    exited: bool,
    /// The exit told to the monitor.
    exit_told: bool,
    /// Its exit code.
    code: i32,
    /// Signals that end the leader and every member of its group.
    dies_on: Vec<i32>,
    /// Live members of the leader's group other than the leader.
    members: Vec<Pid>,
    /// The descendants are observed; their CPU moves until this instant.
    observed: bool,
    busy_until: Option<Instant>,
    /// What the diagnosis finds, and the read count of every process.
    diagnosis: Option<Diagnosis>,
    sent: Vec<Sent>,
    wakes: Vec<Wake>,
    /// The session's state at each sleep.
    states: Vec<SessionState>,
    samples: usize,
    reaped: Vec<bool>,
    guardian_released: usize,
    cgroup_let_go: usize,
    session_over: usize,
    readers_left_started: usize,
    /// The sleep fails (the monitor thread unwinds).
    fail_on_sleep: bool,
    /// A signal ended processes since the last sleep: a real-time re-check finds them gone.
    died: bool,
}

impl World {
    fn signalled(&mut self, sent: Sent, signal: i32) {
        self.sent.push(sent);
        if self.dies_on.contains(&signal) {
            self.exited = true;
            self.members.clear();
            self.died = true;
        }
    }
}

/// The fake port: the scripted world, the clock it moves, the state it reads.
struct FakePort {
    world: Rc<RefCell<World>>,
    clock: MockClock,
    shared: Option<Arc<Shared>>,
}

impl ProcessLayer for FakePort {
    fn signal_group(&mut self, pgid: Pid, signal: Signal) -> io::Result<()> {
        let signal = signal.number();
        self.world
            .borrow_mut()
            .signalled(Sent::Group(pgid, signal), signal);
        Ok(())
    }

    fn signal_pid(&mut self, pid: Pid, signal: Signal) -> io::Result<()> {
        let signal = signal.number();
        self.world
            .borrow_mut()
            .signalled(Sent::Pid(pid, signal), signal);
        Ok(())
    }

    fn signal_escapee(&mut self, _identity: Identity, _signal: Signal) -> io::Result<()> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn has_cgroup(&self) -> bool {
        false
    }

    fn signal_cgroup(&mut self, _signal: Signal) -> io::Result<()> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn kill_cgroup(&mut self) -> io::Result<()> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn cgroup_populated(&mut self) -> Option<bool> {
        None
    }

    fn group_members(&mut self, _pgid: Pid, except: Pid) -> Option<Vec<Pid>> {
        let world = self.world.borrow();
        Some(
            world
                .members
                .iter()
                .copied()
                .filter(|p| *p != except)
                .collect(),
        )
    }

    fn alive(&mut self, _identity: Identity) -> bool {
        false
    }

    fn sample(&mut self, _now: Instant) {}

    fn escapees(&mut self, _pgid: Pid) -> Vec<Identity> {
        Vec::new()
    }

    fn process_group_of(&mut self, pid: Pid) -> Option<Pid> {
        Some(pid)
    }

    fn own_group(&mut self) -> Option<Pid> {
        Some(pid(77))
    }

    fn own_pid(&self) -> Pid {
        pid(78)
    }
}

impl Port for FakePort {
    fn sleep(&mut self, clock: &Clock, wake: Wake, leader_exited: bool) -> Woken {
        let mut world = self.world.borrow_mut();
        assert!(world.wakes.len() < MAX_SLEEPS, "the loop does not end");
        assert!(!world.fail_on_sleep, "the port failed");
        world.wakes.push(wake);
        if let Some(shared) = &self.shared {
            world.states.push(shared.state());
        }
        // An exit not told yet (a signal ended the leader) wakes the monitor at once; else
        // time runs to the wake-up's deadline, or to the leader's own exit before it.
        let pending = world.exited && !world.exit_told && !leader_exited;
        let rechecked = wake.poll.is_some() && std::mem::take(&mut world.died);
        if !pending && !rechecked {
            let now = clock.now();
            let mut until = wake.at;
            if !world.exited
                && let Some(exit) = world.exit_at
                && exit <= until
            {
                until = exit.max(now);
                world.exited = true;
            }
            if until > now {
                self.clock.advance(until - now);
            }
        }
        let exited = world.exited && !leader_exited && !world.exit_told;
        world.exit_told |= exited;
        Woken {
            message: false,
            exited,
            pipes: [false; 2],
        }
    }

    fn start_reader(&mut self, _slot: usize) -> Result<(), ReaderLost> {
        Ok(())
    }

    fn start_readers_left(&mut self) {
        self.world.borrow_mut().readers_left_started += 1;
    }

    fn leader_exited(&mut self) -> bool {
        self.world.borrow().exited
    }

    fn reap(&mut self, exited: bool) -> Option<ExitStatus> {
        let mut world = self.world.borrow_mut();
        world.reaped.push(exited);
        world.exited.then(|| ExitStatus::from_raw(world.code << 8))
    }

    fn layer(&mut self) -> &mut dyn ProcessLayer {
        self
    }

    fn observes_tree(&self) -> bool {
        self.world.borrow().observed
    }

    fn baseline(&mut self, _now: Instant) {
        self.world.borrow_mut().samples += 1;
    }

    fn sample_tree(&mut self, now: Instant) -> Option<TreeSample> {
        let mut world = self.world.borrow_mut();
        world.samples += 1;
        world.observed.then(|| TreeSample {
            cpu: world.busy_until.is_some_and(|until| now < until),
            network: false,
        })
    }

    fn last_children(&self) -> Option<ChildrenSample> {
        None
    }

    fn tree_unseen(&self) -> bool {
        false
    }

    fn diagnose(&self) -> Diagnosis {
        self.world
            .borrow()
            .diagnosis
            .clone()
            .unwrap_or_else(|| diagnosis(StallKind::Sleeping))
    }

    fn read_count(&self, _pid: Pid) -> Option<u64> {
        Some(7)
    }

    fn leftovers(&mut self, _now: Instant) -> Leftovers {
        Leftovers {
            members: self.world.borrow().members.len(),
            escapees: 0,
            memory: None,
            named: Vec::new(),
        }
    }

    fn let_go_of_cgroup(&mut self, _keep: bool) -> Option<Memory> {
        self.world.borrow_mut().cgroup_let_go += 1;
        Some(Memory {
            peak: Some(4096),
            oom_kills: Some(0),
        })
    }

    fn release_guardian(&mut self) {
        self.world.borrow_mut().guardian_released += 1;
    }

    fn session_over(&mut self) {
        self.world.borrow_mut().session_over += 1;
    }
}

/// A tree of one process (the leader) in `kind`.
fn diagnosis(kind: StallKind) -> Diagnosis {
    Diagnosis {
        kind,
        summary: format!("{kind:?}"),
        processes: vec![ProcessDiagnosis {
            pid: LEADER,
            name: "agent".to_owned(),
            state: "sleeping",
            wchan: None,
            syscall: None,
            fd: Some(0),
            target: Some("stdin (a pipe)".to_owned()),
            kind,
            waits_on: None,
            error: None,
        }],
    }
}

/// A session under test: its monitor, its mailbox, its events, its clock, its world.
struct Rig {
    monitor: Monitor<FakePort>,
    control: Sender<Control>,
    events: Receiver<Event>,
    clock: MockClock,
    world: Rc<RefCell<World>>,
    shared: Arc<Shared>,
    done: Receiver<()>,
    guard: DoneGuard,
    killed: Arc<AtomicBool>,
}

/// The shared part of a session with no stream, as the launcher makes it.
fn shared(config: &MonitorConfig, emitter: Arc<crate::events::Emitter>) -> Arc<Shared> {
    Arc::new(Shared {
        result: std::sync::OnceLock::new(),
        pumps: Default::default(),
        recorders: [None, None],
        combined: false,
        terminal: None,
        emitter,
        phase: AtomicU8::new(SessionState::RUNNING),
        idle_timeout: AtomicU64::new(crate::clock::saturating_nanos(config.idle_timeout)),
        spills: [None, None],
        stdin: crate::sync::Mutex::new(None),
        home: None,
        caps: config.effective_caps(),
    })
}

/// A rig for `config` (files off) whose leader lives in `world`.
fn new_rig(config: MonitorConfigBuilder, world: World) -> Rig {
    let config = config
        .watch_files(false)
        .watch_network(false)
        .build()
        .unwrap();
    let clock = MockClock::new();
    let session_clock = Clock::from(&clock);
    // The board as the launcher makes it (no probe here), the children source as configured.
    let board = Arc::new(ActivityBoard::with_probes(session_clock.clone(), &[]));
    board.set_enabled(&ActivitySource::Output, config.enabled.output);
    board.set_enabled(&ActivitySource::Children, config.enabled.children);
    let emitter = Arc::new(crate::events::Emitter::new(config.events.capacity));
    let events = emitter.receiver();
    let shared = shared(&config, emitter.clone());
    let (control, control_rx) = crossbeam_channel::unbounded();
    let world = Rc::new(RefCell::new(world));
    let port = FakePort {
        world: world.clone(),
        clock: clock.clone(),
        shared: Some(shared.clone()),
    };
    let now = session_clock.now();
    let monitor = Monitor {
        observer: crate::monitor::observe::Observer::new(config.observe),
        id: 1,
        pid: LEADER,
        input_wait: InputWaitRule::new(config.input_wait_notice, config.input_wait_timeout),
        rules: Rules::new(1, &config, None, now),
        timing: Timing::new(&config, &session_clock, &board),
        tap: Tap::new([None, None]),
        config,
        clock: session_clock,
        board,
        control: control_rx,
        shared: shared.clone(),
        emitter,
        files: Files::Off,
        leader: LeaderState::Running,
        tree_gone: false,
        memory: Memory::default(),
        network_unavailable: None,
        phase: Phase::Watching,
        port,
    };
    let (done_tx, done) = crossbeam_channel::bounded(0);
    let killed = Arc::new(AtomicBool::new(false));
    let kill = killed.clone();
    let facts = Facts {
        pid: LEADER,
        containment: TreeHold::Group {
            why_not_cgroup: None,
            supervisor_death: crate::outcome::SupervisorDeath::Nothing,
        },
    };
    let guard = DoneGuard::new(
        shared.clone(),
        done_tx,
        facts,
        Box::new(move || kill.store(true, std::sync::atomic::Ordering::SeqCst)),
    );
    Rig {
        monitor,
        control,
        events,
        clock,
        world,
        shared,
        done,
        guard,
        killed,
    }
}

impl Rig {
    /// Runs the loop to its end; returns the published result.
    fn run(self) -> Ran {
        let Rig {
            monitor,
            events,
            clock,
            world,
            shared,
            done,
            guard,
            killed,
            control,
        } = self;
        let origin = monitor.board.origin();
        monitor.run(guard);
        drop(control);
        assert!(done.recv().is_err(), "the done channel is closed");
        let result = shared.result.get().cloned().expect("a result is published");
        Ran {
            result,
            events: events.try_iter().collect(),
            ended_at: clock.now().saturating_duration_since(origin),
            world: Rc::try_unwrap(world).ok().expect("one owner").into_inner(),
            state: shared.state(),
            killed: killed.load(std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// One step of the loop at the clock's now (messages first), as `run` takes it.
    fn step(&mut self) -> Option<Wake> {
        while let Ok(msg) = self.monitor.control.try_recv() {
            self.monitor.handle(msg);
        }
        let now = self.monitor.clock.now();
        self.monitor.step(now)
    }

    /// Moves the clock to `at` (after the origin).
    fn at(&self, at: Duration) {
        let now = self.monitor.clock.now();
        let target = self.monitor.board.origin() + at;
        self.clock.advance(target.saturating_duration_since(now));
    }

    fn origin(&self) -> Instant {
        self.monitor.board.origin()
    }
}

/// What a run to its end gave.
struct Ran {
    result: MonitorResult,
    events: Vec<Event>,
    /// The clock's time at the end, after the origin.
    ended_at: Duration,
    world: World,
    state: SessionState,
    killed: bool,
}

impl Ran {
    fn signals(&self) -> Vec<(Signal, usize)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Signal { signal, step } => Some((*signal, *step)),
                _ => None,
            })
            .collect()
    }

    /// The states seen at the sleeps, each once in order.
    fn states(&self) -> Vec<SessionState> {
        let mut states = self.world.states.clone();
        states.dedup();
        states
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A quiet config: output and keepalive only, idle after `idle` seconds, TERM then KILL, no
/// idle warning.
fn quiet(idle: u64) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(secs(idle))
        .events(crate::config::EventConfig::builder().idle_warning(None))
        .watch_children(false)
        .kill_ladder(KillLadder::polite(Signal::TERM, secs(2)))
}

/// A leader that ends on SIGTERM.
fn polite() -> World {
    World {
        dies_on: vec![SIGTERM],
        ..World::default()
    }
}

#[test]
fn the_transition_function_moves_only_along_the_phases() {
    let clock = MockClock::new();
    let emitter = Arc::new(crate::events::Emitter::new(8));
    let ladder = || {
        let clock = Clock::from(&clock);
        Box::new(Ladder::new(1, LEADER, secs(3), clock, emitter.clone()))
    };
    let drain = Drain::new(clock.now(), secs(1));
    let outcome = Outcome::HardTimeout { after: secs(9) };
    let mut phase = Phase::Watching;
    assert_eq!(phase.state(), SessionState::Running);
    assert!(phase.end().is_none());
    assert!(
        !phase.next(Move::Drained),
        "no drain before the tree is gone"
    );
    assert_eq!(phase.name(), "watching");
    let to_ladder = Move::Ladder {
        outcome: outcome.clone(),
        ladder: ladder(),
    };
    assert!(phase.next(to_ladder), "watching -> ending");
    assert_eq!(
        (phase.name(), phase.state()),
        ("ending", SessionState::Grace)
    );
    // The first reason wins: an ending phase takes no second ladder, nor skips its end.
    let second = Move::Ladder {
        outcome: Outcome::Exited,
        ladder: ladder(),
    };
    assert!(!phase.next(second));
    assert!(!phase.next(Move::Drained));
    assert_eq!(phase.name(), "ending");
    assert!(phase.next(Move::TreeGone { drain }), "ending -> draining");
    assert_eq!(
        (phase.name(), phase.state()),
        ("draining", SessionState::Ended)
    );
    assert_eq!(phase.end().map(|e| &e.outcome), Some(&outcome));
    assert!(!phase.next(Move::TreeGone { drain }), "the tree goes once");
    assert!(phase.next(Move::Drained), "draining -> done");
    assert_eq!((phase.name(), phase.state()), ("done", SessionState::Ended));
    assert_eq!(phase.end().map(|e| &e.outcome), Some(&outcome));
    assert!(!phase.next(Move::Drained), "done stays done");
    let late = Move::Ladder {
        outcome: Outcome::Exited,
        ladder: ladder(),
    };
    assert!(!phase.next(late));
    assert_eq!(phase.end().map(|e| &e.outcome), Some(&outcome));
    // Watching: the leader exits leaving nobody (the run ends as exited, no ladder).
    let mut phase = Phase::Watching;
    assert!(phase.next(Move::TreeGone { drain }), "watching -> draining");
    let end = phase.end().expect("ended");
    assert_eq!(end.outcome, Outcome::Exited);
    assert!(end.ladder.signals_sent.is_empty());
}

#[test]
fn the_public_state_moves_with_the_phase_and_stays_on_a_refused_move() {
    let mut rig = new_rig(quiet(10), World::default());
    assert_eq!(rig.shared.state(), SessionState::Running);
    rig.monitor.handle(Control::Terminate);
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert_eq!(rig.shared.state(), SessionState::Grace);
    // A refused move (a second drain-less end) changes neither.
    assert!(!rig.monitor.transition(Move::Drained));
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert_eq!(rig.shared.state(), SessionState::Grace);
    let drain = Drain::new(rig.clock.now(), secs(1));
    assert!(rig.monitor.transition(Move::TreeGone { drain }));
    assert_eq!(rig.shared.state(), SessionState::Ended);
    assert!(rig.monitor.transition(Move::Drained));
    assert_eq!(rig.monitor.phase.name(), "done");
    assert_eq!(rig.shared.state(), SessionState::Ended);
    assert!(rig.step().is_none(), "a run that is done takes no step");
}

#[test]
fn a_silent_leader_is_ended_exactly_at_its_idle_timeout() {
    let rig = new_rig(quiet(10), polite());
    let origin = rig.origin();
    let ran = rig.run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(ref report) if report.diagnosis.is_some()),
        "{:?}",
        ran.result.outcome
    );
    assert_eq!(ran.world.wakes[0].at, origin + secs(10), "first wake-up");
    assert_eq!(ran.ended_at, secs(10));
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
    assert_eq!(ran.signals(), [(Signal::TERM, 0)]);
    assert_eq!(
        ran.world.sent,
        [Sent::Group(LEADER, SIGTERM), Sent::Group(LEADER, SIGCONT)]
    );
    assert!(!ran.result.escalated);
    assert_eq!(ran.result.kill_latency, Some(Duration::ZERO));
    assert_eq!(ran.result.runtime, secs(10));
    assert_eq!(
        ran.states(),
        [SessionState::Running, SessionState::Grace],
        "grace while the ladder waits"
    );
    assert_eq!(ran.state, SessionState::Ended);
    assert_eq!(ran.world.reaped, [true], "reaped once, after the exit");
    assert!(ran.result.status.is_some(), "its status");
    assert!(ran.events.iter().any(|e| matches!(e, Event::Diagnosis(_))));
    assert!(matches!(ran.events.last(), Some(Event::Closed)));
    assert!(!ran.killed, "the failure path stays unused");
}

#[test]
fn keepalives_and_a_new_idle_timeout_move_the_stale_decision() {
    let mut rig = new_rig(quiet(10), polite());
    let origin = rig.origin();
    assert_eq!(rig.step().map(|w| w.at), Some(origin + secs(10)));
    rig.at(secs(8));
    rig.monitor.board.stamp(&ActivitySource::Keepalive);
    assert_eq!(rig.step().map(|w| w.at), Some(origin + secs(18)));
    rig.shared.set_idle_timeout(secs(30));
    rig.control.send(Control::IdleTimeoutChanged).expect("open");
    assert_eq!(rig.step().map(|w| w.at), Some(origin + secs(38)));
    rig.at(secs(37));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "watching", "not before its time");
    rig.at(secs(38));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert_eq!(rig.shared.state(), SessionState::Grace);
}

#[test]
fn the_hard_timeout_ends_a_busy_leader() {
    let config = quiet(10).watch_children(true).hard_timeout(Some(secs(25)));
    let world = World {
        observed: true,
        ..polite()
    };
    let rig = new_rig(config, world);
    rig.world.borrow_mut().busy_until = Some(rig.origin() + secs(3600));
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::HardTimeout { after: secs(25) });
    assert_eq!(ran.ended_at, secs(25));
    assert!(ran.world.samples > 2, "sampled while it worked");
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
}

#[test]
fn a_leader_that_stops_working_is_stale_one_timeout_after_its_last_work() {
    let config = quiet(10).watch_children(true);
    let rig = new_rig(config, polite());
    rig.world.borrow_mut().observed = true;
    rig.world.borrow_mut().busy_until = Some(rig.origin() + secs(7));
    let ran = rig.run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        ran.result.outcome
    );
    // Its last sample with work is the last check before 7 s; stale a timeout later.
    assert!(
        ran.ended_at > secs(15) && ran.ended_at <= secs(17),
        "{:?}",
        ran.ended_at
    );
}

#[test]
fn a_tree_waiting_on_input_is_ended_after_the_input_wait_timeout() {
    let config = quiet(600).input_wait_timeout(Some(secs(2)));
    let world = World {
        diagnosis: Some(diagnosis(StallKind::AwaitingInput)),
        ..polite()
    };
    let ran = new_rig(config, world).run();
    let Outcome::InputWait(wait) = &ran.result.outcome else {
        panic!("{:?}", ran.result.outcome);
    };
    assert_eq!(wait.pid, LEADER);
    assert!(wait.waited >= secs(2), "{:?}", wait.waited);
    // Looks start after 1 s of quiet; the end comes at most 250 ms past the timeout.
    assert!(
        ran.ended_at >= secs(3) && ran.ended_at <= Duration::from_millis(3250),
        "{:?}",
        ran.ended_at
    );
    assert!(ran.events.iter().any(|e| matches!(e, Event::InputWait(_))));
    assert_eq!(ran.result.kill_latency, None, "no deadline of its own");
}

#[test]
fn a_tree_that_is_only_sleeping_is_no_input_wait() {
    let config = quiet(20).input_wait_timeout(Some(secs(2)));
    let ran = new_rig(config, polite()).run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        ran.result.outcome
    );
    assert_eq!(ran.ended_at, secs(20));
}

fn seen() -> CompletionSeen {
    CompletionSeen::Pattern {
        stream: Stream::Stdout,
        line: "DONE".to_owned(),
        after: secs(1),
    }
}

#[test]
fn completion_ends_a_leader_that_lingers_past_its_linger() {
    let config =
        quiet(600).completion(crate::completion::CompletionConfig::builder().linger(secs(4)));
    let rig = new_rig(config, polite());
    rig.control.send(Control::Completed(seen())).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Completed(seen()));
    assert_eq!(ran.result.completion, Some(seen()));
    // Seen 1 s after the start: the linger runs from then.
    assert_eq!(ran.ended_at, secs(5));
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
    assert!(
        ran.events
            .iter()
            .any(|e| matches!(e, Event::Completed { .. }))
    );
}

#[test]
fn completion_followed_by_the_leaders_exit_is_an_exit() {
    let config =
        quiet(600).completion(crate::completion::CompletionConfig::builder().linger(secs(4)));
    let rig = new_rig(config, polite());
    rig.world.borrow_mut().exit_at = Some(rig.origin() + secs(2));
    rig.control.send(Control::Completed(seen())).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.completion, Some(seen()), "told in the result");
    assert!(ran.result.signals_sent.is_empty());
    assert_eq!(ran.ended_at, secs(2));
}

#[test]
fn a_leader_exiting_alone_ends_the_run_as_exited_with_its_status() {
    let rig = new_rig(quiet(600), World::default());
    {
        let mut world = rig.world.borrow_mut();
        world.exit_at = Some(rig.origin() + secs(5));
        world.code = 3;
    }
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.exit_code(), 3);
    assert!(ran.result.signals_sent.is_empty() && ran.world.sent.is_empty());
    assert_eq!(ran.result.leftovers_killed, 0);
    assert_eq!(ran.ended_at, secs(5));
    assert_eq!(ran.states(), [SessionState::Running], "no grace");
    assert_eq!(ran.state, SessionState::Ended);
    assert_eq!(ran.world.reaped, [true]);
    assert_eq!(ran.world.guardian_released, 1);
    assert_eq!(ran.world.cgroup_let_go, 1);
    assert_eq!(ran.world.session_over, 1);
    assert_eq!(ran.world.readers_left_started, 1);
    assert_eq!(
        ran.result.memory_peak,
        Some(4096),
        "read before the removal"
    );
    let exited: Vec<_> = ran
        .events
        .iter()
        .filter(|e| matches!(e, Event::Exited { .. }))
        .collect();
    assert_eq!(exited.len(), 1, "Exited exactly once");
}

#[test]
fn descendants_lingering_after_the_leaders_exit_are_ended() {
    // They ignore SIGTERM: the ladder waits its grace, then SIGKILLs them.
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let rig = new_rig(quiet(600), world);
    {
        let mut world = rig.world.borrow_mut();
        world.exit_at = Some(rig.origin() + secs(5));
        world.members = vec![pid(5001), pid(5002)];
    }
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.leftovers_killed, 2);
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert_eq!(ran.states(), [SessionState::Running, SessionState::Grace]);
    assert_eq!(
        ran.ended_at,
        secs(7),
        "exit at 5 s, SIGKILL after the 2 s grace"
    );
    assert_eq!(ran.world.reaped, [true], "reaped after the ladder");
}

#[test]
fn descendants_lingering_are_left_alone_when_the_caller_keeps_them() {
    let rig = new_rig(quiet(600).keep_leftovers(true), polite());
    {
        let mut world = rig.world.borrow_mut();
        world.exit_at = Some(rig.origin() + secs(5));
        world.members = vec![pid(5001), pid(5002)];
    }
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.result.leftovers_killed, 0);
    assert!(ran.world.sent.is_empty());
}

#[test]
fn terminate_runs_the_configured_ladder_and_terminate_with_its_own() {
    let rig = new_rig(quiet(600), polite());
    rig.control.send(Control::Terminate).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(ran.result.signals_sent, [Signal::TERM]);
    assert_eq!(ran.ended_at, Duration::ZERO);
    assert_eq!(ran.result.kill_latency, None);

    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let rig = new_rig(quiet(600), world);
    let steps = vec![
        KillStep {
            signal: Signal::INT,
            grace: secs(1),
        },
        KillStep {
            signal: Signal::KILL,
            grace: Duration::ZERO,
        },
    ];
    rig.control
        .send(Control::TerminateWith(steps))
        .expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(ran.result.signals_sent, [Signal::INT, Signal::KILL]);
    assert!(ran.result.escalated);
    assert_eq!(ran.ended_at, secs(1), "SIGKILL after the INT's grace");
}

#[test]
fn kill_ends_at_once_and_skips_a_ladder_under_way() {
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let rig = new_rig(quiet(600), world);
    rig.control.send(Control::Kill).expect("open");
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: true });
    assert_eq!(ran.result.signals_sent, [Signal::KILL]);
    assert_eq!(ran.ended_at, Duration::ZERO);

    // A leader that ignores TERM: the ladder waits for its grace, until a kill skips it.
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let mut rig = new_rig(quiet(600), world);
    rig.control.send(Control::Terminate).expect("open");
    let wake = rig.step().expect("the grace");
    assert_eq!(rig.monitor.phase.name(), "ending");
    assert!(wake.at >= rig.origin() + secs(2), "TERM's grace: {wake:?}");
    rig.control.send(Control::Kill).expect("open");
    rig.step();
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Terminated { forced: false });
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert!(ran.result.escalated);
    assert_eq!(ran.ended_at, Duration::ZERO, "no grace waited");
}

#[test]
fn a_signal_is_relayed_to_the_group_only_while_the_leader_runs() {
    let mut rig = new_rig(quiet(600), World::default());
    rig.control
        .send(Control::Signal(Signal::INT))
        .expect("open");
    rig.step();
    assert_eq!(
        rig.world.borrow().sent,
        [Sent::Group(LEADER, Signal::INT.number())]
    );
    assert_eq!(rig.monitor.phase.name(), "watching", "no ladder");
    assert_eq!(rig.shared.state(), SessionState::Running);
    rig.monitor.handle(Control::ChildExited);
    rig.control
        .send(Control::Signal(Signal::INT))
        .expect("open");
    rig.step();
    assert_eq!(rig.world.borrow().sent.len(), 1, "not after its exit");
}

#[test]
fn requests_during_the_ladder_keep_the_first_reason() {
    // A terminate and a kill arriving once the run is stale: the kill skips the grace, the
    // outcome stays the idle timeout.
    let rig = rig_after_stale();
    rig.control.send(Control::Terminate).expect("open");
    rig.control.send(Control::Kill).expect("open");
    let ran = rig.run();
    assert!(
        matches!(ran.result.outcome, Outcome::IdleTimeout(_)),
        "{:?}",
        ran.result.outcome
    );
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert_eq!(ran.ended_at, secs(10), "no grace waited");
}

/// A rig whose leader ignores TERM, stepped to its stale decision at 10 s.
fn rig_after_stale() -> Rig {
    let world = World {
        dies_on: vec![SIGKILL],
        ..World::default()
    };
    let mut rig = new_rig(quiet(10), world);
    rig.step();
    rig.at(secs(10));
    rig.step();
    assert_eq!(rig.monitor.phase.name(), "ending");
    rig
}

#[test]
fn a_tree_that_outlives_its_sigkill_is_reported_unproven() {
    let config = quiet(10).kill_confirm_timeout(secs(3));
    let ran = new_rig(config, World::default()).run();
    assert!(matches!(ran.result.outcome, Outcome::IdleTimeout(_)));
    assert_eq!(ran.result.signals_sent, [Signal::TERM, Signal::KILL]);
    assert!(ran.result.termination_unproven);
    // TERM at 10 s, KILL after its 2 s grace, then the 3 s confirmation bound.
    assert_eq!(ran.ended_at, secs(15));
    assert_eq!(ran.world.reaped, [false], "only looked at: it never exited");
}

#[test]
fn the_idle_warning_comes_once_per_idle_spell() {
    let events = crate::config::EventConfig::builder()
        .idle_warning(Some(0.5))
        .build()
        .unwrap();
    let ran = new_rig(quiet(10).events(events), polite()).run();
    let warnings: Vec<_> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            Event::IdleWarning { left } => Some(*left),
            _ => None,
        })
        .collect();
    assert_eq!(warnings, [secs(5)]);
    assert!(matches!(ran.result.outcome, Outcome::IdleTimeout(_)));
}

#[test]
fn a_failing_monitor_still_publishes_a_result_and_ends_the_session() {
    let rig = new_rig(quiet(10), polite());
    rig.world.borrow_mut().fail_on_sleep = true;
    let Rig {
        monitor,
        shared,
        done,
        guard,
        killed,
        ..
    } = rig;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| monitor.run(guard)));
    assert!(unwound.is_err(), "the port failed");
    assert!(done.recv().is_err(), "the done channel is closed");
    assert!(
        killed.load(std::sync::atomic::Ordering::SeqCst),
        "its tree was killed"
    );
    assert_eq!(shared.state(), SessionState::Ended);
    let result = shared.result.get().expect("a result is published");
    assert_eq!(result.outcome, Outcome::Terminated { forced: true });
    assert!(result.termination_unproven);
    assert_eq!(result.signals_sent, [Signal::KILL]);
    assert_eq!(result.pid, LEADER);
    assert!(!result.output_complete);
}

#[test]
fn a_monitor_never_handed_its_child_publishes_nothing() {
    let rig = new_rig(quiet(10), polite());
    let Rig {
        shared,
        done,
        guard,
        killed,
        ..
    } = rig;
    guard.disarm();
    assert!(done.recv().is_err());
    assert!(shared.result.get().is_none());
    assert!(!killed.load(std::sync::atomic::Ordering::SeqCst));
}

/// Gives the rig a stdout stream whose reader has not reached its end-of-file.
fn with_stdout(rig: &mut Rig) {
    let recorder = crate::capture::Recorder::new(
        Stream::Stdout,
        crate::capture::HeadTail::new(1024),
        &rig.monitor.config.events,
    );
    let slot = StreamSlot {
        recorder: Arc::new(crate::sync::Mutex::new(recorder)),
        spill: None,
        peek: None,
        done: false,
    };
    rig.monitor.tap = Tap::new([Some(slot), None]);
}

#[test]
fn the_drain_waits_for_the_readers_end_of_file() {
    let config = quiet(600).drain_quiet(secs(10)).drain_cap(secs(30));
    let mut rig = new_rig(config, World::default());
    with_stdout(&mut rig);
    rig.step();
    rig.at(secs(5));
    rig.world.borrow_mut().exited = true;
    rig.monitor.handle(Control::ChildExited);
    let wake = rig.step().expect("the drain waits");
    assert_eq!(rig.monitor.phase.name(), "draining");
    assert_eq!(rig.shared.state(), SessionState::Ended);
    assert_eq!(wake.at, rig.origin() + secs(15), "the quiet rule's instant");
    rig.control
        .send(Control::ReaderDone(Stream::Stdout))
        .expect("open");
    assert!(rig.step().is_none(), "done at the reader's end-of-file");
    assert_eq!(rig.monitor.phase.name(), "done");
    let ran = rig.run();
    assert!(ran.result.output_complete);
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert_eq!(ran.ended_at, secs(5));
}

#[test]
fn a_drain_without_end_of_file_ends_at_the_quiet_rule_with_the_output_incomplete() {
    let config = quiet(600).drain_quiet(secs(1)).drain_cap(secs(30));
    let mut rig = new_rig(config, World::default());
    with_stdout(&mut rig);
    rig.world.borrow_mut().exit_at = Some(rig.origin() + secs(5));
    let ran = rig.run();
    assert_eq!(ran.result.outcome, Outcome::Exited);
    assert!(!ran.result.output_complete);
    assert_eq!(ran.ended_at, secs(6), "exit at 5 s, quiet 1 s later");
}

#[test]
fn a_monitor_failing_during_its_ladder_ends_the_session_too() {
    let mut rig = new_rig(quiet(600), World::default());
    rig.control.send(Control::Terminate).expect("open");
    rig.step();
    assert_eq!(rig.shared.state(), SessionState::Grace);
    rig.world.borrow_mut().fail_on_sleep = true;
    let Rig {
        monitor,
        shared,
        done,
        guard,
        killed,
        ..
    } = rig;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| monitor.run(guard)));
    assert!(unwound.is_err(), "the port failed");
    assert!(done.recv().is_err(), "the done channel is closed");
    assert!(killed.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(shared.state(), SessionState::Ended, "not left in grace");
    let result = shared.result.get().expect("a result is published");
    assert_eq!(result.outcome, Outcome::Terminated { forced: true });
    assert!(result.termination_unproven);
}
