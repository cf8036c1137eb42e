//! The `pods/eviction` subresource (policy/v1 Eviction) and graceful pod deletion, following
//! the API server's eviction handler (pkg/registry/core/pod/storage/eviction.go):
//!
//! 1. A pod that is Pending, Succeeded, Failed or already being deleted is deleted without
//!    looking at budgets (it is not running, so evicting it disrupts nothing).
//! 2. The PDBs of the pod's namespace whose (non-empty) selector matches it are found. More than
//!    one: 500 "This pod has more than one PodDisruptionBudget, which the eviction subresource
//!    does not support." None: the pod is deleted.
//! 3. A pod that is not Ready is deleted if the PDB's `unhealthyPodEvictionPolicy` is
//!    `AlwaysAllow`, or (default `IfHealthyBudget`) if the budget is met
//!    (currentHealthy >= desiredHealthy > 0).
//! 4. Otherwise: if the PDB status is older than its spec (observedGeneration < generation):
//!    429 "...still being processed by the server."; if disruptionsAllowed is 0: 429 "Cannot
//!    evict pod as it would violate the pod's disruption budget." with the cause "The
//!    disruption budget X needs N healthy pods and has M currently". Else disruptionsAllowed
//!    is decremented, the pod recorded in `disruptedPods`, and the pod deleted.
//!
//! Deletion is graceful: the pod gets `deletionTimestamp` and is removed after its grace period
//! (`deleteOptions.gracePeriodSeconds`, else `spec.terminationGracePeriodSeconds`, else 30 s),
//! measured in tokio time and divided by the simulation speed. Unscheduled and finished pods
//! go at once, as in Kubernetes.

use std::time::Duration;

use serde_json::{Value, json};

use super::pdb::pod_ready;
use super::selector::LabelSelector;
use super::store::{ApiError, ListOptions, ResourceType, Store};

/// Options of a pod deletion (from `DeleteOptions`).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    /// From a `DeleteOptions` JSON object (absent fields: defaults).
    pub fn from_json(v: Option<&Value>) -> Self {
        let Some(v) = v else { return Self::default() };
        DeleteOptions {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            precondition_uid: v
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            precondition_resource_version: v
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()),
        }
    }
}

/// Deletes a pod the way the API server does: at once if it never ran or has finished (or the
/// grace period is 0), otherwise marks it and removes it after the grace period. Returns the
/// pod as stored after the call (with `deletionTimestamp` while it terminates).
pub fn delete_pod(
    store: &Store,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    speed: f64,
) -> Result<Value, ApiError> {
    let rt = ResourceType::pods();
    let pod = store.get(&rt, Some(ns), name)?;
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(want) = &opts.precondition_uid
        && *want != uid
    {
        return Err(ApiError::conflict(
            &rt,
            name,
            &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
        ));
    }
    if let Some(want) = &opts.precondition_resource_version
        && Some(want.as_str())
            != pod
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
    {
        return Err(ApiError::conflict(
            &rt,
            name,
            "Precondition failed: ResourceVersion in precondition does not match the object",
        ));
    }
    if opts.dry_run {
        return Ok(pod);
    }
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let grace = opts
        .grace_period_seconds
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0);
    if !scheduled || matches!(phase, "Succeeded" | "Failed") || grace == 0 {
        return store.delete_if(&rt, Some(ns), name, Some(&uid));
    }
    let marked = store.mark_deleting(&rt, Some(ns), name, grace)?;
    // The first deletion's timer removes the pod; repeated deletes do not shorten it.
    if pod.pointer("/metadata/deletionTimestamp").is_none() {
        let store = store.clone();
        let (ns, name) = (ns.to_string(), name.to_string());
        let wait = Duration::from_secs_f64(grace as f64 / speed.max(1e-9));
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            // Gone already (a kubelet finished first) or replaced: nothing to do.
            let _ = store.delete_if(&rt, Some(&ns), &name, Some(&uid));
        });
    }
    Ok(marked)
}

/// The budgets that govern evicting `pod`.
fn budgets_for(store: &Store, pod: &Value) -> Result<Vec<Value>, ApiError> {
    let ns = pod.pointer("/metadata/namespace").and_then(Value::as_str);
    let (pdbs, _) = store.list(&ResourceType::pdbs(), ns, &ListOptions::default())?;
    Ok(pdbs
        .into_iter()
        .filter(|pdb| {
            // The eviction handler treats a nil or empty selector as matching nothing.
            match LabelSelector::from_object(pdb.pointer("/spec/selector")) {
                Ok(s) => !s.nothing && !s.is_everything() && s.matches(pod),
                Err(_) => false,
            }
        })
        .collect())
}

fn too_many_requests(cause: String, retry_after: i64) -> ApiError {
    let mut e = ApiError::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    e.details = Some(details);
    e
}

