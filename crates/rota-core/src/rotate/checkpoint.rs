//! The checkpoint: the one piece of rotation state that survives a crash.
//!
//! It lives in the status of the pool's NodePoolRotation resource. `rotate::plan` reads the
//! last checkpoint and returns the next one; `controller::apply` writes the next one *before* it
//! executes any action of the plan. So whatever a crash interrupts, the persisted checkpoint
//! already names everything the interrupted step may have touched (the capacity it surged to,
//! the old nodes it chose and may have cordoned, the instances it brought up), and the next
//! plan can finish or undo that step from the checkpoint and what it observes, without
//! repeating a side effect: every action is an absolute, idempotent request ("capacity = 12",
//! "cordon n3", "terminate i-7 with decrement") rather than a relative one ("add 2").

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The state of one pool's rotation from one image to another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The image the pool ran when this rotation started: a rollback goes back to it and a
    /// partial rollout restores the group's template to it.
    pub origin_image: String,
    /// The image the rotation moves nodes to.
    pub target_image: String,
    /// The version `target_image` belongs to (for statuses).
    pub target_version: String,
    /// The group's desired capacity when the rotation started: with the batch size, the bound
    /// of invariant 1 (never more than this plus one batch of surge).
    pub original_desired: u32,
    /// The group's maximum size when the rotation started, restored at the end.
    pub original_max: u32,
    /// Nodes the pool had when the rotation started; `percent` is a share of it.
    pub pool_size: u32,
    /// Batches started so far (the current one included).
    pub batches_started: u32,
    /// True when the rotation goes back to `origin_image` (fast rollback or `onGateFailure:
    /// rollback`): gates are not consulted, since they are what asked for the rollback.
    #[serde(default)]
    pub rolling_back: bool,
    /// An image this pool rolled back from; while the desired image is still this one the
    /// pool stays Failed instead of starting again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_image: Option<String>,
    /// Why the rotation rolled back (kept for the Failed message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_reason: Option<String>,
    /// Time of the last eviction in this pool (`drain.evictionInterval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub last_eviction: Option<DateTime<Utc>>,
    /// Set when the rotation stopped and waits for a human (drain timeout with `pause`, a failed
    /// gate with `pause`, new nodes never Ready): the reason. Cleared by a new desired image or
    /// by setting `paused: true` (unpausing then resumes from here with fresh timeouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// Set by `rota ctl pause` (what asked, by whom, when): the rotation holds where it is
    /// until `rota ctl resume` (see `rotate::operator`). Serialized as `null` when unset:
    /// the status is written with a merge patch, where an absent field would keep the old
    /// value and `resume` would never stick.
    #[serde(default)]
    pub operator_paused: Option<String>,
    /// The last operator request applied (the `rota.dev/request` annotation's value), so
    /// that a request is applied once even when its annotation outlives a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_request: Option<String>,
    /// The id of the fleet stop (`rota stop`) holding the rotation, while one does: when it
    /// is lifted the stage's clocks restart. Serialized as `null` when unset, like
    /// `operator_paused` (a merge patch would otherwise keep the old value).
    #[serde(default)]
    pub fleet_stop: Option<String>,
    /// Nodes rota annotated with the autoscaler's scale-down-disabled annotation; cleared at
    /// the end of the rotation (only these: someone else's annotation is left alone).
    #[serde(default)]
    pub annotated_nodes: Vec<String>,
    /// With `--describe-lag`: when every node of the pool was first seen carrying the
    /// autoscaler's scale-down-disabled annotation. A describe made a lag after this misses
    /// no scale-down, so only then is a capacity computed from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub fenced_at: Option<DateTime<Utc>>,
    /// With `--describe-lag`: when this rotation last changed the group's capacity (a surge,
    /// a terminate with decrement, a withdrawal). The next batch's capacity is computed from
    /// a describe made at least a lag after it, so that the change is in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub capacity_changed_at: Option<DateTime<Utc>>,
    /// Where the rotation is.
    #[schemars(schema_with = "stage_schema")]
    pub stage: Stage,
    /// Pipelining (`rollout.pipeline`, on by default): the next batch, brought up while the
    /// current one soaks. It only ever holds a batch that has disrupted nothing (Surging,
    /// WaitingReady, Gating) or the undoing of one (Abandoning); it cordons nothing until the
    /// soak passes and it becomes `stage`. Its surge is computed like any other, after the
    /// current batch's old instances are gone, so invariant 1 holds exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_stage_schema")]
    pub next: Option<Box<Stage>>,
    /// How long this rotation's batches took so far (for the estimate of what is left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<Pace>,
    /// A managed pool under `managedUpdate: service`: the owner's update rota started (or is
    /// about to start: recorded before the call), so that a restart finds it instead of
    /// starting a second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_update: Option<OwnerUpdateMark>,
    /// A Karpenter pool: the drift rota paces (the user's budgets to restore, the batch
    /// open now), so that a restart neither opens a batch twice nor loses the budgets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftMark>,
    /// A managed pool under `managedUpdate: blueGreen`: the two pools and where the move
    /// between them is (see `rotate::bluegreen`). Recorded before the twin is created, so a
    /// restart finds the twin by its name instead of creating a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_green: Option<BlueGreenMark>,
}

