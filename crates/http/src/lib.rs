//! hyper plumbing shared by tailguard's `load`, `serve` and `proxy`.
//!
//! Every socket tailguard opens or accepts goes through [`tcp`], which sets `TCP_NODELAY`
//! (Nagle's algorithm plus delayed ACKs adds up to 40 ms to small writes: seed 001). The only
//! way to get a socket without it is to ask for it by name (`Nagle::On`), which `tailguard
//! serve --nagle` does on purpose to demonstrate the trap.
//!
//! [`server`] holds the server presets: HTTP/1.1 and HTTP/2 (prior-knowledge h2c) on the same
//! port, with one set of settings for every server. [`client`] holds the client handshakes
//! (HTTP/1.1 or HTTP/2 over a dialed socket, the driver in a task of its own) that `load` and
//! the proxy's upstream pools share; [`error`] maps a hyper error to the error kind both
//! count it under.
//!
//! `tailguard serve` and the proxy's listener also refuse a bad HTTP/2 preface with GOAWAY
//! ([`preface`], which hyper does not) and take `Upgrade: h2c` ([`h2c`], which hyper does
//! not), both reading from the connection before hyper and putting the bytes back in front
//! ([`rewind`]).
//!
//! [`admin`] is the one admin server (the proxy's admin port, `serve`'s control endpoint,
//! `load --metrics-addr`): TCP_NODELAY, a header read timeout, graceful shutdown.
//!
//! [`quiet`] lets a connection's loop race a close or shutdown notice on every wake-up without
//! taking the notice's lock each time.
//!
//! [`fds`] raises the descriptor limit at start, sizes connection limits from it, and keeps
//! accept loops from spinning when descriptors run out. [`exposition`] writes `/metrics` in
//! the format the scraper asks for (OpenMetrics or Prometheus text), for all three servers.

#![warn(missing_docs)]

pub mod admin;
pub mod bufpool;
pub mod client;
pub mod error;
pub mod exposition;
pub mod fds;
pub mod grpc;
pub mod h1;
pub mod h2c;
pub mod hop;
pub mod names;
pub mod preface;
pub mod quiet;
pub mod rewind;
pub mod server;
pub mod spare;
pub mod tcp;
pub mod tls;

pub use error::error_chain;
pub use tcp::Nagle;
