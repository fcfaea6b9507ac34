//! The `quietus` command, run as a separate process.

#[path = "../support/mod.rs"]
mod support;

mod command;
mod completion;
mod containment;
mod events;
mod help;
mod input_wait;
mod non_interactive;
mod observe;
mod options;
mod passthrough;
mod report;
mod sandbox;
mod serve;
mod signals;
mod start_state;
#[cfg(target_os = "linux")]
mod terminal;
