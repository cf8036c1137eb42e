//! What the rotation sees of one pool at one moment: the cloud group, the pool's nodes with
//! their pods, and the verdict of the health gates. Built at the edge (kube and cloud reads,
//! the gates framework); the planner only reads it.

use std::sync::Arc;

use crate::cloud::{GroupState, Instance, Lifecycle};

/// Annotation that blocks the disruption of a node (on the node or on any of its pods).
pub const DO_NOT_DISRUPT: &str = "rota.dev/do-not-disrupt";
/// Karpenter's opt-out, honoured the same way: a cluster that already marks its pods and
/// nodes for Karpenter should not have to mark them twice for rota.
pub const KARPENTER_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// Whether an object's annotations opt it out of disruption: [`DO_NOT_DISRUPT`] or
/// [`KARPENTER_DO_NOT_DISRUPT`] set to `"true"` (Karpenter's own reading: any other value,
/// `"false"` included, does not opt out). The one place both annotations are read.
pub fn opts_out_of_disruption(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    annotations.is_some_and(|a| {
        [DO_NOT_DISRUPT, KARPENTER_DO_NOT_DISRUPT]
            .iter()
            .any(|k| a.get(*k).is_some_and(|v| v == "true"))
    })
}
/// Annotation rota puts on a node it cordons, naming the rotation and batch that own the
/// cordon (`<pool>/batch-<n>`). A cordon without it is a human's and is never undone by rota.
pub const CORDONED_BY: &str = "rota.dev/cordoned-by";
/// Cluster autoscaler annotation rota puts on the nodes it brings up until the pool is done,
/// so the autoscaler does not remove them mid-rotation.
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// One pool at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub group: GroupState,
    /// The nodes the pool's node selector picks.
    pub nodes: Vec<ObservedNode>,
    /// Nodes of the group's instances that the selector no longer picks (a commit changed
    /// `nodeSelector`, someone removed a label). They are not the pool's any more, but a batch
    /// that chose one must still see its pods: it is drained before it is terminated.
    pub departed: Vec<ObservedNode>,
    /// The health gates' verdict right now.
    pub gates: GateVerdict,
    /// Why this pool may not start a new rotation now (the cluster's `maxParallelPools`
    /// slots are taken, see `rotate::parallel`); `None` when it may. A rotation under way
    /// always continues.
    pub start_hold: Option<String>,
    /// Why the desired image cannot launch where the group launches, as the cloud said when
    /// the edge checked it (`NodeGroups::check_image`): a stable reason (`ImageNotFound`, …)
    /// and a message naming the image and the region. `None`: usable, or not checked because
    /// nothing is to be surged on it. While set, no rotation starts onto the image and no
    /// rotation under way is switched to it; the pool waits and goes on once it clears.
    pub image_hold: Option<(String, String)>,
    /// The control plane's minor as the API server's `/version` reported it, or why it
    /// could not be read; `None` when the edge did not look (it looks only before a surge
    /// onto a version that declares its kubelet, see `rotate::skew`).
    pub control_plane: Option<Result<crate::fleet::kubernetes::KubeMinor, String>>,
    /// How far the group's describe may lag behind writes (`--describe-lag`). Non-zero: the
    /// rotation fences the cluster autoscaler's scale-downs off the pool's nodes and lets
    /// this much time pass after the fence and after each capacity change of its own before
    /// it computes a capacity from a describe (see `rotate::plan`).
    pub describe_lag: std::time::Duration,
    /// Whether a cluster autoscaler may share the pool's group: `true` unless the operator
    /// said otherwise (`--no-cluster-autoscaler`). rota cannot tell from the cluster (the
    /// autoscaler may run outside it), so only that statement turns it off. `false`: no
    /// [`SCALE_DOWN_DISABLED`] annotation is added, no lost one set again, and the ones an
    /// earlier pass recorded are removed at once; with `describe_lag` there is no fence to
    /// wait for (only rota's own capacity changes).
    pub cluster_autoscaler: bool,
    /// When this replica's current leadership began, on its own clock. Waits measured from
    /// times in the checkpoint (`fenced_at`, `capacity_changed_at`, a stage's start) may have
    /// been written by another replica whose clock disagrees; with `describe_lag` they also
    /// start again from here, so that skew can only lengthen them.
    pub leading_since: Option<chrono::DateTime<chrono::Utc>>,
    /// A managed pool driven through its owner's API: the pool as the owner describes it
    /// (`None` for a self-managed group, whose state is `group`).
    pub owner: Option<crate::cloud::managed::OwnerPoolState>,
    /// A Karpenter pool driven through its objects: the NodePool, NodeClass and NodeClaims
    /// as the edge read them (`None` otherwise).
    pub drift: Option<crate::cloud::karpenter::DriftPoolState>,
    /// `managedUpdate: blueGreen`: the pools of the move as the owner lists them (the pool
    /// the nodes are on, and its twin once the checkpoint names one); empty otherwise, and
    /// when the agent does not drive the owner's blue-green calls.
    pub pools: Vec<crate::cloud::managed::OwnerPoolMembers>,
    /// A managed pool's owner refused rota's last request for it (an `Invalid` answer to the
    /// update or the twin: a node image AKS does not offer, a node version or image type GKE
    /// refuses), as the edge remembers it from the pass that sent it. A request the owner
    /// refused is not sent again: sent again, it is refused again.
    pub refused: Option<Refusal>,
}

