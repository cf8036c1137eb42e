//! The NodePoolRotation custom resource: one per managed pool, its spec the pool's desired
//! state, its status the rotation's progress and checkpoint.
//!
//! The resource is cluster-scoped. What it drives (nodes, a cloud group) is cluster-wide; a
//! namespace would be an arbitrary extra name to know, and the RBAC rota needs for nodes is
//! cluster-wide anyway. Its name is the pool's name (unique within a cluster by the fleet
//! contract), so `kubectl get npr general` finds the pool.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::fleet::resolved::{DesiredPool, EffectivePolicy, GroupRef, Mode, ResolvedGate};
use crate::rotate::{Checkpoint, Phase};

/// Label naming the rota version that owns a resource (version-scoped ownership).
pub const AGENT_VERSION_LABEL: &str = "rota.dev/agent-version";

/// The desired state of one pool, as resolved from one fleet commit.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "rota.dev",
    version = "v1alpha1",
    kind = "NodePoolRotation",
    plural = "nodepoolrotations",
    singular = "nodepoolrotation",
    shortname = "npr",
    category = "rota",
    status = "NodePoolRotationStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.cluster","priority":1}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Batch","type":"integer","jsonPath":".status.checkpoint.batchesStarted"}"#,
    printcolumn = r#"{"name":"Stage","type":"string","jsonPath":".status.checkpoint.stage.name"}"#,
    printcolumn = r#"{"name":"On-Target","type":"integer","jsonPath":".status.onTarget"}"#,
    printcolumn = r#"{"name":"Total","type":"integer","jsonPath":".status.total"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.ready","priority":1}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.message","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
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
    /// The image ID for the pool's cloud.
    pub image: String,
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
    #[schemars(schema_with = "crate::rotate::checkpoint::opt_date_time")]
    pub last_progress_time: Option<DateTime<Utc>>,
    /// When the rotation should be done, at the pace its batches went so far
    /// (`rotate::eta`); set anew when the stage changes, so that it does not move with
    /// every pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::rotate::checkpoint::opt_date_time")]
    pub estimated_completion: Option<DateTime<Utc>>,
    /// The leadership term that wrote this status (see `controller::leader`): a controller
    /// whose own term is older refuses to write over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<Fence>,
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
            group: self.group.clone(),
            node_selector: self.node_selector.clone(),
            policy: self.policy.clone(),
            gates: self.gates.clone(),
            mode: self.mode,
        }
    }
}

/// The CRD as rota installs it.
pub fn definition() -> CustomResourceDefinition {
    let mut crd = NodePoolRotation::crd();
    for v in &mut crd.spec.versions {
        if let Some(schema) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            type_untyped_values(schema);
        }
    }
    crd
}

/// Kubernetes requires a structural schema: every field typed. The fleet contract has two
/// fields that are a count or a `"N%"` string (`batch`, a pods gate's `maxNotReady`), which
/// schemars leaves untyped; Kubernetes spells that `x-kubernetes-int-or-string`.
fn type_untyped_values(schema: &mut JSONSchemaProps) {
    let props = schema.properties.iter_mut().flat_map(|p| p.values_mut());
    let items = schema.items.iter_mut().filter_map(|i| match i {
        JSONSchemaPropsOrArray::Schema(s) => Some(s.as_mut()),
        JSONSchemaPropsOrArray::Schemas(_) => None,
    });
    for child in props.chain(items) {
        let untyped = child.type_.is_none()
            && child.x_kubernetes_int_or_string.is_none()
            && child.x_kubernetes_preserve_unknown_fields.is_none()
            && child.one_of.is_none()
            && child.any_of.is_none()
            && child.all_of.is_none()
            && child.properties.is_none();
        if untyped {
            child.x_kubernetes_int_or_string = Some(true);
        }
        type_untyped_values(child);
    }
}

/// The CRD as YAML (what `rota crd` prints and `deploy/crd.yaml` holds).
pub fn definition_yaml() -> String {
    let yaml = serde_yaml::to_string(&definition()).expect("a CRD always serializes");
    format!(
        "# Generated by `rota crd`; do not edit (ROTA_BLESS=1 cargo test --lib kube::crd regenerates it).\n{yaml}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_is_cluster_scoped_with_the_expected_names() {
        let crd = definition();
        assert_eq!(crd.spec.group, "rota.dev");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, "NodePoolRotation");
        assert_eq!(crd.spec.names.plural, "nodepoolrotations");
        assert_eq!(crd.spec.names.short_names, Some(vec!["npr".to_string()]));
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        assert!(v.subresources.as_ref().unwrap().status.is_some());
        let cols: Vec<&str> = v
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert!(cols.contains(&"Phase") && cols.contains(&"On-Target"));
    }

    /// Kubernetes rejects a CRD whose schema has an untyped field; every leaf must say what
    /// it is (this is what would make `kubectl apply -f deploy/crd.yaml` fail).
    #[test]
    fn schema_is_structural() {
        fn check(path: &str, s: &JSONSchemaProps, bad: &mut Vec<String>) {
            let typed = s.type_.is_some()
                || s.x_kubernetes_int_or_string == Some(true)
                || s.x_kubernetes_preserve_unknown_fields == Some(true);
            if !typed {
                bad.push(path.to_string());
            }
            for (k, v) in s.properties.iter().flatten() {
                check(&format!("{path}.{k}"), v, bad);
            }
            if let Some(JSONSchemaPropsOrArray::Schema(i)) = &s.items {
                check(&format!("{path}[]"), i, bad);
            }
        }
        let crd = definition();
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap();
        let mut bad = Vec::new();
        check("", schema, &mut bad);
        assert!(bad.is_empty(), "untyped fields: {bad:?}");
        let batch = &schema.properties.as_ref().unwrap()["spec"]
            .properties
            .as_ref()
            .unwrap()["policy"]
            .properties
            .as_ref()
            .unwrap()["batch"];
        assert_eq!(batch.x_kubernetes_int_or_string, Some(true));
    }

    /// `deploy/crd.yaml` is the committed copy; `ROTA_BLESS=1` rewrites it.
    #[test]
    fn deploy_copy_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/crd.yaml");
        let want = definition_yaml();
        if std::env::var_os("ROTA_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "deploy/crd.yaml is stale; regenerate it with ROTA_BLESS=1 cargo test --lib kube::crd"
        );
    }

    #[test]
    fn spec_round_trips_a_desired_pool() {
        let pool = DesiredPool {
            cluster: "prod-use1".into(),
            name: "general".into(),
            channel: "general".into(),
            version: "2026.11.2".into(),
            image: "ami-0f9e8d7c6b5a40312".into(),
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
