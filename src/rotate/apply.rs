//! Acting on a plan: persist the checkpoint, then execute the actions in order.
//!
//! The order is the whole point: the status (with the checkpoint) is written first, and if
//! that fails nothing is done. Then each action runs; the first failure stops the rest (a
//! later action may depend on an earlier one: the image must be set before the surge), and
//! the next reconcile plans again from the checkpoint and what it observes.
//!
//! The status is written whole (a `PUT` of the status subresource) with the
//! `resourceVersion` the pass read: a field that became empty is empty on the server too (a
//! merge patch would keep the stale value), and a write based on a resource someone changed
//! since is refused with 409 Conflict; the controller then observes again instead of acting.
//! Under leader election every side effect is preceded by a check that the lease is still
//! held with margin, and the status carries the writer's [`Fence`]: a term older than the one
//! that wrote the stored status never writes over it (invariant 7). End to end in
//! `tests/resume_sim.rs` and `tests/leadership_sim.rs`.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::observed::{CORDONED_BY, SCALE_DOWN_DISABLED};
use super::{Action, Phase, Plan, Planned};
use crate::cloud::{CloudError, NodeGroups};
use crate::controller::leader::{Leadership, LeaseError};
use crate::errors::{Class, Classified, Classify, KubeCall};
use crate::fleet::duration::GoDuration;
use crate::kube::crd::{Fence, NodePoolRotation, NodePoolRotationStatus};

/// The field manager rota's writes are recorded under.
pub const FIELD_MANAGER: &str = "rota";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("writing the status of NodePoolRotation {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("{action}: {source}")]
    Cloud {
        action: String,
        #[source]
        source: CloudError,
    },
    /// The Eviction API answered 429: a PodDisruptionBudget allows no disruption now.
    #[error("evicting {namespace}/{pod}: a PodDisruptionBudget allows no disruption now")]
    EvictionBlocked { namespace: String, pod: String },
    /// The resource changed since this pass read it (409 on the status write): observe
    /// again, act on nothing planned from the old read.
    #[error("NodePoolRotation {name} changed since it was read; observing again")]
    Conflict { name: String },
    /// The lease is not held (or not with margin) right before a side effect.
    #[error("{0}")]
    NotLeading(#[from] LeaseError),
    /// The stored status was written by a later leadership term than ours.
    #[error(
        "NodePoolRotation {name} was written by {} (term {}), newer than ours (term {}): not writing over it",
        .stored.holder, .stored.transitions, .ours.transitions
    )]
    Fenced {
        name: String,
        stored: Fence,
        ours: Fence,
    },
    /// The fresh read of a node's pods right before its termination found pods a drain must
    /// still evict (the index was behind): nothing was terminated (invariant 3).
    #[error("not terminating {node}: {} still run on it ({})", pods.len(), pods.join(", "))]
    NotDrained { node: String, pods: Vec<String> },
}

impl Classify for ApplyError {
    fn classify(&self) -> Classified {
        match self {
            ApplyError::EvictionBlocked { .. } => Classified::new(Class::Wait, "EvictionBlocked"),
            // The index was behind the fresh read before a terminate; it catches up within
            // moments and the next plan drains the pods.
            ApplyError::NotDrained { .. } => Classified::new(Class::Transient, "NotDrained"),
            ApplyError::Conflict { .. } => Classified::new(Class::Transient, "Conflict"),
            ApplyError::NotLeading(_) => Classified::new(Class::Wait, "NotLeading"),
            ApplyError::Fenced { .. } => Classified::new(Class::Wait, "Fenced"),
            ApplyError::Cloud { source, .. } => source.classify(),
            ApplyError::Status { source, .. } | ApplyError::Kube { source, .. } => {
                crate::kube::kube_error(source, KubeCall::Act)
            }
        }
    }
}

impl ApplyError {
    /// What a retry should do ([`crate::errors`]).
    pub fn retry(&self) -> Class {
        self.classify().class
    }

    /// A stable, low-cardinality reason for events and metrics ([`crate::errors`]).
    pub fn reason(&self) -> &'static str {
        self.classify().reason
    }
}

