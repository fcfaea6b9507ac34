//! std's locks, poisoning ignored: a panic while a lock was held (none is expected) leaves the
//! data usable as it was left, so one failed request never takes the whole server down.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// [`Mutex::lock`] that takes a poisoned lock's data as it was left.
pub(crate) trait Locked<T: ?Sized> {
    /// Waits for the lock and takes it.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
