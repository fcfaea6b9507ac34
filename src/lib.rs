//! stallwatch (crate docs written below).
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod activity;
mod clock;
mod config;
mod monitor;
mod outcome;
mod process;
mod session;
mod signals;
mod verdict;

pub use activity::{ActivityBoard, ActivitySource, BoardSnapshot, SourceState};
pub use clock::{Clock, MockClock, SystemClock};
pub use config::{
    ConfigError, EnabledSignals, HARD_TIMEOUT_RANGE, IDLE_TIMEOUT_RANGE, KillLadder, KillStep,
    LeftoverPolicy, MonitorConfig, Signal,
};
pub use outcome::{
    EXIT_CANNOT_EXECUTE, EXIT_INTERNAL, EXIT_NOT_FOUND, EXIT_TIMEOUT, HumanDuration,
    MonitorResult, Outcome, SignalIdle, StaleReport,
};
pub use session::{Session, SessionBuilder};
pub use signals::output::{ActivityTrackingReader, OutputSink, Stream};
