//! Undoing a batch (`Abandoning`): the old nodes given back, the new ones drained and taken
//! back, the surge withdrawn; what a halt, a rollback or a cancelled pipelined batch leaves.

use super::{Planner, Step, dur, owner, stop};
use crate::rotate::action::Action;
use crate::rotate::checkpoint::{Batch, Checkpoint, Stage};
use crate::rotate::listing::listed;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl<'a> Planner<'a> {
    pub(super) fn abandoning(
        &mut self,
        cp: &mut Checkpoint,
        batch: Batch,
        why: String,
        halt: Option<String>,
    ) -> Step {
        let owner = owner(&self.desired.name, &batch);
        // Invariant 8 while the batch is undone: what the cloud makes meanwhile boots the
        // image the pool came from.
        self.template_on_origin(cp);
        self.give_back_old_nodes(&batch, &owner, &why);
        let (left, to_drain, new) = self.take_back_new_nodes(&batch, &owner, &why);
        let waiting = self.drain(cp, batch.number, &to_drain, None, &mut Vec::new());
        let pending_surge = self.pending_surge(&batch, new.len());
        if left.is_empty() && !pending_surge && self.actions.is_empty() {
            if let Some(why) = halt {
                cp.halted = Some(why.clone());
                return stop(Stage::Between, Phase::Paused, Reason::BatchFailed, why);
            }
            return Step::Next(Stage::Between);
        }
        let mut msg = format!("undoing batch {}: {why}", batch.number);
        if !waiting.is_empty() {
            msg.push_str(&format!("; draining {}", listed(&waiting, ", ")));
        }
        if pending_surge {
            msg.push_str("; waiting for the cloud to list the surge instances");
        }
        stop(
            Stage::Abandoning { batch, why, halt },
            Phase::RollingBack,
            Reason::Abandoning,
            msg,
        )
    }

    /// Undoing a batch gives its old nodes back first: capacity returns before anything
    /// else is drained.
    pub(super) fn give_back_old_nodes(&mut self, batch: &Batch, owner: &str, why: &str) {
        for c in &batch.old_nodes {
            if let Some(n) = self.obs.node(&c.node)
                && n.cordoned
                && n.cordoned_by.as_deref() == Some(owner)
            {
                self.push(
                    Action::Uncordon {
                        node: n.name.clone(),
                    },
                    format!("batch {} abandoned: {why}", batch.number),
                );
            }
        }
    }

    /// The instances an undone batch brought up leave like any replaced node: cordoned, then
    /// re-observed and drained, then terminated with decrement. Never cordon and terminate in
    /// the same plan: a pod scheduled onto a Ready, apparently empty node between this
    /// observation and the cordon would die without eviction (invariant 3). Returns the
    /// instances still there, the nodes to drain, and the batch's new instances.
    pub(super) fn take_back_new_nodes(
        &mut self,
        batch: &Batch,
        owner: &str,
        why: &str,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        let mut left = Vec::new();
        let mut to_drain = Vec::new();
        let new: Vec<String> = self
            .new_instances_of(batch)
            .into_iter()
            .filter(|id| !batch.replaced.contains(id))
            .collect();
        for id in &new {
            let Some(inst) = self.obs.instance(id) else {
                continue;
            };
            left.push(id.clone());
            if inst.lifecycle == crate::cloud::Lifecycle::Terminating {
                continue;
            }
            match self.obs.node_of(id) {
                Some(n) if !n.cordoned => {
                    // Cordoned first, so that nothing new lands on it; terminated once an
                    // observation made after the cordon shows it empty.
                    self.push(
                        Action::Cordon {
                            node: n.name.clone(),
                            owner: owner.to_string(),
                        },
                        format!(
                            "batch {} abandoned: its new node {} leaves",
                            batch.number, n.name
                        ),
                    );
                    if n.evictable().next().is_some() {
                        to_drain.push(n.name.clone());
                    }
                }
                Some(n) if n.blocking_termination().next().is_some() => {
                    to_drain.push(n.name.clone())
                }
                n => self.push(
                    Action::Terminate {
                        instance_id: id.clone(),
                        node: n.map(|n| n.name.clone()),
                    },
                    format!(
                        "batch {} abandoned ({why}): its instance {id} runs no workload",
                        batch.number
                    ),
                ),
            }
        }
        (left, to_drain, new)
    }

    /// Whether surge instances of an undone batch may still be listed late: a group whose
    /// capacity is still raised for the batch has instances to come, and they must be
    /// terminated too. Once `nodeReadyTimeout` has passed, the request is taken back instead.
    pub(super) fn pending_surge(&mut self, batch: &Batch, listed_new: usize) -> bool {
        let expected = batch.old_nodes.len();
        let mut pending_surge =
            self.obs.group.desired >= self.surge_capacity(batch) && listed_new < expected;
        if pending_surge
            && self.now >= batch.stage_since + dur(self.desired.policy.node_ready_timeout)
        {
            // The cloud still has not created them: take the request back, down to exactly
            // the instances it lists, re-checked right before the call (`WithdrawSurge`), so
            // that the cloud never gets to choose an instance to remove.
            let listed: Vec<String> = self.obs.live_instances().map(|i| i.id.clone()).collect();
            let missing = (expected - listed_new) as u32;
            if (listed.len() as u32) < self.obs.group.desired {
                self.push(
                    Action::WithdrawSurge {
                        desired: listed.len() as u32,
                        instances: listed,
                    },
                    format!(
                        "batch {} abandoned: withdraw the {missing} surge instance(s) the cloud never created",
                        batch.number
                    ),
                );
            }
            pending_surge = false;
        }
        pending_surge
    }
}
