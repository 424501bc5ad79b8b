//! The seeds of the proxy's random choices. Every random stream (a service's balancer and
//! retry jitter, per endpoint generation) is seeded from one base: the configuration's
//! [`crate::config::Config::seed`], or one drawn at start, so that replicas of one
//! configuration do not pick, or retry, in step.

use std::hash::{BuildHasher, RandomState};

/// A base seed for this process: `RandomState`'s keys come from the operating system's
/// randomness (the standard library's, no clock and no global RNG of ours).
pub fn drawn() -> u64 {
    RandomState::new().hash_one(0x7461_696c_6775_6172_u64)
}

/// The seed of stream `n` under `base` (splitmix64's finaliser, so that neighbouring `n`
/// give unrelated seeds).
pub fn mix(base: u64, n: u64) -> u64 {
    let mut z = base ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    #[test]
    fn streams_differ_by_base_and_by_number() {
        assert_eq!(super::mix(1, 2), super::mix(1, 2));
        assert_ne!(super::mix(1, 2), super::mix(1, 3));
        assert_ne!(super::mix(1, 2), super::mix(2, 2));
    }

    #[test]
    fn drawn_bases_differ() {
        // Two `RandomState`s of one process differ too (their keys are incremented).
        assert_ne!(super::drawn(), super::drawn());
    }
}