/// A Karpenter drift as the checkpoint keeps it (see `rotate::drift`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftMark {
    /// The NodePool's disruption budgets without rota's: written back when the drift ends.
    pub user_budgets: Vec<crate::cloud::karpenter::Budget>,
    /// The batch Karpenter is replacing now, if one is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<DriftBatch>,
    /// The user's budgets were seen back on the NodePool after the drift ended: rota no
    /// longer touches them.
    #[serde(default)]
    pub restored: bool,
}

/// One batch of a paced drift: Karpenter may start replacing `size` nodes, counted as the
/// fall of the nodes off the image from `off_at_open`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftBatch {
    pub number: u32,
    pub size: u32,
    /// NodeClaims not on the image (and not being deleted) when the batch opened.
    pub off_at_open: u32,
    #[schemars(schema_with = "date_time")]
    pub opened_at: DateTime<Utc>,
    /// Set once the batch's nodes are replaced: gates must hold until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub soak_until: Option<DateTime<Utc>>,
}

/// A blue-green move of a managed pool, as the checkpoint keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenMark {
    /// The owner's pool the nodes are moved from (the fleet repo's, or the twin a previous
    /// blue-green move left in its place).
    pub old_pool: String,
    /// The twin the nodes are moved to (`cloud::managed::twin_name`).
    pub twin_pool: String,
    pub step: BlueGreenStep,
}

/// Where a blue-green move is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BlueGreenStep {
    /// The twin is asked for (or about to be); waiting for the owner to make it active.
    CreatingTwin,
    /// The nodes move in rota's batches (the checkpoint's `stage`), gates and soaks as for a
    /// self-managed pool; the pool soak holds the old pool at zero.
    Moving,
    /// The move is done and soaked: the pool left empty is deleted.
    DeletingEmpty,
    /// The pool left empty is gone; the nodes' pool is `twin_pool` (or `old_pool` after a
    /// rollback).
    Done,
}

/// The owner's update a managed rotation started, as the checkpoint keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnerUpdateMark {
    /// The image the update moves the pool to (the origin image for a rollback).
    pub image: String,
    /// The idempotency token the update is started with (EKS `clientRequestToken`).
    pub token: String,
    /// When it was recorded.
    #[schemars(schema_with = "date_time")]
    pub started_at: DateTime<Utc>,
}

/// Measured durations of the batches of one rotation: the inputs of the remaining-time
/// estimate (`rotate::eta`), taken from the last batch that passed each step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pace {
    /// From a batch's surge to all its new nodes Ready, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_seconds: Option<u64>,
    /// From a batch's first cordon to its last old instance gone, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_seconds: Option<u64>,
}

impl Checkpoint {
    /// After a halt is lifted (unpausing, `rota ctl retry`, a new version), timeouts count
    /// from now, not from before the halt: a drain halted by its timeout gets a whole
    /// `drain.timeout` again. The pipelined next batch's too.
    pub fn restart_clocks(&mut self, now: DateTime<Utc>) {
        for stage in std::iter::once(&mut self.stage).chain(self.next.as_deref_mut()) {
            if let Some(batch) = stage.batch_mut() {
                batch.stage_since = now;
            }
        }
    }
}

