//! Reading one pool: its nodes, the pods on them and the PodDisruptionBudgets that cover
//! those pods, turned into `rotate::Observed`.
//!
//! Kubernetes objects are first trimmed to summaries ([`NodeSummary`], [`PodSummary`],
//! [`PdbSummary`]: what the decisions read and nothing more) as the watches of
//! `kube::index` deliver them; [`pool_nodes`] is then a synchronous, pure read of that index.
//! A kind the index has not observed (not listed yet, or its watch failing) makes the pool
//! not observed: an error, never an empty pool. The cloud group's `describe` is the only
//! call [`observe`] makes; [`observe_with`] makes none (the group is given).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kube::core::SelectorExt;

use crate::cloud::{CloudError, NodeGroups};
use crate::kube::index::{ClusterIndex, NotObserved, PodKey, State};
use crate::kube::projection::PodProjection;
use crate::kube::summary::{Interner, NodeSummary, PdbSummary, PodSummary};
use rota_core::errors::{Classified, Classify};
use rota_core::fleet::resolved::DesiredPool;
use rota_core::rotate::{GateVerdict, Observed, ObservedNode, ObservedPod, PdbRef, PodKind};

/// Node label naming the image a node booted, for clouds where no instance matches it.
pub const IMAGE_LABEL: &str = "rota.dev/image";

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The index cannot answer for nodes, pods or PDBs yet: nothing is planned.
    #[error(transparent)]
    NotObserved(#[from] NotObserved),
    #[error(transparent)]
    Cloud(#[from] CloudError),
}

impl Classify for ObserveError {
    fn classify(&self) -> Classified {
        match self {
            ObserveError::NotObserved(n) => n.classify(),
            ObserveError::Cloud(e) => e.classify(),
        }
    }
}

/// Read one pool: the group from its cloud, nodes by the pool's selector with their pods and
/// PDBs from the index. The gates' verdict comes from the gates framework, the start hold
/// from `rotate::parallel::admit` over the cluster's pools.
pub async fn observe(
    index: &ClusterIndex,
    groups: &dyn NodeGroups,
    desired: &DesiredPool,
    gates: GateVerdict,
    start_hold: Option<String>,
) -> Result<Observed, ObserveError> {
    // The index first: a pool that cannot be observed costs no cloud call. Only whether it
    // can be: the pool's nodes are read after the describe (building them here as well
    // built every node and pod of the pool twice a pass, and threw the first away).
    index.read().observed()?;
    // A managed pool is not a group of the `NodeGroups` clouds: it is not described (the
    // planner reports it, see `rotate::plan`); its nodes are read from the index alone.
    if desired.group.managed().is_some() {
        let group = crate::cloud::GroupState {
            group: desired.group.clone(),
            desired: 0,
            min: 0,
            max: 0,
            template_image: String::new(),
            instances: Vec::new(),
        };
        return Ok(observe_with(index, group, desired, gates, start_hold)?);
    }
    let group = groups.describe(&desired.group).await?;
    Ok(observe_with(index, group, desired, gates, start_hold)?)
}

/// [`observe`] with a group already described (the controller reuses a describe where it is
/// safe, see `controller::Described`): the index is read now, the group is as given.
pub fn observe_with(
    index: &ClusterIndex,
    group: crate::cloud::GroupState,
    desired: &DesiredPool,
    gates: GateVerdict,
    start_hold: Option<String>,
) -> Result<Observed, NotObserved> {
    // Read after the describe so nodes are at least as new as the group. Nodes of the
    // group that left the selector mid-rotation are kept apart: they are still drained
    // before their instance is terminated.
    let (selected, departed) =
        pool_and_departed_nodes(&index.read(), &desired.node_selector, &group)?;
    Ok(Observed {
        group,
        nodes: selected,
        departed,
        gates,
        start_hold,
        // The controller checks the image where it matters (`Controller::image_hold`).
        image_hold: None,
        // And the control plane's version (`Controller::control_plane`), before a surge.
        control_plane: None,
        // The controller sets its `--describe-lag` and `--no-cluster-autoscaler`.
        describe_lag: std::time::Duration::ZERO,
        cluster_autoscaler: true,
        leading_since: None,
        owner: None,
        drift: None,
        pools: Vec::new(),
        refused: None,
    })
}

/// The nodes a pool's selector picks, with their pods and PDBs (pure read of the index).
pub fn pool_nodes(
    index: &State,
    selector: &BTreeMap<String, String>,
) -> Result<Vec<ObservedNode>, NotObserved> {
    index.observed()?;
    let pdbs: Vec<&PdbSummary> = index.pdbs().collect();
    let mut nodes: Vec<ObservedNode> = index
        .nodes_matching(selector)
        .map(|(n, pods)| observed_node(n, &pods, &pdbs))
        .collect();
    // Name order, as a list would return them: plans (and golden logs) stay deterministic.
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(nodes)
}

/// Which side of a pool a node stands on: `Some(true)` when the selector picks it,
/// `Some(false)` when it has departed (it backs an instance of the group but the selector no
/// longer picks it: a commit changed `nodeSelector`, a label was removed), `None` when it is
/// none of the pool's business.
pub fn pool_side(
    node: &NodeSummary,
    selector: &BTreeMap<String, String>,
    group: &crate::cloud::GroupState,
) -> Option<bool> {
    side_of(node, selector, &GroupInstances::of(group))
}

/// The provider IDs of a group's instances, looked up by hash: a pass asks once for every
/// node of the cluster, and a scan of the group for each (20,000 nodes against a group of
/// 2,000) was 40 million string comparisons a pool a pass.
struct GroupInstances<'a>(HashSet<&'a str>);

