//! PodDisruptionBudget arithmetic and the controller that keeps PDB status current, as the
//! Kubernetes disruption controller does (pkg/controller/disruption).
//!
//! The arithmetic, for the pods the PDB selects in its namespace:
//! - `minAvailable: N` (integer): expectedPods = number of selected pods, desiredHealthy = N.
//! - `minAvailable: P%`: expectedPods = the sum of the scales (`spec.replicas`) of the pods'
//!   controllers, desiredHealthy = ceil(P% × expectedPods).
//! - `maxUnavailable: N` or `P%`: expectedPods = sum of controller scales,
//!   desiredHealthy = max(0, expectedPods − N) with N = ceil(P% × expectedPods) for percentages.
//! - currentHealthy = selected pods that are Ready, not being deleted, and not recently evicted
//!   (listed in `status.disruptedPods` less than 2 minutes ago).
//! - disruptionsAllowed = max(0, currentHealthy − desiredHealthy), and 0 when expectedPods is 0.
//!
//! Worked example (the documentation's): 7 replicas, `minAvailable: "50%"` → desiredHealthy =
//! ceil(3.5) = 4; with all 7 Ready, 3 disruptions are allowed. `maxUnavailable: "50%"` →
//! ceil(3.5) = 4 may be unavailable, desiredHealthy = 3, 4 disruptions allowed.
//!
//! Controller scales come from ReplicaSets (the Deployment's when the ReplicaSet has one),
//! Deployments and StatefulSets. A selected pod with a controller that has no scale (a
//! DaemonSet) makes the computation fail: then, as in Kubernetes, disruptionsAllowed is 0 and the
//! `DisruptionAllowed` condition says `SyncFailed`. Pods without a controller are ignored for
//! expectedPods.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::selector::{LabelSelector, label_in, label_pairs};
use super::store::{ApiError, ListOptions, ResourceType, Store, WatchEvent};

/// How long an eviction's entry in `disruptedPods` keeps the pod out of currentHealthy while
/// waiting for the pod to be deleted.
pub const DELETION_TIMEOUT: chrono::Duration = chrono::Duration::minutes(2);

/// What the controller writes in `.status`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PdbStatus {
    pub expected_pods: i64,
    pub current_healthy: i64,
    pub desired_healthy: i64,
    pub disruptions_allowed: i64,
    /// pod name → eviction time (RFC 3339).
    pub disrupted_pods: BTreeMap<String, String>,
    /// When the computation failed (the fail-safe: 0 disruptions allowed, SyncFailed).
    pub sync_error: Option<String>,
}

/// A controller (owner reference with `controller: true`) and where to look it up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The controller of an object, if any.
pub fn controller_of(obj: &Value) -> Option<ControllerRef> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            ControllerRef {
                api_version: s("apiVersion"),
                kind: s("kind"),
                name: s("name"),
                uid: s("uid"),
            }
        })
}

/// Finds the scale of a pod's controller: (namespace, controller) → (controller uid, replicas),
/// `None` when the controller has no scale or does not exist.
pub type ScaleOf<'a> = dyn Fn(&str, &ControllerRef) -> Option<(String, i64)> + 'a;

/// A pod's labels; interned, since the pods of one workload carry the same set.
pub type Labels = Arc<[(Box<str>, Box<str>)]>;

/// What the disruption arithmetic reads of a pod, and no more: the controller keeps one of
/// these per pod (about 200 bytes with a few labels) instead of listing and parsing every pod
/// of a namespace on each change, which at 100,000 pods in a namespace cost gigabytes and
/// most of the simulated fleet's CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    pub name: Box<str>,
    /// Shared between the pods of one workload (the index interns label sets).
    pub labels: Labels,
    pub ready: bool,
    pub deleting: bool,
    /// Shared between the pods of one controller (the index interns them by uid).
    pub controller: Option<Arc<ControllerRef>>,
}

impl PodFacts {
    pub fn of(pod: &Value) -> Self {
        let labels = label_pairs(pod).collect();
        PodFacts {
            name: pod
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            labels,
            ready: pod_ready(pod),
            deleting: deleting(pod),
            controller: controller_of(pod).map(Arc::new),
        }
    }
}

