//! Endpoint load estimators (pending, peak EWMA) and pickers (round robin, P2C, heap, aperture).
#![warn(missing_docs)]
