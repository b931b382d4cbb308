//! What the quorum benches share: the run length, percentiles, their scratch directory.

use std::path::{Path, PathBuf};

/// `SAMSA_BENCH_SECONDS`, each run's length (default 5).
pub fn bench_seconds() -> u64 {
    std::env::var("SAMSA_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// `target/bench-tmp`, where the benches keep their directories.
pub fn bench_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-tmp"))
}

/// The `p` quantile of sorted samples (0 when there are none).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

// Cleanup of a bench's own directory after the measurement, outside the system under test.
#[allow(clippy::disallowed_methods)]
pub fn remove(root: &Path) {
    let _ = std::fs::remove_dir_all(root);
}
