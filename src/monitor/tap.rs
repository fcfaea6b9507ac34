//! The output tap, as the monitor sees it: one slot per stream (its recorder, its log spill,
//! a peek at its pipe, whether its reader is done), flushing throttled `Output` events and
//! telling whether bytes still sit in a pipe.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::capture::Recorder;
use crate::capture::spill::{LogFile, SpillReport};
use crate::events::Emitter;
use crate::signals::output::Stream;

/// One output stream as the monitor sees it.
pub(super) struct StreamSlot {
    pub(super) recorder: Arc<parking_lot::Mutex<Recorder>>,
    /// The log spill thread's result.
    pub(super) spill: Option<SpillReport>,
    /// A duplicate of the read end, only to ask how many unread bytes the pipe holds
    /// (FIONREAD) while draining; it never reads. Closed when the reader is done.
    pub(super) peek: Option<OwnedFd>,
    /// Whether the stream's reader reached end-of-file.
    pub(super) done: bool,
}

/// The streams' slots and the held-back `Output` events.
pub(super) struct Tap {
    /// Slot 0: stdout (or combined), slot 1: stderr (absent, so done, in combined mode).
    slots: [Option<StreamSlot>; 2],
    /// The earliest instant a held-back `Output` event is due.
    pub(super) flush_due: Option<Instant>,
}

/// The slot of `stream`.
pub(super) fn stream_index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout | Stream::Combined => 0,
        Stream::Stderr => 1,
    }
}

impl Tap {
    pub(super) fn new(slots: [Option<StreamSlot>; 2]) -> Self {
        Self {
            slots,
            flush_due: None,
        }
    }

    /// Sends held-back `Output` events that are due (all of them when `all`).
    pub(super) fn flush_output(&mut self, now: Instant, all: bool, emitter: &Emitter) {
        if !all && self.flush_due.is_none_or(|due| due > now) {
            return;
        }
        let mut next: Option<Instant> = None;
        for slot in self.slots.iter().flatten() {
            let mut recorder = slot.recorder.lock();
            if !recorder.has_pending() {
                continue;
            }
            match recorder.due() {
                Some(due) if due > now && !all => {
                    next = Some(next.map_or(due, |n: Instant| n.min(due)));
                }
                _ => recorder.flush(now, emitter),
            }
        }
        self.flush_due = next;
    }

    /// A reader holds back output for an `Output` event due at `due`.
    pub(super) fn output_pending(&mut self, due: Instant) {
        self.flush_due = Some(self.flush_due.map_or(due, |d| d.min(due)));
    }

    /// The reader of `stream` reached end-of-file.
    pub(super) fn reader_done(&mut self, stream: Stream) {
        if let Some(slot) = &mut self.slots[stream_index(stream)] {
            slot.done = true;
            // The reader closed its end: close ours too, or the pipe would stay open.
            slot.peek = None;
        }
    }

    /// Whether every reader reached end-of-file.
    pub(super) fn all_done(&self) -> bool {
        self.slots.iter().flatten().all(|slot| slot.done)
    }

    /// Whether no unread byte sits in either pipe.
    pub(super) fn pipes_empty(&self) -> bool {
        self.slots.iter().flatten().all(|slot| {
            slot.done
                || slot
                    .peek
                    .as_ref()
                    .is_none_or(|fd| rustix::io::ioctl_fionread(fd).is_ok_and(|n| n == 0))
        })
    }

    /// The streams' log files. A reader at end-of-file has handed over its last chunk: wait
    /// (at most `wait`) for the spill thread to write it.
    pub(super) fn logs(&self, wait: Duration) -> Vec<LogFile> {
        self.slots
            .iter()
            .flatten()
            .filter_map(|slot| slot.spill.as_ref()?.log(slot.done, wait))
            .collect()
    }
}
