//! A terminal session judged by what its screen shows, on the terminal's reader thread: a model
//! of the screen (the `vt100` crate) fed every chunk read from the master, and a fingerprint of
//! its text. Output counts as progress only when the screen shows a line it did not show
//! before (or more of one), spinner glyphs and digits aside: a TUI redrawing its spinner and
//! elapsed-time counter over a stalled model stream (`✻ Gesticulating… (49s)`, `⠸ Thinking...
//! (esc to cancel, 49s)`) writes bytes several times a second and shows nothing new, and a
//! frame erased in one write and drawn again in the next only lost text between the two.
//! Colours, attributes, the cursor and the window title are not text.

use std::hash::{DefaultHasher, Hasher};
use std::num::NonZeroU16;
use std::time::{Duration, Instant};

/// After a change is found, chunks read within this time are parsed but not fingerprinted: a
/// program drawing fast (a build log, `cat` of a large file) costs one fingerprint per 100 ms,
/// not one per read. The next chunk after it compares against the last fingerprint taken, so
/// a change is never lost; the board's last stamp is at most this much older than the change
/// when nothing is read after it.
pub(crate) const SETTLE: Duration = Duration::from_millis(100);

/// The screen of one terminal session.
pub(crate) struct Screen {
    parser: vt100::Parser,
    /// The fingerprint of the text last found new: its lines' hashes, sorted.
    shown: Vec<u64>,
    /// The fingerprint taken now (kept for its allocation).
    now_shown: Vec<u64>,
    /// When a change was last found (fingerprints are skipped for [`SETTLE`] after it).
    changed_at: Option<Instant>,
    /// Since when the reads have had more bytes waiting (a frame read part-way: Gemini CLI's
    /// 1,576-byte frames, three to a burst, read 4,096 bytes at a time, showed a half-erased
    /// screen, new text at every burst).
    unjudged_since: Option<Instant>,
    /// The normalized text, kept for its allocation.
    scratch: Vec<u8>,
    /// Bytes were parsed since the fingerprint was last taken (within [`SETTLE`]).
    unseen: bool,
    /// The last byte parsed ended no character midway (an ASCII byte): NUL bytes now change
    /// nothing ([`Screen::parse`]).
    whole_chars: bool,
}

impl Screen {
    /// A blank screen of `rows` x `cols` (each at least 1).
    pub(crate) fn new(rows: u16, cols: u16) -> Self {
        let parser = vt100::Parser::new(nonzero(rows), nonzero(cols), 0);
        let mut scratch = Vec::new();
        let mut shown = Vec::new();
        fingerprint(parser.screen(), &mut scratch, &mut shown);
        Self {
            parser,
            shown,
            now_shown: Vec::new(),
            changed_at: None,
            unjudged_since: None,
            scratch,
            unseen: false,
            whole_chars: true,
        }
    }

    /// The terminal was resized: the model follows (a resize redraws, which is no progress by
    /// itself: the fingerprint is taken afresh).
    pub(crate) fn resize(&mut self, rows: u16, cols: u16) {
        let size = (nonzero(rows), nonzero(cols));
        if self.parser.screen().size() != size {
            self.parser.screen_mut().set_size(size.0, size.1);
            fingerprint(self.parser.screen(), &mut self.scratch, &mut self.shown);
            self.unseen = false;
        }
    }