/// Is the pod Ready (condition `Ready=True`)? This is what "healthy" means to a PDB.
pub fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn deleting(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
pub fn scaled_value(v: &Value, total: i64) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("invalid value for IntOrString: {n}")),
        Value::String(s) => {
            let p = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid type: string is not a percentage: {s:?}"))?;
            // Round up: ceil(p * total / 100) in integers.
            Ok((p * total + 99).div_euclid(100))
        }
        other => Err(format!("invalid value for IntOrString: {other}")),
    }
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The pods a PDB selects (in its namespace, by `spec.selector`; `{}` selects all, null none).
pub fn selects(pdb: &Value, pod: &Value) -> bool {
    LabelSelector::from_object(pdb.pointer("/spec/selector"))
        .map(|s| s.matches(pod))
        .unwrap_or(false)
}

/// Computes a PDB's status from the pods it selects (all in the PDB's namespace). `scale_of`
/// finds the scale of a pod's controller: `Some((controller uid, replicas))`, `None` if the
/// controller has no scale or does not exist; it is asked once per controller. Pure: `now` is
/// given.
pub fn compute_status(
    pdb: &Value,
    pods: &[&PodFacts],
    scale_of: &ScaleOf<'_>,
    now: DateTime<Utc>,
) -> PdbStatus {
    let by_name: HashMap<&str, &PodFacts> = pods.iter().map(|p| (&*p.name, *p)).collect();
    compute_status_with(pdb, pods, &|name| by_name.get(name).copied(), scale_of, now)
}

/// [`compute_status`], with `find` answering which of `pods` has a name (the controller's
/// index answers it without a table of its own). The pods are counted in one pass without a
/// lookup each; only the recently evicted ones (`status.disruptedPods`, a few thousand at
/// most) are looked up. At 20,000 nodes a PDB selects 200,000 pods, and hashing every name
/// on every recomputation was most of the simulated fleet's CPU during a drain.
pub fn compute_status_with<'a>(
    pdb: &Value,
    pods: &[&'a PodFacts],
    find: &dyn Fn(&str) -> Option<&'a PodFacts>,
    scale_of: &ScaleOf<'_>,
    now: DateTime<Utc>,
) -> PdbStatus {
    let mut st = PdbStatus::default();
    let ns = pdb
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let result = expected_and_desired(pdb, ns, pods, scale_of);
    st.current_healthy = pods.iter().filter(|p| p.ready && !p.deleting).count() as i64;
    // Recently evicted pods, still present and not yet being deleted, do not count as healthy
    // (and keep their entry); an entry whose pod is gone or being deleted is dropped.
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object);
    for (name, t) in disrupted.into_iter().flatten() {
        let Some(t) = t.as_str() else { continue };
        if parse_time(t).is_none_or(|at| at + DELETION_TIMEOUT < now) {
            continue;
        }
        let Some(pod) = find(name).filter(|p| !p.deleting) else {
            continue;
        };
        st.disrupted_pods.insert(name.clone(), t.to_string());
        if pod.ready {
            st.current_healthy -= 1;
        }
    }
    match result {
        Ok((expected, desired)) => {
            st.expected_pods = expected;
            st.desired_healthy = desired;
            st.disruptions_allowed = if expected <= 0 {
                0
            } else {
                (st.current_healthy - desired).max(0)
            };
        }
        Err(e) => st.sync_error = Some(e),
    }
    st
}

fn expected_and_desired(
    pdb: &Value,
    ns: &str,
    pods: &[&PodFacts],
    scale_of: &ScaleOf<'_>,
) -> Result<(i64, i64), String> {
    let spec = pdb.get("spec").cloned().unwrap_or(Value::Null);
    let expected_scale = || -> Result<i64, String> {
        // scale owner uid -> replicas; a controller's answer is asked once (100,000 pods of
        // one Deployment are one lookup, not 100,000).
        let mut scales: HashMap<String, i64> = HashMap::new();
        // By reference: the index shares one per controller, so this is a short list.
        let mut asked: Vec<*const ControllerRef> = Vec::new();
        for pod in pods {
            let Some(c) = pod.controller.as_ref() else {
                // Unmanaged pods are ignored (Kubernetes records an UnmanagedPods event).
                continue;
            };
            if asked.contains(&Arc::as_ptr(c)) {
                continue;
            }
            asked.push(Arc::as_ptr(c));
            match scale_of(ns, c) {
                Some((uid, n)) => {
                    scales.insert(uid, n);
                }
                None => return Err(format!("found no controllers for pod {:?}", pod.name)),
            }
        }
        Ok(scales.values().sum())
    };
    match (
        spec.get("maxUnavailable").filter(|v| !v.is_null()),
        spec.get("minAvailable").filter(|v| !v.is_null()),
    ) {
        (Some(max), _) => {
            let expected = expected_scale()?;
            let max = scaled_value(max, expected)?;
            Ok((expected, (expected - max).max(0)))
        }
        (None, Some(min @ Value::Number(_))) => Ok((pods.len() as i64, scaled_value(min, 0)?)),
        (None, Some(min)) => {
            let expected = expected_scale()?;
            Ok((expected, scaled_value(min, expected)?))
        }
        // Neither set: Kubernetes' defaulting makes minAvailable 1 for such (old) objects.
        (None, None) => Ok((pods.len() as i64, 1)),
    }
}

