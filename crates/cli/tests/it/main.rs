//! The `tailguard` binary's integration tests, one binary (a module per verb or area, one
//! `support`): each runs the real binary as a child process.

mod support;

mod access_log_cli;
mod closed_stdout;
mod demo_live;
mod endpoint_churn;
mod flag_bounds;
mod k8s_cli;
mod load_bounds;
mod load_cli;
mod load_grpc;
mod load_grpc_streams;
mod merge_bounds;
mod merge_cli;
mod pgo_training;
mod proxy_config_files;
mod proxy_signals;
mod stall_default;
mod vocabulary;
