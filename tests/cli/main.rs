//! The `stallwatch` command, run as a separate process.

#[path = "../support/mod.rs"]
mod support;

mod command;
mod containment;
mod events;
mod options;
mod passthrough;
mod report;
mod signals;
#[cfg(target_os = "linux")]
mod terminal;
