//! The runtime boundary: the only door to tasks, time, network, randomness and disk.
//!
//! Everything above this module (log, broker, clients, ...) is written once against the
//! functions and types re-exported here. In production they are tokio and real files; with the
//! `sim` feature (and `--cfg madsim`) they are madsim's deterministic simulator and an
//! in-memory disk owned by the test harness. The choice is made at compile time, so there is
//! no generic runtime parameter anywhere in the code base.
//!
//! Invariants:
//! - No code outside `rt` calls `tokio::spawn`, `std::thread::spawn`, `Instant::now`,
//!   `SystemTime::now`, `rand::thread_rng` or `std::fs`/`tokio::fs` (enforced by clippy's
//!   `disallowed-methods` in `clippy.toml`; `rt` opts out locally with `#[allow]`).
//! - Under `sim`, a seed determines everything: task order, time, the network, disk latency,
//!   injected disk faults and every random number drawn through [`rand`].

#[cfg(all(feature = "sim", not(madsim)))]
compile_error!(
    "the `sim` feature needs `--cfg madsim` in rustflags: .cargo/config.toml sets it, but a \
     RUSTFLAGS environment variable replaces it. Add `--cfg madsim` to RUSTFLAGS or unset it."
);

pub mod clock;
pub mod disk;
pub mod fault;
pub mod latch;
pub mod net;
pub mod rand;
pub mod signal;
pub mod task;
pub mod time;
pub mod watch;

/// True when this build runs inside madsim's simulator.
pub const SIMULATION: bool = cfg!(feature = "sim");

/// Runs a future to completion on the runtime `rt` is built for, for unit tests: madsim's
/// simulator under `sim` (randomness and the disk need its context there), tokio otherwise.
#[cfg(test)]
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    #[cfg(feature = "sim")]
    {
        madsim::runtime::Runtime::new().block_on(future)
    }
    #[cfg(not(feature = "sim"))]
    {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(future)
    }
}
