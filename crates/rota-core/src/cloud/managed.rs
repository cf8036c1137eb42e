//! A managed pool's owner (an EKS managed node group, later GKE node pools, AKS agent pools),
//! as rota drives it: one small trait per owner ([`OwnerPools`]) with the capability set it
//! offers ([`OwnerCapabilities`]), beside the self-managed [`super::NodeGroups`]. The planner
//! decides from the owner's state ([`OwnerPoolState`], data) and one executor calls the
//! owner; nothing in rota matches on the owner to decide what to do.
//!
//! What rota writes through this trait is only what the owner's API takes (EKS
//! `UpdateNodegroupVersion` with a launch template version and the node group's
//! `updateConfig`): never the launch template version of the group's ASG, which EKS owns.
//!
//! `managedUpdate: blueGreen` adds five calls, each with a default that answers "this owner
//! cannot" ([`OwnerPools::blue_green`] false), so an owner's adapter compiles before it
//! offers them: [`OwnerPools::create_twin`], [`OwnerPools::members`],
//! [`OwnerPools::set_size`], [`OwnerPools::remove_node`], [`OwnerPools::delete_pool`].
//!
//! Removing one drained node (EKS): a node group has no per-node delete, and lowering its
//! `scalingConfig.desiredSize` lets the Auto Scaling group pick which instance goes (its
//! termination policy, not rota's drained node: an undrained node could go). rota calls
//! `TerminateInstanceInAutoScalingGroup` with `ShouldDecrementDesiredCapacity` on the node
//! group's own ASG, naming the instance it drained: the call the Kubernetes cluster
//! autoscaler makes on managed node groups, which EKS supports (the node group's desired size
//! follows the ASG's, EKS's scale-in lifecycle hook drains whatever is left on the node), and
//! which writes no launch template: the node group does not go `DEGRADED`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{CloudError, CloudErrorKind, Instance};
use crate::fleet::owner::{ManagedGroup, Owner};

/// The node label EKS puts on a managed node group's nodes: the node group's name.
pub const EKS_NODEGROUP_LABEL: &str = "eks.amazonaws.com/nodegroup";
/// The node label EKS puts on a managed node group's nodes: the AMI the node booted from.
pub const EKS_NODEGROUP_IMAGE_LABEL: &str = "eks.amazonaws.com/nodegroup-image";

/// The node labels that carry a managed node's image, in the order they are read: rota
/// counts a managed pool's progress from them (the nodes are not instances of a group rota
/// describes).
pub const OWNER_IMAGE_LABELS: [&str; 1] = [EKS_NODEGROUP_IMAGE_LABEL];

/// What an owner lets rota do with its pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerCapabilities {
    /// The owner replaces a pool's nodes itself on a new image (`managedUpdate: service`).
    pub service_update: bool,
    /// The owner takes how many nodes it may replace at once (EKS `updateConfig`).
    pub max_unavailable: bool,
    /// An update the owner has started can be cancelled (EKS: no; it runs to its end).
    pub cancel_update: bool,
}

/// Where the owner's last update of a pool is, in the owner's own words (EKS `Update.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UpdateStatus {
    InProgress,
    Successful,
    Failed,
    Cancelled,
}

/// One update of a pool by its owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerUpdate {
    /// The owner's ID of the update (EKS `Update.id`).
    pub id: String,
    /// The client token it was started with, when rota started it (EKS
    /// `clientRequestToken`): how a restarted agent knows the update is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The image the update moves the pool to.
    pub image: String,
    pub status: UpdateStatus,
    /// The owner's errors when it failed (EKS `Update.errors`: code and message).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// How many nodes the owner may take out of service at once (EKS `updateConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u8),
}

/// A managed pool as its owner describes it at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerPoolState {
    pub pool: ManagedGroup,
    /// The image new nodes of the pool boot from (the node group's launch template's AMI).
    pub image: String,
    /// The pool's size as its owner keeps it (EKS `scalingConfig.desiredSize`).
    pub desired: u32,
    pub max_unavailable: Option<MaxUnavailable>,
    /// The owner's newest update of the pool, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<OwnerUpdate>,
}

impl OwnerPoolState {
    /// Whether the owner is updating the pool now (whoever started it).
    pub fn updating(&self) -> bool {
        self.update
            .as_ref()
            .is_some_and(|u| u.status == UpdateStatus::InProgress)
    }
}

/// The one update request rota sends an owner: move the pool to `image`, taking at most
/// `max_unavailable` nodes out at once. Idempotent by `token`: sent again after a crash or
/// a lost answer, the owner answers with the update it already started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateRequest {
    pub image: String,
    pub max_unavailable: MaxUnavailable,
    pub token: String,
}

/// Where a pool is in its owner's life (EKS `Nodegroup.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PoolStatus {
    Creating,
    Active,
    Updating,
    Deleting,
    /// EKS `CREATE_FAILED`, `DELETE_FAILED` or `DEGRADED`: the owner's `health` says why.
    Failed,
}

