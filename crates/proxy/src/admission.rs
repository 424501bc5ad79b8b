//! A service's admission, live: `maxConcurrentRequests`, `concurrencyLimit` and `queue` as one
//! [`tailguard_client::gate::Gate`] (the simulator's code) behind a lock, one per process
//! (every serving thread admits from it), and the waiting that the gate decides.
//!
//! A request's first attempt takes a [`Place`] ([`Gated::enter`]): at once when there is room
//! and nobody waits, else in the queue, critical requests first and FIFO within a class, until
//! a place frees, its wait (`maxWaitMs`) ends, its deadline can no longer be met, or a more
//! critical request displaces it from a full queue. A retry or a backup takes a place only
//! when there is room and nobody waits ([`Gated::extra`]), so under overload the requests
//! waiting go before anyone's second try. A place frees when its attempt ends (the response
//! head, or its failure), and goes straight to whoever waits.
//!
//! Every decision is the gate's; this module only delivers them: a waiting request holds a
//! receiver, the gate holds its sender, and whoever changes the gate (a release, a sample, an
//! expiry) sends after letting go of the lock. A request that leaves while waiting (its caller
//! gone, its total timeout) takes itself out of the queue, and gives back a place that was
//! sent to it in the meantime.

use crate::clock::Clock;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tailguard_client::gate::{Admitted, Gate};
use tailguard_client::AdmissionConfig;
use tailguard_resilience::admission::{Criticality, Refusal, Ticket};
use tokio::sync::oneshot;

/// What a waiting request hears: a place, or why not.
type Waiter = oneshot::Sender<Result<(), Refusal>>;

/// The request header that says how much a request matters (`critical`, `default`,
/// `sheddable`; gRPC metadata is the same header). Honoured with `criticality: true`.
pub const CRITICALITY: &str = "x-tailguard-criticality";

/// One service's admission, shared by every serving thread.
#[derive(Debug)]
pub struct Gated {
    gate: Mutex<Gate<Waiter>>,
    clock: Clock,
    max_wait: Duration,
    /// The limit is adaptive (`concurrencyLimit`), not only a cap: how refusals read.
    adaptive: bool,
}

/// A place for one attempt in flight; it frees (to whoever waits) when dropped.
#[derive(Debug)]
pub struct Place {
    gated: Arc<Gated>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.gated.release();
    }
}

impl Gated {
    /// A gate with `cfg`'s settings on the proxy's `clock`.
    pub fn new(cfg: AdmissionConfig, clock: Clock) -> Self {
        Gated {
            gate: Mutex::new(Gate::new(cfg, clock.now())),
            clock,
            max_wait: cfg.queue.max_wait,
            adaptive: cfg.limit.is_some(),
        }
    }

    /// True when the bound adapts (`concurrencyLimit`).
    pub fn adaptive(&self) -> bool {
        self.adaptive
    }

    fn lock(&self) -> MutexGuard<'_, Gate<Waiter>> {
        // The gate's methods do not panic midway; keep what a panicked holder left.
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bound now, the attempts holding a place, and the requests waiting (for metrics).
    pub fn figures(&self) -> (u32, u32, usize) {
        let g = self.lock();
        (g.bound(), g.in_flight(), g.waiting())
    }

    /// A place for a request's first attempt: at once, or after waiting in the queue.
    ///
    /// # Errors
    /// The gate's refusal: the queue full (or no queue), displaced, waited too long, or a
    /// deadline (`deadline`, on the proxy's clock) too near for the expected wait.
    pub async fn enter(
        self: &Arc<Self>,
        class: Criticality,
        deadline: Option<Duration>,
    ) -> Result<Place, Refusal> {
        let (tx, rx) = oneshot::channel();
        let now = self.clock.now();
        let arrived = self.lock().arrive(now, tx, class, deadline);
        let ticket = match arrived {
            Admitted::Now => return Ok(self.place()),
            Admitted::Refused(why) => return Err(why),
            Admitted::Waits(ticket, displaced) => {
                if let Some(d) = displaced {
                    // Its receiver may be gone: it left on its own meanwhile.
                    let _ = d.send(Err(Refusal::Displaced));
                }
                ticket
            }
        };
        let mut waiting = Waiting {
            gated: self,
            ticket,
            rx: Some(rx),
        };
        let until = tokio::time::Instant::now() + self.max_wait;
        let rx = waiting.rx.as_mut().expect("set above");
        let heard = tokio::time::timeout_at(until, rx).await;
        match heard {
            Ok(Ok(Ok(()))) => {
                waiting.rx = None;
                Ok(self.place())
            }
            Ok(Ok(Err(why))) => {
                waiting.rx = None;
                Err(why)
            }
            // The gate dropped its sender without a word: only when it is gone.
            Ok(Err(_)) => {
                waiting.rx = None;
                Err(Refusal::Waited)
            }
            Err(_) => {
                // The wait is over: whoever else's is over too hears it now; this request
                // takes a place sent to it meanwhile, or leaves.
                self.expire();
                waiting
                    .leave()
                    .map_or(Err(Refusal::Waited), |()| Ok(self.place()))
            }
        }
    }