/// A number of the budget's status (0 when absent).
fn budget_status(pdb: &Value, k: &str) -> i64 {
    pdb.pointer(&format!("/status/{k}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether an unready pod may go without spending the budget: the budget says so
/// (`unhealthyPodEvictionPolicy: AlwaysAllow`), or it is met already.
fn unready_may_go(pdb: &Value) -> bool {
    let st = |k: &str| budget_status(pdb, k);
    pdb.pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        == Some("AlwaysAllow")
        || (st("currentHealthy") >= st("desiredHealthy") && st("desiredHealthy") > 0)
}

/// Why the budget refuses a ready pod's eviction now, as the API server answers it: 429
/// while the budget's status is behind its spec or it allows no disruption, 403 when it
/// allows a negative number.
fn refusal(pdb: &Value) -> Option<ApiError> {
    let st = |k: &str| budget_status(pdb, k);
    let pdb_name = pdb
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if st("observedGeneration") < generation {
        return Some(too_many_requests(
            format!("The disruption budget {pdb_name} is still being processed by the server."),
            10,
        ));
    }
    if st("disruptionsAllowed") < 0 {
        return Some(ApiError::new(
            403,
            "Forbidden",
            format!(
                "poddisruptionbudgets.policy \"{pdb_name}\" is forbidden: pdb disruptions allowed is negative"
            ),
        ));
    }
    if st("disruptionsAllowed") == 0 {
        return Some(too_many_requests(
            format!(
                "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                st("desiredHealthy"),
                st("currentHealthy")
            ),
            0,
        ));
    }
    None
}

/// Handles `POST pods/{name}/eviction` with a policy/v1 Eviction body. Returns the success
/// `Status` (HTTP 201).
pub fn evict(
    store: &Store,
    ns: &str,
    name: &str,
    eviction: &Value,
    speed: f64,
) -> Result<Value, ApiError> {
    if let Some(n) = eviction.pointer("/metadata/name").and_then(Value::as_str)
        && n != name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let opts = DeleteOptions::from_json(eviction.get("deleteOptions"));
    let success = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "code": 201});
    // Conflicting writes to the PDB status (two evictions at once) are retried, as the API
    // server's RetryOnConflict does.
    for _ in 0..5 {
        let pod = store.get(&ResourceType::pods(), Some(ns), name)?;
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if matches!(phase, "Pending" | "Succeeded" | "Failed")
            || pod.pointer("/metadata/deletionTimestamp").is_some()
        {
            delete_pod(store, ns, name, &opts, speed)?;
            return Ok(success);
        }
        let pdbs = budgets_for(store, &pod)?;
        if pdbs.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        let Some(pdb) = pdbs.into_iter().next() else {
            delete_pod(store, ns, name, &opts, speed)?;
            return Ok(success);
        };
        if !pod_ready(&pod) && unready_may_go(&pdb) {
            let opts = DeleteOptions {
                precondition_resource_version: pod
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                ..opts.clone()
            };
            delete_pod(store, ns, name, &opts, speed)?;
            return Ok(success);
        }
        if let Some(refused) = refusal(&pdb) {
            return Err(refused);
        }
        if opts.dry_run {
            return Ok(success);
        }
        let mut updated = pdb.clone();
        updated["status"]["disruptionsAllowed"] =
            json!(budget_status(&pdb, "disruptionsAllowed") - 1);
        if !updated["status"]["disruptedPods"].is_object() {
            updated["status"]["disruptedPods"] = json!({});
        }
        updated["status"]["disruptedPods"][name] = json!(store.timestamp());
        match store.update_status(&ResourceType::pdbs(), Some(ns), updated) {
            Ok(_) => {}
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(e),
        }
        delete_pod(store, ns, name, &opts, speed)?;
        return Ok(success);
    }
    Err(ApiError::new(
        409,
        "Conflict",
        "the PodDisruptionBudget kept changing while evicting; try again",
    ))
}

/// Whether `pod` belongs to a DaemonSet (a drain leaves those: they tolerate the cordon and
/// go with their node).
pub fn daemon_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|os| {
            os.iter()
                .any(|o| o.get("kind").and_then(Value::as_str) == Some("DaemonSet"))
        })
}

/// One round of a drain of `node` through the Eviction API, as Karpenter's termination and
/// the managed services' upgrades drain: every pod but DaemonSets' and those already going
/// is asked to go (a PodDisruptionBudget that allows no disruption answers 429 and the pod
/// stays, to be asked again next round). Returns how many pods (not DaemonSets') are still
/// on the node, going ones included: 0 when the drain is done.
pub fn evict_node(store: &Store, node: &str, speed: f64) -> Result<usize, ApiError> {
    let opts = ListOptions::fields(&format!("spec.nodeName={node}"));
    let (pods, _) = store.list(&ResourceType::pods(), None, &opts)?;
    let mut left = 0;
    for p in pods.iter().filter(|p| !daemon_pod(p)) {
        left += 1;
        if p.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let ns = p
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let name = p
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": name, "namespace": ns}});
        // 429 (a budget holds it) or a conflict: asked again next round.
        let _ = evict(store, ns, name, &eviction, speed);
    }
    Ok(left)
}
