//! Cordoning and draining a batch's old nodes: evictions within PodDisruptionBudgets,
//! `drain.delay`, `drain.maxDeferral`, `drain.timeout` and what its end does (halt, force).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{
    Planner, Step, drain_deadline, dur, holds_the_drain, names, owner, past_deferral, stop,
};
use crate::fleet::resolved::OnDrainTimeout;
use crate::rotate::action::{Action, Planned};
use crate::rotate::checkpoint::{Batch, Checkpoint, Stage};
use crate::rotate::listing::listed;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl<'a> Planner<'a> {
    pub(super) fn cordoning(&mut self, cp: &mut Checkpoint, batch: Batch) -> Step {
        let owner = owner(&self.desired.name, &batch);
        let rolling_back = cp.rolling_back;
        let mut cordons = 0;
        let mut blocked = Vec::new();
        for c in &batch.old_nodes {
            let Some(n) = self.obs.node(&c.node) else {
                continue;
            };
            if let Some(why) = self.disruption_blocker(n) {
                blocked.push(why);
                continue;
            }
            if !n.cordoned {
                cordons += 1;
                self.push(
                    Action::Cordon {
                        node: n.name.clone(),
                        owner: owner.clone(),
                    },
                    if batch.replace {
                        format!(
                            "batch {}: drained and removed first, the group brings up its replacement (strategy replace)",
                            batch.number
                        )
                    } else if rolling_back {
                        format!(
                            "batch {}: its replacement is Ready (rolling back: gates are not consulted)",
                            batch.number
                        )
                    } else {
                        format!(
                            "batch {}: its replacement is Ready and the gates pass",
                            batch.number
                        )
                    },
                );
            }
        }
        if !blocked.is_empty() {
            self.blocked_by = blocked.clone();
            return stop(
                Stage::Cordoning { batch },
                Phase::Paused,
                Reason::DoNotDisrupt,
                format!("batch held: {}", listed(&blocked, "; ")),
            );
        }
        let mut batch = batch;
        batch.cordoned_at.get_or_insert(self.now);
        if cordons > 0 {
            // Evictions can go out right behind the cordons (apply runs them in order), but
            // termination waits for a fresh observation: one taken before the cordon may miss
            // a pod scheduled in between.
            batch.stage_since = self.now;
            let old: Vec<String> = batch.old_nodes.iter().map(|c| c.node.clone()).collect();
            let mut ended = std::mem::take(&mut batch.deferral_ended);
            let waiting = self.drain(cp, batch.number, &old, batch.cordoned_at, &mut ended);
            batch.deferral_ended = ended;
            let mut msg = format!("cordoning {}", names(&batch.old_nodes));
            if !waiting.is_empty() {
                msg.push_str(&format!("; draining: {}", listed(&waiting, ", ")));
            }
            return stop(
                Stage::Draining { batch },
                Phase::Rotating,
                Reason::Cordoning,
                msg,
            );
        }
        batch.stage_since = self.now;
        Step::Next(Stage::Draining { batch })
    }

    /// Evict what must go from `nodes`, within PDBs and the eviction interval. Returns the
    /// pods still to go, each with why it is still there (empty: the nodes are drained).
    ///
    /// `since` is when the batch's nodes were cordoned: evictions wait `drain.delay` after
    /// it, and a do-not-disrupt pod holds the drain `drain.maxDeferral` after that, then is
    /// evicted like any other and added to `ended` (the record). `None` (a batch being
    /// undone): no delay, and do-not-disrupt holds as long as it is set.
    pub(super) fn drain(
        &mut self,
        cp: &mut Checkpoint,
        batch_no: u32,
        nodes: &[String],
        since: Option<DateTime<Utc>>,
        ended: &mut Vec<String>,
    ) -> Vec<String> {
        let policy = &self.desired.policy.drain;
        let delay_end = since.map(|t| t + dur(policy.delay));
        if let Some(end) = delay_end.filter(|end| self.now < *end) {
            // Long jobs finish on their own: nothing is evicted before the delay ends.
            return nodes
                .iter()
                .filter_map(|name| self.obs.node(name))
                .flat_map(|n| n.blocking_termination())
                .map(|p| format!("{} (drain.delay until {})", p.key(), end.to_rfc3339()))
                .collect();
        }
        let deferral_end = delay_end.zip(policy.max_deferral).map(|(t, m)| t + dur(m));
        let interval = dur(policy.eviction_interval);
        let mut budget: BTreeMap<(Arc<str>, Arc<str>), u32> = BTreeMap::new();
        let mut waiting = Vec::new();
        let may_evict = |last: Option<DateTime<Utc>>, now: DateTime<Utc>| {
            interval.is_zero() || last.is_none_or(|t| now >= t + interval)
        };
        for name in nodes {
            let Some(n) = self.obs.node(name) else {
                continue;
            };
            for pod in n.blocking_termination() {
                if let Some(why) = self.held_back(pod, deferral_end, &mut budget) {
                    waiting.push(why);
                    continue;
                }
                if !may_evict(cp.last_eviction, self.now) {
                    waiting.push(format!("{} (drain.evictionInterval)", pod.key()));
                    continue;
                }
                if !interval.is_zero() {
                    cp.last_eviction = Some(self.now);
                }
                self.evict(batch_no, &n.name, pod, ended);
                waiting.push(format!("{} (evicting)", pod.key()));
            }
        }
        waiting
    }

    /// Why `pod` may not be evicted now, as the drain's status shows it beside the pod;
    /// `None`: it may. A pod a PodDisruptionBudget covers is counted against what the
    /// budget allows now (`budget`, by the budget's namespace and name).
    fn held_back(
        &self,
        pod: &crate::rotate::observed::ObservedPod,
        deferral_end: Option<DateTime<Utc>>,
        budget: &mut BTreeMap<(Arc<str>, Arc<str>), u32>,
    ) -> Option<String> {
        let policy = &self.desired.policy.drain;
        if pod.terminating {
            return Some(format!("{} (terminating)", pod.key()));
        }
        let past_deferral = deferral_end.is_some_and(|end| self.now >= end);
        match deferral_end {
            _ if !pod.do_not_disrupt || past_deferral => {}
            None => return Some(format!("{} (rota.dev/do-not-disrupt)", pod.key())),
            Some(end) => {
                return Some(format!(
                    "{} (do-not-disrupt until {}, drain.maxDeferral)",
                    pod.key(),
                    end.to_rfc3339()
                ));
            }
        }
        if pod.uses_empty_dir && !policy.delete_empty_dir_data {
            return Some(format!(
                "{} (uses emptyDir and drain.deleteEmptyDirData is false)",
                pod.key()
            ));
        }
        if pod.pdb_count > 1 {
            // The Eviction API answers 500 for such a pod: asking would fail the plan on
            // every pass and starve the evictions behind it.
            return Some(format!(
                "{} (covered by {} PodDisruptionBudgets; the Eviction API refuses it)",
                pod.key(),
                pod.pdb_count
            ));
        }
        // Invariant 2: within one plan, evict no more pods of a PDB than it allows now.
        if let Some(pdb) = &pod.pdb {
            let left = budget
                .entry((pdb.namespace.clone(), pdb.name.clone()))
                .or_insert(pdb.disruptions_allowed);
            if *left == 0 {
                return Some(format!(
                    "{} (PodDisruptionBudget {}/{} allows no disruption now)",
                    pod.key(),
                    pdb.namespace,
                    pdb.name
                ));
            }
            *left -= 1;
        }
        None
    }

    /// Evict `pod` from `node`; a do-not-disrupt pod held past `drain.maxDeferral` is
    /// recorded in `ended` (its owner asked not to be disrupted and was overruled).
    fn evict(
        &mut self,
        batch_no: u32,
        node: &str,
        pod: &crate::rotate::observed::ObservedPod,
        ended: &mut Vec<String>,
    ) {
        let policy = &self.desired.policy.drain;
        let reason = if pod.do_not_disrupt {
            if !ended.contains(&pod.key()) {
                ended.push(pod.key());
            }
            format!(
                "batch {batch_no}: drain node {node}; {} held it past drain.maxDeferral {} (do-not-disrupt), evicted like any other",
                pod.key(),
                policy.max_deferral.unwrap_or_default()
            )
        } else {
            format!("batch {batch_no}: drain node {node}")
        };
        self.actions.push(Planned {
            action: Action::Evict {
                namespace: pod.namespace.to_string(),
                pod: pod.name.to_string(),
                node: node.to_string(),
                grace_period: policy.grace_period,
            },
            reason,
        });
    }

    pub(super) fn draining(&mut self, cp: &mut Checkpoint, batch: Batch) -> Step {
        let d = self.desired;
        // The checkpoint says Draining as soon as the cordons are planned; after a crash
        // before they ran, they are sent again (idempotent), or evicted pods would come back.
        let owner = owner(&d.name, &batch);
        for c in &batch.old_nodes {
            if let Some(n) = self.obs.node(&c.node)
                && !n.cordoned
            {
                self.push(
                    Action::Cordon {
                        node: n.name.clone(),
                        owner: owner.clone(),
                    },
                    format!("batch {}: node {} is being drained", batch.number, n.name),
                );
            }
        }
        let recordoned = self
            .actions
            .iter()
            .any(|a| matches!(a.action, Action::Cordon { .. }));
        let old: Vec<String> = batch.old_nodes.iter().map(|c| c.node.clone()).collect();
        let mut batch = batch;
        let mut ended = std::mem::take(&mut batch.deferral_ended);
        let since = batch.cordoned_at.or(Some(batch.stage_since));
        let waiting = self.drain(cp, batch.number, &old, since, &mut ended);
        batch.deferral_ended = ended;
        // A node cordoned just now is terminated only after an observation made after its
        // cordon: one made before may miss a pod scheduled in between.
        if waiting.is_empty() && !recordoned {
            batch.stage_since = self.now;
            return Step::Next(Stage::Terminating { batch });
        }
        let deadline = drain_deadline(d, &batch, &waiting);
        if self.now >= deadline
            && let Some(step) = self.drain_timed_out(cp, &batch, &old, &waiting)
        {
            return step;
        }
        let blocked = waiting
            .iter()
            .any(|w| w.ends_with("(rota.dev/do-not-disrupt)"));
        self.blocked_by = waiting
            .iter()
            .filter(|w| holds_the_drain(w))
            .cloned()
            .collect();
        self.until = Some(deadline);
        let message = format!(
            "draining: {}{}",
            listed(&waiting, ", "),
            past_deferral(&batch)
        );
        stop(
            Stage::Draining { batch },
            if blocked {
                Phase::Paused
            } else {
                Phase::Rotating
            },
            if blocked {
                Reason::DoNotDisrupt
            } else {
                Reason::Draining
            },
            message,
        )
    }

    /// The drain ran past `drain.timeout`: halt (`pause`), or force-delete what eviction
    /// could not move (`force`). `None`: nothing new to do, the drain goes on.
    pub(super) fn drain_timed_out(
        &mut self,
        cp: &mut Checkpoint,
        batch: &Batch,
        old: &[String],
        waiting: &[String],
    ) -> Option<Step> {
        let d = self.desired;
        // Evictions planned in this very call are dropped: the timeout decides first.
        self.actions
            .retain(|a| !matches!(a.action, Action::Evict { .. }));
        match d.policy.drain.on_timeout {
            OnDrainTimeout::Pause => {
                self.blocked_by = waiting
                    .iter()
                    .filter(|w| holds_the_drain(w))
                    .cloned()
                    .collect();
                let why = format!(
                    "batch {}: drain not done within drain.timeout {}; blocked by: {}",
                    batch.number,
                    d.policy.drain.timeout,
                    listed(waiting, ", ")
                );
                cp.halted = Some(why.clone());
                return Some(stop(
                    Stage::Draining {
                        batch: batch.clone(),
                    },
                    Phase::Paused,
                    Reason::DrainTimeout,
                    why,
                ));
            }
            OnDrainTimeout::Force => {
                let (forced, kept) = self.force_drain(batch, old);
                if forced == 0 && !kept.is_empty() {
                    // Nothing left that force may delete, and waiting changes nothing:
                    // halt, naming the pods, rather than loop.
                    let why = format!(
                        "batch {}: drain not done within drain.timeout {}; drain.onTimeout force keeps {} (emptyDir data, drain.deleteEmptyDirData is false)",
                        batch.number,
                        d.policy.drain.timeout,
                        listed(&kept, ", ")
                    );
                    cp.halted = Some(why.clone());
                    return Some(stop(
                        Stage::Draining {
                            batch: batch.clone(),
                        },
                        Phase::Paused,
                        Reason::DrainTimeout,
                        why,
                    ));
                }
                if forced > 0 {
                    return Some(stop(
                        Stage::Draining {
                            batch: batch.clone(),
                        },
                        Phase::Rotating,
                        Reason::DrainForced,
                        format!("forcing the drain: {}", listed(waiting, ", ")),
                    ));
                }
            }
        }
        None
    }

    /// Force-delete the pods that block the batch's old nodes, except what a human protected
    /// with do-not-disrupt (that always wins) and the data of emptyDir pods the policy keeps
    /// (`deleteEmptyDirData: false`). Returns how many it deletes and the pods it keeps.
    pub(super) fn force_drain(&mut self, batch: &Batch, old: &[String]) -> (usize, Vec<String>) {
        let d = self.desired;
        let keep_data = !d.policy.drain.delete_empty_dir_data;
        let mut forced = 0;
        let mut kept = Vec::new();
        for name in old {
            let Some(n) = self.obs.node(name) else {
                continue;
            };
            for pod in n.blocking_termination() {
                if pod.do_not_disrupt || pod.terminating {
                    continue;
                }
                if pod.uses_empty_dir && keep_data {
                    kept.push(pod.key());
                    continue;
                }
                forced += 1;
                self.actions.push(Planned {
                    action: Action::DeletePod {
                        namespace: pod.namespace.to_string(),
                        pod: pod.name.to_string(),
                        node: n.name.clone(),
                    },
                    reason: format!(
                        "batch {}: drain.timeout {} passed and drain.onTimeout is force",
                        batch.number, d.policy.drain.timeout
                    ),
                });
            }
        }
        (forced, kept)
    }
}
