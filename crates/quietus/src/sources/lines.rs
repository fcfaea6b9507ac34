//! Output as lines, on the reader threads: completion patterns and the line callback, telling a
//! line redrawn in place with `\r` that shows nothing new (a spinner, a stalled progress bar,
//! spinner glyphs, numbers, times and rates aside) from new output, a heartbeat line (a line
//! that says it waits or tries again, or tells only the time, repeated with only its numbers
//! changing) from new output, and (opt-in) telling any output that merely repeats itself from
//! new output.

mod shape;

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use regex::bytes::RegexSet;

use crate::completion::LineCallback;
use crate::outcome::CompletionTrigger;
use shape::shape;

/// Longest line kept whole: a longer one is looked at in pieces of this size.
const MAX_LINE: usize = 64 * 1024;
/// Distinct lines remembered to tell a repeat.
const REMEMBERED: usize = 16;
/// Bytes of a matching line kept in the result.
const MATCHED_KEPT: usize = 1024;
/// A read of more bytes than this, or of more lines than [`FEW_LINES`], with no redraw in it is
/// new output without a look at its lines: a heartbeat is a short line now and then, never a
/// flood (a pipe's reads of a fast writer come a page, 4 KiB, at a time).
const BULK: usize = 1024;
/// The most lines a read with no redraw may hold to be looked at line by line.
const FEW_LINES: usize = 2;

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
    /// The last distinct lines ended by `\n`, with repeat detection off: each template and
    /// the exact key of its latest line ([`shape::Shape`]), to tell a heartbeat.
    heard: VecDeque<(u64, u64)>,
    partial: Vec<u8>,
    /// The last read ended with a `\r`, the line before it not looked at yet.
    pending_cr: bool,
    /// The line in progress follows a `\r` that redrew the line.
    redraw_line: bool,
    /// The length of the last redrawn line looked at: a redraw's text shorter than that is
    /// not yet the line it begins (curl writes its meter in pieces: ` `, `1`, `2 2048k …`).
    redrawn_len: usize,
    /// Completion was told once already: no more matching.
    told: bool,
    /// The read being looked at is short (at most [`BULK`] bytes and [`FEW_LINES`] lines):
    /// its lines ended by `\n` are looked at for heartbeats; a longer one's are news.
    few: bool,
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
            heard: VecDeque::new(),
            partial: Vec::new(),
            pending_cr: false,
            redraw_line: false,
            redrawn_len: 0,
            told: false,
            few: false,
        }
    }

    /// Whether lines are looked at only for redraws (no pattern, no callback, no repeats).
    fn redraws_only(&self) -> bool {
        self.patterns.is_none() && self.callback.is_none() && self.repeats.is_none()
    }

    /// Looks at one chunk as read.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> ChunkSeen {
        let mut seen = ChunkSeen::default();
        let mut completed_any = false;
        // Whether this read added text to an ordinary line in progress (not a redrawn one).
        let mut added = false;
        let mut rest = chunk;
        self.few =
            chunk.len() <= BULK && memchr::memchr_iter(b'\n', chunk).nth(FEW_LINES).is_none();
        // A `\r` that ended the last read: this read's first byte tells whether it redrew the
        // line (anything but `\n`) or ended it (`\r\n`).
        if self.pending_cr
            && let Some(&first) = rest.first()
        {
            self.pending_cr = false;
            let redrawn = first != b'\n';
            completed_any |= self.end_partial(redrawn, &mut seen);
            self.redraw_line = redrawn;
            if !redrawn {
                rest = &rest[1..];
            }
        }
        if self.redraws_only() && !self.pending_cr && !self.few && self.bulk(rest) {
            seen.fresh = true;
            return seen;
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            if rest[end] == b'\r' && end + 1 == rest.len() {
                // A `\r` ending the read: judged with the next read's first byte.
                added |= end > 0 && !self.redraw_line && !self.partial.is_empty();
                self.partial.extend_from_slice(&rest[..end]);
                self.pending_cr = true;
                rest = &[];
                break;
            }
            // Redrawn in place: a `\r` followed by anything but `\n`.
            let redrawn = rest[end] == b'\r' && rest[end + 1] != b'\n';
            if self.partial.is_empty() {
                // A line whole in this read is looked at where it lies, not copied.
                completed_any |= self.line(&rest[..end], redrawn, &mut seen);
            } else {
                self.partial.extend_from_slice(&rest[..end]);
                completed_any |= self.end_partial(redrawn, &mut seen);
            }
            self.redraw_line = redrawn;
            rest = &rest[end + 1..];
        }
        // Text that grows a line begun in an earlier read is new output (dots printed one by
        // one); text that only begins a line waits for its end or its next growth: Python's
        // `print` writes a line and its `\n` in two writes, and a reader between them saw
        // a heartbeat's text as news before its end said what it was.
        added |= !rest.is_empty() && !self.redraw_line && !self.partial.is_empty();
        self.partial.extend_from_slice(rest);
        if self.partial.len() >= MAX_LINE {
            completed_any |= self.end_partial(false, &mut seen);
            self.redraw_line = false;
        } else if self.redraw_line
            && !self.pending_cr
            && self.partial.len() >= self.redrawn_len
            && !self.partial.iter().all(u8::is_ascii_whitespace)
        {
            // The text a redraw put on show, judged now rather than when the next redraw
            // ends it, once it is as long as the last redraw (a piece of a frame written in
            // pieces waits for the rest; a frame split across reads may count once more).
            let shown = std::mem::take(&mut self.partial);
            seen.fresh |= self.is_new(&shown, true);
            self.redrawn_len = shown.len();
            self.partial = shown;
        }
        // A read that completes no line and adds to an ordinary line in progress is new
        // output (a redrawn line is judged by what it shows, above).
        if !completed_any && added {
            seen.fresh = true;
        }
        seen
    }

    /// The line in progress ends (`redrawn`: by a `\r` that moves back over it): looked at,
    /// then cleared (its allocation kept). Returns whether it was a non-blank line.
    fn end_partial(&mut self, redrawn: bool, seen: &mut ChunkSeen) -> bool {
        let line = std::mem::take(&mut self.partial);
        let counted = self.line(&line, redrawn, seen);
        self.partial = line;
        self.partial.clear();
        counted
    }

    /// The end of the stream: the last line, if it had no line end.
    pub(crate) fn finish(&mut self) -> ChunkSeen {
        let mut seen = ChunkSeen::default();
        self.pending_cr = false;
        self.end_partial(false, &mut seen);
        seen
    }

    /// Keeps the line in progress (dropped past [`MAX_LINE`] bytes: a redraw's text is short;
    /// the bytes of a line so dropped are not copied first).
    fn keep_partial(&mut self, bytes: &[u8]) {
        if self.partial.len() + bytes.len() >= MAX_LINE {
            self.partial.clear();
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// A bulk read (more than [`BULK`] bytes or [`FEW_LINES`] lines) when only redraws are
    /// looked at: new output without a look at its lines when it holds no redraw, or when it
    /// holds a NUL byte (binary bytes, as `git` and `grep` tell them: no meter or spinner
    /// line; random bytes hold a `\r` every 256 bytes). Keeps only the line in progress and
    /// returns `true`; `false` when the read's lines must be looked at. One scan of the read
    /// from its end finds its last line end; a read with no line end is scanned once.
    fn bulk(&mut self, rest: &[u8]) -> bool {
        let last = memchr::memrchr2(b'\n', b'\r', rest);
        let no_redraw = !self.redraw_line
            && last.is_none_or(|end| {
                rest[end] == b'\n' && memchr::memchr(b'\r', &rest[..end]).is_none()
            });
        if !no_redraw && memchr::memchr(0, rest).is_none() {
            return false;
        }
        // Its lines are not looked at: the next redraw is judged from its first piece.
        self.redrawn_len = 0;
        match last {
            // No line end: the line in progress grows (and stays a redrawn one, or not).
            None => {
                self.keep_partial(rest);
                self.redraw_line &= !self.partial.is_empty();
            }
            // A `\r` ending the read: its line is judged with the next read's first byte.
            Some(end) if end + 1 == rest.len() && rest[end] == b'\r' => {
                let start = match memchr::memrchr2(b'\n', b'\r', &rest[..end]) {
                    Some(before) => {
                        self.partial.clear();
                        before + 1
                    }
                    None => 0,
                };
                self.keep_partial(&rest[start..end]);
                self.pending_cr = true;
            }
            // The last line end: `\n`, or a `\r` followed by text (a redraw).
            Some(end) => {
                self.partial.clear();
                self.keep_partial(&rest[end + 1..]);
                self.redraw_line = rest[end] == b'\r';
            }
        }
        true
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
        // A line ended by `\n` ends the redraws: the next one is judged from its first piece.
        self.redrawn_len = if redrawn { line.len() } else { 0 };
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
    /// it was redrawn in place and is one of the last distinct lines redrawn, or it is a
    /// heartbeat: [`LineWatch::heartbeat`]).
    fn is_new(&mut self, line: &[u8], redrawn: bool) -> bool {
        // Control bytes other than a tab or an escape: binary, no meter or message; new.
        if line
            .iter()
            .take(shape::LOOKED_AT)
            .any(|&b| b < 0x20 && b != b'\t' && b != 0x1b)
        {
            return true;
        }
        let remembered = match &mut self.repeats {
            Some(remembered) => remembered,
            None if redrawn => &mut self.redraws,
            None => return !(self.few && self.heartbeat(line)),
        };
        let key = shape::template(line);
        if let Some(at) = remembered.iter().position(|k| *k == key) {
            remembered.remove(at);
            remembered.push_front(key);
            return false;
        }
        remembered.push_front(key);
        remembered.truncate(REMEMBERED);
        true
    }

    /// Whether `line`, ended by `\n`, is a heartbeat: it says it waits or tries again (`job 1
    /// still running (5s)`, `attempt 7 failed …; retrying in 1s`: a message about a wait, the
    /// first one too), or it repeats the template of one of the last distinct lines (numbers
    /// aside) and tells a time, nothing else changed (`12:00:05 alive`). A count that moves
    /// in a line that does not say it waits (`compiling unit 7`, `Downloaded 3/100`) is news.
    fn heartbeat(&mut self, line: &[u8]) -> bool {
        let shape = shape(line);
        let Some(at) = self.heard.iter().position(|(t, _)| *t == shape.template) else {
            self.heard.push_front((shape.template, shape.exact));
            self.heard.truncate(REMEMBERED);
            return shape.waits;
        };
        let (_, before) = self.heard.remove(at).unwrap_or_default();
        self.heard.push_front((shape.template, shape.exact));
        shape.waits || (shape.timed && shape.exact == before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn patterns(p: &[&str]) -> Option<RegexSet> {
        Some(RegexSet::new(p).unwrap())
    }

    /// curl's meter on a dead connection, as the reader read it (the zoo's
    /// `s_curl_meter_stall`, late in 1 run of 3; here 1 of 4 beside the suite's load): curl
    /// writes a redraw in pieces (its `\r`, a blank, the first digit, the rest), and a read
    /// may hold one piece. A piece is not yet the line it begins: ` 1` alone, judged as the
    /// text the redraw put on show, was news once a second after the stall. A redraw shorter
    /// than the one it replaces waits for its end or its growth.
    #[test]
    fn curls_meter_written_in_pieces_shows_nothing_new() {
        let reads: &[&str] = &[
            "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n                                 Dload  Upload   Total   Spent    Left  Speed\n\r  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0",
            "\r",
            " ",
            "1",
            "2 2048k   12  256k    0     0   213k      0  0:00:09  0:00:01  0:00:08  213k",
            "\r 12 2048k   12  256k    0     0   116k      0  0:00:17  0:00:02  0:00:15  116k",
            "\r 12 2048k   12  256k    0     0  81807      0  0:00:25  0:00:03  0:00:22 81817",
        ];
        let mut w = LineWatch::new(None, None, false);
        let fresh: Vec<bool> = reads.iter().map(|r| w.feed(r.as_bytes()).fresh).collect();
        assert!(fresh[0], "the header is news");
        assert_eq!(fresh[1..], vec![false; reads.len() - 1][..], "{fresh:?}");
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
        // A bar that grows shows something new. A frame shorter than the one it replaces is
        // judged when it ends or grows (it may be a piece of a frame: curl writes its meter in
        // pieces): the 40 % frame counts when the 60 % one ends it.
        assert!(!w.feed(b"\r[##   ]  40%").fresh);
        assert!(w.feed(b"\r[###  ]  60%").fresh);
        assert!(!w.feed(b"\r[###  ]  61%").fresh);
        // Lines that end with `\n` (or `\r\n`) are new output, repeated or not.
        assert!(w.feed(b"same\n").fresh);
        assert!(w.feed(b"same\n").fresh);
        assert!(w.feed(b"same\r\nsame\r\n").fresh);
        // A `\r` at the end of a read is judged with the next read: frames written as `\r`
        // and their text apart are judged the same way.
        assert!(!w.feed(b"\r[###  ]  61%").fresh, "shown before");
        for _ in 0..3 {
            assert!(!w.feed(b"\r").fresh);
            assert!(!w.feed(b"[###  ]  62%").fresh);
        }
        assert!(!w.feed(b"\r").fresh);
        assert!(w.feed(b"[#### ]  80%").fresh);
        // Text then `\r\n` split across reads: the text is new output, the line ends.
        assert!(w.feed(b"\r\nthe end\r").fresh);
        assert!(w.feed(b"\nmore").fresh);
        // curl's meter on a dead connection: its columns shift as its numbers shrink.
        assert!(
            w.feed(
                b"\r  0 1024k    0  1024    0     0    838      0  0:20:51  0:00:01  0:20:50   838"
            )
            .fresh
        );
        assert!(
            !w.feed(
                b"\r  0 1024k    0  1024    0     0     99      0  2:56:03  0:00:10  2:55:53     0"
            )
            .fresh
        );
        // A read with no `\r` at all is new output.
        assert!(w.feed(b"partial").fresh);
    }

    #[test]
    fn a_heartbeat_line_is_not_fresh_a_count_of_work_is() {
        // Python's `print(…, flush=True)` writes the text and its `\n` in two writes: a
        // reader between them gets the text first (the zoo's s_nested_supervisor, missed 2 of
        // 3 once the readers started with the program). The line is judged whole.
        let mut w = LineWatch::new(None, None, false);
        assert!(w.feed(b"starting job 1\n").fresh);
        for s in 1..10 {
            let text = format!("[supervisor] job 1 still running ({s}s)");
            assert!(!w.feed(text.as_bytes()).fresh, "{text}");
            assert!(!w.feed(b"\n").fresh, "{text}: its end");
        }
        // A line of news in two writes counts at its end.
        assert!(!w.feed(b"job 1 done").fresh);
        assert!(w.feed(b"\n").fresh);
        // Dots printed one by one: each after the first grows the line.
        assert!(!w.feed(b".").fresh);
        assert!(w.feed(b".").fresh);
        assert!(w.feed(b".").fresh);

        // The zoo's s_nested_supervisor and s_retry_forever, a line a second.
        let mut w = LineWatch::new(None, None, false);
        assert!(w.feed(b"starting job 1\n").fresh);
        // A message about a wait, the first one too.
        for s in 1..40 {
            let line = format!("[supervisor] job 1 still running ({s}s)\n");
            assert!(!w.feed(line.as_bytes()).fresh, "{line}");
        }
        let mut w = LineWatch::new(None, None, false);
        for n in 1..40 {
            let line = format!("attempt {n} failed: Connection refused; retrying in 1s\n");
            assert!(!w.feed(line.as_bytes()).fresh, "{line}");
        }
        // Other words are news.
        assert!(w.feed(b"connected\n").fresh);
        // A timestamped line whose only change is its time.
        assert!(w.feed(b"12:00:01 alive\n").fresh);
        assert!(!w.feed(b"12:00:02 alive\n").fresh);
        // Counts of work: the zoo's w_stderr_only, a download, a resumed fetch.
        for n in 1..30 {
            assert!(w.feed(format!("compiling unit {n}\n").as_bytes()).fresh);
            assert!(w.feed(format!("Downloaded {n}/100\n").as_bytes()).fresh);
            let line = format!(
                "part {n} interrupted after {} bytes, resuming in 1s\n",
                n * 1024
            );
            assert!(w.feed(line.as_bytes()).fresh);
        }
        // The same line over and over without a word of waiting still counts (opt-in:
        // `repeated_output`); so does a partial line that grows (not one that only begins:
        // its end tells what it is), and a flood.
        assert!(w.feed(b"ok\n").fresh);
        assert!(w.feed(b"ok\n").fresh);
        assert!(!w.feed(b"still").fresh);
        assert!(w.feed(b" going").fresh);
        let flood = "still waiting (1s)\n".repeat(300);
        assert!(w.feed(flood.as_bytes()).fresh);
        // Binary bytes (control bytes other than a tab or an escape) are output, redrawn or
        // not, and cost no look at their words.
        assert!(w.feed(b"\x00\x01still waiting\n").fresh);
        assert!(w.feed(b"\r\x02\x03 frame").fresh);
        assert!(w.feed(b"\r\x02\x03 frame").fresh);
        // Three lines in one read are a flood too; two are looked at.
        assert!(
            w.feed(b"still waiting\nstill waiting\nstill waiting\n")
                .fresh
        );
        assert!(!w.feed(b"still waiting\nstill waiting\n").fresh);
    }

    /// Bytes that do not repeat (xorshift), as `head -c N /dev/urandom` gives them: a `\r`
    /// and a `\n` every 256 bytes or so, a NUL as often.
    fn random_bytes(len: usize) -> Vec<u8> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut data = Vec::with_capacity(len + 8);
        while data.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            data.extend_from_slice(&state.to_le_bytes());
        }
        data.truncate(len);
        data
    }

    #[test]
    fn a_flood_of_binary_bytes_is_output_and_the_lines_after_it_are_judged_as_before() {
        let random = random_bytes(1 << 20);
        for repeats in [false, true] {
            let mut w = LineWatch::new(None, None, repeats);
            // Every read of a binary flood is new output, whatever ends it: a line end, a
            // `\r` left for the next read, a line in progress, a redrawn one.
            for (i, read) in random.chunks(64 * 1024 - 7).enumerate() {
                assert!(w.feed(read).fresh, "read {i}");
            }
            let mut ends_in_cr = random[..4096].to_vec();
            ends_in_cr.push(b'\r');
            assert!(w.feed(&ends_in_cr).fresh);
            let mut redrawn = random[..4096].to_vec();
            redrawn.extend_from_slice(b"\r\x00\x01");
            assert!(w.feed(&redrawn).fresh);
            assert!(w.feed(&random[..4096]).fresh);
            // A flood ending its last line: the next read's text only begins a line.
            let mut ends_in_lf = random[..4096].to_vec();
            ends_in_lf.push(b'\n');
            assert!(w.feed(&ends_in_lf).fresh);
            assert!(!w.feed(b"\nabc").fresh);
            assert!(w.feed(&random[..4096]).fresh);
            // Then a spinner on the same stream: its first frame is new, the next ones are not.
            w.feed(b"\n");
            assert!(w.feed("\r⠋ idealTree: timing".as_bytes()).fresh);
            for f in "⠙⠹⠸⠼⠴⠦⠧⠇⠏⠋⠙".chars() {
                let frame = format!("\r{f} idealTree: timing");
                assert!(!w.feed(frame.as_bytes()).fresh, "{frame}");
            }
            // And a heartbeat line stays a heartbeat (repeats off), news stays news.
            if !repeats {
                assert!(w.feed(b"\nstarting job 1\n").fresh);
                for s in 1..5 {
                    let line = format!("[supervisor] job 1 still running ({s}s)\n");
                    assert!(!w.feed(line.as_bytes()).fresh, "{line}");
                }
            }
            assert!(w.feed(b"compiled unit 7\n").fresh);
        }
    }

    #[test]
    fn a_flood_of_binary_bytes_still_tells_completion() {
        // A completion pattern or callback sees every line, binary or not.
        let mut random = random_bytes(256 * 1024);
        random.extend_from_slice(b"\nALL DONE\n");
        random.extend_from_slice(&random_bytes(4096));
        let mut w = LineWatch::new(patterns(&["^ALL DONE$"]), None, false);
        let mut told = None;
        for read in random.chunks(64 * 1024) {
            let seen = w.feed(read);
            assert!(seen.fresh);
            told = told.or(seen.completed);
        }
        assert_eq!(
            told,
            Some((CompletionTrigger::Output, "ALL DONE".to_owned()))
        );
    }

    #[test]
    fn a_meter_whose_rate_and_estimate_move_shows_nothing_new() {
        // curl's meter on a dead connection (recorded in the zoo's s_curl_meter_stall): its
        // rate loses its `k` as it falls below 100k.
        let mut w = LineWatch::new(None, None, false);
        let curl = [
            "\r 12 2048k   12  256k    0     0   210k      0  0:00:09  0:00:01  0:00:08  211k",
            "\r 12 2048k   12  256k    0     0   115k      0  0:00:17  0:00:02  0:00:15  115k",
            "\r 12 2048k   12  256k    0     0  81360      0  0:00:25  0:00:03  0:00:22 81385",
            "\r 12 2048k   12  256k    0     0  42049      0  0:00:49  0:00:06  0:00:43     0",
        ];
        assert!(w.feed(curl[0].as_bytes()).fresh);
        for frame in &curl[1..] {
            assert!(!w.feed(frame.as_bytes()).fresh, "{frame}");
        }
        // wget's bar (s_wget_bar_stall): the estimate appears once the rate is known.
        let wget = [
            "\rblob                 12%[=>                  ] 256.00K  --.-KB/s               ",
            "\rblob                 12%[=>                  ] 256.00K  --.-KB/s    eta 27s    ",
            "\rblob                 12%[=>                  ] 256.00K  --.-KB/s    eta 40s    ",
        ];
        assert!(w.feed(wget[0].as_bytes()).fresh);
        for frame in &wget[1..] {
            assert!(!w.feed(frame.as_bytes()).fresh, "{frame}");
        }
        // The amount done moving is news.
        assert!(
            w.feed(b"\rblob                 13%[==>                 ] 272.00K  12.1KB/s    eta 40s    ")
                .fresh
        );
    }
}