/// Whether an Eviction API error is a PodDisruptionBudget refusal: a 429 whose details name
/// the `DisruptionBudget` cause (as the API server and the simulated one send it). A bare
/// 429 is API Priority and Fairness throttling the client.
pub fn is_pdb_refusal(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) if s.code == 429 => s
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget")),
        _ => false,
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Everything `apply` acts through.
pub struct Edge<'a> {
    pub client: kube::Client,
    pub groups: &'a dyn NodeGroups,
    /// Publishes Kubernetes events; `None` to publish none (tests, readOnly tooling).
    pub recorder: Option<Recorder>,
    /// Counts evictions by outcome and terminations (`None`: not measured).
    pub metrics: Option<crate::metrics::Metrics>,
    /// Checked before every side effect; `None` when the caller is the only writer by
    /// construction (a test driving one controller, no election).
    pub lease: Option<Leadership>,
}

impl Edge<'_> {
    /// The fence to act under: `Ok(None)` without election, an error when the lease is not
    /// held with margin.
    pub fn may_act(&self) -> Result<Option<Fence>, ApplyError> {
        match &self.lease {
            None => Ok(None),
            Some(l) => Ok(Some(l.check()?)),
        }
    }
}

/// The status to write for `plan`, given the previous one (pure).
pub fn status_for(
    plan: &Plan,
    previous: Option<&NodePoolRotationStatus>,
    commit: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> NodePoolRotationStatus {
    let s = &plan.status;
    let moved = !plan.actions.is_empty()
        || previous.is_none_or(|p| {
            p.phase != s.phase
                || p.checkpoint.as_ref().map(|c| c.stage.name())
                    != plan.checkpoint.as_ref().map(|c| c.stage.name())
        });
    let last_progress_time = if moved {
        Some(now)
    } else {
        previous.and_then(|p| p.last_progress_time)
    };
    // The estimate is taken when the stage (or phase) changes and kept in between: it is a
    // time, not a countdown, and a status that changed on every pass would be written on
    // every pass.
    let estimated_completion = match (moved, previous) {
        (false, Some(p)) => p.estimated_completion,
        _ => s.remaining.and_then(|d| {
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
        }),
    };
    let old = previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    let cond = |type_: &str, on: bool| {
        let status = if on { "True" } else { "False" };
        let kept = old
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map(|c| c.last_transition_time.clone());
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: s.reason.into(),
            message: s.message.clone(),
            observed_generation: generation,
            last_transition_time: kept.unwrap_or_else(|| time(now)),
        }
    };
    NodePoolRotationStatus {
        phase: s.phase,
        message: s.message.clone(),
        total: s.total,
        on_target: s.on_target,
        ready: s.ready,
        checkpoint: plan.checkpoint.clone(),
        conditions: vec![
            cond("Ready", s.phase == Phase::Succeeded),
            cond(
                "Progressing",
                matches!(
                    s.phase,
                    Phase::Rotating | Phase::Soaking | Phase::RollingBack
                ),
            ),
            cond("Paused", s.phase == Phase::Paused),
        ],
        observed_commit: Some(commit.to_string()),
        observed_generation: generation,
        last_progress_time,
        estimated_completion,
        // Kept; a leader stamps its own term when it writes (`apply_with_status`).
        fence: previous.and_then(|p| p.fence.clone()),
    }
}

fn time(t: DateTime<Utc>) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// The object to `PUT` on the status subresource: the resource as this pass read it (its
/// `resourceVersion` is the precondition) with the whole new status (pure).
pub fn status_object(npr: &NodePoolRotation, status: &NodePoolRotationStatus) -> NodePoolRotation {
    let mut next = npr.clone();
    next.status = Some(status.clone());
    // The server keeps its own managed fields; sending them back is noise.
    next.metadata.managed_fields = None;
    next
}

/// Whether `ours` may write over the status stored now (pure): refused only when the stored
/// status carries a later term.
pub fn fence_admits(stored: Option<&Fence>, ours: Option<&Fence>) -> bool {
    match (stored, ours) {
        (Some(s), Some(o)) => s.admits(o),
        _ => true,
    }
}

/// The merge patch that cordons a node and records its owner.
pub fn cordon_patch(owner: &str) -> serde_json::Value {
    json!({"metadata": {"annotations": {CORDONED_BY: owner}}, "spec": {"unschedulable": true}})
}

