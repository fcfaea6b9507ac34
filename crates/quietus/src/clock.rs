//! Time, injectable: [`Clock`] (the system's, by default) and the test [`MockClock`].
//!
//! Every duration quietus measures (idle timeout, hard deadline, grace periods, drain caps,
//! sampling) is measured through a `Clock`, so a test that injects a [`MockClock`] controls all
//! of them and never sleeps.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex};
use crossbeam_channel::{Receiver, Sender};

/// `d` in nanoseconds, saturating at `u64::MAX` (584 years): for durations kept in atomics.
pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// What a [`Clock`] reads: the system's monotonic time, or a [`MockClock`]'s.
///
/// `at(deadline)` returns a channel that receives one `Instant` (the clock's time at firing) once
/// `now() >= deadline`; a deadline already in the past fires at once. The monitor waits on such
/// a channel together with its control channel, so it sleeps until exactly the next instant at
/// which its decision can change.
pub(crate) trait TimeSource: Send + Sync + 'static {
    /// The current instant. Monotonic: never goes backwards.
    fn now(&self) -> Instant;
    /// A channel that receives one message once `now() >= deadline`.
    fn at(&self, deadline: Instant) -> Receiver<Instant>;
    /// Whether this is the system's real time (then a `poll` timeout reaches its deadlines).
    fn is_system(&self) -> bool {
        false
    }
}

/// The real time: [`Instant::now`] (monotonic, never wall time) and [`crossbeam_channel::at`].
#[derive(Debug, Clone, Copy, Default)]
struct SystemTime;

impl TimeSource for SystemTime {
    fn is_system(&self) -> bool {
        true
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn at(&self, deadline: Instant) -> Receiver<Instant> {
        crossbeam_channel::at(deadline)
    }
}

/// The clock every duration of a session is measured with: the system's monotonic clock
/// ([`Clock::system`], the default), or a [`MockClock`] that a test moves by hand.
///
/// A handle: cloning it gives the same clock. Give one to your own orchestration code too, so
/// that a test drives the session and your loop on the same mock time:
///
/// ```
/// use std::time::Duration;
/// use quietus::{Clock, MockClock};
///
/// // Code under test: waits a minute of the clock it is given.
/// fn back_off(clock: &Clock) -> std::time::Instant {
///     clock.sleep(Duration::from_secs(60));
///     clock.now()
/// }
///
/// let mock = MockClock::new();
/// let start = mock.now();
/// let clock = Clock::from(&mock);
/// let waiter = std::thread::spawn(move || back_off(&clock));
/// assert!(mock.wait_for_timers(1, Duration::from_secs(10))); // it is asleep
/// mock.advance(Duration::from_secs(60)); // a minute, at once
/// assert_eq!(waiter.join().unwrap(), start + Duration::from_secs(60));
/// ```
#[derive(Clone)]
pub struct Clock(Arc<dyn TimeSource>);

impl Clock {
    /// The system's monotonic clock ([`Instant::now`], never wall time).
    pub fn system() -> Clock {
        Clock(Arc::new(SystemTime))
    }

    /// The current instant. Monotonic: never goes backwards.
    pub fn now(&self) -> Instant {
        self.0.now()
    }

    /// Blocks until this clock reaches `deadline` (at once when it has): in real time on the
    /// system clock, until a test advances a mock clock that far.
    pub fn sleep_until(&self, deadline: Instant) {
        let _ = self.0.at(deadline).recv();
    }

    /// Blocks for `duration` of this clock.
    pub fn sleep(&self, duration: Duration) {
        if let Some(deadline) = self.now().checked_add(duration) {
            self.sleep_until(deadline);
        }
    }

    /// A channel that receives one message once `now() >= deadline`.
    pub(crate) fn at(&self, deadline: Instant) -> Receiver<Instant> {
        self.0.at(deadline)
    }

