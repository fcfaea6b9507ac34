//! The output tap, as the monitor sees it: one slot per stream (its recorder, its log spill,
//! a peek at its pipe, whether its reader is done), flushing throttled `Output` events and
//! telling whether bytes still sit in a pipe.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Instant;

use crate::capture::Recorder;
use crate::capture::spill::SpillReport;
use crate::events::Emitter;
use crate::outcome::LogFile;
use crate::process::sys;
use crate::stream::Stream;

/// A pipe's read end, shared by its reader (which reads it) and the monitor (which waits on
/// it until the reader starts, and asks how many bytes wait in it): one descriptor per
/// stream. It closes once both let go of it: the reader at its end, the monitor when told so.
pub(super) type PipeEnd = Arc<std::fs::File>;

/// The reading side of a [`PipeEnd`].
pub(super) struct SharedPipe(pub(super) PipeEnd);

impl io::Read for SharedPipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

/// One output stream as the monitor sees it.
pub(super) struct StreamSlot {
    pub(super) recorder: Arc<crate::sync::Mutex<Recorder>>,
    /// The log spill thread's result.
    pub(super) spill: Option<SpillReport>,
    /// The read end, only to ask how many unread bytes the pipe holds (FIONREAD) while
    /// draining; the monitor never reads it. Let go of when the reader is done.
    pub(super) peek: Option<PipeEnd>,
    /// Whether the stream's reader reached end-of-file.
    pub(super) done: bool,
}

impl StreamSlot {
    /// Whether the reader still reads a pipe whose write end nobody holds any more.
    fn reading_hung_up(&self) -> bool {
        !self.done
            && self
                .peek
                .as_ref()
                .is_some_and(|fd| sys::pipe_hung_up(fd.as_fd()))
    }
}

/// The streams' slots and the held-back `Output` events.
pub(super) struct Tap {
    /// Slot 0: stdout (or combined, or terminal), slot 1: stderr (absent, so done, in combined
    /// and terminal modes).
    slots: [Option<StreamSlot>; 2],
    /// The earliest instant a held-back `Output` event is due.
    pub(super) flush_due: Option<Instant>,
    /// When bytes found waiting in a pipe at a stale decision were last counted as output.
    pub(super) waiting_counted_at: Option<Instant>,
}

/// The slot of `stream`.
pub(super) fn stream_index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout | Stream::Combined | Stream::Terminal => 0,
        Stream::Stderr => 1,
    }
}

impl Tap {
    pub(super) fn new(slots: [Option<StreamSlot>; 2]) -> Self {
        Self {
            slots,
            flush_due: None,
            waiting_counted_at: None,
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
            // The reader let go of the pipe: so does the monitor, or it would stay open.
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
                    .is_none_or(|fd| crate::process::sys::unread_bytes(fd).is_ok_and(|n| n == 0))
        })
    }

    /// Whether a reader still reads a pipe that nobody holds open any more.
    pub(super) fn any_hung_up(&self) -> bool {
        self.slots.iter().flatten().any(StreamSlot::reading_hung_up)
    }

    /// Whether a reader of a pipe that nobody holds open any more is still behind: it read
    /// something since the last look (`read`: the bytes each stream's reader has read now,
    /// `before`: at the last look, `None` for none yet), or it waits for its log spill.
    pub(super) fn behind(&self, read: [u64; 2], before: Option<[u64; 2]>) -> bool {
        self.slots.iter().enumerate().any(|(i, slot)| {
            slot.as_ref().is_some_and(|slot| {
                slot.reading_hung_up()
                    && (before.is_none_or(|before| before[i] != read[i])
                        || slot.spill.as_ref().is_some_and(SpillReport::busy))
            })
        })
    }

    /// The streams' log files: every chunk read is written and hashed first (bounded by the
    /// disk).
    pub(super) fn logs(&self) -> Vec<LogFile> {
        self.slots
            .iter()
            .flatten()
            .filter_map(|slot| slot.spill.as_ref()?.log(slot.done))
            .collect()
    }
}
