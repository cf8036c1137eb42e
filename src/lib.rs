//! rota: keeps fleets of Kubernetes node pools on the machine image their git repo declares.
//!
//! This crate is the edges and the runtime; it re-exports the core's modules (`rota-core`)
//! and, with the `sim` feature, the simulated fleet (`rota-sim`) under the paths they had when
//! all three were one crate. The flow, top to bottom (`docs/architecture.md`):
//!
//! - `source` fetches the fleet repo (git2, webhooks, signature trust) and reads a revision's
//!   files (`source::read`); the core's `fleet` validates and resolves them.
//! - `agent` turns each good commit into one NodePoolRotation per pool (`kube::crd`), with the
//!   core's promotion guard (`waves`), and reports progress (`report`: commit statuses on git
//!   notes or a forge); `promotion` checks and writes wave promotions; `propose` is the
//!   scheduled pass that proposes new images, promotions and reverts as pull requests.
//! - `controller` reconciles each NodePoolRotation: observe (`kube`'s watch-fed index, the
//!   `cloud` group), sample `gates`, plan (the core's `rotate`, pure), compose the status,
//!   act (`controller::apply`), with leader election; `notify` and `metrics` report on it.
//! - `ui` is the fleet at a glance (page and terminal), `cli` one file per command, `demo`
//!   the story on the simulated fleet; `serving`, `telemetry`, `memory` and `shutdown` are
//!   what the long-running commands share.

pub use rota_core::{errors, rotate, sanitize, waves};

/// The fleet repo (the core's `fleet`), with its readers from this crate's `source::read`
/// under their old paths.
pub mod fleet {
    pub use crate::source::read::{load_dir, load_git, load_git_at};
    pub use rota_core::fleet::*;

    /// Reading a fleet repo's files (`source::read`).
    pub mod source {
        pub use crate::source::read::*;
        pub use rota_core::fleet::SourceFile;
    }
}

/// The simulated fleet (`rota-sim`).
#[cfg(feature = "sim")]
pub use rota_sim as sim;

pub mod agent;
#[cfg(feature = "sim")]
pub mod allocator;
pub mod cli;
pub mod cloud;
pub mod controller;
pub mod demo;
pub mod discovery;
pub mod forge;
pub mod gates;
pub mod https;
pub mod kube;
pub mod ledger;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod page_link;
pub mod promotion;
pub mod propose;
pub mod report;
pub mod serving;
pub mod shutdown;
pub mod source;
pub mod telemetry;
pub mod ui;
