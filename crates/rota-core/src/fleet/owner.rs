//! Who owns a pool's machines, and what each owner lets rota do: the one table that the
//! runtime, `rota validate` (warnings), `rota render` and the docs read.
//!
//! A self-managed group (an ASG, a MIG, a scale set) is rota's to rotate: it writes the
//! template and drives every batch. A managed pool (an EKS managed node group, a Karpenter
//! NodePool, a GKE node pool, an AKS agent pool) belongs to a service that holds the template
//! itself: rota changes it only through the owner's API, and how much of the rollout policy
//! survives depends on the owner and on the strategy (`rollout.managedUpdate`). Rather than a
//! `match` on the owner wherever a field is read, [`support`] answers, per owner, strategy and
//! rollout field, who honours it: rota, the service (rota's value mapped onto the owner's
//! setting), rota only at the pool's level (between two updates of the owner), or nobody.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::platform::Cloud;

/// Who owns a pool's machines (the `group` form of a pool).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Owner {
    /// An ASG, MIG or scale set that rota rotates itself (`autoScalingGroup`,
    /// `instanceGroupManager`, `scaleSet`).
    SelfManaged,
    /// An EKS managed node group (`eksNodegroup`).
    EksNodegroup,
    /// A Karpenter NodePool and the EC2NodeClass it references (`karpenterNodePool`).
    KarpenterNodePool,
    /// A GKE node pool (`gkeNodePool`).
    GkeNodePool,
    /// An AKS agent pool (`aksAgentPool`).
    AksAgentPool,
}

impl Owner {
    /// Every managed owner, in the order the docs list them.
    pub const MANAGED: [Owner; 4] = [
        Owner::EksNodegroup,
        Owner::KarpenterNodePool,
        Owner::GkeNodePool,
        Owner::AksAgentPool,
    ];

    /// The `group` key that names this owner in a pool (`group: {eksNodegroup: NAME}`).
    pub fn group_key(self) -> &'static str {
        match self {
            Owner::SelfManaged => "autoScalingGroup | instanceGroupManager | scaleSet",
            Owner::EksNodegroup => "eksNodegroup",
            Owner::KarpenterNodePool => "karpenterNodePool",
            Owner::GkeNodePool => "gkeNodePool",
            Owner::AksAgentPool => "aksAgentPool",
        }
    }

    /// The cloud a managed owner lives in (`None` for self-managed groups, which exist in
    /// all three).
    pub fn cloud(self) -> Option<Cloud> {
        match self {
            Owner::SelfManaged => None,
            Owner::EksNodegroup | Owner::KarpenterNodePool => Some(Cloud::Aws),
            Owner::GkeNodePool => Some(Cloud::Gcp),
            Owner::AksAgentPool => Some(Cloud::Azure),
        }
    }

    /// The service's name in messages.
    pub fn service(self) -> &'static str {
        match self {
            Owner::SelfManaged => "rota",
            Owner::EksNodegroup => "EKS",
            Owner::KarpenterNodePool => "Karpenter",
            Owner::GkeNodePool => "GKE",
            Owner::AksAgentPool => "AKS",
        }
    }

    /// Whether `rollout.managedUpdate` chooses how this owner's pools are replaced
    /// (Karpenter pools are always replaced by Karpenter's drift, self-managed by rota).
    pub fn takes_managed_update(self) -> bool {
        matches!(
            self,
            Owner::EksNodegroup | Owner::GkeNodePool | Owner::AksAgentPool
        )
    }

    /// How a pool of this owner is replaced, given the pool's `managedUpdate` (if any).
    pub fn strategy(self, update: Option<ManagedUpdate>) -> Strategy {
        match self {
            Owner::SelfManaged => Strategy::Rota,
            Owner::KarpenterNodePool => Strategy::Drift,
            _ => match update.unwrap_or_default() {
                ManagedUpdate::Service => Strategy::Service,
                ManagedUpdate::BlueGreen => Strategy::BlueGreen,
            },
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Owner::SelfManaged => "selfManaged",
            other => other.group_key(),
        })
    }
}

