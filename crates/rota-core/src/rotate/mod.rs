//! Blue-green rotation of one node pool, decided purely: `plan` takes the desired pool, what
//! was observed, the checkpoint and the time and returns the actions with their reasons;
//! `controller::apply` acts on them.
//!
//! The vocabulary shared by both and by the NodePoolRotation resource lives in files of its
//! own, below the planners, and is re-exported here: [`Action`] (what to do, always with a
//! reason: `action.rs`), [`Plan`] (the actions and the next [`checkpoint::Checkpoint`]:
//! `outcome.rs`) and [`Phase`] (what `kubectl get` shows: `phase.rs`). This file only
//! declares and re-exports; no file below imports it (tests aside).

pub mod action;
pub mod aftermath;
pub mod bluegreen;
pub mod checkpoint;
mod counts;
pub mod drift;
pub mod eta;
pub mod listing;
pub mod lookup;
pub mod managed;
pub mod observed;
pub mod operator;
pub mod outcome;
pub mod parallel;
pub mod phase;
pub mod plan;
pub mod resource;
mod route;
pub mod skew;
pub mod status;
pub mod stop;
pub mod stuck;
pub mod window;

pub use action::{Action, Planned};
pub use checkpoint::{
    Batch, BlueGreenMark, BlueGreenStep, Checkpoint, ChosenNode, DriftBatch, DriftMark,
    OwnerUpdateMark, Stage,
};
pub use observed::{GateVerdict, Observed, ObservedNode, ObservedPod, PdbRef, PodKind, Refusal};
pub use outcome::{Plan, StatusSummary};
pub use phase::Phase;
pub use route::{plan, plan_with};

#[cfg(test)]
mod tests;
