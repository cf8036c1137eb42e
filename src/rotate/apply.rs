//! Acting on a plan: persist the checkpoint, then execute the actions in order.
//!
//! The order is the whole point: the status (with the checkpoint) is written first, and if
//! that fails nothing is done. Then each action runs; the first failure stops the rest (a
//! later action may depend on an earlier one: the image must be set before the surge), and
//! the next reconcile plans again from the checkpoint and what it observes.
//!
//! Untested end to end: there is no API server to run against yet (the simulated one comes
//! with `sim`). The pure parts (status, patches, eviction parameters, error classes) are
//! unit-tested here.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::observed::{CORDONED_BY, SCALE_DOWN_DISABLED};
use super::{Action, Phase, Plan, Planned};
use crate::cloud::{CloudError, CloudErrorKind, NodeGroups};
use crate::fleet::duration::GoDuration;
use crate::kube::crd::{NodePoolRotation, NodePoolRotationStatus};

/// The field manager rota's writes are recorded under.
pub const FIELD_MANAGER: &str = "rota";

/// What a retry should do about a failed apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Retry soon with backoff (network, 5xx, throttling, a write conflict).
    Transient,
    /// Something must change first (a PDB allows no disruption now): wait for it, watching
    /// the object that blocks, not on a fixed timer.
    Wait,
    /// Needs a human (permissions, quota, an invalid request).
    Stalled,
}

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
}

impl ApplyError {
    pub fn retry(&self) -> Retry {
        match self {
            ApplyError::EvictionBlocked { .. } => Retry::Wait,
            ApplyError::Cloud { source, .. } => match source.kind {
                CloudErrorKind::Transient | CloudErrorKind::Throttled => Retry::Transient,
                CloudErrorKind::NotFound
                | CloudErrorKind::Quota
                | CloudErrorKind::Permission
                | CloudErrorKind::Invalid => Retry::Stalled,
            },
            ApplyError::Status { source, .. } | ApplyError::Kube { source, .. } => {
                match api_code(source) {
                    Some(401) | Some(403) | Some(422) => Retry::Stalled,
                    _ => Retry::Transient,
                }
            }
        }
    }

    /// A stable, low-cardinality reason for events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::Status { .. } => "StatusWriteFailed",
            ApplyError::Kube { .. } => "KubernetesCallFailed",
            ApplyError::Cloud { source, .. } => source.kind.reason(),
            ApplyError::EvictionBlocked { .. } => "EvictionBlocked",
        }
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
    }
}

fn time(t: DateTime<Utc>) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// The merge patch of the status. Optional fields the status does not carry are sent as
/// `null`, so that a merge patch removes them rather than keeping a stale checkpoint.
pub fn status_patch(status: &NodePoolRotationStatus) -> serde_json::Value {
    let mut v = serde_json::to_value(status).expect("a status always serializes");
    if let Some(obj) = v.as_object_mut() {
        for key in [
            "checkpoint",
            "observedCommit",
            "observedGeneration",
            "lastProgressTime",
        ] {
            obj.entry(key).or_insert(serde_json::Value::Null);
        }
    }
    json!({ "status": v })
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
            phase = ?status.phase,
            "applying the plan"
        );
    }
    let api: Api<NodePoolRotation> = Api::all(edge.client.clone());
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Merge(status_patch(status)),
    )
    .await
    .map_err(|source| ApplyError::Status {
        name: name.clone(),
        source,
    })?;

    let group = &npr.spec.group;
    let metrics = edge
        .metrics
        .as_ref()
        .map(|m| m.pool(&npr.spec.cluster, &npr.spec.pool));
    for (done, p) in plan.actions.iter().enumerate() {
        let result = execute(edge, group, p).await;
        if let Some(m) = &metrics {
            record(m, &p.action, &result);
        }
        if let Err(e) = result {
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
        publish(
            edge,
            npr,
            EventType::Normal,
            event_reason(&p.action),
            &p.reason,
        )
        .await;
    }
    Ok(plan.actions.len())
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
        Action::Terminate { instance_id, .. } => edge
            .groups
            .terminate(group, instance_id, true)
            .await
            .map(|()| true)
            .map_err(cloud),
    }
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
    fn the_status_patch_clears_a_checkpoint_that_is_gone() {
        let s = status_for(&plan(Phase::Succeeded, 0), None, "abc", None, at(0));
        let p = status_patch(&s);
        assert_eq!(p["status"]["checkpoint"], serde_json::Value::Null);
        assert!(p["status"].as_object().unwrap().contains_key("checkpoint"));
        assert_eq!(p["status"]["phase"], "Succeeded");
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
        assert_eq!(cloud(CloudErrorKind::Throttled).retry(), Retry::Transient);
        assert_eq!(cloud(CloudErrorKind::Quota).retry(), Retry::Stalled);
        assert_eq!(cloud(CloudErrorKind::Quota).reason(), "QuotaExceeded");
        let blocked = ApplyError::EvictionBlocked {
            namespace: "app".into(),
            pod: "db-0".into(),
        };
        assert_eq!(blocked.retry(), Retry::Wait);
        assert!(blocked.to_string().contains("app/db-0"));
    }
}