/// Writes `st` into a PDB's `.status` (condition included). `observedGeneration` moves to the
/// PDB's generation except on failure, as in the controller's fail-safe path.
pub fn apply_status(pdb: &mut Value, st: &PdbStatus, now: &str) {
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut status = pdb.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let (cond_status, reason, message) = match &st.sync_error {
        Some(e) => {
            status["disruptionsAllowed"] = json!(0);
            ("False", "SyncFailed", e.clone())
        }
        None => {
            status["observedGeneration"] = json!(generation);
            status["expectedPods"] = json!(st.expected_pods);
            status["currentHealthy"] = json!(st.current_healthy);
            status["desiredHealthy"] = json!(st.desired_healthy);
            status["disruptionsAllowed"] = json!(st.disruptions_allowed);
            if st.disruptions_allowed > 0 {
                ("True", "SufficientPods", String::new())
            } else {
                ("False", "InsufficientPods", String::new())
            }
        }
    };
    if st.disrupted_pods.is_empty() {
        status
            .as_object_mut()
            .expect("object")
            .remove("disruptedPods");
    } else {
        status["disruptedPods"] = json!(st.disrupted_pods);
    }
    set_condition(&mut status, cond_status, reason, &message, now);
    pdb["status"] = status;
}

/// Sets the `DisruptionAllowed` condition; its transition time moves only when its status does.
fn set_condition(status: &mut Value, cond_status: &str, reason: &str, message: &str, now: &str) {
    let observed = status
        .get("observedGeneration")
        .cloned()
        .unwrap_or(json!(0));
    let mut conds: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old = conds
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"));
    let transition = match old.map(|i| &conds[i]) {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(cond_status) => {
            c.get("lastTransitionTime").cloned().unwrap_or(json!(now))
        }
        _ => json!(now),
    };
    let cond = json!({"type": "DisruptionAllowed", "status": cond_status, "reason": reason,
                      "message": message, "observedGeneration": observed,
                      "lastTransitionTime": transition});
    match old {
        Some(i) => conds[i] = cond,
        None => conds.push(cond),
    }
    status["conditions"] = json!(conds);
}

/// Looks up the scale of a pod's controller in the store, as the disruption controller's
/// finders do (ReplicaSet → its Deployment if any, Deployment, StatefulSet), checking UIDs.
pub fn store_scale(store: &Store, ns: &str, c: &ControllerRef) -> Option<(String, i64)> {
    let lookup = |rt: ResourceType, name: &str, uid: &str| -> Option<Value> {
        store
            .get(&rt, Some(ns), name)
            .ok()
            .filter(|o| o.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid))
    };
    let replicas = |o: &Value| {
        o.pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
    };
    let uid = |o: &Value| {
        o.pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let group = c.api_version.split('/').next().unwrap_or("");
    if group != "apps" {
        return None;
    }
    match c.kind.as_str() {
        "ReplicaSet" => {
            let rs = lookup(ResourceType::replicasets(), &c.name, &c.uid)?;
            if let Some(d) = controller_of(&rs).filter(|d| d.kind == "Deployment")
                && let Some(dep) = lookup(ResourceType::deployments(), &d.name, &d.uid)
            {
                return Some((uid(&dep), replicas(&dep)));
            }
            Some((uid(&rs), replicas(&rs)))
        }
        "Deployment" => {
            lookup(ResourceType::deployments(), &c.name, &c.uid).map(|d| (uid(&d), replicas(&d)))
        }
        "StatefulSet" => {
            lookup(ResourceType::statefulsets(), &c.name, &c.uid).map(|d| (uid(&d), replicas(&d)))
        }
        _ => None,
    }
}

