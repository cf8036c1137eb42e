//! What the cluster index keeps of each object it watches: Kubernetes objects trimmed, as
//! they arrive, to the fields the decisions read ([`NodeSummary`], [`PodSummary`],
//! [`PdbSummary`]) and what the gates judge ([`PodTally`], [`EventRecord`]); strings that
//! repeat across pods are shared ([`Interner`]). `kube::index` stores them, `kube::observe`
//! reads them into what the planner sees.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::{ObjectMeta, Selector};

use super::node_labels::NodeLabels;
use super::node_projection::NodeProjection;
use super::projection::PodProjection;
use rota_core::cloud::managed::EKS_UNSCHEDULABLE_TAINT;
use rota_core::rotate::observed::{CORDONED_BY, SCALE_DOWN_DISABLED, opts_out_of_disruption};

/// Annotation the kubelet puts on the mirror of a static pod.
const MIRROR: &str = "kubernetes.io/config.mirror";

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(|s| s.as_str())
}

fn truthy(v: Option<&str>) -> bool {
    matches!(v, Some("true"))
}

/// Whether an object (node or pod) asks not to be disrupted: the one place that decides it.
pub fn do_not_disrupt(meta: &ObjectMeta) -> bool {
    // rota's own annotation and Karpenter's (`karpenter.sh/do-not-disrupt`).
    opts_out_of_disruption(meta.annotations.as_ref())
}

/// How many pods a namespace has, and how many of them are not Ready or Pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodCounts {
    pub total: u32,
    /// Not Ready (a Pending pod is not Ready either).
    pub not_ready: u32,
    /// `status.phase` is `Pending`.
    pub pending: u32,
}

/// The pods' health as the pods gate judges it: counts per namespace, never a list of pods.
/// Why counts: a list of every pod, built for each pool's sample, held 120 bytes a pod (two
/// strings each) and pools sample at once; at 600,000 pods that was tens of megabytes per
/// pool per sample for a gate that only ever counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodTally(BTreeMap<Arc<str>, PodCounts>);

impl PodTally {
    /// Counts one pod of `namespace`.
    pub fn add(&mut self, namespace: &Arc<str>, ready: bool, pending: bool) {
        let c = match self.0.get_mut(&**namespace) {
            Some(c) => c,
            None => self.0.entry(namespace.clone()).or_default(),
        };
        c.total += 1;
        c.not_ready += u32::from(!ready);
        c.pending += u32::from(pending);
    }

    /// The counts over `namespaces` (every namespace when empty).
    pub fn over(&self, namespaces: &[String]) -> PodCounts {
        let mut sum = PodCounts::default();
        for (ns, c) in &self.0 {
            if namespaces.is_empty() || namespaces.iter().any(|n| n.as_str() == &**ns) {
                sum.total += c.total;
                sum.not_ready += c.not_ready;
                sum.pending += c.pending;
            }
        }
        sum
    }
}

/// A Kubernetes event as the events gate needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub reason: String,
    /// `lastTimestamp` (or `eventTime`).
    pub last_seen: DateTime<Utc>,
    /// `count` (1 for a single occurrence).
    pub count: u32,
}

/// A node as the index keeps it: the fields the planner reads, and the labels (for the
/// pools' selectors; their strings shared with the other nodes', [`NodeLabels`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSummary {
    pub name: String,
    pub labels: NodeLabels,
    pub provider_id: String,
    /// The kubelet's Ready condition is True.
    pub kubelet_ready: bool,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    pub cordoned_by: Option<String>,
    /// Tainted unschedulable by its owner: EKS's `eks.amazonaws.com/nodegroup=unschedulable:
    /// NoSchedule` on the nodes its update will replace (the owner's cordon, for the
    /// ledger: `spec.unschedulable` follows only once the node's pods are gone).
    pub owner_unschedulable: bool,
    pub do_not_disrupt: bool,
    pub scale_down_disabled: bool,
    /// `status.nodeInfo.kubeletVersion`: a GKE node's node version (no label carries it).
    pub kubelet_version: Option<String>,
}

