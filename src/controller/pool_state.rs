//! What the controller keeps of each pool between passes ([`PoolState`]): its gates and
//! their samples, its backoff and last error, what wakes it, its last image check
//! ([`ImageChecked`]) and its group's last describe ([`Described`], reused by `describe`).
//! None of it is needed for safety (that is all in the checkpoint). The passes and each room
//! of the controller read and write it; it lives below them all.

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::gates::{self, Gate, Tracker};
use rota_core::rotate::stuck::ErrorTracker;

/// Per-pool runtime state. None of it is needed for safety (that is all in the checkpoint);
/// losing it on a restart only resets gate samples and backoff.
pub(super) struct PoolState {
    /// The gate specs the gates were built from (rebuilt when the spec changes).
    pub(super) gate_spec: String,
    pub(super) gates: Result<Vec<Box<dyn Gate>>, gates::GateError>,
    pub(super) trackers: Vec<Tracker>,
    /// Which evaluation the trackers belong to (`pre-3`, `soak-3`, `pool`): samples of
    /// one batch's pre-check do not count for its soak.
    pub(super) evaluation: String,
    pub(super) due: Instant,
    pub(super) failures: u32,
    pub(super) last_error: Option<String>,
    /// The action whose failure `last_error` is (`set image ami-1`), when an action failed:
    /// once the same action succeeds the error has healed and is no longer named, even on a
    /// pool that stays stopped for another cause.
    pub(super) last_error_action: Option<String>,
    /// The owner's refusal of the last request for this managed pool (`refusals`).
    pub(super) refused: Option<rota_core::rotate::Refusal>,
    /// The PodDisruptionBudget (namespace, name) whose change wakes this pool.
    pub(super) blocked_on: Option<(String, String)>,
    /// Errors since the pool last moved: which to report, and the likely cause if it sticks.
    pub(super) errors: ErrorTracker,
    /// What wakes the pool on an index change: its node selector, and whether a rotation
    /// is under way (only then do its pods' changes matter).
    pub(super) selector: BTreeMap<String, String>,
    pub(super) rotating: bool,
    /// When it was last reconciled: wake-ups are spaced by [`MIN_WAKE_GAP`].
    pub(super) last: Instant,
    /// The last image check (`NodeGroups::check_image`): the image, when, and why it could
    /// not launch (`None`: usable, kept for good; a hold is asked again after
    /// [`observe::IMAGE_RECHECK`]).
    pub(super) image_check: Option<ImageChecked>,
    /// The group's last describe, reused by passes that may reuse it ([`Described`]).
    pub(super) described: Option<Described>,
    /// What the pass's aftermath keeps between passes: the batch step's gathered actions,
    /// the batch's start ([`rota_core::rotate::aftermath::Memory`]).
    pub(super) aftermath: rota_core::rotate::aftermath::Memory,
}

impl PoolState {
    pub(super) fn new() -> PoolState {
        PoolState {
            gate_spec: String::new(),
            gates: Ok(Vec::new()),
            trackers: Vec::new(),
            evaluation: String::new(),
            due: Instant::now(),
            failures: 0,
            last_error: None,
            last_error_action: None,
            refused: None,
            blocked_on: None,
            errors: ErrorTracker::default(),
            selector: BTreeMap::new(),
            rotating: false,
            image_check: None,
            described: None,
            aftermath: Default::default(),
            last: Instant::now(),
        }
    }
}

/// The last describe of a pool's group and what it was taken under, so that a pass whose
/// decisions cannot depend on anything newer the cloud knows reuses it instead of calling
/// the cloud again (issue 25: a pool rotating batches of five described its group 47 times
/// a batch, an idle pool 12 times an hour).
///
/// Why it is safe: a pass plans from the reused describe, and keeps that plan only if it
/// calls the cloud for nothing and leaves the checkpoint as it was (evictions, waiting for a
/// boot or a soak, an unchanged status). Any other plan is thrown away and made again from a
/// fresh describe, so every capacity, termination and template change, and every
/// checkpoint that is written, is decided from a describe taken in the same pass, exactly as
/// without reuse. What a reused describe cannot show is only what the cloud did on its own
/// since (rota's own writes are applied to it, or drop it where the cloud chooses their
/// outcome: see [`own_writes`](rota_core::rotate::aftermath::own_writes); a failed call drops it); a change the
/// cluster shows too (a node joining or leaving the pool) drops it as well, and the rest (a
/// launch that failed, a template someone edited) is seen at the latest when it expires,
/// as it would be by a cloud whose describes lag that long: the reused describe is still
/// the newest one rota has, so nothing once seen goes back (an instance seen terminating
/// stays so), and the planner's waits for lagging describes (`--describe-lag`) measure from
/// rota's own writes, and the capacity computed after them is planned from a fresh describe
/// (a plan that calls the cloud never stands on a kept one).
///
/// A describe of a settled group (every instance running with its node registered) is
/// reused for [`DESCRIBE_REUSE`](super::describe::DESCRIBE_REUSE) (idle: `--idle-describe-interval`); one of a group that is
/// not, only while the pool waits on its batch's instances booting or terminating, whose
/// end the cluster shows too, and for [`WAIT_REUSE`](super::describe::WAIT_REUSE) at most (`describe::waits_on_the_cluster`). Whether
/// a plan made from it may stand is the core's to say
/// (`own_writes::may_stand_on_kept_describe`).
#[derive(Clone, Debug)]
pub(super) struct Described {
    pub(super) group: rota_core::cloud::GroupState,
    /// When it was taken (controller time).
    pub(super) at: chrono::DateTime<chrono::Utc>,
    /// The NodePoolRotation's generation and the leadership term it was taken under: a spec
    /// change or a new term describes again.
    pub(super) generation: Option<i64>,
    pub(super) fence: Option<rota_core::rotate::resource::Fence>,
    /// The provider IDs of the pool's nodes (selected and departed) when it was taken: a
    /// node joining or leaving the pool is a change the cloud made.
    pub(super) nodes: Vec<String>,
    /// The plan made from it had nothing to do and the pool is on its image: reused for
    /// `--idle-describe-interval` rather than [`DESCRIBE_REUSE`](super::describe::DESCRIBE_REUSE).
    pub(super) idle: bool,
}

/// One answer of `NodeGroups::check_image` for a pool: the image, when, and the hold (reason,
/// message) it gave, `None` when usable.
pub(super) struct ImageChecked {
    pub(super) image: String,
    pub(super) at: Instant,
    pub(super) hold: Option<(String, String)>,
}
