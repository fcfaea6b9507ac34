//! The shape of a line of output: what in it tells of the work and what tells of the wait.
//!
//! A line is cut into words (runs of non-blanks). Numbers become `#` in the line's template,
//! with their separators and a magnitude or size suffix (`2048k`, `256.00K`, `12MiB`: a
//! meter's unit comes and goes as its rate shrinks); spinner glyphs are left out. Words that
//! tell the time or the rate of a wait are left out of both keys: a duration (`5s`, `(1m`,
//! `50s)`, `0:00:09`, `--:--:--`, `3 seconds`), a rate (`--.-KB/s`, `MB/s`) and the word
//! `eta` — on a dead connection a meter's rate decays and its estimate grows, while the
//! amount done (bytes, percent, bar) stays. Words that say the program waits or tries again
//! (`still`, `waiting`, `retrying`, `attempt`, …) are noted.

use std::hash::{DefaultHasher, Hasher};

/// A key being built: bytes gathered in a small buffer and hashed a buffer at a time (a
/// hasher fed byte by byte costs several times more; a large buffer costs its zeroing on
/// every line).
struct Key {
    hasher: DefaultHasher,
    buf: [u8; 64],
    len: usize,
    /// Not wanted: nothing is gathered.
    off: bool,
}

impl Key {
    fn new() -> Self {
        Self {
            hasher: DefaultHasher::new(),
            buf: [0; 64],
            len: 0,
            off: false,
        }
    }

    fn push(&mut self, b: u8) {
        if self.off {
            return;
        }
        if self.len == self.buf.len() {
            self.hasher.write(&self.buf);
            self.len = 0;
        }
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }

    fn finish(mut self) -> u64 {
        self.hasher.write(&self.buf[..self.len]);
        self.hasher.finish()
    }
}

use crate::sources::screen::is_spinner_glyph;

/// The most bytes of a line looked at: a heartbeat or a meter is short.
pub(super) const LOOKED_AT: usize = 512;

/// What [`shape`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The line with numbers as `#`, times, rates and spinner glyphs left out.
    pub(crate) template: u64,
    /// The line with its numbers as written, times, rates and spinner glyphs left out.
    pub(crate) exact: u64,
    /// It held a time or a rate (left out of both keys).
    pub(crate) timed: bool,
    /// Its words say it waits or tries again.
    pub(crate) waits: bool,
}

/// Words that tell of a wait or a new try (lowercase, outer punctuation trimmed).
const WAIT_WORDS: &[&[u8]] = &[
    b"still",
    b"wait",
    b"waiting",
    b"retry",
    b"retrying",
    b"retries",
    b"retried",
    b"attempt",
    b"attempts",
    b"attempting",
    b"reconnect",
    b"reconnecting",
    b"backoff",
    b"heartbeat",
];

/// Units of time written apart from their number (`3 seconds`).
const TIME_UNITS: &[&[u8]] = &[
    b"ms", b"s", b"sec", b"secs", b"second", b"seconds", b"m", b"min", b"mins", b"minute",
    b"minutes", b"h", b"hr", b"hrs", b"hour", b"hours",
];

/// The word without the punctuation around it (`(5s)` → `5s`, `failed:` → `failed`).
fn core(word: &[u8]) -> &[u8] {
    let punct = |b: &u8| b"()[]{}<>,;:'\"!?".contains(b);
    let start = word.iter().position(|b| !punct(b)).unwrap_or(word.len());
    let end = word
        .iter()
        .rposition(|b| !punct(b))
        .map_or(start, |e| e + 1);
    &word[start..end]
}

/// Whether `core` is a number (digits, with `.` or `,` between them), then at most a size
/// suffix (`k`, `KiB`, `MB`, `%`).
fn is_number(core: &[u8]) -> bool {
    let digits_end = core
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'.' || *b == b','))
        .unwrap_or(core.len());
    core.first().is_some_and(u8::is_ascii_digit)
        && core[digits_end..].iter().all(|b| b"kKMGTPiB%".contains(b))
        && core.len() - digits_end <= 3
}

/// Whether `core` is a time: a clock (`0:00:09`, `--:--:--`, `12:00:01.5`) or a number with
/// a unit of time stuck to it (`5s`, `1m`, `250ms`, `3.2s`).
fn is_time(core: &[u8]) -> bool {
    if core.contains(&b':')
        && core
            .iter()
            .all(|b| b.is_ascii_digit() || b":.-".contains(b))
        && core.iter().any(|b| *b != b':')
    {
        return true;
    }
    let digits_end = core
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'.'))
        .unwrap_or(core.len());
    digits_end > 0
        && core[0].is_ascii_digit()
        && digits_end < core.len()
        && [&b"ms"[..], b"s", b"m", b"h", b"d", b"min", b"sec"].contains(&&core[digits_end..])
}

/// Whether `core` is a rate (`KB/s`, `--.-KB/s`, `it/s`) or the estimate's label.
fn is_rate(core: &[u8]) -> bool {
    core.windows(2).any(|w| w == b"/s") || core.eq_ignore_ascii_case(b"eta")
}

/// The shape of `line` (its first [`LOOKED_AT`] bytes).
pub(crate) fn shape(line: &[u8]) -> Shape {
    shape_of(line, true)
}

