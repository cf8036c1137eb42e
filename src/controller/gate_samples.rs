//! The health gates sampled at the edge: for the evaluation a pool is in, the due gates
//! read the cluster's watch-fed index (and Prometheus) and their trackers combine into the
//! verdict the planner reads.

use kube::ResourceExt;

use super::evaluation::{self, NOT_YET, NodeDrain, UPDATE};
use super::state::Controller;
use crate::gates::{self, EventRecord, Gate, GateInputs, PodTally, Tracker};
use crate::kube::crd::NodePoolRotation;
use crate::kube::index::ClusterIndex;
use crate::metrics::GateResult;
use rota_core::fleet::resolved::GateCheck;
use rota_core::rotate::GateVerdict;

impl Controller {
    /// The health gates' verdict for the evaluation the checkpoint is in, sampled here at the
    /// edge from the cluster index (and Prometheus) when a sample is due.
    pub(super) async fn sample_gates(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        now: chrono::DateTime<chrono::Utc>,
    ) -> GateVerdict {
        let evaluation = evaluation::of_pool(npr, desired);
        // The owner drains a node of the pool: no sample until it is done (see
        // `evaluation::owner_draining`).
        let waits = evaluation == UPDATE && owner_draining(&self.index, desired);
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        if evaluation != state.evaluation {
            state.trackers.iter_mut().for_each(Tracker::reset);
            state.evaluation = evaluation.clone();
        }
        let gs = match &state.gates {
            _ if evaluation.is_empty() || desired.gates.is_empty() => {
                return GateVerdict::Passing;
            }
            _ if evaluation == NOT_YET => {
                return GateVerdict::Pending(
                    "health gates are checked once the new nodes are Ready".into(),
                );
            }
            Err(gates::GateError::Invalid { gate, .. }) => {
                let reason = state.gates.as_ref().err().map(|e| e.to_string());
                return GateVerdict::Failed {
                    gate: gate.clone(),
                    reason: reason.unwrap_or_default(),
                };
            }
            Ok(gs) => gs,
        };
        if desired
            .gates
            .iter()
            .any(|g| matches!(g.check, GateCheck::Events { .. }))
        {
            self.index.want_events();
        }
        if !waits && state.trackers.iter().any(|t| t.due(now)) {
            let pm = self.metrics.pool(&npr.spec.cluster, &npr.spec.pool);
            take_samples(
                &self.index,
                &desired.gates,
                gs,
                &mut state.trackers,
                &pm,
                now,
            )
            .await;
        }
        gates::combine(&state.trackers)
    }
}

/// Whether the owner of `desired`'s pool is draining one of its nodes now, read from the
/// index (a node not synced yet drains nothing).
fn owner_draining(index: &ClusterIndex, desired: &rota_core::fleet::resolved::DesiredPool) -> bool {
    let state = index.read();
    let nodes = state
        .all_nodes()
        .filter(|n| n.labels.matches(&desired.node_selector))
        .map(|n| NodeDrain {
            name: &n.name,
            kept_off: n.cordoned || n.owner_unschedulable,
            going: state
                .pods_on(&n.name)
                .iter()
                .filter(|(_, p)| p.terminating && !p.daemon_set)
                .count(),
        });
    evaluation::owner_draining(nodes).is_some()
}

/// Sample the gates that are due from the index (and Prometheus) and count each sample. What
/// the index has not listed yet is no sample (the gates stay pending); what its failing watch
/// cannot answer for is unseen: those gates fail their sample (fail closed), never pass on an
/// empty view.
async fn take_samples(
    index: &ClusterIndex,
    specs: &[rota_core::fleet::resolved::ResolvedGate],
    gs: &[Box<dyn Gate>],
    trackers: &mut [Tracker],
    pm: &crate::metrics::PoolMetrics<'_>,
    now: chrono::DateTime<chrono::Utc>,
) {
    let Some((pods, events, unseen)) = gate_inputs(index, specs) else {
        return;
    };
    let inputs = GateInputs {
        pods: &pods,
        events: &events,
        now,
    };
    let mut taken = gates::record_blind(specs, trackers, &unseen, now);
    taken.extend(gates::sample_due(gs, trackers, &inputs).await);
    for (gate, passed) in taken {
        let r = if passed {
            GateResult::Pass
        } else {
            GateResult::Fail
        };
        pm.record_gate(&gate, r);
    }
}

/// The gates' view of the cluster, from the index: every pod's health and, when an events
/// gate asks, the index's window of events; what the index cannot answer for is reported in
/// `Unseen` (never an empty cluster: see `gates::record_blind`). `None` while a kind the
/// gates read has not been listed yet (a watch just started): no sample this pass.
fn gate_inputs(
    index: &ClusterIndex,
    gates: &[rota_core::fleet::resolved::ResolvedGate],
) -> Option<(PodTally, Vec<EventRecord>, gates::Unseen)> {
    use crate::kube::index::NotObserved;
    let state = index.read();
    let wants = |f: fn(&GateCheck) -> bool| gates.iter().any(|g| f(&g.check));
    let mut unseen = gates::Unseen::default();
    let pods = if wants(|c| matches!(c, GateCheck::Pods { .. })) {
        match state.pod_tally() {
            Ok(p) => p,
            Err(NotObserved::NotSynced(_)) => return None,
            Err(e) => {
                unseen.pods = Some(e.to_string());
                PodTally::default()
            }
        }
    } else {
        PodTally::default()
    };
    let events = if wants(|c| matches!(c, GateCheck::Events { .. })) {
        match state.events() {
            Ok(e) => e,
            Err(NotObserved::NotSynced(_)) => return None,
            Err(e) => {
                unseen.events = Some(e.to_string());
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    Some((pods, events, unseen))
}
