//! The fleet repo: its model, loading, validation and the resolution of one cluster's desired
//! state. Pure code: no kube, no tokio, no network, no file system (the files are handed in;
//! `rota::source::read` reads them from a folder or a git revision, within budgets).
//!
//! # Public API
//!
//! - [`load_files`]`(&[SourceFile])`: load and validate a repo's files (and the fuzzing
//!   entry point); [`load_read`] the same with the problems the reader found.
//! - [`Fleet::resolve_cluster`]`(name) -> Result<resolved::DesiredCluster, ResolveError>`,
//!   [`Fleet::resolve_all`], [`Fleet::cluster_names`], [`Fleet::waves`],
//!   [`Fleet::wave_index_of`], [`Fleet::clusters_in_wave`], [`Fleet::promotion_guard`].
//! - [`Diagnostics`]: every problem found, each with file, line, column, field path, message
//!   and hint; rendered by [`Diagnostics::render`] as `human`, `json` or `github`.
//! - [`diff::diff`]`(from, to)`: which pools change image between two revisions, by wave.
//!
//! # Pipeline
//!
//! the reader (files, limits; at the edge) → `yaml` (span-aware parse, hostile-input checks) → `load`
//! (envelope, JSON Schema of the kind in `schema`, typed `model`) → `validate` (semantic rules
//! across documents) → [`Fleet`] → `resolve` (merge, pins, gates, modes) →
//! [`resolved::DesiredCluster`]. Every stage collects all its errors before stopping, and no
//! stage after a failed one can see a half-valid repo: a [`Fleet`] value is always valid.
//!
//! # Modes
//!
//! The most specific `mode` set wins (pool, else cluster, else fleet; default `reconcile`),
//! except that `ignore` on an ancestor always wins; `mode: ignore` on the Fleet is the kill
//! switch. See [`resolve::combine_modes`].

pub mod diagnostics;
pub mod diff;
pub mod duration;
pub mod image_source;
pub mod kubernetes;
pub mod load;
pub mod managed;
pub mod model;
pub mod owner;
pub mod platform;
pub mod proposal;
pub mod resolve;
pub mod resolved;
pub mod schema;
pub mod stops;
pub mod strategy;
pub mod validate;
pub mod yaml;

use std::collections::BTreeMap;

pub use diagnostics::{Diagnostic, Diagnostics, Format};
pub use resolve::ResolveError;

use model::{Cluster, FleetSpec, HealthGate, Metadata, Wave};

/// One YAML file of the repo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the repo root, `/`-separated.
    pub path: String,
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// A file from text, for tests and tools that build a repo in memory.
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile {
            path: path.into(),
            bytes: text.into().into_bytes(),
        }
    }
}

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
    wave_of: BTreeMap<String, usize>,
    /// The commit this fleet was read from, when read from git.
    commit: Option<String>,
    /// What validation found worth saying that does not make the repo invalid (a rollout
    /// field a managed pool's owner cannot honour), each at its file and line.
    warnings: Diagnostics,
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

/// Load and validate the documents in `files` (paths relative to the repo root).
pub fn load_files(files: &[SourceFile]) -> Result<Fleet, Diagnostics> {
    let mut diags = Diagnostics::new();
    if files.is_empty() {
        diags.push(Diagnostic::new(
            &diagnostics::Location::default(),
            "",
            "no *.yaml or *.yml file found in the fleet repo",
        ));
        return Err(diags);
    }
    let docs = load::documents(files, &mut diags);
    validate::check(docs, diags).map_err(Diagnostics::sorted)
}

/// [`load_files`] for files whose reading found the problems `read`: they are reported
/// together with those of the documents.
pub fn load_read(files: &[SourceFile], read: Diagnostics) -> Result<Fleet, Diagnostics> {
    match load_files(files) {
        Ok(fleet) if read.is_empty() => Ok(fleet),
        Ok(_) => Err(read.sorted()),
        Err(mut d) => {
            d.extend(read);
            Err(d.sorted())
        }
    }
}
