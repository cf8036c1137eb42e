//! A managed pool's owner (an EKS managed node group, a GKE node pool, an AKS agent pool),
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
/// The taint (key, value; effect `NoSchedule`) EKS puts on every node its update will
/// replace, when the update starts: EKS's own cordon of the nodes it is about to drain.
pub const EKS_UNSCHEDULABLE_TAINT: (&str, &str) = (EKS_NODEGROUP_LABEL, "unschedulable");

/// The node label GKE puts on a node pool's nodes: the node pool's name.
pub const GKE_NODEPOOL_LABEL: &str = "cloud.google.com/gke-nodepool";
/// The node label GKE puts on a node pool's nodes: the OS of its image type (`cos`,
/// `ubuntu`, `windows`). GKE labels no node with its node version: that is the kubelet's
/// version (`v1.31.5-gke.1023000`), see [`gke_node_image`].
pub const GKE_OS_DISTRIBUTION_LABEL: &str = "cloud.google.com/gke-os-distribution";
/// The node label GKE puts on a node pool's nodes: the container runtime of its image type.
pub const GKE_CONTAINER_RUNTIME_LABEL: &str = "cloud.google.com/gke-container-runtime";
/// The node label AKS puts on an agent pool's nodes: the agent pool's name.
pub const AKS_AGENTPOOL_LABEL: &str = "kubernetes.azure.com/agentpool";
/// The node label AKS puts on an agent pool's nodes: the node image version the node runs
/// (`AKSUbuntu-2204gen2containerd-202611.02.0`).
pub const AKS_NODE_IMAGE_LABEL: &str = "kubernetes.azure.com/node-image-version";

/// The node label by which `owner` names a node's pool (EKS's node group, GKE's node pool,
/// AKS's agent pool): a blue-green move finds the nodes of each of its two pools by it.
/// `None` for an owner whose pools are not moved to twins (Karpenter, self-managed groups).
pub fn pool_label(owner: Owner) -> Option<&'static str> {
    match owner {
        Owner::EksNodegroup => Some(EKS_NODEGROUP_LABEL),
        Owner::GkeNodePool => Some(GKE_NODEPOOL_LABEL),
        Owner::AksAgentPool => Some(AKS_AGENTPOOL_LABEL),
        Owner::KarpenterNodePool | Owner::SelfManaged => None,
    }
}

/// The tag (EKS), resource label (GKE) or agent pool tag (AKS) rota puts on a twin pool:
/// the name of the pool it was made from. A twin found by name is rota's own only if it
/// carries this.
pub const TWIN_OF_TAG: &str = "rota.dev/twin-of";
/// [`TWIN_OF_TAG`] where the owner takes no `/` or `.` in a key (a GKE resource label, an
/// AKS agent pool tag).
pub const TWIN_OF_LABEL: &str = "rota-twin-of";

/// The node labels that carry a managed node's image, in the order they are read: rota
/// counts a managed pool's progress from them (the nodes are not instances of a group rota
/// describes). GKE's nodes carry theirs in two labels and the kubelet's version:
/// [`gke_node_image`].
pub const OWNER_IMAGE_LABELS: [&str; 2] = [EKS_NODEGROUP_IMAGE_LABEL, AKS_NODE_IMAGE_LABEL];

/// GKE image types as a node shows them (`gke-os-distribution`, `gke-container-runtime`),
/// and back: the image types GKE labels this way.
const GKE_IMAGE_TYPES: [(&str, &str, &str); 3] = [
    ("COS_CONTAINERD", "cos", "containerd"),
    ("UBUNTU_CONTAINERD", "ubuntu", "containerd"),
    ("WINDOWS_LTSC_CONTAINERD", "windows", "containerd"),
];

/// The OS distribution and container runtime labels GKE puts on a node of `image_type`;
/// `None` for an image type rota does not know (its nodes are then not counted as on it).
pub fn gke_image_type_labels(image_type: &str) -> Option<(&'static str, &'static str)> {
    GKE_IMAGE_TYPES
        .iter()
        .find(|(t, _, _)| *t == image_type)
        .map(|(_, os, rt)| (*os, *rt))
}

/// A GKE node's image in the one-string form of [`crate::fleet::owner::OwnerImage::as_image`]
/// (`NODE_VERSION/IMAGE_TYPE`): the node version from the kubelet's (`v1.31.5-gke.1023000`,
/// GKE's own build), the image type from the OS distribution and runtime labels. `None` for
/// a node that is not GKE's (no `gke-nodepool` label) or says too little.
pub fn gke_node_image(
    labels: &std::collections::BTreeMap<String, String>,
    kubelet_version: Option<&str>,
) -> Option<String> {
    labels.get(GKE_NODEPOOL_LABEL)?;
    let version = kubelet_version?.strip_prefix('v')?;
    let os = labels.get(GKE_OS_DISTRIBUTION_LABEL)?;
    let runtime = labels.get(GKE_CONTAINER_RUNTIME_LABEL)?;
    let (image_type, _, _) = GKE_IMAGE_TYPES
        .iter()
        .find(|(_, o, r)| o == os && r == runtime)?;
    Some(format!("{version}/{image_type}"))
}

