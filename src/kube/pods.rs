//! The cluster index's pods, kept under the node they are bound to ([`PodsByNode`]).
//!
//! Why by node, and not one table of every pod plus a list of keys per node: the planner
//! reads pods a node at a time (`kube::observe`), and the one table was most of the agent's
//! memory at scale. A hash table of 150,000 pods has 262,144 buckets of 64 bytes (17 MB, 43%
//! of it spare room), the per-node lists held every key a second time, and while the table
//! grows it is copied into one twice its size (at 600,000 pods, 68 MB beside 34 MB). Kept by
//! node, a pod is one entry of its node's list (its key and summary, 64 bytes); only pods not
//! bound yet (Pending, unscheduled) have a table of their own, and there are few of them.
//!
//! This rests on one rule of the API server: a pod's `spec.nodeName` never changes once set
//! (a binding is final; the server refuses an update that moves or unbinds a pod). A watch
//! event therefore finds a pod under the node it names, or among the unbound pods.

use std::collections::HashMap;
use std::sync::Arc;

use super::summary::PodSummary;

/// Identity of a pod: namespace and name (namespaces are shared, see
/// [`super::summary::Interner`]).
pub type PodKey = (Arc<str>, Arc<str>);

/// How many entries a node's full list grows by: a quarter of what it holds, at least 4.
///
/// Why not `Vec`'s doubling: a node's pods arrive one at a time (the list, then the watch),
/// and 30 workload pods and a few DaemonSets' (33) doubled to a capacity of 64, so the
/// lists held almost twice the room their pods need: 140 bytes a pod instead of 72, 11.7 MB
/// of a 28.7 MB heap at 2,000 nodes (heaptrack, `agent_scale`). Growing by a quarter wastes
/// at most a fifth, for a few more reallocations of lists of a few kilobytes.
fn growth(len: usize) -> usize {
    (len / 4).max(4)
}

/// Every pod of the index, by the node it is bound to.
#[derive(Debug, Default)]
pub struct PodsByNode {
    bound: HashMap<Arc<str>, Vec<(PodKey, PodSummary)>>,
    /// Pods with no `spec.nodeName` yet.
    unbound: HashMap<PodKey, PodSummary>,
    len: usize,
}

impl PodsByNode {
    /// Keeps `summary` as pod `key`. `None` when the pod was kept exactly so already; else
    /// the node it is bound to (`Some(None)`: not bound).
    pub fn upsert(&mut self, key: PodKey, summary: PodSummary) -> Option<Option<Arc<str>>> {
        let Some(node) = summary.node.clone() else {
            return match self.unbound.get_mut(&key) {
                Some(old) if *old == summary => None,
                Some(old) => {
                    *old = summary;
                    Some(None)
                }
                None => {
                    self.unbound.insert(key, summary);
                    self.len += 1;
                    Some(None)
                }
            };
        };
        let on = self.bound.entry(node.clone()).or_default();
        if let Some((_, old)) = on.iter_mut().find(|(k, _)| *k == key) {
            if *old == summary {
                return None;
            }
            *old = summary;
            return Some(Some(node));
        }
        // Bound now: it may have been waiting unbound.
        if self.unbound.remove(&key).is_none() {
            self.len += 1;
        }
        if on.len() == on.capacity() {
            on.reserve_exact(growth(on.len()));
        }
        on.push((key, summary));
        Some(Some(node))
    }

    /// Forgets pod `key`, which its last state says is bound to `node`. `None` when it was
    /// not kept; else the node it was bound to.
    pub fn remove(&mut self, key: &PodKey, node: Option<&str>) -> Option<Option<Arc<str>>> {
        if let Some(n) = node
            && let Some(found) = self.remove_from(n, key)
        {
            return Some(Some(found));
        }
        if self.unbound.remove(key).is_some() {
            self.len -= 1;
            return Some(None);
        }
        // Not where its last state says: look under every node. Never needed while the
        // rule above holds; a deletion is rare enough that the scan costs nothing.
        let elsewhere = self
            .bound
            .iter()
            .find(|(_, on)| on.iter().any(|(k, _)| k == key))
            .map(|(n, _)| n.clone())?;
        self.remove_from(&elsewhere, key).map(Some)
    }

    fn remove_from(&mut self, node: &str, key: &PodKey) -> Option<Arc<str>> {
        let on = self.bound.get_mut(node)?;
        let i = on.iter().position(|(k, _)| k == key)?;
        on.swap_remove(i);
        self.len -= 1;
        let (n, on) = self.bound.get_key_value(node)?;
        let n = n.clone();
        if on.is_empty() {
            self.bound.remove(node);
        }
        Some(n)
    }