/// The merge patch that uncordons a node and drops rota's owner annotation.
pub fn uncordon_patch() -> serde_json::Value {
    json!({"metadata": {"annotations": {CORDONED_BY: null}}, "spec": {"unschedulable": false}})
}

/// The merge patch that sets or removes the autoscaler's scale-down-disabled annotation.
pub fn scale_down_patch(disabled: bool) -> serde_json::Value {
    let v = if disabled { json!("true") } else { json!(null) };
    json!({"metadata": {"annotations": {SCALE_DOWN_DISABLED: v}}})
}

/// Eviction parameters: `drain.gracePeriod` overrides the pod's own grace period.
pub fn evict_params(grace: Option<GoDuration>) -> EvictParams {
    EvictParams {
        delete_options: grace.map(|g| DeleteParams {
            grace_period_seconds: Some(g.0.as_secs() as u32),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    }
}

/// Persist the plan's checkpoint and status, then execute its actions in order. Returns how
/// many actions ran; the first failure stops the rest.
pub async fn apply(
    edge: &Edge<'_>,
    npr: &NodePoolRotation,
    plan: &Plan,
    now: DateTime<Utc>,
) -> Result<usize, ApplyError> {
    let status = status_for(
        plan,
        npr.status.as_ref(),
        &npr.spec.source_commit,
        npr.metadata.generation,
        now,
    );
    apply_with_status(edge, npr, plan, &status).await
}

/// [`apply`] with the status already computed (the controller adds the conditions it owns
/// besides the plan's, such as `Stuck`, before it is written).
pub async fn apply_with_status(
    edge: &Edge<'_>,
    npr: &NodePoolRotation,
    plan: &Plan,
    status: &NodePoolRotationStatus,
) -> Result<usize, ApplyError> {
    let name = npr.name_any();
    if !plan.actions.is_empty() {
        // Inside the controller's pool (and batch) span: which pool and batch this is.
        tracing::info!(
            actions = plan.actions.len(),
            first = %plan.actions[0].action,
            why = %plan.actions[0].reason,
            pool = %name,
            phase = ?status.phase,
            "applying the plan"
        );
    }
    let ours = edge.may_act()?;
    let stored = npr.status.as_ref().and_then(|s| s.fence.as_ref());
    if !fence_admits(stored, ours.as_ref()) {
        return Err(ApplyError::Fenced {
            name,
            stored: stored.cloned().expect("refused only with a stored fence"),
            ours: ours.expect("refused only with a fence of ours"),
        });
    }
    let mut status = status.clone();
    if ours.is_some() {
        status.fence = ours;
    }
    let api: Api<NodePoolRotation> = Api::all(edge.client.clone());
    match api
        .replace_status(
            &name,
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            },
            &status_object(npr, &status),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if api_code(&e) == Some(409) => return Err(ApplyError::Conflict { name }),
        Err(source) => return Err(ApplyError::Status { name, source }),
    }

    let group = &npr.spec.group;
    let metrics = edge
        .metrics
        .as_ref()
        .map(|m| m.pool(&npr.spec.cluster, &npr.spec.pool));
    // One Normal event per kind of action in the plan, not one per action: a batch evicts
    // hundreds of pods, and an event write for each was most of rota's API writes.
    let mut done_by_kind = EventDigest::default();
    for (done, p) in plan.actions.iter().enumerate() {
        // The lease may have run out while earlier actions ran (a slow cloud call).
        if let Err(e) = edge.may_act() {
            tracing::warn!(done, error = %e, "apply stopped: the lease is not held");
            publish_digest(edge, npr, &done_by_kind).await;
            return Err(e);
        }
        let result = execute(edge, group, p).await;
        if let Some(m) = &metrics {
            record(m, &p.action, &result);
        }
        if let Err(e) = result {
            publish_digest(edge, npr, &done_by_kind).await;
            publish(
                edge,
                npr,
                EventType::Warning,
                e.reason(),
                &format!("{}: {e}", p.action),
            )
            .await;
            return Err(e).inspect_err(|_| tracing::warn!(done, "apply stopped"));
        }
        done_by_kind.add(event_reason(&p.action), &p.reason);
    }
    publish_digest(edge, npr, &done_by_kind).await;
    Ok(plan.actions.len())
}

/// The actions of one plan that were carried out, by event reason, in plan order.
#[derive(Default)]
struct EventDigest {
    kinds: Vec<(&'static str, Vec<String>)>,
}

impl EventDigest {
    fn add(&mut self, reason: &'static str, note: &str) {
        match self.kinds.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, notes)) => notes.push(note.to_string()),
            None => self.kinds.push((reason, vec![note.to_string()])),
        }
    }

    /// One `(reason, note)` per kind: the action's own reason alone, or the count and as many
    /// of the reasons as fit an event note (Kubernetes caps it at 1 kB).
    fn events(&self) -> Vec<(&'static str, String)> {
        self.kinds
            .iter()
            .map(|(reason, notes)| {
                if let [one] = notes.as_slice() {
                    return (*reason, one.clone());
                }
                let mut note = format!("{} actions: ", notes.len());
                let mut shown = 0;
                for n in notes {
                    let sep = if shown == 0 { "" } else { "; " };
                    // Room left for the "and N more" tail.
                    if note.len() + sep.len() + n.len() > 960 {
                        break;
                    }
                    note.push_str(sep);
                    note.push_str(n);
                    shown += 1;
                }
                if shown < notes.len() {
                    note.push_str(&format!("; and {} more", notes.len() - shown));
                }
                (*reason, note)
            })
            .collect()
    }
}