/// The pods of a cluster as the disruption controller knows them, fed by a pod watch: per
/// namespace, grouped by label set, so a PDB's selector is matched once per distinct set (a
/// handful per namespace) rather than once per pod. Label sets and controller references are
/// interned, so the 50,000 pods of one ReplicaSet share one of each.
#[derive(Default)]
struct PodIndex {
    namespaces: HashMap<Box<str>, NamespacePods>,
    label_sets: std::collections::HashSet<Labels>,
    controllers: HashMap<String, std::sync::Weak<ControllerRef>>,
}

#[derive(Default)]
struct NamespacePods {
    groups: HashMap<Labels, HashMap<Box<str>, PodFacts>>,
    labels_of: HashMap<Box<str>, Labels>,
}

impl NamespacePods {
    fn remove(&mut self, name: &str) {
        if let Some(labels) = self.labels_of.remove(name)
            && let Some(g) = self.groups.get_mut(&labels)
        {
            g.remove(name);
            if g.is_empty() {
                self.groups.remove(&labels);
            }
        }
    }
}

/// One pod event as the index takes it: made where the event is received, so a backlog holds
/// facts, not parsed pods.
enum PodChange {
    Put { ns: String, facts: PodFacts },
    Gone { ns: String, name: String },
}

impl PodChange {
    fn of(ev: &WatchEvent) -> Option<PodChange> {
        let (pod, gone) = match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => (p, false),
            WatchEvent::Deleted(p) => (p, true),
            WatchEvent::Bookmark(_) => return None,
        };
        let ns = pod
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        Some(if gone {
            let name = pod
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            PodChange::Gone { ns, name }
        } else {
            PodChange::Put {
                ns,
                facts: PodFacts::of(pod),
            }
        })
    }
}

impl PodIndex {
    /// Applies one pod change; returns the pod's namespace.
    fn apply(&mut self, change: PodChange) -> String {
        match change {
            PodChange::Gone { ns, name } => {
                if let Some(n) = self.namespaces.get_mut(ns.as_str()) {
                    n.remove(&name);
                    if n.labels_of.is_empty() {
                        self.namespaces.remove(ns.as_str());
                    }
                }
                ns
            }
            PodChange::Put { ns, mut facts } => {
                if let Some(c) = facts.controller.take() {
                    facts.controller = Some(self.intern_controller(c));
                }
                facts.labels = self.intern_labels(facts.labels);
                let n = self.namespaces.entry(ns.as_str().into()).or_default();
                n.remove(&facts.name);
                n.labels_of.insert(facts.name.clone(), facts.labels.clone());
                n.groups
                    .entry(facts.labels.clone())
                    .or_default()
                    .insert(facts.name.clone(), facts);
                ns
            }
        }
    }

    fn intern_controller(&mut self, c: Arc<ControllerRef>) -> Arc<ControllerRef> {
        if let Some(known) = self.controllers.get(&c.uid).and_then(|w| w.upgrade())
            && *known == *c
        {
            return known;
        }
        if self.controllers.len() > 1024 {
            self.controllers.retain(|_, w| w.strong_count() > 0);
        }
        self.controllers.insert(c.uid.clone(), Arc::downgrade(&c));
        c
    }

    fn intern_labels(&mut self, labels: Labels) -> Labels {
        if let Some(known) = self.label_sets.get(&labels) {
            return known.clone();
        }
        if self.label_sets.len() > 1024 {
            // Sets no pod holds any more (only the interner's reference is left).
            self.label_sets.retain(|l| Arc::strong_count(l) > 1);
        }
        self.label_sets.insert(labels.clone());
        labels
    }

    /// The pods of `ns` a selector selects.
    fn selected(&self, ns: &str, selector: &LabelSelector) -> Vec<&PodFacts> {
        let Some(n) = self.namespaces.get(ns) else {
            return Vec::new();
        };
        n.groups
            .iter()
            .filter(|(labels, _)| selector.matches_with(|k| label_in(labels, k)))
            .flat_map(|(_, pods)| pods.values())
            .collect()
    }

    /// The pod of `ns` named `name`, if the selector selects it.
    fn find_selected(&self, ns: &str, selector: &LabelSelector, name: &str) -> Option<&PodFacts> {
        let n = self.namespaces.get(ns)?;
        let labels = n.labels_of.get(name)?;
        if !selector.matches_with(|k| label_in(labels, k)) {
            return None;
        }
        n.groups.get(labels)?.get(name)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.namespaces.values().map(|n| n.labels_of.len()).sum()
    }
}

