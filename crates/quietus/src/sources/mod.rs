//! The activity sources on their own, for people who build a monitor of their own: each one
//! only stamps an [`ActivityBoard`]. A session needs none of this: use
//! [`Session`](crate::Session) and [`MonitorConfig`](crate::MonitorConfig) unless you mean to
//! wire the parts yourself.
//!
//! - [`ActivityBoard`]: one timestamp and one counter per [`ActivitySource`], stamped lock-free
//!   from any thread; the only thing the sources below touch.
//! - [`ActivityTrackingReader`]: wraps any `Read` and stamps [`ActivitySource::Output`] on
//!   every read of more than 0 bytes.
//! - [`FileActivityTracker`]: stamps [`ActivitySource::Files`] on a create, modify, rename,
//!   remove or metadata change under watched folders (notify, or a stat scan).
//! - [`DescendantObserver`]: samples the CPU time of a process's descendants
//!   ([`ChildrenSample`], also what a [`StaleReport`](crate::outcome::StaleReport) shows of them); what
//!   counts as progress is up to you.
//! - [`NetworkObserver`]: samples the TCP byte counters of the sockets some processes hold
//!   ([`NetworkSample`]).
//!
//! What the tree was doing is [`diagnosis::diagnose`](crate::diagnosis::diagnose).
//!
//! ```
//! use std::io::Read;
//! use std::sync::Arc;
//! use quietus::sources::{ActivityBoard, ActivityTrackingReader};
//! use quietus::{ActivitySource, MockClock};
//!
//! let board = Arc::new(ActivityBoard::new(MockClock::new()));
//! let mut reader = ActivityTrackingReader::new(&b"a line\n"[..], board.clone());
//! std::io::copy(&mut reader, &mut std::io::sink())?;
//! assert_eq!(board.count(&ActivitySource::Output), 1);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`ActivitySource`]: crate::ActivitySource
//! [`ActivitySource::Output`]: crate::ActivitySource::Output
//! [`ActivitySource::Files`]: crate::ActivitySource::Files

pub(crate) mod children;
pub(crate) mod files;
pub(crate) mod lines;
pub(crate) mod network;
pub(crate) mod output;
pub(crate) mod probes;
pub(crate) mod screen;
pub(crate) mod shared_watcher;

pub use crate::activity::ActivityBoard;
pub use children::{ChildrenSample, DescendantObserver};
pub use files::FileActivityTracker;
pub use network::{NetworkObserver, NetworkSample};
pub use output::{ActivityTrackingReader, SinkError};

/// For the screen bench (`benches/screen.rs`) only: feeds `chunks` to the model of a terminal
/// of `rows` x `cols` that an output source keeps under a terminal, one chunk every `step`
/// (the time a settle is measured in), and says how many showed new text. Not for other use.
#[doc(hidden)]
pub fn screen_changes(rows: u16, cols: u16, chunks: &[&[u8]], step: std::time::Duration) -> usize {
    let mut model = screen::Screen::new(rows, cols);
    let mut at = std::time::Instant::now();
    let mut changed = 0;
    for chunk in chunks {
        at += step;
        changed += usize::from(model.feed(chunk, at, false) == Some(true));
    }
    changed
}