/// A GKE target as `nodePools.update` takes it, from the one-string form: `1.31.5-gke.1023000/
/// COS_CONTAINERD` (a node version and an image type) or `COS_CONTAINERD` (the image type
/// alone: the node version stays). A custom image (`imageType: CUSTOM`) is not this form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GkeTarget {
    pub node_version: Option<String>,
    pub image_type: String,
}

impl GkeTarget {
    /// `None` when `image` is not a GKE node version and image type (a custom image's path).
    pub fn parse(image: &str) -> Option<GkeTarget> {
        let upper = |t: &str| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        };
        match image.split_once('/') {
            None if upper(image) => Some(GkeTarget {
                node_version: None,
                image_type: image.to_string(),
            }),
            Some((v, t))
                if upper(t) && v.starts_with(|c: char| c.is_ascii_digit()) && !v.contains('/') =>
            {
                Some(GkeTarget {
                    node_version: Some(v.to_string()),
                    image_type: t.to_string(),
                })
            }
            _ => None,
        }
    }
}

/// Whether a node or pool on `have` runs `want`: the same string, or, for a GKE target that
/// names only an image type (the node version left alone), any node version of that type.
pub fn same_image(have: &str, want: &str) -> bool {
    have == want
        || (!want.is_empty()
            && !want.contains('/')
            && have
                .strip_suffix(want)
                .is_some_and(|v| v.ends_with('/') && GkeTarget::parse(have).is_some()))
}

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
    /// `drain.timeout` in whole minutes (rounded up), for an owner that takes a per-node
    /// drain timeout (AKS `upgradeSettings.drainTimeoutInMinutes`); others ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout_minutes: Option<u32>,
    /// `batchSoak` in whole minutes (rounded up), for an owner that soaks after each node
    /// (AKS `upgradeSettings.nodeSoakDurationInMinutes`); others ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_soak_minutes: Option<u32>,
    /// `strategy: replace`: the owner takes `max_unavailable` nodes out before it brings
    /// their replacements up, never a node more than the pool's size (EKS
    /// `updateConfig.updateStrategy: MINIMAL`; GKE `upgradeSettings` `maxSurge: 0` with
    /// `maxUnavailable`; AKS `upgradeSettings` `maxSurge: "0"` with `maxUnavailable`).
    /// False: the owner's surge (new nodes first, `max_unavailable` of them at a time).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drain_first: bool,
    /// `drain.onTimeout: force`: the owner goes on past a node it cannot drain (a
    /// PodDisruptionBudget that never allows the eviction), deleting its pods (EKS `force` on
    /// `UpdateNodegroupVersion`). False (`pause`): the owner's update fails on such a node and
    /// the pool stops on the failure. GKE has no such setting (it evicts anyway after its
    /// hour) and AKS none that forces (`undrainableNodeBehavior` cordons or fails): their
    /// clients ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
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
    /// The OS of the pool's nodes as its owner describes the pool (AKS `osType`): the twin's
    /// name is made to fit the owner's rule for it ([`twin_name_on`]).
    #[serde(default, skip_serializing_if = "PoolOs::is_linux")]
    pub os: PoolOs,
}

/// The OS of a pool's nodes, where an owner names pools by it: AKS takes 12 characters
/// for a Linux agent pool's name and 6 for a Windows one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolOs {
    /// Linux, and whatever an owner does not say (EKS and GKE name pools alike on every OS).
    #[default]
    Linux,
    Windows,
}

impl PoolOs {
    fn is_linux(&self) -> bool {
        *self == PoolOs::Linux
    }

