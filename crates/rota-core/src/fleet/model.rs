//! The typed fleet repo model, format `rota.dev/v1alpha1`, exactly as people write it: every
//! optional field stays optional here (defaults are applied only when a cluster is resolved, in
//! `crate::fleet::resolve`), and unknown fields are refused.
//!
//! The JSON Schemas in `schemas/` describe the same shapes; a test keeps the two in agreement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::duration::{GoDuration, ImageAge};
// `Arch` lives in `platform`, below this model and the resolved values (`resolved` imports
// nothing from here).
pub use super::platform::Arch;
use super::resolved::{BatchSize, Mode, NoData, OnDrainTimeout, OnGateFailure};

pub const API_VERSION: &str = "rota.dev/v1alpha1";

/// The kinds a fleet repo may hold.
pub const KINDS: [&str; 3] = ["Fleet", "Cluster", "HealthGate"];

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A whole document: `apiVersion`, `kind`, `metadata`, `spec`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest<S> {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: S,
}

// ---------------------------------------------------------------------------------- Fleet

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FleetSpec {
    /// Image channels by name.
    pub images: BTreeMap<String, Channel>,
    /// Ordered: earlier waves go first.
    pub waves: Vec<Wave>,
    #[serde(default)]
    pub rollout: RolloutPolicy,
    #[serde(default)]
    pub gates: Vec<String>,
    #[serde(default)]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub promotion: Promotion,
    /// Where rota posts rollout notifications (extension; see docs/operations.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<WebhookSpec>>,
}

/// One notification webhook (Slack-compatible `{"text": ...}` payloads). The URL of a Slack
/// incoming webhook is itself a credential, so it is normally read from the agent's
/// environment (`urlEnv`) or a secret of the agent's `--secrets-dir` named by `urlSecret`,
/// rather than written in git (`url`). `urlFile` (a path) is refused with a migration error:
/// the fleet repo never names a file the agent opens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebhookSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// The name of a secret in the agent's `--secrets-dir` (a key of a mounted Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_secret: Option<String>,
    /// Refused since secrets are named, not located (kept so that old repos get a migration
    /// error naming the line rather than "unknown field").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_file: Option<String>,
    /// Which notices to send (default: all four).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<NoticeKindName>>,
    /// At most one message per this interval (default 1m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_interval: Option<GoDuration>,
}

/// The notices a webhook may subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NoticeKindName {
    RolloutStarted,
    BatchFailed,
    Paused,
    Completed,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Channel {
    #[serde(default)]
    pub description: Option<String>,
    /// Where new versions come from (`rota images discover`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ImageSource>,
    /// Bake: a version younger than this is not proposed by discovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_age: Option<ImageAge>,
    /// Patch deadline: a pool on a version released longer ago than this is overdue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<ImageAge>,
    /// Version → image per cloud.
    pub versions: BTreeMap<String, CloudImages>,
}

/// Where a channel's new versions are published, per cloud.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsImageSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GcpImageSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureImageSource>,
}

/// An SSM parameter holding the AMI ID (`{arch}` is replaced by the architecture in the
/// parameter's own spelling: `x86_64` or `arm64`), or a name filter over images of `owners`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsImageSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_filter: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<String>,
}

/// A GCP image family: its newest READY, non-deprecated image.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GcpImageSource {
    pub project: String,
    pub family: String,
}

/// An Azure Compute Gallery image definition: its newest version not excluded from latest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AzureImageSource {
    pub gallery_image: String,
}

/// One version's images. `released` is when the cloud published it (written by discovery).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudImages {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<chrono::DateTime<chrono::Utc>>,
    /// The kubelet minor the images carry (`"1.31"`), held to the version-skew policy
    /// against each cluster's control plane (`fleet::kubernetes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsImages>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<String>,
    /// What GKE node pools take: a GKE version and image type (`imageType: CUSTOM` takes the
    /// version's `gcp` image instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gke: Option<Box<GkeImage>>,
    /// What AKS agent pools take: a node image version. (Both forms are boxed: most
    /// versions have neither, and a version travels inside image proposals.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aks: Option<Box<AksImage>>,
}