async fn publish_digest(edge: &Edge<'_>, npr: &NodePoolRotation, digest: &EventDigest) {
    for (reason, note) in digest.events() {
        publish(edge, npr, EventType::Normal, reason, &note).await;
    }
}

/// Count what an action did: evictions by outcome (a PDB refusal is `throttled`), instances
/// terminated.
fn record(m: &crate::metrics::PoolMetrics<'_>, action: &Action, result: &Result<bool, ApplyError>) {
    use crate::metrics::Outcome;
    match (action, result) {
        (Action::Evict { .. }, Ok(true)) => m.record_eviction(Outcome::Ok),
        (Action::Evict { .. }, Ok(false)) => m.record_eviction(Outcome::NotFound),
        (Action::Evict { .. }, Err(ApplyError::EvictionBlocked { .. })) => {
            m.record_eviction(Outcome::Throttled)
        }
        (Action::Evict { .. }, Err(_)) => m.record_eviction(Outcome::Error),
        (Action::Terminate { .. }, Ok(_)) => m.record_terminated(1),
        _ => {}
    }
}

fn event_reason(a: &Action) -> &'static str {
    match a {
        Action::SetImage { .. } => "SetImage",
        Action::SetCapacity { .. } => "SetCapacity",
        Action::SetMax { .. } => "SetMaxSize",
        Action::Cordon { .. } => "Cordon",
        Action::Uncordon { .. } => "Uncordon",
        Action::Evict { .. } => "Evict",
        Action::DeletePod { .. } => "ForceDelete",
        Action::Terminate { .. } => "Terminate",
        Action::SetScaleDownDisabled { .. } => "ScaleDownDisabled",
        Action::WithdrawSurge { .. } => "WithdrawSurge",
    }
}

