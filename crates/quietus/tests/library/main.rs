//! Library-level behaviour of `Session` and its parts, one module per subject (the processes
//! of this binary never become a child subreaper: the subreaper-mode tests live in
//! `tests/fault_subreaper/`, as that mode is process-wide and permanent).

#[path = "../support/mod.rs"]
mod support;

mod activity_keeps_alive;
mod capture_events;
mod children_signal;
mod completion;
mod containment;
mod diagnosis;
mod drop_session;
mod environment;
mod exit_status;
mod file_signal;
mod hard_timeout;
mod idle_timeout;
#[cfg(target_os = "linux")]
mod input_wait;
mod kill_ladder;
mod leftovers;
mod mock_clock;
mod network_signal;
mod observe;
mod probes;
mod program;
mod readme;
mod registry;
mod retry;
mod session_control;
mod solo_caps;
mod spawn_errors;
mod stdin;
#[cfg(target_os = "linux")]
mod terminal;