/// Recomputes and writes the status of one PDB from the pod index. Returns the time at which
/// a `disruptedPods` entry expires and the PDB must be looked at again, if any.
fn reconcile(
    store: &Store,
    index: &PodIndex,
    pdb: &Value,
) -> Result<Option<DateTime<Utc>>, ApiError> {
    let field = |p: &str| pdb.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (ns, name) = (field("/metadata/namespace"), field("/metadata/name"));
    let selector =
        LabelSelector::from_object(pdb.pointer("/spec/selector")).unwrap_or(LabelSelector {
            reqs: vec![],
            nothing: true,
        });
    let pods = index.selected(ns, &selector);
    let now = store.now();
    let st = compute_status_with(
        pdb,
        &pods,
        &|name| index.find_selected(ns, &selector, name),
        &|ns, c| store_scale(store, ns, c),
        now,
    );
    let recheck = st
        .disrupted_pods
        .values()
        .filter_map(|t| parse_time(t))
        .map(|t| t + DELETION_TIMEOUT)
        .min();
    let stamp = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    // Read-modify-write of the stored PDB: an eviction may have added to `disruptedPods` since
    // the PDB was listed; that entry is kept for the next pass (the eviction's own write
    // already lowered `disruptionsAllowed`).
    store.modify(&ResourceType::pdbs(), Some(ns), name, |p| {
        apply_status(p, &st, &stamp);
        Ok(())
    })?;
    Ok(recheck)
}

/// Recomputes every PDB in a namespace.
fn reconcile_namespace(store: &Store, index: &PodIndex, ns: &str) -> Option<DateTime<Utc>> {
    let Ok((pdbs, _)) = store.list(&ResourceType::pdbs(), Some(ns), &ListOptions::default()) else {
        return None;
    };
    pdbs.iter()
        .filter_map(|pdb| reconcile(store, index, pdb).ok().flatten())
        .min()
}

/// What the watches tell the controller's loop.
enum Seen {
    Pod(PodChange),
    /// A PDB or a scalable workload of this namespace changed.
    Namespace(String),
}

