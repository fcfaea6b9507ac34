//! Output as lines, on the reader threads: completion patterns and the line callback, telling a
//! line redrawn in place with `\r` that shows nothing new (a spinner, a stalled progress bar,
//! spinner glyphs and digits aside) from new output, and (opt-in) telling any output that merely
//! repeats itself from new output.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

use regex::bytes::RegexSet;

use crate::completion::LineCallback;
use crate::outcome::CompletionTrigger;
use crate::sources::screen::is_spinner_glyph;

/// The length of the UTF-8 sequence that `lead` starts (1 for a byte that starts none).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// Longest line kept whole: a longer one is looked at in pieces of this size.
const MAX_LINE: usize = 64 * 1024;
/// Distinct lines remembered to tell a repeat.
const REMEMBERED: usize = 16;
/// Bytes of a matching line kept in the result.
const MATCHED_KEPT: usize = 1024;

/// What one chunk of output showed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ChunkSeen {
    /// The first line that told completion: how, and the line.
    pub(crate) completed: Option<(CompletionTrigger, String)>,
    /// Whether the chunk is new output (`false`: every line it completed was a repeat).
    pub(crate) fresh: bool,
}

/// One stream's lines.
pub(crate) struct LineWatch {
    patterns: Option<RegexSet>,
    callback: Option<LineCallback>,
    /// The normalized hashes of the last distinct lines (repeat detection on).
    repeats: Option<VecDeque<u64>>,
    /// The normalized hashes of the last distinct lines redrawn in place (ended by a `\r` that
    /// a character other than `\n` follows), with repeat detection off.
    redraws: VecDeque<u64>,
    partial: Vec<u8>,
    /// Completion was told once already: no more matching.
    told: bool,
}

impl LineWatch {
    pub(crate) fn new(
        patterns: Option<RegexSet>,
        callback: Option<LineCallback>,
        repeats: bool,
    ) -> Self {
        Self {
            patterns,
            callback,
            repeats: repeats.then(VecDeque::new),
            redraws: VecDeque::new(),
            partial: Vec::new(),
            told: false,
        }
    }

    /// Whether lines are looked at only for redraws (no pattern, no callback, no repeats).
    fn redraws_only(&self) -> bool {
        self.patterns.is_none() && self.callback.is_none() && self.repeats.is_none()
    }

