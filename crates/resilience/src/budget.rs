//! Retry budget: a token bucket that caps retries at a share of requests plus a floor.
//!
//! # What
//! Finagle's `RetryBudget` (tower's `TpsBudget`), in integer milli-tokens:
//! 1. Every request deposits one token (1000 milli-tokens).
//! 2. A retry withdraws `1 / percent` tokens (5 at the default 20%), if the balance allows.
//! 3. Deposits and withdrawals expire after `ttl` (10 s), in ten slots.
//! 4. The balance always includes a reserve worth `min_per_sec * ttl` retries (10/s over 10 s:
//!    100 retries), so a quiet service can still retry.
//!
//! In any window of `ttl`, retries therefore never exceed `percent * requests + min_per_sec *
//! ttl`. With `percent = 0` requests deposit nothing and only the reserve is spent.
//!
//! # Why
//! Retries turn a partial outage into a retry storm: each failing request becomes several. A
//! budget keeps the extra load bounded (20%) while still curing sporadic failures, which is what
//! makes retrying 5xx responses safe by default (Linkerd 1, linkerd2-proxy, Finagle).
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::{RetryBudget, RetryBudgetConfig};
//!
//! let config = RetryBudgetConfig { ttl: Duration::from_secs(10), min_per_sec: 0, percent: 0.2 };
//! let mut budget = RetryBudget::new(config);
//! let now = Duration::ZERO;
//! for _ in 0..10 {
//!     budget.deposit(now); // ten requests
//! }
//! assert!(budget.try_withdraw(now));
//! assert!(budget.try_withdraw(now));
//! assert!(!budget.try_withdraw(now)); // 20% of 10 is 2
//! ```

use crate::window::Window;
use std::time::Duration;

/// Milli-tokens per request deposit.
const TOKEN: i64 = 1_000;

/// Parameters of a [`RetryBudget`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudgetConfig {
    /// How long deposits and withdrawals count.
    pub ttl: Duration,
    /// Retries always allowed per second of `ttl`, whatever the traffic.
    pub min_per_sec: u32,
    /// Retries allowed per request (0.2: one retry per five requests).
    pub percent: f64,
}

impl Default for RetryBudgetConfig {
    /// Finagle's and Linkerd's default: 20% of requests plus 10 retries per second, over 10 s.
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            min_per_sec: 10,
            percent: 0.2,
        }
    }
}

/// A [`RetryBudgetConfig`] that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// The window must last at least one second (Finagle requires 1 to 60 s).
    #[error("retry budget ttl must be between 1s and 60s, got {0:?}")]
    Ttl(Duration),
    /// The share of requests must be a finite number from 0 to 1000.
    #[error("retry budget percent must be between 0 and 1000, got {0}")]
    Percent(f64),
}

impl RetryBudgetConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// The first [`BudgetError`] found.
    pub fn validate(&self) -> Result<(), BudgetError> {
        if self.ttl < Duration::from_secs(1) || self.ttl > Duration::from_secs(60) {
            return Err(BudgetError::Ttl(self.ttl));
        }
        if !(self.percent.is_finite() && (0.0..=1000.0).contains(&self.percent)) {
            return Err(BudgetError::Percent(self.percent));
        }
        Ok(())
    }
}

/// A retry budget (see the module docs).
#[derive(Clone, Debug)]
pub struct RetryBudget {
    deposit: i64,
    withdraw: i64,
    reserve: i64,
    window: Window<1>,
}

impl RetryBudget {
    /// An empty budget (only its reserve). Out-of-range parameters are clamped; call
    /// [`RetryBudgetConfig::validate`] at the edge to reject them instead.
    pub fn new(config: RetryBudgetConfig) -> Self {
        let percent = if config.percent.is_finite() {
            config.percent.clamp(0.0, 1000.0)
        } else {
            0.0
        };
        let (deposit, withdraw) = if percent == 0.0 {
            (0, TOKEN)
        } else {
            (TOKEN, ((TOKEN as f64 / percent).round() as i64).max(1))
        };
        let ttl = config.ttl.max(Duration::from_secs(1));
        let reserve_retries = f64::from(config.min_per_sec) * ttl.as_secs_f64();
        Self {
            deposit,
            withdraw,
            reserve: (reserve_retries * withdraw as f64) as i64,
            window: Window::new(ttl),
        }
    }

    /// Step 1: a request was sent at `now`.
    pub fn deposit(&mut self, now: Duration) {
        self.window.add(now, [self.deposit]);
    }

    /// Step 2: asks for one retry at `now`; true (and charged) when the budget allows it.
    pub fn try_withdraw(&mut self, now: Duration) -> bool {
        self.try_withdraw_with(now, true)
    }

    /// Asks for one retry at `now`, counting the per-second floor (`min_per_sec`) only when
    /// `floor` is true: while a concurrency limit refuses requests, retries come only from
    /// the share of requests, never from the floor (see `tailguard_client::Client::on_overload`).
    pub fn try_withdraw_with(&mut self, now: Duration, floor: bool) -> bool {
        let reserve = if floor { 0 } else { self.reserve };
        if self.balance_milli(now) - reserve < self.withdraw {
            return false;
        }
        self.window.add(now, [-self.withdraw]);
        true
    }

    /// How many retries the budget would allow right now.
    pub fn balance(&mut self, now: Duration) -> u64 {
        u64::try_from(self.balance_milli(now) / self.withdraw).unwrap_or(0)
    }

    fn balance_milli(&mut self, now: Duration) -> i64 {
        self.reserve + self.window.sum(now)[0]
    }
}

#[cfg(test)]
mod tests;