    /// The pods bound to `node`.
    pub fn on(&self, node: &str) -> impl Iterator<Item = (&PodKey, &PodSummary)> {
        self.bound
            .get(node)
            .into_iter()
            .flatten()
            .map(|(k, s)| (k, s))
    }

    /// Every pod, bound or not.
    pub fn iter(&self) -> impl Iterator<Item = (&PodKey, &PodSummary)> {
        self.bound
            .values()
            .flatten()
            .map(|(k, s)| (k, s))
            .chain(&self.unbound)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::summary::PodPhase;
    use std::collections::BTreeMap;

    fn key(name: &str) -> PodKey {
        (Arc::from("app"), Arc::from(name))
    }

    fn pod(node: Option<&str>, ready: bool) -> PodSummary {
        PodSummary {
            node: node.map(Arc::from),
            labels: Arc::new(BTreeMap::new()),
            daemon_set: false,
            mirror: false,
            phase: if node.is_none() {
                PodPhase::Pending
            } else {
                PodPhase::Live
            },
            ready,
            do_not_disrupt: false,
            uses_empty_dir: false,
            terminating: false,
        }
    }

    fn names_on<'a>(p: &'a PodsByNode, node: &str) -> Vec<&'a str> {
        let mut v: Vec<&str> = p.on(node).map(|(k, _)| &*k.1).collect();
        v.sort();
        v
    }

    #[test]
    fn a_pod_is_kept_once_from_pending_to_bound_to_gone() {
        let mut p = PodsByNode::default();
        // Created pending, then scheduled: one pod, under its node, counted once.
        assert_eq!(p.upsert(key("web-1"), pod(None, false)), Some(None));
        assert_eq!(p.upsert(key("web-1"), pod(None, false)), None);
        assert_eq!(
            p.upsert(key("web-1"), pod(Some("n1"), false)),
            Some(Some("n1".into()))
        );
        assert_eq!(p.len(), 1);
        assert!(p.unbound.is_empty());
        // The same state again is no change; a new one is, in place.
        assert_eq!(p.upsert(key("web-1"), pod(Some("n1"), false)), None);
        assert_eq!(
            p.upsert(key("web-1"), pod(Some("n1"), true)),
            Some(Some("n1".into()))
        );
        assert_eq!(p.len(), 1);
        assert!(p.on("n1").all(|(_, s)| s.ready));
        // Others beside it, on n1 and n2, and one created bound (a DaemonSet's).
        p.upsert(key("web-2"), pod(Some("n1"), true));
        p.upsert(key("web-3"), pod(Some("n2"), true));
        p.upsert(key("web-4"), pod(None, false));
        assert_eq!(names_on(&p, "n1"), ["web-1", "web-2"]);
        assert_eq!(names_on(&p, "n2"), ["web-3"]);
        assert_eq!((p.len(), p.iter().count()), (4, 4));
        // Deleted: from its node (the node's list goes with its last pod) or unbound.
        assert_eq!(p.remove(&key("web-1"), Some("n1")), Some(Some("n1".into())));
        assert_eq!(p.remove(&key("web-1"), Some("n1")), None);
        assert_eq!(p.remove(&key("web-3"), Some("n2")), Some(Some("n2".into())));
        assert!(!p.bound.contains_key("n2"));
        assert_eq!(p.remove(&key("web-4"), None), Some(None));
        assert_eq!(names_on(&p, "n1"), ["web-2"]);
        assert_eq!((p.len(), p.iter().count()), (1, 1));
    }

    #[test]
    fn a_pod_is_64_bytes_beside_its_name() {
        // Its key (two shared strings) and its summary: 600,000 at 20,000 nodes.
        assert_eq!(std::mem::size_of::<(PodKey, PodSummary)>(), 64);
    }

    #[test]
    fn a_nodes_list_holds_little_more_room_than_its_pods() {
        let mut p = PodsByNode::default();
        for i in 0..33 {
            p.upsert(key(&format!("web-{i}")), pod(Some("n1"), true));
        }
        let cap = p.bound["n1"].capacity();
        // Doubling would leave room for 64; a quarter at a time, at most a fifth spare.
        assert!((33..=40).contains(&cap), "capacity {cap} for 33 pods");
    }

    #[test]
    fn a_deletion_that_names_another_node_still_finds_the_pod() {
        let mut p = PodsByNode::default();
        p.upsert(key("web-1"), pod(Some("n1"), true));
        // Never sent by an API server (nodeName is final), but nothing is left behind.
        assert_eq!(p.remove(&key("web-1"), Some("n9")), Some(Some("n1".into())));
        assert_eq!(p.len(), 0);
        assert!(p.bound.is_empty());
    }
}
