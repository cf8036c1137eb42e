//! Acting on a plan: persist the checkpoint, then execute the actions in order.
//!
//! The order is the whole point: the status (with the checkpoint) is written first, and if
//! that fails nothing is done. Then each action runs; the first failure stops the rest (a
//! later action may depend on an earlier one: the image must be set before the surge), and
//! the next reconcile plans again from the checkpoint and what it observes. A drain's pass
//! whose status carries nothing new ([`Persist::Check`]: only evictions, the stored
//! checkpoint) reads the resource instead of writing it, and is refused the same way.
//!
//! The status is written whole (a `PUT` of the status subresource) with the
//! `resourceVersion` the pass read: a field that became empty is empty on the server too (a
//! merge patch would keep the stale value), and a write based on a resource someone changed
//! since is refused with 409 Conflict; the controller then observes again instead of acting.
//! Under leader election every side effect is preceded by a check that the lease is still
//! held with margin, and the status carries the writer's [`Fence`]: a term older than the one
//! that wrote the stored status never writes over it (invariant 7). End to end in
//! `tests/sim/resume_sim.rs` and `tests/sim/leadership_sim.rs`.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::leader::{Leadership, LeaseError};
use crate::cloud::{CloudError, NodeGroups};
use crate::kube::crd::NodePoolRotation;
use rota_core::errors::{Class, Classified, Classify, KubeCall};
use rota_core::fleet::duration::GoDuration;
use rota_core::rotate::aftermath::ActionFailed;
use rota_core::rotate::aftermath::step_events::{Digest, kind as event_reason};
use rota_core::rotate::observed::{CORDONED_BY, SCALE_DOWN_DISABLED};
use rota_core::rotate::resource::{Fence, NodePoolRotationStatus};
use rota_core::rotate::{Action, Plan, Planned};

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
    /// What a retry should do ([`rota_core::errors`]).
    pub fn retry(&self) -> Class {
        self.classify().class
    }

    /// A stable, low-cardinality reason for events and metrics ([`rota_core::errors`]).
    pub fn reason(&self) -> &'static str {
        self.classify().reason
    }

    /// What rota tells of this error when an action failed with it (a Warning on the pool's
    /// resource, posted with the pass's aftermath): `None` for the errors of no action (the
    /// status write, a conflict, the lease, the fence). Its text already names the action.
    pub fn action_failed(&self) -> Option<ActionFailed> {
        match self {
            ApplyError::Cloud { .. }
            | ApplyError::Kube { .. }
            | ApplyError::EvictionBlocked { .. }
            | ApplyError::NotDrained { .. } => Some(ActionFailed {
                error: self.classify(),
                message: self.to_string(),
            }),
            ApplyError::Status { .. }
            | ApplyError::Conflict { .. }
            | ApplyError::NotLeading(_)
            | ApplyError::Fenced { .. } => None,
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
    /// Counts evictions by outcome and terminations (`None`: not measured).
    pub metrics: Option<crate::metrics::Metrics>,
    /// Checked before every side effect; `None` when the caller is the only writer by
    /// construction (a test driving one controller, no election).
    pub lease: Option<Leadership>,
    /// The owner's API of the managed pools this controller drives (`None`: managed pools
    /// are reported, never acted on).
    pub owners: Option<&'a dyn rota_core::cloud::managed::OwnerPools>,
    /// Where rota's own drains and terminations are noted for the image ledger (`None`:
    /// nothing records them).
    pub departures: Option<&'a super::departures::Departures>,
    /// Karpenter's objects, for Karpenter pools (`None`: nothing is written to them).
    pub drift: Option<&'a dyn rota_core::cloud::karpenter::DriftPools>,
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

/// How a pass records itself before it acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Write the status (with its checkpoint), with the `resourceVersion` the pass read and
    /// the writer's term: every pass whose checkpoint or status carries a decision, and
    /// every pass that acts on the cloud or the nodes.
    Write,
    /// The status carries nothing new (`rotate::status::must_write`) and the pass only
    /// evicts pods: read the resource instead and act only if it is still the one this pass
    /// planned from and no later term wrote it. A drain's passes refuse, as a write would,
    /// what another replica has since replaced (invariant 7); the checkpoint they act under
    /// is the stored one (invariant 4), and what they said is folded into the next write.
    Check,
}

/// Persist the status composed for `plan` (with its checkpoint), or check that the stored
/// one is still the one read ([`Persist`]), then execute the plan's actions in order.
/// Returns how many actions ran; the first failure stops the rest. What ran is added to
/// `done` (the controller posts it as one Event per batch step, see `step_events`); a
/// failure is posted with the pass's aftermath, as a Warning ([`ApplyError::action_failed`]).
pub async fn apply(
    edge: &Edge<'_>,
    npr: &NodePoolRotation,
    plan: &Plan,
    status: &NodePoolRotationStatus,
    persist: Persist,
    done: &mut Digest,
) -> Result<usize, ApplyError> {
    if !plan.actions.is_empty() {
        // Inside the controller's pool (and batch) span: which pool and batch this is.
        tracing::info!(
            actions = plan.actions.len(),
            first = %plan.actions[0].action,
            why = %plan.actions[0].reason,
            pool = %npr.name_any(),
            phase = ?status.phase,
            "applying the plan"
        );
    }
    match persist {
        Persist::Write => write_status(edge, npr, status).await?,
        Persist::Check => {
            debug_assert!(
                plan.actions
                    .iter()
                    .all(|p| matches!(p.action, Action::Evict { .. })),
                "only a drain's evictions act on a checked status"
            );
            check_status(edge, npr).await?
        }
    }
    let group = &npr.spec.group;
    let metrics = edge
        .metrics
        .as_ref()
        .map(|m| m.pool(&npr.spec.cluster, &npr.spec.pool));
    for (n, p) in plan.actions.iter().enumerate() {
        // The lease may have run out while earlier actions ran (a slow cloud call).
        if let Err(e) = edge.may_act() {
            tracing::warn!(done = n, error = %e, "apply stopped: the lease is not held");
            return Err(e);
        }
        let result = execute(edge, group, p).await;
        if let Some(m) = &metrics {
            record(m, &p.action, &result);
        }
        if let Err(e) = result {
            return Err(e).inspect_err(|_| tracing::warn!(done = n, "apply stopped"));
        }
        done.add(event_reason(&p.action), &p.reason);
        if let Some(d) = edge.departures {
            d.record(&npr.spec, plan.checkpoint.as_ref(), &p.action);
        }
    }
    Ok(plan.actions.len())
}

/// Instead of a status write: the stored resource is still the one this pass read (its
/// `resourceVersion`), and no later term wrote it, once the lease is held.
async fn check_status(edge: &Edge<'_>, npr: &NodePoolRotation) -> Result<(), ApplyError> {
    let name = npr.name_any();
    let ours = edge.may_act()?;
    let api: Api<NodePoolRotation> = Api::all(edge.client.clone());
    let stored = api.get(&name).await.map_err(|source| ApplyError::Status {
        name: name.clone(),
        source,
    })?;
    if stored.metadata.resource_version != npr.metadata.resource_version {
        return Err(ApplyError::Conflict { name });
    }
    let fence = stored.status.as_ref().and_then(|s| s.fence.as_ref());
    if !fence_admits(fence, ours.as_ref()) {
        return Err(ApplyError::Fenced {
            name,
            stored: fence.cloned().expect("refused only with a stored fence"),
            ours: ours.expect("refused only with a fence of ours"),
        });
    }
    Ok(())
}

/// Write the status whole, with the `resourceVersion` the pass read and the writer's term,
/// once the lease is held and no later term wrote the stored status.
async fn write_status(
    edge: &Edge<'_>,
    npr: &NodePoolRotation,
    status: &NodePoolRotationStatus,
) -> Result<(), ApplyError> {
    let name = npr.name_any();
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
        Ok(_) => Ok(()),
        Err(e) if api_code(&e) == Some(409) => Err(ApplyError::Conflict { name }),
        Err(source) => Err(ApplyError::Status { name, source }),
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
        (
            Action::Terminate { .. }
            | Action::TerminateForReplacement { .. }
            | Action::RemovePoolNode { .. },
            Ok(_),
        ) => m.record_terminated(1),
        _ => {}
    }
}