impl NodeSummary {
    /// The summary of a node as decoded ([`NodeProjection`]; a full `Node` converts into
    /// one), its label strings shared through `interner`.
    pub fn from_node(node: &NodeProjection, interner: &mut Interner) -> NodeSummary {
        let meta = &node.metadata;
        let spec = node.spec.as_ref();
        NodeSummary {
            name: meta.name.clone().unwrap_or_default(),
            labels: interner.node_labels(meta.labels.clone().unwrap_or_default()),
            provider_id: spec.and_then(|s| s.provider_id.clone()).unwrap_or_default(),
            kubelet_ready: node.kubelet_ready(),
            cordoned: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            cordoned_by: annotation(meta, CORDONED_BY).map(String::from),
            owner_unschedulable: spec
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|ts| ts.iter().any(owner_unschedulable)),
            do_not_disrupt: do_not_disrupt(meta),
            scale_down_disabled: truthy(annotation(meta, SCALE_DOWN_DISABLED)),
            kubelet_version: node
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.kubelet_version.clone()),
        }
    }
}

/// Whether `t` is an owner's own cordon of a node it is about to replace.
fn owner_unschedulable(t: &super::node_projection::TaintProjection) -> bool {
    let (key, value) = EKS_UNSCHEDULABLE_TAINT;
    t.key == key && t.value.as_deref() == Some(value) && t.effect == "NoSchedule"
}

/// Where a pod's `status.phase` stands, as far as rota cares (one byte: see [`PodSummary`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    /// `Pending`: not started (the pods gate counts them).
    Pending,
    /// `Running`, `Unknown` or no phase yet.
    Live,
    /// `Succeeded` or `Failed`: holds nothing.
    Finished,
}

/// A pod as the index keeps it (its namespace and name are the index's key): what draining,
/// readiness, the pods gate and PDB matching need. 32 bytes of its own (a test holds it:
/// 600,000 of them at 20,000 nodes) plus its name; label sets and namespaces are shared
/// between pods (`index::Interner`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSummary {
    /// `spec.nodeName`; `None` while unscheduled.
    pub node: Option<Arc<str>>,
    /// For PDB selectors.
    pub labels: Arc<BTreeMap<String, String>>,
    /// Owned by a DaemonSet.
    pub daemon_set: bool,
    /// A static pod's mirror.
    pub mirror: bool,
    pub phase: PodPhase,
    /// The Ready condition is True.
    pub ready: bool,
    pub do_not_disrupt: bool,
    pub uses_empty_dir: bool,
    /// `deletionTimestamp` is set.
    pub terminating: bool,
}

impl PodSummary {
    pub fn from_pod(pod: &PodProjection, interner: &mut Interner) -> PodSummary {
        let meta = &pod.metadata;
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref());
        PodSummary {
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .map(|n| interner.str(n)),
            labels: interner.labels(meta.labels.clone().unwrap_or_default()),
            daemon_set: meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet"),
            mirror: annotation(meta, MIRROR).is_some(),
            phase: match phase {
                Some("Succeeded") | Some("Failed") => PodPhase::Finished,
                Some("Pending") => PodPhase::Pending,
                _ => PodPhase::Live,
            },
            ready: status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
            do_not_disrupt: do_not_disrupt(meta),
            uses_empty_dir: pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|vs| vs.iter().any(|v| v.empty_dir.is_some())),
            terminating: meta.deletion_timestamp.is_some(),
        }
    }

    /// A live DaemonSet pod that is not Ready yet.
    pub fn daemon_starting(&self) -> bool {
        self.daemon_set && !self.finished() && !self.terminating && !self.ready
    }

    /// `Succeeded` or `Failed`: holds nothing.
    pub fn finished(&self) -> bool {
        self.phase == PodPhase::Finished
    }

    /// `status.phase` is `Pending`.
    pub fn pending(&self) -> bool {
        self.phase == PodPhase::Pending
    }
}

