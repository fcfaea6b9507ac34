//! Output retention: bounded head/tail buffers per stream, the captured output a caller reads, and the log spill.

pub(crate) mod spill;

use std::collections::VecDeque;
use std::fmt;

use crate::outcome::MonitorResult;
use crate::stream::Stream;

/// Keeps the first and the last bytes of a stream within a byte cap; drops the middle and counts
/// exactly what it dropped. The cap is split in two halves (the odd byte goes to the tail, the
/// part that usually holds the error).
#[derive(Debug, Clone)]
pub(crate) struct HeadTail {
    head: Vec<u8>,
    head_cap: usize,
    tail: Tail,
    total: u64,
}

impl HeadTail {
    pub(crate) fn new(cap: usize) -> Self {
        Self::with_buffers(cap, crate::sources::output::CHUNK)
    }

    /// [`new`](Self::new) with the size of the reader's buffers (`chunk`): a read of at least
    /// half of one is kept whole ([`push_owned`](Self::push_owned)); smaller ones are copied.
    pub(crate) fn with_buffers(cap: usize, chunk: usize) -> Self {
        let head_cap = cap / 2;
        Self {
            head: Vec::new(),
            head_cap,
            tail: Tail::new(cap - head_cap, chunk),
            total: 0,
        }
    }

    /// Takes the bytes that fill the head; returns the rest.
    fn fill_head<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        self.total += data.len() as u64;
        let room = self.head_cap - self.head.len();
        let take = room.min(data.len());
        self.head.extend_from_slice(&data[..take]);
        &data[take..]
    }

    /// Records `data` by copying it (tests: the reader hands its buffers to
    /// [`push_owned`](Self::push_owned)).
    #[cfg(test)]
    pub(crate) fn push(&mut self, data: &[u8]) {
        let rest = self.fill_head(data);
        self.tail.copy(rest);
    }

    /// Records the read `buf[..n]` and may keep `buf` itself: then `buf` is swapped for a buffer
    /// of the same length that the tail let go of (its bytes are stale), so the reader's next
    /// read costs no copy and no allocation here.
    pub(crate) fn push_owned(&mut self, buf: &mut Vec<u8>, n: usize) {
        let rest = self.fill_head(&buf[..n]);
        if rest.len() < n || !self.tail.holds(n, buf.len()) {
            self.tail.copy(rest); // the head took some (once), or the read is small
            return;
        }
        self.tail.hold(buf, n);
    }

    pub(crate) fn captured(&self) -> CapturedStream {
        let tail = self.tail.last_bytes();
        CapturedStream {
            omitted: self.total - self.head.len() as u64 - tail.len() as u64,
            head: self.head.clone(),
            tail,
            total: self.total,
        }
    }
}

/// The last bytes of a stream, at least `cap` of them once the stream carried so many: a queue of
/// buffers, oldest first, each holding its first `len` bytes. A large read is kept as the buffer
/// it was read into (no copy); small reads are copied into the newest buffer's room. A buffer
/// leaves the front once the ones behind it hold the `cap` bytes; it becomes the spare that the
/// next kept read's buffer is swapped for.
///
/// Memory: the bytes held are under `cap` + one buffer; a buffer kept whole is at least half
/// full, and a buffer started by a copy follows one more than half full, so the buffers' sizes
/// stay under four times the bytes held plus one buffer (one buffer more than the bytes in the
/// usual case of full reads).
#[derive(Debug, Clone)]
struct Tail {
    cap: usize,
    /// The reader's buffer size: a kept read is at least half of it; a copy starts a buffer of it.
    chunk: usize,
    parts: VecDeque<Part>,
    /// Bytes held in `parts`.
    held: usize,
    spare: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
struct Part {
    buf: Vec<u8>,
    len: usize,
}

impl Tail {
    fn new(cap: usize, chunk: usize) -> Self {
        Self {
            cap,
            chunk: chunk.max(1),
            parts: VecDeque::new(),
            held: 0,
            spare: None,
        }
    }

    /// Whether a read of `n` bytes into a buffer of `size` is kept whole rather than copied.
    fn holds(&self, n: usize, size: usize) -> bool {
        n > 0 && n < self.cap && 2 * n >= self.chunk && size <= 2 * self.chunk
    }

    /// Keeps `buf[..n]` as it is, and hands `buf` a buffer of the same length in exchange.
    fn hold(&mut self, buf: &mut Vec<u8>, n: usize) {
        let swap = match self.spare.take() {
            Some(spare) if spare.len() == buf.len() => spare,
            _ => vec![0; buf.len()],
        };
        let kept = std::mem::replace(buf, swap);
        self.parts.push_back(Part { buf: kept, len: n });
        self.held += n;
        self.trim();
    }