    /// From an owner's word for it (AKS `osType`, the `kubernetes.io/os` node label), in
    /// any case; anything but Windows is [`PoolOs::Linux`].
    pub fn parse(word: &str) -> PoolOs {
        if word.eq_ignore_ascii_case("windows") {
            PoolOs::Windows
        } else {
            PoolOs::Linux
        }
    }
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

/// The twin's name for moving a Linux pool `pool` to `version`, as `owner` accepts a pool's
/// name: [`twin_name_on`] with [`PoolOs::Linux`].
pub fn twin_name_for(owner: Owner, pool: &str, version: &str) -> String {
    twin_name_on(owner, PoolOs::Linux, pool, version)
}

/// The twin's name for moving `pool` (its nodes on `os`) to `version`, as `owner` accepts a
/// pool's name: deterministic (a restart finds the twin it created), distinct for distinct
/// versions, never the pool's own name. AKS takes only lowercase letters and digits,
/// starting with a letter (`agentPoolProfiles.name`), 1 to 12 of them for a Linux pool and
/// 1 to 6 for a Windows one: an AKS twin is the pool's name cut to six of those (two on
/// Windows) and a hash of the pool and version in base 36 to fill the rest (`general` to
/// 2026.11.2: `genera` and six more; the Windows pool `win22`: `wi` and four more). Every
/// other owner takes [`twin_name`]'s readable `<pool>-rota-<version>`.
pub fn twin_name_on(owner: Owner, os: PoolOs, pool: &str, version: &str) -> String {
    if owner != Owner::AksAgentPool {
        return twin_name(pool, version);
    }
    // (stem, length): Linux keeps the names twins had before Windows was told apart.
    let (stem_max, hashed) = match os {
        PoolOs::Linux => (6, None),
        PoolOs::Windows => (2, Some(6)),
    };
    let stem: String = pool
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .skip_while(char::is_ascii_digit)
        .take(stem_max)
        .collect();
    let stem = if stem.is_empty() {
        "rota"[..stem_max.min(4)].to_string()
    } else {
        stem
    };
    let digits = hashed.map_or(6, |len: usize| len - stem.len());
    // A twin never takes the pool's own name: should the hash give it, the next salt does.
    (0u32..)
        .map(|salt| {
            let seed = match salt {
                0 => format!("{pool}-rota-{version}"),
                n => format!("{pool}-rota-{version}-{n}"),
            };
            let mut hash = fnv1a(&seed);
            let mut name = stem.clone();
            for _ in 0..digits {
                name.push(char::from_digit((hash % 36) as u32, 36).expect("a base-36 digit"));
                hash /= 36;
            }
            name
        })
        .find(|name| name != pool)
        .expect("a name other than the pool's")
}

/// FNV-1a: stable across builds and platforms (std's hasher is not).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
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
    let hash = fnv1a(&full);
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