/// A node chosen for replacement, with the instance behind it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChosenNode {
    pub node: String,
    pub instance_id: String,
}

/// One batch: the nodes it replaces and the instances it brought up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// 1-based.
    pub number: u32,
    /// The nodes this batch cordons, drains and terminates. Recorded before the surge, so a
    /// cordon found on them after a crash is known to be ours.
    pub old_nodes: Vec<ChosenNode>,
    /// The desired capacity of the surge (absolute: re-sending it after a crash cannot surge
    /// twice).
    pub target_capacity: u32,
    /// Instance IDs in the group just before the surge: what is not among them after the
    /// surge was brought up by it.
    pub instances_before: Vec<String>,
    /// Those of `instances_before` the group already listed as terminating when the batch
    /// started: their capacity was given back before `target_capacity` was computed (a
    /// terminate with decrement), or their replacement is among `instances_before` (a failed
    /// boot the cloud replaced). Their going away is no one taking capacity from the surge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terminating_before: Vec<String>,
    /// Those of `instances_before` some describe has since listed as terminating: taken
    /// back for good (terminating is never undone). Describes that lag may go back in time
    /// from one pass to the next; remembering these keeps the surge's capacity from being
    /// raised again on an older describe that still shows them alive (chaos seed 718).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taken_back: Vec<String>,
    /// Instances the surge brought up (filled once the group shows them).
    #[serde(default)]
    pub new_instances: Vec<String>,
    /// Surge instances the cloud took away after they were recorded (a failed boot it
    /// replaced). Each replacement gets a fresh `nodeReadyTimeout`, at most one per surge
    /// instance, so a image that never boots still fails the batch in bounded time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
    /// New instances rota replaced because they were not Ready within `nodeReadyTimeout`
    /// (`nodeReadyRetries`): the attempts that failed, for the halt's message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never_ready: Vec<String>,
    /// Replacements of not-Ready instances made so far (at most `nodeReadyRetries`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready_retries: u32,
    /// When the next replacement of not-Ready instances is made (the backoff after a
    /// timeout); `None` while no replacement is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub replace_at: Option<DateTime<Utc>>,
    /// When the current stage began (timeouts are measured from it).
    #[schemars(schema_with = "date_time")]
    pub stage_since: DateTime<Utc>,
    /// When the batch started (its surge was planned) and when it first cordoned: what
    /// `Checkpoint::pace` is measured from. Absent in checkpoints written before they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_date_time")]
    pub cordoned_at: Option<DateTime<Utc>>,
    /// Pods marked do-not-disrupt that held the drain past `drain.maxDeferral` and were
    /// evicted like any other (`namespace/name`): the record the status, the commit status
    /// and the notes carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferral_ended: Vec<String>,
    /// `strategy: replace` (`rotate::plan::replace`), recorded when the batch starts so that
    /// a change of strategy mid-batch cannot reread its stages: the batch is gated, cordoned,
    /// drained and its old instances removed without lowering the capacity first; its
    /// `Surging` and `WaitingReady` stages then wait for the replacements the group brings
    /// up itself, and `target_capacity` is the capacity it leaves as it was.
    #[serde(default, skip_serializing_if = "is_false")]
    pub replace: bool,
}

/// Where a rotation is. The batch stages follow each other in this order; `Abandoning`
/// replaces the rest of a batch that a rollback or a newer version cancelled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "name")]
pub enum Stage {
    /// Between batches: the next batch starts when policy, windows and gates allow.
    Between,
    /// Image set, capacity raised to `batch.target_capacity`; waiting for the cloud to list
    /// the new instances.
    Surging { batch: Batch },
    /// New instances requested; waiting for their nodes to be Ready (`nodeReadyTimeout`).
    WaitingReady { batch: Batch },
    /// New nodes Ready; waiting for the health gates to pass before disrupting anything.
    Gating { batch: Batch },
    /// Cordoning the old nodes of the batch.
    Cordoning { batch: Batch },
    /// Evicting the pods of the old nodes (`drain.timeout` from `stage_since`).
    Draining { batch: Batch },
    /// Terminating the drained old instances, decrementing capacity.
    Terminating { batch: Batch },
    /// Batch done; gates must hold until `until`.
    Soaking {
        batch: Batch,
        #[schemars(schema_with = "date_time")]
        until: DateTime<Utc>,
    },
    /// A cancelled batch being undone: its old nodes uncordoned, the instances it brought up
    /// cordoned, drained and terminated with decrement.
    Abandoning {
        batch: Batch,
        why: String,
        /// Halt with this reason once the batch is undone (a failed batch, not a cancelled one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        halt: Option<String>,
    },
    /// Every batch done; gates must hold until `until`.
    PoolSoak {
        #[schemars(schema_with = "date_time")]
        until: DateTime<Utc>,
    },
    /// Restoring the group: maximum size, template (partial rollouts), annotations.
    Cleanup,
    /// The rotation finished.
    Done,
}

