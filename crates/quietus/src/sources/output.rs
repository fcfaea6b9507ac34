//! The output source: [`ActivityTrackingReader`] and the reader threads that pump the child's
//! stdout and stderr into caller-chosen [`OutputSink`]s.

use std::fmt;
use std::io::{self, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::activity::{ActivityBoard, ActivitySource};
use crate::stream::Stream;

/// A reader that stamps an [`ActivityBoard`] on every read of more than 0 bytes.
///
/// Usable on its own around any `Read`: a partial line counts as much as a full one.
///
/// ```
/// use std::io::Read;
/// use std::sync::Arc;
/// use quietus::sources::{ActivityBoard, ActivityTrackingReader};
/// use quietus::{ActivitySource, MockClock};
///
/// let board = Arc::new(ActivityBoard::new(MockClock::new()));
/// let mut reader = ActivityTrackingReader::new(&b"no newline"[..], board.clone());
/// let mut text = String::new();
/// reader.read_to_string(&mut text).unwrap();
/// assert_eq!(text, "no newline");
/// assert_eq!(board.count(&ActivitySource::Output), 1); // the final 0-byte read does not count
/// assert_eq!(reader.bytes_read(), 10);
/// ```
#[derive(Debug)]
pub struct ActivityTrackingReader<R> {
    inner: R,
    board: Arc<ActivityBoard>,
    source: ActivitySource,
    /// Whether reads stamp the board (off when the line watch stamps instead: repeated
    /// output told apart).
    stamps: bool,
    bytes: u64,
}

impl<R: Read> ActivityTrackingReader<R> {
    /// Wraps `inner`; reads stamp [`ActivitySource::Output`] on `board`.
    pub fn new(inner: R, board: Arc<ActivityBoard>) -> Self {
        Self {
            inner,
            board,
            source: ActivitySource::Output,
            stamps: true,
            bytes: 0,
        }
    }

    /// Reads no longer stamp the board (whoever looks at the chunks stamps instead).
    pub(crate) fn unstamped(mut self) -> Self {
        self.stamps = false;
        self
    }

    /// How many bytes have been read through this reader.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// The wrapped reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for ActivityTrackingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 && self.stamps {
            self.board.stamp(&self.source);
        }
        if n > 0 {
            self.bytes += n as u64;
        }
        Ok(n)
    }
}

/// Where a reader thread delivers the bytes it reads from one of the child's streams.
///
/// Whatever the sink does, reading goes on: a sink that fails or panics is logged once and
/// replaced by [`OutputSink::Discard`], so the child never blocks on a full pipe and its output
/// still counts as activity. One exception: a writer that reports a broken pipe (its reader went
/// away, as in `quietus … | head`) closes the child's pipe, so the child sees the broken
/// pipe itself, as it would without quietus in between.
///
/// A sink that blocks (a writer whose reader does not read, a callback that does not return)
/// holds the child back: quietus reads none of its output meanwhile. While one delivery has
/// been in flight for 50 ms or more the child is not idle (only the hard timeout ends it), and
/// [`Session::output_held_back`](crate::Session::output_held_back) adds the time up.
///
/// Every byte read is delivered. When a pipe is still held open after the run ended (leftover
/// processes kept with [`MonitorConfig::keep_leftovers`](crate::MonitorConfig::keep_leftovers)), the reader stops
/// after its next read; that one last chunk may reach the sink after `wait` returned.
#[derive(Default)]
pub enum OutputSink {
    /// Read and drop (activity still counts).
    #[default]
    Discard,
    /// Write every chunk to this writer (and flush it), for example `std::io::stdout()`.
    Writer(Box<dyn Write + Send>),
    /// Call this with every chunk, in order.
    #[allow(clippy::type_complexity)] // a plain boxed closure; an alias would only hide it
    Callback(Box<dyn FnMut(&[u8]) + Send>),
}

impl fmt::Debug for OutputSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OutputSink::Discard => "Discard",
            OutputSink::Writer(_) => "Writer(..)",
            OutputSink::Callback(_) => "Callback(..)",
        })
    }
}

impl OutputSink {
    /// A sink writing to `writer`.
    pub fn writer(writer: impl Write + Send + 'static) -> Self {
        OutputSink::Writer(Box::new(writer))
    }

    /// A sink calling `f` with every chunk.
    pub fn callback(f: impl FnMut(&[u8]) + Send + 'static) -> Self {
        OutputSink::Callback(Box::new(f))
    }

