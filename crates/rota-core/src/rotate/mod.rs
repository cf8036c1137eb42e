//! Blue-green rotation of one node pool, decided purely: `plan` takes the desired pool, what
//! was observed, the checkpoint and the time and returns the actions with their reasons;
//! `controller::apply` acts on them.
//!
//! The types here are the vocabulary shared by both and by the NodePoolRotation resource:
//! [`Action`] (what to do, always with a reason), [`Plan`] (the actions and the next
//! [`checkpoint::Checkpoint`]) and [`Phase`] (what `kubectl get` shows).

pub mod aftermath;
pub mod bluegreen;
pub mod checkpoint;
mod counts;
pub mod drift;
pub mod eta;
pub mod lookup;
pub mod managed;
pub mod observed;
pub mod operator;
pub mod parallel;
pub mod plan;
pub mod resource;
mod route;
pub mod skew;
pub mod status;
pub mod stop;
pub mod stuck;
pub mod window;

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use checkpoint::{
    Batch, BlueGreenMark, BlueGreenStep, Checkpoint, ChosenNode, DriftBatch, DriftMark,
    OwnerUpdateMark, Stage,
};
pub use observed::{GateVerdict, Observed, ObservedNode, ObservedPod, PdbRef, PodKind, Refusal};
pub use route::{plan, plan_with};

use crate::fleet::duration::GoDuration;

/// The phase of a pool's rotation, as the NodePoolRotation status shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Not planned yet (or not managed: `mode: ignore`).
    #[default]
    Pending,
    /// Nothing under way; waiting for a window or the surge budget.
    Waiting,
    /// A batch is under way.
    Rotating,
    /// A batch or the pool is soaking with gates.
    Soaking,
    /// Stopped until a human acts or a blocker goes away; the message says which.
    Paused,
    /// Cannot proceed (rolled back after a failed gate, or invalid policy).
    Failed,
    /// Every node that should be runs the desired image.
    Succeeded,
    /// Going back to the image the pool came from.
    RollingBack,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One side effect. Every action is idempotent in effect (absolute values, named objects), so
