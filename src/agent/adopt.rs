//! Adoption: the first day of rota on a fleet that already runs. A pool the agent meets for
//! the first time (it has no NodePoolRotation yet) whose every node, every live instance of
//! its group and the group's template already run the image its wave pins is recorded as on
//! that version: a completion of kind `adopted` (`waves::CompletionKind`), distinct from a
//! rotation rota carried out. The pool's NodePoolRotation is then created on the pin even with
//! the promotion guard on (there is nothing to start), and the guards of later waves count the
//! adoption as done.
//!
//! Worked example: wave `early` pins `gpu@2026.10.3`, which its pools have run for months;
//! the canary has moved on to `2026.11.1` and will never complete 2026.10.3. Without adoption,
//! early's pools wait for the canary forever and get no NodePoolRotation; with it, each is
//! observed on 2026.10.3 and adopted.
//!
//! A managed pool (an EKS managed node group, a GKE node pool, an AKS agent pool, a
//! Karpenter NodePool) is adopted the same way, read through its owner instead of a group
//! rota describes: the image the owner makes new nodes of (the node group's launch template
//! AMI, the node pool's version and image type, the agent pool's node image, the one AMI the
//! NodeClass pins) must be the pin, no update of the owner may be under way (nor a NodeClaim
//! booting or being disrupted), and every node must carry the pin in the label its owner
//! sets (Karpenter's: its NodeClaim's `imageID`). [`judge_managed`] decides,
//! [`observe_managed`] reads.
//!
//! [`judge`] decides (pure); [`observe`] reads the pool's nodes and group.

use kube::api::{Api, ListParams};
use kube::core::Selector;

use crate::cloud::{CloudError, GroupState, Lifecycle, NodeGroups};
use crate::controller::owners::Owners;
use crate::kube::node_projection::NodeProjection;
use crate::kube::observe::{IMAGE_LABEL, node_image};
use crate::kube::summary::{Interner, NodeSummary};
use rota_core::cloud::karpenter::{DriftPoolState, DriftPools};
use rota_core::cloud::managed::{OwnerPoolState, same_image};
use rota_core::fleet::resolved::DesiredPool;

/// Whether a pool may be adopted on an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every one of `nodes` nodes (and every live instance, and the template) runs the image.
    OnPin { nodes: usize },
    /// Not (or not provably) on the image, and why.
    Not(String),
}

#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error("listing the pool's nodes: {0}")]
    Kube(#[from] kube::Error),
    #[error("describing the pool's group: {0}")]
    Cloud(#[from] CloudError),
}

/// A node as adoption sees it: its providerID and the image label it may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImage {
    pub name: String,
    pub provider_id: String,
    pub image_label: Option<String>,
}

/// Decides whether the pool runs `image` everywhere. A node's image is its instance's (by
/// providerID), else its `rota.dev/image` label, as the planner reads it; a node whose image
/// cannot be told, an empty pool, or a template of another image is not adopted: adoption
/// must never declare done what only looks done.
pub fn judge(group: &GroupState, nodes: &[NodeImage], image: &str) -> Verdict {
    if nodes.is_empty() {
        return Verdict::Not("no node matches the pool's node selector".into());
    }
    if group.template_image != image {
        return Verdict::Not(format!("its group makes nodes of {}", group.template_image));
    }
    let live = || {
        group
            .instances
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
    };
    if let Some(i) = live().find(|i| i.image != image) {
        return Verdict::Not(format!("instance {} runs {}", i.id, i.image));
    }
    for n in nodes {
        let runs = live()
            .find(|i| i.provider_id == n.provider_id)
            .map(|i| i.image.clone())
            .or_else(|| n.image_label.clone());
        match runs {
            Some(i) if i == image => {}
            Some(i) => return Verdict::Not(format!("node {} runs {i}", n.name)),
            None => {
                return Verdict::Not(format!(
                    "node {} has no instance in the group and no {IMAGE_LABEL} label",
                    n.name
                ));
            }
        }
    }
    Verdict::OnPin { nodes: nodes.len() }
}