/// A pool's machines as its owner keeps them: what `blueGreen` plans from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerPoolMembers {
    pub pool: ManagedGroup,
    pub status: PoolStatus,
    /// The image new nodes of the pool boot from.
    pub image: String,
    /// `scalingConfig.desiredSize` and `maxSize` (EKS: the node group's ASG's, which the
    /// node group follows).
    pub desired: u32,
    pub max: u32,
    /// The instances of the pool's ASG; terminated ones are not listed.
    pub instances: Vec<Instance>,
    /// The owner's words when the pool is `Failed` (EKS `health.issues`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<String>,
    /// The pool `blueGreen` created this one from (EKS: the node group's tag
    /// `rota.dev/twin-of`): a twin found by its name is rota's own only if it says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin_of: Option<String>,
}

/// The twin pool `blueGreen` asks an owner for: the shape of `from` (instance types,
/// subnets, labels, taints, EKS's IAM role) on `image`, `desired` nodes at first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TwinRequest {
    pub from: ManagedGroup,
    pub twin: ManagedGroup,
    pub image: String,
    pub desired: u32,
    pub max: u32,
}

/// The pool named `name` beside `pool` (same owner, same cluster): a twin's reference.
pub fn renamed(pool: &ManagedGroup, name: &str) -> ManagedGroup {
    let mut out = pool.clone();
    match &mut out {
        ManagedGroup::EksNodegroup { nodegroup: n, .. }
        | ManagedGroup::KarpenterNodePool { node_pool: n, .. }
        | ManagedGroup::GkeNodePool { node_pool: n, .. }
        | ManagedGroup::AksAgentPool { agent_pool: n, .. } => *n = name.to_string(),
    }
    out
}

/// The twin's name for moving `pool` (the name the fleet repo gives) to `version`:
/// deterministic, so a restarted agent finds the twin it created instead of creating a
/// second, and within EKS's rules for a node group name (1 to 63 of letters, digits, `-` and
/// `_`, starting with a letter or digit). Too long a name keeps its start and ends with a
/// hash of the whole, so two versions never share a twin.
pub fn twin_name(pool: &str, version: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    let full = format!("{}-rota-{}", clean(pool), clean(version));
    if full.len() <= 63 {
        return full;
    }
    // FNV-1a: stable across builds and platforms (std's hasher is not).
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}-{:012x}", &full[..50], hash & 0xffff_ffff_ffff)
}

fn cannot(call: &'static str, pool: &ManagedGroup) -> CloudError {
    CloudError::about(
        CloudErrorKind::Invalid,
        call,
        &pool.to_string(),
        format!(
            "{} does not offer managedUpdate: blueGreen through rota yet",
            pool.owner().service()
        ),
    )
}

/// One owner's API for its pools. Contracts, as for [`super::NodeGroups`]: errors are
/// classified once by [`super::CloudErrorKind`]; `describe` is read-only; `start_update`
/// with a token the owner has seen starts nothing new.
#[async_trait]
pub trait OwnerPools: Send + Sync {
    /// Whose pools these are.
    fn owner(&self) -> Owner;

    /// What this owner lets rota do.
    fn capabilities(&self) -> OwnerCapabilities;

    /// The pool now: the image new nodes boot from, its size and its newest update.
    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError>;

    /// Start the owner's own update of the pool to `req.image` (EKS: a new launch template
    /// version carrying the AMI, the node group's `updateConfig` set to
    /// `req.max_unavailable`, then `UpdateNodegroupVersion`); returns the update's ID. An
    /// owner that is already updating the pool refuses (`Invalid`), as EKS does.
    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError>;

    /// Whether this owner offers `managedUpdate: blueGreen` (the five calls below).
    fn blue_green(&self) -> bool {
        false
    }

    /// Create `req.twin` in the shape of `req.from` on `req.image` (EKS `CreateNodegroup`,
    /// tagged `rota.dev/twin-of`). Idempotent by name: a pool of that name that is rota's
    /// twin of `req.from` answers `Ok` (a restart after a lost answer creates nothing).
    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        Err(cannot("CreateNodegroup", &req.from))
    }

    /// The pool's status, size and instances; `None` when the owner has no such pool (a
    /// twin not created yet, an old pool deleted).
    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        Err(cannot("DescribeNodegroup", pool))
    }

    /// Set the pool's desired size (and its maximum, never below the desired size): EKS
    /// `UpdateNodegroupConfig` with `scalingConfig`. Absolute, so sending it twice is once.
    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        let _ = (desired, max);
        Err(cannot("UpdateNodegroupConfig", pool))
    }

    /// Remove one drained node's instance from the pool, the pool's size lowered by one
    /// (EKS: `TerminateInstanceInAutoScalingGroup` with decrement on the node group's ASG;
    /// why that and not a lower `desiredSize`: this module's header). An instance already
    /// gone answers `Ok`.
    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        let _ = instance_id;
        Err(cannot("TerminateInstanceInAutoScalingGroup", pool))
    }

    /// Delete the pool (EKS `DeleteNodegroup`); a pool already deleting or gone answers `Ok`.
    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        Err(cannot("DeleteNodegroup", pool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twin_names_are_deterministic_valid_and_distinct() {
        assert_eq!(twin_name("general", "2026.11.2"), "general-rota-2026-11-2");
        let long = "a".repeat(60);
        let (a, b) = (twin_name(&long, "v1"), twin_name(&long, "v2"));
        assert_ne!(a, b);
        for n in [&a, &b] {
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            );
        }
        assert_eq!(a, twin_name(&long, "v1"));
    }
}
