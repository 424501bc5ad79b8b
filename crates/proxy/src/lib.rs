//! `tailguard proxy`: a latency-aware HTTP/1.1, HTTP/2 and gRPC proxy.
//!
//! # What
//! The product of seed 000 ("making things faster by adding more steps"): a hop that lowers
//! latency because it balances on latency (P2C peak EWMA by default), retries what is safe to
//! retry under a budget, and stops sending to broken endpoints (failure accrual with a single
//! probe). It adapts the pure core to live traffic and does not re-implement it: every
//! decision is made by the [`tailguard_client::Client`] that `tailguard sim` also runs.
//!
//! # Shape
//! The public face is [`config`] (the typed configuration), [`yaml`] (the Linkerd-1-style
//! file that builds it), [`start`] / [`run`] and the [`Proxy`] they return, plus [`dns`] and
//! [`grpc`] helpers. Inside, a request flows `listener` (HTTP/1.1 + h2c on one port, or
//! HTTP/1.1 + h2 over `tls`) down four stages, each ending in `Result<Response, Fault>` where
//! `fault::Fault` says whose fault it was: `forward` (hygiene, routing, admission, the body,
//! the total timeout) -> `attempts` (retries, hedging) -> `balanced` (one attempt: the
//! `endpoints` balancer's pick, its report an `in_flight`) -> `upstream` (connections), and
//! back through `response_body` (streamed, watched). `start` owns the services and applies
//! what `discovery` and `dns` find; `admin` and `metrics` are the admin
//! server. ARCHITECTURE.md has the module map.
//!
//! # Example
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tailguard_proxy::config::{Config, ServiceConfig, Upstream};
//! let upstreams = vec![Upstream::new("127.0.0.1:9001".parse()?)];
//! let config = Config::new("127.0.0.1:4140".parse()?, vec![ServiceConfig::new("web", upstreams)]);
//! let proxy = tailguard_proxy::start(config).await?;
//! println!("proxy on {}", proxy.addr());
//! proxy.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod access_log;
mod admin;
mod admission;
mod attempts;
mod balanced;
mod body;
mod clock;
pub mod config;
pub mod config_file;
mod dashboard;
mod deadline;
mod discovery;
pub mod dns;
mod endpoints;
mod fault;
mod forward;
pub use tailguard_http::grpc;
mod health;
mod hygiene;
mod idle;
mod in_flight;
pub mod k8s;
mod lag;
mod listener;
mod metrics;
mod probe;
mod pushback;
mod replay;
mod request_body;
mod response;
mod response_body;
mod retain;
pub mod route;
mod run;
mod seed;
mod service;
mod shared;
mod start;
mod tls;
mod trace;
mod upstream;
mod worker;
pub mod yaml;

pub use deadline::HTTP_HEADER as DEADLINE_HEADER;
pub use endpoints::{EndpointView, MAX_PROBES_IN_FLIGHT};
pub use response::ERROR_HEADER;
pub use run::{run, Source};
pub use shared::Shared;
pub use start::{start, start_on, Proxy, StartError};
pub use upstream::Connector;
