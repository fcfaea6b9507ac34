//! The monitor's phases, each carrying its own data, and the one transition function
//! ([`Phase::next`]) that says where a phase goes on a [`Move`]: the session's public
//! [`SessionState`] is a function of the phase ([`Phase::state`]), stored with it in one step
//! (`Monitor::transition`), so the two never disagree.

use std::time::{Duration, Instant};

use super::super::ladder::Ladder;
use crate::contract::SessionState;
use crate::outcome::Outcome;
use crate::signal::Signal;

/// What the ladder did, for the result (nothing when no ladder ran).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(in crate::monitor) struct LadderRecord {
    pub(in crate::monitor) signals_sent: Vec<Signal>,
    pub(in crate::monitor) escalated: bool,
    /// The processes the leader left behind, ended by the ladder.
    pub(in crate::monitor) leftovers_killed: usize,
    /// Those leftovers, named before they were ended.
    pub(in crate::monitor) leftovers: Vec<crate::outcome::Leftover>,
    /// The SIGKILL's confirmation bound ran out with the tree still there.
    pub(in crate::monitor) unproven: bool,
    /// From the first signal to the tree gone.
    pub(in crate::monitor) time: Option<Duration>,
    /// From the deadline to the first signal.
    pub(in crate::monitor) kill_latency: Option<Duration>,
    /// After a deadline: when it was due, how long after it the first signal went out and
    /// the tree was gone (for the kill precision's log line).
    pub(in crate::monitor) after_deadline: Option<(Instant, Duration, Option<Duration>)>,
}

impl LadderRecord {
    /// What `ladder` did.
    pub(in crate::monitor) fn of(ladder: &Ladder) -> Self {
        LadderRecord {
            signals_sent: ladder.signals_sent.clone(),
            escalated: ladder.escalated,
            leftovers_killed: ladder.leftovers_killed,
            leftovers: ladder.leftovers.clone(),
            unproven: ladder.unproven,
            time: ladder.time,
            kill_latency: ladder.kill_latency,
            after_deadline: ladder.after_deadline(),
        }
    }
}

/// How the run ended: why, and what the ladder did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::monitor) struct End {
    pub(in crate::monitor) outcome: Outcome,
    pub(in crate::monitor) ladder: LadderRecord,
}

/// The drain's last look at the readers: when (real time) and the bytes each had read.
pub(in crate::monitor) type Looked = Option<(Instant, [u64; 2])>;

/// The drain under way: the tree is gone, the readers are waited for.
#[derive(Debug, Clone, Copy)]
pub(in crate::monitor) struct Drain {
    pub(in crate::monitor) since: Instant,
    /// The drain waits for pipes that strangers hold open no longer than this.
    pub(in crate::monitor) cap: Instant,
    /// The last look at the readers past the cap (`Monitor::own_backlog`).
    pub(in crate::monitor) looked: Looked,
}

impl Drain {
    /// A drain starting `now`, capped `cap` later.
    pub(in crate::monitor) fn new(now: Instant, cap: Duration) -> Self {
        Drain {
            since: now,
            cap: now + cap,
            looked: None,
        }
    }
}

/// Where the run is.
pub(in crate::monitor) enum Phase {
    /// The program runs; the verdict is asked at each wake-up.
    Watching,
    /// A reason to end it was found: its ladder takes the tree down.
    Ending {
        outcome: Outcome,
        ladder: Box<Ladder>,
    },
    /// The tree is gone: the output is read to its end.
    Draining { end: End, drain: Drain },
    /// The run is over: the result is published.
    Done { end: End },
}

/// What moves a phase on.
pub(in crate::monitor) enum Move {
    /// While watching, a reason to end the tree was found: `ladder` (not started yet) ends it.
    Ladder {
        outcome: Outcome,
        ladder: Box<Ladder>,
    },
    /// The tree is gone: the ladder is over, or the leader exited leaving nobody.
    TreeGone { drain: Drain },
    /// The drain is over.
    Drained,
}

impl Move {
    /// The move's name, for the logs.
    pub(in crate::monitor) fn name(&self) -> &'static str {
        match self {
            Move::Ladder { .. } => "ladder",
            Move::TreeGone { .. } => "tree gone",
            Move::Drained => "drained",
        }
    }
}

impl Phase {
    /// The session's public state in this phase.
    pub(in crate::monitor) fn state(&self) -> SessionState {
        match self {
            Phase::Watching => SessionState::Running,
            Phase::Ending { .. } => SessionState::Grace,
            Phase::Draining { .. } | Phase::Done { .. } => SessionState::Ended,
        }
    }

    /// The phase's name, for the logs and the tests.
    pub(in crate::monitor) fn name(&self) -> &'static str {
        match self {
            Phase::Watching => "watching",
            Phase::Ending { .. } => "ending",
            Phase::Draining { .. } => "draining",
            Phase::Done { .. } => "done",
        }
    }

    /// How the run ended, once it has (draining or done).
    pub(in crate::monitor) fn end(&self) -> Option<&End> {
        match self {
            Phase::Draining { end, .. } | Phase::Done { end } => Some(end),
            Phase::Watching | Phase::Ending { .. } => None,
        }
    }

    /// The one transition function: moves this phase on `step`, and returns whether it did;
    /// a move it cannot make leaves it unchanged (the first reason to end wins; a run over
    /// stays over). A leader that exited leaving nobody ends the run as [`Outcome::Exited`].
    pub(in crate::monitor) fn next(&mut self, step: Move) -> bool {
        let current = std::mem::replace(self, Phase::Watching);
        let (next, moved) = match (current, step) {
            (Phase::Watching, Move::Ladder { outcome, ladder }) => {
                (Phase::Ending { outcome, ladder }, true)
            }
            (Phase::Watching, Move::TreeGone { drain }) => {
                let end = End {
                    outcome: Outcome::Exited,
                    ladder: LadderRecord::default(),
                };
                (Phase::Draining { end, drain }, true)
            }
            (Phase::Ending { outcome, ladder }, Move::TreeGone { drain }) => {
                let end = End {
                    outcome,
                    ladder: LadderRecord::of(&ladder),
                };
                (Phase::Draining { end, drain }, true)
            }
            (Phase::Draining { end, .. }, Move::Drained) => (Phase::Done { end }, true),
            (phase, _) => (phase, false),
        };
        *self = next;
        moved
    }
}
