//! The event stream: [`Event`] and the emitter that never blocks the child or the readers.

use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::activity::{ActivitySource, StampObserver};
use crate::outcome::Outcome;
use crate::pid::Pid;
use crate::signal::Signal;
use crate::stream::Stream;

/// Something that happened to a supervised child, in order.
///
/// `Started` comes first, `Exited` exactly once, `Closed` last (after the output is drained).
/// `Output` and `Activity` events are best effort: when the consumer falls behind they are
/// dropped (counted, and the next `Output` of that stream is flagged `truncated`), so a slow or
/// absent consumer never slows the child.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The child runs.
    Started {
        /// Its pid.
        pid: Pid,
        /// Its process group (equal to the pid).
        pgid: Pid,
    },
    /// Output, throttled to at most one event per stream per throttle interval, at most
    /// `chunk_cap` bytes each.
    Output {
        /// Which stream.
        stream: Stream,
        /// Per stream, counting dropped events too (a gap means events were dropped).
        seq: u64,
        /// The bytes (possibly only the start of what arrived in the interval).
        bytes: Vec<u8>,
        /// Bytes were left out before or within this event (capped, or events dropped).
        truncated: bool,
    },
    /// A source showed activity (rate-limited: at most one per source per throttle interval).
    Activity {
        /// Which source.
        source: ActivitySource,
    },
    /// Every source has been quiet for a while: the child will be ended in `left` unless
    /// something happens. Once per idle spell.
    IdleWarning {
        /// Time left before the idle timeout.
        left: Duration,
    },
    /// Completion was seen ([`CompletionConfig`](crate::CompletionConfig)): the child has the
    /// linger to exit by itself. Once at most.
    Completed {
        /// What matched, and when.
        seen: crate::outcome::CompletionSeen,
    },
    /// What the tree is doing, from one snapshot of its processes: sent with each idle
    /// warning and when the child is judged stale (before the first signal).
    Diagnosis(crate::diagnosis::Diagnosis),
    /// The whole tree has been blocked on input (its read counts unchanged) for the input-wait
    /// timeout while every source was quiet: once per episode, before the child is ended.
    InputWait(crate::diagnosis::InputWait),
    /// Observe mode ([`MonitorConfig::observe`](crate::MonitorConfig::observe)): quietus would
    /// have ended the run now, and why; the program goes on.
    Observed(crate::outcome::Observation),
    /// A step of the kill ladder was sent.
    Signal {
        /// The signal.
        signal: Signal,
        /// Its step in the ladder (0 first).
        step: usize,
    },
    /// The run's outcome is decided and the child reaped.
    Exited {
        /// Why it ended.
        outcome: Outcome,
        /// Its exit status (`None` if termination is unproven).
        status: Option<ExitStatus>,
    },
    /// The output is drained; no event follows.
    Closed,
}

/// Room kept free in the channel for the lifecycle events (`Exited`, `Closed`, ladder signals).
const RESERVED: usize = 16;

/// Sends events without ever blocking.
///
/// The channel is unbounded underneath and bounded by count here (at most `capacity` events
/// wait): an array channel of `capacity` slots would be allocated and written whole at every
/// session's start (about a third of a millisecond for the default 1024, in a run of
/// `quietus -- true`), where most runs send a handful of events.
#[derive(Debug)]
pub(crate) struct Emitter {
    tx: Sender<Event>,
    rx: Receiver<Event>,
    capacity: usize,
    dropped: AtomicU64,
}