impl Batch {
    /// When the next replacement of not-Ready instances is made: the backoff after a
    /// `nodeReadyTimeout` (30 s, then 60 s, ... at most 10 minutes, by the replacements made
    /// so far), fixed in [`Batch::replace_at`] the first time it is asked, so a restart
    /// waits for the same moment.
    pub fn retry_at(&mut self, now: DateTime<Utc>) -> DateTime<Utc> {
        *self.replace_at.get_or_insert_with(|| {
            let backoff = chrono::Duration::seconds(30 << self.ready_retries.min(4))
                .min(chrono::Duration::minutes(10));
            now + backoff
        })
    }
}

impl Stage {
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Between => "Between",
            Stage::Surging { .. } => "Surging",
            Stage::WaitingReady { .. } => "WaitingReady",
            Stage::Gating { .. } => "Gating",
            Stage::Cordoning { .. } => "Cordoning",
            Stage::Draining { .. } => "Draining",
            Stage::Terminating { .. } => "Terminating",
            Stage::Soaking { .. } => "Soaking",
            Stage::Abandoning { .. } => "Abandoning",
            Stage::PoolSoak { .. } => "PoolSoak",
            Stage::Cleanup => "Cleanup",
            Stage::Done => "Done",
        }
    }

    /// The batch under way, if any.
    pub fn batch(&self) -> Option<&Batch> {
        match self {
            Stage::Surging { batch }
            | Stage::WaitingReady { batch }
            | Stage::Gating { batch }
            | Stage::Cordoning { batch }
            | Stage::Draining { batch }
            | Stage::Terminating { batch }
            | Stage::Soaking { batch, .. }
            | Stage::Abandoning { batch, .. } => Some(batch),
            _ => None,
        }
    }

    /// The batch under way, if any, to change.
    pub fn batch_mut(&mut self) -> Option<&mut Batch> {
        match self {
            Stage::Surging { batch }
            | Stage::WaitingReady { batch }
            | Stage::Gating { batch }
            | Stage::Cordoning { batch }
            | Stage::Draining { batch }
            | Stage::Terminating { batch }
            | Stage::Soaking { batch, .. }
            | Stage::Abandoning { batch, .. } => Some(batch),
            _ => None,
        }
    }

    /// Whether the batch has not yet disrupted an old node: abandoning it costs nothing but
    /// the surge instances. A replace batch disrupts first: only its opening gate is before.
    pub fn before_disruption(&self) -> bool {
        match self {
            Stage::Gating { .. } => true,
            Stage::Surging { batch } | Stage::WaitingReady { batch } => !batch.replace,
            _ => false,
        }
    }
}

/// Schema of an RFC 3339 timestamp (schemars knows chrono only behind a feature we do not
/// need otherwise).
pub fn date_time(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "format": "date-time"})
}

/// [`date_time`], optional.
pub fn opt_date_time(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "format": "date-time", "nullable": true})
}

/// [`stage_schema`], optional (the pipelined next batch).
pub fn opt_stage_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut s = stage_schema(g);
    s.insert("nullable".into(), true.into());
    s
}

/// Schema of [`Stage`] in the CRD: the stage's `name` is typed (printer columns use it), the
/// rest of the stage is kept as written. The derived schema of an internally tagged enum is
/// not structural (Kubernetes requires one schema per property across variants).
pub fn stage_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {
                "type": "string",
                "enum": ["between", "surging", "waitingReady", "gating", "cordoning", "draining",
                         "terminating", "soaking", "abandoning", "poolSoak", "cleanup", "done"]
            }
        },
        "x-kubernetes-preserve-unknown-fields": true
    })
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