    /// Feeds one chunk read at `now`; returns whether the screen's text changed (spinner glyphs
    /// and digits aside), or `true` within [`SETTLE`] of the last change. With `more` (bytes
    /// were already waiting after this read) the screen may be half drawn: the chunk is parsed
    /// and not judged (`None`), unless the reads have had bytes waiting for [`SETTLE`] (a
    /// writer that never pauses is judged as often as one that does).
    pub(crate) fn feed(&mut self, chunk: &[u8], now: Instant, more: bool) -> Option<bool> {
        self.unseen |= self.parse(chunk);
        if more {
            let since = *self.unjudged_since.get_or_insert(now);
            if now.saturating_duration_since(since) < SETTLE {
                return None;
            }
        }
        self.unjudged_since = None;
        if self
            .changed_at
            .is_some_and(|at| now.saturating_duration_since(at) < SETTLE)
        {
            return Some(true);
        }
        if !self.unseen {
            // Nothing parsed since the last fingerprint: the same text.
            return Some(false);
        }
        self.unseen = false;
        fingerprint(self.parser.screen(), &mut self.scratch, &mut self.now_shown);
        if !shows_more(&self.now_shown, &self.shown) {
            return Some(false);
        }
        std::mem::swap(&mut self.shown, &mut self.now_shown);
        self.changed_at = Some(now);
        Some(true)
    }

    /// Parses `chunk` but its runs of NUL bytes, which change nothing in any state of the parser
    /// (executed as an unknown control, ignored in a string) once no character is left
    /// incomplete (a NUL after half a character is parsed: it ends it as `\u{fffd}`). A
    /// program writing zeros to its terminal costs no parse (64 MiB: 4 KiB reads, each parsed
    /// byte by byte before). Returns whether any byte was parsed.
    fn parse(&mut self, chunk: &[u8]) -> bool {
        let mut parsed = false;
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.whole_chars {
                rest = &rest[leading_nuls(rest)..];
            }
            if rest.is_empty() {
                break;
            }
            // Up to the next NUL (the first byte is parsed whatever it is).
            let end = memchr::memchr(0, &rest[1..]).map_or(rest.len(), |at| at + 1);
            self.parser.process(&rest[..end]);
            parsed = true;
            self.whole_chars = rest[end - 1].is_ascii();
            rest = &rest[end..];
        }
        parsed
    }

    /// The screen's text as the model holds it (tests).
    #[cfg(test)]
    pub(crate) fn text(&self) -> String {
        self.parser.screen().contents()
    }
}

/// How many NUL bytes `bytes` starts with (a word at a time: a program writing zeros writes
/// pages of them).
fn leading_nuls(bytes: &[u8]) -> usize {
    const WORD: usize = 32;
    let words = bytes
        .chunks_exact(WORD)
        .take_while(|word| word.iter().fold(0, |any, b| any | b) == 0)
        .count();
    let at = words * WORD;
    at + bytes[at..].iter().take_while(|b| **b == 0).count()
}

/// A terminal dimension, at least 1.
fn nonzero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

/// Whether the lines `now` (sorted hashes) hold one more often than `before` does: new text.
/// Lines gone are not (an erasure, a redraw caught half-way).
fn shows_more(now: &[u64], before: &[u64]) -> bool {
    let mut old = before.iter().peekable();
    for line in now {
        while old.next_if(|b| *b < line).is_some() {}
        if old.next_if(|b| *b == line).is_none() {
            return true;
        }
    }
    false
}

/// The fingerprint of the screen's text into `lines`: the hash of each line that is not blank,
/// sorted (where it stands is no news: a frame redrawn a line lower, text scrolled); every run
/// of digits as one `#`, every run of blanks as one, spinner glyphs left out, colours and
/// attributes ignored. The text is taken whole (the crate's per-cell lookup walks the rows
/// from the top for each cell: 1.25 ms for 120 x 40 cells) and normalized into `scratch`.
fn fingerprint(screen: &vt100::Screen, scratch: &mut Vec<u8>, lines: &mut Vec<u64>) {
    lines.clear();
    for line in screen.contents().split('\n') {
        normalize(line, scratch);
        if scratch.iter().all(|b| *b == b' ') {
            continue;
        }
        let mut hasher = DefaultHasher::new();
        hasher.write(scratch);
        lines.push(hasher.finish());
    }
    lines.sort_unstable();
}

