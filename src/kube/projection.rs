//! What the cluster index decodes of a Pod: the fields [`super::summary::PodSummary`] reads,
//! and nothing else.
//!
//! The index watches every pod of the cluster, and a watch delivers each change of a pod as
//! the whole object. Decoded into k8s-openapi's `Pod`, a pod is several kilobytes of heap
//! (containers, their environment, probes, resources, volumes, managed fields), built for
//! every one of the millions of events of a large rotation and dropped at once; a list page
//! of 500 pods held them all at the same time. Decoded into [`PodProjection`], serde skips
//! what rota never reads without allocating for it: the same JSON is parsed, a fraction of
//! it is kept. `kube::Api` and the watcher take it as they take `Pod` (it is the same
//! resource, `v1/pods`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

/// A pod as the index decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodProjection {
    #[serde(default, deserialize_with = "meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<SpecProjection>,
    #[serde(default)]
    pub status: Option<StatusProjection>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecProjection {
    #[serde(default)]
    pub node_name: Option<String>,
    /// Each volume, only as far as whether it is an `emptyDir`.
    #[serde(default)]
    pub volumes: Option<Vec<VolumeProjection>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeProjection {
    #[serde(default)]
    pub empty_dir: Option<IgnoredAny>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct StatusProjection {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub conditions: Option<Vec<ConditionProjection>>,
}

/// A condition (a pod's or a node's) as far as its type and status.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConditionProjection {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

/// The metadata fields the index and the watcher read (the watcher needs the
/// resourceVersion); owner references as far as their kind.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaProjection {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerKind>>,
    deletion_timestamp: Option<Time>,
}

#[derive(Deserialize)]
struct OwnerKind {
    kind: String,
}

/// The metadata as [`MetaProjection`] decodes it (pods' and nodes' alike).
pub(super) fn meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = MetaProjection::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references.map(|os| {
            os.into_iter()
                .map(|o| OwnerReference {
                    kind: o.kind,
                    ..Default::default()
                })
                .collect()
        }),
        deletion_timestamp: m.deletion_timestamp,
        ..Default::default()
    })
}

/// A projection (`$proj`, with a `metadata: ObjectMeta`) listed and watched as the API
/// resource it projects (`$full`): the same kind, path and list kind, so kube-rs asks for
/// `$full` and decodes only the projection's fields.
macro_rules! projects {
    ($proj:ty, $full:ty) => {
        impl k8s_openapi::Resource for $proj {
            const API_VERSION: &'static str = <$full as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <$full as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <$full as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <$full as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str =
                <$full as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <$full as k8s_openapi::Resource>::Scope;
        }

        impl k8s_openapi::ListableResource for $proj {
            const LIST_KIND: &'static str = <$full as k8s_openapi::ListableResource>::LIST_KIND;
        }

        impl k8s_openapi::Metadata for $proj {
            type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use projects;

projects!(PodProjection, Pod);

/// A full `Pod` (a fresh read, a test's fixture) seen as the index sees it.
impl From<&Pod> for PodProjection {
    fn from(p: &Pod) -> PodProjection {
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        PodProjection {
            metadata: ObjectMeta {
                owner_references: p.metadata.owner_references.as_ref().map(|os| {
                    os.iter()
                        .map(|o| OwnerReference {
                            kind: o.kind.clone(),
                            ..Default::default()
                        })
                        .collect()
                }),
                managed_fields: None,
                ..p.metadata.clone()
            },
            spec: spec.map(|s| SpecProjection {
                node_name: s.node_name.clone(),
                volumes: s.volumes.as_ref().map(|vs| {
                    vs.iter()
                        .map(|v| VolumeProjection {
                            empty_dir: v.empty_dir.as_ref().map(|_| IgnoredAny),
                        })
                        .collect()
                }),
            }),
            status: status.map(|s| StatusProjection {
                phase: s.phase.clone(),
                conditions: s.conditions.as_ref().map(|cs| {
                    cs.iter()
                        .map(|c| ConditionProjection {
                            type_: c.type_.clone(),
                            status: c.status.clone(),
                        })
                        .collect()
                }),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::summary::{Interner, PodSummary};
    use serde_json::json;

    /// A pod with everything a real one carries: containers, env, probes, managed fields.
    fn full() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u1", "resourceVersion": "42",
                "labels": {"app": "web"},
                "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                     "name": "web-abc", "uid": "r1", "controller": true}],
                "deletionTimestamp": "2026-11-29T06:00:00Z",
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "image": "i",
                                "env": [{"name": "A", "value": "b"}],
                                "readinessProbe": {"initialDelaySeconds": 5}}],
                "volumes": [{"name": "cfg", "configMap": {"name": "x"}},
                            {"name": "scratch", "emptyDir": {}}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-11-29T05:00:00Z"}]}
        })
    }

    #[test]
    fn the_projection_keeps_what_the_summary_reads() {
        let pod: Pod = serde_json::from_value(full()).unwrap();
        let projected: PodProjection = serde_json::from_value(full()).unwrap();
        let mut i = Interner::default();
        let from_full = PodSummary::from_pod(&PodProjection::from(&pod), &mut i);
        let from_projection = PodSummary::from_pod(&projected, &mut i);
        assert_eq!(from_full, from_projection);
        assert!(from_projection.do_not_disrupt && from_projection.uses_empty_dir);
        assert!(from_projection.terminating && from_projection.ready);
        assert_eq!(from_projection.node.as_deref(), Some("n1"));
        // The watcher resumes from the resourceVersion; managed fields are not kept.
        assert_eq!(projected.metadata.resource_version.as_deref(), Some("42"));
        assert!(projected.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_daemonset_pod_keeps_its_owner_kind() {
        let mut v = full();
        v["metadata"]["ownerReferences"][0]["kind"] = json!("DaemonSet");
        let p: PodProjection = serde_json::from_value(v).unwrap();
        assert!(PodSummary::from_pod(&p, &mut Interner::default()).daemon_set);
    }
}
