//! A probing balancer in the spirit of Prequal (Wydrowski, Kleinberg, Rumble: "Load is not what
//! you should balance: Introducing Prequal", NSDI 2024; run at YouTube).
//!
//! Load (CPU, or requests in flight alone) is not what decides a request's latency on a server
//! shared with other work; what the server reports about its own queue is. So the client asks:
//!
//! 1. **Probes, off the request path.** After each request the caller sends a few probes
//!    ([`PrequalConfig::probes_per_query`], 3 in the paper's testbed, 5 at YouTube) to endpoints
//!    drawn without replacement ([`Balance::probe_targets`]). A reply carries the endpoint's
//!    requests in flight (RIF) and its own latency estimate ([`ProbeReply`]), and comes back as an
//!    event ([`Balance::probe_reply`]); the request never waits for one.
//! 2. **A small pool of recent replies** ([`PrequalConfig::pool_size`], 16 in the paper): a reply
//!    older than [`PrequalConfig::max_age`] (about a second) is dropped, one reply is removed per
//!    request, alternating the oldest and the worst, and a reply serves at most
//!    [`PrequalConfig::max_uses`] requests. A reply used once counts the request it sent (its RIF
//!    goes up by one), so reusing it is not blind. The paper reuses replies when probes are
//!    scarcer than requests; with three probes per request there is a fresh reply for every
//!    pick, and reuse only spreads one stale view over several requests (in `sim`'s `capacity`
//!    scenario, p99 65 ms with one use per reply against 115 ms with three), so the default is
//!    one use.
//! 3. **Hot-cold lexicographic choice.** A reply is *hot* when its RIF is above the
//!    [`PrequalConfig::q_rif`] quantile of recent replies' RIFs (the paper's band is 0.6 to 0.9;
//!    its suggested `2^-0.25`, about 0.84, is the default). Among cold replies the lowest latency
//!    wins; if every reply is hot, the lowest RIF. So latency decides while queues are short, and
//!    queue length decides when every server is busy.
//!
//! Three things the paper leaves to the deployment, decided here:
//! - **Too few replies.** The rule compares replies; a lone reply would send the request to
//!   whichever endpoint was probed last. With fewer than two usable replies the pick is the
//!   fallback below. One probe per request with one use per reply is refused
//!   ([`PrequalError::Starved`]): replies are used up as fast as they come, and the pick
//!   degenerates into a random one (every other pick compares a fresh random reply with the
//!   previous pick's loser, which stays in the pool until it is too old).
//! - **No probe answers.** A failed probe, or an endpoint that does not serve probes, is
//!   answered from what this client sees itself: its own requests in flight there and its own
//!   recent round trips. With an empty pool the pick is power of two choices on the same view.
//! - **Lying replies.** A reply is checked against what this client sees at that endpoint
//!   itself: more of its own requests in flight there than the endpoint admits to
//!   ([`RIF_SLACK`] for requests on the wire, and twice the reply's RIF), or even the fastest
//!   of its last [`SEEN`] round trips there far longer than the latency the endpoint claims
//!   ([`LATENCY_FACTOR`] times, plus [`LATENCY_SLACK`]). Such a reply is not used: the
//!   endpoint's entry is this client's view. After [`CONFIRM`] contradicting replies in a row
//!   the endpoint is judged by this client's view alone for [`DISTRUST_FOR`] (doubling with
//!   each new conviction, up to 32 times that): an endpoint answering `{rif: 0, latency: 0}`
//!   while taking 200 ms per request would otherwise draw nearly every request. This is not
//!   only malice: a server whose probe handler runs apart from its overloaded workers reports
//!   exactly this. One slow response, or one burst of requests still on the wire, convicts
//!   nobody: an honest endpoint on a busy machine sees both every second, and a first version
//!   that convicted on one reply distrusted honest 5 ms backends nearly all the time at
//!   1,000 requests a second, which tripled the proxy's p99 with no fault at all.
//! - **Sinkholing.** An endpoint that fails fast reports a short latency and few requests in
//!   flight, and would attract every request. An endpoint that failed one of this client's
//!   requests ([`Balance::failed`]) counts as hot for `max_age`: it is picked only when every
//!   reply is hot, and then by its RIF like the others. (Mixing this client's own round trips
//!   into the replies' latency instead was tried and made the tail worse: its peak EWMA
//!   remembers one slow response for longer than the server's queue lasts.)
//!
//! Pure: time comes in as `now`, randomness as `rng`; nothing allocates per request.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::prequal::{Prequal, PrequalConfig, ProbeReply};
//! use tailguard_balance::Balance;
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(3);
//! let mut b = Prequal::new(PrequalConfig::default(), 3, Duration::ZERO);
//! let ms = Duration::from_millis;
//! // Earlier replies: every endpoint had about one request in flight.
//! for _ in 0..4 {
//!     for e in 0..3 {
//!         b.probe_reply(e, Some(ProbeReply { rif: 1, latency: ms(10) }), ms(0));
//!     }
//! }
//! // Now endpoint 0 is idle but slow, 1 is fast, 2 has a long queue: it is hot (its RIF is
//! // above the 0.84 quantile of recent replies' RIFs), so its short latency does not count.
//! b.probe_reply(0, Some(ProbeReply { rif: 0, latency: ms(80) }), ms(1));
//! b.probe_reply(1, Some(ProbeReply { rif: 1, latency: ms(10) }), ms(1));
//! b.probe_reply(2, Some(ProbeReply { rif: 40, latency: ms(5) }), ms(1));
//! assert_eq!(b.pick(ms(2), &|_| true, &mut rng), Some(1));
//! ```

