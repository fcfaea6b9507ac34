//! The `stallwatch` command, run as a separate process.

#[path = "../support/mod.rs"]
mod support;

mod command;
mod events;
mod non_interactive;
mod options;
mod passthrough;
mod report;
mod signals;
#[cfg(target_os = "linux")]
mod terminal;
