//! The output of a session not yet given to the model: what arrived since the last answer,
//! kept as a head and a tail within the session's `max_output_bytes`, with the count of the
//! bytes in between; and what an answer the client abandoned took, given back so that the
//! next answer carries it.

use std::collections::VecDeque;

/// Output waiting for the next answer of one session.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Bytes at most in one answer (head and tail together).
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Bytes since the last answer.
    since: u64,
    /// Bytes since the start.
    total: u64,
    /// Answers taken so far.
    takes: u64,
    /// What an abandoned answer took, for the next answer (before the new output).
    returned: Option<Taken>,
}

/// One answer's share of the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The head and tail as text (invalid UTF-8 replaced), with a marker between them when
    /// bytes were left out.
    pub(crate) text: String,
    /// Bytes produced since the last answer.
    pub(crate) bytes: u64,
    /// Of those, bytes left out of `text`.
    pub(crate) omitted: u64,
    /// Bytes produced since the start.
    pub(crate) total: u64,
}

impl Pending {
    /// Room for `cap` bytes per answer (at least 2: one of head, one of tail).
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(2),
            head: Vec::new(),
            tail: VecDeque::new(),
            since: 0,
            total: 0,
            takes: 0,
            returned: None,
        }
    }

    /// Bytes waiting for the next answer.
    pub(crate) fn pending_bytes(&self) -> u64 {
        self.since + self.returned.as_ref().map_or(0, |r| r.bytes)
    }

    /// How many answers took output so far: [`give_back`](Self::give_back) takes it to know
    /// whether a later answer took output since.
    pub(crate) fn takes(&self) -> u64 {
        self.takes
    }

    /// Gives back what the answer that was take number `take` took, the client having
    /// abandoned it: the next answer starts with it. Refused (false) when another answer took
    /// output since (the order would be lost; that answer was delivered after it).
    pub(crate) fn give_back(&mut self, taken: Taken, take: u64) -> bool {
        if take != self.takes || taken.bytes == 0 {
            return false;
        }
        self.returned = Some(match self.returned.take() {
            Some(earlier) => join(earlier, taken),
            None => taken,
        });
        true
    }

    fn head_cap(&self) -> usize {
        self.cap / 2
    }

    /// Adds what the child wrote.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.since += bytes.len() as u64;
        self.total += bytes.len() as u64;
        let room = self.head_cap().saturating_sub(self.head.len());
        let into_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        let tail_cap = self.cap - self.head_cap();
        if bytes.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - tail_cap..]);
            return;
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(tail_cap);
        self.tail.drain(..over);
        self.tail.extend(bytes);
    }

    /// The output since the last answer (and what an abandoned answer gave back, first); the
    /// next answer starts after it.
    pub(crate) fn take(&mut self) -> Taken {
        self.takes += 1;
        let new = self.take_new();
        match self.returned.take() {
            Some(earlier) => join(earlier, new),
            None => new,
        }
    }

    fn take_new(&mut self) -> Taken {
        let head = std::mem::take(&mut self.head);
        let tail: Vec<u8> = std::mem::take(&mut self.tail).into();
        let bytes = std::mem::take(&mut self.since);
        let kept = (head.len() + tail.len()) as u64;
        if kept == bytes {
            let mut all = head;
            all.extend_from_slice(&tail);
            return Taken {
                text: String::from_utf8_lossy(&all).into_owned(),
                bytes,
                omitted: 0,
                total: self.total,
            };
        }
        // Cut on character boundaries on both sides of the gap.
        let head_end = complete_prefix(&head);
        let tail_start = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count();
        let omitted = bytes - head_end as u64 - (tail.len() - tail_start) as u64;
        let text = format!(
            "{}\n[… {omitted} bytes left out …]\n{}",
            String::from_utf8_lossy(&head[..head_end]),
            String::from_utf8_lossy(&tail[tail_start..])
        );
        Taken {
            text,
            bytes,
            omitted,
            total: self.total,
        }
    }
}

/// Two answers' shares one after the other.
fn join(first: Taken, then: Taken) -> Taken {
    Taken {
        text: first.text + &then.text,
        bytes: first.bytes + then.bytes,
        omitted: first.omitted + then.omitted,
        total: first.total.max(then.total),
    }
}

/// The length of `bytes` without a character cut at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_given_whole_and_once() {
        let mut pending = Pending::new(16);
        pending.push(b"hello ");
        pending.push(b"world\n");
        let taken = pending.take();
        assert_eq!(taken.text, "hello world\n");
        assert_eq!((taken.bytes, taken.omitted, taken.total), (12, 0, 12));
        pending.push(b"more");
        let taken = pending.take();
        assert_eq!(taken.text, "more");
        assert_eq!((taken.bytes, taken.omitted, taken.total), (4, 0, 16));
        assert_eq!(pending.take().bytes, 0);
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_rest() {
        let mut pending = Pending::new(10);
        for chunk in [&b"0123"[..], b"456789abc", b"defghij"] {
            pending.push(chunk);
        }
        let taken = pending.take();
        assert_eq!(taken.text, "01234\n[… 10 bytes left out …]\nfghij");
        assert_eq!((taken.bytes, taken.omitted), (20, 10));
        // Exactly the cap: nothing left out.
        pending.push(b"0123456789");
        assert_eq!(pending.take().text, "0123456789");
    }

    #[test]
    fn what_an_abandoned_answer_took_comes_back_first() {
        let mut pending = Pending::new(64);
        pending.push(b"one\n");
        let take = pending.takes();
        let abandoned = pending.take();
        pending.push(b"two\n");
        assert!(pending.give_back(abandoned.clone(), take + 1));
        let taken = pending.take();
        assert_eq!(taken.text, "one\ntwo\n");
        assert_eq!((taken.bytes, taken.omitted, taken.total), (8, 0, 8));
        // Refused once another answer took output since: that one was delivered after it.
        let take = pending.takes();
        pending.push(b"three\n");
        let abandoned = pending.take();
        pending.push(b"four\n");
        let _delivered = pending.take();
        assert!(!pending.give_back(abandoned, take + 1));
        assert_eq!(pending.take().bytes, 0);
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let mut pending = Pending::new(8);
        pending.push("aaaé".as_bytes()); // the é spans the head's end
        pending.push(&[b'x'; 10]);
        pending.push("ééb".as_bytes()); // the tail starts inside an é
        let taken = pending.take();
        assert!(!taken.text.contains('\u{FFFD}'), "{}", taken.text);
        assert!(taken.text.starts_with("aaa\n[…"), "{}", taken.text);
        assert!(taken.text.ends_with("\néb"), "{}", taken.text);
        assert_eq!(taken.bytes, 20);
        assert_eq!(taken.omitted, 20 - 3 - 3);
    }
}