impl<'a> GroupInstances<'a> {
    fn of(group: &'a crate::cloud::GroupState) -> Self {
        GroupInstances(
            group
                .instances
                .iter()
                .map(|i| i.provider_id.as_str())
                .collect(),
        )
    }
}

fn side_of(
    node: &NodeSummary,
    selector: &BTreeMap<String, String>,
    group: &GroupInstances<'_>,
) -> Option<bool> {
    if node.labels.matches(selector) {
        Some(true)
    } else if group.0.contains(node.provider_id.as_str()) {
        Some(false)
    } else {
        None
    }
}

/// The pool's nodes and its departed ones ([`pool_side`]), with their pods and PDBs (pure
/// read of the index), each in name order.
pub fn pool_and_departed_nodes(
    index: &State,
    selector: &BTreeMap<String, String>,
    group: &crate::cloud::GroupState,
) -> Result<(Vec<ObservedNode>, Vec<ObservedNode>), NotObserved> {
    index.observed()?;
    let pdbs: Vec<&PdbSummary> = index.pdbs().collect();
    let (mut selected, mut departed) = (Vec::new(), Vec::new());
    let instances = GroupInstances::of(group);
    for n in index.all_nodes() {
        match side_of(n, selector, &instances) {
            Some(true) => selected.push(observed_node(n, &index.pods_on(&n.name), &pdbs)),
            Some(false) => departed.push(observed_node(n, &index.pods_on(&n.name), &pdbs)),
            None => {}
        }
    }
    selected.sort_by(|a, b| a.name.cmp(&b.name));
    departed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((selected, departed))
}

