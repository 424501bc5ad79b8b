//! Failure accrual, backoffs, retry budgets, hedging and outlier ejection: the state machines
//! that stop a client from sending to broken endpoints, and bound what retrying may cost.
//!
//! - [`admission`]: who goes, waits or is refused under a concurrency limit (criticality,
//!   deadlines).
//! - [`accrual`]: per-endpoint failure accrual (consecutive failures, success rate over requests
//!   or over time), a backoff, then exactly one probe (Finagle, Linkerd 1).
//! - [`backoff`]: constant, exponential, equal-jittered and full-jittered backoffs.
//! - [`budget`]: the retry budget (20% of requests plus 10/s over 10 s by default).
//! - [`classify`]: which attempts succeeded and which failures may be retried.
//! - [`hedge`]: backup requests after the live p95, under their own budget.
//! - [`limit`]: adaptive concurrency limits (Gradient2, AIMD) learned from round trips.
//! - [`outlier`]: latency outlier ejection (Envoy's outlier detection, on latency).
//!
//! Everything here is pure: time is a [`std::time::Duration`] since an epoch the caller fixes,
//! randomness comes in as `&mut dyn RngCore`, and nothing allocates per request. The simulator
//! and the proxy drive the same structs.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::{AttemptOutcome, Classifier, Method, RetryBudget, RetryBudgetConfig};
//!
//! let now = Duration::ZERO;
//! let mut budget = RetryBudget::new(RetryBudgetConfig::default());
//! budget.deposit(now);
//! let class = Classifier::default().classify(Method::Get, AttemptOutcome::Status(502));
//! assert!(class.retryable && budget.try_withdraw(now));
//! ```

#![warn(missing_docs)]

pub mod accrual;
pub mod admission;
pub mod backoff;
pub mod budget;
pub mod classify;
pub mod health;
pub mod hedge;
pub mod limit;
pub mod outlier;
pub mod rate;
mod window;

pub use accrual::{Accrual, AccrualConfig, AccrualError, Ticket, TripPolicy};
pub use backoff::{Backoff, BackoffError};
pub use budget::{BudgetError, RetryBudget, RetryBudgetConfig};
pub use classify::{grpc_http_status, AttemptOutcome, Class, Classifier, Method, GRPC_UNAVAILABLE};
pub use health::{Health, HealthCheckConfig, HealthCheckError, HealthState};
pub use hedge::{HedgeConfig, HedgeError, Hedger};
pub use outlier::{OutlierConfig, OutlierDetector, OutlierError};