/// `rollout.managedUpdate`: how an EKS, GKE or AKS pool is replaced.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ManagedUpdate {
    /// The owner's own update (EKS `UpdateNodegroupVersion`, GKE `nodePools.update`, AKS
    /// node image upgrade), with rota's policy mapped onto the owner's settings.
    #[default]
    Service,
    /// rota creates a twin pool on the new image through the owner's API and drains the
    /// old one in its own batches.
    BlueGreen,
}

/// How a resolved pool is replaced: the owner and `managedUpdate` together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Strategy {
    /// rota's own rotation of a self-managed group (template, surge, drain, terminate).
    Rota,
    /// The owner's own update.
    Service,
    /// A twin pool, drained in rota's batches.
    BlueGreen,
    /// Karpenter's drift, paced and paused by the NodePool's disruption budgets.
    Drift,
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::Rota => "rota",
            Strategy::Service => "service",
            Strategy::BlueGreen => "blueGreen",
            Strategy::Drift => "drift",
        })
    }
}

/// The managed pool a pool names, fully qualified: the owner, the managed cluster (the
/// cluster's `eksCluster`, `gkeCluster` or `aksCluster`, default its name) and the pool's
/// name in the owner's API.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ManagedGroup {
    /// An EKS managed node group.
    #[serde(rename_all = "camelCase")]
    EksNodegroup {
        region: String,
        eks_cluster: String,
        nodegroup: String,
    },
    /// A Karpenter NodePool in an EKS cluster (the EC2NodeClass is the one it references).
    #[serde(rename_all = "camelCase")]
    KarpenterNodePool {
        region: String,
        eks_cluster: String,
        node_pool: String,
    },
    /// A GKE node pool; `location` is the cluster's zone (zonal cluster) or region.
    #[serde(rename_all = "camelCase")]
    GkeNodePool {
        project: String,
        location: String,
        gke_cluster: String,
        node_pool: String,
    },
    /// An AKS agent pool; `resourceGroup` is the AKS cluster's (not the node resource group).
    #[serde(rename_all = "camelCase")]
    AksAgentPool {
        subscription_id: String,
        resource_group: String,
        aks_cluster: String,
        agent_pool: String,
    },
}

impl ManagedGroup {
    pub fn owner(&self) -> Owner {
        match self {
            ManagedGroup::EksNodegroup { .. } => Owner::EksNodegroup,
            ManagedGroup::KarpenterNodePool { .. } => Owner::KarpenterNodePool,
            ManagedGroup::GkeNodePool { .. } => Owner::GkeNodePool,
            ManagedGroup::AksAgentPool { .. } => Owner::AksAgentPool,
        }
    }

    pub fn cloud(&self) -> Cloud {
        self.owner().cloud().expect("a managed owner has a cloud")
    }

    /// The managed cluster's name in the owner's API.
    pub fn cluster(&self) -> &str {
        match self {
            ManagedGroup::EksNodegroup { eks_cluster, .. }
            | ManagedGroup::KarpenterNodePool { eks_cluster, .. } => eks_cluster,
            ManagedGroup::GkeNodePool { gke_cluster, .. } => gke_cluster,
            ManagedGroup::AksAgentPool { aks_cluster, .. } => aks_cluster,
        }
    }

    /// The region the pool's machines run in, where the owner's coordinates say it: the
    /// EKS cluster's region, a GKE cluster's region (or its zone's); `None` for AKS (the
    /// resource group does not say).
    pub fn region(&self) -> Option<&str> {
        match self {
            ManagedGroup::EksNodegroup { region, .. }
            | ManagedGroup::KarpenterNodePool { region, .. } => Some(region),
            ManagedGroup::GkeNodePool { location, .. } => Some(
                location
                    .rsplit_once('-')
                    .filter(|(_, z)| z.len() == 1)
                    .map_or(location.as_str(), |(r, _)| r),
            ),
            ManagedGroup::AksAgentPool { .. } => None,
        }
    }