impl Emitter {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(RESERVED + 1);
        let (tx, rx) = crossbeam_channel::unbounded();
        Self {
            tx,
            rx,
            capacity,
            dropped: AtomicU64::new(0),
        }
    }

    pub(crate) fn receiver(&self) -> Receiver<Event> {
        self.rx.clone()
    }

    /// SessionState events: use the reserved room.
    pub(crate) fn lifecycle(&self, event: Event) {
        if self.tx.len() >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self.tx.try_send(event) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Best-effort events: refused (and counted) when the channel is nearly full.
    pub(crate) fn best_effort(&self, event: Event) -> bool {
        if self.tx.len() + RESERVED >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        match self.tx.try_send(event) {
            Ok(()) => true,
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Events dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Turns board stamps into `Activity` events, at most one per source per throttle interval.
#[derive(Debug)]
pub(crate) struct ActivityEvents {
    emitter: Arc<Emitter>,
    /// The throttle interval, in nanoseconds.
    throttle: u64,
    /// Per source (board order), 1 + nanoseconds after the board's origin of the latest
    /// `Activity` event (0: none yet).
    last: [AtomicU64; ActivitySource::ALL.len()],
}

impl ActivityEvents {
    pub(crate) fn new(emitter: Arc<Emitter>, throttle: Duration) -> Self {
        Self {
            emitter,
            throttle: crate::clock::saturating_nanos(throttle),
            last: Default::default(),
        }
    }
}

impl StampObserver for ActivityEvents {
    fn stamped(&self, source: &ActivitySource, at: Duration) {
        let nanos = crate::clock::saturating_nanos(at);
        // Probes answer at most once per check interval: no throttle needed.
        let Some(index) = source.index() else {
            self.emitter.best_effort(Event::Activity {
                source: source.clone(),
            });
            return;
        };
        let last = &self.last[index];
        let previous = last.load(Ordering::Relaxed);
        let due =
            previous == 0 || nanos.saturating_add(1) >= previous.saturating_add(self.throttle);
        if due
            && last
                .compare_exchange(previous, nanos + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.emitter.best_effort(Event::Activity {
                source: source.clone(),
            });
        }
    }
}

/// Where the last complete UTF-8 character of `bytes` ends (an incomplete sequence at the end
/// is left for the next chunk; invalid bytes are not held back).
pub(crate) fn utf8_cut(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // Look at most 3 bytes back for the start of a multi-byte sequence.
    for back in 1..=3.min(len) {
        let b = bytes[len - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte
        }
        let need = if b & 0b1110_0000 == 0b1100_0000 {
            2
        } else if b & 0b1111_0000 == 0b1110_0000 {
            3
        } else if b & 0b1111_1000 == 0b1111_0000 {
            4
        } else {
            1
        };
        return if need > back { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_effort_keeps_room_for_lifecycle_events() {
        let e = Emitter::new(20);
        let mut sent = 0;
        while e.best_effort(Event::Activity {
            source: ActivitySource::Output,
        }) {
            sent += 1;
        }
        assert_eq!(sent, 20 - RESERVED);
        assert_eq!(e.dropped(), 1);
        e.lifecycle(Event::Closed);
        let rx = e.receiver();
        assert_eq!(rx.try_iter().last(), Some(Event::Closed));
    }

    #[test]
    fn lifecycle_events_never_go_past_the_capacity() {
        let e = Emitter::new(20);
        for _ in 0..25 {
            e.lifecycle(Event::Closed);
        }
        assert_eq!(e.dropped(), 5);
        assert_eq!(e.receiver().try_iter().count(), 20);
        // Room again once the receiver took some.
        e.lifecycle(Event::Closed);
        assert_eq!(e.dropped(), 5);
        assert!(e.best_effort(Event::Activity {
            source: ActivitySource::Output
        }));
        assert_eq!(e.receiver().try_iter().count(), 2);
    }

    #[test]
    fn activity_events_are_throttled_per_source() {
        let emitter = Arc::new(Emitter::new(100));
        let rx = emitter.receiver();
        let events = ActivityEvents::new(emitter, Duration::from_secs(1));
        let ms = Duration::from_millis;
        events.stamped(&ActivitySource::Output, ms(0)); // the first one always goes
        events.stamped(&ActivitySource::Output, ms(500)); // within the interval: none
        events.stamped(&ActivitySource::Files, ms(500)); // another source: its own interval
        events.stamped(&ActivitySource::Output, ms(999));
        events.stamped(&ActivitySource::Output, ms(1000)); // one interval later
        let sources: Vec<_> = rx
            .try_iter()
            .map(|e| match e {
                Event::Activity { source } => source,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            sources,
            [
                ActivitySource::Output,
                ActivitySource::Files,
                ActivitySource::Output
            ]
        );
    }

    #[test]
    fn utf8_cuts_keep_characters_whole() {
        let text = "aé€😀".as_bytes(); // 1 + 2 + 3 + 4 bytes
        assert_eq!(utf8_cut(text), text.len());
        assert_eq!(utf8_cut(&text[..text.len() - 1]), 6);
        assert_eq!(utf8_cut(&text[..5]), 3);
        assert_eq!(utf8_cut(&text[..2]), 1);
        assert_eq!(utf8_cut(b"plain"), 5);
        assert_eq!(utf8_cut(&[0xff, 0xfe]), 2);
        assert_eq!(utf8_cut(&[]), 0);
    }
}
