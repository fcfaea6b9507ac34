//! Everything a stdio server (`serve`, `mcp`) sends goes through one queue and one writer
//! thread, so a client that reads slowly (or not at all) never blocks a child, the dispatcher
//! or an event forwarder.
//!
//! Two kinds of lines: *essential* ones (answers, and the lifecycle notifications `started`,
//! `idleWarning`, `exited`, `closed`) are always queued — their bytes are bounded by the
//! requests the client sends (the stdin reader stops reading while [`ESSENTIAL_BUDGET`] bytes
//! of them wait: [`Outbox::wait_for_room`]; a few requests already read may still add their
//! answers) and by the processes; *droppable* ones (`output`, `activity`) are
//! queued only while the droppable bytes waiting stay under a budget, and dropped otherwise
//! (the forwarder counts them and flags the next output notification `truncated`).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::locks::Locked;
use serde_json::Value;
use std::collections::VecDeque;

/// Bytes of droppable lines that may wait for the client at most.
pub(crate) const DROPPABLE_BUDGET: usize = 4 * 1024 * 1024;
/// Bytes of essential lines that may wait before the stdin reader stops reading requests: a
/// client that asks for snapshots and never reads them holds the server to about this much
/// (plus the answers to the requests read before it was reached), whatever their size.
pub(crate) const ESSENTIAL_BUDGET: usize = 16 * 1024 * 1024;
/// What one waiting line costs beyond its bytes (its place in the queue), counted against the
/// budget so that many tiny answers are bounded too.
const LINE_OVERHEAD: usize = 64;

#[derive(Debug, Default)]
struct Queue {
    lines: VecDeque<(Vec<u8>, bool)>,
    droppable_bytes: usize,
    /// Bytes (with [`LINE_OVERHEAD`] each) of the essential lines waiting.
    essential_bytes: usize,
    /// The writer failed (the client's end is gone) or the server is ending.
    closed: bool,
    /// A line is being written.
    writing: bool,
}