/// The image a node says it runs: rota's `rota.dev/image` label, else a managed pool's
/// owner's label (EKS: `eks.amazonaws.com/nodegroup-image`, AKS:
/// `kubernetes.azure.com/node-image-version`), else, on GKE, the kubelet's version and the
/// image type's labels. A managed pool's progress, its adoption and the ledger's lives of its
/// nodes are all read from it.
pub fn node_image(node: &NodeSummary) -> Option<String> {
    node.labels
        .get(IMAGE_LABEL)
        .or_else(|| {
            rota_core::cloud::managed::OWNER_IMAGE_LABELS
                .iter()
                .find_map(|l| node.labels.get(l))
        })
        .cloned()
        .or_else(|| {
            use rota_core::cloud::managed as owned;
            // The core reads a map: only a GKE node's three labels make one.
            node.labels.get(owned::GKE_NODEPOOL_LABEL)?;
            let labels = node.labels.only(&[
                owned::GKE_NODEPOOL_LABEL,
                owned::GKE_OS_DISTRIBUTION_LABEL,
                owned::GKE_CONTAINER_RUNTIME_LABEL,
            ]);
            owned::gke_node_image(&labels, node.kubelet_version.as_deref())
        })
}

/// A node as the planner sees it.
pub fn observed_node(
    node: &NodeSummary,
    pods: &[(&PodKey, &PodSummary)],
    pdbs: &[&PdbSummary],
) -> ObservedNode {
    // A node is ready for the rotation once the kubelet says Ready *and* its DaemonSet pods
    // (CNI, log shippers, node exporters) are Ready: a new node is no use before its node
    // agents run, and gating right after the kubelet's Ready would sample those agents'
    // start-up as if it were the rotation's damage (and fail a `maxNotReady` pods gate).
    let ready = node.kubelet_ready && pods.iter().all(|(_, p)| !p.daemon_starting());
    let mut pods: Vec<ObservedPod> = pods
        .iter()
        .filter_map(|(k, p)| observed_pod(k, p, pdbs))
        .collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    ObservedNode {
        name: node.name.clone(),
        provider_id: node.provider_id.clone(),
        image_label: node_image(node),
        ready,
        cordoned: node.cordoned,
        cordoned_by: node.cordoned_by.clone(),
        do_not_disrupt: node.do_not_disrupt,
        scale_down_disabled: node.scale_down_disabled,
        pods,
    }
}

/// A pod as a drain sees it; `None` for pods that have finished (they hold nothing).
pub fn observed_pod(key: &PodKey, pod: &PodSummary, pdbs: &[&PdbSummary]) -> Option<ObservedPod> {
    if pod.finished() {
        return None;
    }
    let kind = if pod.mirror {
        PodKind::Mirror
    } else if pod.daemon_set {
        PodKind::DaemonSet
    } else {
        PodKind::Workload
    };
    let namespace = key.0.clone();
    // Every PDB that covers the pod: the Eviction API refuses (500) a pod under more than one.
    let covering: Vec<&&PdbSummary> = pdbs
        .iter()
        .filter(|b| b.namespace == namespace)
        // An empty selector matches every pod of the namespace (policy/v1).
        .filter(|b| b.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)))
        .collect();
    let pdb = covering.first().map(|b| PdbRef {
        namespace: namespace.clone(),
        name: b.name.clone(),
        disruptions_allowed: b.disruptions_allowed,
    });
    Some(ObservedPod {
        namespace,
        name: key.1.clone(),
        kind,
        do_not_disrupt: pod.do_not_disrupt,
        uses_empty_dir: pod.uses_empty_dir,
        terminating: pod.terminating,
        pdb,
        pdb_count: covering.len() as u32,
    })
}

