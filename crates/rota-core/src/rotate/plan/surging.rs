//! Between batches and surging: the next batch chosen (windows, runway, blackouts,
//! candidates), its surge capacity computed from what the group holds, the template set and
//! the capacity raised, and a launch the cloud failed or took back noticed.

use std::collections::BTreeSet;

use super::{Planner, Step, abandon, dur, expected_batch, held_by, names, stop};
use crate::rotate::action::Action;
use crate::rotate::checkpoint::{Batch, Checkpoint, ChosenNode, Stage};
use crate::rotate::listing::listed;
use crate::rotate::observed::ObservedNode;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;
use crate::rotate::window;

impl<'a> Planner<'a> {
    /// The capacity a batch's surge asks for now: its recorded absolute target, less the
    /// instances of the group before the surge that someone else has since removed (the
    /// autoscaler's scale-down decrements the capacity too). Re-sending the recorded target
    /// after such a removal would surge a second time (invariant 1); after a crash before
    /// the first request, nothing is gone and the target is sent as recorded. An instance
    /// already terminating when the batch started is not counted: the capacity it held was
    /// not in the target (seed 524 of the chaos suite: a failed boot's instance terminated
    /// with decrement just before the next batch, whose surge of one then asked for nothing).
    pub(super) fn surge_capacity(&self, batch: &Batch) -> u32 {
        let gone = batch
            .instances_before
            .iter()
            .filter(|id| !batch.terminating_before.contains(id))
            .filter(|id| {
                batch.taken_back.contains(id)
                    || self
                        .obs
                        .instance(id)
                        .is_none_or(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating)
            })
            .count() as u32;
        batch.target_capacity.saturating_sub(gone)
    }

    /// Records in `batch.taken_back` the instances of the group before its surge that this
    /// describe lists as terminating (see [`Batch::taken_back`]).
    pub(super) fn note_taken_back(&self, batch: &mut Batch) {
        for id in &batch.instances_before {
            let terminating = self
                .obs
                .instance(id)
                .is_some_and(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating);
            if terminating
                && !batch.terminating_before.contains(id)
                && !batch.taken_back.contains(id)
            {
                batch.taken_back.push(id.clone());
            }
        }
    }

    /// Node names of the instances a batch brought up.
    pub(super) fn new_nodes_of(&self, batch: &Batch) -> Vec<String> {
        self.new_instances_of(batch)
            .iter()
            .filter_map(|id| self.obs.node_of(id).map(|n| n.name.clone()))
            .collect()
    }

    /// Instances a batch brought up: recorded ones, plus any the group lists now that were
    /// not there before the surge (the surge may have been requested before a crash and
    /// listed only after it).
    pub(super) fn new_instances_of(&self, batch: &Batch) -> Vec<String> {
        let before: BTreeSet<&str> = batch.instances_before.iter().map(|s| s.as_str()).collect();
        let mut ids: BTreeSet<String> = batch.new_instances.iter().cloned().collect();
        for i in &self.obs.group.instances {
            if !before.contains(i.id.as_str()) {
                ids.insert(i.id.clone());
            }
        }
        ids.into_iter().collect()
    }

    /// The instances among `ids` that have no Ready node and whose creation the cloud reports
    /// failed (GCP's per-instance `lastAttempt`, an Azure VM whose provisioning failed), each
    /// named with its zone and the cloud's code.
    pub(super) fn launch_failures(
        &self,
        ids: &[String],
    ) -> Vec<(String, &'a crate::cloud::LaunchError)> {
        let obs = self.obs;
        ids.iter()
            .filter(|id| obs.node_of(id).is_none_or(|n| !n.ready))
            .filter_map(|id| {
                let i = obs.instance(id)?;
                let e = i.launch_error.as_ref()?;
                let zone = if i.zone.is_empty() {
                    String::new()
                } else {
                    format!(" in zone {}", i.zone)
                };
                Some((format!("{id}{zone}"), e))
            })
            .collect()
    }

    /// A launch failure that retrying cannot fix (a quota, an invalid template: classified as
    /// a failed call would be, [`crate::errors::Class::Stalled`]) fails the batch at once and
    /// pauses the pool, naming instance, zone and code. Others are waited out within
    /// `nodeReadyTimeout` and then replaced like a node not Ready (`nodeReadyRetries`, with
    /// backoff): a transient failure the cloud retries itself, and a zone out of capacity,
    /// which heals as capacity frees.
    pub(super) fn stalled_launch(&self, batch: &Batch, ids: &[String]) -> Option<String> {
        use crate::errors::{Class, Classify};
        let failed: Vec<String> = self
            .launch_failures(ids)
            .into_iter()
            .filter(|(_, e)| e.kind.classify().class == Class::Stalled)
            .filter(|(_, e)| !e.is_capacity_shortfall())
            .map(|(at, e)| format!("{at}: {e} ({})", e.kind.reason()))
            .collect();
        (!failed.is_empty()).then(|| {
            format!(
                "batch {}: group {} cannot create surge instance(s): {}",
                batch.number,
                self.desired.group,
                listed(&failed, "; ")
            )
        })
    }