/// A PodDisruptionBudget as the index keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbSummary {
    /// Shared with every pod a pass finds it covers ([`rota_core::rotate::PdbRef`]).
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// `None` when the selector is absent or cannot be parsed (matches nothing).
    pub selector: Option<Selector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: u32,
}

impl PdbSummary {
    pub fn from_pdb(b: &PodDisruptionBudget) -> PdbSummary {
        PdbSummary {
            namespace: b.metadata.namespace.as_deref().unwrap_or_default().into(),
            name: b.metadata.name.as_deref().unwrap_or_default().into(),
            selector: b
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .and_then(|sel| Selector::try_from(sel).ok()),
            disruptions_allowed: b
                .status
                .as_ref()
                .map_or(0, |s| u32::try_from(s.disruptions_allowed).unwrap_or(0)),
        }
    }
}

/// Shares the strings that repeat across pods and nodes (namespaces, node names, whole label
/// sets: the pods of one workload carry the same labels; each node label's key and value) so
/// 150,000 pods and 5,000 nodes do not hold 150,000 and 5,000 copies.
///
/// Entries nobody else holds any more (the name and hostname of a node that left, the label
/// set of a ReplicaSet scaled away) are dropped by [`Interner::prune`]: the index calls it
/// every [`PRUNE_EVERY`] deletions, so a rotation that replaces every node (new names, new
/// hostnames) does not leave the old ones behind for the life of the process.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    labels: HashSet<Arc<BTreeMap<String, String>>>,
    /// Node labels' keys and values.
    words: HashSet<Arc<String>>,
}

/// Deletions (of nodes and pods) between two prunes of the index's [`Interner`]: often enough
/// that a rotation's departed names go within a batch or two, rarely enough that the walk
/// over every entry costs nothing (150,000 pod deletions: 36 walks).
pub const PRUNE_EVERY: u32 = 4096;

impl Interner {
    pub fn str(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.strings.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.strings.insert(a.clone());
        a
    }

    /// How many distinct label sets are shared.
    pub fn label_sets(&self) -> usize {
        self.labels.len()
    }

    /// How many entries are kept (strings, pod label sets and node label words).
    pub fn len(&self) -> usize {
        self.strings.len() + self.labels.len() + self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep what another interner shared too (a fresh list interned its own strings; both
    /// sets stay shared by value).
    pub fn absorb(&mut self, other: Interner) {
        self.strings.extend(other.strings);
        self.labels.extend(other.labels);
        self.words.extend(other.words);
    }

    pub fn labels(&mut self, l: BTreeMap<String, String>) -> Arc<BTreeMap<String, String>> {
        if let Some(a) = self.labels.get(&l) {
            return a.clone();
        }
        let a = Arc::new(l);
        self.labels.insert(a.clone());
        a
    }

    /// One node label's key or value, shared (the decoded string moves in when it is new).
    pub fn word(&mut self, s: String) -> Arc<String> {
        if let Some(a) = self.words.get(&s) {
            return a.clone();
        }
        let a = Arc::new(s);
        self.words.insert(a.clone());
        a
    }

    /// A node's labels, each key and value shared.
    pub fn node_labels(&mut self, l: BTreeMap<String, String>) -> NodeLabels {
        NodeLabels::new(
            l.into_iter()
                .map(|(k, v)| (self.word(k), self.word(v)))
                .collect(),
        )
    }

    /// Forgets every entry that only the interner still holds: nothing else refers to it,
    /// and the next object that carries it interns it anew.
    pub fn prune(&mut self) {
        self.strings.retain(|a| Arc::strong_count(a) > 1);
        self.labels.retain(|a| Arc::strong_count(a) > 1);
        self.words.retain(|a| Arc::strong_count(a) > 1);
    }
}
