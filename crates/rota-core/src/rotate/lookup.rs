//! One pool's [`Observed`], looked up by key: instances by provider ID and by ID, nodes by
//! provider ID and by name, each through a hash table built once per plan.
//!
//! Why: [`Observed::instance_of`], [`Observed::node_of`], [`Observed::node`] and
//! [`Observed::image_of`] scan the group's instances or the pool's nodes, and the planner
//! asks them once per node (counting the nodes on the target image, choosing a batch, finding
//! a batch's new nodes): a scan per node is quadratic in the pool. At a 2,000-node pool that
//! is four million provider-ID comparisons for each such loop of each pass. [`Lookup`]
//! answers the same questions in constant time, with the same answers: where two entries share
//! a key (two nodes with one provider ID), the first in the order the scan would meet them
//! wins, as `find` does.
//!
//! It borrows the observation, so it cannot go stale: nothing can change the [`Observed`]
//! while a plan holds its lookup. Everything else of the observation is reached through
//! `Deref`.

use std::collections::HashMap;
use std::ops::Deref;

use super::observed::{Observed, ObservedNode};
use crate::cloud::Instance;

/// An [`Observed`] with its keys indexed.
pub struct Lookup<'a> {
    obs: &'a Observed,
    /// Index into `group.instances`, by provider ID (the first such instance).
    instance_by_provider: HashMap<&'a str, usize>,
    /// Index into `group.instances`, by instance ID.
    instance_by_id: HashMap<&'a str, usize>,
    /// Selected nodes first, then departed ones: the order of `nodes.iter().chain(&departed)`.
    node_by_provider: HashMap<&'a str, &'a ObservedNode>,
    node_by_name: HashMap<&'a str, &'a ObservedNode>,
}

impl<'a> Lookup<'a> {
    pub fn new(obs: &'a Observed) -> Lookup<'a> {
        let instances = &obs.group.instances;
        let mut instance_by_provider = HashMap::with_capacity(instances.len());
        let mut instance_by_id = HashMap::with_capacity(instances.len());
        for (i, inst) in instances.iter().enumerate() {
            instance_by_provider
                .entry(inst.provider_id.as_str())
                .or_insert(i);
            instance_by_id.entry(inst.id.as_str()).or_insert(i);
        }
        let count = obs.nodes.len() + obs.departed.len();
        let mut node_by_provider = HashMap::with_capacity(count);
        let mut node_by_name = HashMap::with_capacity(count);
        for n in obs.nodes.iter().chain(&obs.departed) {
            node_by_provider.entry(n.provider_id.as_str()).or_insert(n);
            node_by_name.entry(n.name.as_str()).or_insert(n);
        }
        Lookup {
            obs,
            instance_by_provider,
            instance_by_id,
            node_by_provider,
            node_by_name,
        }
    }

    /// [`Observed::instance_of`].
    pub fn instance_of(&self, node: &ObservedNode) -> Option<&'a Instance> {
        let i = *self.instance_by_provider.get(node.provider_id.as_str())?;
        self.obs.group.instances.get(i)
    }

    /// [`Observed::node_of`].
    pub fn node_of(&self, instance_id: &str) -> Option<&'a ObservedNode> {
        let inst = self.instance(instance_id)?;
        self.node_by_provider
            .get(inst.provider_id.as_str())
            .copied()
    }

    /// [`Observed::node`].
    pub fn node(&self, name: &str) -> Option<&'a ObservedNode> {
        self.node_by_name.get(name).copied()
    }

    /// [`Observed::instance`].
    pub fn instance(&self, id: &str) -> Option<&'a Instance> {
        let i = *self.instance_by_id.get(id)?;
        self.obs.group.instances.get(i)
    }

    /// [`Observed::image_of`].
    pub fn image_of(&self, node: &ObservedNode) -> Option<String> {
        self.instance_of(node)
            .map(|i| i.image.clone())
            .or_else(|| node.image_label.clone())
    }
}

