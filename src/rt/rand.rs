//! Randomness. Under `sim` every number comes from madsim's seeded generator, so a seed
//! reproduces a run; in production it comes from the operating system's entropy.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A uniformly random `u64`.
#[allow(clippy::disallowed_methods)]
pub fn random_u64() -> u64 {
    #[cfg(feature = "sim")]
    {
        madsim::rand::thread_rng().gen()
    }
    #[cfg(not(feature = "sim"))]
    {
        rand::thread_rng().gen()
    }
}

/// A fast generator seeded from [`random_u64`]: deterministic per seed under `sim`.
pub fn small_rng() -> SmallRng {
    SmallRng::seed_from_u64(random_u64())
}
