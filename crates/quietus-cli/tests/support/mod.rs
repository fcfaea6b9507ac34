//! The command's test prelude: the library's real-process kit (markers, polling, the fault
//! suite's scenarios; `crates/quietus/tests/support/`), plus [`cli`], which runs the
//! `quietus` binary of this crate.
#![allow(dead_code, unused_imports)]

#[path = "../../../quietus/tests/support/mod.rs"]
mod library;

pub use library::*;

pub mod cli;
