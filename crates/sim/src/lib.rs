//! A deterministic discrete-event simulator running tailguard's balancer code in virtual time.
#![warn(missing_docs)]
