//! A one-way latch: set once, awaited by any number of tasks. Shutdown signals and failure
//! flags use it.
//!
//! `tokio::sync::watch` would do the same job but breaks determinism under simulation: its
//! receivers wait on one of eight `Notify` shards chosen by tokio's thread-local random
//! generator, which is seeded from a process-wide counter, so two runs of one seed in the same
//! process wake the same tasks in different orders. A plain `Notify` wakes its waiters in a
//! fixed order.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct Latch {
    set: AtomicBool,
    notify: Notify,
}

impl Latch {
    pub fn new() -> Latch {
        Latch::default()
    }

    /// Sets the latch and wakes every waiter. Returns true for the call that set it.
    pub fn set(&self) -> bool {
        let first = !self.set.swap(true, Ordering::AcqRel);
        self.notify.notify_waiters();
        first
    }

    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Returns once the latch is set (at once if it already is).
    pub async fn wait(&self) {
        loop {
            // Register before checking, so a `set` between the check and the wait is seen.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(all(test, not(feature = "sim")))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn waiters_before_and_after_the_set_all_return() {
        let latch = Arc::new(Latch::new());
        let early = {
            let latch = latch.clone();
            crate::rt::task::spawn(async move { latch.wait().await })
        };
        crate::rt::task::yield_now().await;
        assert!(!latch.is_set());
        assert!(latch.set());
        assert!(!latch.set(), "only the first set reports setting it");
        early.await.unwrap();
        latch.wait().await;
    }
}