    /// Delivers one chunk; says how many of its bytes the sink took (all of them, unless it
    /// failed part-way).
    fn deliver(&mut self, chunk: &[u8]) -> (Delivery, usize) {
        let mut taken = 0;
        let result = catch_unwind(AssertUnwindSafe(|| match self {
            OutputSink::Discard => Ok(()),
            OutputSink::Writer(w) => write_counted(w, chunk, &mut taken).and_then(|()| w.flush()),
            OutputSink::Callback(f) => {
                f(chunk);
                taken = chunk.len();
                Ok(())
            }
        }));
        let delivery = match result {
            Ok(Ok(())) => {
                taken = chunk.len();
                Delivery::Done
            }
            Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => Delivery::BrokenPipe,
            Ok(Err(e)) => Delivery::Failed(SinkError::Write((&e).into())),
            Err(_) => Delivery::Failed(SinkError::Panicked),
        };
        (delivery, taken)
    }
}

/// `write_all`, counting in `taken` the bytes the writer accepted.
fn write_counted(w: &mut dyn Write, mut chunk: &[u8], taken: &mut usize) -> io::Result<()> {
    while !chunk.is_empty() {
        match w.write(chunk) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *taken += n;
                chunk = &chunk[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What became of one chunk handed to a sink.
enum Delivery {
    Done,
    /// The sink's reader went away (`quietus … | head`).
    BrokenPipe,
    /// Any other failure, or a panic.
    Failed(SinkError),
}

/// Why an output sink stopped taking bytes
/// ([`Session::sink_error`](crate::Session::sink_error)); the rest of its stream is
/// discarded. A broken pipe (the sink's reader went away) is none: it is passed on to the
/// child.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkError {
    /// Writing to it failed.
    Write(crate::error::SystemError),
    /// It panicked (a [`Callback`](OutputSink::Callback), or a writer).
    Panicked,
    /// No thread could be started to read the stream: its pipe was closed, and the program's
    /// writes to it fail.
    NoReader(crate::error::SystemError),
}

impl std::fmt::Display for SinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SinkError::Write(e) => write!(f, "write failed: {e}"),
            SinkError::Panicked => f.write_str("it panicked"),
            SinkError::NoReader(e) => write!(f, "no thread could be started to read it: {e}"),
        }
    }
}

impl std::error::Error for SinkError {}

/// Shared between a reader thread and the monitor.
#[derive(Debug, Default)]
pub(crate) struct PumpState {
    /// Bytes read so far (and handed to the sink).
    pub(crate) bytes: AtomicU64,
    /// Bytes the sink accepted so far.
    pub(crate) delivered: AtomicU64,
    /// Why the sink stopped taking bytes (not for a broken pipe), once it did.
    pub(crate) sink_error: crate::sync::Mutex<Option<SinkError>>,
    /// Set by the monitor once the run is over: later bytes are no longer delivered.
    pub(crate) detached: AtomicBool,
}

/// Size of one read: 64 KiB, the size that stays in the CPU's caches between the read from
/// the child's pipe and the write to the sink (measured: a whole-process relay of 256 MiB took
/// 0.69× the time of 256 KiB reads, whose copies out of the 1 MiB pipe missed the cache).
pub(crate) const CHUNK: usize = 64 * 1024;