    /// Copies `data` in.
    fn copy(&mut self, data: &[u8]) {
        if data.is_empty() || self.cap == 0 {
            return;
        }
        let data = if data.len() >= self.cap {
            // Only its last `cap` bytes stay: everything before goes.
            while let Some(part) = self.parts.pop_front() {
                self.keep_spare(part.buf);
            }
            self.held = 0;
            &data[data.len() - self.cap..]
        } else {
            data
        };
        let fits = self
            .parts
            .back()
            .is_some_and(|back| back.buf.len() - back.len >= data.len());
        if !fits {
            let size = self.chunk.max(data.len());
            let buf = match self.spare.take() {
                Some(spare) if spare.len() >= size => spare,
                _ => vec![0; size],
            };
            self.parts.push_back(Part { buf, len: 0 });
        }
        if let Some(back) = self.parts.back_mut() {
            back.buf[back.len..back.len + data.len()].copy_from_slice(data);
            back.len += data.len();
        }
        self.held += data.len();
        self.trim();
    }

    /// Lets go of the oldest buffers the newer ones do without.
    fn trim(&mut self) {
        while let Some(front) = self.parts.front()
            && self.held - front.len >= self.cap
        {
            self.held -= front.len;
            if let Some(part) = self.parts.pop_front() {
                self.keep_spare(part.buf);
            }
        }
    }

    fn keep_spare(&mut self, buf: Vec<u8>) {
        if self
            .spare
            .as_ref()
            .is_none_or(|spare| spare.len() < buf.len())
        {
            self.spare = Some(buf);
        }
    }

    /// The last `cap` bytes (all of them when fewer).
    fn last_bytes(&self) -> Vec<u8> {
        let keep = self.cap.min(self.held);
        let mut skip = self.held - keep;
        let mut out = Vec::with_capacity(keep);
        for part in &self.parts {
            let bytes = &part.buf[..part.len];
            let from = skip.min(bytes.len());
            skip -= from;
            out.extend_from_slice(&bytes[from..]);
        }
        out
    }
}

/// What was kept of one stream: its first bytes, its last bytes, and how many were dropped in
/// between.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CapturedStream {
    /// The first bytes of the stream (up to half the cap).
    pub head: Vec<u8>,
    /// The last bytes of the stream (up to the other half), after the omitted middle.
    pub tail: Vec<u8>,
    /// Exactly how many bytes were dropped between head and tail.
    pub omitted: u64,
    /// All bytes the stream carried.
    pub total: u64,
}

impl CapturedStream {
    /// Whether bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.omitted > 0
    }

    /// Head, a marker stating how many bytes were omitted (only when some were), and tail.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + self.tail.len() + 64);
        out.extend_from_slice(&self.head);
        if self.omitted > 0 {
            out.extend_from_slice(omission_marker(self.omitted).as_bytes());
        }
        out.extend_from_slice(&self.tail);
        out
    }

    /// [`render`](Self::render) as text, invalid UTF-8 replaced.
    pub fn render_lossy(&self) -> String {
        String::from_utf8_lossy(&self.render()).into_owned()
    }
}

/// The marker between head and tail.
pub(crate) fn omission_marker(omitted: u64) -> String {
    format!("\n[quietus: {omitted} bytes omitted]\n")
}

/// The output of a session at one moment, and whether it is still running.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapturedOutput {
    /// The child's stdout (`None` in combined mode).
    pub stdout: Option<CapturedStream>,
    /// The child's stderr (`None` in combined mode).
    pub stderr: Option<CapturedStream>,
    /// Both streams in the order the child wrote them (combined mode only).
    pub combined: Option<CapturedStream>,
    /// Everything the child wrote to its terminal (terminal sessions only:
    /// [`SessionBuilder::pty`](crate::SessionBuilder::pty)).
    pub terminal: Option<CapturedStream>,
    /// The result once the run is over; `None` while it runs.
    pub result: Option<MonitorResult>,
}

impl CapturedOutput {
    /// Whether the child is still being supervised.
    pub fn running(&self) -> bool {
        self.result.is_none()
    }

    /// Whether any stream dropped bytes.
    pub fn truncated(&self) -> bool {
        self.streams().any(|(_, s)| s.truncated())
    }

    /// Bytes the child wrote in all.
    pub fn total_bytes(&self) -> u64 {
        self.streams().map(|(_, s)| s.total).sum()
    }

    /// The captured streams with their names.
    pub fn streams(&self) -> impl Iterator<Item = (Stream, &CapturedStream)> {
        [
            (Stream::Stdout, self.stdout.as_ref()),
            (Stream::Stderr, self.stderr.as_ref()),
            (Stream::Combined, self.combined.as_ref()),
            (Stream::Terminal, self.terminal.as_ref()),
        ]
        .into_iter()
        .filter_map(|(stream, c)| c.map(|c| (stream, c)))
    }
}

