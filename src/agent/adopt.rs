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
//! [`judge`] decides (pure); [`observe`] reads the pool's nodes and group.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::core::Selector;

use crate::cloud::{CloudError, GroupState, Lifecycle, NodeGroups};
use crate::kube::observe::IMAGE_LABEL;
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
    let selector: Selector = pool.node_selector.clone().into_iter().collect();
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels_from(&selector))
        .await?;
    let nodes = nodes
        .items
        .iter()
        .map(|n| NodeImage {
            name: n.metadata.name.clone().unwrap_or_default(),
            provider_id: n
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_default(),
            image_label: n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(IMAGE_LABEL).cloned()),
        })
        .collect();
    Ok((group, nodes))
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
}
