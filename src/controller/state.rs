//! The rotation controller of one cluster as a value ([`Controller`]): its clients, caches,
//! per-pool state and leadership, and the counters a caller reads while it runs
//! ([`Stats`]). What it does is added by `impl Controller` blocks: the pass in `mod.rs`, and
//! one room each for observing, the describe reuse, the gates' samples and the aftermath.
//! The struct lives below all of them, so none of those rooms imports the file that calls
//! it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use kube::runtime::events::Recorder;
use tokio::sync::mpsc;

use super::clock::Clock;
use super::config::Config;
use super::leader::{Leadership, Renewal};
use super::pool_state::PoolState;
use super::wake::Wake;
use super::{departures, owners, rotations, skew};
use crate::cloud::NodeGroups;
use crate::kube::index::ClusterIndex;
use crate::metrics::Metrics;
use crate::notify::SharedNotifier;

/// Counters a caller can read while the controller runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Reconciles of one pool (whatever their outcome).
    pub reconciles: AtomicU64,
    /// Actions executed.
    pub actions: AtomicU64,
    /// Whether this controller holds its Lease now.
    pub leading: AtomicBool,
}

/// The rotation controller of one cluster.
pub struct Controller {
    pub(super) client: kube::Client,
    pub(super) groups: Arc<dyn NodeGroups>,
    pub(super) config: Config,
    pub(super) clock: Clock,
    pub(super) pools: BTreeMap<String, PoolState>,
    pub(super) recorder: Option<Recorder>,
    pub(super) wakes: mpsc::UnboundedReceiver<Wake>,
    /// The NodePoolRotations, from a watch (a pass reads them here, not with a list).
    pub(super) rotations: rotations::Rotations,
    pub(super) watchers: Vec<tokio::task::JoinHandle<()>>,
    /// The cluster's watch-fed index: every read of nodes, pods, PDBs and events.
    pub(super) index: Arc<ClusterIndex>,
    /// Whether the first pass waited for the index's first sync already.
    pub(super) first_sync: bool,
    pub(super) metrics: Metrics,
    pub(super) notifier: SharedNotifier,
    pub stats: Arc<Stats>,
    /// Whether this process leads; shared with the agent.
    pub(super) leadership: Leadership,
    /// The renewal task once [`Controller::elect`] started it: from then on every pass and
    /// every side effect is gated on `leadership`.
    pub(super) election: Option<Renewal>,
    /// The leadership term this replica acts under and when (its clock) it was first seen.
    pub(super) term: Option<(
        rota_core::rotate::resource::Fence,
        chrono::DateTime<chrono::Utc>,
    )>,
    /// Test hook: after persisting the checkpoint, run only this many actions of the next
    /// plan that has more, then report [`Outcome::Crashed`] (the caller drops the
    /// controller and starts another, as after a crash).
    pub crash_after: Option<usize>,
    /// The API server's version, read before a surge onto a version that declares its
    /// kubelet (see [`skew`]).
    pub(super) control_plane: skew::ControlPlane,
    /// The owners' APIs of the managed pools this controller drives (see
    /// [`Controller::with_owners`]).
    pub(super) owners: owners::Owners,
    /// rota's drains and terminations, for the image ledger ([`departures`]).
    pub(super) departures: departures::Departures,
    /// Karpenter's objects in this cluster (its NodePools are driven through them).
    pub(super) drift: Arc<dyn rota_core::cloud::karpenter::DriftPools>,
}

impl Drop for Controller {
    fn drop(&mut self) {
        for w in &self.watchers {
            w.abort();
        }
    }
}