/// Reads the pool's group from its cloud and its nodes by the pool's selector.
pub async fn observe(
    client: &kube::Client,
    groups: &dyn NodeGroups,
    pool: &DesiredPool,
) -> Result<(GroupState, Vec<NodeImage>), AdoptError> {
    let group = groups.describe(&pool.group).await?;
    Ok((group, nodes_of(client, pool).await?))
}

/// The pool's nodes by its selector, each with the image its labels say (as the planner
/// reads them: [`node_image`]).
async fn nodes_of(client: &kube::Client, pool: &DesiredPool) -> Result<Vec<NodeImage>, AdoptError> {
    let selector: Selector = pool.node_selector.clone().into_iter().collect();
    // Decoded as the index decodes them (`NodeProjection`): the pool's whole list is one
    // answer, and its Node objects' images and conditions are not read.
    let nodes = Api::<NodeProjection>::all(client.clone())
        .list(&ListParams::default().labels_from(&selector))
        .await?;
    let mut interner = Interner::default();
    Ok(nodes
        .items
        .iter()
        .map(|n| {
            let summary = NodeSummary::from_node(n, &mut interner);
            NodeImage {
                image_label: node_image(&summary),
                name: summary.name,
                provider_id: summary.provider_id,
            }
        })
        .collect())
}

/// A managed pool as its owner describes it, for adoption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerView {
    /// The image the owner makes new nodes of; `None` when it names none rota can compare
    /// (a NodeClass that selects its AMIs by alias or tags).
    pub template_image: Option<String>,
    /// Why the pool is not settled, if it is not: an update of the owner under way, a
    /// NodeClaim booting or being disrupted.
    pub unsettled: Option<String>,
}

impl OwnerView {
    /// An EKS node group's, a GKE node pool's or an AKS agent pool's state.
    pub fn of_owner(state: &OwnerPoolState) -> OwnerView {
        OwnerView {
            template_image: Some(state.image.clone()),
            unsettled: state
                .update
                .as_ref()
                .filter(|_| state.updating())
                .map(|u| format!("its owner's update {} to {} is under way", u.id, u.image)),
        }
    }

    /// A Karpenter NodePool's (the NodeClass's pin and the NodeClaims).
    pub fn of_drift(state: &DriftPoolState) -> OwnerView {
        let unsettled = state.claims.iter().find_map(|c| {
            if c.deleting {
                Some(format!("NodeClaim {} is being disrupted", c.name))
            } else if c.node.is_none() || !c.ready {
                Some(format!("NodeClaim {} is not Ready yet", c.name))
            } else {
                None
            }
        });
        OwnerView {
            template_image: state.pinned().map(str::to_string),
            unsettled,
        }
    }
}

/// Decides whether a managed pool runs `image` everywhere: its owner makes nodes of it, is
/// not replacing any now, and every node carries it in its labels. As for [`judge`], what
/// cannot be told is not adopted.
pub fn judge_managed(owner: &OwnerView, nodes: &[NodeImage], image: &str) -> Verdict {
    if nodes.is_empty() {
        return Verdict::Not("no node matches the pool's node selector".into());
    }
    match &owner.template_image {
        Some(t) if same_image(t, image) => {}
        Some(t) => return Verdict::Not(format!("its owner makes nodes of {t}")),
        None => return Verdict::Not("its owner pins no one image".into()),
    }
    if let Some(why) = &owner.unsettled {
        return Verdict::Not(why.clone());
    }
    for n in nodes {
        match &n.image_label {
            Some(i) if same_image(i, image) => {}
            Some(i) => return Verdict::Not(format!("node {} runs {i}", n.name)),
            None => {
                return Verdict::Not(format!("node {} says no image in its labels", n.name));
            }
        }
    }
    Verdict::OnPin { nodes: nodes.len() }
}