    /// Between batches: start the next one, or go to the pool soak.
    pub(super) fn between(&mut self, cp: &mut Checkpoint) -> Step {
        let d = self.desired;
        let remaining = self.remaining(Some(cp));
        if remaining == 0 {
            if cp.rolling_back {
                return Step::Next(Stage::Cleanup);
            }
            return Step::Next(Stage::PoolSoak {
                until: self.now + dur(d.policy.pool_soak),
            });
        }
        match self.choose_batch(cp, remaining) {
            // A replace batch checks the gates before it disrupts anything (`replace`).
            Ok(batch) if batch.replace => Step::Next(Stage::Gating { batch }),
            Ok(batch) => Step::Next(Stage::Surging { batch }),
            Err(step) => *step,
        }
    }

    /// The next batch: its old nodes and its surge, within the window, the describe lag and
    /// the surge bound (invariant 1); or why none may start now. Used between batches and,
    /// pipelined, while the current batch soaks (its old instances are gone by then).
    pub(super) fn choose_batch(
        &mut self,
        cp: &mut Checkpoint,
        remaining: u32,
    ) -> Result<Batch, Box<Step>> {
        let obs = self.obs;
        self.may_start_batch(cp, remaining)?;
        let candidates = self.candidates(cp, remaining)?;
        let replace = self.replaces();
        let n = if replace {
            self.replace_size(cp, remaining, candidates.len() as u32)?
        } else {
            self.batch_surge(cp, remaining, candidates.len() as u32)?
        };
        cp.batches_started += 1;
        let batch = Batch {
            number: cp.batches_started,
            old_nodes: candidates
                .iter()
                .take(n as usize)
                .map(|(n, id)| ChosenNode {
                    node: n.name.clone(),
                    instance_id: id.clone(),
                })
                .collect(),
            // A replace batch leaves the capacity as it is.
            target_capacity: obs.group.desired + if replace { 0 } else { n },
            instances_before: obs.group.instances.iter().map(|i| i.id.clone()).collect(),
            terminating_before: obs
                .group
                .instances
                .iter()
                .filter(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating)
                .map(|i| i.id.clone())
                .collect(),
            taken_back: Vec::new(),
            new_instances: Vec::new(),
            replaced: Vec::new(),
            never_ready: Vec::new(),
            ready_retries: 0,
            replace_at: None,
            stage_since: self.now,
            started_at: Some(self.now),
            cordoned_at: None,
            deferral_ended: Vec::new(),
            replace,
        };
        Ok(batch)
    }

