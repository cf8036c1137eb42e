//! The NodePoolRotation resource as plain data: its spec (one pool's desired state at one
//! fleet commit), its status (phase, counts, conditions, the checkpoint) and the leadership
//! term that wrote it. No Kubernetes client types: `kube::crd` at the edge turns these into
//! the custom resource and its CRD; the status is composed in one place, [`super::status`].

use std::collections::BTreeMap;

use chrono::{DateTime, SubsecRound, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::checkpoint::Checkpoint;
use super::phase::Phase;
use crate::fleet::duration::ImageAge;
use crate::fleet::resolved::{Arch, DesiredPool, EffectivePolicy, GroupRef, Mode, ResolvedGate};

/// The desired state of one pool, as resolved from one fleet commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolRotationSpec {
    pub cluster: String,
    pub pool: String,
    /// The pool's cloud group.
    pub group: GroupRef,
    /// Labels that pick the pool's nodes.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    pub channel: String,
    pub version: String,
    /// The image ID for the pool's cloud, region and arch.
    pub image: String,
    /// What the pool's managed owner takes for its image (absent for self-managed groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_image: Option<crate::fleet::owner::OwnerImage>,
    /// The pool's CPU architecture (checked against the image before the first surge).
    #[serde(default, skip_serializing_if = "Arch::is_default")]
    pub arch: Arch,
    /// The kubelet minor the version's images carry (checked against the control plane
    /// before the first surge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<String>,
    /// When the version was released (the fleet repo's `released`), for its age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::checkpoint::opt_date_time")]
    pub released: Option<DateTime<Utc>>,
    /// The channel's patch deadline (`maxAge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<ImageAge>,
    /// The effective RolloutPolicy (every default applied).
    pub policy: EffectivePolicy,
    #[serde(default)]
    pub gates: Vec<ResolvedGate>,
    /// The fleet commit this desired state was resolved from.
    pub source_commit: String,
    #[serde(default)]
    pub mode: Mode,
}

/// The progress of the pool's rotation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolRotationStatus {
    #[serde(default)]
    pub phase: Phase,
    /// What the pool waits for, or why it stopped.
    #[serde(default)]
    pub message: String,
    /// Nodes in the pool.
    #[serde(default)]
    pub total: u32,
    /// Nodes running the desired image.
    #[serde(default)]
    pub on_target: u32,
    /// Ready nodes.
    #[serde(default)]
    pub ready: u32,
    /// When the pool is stopped or waits: the cause, what holds it, who moves it on (`rota`
    /// by itself or a `person`) and the command, commit or moment that does
    /// (`rotate::stop`). Absent while the pool moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<super::stop::StopNote>,
    /// The rotation's checkpoint: written before every side effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// `Progressing`, `Ready`, `Paused` (standard Kubernetes conditions).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The fleet commit whose desired state this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the rotation last moved forward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::checkpoint::opt_date_time")]
    pub last_progress_time: Option<DateTime<Utc>>,
    /// When the rotation should be done, at the pace its batches went so far
    /// (`rotate::eta`); set anew when the stage changes, so that it does not move with
    /// every pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::checkpoint::opt_date_time")]
    pub estimated_completion: Option<DateTime<Utc>>,
    /// The leadership term that wrote this status (see `controller::leader`): a controller
    /// whose own term is older refuses to write over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<Fence>,
    /// A managed pool's owner refused rota's last request for it (a twin pool on an image
    /// the owner does not create pools on, an update it does not take), kept while the pool
    /// is paused on it (`OwnerRefused`): a restarted controller reads it here and does not
    /// ask the owner again. Gone once the pool moves on (another version in git).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<super::observed::Refusal>,
}

/// A leadership term: the Lease's holder and its `leaseTransitions` when it was won. Terms
/// are ordered by `transitions` (every takeover increments it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fence {
    pub holder: String,
    pub transitions: i32,
}

impl Fence {
    /// Whether a status written under `self` may be written over by the term `by` (pure):
    /// only by the same term or a later one.
    pub fn admits(&self, by: &Fence) -> bool {
        by.transitions > self.transitions
            || (by.transitions == self.transitions && by.holder == self.holder)
    }
}

impl NodePoolRotationSpec {
    /// The spec for one pool of a resolved cluster at one fleet commit.
    pub fn from_desired(pool: &DesiredPool, source_commit: &str) -> Self {
        NodePoolRotationSpec {
            cluster: pool.cluster.clone(),
            pool: pool.name.clone(),
            group: pool.group.clone(),
            node_selector: pool.node_selector.clone(),
            channel: pool.channel.clone(),
            version: pool.version.clone(),
            image: pool.image.clone(),
            owner_image: pool.owner_image.clone(),
            arch: pool.arch,
            kubelet: pool.kubelet.clone(),
            released: pool.released,
            max_age: pool.max_age,
            policy: pool.policy.clone(),
            gates: pool.gates.clone(),
            source_commit: source_commit.to_string(),
            mode: pool.mode,
        }
    }

