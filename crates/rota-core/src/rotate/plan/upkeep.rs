//! What every pass looks after, whatever the stage: the live nodes, cordons rota owns that
//! no batch claims any more, the group's template on the origin after a stop, the
//! autoscaler's annotations kept and released, the autoscaler fenced off the group, and the
//! waits for a lagging describe.

use std::collections::BTreeSet;

use super::{Planner, owner};
use crate::rotate::action::{Action, Planned};
use crate::rotate::checkpoint::{Checkpoint, Stage};
use crate::rotate::observed::ObservedNode;

impl<'a> Planner<'a> {
    /// Nodes that are not on their way out (their instance is not terminating).
    pub(super) fn live_nodes(&self) -> impl Iterator<Item = &'a ObservedNode> + '_ {
        let obs = self.obs;
        obs.nodes.iter().filter(move |n| {
            obs.instance_of(n)
                .is_none_or(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating)
        })
    }

    /// Nodes a stage may have cordoned, with the owner of those cordons.
    pub(super) fn claimed_cordons(&self, stage: &Stage) -> BTreeSet<(String, String)> {
        let Some(batch) = stage.batch() else {
            return BTreeSet::new();
        };
        let owner = owner(&self.desired.name, batch);
        let nodes = match stage {
            Stage::Cordoning { batch }
            | Stage::Draining { batch }
            | Stage::Terminating { batch } => {
                batch.old_nodes.iter().map(|c| c.node.clone()).collect()
            }
            // A replace batch's old nodes may outlive their removal while the group refills:
            // their cordons stay until the node objects are gone.
            Stage::Surging { batch }
            | Stage::WaitingReady { batch }
            | Stage::Soaking { batch, .. }
                if batch.replace =>
            {
                batch.old_nodes.iter().map(|c| c.node.clone()).collect()
            }
            Stage::Abandoning { batch, .. } => self.new_nodes_of(batch),
            _ => Vec::new(),
        };
        nodes.into_iter().map(|n| (n, owner.clone())).collect()
    }

    pub(super) fn clean_orphaned_cordons(&mut self, cp: &Checkpoint) {
        // The current batch and the pipelined next one (which only cordons when undone).
        let stages: Vec<&Stage> = std::iter::once(&cp.stage)
            .chain(cp.next.as_deref())
            .collect();
        let claimed: BTreeSet<(String, String)> = stages
            .iter()
            .flat_map(|s| self.claimed_cordons(s))
            .collect();
        for n in self.obs.nodes.iter().chain(&self.obs.departed) {
            let Some(by) = &n.cordoned_by else { continue };
            if !n.cordoned {
                continue;
            }
            if claimed.contains(&(n.name.clone(), by.clone())) {
                continue;
            }
            // A node whose instance is being terminated keeps its cordon until it is gone:
            // uncordoned, it could take pods that would die with it (a replace batch's old
            // nodes may outlive the batch).
            if self
                .obs
                .instance_of(n)
                .is_some_and(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating)
            {
                continue;
            }
            // In Abandoning, the old nodes' cordons are undone by the stage itself (with a
            // more specific reason).
            if stages.iter().any(|s| {
                matches!(s, Stage::Abandoning { batch, .. }
                    if batch.old_nodes.iter().any(|c| c.node == n.name))
            }) {
                continue;
            }
            self.push(
                Action::Uncordon {
                    node: n.name.clone(),
                },
                format!(
                    "node {} is cordoned by {by}, which no batch in progress owns (left by a crash or a cancelled batch)",
                    n.name
                ),
            );
        }
    }

    /// Invariant 8: a batch that stopped (halted, or being undone) leaves the group able to
    /// make only nodes of the image the pool came from. Without this, every replacement the
    /// cloud or the autoscaler makes while a human looks at the halt boots the image that
    /// may be what broke. The next batch's surge sets the target again.
    pub(super) fn template_on_origin(&mut self, cp: &Checkpoint) {
        if self.obs.group.template_image == cp.origin_image
            || self.actions.iter().any(
                |a| matches!(&a.action, Action::SetImage { image } if *image == cp.origin_image),
            )
        {
            return;
        }
        self.push(
            Action::SetImage {
                image: cp.origin_image.clone(),
            },
            format!(
                "the batch stopped: replacements the cloud or the autoscaler makes must boot the image the pool came from, {}",
                cp.origin_image
            ),
        );
    }

