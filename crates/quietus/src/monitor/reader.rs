//! The output readers: one thread per stream (stdout and stderr, the one combined pipe, or the
//! terminal) that reads to the end, stamps the activity board, records the head and tail,
//! spills to the log, passes the bytes on, and tells the monitor of completion lines.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crate::activity::{ActivityBoard, ActivitySource};
use crate::capture::spill::{self, Spill, SpillReport, SpillWriter};
use crate::capture::{HeadTail, Recorder};
use crate::clock::Clock;
use crate::config::MonitorConfig;
use crate::contract::{Control, ControlTx};
use crate::error::SpawnError;
use crate::events::Emitter;
use crate::outcome::CompletionSeen;
use crate::own_files::OwnFiles;
use crate::process::{self, ChildProcess, sys};
use crate::sources::lines::{ChunkSeen, LineWatch};
use crate::sources::output::{ActivityTrackingReader, OutputSink, PumpState, pump};
use crate::sources::screen::Screen;
use crate::stream::Stream;

use super::tap::{PipeEnd, SharedPipe};
use crate::process::spare::Spare;

/// The names of the reader threads started (tests).
#[cfg(test)]
pub(super) static READER_THREADS: crate::sync::Mutex<Vec<String>> =
    crate::sync::Mutex::new(Vec::new());

/// The names of the reader threads started so far (tests).
#[cfg(test)]
pub(super) fn reader_threads() -> Vec<String> {
    READER_THREADS.lock().clone()
}

/// One stream's pipe while the launcher sets it up: where it is read from, where it goes,
/// and what records it.
pub(super) struct StreamPipe {
    pub(super) stream: Stream,
    pipe: Box<dyn io::Read + Send>,
    pub(super) fd: PipeEnd,
    sink: OutputSink,
    pub(super) recorder: Option<Arc<crate::sync::Mutex<Recorder>>>,
    spill_writer: Option<SpillWriter>,
    pub(super) spill: Option<SpillReport>,
    pub(super) peek: Option<PipeEnd>,
}

impl StreamPipe {
    pub(super) fn new(
        stream: Stream,
        pipe: Box<dyn io::Read + Send>,
        fd: PipeEnd,
        sink: OutputSink,
    ) -> Self {
        Self {
            stream,
            pipe,
            fd,
            sink,
            recorder: None,
            spill_writer: None,
            spill: None,
            peek: None,
        }
    }
}

/// The session's pipes, for the orphan attribution (an orphan holding one is the session's).
pub(super) fn register_pipes(id: u64, pipes: &[StreamPipe]) {
    process::orphans::set_pipes(
        id,
        pipes
            .iter()
            // A terminal's master is no pipe: its identity is that of the multiplexer device,
            // shared by every terminal on the machine.
            .filter(|pipe| pipe.stream != Stream::Terminal)
            .filter_map(|pipe| sys::pipe_id(pipe.fd.as_fd()))
            .collect(),
    );
}

/// The pipes to read: stdout and stderr, or the one combined pipe.
pub(super) fn open_pipes(
    child: &mut ChildProcess,
    combined: Option<std::io::PipeReader>,
    stdout_sink: OutputSink,
    stderr_sink: OutputSink,
) -> io::Result<Vec<StreamPipe>> {
    let mut pipes: Vec<StreamPipe> = Vec::new();
    if let Some(reader) = combined {
        let (read, fd) = shared_pipe(reader);
        pipes.push(StreamPipe::new(Stream::Combined, read, fd, stdout_sink));
        drop(stderr_sink); // everything goes to the stdout sink in combined mode
    } else {
        // Both pipes exist: the command was given Stdio::piped() just before the spawn.
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("stdout not piped"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| io::Error::other("stderr not piped"))?;
        let (read, fd) = shared_pipe(stdout);
        pipes.push(StreamPipe::new(Stream::Stdout, read, fd, stdout_sink));
        let (read, fd) = shared_pipe(stderr);
        pipes.push(StreamPipe::new(Stream::Stderr, read, fd, stderr_sink));
    }
    Ok(pipes)
}