    /// Whether a batch may start now: inside a maintenance window with room for it before
    /// the window closes, outside every blackout (`rotate::window::may_start`), and with a
    /// describe that shows the rotation's own capacity changes (`--describe-lag`).
    pub(super) fn may_start_batch(
        &mut self,
        cp: &Checkpoint,
        remaining: u32,
    ) -> Result<(), Box<Step>> {
        let d = self.desired;
        let expected = expected_batch(d, cp);
        match window::may_start(&d.policy.windows, &d.policy.blackouts, self.now, expected) {
            Ok(None) => {}
            Ok(Some(deferral)) => {
                self.blocked_by = held_by(d, &deferral);
                self.until = deferral.until();
                let reason = match deferral {
                    window::Deferral::Blackout { .. } => Reason::Blackout,
                    _ => Reason::OutsideWindow,
                };
                return Err(Box::new(stop(
                    Stage::Between,
                    Phase::Waiting,
                    reason,
                    format!("{remaining} node(s) left; {}", deferral.describe(expected)),
                )));
            }
            Err(e) => {
                return Err(Box::new(stop(
                    Stage::Between,
                    Phase::Failed,
                    Reason::InvalidWindow,
                    e.to_string(),
                )));
            }
        }

        if let Some(why) = self.lag_wait(cp) {
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Rotating,
                Reason::DescribeLag,
                format!("{remaining} node(s) left; {why}"),
            )));
        }
        Ok(())
    }

    /// Why `n` may not be disrupted at all. A pod's do-not-disrupt holds only the drain, up
    /// to `drain.maxDeferral`, where one is set: such a node is taken and cordoned, and
    /// the pod goes last. A node's own annotation always holds.
    pub(super) fn disruption_blocker(&self, n: &ObservedNode) -> Option<String> {
        if self.desired.policy.drain.max_deferral.is_some() && !n.do_not_disrupt {
            return None;
        }
        n.disruption_blocker()
    }

    /// The old nodes a batch may take, in the order it takes them: nodes not on the target,
    /// backed by a running instance of the group, not protected by do-not-disrupt; or why
    /// none can be replaced.
    pub(super) fn candidates(
        &mut self,
        cp: &Checkpoint,
        remaining: u32,
    ) -> Result<Vec<(&'a ObservedNode, String)>, Box<Step>> {
        let d = self.desired;
        let obs = self.obs;
        // Ready nodes go first, then by name so that plans
        // are deterministic: a not-Ready node may be a kubelet that is down, whose pods can
        // be evicted but never confirmed gone, so it goes last, when nothing else is left.
        let mut blocked = Vec::new();
        let mut orphans = Vec::new();
        let mut candidates: Vec<(&ObservedNode, String)> = Vec::new();
        for n in &obs.nodes {
            if self.image_of(n).as_deref() == Some(cp.target_image.as_str()) {
                continue;
            }
            let Some(inst) = obs.instance_of(n) else {
                orphans.push(n.name.clone());
                continue;
            };
            if inst.lifecycle == crate::cloud::Lifecycle::Terminating {
                continue;
            }
            if let Some(why) = self.disruption_blocker(n) {
                blocked.push(why);
                continue;
            }
            candidates.push((n, inst.id.clone()));
        }
        candidates.sort_by_key(|(n, _)| (!n.ready, n.name.clone()));
        if candidates.is_empty() {
            let mut why = Vec::new();
            if !blocked.is_empty() {
                why.push(listed(&blocked, "; "));
            }
            if !orphans.is_empty() {
                why.push(format!(
                    "node(s) {} match no instance of group {}",
                    listed(&orphans, ", "),
                    d.group
                ));
            }
            if why.is_empty() {
                why.push("the remaining old instances are terminating".into());
            }
            self.blocked_by = if blocked.is_empty() {
                orphans.iter().map(|n| format!("node {n}")).collect()
            } else {
                blocked.clone()
            };
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Paused,
                if blocked.is_empty() {
                    Reason::NoCandidates
                } else {
                    Reason::DoNotDisrupt
                },
                format!(
                    "{remaining} node(s) left but none can be replaced: {}",
                    why.join("; ")
                ),
            )));
        }
        Ok(candidates)
    }

    /// How many nodes the next batch replaces: the batch size, what is left, the candidates,
    /// and the surge bound (invariant 1); or why the group must shrink first.
    pub(super) fn batch_surge(
        &mut self,
        cp: &Checkpoint,
        remaining: u32,
        candidates: u32,
    ) -> Result<u32, Box<Step>> {
        let d = self.desired;
        let obs = self.obs;
        // Invariant 1: never more than the size at start plus one batch. Worked example: a
        // pool of 10 with batch 3 may hold 13 instances; if the autoscaler grew it to 12 in
        // the meantime, this batch surges by 1 only.
        let batch_size = d.policy.batch.nodes(cp.pool_size);
        // With `--describe-lag`, a describe here shows every capacity change of this rotation
        // and every scale-down (`lag_wait`, `fence_autoscaler`); it can only miss a scale-up.
        // So the pool's size is what it shows when that is more than at the start (the
        // autoscaler grew the pool) and the bound follows it; otherwise a pool the autoscaler
        // grew by a batch would wait for it to shrink again.
        let size = if self.obs.describe_lag.is_zero() {
            cp.original_desired
        } else {
            cp.original_desired.max(obs.group.desired)
        };
        let bound = size + batch_size;
        let held = obs.group.desired.max(obs.group.instances.len() as u32);
        let n = batch_size
            .min(remaining)
            .min(candidates)
            .min(bound.saturating_sub(held));
        if n == 0 {
            self.blocked_by = vec![format!(
                "group {} ({held} instances, bound {bound})",
                d.group
            )];
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Waiting,
                Reason::SurgeBudget,
                format!(
                    "the group holds {held} instances; the surge bound is {bound} (size {size} + batch {batch_size}); waiting for it to shrink{}",
                    if self.obs.describe_lag.is_zero() {
                        " (with --describe-lag set, the bound follows a size the autoscaler grew)"
                    } else {
                        ""
                    }
                ),
            )));
        }
        Ok(n)
    }

    pub(super) fn surging(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let d = self.desired;
        let n = batch.old_nodes.len();
        if let Some(wait) = self.replaced_gone(&mut batch) {
            return stop(
                Stage::Surging { batch },
                Phase::Rotating,
                Reason::ReplacingNotReady,
                wait,
            );
        }
        self.ask_for_surge(cp, &mut batch);
        let mut new = self.new_instances_of(&batch);
        new.retain(|id| !batch.never_ready.contains(id));
        if let Some(why) = self.stalled_launch(&batch, &new) {
            // The cloud listed the surge but cannot create it (quota, a stock-out): waiting
            // out nodeReadyTimeout would only delay the same end. The batch fails and is
            // undone; the pool pauses with the cloud's reason.
            self.actions.clear();
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        let mut batch = match self.surge_late(batch, new.len()) {
            Ok(batch) => batch,
            Err(step) => return *step,
        };
        if !self.actions.is_empty() || new.len() < n {
            let mut msg = format!(
                "batch {}: waiting for {} of {n} new instance(s) of group {}",
                batch.number,
                n - new.len().min(n),
                d.group
            );
            for (at, e) in self.launch_failures(&new) {
                msg.push_str(&format!(
                    "; the cloud's last attempt to create {at} failed: {e}"
                ));
            }
            return stop(
                Stage::Surging { batch },
                Phase::Rotating,
                Reason::Surging,
                msg,
            );
        }
        batch.new_instances = new;
        Step::Next(Stage::WaitingReady { batch })
    }

    /// The surge asked of the group: its template on the target image, its capacity (and
    /// maximum) raised to the batch's surge, less what someone else took back since.
    fn ask_for_surge(&mut self, cp: &Checkpoint, batch: &mut Batch) {
        let g = &self.obs.group;
        if g.template_image != cp.target_image {
            self.push(
                Action::SetImage {
                    image: cp.target_image.clone(),
                },
                format!(
                    "batch {}: new instances must boot {} ({}) before the surge",
                    batch.number, cp.target_version, cp.target_image
                ),
            );
        }
        self.note_taken_back(batch);
        let want = self.surge_capacity(batch);
        if g.desired >= want {
            return;
        }
        let max = (want > g.max).then_some(want);
        let raise = max
            .map(|m| format!(", raising the maximum size from {} to {m}", g.max))
            .unwrap_or_default();
        let what = if batch.never_ready.is_empty() {
            format!(
                "surge {} new node(s) to replace {}",
                batch.old_nodes.len(),
                names(&batch.old_nodes)
            )
        } else {
            format!(
                "surge again in place of {} (replaced, not Ready in time)",
                listed(&batch.never_ready, ", ")
            )
        };
        self.push(
            Action::SetCapacity { desired: want, max },
            format!("batch {}: {what}{raise}", batch.number),
        );
    }

    /// A surge the cloud has listed only `listed` instances of by `nodeReadyTimeout`: given
    /// another timeout while retries are left (the `Err` holds the surge stage), then failed
    /// and undone (the `Err` holds the abandoning stage). `Ok`: not late.
    fn surge_late(&mut self, mut batch: Batch, listed: usize) -> Result<Batch, Box<Step>> {
        let d = self.desired;
        let n = batch.old_nodes.len();
        let deadline = batch.stage_since + dur(d.policy.node_ready_timeout);
        if listed >= n || self.now < deadline {
            return Ok(batch);
        }
        if batch.ready_retries < d.policy.node_ready_retries {
            // A capacity shortfall is often cured minutes later, and the cloud keeps trying
            // while the capacity stays asked for: it gets another nodeReadyTimeout, as many
            // times as a not-Ready node would be replaced.
            batch.ready_retries += 1;
            batch.stage_since = self.now;
            let message = format!(
                "batch {}: group {} created {listed} of {n} surge instance(s) within nodeReadyTimeout {} (quota or capacity?); the cloud keeps trying: another nodeReadyTimeout (attempt {} of {})",
                batch.number,
                d.group,
                d.policy.node_ready_timeout,
                batch.ready_retries + 1,
                d.policy.node_ready_retries + 1
            );
            return Err(Box::new(stop(
                Stage::Surging { batch },
                Phase::Rotating,
                Reason::SurgeShort,
                message,
            )));
        }
        // Capacity was asked for but the cloud never listed the instances: typically a
        // quota or capacity shortage. The batch fails; what did come up is undone.
        self.actions.clear();
        let why = format!(
            "batch {}: group {} created {listed} of {n} surge instance(s) within nodeReadyTimeout {} (quota or capacity?)",
            batch.number, d.group, d.policy.node_ready_timeout
        );
        Err(Box::new(Step::Next(abandon(
            batch,
            why.clone(),
            Some(why),
            self.now,
        ))))
    }
}