/// Start a managed pool's update through its owner's API (the only write rota makes to a
/// managed pool's machines). A pool whose owner is not driven here is refused, never
/// written through the self-managed path.
async fn start_owner_update(
    edge: &Edge<'_>,
    group: &crate::cloud::GroupRef,
    request: &rota_core::cloud::managed::UpdateRequest,
) -> Result<String, crate::cloud::CloudError> {
    let refuse = |why: &str| {
        crate::cloud::CloudError::new(
            crate::cloud::CloudErrorKind::Invalid,
            "StartOwnerUpdate",
            group,
            why.to_string(),
        )
    };
    let managed = group
        .managed()
        .ok_or_else(|| refuse("not a managed pool: its template is rota's to write"))?;
    match edge.owners {
        Some(o) if o.owner() == managed.owner() => o.start_update(managed, request).await,
        _ => Err(refuse("this agent does not drive the pool's owner")),
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
    let done = |()| true;
    match &p.action {
        Action::SetImage { image } => edge.groups.set_image(group, image).await.map(done),
        Action::SetCapacity { desired, max } => edge
            .groups
            .set_capacity(group, *desired, *max)
            .await
            .map(done),
        Action::SetMax { max } => edge.groups.set_max(group, *max).await.map(done),
        Action::WithdrawSurge { desired, instances } => {
            withdraw_surge(edge, group, *desired, instances).await
        }
        Action::Cordon { node, owner } => {
            return patch_node(edge, node, cordon_patch(owner))
                .await
                .map_err(kube);
        }
        Action::Uncordon { node } => {
            return patch_node(edge, node, uncordon_patch()).await.map_err(kube);
        }
        Action::SetScaleDownDisabled { node, disabled } => {
            return patch_node(edge, node, scale_down_patch(*disabled))
                .await
                .map_err(kube);
        }
        Action::Evict {
            namespace,
            pod,
            grace_period,
            ..
        } => {
            return evict(edge, namespace, pod, *grace_period)
                .await
                .map_err(|e| e.or_else(kube));
        }
        Action::DeletePod { namespace, pod, .. } => {
            return delete_pod(edge, namespace, pod).await.map_err(kube);
        }
        Action::StartOwnerUpdate { .. }
        | Action::PinNodeClassImage { .. }
        | Action::SetDisruptionBudgets { .. }
        | Action::CreateTwinPool { .. }
        | Action::SetPoolSize { .. }
        | Action::RemovePoolNode { .. }
        | Action::DeletePool { .. } => return write_owner(edge, group, p).await,
        Action::Terminate { instance_id, node }
        | Action::TerminateForReplacement { instance_id, node } => {
            return terminate(edge, group, p, instance_id, node.as_deref()).await;
        }
    }
    .map_err(cloud)
}

/// A merge patch of one node (a cordon, its undoing, the autoscaler's annotation).
async fn patch_node(
    edge: &Edge<'_>,
    node: &str,
    patch: serde_json::Value,
) -> Result<bool, kube::Error> {
    let nodes: Api<Node> = Api::all(edge.client.clone());
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| true)
}

