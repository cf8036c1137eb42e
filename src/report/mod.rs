//! Commit statuses: how each agent reports its clusters' and pools' progress on the fleet
//! commits it acts on. One small trait, [`StatusStore`], served by the git notes (the
//! default, [`notes`]) or a forge's commit-status API (`crate::forge`, which also builds the
//! configured store).
//! Every backend is idempotent: it compares with what is recorded and writes only on change,
//! so an agent can report its whole state on every loop.
//!
//! Contexts follow the contract: `rota/<cluster>` and `rota/<cluster>/<pool>`; descriptions
//! are at most 140 characters (the forges' limit), cut with `…` when longer.
//!
//! What every backend shares lives below them: [`status`] (one commit status, its contexts)
//! and [`store`] (the trait, its errors, the checks before a write).

pub mod budget;
pub mod economy;
pub mod evidence;
pub mod metered;
pub mod note_doc;
pub mod note_reader;
pub mod notes;
pub mod rollup;
pub mod status;
pub mod store;

pub use notes::{GitNotesStore, NotesTips};
pub use status::{
    CommitStatus, MAX_DESCRIPTION_CHARS, State, cluster_context, fit_description, pool_context,
};
pub(crate) use store::validate;
pub use store::{Posted, ReportError, StatusStore};