/// A pipe's read end as its reader reads it and as the monitor keeps it: one descriptor.
fn shared_pipe(end: impl Into<OwnedFd>) -> (Box<dyn io::Read + Send>, PipeEnd) {
    let end: PipeEnd = Arc::new(std::fs::File::from(end.into()));
    (Box::new(SharedPipe(end.clone())), end)
}

/// Grows the pipe, gives the stream its recorder and (with a log folder) its spill thread.
pub(super) fn record_pipe(
    pipe: &mut StreamPipe,
    config: &MonitorConfig,
    log_dir: Option<&spill::LogDir>,
    own_files: Option<&OwnFiles>,
    id: u64,
) -> io::Result<()> {
    // Larger pipes: a chatty child fills 64 KiB (the Linux default) in microseconds, and
    // then every chunk costs a sleep and a wake-up on each side. Best effort (capped by
    // /proc/sys/fs/pipe-max-size for unprivileged users).
    let stream = pipe.stream;
    if stream != Stream::Terminal {
        sys::grow_pipe(pipe.fd.as_fd());
    }
    pipe.recorder = Some(Arc::new(crate::sync::Mutex::new(Recorder::new(
        stream,
        HeadTail::new(config.capture.cap_per_stream),
        &config.events,
    ))));
    if let Some(dir) = log_dir {
        let spill = Spill::new(
            Some(dir.clone()),
            config.capture.spill_threshold,
            id,
            stream,
        )
        .own_files(own_files.cloned());
        let short = match stream {
            Stream::Stderr => "err",
            Stream::Terminal => "tty",
            Stream::Stdout | Stream::Combined => "out",
        };
        let (writer, report) = spill::start(spill, format!("quietus-log{short}-{id}"))?;
        pipe.spill_writer = Some(writer);
        pipe.spill = Some(report);
    }
    Ok(())
}

/// One stream's reader, not given its work yet: its work, its thread (started before the
/// program, waiting), and its pipe to wait on. The monitor hands the work over once the pipe
/// has something to read; a stream that ends empty is read to its end on the monitor's
/// thread (its reader's thread then ends unused).
pub(super) struct Reader {
    pub(super) stream: Stream,
    pub(super) name: String,
    /// The pipe (the read end the work reads, shared with it).
    pub(super) fd: PipeEnd,
    /// Reads to the end: stamps the board, records, spills, passes on, then says it is done.
    pub(super) work: Box<dyn FnOnce() + Send>,
    /// The thread that runs the work, started before the program.
    pub(super) thread: Spare,
}

impl Reader {
    /// Runs the work on its thread.
    pub(super) fn start(self) -> io::Result<()> {
        let Reader {
            name,
            fd,
            work,
            thread,
            ..
        } = self;
        drop(fd);
        #[cfg(test)]
        READER_THREADS.lock().push(name.clone());
        thread.run(work).map(drop).map_err(|_| {
            let gone = io::Error::other(format!("{name} ended before it was given its pipe"));
            SpawnError::thread("output reader", gone).into()
        })
    }
}

/// The name of a stream's reader thread in session `id`.
pub(super) fn reader_name(stream: Stream, id: u64) -> String {
    let short = match stream {
        Stream::Stdout | Stream::Combined => "out",
        Stream::Stderr => "err",
        Stream::Terminal => "tty",
    };
    format!("quietus-{short}-{id}")
}

/// What every reader of a session shares.
pub(super) struct ReaderWiring<'a> {
    pub(super) id: u64,
    pub(super) control: &'a ControlTx,
    pub(super) board: &'a Arc<ActivityBoard>,
    pub(super) emitter: &'a Arc<Emitter>,
    pub(super) clock: &'a Clock,
    pub(super) lines: Option<&'a LineSetup>,
}

