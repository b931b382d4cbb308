//! Task spawning: tokio's scheduler in production, madsim's deterministic one under `sim`.
//!
//! Under `sim`, a spawned task belongs to the simulated node it was spawned on and dies with
//! it when the harness kills that node.

use std::future::Future;

#[cfg(feature = "sim")]
pub use madsim::task::{yield_now, JoinError, JoinHandle};
#[cfg(not(feature = "sim"))]
pub use tokio::task::{yield_now, JoinError, JoinHandle};

/// Spawns a task on the current runtime (the current simulated node under `sim`).
#[allow(clippy::disallowed_methods)]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    #[cfg(feature = "sim")]
    {
        madsim::task::spawn(future)
    }
    #[cfg(not(feature = "sim"))]
    {
        tokio::spawn(future)
    }
}

/// Runs a blocking closure (a syscall such as `fdatasync`) off the async worker threads in
/// production. Under `sim` there are no real blocking calls, so it runs inline in a task.
#[allow(clippy::disallowed_methods)]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    #[cfg(feature = "sim")]
    {
        // madsim deprecates its spawn_blocking; nothing real blocks in a simulation.
        madsim::task::spawn(async move { f() })
    }
    #[cfg(not(feature = "sim"))]
    {
        tokio::task::spawn_blocking(f)
    }
}
