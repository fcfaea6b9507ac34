//! The fake port and the rig the loop's tests drive: a scripted process table, a port that
//! moves the `MockClock` to each wake-up's deadline, and a monitor made as the launcher makes
//! it (`Monitor::new` from a `Core`).

use super::super::super::core::Core;
use super::super::super::ladder::ProcessLayer;
use super::super::super::port::{Leftovers, Memory, Port, ReaderLost, TreeSample};
use super::super::super::wait::Wake;
use super::super::Monitor;
use super::super::result::{DoneGuard, Facts};
use crate::activity::ActivitySource;
use crate::clock::{Clock, MockClock};
use crate::config::{KillLadder, MonitorConfig, MonitorConfigBuilder};
use crate::contract::{Control, SessionState, Shared};
use crate::diagnosis::{Diagnosis, ProcessDiagnosis, StallKind};
use crate::events::Event;
use crate::outcome::{MonitorResult, TreeHold};
use crate::pid::Pid;
use crate::process::sys::{SIGTERM, Woken};
use crate::signal::Signal;
use crate::sources::children::{ChildrenSample, Identity};
use crossbeam_channel::{Receiver, Sender};
use std::cell::RefCell;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The pid `n` (a made-up process of the scripted world).
pub(super) const fn pid(n: u32) -> Pid {
    match Pid::new(n) {
        Some(pid) => pid,
        None => panic!("not a pid"),
    }
}

pub(super) const LEADER: Pid = pid(4242);
/// More sleeps than any run here needs: a loop that does not end fails instead of hanging.
pub(super) const MAX_SLEEPS: usize = 10_000;

/// A signal the monitor sent, and to what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sent {
    Group(Pid, i32),
    Pid(Pid, i32),
}

/// The scripted process table, and what the monitor asked of it.
#[derive(Default)]
pub(super) struct World {
    /// The leader exits by itself at this instant.
    pub(super) exit_at: Option<Instant>,
    /// The leader has exited.
    pub(super) exited: bool,
    /// The exit told to the monitor.
    pub(super) exit_told: bool,
    /// Its exit code.
    pub(super) code: i32,
    /// Signals that end the leader and every member of its group.
    pub(super) dies_on: Vec<i32>,
    /// Live members of the leader's group other than the leader.
    pub(super) members: Vec<Pid>,
    /// The descendants are observed; their CPU moves until this instant.
    pub(super) observed: bool,
    pub(super) busy_until: Option<Instant>,
    /// What the diagnosis finds, and the read count of every process.
    pub(super) diagnosis: Option<Diagnosis>,
    pub(super) sent: Vec<Sent>,
    pub(super) wakes: Vec<Wake>,
    /// The session's state at each sleep.
    pub(super) states: Vec<SessionState>,
    pub(super) samples: usize,
    pub(super) reaped: Vec<bool>,
    pub(super) guardian_released: usize,
    pub(super) cgroup_let_go: usize,
    pub(super) session_over: usize,
    pub(super) readers_left_started: usize,
    /// The sleep fails (the monitor thread unwinds).
    pub(super) fail_on_sleep: bool,
    /// A signal ended processes since the last sleep: a real-time re-check finds them gone.
    pub(super) died: bool,
}

impl World {
    pub(super) fn signalled(&mut self, sent: Sent, signal: i32) {
        self.sent.push(sent);
        if self.dies_on.contains(&signal) {
            self.exited = true;
            self.members.clear();
            self.died = true;
        }
    }
}

/// The fake port: the scripted world, the clock it moves, the state it reads.
pub(super) struct FakePort {
    pub(super) world: Rc<RefCell<World>>,
    pub(super) clock: MockClock,
    pub(super) shared: Option<Arc<Shared>>,
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

    fn diagnose(&self, _recent: Option<Duration>, _redrawing: bool) -> Diagnosis {
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
pub(super) fn diagnosis(kind: StallKind) -> Diagnosis {
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
pub(super) struct Rig {
    pub(super) monitor: Monitor<FakePort>,
    pub(super) control: Sender<Control>,
    pub(super) events: Receiver<Event>,
    pub(super) clock: MockClock,
    pub(super) world: Rc<RefCell<World>>,
    pub(super) shared: Arc<Shared>,
    pub(super) done: Receiver<()>,
    pub(super) guard: DoneGuard,
    pub(super) killed: Arc<AtomicBool>,
}

/// A rig for `config` (files off) whose leader lives in `world`.
pub(super) fn new_rig(config: MonitorConfigBuilder, world: World) -> Rig {
    let config = config
        .watch_files(false)
        .watch_network(false)
        .build()
        .unwrap();
    let clock = MockClock::new();
    // The core as the launcher makes it; the children source as configured (the launcher's
    // observer sets it).
    let core = Core::new(1, config, Clock::from(&clock));
    core.board
        .set_enabled(&ActivitySource::Children, core.config.enabled.children);
    let events = core.emitter.receiver();
    let shared = Arc::new(core.shared());
    let (control, control_rx) = crossbeam_channel::unbounded();
    let world = Rc::new(RefCell::new(world));
    let port = FakePort {
        world: world.clone(),
        clock: clock.clone(),
        shared: Some(shared.clone()),
    };
    let monitor = Monitor::new(core, LEADER, shared.clone(), control_rx, port);
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
    pub(super) fn run(self) -> Ran {
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
        let origin = monitor.core.board.origin();
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
    pub(super) fn step(&mut self) -> Option<Wake> {
        while let Ok(msg) = self.monitor.control.try_recv() {
            self.monitor.handle(msg);
        }
        let now = self.monitor.core.clock.now();
        self.monitor.step(now)
    }

    /// Moves the clock to `at` (after the origin).
    pub(super) fn at(&self, at: Duration) {
        let now = self.monitor.core.clock.now();
        let target = self.monitor.core.board.origin() + at;
        self.clock.advance(target.saturating_duration_since(now));
    }

    pub(super) fn origin(&self) -> Instant {
        self.monitor.core.board.origin()
    }
}

/// What a run to its end gave.
pub(super) struct Ran {
    pub(super) result: MonitorResult,
    pub(super) events: Vec<Event>,
    /// The clock's time at the end, after the origin.
    pub(super) ended_at: Duration,
    pub(super) world: World,
    pub(super) state: SessionState,
    pub(super) killed: bool,
}

impl Ran {
    pub(super) fn signals(&self) -> Vec<(Signal, usize)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Signal { signal, step } => Some((*signal, *step)),
                _ => None,
            })
            .collect()
    }

    /// The states seen at the sleeps, each once in order.
    pub(super) fn states(&self) -> Vec<SessionState> {
        let mut states = self.world.states.clone();
        states.dedup();
        states
    }
}

pub(super) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A quiet config: output and keepalive only, idle after `idle` seconds, TERM then KILL, no
/// idle warning.
pub(super) fn quiet(idle: u64) -> MonitorConfigBuilder {
    MonitorConfig::builder()
        .idle_timeout(secs(idle))
        .events(crate::config::EventConfig::builder().idle_warning(None))
        .watch_children(false)
        .kill_ladder(KillLadder::polite(Signal::TERM, secs(2)))
}

/// A leader that ends on SIGTERM.
pub(super) fn polite() -> World {
    World {
        dies_on: vec![SIGTERM],
        ..World::default()
    }
}
