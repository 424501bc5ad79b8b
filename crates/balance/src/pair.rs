//! The power-of-two-choices draw: two distinct indices, uniform over all ordered pairs.
//!
//! The first is uniform over `0..n`; the second is uniform over the `n - 1` others (a draw
//! from `0..n - 1` that skips the first). Two draws, no rejection loop, so the number of RNG
//! calls per pick is fixed and a seeded run is reproducible. [`crate::best_of`] and
//! [`crate::aperture`] both draw their pair here.

use rand::{Rng, RngCore};

/// Two distinct indices below `n` (which must be at least 2), uniform over ordered pairs.
pub fn distinct_pair(n: usize, rng: &mut dyn RngCore) -> (usize, usize) {
    debug_assert!(n >= 2, "a pair needs two candidates");
    let first = rng.random_range(0..n);
    let mut second = rng.random_range(0..n - 1);
    if second >= first {
        second += 1;
    }
    (first, second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    proptest! {
        #[test]
        fn the_two_are_distinct_and_in_range(n in 2usize..10_000, seed in any::<u64>()) {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            for _ in 0..16 {
                let (a, b) = distinct_pair(n, &mut rng);
                prop_assert!(a < n && b < n && a != b);
            }
        }

        /// Every ordered pair is about equally likely: within 6 standard deviations of the
        /// expected count (a fair draw misses it about once in 500 million per pair).
        #[test]
        fn every_ordered_pair_is_equally_likely(n in 2usize..7, seed in any::<u64>()) {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let pairs = n * (n - 1);
            let draws = 2_000 * pairs;
            let mut counts = vec![0usize; n * n];
            for _ in 0..draws {
                let (a, b) = distinct_pair(n, &mut rng);
                counts[a * n + b] += 1;
            }
            let p = 1.0 / pairs as f64;
            let mean = draws as f64 * p;
            let sd = (draws as f64 * p * (1.0 - p)).sqrt();
            for a in 0..n {
                for b in 0..n {
                    let c = counts[a * n + b] as f64;
                    if a == b {
                        prop_assert_eq!(c, 0.0);
                    } else {
                        prop_assert!((c - mean).abs() < 6.0 * sd, "pair ({a}, {b}): {c} vs {mean}");
                    }
                }
            }
        }
    }
}