/// One stream's reader: reads `pipe` (its pump's `state`), stamps the board, records, spills,
/// passes on.
pub(super) fn reader(
    wiring: &ReaderWiring<'_>,
    pipe: StreamPipe,
    state: Arc<PumpState>,
    thread: Spare,
) -> io::Result<Reader> {
    let ReaderWiring {
        id,
        control,
        board,
        emitter,
        clock,
        lines,
    } = *wiring;
    let lines = lines.cloned();
    let StreamPipe {
        stream,
        pipe,
        fd,
        sink,
        recorder,
        spill_writer: spill,
        ..
    } = pipe;
    let control = control.clone();
    let board = board.clone();
    let recorder = recorder.ok_or_else(|| io::Error::other("no recorder for a stream"))?;
    let emitter = emitter.clone();
    let clock = clock.clone();
    let mut sink = sink;
    let master = (stream == Stream::Terminal).then(|| fd.clone());
    let work = move || {
        // A terminal is judged by its screen: the screen stamps output or repeats.
        let mut screen = master.map(|master| ReaderScreen::new(master, &board));
        // Whether bytes were already waiting when the last read returned (a terminal only).
        let more = Rc::new(Cell::new(false));
        let pipe: Box<dyn io::Read> = match screen.as_ref() {
            Some(screen) => Box::new(WaitingAfterRead {
                inner: pipe,
                master: screen.master.clone(),
                more: more.clone(),
            }),
            None => pipe,
        };
        // A pipe's lines: the line watch stamps output, or repeats (a line redrawn in place
        // showing nothing new; any repeat when they are told apart).
        let mut watch = lines
            .filter(|setup| screen.is_none() || setup.completes())
            .map(|setup| ReaderLines::new(setup, stream, &board, screen.is_none()));
        let mut reader = ActivityTrackingReader::new(pipe, board);
        if screen.is_some() || watch.as_ref().is_some_and(|w| w.stamps) {
            reader = reader.unstamped(); // the screen or the line watch stamps
        }
        let mut notified: Option<Instant> = None;
        let pending_control = control.clone();
        let lines_control = control.clone();
        let watch_ref = &mut watch;
        let mut record = move |buf: &mut Vec<u8>, n: usize| {
            let chunk = &buf[..n];
            if let Some(screen) = screen.as_mut() {
                screen.feed(chunk, more.get());
            }
            if let Some(watch) = watch_ref.as_mut() {
                watch.feed(chunk, &lines_control);
            }
            if let Some(spill) = &spill {
                spill.push(chunk);
            }
            let due = recorder.lock().record(buf, n, clock.now(), &emitter);
            if let Some(due) = due
                && notified != Some(due)
            {
                notified = Some(due);
                let _ = pending_control.send(Control::OutputPending(due));
            }
        };
        pump(&mut reader, &mut sink, &state, stream, &mut record);
        drop(record);
        if let Some(watch) = watch.as_mut() {
            watch.finish(&control);
        }
        let _ = control.send(Control::ReaderDone(stream));
    };
    Ok(Reader {
        stream,
        name: reader_name(stream, id),
        fd,
        work: Box::new(work),
        thread,
    })
}

/// A terminal's reads, each followed by a look at what is already waiting (`FIONREAD`, before
/// the chunk goes to the sink, whose writes may take time while the program draws on).
struct WaitingAfterRead {
    inner: Box<dyn io::Read + Send>,
    master: PipeEnd,
    more: Rc<Cell<bool>>,
}

impl io::Read for WaitingAfterRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let more = n > 0 && unfinished(n, || sys::pending_bytes(self.master.as_fd()));
        self.more.set(more);
        Ok(n)
    }
}

/// The most a read of a terminal's master returns at once on Linux: its line discipline's
/// buffer (`N_TTY_BUF_SIZE`).
const LINE_BUFFER: usize = 4096;

/// Whether a read of `n` bytes from a terminal's master may have cut what the program wrote:
/// more bytes wait in the line discipline (`waiting`, `FIONREAD`), or the read emptied a full
/// one (the rest of the write waits in the terminal's own buffers, which `FIONREAD` does not
/// count, until this read makes room: real Gemini CLI's bursts of 1,576-byte frames were read
/// 4,096 bytes at a time with nothing counted waiting).
fn unfinished(n: usize, waiting: impl FnOnce() -> u64) -> bool {
    n == LINE_BUFFER || waiting() > 0
}

/// A terminal's reader judges it by its screen: output when the screen's text changed (spinner
/// glyphs and digits aside), a repeat otherwise ([`crate::sources::screen`]).
struct ReaderScreen {
    screen: Screen,
    /// The terminal's master, whose size the model follows.
    master: PipeEnd,
    board: Arc<ActivityBoard>,
}