/// Reads `reader` to end-of-file, delivering every chunk to `sink`, then to `record` (capture,
/// spill, events) as the buffer and the count read into it: `record` may keep the buffer and
/// leave another of the same length in its place (the capture's tail keeps large reads whole
/// rather than copying them). Returns when the stream ends, fails, or (after the next read) the run is
/// detached.
pub(crate) fn pump<R: Read>(
    reader: &mut ActivityTrackingReader<R>,
    sink: &mut OutputSink,
    state: &PumpState,
    stream: Stream,
    record: &mut dyn FnMut(&mut Vec<u8>, usize),
) {
    let mut buf = vec![0u8; CHUNK];
    let mut sink_ok = true;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::warn!("reading the child's {}: {e}", stream.name());
                return;
            }
        };
        if sink_ok {
            // A sink that blocks (its reader does not read) holds the child back: not idle.
            let hold = (!matches!(sink, OutputSink::Discard)).then(|| reader.board.hold_output());
            let (delivery, taken) = sink.deliver(&buf[..n]);
            drop(hold);
            state.delivered.fetch_add(taken as u64, Ordering::Relaxed);
            match delivery {
                Delivery::Done => {}
                Delivery::BrokenPipe => {
                    // Pass the broken pipe on: stop reading, so the child's own writes fail
                    // (SIGPIPE / EPIPE) exactly as they would without quietus in between.
                    log::debug!(
                        "the {} sink's reader is gone; closing the pipe",
                        stream.name()
                    );
                    record(&mut buf, n);
                    state.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    return;
                }
                Delivery::Failed(why) => {
                    log::error!(
                        "the {} sink failed ({why}); the rest of that stream is discarded",
                        stream.name()
                    );
                    *state.sink_error.lock() = Some(why);
                    sink_ok = false;
                    *sink = OutputSink::Discard;
                }
            }
        }
        record(&mut buf, n);
        state.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if buf.len() < CHUNK {
            buf.resize(CHUNK, 0); // the recorder hands back a buffer of the same length
        }
        // Checked after delivery: a byte that was read is always delivered, even when the run
        // ended meanwhile (then at most this one chunk arrives after `wait` returned).
        if state.detached.load(Ordering::Acquire) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why a sink stopped is a type: the write's system error, kept with its kind, or a panic.
    #[test]
    fn a_failing_sink_says_why_in_a_type() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::StorageFull.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (delivery, taken) = OutputSink::writer(Full).deliver(b"chunk");
        assert_eq!(taken, 0);
        let Delivery::Failed(SinkError::Write(e)) = delivery else {
            panic!("a write error is SinkError::Write");
        };
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        let why = SinkError::Write(e);
        assert!(why.to_string().starts_with("write failed: "), "{why}");
        let (delivery, _) = OutputSink::callback(|_| panic!("the consumer broke")).deliver(b"x");
        assert!(matches!(delivery, Delivery::Failed(SinkError::Panicked)));
        assert_eq!(SinkError::Panicked.to_string(), "it panicked");
    }
    use crate::clock::MockClock;
    use crate::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn every_nonempty_read_stamps_with_the_clock() {
        let clock = MockClock::new();
        let board = Arc::new(ActivityBoard::new(&clock));
        let data = vec![7u8; 3 * CHUNK + 5];
        let mut reader = ActivityTrackingReader::new(&data[..], board.clone());
        clock.advance(Duration::from_secs(42));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut sink = OutputSink::callback(move |c| s2.lock().extend_from_slice(c));
        let state = PumpState::default();
        pump(
            &mut reader,
            &mut sink,
            &state,
            Stream::Stdout,
            &mut |_, _| {},
        );
        assert_eq!(*seen.lock(), data);
        assert_eq!(board.count(&ActivitySource::Output), 4);
        assert_eq!(
            board.last(&ActivitySource::Output),
            board.origin() + Duration::from_secs(42)
        );
        assert_eq!(state.bytes.load(Ordering::Relaxed), data.len() as u64);
    }

    #[test]
    fn a_sink_that_blocks_holds_the_output_back_on_the_board() {
        let clock = MockClock::new();
        let board = Arc::new(ActivityBoard::new(&clock));
        let t0 = board.origin();
        let (entered_tx, entered) = crossbeam_channel::bounded::<()>(0);
        let (release, release_rx) = crossbeam_channel::bounded::<()>(0);
        let mut sink = OutputSink::callback(move |_| {
            let _ = entered_tx.send(());
            let _ = release_rx.recv(); // the consumer does not read until told
        });
        let mut reader = ActivityTrackingReader::new(&b"one chunk"[..], board.clone());
        let pumped = std::thread::spawn(move || {
            let state = PumpState::default();
            pump(
                &mut reader,
                &mut sink,
                &state,
                Stream::Stdout,
                &mut |_, _| {},
            );
        });
        entered.recv().unwrap();
        board.backdate_hold(); // blocked (50 ms of real time), without waiting for it
        clock.advance(Duration::from_secs(60));
        assert_eq!(board.read().held_now, Some(t0 + Duration::from_secs(60)));
        assert_eq!(board.held_back(), Duration::from_secs(60));
        release.send(()).unwrap();
        pumped.join().unwrap();
        clock.advance(Duration::from_secs(7));
        assert_eq!(board.read().held_now, None);
        assert_eq!(board.held_back(), Duration::from_secs(60));
        // Discarding never holds.
        let board = Arc::new(ActivityBoard::new(&clock));
        let mut reader = ActivityTrackingReader::new(&b"x"[..], board.clone());
        let mut discard = OutputSink::Discard;
        pump(
            &mut reader,
            &mut discard,
            &PumpState::default(),
            Stream::Stdout,
            &mut |_, _| {},
        );
        assert_eq!(board.held_back(), Duration::ZERO);
    }

    #[test]
    fn a_panicking_sink_is_dropped_but_reading_goes_on() {
        let board = Arc::new(ActivityBoard::new(MockClock::new()));
        let data = vec![1u8; 2 * CHUNK];
        let mut reader = ActivityTrackingReader::new(&data[..], board.clone());
        let mut sink = OutputSink::callback(|_| panic!("sink bug"));
        let state = PumpState::default();
        pump(
            &mut reader,
            &mut sink,
            &state,
            Stream::Stderr,
            &mut |_, _| {},
        );
        assert!(matches!(sink, OutputSink::Discard));
        assert_eq!(state.bytes.load(Ordering::Relaxed), data.len() as u64);
        assert_eq!(board.count(&ActivitySource::Output), 2);
    }
}
