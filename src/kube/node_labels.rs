//! A node's labels as the cluster index keeps them ([`NodeLabels`]): one sorted slice of
//! shared strings instead of a `BTreeMap` of owned ones.
//!
//! Why: the index keeps every node of the cluster, and a node's labels were most of what it
//! kept of it (about 1 KiB a node: a B-tree leaf of 11 slots of two 24-byte `String`s, plus
//! one heap block per key and per value). The keys are the same on every node
//! (`kubernetes.io/hostname`, `topology.kubernetes.io/zone`, the pool's selector, ...) and
//! most values repeat across the nodes of a pool (the zone, the instance type, the image),
//! so each distinct string is held once ([`super::summary::Interner::word`]) and a node keeps
//! two 8-byte pointers a label: about 300 bytes a node of 8 labels, the hostname's string
//! included.
//!
//! Reads keep the `BTreeMap` shape the callers use (`labels.get(key) == Some(value)`).

use std::collections::BTreeMap;
use std::sync::Arc;

/// A node's labels, sorted by key, each key and value shared with the other nodes'.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeLabels(Box<[(Arc<String>, Arc<String>)]>);

impl NodeLabels {
    /// Labels from `(key, value)` pairs already shared; sorted here (a map's are already).
    pub fn new(mut pairs: Vec<(Arc<String>, Arc<String>)>) -> NodeLabels {
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        NodeLabels(pairs.into_boxed_slice())
    }

    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    /// Whether every label of `selector` is on the node with its value.
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.get(k) == Some(v))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A map of the labels whose keys `keep` names (a few, for a reader that takes a map).
    pub fn only(&self, keep: &[&str]) -> BTreeMap<String, String> {
        self.iter()
            .filter(|(k, _)| keep.contains(k))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(s: &str) -> Arc<String> {
        Arc::new(s.to_string())
    }

    #[test]
    fn labels_read_as_the_map_they_came_from() {
        let map: BTreeMap<String, String> = [
            ("topology.kubernetes.io/zone", "us-east-1a"),
            ("kubernetes.io/hostname", "ip-10-0-0-1"),
            ("rota.dev/pool", "general"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        // Given in any order: read by key as the map reads.
        let l = NodeLabels::new(vec![
            (word("rota.dev/pool"), word("general")),
            (word("kubernetes.io/hostname"), word("ip-10-0-0-1")),
            (word("topology.kubernetes.io/zone"), word("us-east-1a")),
        ]);
        for (k, v) in &map {
            assert_eq!(l.get(k), Some(v));
        }
        assert_eq!(l.get("kubernetes.io/os"), None);
        assert_eq!(l.get(""), None);
        assert_eq!(l.len(), 3);
        let back: BTreeMap<String, String> = l
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(back, map);
        // A selector matches when each of its labels is there with its value.
        let sel = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(l.matches(&sel(&[("rota.dev/pool", "general")])));
        assert!(l.matches(&sel(&[])));
        assert!(!l.matches(&sel(&[("rota.dev/pool", "gpu")])));
        assert!(!l.matches(&sel(&[
            ("rota.dev/pool", "general"),
            ("kubernetes.io/os", "linux")
        ])));
        assert_eq!(
            l.only(&["rota.dev/pool", "absent"]),
            sel(&[("rota.dev/pool", "general")])
        );
    }
}