    /// The pool's name in the owner's API.
    pub fn name(&self) -> &str {
        match self {
            ManagedGroup::EksNodegroup { nodegroup, .. } => nodegroup,
            ManagedGroup::KarpenterNodePool { node_pool, .. }
            | ManagedGroup::GkeNodePool { node_pool, .. } => node_pool,
            ManagedGroup::AksAgentPool { agent_pool, .. } => agent_pool,
        }
    }
}

impl std::fmt::Display for ManagedGroup {
    /// `aws:us-east-1/eks/prod/nodegroup/general`, `gcp:acme/us-central1/gke/prod/nodepool/general`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManagedGroup::EksNodegroup {
                region,
                eks_cluster,
                nodegroup,
            } => write!(f, "aws:{region}/eks/{eks_cluster}/nodegroup/{nodegroup}"),
            ManagedGroup::KarpenterNodePool {
                region,
                eks_cluster,
                node_pool,
            } => write!(f, "aws:{region}/eks/{eks_cluster}/karpenter/{node_pool}"),
            ManagedGroup::GkeNodePool {
                project,
                location,
                gke_cluster,
                node_pool,
            } => write!(
                f,
                "gcp:{project}/{location}/gke/{gke_cluster}/nodepool/{node_pool}"
            ),
            ManagedGroup::AksAgentPool {
                subscription_id,
                resource_group,
                aks_cluster,
                agent_pool,
            } => write!(
                f,
                "azure:{subscription_id}/{resource_group}/aks/{aks_cluster}/agentpool/{agent_pool}"
            ),
        }
    }
}

/// What a managed pool's owner takes for its image, from the pinned version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OwnerImage {
    /// EKS (a new launch template version with this AMI) and Karpenter (the EC2NodeClass's
    /// `amiSelectorTerms: [{id}]`): the version's AMI for the region and arch.
    #[serde(rename_all = "camelCase")]
    Ami { id: String },
    /// A GKE node pool's `version` and `imageType` (the version's `gke`).
    #[serde(rename_all = "camelCase")]
    GkeNode {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_version: Option<String>,
        image_type: String,
    },
    /// A GKE node pool on a custom image: `imageType: CUSTOM` and the version's `gcp` image.
    #[serde(rename_all = "camelCase")]
    GkeCustom {
        image: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node_version: Option<String>,
    },
    /// An AKS agent pool's `nodeImageVersion` (the version's `aks`).
    #[serde(rename_all = "camelCase")]
    AksNodeImage { node_image_version: String },
}

impl OwnerImage {
    /// The form's name as serialized: `ami`, `gkeNode`, `gkeCustom`, `aksNodeImage`.
    pub fn form(&self) -> &'static str {
        match self {
            OwnerImage::Ami { .. } => "ami",
            OwnerImage::GkeNode { .. } => "gkeNode",
            OwnerImage::GkeCustom { .. } => "gkeCustom",
            OwnerImage::AksNodeImage { .. } => "aksNodeImage",
        }
    }

    /// The image as one string, what `DesiredPool::image` holds for the pool: the AMI, the
    /// custom image, `NODE_VERSION/IMAGE_TYPE` for GKE's own images (just the image type
    /// when the version leaves the node version alone), the AKS node image version.
    pub fn as_image(&self) -> String {
        match self {
            OwnerImage::Ami { id } => id.clone(),
            OwnerImage::GkeCustom { image, .. } => image.clone(),
            OwnerImage::GkeNode {
                node_version: Some(v),
                image_type,
            } => format!("{v}/{image_type}"),
            OwnerImage::GkeNode {
                node_version: None,
                image_type,
            } => image_type.clone(),
            OwnerImage::AksNodeImage { node_image_version } => node_image_version.clone(),
        }
    }
}

/// The GKE image type that takes a custom image (the version's `gcp`).
pub const GKE_CUSTOM_IMAGE_TYPE: &str = "CUSTOM";

