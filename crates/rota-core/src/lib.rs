//! rota's core: what decides, with no I/O.
//!
//! - [`fleet`]: the fleet repo's model, its JSON Schemas and semantic validation, and the
//!   resolution of one cluster's desired state (files are handed in).
//! - [`rotate`]: the planner of one pool's blue-green rotation (a pure function of desired,
//!   observed, checkpoint and now, returning actions with their reasons), the checkpoint,
//!   the NodePoolRotation's spec and status as plain data, the one status composer and stuck
//!   detection.
//! - [`waves`]: the order in which clusters take a version, and the promotion guard over the
//!   agents' records.
//! - [`images`]: discovery of new images (what to ask the clouds, whether to propose,
//!   wait for the bake or for a lagging region) and the textual edit that adds a version.
//! - [`ledger`]: the image ledger's lives of nodes on images, its line format and what an
//!   observation changes in it.
//! - [`cloud`]: the narrow trait every cloud provider implements and its value types.
//! - [`errors`]: the error classes (what a retry should do), importing nothing of rota.
//!
//! The edges (Kubernetes, the clouds, git, HTTP) and the runtime are the `rota` crate; the
//! simulated fleet is `rota-sim`. Neither is a dependency here.

pub mod cloud;
pub mod edit;
pub mod errors;
pub mod fleet;
pub mod images;
pub mod ledger;
pub mod onboard;
pub mod parallel;
pub mod rotate;
pub mod sanitize;
pub mod waves;
