//! The desired state of one cluster after resolution: what the agent hands to the rotation
//! controller.
//!
//! This is the seam between the fleet repo (`crate::fleet`) and everything that acts
//! (`crate::rotate`, the NodePoolRotation resource). Every value here is final: policies are
//! merged fleet → cluster → pool with defaults applied, pins are turned into image IDs for the
//! pool's cloud, gate names are turned into their specs. Nothing downstream reads the repo again.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::{GoDuration, ImageAge};

pub use super::owner::{ManagedGroup, ManagedUpdate, Owner, OwnerImage, Strategy};
pub use super::platform::{Arch, Cloud};

/// Where a pool's machines come from: one cloud group, fully qualified so that a provider can
/// address it without any other context.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum GroupRef {
    /// An AWS Auto Scaling group.
    #[serde(rename_all = "camelCase")]
    Aws {
        region: String,
        auto_scaling_group: String,
    },
    /// A GCP managed instance group, zonal (`zone`) or regional (`region`).
    #[serde(rename_all = "camelCase")]
    Gcp {
        project: String,
        instance_group_manager: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
    },
    /// An Azure virtual machine scale set.
    #[serde(rename_all = "camelCase")]
    Azure {
        subscription_id: String,
        resource_group: String,
        scale_set: String,
    },
    /// A pool a managed service owns (EKS, Karpenter, GKE, AKS): changed only through the
    /// owner's API, never by writing its template (see `crate::fleet::owner`).
    Managed(ManagedGroup),
}

impl GroupRef {
    pub fn cloud(&self) -> Cloud {
        match self {
            GroupRef::Aws { .. } => Cloud::Aws,
            GroupRef::Gcp { .. } => Cloud::Gcp,
            GroupRef::Azure { .. } => Cloud::Azure,
            GroupRef::Managed(m) => m.cloud(),
        }
    }

    /// Who owns the group's machines.
    pub fn owner(&self) -> Owner {
        match self {
            GroupRef::Managed(m) => m.owner(),
            _ => Owner::SelfManaged,
        }
    }

    /// The managed pool, when a service owns the group.
    pub fn managed(&self) -> Option<&ManagedGroup> {
        match self {
            GroupRef::Managed(m) => Some(m),
            _ => None,
        }
    }

    /// The group's own name, as its cloud console shows it.
    pub fn name(&self) -> &str {
        match self {
            GroupRef::Aws {
                auto_scaling_group, ..
            } => auto_scaling_group,
            GroupRef::Gcp {
                instance_group_manager,
                ..
            } => instance_group_manager,
            GroupRef::Azure { scale_set, .. } => scale_set,
            GroupRef::Managed(m) => m.name(),
        }
    }
}

impl std::fmt::Display for GroupRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupRef::Aws {
                region,
                auto_scaling_group,
            } => write!(f, "aws:{region}/asg/{auto_scaling_group}"),
            GroupRef::Gcp {
                project,
                instance_group_manager,
                zone,
                region,
            } => {
                let loc = zone.as_deref().or(region.as_deref()).unwrap_or("-");
                write!(f, "gcp:{project}/{loc}/mig/{instance_group_manager}")
            }
            GroupRef::Azure {
                subscription_id,
                resource_group,
                scale_set,
            } => write!(
                f,
                "azure:{subscription_id}/{resource_group}/vmss/{scale_set}"
            ),
            GroupRef::Managed(m) => m.fmt(f),
        }
    }
}

/// `reconcile | readOnly | ignore`, resolved per pool (fleet → cluster → pool, the most
/// restrictive of a scope and its parents wins for `ignore`, see `crate::fleet`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    #[default]
    Reconcile,
    ReadOnly,
    Ignore,
}

/// Batch size: a node count or a share of the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(with = "serde_json::Value")]
pub enum BatchSize {
    Count(u32),
    /// 1..=100; rounds up, at least one node.
    Percent(u8),
}

impl BatchSize {
    /// Nodes per batch for a pool of `pool_size` nodes.
    ///
    /// Worked example: `"10%"` of 41 nodes is 4.1, rounded up to 5; of 3 nodes it is 0.3,
    /// rounded up to 1. A count larger than the pool is capped at the pool size (but never
    /// below 1, so an empty pool still has a well-defined batch).
    pub fn nodes(self, pool_size: u32) -> u32 {
        let n = match self {
            BatchSize::Count(n) => n,
            BatchSize::Percent(p) => (pool_size * u32::from(p)).div_ceil(100),
        };
        n.min(pool_size).max(1)
    }
}

impl Serialize for BatchSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BatchSize::Count(n) => s.serialize_u32(*n),
            BatchSize::Percent(p) => s.collect_str(&format_args!("{p}%")),
        }
    }
}

