//! std's locks without poisoning: a panic while a lock is held (a caller's callback, say) does
//! not make every later `lock` fail; the data is taken as it was left, as `parking_lot` did.
//! `parking_lot` was dropped: no measurement showed its speed to matter here (the locks are
//! held for microseconds, a few times per output chunk or sample).

// Compiled into the library and into the command (`serve`), each using a part of it.
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;
use std::time::Instant;

/// A mutual-exclusion lock ([`std::sync::Mutex`], poisoning ignored).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

/// The guard of a [`Mutex`]: the lock is released when it is dropped.
#[derive(Debug)]
pub(crate) struct MutexGuard<'a, T: ?Sized>(Option<std::sync::MutexGuard<'a, T>>);

impl<T> Mutex<T> {
    /// A new lock holding `value`.
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Waits for the lock and takes it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)))
    }

    /// The value, through an exclusive borrow (no locking needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_deref()
            .expect("a guard holds its lock until dropped")
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_deref_mut()
            .expect("a guard holds its lock until dropped")
    }
}

/// A condition variable for a [`Mutex`] ([`std::sync::Condvar`], poisoning ignored).
#[derive(Debug, Default)]
pub(crate) struct Condvar(std::sync::Condvar);

/// Whether a timed wait ended by its deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// The deadline passed (no notification came).
    pub(crate) fn timed_out(self) -> bool {
        self.0
    }
}

impl Condvar {
    /// A new condition variable.
    pub(crate) const fn new() -> Self {
        Condvar(std::sync::Condvar::new())
    }

    /// Wakes every waiter.
    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }

    /// Releases `guard`'s lock until notified, then takes it again.
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        if let Some(held) = guard.0.take() {
            guard.0 = Some(self.0.wait(held).unwrap_or_else(PoisonError::into_inner));
        }
    }

    /// [`wait`](Self::wait), at most until `deadline`.
    pub(crate) fn wait_until<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Instant,
    ) -> WaitTimeoutResult {
        let Some(held) = guard.0.take() else {
            return WaitTimeoutResult(true);
        };
        let timeout = deadline.saturating_duration_since(Instant::now());
        let (held, result) = self
            .0
            .wait_timeout(held, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        guard.0 = Some(held);
        WaitTimeoutResult(result.timed_out())
    }
}

/// A reader-writer lock ([`std::sync::RwLock`], poisoning ignored).
#[derive(Debug, Default)]
pub(crate) struct RwLock<T>(std::sync::RwLock<T>);

impl<T> RwLock<T> {
    /// A new lock holding `value`.
    pub(crate) const fn new(value: T) -> Self {
        RwLock(std::sync::RwLock::new(value))
    }

    /// Takes the lock for reading.
    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock for writing.
    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}
