//! A terminal session judged by what its screen shows, on the terminal's reader thread: a model
//! of the screen (the `vt100` crate) fed every chunk read from the master, and a fingerprint of
//! its text. Output counts as progress only when that text changed, spinner glyphs and digits
//! aside: a TUI redrawing its spinner and elapsed-time counter over a stalled model stream
//! (`✻ Gesticulating… (49s)`, `⠸ Thinking... (esc to cancel, 49s)`) writes bytes several times a
//! second and shows nothing new. Colours, attributes, the cursor and the window title are not
//! text.

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
    /// The fingerprint of the text last taken.
    shown: u64,
    /// When a change was last found (fingerprints are skipped for [`SETTLE`] after it).
    changed_at: Option<Instant>,
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
        let shown = fingerprint(parser.screen(), &mut scratch);
        Self {
            parser,
            shown,
            changed_at: None,
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
            self.shown = fingerprint(self.parser.screen(), &mut self.scratch);
            self.unseen = false;
        }
    }

    /// Feeds one chunk read at `now`; returns whether the screen's text changed (spinner glyphs
    /// and digits aside), or `true` within [`SETTLE`] of the last change.
    pub(crate) fn feed(&mut self, chunk: &[u8], now: Instant) -> bool {
        self.unseen |= self.parse(chunk);
        if self
            .changed_at
            .is_some_and(|at| now.saturating_duration_since(at) < SETTLE)
        {
            return true;
        }
        if !self.unseen {
            // Nothing parsed since the last fingerprint: the same text.
            return false;
        }
        self.unseen = false;
        let now_shown = fingerprint(self.parser.screen(), &mut self.scratch);
        if now_shown == self.shown {
            return false;
        }
        self.shown = now_shown;
        self.changed_at = Some(now);
        true
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

/// The fingerprint of the screen's text: every run of digits as one `#`, every run of blanks as
/// one, spinner glyphs left out, colours and attributes ignored. The text is taken whole (the crate's per-cell lookup
/// walks the rows from the top for each cell: 1.25 ms for 120 x 40 cells), normalized into
/// `scratch` and hashed once.
fn fingerprint(screen: &vt100::Screen, scratch: &mut Vec<u8>) -> u64 {
    scratch.clear();
    let mut in_digits = false;
    let mut in_blank = false;
    for ch in screen.contents().chars() {
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
    let mut hasher = DefaultHasher::new();
    hasher.write(scratch);
    hasher.finish()
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
        assert!(screen.feed(start, t0));
        assert!(screen.text().contains("say hi"), "{}", screen.text());
        // Then every frame as the terminal delivered it (one write each, ~30 bytes), one per
        // 150 ms: nothing new past the first seconds (the counter reaching a minute is one).
        let mut changed = Vec::new();
        for (i, frame) in frames
            .split_inclusive(|b| *b == 0x07 || *b == b'A')
            .enumerate()
        {
            let at = t0 + Duration::from_millis(150 * (i as u64 + 1));
            if screen.feed(frame, at) {
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

    #[test]
    fn new_text_counts_and_glyphs_digits_colours_and_title_do_not() {
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 40);
        let mut at = t0;
        let mut feed = |bytes: &str| {
            at += SETTLE;
            screen.feed(bytes.as_bytes(), at)
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
        assert!(fast.feed(b"x", t0));
        assert!(fast.feed(b"\x08x", t0 + Duration::from_millis(10)));
        assert!(!fast.feed(b"\x08x", t0 + SETTLE));
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
            screen.feed(bytes.as_bytes(), at)
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
                screen.feed(&bytes[..split], t0);
                screen.feed(&bytes[split..], t0);
                assert_eq!(
                    screen.text(),
                    whole.screen().contents(),
                    "{bytes:?} at {split}"
                );
            }
        }
        let t0 = Instant::now();
        let mut screen = Screen::new(5, 40);
        assert!(screen.feed(b"hello", t0));
        assert!(!screen.feed(&[0; 4096], t0 + SETTLE));
        // A change made within the settle time is told at the next read, NULs or not.
        assert!(screen.feed(b" world", t0 + SETTLE * 3));
        assert!(screen.feed(b"!", t0 + SETTLE * 3 + SETTLE / 2));
        assert!(screen.feed(&[0; 4096], t0 + SETTLE * 5));
        assert!(!screen.feed(&[0; 4096], t0 + SETTLE * 6));
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
        assert!(screen.feed(b"hello", t0));
        screen.resize(10, 80);
        assert!(!screen.feed(b"\x1b[H", t0 + SETTLE));
        assert!(screen.feed(b"\x1b[2;1Hworld", t0 + SETTLE * 2));
    }
}
