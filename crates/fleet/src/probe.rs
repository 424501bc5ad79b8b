//! A backend's answer to a load probe, and the latency estimate behind it.
//!
//! A probing balancer (`tailguard_balance::prequal`) asks backends how loaded they are. A
//! backend answers with its requests in flight (RIF: in service and waiting) and its estimate of
//! a request's latency there now. As in Prequal, the estimate is the median latency of recent
//! requests that found a similar number in flight when they arrived, so it tracks the queue the
//! next request would join rather than an average over quiet and busy moments alike.
//!
//! [`Recent`] keeps those samples (pure: the caller passes each request's RIF at arrival and its
//! latency); [`ProbeAnswer`] is the reply, the same struct for `serve` (as JSON), `sim` and the
//! proxy.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_fleet::probe::Recent;
//! let mut recent = Recent::default();
//! for rif in 0..20 {
//!     recent.record(rif, Duration::from_millis(10 * (u64::from(rif) + 1)));
//! }
//! // With 10 in flight: the requests that found about 10 took about 110 ms.
//! assert_eq!(recent.estimate(10), Some(Duration::from_millis(110)));
//! ```

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Samples kept.
const SAMPLES: usize = 64;
/// Samples nearest in RIF that an estimate takes the median of.
const NEAREST: usize = 7;

/// What a probed backend says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAnswer {
    /// Requests in flight: in service and waiting.
    pub rif: u32,
    /// The latency a request would see now, in microseconds.
    pub latency_us: u64,
}

/// Recent requests' RIF at arrival and latency (see the module docs).
#[derive(Clone, Debug)]
pub struct Recent {
    samples: [(u32, Duration); SAMPLES],
    len: usize,
    next: usize,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            samples: [(0, Duration::ZERO); SAMPLES],
            len: 0,
            next: 0,
        }
    }
}

impl Recent {
    /// A request that found `rif` in flight when it arrived took `latency`.
    pub fn record(&mut self, rif: u32, latency: Duration) {
        self.samples[self.next] = (rif, latency);
        self.next = (self.next + 1) % SAMPLES;
        self.len = (self.len + 1).min(SAMPLES);
    }

    /// The median latency of the recent requests whose RIF at arrival was nearest `rif`
    /// (`None`: no request yet).
    pub fn estimate(&self, rif: u32) -> Option<Duration> {
        if self.len == 0 {
            return None;
        }
        let mut near = self.samples;
        let near = &mut near[..self.len];
        near.sort_unstable_by_key(|&(r, latency)| (r.abs_diff(rif), latency));
        let k = NEAREST.min(near.len());
        let nearest = &mut near[..k];
        nearest.sort_unstable_by_key(|&(_, latency)| latency);
        Some(nearest[k / 2].1)
    }

    /// The answer to a probe while `rif` requests are in flight.
    pub fn answer(&self, rif: u32) -> ProbeAnswer {
        let latency = self.estimate(rif).unwrap_or(Duration::ZERO);
        ProbeAnswer {
            rif,
            latency_us: u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_estimate_follows_the_queue_not_the_average() {
        let mut r = Recent::default();
        assert_eq!(r.estimate(0), None);
        assert_eq!(
            r.answer(3),
            ProbeAnswer {
                rif: 3,
                latency_us: 0
            }
        );
        // Quiet: 10 ms at RIF 0-1; busy: 200 ms at RIF 20-21.
        for i in 0..20 {
            r.record(i % 2, ms(10));
            r.record(20 + i % 2, ms(200));
        }
        assert_eq!(r.estimate(0), Some(ms(10)));
        assert_eq!(r.estimate(21), Some(ms(200)));
        assert_eq!(r.answer(1).latency_us, 10_000);
    }

    #[test]
    fn only_the_latest_samples_count() {
        let mut r = Recent::default();
        for _ in 0..SAMPLES {
            r.record(5, ms(500));
        }
        for _ in 0..SAMPLES {
            r.record(5, ms(5));
        }
        assert_eq!(r.estimate(5), Some(ms(5)));
    }

    #[test]
    fn the_answer_reads_back_from_json() {
        let a = ProbeAnswer {
            rif: 4,
            latency_us: 1_500,
        };
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(text, r#"{"rif":4,"latency_us":1500}"#);
        assert_eq!(serde_json::from_str::<ProbeAnswer>(&text).unwrap(), a);
    }
}