/// Run one action. `Ok(false)`: nothing to do, its goal was already reached (a pod already
/// gone).
async fn execute(
    edge: &Edge<'_>,
    group: &crate::cloud::GroupRef,
    p: &Planned,
) -> Result<bool, ApplyError> {
    let cloud = |source| ApplyError::Cloud {
        action: p.action.to_string(),
        source,
    };
    let kube = |source| ApplyError::Kube {
        action: p.action.to_string(),
        source,
    };
    let nodes: Api<Node> = Api::all(edge.client.clone());
    let merge = PatchParams::default();
    match &p.action {
        Action::SetImage { image } => edge
            .groups
            .set_image(group, image)
            .await
            .map(|()| true)
            .map_err(cloud),
        Action::SetCapacity { desired, max } => edge
            .groups
            .set_capacity(group, *desired, *max)
            .await
            .map(|()| true)
            .map_err(cloud),
        Action::SetMax { max } => edge
            .groups
            .set_max(group, *max)
            .await
            .map(|()| true)
            .map_err(cloud),
        Action::Cordon { node, owner } => nodes
            .patch(node, &merge, &Patch::Merge(cordon_patch(owner)))
            .await
            .map(|_| true)
            .map_err(kube),
        Action::Uncordon { node } => nodes
            .patch(node, &merge, &Patch::Merge(uncordon_patch()))
            .await
            .map(|_| true)
            .map_err(kube),
        Action::SetScaleDownDisabled { node, disabled } => nodes
            .patch(node, &merge, &Patch::Merge(scale_down_patch(*disabled)))
            .await
            .map(|_| true)
            .map_err(kube),
        Action::Evict {
            namespace,
            pod,
            grace_period,
            ..
        } => {
            let pods: Api<Pod> = Api::namespaced(edge.client.clone(), namespace);
            match pods.evict(pod, &evict_params(*grace_period)).await {
                Ok(_) => Ok(true),
                // Already gone: the eviction's goal is reached.
                Err(e) if api_code(&e) == Some(404) => Ok(false),
                // Only a 429 that names a disruption budget is a PDB refusal; one from API
                // Priority and Fairness is throttling, retried as transient below.
                Err(e) if is_pdb_refusal(&e) => Err(ApplyError::EvictionBlocked {
                    namespace: namespace.clone(),
                    pod: pod.clone(),
                }),
                Err(e) => Err(kube(e)),
            }
        }
        Action::DeletePod { namespace, pod, .. } => {
            let pods: Api<Pod> = Api::namespaced(edge.client.clone(), namespace);
            match pods.delete(pod, &DeleteParams::default()).await {
                Ok(_) => Ok(true),
                Err(e) if api_code(&e) == Some(404) => Ok(false),
                Err(e) => Err(kube(e)),
            }
        }
        Action::WithdrawSurge { desired, instances } => {
            // Re-validated against a fresh description right before the call: an instance
            // listed since the plan would be the one the cloud removes.
            let now = edge.groups.describe(group).await.map_err(cloud)?;
            let appeared = now.instances.iter().any(|i| {
                i.lifecycle != crate::cloud::Lifecycle::Terminating && !instances.contains(&i.id)
            });
            if appeared {
                return Ok(false);
            }
            edge.groups
                .set_capacity(group, *desired, None)
                .await
                .map(|()| true)
                .map_err(cloud)
        }
        Action::Terminate { instance_id, node } => {
            // Re-validate against fresh state right before the destructive call: the plan
            // came from the watch-fed index, which may be behind (invariant 3).
            if let Some(node) = node {
                let fresh = fresh_pods_on(edge, node).await.map_err(kube)?;
                // As the planner judges it (`ObservedNode::blocking_termination`): the pods a
                // dead kubelet can never finish shutting down do not hold its node.
                let kubelet_ready = fresh_kubelet_ready(edge, node).await.map_err(kube)?;
                let holding = crate::kube::observe::pods_holding(&fresh, kubelet_ready);
                if !holding.is_empty() {
                    return Err(ApplyError::NotDrained {
                        node: node.clone(),
                        pods: holding,
                    });
                }
            }
            edge.groups
                .terminate(group, instance_id, true)
                .await
                .map(|()| true)
                .map_err(cloud)
        }
    }
}

/// One read of the pods bound to `node` (`fieldSelector=spec.nodeName=<node>`): a list the
/// API server answers from the node's pods alone (the `agent_scale` bench counts these
/// reads apart from the writes).
async fn fresh_pods_on(edge: &Edge<'_>, node: &str) -> Result<Vec<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::all(edge.client.clone());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let list = pods.list(&lp).await?;
    Ok(list.items)
}

/// One read of `node`: whether its kubelet reports Ready (a node that is gone has none).
async fn fresh_kubelet_ready(edge: &Edge<'_>, node: &str) -> Result<bool, kube::Error> {
    let nodes: Api<Node> = Api::all(edge.client.clone());
    Ok(nodes.get_opt(node).await?.is_some_and(|n| {
        n.status
            .and_then(|s| s.conditions)
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }))
}

