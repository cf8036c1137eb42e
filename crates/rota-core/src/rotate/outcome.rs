//! What one plan decides ([`Plan`]): the actions in order, the checkpoint to write before
//! them and what the status should say ([`StatusSummary`]). The router and each strategy's
//! planner return one; it lives below them.

use super::action::Planned;
use super::checkpoint::Checkpoint;
use super::phase::Phase;
use super::stop;

/// What the status of the resource should say after this plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusSummary {
    pub phase: Phase,
    /// A stable, low-cardinality reason (conditions, events, metrics).
    pub reason: &'static str,
    /// What the pool waits for, or why it stopped.
    pub message: String,
    /// When the pool is stopped: its cause, what holds it and who moves it on, how.
    pub stop: Option<stop::StopNote>,
    pub total: u32,
    pub on_target: u32,
    pub ready: u32,
    /// About how long the rotation has left (`rotate::eta`), once a batch has been timed.
    pub remaining: Option<std::time::Duration>,
}

/// The output of [`plan()`]: persist `checkpoint`, then execute `actions` in order, stopping
/// at the first failure.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub actions: Vec<Planned>,
    /// `readOnly` mode: what would have been done (nothing is executed).
    pub dry_run: Vec<Planned>,
    /// The checkpoint to write before any action; `None` when there is no rotation.
    pub checkpoint: Option<Checkpoint>,
    pub status: StatusSummary,
}
