//! The typed fleet repo model, format `rota.dev/v1alpha1`, exactly as people write it: every
//! optional field stays optional here (defaults are applied only when a cluster is resolved, in
//! `crate::fleet::resolve`), and unknown fields are refused.
//!
//! The JSON Schemas in `schemas/` describe the same shapes; a test keeps the two in agreement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::duration::GoDuration;
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
    /// Version → image per cloud.
    pub versions: BTreeMap<String, CloudImages>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudImages {
    #[serde(default)]
    pub aws: Option<String>,
    #[serde(default)]
    pub gcp: Option<String>,
    #[serde(default)]
    pub azure: Option<String>,
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
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GcpCloud {
    pub project: String,
    pub region: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AzureCloud {
    pub subscription_id: String,
    pub resource_group: String,
    #[serde(default)]
    pub location: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pool {
    pub name: String,
    pub channel: String,
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

/// The cloud group of a pool, in one of three forms (checked against the cluster's cloud):
/// aws `{autoScalingGroup}`; gcp `{instanceGroupManager, zone | region}` (neither: the
/// cluster's region); azure `{scaleSet, resourceGroup}` (no resourceGroup: the cluster's).
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
    pub fn get(&self, cloud: super::resolved::Cloud) -> Option<&str> {
        use super::resolved::Cloud;
        match cloud {
            Cloud::Aws => self.aws.as_deref(),
            Cloud::Gcp => self.gcp.as_deref(),
            Cloud::Azure => self.azure.as_deref(),
        }
    }
}