/// The queue of lines for the client's stdin (the server's stdout).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Outbox {
    /// Queues an essential line (an answer or a lifecycle notification).
    pub(crate) fn send(&self, message: &Value) {
        self.push(line(message), false);
    }

    /// Queues a droppable line unless the budget is spent; `false` when it was dropped.
    pub(crate) fn offer(&self, message: &Value) -> bool {
        let line = line(message);
        {
            let queue = self.queue();
            if queue.droppable_bytes + line.len() > DROPPABLE_BUDGET {
                return false;
            }
        }
        self.push(line, true);
        true
    }

    fn push(&self, line: Vec<u8>, droppable: bool) {
        let mut queue = self.queue();
        if queue.closed {
            return;
        }
        if droppable {
            queue.droppable_bytes += line.len();
        } else {
            queue.essential_bytes += line.len() + LINE_OVERHEAD;
        }
        queue.lines.push_back((line, droppable));
        self.changed.notify_all();
    }

    /// The queue; a panic elsewhere while it was held leaves it usable as it was left.
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.locked()
    }

    /// Blocks while [`ESSENTIAL_BUDGET`] bytes of essential lines wait (the client does not
    /// read its answers).
    pub(crate) fn wait_for_room(&self) {
        let mut queue = self.queue();
        while queue.essential_bytes >= ESSENTIAL_BUDGET && !queue.closed {
            queue = self
                .changed
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Bytes of droppable lines and of essential lines (with their overhead) waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> (usize, usize) {
        let queue = self.queue();
        (queue.droppable_bytes, queue.essential_bytes)
    }

    /// Waits until every queued line is written, the writer failed, or `timeout` passed.
    pub(crate) fn drain(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut queue = self.queue();
        while (!queue.lines.is_empty() || queue.writing) && !queue.closed {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            queue = match self.changed.wait_timeout(queue, left) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Starts the writer thread on `out`; `gone` runs once when a write fails.
    pub(crate) fn start_writer(
        self: &Arc<Self>,
        mut out: impl Write + Send + 'static,
        gone: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        let outbox = self.clone();
        std::thread::Builder::new()
            .name("quietus-rpc-out".into())
            .spawn(move || {
                while let Some(line) = outbox.next_line() {
                    let written = out.write_all(&line).and_then(|()| out.flush());
                    let mut queue = outbox.queue();
                    queue.writing = false;
                    if written.is_err() {
                        queue.closed = true;
                        queue.lines.clear();
                        queue.droppable_bytes = 0;
                        queue.essential_bytes = 0;
                        outbox.changed.notify_all();
                        drop(queue);
                        gone();
                        return;
                    }
                    outbox.changed.notify_all();
                }
            })
            .map(drop)
    }

    /// The next line to write, blocking; `None` once closed.
    fn next_line(&self) -> Option<Vec<u8>> {
        let mut queue = self.queue();
        loop {
            if queue.closed {
                return None;
            }
            if let Some((line, droppable)) = queue.lines.pop_front() {
                if droppable {
                    queue.droppable_bytes -= line.len();
                } else {
                    queue.essential_bytes -= line.len() + LINE_OVERHEAD;
                }
                queue.writing = true;
                self.changed.notify_all();
                return Some(line);
            }
            queue = self
                .changed
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// One JSON object and a newline.
fn line(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn droppable_lines_stop_at_the_budget_and_essential_ones_do_not() {
        let outbox = Outbox::default();
        let big = json!({"data": "x".repeat(64 * 1024)});
        let mut taken = 0;
        while outbox.offer(&big) {
            taken += 1;
            assert!(taken < 1000, "the budget never ran out");
        }
        let (bytes, _) = outbox.waiting();
        assert!(
            bytes <= DROPPABLE_BUDGET && bytes > DROPPABLE_BUDGET - 70 * 1024,
            "{bytes}"
        );
        for _ in 0..10 {
            outbox.send(&json!({"id": 1}));
        }
        assert_eq!(
            outbox.waiting().1,
            10 * (r#"{"id":1}"#.len() + 1 + LINE_OVERHEAD)
        );
        // Written lines make room again.
        let line = outbox.next_line().expect("a line");
        assert!(line.ends_with(b"\n"));
        assert!(outbox.offer(&big));
    }

    /// A client that asks for large answers and never reads them holds the server to a
    /// bounded number of bytes, not of answers: the reader waits once the answers waiting
    /// reach the budget, and goes on once the client has read enough of them.
    #[test]
    fn the_reader_waits_once_unread_answers_reach_the_byte_budget() {
        let outbox = Arc::new(Outbox::default());
        let answer = json!({"id": 1, "result": {"head": "x".repeat(1024 * 1024)}});
        let answers = ESSENTIAL_BUDGET / (1024 * 1024) + 1;
        for _ in 0..answers {
            outbox.send(&answer);
        }
        assert!(answers < 4096, "far fewer answers than any count cap");
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waiter = outbox.clone();
        std::thread::spawn(move || {
            waiter.wait_for_room();
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the reader went on with {} bytes of answers unread",
            outbox.waiting().1
        );
        // The client reads two answers: room again.
        outbox.next_line().expect("an answer");
        outbox.next_line().expect("an answer");
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the reader goes on once answers were read");
        assert!(outbox.waiting().1 < ESSENTIAL_BUDGET);
    }

    #[test]
    fn a_failed_writer_closes_the_queue() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let outbox = Arc::new(Outbox::default());
        let (tx, rx) = crossbeam_channel::bounded(1);
        outbox
            .start_writer(Broken, move || {
                let _ = tx.send(());
            })
            .unwrap();
        outbox.send(&json!({"id": 1}));
        rx.recv_timeout(Duration::from_secs(30))
            .expect("gone is called");
        outbox.send(&json!({"id": 2}));
        assert_eq!(outbox.waiting(), (0, 0));
        outbox.wait_for_room(); // does not block once closed
    }
}
