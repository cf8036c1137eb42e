//! A batch's and the pool's end: old instances terminated with a decrement, the pool's
//! cleanup (the maximum size and the annotations restored, a partial rollout's template),
//! and a finished rotation.

use super::{Planner, Step, dur, owner, seconds, stop};
use crate::rotate::action::Action;
use crate::rotate::checkpoint::{Batch, Checkpoint, Stage};
use crate::rotate::listing::listed;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl<'a> Planner<'a> {
    pub(super) fn terminating(&mut self, cp: &mut Checkpoint, batch: Batch) -> Step {
        let pushed_before = self.actions.len();
        let mut left = Vec::new();
        let mut undrained = false;
        for c in &batch.old_nodes {
            let Some(inst) = self.obs.instance(&c.instance_id) else {
                continue;
            };
            left.push(c.instance_id.clone());
            if inst.lifecycle == crate::cloud::Lifecycle::Terminating {
                continue;
            }
            // Re-validate right before the destructive call (invariant 3): a pod may have been
            // scheduled on the cordoned node since the drain (one that tolerates it).
            if let Some(n) = self.obs.node(&c.node) {
                if n.blocking_termination().next().is_some() {
                    undrained = true;
                    continue;
                }
                if !n.cordoned {
                    // Its cordon was lost (a crash before it was sent, or someone undid it):
                    // cordon again and terminate on a later, fresher observation.
                    self.push(
                        Action::Cordon {
                            node: n.name.clone(),
                            owner: owner(&self.desired.name, &batch),
                        },
                        format!(
                            "batch {}: node {} is about to be terminated",
                            batch.number, n.name
                        ),
                    );
                    continue;
                }
            }
            self.push(
                Action::Terminate {
                    instance_id: c.instance_id.clone(),
                    node: Some(c.node.clone()),
                },
                format!(
                    "batch {}: node {} is drained; terminate it and decrement capacity",
                    batch.number, c.node
                ),
            );
        }
        if undrained && self.actions.len() == pushed_before {
            let mut batch = batch;
            batch.stage_since = self.now;
            return Step::Next(Stage::Draining { batch });
        }
        if left.is_empty() {
            if let Some(t) = batch.cordoned_at {
                cp.pace.get_or_insert_default().drain_seconds = Some(seconds(self.now - t));
            }
            let until = self.now + dur(self.desired.policy.batch_soak);
            return Step::Next(Stage::Soaking { batch, until });
        }
        stop(
            Stage::Terminating { batch },
            Phase::Rotating,
            Reason::Terminating,
            format!("terminating {}", listed(&left, ", ")),
        )
    }

    pub(super) fn cleanup(&mut self, cp: &mut Checkpoint) -> Step {
        let g = &self.obs.group;
        // Worked example: max 4 raised to 6 for the surge; the autoscaler grew the group to 5
        // meanwhile. The max goes back to 5: as close to 4 as it can without the cloud
        // removing an instance of its choosing, and no headroom is left for more growth.
        let max = cp.original_max.max(g.desired);
        if g.max != max {
            let grew = if max > cp.original_max {
                format!(
                    " (not {}: the group grew to {} meanwhile)",
                    cp.original_max, g.desired
                )
            } else {
                String::new()
            };
            self.push(
                Action::SetMax { max },
                format!(
                    "rotation done: restore the group's maximum size from {} to {max}{grew}",
                    g.max
                ),
            );
        }
        let partial = !cp.rolling_back && self.desired.policy.percent < 100;
        let template = if partial {
            cp.origin_image.clone()
        } else {
            cp.target_image.clone()
        };
        if g.template_image != template {
            self.push(
                Action::SetImage {
                    image: template.clone(),
                },
                if partial {
                    format!(
                        "partial rollout ({}%) done: replacements the cloud makes must boot the old image {template}",
                        self.desired.policy.percent
                    )
                } else {
                    format!("rotation done: new instances boot {template}")
                },
            );
        }
        for name in &cp.annotated_nodes {
            let removal = Action::SetScaleDownDisabled {
                node: name.clone(),
                disabled: false,
            };
            // `release_annotations` may have asked for it already in this plan.
            if let Some(n) = self.obs.node(name)
                && n.scale_down_disabled
                && !self.actions.iter().any(|a| a.action == removal)
            {
                self.push(
                    removal,
                    "rotation done: the autoscaler may manage this node again",
                );
            }
        }
        if !self.actions.is_empty() {
            return stop(
                Stage::Cleanup,
                Phase::Soaking,
                Reason::Cleanup,
                "rotation done; restoring the group",
            );
        }
        cp.annotated_nodes.clear();
        Step::Next(Stage::Done)
    }

    pub(super) fn done(&mut self, cp: &mut Checkpoint) -> Step {
        let d = self.desired;
        if let Some(from) = cp
            .rejected_image
            .as_ref()
            .filter(|_| d.image != cp.target_image)
        {
            let why = cp.rollback_reason.clone().unwrap_or_default();
            return stop(
                Stage::Done,
                Phase::Failed,
                Reason::RolledBack,
                format!("rolled back from {from}: {why}"),
            );
        }
        if let Some(from) = &cp.rejected_image {
            // The repo pins the image the pool rolled back to again (the revert of the bad
            // pin): the stop's cause is gone, nobody needs to act. The pool stays done and
            // keeps the rejected image, so pinning it again still stays put.
            return stop(
                Stage::Done,
                Phase::Succeeded,
                Reason::RolledBack,
                format!(
                    "rolled back to {} ({}), which the repo pins; {from} was rejected",
                    d.version, cp.target_image
                ),
            );
        }
        if cp.rolling_back {
            return stop(
                Stage::Done,
                Phase::Succeeded,
                Reason::RolledBack,
                format!("rolled back to {} ({})", cp.target_version, cp.target_image),
            );
        }
        stop(
            Stage::Done,
            Phase::Succeeded,
            Reason::Done,
            format!(
                "{} of {} node(s) on {} ({})",
                self.obs
                    .nodes
                    .iter()
                    .filter(|n| self.image_of(n).as_deref() == Some(cp.target_image.as_str()))
                    .count(),
                self.obs.nodes.len(),
                cp.target_version,
                cp.target_image
            ),
        )
    }
}
