//! The NodePoolRotation custom resource: one per managed pool, its spec the pool's desired
//! state, its status the rotation's progress and checkpoint.
//!
//! The spec and status are plain data of the core (`rotate::resource`); this file makes them
//! a Kubernetes resource (the object with its metadata, its `kube::Resource` identity) and
//! derives the CRD from their schemas, as kube's `CustomResource` derive would, with the
//! printer columns `kubectl get npr` shows.
//!
//! The resource is cluster-scoped. What it drives (nodes, a cloud group) is cluster-wide; a
//! namespace would be an arbitrary extra name to know, and the RBAC rota needs for nodes is
//! cluster-wide anyway. Its name is the pool's name (unique within a cluster by the fleet
//! contract), so `kubectl get npr general` finds the pool.

use std::borrow::Cow;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps, JSONSchemaPropsOrArray,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use rota_core::rotate::resource::{
    Condition, Fence, NodePoolRotationSpec, NodePoolRotationStatus,
};

/// Label naming the rota version that owns a resource (version-scoped ownership).
pub const AGENT_VERSION_LABEL: &str = "rota.dev/agent-version";

const GROUP: &str = "rota.dev";
const VERSION: &str = "v1alpha1";
const KIND: &str = "NodePoolRotation";
const PLURAL: &str = "nodepoolrotations";
const SINGULAR: &str = "nodepoolrotation";
const SHORT_NAMES: &[&str] = &["npr"];

/// One managed pool: its desired state at one fleet commit and the progress of its rotation.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(title = "NodePoolRotation")]
pub struct NodePoolRotation {
    /// `apiVersion`, `kind` and `metadata` are the API server's to validate: not in the schema.
    #[schemars(skip)]
    pub metadata: ObjectMeta,
    pub spec: NodePoolRotationSpec,
    #[serde(default)]
    pub status: Option<NodePoolRotationStatus>,
}

impl NodePoolRotation {
    /// A new resource named `name` (the pool's name) with `spec` and no status.
    pub fn new(name: &str, spec: NodePoolRotationSpec) -> Self {
        NodePoolRotation {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    /// The resource as the API names it (for dynamic clients and discovery).
    pub fn api_resource() -> kube::core::ApiResource {
        kube::core::ApiResource::erase::<Self>(&())
    }
}

impl Serialize for NodePoolRotation {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut obj = ser.serialize_struct(KIND, 4 + usize::from(self.status.is_some()))?;
        obj.serialize_field("apiVersion", &Self::api_version(&()))?;
        obj.serialize_field("kind", KIND)?;
        obj.serialize_field("metadata", &self.metadata)?;
        obj.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            obj.serialize_field("status", status)?;
        }
        obj.end()
    }
}

impl Resource for NodePoolRotation {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        format!("{GROUP}/{VERSION}").into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::core::object::HasSpec for NodePoolRotation {
    type Spec = NodePoolRotationSpec;
    fn spec(&self) -> &NodePoolRotationSpec {
        &self.spec
    }
    fn spec_mut(&mut self) -> &mut NodePoolRotationSpec {
        &mut self.spec
    }
}

impl kube::core::object::HasStatus for NodePoolRotation {
    type Status = NodePoolRotationStatus;
    fn status(&self) -> Option<&NodePoolRotationStatus> {
        self.status.as_ref()
    }
    fn status_mut(&mut self) -> &mut Option<NodePoolRotationStatus> {
        &mut self.status
    }
}

/// What `kubectl get npr` shows: (name, type, JSONPath, priority).
const PRINTER_COLUMNS: &[(&str, &str, &str, i32)] = &[
    ("Cluster", "string", ".spec.cluster", 1),
    ("Version", "string", ".spec.version", 0),
    ("Phase", "string", ".status.phase", 0),
    ("Batch", "integer", ".status.checkpoint.batchesStarted", 0),
    ("Stage", "string", ".status.checkpoint.stage.name", 0),
    ("On-Target", "integer", ".status.onTarget", 0),
    ("Total", "integer", ".status.total", 0),
    ("Ready", "integer", ".status.ready", 1),
    ("Message", "string", ".status.message", 1),
    // Every stop says who must do what (`rotate::stop`): `kubectl get npr -o wide`.
    ("Stop", "string", ".status.stop.reason", 1),
    ("Who", "string", ".status.stop.by", 1),
    ("Next", "string", ".status.stop.next", 1),
    ("Age", "date", ".metadata.creationTimestamp", 0),
];

/// The OpenAPI v3 schema of the resource, generated as kube's derive does: inlined, no
/// `$schema`, optional fields nullable, rewritten to the structural form Kubernetes requires.
fn open_api_schema() -> JSONSchemaProps {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<NodePoolRotation>())
        .and_then(serde_json::from_value)
        .expect("the resource's schema is a valid JSONSchemaProps")
}

/// The CRD as rota installs it.
pub fn definition() -> CustomResourceDefinition {
    let mut schema = open_api_schema();
    type_untyped_values(&mut schema);
    let columns = PRINTER_COLUMNS
        .iter()
        .map(
            |(name, type_, path, priority)| CustomResourceColumnDefinition {
                name: (*name).into(),
                type_: (*type_).into(),
                json_path: (*path).into(),
                priority: (*priority > 0).then_some(*priority),
                ..CustomResourceColumnDefinition::default()
            },
        )
        .collect();
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{PLURAL}.{GROUP}")),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GROUP.into(),
            names: CustomResourceDefinitionNames {
                categories: Some(vec!["rota".into()]),
                kind: KIND.into(),
                plural: PLURAL.into(),
                short_names: Some(SHORT_NAMES.iter().map(|s| s.to_string()).collect()),
                singular: Some(SINGULAR.into()),
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                additional_printer_columns: Some(columns),
                name: VERSION.into(),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                served: true,
                storage: true,
                subresources: Some(CustomResourceSubresources {
                    scale: None,
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        ..CustomResourceDefinition::default()
    }
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
}
