//! What the ledger reads of a managed pool's nodes (an EKS managed node group, a GKE node
//! pool, an AKS agent pool, a Karpenter NodePool): their images come from what the owner
//! reports, not from a group rota describes. The owners label their nodes with the image
//! (EKS `eks.amazonaws.com/nodegroup-image`, AKS `kubernetes.azure.com/node-image-version`,
//! GKE's kubelet version and image type labels: `kube::observe::node_image`, the planner's
//! reading); Karpenter labels none, its NodeClaims carry the AMI (`status.imageID`).
//!
//! A `managedUpdate: blueGreen` pool's nodes live in two of the owner's pools during a move
//! and in the twin after it: the ledger follows the pools the checkpoint names, as the
//! controller observes them (`controller::owner_pools`).

use std::collections::{BTreeMap, HashMap};

use rota_core::cloud::karpenter::DriftPools;
use rota_core::cloud::managed::pool_label;
use rota_core::fleet::owner::Owner;

use crate::kube::crd::NodePoolRotation;

/// The node selectors of a pool's nodes: its own, and for a blue-green move the same with
/// the owner's pool label naming each pool of the move (the pool moved from, its twin).
pub fn selectors(npr: &NodePoolRotation) -> Vec<BTreeMap<String, String>> {
    let own = &npr.spec.node_selector;
    let mut out = vec![own.clone()];
    let label = npr
        .spec
        .group
        .managed()
        .and_then(|m| pool_label(m.owner()))
        .filter(|l| own.contains_key(*l));
    let mark = npr
        .status
        .as_ref()
        .and_then(|s| s.checkpoint.as_ref())
        .and_then(|c| c.blue_green.as_ref());
    if let (Some(label), Some(m)) = (label, mark) {
        for name in [&m.old_pool, &m.twin_pool] {
            let mut s = own.clone();
            s.insert(label.to_string(), name.clone());
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    out
}

/// Whether the pool's nodes carry no image label and their NodeClaims must be read.
pub fn is_karpenter(npr: &NodePoolRotation) -> bool {
    npr.spec.group.owner() == Owner::KarpenterNodePool
}

/// The image of each node of the Karpenter pools `pools` (by node name), from their
/// NodeClaims; a pool that cannot be read now is left for the next pass.
pub async fn karpenter_images(
    drift: &dyn DriftPools,
    pools: &[rota_core::cloud::GroupRef],
) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for g in pools {
        let Some(m) = g.managed() else { continue };
        match drift.describe(m).await {
            Ok(state) => {
                for c in state.claims {
                    if let (Some(node), Some(image)) = (c.node, c.image) {
                        out.insert(node, image);
                    }
                }
            }
            Err(e) => {
                tracing::debug!(pool = %m, error = %e, "ledger: reading Karpenter's NodeClaims")
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::crd::NodePoolRotationSpec;
    use rota_core::cloud::GroupRef;
    use rota_core::fleet::owner::ManagedGroup;

    fn npr(
        group: GroupRef,
        selector: &[(&str, &str)],
        mark: Option<(&str, &str)>,
    ) -> NodePoolRotation {
        let mut v = serde_json::json!({
            "cluster": "c", "pool": "general", "group": group,
            "nodeSelector": selector.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            "channel": "general", "version": "2", "image": "ami-2", "sourceCommit": "abc",
        });
        v["policy"] = serde_json::to_value(rota_core::fleet::resolved::EffectivePolicy::default())
            .unwrap_or_default();
        let spec: NodePoolRotationSpec = serde_json::from_value(v).unwrap();
        let mut n = NodePoolRotation::new("general", spec);
        if let Some((old, twin)) = mark {
            n.status = Some(
                serde_json::from_value(serde_json::json!({
                    "phase": "Rotating",
                    "checkpoint": {
                        "originImage": "ami-1", "targetImage": "ami-2", "targetVersion": "2",
                        "originalDesired": 2, "originalMax": 2, "poolSize": 2, "batchesStarted": 1,
                        "stage": {"name": "between"},
                        "blueGreen": {"oldPool": old, "twinPool": twin, "step": "moving"},
                    },
                }))
                .unwrap(),
            );
        }
        n
    }

    /// A blue-green move's nodes are followed into its twin by the owner's pool label; a
    /// pool without a move, or a self-managed one, keeps its own selector only.
    #[test]
    fn a_blue_green_moves_nodes_are_read_in_both_of_its_pools() {
        let eks = GroupRef::Managed(ManagedGroup::EksNodegroup {
            region: "us-east-1".into(),
            eks_cluster: "c".into(),
            nodegroup: "general".into(),
        });
        let label = "eks.amazonaws.com/nodegroup";
        let moving = npr(
            eks.clone(),
            &[(label, "general")],
            Some(("general", "general-rota-2")),
        );
        let names: Vec<String> = selectors(&moving)
            .iter()
            .map(|s| s[label].clone())
            .collect();
        assert_eq!(names, ["general", "general-rota-2"]);
        assert_eq!(selectors(&npr(eks, &[(label, "general")], None)).len(), 1);
        let asg = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "g".into(),
        };
        let own = npr(
            asg,
            &[("rota.dev/pool", "general")],
            Some(("general", "general-rota-2")),
        );
        assert_eq!(selectors(&own).len(), 1);
        assert!(!is_karpenter(&own));
    }
}