/// A setting of the rollout policy (and the pool's health gates) whose fate the capability
/// table tells, named as the fleet repo spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RolloutField {
    Batch,
    Percent,
    BatchSoak,
    PoolSoak,
    MaxParallelPools,
    NodeReadyTimeout,
    NodeReadyRetries,
    DrainTimeout,
    DrainOnTimeout,
    DrainEvictionInterval,
    DrainDeleteEmptyDirData,
    DrainGracePeriod,
    OnGateFailure,
    Paused,
    Pipeline,
    Windows,
    /// `strategy: surge | replace` (no surge, for pools without room for one).
    Strategy,
    /// The pool's health gates (`gates` at any level).
    Gates,
}

impl RolloutField {
    /// Every field, in the order of the RolloutPolicy table of the docs.
    pub const ALL: [RolloutField; 18] = [
        RolloutField::Batch,
        RolloutField::Percent,
        RolloutField::BatchSoak,
        RolloutField::PoolSoak,
        RolloutField::MaxParallelPools,
        RolloutField::NodeReadyTimeout,
        RolloutField::NodeReadyRetries,
        RolloutField::DrainTimeout,
        RolloutField::DrainOnTimeout,
        RolloutField::DrainEvictionInterval,
        RolloutField::DrainDeleteEmptyDirData,
        RolloutField::DrainGracePeriod,
        RolloutField::OnGateFailure,
        RolloutField::Paused,
        RolloutField::Pipeline,
        RolloutField::Windows,
        RolloutField::Strategy,
        RolloutField::Gates,
    ];

    /// The field's path below `rollout` (or `gates`), as written in the repo.
    pub fn name(self) -> &'static str {
        match self {
            RolloutField::Batch => "batch",
            RolloutField::Percent => "percent",
            RolloutField::BatchSoak => "batchSoak",
            RolloutField::PoolSoak => "poolSoak",
            RolloutField::MaxParallelPools => "maxParallelPools",
            RolloutField::NodeReadyTimeout => "nodeReadyTimeout",
            RolloutField::NodeReadyRetries => "nodeReadyRetries",
            RolloutField::DrainTimeout => "drain.timeout",
            RolloutField::DrainOnTimeout => "drain.onTimeout",
            RolloutField::DrainEvictionInterval => "drain.evictionInterval",
            RolloutField::DrainDeleteEmptyDirData => "drain.deleteEmptyDirData",
            RolloutField::DrainGracePeriod => "drain.gracePeriod",
            RolloutField::OnGateFailure => "onGateFailure",
            RolloutField::Paused => "paused",
            RolloutField::Pipeline => "pipeline",
            RolloutField::Windows => "windows",
            RolloutField::Strategy => "strategy",
            RolloutField::Gates => "gates",
        }
    }

    /// The JSON pointer of the field below a `rollout` object (`/drain/timeout`); `None` for
    /// the gates, which are not part of the rollout policy.
    pub fn pointer(self) -> Option<String> {
        (self != RolloutField::Gates).then(|| format!("/{}", self.name().replace('.', "/")))
    }
}

