//! The monitor: one thread per session that sleeps until the next instant its decision can
//! change (or a control message), asks the verdict, and runs the kill ladder.
//!
//! - [`launch`](launch::launch): spawns the child, its pipes and threads (the launcher);
//! - `run`: the monitor loop (watch, stale, hard deadline, ladder, drain);
//! - `ladder`: the kill ladder behind a small process-layer trait, and the leader's
//!   bookkeeping;
//! - `rules`: completion and its linger, the solo caps, the probes (the decisions themselves
//!   are the verdict's);
//! - `tap`: the output streams as the monitor sees them (peeking, flushing throttled output);
//! - `reader`: the output readers' threads; `stdin`: the stdin writer's;
//! - `tree`: how the tree is started and held, one file per strategy (group, terminal,
//!   cgroup, guardian);
//! - `wait`: how the monitor sleeps, one way under every clock.

use std::time::{Duration, Instant};

mod core;
mod ladder;
mod launch;
mod observe; // observe mode (issue 43)
mod port;
mod reader;
mod rules;
mod run;
mod stdin;
mod tap;
mod tree;
mod wait;

pub(crate) use launch::{Launch, launch};
pub(crate) use tree::{Attach, Exec};

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

/// While a ladder waits for group members other than the (already exited) leader, it checks
/// them at 5 ms, doubling up to 200 ms: quick for the common case, cheap for a slow one.
const POLL_MIN: Duration = Duration::from_millis(5);
const POLL_MAX: Duration = Duration::from_millis(200);

/// The environment variable that tags a session's processes in subreaper mode.
const SESSION_TAG: &str = "QUIETUS_SESSION";

/// Now in clock ticks since boot, the unit of process start times (0 where unknown: a session
/// then counts as running since boot, which only makes the attribution more cautious).
fn boot_ticks_now() -> u64 {
    #[cfg(target_os = "linux")]
    {
        crate::process::sys::boot_ticks_now().unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The session is over for the orphan attribution (`process::orphans`).
fn end_session(id: u64) {
    #[cfg(target_os = "linux")]
    let now = crate::process::sys::boot_ticks_now().map(|t| t + 1); // one tick of margin: both are whole ticks
    #[cfg(not(target_os = "linux"))]
    let now = None;
    crate::process::orphans::end(id, now);
}