/// A version's image for GKE node pools: `nodeVersion` (a GKE version such as
/// `1.31.5-gke.1023000`, the node image GKE ships with it) and `imageType`
/// (`COS_CONTAINERD`, `UBUNTU_CONTAINERD`, ... or `CUSTOM` for the version's `gcp` image).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GkeImage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_version: Option<String>,
    pub image_type: String,
}

/// A version's image for AKS agent pools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AksImage {
    /// Such as `AKSUbuntu-2204gen2containerd-202611.02.0`.
    pub node_image_version: String,
}

/// A version's AWS images: one AMI ID (valid only while every AWS cluster pinned to it is in
/// one region, since an AMI exists in one region) or a map by region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AwsImages {
    One(String),
    ByRegion(BTreeMap<String, RegionImage>),
}

/// One region's AMI: one ID (for `x86_64` pools, the default architecture) or one per
/// architecture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RegionImage {
    One(String),
    ByArch(BTreeMap<Arch, String>),
}

/// Why a version has no image for a pool: the pieces validation names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageMiss {
    /// No image for the cloud at all.
    Cloud,
    /// The AWS map has no entry for the region.
    Region { region: String, known: Vec<String> },
    /// The region's entry has no AMI for the architecture.
    Arch { region: String, arch: Arch },
    /// The version has no form the pool's managed owner can take (a GKE node pool and a
    /// version with neither `gke` nor `gcp` with `gke.imageType: CUSTOM`, an AKS agent pool
    /// and a version without `aks`); `what` says what is missing.
    Form {
        owner: super::owner::Owner,
        what: &'static str,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Wave {
    pub name: String,
    #[serde(default)]
    pub clusters: Vec<String>,
    #[serde(default)]
    pub cluster_selector: Option<LabelSelector>,
    /// The pins: channel → version.
    #[serde(default)]
    pub images: BTreeMap<String, String>,
    /// After this wave completes a version, later waves wait this long.
    #[serde(default)]
    pub soak: Option<GoDuration>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl LabelSelector {
    /// An empty selector matches nothing: a wave must never capture every cluster by accident.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.match_labels.is_empty()
            && self
                .match_labels
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Promotion {
    /// Default true.
    #[serde(default)]
    pub guard: Option<bool>,
}

// ------------------------------------------------------------------------- RolloutPolicy

/// A rollout policy as written at one level; `None` means "inherit".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RolloutPolicy {
    #[serde(default)]
    pub batch: Option<BatchSize>,
    #[serde(default)]
    pub percent: Option<u8>,
    #[serde(default)]
    pub batch_soak: Option<GoDuration>,
    #[serde(default)]
    pub pool_soak: Option<GoDuration>,
    #[serde(default)]
    pub max_parallel_pools: Option<u32>,
    #[serde(default)]
    pub node_ready_timeout: Option<GoDuration>,
    /// How many times a batch's new instance that is not Ready within `nodeReadyTimeout` is
    /// replaced (terminated, the cloud launches another) before the batch fails.
    #[serde(default)]
    pub node_ready_retries: Option<u32>,
    #[serde(default)]
    pub drain: Option<DrainOverride>,
    #[serde(default)]
    pub on_gate_failure: Option<OnGateFailure>,
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default)]
    pub pipeline: Option<bool>,
    /// Replaced as a whole by a lower level (lists are not merged).
    #[serde(default)]
    pub windows: Option<Vec<WindowSpec>>,
    /// How an EKS, GKE or AKS pool is replaced (managed pools only; default `service`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_update: Option<super::owner::ManagedUpdate>,
    /// Dates when no batch starts (a freeze); replaced as a whole like `windows`.
    #[serde(default)]
    pub blackouts: Option<Vec<BlackoutSpec>>,
    /// `surge` (new nodes first) or `replace` (a batch drained and removed first, the group
    /// brings up its replacements: no node more than before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<super::resolved::RolloutStrategy>,
}

