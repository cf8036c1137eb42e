//! A valid fleet repo at one revision ([`Fleet`]) and what it answers: its clusters, waves,
//! gates and notification hooks. Only the validator builds one (`validate::check`, after
//! every check passed), and `resolve` adds what a pool's desired state needs; the fields the
//! two fill in are theirs alone (`pub(super)`), everyone else reads through the methods.

use std::collections::BTreeMap;

use super::diagnostics::Diagnostics;
use super::model::{self, Cluster, FleetSpec, HealthGate, Metadata, Wave};

/// A valid fleet repo at one revision. Only the loaders build one, after every check passed.
#[derive(Clone, Debug, PartialEq)]
pub struct Fleet {
    pub metadata: Metadata,
    pub spec: FleetSpec,
    /// By name.
    pub clusters: BTreeMap<String, Cluster>,
    /// By name.
    pub gates: BTreeMap<String, HealthGate>,
    /// Cluster name → index of its wave in `spec.waves`.
    pub(super) wave_of: BTreeMap<String, usize>,
    /// The commit this fleet was read from, when read from git.
    pub(super) commit: Option<String>,
    /// What validation found worth saying that does not make the repo invalid (a rollout
    /// field a managed pool's owner cannot honour), each at its file and line.
    pub(super) warnings: Diagnostics,
}

impl Fleet {
    /// The Fleet document's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The commit ID, when read from a git revision ([`Fleet::at_commit`]).
    pub fn commit(&self) -> Option<&str> {
        self.commit.as_deref()
    }

    /// The fleet as read from commit `commit` (what the git reader records).
    pub fn at_commit(mut self, commit: impl Into<String>) -> Fleet {
        self.commit = Some(commit.into());
        self
    }

    /// The warnings of validation (the repo is valid; these say what will not happen as
    /// written), sorted by file and line.
    pub fn warnings(&self) -> &Diagnostics {
        &self.warnings
    }

    /// Cluster names, sorted.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.clusters.keys().map(String::as_str)
    }

    /// The waves in rollout order.
    pub fn waves(&self) -> &[Wave] {
        &self.spec.waves
    }

    /// The position of a cluster's wave in [`Fleet::waves`].
    pub fn wave_index_of(&self, cluster: &str) -> Option<usize> {
        self.wave_of.get(cluster).copied()
    }

    /// The clusters of wave `index`, sorted by name.
    pub fn clusters_in_wave(&self, index: usize) -> Vec<&str> {
        self.wave_of
            .iter()
            .filter(|(_, w)| **w == index)
            .map(|(c, _)| c.as_str())
            .collect()
    }

    /// Whether later waves wait for earlier ones (`spec.promotion.guard`, default true).
    pub fn promotion_guard(&self) -> bool {
        self.spec.promotion.guard.unwrap_or(true)
    }

    /// The notification webhooks of one cluster: its own list if it sets one (a list is
    /// replaced as a whole, so `notifications: []` silences a cluster), else the fleet's.
    /// `None` if the cluster does not exist.
    pub fn notifications_for(&self, cluster: &str) -> Option<Vec<model::WebhookSpec>> {
        let c = self.clusters.get(cluster)?;
        Some(
            c.spec
                .notifications
                .clone()
                .or_else(|| self.spec.notifications.clone())
                .unwrap_or_default(),
        )
    }
}