pub use crate::balancer::{ProbeReply, ProbeVerdict};
use crate::load::{PeakEwma, PeakEwmaConfig, Snapshot};
use crate::{Balance, BestOf, Choices, Ready};
use rand::{Rng, RngCore};
use std::time::Duration;

/// How many recent replies' RIFs the hot/cold threshold is taken from.
const HISTORY: usize = 64;

/// Requests of this client's own that may be on the wire (sent, not yet counted by the
/// endpoint; answered, not yet read here) before a lower RIF contradicts it.
pub const RIF_SLACK: u32 = 4;

/// How many times longer than the claimed latency this client's own round trips may be...
pub const LATENCY_FACTOR: u32 = 8;

/// ...plus this much (network, and the machine's scheduling stalls).
pub const LATENCY_SLACK: Duration = Duration::from_millis(20);

/// How many of this client's recent round trips at an endpoint are kept as evidence; the
/// fastest of them is compared with the latency the endpoint claims.
pub const SEEN: usize = 4;

/// Contradicting replies in a row that convict an endpoint of lying.
pub const CONFIRM: u32 = 3;

/// How long an endpoint whose reply was contradicted is judged by this client's view alone,
/// the first time.
pub const DISTRUST_FOR: Duration = Duration::from_secs(10);

/// Prequal's parameters, defaulted from the paper (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrequalConfig {
    /// Probes sent after each request (1 to 16).
    pub probes_per_query: u32,
    /// Replies kept (1 to 64).
    pub pool_size: usize,
    /// A reply older than this is not used.
    pub max_age: Duration,
    /// Requests one reply may send (at least 1).
    pub max_uses: u32,
    /// The quantile of recent RIFs above which a reply is hot (above 0, below 1).
    pub q_rif: f64,
}

impl Default for PrequalConfig {
    fn default() -> Self {
        PrequalConfig {
            probes_per_query: 3,
            pool_size: 16,
            max_age: Duration::from_secs(1),
            max_uses: 1,
            q_rif: 0.84,
        }
    }
}

/// A [`PrequalConfig`] parameter out of range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PrequalError {
    /// Probes per query.
    #[error("probes per query must be from 1 to 16, not {0}")]
    Probes(u32),
    /// Pool size.
    #[error("the probe pool must hold from 1 to 64 replies, not {0}")]
    Pool(usize),
    /// Maximum age.
    #[error("a reply's maximum age must be above zero")]
    Age,
    /// Uses per reply.
    #[error("a reply must serve at least one request")]
    Uses,
    /// The RIF quantile.
    #[error("the RIF quantile must be above 0 and below 1, not {0}")]
    Quantile(f64),
    /// One probe per request and one use per reply.
    #[error(
        "one probe per request with one use per reply picks at random: replies are used up as \
         fast as they come, so the pool never holds two fresh ones to compare (a capacity \
         simulation gave p99 7 s against 96 ms with two uses); allow 2 uses per reply or send \
         2 probes"
    )]
    Starved,
}