impl fmt::Debug for CapturedOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("CapturedOutput");
        for (stream, c) in self.streams() {
            d.field(
                stream.name(),
                &format_args!("{} bytes, {} omitted", c.total, c.omitted),
            );
        }
        d.field("running", &self.running()).finish()
    }
}

/// Everything kept in memory of one stream: the head/tail capture and the `Output` event
/// throttle. One per stream, behind a mutex the reader thread takes once per chunk. (The log
/// spill runs on a thread of its own: see [`spill::start`].)
pub(crate) struct Recorder {
    pub(crate) capture: HeadTail,
    stream: Stream,
    throttle: std::time::Duration,
    chunk_cap: usize,
    utf8: bool,
    pending: Vec<u8>,
    /// Bytes were left out of the pending event (cap, or the previous event dropped).
    pending_truncated: bool,
    seq: u64,
    last_emit: Option<std::time::Instant>,
}

impl Recorder {
    pub(crate) fn new(
        stream: Stream,
        capture: HeadTail,
        events: &crate::config::EventConfig,
    ) -> Self {
        Self {
            capture,
            stream,
            throttle: events.throttle,
            chunk_cap: events.chunk_cap,
            utf8: events.utf8_boundaries,
            pending: Vec::new(),
            pending_truncated: false,
            seq: 0,
            last_emit: None,
        }
    }

    /// Records the chunk `buf[..n]` read at `now`; the capture may keep `buf` and hand back
    /// another buffer of its length ([`HeadTail::push_owned`]). Returns when the pending
    /// `Output` event is due if it could not be sent yet (throttled).
    pub(crate) fn record(
        &mut self,
        buf: &mut Vec<u8>,
        n: usize,
        now: std::time::Instant,
        emitter: &crate::events::Emitter,
    ) -> Option<std::time::Instant> {
        let data = &buf[..n];
        let room = self.chunk_cap.saturating_sub(self.pending.len());
        if data.len() > room {
            self.pending_truncated = true;
        }
        self.pending
            .extend_from_slice(&data[..room.min(data.len())]);
        self.capture.push_owned(buf, n);
        match self.due() {
            Some(due) if due > now => Some(due),
            _ => {
                self.flush(now, emitter);
                None
            }
        }
    }