/// Publish an event on the resource; failures to publish are logged, never fatal.
async fn publish(
    edge: &Edge<'_>,
    npr: &NodePoolRotation,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let Some(rec) = &edge.recorder else { return };
    if edge.may_act().is_err() {
        return;
    }
    let reference: ObjectReference = npr.object_ref(&());
    let ev = Event {
        type_,
        reason: reason.into(),
        // Kubernetes caps an event note at 1 kB.
        note: Some(note.chars().take(1000).collect()),
        action: "Rotate".into(),
        secondary: None,
    };
    if let Err(e) = rec.publish(&ev, &reference).await {
        tracing::warn!(error = %e, "publishing an event failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_publishes_one_event_per_kind_of_action_with_the_count() {
        let mut d = EventDigest::default();
        d.add("Cordon", "cordon n1: batch 1");
        for i in 0..200 {
            d.add("Evict", &format!("evict default/web-{i} from n1: batch 1"));
        }
        let ev = d.events();
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert_eq!(ev[0], ("Cordon", "cordon n1: batch 1".to_string()));
        assert_eq!(ev[1].0, "Evict");
        assert!(
            ev[1]
                .1
                .starts_with("200 actions: evict default/web-0 from n1"),
            "{}",
            ev[1].1
        );
        assert!(ev[1].1.ends_with("more"), "{}", ev[1].1);
        assert!(ev[1].1.len() <= 1000, "{}", ev[1].1.len());
        assert!(EventDigest::default().events().is_empty());
    }
    use crate::cloud::CloudErrorKind;
    use crate::rotate::StatusSummary;

    fn plan(phase: Phase, actions: usize) -> Plan {
        Plan {
            actions: (0..actions)
                .map(|i| Planned {
                    action: Action::Uncordon {
                        node: format!("n{i}"),
                    },
                    reason: "r".into(),
                })
                .collect(),
            dry_run: vec![],
            checkpoint: None,
            status: StatusSummary {
                phase,
                reason: "Draining",
                message: "draining: app/web-1 (evicting)".into(),
                total: 4,
                on_target: 2,
                ready: 4,
                remaining: None,
            },
        }
    }

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + s, 0).unwrap()
    }

    #[test]
    fn status_records_progress_and_keeps_condition_transition_times() {
        let s1 = status_for(&plan(Phase::Rotating, 1), None, "abc", Some(3), at(0));
        assert_eq!(s1.last_progress_time, Some(at(0)));
        assert_eq!(s1.observed_commit.as_deref(), Some("abc"));
        let progressing = s1
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .unwrap();
        assert_eq!(progressing.status, "True");
        // Same phase, nothing done: no progress, transition times kept.
        let s2 = status_for(&plan(Phase::Rotating, 0), Some(&s1), "abc", Some(3), at(60));
        assert_eq!(s2.last_progress_time, Some(at(0)));
        assert_eq!(s2.conditions, s1.conditions);
        // Paused: the Paused condition flips and gets a new transition time.
        let s3 = status_for(&plan(Phase::Paused, 0), Some(&s2), "abc", Some(3), at(120));
        let paused = s3.conditions.iter().find(|c| c.type_ == "Paused").unwrap();
        assert_eq!(paused.status, "True");
        assert_eq!(paused.last_transition_time, time(at(120)));
        assert_eq!(s3.last_progress_time, Some(at(120)));
    }

    #[test]
    fn the_estimated_completion_is_a_time_kept_until_the_rotation_moves() {
        let timed = |phase, actions, mins: u64| {
            let mut p = plan(phase, actions);
            p.status.remaining = Some(std::time::Duration::from_secs(mins * 60));
            p
        };
        let s1 = status_for(&timed(Phase::Rotating, 1, 30), None, "abc", Some(3), at(0));
        assert_eq!(s1.estimated_completion, Some(at(1800)));
        // A pass later, nothing moved: the same time, even if the estimate drifted (so the
        // status is not rewritten for it).
        let s2 = status_for(
            &timed(Phase::Rotating, 0, 29),
            Some(&s1),
            "abc",
            Some(3),
            at(90),
        );
        assert_eq!(s2.estimated_completion, Some(at(1800)));
        // The rotation moved: estimated again.
        let s3 = status_for(
            &timed(Phase::Soaking, 0, 10),
            Some(&s2),
            "abc",
            Some(3),
            at(600),
        );
        assert_eq!(s3.estimated_completion, Some(at(1200)));
    }

    #[test]
    fn the_status_is_written_whole_with_the_resource_version_read() {
        use crate::kube::crd::NodePoolRotationSpec;
        let spec: NodePoolRotationSpec = serde_json::from_value(json!({
            "cluster": "c", "pool": "p", "channel": "stable", "version": "v", "image": "i",
            "sourceCommit": "abc",
            "group": {"aws": {"region": "r", "autoScalingGroup": "g"}},
            "policy": serde_json::to_value(crate::fleet::resolved::EffectivePolicy::default()).unwrap(),
        }))
        .unwrap();
        let mut npr = NodePoolRotation::new("p", spec);
        npr.metadata.resource_version = Some("42".into());
        let s = status_for(&plan(Phase::Succeeded, 0), None, "abc", None, at(0));
        let v = serde_json::to_value(status_object(&npr, &s)).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "42");
        assert_eq!(v["status"]["phase"], "Succeeded");
        // No checkpoint: the key is absent from a whole status, which a PUT drops on the
        // server (a merge patch would have kept the old one).
        assert!(!v["status"].as_object().unwrap().contains_key("checkpoint"));
    }

    #[test]
    fn a_later_term_is_never_written_over() {
        let f = |h: &str, t| Fence {
            holder: h.into(),
            transitions: t,
        };
        assert!(fence_admits(None, Some(&f("a", 1))));
        assert!(fence_admits(Some(&f("a", 1)), None));
        assert!(fence_admits(Some(&f("a", 1)), Some(&f("a", 1))));
        assert!(fence_admits(Some(&f("a", 1)), Some(&f("b", 2))));
        assert!(!fence_admits(Some(&f("b", 2)), Some(&f("a", 1))));
        assert!(!fence_admits(Some(&f("b", 1)), Some(&f("a", 1))));
    }

    #[test]
    fn patches_set_and_clear_rotas_annotations() {
        assert_eq!(
            cordon_patch("general/batch-2"),
            json!({"metadata": {"annotations": {"rota.dev/cordoned-by": "general/batch-2"}},
                   "spec": {"unschedulable": true}})
        );
        assert_eq!(
            uncordon_patch()["metadata"]["annotations"]["rota.dev/cordoned-by"],
            serde_json::Value::Null
        );
        assert_eq!(
            scale_down_patch(true)["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/scale-down-disabled"],
            "true"
        );
    }

    #[test]
    fn only_a_429_naming_a_disruption_budget_is_a_pdb_refusal() {
        let status = |causes: serde_json::Value| {
            kube::Error::Api(Box::new(
                serde_json::from_value(json!({
                    "status": "Failure", "code": 429, "reason": "TooManyRequests",
                    "message": "m", "details": {"causes": causes}
                }))
                .unwrap(),
            ))
        };
        let pdb = status(json!([{"reason": "DisruptionBudget", "message": "needs 2"}]));
        assert!(is_pdb_refusal(&pdb));
        // API Priority and Fairness: 429 with no disruption-budget cause.
        let apf = status(json!([]));
        assert!(!is_pdb_refusal(&apf));
    }

    #[test]
    fn eviction_grace_period_comes_from_the_policy() {
        assert!(evict_params(None).delete_options.is_none());
        let p = evict_params(Some(GoDuration::from_secs(45)));
        assert_eq!(p.delete_options.unwrap().grace_period_seconds, Some(45));
    }

    #[test]
    fn errors_are_classified_by_what_a_retry_should_do() {
        let cloud = |kind| ApplyError::Cloud {
            action: "set capacity 6".into(),
            source: CloudError {
                kind,
                call: "SetDesiredCapacity",
                group: "aws:us-east-1/asg/general".into(),
                message: "m".into(),
            },
        };
        assert_eq!(cloud(CloudErrorKind::Throttled).retry(), Class::Transient);
        assert_eq!(cloud(CloudErrorKind::Quota).retry(), Class::Stalled);
        assert_eq!(cloud(CloudErrorKind::Quota).reason(), "QuotaExceeded");
        let blocked = ApplyError::EvictionBlocked {
            namespace: "app".into(),
            pod: "db-0".into(),
        };
        assert_eq!(blocked.retry(), Class::Wait);
        assert!(blocked.to_string().contains("app/db-0"));
    }
}
