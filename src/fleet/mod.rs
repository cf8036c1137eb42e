//! The fleet repo: its model, loading, validation and the resolution of one cluster's desired
//! state. Pure code: no kube, no tokio, no network.
//!
//! # Public API
//!
//! - [`load_dir`]`(path) -> Result<Fleet, Diagnostics>`: read a fleet repo from a folder.
//! - [`load_git`]`(repo_path, rev) -> Result<Fleet, Diagnostics>`: read it from a git revision,
//!   straight from the object database (no checkout); [`Fleet::commit`] is the commit ID.
//!   [`load_git_at`] reads a sub-folder of the tree.
//! - [`load_files`]`(&[SourceFile])`: the pure core both use (and the fuzzing entry point).
//! - [`Fleet::resolve_cluster`]`(name) -> Result<resolved::DesiredCluster, ResolveError>`,
//!   [`Fleet::resolve_all`], [`Fleet::cluster_names`], [`Fleet::waves`],
//!   [`Fleet::wave_index_of`], [`Fleet::clusters_in_wave`], [`Fleet::promotion_guard`].
//! - [`Diagnostics`]: every problem found, each with file, line, column, field path, message
//!   and hint; rendered by [`Diagnostics::render`] as `human`, `json` or `github`.
//! - [`diff::diff`]`(from, to)`: which pools change image between two revisions, by wave.
//!
//! # Pipeline
//!
//! `source` (files, limits) → `yaml` (span-aware parse, hostile-input checks) → `load`
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
pub mod load;
pub mod model;
pub mod resolve;
pub mod resolved;
pub mod schema;
pub mod source;
pub mod validate;
pub mod yaml;

use std::collections::BTreeMap;
use std::path::Path;

pub use diagnostics::{Diagnostic, Diagnostics, Format};
pub use resolve::ResolveError;
pub use source::SourceFile;

use model::{Cluster, FleetSpec, HealthGate, Metadata, Wave};

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
}

impl Fleet {
    /// The Fleet document's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The commit ID when loaded with [`load_git`].
    pub fn commit(&self) -> Option<&str> {
        self.commit.as_deref()
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

/// Load the fleet repo in folder `path` (recursively, skipping hidden entries).
pub fn load_dir(path: impl AsRef<Path>) -> Result<Fleet, Diagnostics> {
    let (files, diags) = source::read_dir(path.as_ref())?;
    finish(&files, diags)
}

/// Load the fleet repo at revision `rev` of the git repository at `repo_path`.
pub fn load_git(repo_path: impl AsRef<Path>, rev: &str) -> Result<Fleet, Diagnostics> {
    load_git_at(repo_path, rev, None)
}

/// Like [`load_git`], with the fleet repo in folder `subdir` of the git tree; file paths in
/// diagnostics are relative to that folder.
pub fn load_git_at(
    repo_path: impl AsRef<Path>,
    rev: &str,
    subdir: Option<&Path>,
) -> Result<Fleet, Diagnostics> {
    let (files, diags, commit) = source::read_git(repo_path.as_ref(), rev, subdir)?;
    let mut fleet = finish(&files, diags)?;
    fleet.commit = Some(commit);
    Ok(fleet)
}

/// Problems found while reading files are reported together with those of the documents.
fn finish(files: &[SourceFile], read: Diagnostics) -> Result<Fleet, Diagnostics> {
    match load_files(files) {
        Ok(fleet) if read.is_empty() => Ok(fleet),
        Ok(_) => Err(read.sorted()),
        Err(mut d) => {
            d.extend(read);
            Err(d.sorted())
        }
    }
}