/// The pods on `node` that still hold it, from a fresh read (`fieldSelector=spec.nodeName`)
/// made right before it is terminated: the same rule the planner applies to the index
/// ([`ObservedPod::must_evict`]), so invariant 3 never rests on a stale cache.
///
/// With `kubelet_ready` false, pods already terminating do not hold the node: a dead kubelet
/// never finishes their shutdown (`ObservedNode::blocking_termination`).
pub fn pods_holding(pods: &[PodProjection], kubelet_ready: bool) -> Vec<String> {
    let mut interner = Interner::default();
    pods.iter()
        .filter_map(|p| {
            let key: PodKey = (
                Arc::from(p.metadata.namespace.as_deref().unwrap_or_default()),
                Arc::from(p.metadata.name.as_deref().unwrap_or_default()),
            );
            let s = PodSummary::from_pod(p, &mut interner);
            observed_pod(&key, &s, &[])
                .filter(|o| o.must_evict() && (kubelet_ready || !o.terminating))
        })
        .map(|o| o.key())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::core::ObjectMeta;

    use crate::kube::summary::do_not_disrupt;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    /// A pod through the index's trimming, as the planner sees it.
    fn op(p: &Pod, pdbs: &[PodDisruptionBudget]) -> Option<ObservedPod> {
        let pdbs: Vec<PdbSummary> = pdbs.iter().map(PdbSummary::from_pdb).collect();
        let refs: Vec<&PdbSummary> = pdbs.iter().collect();
        let key: PodKey = (
            Arc::from(p.metadata.namespace.as_deref().unwrap_or_default()),
            Arc::from(p.metadata.name.as_deref().unwrap_or_default()),
        );
        observed_pod(
            &key,
            &PodSummary::from_pod(&p.into(), &mut Interner::default()),
            &refs,
        )
    }

    /// A full node through the index's decoding and trimming.
    fn summary(node: &Node) -> NodeSummary {
        NodeSummary::from_node(&node.into(), &mut Interner::default())
    }

    fn on(node: &Node, pods: &[&Pod]) -> ObservedNode {
        let mut i = Interner::default();
        let owned: Vec<(PodKey, PodSummary)> = pods
            .iter()
            .map(|p| {
                let key: PodKey = (
                    Arc::from(p.metadata.namespace.as_deref().unwrap_or_default()),
                    Arc::from(p.metadata.name.as_deref().unwrap_or_default()),
                );
                (key, PodSummary::from_pod(&(*p).into(), &mut i))
            })
            .collect();
        let refs: Vec<(&PodKey, &PodSummary)> = owned.iter().map(|(k, s)| (k, s)).collect();
        observed_node(&summary(node), &refs, &[])
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
        let p = op(&web, &pdbs()).unwrap();
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
        assert_eq!(op(&ds, &pdbs()).unwrap().kind, PodKind::DaemonSet);
        let mirror = pod(json!({
            "metadata": {"name": "etcd", "namespace": "kube-system",
                         "annotations": {"kubernetes.io/config.mirror": "abc"}},
            "spec": {"containers": []}
        }));
        assert_eq!(op(&mirror, &pdbs()).unwrap().kind, PodKind::Mirror);
        let done = pod(json!({
            "metadata": {"name": "job-1", "namespace": "app"},
            "spec": {"containers": []}, "status": {"phase": "Succeeded"}
        }));
        assert!(op(&done, &pdbs()).is_none());
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
        assert_eq!(op(&web, &pdbs()).unwrap().pdb_count, 1);
        assert_eq!(op(&web, &both).unwrap().pdb_count, 2);
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
        let selector: BTreeMap<String, String> =
            [("rota.dev/pool".to_string(), "general".to_string())].into();
        let inst = |id: &str| crate::cloud::Instance {
            id: id.into(),
            provider_id: format!("aws:///us-east-1a/{id}"),
            image: "ami-1".into(),
            zone: "us-east-1a".into(),
            lifecycle: crate::cloud::Lifecycle::InService,
            launch_error: None,
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
        let side = |n: &Node| pool_side(&summary(n), &selector, &group);
        assert_eq!(side(&nodes[0]), Some(true));
        // b lost the pool's label but its instance is the group's; c is another pool's.
        assert_eq!(side(&nodes[1]), Some(false));
        assert_eq!(side(&nodes[2]), None);
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
        let n = on(&node, &[]);
        assert_eq!(n.provider_id, "aws:///us-east-1a/i-1");
        assert!(n.ready && n.cordoned && n.scale_down_disabled && !n.do_not_disrupt);
        assert_eq!(n.cordoned_by.as_deref(), Some("general/batch-2"));
        assert_eq!(n.image_label.as_deref(), Some("ami-1"));
    }

    /// EKS's taint on a node its update will replace is the owner's cordon (the ledger's
    /// `drained`), not rota's: `spec.unschedulable` and rota's own fields stay as they are.
    #[test]
    fn eks_taint_on_a_node_it_replaces_is_its_owners_cordon() {
        let tainted = |key: &str, value: &str| -> NodeSummary {
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": "ip-10-0-0-2"},
                "spec": {"taints": [{"key": key, "value": value, "effect": "NoSchedule"}]}
            }))
            .unwrap();
            let p = crate::kube::node_projection::NodeProjection::from(&node);
            NodeSummary::from_node(&p, &mut crate::kube::summary::Interner::default())
        };
        let eks = tainted("eks.amazonaws.com/nodegroup", "unschedulable");
        assert!(eks.owner_unschedulable && !eks.cordoned);
        let other = tainted("dedicated", "unschedulable");
        assert!(!other.owner_unschedulable);
    }

    /// A managed node's image as each owner shows it: AKS's node image label; GKE's kubelet
    /// version and image type labels (no label carries a GKE node version).
    #[test]
    fn gke_and_aks_nodes_carry_their_image_as_their_owner_labels_them() {
        let aks: Node = serde_json::from_value(json!({
            "metadata": {"name": "aks-general-12345678-vmss000000", "labels": {
                "kubernetes.azure.com/agentpool": "general",
                "kubernetes.azure.com/node-image-version": "AKSUbuntu-2204gen2containerd-202611.02.0"}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.31.5", "architecture": "amd64",
                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""}}
        }))
        .unwrap();
        assert_eq!(
            on(&aks, &[]).image_label.as_deref(),
            Some("AKSUbuntu-2204gen2containerd-202611.02.0")
        );
        let gke: Node = serde_json::from_value(json!({
            "metadata": {"name": "gke-prod-general-1a2b3c4d-x1y2", "labels": {
                "cloud.google.com/gke-nodepool": "general",
                "cloud.google.com/gke-os-distribution": "cos",
                "cloud.google.com/gke-container-runtime": "containerd"}},
            "status": {"nodeInfo": {"kubeletVersion": "v1.31.5-gke.1023000", "architecture": "amd64",
                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""}}
        }))
        .unwrap();
        assert_eq!(
            on(&gke, &[]).image_label.as_deref(),
            Some("1.31.5-gke.1023000/COS_CONTAINERD")
        );
    }

    #[test]
    fn karpenters_do_not_disrupt_is_honoured_on_pods_and_nodes() {
        let with = |key: &str, value: &str| json!({key: value});
        for (annotations, opted_out) in [
            (with("karpenter.sh/do-not-disrupt", "true"), true),
            (with("rota.dev/do-not-disrupt", "true"), true),
            (with("karpenter.sh/do-not-disrupt", "false"), false),
            (json!({}), false),
        ] {
            // Pods and nodes are both summarised through the one function.
            let meta: ObjectMeta =
                serde_json::from_value(json!({"name": "x", "annotations": annotations})).unwrap();
            assert_eq!(do_not_disrupt(&meta), opted_out, "{annotations}");
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": "n1", "annotations": annotations},
                "spec": {"providerID": "aws:///us-east-1a/i-1"}
            }))
            .unwrap();
            let n = observed_node(&summary(&node), &[], &[]);
            assert_eq!(n.do_not_disrupt, opted_out, "node {annotations}");
            assert_eq!(n.disruption_blocker().is_some(), opted_out);
        }
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
        assert!(!on(&node, &[&starting]).ready);
        assert!(on(&node, &[&running]).ready);
        // Only node agents hold a node back: a workload pod starting on it does not.
        assert!(on(&node, &[&running, &workload_starting]).ready);
    }
}
