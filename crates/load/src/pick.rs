//! Which request of a run's list request `i` sends: in turn, or by weight, spread evenly.

/// Picks a run's request `i` from its list of requests (URLs or a request file's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pick {
    /// Request `i` sends entry `i % n`.
    InTurn(usize),
    /// One round of the weighted order: request `i` sends `round[i % len]`.
    Round(Vec<u32>),
}

impl Pick {
    /// In turn when every weight is 1; else the weighted round, where entry `e` of weight `w`
    /// takes its `w` places at the virtual times `(k + 1/2) / w` (ties to the earlier entry),
    /// so each entry's requests are spread evenly over the round, as smooth weighted round robin
    /// spreads them, at a cost of a sort of the round rather than a pass over every entry per
    /// request (10,000 entries and a round of 1,000,000). Each whole round gives every entry
    /// exactly its weight; after `n` requests an entry of weight `w` out of `W` has had
    /// `n w / W` within `1/2 + (m / 2) w / W` (`m` entries). The caller bounds the round.
    pub(crate) fn new(weights: &[u32]) -> Pick {
        if weights.iter().all(|&w| w == 1) {
            return Pick::InTurn(weights.len().max(1));
        }
        let mut places: Vec<(u64, u64, u32)> = Vec::new();
        for (e, &w) in weights.iter().enumerate() {
            for k in 0..u64::from(w) {
                // (2k + 1) / (2w), compared exactly as fractions by cross-multiplying below.
                places.push((2 * k + 1, 2 * u64::from(w), e as u32));
            }
        }
        places.sort_by(|a, b| {
            let left = u128::from(a.0) * u128::from(b.1);
            let right = u128::from(b.0) * u128::from(a.1);
            left.cmp(&right).then(a.2.cmp(&b.2))
        });
        Pick::Round(places.into_iter().map(|p| p.2).collect())
    }

    /// The entry request `i` sends.
    pub(crate) fn entry(&self, i: u64) -> usize {
        match self {
            Pick::InTurn(n) => (i % *n as u64) as usize,
            Pick::Round(round) => round[(i % round.len() as u64) as usize] as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unit_weights_go_in_turn_and_weights_spread() {
        assert_eq!(Pick::new(&[1, 1, 1]), Pick::InTurn(3));
        let p = Pick::new(&[3, 1]);
        let order: Vec<usize> = (0..8).map(|i| p.entry(i)).collect();
        assert_eq!(order, [0, 0, 1, 0, 0, 0, 1, 0]);
        let p = Pick::new(&[0, 2]);
        assert!((0..10).all(|i| p.entry(i) == 1));
    }

    proptest! {
        #[test]
        fn every_prefix_is_near_its_share_and_every_round_exact(
            weights in proptest::collection::vec(0u32..20, 1..12),
        ) {
            prop_assume!(weights.iter().any(|&w| w > 0));
            let p = Pick::new(&weights);
            let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
            let mut seen = vec![0u64; weights.len()];
            for i in 0..2 * total {
                seen[p.entry(i)] += 1;
                let n = i + 1;
                for (e, &w) in weights.iter().enumerate() {
                    let share = n as f64 * f64::from(w) / total as f64;
                    let slack = 0.5 + weights.len() as f64 / 2.0 * f64::from(w) / total as f64;
                    prop_assert!((seen[e] as f64 - share).abs() <= slack + 1e-9, "{e} after {n}: {} vs {share}", seen[e]);
                    if n % total == 0 {
                        prop_assert_eq!(seen[e], n / total * u64::from(w));
                    }
                }
            }
        }
    }
}
