//! The stand-alone parts a [`Session`](crate::Session) is assembled from, for people who build
//! a monitor of their own. A session needs none of this: use [`Session`](crate::Session) and
//! [`MonitorConfig`](crate::MonitorConfig) unless you mean to wire the parts yourself.
//!
//! - [`ActivityBoard`]: one timestamp and one counter per [`ActivitySource`], stamped lock-free
//!   from any thread; the only thing the sources below touch.
//! - [`ActivityTrackingReader`]: wraps any `Read` and stamps [`ActivitySource::Output`] on
//!   every read of more than 0 bytes.
//! - [`FileActivityTracker`]: stamps [`ActivitySource::Files`] on a create, modify, rename,
//!   remove or metadata change under watched folders (notify, or a stat scan).
//! - [`DescendantObserver`]: samples the CPU time of a process's descendants
//!   ([`ChildrenSample`]); what counts as progress is up to you.
//! - [`NetworkObserver`]: samples the TCP byte counters of the sockets some processes hold
//!   ([`NetworkSample`]).
//! - [`diagnose`]: one snapshot of some processes classified as a
//!   [`StallKind`](crate::StallKind).
//!
//! ```
//! use std::io::Read;
//! use std::sync::Arc;
//! use stallwatch::parts::{ActivityBoard, ActivityTrackingReader};
//! use stallwatch::{ActivitySource, MockClock};
//!
//! let board = Arc::new(ActivityBoard::new(Arc::new(MockClock::new())));
//! let mut reader = ActivityTrackingReader::new(&b"a line\n"[..], board.clone());
//! std::io::copy(&mut reader, &mut std::io::sink())?;
//! assert_eq!(board.count(ActivitySource::Output), 1);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`ActivitySource`]: crate::ActivitySource
//! [`ActivitySource::Output`]: crate::ActivitySource::Output
//! [`ActivitySource::Files`]: crate::ActivitySource::Files

pub use crate::activity::ActivityBoard;
pub use crate::diagnosis::diagnose_pids as diagnose;
pub use crate::sources::children::{ChildrenSample, DescendantObserver};
pub use crate::sources::files::FileActivityTracker;
pub use crate::sources::network::{NetworkObserver, NetworkSample};
pub use crate::sources::output::ActivityTrackingReader;