/// The disruption controller: watches pods, PDBs and scalable workloads and keeps every PDB's
/// status current. Runs until the store's watches close (or the task is aborted).
///
/// Pods are held as [`PodFacts`] in a [`PodIndex`] fed by the pod watch (its first events are
/// every existing pod), so a change costs a pass over the facts of its namespace, not a list
/// of its pods.
pub fn spawn_controller(store: Store) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let types = [
            ResourceType::pdbs(),
            ResourceType::pods(),
            ResourceType::replicasets(),
            ResourceType::deployments(),
            ResourceType::statefulsets(),
        ];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Seen>();
        for rt in types {
            let Ok(mut w) = store.watch_lazy(&rt, None, &ListOptions::default(), None) else {
                continue;
            };
            let tx = tx.clone();
            let pods = rt == ResourceType::pods();
            tokio::spawn(async move {
                while let Some(ev) = w.recv().await {
                    let seen = if pods {
                        match PodChange::of(&ev) {
                            Some(c) => Seen::Pod(c),
                            None => continue,
                        }
                    } else {
                        let obj = match &ev {
                            WatchEvent::Added(o)
                            | WatchEvent::Modified(o)
                            | WatchEvent::Deleted(o) => o,
                            WatchEvent::Bookmark(_) => continue,
                        };
                        Seen::Namespace(
                            obj.pointer("/metadata/namespace")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        )
                    };
                    if tx.send(seen).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let mut index = PodIndex::default();
        let mut rechecks: BTreeMap<DateTime<Utc>, BTreeSet<String>> = BTreeMap::new();
        let take = |seen: Seen, index: &mut PodIndex, dirty: &mut BTreeSet<String>| match seen {
            Seen::Pod(change) => {
                dirty.insert(index.apply(change));
            }
            Seen::Namespace(ns) => {
                dirty.insert(ns);
            }
        };
        // A namespace recomputed is not recomputed again for nine times as long as that took
        // (real time): at most a tenth of a core goes to a namespace's PDBs, however fast its
        // pods change. Below a few thousand pods that is well under a millisecond; at
        // 200,000 pods selected it keeps the status a few hundred milliseconds behind, as the
        // real disruption controller is, while evictions keep lowering `disruptionsAllowed`
        // themselves (`eviction.rs`), so no eviction is admitted that the budget forbids.
        let mut not_before: HashMap<String, tokio::time::Instant> = HashMap::new();
        let mut deferred: BTreeSet<String> = BTreeSet::new();
        loop {
            let next = rechecks.keys().next().copied();
            let recheck = next.map(|t| (t - store.now()).to_std().unwrap_or_default());
            let deferral = deferred
                .iter()
                .filter_map(|ns| not_before.get(ns))
                .min()
                .map(|t| t.saturating_duration_since(tokio::time::Instant::now()));
            let wait = recheck.into_iter().chain(deferral).min();
            let mut dirty = std::mem::take(&mut deferred);
            tokio::select! {
                seen = rx.recv() => match seen {
                    Some(seen) => take(seen, &mut index, &mut dirty),
                    None => return,
                },
                _ = async { match wait { Some(d) => tokio::time::sleep(d).await, None => std::future::pending().await } } => {
                    let now = store.now();
                    while let Some((&t, _)) = rechecks.iter().next() {
                        if t > now { break; }
                        dirty.extend(rechecks.remove(&t).unwrap_or_default());
                    }
                }
            }
            // Take whatever else is queued: one recomputation per namespace for a burst.
            while let Ok(seen) = rx.try_recv() {
                take(seen, &mut index, &mut dirty);
            }
            for ns in dirty {
                let now = tokio::time::Instant::now();
                if not_before.get(&ns).is_some_and(|t| *t > now) {
                    deferred.insert(ns);
                    continue;
                }
                let took = std::time::Instant::now();
                // Our own status writes come back as PDB events; recomputing them is a no-op
                // write (unchanged status does not create a new resourceVersion), so this settles.
                let expiry = reconcile_namespace(&store, &index, &ns);
                not_before.insert(ns.clone(), now + took.elapsed() * 9);
                if let Some(t) = expiry {
                    // A second later than the expiry, so the entry is really gone then.
                    rechecks
                        .entry(t + chrono::Duration::seconds(1))
                        .or_default()
                        .insert(ns);
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool, owner: Option<(&str, &str, &str)>) -> Value {
        let mut p = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "a"}},
                           "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}});
        if let Some((kind, n, uid)) = owner {
            p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": n, "uid": uid, "controller": true}]);
        }
        p
    }

    fn pdb(spec: Value) -> Value {
        let mut s = spec;
        s["selector"] = json!({"matchLabels": {"app": "a"}});
        json!({"metadata": {"name": "p", "namespace": "ns", "generation": 1}, "spec": s})
    }

    /// `n` pods of one controller with `replicas`, `ready` of them Ready.
    fn status(spec: Value, n: usize, ready: usize, replicas: i64) -> PdbStatus {
        let pods: Vec<Value> = (0..n)
            .map(|i| {
                pod(
                    &format!("p{i}"),
                    i < ready,
                    Some(("ReplicaSet", "rs", "u1")),
                )
            })
            .collect();
        let facts: Vec<PodFacts> = pods.iter().map(PodFacts::of).collect();
        let refs: Vec<&PodFacts> = facts.iter().collect();
        compute_status(
            &pdb(spec),
            &refs,
            &|_, c| (c.uid == "u1").then(|| ("u1".into(), replicas)),
            Utc::now(),
        )
    }

    fn summary(s: &PdbStatus) -> (i64, i64, i64, i64) {
        (
            s.expected_pods,
            s.current_healthy,
            s.desired_healthy,
            s.disruptions_allowed,
        )
    }

    #[test]
    fn scaled_values_round_up() {
        assert_eq!(scaled_value(&json!("50%"), 7), Ok(4));
        assert_eq!(scaled_value(&json!("90%"), 10), Ok(9));
        assert_eq!(scaled_value(&json!("1%"), 7), Ok(1));
        assert_eq!(scaled_value(&json!("0%"), 7), Ok(0));
        assert_eq!(scaled_value(&json!(2), 7), Ok(2));
        assert!(scaled_value(&json!("5"), 7).is_err());
    }

    /// The "Specifying a Disruption Budget" cases: a 3-replica zookeeper-like set with
    /// minAvailable 2 or maxUnavailable 1 allows one disruption; percentages round up.
    #[test]
    fn documentation_cases() {
        // minAvailable: 2 with 3 Ready pods → expected 3, healthy 3, desired 2, allowed 1.
        assert_eq!(
            summary(&status(json!({"minAvailable": 2}), 3, 3, 3)),
            (3, 3, 2, 1)
        );
        // maxUnavailable: 1 with 3 replicas → desired 2, allowed 1.
        assert_eq!(
            summary(&status(json!({"maxUnavailable": 1}), 3, 3, 3)),
            (3, 3, 2, 1)
        );
        // One pod down: nothing more may go.
        assert_eq!(
            summary(&status(json!({"minAvailable": 2}), 3, 2, 3)),
            (3, 2, 2, 0)
        );
        assert_eq!(
            summary(&status(json!({"maxUnavailable": 1}), 3, 2, 3)),
            (3, 2, 2, 0)
        );
        // 7 pods, minAvailable 50% → ceil(3.5) = 4 needed, 3 may go.
        assert_eq!(
            summary(&status(json!({"minAvailable": "50%"}), 7, 7, 7)),
            (7, 7, 4, 3)
        );
        // 7 pods, maxUnavailable 50% → ceil(3.5) = 4 may be unavailable, desired 3.
        assert_eq!(
            summary(&status(json!({"maxUnavailable": "50%"}), 7, 7, 7)),
            (7, 7, 3, 4)
        );
        // minAvailable 100% / maxUnavailable 0: no voluntary eviction at all.
        assert_eq!(
            summary(&status(json!({"minAvailable": "100%"}), 3, 3, 3)),
            (3, 3, 3, 0)
        );
        assert_eq!(
            summary(&status(json!({"maxUnavailable": 0}), 3, 3, 3)),
            (3, 3, 3, 0)
        );
        // Percentages count the controller's scale, not the pods that exist: a Deployment of
        // 5 with only 3 pods up, maxUnavailable 20% → desired 4, healthy 3 → 0 allowed.
        assert_eq!(
            summary(&status(json!({"maxUnavailable": "20%"}), 3, 3, 5)),
            (5, 3, 4, 0)
        );
        // Integer minAvailable counts pods only (works for arbitrary controllers).
        assert_eq!(
            summary(&status(json!({"minAvailable": 1}), 3, 3, 5)),
            (3, 3, 1, 2)
        );
        // No pods at all: nothing allowed.
        assert_eq!(
            summary(&status(json!({"minAvailable": 0}), 0, 0, 0)),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn daemonset_pods_fail_percentages_but_not_integer_min() {
        let facts = [PodFacts::of(&pod(
            "d",
            true,
            Some(("DaemonSet", "ds", "u9")),
        ))];
        let refs: Vec<&PodFacts> = facts.iter().collect();
        let none = |_: &str, _: &ControllerRef| None;
        let s = compute_status(&pdb(json!({"maxUnavailable": 1})), &refs, &none, Utc::now());
        assert_eq!(
            s.sync_error.as_deref(),
            Some("found no controllers for pod \"d\"")
        );
        let mut p = pdb(json!({"maxUnavailable": 1}));
        apply_status(&mut p, &s, "t");
        assert_eq!(p["status"]["disruptionsAllowed"], 0);
        assert_eq!(p["status"]["conditions"][0]["reason"], "SyncFailed");
        let s = compute_status(&pdb(json!({"minAvailable": 0})), &refs, &none, Utc::now());
        assert_eq!(summary(&s), (1, 1, 0, 1));
    }

    #[test]
    fn disrupted_pods_are_not_healthy_until_they_expire() {
        let now = Utc::now();
        let pods: Vec<PodFacts> = (0..3)
            .map(|i| {
                PodFacts::of(&pod(
                    &format!("p{i}"),
                    true,
                    Some(("ReplicaSet", "rs", "u1")),
                ))
            })
            .collect();
        let refs: Vec<&PodFacts> = pods.iter().collect();
        let scale = |_: &str, _: &ControllerRef| Some(("u1".to_string(), 3));
        let mut p = pdb(json!({"minAvailable": 2}));
        let t = now.to_rfc3339_opts(SecondsFormat::Secs, true);
        p["status"] = json!({"disruptedPods": {"p0": t}});
        let s = compute_status(&p, &refs, &scale, now);
        assert_eq!(summary(&s), (3, 2, 2, 0));
        let later = now + DELETION_TIMEOUT + chrono::Duration::seconds(1);
        let s = compute_status(&p, &refs, &scale, later);
        assert_eq!(summary(&s), (3, 3, 2, 1));
        assert!(s.disrupted_pods.is_empty());
    }

    /// The controller's path (`find` through the index, for the recently evicted only)
    /// counts as the plain one does: a disrupted pod still Ready is out of currentHealthy and
    /// keeps its entry; entries of a pod being deleted, of a pod the PDB does not select, of a
    /// pod gone and of an expired eviction are dropped.
    #[test]
    fn the_index_lookup_counts_disrupted_pods_as_the_plain_computation() {
        let now = Utc::now();
        let t = now.to_rfc3339_opts(SecondsFormat::Secs, true);
        let old = (now - DELETION_TIMEOUT - chrono::Duration::seconds(5))
            .to_rfc3339_opts(SecondsFormat::Secs, true);
        let rs = Some(("ReplicaSet", "rs", "u1"));
        let mut index = PodIndex::default();
        let mut pods: Vec<Value> = (0..6).map(|i| pod(&format!("p{i}"), i != 5, rs)).collect();
        pods[4]["metadata"]["deletionTimestamp"] = json!(t);
        let mut other = pod("q0", true, rs);
        other["metadata"]["labels"] = json!({"app": "z"});
        for p in pods.iter().chain([&other]) {
            index.apply(PodChange::of(&WatchEvent::Added(p.clone())).unwrap());
        }
        let mut p = pdb(json!({"maxUnavailable": 1}));
        // p0 evicted and still Ready; p1 evicted long ago; p4 being deleted; p5 not Ready;
        // q0 not selected; gone never existed.
        p["status"] = json!({"disruptedPods": {
            "p0": t, "p1": old, "p4": t, "p5": t, "q0": t, "gone": t}});
        let sel = LabelSelector::parse("app=a").unwrap();
        let selected = index.selected("ns", &sel);
        let scale = |_: &str, _: &ControllerRef| Some(("u1".to_string(), 6));
        let fast = compute_status_with(
            &p,
            &selected,
            &|name| index.find_selected("ns", &sel, name),
            &scale,
            now,
        );
        let plain = compute_status(&p, &selected, &scale, now);
        assert_eq!(fast, plain);
        // p1, p2, p3 are healthy; p0 is out while its eviction is recent.
        assert_eq!(summary(&fast), (6, 3, 5, 0));
        assert_eq!(fast.disrupted_pods.keys().collect::<Vec<_>>(), ["p0", "p5"]);
    }

    #[test]
    fn the_pod_index_follows_events_and_shares_controllers() {
        let mut index = PodIndex::default();
        let a = pod("a", true, Some(("ReplicaSet", "rs", "u1")));
        let b = pod("b", false, Some(("ReplicaSet", "rs", "u1")));
        let mut other = pod("c", true, None);
        other["metadata"]["namespace"] = json!("elsewhere");
        for p in [&a, &b, &other] {
            index.apply(PodChange::of(&WatchEvent::Added(p.clone())).unwrap());
        }
        assert_eq!(index.len(), 3);
        let sel = LabelSelector::parse("app=a").unwrap();
        let mut picked: Vec<(&str, bool)> = index
            .selected("ns", &sel)
            .iter()
            .map(|p| (&*p.name, p.ready))
            .collect();
        picked.sort();
        assert_eq!(picked, [("a", true), ("b", false)]);
        let both = index.selected("ns", &sel);
        let (ca, cb) = (
            both[0].controller.as_ref().unwrap(),
            both[1].controller.as_ref().unwrap(),
        );
        assert!(Arc::ptr_eq(ca, cb), "one ReplicaSet, one shared reference");
        // b becomes Ready, a is deleted: the index says so.
        let b_ready = pod("b", true, Some(("ReplicaSet", "rs", "u1")));
        index.apply(PodChange::of(&WatchEvent::Modified(b_ready)).unwrap());
        index.apply(PodChange::of(&WatchEvent::Deleted(a)).unwrap());
        let picked: Vec<(&str, bool)> = index
            .selected("ns", &sel)
            .iter()
            .map(|p| (&*p.name, p.ready))
            .collect();
        assert_eq!(picked, [("b", true)]);
        assert_eq!(index.selected("elsewhere", &sel).len(), 1);
        assert!(index.selected("nowhere", &sel).is_empty());
        // Relabelled, b leaves the selection (and its old label group).
        let mut b_moved = pod("b", true, Some(("ReplicaSet", "rs", "u1")));
        b_moved["metadata"]["labels"] = json!({"app": "z"});
        index.apply(PodChange::of(&WatchEvent::Modified(b_moved)).unwrap());
        assert!(index.selected("ns", &sel).is_empty());
        assert_eq!(index.len(), 2);
        index.apply(PodChange::of(&WatchEvent::Deleted(pod("b", true, None))).unwrap());
        assert_eq!(index.len(), 1);
    }
}
