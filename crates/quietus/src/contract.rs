//! The contract between a [`Session`](crate::Session) (the handle a caller holds) and its
//! monitor thread: what they share ([`Shared`]), what the handle tells the thread
//! ([`Control`]), and where the session is in its life ([`SessionState`]). Both sides import it;
//! neither imports the other for it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::Mutex;
use crossbeam_channel::Sender;

use crate::capture::Recorder;
use crate::config::KillStep;
use crate::events::Emitter;
use crate::outcome::MonitorResult;
use crate::signal::Signal;
use crate::sources::output::PumpState;
use crate::stream::Stream;

/// What the session and the monitor thread share.
pub(crate) struct Shared {
    pub(crate) result: std::sync::OnceLock<MonitorResult>,
    pub(crate) pumps: [Arc<PumpState>; 2],
    /// Slot 0: stdout (or combined, or terminal), slot 1: stderr (absent in combined and
    /// terminal modes).
    pub(crate) recorders: [Option<Arc<Mutex<Recorder>>>; 2],
    pub(crate) combined: bool,
    /// The terminal of a terminal session (one stream, [`Stream::Terminal`], in slot 0): for
    /// resizing and Ctrl-C; typed input goes through the `stdin` queue.
    pub(crate) terminal: Option<Arc<crate::process::pty::Pty>>,
    pub(crate) emitter: Arc<Emitter>,
    /// [`SessionState`] as a number, set by the monitor.
    pub(crate) phase: std::sync::atomic::AtomicU8,
    /// The idle timeout in force, in nanoseconds: its one owner once the session runs
    /// (initialised from [`MonitorConfig::idle_timeout`](crate::MonitorConfig::idle_timeout),
    /// replaced by [`Session::set_idle_timeout`](crate::Session::set_idle_timeout), read by the
    /// monitor; what derives from it follows).
    pub(crate) idle_timeout: std::sync::atomic::AtomicU64,
    /// The log spills, to tell where the logs are while the run goes on.
    pub(crate) spills: [Option<Arc<Mutex<crate::capture::spill::Spill>>>; 2],
    /// The queue to the stdin writer thread (piped stdin only; `None` once closed).
    pub(crate) stdin: Mutex<Option<Sender<Vec<u8>>>>,
    /// The isolated home prepared at the spawn, if any.
    pub(crate) home: Option<crate::environment::IsolatedHome>,
    /// The solo caps in force (for [`Session::idle_left`](crate::Session::idle_left)).
    pub(crate) caps: Vec<(crate::activity::ActivitySource, Duration)>,
}

impl Shared {
    /// The idle timeout in force.
    pub(crate) fn idle_timeout(&self) -> Duration {
        Duration::from_nanos(self.idle_timeout.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Where the session is in its life.
    pub(crate) fn state(&self) -> SessionState {
        SessionState::from_u8(self.phase.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Publishes where the session is in its life (the monitor's phase says).
    pub(crate) fn set_state(&self, state: SessionState) {
        let value = match state {
            SessionState::Running => SessionState::RUNNING,
            SessionState::Grace => SessionState::GRACE,
            SessionState::Ended => SessionState::ENDED,
        };
        self.phase
            .store(value, std::sync::atomic::Ordering::Release);
    }

    /// Publishes a new (validated) idle timeout.
    pub(crate) fn set_idle_timeout(&self, idle_timeout: Duration) {
        self.idle_timeout.store(
            crate::clock::saturating_nanos(idle_timeout),
            std::sync::atomic::Ordering::Release,
        );
    }
}

/// The sending end of the monitor's mailbox: each message is queued, then, when the monitor
/// sleeps in `poll` (the real clock, `sys::Wakeup`), its wake-up descriptor is poked.
#[derive(Debug, Clone)]
pub(crate) struct ControlTx {
    tx: crossbeam_channel::Sender<Control>,
    wakeup: Option<std::sync::Arc<crate::process::sys::Wakeup>>,
}

impl ControlTx {
    /// A mailbox end for `tx`, poking `wakeup` after every message when given.
    pub(crate) fn new(
        tx: crossbeam_channel::Sender<Control>,
        wakeup: Option<std::sync::Arc<crate::process::sys::Wakeup>>,
    ) -> ControlTx {
        ControlTx { tx, wakeup }
    }

    /// Queues `msg` and wakes the monitor; `Err` once the monitor is gone.
    pub(crate) fn send(&self, msg: Control) -> Result<(), crossbeam_channel::SendError<Control>> {
        self.tx.send(msg)?;
        if let Some(wakeup) = &self.wakeup {
            wakeup.poke();
        }
        Ok(())
    }
}

/// Messages to the monitor. Sources never call the monitor; they stamp the board or send here.
#[derive(Debug)]
pub(crate) enum Control {
    /// The session published a new idle timeout in [`Shared::idle_timeout`]: re-plan with it.
    IdleTimeoutChanged,
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
    /// A reader saw an output line that tells completion.
    Completed(crate::outcome::CompletionSeen),
}

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// The child runs under watch.
    Running,
    /// The kill ladder is under way (grace period).
    Grace,
    /// The child is gone, whatever ended it: it exited by itself, or a timeout, a request or
    /// the ladder ended it (its output may still be draining). The
    /// [`Outcome`](crate::Outcome) says which.
    Ended,
}

impl SessionState {
    pub(crate) const RUNNING: u8 = 0;
    pub(crate) const GRACE: u8 = 1;
    pub(crate) const ENDED: u8 = 2;

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            Self::RUNNING => SessionState::Running,
            Self::GRACE => SessionState::Grace,
            _ => SessionState::Ended,
        }
    }

    /// `running`, `grace` or `ended` (the state's word in a [`SessionSummary`](crate::SessionSummary) line).
    pub fn name(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Grace => "grace",
            SessionState::Ended => "ended",
        }
    }
}
