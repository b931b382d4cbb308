//! Per-node wall clocks.
//!
//! madsim has one global clock, but real nodes disagree about the time and their clocks jump
//! (NTP steps, VM pauses). A [`Clock`] is the wall clock one node reads: the host clock plus an
//! offset that the simulation harness can skew and jump. Clocks are cheap to clone; clones
//! share the offset, so the harness keeps one outside the node and it survives restarts.
//!
//! Invariant: only wall-clock readings (timestamps, time-based segment roll, retention) go
//! through a `Clock`; durations and timeouts use the monotonic [`super::time::now`], which
//! never jumps.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

#[derive(Clone, Debug, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// A clock that reads the host's wall clock unchanged.
    pub fn new() -> Clock {
        Clock::default()
    }

    /// Milliseconds since the Unix epoch, as this node sees them.
    pub fn now_ms(&self) -> i64 {
        super::time::system_now_ms().saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Jumps this node's clock by `delta_ms` (negative: backwards).
    pub fn jump(&self, delta_ms: i64) {
        self.offset_ms.fetch_add(delta_ms, Ordering::Relaxed);
    }

    /// The current skew against the host clock.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}
