//! `strategy: replace`: a batch is gated, cordoned, drained and its old instances removed
//! first, and the group brings up their replacements from its template: never a node more
//! than before the batch; capacity dips by one batch.
//!
//! For pools without quota or spare accelerators for a surge (GPU capacity reservations). A
//! replace batch goes through the same checkpointed stages as a surge batch, in another
//! order, and the batch records that it is one (`Batch::replace`), so that a change of
//! strategy mid-batch cannot reread its stages:
//!
//! 1. `Between`: the batch is chosen like a surge batch (windows, runway, blackouts,
//!    candidates), but only once the group lists as many live instances as its desired
//!    capacity: a batch never starts while an earlier removal is still being refilled, so
//!    capacity never dips by more than one batch. Nothing is raised: `target_capacity` is
//!    the capacity as it is.
//! 2. `Gating`: the gates are checked *before* anything is disrupted (a surge batch checks
//!    them once its new nodes are Ready; a replace batch has none yet).
//! 3. `Cordoning`, `Draining`: shared with the surge planner (PDBs, `drain.delay`,
//!    `drain.maxDeferral`, `drain.timeout`).
//! 4. `Terminating`: the group's template is set to the target, then each drained old
//!    instance is terminated *without* decrementing the desired capacity
//!    ([`Action::TerminateForReplacement`]): the group replaces it from the template.
//! 5. `Surging`, `WaitingReady`: here they wait for the replacements the group brings up
//!    itself (`nodeReadyTimeout`, `nodeReadyRetries`: a replacement not Ready in time is
//!    terminated again without a decrement after the surge's backoff, 30 s then 60 s ...,
//!    recorded in the batch's `replaceAt`), never raising the capacity.
//! 6. `Soaking`: shared (gates through `batchSoak`); no pipelining, which would start the
//!    next removal during the soak and dip capacity by a second batch.
//!
//! A crash anywhere resumes from the checkpoint: the old nodes were recorded when the batch
//! started, so a restart removes the same instances (terminating them again is a no-op) and
//! never a second batch; nothing in this file raises a capacity.

use chrono::{DateTime, Utc};