/// `{from, to, reason}`: no batch starts from `from` until `to` (RFC 3339).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BlackoutSpec {
    pub from: chrono::DateTime<chrono::Utc>,
    pub to: chrono::DateTime<chrono::Utc>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DrainOverride {
    #[serde(default)]
    pub timeout: Option<GoDuration>,
    #[serde(default)]
    pub on_timeout: Option<OnDrainTimeout>,
    #[serde(default)]
    pub eviction_interval: Option<GoDuration>,
    #[serde(default)]
    pub delete_empty_dir_data: Option<bool>,
    #[serde(default)]
    pub grace_period: Option<GoDuration>,
    #[serde(default)]
    pub delay: Option<GoDuration>,
    #[serde(default)]
    pub max_deferral: Option<GoDuration>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WindowSpec {
    /// `Mon`..`Sun`; empty or absent: every day.
    #[serde(default)]
    pub days: Vec<String>,
    pub start: String,
    pub end: String,
    /// IANA time zone; default `UTC`.
    #[serde(default)]
    pub time_zone: Option<String>,
}

// -------------------------------------------------------------------------------- Cluster

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSpec {
    pub cloud: CloudSpec,
    /// The control plane's minor (`"1.30"`): no pool takes a version whose kubelet is newer
    /// or more than three minors older (`fleet::kubernetes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    #[serde(default)]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub rollout: RolloutPolicy,
    #[serde(default)]
    pub gates: Vec<String>,
    pub pools: Vec<Pool>,
    /// Replaces the fleet's notification webhooks for this cluster (`[]` silences it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<WebhookSpec>>,
}

/// Exactly one member is set (the schema enforces it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudSpec {
    #[serde(default)]
    pub aws: Option<AwsCloud>,
    #[serde(default)]
    pub gcp: Option<GcpCloud>,
    #[serde(default)]
    pub azure: Option<AzureCloud>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsCloud {
    pub region: String,
    /// The EKS cluster's name, for `eksNodegroup` and `karpenterNodePool` pools (default:
    /// the Cluster's `metadata.name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks_cluster: Option<String>,
}

/// `region` (a regional cluster) or `zone` (a zonal one): exactly one (validation checks).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GcpCloud {
    pub project: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The GKE cluster's name, for `gkeNodePool` pools (default: the Cluster's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gke_cluster: Option<String>,
}

impl GcpCloud {
    /// The cluster's region: `region`, else the region of its `zone` (`us-central1-a` →
    /// `us-central1`).
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref().or_else(|| {
            self.zone
                .as_deref()
                .and_then(|z| z.rsplit_once('-').map(|(r, _)| r))
        })
    }

    /// Where GKE's API finds the cluster: its zone (zonal) or region (regional).
    pub fn location(&self) -> Option<&str> {
        self.zone.as_deref().or(self.region.as_deref())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AzureCloud {
    pub subscription_id: String,
    pub resource_group: String,
    #[serde(default)]
    pub location: Option<String>,
    /// The AKS cluster's name, for `aksAgentPool` pools (default: the Cluster's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aks_cluster: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pool {
    pub name: String,
    pub channel: String,
    /// The CPU architecture of the pool's machines (default `x86_64`): picks the AMI of a
    /// version that maps a region by architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    /// Labels that pick the pool's nodes.
    pub node_selector: BTreeMap<String, String>,
    pub group: GroupSpec,
    #[serde(default)]
    pub rollout: RolloutPolicy,
    #[serde(default)]
    pub gates: Vec<String>,
    #[serde(default)]
    pub mode: Option<Mode>,
}

/// The cloud group of a pool, in one of three self-managed forms (checked against the
/// cluster's cloud): aws `{autoScalingGroup}`; gcp `{instanceGroupManager, zone | region}`
/// (neither: the cluster's region, or zone for a zonal cluster); azure `{scaleSet,
/// resourceGroup}` (no resourceGroup: the cluster's); or one managed owner (see
/// `crate::fleet::owner`): aws `{eksNodegroup}` or `{karpenterNodePool}`, gcp
/// `{gkeNodePool}`, azure `{aksAgentPool}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupSpec {
    #[serde(default)]
    pub auto_scaling_group: Option<String>,
    #[serde(default)]
    pub instance_group_manager: Option<String>,
    #[serde(default)]
    pub zone: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub scale_set: Option<String>,
    #[serde(default)]
    pub resource_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks_nodegroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karpenter_node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gke_node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aks_agent_pool: Option<String>,
}