    /// rota's twins of `pool`: the pools of its cluster that carry rota's twin label naming
    /// it ([`TWIN_OF_TAG`], [`TWIN_OF_LABEL`]; EKS `ListNodegroups` and each node group's
    /// tags, GKE `nodePools.list` and their resource labels, AKS `AgentPools_List` and their
    /// tags), whatever their name: how a move whose checkpoint was lost finds its twin again
    /// instead of halting or creating a second. The default lists none (an owner whose
    /// adapter cannot list them: such a move is found again by the twin's name only).
    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        let _ = pool;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn gke_labels(os: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (GKE_NODEPOOL_LABEL.to_string(), "general".to_string()),
            (GKE_OS_DISTRIBUTION_LABEL.to_string(), os.to_string()),
            (
                GKE_CONTAINER_RUNTIME_LABEL.to_string(),
                "containerd".to_string(),
            ),
        ])
    }

    /// A GKE node's image is read from its kubelet version and its image type's labels, as
    /// GKE labels a node; a node without GKE's pool label or with an unknown OS has none.
    #[test]
    fn a_gke_nodes_image_comes_from_its_kubelet_and_labels() {
        let l = gke_labels("cos");
        assert_eq!(
            gke_node_image(&l, Some("v1.31.5-gke.1023000")).as_deref(),
            Some("1.31.5-gke.1023000/COS_CONTAINERD")
        );
        assert_eq!(
            gke_node_image(&gke_labels("ubuntu"), Some("v1.31.5-gke.1023000")).as_deref(),
            Some("1.31.5-gke.1023000/UBUNTU_CONTAINERD")
        );
        assert_eq!(gke_node_image(&l, None), None);
        assert_eq!(gke_node_image(&gke_labels("plan9"), Some("v1.31.5")), None);
        let mut not_gke = l.clone();
        not_gke.remove(GKE_NODEPOOL_LABEL);
        assert_eq!(gke_node_image(&not_gke, Some("v1.31.5-gke.1")), None);
        assert_eq!(
            gke_image_type_labels("COS_CONTAINERD"),
            Some(("cos", "containerd"))
        );
        assert_eq!(gke_image_type_labels("CUSTOM"), None);
    }

    #[test]
    fn gke_targets_parse_from_the_one_string_form() {
        assert_eq!(
            GkeTarget::parse("1.31.5-gke.1023000/COS_CONTAINERD"),
            Some(GkeTarget {
                node_version: Some("1.31.5-gke.1023000".into()),
                image_type: "COS_CONTAINERD".into()
            })
        );
        assert_eq!(
            GkeTarget::parse("UBUNTU_CONTAINERD"),
            Some(GkeTarget {
                node_version: None,
                image_type: "UBUNTU_CONTAINERD".into()
            })
        );
        assert_eq!(GkeTarget::parse("projects/acme/global/images/node-1"), None);
        assert_eq!(GkeTarget::parse("ami-0123"), None);
    }

    /// An image-type-only GKE target matches any node version of that type, nothing else.
    #[test]
    fn same_image_takes_any_node_version_of_an_image_type_alone() {
        assert!(same_image("ami-1", "ami-1"));
        assert!(!same_image("ami-1", "ami-2"));
        assert!(same_image("1.31.5-gke.1/COS_CONTAINERD", "COS_CONTAINERD"));
        assert!(!same_image(
            "1.31.5-gke.1/UBUNTU_CONTAINERD",
            "COS_CONTAINERD"
        ));
        assert!(!same_image(
            "1.31.5-gke.1/COS_CONTAINERD",
            "1.31.6-gke.2/COS_CONTAINERD"
        ));
        assert!(
            !same_image("x/ami-1", "ami-1"),
            "only a GKE form matches so"
        );
    }

    #[test]
    fn aks_twin_names_are_what_aks_accepts_deterministic_and_distinct() {
        let aks = |p: &str, v: &str| twin_name_for(Owner::AksAgentPool, p, v);
        for (pool, version) in [
            ("general", "2026.11.2"),
            ("system", "2026.11.2-2"),
            ("Memory_Heavy-Pool", "v1"),
            ("42", "v1"),
        ] {
            let name = aks(pool, version);
            assert!(name.len() <= 12, "{name}");
            assert!(name.starts_with(|c: char| c.is_ascii_lowercase()), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{name}"
            );
            assert_eq!(name, aks(pool, version), "deterministic");
        }
        assert!(aks("general", "2026.11.2").starts_with("genera"));
        assert!(aks("42", "v1").starts_with("rota"));
        assert_ne!(aks("general", "2026.11.2"), aks("general", "2026.11.3"));
        assert_ne!(aks("general", "2026.11.2"), aks("general2", "2026.11.2"));
        // Every other owner keeps the readable name.
        assert_eq!(
            twin_name_for(Owner::GkeNodePool, "general", "2026.11.2"),
            "general-rota-2026-11-2"
        );
    }

    /// A Windows agent pool's twin fits AKS's six characters: two of the pool's name and
    /// four base-36 digits of a hash of pool and version; deterministic, distinct for
    /// distinct versions and pools, never the pool's own name. A Linux pool keeps its names.
    #[test]
    fn windows_aks_twin_names_fit_six_characters() {
        let win = |p: &str, v: &str| twin_name_on(Owner::AksAgentPool, PoolOs::Windows, p, v);
        for (pool, version) in [
            ("win22", "2026.11.2"),
            ("w", "v1"),
            ("npwin", "2026.11.2-2"),
            ("9win", "v1"),
            ("123456", "v1"),
        ] {
            let name = win(pool, version);
            assert_eq!(name.len(), 6, "{name}");
            assert!(name.starts_with(|c: char| c.is_ascii_lowercase()), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{name}"
            );
            assert_ne!(name, pool);
            assert_eq!(name, win(pool, version), "deterministic");
        }
        assert!(win("win22", "2026.11.2").starts_with("wi"));
        assert!(win("123456", "v1").starts_with("ro"));
        assert_ne!(win("win22", "2026.11.2"), win("win22", "2026.11.3"));
        assert_ne!(win("win22", "v1"), win("win23", "v1"));
        // A pool's next versions each get a twin of their own, none the pool's name. (Four
        // base-36 digits make 1.7 million names: two versions may share one in the long run,
        // but a move only ever has the pool and its twin; a twin that would take the name of
        // the pool the nodes are on is named for the version's `-2` instead, see
        // `rotate::bluegreen`.)
        let names: std::collections::BTreeSet<String> = (0..20)
            .map(|n| win("wi0000", &format!("2026.11.{n}")))
            .collect();
        assert_eq!(names.len(), 20);
        assert!(!names.contains("wi0000"));
        // Linux pools keep the twin names they had: a move under way is found again by name.
        assert_eq!(
            twin_name_on(Owner::AksAgentPool, PoolOs::Linux, "general", "2026.11.2"),
            twin_name_for(Owner::AksAgentPool, "general", "2026.11.2")
        );
        assert_eq!(
            twin_name_for(Owner::AksAgentPool, "general", "2026.11.2").len(),
            12
        );
        // Only AKS names pools by their OS.
        assert_eq!(
            twin_name_on(Owner::EksNodegroup, PoolOs::Windows, "win", "v1"),
            "win-rota-v1"
        );
        assert_eq!(PoolOs::parse("Windows"), PoolOs::Windows);
        assert_eq!(PoolOs::parse("linux"), PoolOs::Linux);
    }

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