/// Delete a pod (a forced drain); `Ok(false)`: it was already gone.
async fn delete_pod(edge: &Edge<'_>, namespace: &str, pod: &str) -> Result<bool, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(edge.client.clone(), namespace);
    match pods.delete(pod, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(e) if api_code(&e) == Some(404) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A write to the pool's owner: a managed pool's update or blue-green calls, Karpenter's
/// objects. A node is removed only once it is seen drained again, as for a terminate.
async fn write_owner(
    edge: &Edge<'_>,
    group: &crate::cloud::GroupRef,
    p: &Planned,
) -> Result<bool, ApplyError> {
    let cloud = |source| ApplyError::Cloud {
        action: p.action.to_string(),
        source,
    };
    match &p.action {
        Action::StartOwnerUpdate { request } => start_owner_update(edge, group, request)
            .await
            .map(|_| true)
            .map_err(cloud),
        Action::PinNodeClassImage { .. } | Action::SetDisruptionBudgets { .. } => {
            super::drift::write(edge.drift, group, &p.action)
                .await
                .expect("a drift write")
                .map(|()| true)
                .map_err(cloud)
        }
        Action::CreateTwinPool { .. }
        | Action::SetPoolSize { .. }
        | Action::RemovePoolNode { .. }
        | Action::DeletePool { .. } => {
            if let Action::RemovePoolNode {
                node: Some(node), ..
            } = &p.action
            {
                re_validate_drained(edge, node).await.map_err(|e| {
                    e.or_else(|source| ApplyError::Kube {
                        action: p.action.to_string(),
                        source,
                    })
                })?;
            }
            super::owner_pools::execute(edge.owners, group, &p.action)
                .await
                .map(|()| true)
                .map_err(cloud)
        }
        other => unreachable!("`execute` hands only the owners' writes here, not {other}"),
    }
}

/// Terminate an old instance, once its node is seen drained again (invariant 3): with a
/// decrement, or (`strategy: replace`) keeping the capacity for the group to replace it.
async fn terminate(
    edge: &Edge<'_>,
    group: &crate::cloud::GroupRef,
    p: &Planned,
    instance_id: &str,
    node: Option<&str>,
) -> Result<bool, ApplyError> {
    if let Some(node) = node {
        re_validate_drained(edge, node).await.map_err(|e| {
            e.or_else(|source| ApplyError::Kube {
                action: p.action.to_string(),
                source,
            })
        })?;
    }
    let decrement = matches!(p.action, Action::Terminate { .. });
    edge.groups
        .terminate(group, instance_id, decrement)
        .await
        .map(|()| true)
        .map_err(|source| ApplyError::Cloud {
            action: p.action.to_string(),
            source,
        })
}

/// An error of an action: rota's own verdict, or the Kubernetes API's answer (which the
/// caller wraps with the action's name).
enum Refused {
    Apply(ApplyError),
    Kube(kube::Error),
}

impl Refused {
    fn or_else(self, kube: impl FnOnce(kube::Error) -> ApplyError) -> ApplyError {
        match self {
            Refused::Apply(e) => e,
            Refused::Kube(e) => kube(e),
        }
    }
}

/// Evict one pod through the Eviction API. `Ok(false)`: already gone. Only a 429 that names a
/// disruption budget is a PDB refusal; one from API Priority and Fairness is throttling,
/// retried as transient.
async fn evict(
    edge: &Edge<'_>,
    namespace: &str,
    pod: &str,
    grace: Option<GoDuration>,
) -> Result<bool, Refused> {
    let pods: Api<Pod> = Api::namespaced(edge.client.clone(), namespace);
    match pods.evict(pod, &evict_params(grace)).await {
        Ok(_) => Ok(true),
        Err(e) if api_code(&e) == Some(404) => Ok(false),
        Err(e) if is_pdb_refusal(&e) => Err(Refused::Apply(ApplyError::EvictionBlocked {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
        })),
        Err(e) => Err(Refused::Kube(e)),
    }
}

/// Take back an unfulfilled surge, re-validated against a fresh description right before the
/// call: an instance listed since the plan would be the one the cloud removes (`Ok(false)`:
/// not now).
async fn withdraw_surge(
    edge: &Edge<'_>,
    group: &crate::cloud::GroupRef,
    desired: u32,
    instances: &[String],
) -> Result<bool, crate::cloud::CloudError> {
    let now = edge.groups.describe(group).await?;
    let appeared = now
        .instances
        .iter()
        .any(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating && !instances.contains(&i.id));
    if appeared {
        return Ok(false);
    }
    edge.groups.set_capacity(group, desired, None).await?;
    Ok(true)
}

/// Re-validate a node against fresh state right before its instance is terminated: the plan
/// came from the watch-fed index, which may be behind (invariant 3). As the planner judges it
/// (`ObservedNode::blocking_termination`), the pods a dead kubelet can never finish shutting
/// down do not hold its node.
async fn re_validate_drained(edge: &Edge<'_>, node: &str) -> Result<(), Refused> {
    let fresh = fresh_pods_on(edge, node).await.map_err(Refused::Kube)?;
    let kubelet_ready = fresh_kubelet_ready(edge, node)
        .await
        .map_err(Refused::Kube)?;
    let holding = crate::kube::observe::pods_holding(&fresh, kubelet_ready);
    if holding.is_empty() {
        return Ok(());
    }
    Err(Refused::Apply(ApplyError::NotDrained {
        node: node.to_string(),
        pods: holding,
    }))
}

/// One read of the pods bound to `node` (`fieldSelector=spec.nodeName=<node>`): a list the
/// API server answers from the node's pods alone (the `agent_scale` bench counts these
/// reads apart from the writes).
async fn fresh_pods_on(
    edge: &Edge<'_>,
    node: &str,
) -> Result<Vec<crate::kube::projection::PodProjection>, kube::Error> {
    let pods: Api<crate::kube::projection::PodProjection> = Api::all(edge.client.clone());
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cloud::CloudErrorKind;
    #[test]
    fn the_status_is_written_whole_with_the_resource_version_read() {
        use rota_core::rotate::resource::NodePoolRotationSpec;
        let spec: NodePoolRotationSpec = serde_json::from_value(json!({
            "cluster": "c", "pool": "p", "channel": "stable", "version": "v", "image": "i",
            "sourceCommit": "abc",
            "group": {"aws": {"region": "r", "autoScalingGroup": "g"}},
            "policy": serde_json::to_value(rota_core::fleet::resolved::EffectivePolicy::default()).unwrap(),
        }))
        .unwrap();
        let mut npr = NodePoolRotation::new("p", spec);
        npr.metadata.resource_version = Some("42".into());
        let s = NodePoolRotationStatus {
            phase: rota_core::rotate::Phase::Succeeded,
            ..NodePoolRotationStatus::default()
        };
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
