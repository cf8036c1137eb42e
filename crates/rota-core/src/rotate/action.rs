//! One side effect a plan asks for ([`Action`]) and the reason it was chosen
//! ([`Planned`]). The planners decide them, `controller::apply` carries them out and the
//! NodePoolRotation checkpoint records some; they live below all three.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fleet::duration::GoDuration;

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