/// One line's text, normalized into `scratch`.
fn normalize(line: &str, scratch: &mut Vec<u8>) {
    scratch.clear();
    let mut in_digits = false;
    let mut in_blank = false;
    for ch in line.chars() {
        // A run of blanks as one: right-aligned columns move when a number's width changes.
        let blank = ch == ' ';
        if blank && in_blank {
            continue;
        }
        in_blank = blank;
        let digit = ch.is_ascii_digit();
        if digit && in_digits {
            continue;
        }
        in_digits = digit;
        if digit {
            scratch.push(b'#');
        } else if ch.is_ascii() {
            if !is_spinner_glyph(ch) {
                scratch.push(ch as u8);
            }
        } else if !is_spinner_glyph(ch) {
            let mut utf8 = [0u8; 4];
            scratch.extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
        }
    }
    while scratch.last() == Some(&b' ') {
        scratch.pop();
    }
}

/// Whether `ch` is one of the glyphs spinners cycle through: braille patterns (`⠋⠙⠹⠸`), the
/// dingbat stars and florettes (`✢✳✶✻✽`), `·` `•` `◦` `*`, `|/-\`, quarter circles and blocks
/// (`◐◓◑◒`, `▖▘▝▗`), arrows and moons. A change from one to another is no new text.
pub(crate) fn is_spinner_glyph(ch: char) -> bool {
    matches!(
        ch,
        '\u{2800}'..='\u{28FF}' // braille patterns
            | '\u{2722}'..='\u{274B}' // dingbat stars, florettes, asterisks
            | '\u{2190}'..='\u{2199}' // arrows (←↑→↓↖↗↘↙)
            | '\u{25D0}'..='\u{25D3}' // circles with a quarter
            | '\u{25E2}'..='\u{25E5}' // triangles
            | '\u{25F0}'..='\u{25F7}' // squares and circles with a quadrant
            | '\u{2596}'..='\u{259F}' // quadrant blocks
            | '\u{1F311}'..='\u{1F318}' // moon phases
            | '\u{1F550}'..='\u{1F567}' // clock faces
            | '·' | '•' | '∙' | '◦' | '*' | '|' | '/' | '-' | '\\'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real Claude Code 2.1 in a terminal (tmux, 120 x 40, a prompt typed, the local mock model
    /// server holding the stream after its headers), as `script` recorded it: its start, the
    /// prompt, then 110 s of its spinner and elapsed-time counter (`✻ Levitating… (1m 50s)`)
    /// and window-title frames, 0.35 KB/s.
    const CLAUDE_STALLED: &[u8] = include_bytes!("screen/claude_stalled.tty");

    #[test]
    fn a_stalled_tui_redrawing_its_spinner_shows_nothing_new() {
        let t0 = Instant::now();
        let mut screen = Screen::new(40, 120);
        // Up to the spinner's first frame: new text (the banner, the prompt, the answer's
        // status line).
        let spinner_starts = CLAUDE_STALLED
            .windows(3)
            .position(|w| w == "…".as_bytes())
            .expect("the status line");
        let (start, frames) = CLAUDE_STALLED.split_at(spinner_starts + 200);
        assert_eq!(screen.feed(start, t0, false), Some(true));
        assert!(screen.text().contains("say hi"), "{}", screen.text());
        // Then every frame as the terminal delivered it (one write each, ~30 bytes), one per
        // 150 ms: nothing new past the first seconds (the counter reaching a minute is one).
        let mut changed = Vec::new();
        for (i, frame) in frames
            .split_inclusive(|b| *b == 0x07 || *b == b'A')
            .enumerate()
        {
            let at = t0 + Duration::from_millis(150 * (i as u64 + 1));
            if screen.feed(frame, at, false) == Some(true) {
                changed.push((i, String::from_utf8_lossy(frame).into_owned()));
            }
        }
        assert!(frames.len() > 30_000, "{}", frames.len());
        // What changed: the rest of the first frame, a tip shown and erased, the counter's
        // first appearance (16 s), and the counter reaching a minute (`1m 0s`); nothing in the
        // 80 s after that.
        assert!(changed.len() <= 5, "{changed:#?}\n{}", screen.text());
        let (last, what) = changed.last().unwrap();
        assert!(what.contains("1m 0s"), "{changed:#?}");
        assert!(frames.split_inclusive(|b| *b == 0x07 || *b == b'A').count() > last + 500);
        assert!(screen.text().contains("Levitating"), "{}", screen.text());
    }

    /// Real Gemini CLI 0.61 in a terminal (tmux, 120 x 40, a prompt typed, the local mock model
    /// server holding the stream after its headers and one event), as quietus's terminal log
    /// recorded it: its start, the prompt, then 48 frames of `⠸ Thinking... (esc to cancel,
    /// 3s)`, each one write of 1,576 bytes that erases its 12 lines and draws them again
    /// (`\x1b[2K\x1b[1A` … `\x1b[4A\x1b[4G`), 14 a second.
    const GEMINI_STALLED: &[u8] = include_bytes!("screen/gemini_stalled.tty");

    /// The frames of [`GEMINI_STALLED`] as a terminal's reads deliver them: bursts of one to three
    /// frames (the reader was busy writing to the outer terminal meanwhile), each burst read
    /// 4,096 bytes at most at a time (a pty's buffer), every read but a burst's last with more
    /// bytes waiting. Real reads: 1,576, 3,152 and 4,096 bytes (issue 48, G2).
    fn gemini_reads() -> Vec<(&'static [u8], bool)> {
        let marker = b"\x1b[4A\x1b[4G";
        let mut frames = Vec::new();
        let mut start = 0;
        for (i, w) in GEMINI_STALLED.windows(marker.len()).enumerate() {
            if w == marker {
                frames.push(&GEMINI_STALLED[start..i + marker.len()]);
                start = i + marker.len();
            }
        }
        assert!(frames.len() > 40, "{}", frames.len());
        let mut reads = Vec::new();
        let mut frames = frames.into_iter();
        for burst_len in [1usize, 3, 2].into_iter().cycle() {
            let burst: Vec<&[u8]> = frames.by_ref().take(burst_len).collect();
            if burst.is_empty() {
                break;
            }
            let begin = burst[0].as_ptr() as usize - GEMINI_STALLED.as_ptr() as usize;
            let len: usize = burst.iter().map(|f| f.len()).sum();
            let mut burst = &GEMINI_STALLED[begin..begin + len];
            while !burst.is_empty() {
                let (read, rest) = burst.split_at(burst.len().min(4096));
                reads.push((read, !rest.is_empty()));
                burst = rest;
            }
        }
        reads
    }

    /// Gemini's frames read part-way (the pty held 4,096 bytes of a burst of three) showed a
    /// half-drawn screen, new text each time: 1–3 stamps a second kept a stalled Gemini alive
    /// (issue 48). A read with more bytes waiting is parsed and not judged.
    #[test]
    fn a_frame_read_part_way_is_judged_when_it_is_whole() {
        let t0 = Instant::now();
        let mut screen = Screen::new(40, 120);
        let reads = gemini_reads();
        assert!(reads.iter().any(|(read, more)| *more && read.len() == 4096));
        let mut changed = Vec::new();
        for (i, (read, more)) in reads.iter().enumerate() {
            let at = t0 + Duration::from_millis(150 * (i as u64 + 1));
            if screen.feed(read, at, *more) == Some(true) {
                changed.push(i);
            }
        }
        assert!(
            screen.text().contains("Thinking... (esc to cancel"),
            "{}",
            screen.text()
        );
        // The start, the prompt and the answer's first line are new text; the spinner, from
        // the fourth read on, never.
        assert!(!changed.is_empty());
        assert!(changed.iter().all(|i| *i < 4), "{changed:?}");
        let frames = reads.iter().filter(|(_, more)| !more).count();
        assert!(frames > 20, "{frames}");
    }

    /// A stream that never pauses (more bytes waiting at every read) is still judged, once
    /// [`SETTLE`] after its first unjudged read: a change is never lost to a busy writer.
    #[test]
    fn a_writer_that_never_pauses_is_judged_after_the_settle_time() {
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 40);
        assert_eq!(screen.feed(b"line 1\r\n", t0, true), None);
        let half = t0 + SETTLE / 2;
        assert_eq!(screen.feed(b"line 2\r\n", half, true), None);
        assert_eq!(screen.feed(b"line 3\r\n", t0 + SETTLE, true), Some(true));
        // Judged: the next unjudged run starts afresh.
        let later = t0 + SETTLE * 3;
        assert_eq!(screen.feed(b"line 3", later, true), None);
        assert_eq!(screen.feed(b"", later, false), Some(true));
    }

    /// Real Gemini CLI now and then writes a frame's erasure (`\x1b[4B`, then `\x1b[2K\x1b[1A`
    /// up its 12 lines: 148 bytes) and its redraw (1,428 bytes) apart; the terminal's reader read
    /// them apart, with nothing waiting between (issue 48: strace of quietus over a stalled
    /// stream). A screen that only lost text shows nothing new, and the redraw brings back what
    /// it showed.
    #[test]
    fn a_frame_erased_in_one_write_and_drawn_in_the_next_shows_nothing_new() {
        let t0 = Instant::now();
        let mut screen = Screen::new(40, 120);
        let reads = gemini_reads();
        let mut at = t0;
        for (read, more) in &reads {
            at += Duration::from_millis(150);
            screen.feed(read, at, *more);
        }
        let frame = reads
            .iter()
            .rev()
            .find(|(read, more)| !more && read.len() == 1576)
            .map(|(read, _)| *read)
            .expect("a frame read whole");
        let erased = frame
            .windows(7)
            .position(|w| w == b"\x1b[2K\x1b[G")
            .expect("the erasure's end")
            + 7;
        let (erase, draw) = frame.split_at(erased);
        for i in 0..5u32 {
            at += Duration::from_millis(150);
            assert_eq!(screen.feed(erase, at, false), Some(false), "{i}: erased");
            at += Duration::from_millis(150);
            assert_eq!(
                screen.feed(draw, at, false),
                Some(false),
                "{i}: drawn again"
            );
        }
        // New text still counts, once.
        at += Duration::from_millis(150);
        assert_eq!(screen.feed(b"\r\nThe river runs", at, false), Some(true));
        at += Duration::from_millis(150);
        assert_eq!(screen.feed(erase, at, false), Some(false));
    }

    #[test]
    fn new_text_counts_and_glyphs_digits_colours_and_title_do_not() {
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 40);
        let mut at = t0;
        let mut feed = |bytes: &str| {
            at += SETTLE;
            screen.feed(bytes.as_bytes(), at, false) == Some(true)
        };
        assert!(feed("\x1b[2J\x1b[H⠋ Thinking... (esc to cancel, 9s)"));
        assert!(!feed("\r⠙ Thinking... (esc to cancel, 10s)"));
        assert!(!feed("\r\x1b[31m⠹\x1b[0m Thinking... (esc to cancel, 11s)"));
        assert!(!feed("\x1b]0;⠸ gemini\x07"));
        assert!(!feed("\r\x1b[1m⠸ Thinking... (esc to cancel, 12s)\x1b[0m"));
        assert!(!feed("\r✻ Thinking... (esc to cancel, 12s)"));
        // A token of the answer appears: new text.
        assert!(feed("\r\nThe"));
        assert!(feed(" answer"));
        // Written again, identical: nothing new.
        assert!(!feed("\r\x1b[2KThe answer"));
        assert!(!feed("\x1b[1;1H⠼"));
        // Within the settle time of a change, a chunk counts without a look.
        let mut fast = Screen::new(5, 40);
        assert_eq!(fast.feed(b"x", t0, false), Some(true));
        assert_eq!(
            fast.feed(b"\x08x", t0 + Duration::from_millis(10), false),
            Some(true)
        );
        assert_eq!(fast.feed(b"\x08x", t0 + SETTLE, false), Some(false));
    }

    /// codex 0.171's TUI over a request never answered: `•` and `◦` (U+25E6) take turns before
    /// its counter (real codex, the local mock model server reading the request and answering
    /// nothing: never ended before `◦` was a glyph).
    #[test]
    fn codex_alternating_bullets_are_a_spinner() {
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 60);
        let mut at = t0;
        let mut feed = |bytes: &str| {
            at += SETTLE;
            screen.feed(bytes.as_bytes(), at, false) == Some(true)
        };
        assert!(feed("\x1b[2J\x1b[H• Working (29s • esc to interrupt)"));
        assert!(!feed("\r◦ Working (30s • esc to interrupt)"));
        assert!(!feed("\r• Working (31s • esc to interrupt)"));
        assert!(!feed("\r◦ Working (32s • esc to interrupt)"));
    }

    /// NUL bytes show nothing: the screen is the one the whole bytes give, wherever the reads
    /// split them (in a character, an escape sequence, a title), and a read of NULs alone is
    /// no change (`head -c N /dev/zero` on a terminal: the versus bench's terminal row).
    #[test]
    fn nul_bytes_change_nothing_on_the_screen() {
        let streams: [&[u8]; 5] = [
            b"ab\xe2\x00\x00cd\x00\x00",
            "\x1b[31\x00\x00m✻ red\x00 text\x1b[0m".as_bytes(),
            b"\x1b]0;ti\x00tle\x07x\x00y\r\nz\xe2\x9c\x00\xbb\x00\x00w",
            b"\x1bP1$\x00q\x1b\\\x00after\x00\x1b\x00[2J\x00end",
            b"\xf0\x9f\x8c\x91\x00\xf0\x9f\x00\x8c\x91 \x00\x00moon",
        ];
        for bytes in streams {
            let mut whole = vt100::Parser::new(nonzero(5), nonzero(40), 0);
            whole.process(bytes);
            for split in 0..=bytes.len() {
                let mut screen = Screen::new(5, 40);
                let t0 = Instant::now();
                screen.feed(&bytes[..split], t0, false);
                screen.feed(&bytes[split..], t0, false);
                assert_eq!(
                    screen.text(),
                    whole.screen().contents(),
                    "{bytes:?} at {split}"
                );
            }
        }
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 40);
        assert_eq!(screen.feed(b"hello", t0, false), Some(true));
        assert_eq!(screen.feed(&[0; 4096], t0 + SETTLE, false), Some(false));
        // A change made within the settle time is told at the next read, NULs or not.
        assert_eq!(screen.feed(b" world", t0 + SETTLE * 3, false), Some(true));
        assert_eq!(
            screen.feed(b"!", t0 + SETTLE * 3 + SETTLE / 2, false),
            Some(true)
        );
        assert_eq!(screen.feed(&[0; 4096], t0 + SETTLE * 5, false), Some(true));
        assert_eq!(screen.feed(&[0; 4096], t0 + SETTLE * 6, false), Some(false));
        assert!(
            screen.text().starts_with("hello world!"),
            "{}",
            screen.text()
        );
    }

    #[test]
    fn a_resize_is_no_progress_by_itself() {
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 40);
        assert_eq!(screen.feed(b"hello", t0, false), Some(true));
        screen.resize(10, 80);
        assert_eq!(screen.feed(b"\x1b[H", t0 + SETTLE, false), Some(false));
        assert_eq!(
            screen.feed(b"\x1b[2;1Hworld", t0 + SETTLE * 2, false),
            Some(true)
        );
    }
}
