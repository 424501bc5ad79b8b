//! Command-line changes to a scenario: another seed, deadline, duration, rate or arm subset.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_sim::{Overrides, Scenario};
//!
//! let mut s = Scenario::builtin("add-steps").unwrap();
//! let o = Overrides { rate: Some(300.0), arms: vec!["proxy".into()], ..Overrides::default() };
//! s.apply(&o).unwrap();
//! assert_eq!(s.arms.len(), 1);
//! assert!(s.load.to_string().starts_with("open loop"));
//! ```

use super::{LoadShape, Scenario, ScenarioError};
use std::time::Duration;
use tailguard_pacing::Arrivals;
use tailguard_text::yaml::DocumentError;

/// Changes to apply to a scenario; `None` and empty keep the scenario's own value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// Another seed.
    pub seed: Option<u64>,
    /// Another deadline for "success within deadline".
    pub deadline: Option<Duration>,
    /// Another load duration.
    pub duration: Option<Duration>,
    /// An open loop at this rate, flat (turns a closed-loop scenario into an open one, and
    /// leaves out the scenario's ramp).
    pub rate: Option<f64>,
    /// Open-loop arrivals (constant or Poisson).
    pub arrivals: Option<Arrivals>,
    /// Another number of client-side balancers.
    pub clients: Option<u32>,
    /// Run only these arms, in this order.
    pub arms: Vec<String>,
}

impl Scenario {
    /// Applies `o`.
    ///
    /// # Errors
    /// [`ScenarioError::Document`] for an unknown arm or a bad value.
    pub fn apply(&mut self, o: &Overrides) -> Result<(), ScenarioError> {
        let invalid = |message: String| {
            ScenarioError::from(DocumentError::invalid(self.name.clone(), message))
        };
        if let Some(rate) = o.rate {
            if !tailguard_pacing::rate_in_range(rate) {
                return Err(invalid(format!(
                    "--rate must be from {} to {}, got {}",
                    tailguard_pacing::MIN_RATE,
                    tailguard_pacing::MAX_RATE,
                    tailguard_pacing::show_rate(rate)
                )));
            }
            self.load.shape = LoadShape::Open {
                arrivals: o.arrivals.unwrap_or(Arrivals::Constant),
                rate,
                ramp: None,
            };
            // A constant rate replaces the stages too.
            self.stages = None;
        } else if let (Some(a), LoadShape::Open { rate, ramp, .. }) = (o.arrivals, self.load.shape)
        {
            self.load.shape = LoadShape::Open {
                arrivals: a,
                rate,
                ramp,
            };
        }
        if let Some(n) = o
            .clients
            .filter(|n| !(1..=super::limits::MAX_CLIENTS).contains(n))
        {
            return Err(invalid(format!(
                "--clients must be from 1 to {}, got {n}",
                super::limits::MAX_CLIENTS
            )));
        }
        self.load.clients = o.clients.unwrap_or(self.load.clients);
        self.load.duration = o.duration.unwrap_or(self.load.duration);
        self.seed = o.seed.unwrap_or(self.seed);
        self.deadline = o.deadline.unwrap_or(self.deadline);
        if !o.arms.is_empty() {
            let mut chosen = Vec::with_capacity(o.arms.len());
            for name in &o.arms {
                let arm = self.arms.iter().find(|a| &a.name == name).ok_or_else(|| {
                    let known: Vec<&str> = self.arms.iter().map(|a| a.name.as_str()).collect();
                    invalid(format!("no arm `{name}` (arms: {})", known.join(", ")))
                })?;
                chosen.push(arm.clone());
            }
            self.arms = chosen;
        }
        let backends = self.fleet.backends.len();
        super::limits::check(self.arms.len(), backends, &self.load)
            .map_err(|e| invalid(format!("with the flags given, {e}")))
    }
}