impl PrequalConfig {
    /// Checks every parameter.
    ///
    /// # Errors
    /// The first one out of range.
    pub fn validate(&self) -> Result<(), PrequalError> {
        if !(1..=16).contains(&self.probes_per_query) {
            return Err(PrequalError::Probes(self.probes_per_query));
        }
        if !(1..=64).contains(&self.pool_size) {
            return Err(PrequalError::Pool(self.pool_size));
        }
        if self.max_age.is_zero() {
            return Err(PrequalError::Age);
        }
        if self.max_uses == 0 {
            return Err(PrequalError::Uses);
        }
        if !(self.q_rif > 0.0 && self.q_rif < 1.0) {
            return Err(PrequalError::Quantile(self.q_rif));
        }
        if self.probes_per_query == 1 && self.max_uses == 1 {
            return Err(PrequalError::Starved);
        }
        Ok(())
    }
}

/// One reply in the pool.
#[derive(Clone, Copy, Debug)]
struct Entry {
    endpoint: usize,
    rif: u32,
    latency: Duration,
    at: Duration,
    uses: u32,
}

/// The probing balancer (see the module docs).
#[derive(Debug)]
pub struct Prequal {
    config: PrequalConfig,
    pool: Vec<Entry>,
    /// Recent replies' RIFs, a ring.
    rifs: [u32; HISTORY],
    rifs_len: usize,
    rifs_next: usize,
    /// This client's own view of each endpoint (requests in flight and recent round trips),
    /// as the project's P2C peak EWMA picker keeps it: the fallback when no reply is usable.
    local: BestOf<PeakEwma>,
    /// Endpoint indices, partly shuffled to draw probe targets without replacement.
    order: Vec<usize>,
    /// Which removal comes next: the oldest reply, or the worst.
    remove_oldest: bool,
    /// When each endpoint last failed one of this client's requests.
    failed_at: Vec<Option<Duration>>,
    /// Per endpoint: whether its replies are used (module docs, "Lying replies").
    distrust: Vec<Distrust>,
}

/// An endpoint's record of contradicted replies, and the round trips that check them.
#[derive(Clone, Copy, Debug, Default)]
struct Distrust {
    /// Its replies are not used before this.
    until: Duration,
    /// Times it was convicted.
    caught: u32,
    /// Contradicting replies in a row.
    streak: u32,
    /// The round trip that last convicted it.
    evidence: Duration,
    /// This client's last [`SEEN`] round trips there, a ring, and when each ended.
    seen: [(Duration, Duration); SEEN],
    seen_len: usize,
    seen_next: usize,
}

impl Distrust {
    fn saw(&mut self, rtt: Duration, now: Duration) {
        self.seen[self.seen_next] = (rtt, now);
        self.seen_next = (self.seen_next + 1) % SEEN;
        self.seen_len = (self.seen_len + 1).min(SEEN);
    }

    /// The fastest of the recent round trips no older than `max_age`; none when there are
    /// none (old evidence says nothing about a reply now).
    fn fastest(&self, now: Duration, max_age: Duration) -> Option<Duration> {
        self.seen[..self.seen_len]
            .iter()
            .filter(|(_, at)| now.saturating_sub(*at) <= max_age)
            .map(|(rtt, _)| *rtt)
            .min()
    }
}

impl Prequal {
    /// A balancer over `n` endpoints, created at `now`. Parameters out of range are clamped;
    /// call [`PrequalConfig::validate`] at the edge to reject them instead.
    pub fn new(config: PrequalConfig, n: usize, now: Duration) -> Prequal {
        let config = PrequalConfig {
            probes_per_query: config.probes_per_query.clamp(1, 16),
            pool_size: config.pool_size.clamp(1, 64),
            max_age: config.max_age.max(Duration::from_nanos(1)),
            max_uses: config.max_uses.max(1),
            q_rif: if config.q_rif > 0.0 && config.q_rif < 1.0 {
                config.q_rif
            } else {
                0.84
            },
        };
        let local_config = PeakEwmaConfig {
            tau: config.max_age,
            default_rtt: Duration::from_millis(1),
            pending_age: true,
        };
        Prequal {
            config,
            pool: Vec::with_capacity(config.pool_size),
            rifs: [0; HISTORY],
            rifs_len: 0,
            rifs_next: 0,
            local: BestOf::new(vec![PeakEwma::new(local_config, now); n], Choices::D(2)),
            order: (0..n).collect(),
            remove_oldest: true,
            failed_at: vec![None; n],
            distrust: vec![Distrust::default(); n],
        }
    }

