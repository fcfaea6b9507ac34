//! The monitor: one thread per session that sleeps until the next instant its decision can
//! change (or a control message), asks the verdict, and runs the kill ladder.
//!
//! - [`launch`](launch::launch): spawns the child, its pipes and threads (the launcher), in
//!   typed stages from the session's `core` (id, configuration, clock, board, emitter);
//! - `run`: the monitor loop (watch, stale, hard deadline, ladder, drain);
//! - `ladder`: the kill ladder behind a small process-layer trait, and the leader's
//!   bookkeeping;
//! - `rules`: completion and its linger, the solo caps, the probes (the decisions themselves
//!   are the verdict's);
//! - `tap`: the output streams as the monitor sees them (peeking, flushing throttled output);
//! - `reader`: the output readers' threads; `stdin`: the stdin writer's;
//! - `tree`: how the tree is started and held, one file per strategy (group, terminal,
//!   cgroup, guardian);
//! - `wait`: how the monitor sleeps (and when it wakes next), one way under every clock;
//! - `port`: everything the loop asks of the operating system; `observe`: observe mode's
//!   bookkeeping.
//!
//! This file only declares them: no file of the monitor imports from it.

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
