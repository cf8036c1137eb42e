//! Waiting for a batch's new nodes to be Ready (`nodeReadyTimeout`): nodes that never are
//! replaced (`nodeReadyRetries`), replacements followed, and why a batch never got Ready.

use super::{Planner, Step, abandon, dur, seconds, stop};
use crate::rotate::action::Action;
use crate::rotate::checkpoint::{Batch, Checkpoint, Stage};
use crate::rotate::listing::listed;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl<'a> Planner<'a> {
    pub(super) fn waiting_ready(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let d = self.desired;
        self.follow_replacements(&mut batch);
        if let Some(why) = self.stalled_launch(&batch, &batch.new_instances) {
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        let not_ready = self.not_ready(cp, &batch);
        if not_ready.is_empty() {
            // The annotations are independent of what follows: go on in the same step.
            let mut batch = batch;
            if let Some(t) = batch.started_at {
                cp.pace.get_or_insert_default().boot_seconds = Some(seconds(self.now - t));
            }
            batch.stage_since = self.now;
            return Step::Next(Stage::Gating { batch });
        }
        let deadline = batch.stage_since + dur(d.policy.node_ready_timeout);
        if self.now >= deadline {
            let stuck = self.stuck_instances(&batch);
            if batch.ready_retries < d.policy.node_ready_retries && !stuck.is_empty() {
                return self.replace_not_ready(batch, stuck, &not_ready);
            }
            let why = self.never_ready_reason(cp, &batch, stuck.len(), &not_ready);
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        stop(
            Stage::WaitingReady { batch },
            Phase::Rotating,
            Reason::WaitingReady,
            format!("waiting for {} to be Ready", listed(&not_ready, ", ")),
        )
    }

    /// The batch's new instances that exist but have no Ready node: what a replacement can
    /// heal (a missing replacement of one the cloud took back is the cloud's to launch).
    pub(super) fn stuck_instances(&self, batch: &Batch) -> Vec<(String, Option<String>)> {
        batch
            .new_instances
            .iter()
            .filter(|id| {
                self.obs
                    .instance(id)
                    .is_some_and(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating)
            })
            .filter_map(|id| match self.obs.node_of(id) {
                Some(n) if n.ready => None,
                n => Some((id.clone(), n.map(|n| n.name.clone()))),
            })
            .collect()
    }

    /// `nodeReadyRetries`: new instances not Ready within `nodeReadyTimeout` are replaced,
    /// after a backoff of 30 s, then 60 s, ... (at most 10 min): terminated (the desired
    /// capacity lowered with them), then, once they are gone, surged again from the batch's
    /// own target, so the pool never holds more than its size plus one batch, terminating
    /// instances included; the new ones get a fresh `nodeReadyTimeout`. A boot the cloud did
    /// not replace, a node that registered late, a capacity shortfall cured minutes later
    /// heal this way; an image that never boots fails every attempt.
    pub(super) fn replace_not_ready(
        &mut self,
        mut batch: Batch,
        stuck: Vec<(String, Option<String>)>,
        not_ready: &[String],
    ) -> Step {
        let d = self.desired;
        let attempt = batch.ready_retries + 2;
        let of = d.policy.node_ready_retries + 1;
        let timeout = d.policy.node_ready_timeout;
        let at = batch.retry_at(self.now);
        self.blocked_by = not_ready.iter().map(|i| format!("instance {i}")).collect();
        if self.now < at {
            self.until = Some(at);
            let message = format!(
                "batch {}: new instance(s) {} not Ready within nodeReadyTimeout {timeout}: replacing them at {} (attempt {attempt} of {of})",
                batch.number,
                listed(not_ready, ", "),
                at.to_rfc3339()
            );
            return stop(
                Stage::WaitingReady { batch },
                Phase::Rotating,
                Reason::ReplacingNotReady,
                message,
            );
        }
        for (id, node) in &stuck {
            self.push(
                Action::Terminate {
                    instance_id: id.clone(),
                    node: node.clone(),
                },
                format!(
                    "batch {}: new instance {id} not Ready within nodeReadyTimeout {timeout}: replaced (attempt {attempt} of {of})",
                    batch.number
                ),
            );
        }
        let ids: Vec<String> = stuck.into_iter().map(|(id, _)| id).collect();
        batch.new_instances.retain(|id| !ids.contains(id));
        let message = format!(
            "batch {}: replacing {} (not Ready within nodeReadyTimeout {timeout}; attempt {attempt} of {of})",
            batch.number,
            listed(&ids, ", ")
        );
        batch.never_ready.extend(ids);
        batch.ready_retries += 1;
        batch.replace_at = None;
        batch.stage_since = self.now;
        stop(
            Stage::Surging { batch },
            Phase::Rotating,
            Reason::ReplacingNotReady,
            message,
        )
    }

    /// Before a batch surges again for the instances it replaced: those still terminating
    /// are waited for (the pool never holds more than one batch of surge); one the terminate
    /// did not take (it got Ready and pods meanwhile, so it was not drained) is the batch's
    /// again if Ready, else terminated again. `Some`: wait, with why.
    pub(super) fn replaced_gone(&mut self, batch: &mut Batch) -> Option<String> {
        let mut leaving = Vec::new();
        let mut back = Vec::new();
        for id in &batch.never_ready {
            let Some(i) = self.obs.instance(id) else {
                continue;
            };
            if i.lifecycle == crate::cloud::Lifecycle::Terminating {
                leaving.push(id.clone());
                continue;
            }
            match self.obs.node_of(id) {
                Some(n) if n.ready => back.push(id.clone()),
                node => {
                    let node = node.map(|n| n.name.clone());
                    self.push(
                        Action::Terminate {
                            instance_id: id.clone(),
                            node,
                        },
                        format!(
                            "batch {}: new instance {id} was not Ready in time: replaced",
                            batch.number
                        ),
                    );
                    leaving.push(id.clone());
                }
            }
        }
        batch.never_ready.retain(|id| !back.contains(id));
        batch.new_instances.extend(back);
        (!leaving.is_empty()).then(|| {
            format!(
                "batch {}: waiting for replaced instance(s) {} to go before surging again",
                batch.number,
                listed(&leaving, ", ")
            )
        })
    }

    /// Why the batch fails once its replacements are spent: the image, when no attempt on
    /// it ever got a node Ready ("image X did not boot: 3 of 3 new instance(s) never
    /// Ready"), else the instances that are not.
    pub(super) fn never_ready_reason(
        &self,
        cp: &Checkpoint,
        batch: &Batch,
        stuck: usize,
        not_ready: &[String],
    ) -> String {
        let d = self.desired;
        let tried = batch.never_ready.len() + batch.new_instances.len();
        let failed = batch.never_ready.len() + stuck;
        // A zone out of capacity says nothing about the image: the pool waits for a person
        // (or a retry later) without blaming it.
        let short: Vec<String> = self
            .launch_failures(&batch.new_instances)
            .into_iter()
            .filter(|(_, e)| e.is_capacity_shortfall())
            .map(|(at, e)| format!("{at}: {e}"))
            .collect();
        if !short.is_empty() {
            return format!(
                "batch {}: the cloud had no capacity for {} new instance(s) within nodeReadyTimeout {}, over {} attempt(s) (last: {})",
                batch.number,
                short.len(),
                d.policy.node_ready_timeout,
                batch.ready_retries + 1,
                short.join("; ")
            );
        }
        if batch.ready_retries > 0 && failed == tried {
            return format!(
                "image {} ({}) did not boot: {failed} of {tried} new instance(s) never Ready within nodeReadyTimeout {}, over {} attempt(s) (last: {})",
                cp.target_image,
                cp.target_version,
                d.policy.node_ready_timeout,
                batch.ready_retries + 1,
                listed(not_ready, ", ")
            );
        }
        let after = if batch.ready_retries > 0 {
            format!(" after {} replacement(s)", batch.ready_retries)
        } else {
            String::new()
        };
        format!(
            "batch {}: new instance(s) {} not Ready within nodeReadyTimeout {}{after}",
            batch.number,
            listed(not_ready, ", "),
            d.policy.node_ready_timeout
        )
    }

    /// The cloud replaces a surge instance that failed to boot (desired capacity is
    /// unchanged): the batch follows it to its replacement rather than wait for an instance
    /// that is gone. Worked example: i-m2 fails its boot at minute 5 and the cloud launches
    /// i-m3 at minute 6; the batch now waits for i-m1 and i-m3, and i-m3 gets its own
    /// nodeReadyTimeout from minute 6.
    pub(super) fn follow_replacements(&self, batch: &mut Batch) {
        let n = batch.old_nodes.len();
        let alive = |id: &String| {
            self.obs
                .instance(id)
                .is_some_and(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating)
        };
        // With lagging describes, an instance missing from one may simply be newer than what
        // it shows: missing counts as gone only once the describe is a lag newer than the
        // moment every instance of the batch had been seen (`stage_since`). Listed as
        // terminating is gone at once.
        let lag =
            chrono::Duration::from_std(self.obs.describe_lag).unwrap_or(chrono::Duration::MAX);
        let seen = batch
            .stage_since
            .max(self.obs.leading_since.unwrap_or(batch.stage_since));
        let absence_proves = self.obs.describe_lag.is_zero() || self.now >= seen + lag;
        let taken_back = |id: &String| match self.obs.instance(id) {
            Some(i) => i.lifecycle == crate::cloud::Lifecycle::Terminating,
            None => absence_proves,
        };
        // An instance counted as taken back because a describe did not list it, listed again
        // and alive: that describe lagged (the cloud took nothing back). It is the batch's
        // again, with the time it has had (measured in the chaos suite, seeds 91 and 107:
        // without this, the batch waited out nodeReadyTimeout for replacements the cloud had
        // no reason to launch, and halted).
        let returned: Vec<String> = batch
            .replaced
            .iter()
            .filter(|id| alive(id))
            .cloned()
            .collect();
        if !returned.is_empty() {
            batch.replaced.retain(|id| !returned.contains(id));
            batch.new_instances.extend(returned);
        }
        let (gone, kept): (Vec<String>, Vec<String>) = batch
            .new_instances
            .iter()
            .cloned()
            .partition(|id| taken_back(id));
        // Newcomers only fill the places of the gone (an instance the autoscaler added
        // meanwhile is not the batch's).
        let newcomers: Vec<String> = self
            .new_instances_of(batch)
            .into_iter()
            .filter(|id| {
                !batch.new_instances.contains(id)
                    && !batch.replaced.contains(id)
                    && !batch.never_ready.contains(id)
            })
            .filter(|id| alive(id))
            .take(n.saturating_sub(kept.len()))
            .collect();
        if !gone.is_empty() || !newcomers.is_empty() {
            batch.replaced.extend(gone);
            batch.new_instances = kept;
            if !newcomers.is_empty() && batch.replaced.len() <= n {
                batch.stage_since = self.now;
            }
            batch.new_instances.extend(newcomers);
        }
    }

    /// What keeps the batch's new instances from counting as Ready (none: all are); each
    /// Ready node is kept off the autoscaler's scale-down until the pool is done.
    pub(super) fn not_ready(&mut self, cp: &mut Checkpoint, batch: &Batch) -> Vec<String> {
        let n = batch.old_nodes.len();
        let mut not_ready = Vec::new();
        if batch.new_instances.len() < n {
            not_ready.push(format!(
                "{} replacement(s) of surge instance(s) {} the cloud took back",
                n - batch.new_instances.len(),
                listed(&batch.replaced, ", ")
            ));
        }
        for id in &batch.new_instances {
            match self.obs.node_of(id) {
                Some(n) if n.ready => {
                    // Nodes already recorded are re-annotated by `keep_annotations`. With
                    // no autoscaler sharing the group, nothing would remove a Ready node
                    // that waits empty: no annotation (two node patches a node saved).
                    if self.obs.cluster_autoscaler
                        && !n.scale_down_disabled
                        && !cp.annotated_nodes.contains(&n.name)
                    {
                        cp.annotated_nodes.push(n.name.clone());
                        self.push(
                            Action::SetScaleDownDisabled {
                                node: n.name.clone(),
                                disabled: true,
                            },
                            format!(
                                "batch {}: keep the autoscaler off new node {} until the pool is done",
                                batch.number, n.name
                            ),
                        );
                    }
                }
                Some(n) => not_ready.push(format!("{id} (node {} not Ready)", n.name)),
                // A cause that may still clear (the cloud retries it, or the node comes up
                // after all): say why the node has not come yet.
                None => match self.launch_failures(std::slice::from_ref(id)).first() {
                    Some((at, e)) => not_ready.push(format!(
                        "{id} (no node registered; the cloud's last attempt to create {at} failed: {e})"
                    )),
                    None => not_ready.push(format!("{id} (no node registered)")),
                },
            }
        }
        not_ready
    }
}