    /// Looks at one chunk as read.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> ChunkSeen {
        if self.redraws_only() && memchr::memchr(b'\r', chunk).is_none() {
            // No redraw in it: new output; only the line in progress is kept.
            match memchr::memrchr(b'\n', chunk) {
                Some(end) => {
                    self.partial.clear();
                    self.keep_partial(&chunk[end + 1..]);
                }
                None => self.keep_partial(chunk),
            }
            return ChunkSeen {
                completed: None,
                fresh: true,
            };
        }
        let mut seen = ChunkSeen::default();
        let mut completed_any = false;
        let mut after_redraw = false;
        let mut rest = chunk;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            let piece = &rest[..end];
            // Redrawn in place: a `\r` followed by anything but `\n` (at the end of the chunk
            // the next byte is unknown: not a redraw).
            let redrawn = rest[end] == b'\r' && rest.get(end + 1).is_some_and(|b| *b != b'\n');
            after_redraw = redrawn;
            rest = &rest[end + 1..];
            completed_any |= if self.partial.is_empty() {
                // The common case: a whole line inside the chunk, looked at in place.
                self.line(piece, redrawn, &mut seen)
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(piece);
                let counted = self.line(&line, redrawn, &mut seen);
                line.clear();
                self.partial = line; // keeps its allocation
                counted
            };
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() >= MAX_LINE {
            let line = std::mem::take(&mut self.partial);
            completed_any |= self.line(&line, false, &mut seen);
        } else if after_redraw && !self.partial.iter().all(u8::is_ascii_whitespace) {
            // The text a redraw put on show, judged now rather than when the next redraw
            // ends it (a frame split across reads may count once more).
            let shown = std::mem::take(&mut self.partial);
            seen.fresh |= self.is_new(&shown, true);
            self.partial = shown;
        }
        // A chunk that completes no line (a partial line) is new output.
        if !completed_any {
            seen.fresh = true;
        }
        seen
    }

    /// The end of the stream: the last line, if it had no line end.
    pub(crate) fn finish(&mut self) -> ChunkSeen {
        let mut seen = ChunkSeen::default();
        let line = std::mem::take(&mut self.partial);
        self.line(&line, false, &mut seen);
        seen
    }

    /// Keeps the line in progress (dropped past [`MAX_LINE`] bytes: a redraw's text is short).
    fn keep_partial(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        if self.partial.len() >= MAX_LINE {
            self.partial.clear();
        }
    }

    /// One complete line (`redrawn`: ended by a `\r` that moves back over it); returns whether
    /// it was a non-blank line.
    fn line(&mut self, line: &[u8], redrawn: bool, seen: &mut ChunkSeen) -> bool {
        if line.iter().all(u8::is_ascii_whitespace) {
            return false;
        }
        if !self.told
            && let Some(trigger) = self.completes(line)
        {
            self.told = true;
            let mut text = String::from_utf8_lossy(line).into_owned();
            if text.len() > MATCHED_KEPT {
                let mut cut = MATCHED_KEPT;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
            }
            seen.completed = Some((trigger, text));
        }
        if self.is_new(line, redrawn) {
            seen.fresh = true;
        }
        true
    }

    fn completes(&self, line: &[u8]) -> Option<CompletionTrigger> {
        if self.patterns.is_none() && self.callback.is_none() {
            return None;
        }
        // On the bytes: no copy for a line that is not UTF-8 (invalid bytes match no literal
        // text; `.` and classes match only valid characters).
        if self.patterns.as_ref().is_some_and(|p| p.is_match(line)) {
            return Some(CompletionTrigger::Output);
        }
        let callback = self.callback.as_ref()?;
        let text = String::from_utf8_lossy(line);
        // A panicking callback counts as "no".
        catch_unwind(AssertUnwindSafe(|| (callback.0)(&text)))
            .unwrap_or(false)
            .then_some(CompletionTrigger::Callback)
    }

    /// Whether `line` is not one of the last distinct lines (with repeat detection off: unless
    /// it was redrawn in place and is one of the last distinct lines redrawn).
    fn is_new(&mut self, line: &[u8], redrawn: bool) -> bool {
        let remembered = match &mut self.repeats {
            Some(remembered) => remembered,
            None if redrawn => &mut self.redraws,
            None => return true,
        };
        let key = normalized_hash(line);
        if let Some(at) = remembered.iter().position(|k| *k == key) {
            remembered.remove(at);
            remembered.push_front(key);
            return false;
        }
        remembered.push_front(key);
        remembered.truncate(REMEMBERED);
        true
    }
}