    /// Whether this is the system's clock ([`Clock::system`], however it was given): the
    /// monitor then sleeps in `poll` with its deadline as the timeout, and no relay of the
    /// clock's timers is needed.
    pub(crate) fn is_system(&self) -> bool {
        self.0.is_system()
    }
}

impl Default for Clock {
    /// [`Clock::system`].
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

impl From<MockClock> for Clock {
    fn from(mock: MockClock) -> Clock {
        Clock(Arc::new(mock))
    }
}

impl From<&MockClock> for Clock {
    fn from(mock: &MockClock) -> Clock {
        Clock(Arc::new(mock.clone()))
    }
}

/// A clock that moves only when a test calls [`MockClock::advance`].
///
/// Cloning gives another handle to the same clock. Timers (each wait of the code under test on a deadline) fire during
/// `advance` once their deadline has been reached. A test that needs the code under test to have
/// finished reacting before it advances calls [`MockClock::wait_for_timers`]: it returns once
/// at least `n` timers are armed in the future, that is once the monitor has planned its next
/// wake-up and is parked on it.
///
/// A [`Clock`] made from it ([`Clock::from`]) reads it; give one to a
/// [`SessionBuilder`](crate::SessionBuilder) (which takes the mock itself too).
///
/// ```
/// use std::time::Duration;
/// use quietus::{Clock, MockClock};
///
/// let mock = MockClock::new();
/// let clock = Clock::from(&mock);
/// let start = clock.now();
/// mock.advance(Duration::from_secs(60));
/// assert_eq!(clock.now(), start + Duration::from_secs(60));
/// ```
#[derive(Clone)]
pub struct MockClock {
    inner: Arc<MockInner>,
}

struct MockInner {
    state: Mutex<MockState>,
    changed: Condvar,
}

struct MockState {
    now: Instant,
    timers: Vec<(Instant, Sender<Instant>)>,
    created: u64,
}

impl MockState {
    /// Timers not yet fired with a deadline after `now`. A timer whose receiver was dropped
    /// before it fired still counts until its deadline passes (a channel cannot be asked whether
    /// its receiver is gone without sending); the monitor re-uses its timer while its deadline
    /// is unchanged, so such leftovers only appear when a control message changed its plan.
    fn armed(&self) -> usize {
        self.timers
            .iter()
            .filter(|(deadline, tx)| *deadline > self.now && tx.is_empty())
            .count()
    }
}

impl fmt::Debug for MockClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.lock();
        f.debug_struct("MockClock")
            .field("now", &state.now)
            .field("timers", &state.timers.len())
            .finish()
    }
}

impl Default for MockClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MockClock {
    /// A new mock clock. Its `now()` starts at the real `Instant::now()` of this call and then
    /// moves only with [`advance`](Self::advance).
    pub fn new() -> Self {
        Self {
            inner: Arc::new(MockInner {
                state: Mutex::new(MockState {
                    now: Instant::now(),
                    timers: Vec::new(),
                    created: 0,
                }),
                changed: Condvar::new(),
            }),
        }
    }

    /// The clock's current instant.
    pub fn now(&self) -> Instant {
        self.inner.state.lock().now
    }

    /// A channel that receives one message once `now() >= deadline` (what a [`Clock`] made
    /// from this mock waits on).
    #[cfg(test)]
    pub(crate) fn at(&self, deadline: Instant) -> Receiver<Instant> {
        TimeSource::at(self, deadline)
    }

    /// Moves time forward by `by` and fires every timer whose deadline has been reached.
    /// Returns how many timers fired.
    pub fn advance(&self, by: Duration) -> usize {
        let mut state = self.inner.state.lock();
        state.now += by;
        let now = state.now;
        let mut fired = 0;
        state.timers.retain(|(deadline, tx)| {
            if *deadline <= now {
                // A full or disconnected channel means nobody waits on this timer any more.
                if tx.try_send(now).is_ok() {
                    fired += 1;
                }
                false
            } else {
                true
            }
        });
        drop(state);
        self.inner.changed.notify_all();
        fired
    }

    /// How many timers are armed: not yet fired, with a deadline after `now()`.
    pub fn armed_timers(&self) -> usize {
        self.inner.state.lock().armed()
    }

    /// How many timers have been requested since the clock was made (each wait of the code
    /// under test on a deadline is one). A test
    /// can use it to prove that the code under test does not poll: a silent child under an idle
    /// timeout of hours needs one timer, not thousands.
    pub fn timers_created(&self) -> u64 {
        self.inner.state.lock().created
    }