    /// The desired pool this spec carries (what `rotate::plan` takes).
    pub fn desired(&self) -> DesiredPool {
        DesiredPool {
            cluster: self.cluster.clone(),
            name: self.pool.clone(),
            channel: self.channel.clone(),
            version: self.version.clone(),
            image: self.image.clone(),
            arch: self.arch,
            kubelet: self.kubelet.clone(),
            released: self.released,
            max_age: self.max_age,
            group: self.group.clone(),
            owner_image: self.owner_image.clone(),
            node_selector: self.node_selector.clone(),
            policy: self.policy.clone(),
            gates: self.gates.clone(),
            mode: self.mode,
        }
    }
}

/// One standard Kubernetes condition (`metav1.Condition`), with the same wire form and
/// schema: rota sets `Ready`, `Progressing`, `Paused` and `Stuck`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    description = "Condition contains details for one aspect of the current state of this API Resource."
)]
pub struct Condition {
    /// lastTransitionTime is the last time the condition transitioned from one status to another. This should be when the underlying condition changed.  If that is not known, then using the time when the API field changed is acceptable.
    #[serde(with = "whole_seconds")]
    #[schemars(schema_with = "date_time_described")]
    pub last_transition_time: DateTime<Utc>,
    /// message is a human readable message indicating details about the transition. This may be an empty string.
    pub message: String,
    /// observedGeneration represents the .metadata.generation that the condition was set based upon. For instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration is 9, the condition is out of date with respect to the current state of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "int64_described")]
    pub observed_generation: Option<i64>,
    /// reason contains a programmatic identifier indicating the reason for the condition's last transition. Producers of specific condition types may define expected values and meanings for this field, and whether the values are considered a guaranteed API. The value should be a CamelCase string. This field may not be empty.
    pub reason: String,
    /// status of the condition, one of True, False, Unknown.
    pub status: String,
    /// type of condition in CamelCase or in foo.example.com/CamelCase.
    #[serde(rename = "type")]
    pub type_: String,
}

impl Condition {
    /// A condition that transitioned at `at`, kept to whole seconds as Kubernetes stores it
    /// (so that a condition read back equals the one written).
    pub fn new(
        type_: &str,
        status: &str,
        reason: &str,
        message: &str,
        observed_generation: Option<i64>,
        at: DateTime<Utc>,
    ) -> Condition {
        Condition {
            last_transition_time: at.trunc_subsecs(0),
            message: message.into(),
            observed_generation,
            reason: reason.into(),
            status: status.into(),
            type_: type_.into(),
        }
    }
}

fn date_time_described(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "lastTransitionTime is the last time the condition transitioned from one status to another. This should be when the underlying condition changed.  If that is not known, then using the time when the API field changed is acceptable.",
        "type": "string",
        "format": "date-time"
    })
}

fn int64_described(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "observedGeneration represents the .metadata.generation that the condition was set based upon. For instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration is 9, the condition is out of date with respect to the current state of the instance.",
        "type": "integer",
        "format": "int64"
    })
}

/// `metav1.Time` on the wire: RFC 3339 in whole seconds (`2026-11-24T10:00:00Z`).
mod whole_seconds {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_reads_back_as_written() {
        let at = DateTime::parse_from_rfc3339("2026-11-24T10:00:00.75Z")
            .unwrap()
            .with_timezone(&Utc);
        let c = Condition::new("Ready", "True", "Succeeded", "done", Some(3), at);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["lastTransitionTime"], "2026-11-24T10:00:00Z");
        assert_eq!(json["type"], "Ready");
        let back: Condition = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn spec_round_trips_a_desired_pool() {
        let pool = DesiredPool {
            owner_image: None,
            cluster: "prod-use1".into(),
            name: "general".into(),
            channel: "general".into(),
            version: "2026.11.2".into(),
            image: "ami-0f9e8d7c6b5a40312".into(),
            arch: Default::default(),
            kubelet: None,
            released: None,
            max_age: None,
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "eks-general".into(),
            },
            node_selector: [("pool".to_string(), "general".to_string())].into(),
            policy: EffectivePolicy::default(),
            gates: vec![],
            mode: Mode::Reconcile,
        };
        let spec = NodePoolRotationSpec::from_desired(&pool, "abc123");
        assert_eq!(spec.desired(), pool);
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["sourceCommit"], "abc123");
        assert_eq!(json["policy"]["batch"], "10%");
        let back: NodePoolRotationSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back, spec);
    }
}