impl<'de> Deserialize<'de> for BatchSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) if (1..=u64::from(u32::MAX)).contains(&n) => Ok(BatchSize::Count(n as u32)),
            Raw::N(n) => Err(serde::de::Error::custom(format!(
                "batch must be at least 1, got {n}"
            ))),
            Raw::S(s) => parse_percent(&s).map(BatchSize::Percent).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "batch {s:?} is not an integer or \"N%\" with N in 1..100"
                ))
            }),
        }
    }
}

/// `"10%"` → 10; anything outside `"1%"..="100%"` → None.
pub fn parse_percent(s: &str) -> Option<u8> {
    let n: u8 = s.strip_suffix('%')?.parse().ok()?;
    (1..=100).contains(&n).then_some(n)
}

/// What a drain does when its timeout passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnDrainTimeout {
    #[default]
    Pause,
    Force,
}

/// What a failed health gate does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnGateFailure {
    #[default]
    Pause,
    Rollback,
}

/// How a batch replaces its nodes (`rollout.strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RolloutStrategy {
    /// New nodes first: capacity never dips, the group holds at most one batch more.
    #[default]
    Surge,
    /// The batch's old nodes are drained and removed first, and the group brings up their
    /// replacements from its template: never a node more than before the batch, capacity
    /// dips by one batch (pools without quota or spare accelerators for a surge).
    Replace,
}

impl RolloutStrategy {
    fn is_surge(&self) -> bool {
        *self == RolloutStrategy::Surge
    }
}

impl std::fmt::Display for RolloutStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RolloutStrategy::Surge => "surge",
            RolloutStrategy::Replace => "replace",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainPolicy {
    pub timeout: GoDuration,
    pub on_timeout: OnDrainTimeout,
    pub eviction_interval: GoDuration,
    pub delete_empty_dir_data: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<GoDuration>,
    /// After cordoning, how long pods get to finish on their own before evictions start.
    #[serde(default, skip_serializing_if = "GoDuration::is_zero")]
    pub delay: GoDuration,
    /// How long a do-not-disrupt pod may hold a drain (from the end of `delay`) before it is
    /// evicted like any other, recorded as such; `None`: forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deferral: Option<GoDuration>,
}

impl Default for DrainPolicy {
    fn default() -> Self {
        DrainPolicy {
            timeout: GoDuration::from_secs(30 * 60),
            on_timeout: OnDrainTimeout::Pause,
            eviction_interval: GoDuration::ZERO,
            delete_empty_dir_data: true,
            grace_period: None,
            delay: GoDuration::ZERO,
            max_deferral: None,
        }
    }
}

/// A maintenance window: a batch starts only inside one (a started batch finishes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    /// `Mon`..`Sun`; empty means every day.
    pub days: Vec<String>,
    /// `HH:MM`, local to `time_zone`.
    pub start: String,
    /// `HH:MM`; an end before the start spans midnight.
    pub end: String,
    /// IANA name, e.g. `Europe/Berlin`; defaults to `UTC`.
    pub time_zone: String,
}

/// The rollout policy of one pool with every default applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EffectivePolicy {
    pub batch: BatchSize,
    /// 1..=100: stop once this share of the pool runs the new image.
    pub percent: u8,
    pub batch_soak: GoDuration,
    pub pool_soak: GoDuration,
    pub max_parallel_pools: u32,
    pub node_ready_timeout: GoDuration,
    /// Replacements of a new instance not Ready within `nodeReadyTimeout` before the batch
    /// fails (a boot the cloud did not replace, a node that registered late heal this way;
    /// an image that never boots fails every attempt).
    #[serde(default = "node_ready_retries_default")]
    pub node_ready_retries: u32,
    pub drain: DrainPolicy,
    pub on_gate_failure: OnGateFailure,
    pub paused: bool,
    /// Bring the next batch up while the current one soaks (`rotate::plan`); false: one
    /// batch after the other, as before pipelining.
    #[serde(default = "pipeline_default")]
    pub pipeline: bool,
    pub windows: Vec<Window>,
    /// How a managed EKS, GKE or AKS pool is replaced (`service` unless the repo says
    /// `blueGreen`); absent for self-managed and Karpenter pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_update: Option<ManagedUpdate>,
    /// Dates when no batch starts (`rotate::window::blackout_at`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blackouts: Vec<Blackout>,
    /// A fleet stop in force for this pool (`rota stop`, read by the agent from the stop
    /// ref, never from the fleet's files): the rotation holds where it is until it is
    /// cleared. Carried in the NodePoolRotation's spec, so a restart stays stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<super::stops::FleetStop>,
    /// Either surge, new nodes first (the default), or replace, each batch drained and
    /// removed first while the group brings up its replacements.
    #[serde(default, skip_serializing_if = "RolloutStrategy::is_surge")]
    pub strategy: RolloutStrategy,
}

/// A freeze: no batch starts in `[from, to)`; a started batch finishes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Blackout {
    #[schemars(with = "String")]
    pub from: chrono::DateTime<chrono::Utc>,
    #[schemars(with = "String")]
    pub to: chrono::DateTime<chrono::Utc>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

