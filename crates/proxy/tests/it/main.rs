//! The proxy's integration tests, one binary (a module per area, one `support`): real
//! sockets on 127.0.0.1, live backends, tier 2 marked `#[ignore = "tier 2: ..."]`.

mod support;

mod admin_limits;
mod admin_load;
mod balancers;
mod config_files;
mod conformance;
mod dashboard;
mod deadlines;
mod deploy;
mod dns;
mod edges;
mod encoded_paths;
mod event_loop;
mod grpc;
mod grpc_streams;
mod h1_server_differential;
mod h1_upstream_differential;
mod h2_clients;
mod h2_upstream;
mod h2spec;
mod header_limits;
mod health;
mod hedging;
mod hostile;
mod hostile_round3;
mod k8s;
mod outlier;
mod pool_limit;
mod pool_reuse;
mod probing;
mod proxy;
mod pushback;
mod rate_limit;
mod reflection;
mod replay;
mod retain;
mod routes;
mod slow_clients;
mod threads;
mod timeouts_budget;
mod tls;
mod upstream_names;
mod upstream_tls;
mod yaml_fuzz;
