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
pub mod source_file;
pub mod stops;
pub mod strategy;
pub mod valid;
pub mod validate;
pub mod yaml;

pub use diagnostics::{Diagnostic, Diagnostics, Format};
pub use resolve::ResolveError;
pub use source_file::SourceFile;
pub use valid::Fleet;

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
