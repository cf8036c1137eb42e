//! The GitOps agent of one cluster as a value ([`Agent`]): its source, clients, stores,
//! the commit in force ([`InForce`]) and what it did last ([`Snapshot`]), and how a pass
//! fails ([`AgentError`]). What it does is added by `impl Agent` blocks: the pass in
//! `mod.rs` and the writes to its status store in `report_writes`. The struct lives below
//! both, so `report_writes` does not import the file that calls it.

use std::collections::BTreeMap;
use std::sync::Arc;

use git2::Oid;
use tokio::sync::watch;

use super::config::AgentConfig;
use super::{reporting, stops};
use crate::controller::clock::Clock;
use crate::report::{CommitStatus, GitNotesStore, StatusStore};
use crate::source::GitSource;
use crate::source::trust::{LastGood, Verifier};
use rota_core::fleet::resolved::DesiredCluster;
use rota_core::waves::{PoolRecord, WaveView};

/// The commit in force and what it resolved to.
#[derive(Debug, Clone)]
pub(super) struct InForce {
    pub(super) commit: Oid,
    pub(super) cluster: DesiredCluster,
    pub(super) waves: Vec<WaveView>,
    pub(super) guard: bool,
    /// The cluster's `spec.notifications` (or the fleet's) at this commit.
    pub(super) notifications: Vec<rota_core::fleet::model::WebhookSpec>,
    /// This cluster's wave and the fleet's size, for the statuses a forge gets.
    pub(super) shape: reporting::FleetShape,
}

/// What the agent did last (for tests, `rota demo` and logs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The last good commit, in force.
    pub in_force: Option<String>,
    /// The newest commit seen on the branch.
    pub head: Option<String>,
    /// Commits refused, with why.
    pub rejected: Vec<(String, String)>,
    /// The statuses last reported on the commit in force (cluster first).
    pub statuses: Vec<CommitStatus>,
    /// The commit `statuses` are on (it lags `in_force` until the first pass on a new one).
    pub reported: Option<String>,
}

pub struct Agent {
    pub(super) config: AgentConfig,
    pub(super) source: Arc<GitSource>,
    pub(super) client: kube::Client,
    pub(super) notes: Arc<GitNotesStore>,
    pub(super) store: Arc<dyn StatusStore>,
    pub(super) verifier: Option<Arc<Verifier>>,
    pub(super) clock: Clock,
    pub(super) last_good: LastGood,
    pub(super) seen: Option<Oid>,
    pub(super) in_force: Option<InForce>,
    pub(super) records: BTreeMap<String, PoolRecord>,
    pub(super) snapshot: watch::Sender<Snapshot>,
    /// Operations (see [`Agent::set_metrics`], [`Agent::set_notifier`]).
    pub(super) metrics: Option<crate::metrics::Metrics>,
    pub(super) notifier: Option<crate::notify::SharedNotifier>,
    /// The webhooks the notifier was last built from.
    pub(super) webhooks: Option<Vec<rota_core::fleet::model::WebhookSpec>>,
    /// (old, new): the old commit's pending statuses still have to be made final.
    pub(super) superseding: Option<(Oid, Oid)>,
    /// The cloud groups, read to adopt pools already on their pins (see [`adopt`]).
    pub(super) groups: Option<Arc<dyn crate::cloud::NodeGroups>>,
    /// The managed pools' owners, read to adopt those already on their pins.
    pub(super) owners: crate::controller::owners::Owners,
    /// Before a commit is in force in this process (after a restart): the commits this
    /// cluster's NodePoolRotations were last given, which a new head must descend from.
    pub(super) resumed_from: Option<Vec<Oid>>,
    /// Checked before every write; `None`: the only agent by construction (tests).
    pub(super) leadership: Option<crate::controller::leader::Leadership>,
    /// What a forge was last given per context, and which commits change which pools
    /// (see [`reporting`]).
    pub(super) written: crate::report::economy::Written,
    pub(super) baseline: reporting::Baseline,
    /// The fleet stop's orders as last read (`rota stop`, see [`stops`]).
    pub(super) stops: Arc<std::sync::Mutex<stops::StopCache>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("statuses: {0}")]
    Report(#[from] crate::report::ReportError),
    /// The commit could not be checked (a verifier that did not run, a task that failed):
    /// not a verdict on the commit, which is checked again on the next pass.
    #[error("could not check commit {commit} (retrying): {message}")]
    Check { commit: String, message: String },
    /// The lease is not held with margin: this replica writes nothing now.
    #[error("{0}")]
    NotLeading(#[from] crate::controller::leader::LeaseError),
}