    /// The parameters in use.
    pub fn config(&self) -> &PrequalConfig {
        &self.config
    }

    /// Replies in the pool now.
    pub fn pool_len(&self) -> usize {
        self.pool.len()
    }

    /// The RIF at or below which a reply is cold: the `q_rif` quantile of recent replies.
    fn threshold(&self) -> u32 {
        if self.rifs_len == 0 {
            return u32::MAX;
        }
        let mut sorted = self.rifs;
        let recent = &mut sorted[..self.rifs_len];
        recent.sort_unstable();
        let rank =
            ((self.config.q_rif * self.rifs_len as f64).ceil() as usize).clamp(1, self.rifs_len);
        recent[rank - 1]
    }

    /// True when `endpoint` failed one of this client's requests within `max_age` of `now`.
    fn failed_lately(&self, endpoint: usize, now: Duration) -> bool {
        self.failed_at[endpoint].is_some_and(|at| now.saturating_sub(at) <= self.config.max_age)
    }

    /// Hot-cold lexicographic order: lower is better.
    fn rank(&self, e: &Entry, threshold: u32, now: Duration) -> (bool, u32, Duration) {
        let hot = e.rif > threshold || self.failed_lately(e.endpoint, now);
        // Cold replies compare by latency only; hot ones by RIF, then latency.
        let rif = if hot { e.rif } else { 0 };
        (hot, rif, e.latency)
    }

    fn forget_stale(&mut self, now: Duration) {
        let (max_age, n) = (self.config.max_age, self.local.len());
        self.pool
            .retain(|e| e.endpoint < n && now.saturating_sub(e.at) <= max_age);
    }

    /// Removes one reply per request, alternating the oldest and the worst, while the pool
    /// holds more than one request's worth of probes.
    fn remove_one(&mut self, now: Duration) {
        if self.pool.len() <= self.config.probes_per_query as usize {
            return;
        }
        let victim = if self.remove_oldest {
            self.pool
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.at)
                .map(|(i, _)| i)
        } else {
            let threshold = self.threshold();
            self.pool
                .iter()
                .enumerate()
                .max_by_key(|(_, e)| self.rank(e, threshold, now))
                .map(|(i, _)| i)
        };
        self.remove_oldest = !self.remove_oldest;
        if let Some(i) = victim {
            self.pool.swap_remove(i);
        }
    }

    /// Checks `reply` from `endpoint` against `own`, this client's view there (module docs,
    /// "Lying replies"): the reply to pool and the verdict. For a contradicting reply, and
    /// for any reply while its endpoint is convicted, the entry is the worse of the two views,
    /// its latency never below the round trip that convicted it: a view that decays toward
    /// zero would make it look fast again long before its distrust ends.
    fn vet(
        &mut self,
        endpoint: usize,
        reply: Option<ProbeReply>,
        own: ProbeReply,
        now: Duration,
    ) -> (ProbeReply, ProbeVerdict) {
        let max_age = self.config.max_age;
        let d = &mut self.distrust[endpoint];
        let fastest = d.fastest(now, max_age);
        let contradicted = reply.is_some_and(|r| contradicts(r, own.rif, fastest));
        if contradicted {
            d.streak = d.streak.saturating_add(1);
        } else if reply.is_some() {
            d.streak = 0;
        }
        if contradicted && d.streak >= CONFIRM {
            d.streak = 0;
            d.caught = d.caught.saturating_add(1);
            d.until = now + DISTRUST_FOR * (1u32 << (d.caught - 1).min(5));
            d.evidence = fastest.unwrap_or(own.latency);
        }
        let convicted = now < d.until;
        if contradicted || convicted {
            let floor = if convicted {
                d.evidence
            } else {
                fastest.unwrap_or_default()
            };
            let worst = ProbeReply {
                rif: own.rif.max(reply.map_or(0, |r| r.rif)),
                latency: own.latency.max(floor),
            };
            return (worst, ProbeVerdict::Distrusted);
        }
        match reply {
            Some(r) => (r, ProbeVerdict::Used),
            None => (own, ProbeVerdict::NoAnswer),
        }
    }

    fn remember_rif(&mut self, rif: u32) {
        self.rifs[self.rifs_next] = rif;
        self.rifs_next = (self.rifs_next + 1) % HISTORY;
        self.rifs_len = (self.rifs_len + 1).min(HISTORY);
    }
}