impl std::fmt::Display for RolloutField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Who honours a rollout field for one owner and strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "by", content = "how")]
pub enum Support {
    /// rota does it itself, as for a self-managed group.
    Rota,
    /// rota does it around the owner's update, at the pool's level: before an update
    /// starts or after it ends, never inside it (an update that started finishes).
    PoolLevel(&'static str),
    /// rota maps its value onto the owner's own setting, which the service then applies.
    Service(&'static str),
    /// Nobody: the owner has no such setting and rota cannot act inside its update.
    Lost(&'static str),
}

impl Support {
    /// Whether the field takes effect at all (anything but [`Support::Lost`]).
    pub fn honoured(self) -> bool {
        !matches!(self, Support::Lost(_))
    }

    /// The explanation, empty for [`Support::Rota`].
    pub fn how(self) -> &'static str {
        match self {
            Support::Rota => "",
            Support::PoolLevel(s) | Support::Service(s) | Support::Lost(s) => s,
        }
    }

    /// `rota`, `pool level`, `service`, `lost`: the matrix's column.
    pub fn label(self) -> &'static str {
        match self {
            Support::Rota => "rota",
            Support::PoolLevel(_) => "rota, pool level",
            Support::Service(_) => "service",
            Support::Lost(_) => "lost",
        }
    }
}

/// Who honours `field` for a pool of `owner` replaced by `strategy`: the capability table.
/// A combination that cannot occur (a self-managed pool replaced by blue-green) answers as
/// its nearest real one.
pub fn support(owner: Owner, strategy: Strategy, field: RolloutField) -> Support {
    match (owner, strategy) {
        (Owner::SelfManaged, _) | (_, Strategy::Rota) => Support::Rota,
        (_, Strategy::BlueGreen) => blue_green(field),
        (Owner::KarpenterNodePool, _) | (_, Strategy::Drift) => karpenter_drift(field),
        (Owner::EksNodegroup, Strategy::Service) => eks_service(field),
        (Owner::GkeNodePool, Strategy::Service) => gke_service(field),
        (Owner::AksAgentPool, Strategy::Service) => aks_service(field),
    }
}

/// [`support`] for the value a repo writes, where an owner honours one value of a field
/// and not another: AKS's own upgrade has nothing that forces a drain
/// (`undrainableNodeBehavior` either fails the upgrade or leaves the node cordoned with its
/// pods), so `drain.onTimeout: force` is lost there while `pause` is the service's.
pub fn support_of_value(
    owner: Owner,
    strategy: Strategy,
    field: RolloutField,
    forces: bool,
) -> Support {
    match (owner, strategy, field) {
        (Owner::AksAgentPool, Strategy::Service, RolloutField::DrainOnTimeout) if forces => {
            Support::Lost(
                "AKS has nothing that forces a drain: the upgrade fails at drainTimeoutInMinutes, as with pause",
            )
        }
        _ => support(owner, strategy, field),
    }
}

/// Every field of `owner` + `strategy` that is not rota's own, with its support.
pub fn not_rota(owner: Owner, strategy: Strategy) -> Vec<(RolloutField, Support)> {
    RolloutField::ALL
        .iter()
        .map(|f| (*f, support(owner, strategy, *f)))
        .filter(|(_, s)| *s != Support::Rota)
        .collect()
}

// The fields a whole-pool update by the owner leaves to rota around it: the same for the
// three services.
fn around_an_update(field: RolloutField) -> Option<Support> {
    use RolloutField::*;
    Some(match field {
        PoolSoak => Support::Rota,
        MaxParallelPools => Support::Rota,
        Windows => Support::PoolLevel(
            "an update starts only inside a window and runs to its end; there is no stop between nodes",
        ),
        Paused => Support::PoolLevel(
            "holds the pool before the next update; an update the service has started runs to its end",
        ),
        Gates => Support::PoolLevel(
            "sampled before the update starts, while it runs (not while the service drains a node: its evicted pods' replacements are briefly not Ready) and through poolSoak; a failure while it runs stops what follows, not the service between its nodes",
        ),
        OnGateFailure => Support::PoolLevel(
            "after the update: pause stops the pool there, rollback runs a second update back to the previous image",
        ),
        Percent => Support::Lost("the service replaces every node of the pool"),
        BatchSoak => Support::Lost("the service moves on to the next nodes without waiting"),
        Pipeline => Support::Lost("the service has no batches to pipeline"),
        DrainEvictionInterval => Support::Lost("the service evicts at its own pace"),
        NodeReadyRetries => Support::Lost("the service retries failed nodes on its own terms"),
        _ => return None,
    })
}

fn eks_service(field: RolloutField) -> Support {
    use RolloutField::*;
    if let Some(s) = around_an_update(field) {
        return s;
    }
    match field {
        Batch => Support::Service(
            "updateConfig.maxUnavailable (or maxUnavailablePercentage for \"N%\") of the node group",
        ),
        DrainOnTimeout => Support::Service(
            "force: UpdateNodegroupVersion with force=true; pause: the update fails on a pod it cannot evict",
        ),
        Strategy => Support::Service(
            "replace: updateConfig.updateStrategy MINIMAL (old nodes terminated before their replacements launch, never a node more than the group's size); surge: DEFAULT",
        ),
        DrainTimeout => Support::Lost("EKS gives up on a node's eviction after its own 15 minutes"),
        NodeReadyTimeout => Support::Lost("EKS waits for new nodes on its own timeout"),
        DrainDeleteEmptyDirData => Support::Lost("EKS evicts every pod, emptyDir or not"),
        DrainGracePeriod => Support::Lost("EKS evicts with each pod's own grace period"),
        _ => Support::Rota,
    }
}

fn gke_service(field: RolloutField) -> Support {
    use RolloutField::*;
    if let Some(s) = around_an_update(field) {
        return s;
    }
    match field {
        Batch => Support::Service(
            "upgradeSettings.maxSurge of the node pool (surge upgrade, maxUnavailable 0)",
        ),
        DrainTimeout => Support::Lost(
            "GKE respects PodDisruptionBudgets for up to one hour a node, then evicts anyway",
        ),
        DrainOnTimeout => Support::Lost("GKE always evicts after its own hour (as force)"),
        Strategy => Support::Service(
            "replace: upgradeSettings maxSurge 0 and maxUnavailable the batch (never a node more than the pool's size); surge: maxSurge the batch, maxUnavailable 0",
        ),
        NodeReadyTimeout => Support::Lost("GKE waits for new nodes on its own timeout"),
        DrainDeleteEmptyDirData => Support::Lost("GKE evicts every pod, emptyDir or not"),
        DrainGracePeriod => Support::Lost("GKE evicts with each pod's own grace period"),
        _ => Support::Rota,
    }
}

fn aks_service(field: RolloutField) -> Support {
    use RolloutField::*;
    match field {
        Batch => Support::Service("upgradeSettings.maxSurge of the agent pool"),
        DrainTimeout => Support::Service("upgradeSettings.drainTimeoutInMinutes (whole minutes)"),
        BatchSoak => Support::Service(
            "upgradeSettings.nodeSoakDurationInMinutes: AKS waits after each node, not after each batch",
        ),
        DrainOnTimeout => Support::Service(
            "pause: rota sets upgradeSettings.undrainableNodeBehavior Schedule, so the upgrade fails at drainTimeoutInMinutes; force is not available and acts as pause",
        ),
        Strategy => Support::Service(
            "replace: upgradeSettings maxSurge 0 and maxUnavailable the batch (never a node more than the pool's size); surge: maxSurge the batch, maxUnavailable 0",
        ),
        NodeReadyTimeout => Support::Lost("AKS waits for new nodes on its own timeout"),
        DrainDeleteEmptyDirData => Support::Lost("AKS evicts every pod, emptyDir or not"),
        DrainGracePeriod => Support::Lost("AKS evicts with each pod's own grace period"),
        other => around_an_update(other).unwrap_or(Support::Rota),
    }
}

fn karpenter_drift(field: RolloutField) -> Support {
    use RolloutField::*;
    match field {
        Batch => Support::Service(
            "rota's disruption budget for reason Drifted, opened for one batch of N nodes at a time and closed once they started",
        ),
        Paused => Support::Service(
            "a disruption budget of 0 nodes for reason Drifted: Karpenter stops between two nodes",
        ),
        Windows => Support::Service(
            "outside a window the Drifted budget is 0 nodes: Karpenter stops between two nodes",
        ),
        Gates => Support::Service(
            "a failing gate sets the Drifted budget to 0 nodes: Karpenter stops between two nodes",
        ),
        OnGateFailure => Support::Service(
            "pause: budget 0; rollback: the NodeClass is pinned back to the previous AMI and drifts back",
        ),
        DrainTimeout => Support::Service(
            "the NodePool's terminationGracePeriod, after which Karpenter deletes the remaining pods (as force)",
        ),
        PoolSoak | MaxParallelPools => Support::Rota,
        Strategy => Support::Service(
            "surge only: Karpenter's drift launches each replacement before it drains; rota validate refuses replace",
        ),
        Percent => Support::Lost("Karpenter drifts every node off the pinned image"),
        BatchSoak => Support::Service(
            "the Drifted budget stays 0 after a batch until its soak passed with the gates holding",
        ),
        Pipeline => Support::Lost("Karpenter has no batches to pipeline"),
        NodeReadyTimeout => Support::Lost("Karpenter's own registration timeout applies"),
        NodeReadyRetries => {
            Support::Lost("Karpenter replaces a NodeClaim that does not register on its own")
        }
        DrainOnTimeout => Support::Lost(
            "at terminationGracePeriod Karpenter deletes the pods (as force); pause is not available",
        ),
        DrainEvictionInterval => Support::Lost("Karpenter evicts at its own pace"),
        DrainDeleteEmptyDirData => Support::Lost("Karpenter evicts every pod, emptyDir or not"),
        DrainGracePeriod => Support::Lost("Karpenter evicts with each pod's own grace period"),
    }
}

fn blue_green(field: RolloutField) -> Support {
    use RolloutField::*;
    match field {
        Percent => Support::Lost(
            "a blue-green rotation ends with the new pool alone: the old one is deleted after poolSoak",
        ),
        NodeReadyRetries => Support::Lost(
            "the twin pool's owner replaces nodes that fail to come up on its own terms",
        ),
        Strategy => Support::PoolLevel(
            "surge only: the twin pool comes up before the old one drains; rota validate refuses replace",
        ),
        _ => Support::Rota,
    }
}

/// What a pool keeps of its rollout policy, by who honours it: what `rota render` shows
/// beside a managed pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub owner: Owner,
    pub strategy: Strategy,
    /// Fields nobody honours for this pool, with why.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_honoured: std::collections::BTreeMap<&'static str, &'static str>,
    /// Fields rota maps onto the owner's own settings, with which.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub by_service: std::collections::BTreeMap<&'static str, &'static str>,
    /// Fields rota honours only between two updates of the owner, with how.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pool_level: std::collections::BTreeMap<&'static str, &'static str>,
}

