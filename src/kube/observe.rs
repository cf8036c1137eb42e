//! Reading one pool from the Kubernetes API: its nodes, the pods on them and the
//! PodDisruptionBudgets that cover those pods, turned into `rotate::Observed`.
//!
//! The conversions are pure functions of the API objects (unit-tested without a server);
//! [`observe`] only lists and hands the lists to them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::core::{Selector, SelectorExt};

use crate::cloud::{CloudError, NodeGroups};
use crate::fleet::resolved::DesiredPool;
use crate::rotate::observed::{CORDONED_BY, DO_NOT_DISRUPT, SCALE_DOWN_DISABLED};
use crate::rotate::{GateVerdict, Observed, ObservedNode, ObservedPod, PdbRef, PodKind};

/// Node label naming the image a node booted, for clouds where no instance matches it.
pub const IMAGE_LABEL: &str = "rota.dev/image";
/// Annotation the kubelet puts on the mirror of a static pod.
const MIRROR: &str = "kubernetes.io/config.mirror";

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("listing {what}: {source}")]
    Kube {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Cloud(#[from] CloudError),
}

/// Read one pool: the group from its cloud, nodes by the pool's selector, their pods and the
/// PDBs. The gates' verdict comes from the gates framework, the start hold from
/// `rotate::parallel::admit` over the cluster's pools.
pub async fn observe(
    client: &kube::Client,
    groups: &dyn NodeGroups,
    desired: &DesiredPool,
    gates: GateVerdict,
    start_hold: Option<String>,
) -> Result<Observed, ObserveError> {
    let group = groups.describe(&desired.group).await?;
    let selector: Selector = desired.node_selector.clone().into_iter().collect();
    // All nodes, not only the selected ones: a node of the group that left the selector
    // mid-rotation must still be seen (drained) before its instance is terminated.
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ObserveError::Kube {
            what: "nodes",
            source,
        })?;
    // One list of all pods rather than one per node: a drain looks at a handful of nodes
    // but the pods gate and the PDB arithmetic need the cluster's view anyway.
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ObserveError::Kube {
            what: "pods",
            source,
        })?;
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ObserveError::Kube {
            what: "poddisruptionbudgets",
            source,
        })?;
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in &pods.items {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let (selected, departed) = pool_nodes(&nodes.items, &selector, &group, |n| {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        observed_node(n, by_node.get(name).map_or(&[][..], |v| v), &pdbs.items)
    });
    Ok(Observed {
        group,
        nodes: selected,
        departed,
        gates,
        start_hold,
    })
}

/// Split the cluster's nodes into the pool's (the selector picks them) and the departed
/// ones (backing an instance of the group, no longer picked); other nodes are dropped.
pub fn pool_nodes(
    nodes: &[Node],
    selector: &Selector,
    group: &crate::cloud::GroupState,
    mut observe: impl FnMut(&Node) -> ObservedNode,
) -> (Vec<ObservedNode>, Vec<ObservedNode>) {
    let (mut selected, mut departed) = (Vec::new(), Vec::new());
    for n in nodes {
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let picked = selector.matches(&labels);
        let provider_id = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let of_group = group
            .instances
            .iter()
            .any(|i| Some(i.provider_id.as_str()) == provider_id);
        if picked {
            selected.push(observe(n));
        } else if of_group {
            departed.push(observe(n));
        }
    }
    (selected, departed)
}

fn annotation<'a>(meta: &'a kube::core::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(|s| s.as_str())
}

fn truthy(v: Option<&str>) -> bool {
    matches!(v, Some("true"))
}

/// A node as the planner sees it.
pub fn observed_node(node: &Node, pods: &[&Pod], pdbs: &[PodDisruptionBudget]) -> ObservedNode {
    let meta = &node.metadata;
    // A node is ready for the rotation once the kubelet says Ready *and* its DaemonSet pods
    // (CNI, log shippers, node exporters) are Ready: a new node is no use before its node
    // agents run, and gating right after the kubelet's Ready would sample those agents'
    // start-up as if it were the rotation's damage (and fail a `maxNotReady` pods gate).
    let ready = condition_true(node.status.as_ref().and_then(|s| s.conditions.as_ref()))
        && pods.iter().all(|p| !daemon_pod_starting(p));
    ObservedNode {
        name: meta.name.clone().unwrap_or_default(),
        provider_id: node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default(),
        image_label: meta
            .labels
            .as_ref()
            .and_then(|l| l.get(IMAGE_LABEL).cloned()),
        ready,
        cordoned: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        cordoned_by: annotation(meta, CORDONED_BY).map(String::from),
        do_not_disrupt: truthy(annotation(meta, DO_NOT_DISRUPT)),
        scale_down_disabled: truthy(annotation(meta, SCALE_DOWN_DISABLED)),
        pods: pods.iter().filter_map(|p| observed_pod(p, pdbs)).collect(),
    }
}