impl Balance for Prequal {
    fn len(&self) -> usize {
        self.local.len()
    }

    fn pick(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        if self.local.is_empty() {
            return None;
        }
        self.forget_stale(now);
        let threshold = self.threshold();
        let mut usable = 0;
        let best = self
            .pool
            .iter()
            .enumerate()
            .filter(|(_, e)| ready(e.endpoint))
            .inspect(|_| usable += 1)
            .min_by_key(|(_, e)| self.rank(e, threshold, now))
            .map(|(i, _)| i);
        // A lone reply is no choice: the rule compares replies, and one reply picks whichever
        // endpoint was probed last (with one probe per request the pool often holds just one),
        // so the client's own view decides instead.
        let best = best.filter(|_| usable > 1);
        let chosen = match best {
            Some(i) => {
                let e = &mut self.pool[i];
                e.uses += 1;
                e.rif += 1;
                let endpoint = e.endpoint;
                if e.uses >= self.config.max_uses {
                    self.pool.swap_remove(i);
                }
                endpoint
            }
            // No usable reply: power of two choices on this client's own view.
            None => self.local.pick(now, ready, rng)?,
        };
        self.remove_one(now);
        Some(chosen)
    }

    fn start(&mut self, endpoint: usize, now: Duration) {
        self.local.start(endpoint, now);
    }

    fn settle(&mut self, endpoint: usize, sent: Duration, answered: bool, now: Duration) {
        self.local.settle(endpoint, sent, answered, now);
    }

    fn end(&mut self, endpoint: usize, rtt: Duration, now: Duration) {
        self.local.end(endpoint, rtt, now);
        if let Some(d) = self.distrust.get_mut(endpoint) {
            d.saw(rtt, now);
        }
    }

    fn failed(&mut self, endpoint: usize, now: Duration) {
        if let Some(at) = self.failed_at.get_mut(endpoint) {
            *at = Some(now);
        }
    }

    fn snapshot(&self, endpoint: usize, now: Duration) -> Option<Snapshot> {
        self.local.snapshot(endpoint, now)
    }

    fn probe_targets(
        &mut self,
        _now: Duration,
        ready: Ready<'_>,
        rng: &mut dyn RngCore,
        out: &mut Vec<usize>,
    ) {
        let n = self.order.len();
        let want = (self.config.probes_per_query as usize).min(n);
        // A partial Fisher-Yates shuffle: each drawn index is moved to the front part.
        let mut drawn = 0;
        while out.len() < want && drawn < n {
            let j = rng.random_range(drawn..n);
            self.order.swap(drawn, j);
            let endpoint = self.order[drawn];
            drawn += 1;
            if ready(endpoint) {
                out.push(endpoint);
            }
        }
    }

    fn probe_reply(
        &mut self,
        endpoint: usize,
        reply: Option<ProbeReply>,
        now: Duration,
    ) -> ProbeVerdict {
        let Some(local) = self.local.snapshot(endpoint, now) else {
            return ProbeVerdict::Ignored;
        };
        // What this client sees there itself (the cost is the round-trip estimate times
        // pending + 1): the stand-in for no answer, and the check of an answer.
        let own = ProbeReply {
            rif: local.pending,
            latency: Duration::from_nanos((local.cost / (f64::from(local.pending) + 1.0)) as u64),
        };
        let (reply, verdict) = self.vet(endpoint, reply, own, now);
        self.remember_rif(reply.rif);
        // One reply per endpoint: the newer one replaces it.
        self.pool.retain(|e| e.endpoint != endpoint);
        if self.pool.len() >= self.config.pool_size {
            if let Some(i) = self
                .pool
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.at)
                .map(|(i, _)| i)
            {
                self.pool.swap_remove(i);
            }
        }
        self.pool.push(Entry {
            endpoint,
            rif: reply.rif,
            latency: reply.latency,
            at: now,
            uses: 0,
        });
        verdict
    }
}

