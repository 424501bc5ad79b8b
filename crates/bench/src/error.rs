//! Why a bench run could not start or finish.

/// Why a bench run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The scenario name or file is unusable.
    #[error(transparent)]
    Scenario(#[from] tailguard_sim::ScenarioError),
    /// A flag value is unusable.
    #[error("{0}")]
    Invalid(String),
    /// The fleet could not start.
    #[error("fleet: {0}")]
    Fleet(#[from] tailguard_serve::ServeError),
    /// The tailguard proxy could not start.
    #[error("proxy: {0}")]
    Proxy(#[from] tailguard_proxy::StartError),
    /// A peer proxy could not start.
    #[error("{0}")]
    Peer(String),
    /// The load generator refused or failed.
    #[error("load: {0}")]
    Load(#[from] tailguard_load::LoadError),
    /// A runtime, socket or file operation failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
