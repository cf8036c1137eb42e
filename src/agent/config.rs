//! How one cluster's agent is set up ([`AgentConfig`]): its cluster, version, resync,
//! whether it installs the CRD, where secrets are read and how it reports. The agent holds
//! one; it lives below every file of the agent.

use std::path::PathBuf;
use std::time::Duration;

use crate::source::history::ConfirmedRewrite;

use super::reporting;

/// The agent's settings (`rota agent`'s flags, or a test's).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// This cluster's name in the fleet repo.
    pub cluster: String,
    /// The value of the `rota.dev/agent-version` label on the resources it applies.
    pub version: String,
    /// The fleet repo lives in this folder of the git tree.
    pub subdir: Option<PathBuf>,
    /// Re-plan and re-report this often even without a new commit.
    pub resync: Duration,
    /// Install (server-side-apply) the NodePoolRotation CRD at start (`--install-crd`);
    /// otherwise it must be installed already (see `wiring::start`).
    pub install_crd: bool,
    /// A human's confirmation of one history rewrite (see [`crate::source::history`]).
    pub confirm_rewrite: Option<ConfirmedRewrite>,
    /// Where secrets the fleet repo names (`urlSecret`) are read (`--secrets-dir`).
    pub secrets_dir: Option<PathBuf>,
    /// Which contexts a forge gets and the page the wave rollup links to.
    pub report: reporting::ReportConfig,
}

impl AgentConfig {
    pub fn new(cluster: &str) -> Self {
        AgentConfig {
            cluster: cluster.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            subdir: None,
            resync: Duration::from_secs(5),
            install_crd: false,
            confirm_rewrite: None,
            secrets_dir: None,
            report: reporting::ReportConfig::default(),
        }
    }
}