/// True when `reply` contradicts this client's view of the same endpoint by a wide margin:
/// `rif` of its requests in flight there, `fastest` of its recent round trips there (module
/// docs, "Lying replies").
fn contradicts(reply: ProbeReply, rif: u32, fastest: Option<Duration>) -> bool {
    let fewer = rif >= reply.rif.saturating_mul(2).saturating_add(RIF_SLACK);
    let claimed = reply.latency.saturating_mul(LATENCY_FACTOR) + LATENCY_SLACK;
    fewer || fastest.is_some_and(|f| f > claimed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn reply(rif: u32, latency_ms: u64) -> Option<ProbeReply> {
        Some(ProbeReply {
            rif,
            latency: ms(latency_ms),
        })
    }

    fn balancer(n: usize) -> (Prequal, Xoshiro256PlusPlus) {
        (
            Prequal::new(PrequalConfig::default(), n, Duration::ZERO),
            Xoshiro256PlusPlus::seed_from_u64(9),
        )
    }

    #[test]
    fn cold_replies_compete_on_latency_and_hot_ones_on_queue_length() {
        let (mut b, mut rng) = balancer(4);
        // Recent RIFs 1, 2, 3 and 30: the 0.84 quantile is 30, so only RIF above 30 is hot.
        b.probe_reply(0, reply(1, 90), ms(1));
        b.probe_reply(1, reply(2, 15), ms(1));
        b.probe_reply(2, reply(3, 40), ms(1));
        b.probe_reply(3, reply(30, 5), ms(1));
        // All cold: the lowest latency, however long its queue.
        assert_eq!(b.pick(ms(2), &|_| true, &mut rng), Some(3));
        // Many busy replies raise the threshold's history: now 3's RIF is above the quantile.
        let (mut b, mut rng) = balancer(4);
        for _ in 0..10 {
            b.remember_rif(2);
        }
        b.probe_reply(0, reply(2, 90), ms(1));
        b.probe_reply(3, reply(30, 5), ms(1));
        assert_eq!(
            b.pick(ms(2), &|_| true, &mut rng),
            Some(0),
            "the hot one waits"
        );
        // Only hot replies: the shortest queue.
        let (mut b, mut rng) = balancer(3);
        for _ in 0..20 {
            b.remember_rif(1);
        }
        b.probe_reply(0, reply(9, 5), ms(1));
        b.probe_reply(1, reply(4, 50), ms(1));
        b.probe_reply(2, reply(7, 1), ms(1));
        assert_eq!(b.pick(ms(2), &|_| true, &mut rng), Some(1));
    }

    #[test]
    fn a_reply_is_used_once_by_default_and_stale_ones_are_not_used() {
        let (mut b, mut rng) = balancer(3);
        b.probe_reply(1, reply(0, 1), ms(0));
        b.probe_reply(2, reply(0, 9), ms(0));
        assert_eq!(b.pick(ms(1), &|_| true, &mut rng), Some(1));
        assert_eq!(b.pool_len(), 1, "used up");
        // A lone reply is no comparison: this client's own view picks, the reply stays.
        b.start(0, ms(1));
        let lone = b.pick(ms(1), &|_| true, &mut rng).unwrap();
        assert_eq!(b.pool_len(), 1, "{lone}");
        b.end(0, ms(1), ms(1));
        b.pool.clear();
        // A reply a second and a bit old is gone: the pick falls back to this client's view.
        b.probe_reply(2, reply(0, 1), ms(0));
        b.start(0, ms(1));
        b.start(0, ms(1));
        let chosen = b.pick(ms(1_001) + ms(1), &|_| true, &mut rng).unwrap();
        assert_eq!(b.pool_len(), 0);
        assert!(chosen < 3);
    }

    #[test]
    fn reuse_counts_the_requests_it_sent() {
        let config = PrequalConfig {
            max_uses: 3,
            ..PrequalConfig::default()
        };
        let mut b = Prequal::new(config, 2, Duration::ZERO);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..20 {
            b.remember_rif(1);
        }
        b.probe_reply(0, reply(0, 10), ms(0));
        b.probe_reply(1, reply(1, 20), ms(0));
        // 0 is cold and faster; once two requests went there its RIF (2) is above the
        // threshold (1) and 1 wins.
        let picks: Vec<_> = (0..3)
            .map(|_| b.pick(ms(1), &|_| true, &mut rng).unwrap())
            .collect();
        assert_eq!(picks, [0, 0, 1]);
    }

    #[test]
    fn one_probe_with_one_use_is_refused() {
        let starved = PrequalConfig {
            probes_per_query: 1,
            ..PrequalConfig::default()
        };
        assert_eq!(starved.validate(), Err(PrequalError::Starved));
        let reused = PrequalConfig {
            max_uses: 2,
            ..starved
        };
        assert_eq!(reused.validate(), Ok(()));
    }

    #[test]
    fn a_failing_endpoint_is_hot_for_a_while_so_it_cannot_sinkhole() {
        let (mut b, mut rng) = balancer(2);
        b.failed(0, ms(0));
        b.probe_reply(0, reply(0, 1), ms(1));
        b.probe_reply(1, reply(3, 50), ms(1));
        assert_eq!(b.pick(ms(2), &|_| true, &mut rng), Some(1));
        // A second later the failure is forgotten.
        b.probe_reply(0, reply(0, 1), ms(1_500));
        b.probe_reply(1, reply(3, 50), ms(1_500));
        assert_eq!(b.pick(ms(1_500), &|_| true, &mut rng), Some(0));
    }

    #[test]
    fn probes_go_to_distinct_ready_endpoints_and_a_silent_one_is_judged_locally() {
        let (mut b, mut rng) = balancer(5);
        let mut out = Vec::new();
        for _ in 0..100 {
            out.clear();
            b.probe_targets(ms(0), &|i| i != 2, &mut rng, &mut out);
            assert_eq!(out.len(), 3);
            assert!(!out.contains(&2));
            let mut sorted = out.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "{out:?}");
        }
        // Endpoint 4 does not answer probes: its entry is what this client sees there.
        for _ in 0..5 {
            b.start(4, ms(0));
        }
        b.probe_reply(4, None, ms(1));
        let e = b.pool.iter().find(|e| e.endpoint == 4).unwrap();
        assert_eq!(e.rif, 5);
        // More probes than endpoints: each once.
        let (mut b, mut rng) = balancer(2);
        out.clear();
        b.probe_targets(ms(0), &|_| true, &mut rng, &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn replies_that_keep_contradicting_this_clients_view_are_distrusted_for_a_while() {
        let (mut b, _) = balancer(2);
        // Six of this client's requests are out at endpoint 0, which claims to have none:
        // each such reply is not used, and the third in a row convicts it.
        for _ in 0..6 {
            b.start(0, ms(0));
        }
        for _ in 0..CONFIRM {
            assert_eq!(
                b.probe_reply(0, reply(0, 0), ms(1)),
                ProbeVerdict::Distrusted
            );
            assert_eq!(b.pool[0].rif, 6, "judged by this client's view");
        }
        // Honest-looking replies are not used either while the distrust lasts...
        for _ in 0..6 {
            b.end(0, ms(5), ms(2));
        }
        assert_eq!(
            b.probe_reply(0, reply(0, 5), ms(3)),
            ProbeVerdict::Distrusted
        );
        // ...and are again once it is over.
        let later = ms(1) + DISTRUST_FOR;
        assert_eq!(b.probe_reply(0, reply(0, 5), later), ProbeVerdict::Used);
        // Convicted again, by its round trips this time: twice as long.
        for _ in 0..SEEN {
            b.start(0, later);
            b.end(0, ms(400), later);
        }
        for _ in 0..CONFIRM {
            assert_eq!(
                b.probe_reply(0, reply(0, 1), later),
                ProbeVerdict::Distrusted
            );
        }
        let until = later + DISTRUST_FOR * 2;
        assert_eq!(
            b.probe_reply(0, reply(0, 1), until - ms(1)),
            ProbeVerdict::Distrusted
        );
        assert!(
            b.pool
                .iter()
                .any(|e| e.endpoint == 0 && e.latency >= ms(400)),
            "judged by the round trips that convicted it"
        );
        // A reply in line with what this client sees is used; no reply is no answer.
        assert_eq!(b.probe_reply(1, reply(1, 5), ms(1)), ProbeVerdict::Used);
        assert_eq!(b.probe_reply(1, None, ms(1)), ProbeVerdict::NoAnswer);
    }

    #[test]
    fn an_honest_endpoint_on_a_busy_machine_is_not_convicted() {
        let (mut b, _) = balancer(1);
        // One stall: a 300 ms round trip among 5 ms ones, which peak EWMA remembers for a
        // long while, and the endpoint claiming its usual 5 ms.
        for i in 0..SEEN as u64 - 1 {
            b.start(0, ms(i));
            b.end(0, ms(5), ms(i));
        }
        b.start(0, ms(10));
        b.end(0, ms(300), ms(10));
        for t in 11..20 {
            assert_eq!(b.probe_reply(0, reply(1, 5), ms(t)), ProbeVerdict::Used);
        }
        // A burst of requests still on the wire: the reply that sees fewer is not used, but
        // the next one that agrees clears it.
        for _ in 0..8 {
            b.start(0, ms(20));
        }
        for _ in 0..CONFIRM - 1 {
            assert_eq!(
                b.probe_reply(0, reply(1, 5), ms(21)),
                ProbeVerdict::Distrusted
            );
        }
        assert_eq!(b.probe_reply(0, reply(6, 5), ms(22)), ProbeVerdict::Used);
        assert_eq!(
            b.probe_reply(0, reply(1, 5), ms(23)),
            ProbeVerdict::Distrusted
        );
        assert_eq!(b.probe_reply(0, reply(6, 5), ms(24)), ProbeVerdict::Used);
        assert_eq!(b.distrust[0].caught, 0);
    }

    /// The share of `n` requests a lying endpoint 0 (it answers every probe with RIF 0 and no
    /// latency, and takes 200 ms) draws among four honest 5 ms endpoints, at 100 requests a
    /// second, every probe answered at once.
    fn liar_share(n: u64) -> f64 {
        let (mut b, mut rng) = balancer(5);
        let mut out: Vec<(Duration, usize)> = Vec::new(); // (completes at, endpoint)
        let mut targets = Vec::new();
        let mut to_liar = 0;
        for i in 0..n {
            let now = ms(i * 10);
            out.retain(|&(at, e)| {
                if at <= now {
                    b.end(e, if e == 0 { ms(200) } else { ms(5) }, at);
                }
                at > now
            });
            let e = b.pick(now, &|_| true, &mut rng).unwrap();
            b.start(e, now);
            out.push((now + if e == 0 { ms(200) } else { ms(5) }, e));
            to_liar += u64::from(e == 0);
            targets.clear();
            b.probe_targets(now, &|_| true, &mut rng, &mut targets);
            for &t in &targets {
                let pending = out.iter().filter(|o| o.1 == t).count() as u32;
                let honest = reply(pending, 5);
                b.probe_reply(t, if t == 0 { reply(0, 0) } else { honest }, now);
            }
        }
        to_liar as f64 / n as f64
    }

    #[test]
    fn a_lying_endpoint_draws_almost_nothing() {
        let share = liar_share(6_000);
        assert!(
            share < 0.01,
            "the liar drew {:.2}% of requests",
            100.0 * share
        );
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        let bad = |f: fn(&mut PrequalConfig)| {
            let mut c = PrequalConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(|c| c.probes_per_query = 0).contains("probes per query"));
        assert!(bad(|c| c.pool_size = 65).contains("pool"));
        assert!(bad(|c| c.max_age = Duration::ZERO).contains("age"));
        assert!(bad(|c| c.max_uses = 0).contains("at least one"));
        assert!(bad(|c| c.q_rif = 1.0).contains("quantile"));
        assert!(PrequalConfig::default().validate().is_ok());
    }
}
