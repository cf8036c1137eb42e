//! The image ledger in the fleet repo: which image ran on which node of which cluster, and
//! when, kept in git as long as the repo is kept. The model and its line format are the
//! core's [`rota_core::ledger`]; this module writes and reads it.
//!
//! Each cluster's agent is the single writer of its own ref, `refs/rota/ledger/<cluster>`
//! (as of its notes ref, `refs/notes/rota/<cluster>`): each append is a commit whose only
//! parent is the previous tip, so the chain can be walked and checked
//! ([`verify::verify_chain`]), and a push that is not a fast-forward is refused by the server.
//! The ref is outside `refs/heads` and `refs/notes/rota`: deleting a cluster from the fleet
//! repo leaves its ledger where it is.
//!
//! - [`book`]: read a ledger (the open lives, the lives of a period) and append to it.
//! - [`recorder`]: the agent's side: observe the cluster's nodes (the controller's
//!   watch-fed index, the NodePoolRotations, the cloud group for instance images) and
//!   append what changed.
//! - [`managed`]: a managed pool's nodes and their images, as their owners report them
//!   (the owners' node labels, Karpenter's NodeClaims; a blue-green move's two pools).
//! - [`history`]: who proposed and merged a version (the commits that add and pin it).
//! - [`index`]: a per-image index of the ledgers, cached beside the repo's objects and
//!   brought up to date from what was appended, for `rota audit --image` at fleet size.
//! - [`verify`]: the chain and the signatures, naming what does not hold.
//! - [`refs`]: the ledger's ref and the payload each append's signature covers; [`error`]:
//!   how reading or appending fails.

pub mod book;
pub mod error;
pub mod history;
pub mod index;
pub mod managed;
pub mod recorder;
pub mod refs;
pub mod verify;

pub use book::{Book, append, clusters, read_book, read_lives};
pub use error::LedgerError;
pub use refs::{LEDGER_PREFIX, PAYLOAD_HEADER, ledger_ref, signed_payload};
pub use rota_core::ledger::{Filter, Left, Life};

/// The command that lists a pool's nodes from the image ledger (each node's life on the
/// fleet's images): what `status --fleet`, the page and the evidence link a pool to.
pub fn audit_command(cluster: &str, pool: &str) -> String {
    format!("rota audit --cluster {cluster} --pool {pool}")
}
