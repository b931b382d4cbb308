//! Monotonic time, sleeping and timeouts.
//!
//! The monotonic clock is shared by every node of a simulation (madsim has one global clock);
//! per-node wall clocks with skew and jumps live in [`super::clock`].

use std::future::Future;
pub use std::time::{Duration, Instant};

/// Milliseconds from `origin` to now: the `now_ms` a core's inputs carry, from a driver's
/// start (0 if the clock reads before `origin`).
pub fn millis_since(origin: Instant) -> u64 {
    u64::try_from(now().saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
}

/// The current monotonic instant (simulated under `sim`).
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    #[cfg(feature = "sim")]
    {
        madsim::time::TimeHandle::current().now_instant()
    }
    #[cfg(not(feature = "sim"))]
    {
        Instant::now()
    }
}

/// The host's wall clock in milliseconds since the Unix epoch (simulated under `sim`).
/// Code above `rt` reads wall time through a [`super::clock::Clock`], which adds skew.
#[allow(clippy::disallowed_methods)]
pub(crate) fn system_now_ms() -> i64 {
    #[cfg(feature = "sim")]
    let now = madsim::time::TimeHandle::current().now_time();
    #[cfg(not(feature = "sim"))]
    let now = std::time::SystemTime::now();
    match now.duration_since(std::time::UNIX_EPOCH) {
        Ok(elapsed) => i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        // A wall clock before 1970 is a misconfigured host; report it as the epoch.
        Err(_) => 0,
    }
}

/// Sleeps for `duration`.
pub async fn sleep(duration: Duration) {
    #[cfg(feature = "sim")]
    madsim::time::sleep(duration).await;
    #[cfg(not(feature = "sim"))]
    tokio::time::sleep(duration).await;
}

/// The deadline of a [`timeout`] passed before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed {
    pub after: Duration,
}

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out after {} ms", self.after.as_millis())
    }
}

impl std::error::Error for Elapsed {}

/// Runs `future` for at most `duration`.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    #[cfg(feature = "sim")]
    let result = madsim::time::timeout(duration, future).await;
    #[cfg(not(feature = "sim"))]
    let result = tokio::time::timeout(duration, future).await;
    result.map_err(|_| Elapsed { after: duration })
}