/// What an owner refused: the request (as [`super::Action`] displays it) and its words.
/// Kept in the NodePoolRotation's status while the pool is paused on it
/// ([`super::resource::NodePoolRotationStatus::refused`]).
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub action: String,
    pub why: String,
}

/// A node of the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedNode {
    pub name: String,
    pub provider_id: String,
    /// The image label the node carries, used when no instance of the group matches it.
    pub image_label: Option<String>,
    pub ready: bool,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// The value of [`CORDONED_BY`], if any.
    pub cordoned_by: Option<String>,
    /// [`DO_NOT_DISRUPT`] or [`KARPENTER_DO_NOT_DISRUPT`] on the node itself.
    pub do_not_disrupt: bool,
    /// [`SCALE_DOWN_DISABLED`] is set.
    pub scale_down_disabled: bool,
    pub pods: Vec<ObservedPod>,
}

/// Who owns a pod, as far as draining cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodKind {
    /// Anything a drain must evict.
    Workload,
    /// Owned by a DaemonSet: runs on every node, never evicted.
    DaemonSet,
    /// A static pod mirrored by the kubelet: cannot be evicted through the API.
    Mirror,
}

/// A pod running on a pool node.
///
/// Its names are shared with the cluster index's (`Arc<str>`, a reference count, not a copy):
/// a pass observes every pod of the pool (66,000 on a 2,000-node pool of 30 pods a node), and
/// four owned strings a pod were most of a pass's allocations.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedPod {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub kind: PodKind,
    /// [`DO_NOT_DISRUPT`] or [`KARPENTER_DO_NOT_DISRUPT`] on the pod.
    pub do_not_disrupt: bool,
    pub uses_empty_dir: bool,
    /// Deletion under way (an eviction was accepted): still running, not evicted again.
    pub terminating: bool,
    /// The PodDisruptionBudget that covers the pod, with the disruptions it allows now.
    pub pdb: Option<PdbRef>,
    /// How many PodDisruptionBudgets select the pod. The Eviction API refuses a pod under
    /// more than one (500), so such a pod is never evicted: it waits, named, for a human
    /// or for `drain.onTimeout: force`.
    pub pdb_count: u32,
}

/// A PodDisruptionBudget as a drain needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbRef {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: u32,
}

/// The combined verdict of the pool's health gates (evaluated at the edge).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GateVerdict {
    /// Every gate has its passing samples (or the pool has no gates).
    #[default]
    Passing,
    /// Some gate is still collecting samples; names it.
    Pending(String),
    /// A gate failed: its name and why.
    Failed { gate: String, reason: String },
}

impl ObservedPod {
    /// Whether a drain has to evict this pod before the node may go.
    pub fn must_evict(&self) -> bool {
        self.kind == PodKind::Workload
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl ObservedNode {
    /// Pods a drain still has to evict.
    pub fn evictable(&self) -> impl Iterator<Item = &ObservedPod> {
        self.pods.iter().filter(|p| p.must_evict())
    }

    /// Pods that keep the node's instance from being terminated: those a drain must evict,
    /// except pods whose eviction was accepted on a node that is not Ready. Their kubelet is
    /// gone, so nobody will ever confirm their deletion (they stay Terminating forever), and
    /// they were evicted within their budgets (invariant 3 holds); waiting for them would
    /// halt the batch or loop forcing them.
    pub fn blocking_termination(&self) -> impl Iterator<Item = &ObservedPod> {
        let dead_kubelet = !self.ready;
        self.evictable()
            .filter(move |p| !(p.terminating && dead_kubelet))
    }

    /// Why this node may not be disrupted, if it may not.
    pub fn disruption_blocker(&self) -> Option<String> {
        if self.do_not_disrupt {
            return Some(format!(
                "node {} has {DO_NOT_DISRUPT} (or {KARPENTER_DO_NOT_DISRUPT})",
                self.name
            ));
        }
        self.pods.iter().find(|p| p.do_not_disrupt).map(|p| {
            format!(
                "pod {} on node {} has {DO_NOT_DISRUPT} (or {KARPENTER_DO_NOT_DISRUPT})",
                p.key(),
                self.name
            )
        })
    }
}

impl Observed {
    /// The live (not terminating) instance behind a node.
    pub fn instance_of(&self, node: &ObservedNode) -> Option<&Instance> {
        self.group
            .instances
            .iter()
            .find(|i| i.provider_id == node.provider_id)
    }

    /// The node an instance registered as (selected by the pool or departed from it).
    pub fn node_of(&self, instance_id: &str) -> Option<&ObservedNode> {
        let inst = self.group.instances.iter().find(|i| i.id == instance_id)?;
        self.nodes
            .iter()
            .chain(&self.departed)
            .find(|n| n.provider_id == inst.provider_id)
    }

    /// A node by name, selected by the pool or departed from it: a batch's nodes stay in
    /// view when they leave the selector mid-rotation.
    pub fn node(&self, name: &str) -> Option<&ObservedNode> {
        self.nodes
            .iter()
            .chain(&self.departed)
            .find(|n| n.name == name)
    }

    pub fn instance(&self, id: &str) -> Option<&Instance> {
        self.group.instances.iter().find(|i| i.id == id)
    }

    /// The image a node runs: its instance's image, else its image label.
    pub fn image_of(&self, node: &ObservedNode) -> Option<String> {
        self.instance_of(node)
            .map(|i| i.image.clone())
            .or_else(|| node.image_label.clone())
    }

    /// Instances that count against the pool's size (not yet terminating).
    pub fn live_instances(&self) -> impl Iterator<Item = &Instance> {
        self.group
            .instances
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
    }
}
