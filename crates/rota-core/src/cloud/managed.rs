//! A managed pool's owner (an EKS managed node group, later GKE node pools, AKS agent pools),
//! as rota drives it: one small trait per owner ([`OwnerPools`]) with the capability set it
//! offers ([`OwnerCapabilities`]), beside the self-managed [`super::NodeGroups`]. The planner
//! decides from the owner's state ([`OwnerPoolState`], data) and one executor calls the
//! owner; nothing in rota matches on the owner to decide what to do.
//!
//! What rota writes through this trait is only what the owner's API takes (EKS
//! `UpdateNodegroupVersion` with a launch template version and the node group's
//! `updateConfig`): never the launch template version of the group's ASG, which EKS owns.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::CloudError;
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
}
