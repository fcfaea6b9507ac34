//! The tests that turn the subreaper mode on (`ChildWatchConfig::subreaper`): process-wide
//! and permanent, so this binary adopts the orphans of all its tests, and no other binary
//! shares a process with it. The fault families "trees" and "signals" and the library-level
//! subreaper tests.

#[path = "../support/mod.rs"]
mod support;

mod signals;
mod subreaper;
mod trees;