fn pipeline_default() -> bool {
    true
}

fn node_ready_retries_default() -> u32 {
    2
}

impl Default for EffectivePolicy {
    fn default() -> Self {
        EffectivePolicy {
            batch: BatchSize::Percent(10),
            percent: 100,
            batch_soak: GoDuration::ZERO,
            pool_soak: GoDuration::ZERO,
            max_parallel_pools: 1,
            node_ready_timeout: GoDuration::from_secs(15 * 60),
            node_ready_retries: node_ready_retries_default(),
            drain: DrainPolicy::default(),
            on_gate_failure: OnGateFailure::Pause,
            paused: false,
            pipeline: true,
            windows: Vec::new(),
            managed_update: None,
            blackouts: Vec::new(),
            stop: None,
            strategy: RolloutStrategy::Surge,
        }
    }
}

/// A health gate with its spec, as the fleet repo declares it (resolved by name).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedGate {
    pub name: String,
    pub interval: GoDuration,
    pub samples: u32,
    pub failure_limit: u32,
    pub check: GateCheck,
}

/// The one kind of check a gate runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GateCheck {
    #[serde(rename_all = "camelCase")]
    Prometheus {
        address: String,
        query: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
        /// `fail` (default) or `pass`.
        on_no_data: NoData,
    },
    #[serde(rename_all = "camelCase")]
    Pods {
        /// Empty: all namespaces.
        namespaces: Vec<String>,
        /// Count or `"N%"` of the pods considered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_not_ready: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_pending: Option<u32>,
    },
    #[serde(rename_all = "camelCase")]
    Events {
        reasons: Vec<String>,
        max: u32,
        window: GoDuration,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NoData {
    #[default]
    Fail,
    Pass,
}

/// One pool's desired state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DesiredPool {
    pub cluster: String,
    pub name: String,
    pub channel: String,
    /// The version pinned by the cluster's wave.
    pub version: String,
    /// The image ID for the pool's cloud, region and arch (`ami-…`, a GCP image path, an
    /// Azure resource ID).
    pub image: String,
    /// The pool's CPU architecture (the Pool's `arch`, default `x86_64`).
    #[serde(default, skip_serializing_if = "Arch::is_default")]
    pub arch: Arch,
    /// The kubelet minor the pinned version's images carry (its `kubernetes`), checked
    /// against the live control plane before the first surge (`rotate::skew`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<String>,
    /// When the pinned version was released (the version's `released`), if the repo says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub released: Option<chrono::DateTime<chrono::Utc>>,
    /// The channel's patch deadline (`maxAge`): past it, the pool is overdue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<ImageAge>,
    pub group: GroupRef,
    /// What the pool's managed owner takes for its image (absent for self-managed groups,
    /// which take `image`); `image` is then [`OwnerImage::as_image`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_image: Option<OwnerImage>,
    /// Labels that pick the pool's nodes.
    pub node_selector: BTreeMap<String, String>,
    pub policy: EffectivePolicy,
    pub gates: Vec<ResolvedGate>,
    pub mode: Mode,
}

impl DesiredPool {
    /// Who owns the pool's machines.
    pub fn owner(&self) -> Owner {
        self.group.owner()
    }

    /// How the pool is replaced: rota's rotation, the owner's update, blue-green or drift.
    pub fn strategy(&self) -> Strategy {
        self.owner().strategy(self.policy.managed_update)
    }
}

/// One cluster's desired state at one fleet commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DesiredCluster {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub cloud: Cloud,
    pub wave: String,
    /// Position of the wave in the fleet's ordered list (0 = first).
    pub wave_index: usize,
    pub mode: Mode,
    /// The control plane's minor the Cluster declares (`spec.kubernetes`), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
    pub pools: Vec<DesiredPool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_batches_round_up_and_never_reach_zero() {
        assert_eq!(BatchSize::Percent(10).nodes(41), 5);
        assert_eq!(BatchSize::Percent(10).nodes(40), 4);
        assert_eq!(BatchSize::Percent(10).nodes(3), 1);
        assert_eq!(BatchSize::Percent(100).nodes(7), 7);
        assert_eq!(BatchSize::Count(5).nodes(3), 3);
        assert_eq!(BatchSize::Count(5).nodes(0), 1);
    }

    #[test]
    fn batch_size_round_trips_through_yaml() {
        let b: BatchSize = serde_json::from_str("\"25%\"").unwrap();
        assert_eq!(b, BatchSize::Percent(25));
        assert_eq!(serde_json::to_string(&b).unwrap(), "\"25%\"");
        let b: BatchSize = serde_json::from_str("3").unwrap();
        assert_eq!(b, BatchSize::Count(3));
        assert!(serde_json::from_str::<BatchSize>("0").is_err());
        assert!(serde_json::from_str::<BatchSize>("\"0%\"").is_err());
        assert!(serde_json::from_str::<BatchSize>("\"101%\"").is_err());
    }
}
