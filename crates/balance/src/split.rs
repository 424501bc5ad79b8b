//! Smooth weighted round robin: which leaf of a traffic split takes the next request.
//!
//! The proxy's `split:` (a canary at 900/100, Gateway API's `backendRefs[].weight`, SMI's
//! TrafficSplit) sends each request to one leaf service in proportion to its weight. Drawing at
//! random gives the right share only on average; this is the deterministic interleave nginx
//! uses for weighted upstreams: every pick adds each leaf's weight to its running credit, takes
//! the leaf with the most credit (the first on a tie) and charges it the total. Over any run of
//! `total` picks each leaf gets exactly its weight, spread out rather than in blocks (900/100
//! sends one request in ten to the canary, not 100 in a row), and a leaf of weight 0 gets none.
//!
//! Pure: no clock, no RNG; O(leaves) a pick.
//!
//! # Example
//! ```
//! use tailguard_balance::split::SmoothWeighted;
//!
//! let mut s = SmoothWeighted::new(&[5, 1, 1]).unwrap();
//! let picks: Vec<_> = (0..7).map(|_| s.pick()).collect();
//! assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
//! ```

/// The most leaves a split may have.
pub const MAX_LEAVES: usize = 1000;

/// The largest weight of one leaf.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// Why a list of weights cannot be split over.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// No leaf has a weight above zero (or there is no leaf).
    #[error("the weights add up to 0: at least one leaf needs a weight above 0")]
    ZeroTotal,
    /// More than [`MAX_LEAVES`] leaves.
    #[error("{0} leaves: at most {MAX_LEAVES}")]
    TooMany(usize),
    /// A weight over [`MAX_WEIGHT`].
    #[error("weight {0} is over {MAX_WEIGHT}")]
    TooHeavy(u32),
}

/// Smooth weighted round robin over fixed weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmoothWeighted {
    weights: Vec<i64>,
    credit: Vec<i64>,
    total: i64,
}

impl SmoothWeighted {
    /// A split over `weights` (each 0 to [`MAX_WEIGHT`], at least one above 0).
    ///
    /// # Errors
    /// [`SplitError`] when the weights cannot be split over.
    pub fn new(weights: &[u32]) -> Result<Self, SplitError> {
        check(weights)?;
        Ok(Self {
            weights: weights.iter().map(|&w| i64::from(w)).collect(),
            credit: vec![0; weights.len()],
            total: weights.iter().map(|&w| i64::from(w)).sum(),
        })
    }

    /// The number of leaves.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Never true: a split has a leaf of weight above 0.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// The leaf of the next request.
    pub fn pick(&mut self) -> usize {
        let mut best = 0;
        for i in 0..self.credit.len() {
            self.credit[i] += self.weights[i];
            if self.credit[i] > self.credit[best] {
                best = i;
            }
        }
        self.credit[best] -= self.total;
        best
    }
}

/// Checks `weights` as [`SmoothWeighted::new`] does.
///
/// # Errors
/// [`SplitError`] when the weights cannot be split over.
pub fn check(weights: &[u32]) -> Result<(), SplitError> {
    if weights.len() > MAX_LEAVES {
        return Err(SplitError::TooMany(weights.len()));
    }
    if let Some(&w) = weights.iter().find(|&&w| w > MAX_WEIGHT) {
        return Err(SplitError::TooHeavy(w));
    }
    if weights.iter().all(|&w| w == 0) {
        return Err(SplitError::ZeroTotal);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_canary_is_spread_out_not_sent_in_a_block() {
        let mut s = SmoothWeighted::new(&[900, 100]).unwrap();
        let picks: Vec<usize> = (0..1000).map(|_| s.pick()).collect();
        assert_eq!(picks.iter().filter(|&&p| p == 1).count(), 100);
        // Never two canary requests within nine of each other.
        let canary: Vec<usize> = (0..1000).filter(|&i| picks[i] == 1).collect();
        assert!(canary.windows(2).all(|w| w[1] - w[0] >= 9), "{canary:?}");
    }

    #[test]
    fn weight_zero_gets_nothing_and_all_zero_is_refused() {
        let mut s = SmoothWeighted::new(&[0, 3, 0]).unwrap();
        assert!((0..100).all(|_| s.pick() == 1));
        assert_eq!(SmoothWeighted::new(&[0, 0]), Err(SplitError::ZeroTotal));
        assert_eq!(SmoothWeighted::new(&[]), Err(SplitError::ZeroTotal));
        assert_eq!(
            SmoothWeighted::new(&[MAX_WEIGHT + 1]),
            Err(SplitError::TooHeavy(MAX_WEIGHT + 1))
        );
        assert!(matches!(
            SmoothWeighted::new(&vec![1; MAX_LEAVES + 1]),
            Err(SplitError::TooMany(_))
        ));
    }

    proptest! {
        /// Over any whole number of rounds each leaf gets exactly its weight, and at every
        /// point each leaf is within one round's rounding of its share.
        #[test]
        fn every_leaf_gets_its_weight(weights in proptest::collection::vec(0u32..50, 1..8)) {
            prop_assume!(weights.iter().any(|&w| w > 0));
            let total: u32 = weights.iter().sum();
            let mut s = SmoothWeighted::new(&weights).unwrap();
            let mut got = vec![0u32; weights.len()];
            for n in 1..=(3 * total) {
                got[s.pick()] += 1;
                for (g, w) in got.iter().zip(&weights) {
                    let share = f64::from(*w) * f64::from(n) / f64::from(total);
                    prop_assert!((f64::from(*g) - share).abs() < weights.len() as f64);
                }
                if n % total == 0 {
                    let rounds = n / total;
                    let want: Vec<u32> = weights.iter().map(|w| w * rounds).collect();
                    prop_assert_eq!(&got, &want);
                }
            }
        }
    }
}