/// that repeating it after a crash changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Action {
    /// Make new instances of the group boot `image`.
    SetImage { image: String },
    /// Set the group's desired capacity (and first its maximum size, when given).
    SetCapacity { desired: u32, max: Option<u32> },
    /// Mark a node unschedulable and record the owner of the cordon on it.
    Cordon { node: String, owner: String },
    /// Make a node schedulable again and remove rota's owner annotation.
    Uncordon { node: String },
    /// Evict one pod through the Eviction API (which enforces PodDisruptionBudgets).
    Evict {
        namespace: String,
        pod: String,
        node: String,
        grace_period: Option<GoDuration>,
    },
    /// Delete one pod without the Eviction API (`drain.onTimeout: force` only).
    DeletePod {
        namespace: String,
        pod: String,
        node: String,
    },
    /// Terminate one instance, decrementing the group's desired capacity.
    Terminate {
        instance_id: String,
        node: Option<String>,
    },
    /// `strategy: replace`: terminate one drained instance *without* decrementing the
    /// group's desired capacity, so that the group brings up its replacement from its
    /// template (the target image, set before).
    TerminateForReplacement {
        instance_id: String,
        node: Option<String>,
    },
    /// Set the group's maximum size, leaving its desired capacity to whoever holds it now
    /// (never below it): restoring the maximum must not write back a capacity read from a
    /// describe that a concurrent resize has overtaken.
    SetMax { max: u32 },
    /// Set or remove the cluster autoscaler's scale-down-disabled annotation on a node.
    SetScaleDownDisabled { node: String, disabled: bool },
    /// Take back surge capacity the cloud never fulfilled: set the desired capacity to
    /// `desired` (the instances the group lists), but only if the group, described again
    /// right before the call, lists no live instance outside `instances`. Lowering the
    /// capacity past an instance would let the cloud choose which one to remove, undrained;
    /// one that appeared since the plan is terminated by ID on the next plan instead.
    WithdrawSurge {
        desired: u32,
        instances: Vec<String>,
    },
    /// A managed pool: start its owner's own update to `request.image` through the owner's
    /// API (`cloud::managed::OwnerPools`), never a template write.
    StartOwnerUpdate {
        request: crate::cloud::managed::UpdateRequest,
    },
    /// A Karpenter pool: set its EC2NodeClass's `amiSelectorTerms` to `[{id: image}]`
    /// (`cloud::karpenter::DriftPools`); Karpenter drifts every node off any other image.
    PinNodeClassImage { node_class: String, image: String },
    /// A Karpenter pool: set its NodePool's `spec.disruption.budgets` to `budgets` if the
    /// NodePool is still at `resource_version` (the user's budgets and rota's one for reason
    /// `Drifted`, or the user's alone once the drift ended).
    SetDisruptionBudgets {
        budgets: Vec<crate::cloud::karpenter::Budget>,
        resource_version: String,
    },
    /// `managedUpdate: blueGreen`: create the twin pool through the owner's API (named
    /// deterministically: sent again after a crash, the owner answers with the twin it made).
    CreateTwinPool {
        request: crate::cloud::managed::TwinRequest,
    },
    /// `managedUpdate: blueGreen`: set one of the two pools' size through the owner's API
    /// (absolute).
    SetPoolSize {
        pool: crate::fleet::owner::ManagedGroup,
        desired: u32,
        max: u32,
    },
    /// `managedUpdate: blueGreen`: remove one drained node's instance through the owner's
    /// API, lowering the pool's size by one.
    RemovePoolNode {
        pool: crate::fleet::owner::ManagedGroup,
        instance_id: String,
        node: Option<String>,
    },
    /// `managedUpdate: blueGreen`: delete the pool the move left empty, after `poolSoak`.
    DeletePool {
        pool: crate::fleet::owner::ManagedGroup,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::SetImage { image } => write!(f, "set image {image}"),
            Action::SetCapacity { desired, max: None } => write!(f, "set capacity {desired}"),
            Action::SetCapacity {
                desired,
                max: Some(m),
            } => write!(f, "set capacity {desired} (max {m})"),
            Action::SetMax { max } => write!(f, "set max size {max}"),
            Action::Cordon { node, .. } => write!(f, "cordon {node}"),
            Action::Uncordon { node } => write!(f, "uncordon {node}"),
            Action::Evict { namespace, pod, .. } => write!(f, "evict {namespace}/{pod}"),
            Action::DeletePod { namespace, pod, .. } => write!(f, "force-delete {namespace}/{pod}"),
            Action::Terminate { instance_id, .. } => write!(f, "terminate {instance_id}"),
            Action::TerminateForReplacement { instance_id, .. } => {
                write!(f, "terminate {instance_id} (the group replaces it)")
            }
            Action::SetScaleDownDisabled {
                node,
                disabled: true,
            } => write!(f, "annotate {node} scale-down-disabled"),
            Action::SetScaleDownDisabled {
                node,
                disabled: false,
            } => write!(f, "remove scale-down-disabled from {node}"),
            Action::StartOwnerUpdate { request } => write!(
                f,
                "start the owner's update to {} (token {})",
                request.image, request.token
            ),
            Action::PinNodeClassImage { node_class, image } => {
                write!(f, "pin EC2NodeClass {node_class} to {image}")
            }
            Action::SetDisruptionBudgets { budgets, .. } => {
                let drift = budgets
                    .last()
                    .filter(|b| b.is_drift_only())
                    .map_or("none".to_string(), |b| b.nodes.clone());
                write!(
                    f,
                    "set the NodePool's disruption budgets (Drifted: {drift})"
                )
            }
            Action::CreateTwinPool { request } => write!(
                f,
                "create pool {} on {} ({} nodes)",
                request.twin.name(),
                request.image,
                request.desired
            ),
            Action::SetPoolSize { pool, desired, .. } => {
                write!(f, "set pool {} to {desired} nodes", pool.name())
            }
            Action::RemovePoolNode {
                pool, instance_id, ..
            } => write!(f, "remove {instance_id} from pool {}", pool.name()),
            Action::DeletePool { pool } => write!(f, "delete pool {}", pool.name()),
            Action::WithdrawSurge { desired, .. } => {
                write!(f, "withdraw the unfulfilled surge (capacity {desired})")
            }
        }
    }
}

/// An action with the reason it was chosen (shown in events and logs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub action: Action,
    pub reason: String,
}

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

#[cfg(test)]
mod tests;