    /// Whether bytes (or a truncation flag) wait for an `Output` event.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.pending_truncated
    }

    /// When the pending event may be sent; `None` when it may be sent at once (or nothing is
    /// pending: see [`has_pending`](Self::has_pending)).
    pub(crate) fn due(&self) -> Option<std::time::Instant> {
        if !self.has_pending() {
            return None;
        }
        self.last_emit.map(|t| t + self.throttle)
    }

    /// Sends the pending `Output` event.
    pub(crate) fn flush(&mut self, now: std::time::Instant, emitter: &crate::events::Emitter) {
        if self.pending.is_empty() && !self.pending_truncated {
            return;
        }
        let cut = if self.utf8 && !self.pending_truncated {
            match crate::events::utf8_cut(&self.pending) {
                0 => self.pending.len(), // a lone partial character: send it rather than stall
                n => n,
            }
        } else if self.utf8 {
            crate::events::utf8_cut(&self.pending)
        } else {
            self.pending.len()
        };
        let rest = self.pending.split_off(cut);
        let bytes = std::mem::replace(
            &mut self.pending,
            if self.pending_truncated {
                Vec::new()
            } else {
                rest
            },
        );
        let event = crate::events::Event::Output {
            stream: self.stream,
            seq: self.seq,
            bytes,
            truncated: self.pending_truncated,
        };
        self.seq += 1;
        self.last_emit = Some(now);
        // A dropped event flags the next one.
        self.pending_truncated = !emitter.best_effort(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;

    /// What a capture of `stream` under `cap` holds by the model: its first `cap / 2` bytes,
    /// its last `cap - cap / 2` after them, and the exact count left out between.
    fn holds_the_model(c: &CapturedStream, stream: &[u8], cap: usize) -> Result<(), TestCaseError> {
        let head_cap = cap / 2;
        let keep_head = head_cap.min(stream.len());
        let keep_tail = (cap - head_cap).min(stream.len() - keep_head);
        prop_assert_eq!(&c.head[..], &stream[..keep_head]);
        prop_assert_eq!(&c.tail[..], &stream[stream.len() - keep_tail..]);
        prop_assert_eq!(c.omitted, (stream.len() - keep_head - keep_tail) as u64);
        prop_assert_eq!(c.total, stream.len() as u64);
        Ok(())
    }

    proptest! {
        /// Against a model: the rendered capture is an exact prefix of the real stream, the
        /// marker, and an exact suffix; the omitted count is exact.
        #[test]
        fn head_tail_matches_the_model(
            cap in prop_oneof![Just(0usize), Just(1), Just(2), 0usize..600],
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
        ) {
            let mut buf = HeadTail::new(cap);
            let mut stream = Vec::new();
            for chunk in &chunks {
                buf.push(chunk);
                stream.extend_from_slice(chunk);
            }
            let c = buf.captured();
            holds_the_model(&c, &stream, cap)?;
            let rendered = c.render();
            if c.omitted == 0 {
                prop_assert_eq!(rendered, stream);
            } else {
                // The model's head, the marker, the model's tail (the head and tail checked
                // against the stream above).
                let mut expected = c.head.to_vec();
                expected.extend_from_slice(omission_marker(c.omitted).as_bytes());
                expected.extend_from_slice(&c.tail);
                prop_assert_eq!(rendered, expected);
            }
        }
    }

    /// The bytes of a stream cut into reads of the given sizes (a size past the end reads what
    /// is left).
    fn reads<'a>(stream: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
        let mut rest = stream;
        let mut out = Vec::new();
        for &size in sizes {
            let (read, after) = rest.split_at(size.min(rest.len()));
            out.push(read);
            rest = after;
        }
        out.push(rest);
        out
    }

    proptest! {
        /// The tail is the last bytes of everything read, whatever the read sizes: reads far
        /// smaller and far larger than the tail, empty ones, one the tail's size exactly, with
        /// the head full or not.
        #[test]
        fn the_tail_is_the_last_bytes_whatever_the_reads(
            cap in prop_oneof![Just(0usize), Just(1), Just(7), 2usize..200],
            len in 0usize..2_000,
            sizes in prop::collection::vec(
                prop_oneof![Just(0usize), 1usize..8, 8usize..120, 120usize..700],
                0..40,
            ),
            seed in any::<u8>(),
        ) {
            let stream: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let mut buf = HeadTail::new(cap);
            for read in reads(&stream, &sizes) {
                buf.push(read);
            }
            holds_the_model(&buf.captured(), &stream, cap)?;
        }
    }

    proptest! {
        /// The same with the reader's buffers kept whole: reads into a buffer of `chunk` bytes,
        /// handed over as the reader hands them (some copied, some kept, mixed with plain
        /// pushes); the buffer handed back is always of the same length.
        #[test]
        fn the_tail_is_the_last_bytes_when_buffers_are_kept(
            cap in prop_oneof![Just(0usize), Just(1), 2usize..400],
            chunk in 1usize..100,
            len in 0usize..3_000,
            sizes in prop::collection::vec((0usize..100, any::<bool>()), 0..80),
            seed in any::<u8>(),
        ) {
            let stream: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let mut buf = HeadTail::with_buffers(cap, chunk);
            let mut read_buf = vec![0u8; chunk];
            let mut rest = &stream[..];
            let mut sizes = sizes.into_iter().chain(std::iter::repeat((chunk, true)));
            while !rest.is_empty() {
                let (size, owned) = sizes.next().unwrap_or((chunk, true));
                let n = size.min(chunk).min(rest.len());
                if owned {
                    read_buf[..n].copy_from_slice(&rest[..n]);
                    buf.push_owned(&mut read_buf, n);
                    prop_assert_eq!(read_buf.len(), chunk);
                } else {
                    buf.push(&rest[..n]);
                }
                rest = &rest[n..];
                // What is held stays bounded: the bytes under the tail's cap and one buffer,
                // the buffers under four times that and one more.
                let tail = &buf.tail;
                prop_assert!(tail.held <= tail.cap + chunk);
                let sizes: usize = tail.parts.iter().map(|p| p.buf.len()).sum();
                prop_assert!(sizes <= 4 * tail.held + chunk, "{} over {}", sizes, tail.held);
            }
            holds_the_model(&buf.captured(), &stream, cap)?;
        }
    }

    #[test]
    fn zero_and_one_byte_caps() {
        let mut zero = HeadTail::new(0);
        zero.push(b"hello");
        let c = zero.captured();
        assert_eq!(
            (c.head.len(), c.tail.len(), c.omitted, c.total),
            (0, 0, 5, 5)
        );
        assert_eq!(c.render_lossy(), "\n[quietus: 5 bytes omitted]\n");
        let mut one = HeadTail::new(1);
        one.push(b"hello");
        let c = one.captured();
        assert_eq!(c.tail, b"o");
        assert_eq!(c.omitted, 4);
    }
}