impl Deref for Lookup<'_> {
    type Target = Observed;

    fn deref(&self) -> &Observed {
        self.obs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{GroupRef, GroupState, Lifecycle};
    use crate::rotate::observed::GateVerdict;

    fn instance(id: &str, provider: &str, image: &str) -> Instance {
        Instance {
            id: id.into(),
            provider_id: provider.into(),
            image: image.into(),
            zone: "us-east-1a".into(),
            lifecycle: Lifecycle::InService,
            launch_error: None,
        }
    }

    fn node(name: &str, provider: &str, label: Option<&str>) -> ObservedNode {
        ObservedNode {
            name: name.into(),
            provider_id: provider.into(),
            image_label: label.map(String::from),
            ready: true,
            cordoned: false,
            cordoned_by: None,
            do_not_disrupt: false,
            scale_down_disabled: false,
            pods: Vec::new(),
        }
    }

    /// Every kind of key the scans meet: matches, misses, repeated keys (the first wins),
    /// departed nodes, an instance with no node and a node with no instance.
    fn observed() -> Observed {
        Observed {
            group: GroupState {
                group: GroupRef::Aws {
                    region: "us-east-1".into(),
                    auto_scaling_group: "g".into(),
                },
                desired: 4,
                min: 0,
                max: 10,
                template_image: "new".into(),
                instances: vec![
                    instance("i-1", "aws:///i-1", "old"),
                    instance("i-2", "aws:///i-2", "new"),
                    // Same provider ID as i-1: the scan finds i-1 first.
                    instance("i-1b", "aws:///i-1", "other"),
                    // Same ID twice: the first wins.
                    instance("i-3", "aws:///i-3", "old"),
                    instance("i-3", "aws:///i-3x", "new"),
                    // No node.
                    instance("i-4", "aws:///i-4", "new"),
                    // Its node departed.
                    instance("i-5", "aws:///i-5", "old"),
                ],
            },
            nodes: vec![
                node("n-1", "aws:///i-1", None),
                node("n-2", "aws:///i-2", Some("labelled")),
                node("n-3", "aws:///i-3", None),
                // Same provider ID as n-3: the scan finds n-3 first.
                node("n-3b", "aws:///i-3", None),
                // No instance: its image is its label.
                node("n-9", "aws:///i-9", Some("label-only")),
                node("n-10", "aws:///i-10", None),
            ],
            departed: vec![
                node("n-5", "aws:///i-5", None),
                // Same name as a selected node: the selected one is met first.
                node("n-1", "aws:///i-1-departed", None),
            ],
            gates: GateVerdict::Passing,
            start_hold: None,
            image_hold: None,
            control_plane: None,
            describe_lag: std::time::Duration::ZERO,
            cluster_autoscaler: true,
            leading_since: None,
            owner: None,
            drift: None,
            pools: Vec::new(),
            refused: None,
        }
    }

    #[test]
    fn the_lookup_answers_as_the_scans_do() {
        let obs = observed();
        let l = Lookup::new(&obs);
        let every_node = obs.nodes.iter().chain(&obs.departed);
        for n in every_node.clone() {
            assert_eq!(
                l.instance_of(n),
                obs.instance_of(n),
                "instance_of {}",
                n.name
            );
            assert_eq!(l.image_of(n), obs.image_of(n), "image_of {}", n.name);
            assert_eq!(l.node(&n.name), obs.node(&n.name), "node {}", n.name);
        }
        let ids = ["i-1", "i-1b", "i-2", "i-3", "i-4", "i-5", "i-6", ""];
        for id in ids {
            assert_eq!(l.instance(id), obs.instance(id), "instance {id}");
            assert_eq!(l.node_of(id), obs.node_of(id), "node_of {id}");
        }
        for name in ["n-1", "n-5", "nope", ""] {
            assert_eq!(l.node(name), obs.node(name), "node {name}");
        }
        // Repeated keys resolve to the first entry, as `find` does.
        assert_eq!(l.instance_of(&obs.nodes[0]).unwrap().id, "i-1");
        assert_eq!(l.node_of("i-3").unwrap().name, "n-3");
        assert_eq!(l.node("n-1").unwrap().provider_id, "aws:///i-1");
        assert_eq!(l.image_of(&obs.nodes[4]).as_deref(), Some("label-only"));
        // The rest of the observation through Deref.
        assert_eq!(l.nodes.len(), 6);
    }
}
