//! What a fleet stop still does for a batch it holds: keep the cluster autoscaler off the
//! batch's new nodes.
//!
//! A stop holds every disruptive action (no surge, cordon, eviction or terminate) but lets a
//! boot already asked of the cloud complete, so the batch's new nodes turn Ready and wait,
//! empty, for the clear. Outside a stop each new Ready node is annotated
//! `cluster-autoscaler.kubernetes.io/scale-down-disabled` as its batch waits for it
//! (`Planner::not_ready`); a stop returns before that stage runs, so without this the
//! annotation never came: the cluster autoscaler removed the waiting nodes after its
//! 10 minutes of "unneeded" (with a decrement), and after the clear the batch waited for
//! replacements nobody launched until it halted at `nodeReadyTimeout` (the chaos suite's
//! seeds 144, 266 and 319). The annotation disrupts nothing, so the stop keeps giving it.

use super::Planner;
use crate::rotate::action::Action;
use crate::rotate::checkpoint::{Checkpoint, Stage};

impl Planner<'_> {
    /// The new Ready nodes of the batch a fleet stop holds (and of its pipelined next
    /// batch), and those recorded earlier whose annotation is missing, annotated and
    /// recorded as the batch's own pass would have.
    pub(super) fn protect_held_nodes(&mut self, cp: &mut Checkpoint) {
        if !self.obs.cluster_autoscaler {
            return;
        }
        let held: Vec<String> = [Some(&cp.stage), cp.next.as_deref()]
            .into_iter()
            .flatten()
            .filter_map(|s| match s {
                Stage::Surging { batch }
                | Stage::WaitingReady { batch }
                | Stage::Gating { batch } => Some(batch),
                _ => None,
            })
            .flat_map(|b| b.new_instances.iter().cloned())
            .collect();
        for id in held {
            let Some(n) = self.obs.node_of(&id).filter(|n| n.ready) else {
                continue;
            };
            if !cp.annotated_nodes.contains(&n.name) {
                cp.annotated_nodes.push(n.name.clone());
            }
        }
        for name in cp.annotated_nodes.clone() {
            let again = Action::SetScaleDownDisabled {
                node: name.clone(),
                disabled: true,
            };
            if self.obs.node(&name).is_some_and(|n| !n.scale_down_disabled)
                && !self.actions.iter().any(|a| a.action == again)
            {
                self.push(
                    again,
                    format!(
                        "fleet stop: keep the autoscaler off node {name} while the batch waits for the clear"
                    ),
                );
            }
        }
    }
}