    /// Until the rotation is done, the nodes rota brought up keep the autoscaler's
    /// scale-down-disabled annotation: one lost (a crash before it was set, someone removing
    /// it) is set again.
    pub(super) fn keep_annotations(&mut self, cp: &mut Checkpoint) {
        if matches!(cp.stage, Stage::Cleanup | Stage::Done) || !self.obs.cluster_autoscaler {
            return;
        }
        if !self.obs.describe_lag.is_zero() {
            self.fence_autoscaler(cp);
        }
        for name in &cp.annotated_nodes {
            let again = Action::SetScaleDownDisabled {
                node: name.clone(),
                disabled: true,
            };
            if let Some(n) = self.obs.node(name)
                && !n.scale_down_disabled
                && !self.actions.iter().any(|a| a.action == again)
            {
                self.push(
                    again,
                    format!("keep the autoscaler off node {name} until the pool is done"),
                );
            }
        }
    }

    /// With `--no-cluster-autoscaler` (no autoscaler shares the group): the annotations an
    /// earlier pass recorded (before the operator said so, mid-rotation) protect against
    /// nothing, so they are removed now rather than when the pool is done, which a halted
    /// pool may never reach. A name stays recorded until a describe shows its node without
    /// the annotation (or the node gone): the checkpoint is written before the removal runs,
    /// and a crash in between must not leave an annotation nothing records (invariant 4).
    /// Nodes rota did not record are left alone, as at cleanup.
    pub(super) fn release_annotations(&mut self, cp: &mut Checkpoint) {
        if self.obs.cluster_autoscaler {
            return;
        }
        let mut still = Vec::new();
        for name in std::mem::take(&mut cp.annotated_nodes) {
            if self.obs.node(&name).is_some_and(|n| n.scale_down_disabled) {
                self.push(
                    Action::SetScaleDownDisabled {
                        node: name.clone(),
                        disabled: false,
                    },
                    format!(
                        "no cluster autoscaler shares the group (--no-cluster-autoscaler): node {name} needs no scale-down-disabled annotation"
                    ),
                );
                still.push(name);
            }
        }
        cp.annotated_nodes = still;
    }

    /// With `--describe-lag`: keep the cluster autoscaler from scaling down any node of the
    /// pool while it rotates. The autoscaler's scale-down is a terminate with decrement, and
    /// a describe that lags behind one makes a surge computed from it overshoot the bound
    /// (invariant 1) by what it missed. With every node fenced, and a lag waited out after
    /// the fence (`lag_wait`), no describe rota computes a capacity from misses a scale-down;
    /// a scale-up it misses makes it ask for less, never more. Nodes that carry the annotation
    /// from someone else are left alone (and not recorded, so cleanup leaves them as well).
    pub(super) fn fence_autoscaler(&mut self, cp: &mut Checkpoint) {
        let mut unfenced = 0;
        let live: Vec<&ObservedNode> = self.live_nodes().collect();
        for n in live {
            if n.scale_down_disabled {
                continue;
            }
            unfenced += 1;
            if !cp.annotated_nodes.contains(&n.name) {
                cp.annotated_nodes.push(n.name.clone());
            }
            self.actions.push(Planned {
                action: Action::SetScaleDownDisabled {
                    node: n.name.clone(),
                    disabled: true,
                },
                reason: format!(
                    "keep the autoscaler from scaling down node {} while the pool rotates (describes lag up to {}s)",
                    n.name,
                    self.obs.describe_lag.as_secs()
                ),
            });
        }
        // Forget nodes that are gone, so the list stays the size of the pool.
        let present: BTreeSet<&str> = self
            .obs
            .nodes
            .iter()
            .chain(&self.obs.departed)
            .map(|n| n.name.as_str())
            .collect();
        cp.annotated_nodes.retain(|n| present.contains(n.as_str()));
        if unfenced == 0 && cp.fenced_at.is_none() {
            cp.fenced_at = Some(self.now);
        }
    }

    /// With `--describe-lag`: why the next batch may not compute its capacity yet (the fence
    /// not yet seen, or seen less than a lag ago; the last capacity change less than a lag
    /// ago), or `None`.
    pub(super) fn lag_wait(&self, cp: &Checkpoint) -> Option<String> {
        let lag = self.obs.describe_lag;
        if lag.is_zero() {
            return None;
        }
        let lag_c = chrono::Duration::from_std(lag).unwrap_or(chrono::Duration::MAX);
        // With no autoscaler sharing the group, there is no scale-down to fence and none a
        // describe could miss: only rota's own capacity changes are waited out.
        let anchor = if self.obs.cluster_autoscaler {
            let Some(fenced) = cp.fenced_at else {
                return Some(
                    "keeping the cluster autoscaler from scaling down the pool's nodes before the first batch".into(),
                );
            };
            fenced
        } else {
            cp.capacity_changed_at?
        };
        let since = [Some(anchor), cp.capacity_changed_at, self.obs.leading_since]
            .into_iter()
            .flatten()
            .max()
            .expect("anchor is some");
        let ready = since + lag_c;
        (self.now < ready).then(|| {
            format!(
                "waiting until {} for the group's describe to catch up ({}s lag) before computing the next surge",
                ready.to_rfc3339(),
                lag.as_secs()
            )
        })
    }
}
