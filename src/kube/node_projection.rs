//! What the cluster index decodes of a Node: the fields [`super::summary::NodeSummary`]
//! reads, and nothing else.
//!
//! Every node's kubelet updates its Node object (heartbeats, conditions, images, addresses,
//! capacity), and the watch delivers each update as the whole object. Decoded into
//! k8s-openapi's `Node`, that is a few kilobytes of heap per event (a real node lists every
//! image it has pulled: 50 to 100 names with their sizes) built only to keep its name,
//! labels, providerID, cordon, taints and Ready. Decoded into [`NodeProjection`], serde skips the
//! rest without allocating for it, as [`super::projection::PodProjection`] does for pods.
//! `kube::Api` and the watcher take it as they take `Node` (the same resource, `v1/nodes`).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::projection::{ConditionProjection, meta};

/// A node as the index decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeProjection {
    #[serde(default, deserialize_with = "meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<NodeSpecProjection>,
    #[serde(default)]
    pub status: Option<NodeStatusProjection>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpecProjection {
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    #[serde(default)]
    pub unschedulable: Option<bool>,
    /// The taints, for an owner's own cordon (EKS's `eks.amazonaws.com/nodegroup=
    /// unschedulable:NoSchedule`); a node has a handful at most.
    #[serde(default)]
    pub taints: Option<Vec<TaintProjection>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct TaintProjection {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub effect: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatusProjection {
    #[serde(default)]
    pub conditions: Option<Vec<ConditionProjection>>,
    #[serde(default)]
    pub node_info: Option<NodeInfoProjection>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfoProjection {
    /// `v1.31.5-gke.1023000`: a GKE node's node version (no label carries it).
    #[serde(default)]
    pub kubelet_version: String,
}

super::projection::projects!(NodeProjection, Node);

/// A full `Node` (a fresh read, a test's fixture) seen as the index sees it.
impl From<&Node> for NodeProjection {
    fn from(n: &Node) -> NodeProjection {
        let spec = n.spec.as_ref();
        let status = n.status.as_ref();
        NodeProjection {
            metadata: ObjectMeta {
                managed_fields: None,
                ..n.metadata.clone()
            },
            spec: spec.map(|s| NodeSpecProjection {
                provider_id: s.provider_id.clone(),
                unschedulable: s.unschedulable,
                taints: s.taints.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| TaintProjection {
                            key: t.key.clone(),
                            value: t.value.clone(),
                            effect: t.effect.clone(),
                        })
                        .collect()
                }),
            }),
            status: status.map(|s| NodeStatusProjection {
                conditions: s.conditions.as_ref().map(|cs| {
                    cs.iter()
                        .map(|c| ConditionProjection {
                            type_: c.type_.clone(),
                            status: c.status.clone(),
                        })
                        .collect()
                }),
                node_info: s.node_info.as_ref().map(|i| NodeInfoProjection {
                    kubelet_version: i.kubelet_version.clone(),
                }),
            }),
        }
    }
}

impl NodeProjection {
    /// The kubelet's Ready condition is True.
    pub fn kubelet_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::summary::{Interner, NodeSummary};
    use serde_json::json;

    /// A node with what a real kubelet reports: images, addresses, capacity, managed fields.
    fn full() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": "ip-10-0-0-1", "uid": "u1", "resourceVersion": "42",
                "labels": {"rota.dev/pool": "general", "kubernetes.io/hostname": "ip-10-0-0-1",
                           "cloud.google.com/gke-nodepool": "general",
                           "cloud.google.com/gke-os-distribution": "cos",
                           "cloud.google.com/gke-container-runtime": "containerd"},
                "annotations": {"rota.dev/cordoned-by": "rotation-1",
                                "karpenter.sh/do-not-disrupt": "true",
                                "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"providerID": "aws:///us-east-1a/i-0abc", "unschedulable": true,
                     "podCIDR": "10.1.0.0/24",
                     "taints": [{"key": "k", "effect": "NoSchedule"},
                                {"key": "eks.amazonaws.com/nodegroup", "value": "unschedulable",
                                 "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False",
                     "lastHeartbeatTime": "2026-11-29T05:00:00Z"},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "lastHeartbeatTime": "2026-11-29T05:00:00Z"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320368}],
                "nodeInfo": {"kubeletVersion": "v1.31.5-gke.1023000", "osImage": "cos",
                             "machineID": "m", "systemUUID": "s", "bootID": "b",
                             "kernelVersion": "6.1", "containerRuntimeVersion": "containerd://1.7",
                             "kubeProxyVersion": "v1.31.5", "operatingSystem": "linux",
                             "architecture": "amd64"}
            }
        })
    }

    #[test]
    fn the_projection_keeps_what_the_summary_reads() {
        let node: Node = serde_json::from_value(full()).unwrap();
        let projected: NodeProjection = serde_json::from_value(full()).unwrap();
        let mut i = Interner::default();
        let from_full = NodeSummary::from_node(&NodeProjection::from(&node), &mut i);
        let from_projection = NodeSummary::from_node(&projected, &mut i);
        assert_eq!(from_full, from_projection);
        let s = from_projection;
        assert_eq!(s.name, "ip-10-0-0-1");
        assert_eq!(s.provider_id, "aws:///us-east-1a/i-0abc");
        assert!(s.kubelet_ready && s.cordoned && s.do_not_disrupt && s.scale_down_disabled);
        // EKS's taint on a node its update replaces: its owner's cordon.
        assert!(s.owner_unschedulable);
        assert_eq!(s.cordoned_by.as_deref(), Some("rotation-1"));
        assert_eq!(s.kubelet_version.as_deref(), Some("v1.31.5-gke.1023000"));
        assert_eq!(s.labels.len(), 5);
        assert_eq!(
            s.labels.get("rota.dev/pool").map(String::as_str),
            Some("general")
        );
        // A GKE node's image is read from its labels and kubelet, as from a full Node.
        assert_eq!(
            crate::kube::observe::node_image(&s).as_deref(),
            Some("1.31.5-gke.1023000/COS_CONTAINERD")
        );
        // The watcher resumes from the resourceVersion; managed fields are not kept.
        assert_eq!(projected.metadata.resource_version.as_deref(), Some("42"));
        assert!(projected.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_node_not_ready_or_without_status_is_not_ready() {
        let mut v = full();
        v["status"]["conditions"][1]["status"] = json!("Unknown");
        let p: NodeProjection = serde_json::from_value(v).unwrap();
        assert!(!p.kubelet_ready());
        let bare: NodeProjection =
            serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        assert!(!bare.kubelet_ready());
        let s = NodeSummary::from_node(&bare, &mut Interner::default());
        assert!(!s.cordoned && s.labels.is_empty() && s.provider_id.is_empty());
    }
}