/// The template of `line` alone ([`Shape::template`]): what a redraw or a repeat is compared
/// by, at half the hashing.
pub(crate) fn template(line: &[u8]) -> u64 {
    shape_of(line, false).template
}

/// The shape of `line`; without `whole`, its template only (the other fields empty).
fn shape_of(line: &[u8], whole: bool) -> Shape {
    let line = &line[..line.len().min(LOOKED_AT)];
    let mut template = Key::new();
    let mut exact = Key::new();
    exact.off = !whole;
    let mut timed = false;
    let mut waits = false;
    let mut words = line
        .split(u8::is_ascii_whitespace)
        .filter(|w| !w.is_empty())
        .peekable();
    while let Some(word) = words.next() {
        let core = core(word);
        if is_time(core) || is_rate(core) {
            timed = true;
            continue;
        }
        if is_number(core) {
            // A unit of time written apart: the number was a time.
            if words
                .peek()
                .is_some_and(|next| one_of(self::core(next), TIME_UNITS))
            {
                words.next();
                timed = true;
                continue;
            }
            template.extend(b"# ");
            exact.extend(core);
            exact.push(b' ');
            continue;
        }
        if whole && !waits && matches!(core.len(), 4..=12) && core[0].is_ascii_alphabetic() {
            waits = one_of(core, WAIT_WORDS);
        }
        write_word(word, &mut template, &mut exact);
    }
    Shape {
        template: template.finish(),
        exact: exact.finish(),
        timed,
        waits,
    }
}

/// Whether `core` is one of `words`, ASCII case aside.
fn one_of(core: &[u8], words: &[&[u8]]) -> bool {
    words.iter().any(|w| w.eq_ignore_ascii_case(core))
}

/// The length of the UTF-8 sequence that `lead` starts (1 for a byte that starts none).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// Whether the bytes at the start of `rest` are a spinner glyph, and how many they are.
fn glyph_at(rest: &[u8]) -> Option<usize> {
    let lead = *rest.first()?;
    let width = utf8_width(lead);
    let ch = if lead < 0x80 {
        char::from(lead)
    } else {
        std::str::from_utf8(rest.get(..width)?)
            .ok()?
            .chars()
            .next()?
    };
    is_spinner_glyph(ch).then_some(width)
}

/// One word into both keys: spinner glyphs left out; in the template every run of digits
/// (with `.` or `,` inside it) as one `#`.
fn write_word(word: &[u8], template: &mut Key, exact: &mut Key) {
    let mut in_number = false;
    let mut wrote = false;
    let mut at = 0;
    while at < word.len() {
        if let Some(width) = glyph_at(&word[at..]) {
            at += width;
            continue;
        }
        let b = word[at];
        at += 1;
        wrote = true;
        exact.push(b);
        let digit = b.is_ascii_digit();
        if digit || (in_number && (b == b'.' || b == b',')) {
            if !in_number {
                template.push(b'#');
            }
            in_number = true;
            continue;
        }
        in_number = false;
        template.push(b);
    }
    if wrote {
        template.push(b' ');
        exact.push(b' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        shape(a.as_bytes()).template == shape(b.as_bytes()).template
    }

    #[test]
    fn numbers_times_rates_and_glyphs_aside() {
        // curl's meter as its rate falls below 100k: the `k` goes, the text stays.
        assert!(same(
            " 12 2048k   12  256k    0     0   210k      0  0:00:09  0:00:01  0:00:08  211k",
            " 12 2048k   12  256k    0     0  81360      0  0:00:25  0:00:03  0:00:22 81385",
        ));
        // wget's bar: the estimate appears once the rate is known.
        assert!(same(
            "blob                 12%[=>                  ] 256.00K  --.-KB/s               ",
            "blob                 12%[=>                  ] 256.00K  --.-KB/s    eta 27s    ",
        ));
        assert!(same("⠋ Thinking (12s)", "⠙ Thinking (1m 3s)"));
        assert!(same("done in 3 seconds", "done in 41 seconds"));
        // A bar that grows, and new words, are new.
        assert!(!same("[##   ]  40%", "[###  ]  60%"));
        assert!(!same("compiling foo", "compiling bar"));
        assert!(!same("attempt 3 failed", "attempt 3 succeeded"));
    }

    #[test]
    fn times_are_told_from_counts_and_waits_are_heard() {
        let a = shape(b"[supervisor] job 1 still running (5s)");
        let b = shape(b"[supervisor] job 1 still running (6s)");
        assert_eq!(a.template, b.template);
        assert_eq!(a.exact, b.exact, "only a time changed");
        assert!(a.timed && a.waits);
        let c = shape(b"compiling unit 7");
        let d = shape(b"compiling unit 8");
        assert_eq!(c.template, d.template);
        assert_ne!(c.exact, d.exact, "a count changed");
        assert!(!c.timed && !c.waits);
        let e = shape(b"attempt 7 failed: Connection refused; retrying in 1s");
        assert!(e.waits && e.timed);
        assert!(!shape(b"retrieving index").waits);
        let clock = shape(b"12:00:01 heartbeat ok");
        assert!(clock.timed);
        assert_eq!(clock.exact, shape(b"12:00:02 heartbeat ok").exact);
    }
}