fn condition_true(conditions: Option<&Vec<k8s_openapi::api::core::v1::NodeCondition>>) -> bool {
    conditions.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A live DaemonSet pod that is not Ready yet.
fn daemon_pod_starting(pod: &Pod) -> bool {
    let daemon = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    let status = pod.status.as_ref();
    let finished = matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    );
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    daemon && !finished && pod.metadata.deletion_timestamp.is_none() && !ready
}

/// A pod as a drain sees it; `None` for pods that have finished (they hold nothing).
pub fn observed_pod(pod: &Pod, pdbs: &[PodDisruptionBudget]) -> Option<ObservedPod> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return None;
    }
    let meta = &pod.metadata;
    let kind = if annotation(meta, MIRROR).is_some() {
        PodKind::Mirror
    } else if meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
    {
        PodKind::DaemonSet
    } else {
        PodKind::Workload
    };
    let namespace = meta.namespace.clone().unwrap_or_default();
    let labels = meta.labels.clone().unwrap_or_default();
    let covering: Vec<&PodDisruptionBudget> = pdbs
        .iter()
        .filter(|b| b.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|b| {
            b.spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .and_then(|sel| Selector::try_from(sel).ok())
                // An empty selector matches every pod of the namespace (policy/v1).
                .is_some_and(|sel| sel.matches(&labels))
        })
        .collect();
    let pdb = covering.first().map(|b| PdbRef {
        namespace: namespace.clone(),
        name: b.metadata.name.clone().unwrap_or_default(),
        disruptions_allowed: b
            .status
            .as_ref()
            .map_or(0, |s| u32::try_from(s.disruptions_allowed).unwrap_or(0)),
    });
    Some(ObservedPod {
        namespace,
        name: meta.name.clone().unwrap_or_default(),
        kind,
        do_not_disrupt: truthy(annotation(meta, DO_NOT_DISRUPT)),
        uses_empty_dir: pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|vs| vs.iter().any(|v| v.empty_dir.is_some())),
        terminating: meta.deletion_timestamp.is_some(),
        pdb,
        pdb_count: covering.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn pdbs() -> Vec<PodDisruptionBudget> {
        vec![
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "app"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2},
                "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
                           "expectedPods": 3}
            }))
            .unwrap(),
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "other"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                           "expectedPods": 0}
            }))
            .unwrap(),
        ]
    }

    #[test]
    fn pods_are_classified_and_matched_to_their_pdb() {
        let web = pod(json!({
            "metadata": {"name": "web-1", "namespace": "app", "labels": {"app": "web"},
                         "annotations": {"rota.dev/do-not-disrupt": "true"}},
            "spec": {"containers": [], "volumes": [{"name": "scratch", "emptyDir": {}}]},
            "status": {"phase": "Running"}
        }));
        let p = observed_pod(&web, &pdbs()).unwrap();
        assert_eq!(p.kind, PodKind::Workload);
        assert!(p.do_not_disrupt && p.uses_empty_dir && !p.terminating);
        assert_eq!(
            p.pdb,
            Some(PdbRef {
                namespace: "app".into(),
                name: "web".into(),
                disruptions_allowed: 1
            })
        );
        let ds = pod(json!({
            "metadata": {"name": "ds-1", "namespace": "kube-system",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": "node-exporter", "uid": "u"}]},
            "spec": {"containers": []}
        }));
        assert_eq!(observed_pod(&ds, &pdbs()).unwrap().kind, PodKind::DaemonSet);
        let mirror = pod(json!({
            "metadata": {"name": "etcd", "namespace": "kube-system",
                         "annotations": {"kubernetes.io/config.mirror": "abc"}},
            "spec": {"containers": []}
        }));
        assert_eq!(
            observed_pod(&mirror, &pdbs()).unwrap().kind,
            PodKind::Mirror
        );
        let done = pod(json!({
            "metadata": {"name": "job-1", "namespace": "app"},
            "spec": {"containers": []}, "status": {"phase": "Succeeded"}
        }));
        assert!(observed_pod(&done, &pdbs()).is_none());
    }

    #[test]
    fn a_pod_under_two_pdbs_is_counted_as_such() {
        let mut both = pdbs();
        both.push(
            serde_json::from_value(json!({
                "metadata": {"name": "all", "namespace": "app"},
                "spec": {"selector": {"matchLabels": {"tier": "front"}}, "maxUnavailable": 1},
                "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
                           "expectedPods": 3}
            }))
            .unwrap(),
        );
        let web = pod(json!({
            "metadata": {"name": "web-1", "namespace": "app",
                         "labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": []}
        }));
        assert_eq!(observed_pod(&web, &pdbs()).unwrap().pdb_count, 1);
        assert_eq!(observed_pod(&web, &both).unwrap().pdb_count, 2);
    }

    #[test]
    fn nodes_of_the_group_that_left_the_selector_are_kept_apart() {
        let node = |name: &str, pool: &str, id: &str| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"rota.dev/pool": pool}},
                "spec": {"providerID": format!("aws:///us-east-1a/{id}")}
            }))
            .unwrap()
        };
        let nodes = [
            node("a", "general", "i-a"),
            node("b", "gpu", "i-b"),
            node("c", "gpu", "i-c"),
        ];
        let selector: Selector = [("rota.dev/pool".to_string(), "general".to_string())]
            .into_iter()
            .collect();
        let inst = |id: &str| crate::cloud::Instance {
            id: id.into(),
            provider_id: format!("aws:///us-east-1a/{id}"),
            image: "ami-1".into(),
            zone: "us-east-1a".into(),
            lifecycle: crate::cloud::Lifecycle::InService,
        };
        let group = crate::cloud::GroupState {
            group: crate::cloud::GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "general".into(),
            },
            desired: 2,
            min: 0,
            max: 2,
            template_image: "ami-1".into(),
            instances: vec![inst("i-a"), inst("i-b")],
        };
        let (selected, departed) =
            pool_nodes(&nodes, &selector, &group, |n| observed_node(n, &[], &[]));
        let names = |v: &[ObservedNode]| v.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&selected), ["a"]);
        // b lost the pool's label but its instance is the group's; c is another pool's.
        assert_eq!(names(&departed), ["b"]);
    }

    #[test]
    fn nodes_carry_readiness_cordon_and_annotations() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "ip-10-0-0-1", "labels": {"rota.dev/image": "ami-1"},
                         "annotations": {"rota.dev/cordoned-by": "general/batch-2",
                                         "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}},
            "spec": {"providerID": "aws:///us-east-1a/i-1", "unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let n = observed_node(&node, &[], &[]);
        assert_eq!(n.provider_id, "aws:///us-east-1a/i-1");
        assert!(n.ready && n.cordoned && n.scale_down_disabled && !n.do_not_disrupt);
        assert_eq!(n.cordoned_by.as_deref(), Some("general/batch-2"));
        assert_eq!(n.image_label.as_deref(), Some("ami-1"));
    }

    #[test]
    fn a_node_is_ready_only_once_its_daemonset_pods_are() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "ip-10-0-0-2"},
            "spec": {"providerID": "aws:///us-east-1a/i-2"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let ds = |ready: &str| {
            pod(json!({
                "metadata": {"name": "log-shipper-x", "namespace": "logging",
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                  "name": "log-shipper", "uid": "u"}]},
                "spec": {"containers": []},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": ready}]}
            }))
        };
        let workload_starting = pod(json!({
            "metadata": {"name": "web-1", "namespace": "app"},
            "spec": {"containers": []},
            "status": {"phase": "Pending"}
        }));
        let (starting, running) = (ds("False"), ds("True"));
        assert!(!observed_node(&node, &[&starting], &[]).ready);
        assert!(observed_node(&node, &[&running], &[]).ready);
        // Only node agents hold a node back: a workload pod starting on it does not.
        assert!(observed_node(&node, &[&running, &workload_starting], &[]).ready);
    }
}