    /// Blocks (in real time, at most `real_timeout`) until a timer for exactly `deadline` is
    /// armed: the code under test has planned that wake-up. Returns whether that happened.
    pub fn wait_for_deadline(&self, deadline: Instant, real_timeout: Duration) -> bool {
        self.wait_until(real_timeout, |state| {
            state
                .timers
                .iter()
                .any(|(d, tx)| *d == deadline && tx.is_empty())
        })
    }

    /// Blocks (in real time, at most `real_timeout`) until at least `n` timers are armed in the
    /// future. Returns whether that happened. Tests use it to know that the monitor has reacted
    /// to everything so far and is parked on its next deadline before they advance the clock.
    pub fn wait_for_timers(&self, n: usize, real_timeout: Duration) -> bool {
        self.wait_until(real_timeout, |state| state.armed() >= n)
    }

    /// Blocks (in real time, at most `real_timeout`) until `condition` holds on the timer
    /// state, re-checked whenever a timer is armed or the clock moves.
    fn wait_until(&self, real_timeout: Duration, condition: impl Fn(&MockState) -> bool) -> bool {
        let give_up = Instant::now() + real_timeout;
        let mut state = self.inner.state.lock();
        while !condition(&state) {
            if self
                .inner
                .changed
                .wait_until(&mut state, give_up)
                .timed_out()
            {
                return condition(&state);
            }
        }
        true
    }
}

impl TimeSource for MockClock {
    fn now(&self) -> Instant {
        MockClock::now(self)
    }

    fn at(&self, deadline: Instant) -> Receiver<Instant> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut state = self.inner.state.lock();
        state.created += 1;
        if deadline <= state.now {
            // Capacity 1 and a fresh channel: this send cannot fail.
            let _ = tx.try_send(state.now);
        } else {
            state.timers.push((deadline, tx));
        }
        drop(state);
        self.inner.changed.notify_all();
        rx
    }
}

/// Tests: polls `condition` every 10 ms for up to 20 s of real time (a real process or
/// thread must act); whether it came true.
#[cfg(test)]
pub(crate) fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < give_up {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    condition()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_deadline_fires_at_once() {
        let clock = MockClock::new();
        let rx = clock.at(clock.now());
        assert!(rx.try_recv().is_ok());
    }

    #[test]
    fn advance_fires_only_due_timers() {
        let clock = MockClock::new();
        let t0 = clock.now();
        let a = clock.at(t0 + Duration::from_secs(1));
        let b = clock.at(t0 + Duration::from_secs(3));
        assert_eq!(clock.armed_timers(), 2);
        assert_eq!(clock.advance(Duration::from_secs(2)), 1);
        assert!(a.try_recv().is_ok());
        assert!(b.try_recv().is_err());
        assert_eq!(clock.armed_timers(), 1);
        assert_eq!(clock.advance(Duration::from_secs(1)), 1);
        assert!(b.try_recv().is_ok());
        assert_eq!(clock.now(), t0 + Duration::from_secs(3));
    }

    #[test]
    fn wait_for_timers_sees_a_timer_armed_by_another_thread() {
        let clock = MockClock::new();
        let c2 = clock.clone();
        let handle = std::thread::spawn(move || {
            let rx = c2.at(c2.now() + Duration::from_secs(10));
            rx.recv().unwrap()
        });
        assert!(clock.wait_for_timers(1, Duration::from_secs(10)));
        clock.advance(Duration::from_secs(10));
        let fired = handle.join().unwrap();
        assert_eq!(fired, clock.now());
    }

    #[test]
    fn wait_for_timers_times_out() {
        let clock = MockClock::new();
        assert!(!clock.wait_for_timers(1, Duration::from_millis(1)));
    }

    /// The clock is asked whether it is the system's (issue 37): `Clock::system()` given
    /// explicitly is the real clock as much as the default is, and a mock never is.
    #[test]
    fn the_system_clock_says_so_however_it_was_given() {
        assert!(Clock::system().is_system());
        assert!(Clock::default().is_system());
        assert!(Clock::system().clone().is_system());
        let mock = MockClock::new();
        assert!(!Clock::from(&mock).is_system());
        assert!(!Clock::from(mock).is_system());
    }
}
