//! The parts of the `quietus` command that are not the library: options, signal handling
//! (forwarding and reaping adopted zombies), the summary line and the JSON report.
//!
//! Only the binary uses these modules (`mod cli;` in `src/main.rs`).

pub(crate) mod events;
pub(crate) mod options;
pub(crate) mod reaper;
pub(crate) mod relay;
pub(crate) mod report_file;
pub(crate) mod signals;
pub(crate) mod terminal;
pub(crate) mod termination;
