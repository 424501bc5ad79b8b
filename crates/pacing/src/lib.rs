//! Pure arrival schedules: when the i-th request is due, for constant and Poisson arrivals.
#![warn(missing_docs)]
