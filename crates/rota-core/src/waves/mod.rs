//! Waves: the order in which clusters take a new image, and the promotion guard that holds a
//! wave until the earlier ones completed the version and soaked. `records` is what agents
//! write about their pools (completions, gate failures) and `guard` decides from it; `revert`
//! decides from the same records which waves to propose pinning back; `rules` says what a
//! change of the fleet changes in what the guard reads.

pub mod guard;
pub mod records;
pub mod revert;
pub mod rules;

pub use guard::{GuardDecision, Promotion, Wait, WaveView, promotion_guard, wave_views};
pub use records::{Completion, CompletionKind, DID_NOT_BOOT, GateFailure, PoolRecord, PoolRef};
pub use revert::{Evidence, PinHistory, Revert, RevertCheck, RevertDecision, reverts};
pub use rules::GuardRules;