/// Reads a managed pool through its owner (`owners` for EKS, GKE and AKS, `drift` for
/// Karpenter) and its nodes. `Ok(None)`: this agent does not drive the pool's owner (the
/// pool is reported, never adopted).
pub async fn observe_managed(
    client: &kube::Client,
    owners: &Owners,
    drift: &dyn DriftPools,
    pool: &DesiredPool,
) -> Result<Option<(OwnerView, Vec<NodeImage>)>, AdoptError> {
    let Some(managed) = pool.group.managed() else {
        return Ok(None);
    };
    let mut nodes = nodes_of(client, pool).await?;
    let view = if managed.owner() == rota_core::fleet::owner::Owner::KarpenterNodePool {
        let state = drift.describe(managed).await?;
        // Karpenter labels no node with its AMI: its NodeClaim's `imageID` says it.
        for n in &mut nodes {
            if n.image_label.is_none() {
                n.image_label = state.image_of_node(&n.name).map(str::to_string);
            }
        }
        OwnerView::of_drift(&state)
    } else {
        match owners.of(&pool.group) {
            Some(o) => OwnerView::of_owner(&o.describe(managed).await?),
            None => return Ok(None),
        }
    };
    Ok(Some((view, nodes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{GroupRef, Instance};

    const PIN: &str = "ami-0a1b2c3d4e5f60718";
    const OLD: &str = "ami-0f9e8d7c6b5a40312";

    fn instance(id: &str, image: &str, lifecycle: Lifecycle) -> Instance {
        Instance {
            id: id.into(),
            provider_id: format!("aws:///us-east-1a/{id}"),
            image: image.into(),
            zone: "us-east-1a".into(),
            lifecycle,
            launch_error: None,
        }
    }

    fn group(template: &str, instances: Vec<Instance>) -> GroupState {
        GroupState {
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "general".into(),
            },
            desired: instances.len() as u32,
            min: 0,
            max: 10,
            template_image: template.into(),
            instances,
        }
    }

    fn node(id: &str) -> NodeImage {
        NodeImage {
            name: format!("node-{id}"),
            provider_id: format!("aws:///us-east-1a/{id}"),
            image_label: None,
        }
    }

    #[test]
    fn every_node_instance_and_the_template_on_the_pin_is_adopted() {
        let g = group(
            PIN,
            vec![
                instance("i-1", PIN, Lifecycle::InService),
                instance("i-2", PIN, Lifecycle::InService),
                // Leaving: what it ran does not matter.
                instance("i-0", OLD, Lifecycle::Terminating),
            ],
        );
        assert_eq!(
            judge(&g, &[node("i-1"), node("i-2")], PIN),
            Verdict::OnPin { nodes: 2 }
        );
    }

    #[test]
    fn anything_off_the_pin_or_unknown_is_not_adopted_and_says_why() {
        let on = |id| instance(id, PIN, Lifecycle::InService);
        let cases = [
            (group(PIN, vec![on("i-1")]), vec![], "no node matches"),
            (
                group(OLD, vec![on("i-1")]),
                vec![node("i-1")],
                "its group makes nodes of ami-0f9e",
            ),
            (
                group(
                    PIN,
                    vec![on("i-1"), instance("i-2", OLD, Lifecycle::InService)],
                ),
                vec![node("i-1"), node("i-2")],
                "instance i-2 runs ami-0f9e",
            ),
            (
                // Still booting on the old image: not everything is on the pin yet.
                group(
                    PIN,
                    vec![on("i-1"), instance("i-2", OLD, Lifecycle::Pending)],
                ),
                vec![node("i-1")],
                "instance i-2 runs",
            ),
            (
                group(PIN, vec![on("i-1")]),
                vec![node("i-1"), node("i-9")],
                "node node-i-9 has no instance in the group and no rota.dev/image label",
            ),
        ];
        for (g, nodes, want) in cases {
            match judge(&g, &nodes, PIN) {
                Verdict::Not(why) => assert!(why.contains(want), "{why} does not say {want}"),
                v => panic!("{v:?}: want not adopted ({want})"),
            }
        }
        // A node the group does not list is judged by its image label.
        let labelled = NodeImage {
            image_label: Some(PIN.into()),
            ..node("i-9")
        };
        assert_eq!(
            judge(&group(PIN, vec![on("i-1")]), &[node("i-1"), labelled], PIN),
            Verdict::OnPin { nodes: 2 }
        );
    }

    fn labelled(name: &str, image: Option<&str>) -> NodeImage {
        NodeImage {
            name: name.into(),
            provider_id: String::new(),
            image_label: image.map(str::to_string),
        }
    }

    /// A managed pool is adopted from its owner's image and its nodes' labels; an update
    /// under way, a node without an image label or a NodeClass pinning nothing is not.
    #[test]
    fn a_managed_pool_is_adopted_only_when_its_owner_and_every_node_say_the_pin() {
        let settled = |t: Option<&str>| OwnerView {
            template_image: t.map(str::to_string),
            unsettled: None,
        };
        let on = [labelled("n1", Some(PIN)), labelled("n2", Some(PIN))];
        assert_eq!(
            judge_managed(&settled(Some(PIN)), &on, PIN),
            Verdict::OnPin { nodes: 2 }
        );
        // GKE: a target naming only an image type takes any node version of it.
        let gke = [labelled("g1", Some("1.31.5-gke.1023000/COS_CONTAINERD"))];
        assert_eq!(
            judge_managed(
                &settled(Some("1.31.5-gke.1023000/COS_CONTAINERD")),
                &gke,
                "COS_CONTAINERD"
            ),
            Verdict::OnPin { nodes: 1 }
        );
        let updating = OwnerView {
            template_image: Some(PIN.into()),
            unsettled: Some("its owner's update u-1 to x is under way".into()),
        };
        let cases = [
            (settled(Some(PIN)), vec![], "no node matches"),
            (
                settled(Some(OLD)),
                on.to_vec(),
                "its owner makes nodes of ami-0f9e",
            ),
            (settled(None), on.to_vec(), "pins no one image"),
            (updating, on.to_vec(), "update u-1"),
            (
                settled(Some(PIN)),
                vec![labelled("n1", Some(PIN)), labelled("n2", Some(OLD))],
                "node n2 runs ami-0f9e",
            ),
            (
                settled(Some(PIN)),
                vec![labelled("n1", Some(PIN)), labelled("n3", None)],
                "node n3 says no image",
            ),
        ];
        for (owner, nodes, want) in cases {
            match judge_managed(&owner, &nodes, PIN) {
                Verdict::Not(why) => assert!(why.contains(want), "{why} does not say {want}"),
                v => panic!("{v:?}: want not adopted ({want})"),
            }
        }
    }

    /// Karpenter: the NodeClass's one pinned AMI, every NodeClaim Ready and not disrupted.
    #[test]
    fn a_karpenter_pool_is_settled_only_with_every_claim_ready_and_one_pin() {
        use rota_core::cloud::karpenter::NodeClaimState;
        use rota_core::fleet::owner::ManagedGroup;
        let claim = |name: &str, ready: bool, deleting: bool| NodeClaimState {
            name: name.into(),
            node: Some(format!("node-{name}")),
            image: Some(PIN.into()),
            ready,
            drifted: false,
            deleting,
        };
        let state = |claims, ids: Vec<&str>| DriftPoolState {
            pool: ManagedGroup::KarpenterNodePool {
                region: "us-east-1".into(),
                eks_cluster: "c".into(),
                node_pool: "spot".into(),
            },
            node_class: "default".into(),
            ami_ids: ids.into_iter().map(str::to_string).collect(),
            other_terms: vec![],
            shared_with: vec![],
            budgets: vec![],
            resource_version: "1".into(),
            claims,
        };
        let v = OwnerView::of_drift(&state(vec![claim("a", true, false)], vec![PIN]));
        assert_eq!(v.template_image.as_deref(), Some(PIN));
        assert_eq!(v.unsettled, None);
        let two = OwnerView::of_drift(&state(vec![claim("a", true, false)], vec![PIN, OLD]));
        assert_eq!(two.template_image, None, "two AMIs: no one pin");
        let going = OwnerView::of_drift(&state(vec![claim("a", true, true)], vec![PIN]));
        assert!(going.unsettled.unwrap().contains("being disrupted"));
        let booting = OwnerView::of_drift(&state(vec![claim("a", false, false)], vec![PIN]));
        assert!(booting.unsettled.unwrap().contains("not Ready"));
    }
}