    /// A place for a retry or a backup: only with room and nobody waiting.
    pub fn extra(self: &Arc<Self>) -> Option<Place> {
        self.lock().try_extra().then(|| self.place())
    }

    /// An attempt's round trip at success (`Some`), or its timeout (`None`), for the limit.
    pub fn learn(&self, rtt: Option<Duration>) {
        let mut go = Vec::new();
        self.lock().learn(self.clock.now(), rtt, &mut go);
        self.deliver(go, Vec::new());
    }

    fn place(self: &Arc<Self>) -> Place {
        Place {
            gated: Arc::clone(self),
        }
    }

    /// A place frees: it goes to whoever waits.
    fn release(&self) {
        let (mut go, mut refused) = (Vec::new(), Vec::new());
        self.lock().release(self.clock.now(), &mut go, &mut refused);
        self.deliver(go, refused);
    }

    /// Refuses the waiting requests whose wait is over.
    fn expire(&self) {
        let mut refused = Vec::new();
        self.lock().expire(self.clock.now(), &mut refused);
        self.deliver(Vec::new(), refused);
    }

    /// Tells the requests the gate let go and those it refused, outside the lock. A place
    /// sent to a request that left meanwhile comes back and goes on to the next.
    fn deliver(&self, go: Vec<Waiter>, refused: Vec<(Waiter, Refusal)>) {
        for (tx, why) in refused {
            let _ = tx.send(Err(why));
        }
        for tx in go {
            if tx.send(Ok(())).is_err() {
                self.release();
            }
        }
    }
}

/// A request's admission as its attempts use it: the gate, and the place its first attempt
/// took (taken by that attempt, freed when it ends).
#[derive(Debug)]
pub struct Entry {
    gated: Arc<Gated>,
    first: Mutex<Option<Place>>,
}

impl Entry {
    /// The admission of a request whose first attempt holds `place` on `gated`.
    pub fn new(gated: Arc<Gated>, place: Place) -> Self {
        Entry {
            gated,
            first: Mutex::new(Some(place)),
        }
    }

    /// The first attempt's place (once).
    pub fn first(&self) -> Option<Place> {
        self.first.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// A place for a retry or a backup ([`Gated::extra`]).
    pub fn extra(&self) -> Option<Place> {
        self.gated.extra()
    }

    /// An attempt's round trip at success, or its timeout ([`Gated::learn`]).
    pub fn learn(&self, rtt: Option<Duration>) {
        self.gated.learn(rtt);
    }
}

/// A request in the queue; dropped before it heard (its caller gone, its timeout), it leaves.
struct Waiting<'a> {
    gated: &'a Arc<Gated>,
    ticket: Ticket,
    /// `None` once the request has heard.
    rx: Option<oneshot::Receiver<Result<(), Refusal>>>,
}

impl Waiting<'_> {
    /// Leaves the queue; `Ok` when a place was sent meanwhile (the caller now holds it).
    fn leave(&mut self) -> Option<()> {
        let mut rx = self.rx.take()?;
        if self.gated.lock().cancel(self.ticket).is_some() {
            return None; // still waiting: out, and nothing was sent
        }
        // Gone from the queue already: a place or a refusal was sent (or is being sent).
        match rx.try_recv() {
            Ok(Ok(())) => Some(()),
            Ok(Err(_)) => None,
            // Taken out but not yet sent (the sender is between the lock and the send):
            // closing makes that send fail, and a place then goes back by itself.
            Err(_) => {
                rx.close();
                match rx.try_recv() {
                    Ok(Ok(())) => Some(()),
                    _ => None,
                }
            }
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.leave().is_some() {
            // A place sent to a request that will not use it.
            self.gated.release();
        }
    }
}

/// The class of a request from its `x-tailguard-criticality` header (`default` when absent
/// or not one of the three words).
pub fn criticality(headers: &http::HeaderMap) -> Criticality {
    headers
        .get(CRITICALITY)
        .and_then(|v| Criticality::parse(v.as_bytes()))
        .unwrap_or(Criticality::Default)
}

#[cfg(test)]
mod tests;