use super::{Planner, Step, dur, names, owner, seconds, stop};
use crate::cloud::Lifecycle;
use crate::fleet::resolved::RolloutStrategy;
use crate::rotate::action::Action;
use crate::rotate::checkpoint::{Batch, Checkpoint, Stage};
use crate::rotate::listing::listed;
use crate::rotate::observed::GateVerdict;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl Planner<'_> {
    /// Whether the next batch of this pool is a replace batch.
    pub(super) fn replaces(&self) -> bool {
        self.desired.policy.strategy == RolloutStrategy::Replace
    }

    /// The stages of a replace batch that are its own; `Err(stage)` for a surge batch and
    /// for the stages both share (cordoning, draining, soaking). The `Err` is no error: the
    /// stage handed back, moved, for the shared handlers (boxing it would cost every pass
    /// of every pool an allocation).
    #[allow(clippy::result_large_err)]
    pub(super) fn replace_step(
        &mut self,
        cp: &mut Checkpoint,
        stage: Stage,
    ) -> Result<Step, Stage> {
        if !stage.batch().is_some_and(|b| b.replace) {
            return Err(stage);
        }
        Ok(match stage {
            Stage::Gating { batch } => self.opening_gate(cp, batch),
            Stage::Terminating { batch } => self.removing(cp, batch),
            Stage::Surging { batch } => self.refilling(cp, batch),
            Stage::WaitingReady { batch } => self.refill_ready(cp, batch),
            Stage::Abandoning { batch, why, halt } => self.undo_replace(cp, batch, why, halt),
            other => return Err(other),
        })
    }

    /// How many nodes the next replace batch removes: the batch size, what is left, the
    /// candidates; or, while the group lists fewer live instances than its desired capacity
    /// (a removal still being refilled, a launch the cloud retries), a wait: removing more
    /// then would dip capacity by more than one batch.
    pub(super) fn replace_size(
        &mut self,
        cp: &Checkpoint,
        remaining: u32,
        candidates: u32,
    ) -> Result<u32, Box<Step>> {
        let g = &self.obs.group;
        let live = self.obs.live_instances().count() as u32;
        if live < g.desired {
            self.blocked_by = vec![format!(
                "group {} ({live} of {} instances)",
                self.desired.group, g.desired
            )];
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Rotating,
                Reason::Refilling,
                format!(
                    "{remaining} node(s) left; group {} lists {live} live instance(s) of its desired {}: waiting for it to be whole before removing the next batch (strategy replace)",
                    self.desired.group, g.desired
                ),
            )));
        }
        Ok(self
            .desired
            .policy
            .batch
            .nodes(cp.pool_size)
            .min(remaining)
            .min(candidates))
    }

    /// Before a replace batch disrupts anything: the gates (a rollback does not consult
    /// them: they are what asked for it).
    fn opening_gate(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let verdict = if cp.rolling_back {
            &GateVerdict::Passing
        } else {
            &self.obs.gates
        };
        match verdict {
            GateVerdict::Passing => {
                batch.stage_since = self.now;
                Step::Next(Stage::Cordoning { batch })
            }
            GateVerdict::Pending(g) => {
                self.blocked_by = vec![format!("gate {g}")];
                let msg = format!(
                    "batch {}: waiting for health gate {g} before removing {}",
                    batch.number,
                    names(&batch.old_nodes)
                );
                stop(
                    Stage::Gating { batch },
                    Phase::Rotating,
                    Reason::GatePending,
                    msg,
                )
            }
            GateVerdict::Failed { gate, reason } => {
                let why = format!(
                    "health gate {gate} failed before batch {}: {reason}",
                    batch.number
                );
                self.gate_failed(cp, Stage::Gating { batch }, why)
            }
        }
    }

    /// The batch's old nodes are drained: the template goes to the target, then each old
    /// instance is terminated without a decrement, so the group replaces it from the
    /// template. Once every old instance is terminating (or gone), the batch waits for the
    /// replacements.
    fn removing(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let pushed_before = self.actions.len();
        let mut left = Vec::new();
        let mut drained = Vec::new();
        let mut undrained = false;
        for c in &batch.old_nodes {
            let Some(inst) = self.obs.instance(&c.instance_id) else {
                continue;
            };
            if inst.lifecycle == Lifecycle::Terminating {
                continue;
            }
            left.push(c.instance_id.clone());
            // Re-validate right before the destructive call (invariant 3), as a surge does.
            if let Some(n) = self.obs.node(&c.node) {
                if n.blocking_termination().next().is_some() {
                    undrained = true;
                    continue;
                }
                if !n.cordoned {
                    // Its cordon was lost: cordon again, remove on a fresher observation.
                    self.push(
                        Action::Cordon {
                            node: n.name.clone(),
                            owner: owner(&self.desired.name, &batch),
                        },
                        format!(
                            "batch {}: node {} is about to be removed",
                            batch.number, n.name
                        ),
                    );
                    continue;
                }
            }
            drained.push(c.clone());
        }
        if !drained.is_empty() {
            // First, in the same plan: the replacements boot from the template.
            self.template_on_target(cp, &batch);
        }
        for c in &drained {
            self.push(
                Action::TerminateForReplacement {
                    instance_id: c.instance_id.clone(),
                    node: Some(c.node.clone()),
                },
                format!(
                    "batch {}: node {} is drained; terminate it without lowering the capacity, so the group replaces it (strategy replace)",
                    batch.number, c.node
                ),
            );
        }
        if undrained && self.actions.len() == pushed_before {
            batch.stage_since = self.now;
            return Step::Next(Stage::Draining { batch });
        }
        if left.is_empty() {
            if let Some(t) = batch.cordoned_at {
                cp.pace.get_or_insert_default().drain_seconds = Some(seconds(self.now - t));
            }
            // `nodeReadyTimeout` counts from the removal.
            batch.stage_since = self.now;
            return Step::Next(Stage::Surging { batch });
        }
        stop(
            Stage::Terminating { batch },
            Phase::Rotating,
            Reason::Terminating,
            format!(
                "removing {}; the group brings up their replacements",
                listed(&left, ", ")
            ),
        )
    }

    /// The old instances are going: wait for the group to list as many new instances as it
    /// lost, keeping its template on the target. Nothing here changes a capacity.
    fn refilling(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let d = self.desired;
        let n = batch.old_nodes.len();
        self.template_on_target(cp, &batch);
        self.capacity_put_back(&batch);
        let new: Vec<String> = self
            .new_instances_of(&batch)
            .into_iter()
            .filter(|id| !batch.never_ready.contains(id))
            .filter(|id| {
                self.obs
                    .instance(id)
                    .is_some_and(|i| i.lifecycle != Lifecycle::Terminating)
            })
            .collect();
        if let Some(why) = self.stalled_launch(&batch, &new) {
            return self.refill_failed(cp, Stage::Surging { batch }, why);
        }
        if new.len() >= n {
            batch.new_instances = new.into_iter().take(n).collect();
            return Step::Next(Stage::WaitingReady { batch });
        }
        let timeout = d.policy.node_ready_timeout;
        let short = format!(
            "batch {}: group {} brought up {} of {n} replacement(s) within nodeReadyTimeout {timeout}",
            batch.number,
            d.group,
            new.len()
        );
        if self.now >= batch.stage_since + dur(timeout) {
            if batch.ready_retries < d.policy.node_ready_retries {
                // The capacity stays asked for and the cloud keeps trying (a stock-out is
                // often cured minutes later): another nodeReadyTimeout.
                batch.ready_retries += 1;
                batch.stage_since = self.now;
                let msg = format!(
                    "{short} (quota or capacity?); the cloud keeps trying: another nodeReadyTimeout (attempt {} of {})",
                    batch.ready_retries + 1,
                    d.policy.node_ready_retries + 1
                );
                return stop(
                    Stage::Surging { batch },
                    Phase::Rotating,
                    Reason::SurgeShort,
                    msg,
                );
            }
            return self.refill_failed(
                cp,
                Stage::Surging { batch },
                format!("{short} (quota or capacity?)"),
            );
        }
        let mut msg = format!(
            "batch {}: waiting for group {} to bring up {} of {n} replacement(s) for {} (strategy replace)",
            batch.number,
            d.group,
            n - new.len(),
            names(&batch.old_nodes)
        );
        for (at, e) in self.launch_failures(&new) {
            msg.push_str(&format!(
                "; the cloud's last attempt to create {at} failed: {e}"
            ));
        }
        stop(
            Stage::Surging { batch },
            Phase::Rotating,
            Reason::Refilling,
            msg,
        )
    }

    /// The replacements are listed: wait for their nodes to be Ready. One that is not
    /// within `nodeReadyTimeout` is terminated without a decrement (the group launches
    /// another) as many times as `nodeReadyRetries` allows; one that boots an image the
    /// rotation no longer goes to (a newer version, a rollback) is replaced at once.
    fn refill_ready(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let d = self.desired;
        // After a newer version or a revert, what the group launches from now on boots it.
        self.template_on_target(cp, &batch);
        self.follow_replacements(&mut batch);
        if let Some(why) = self.stalled_launch(&batch, &batch.new_instances) {
            return self.refill_failed(cp, Stage::WaitingReady { batch }, why);
        }
        let not_ready = self.not_ready(cp, &batch);
        if not_ready.is_empty() {
            cp.pace.get_or_insert_default().boot_seconds =
                Some(seconds(self.now - batch.stage_since));
            let until = self.now + dur(d.policy.batch_soak);
            return Step::Next(Stage::Soaking { batch, until });
        }
        let stuck = self.stuck_instances(&batch);
        let (stale, stuck): (Vec<_>, Vec<_>) = stuck.into_iter().partition(|(id, _)| {
            self.obs
                .instance(id)
                .is_some_and(|i| i.image != cp.target_image)
        });
        let timed_out = self.now >= batch.stage_since + dur(d.policy.node_ready_timeout);
        let again = if timed_out
            && !stuck.is_empty()
            && batch.ready_retries < d.policy.node_ready_retries
        {
            // After a backoff, as a surge batch's (`Batch::retry_at`, in the checkpoint): a
            // node that registers late, or a boot the cloud retries, gets its chance.
            let at = batch.retry_at(self.now);
            if self.now < at && stale.is_empty() {
                return self.retry_later(batch, &not_ready, at);
            }
            batch.ready_retries += 1;
            batch.replace_at = None;
            stuck
        } else if timed_out && stale.is_empty() {
            let why = self.never_ready_reason(cp, &batch, stuck.len(), &not_ready);
            return self.refill_failed(cp, Stage::WaitingReady { batch }, why);
        } else {
            Vec::new()
        };
        let mut replaced = Vec::new();
        for (id, node) in stale.iter().chain(&again) {
            self.push(
                Action::TerminateForReplacement {
                    instance_id: id.clone(),
                    node: node.clone(),
                },
                format!(
                    "batch {}: replacement {id} is not Ready (or boots an image the rotation left): the group replaces it from its template",
                    batch.number
                ),
            );
            replaced.push(id.clone());
        }
        if !replaced.is_empty() {
            batch.new_instances.retain(|id| !replaced.contains(id));
            batch.never_ready.extend(replaced);
            batch.stage_since = self.now;
        }
        stop(
            Stage::WaitingReady { batch },
            Phase::Rotating,
            Reason::WaitingReady,
            format!(
                "waiting for replacement(s) {} to be Ready",
                listed(&not_ready, ", ")
            ),
        )
    }

    /// A replacement not Ready within `nodeReadyTimeout` is replaced at `at` (the backoff):
    /// until then the batch waits, saying when.
    fn retry_later(&mut self, batch: Batch, not_ready: &[String], at: DateTime<Utc>) -> Step {
        let d = self.desired;
        self.blocked_by = not_ready.iter().map(|i| format!("instance {i}")).collect();
        self.until = Some(at);
        let message = format!(
            "batch {}: replacement(s) {} not Ready within nodeReadyTimeout {}: the group replaces them at {} (attempt {} of {}, strategy replace)",
            batch.number,
            listed(not_ready, ", "),
            d.policy.node_ready_timeout,
            at.to_rfc3339(),
            batch.ready_retries + 2,
            d.policy.node_ready_retries + 1
        );
        stop(
            Stage::WaitingReady { batch },
            Phase::Rotating,
            Reason::ReplacingNotReady,
            message,
        )
    }

    /// Where a terminate without a decrement is two calls (GCP deletes the instance, which
    /// lowers the target size, then resizes back; Azure likewise), a crash between them
    /// leaves the group one short for good. The capacity the batch started with is put
    /// back, less what someone else removed meanwhile (an autoscaler's scale-down): never
    /// above it, so never a node more than before the batch.
    fn capacity_put_back(&mut self, batch: &Batch) {
        let removed: Vec<&str> = batch
            .old_nodes
            .iter()
            .map(|c| c.instance_id.as_str())
            .collect();
        let gone_by_others = batch
            .instances_before
            .iter()
            .filter(|id| !removed.contains(&id.as_str()))
            .filter(|id| !batch.terminating_before.contains(id))
            .filter(|id| {
                self.obs
                    .instance(id)
                    .is_none_or(|i| i.lifecycle == Lifecycle::Terminating)
            })
            .count() as u32;
        let want = batch.target_capacity.saturating_sub(gone_by_others);
        let g = &self.obs.group;
        if g.desired < want {
            let from = g.desired;
            self.push(
                Action::SetCapacity {
                    desired: want,
                    max: None,
                },
                format!(
                    "batch {}: the group's capacity fell from {want} to {from} with the removal (a delete and a resize interrupted): put back, no higher than before the batch",
                    batch.number
                ),
            );
        }
    }

    /// The group's template on the rotation's target: its replacements boot from it.
    fn template_on_target(&mut self, cp: &Checkpoint, batch: &Batch) {
        if self.obs.group.template_image == cp.target_image {
            return;
        }
        self.push(
            Action::SetImage {
                image: cp.target_image.clone(),
            },
            format!(
                "batch {}: the group's replacements must boot {} ({})",
                batch.number, cp.target_version, cp.target_image
            ),
        );
    }

    /// The group does not bring the batch's replacements up: the pool halts (the template
    /// goes back to the origin, invariant 8, so what the cloud goes on launching restores
    /// the capacity on the image the pool came from).
    fn refill_failed(&mut self, cp: &mut Checkpoint, stage: Stage, why: String) -> Step {
        cp.halted = Some(why.clone());
        stop(stage, Phase::Paused, Reason::BatchFailed, why)
    }

    /// A replace batch cancelled before its old instances were removed: its old nodes go
    /// back into service; nothing was brought up, so nothing is taken back.
    fn undo_replace(
        &mut self,
        cp: &mut Checkpoint,
        batch: Batch,
        why: String,
        halt: Option<String>,
    ) -> Step {
        self.template_on_origin(cp);
        let owner = owner(&self.desired.name, &batch);
        self.give_back_old_nodes(&batch, &owner, &why);
        let uncordons = self
            .actions
            .iter()
            .any(|a| matches!(a.action, Action::Uncordon { .. }));
        if !uncordons {
            if let Some(why) = halt {
                cp.halted = Some(why.clone());
                return stop(Stage::Between, Phase::Paused, Reason::BatchFailed, why);
            }
            return Step::Next(Stage::Between);
        }
        let msg = format!(
            "undoing batch {}: {why}; its nodes go back into service",
            batch.number
        );
        stop(
            Stage::Abandoning { batch, why, halt },
            Phase::RollingBack,
            Reason::Abandoning,
            msg,
        )
    }
}

#[cfg(test)]
mod tests;