/// The hash of a line with every run of digits as one `#`, spinner glyphs left out (`|/-\*·`
/// and the braille and dingbat frames: [`is_spinner_glyph`]) and outer whitespace trimmed: a
/// counter, a percentage, a timestamp, a spinner's frame do not make a line new.
fn normalized_hash(line: &[u8]) -> u64 {
    let mut normalized = [0u8; 256];
    let mut len = 0;
    let mut hasher = DefaultHasher::new();
    let mut in_digits = false;
    let line = line.trim_ascii();
    let mut at = 0;
    while at < line.len() {
        let b = line[at];
        // A spinner glyph of several bytes (UTF-8), skipped whole.
        if b >= 0x80 {
            let width = utf8_width(b);
            if let Some(ch) = line
                .get(at..at + width)
                .and_then(|c| std::str::from_utf8(c).ok())
                .and_then(|c| c.chars().next())
                && is_spinner_glyph(ch)
            {
                at += width;
                continue;
            }
        }
        at += 1;
        if b < 0x80 && is_spinner_glyph(char::from(b)) {
            continue;
        }
        let digit = b.is_ascii_digit();
        if digit && in_digits {
            continue;
        }
        in_digits = digit;
        normalized[len] = if digit { b'#' } else { b };
        len += 1;
        if len == normalized.len() {
            hasher.write(&normalized);
            len = 0;
        }
    }
    hasher.write(&normalized[..len]);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn patterns(p: &[&str]) -> Option<RegexSet> {
        Some(RegexSet::new(p).unwrap())
    }

    #[test]
    fn a_result_line_split_across_reads_is_matched_once() {
        let mut w = LineWatch::new(patterns(&[r#"^\{"type":"result""#]), None, false);
        assert_eq!(
            w.feed(b"{\"type\":\"assistant\"}\n{\"type\":\"re")
                .completed,
            None
        );
        let seen = w.feed(b"sult\",\"ok\":true}\nmore\n");
        assert_eq!(
            seen.completed,
            Some((
                CompletionTrigger::Output,
                "{\"type\":\"result\",\"ok\":true}".to_owned()
            ))
        );
        assert_eq!(
            w.feed(b"{\"type\":\"result\"}\n").completed,
            None,
            "told once"
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_still_matches() {
        let mut w = LineWatch::new(patterns(&["DONE$"]), None, false);
        let seen = w.feed(b"\xff\xfe binary junk DONE\n");
        assert_eq!(
            seen.completed,
            Some((
                CompletionTrigger::Output,
                "\u{fffd}\u{fffd} binary junk DONE".to_owned()
            ))
        );
    }

    #[test]
    fn the_last_line_without_end_is_matched_at_the_end() {
        let mut w = LineWatch::new(patterns(&["^DONE$"]), None, false);
        assert_eq!(w.feed(b"work\r\nDONE").completed, None);
        assert_eq!(
            w.finish().completed,
            Some((CompletionTrigger::Output, "DONE".to_owned()))
        );
    }

    #[test]
    fn the_callback_sees_lines_and_a_panic_is_no() {
        let cb = LineCallback(Arc::new(|line: &str| {
            assert!(!line.contains("boom"), "callback bug");
            line.ends_with("finished")
        }));
        let mut w = LineWatch::new(None, Some(cb), false);
        assert_eq!(w.feed(b"boom\nstill going\n").completed, None);
        assert_eq!(
            w.feed(b"all finished\n").completed,
            Some((CompletionTrigger::Callback, "all finished".to_owned()))
        );
    }

    #[test]
    fn repeats_digits_aside_are_not_fresh() {
        let mut w = LineWatch::new(None, None, true);
        assert!(w.feed(b"retrying in 5s (attempt 1)\n").fresh);
        assert!(!w.feed(b"retrying in 4s (attempt 2)\n").fresh);
        assert!(!w.feed(b"retrying in 10s (attempt 13)\n").fresh);
        assert!(w.feed(b"compiling foo\n").fresh);
        // A spinner on one line: \r ends its frames; a cycle of frames repeats.
        let frames = ["|", "/", "-", "\\"];
        let mut fresh = Vec::new();
        for round in 0..3 {
            for f in frames {
                fresh.push((round, w.feed(format!("\r{f} waiting").as_bytes()).fresh));
            }
        }
        assert!(
            fresh.iter().filter(|(r, _)| *r > 1).all(|(_, f)| !f),
            "{fresh:?}"
        );
        // A partial line alone is output.
        assert!(w.feed(b"tok").fresh);
        // Off: everything is fresh.
        let mut off = LineWatch::new(None, None, false);
        assert!(off.feed(b"same\n").fresh);
        assert!(off.feed(b"same\n").fresh);
    }

    #[test]
    fn a_line_redrawn_in_place_showing_nothing_new_is_not_fresh_by_default() {
        // npm's spinner on a dead connection: `\r` + a braille frame + the same text.
        let mut w = LineWatch::new(None, None, false);
        assert!(w.feed("\r⠋ idealTree: timing".as_bytes()).fresh);
        let mut fresh = Vec::new();
        for f in "⠙⠹⠸⠼⠴⠦⠧⠇⠏⠋⠙".chars() {
            fresh.push(w.feed(format!("\r{f} idealTree: timing").as_bytes()).fresh);
        }
        // The first frame shown is new; none after it.
        assert!(fresh.iter().all(|f| !f), "{fresh:?}");
        // pip's bar on a dead connection: the same bar, only its digits move.
        assert!(w.feed(b"\r   1.2/4.5 MB 0.0 kB/s eta 0:07:12").fresh);
        assert!(!w.feed(b"\r   1.2/4.5 MB 0.0 kB/s eta 0:07:12").fresh);
        assert!(!w.feed(b"\r   1.2/4.5 MB 0.1 kB/s eta 0:07:13").fresh);
        // A bar that grows shows something new.
        assert!(w.feed(b"\r[##   ]  40%").fresh);
        assert!(w.feed(b"\r[###  ]  60%").fresh);
        assert!(!w.feed(b"\r[###  ]  61%").fresh);
        // Lines that end with `\n` (or `\r\n`) are new output, repeated or not.
        assert!(w.feed(b"same\n").fresh);
        assert!(w.feed(b"same\n").fresh);
        assert!(w.feed(b"same\r\nsame\r\n").fresh);
        // A `\r` at the end of a read: what follows is not known, so not a redraw.
        assert!(w.feed(b"[###  ]  62%\r").fresh);
        // A read with no `\r` at all is new output.
        assert!(w.feed(b"partial").fresh);
    }
}