impl GroupSpec {
    /// The managed owners this group names, with the name each gives (one in a valid repo).
    pub fn managed(&self) -> Vec<(super::owner::Owner, &str)> {
        use super::owner::Owner;
        [
            (Owner::EksNodegroup, &self.eks_nodegroup),
            (Owner::KarpenterNodePool, &self.karpenter_node_pool),
            (Owner::GkeNodePool, &self.gke_node_pool),
            (Owner::AksAgentPool, &self.aks_agent_pool),
        ]
        .into_iter()
        .filter_map(|(o, n)| n.as_deref().map(|n| (o, n)))
        .collect()
    }

    /// The owner of the group: the managed one it names, else self-managed.
    pub fn owner(&self) -> super::owner::Owner {
        self.managed()
            .first()
            .map(|(o, _)| *o)
            .unwrap_or(super::owner::Owner::SelfManaged)
    }
}

// ----------------------------------------------------------------------------- HealthGate

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HealthGateSpec {
    #[serde(default)]
    pub interval: Option<GoDuration>,
    #[serde(default)]
    pub samples: Option<u32>,
    #[serde(default)]
    pub failure_limit: Option<u32>,
    #[serde(default)]
    pub prometheus: Option<PrometheusCheck>,
    #[serde(default)]
    pub pods: Option<PodsCheck>,
    #[serde(default)]
    pub events: Option<EventsCheck>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrometheusCheck {
    pub address: String,
    pub query: String,
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    #[serde(default)]
    pub on_no_data: Option<NoData>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsCheck {
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// A count or `"N%"`.
    #[serde(default)]
    pub max_not_ready: Option<serde_json::Value>,
    #[serde(default)]
    pub max_pending: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventsCheck {
    pub reasons: Vec<String>,
    pub max: u32,
    pub window: GoDuration,
}

/// The Fleet document.
pub type FleetManifest = Manifest<FleetSpec>;
/// A Cluster document.
pub type Cluster = Manifest<ClusterSpec>;
/// A HealthGate document.
pub type HealthGate = Manifest<HealthGateSpec>;

impl ClusterSpec {
    /// The cluster's region where its cloud has one that images depend on: the AWS region
    /// (AMIs are regional), the GCP region, the Azure location when written.
    pub fn region(&self) -> Option<&str> {
        self.cloud
            .aws
            .as_ref()
            .map(|a| a.region.as_str())
            .or_else(|| self.cloud.gcp.as_ref().and_then(GcpCloud::region))
            .or_else(|| {
                self.cloud
                    .azure
                    .as_ref()
                    .and_then(|a| a.location.as_deref())
            })
    }

    /// The cloud named by `spec.cloud` (the schema guarantees exactly one).
    pub fn cloud_kind(&self) -> Option<super::resolved::Cloud> {
        use super::resolved::Cloud;
        match (&self.cloud.aws, &self.cloud.gcp, &self.cloud.azure) {
            (Some(_), None, None) => Some(Cloud::Aws),
            (None, Some(_), None) => Some(Cloud::Gcp),
            (None, None, Some(_)) => Some(Cloud::Azure),
            _ => None,
        }
    }
}

impl CloudImages {
    /// What a pool of `owner` takes from this version: the AMI for EKS and Karpenter (as
    /// [`CloudImages::resolve`] finds it), the `gke` form or the `gcp` image with
    /// `imageType: CUSTOM` for GKE, the `aks` form for AKS. `None` for self-managed groups,
    /// which take the cloud's image.
    pub fn owner_image(
        &self,
        owner: super::owner::Owner,
        region: Option<&str>,
        arch: Arch,
    ) -> Option<Result<super::owner::OwnerImage, ImageMiss>> {
        use super::owner::{GKE_CUSTOM_IMAGE_TYPE, Owner, OwnerImage};
        use super::resolved::Cloud;
        let miss = |what| Err(ImageMiss::Form { owner, what });
        Some(match owner {
            Owner::SelfManaged => return None,
            Owner::EksNodegroup | Owner::KarpenterNodePool => self
                .resolve(Cloud::Aws, region, arch)
                .map(|id| OwnerImage::Ami { id: id.to_string() }),
            Owner::GkeNodePool => match (&self.gke, &self.gcp) {
                (Some(g), Some(image)) if g.image_type == GKE_CUSTOM_IMAGE_TYPE => {
                    Ok(OwnerImage::GkeCustom {
                        image: image.clone(),
                        node_version: g.node_version.clone(),
                    })
                }
                (Some(g), None) if g.image_type == GKE_CUSTOM_IMAGE_TYPE => {
                    miss("a gcp image for its gke.imageType CUSTOM")
                }
                (Some(g), _) => Ok(OwnerImage::GkeNode {
                    node_version: g.node_version.clone(),
                    image_type: g.image_type.clone(),
                }),
                (None, Some(_)) => miss("gke: {imageType: CUSTOM} beside its gcp image"),
                (None, None) => {
                    miss("gke: {nodeVersion, imageType} (or a gcp image with gke.imageType CUSTOM)")
                }
            },
            Owner::AksAgentPool => match &self.aks {
                Some(a) => Ok(OwnerImage::AksNodeImage {
                    node_image_version: a.node_image_version.clone(),
                }),
                None => miss("aks: {nodeImageVersion}"),
            },
        })
    }

    /// The version's image for a pool of `cloud` in `region` (AWS only; GCP images are global
    /// and an Azure gallery version has one ID) on `arch`.
    pub fn resolve(
        &self,
        cloud: super::resolved::Cloud,
        region: Option<&str>,
        arch: Arch,
    ) -> Result<&str, ImageMiss> {
        use super::resolved::Cloud;
        match cloud {
            Cloud::Gcp => self.gcp.as_deref().ok_or(ImageMiss::Cloud),
            Cloud::Azure => self.azure.as_deref().ok_or(ImageMiss::Cloud),
            Cloud::Aws => match self.aws.as_ref().ok_or(ImageMiss::Cloud)? {
                AwsImages::One(id) if arch == Arch::X86_64 => Ok(id),
                AwsImages::One(_) => Err(ImageMiss::Arch {
                    region: region.unwrap_or("").to_string(),
                    arch,
                }),
                AwsImages::ByRegion(by_region) => {
                    let region = region.unwrap_or("");
                    let miss_arch = || ImageMiss::Arch {
                        region: region.to_string(),
                        arch,
                    };
                    match by_region.get(region) {
                        None => Err(ImageMiss::Region {
                            region: region.to_string(),
                            known: by_region.keys().cloned().collect(),
                        }),
                        Some(RegionImage::One(id)) if arch == Arch::X86_64 => Ok(id),
                        Some(RegionImage::One(_)) => Err(miss_arch()),
                        Some(RegionImage::ByArch(m)) => {
                            m.get(&arch).map(String::as_str).ok_or_else(miss_arch)
                        }
                    }
                }
            },
        }
    }

    /// Every image ID of the version with the JSON pointer (below the version) it sits at,
    /// for shape checks: `aws`, `aws/us-east-1`, `aws/us-west-2/arm64`, `gcp`, `azure`.
    pub fn ids(&self) -> Vec<(super::resolved::Cloud, String, &str)> {
        use super::resolved::Cloud;
        let mut out = Vec::new();
        match &self.aws {
            Some(AwsImages::One(id)) => out.push((Cloud::Aws, "aws".to_string(), id.as_str())),
            Some(AwsImages::ByRegion(m)) => {
                for (region, img) in m {
                    let at = format!("aws/{}", super::yaml::escape_token(region));
                    match img {
                        RegionImage::One(id) => out.push((Cloud::Aws, at, id.as_str())),
                        RegionImage::ByArch(a) => {
                            for (arch, id) in a {
                                out.push((Cloud::Aws, format!("{at}/{arch}"), id.as_str()));
                            }
                        }
                    }
                }
            }
            None => {}
        }
        if let Some(id) = &self.gcp {
            out.push((Cloud::Gcp, "gcp".to_string(), id.as_str()));
        }
        if let Some(id) = &self.azure {
            out.push((Cloud::Azure, "azure".to_string(), id.as_str()));
        }
        out
    }
}