impl Capabilities {
    pub fn of(owner: Owner, strategy: Strategy) -> Capabilities {
        let mut c = Capabilities {
            owner,
            strategy,
            not_honoured: Default::default(),
            by_service: Default::default(),
            pool_level: Default::default(),
        };
        for (field, s) in not_rota(owner, strategy) {
            let into = match s {
                Support::Rota => continue,
                Support::Lost(_) => &mut c.not_honoured,
                Support::Service(_) => &mut c.by_service,
                Support::PoolLevel(_) => &mut c.pool_level,
            };
            into.insert(field.name(), s.how());
        }
        c
    }
}

/// The capability matrix of `owner` as a Markdown table, one row per rollout field and one
/// column per strategy the owner can be replaced by: what docs/cloud-*.md show (a test
/// holds the docs to it).
pub fn matrix_markdown(owner: Owner) -> String {
    let strategies: &[Strategy] = match owner {
        Owner::SelfManaged => &[Strategy::Rota],
        Owner::KarpenterNodePool => &[Strategy::Drift],
        _ => &[Strategy::Service, Strategy::BlueGreen],
    };
    let head: Vec<String> = strategies
        .iter()
        .map(|s| match s {
            Strategy::Service | Strategy::BlueGreen => format!("`managedUpdate: {s}`"),
            other => format!("{other}"),
        })
        .collect();
    let mut out = format!(
        "| field | {} |\n|---|{}\n",
        head.join(" | "),
        "---|".repeat(strategies.len())
    );
    for f in RolloutField::ALL {
        let cells: Vec<String> = strategies
            .iter()
            .map(|s| {
                let sup = support(owner, *s, f);
                match sup.how() {
                    "" => sup.label().to_string(),
                    how => format!("{}: {how}", sup.label()),
                }
            })
            .collect();
        out.push_str(&format!("| `{}` | {} |\n", f.name(), cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo test -p rota-core print_capability_matrices -- --ignored --nocapture` prints
    /// the tables the cloud docs hold.
    #[test]
    #[ignore]
    fn print_capability_matrices() {
        for o in Owner::MANAGED {
            println!("{o}\n{}", matrix_markdown(o));
        }
    }

    #[test]
    fn self_managed_pools_honour_every_field_themselves() {
        for f in RolloutField::ALL {
            assert_eq!(
                support(Owner::SelfManaged, Strategy::Rota, f),
                Support::Rota
            );
        }
        assert!(not_rota(Owner::SelfManaged, Strategy::Rota).is_empty());
    }

    #[test]
    fn a_service_update_loses_what_happens_between_its_nodes() {
        for owner in [Owner::EksNodegroup, Owner::GkeNodePool] {
            let s = |f| support(owner, Strategy::Service, f);
            assert!(!s(RolloutField::BatchSoak).honoured(), "{owner}");
            assert!(
                !s(RolloutField::DrainEvictionInterval).honoured(),
                "{owner}"
            );
            assert!(
                matches!(s(RolloutField::Batch), Support::Service(_)),
                "{owner}"
            );
            assert_eq!(s(RolloutField::PoolSoak), Support::Rota, "{owner}");
            assert!(matches!(s(RolloutField::Windows), Support::PoolLevel(_)));
        }
        // AKS soaks after each node: its own setting, not rota's.
        assert!(matches!(
            support(
                Owner::AksAgentPool,
                Strategy::Service,
                RolloutField::BatchSoak
            ),
            Support::Service(_)
        ));
        assert!(matches!(
            support(
                Owner::AksAgentPool,
                Strategy::Service,
                RolloutField::DrainTimeout
            ),
            Support::Service(_)
        ));
    }

    #[test]
    fn blue_green_keeps_rotas_batches_and_karpenter_paces_with_budgets() {
        for owner in [Owner::EksNodegroup, Owner::GkeNodePool, Owner::AksAgentPool] {
            let s = |f| support(owner, Strategy::BlueGreen, f);
            assert_eq!(s(RolloutField::BatchSoak), Support::Rota);
            assert_eq!(s(RolloutField::DrainEvictionInterval), Support::Rota);
            assert!(!s(RolloutField::Percent).honoured());
        }
        let k = |f| support(Owner::KarpenterNodePool, Strategy::Drift, f);
        assert!(matches!(k(RolloutField::Paused), Support::Service(_)));
        assert!(
            k(RolloutField::BatchSoak).honoured(),
            "rota holds the budget at 0 through a batch soak"
        );
    }

    #[test]
    fn strategies_follow_the_owner() {
        assert_eq!(
            Owner::SelfManaged.strategy(Some(ManagedUpdate::BlueGreen)),
            Strategy::Rota
        );
        assert_eq!(Owner::KarpenterNodePool.strategy(None), Strategy::Drift);
        assert_eq!(Owner::EksNodegroup.strategy(None), Strategy::Service);
        assert_eq!(
            Owner::AksAgentPool.strategy(Some(ManagedUpdate::BlueGreen)),
            Strategy::BlueGreen
        );
    }

    #[test]
    fn field_pointers_follow_the_repo_spelling() {
        assert_eq!(
            RolloutField::DrainTimeout.pointer().as_deref(),
            Some("/drain/timeout")
        );
        assert_eq!(
            RolloutField::BatchSoak.pointer().as_deref(),
            Some("/batchSoak")
        );
        assert_eq!(RolloutField::Gates.pointer(), None);
    }

    #[test]
    fn images_as_one_string() {
        let gke = OwnerImage::GkeNode {
            node_version: Some("1.31.5-gke.1023000".into()),
            image_type: "COS_CONTAINERD".into(),
        };
        assert_eq!(gke.as_image(), "1.31.5-gke.1023000/COS_CONTAINERD");
        let aks = OwnerImage::AksNodeImage {
            node_image_version: "AKSUbuntu-2204gen2containerd-202611.02.0".into(),
        };
        assert_eq!(aks.as_image(), "AKSUbuntu-2204gen2containerd-202611.02.0");
    }
}
