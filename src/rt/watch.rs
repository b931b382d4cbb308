//! A published value that readers copy and wait on: the last value wins, a reader never sees
//! a half-written one, and [`Watched::wait_for`] wakes on every change (built on `rt::time`,
//! so simulated time bounds its waits under `sim`).
//!
//! Invariant: a waiter re-reads the value after registering for the next change, so a change
//! between its read and its wait is never missed.

use std::sync::Mutex;

use tokio::sync::Notify;

use super::time::{self, Duration};

/// A value shared between one writer and many readers.
#[derive(Debug, Default)]
pub struct Watched<T> {
    value: Mutex<T>,
    changed: Notify,
}

impl<T: Clone + PartialEq> Watched<T> {
    pub fn new(value: T) -> Watched<T> {
        Watched {
            value: Mutex::new(value),
            changed: Notify::new(),
        }
    }

    pub fn get(&self) -> T {
        match self.value.lock() {
            Ok(value) => value.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the value; waiters wake if it changed.
    pub fn set(&self, value: T) {
        let changed = match self.value.lock() {
            Ok(mut current) => std::mem::replace(&mut *current, value) != *current,
            Err(poisoned) => {
                *poisoned.into_inner() = value;
                true
            }
        };
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// Waits until `ready` holds for the value, at most `timeout`; the last value if not.
    pub async fn wait_for(&self, timeout: Duration, ready: impl Fn(&T) -> bool) -> Result<T, T> {
        let deadline = time::now() + timeout;
        loop {
            let notified = self.changed.notified();
            let value = self.get();
            if ready(&value) {
                return Ok(value);
            }
            let left = deadline.saturating_duration_since(time::now());
            if left.is_zero() || time::timeout(left, notified).await.is_err() {
                let value = self.get();
                return if ready(&value) { Ok(value) } else { Err(value) };
            }
        }
    }
}