impl ReaderScreen {
    fn new(master: PipeEnd, board: &Arc<ActivityBoard>) -> Self {
        let (rows, cols) = sys::terminal_size(master.as_fd()).unwrap_or((24, 80));
        Self {
            screen: Screen::new(rows, cols),
            master,
            board: board.clone(),
        }
    }

    /// Judges `chunk`; `more`: bytes were already waiting when it was read (a frame read
    /// part-way: a pty holds 4 KiB).
    fn feed(&mut self, chunk: &[u8], more: bool) {
        if let Ok((rows, cols)) = sys::terminal_size(self.master.as_fd()) {
            self.screen.resize(rows, cols);
        }
        let now = self.board.clock().now();
        match self.screen.feed(chunk, now, more) {
            None => {}
            Some(true) => self.board.stamp(&ActivitySource::Output),
            Some(false) => {
                self.board.note_redrawn();
                if self.board.is_enabled(&ActivitySource::RepeatedOutput) {
                    self.board.stamp(&ActivitySource::RepeatedOutput);
                }
            }
        }
    }
}

/// What every reader needs to look at lines: the compiled completion patterns, the line
/// callback, and whether repeats are told apart (lines redrawn in place always are).
#[derive(Clone)]
pub(super) struct LineSetup {
    patterns: Option<regex::bytes::RegexSet>,
    callback: Option<crate::completion::LineCallback>,
    repeats: bool,
}

impl LineSetup {
    /// `None` when no line needs looking at (output is not watched).
    pub(super) fn new(config: &MonitorConfig) -> io::Result<Option<Self>> {
        let repeats = config.watches(&ActivitySource::RepeatedOutput);
        if !config.watches(&ActivitySource::Output) && !config.completion.watches_lines() {
            return Ok(None);
        }
        let patterns = config
            .completion
            .patterns()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Some(Self {
            patterns,
            callback: config.completion.on_line.clone(),
            repeats,
        }))
    }

    /// Whether lines tell completion (patterns or a callback).
    fn completes(&self) -> bool {
        self.patterns.is_some() || self.callback.is_some()
    }
}

/// One reader's line watch: it stamps output or repeats (a pipe's), and tells the monitor of
/// completion.
struct ReaderLines {
    watch: LineWatch,
    /// Whether it stamps the board (a pipe's watch; a terminal's screen stamps instead).
    stamps: bool,
    stream: Stream,
    board: Arc<ActivityBoard>,
}

impl ReaderLines {
    fn new(setup: LineSetup, stream: Stream, board: &Arc<ActivityBoard>, stamps: bool) -> Self {
        Self {
            watch: LineWatch::new(setup.patterns, setup.callback, setup.repeats),
            stamps,
            stream,
            board: board.clone(),
        }
    }

    fn feed(&mut self, chunk: &[u8], control: &ControlTx) {
        let seen = self.watch.feed(chunk);
        if self.stamps && seen.fresh {
            self.board.stamp(&ActivitySource::Output);
        } else if self.stamps {
            self.board.note_redrawn();
            if self.board.is_enabled(&ActivitySource::RepeatedOutput) {
                self.board.stamp(&ActivitySource::RepeatedOutput);
            }
        }
        self.tell(seen, control);
    }

    fn finish(&mut self, control: &ControlTx) {
        let seen = self.watch.finish();
        self.tell(seen, control);
    }

    fn tell(&self, seen: ChunkSeen, control: &ControlTx) {
        if let Some((trigger, matched)) = seen.completed {
            let after = self
                .board
                .clock()
                .now()
                .saturating_duration_since(self.board.origin());
            let _ = control.send(Control::Completed(CompletionSeen::line(
                trigger,
                self.stream,
                matched,
                after,
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real Gemini CLI's reads over a stalled stream (issue 48): 1,576 bytes (one frame),
    /// 3,152 (two), and 4,096 with nothing counted waiting, the rest of its third frame still
    /// in the terminal's buffers: judging that read saw a half-drawn screen.
    #[test]
    fn a_read_that_filled_the_line_buffer_cut_a_write() {
        assert!(!unfinished(1576, || 0));
        assert!(!unfinished(3152, || 0));
        assert!(
            unfinished(4096, || 0),
            "the rest waits beyond FIONREAD's count"
        );
        assert!(unfinished(1576, || 632), "bytes counted waiting");
    }
}
