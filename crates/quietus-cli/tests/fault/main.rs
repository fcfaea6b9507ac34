//! The fault-injection suite (see `support/fault.rs`), the families that need no subreaper
//! mode. The families that do, and whose test process therefore adopts every orphan of its
//! tests, are in `tests/fault_subreaper/`.

#[path = "../support/mod.rs"]
mod support;

mod environment;
mod left_behind;
mod limits;
mod no_false_kills;
mod output;
mod supervisor;
mod timing;
