//! Workload controllers of a simulated cluster: Deployments, ReplicaSets and DaemonSets.
//!
//! They do what their Kubernetes namesakes do for a rotation to be realistic:
//! - a Deployment owns one ReplicaSet per pod template (named `<deployment>-<hash>`, the hash
//!   also labelling its pods as `pod-template-hash`); the current one gets the Deployment's
//!   replicas, older ones are scaled to zero (a `Recreate`-like rollout, enough for the
//!   simulation);
//! - a ReplicaSet keeps its replica count: a pod that is evicted or deleted (or marked for
//!   deletion) is replaced at once by a new unscheduled pod, which the scheduler places;
//! - a DaemonSet keeps one pod on every node, bound directly and tolerating cordons, so drains
//!   leave them alone (`--ignore-daemonsets`) and they vanish with their node.
//!
//! Status (replicas, ready and available counts, `observedGeneration`) is written on a
//! debounced timer so that a thousand pods turning Ready cost one write per owner.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::ctx::Ctx;
use super::kubelet::{fnv, pod_ready};
use super::scenario::{DaemonSetProfile, DeploymentProfile};
use super::store::{ResourceType, Store, WatchEvent};

/// `namespace/name`.
pub type Key = (String, String);

fn key_of(o: &Value) -> Key {
    (
        o["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .into(),
        o["metadata"]["name"].as_str().unwrap_or_default().into(),
    )
}

/// The controller owner reference of an object, as (kind, name).
fn controller_of(o: &Value) -> Option<(String, String)> {
    o["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().into(),
                r["name"].as_str().unwrap_or_default().into(),
            )
        })
}

fn owner_ref(kind: &str, api_version: &str, owner: &Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The pod template of a workload profile.
fn template(
    app: &str,
    cpu: &str,
    memory: &str,
    ready_after_secs: u64,
    grace_secs: u64,
    node_selector: &BTreeMap<String, String>,
    empty_dir: bool,
) -> Value {
    let mut spec = json!({
        "containers": [{
            "name": app,
            "image": format!("registry.example/{app}:1.0"),
            "resources": {"requests": {"cpu": cpu, "memory": memory}},
            "readinessProbe": {"initialDelaySeconds": ready_after_secs, "periodSeconds": 10,
                               "tcpSocket": {"port": 8080}},
        }],
        "terminationGracePeriodSeconds": grace_secs,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
    });
    if !node_selector.is_empty() {
        spec["nodeSelector"] = json!(node_selector);
    }
    if empty_dir {
        spec["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
        spec["containers"][0]["volumeMounts"] =
            json!([{"name": "scratch", "mountPath": "/scratch"}]);
    }
    json!({"metadata": {"labels": {"app": app}}, "spec": spec})
}

/// The Deployment (and its PDB, if any) a profile entry describes.
pub fn deployment_objects(d: &DeploymentProfile, replicas: u32) -> (Value, Option<Value>) {
    let t = template(
        &d.name,
        &d.cpu,
        &d.memory,
        d.ready_after.as_duration().as_secs(),
        d.grace_period.as_duration().as_secs(),
        &d.node_selector,
        d.empty_dir,
    );
    let mut t = t;
    if d.do_not_disrupt {
        t["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    }
    let deploy = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": d.name, "namespace": d.namespace, "labels": {"app": d.name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": d.name}},
            "template": t,
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        },
    });
    let pdb = d.pdb.as_ref().map(|p| {
        let mut spec = json!({"selector": {"matchLabels": {"app": d.name}}});
        if let Some(v) = &p.min_available {
            spec["minAvailable"] = v.clone();
        }
        if let Some(v) = &p.max_unavailable {
            spec["maxUnavailable"] = v.clone();
        }
        json!({
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": d.name, "namespace": d.namespace},
            "spec": spec,
        })
    });
    (deploy, pdb)
}

/// The DaemonSet a profile entry describes.
pub fn daemonset_object(d: &DaemonSetProfile) -> Value {
    let mut t = template(
        &d.name,
        &d.cpu,
        &d.memory,
        d.ready_after.as_duration().as_secs(),
        30,
        &BTreeMap::new(),
        false,
    );
    // What the DaemonSet controller adds to every daemon pod.
    t["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]);
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": d.name, "namespace": d.namespace, "labels": {"app": d.name}},
        "spec": {
            "selector": {"matchLabels": {"app": d.name}},
            "template": t,
            "updateStrategy": {"type": "RollingUpdate"},
        },
    })
}

/// The `pod-template-hash` of a template: stable across runs.
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = fnv(template.to_string().as_bytes());
    (0..10)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// A new pod from a template, owned by `owner`.
pub fn pod_from_template(
    template: &Value,
    generate_name: &str,
    namespace: &str,
    owner: Value,
    node: Option<&str>,
) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": generate_name,
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [owner],
        },
        "spec": template["spec"],
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    });
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
    }
    // As a ReplicaSet does: the template's annotations are the pod's.
    if template["metadata"]["annotations"].is_object() {
        pod["metadata"]["annotations"] = template["metadata"]["annotations"].clone();
    }
    pod
}

#[derive(Clone, Debug, Default)]
struct PodInfo {
    ready: bool,
    bound: bool,
    deleting: bool,
    terminal: bool,
    node: Option<String>,
    /// Creation order: newest goes first on scale-down.
    created: String,
}

impl PodInfo {
    fn of(p: &Value) -> Self {
        let phase = p["status"]["phase"].as_str().unwrap_or("Pending");
        PodInfo {
            ready: pod_ready(p),
            bound: p["spec"]["nodeName"].is_string(),
            deleting: p["metadata"]["deletionTimestamp"].is_string(),
            terminal: phase == "Succeeded" || phase == "Failed",
            node: p["spec"]["nodeName"].as_str().map(str::to_string),
            created: p["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or_default()
                .into(),
        }
    }

    fn active(&self) -> bool {
        !self.deleting && !self.terminal
    }
}

#[derive(Clone, Debug)]
struct Owned {
    obj: Value,
    pods: PodSet,
}

/// The pods of one owner by name, with the counts the controllers and statuses read kept as
/// pods come and go: an owner of the scale scenario has 50,000 pods and is looked at after
/// every change to any of them.
#[derive(Clone, Debug, Default)]
struct PodSet {
    by_name: BTreeMap<String, PodInfo>,
    active: usize,
    active_ready: usize,
}

impl PodSet {
    fn count(&mut self, p: &PodInfo, sign: isize) {
        if p.active() {
            self.active = self.active.saturating_add_signed(sign);
            if p.ready {
                self.active_ready = self.active_ready.saturating_add_signed(sign);
            }
        }
    }

    fn insert(&mut self, name: String, info: PodInfo) {
        self.count(&info, 1);
        if let Some(old) = self.by_name.insert(name, info) {
            self.count(&old, -1);
        }
    }

    fn remove(&mut self, name: &str) {
        if let Some(old) = self.by_name.remove(name) {
            self.count(&old, -1);
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &PodInfo)> {
        self.by_name.iter()
    }

    fn into_names(self) -> Vec<String> {
        self.by_name.into_keys().collect()
    }
}

/// The Deployment, ReplicaSet and DaemonSet controllers of one cluster.
#[derive(Default)]
pub struct Workloads {
    deployments: BTreeMap<Key, Value>,
    replicasets: BTreeMap<Key, Owned>,
    daemonsets: BTreeMap<Key, Owned>,
    /// Node name → schedulable for daemon pods (exists; daemon pods tolerate cordons).
    nodes: BTreeSet<String>,
    dirty_deploy: BTreeSet<Key>,
    dirty_rs: BTreeSet<Key>,
    dirty_ds: BTreeSet<Key>,
    dirty_nodes: BTreeSet<String>,
    status_rs: BTreeSet<Key>,
    status_ds: BTreeSet<Key>,
    status_deploy: BTreeSet<Key>,
    /// Dependents of deleted owners, for the garbage collector.
    orphans: Vec<Orphan>,
}

/// What the garbage collector deletes because its owner is gone.
#[derive(Debug)]
enum Orphan {
    /// The ReplicaSets controlled by this Deployment.
    ReplicaSetsOf(Key),
    /// Pods of a deleted ReplicaSet or DaemonSet: namespace and names.
    Pods(String, Vec<String>),
}

impl Workloads {
    pub fn on_deployment(&mut self, ev: &WatchEvent) {
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let k = key_of(o);
                self.deployments.insert(k.clone(), o.clone());
                self.dirty_deploy.insert(k);
            }
            WatchEvent::Deleted(o) => {
                // The garbage collector's cascade: its ReplicaSets go, and with them their
                // pods (see `on_replicaset`).
                let k = key_of(o);
                self.deployments.remove(&k);
                self.orphans.push(Orphan::ReplicaSetsOf(k));
            }
            WatchEvent::Bookmark(_) => {}
        }
    }

    pub fn on_replicaset(&mut self, ev: &WatchEvent) {
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let k = key_of(o);
                let e = self.replicasets.entry(k.clone()).or_insert_with(|| Owned {
                    obj: Value::Null,
                    pods: PodSet::default(),
                });
                e.obj = o.clone();
                self.dirty_rs.insert(k.clone());
                if let Some(("Deployment", d)) =
                    controller_of(o).as_ref().map(|(a, b)| (a.as_str(), b))
                {
                    self.status_deploy.insert((k.0.clone(), d.clone()));
                }
            }
            WatchEvent::Deleted(o) => {
                let k = key_of(o);
                if let Some(rs) = self.replicasets.remove(&k) {
                    self.orphans.push(Orphan::Pods(k.0, rs.pods.into_names()));
                }
            }
            WatchEvent::Bookmark(_) => {}
        }
    }

    pub fn on_daemonset(&mut self, ev: &WatchEvent) {
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let k = key_of(o);
                let e = self.daemonsets.entry(k.clone()).or_insert_with(|| Owned {
                    obj: Value::Null,
                    pods: PodSet::default(),
                });
                e.obj = o.clone();
                self.dirty_ds.insert(k);
            }
            WatchEvent::Deleted(o) => {
                let k = key_of(o);
                if let Some(ds) = self.daemonsets.remove(&k) {
                    self.orphans.push(Orphan::Pods(k.0, ds.pods.into_names()));
                }
            }
            WatchEvent::Bookmark(_) => {}
        }
    }

    pub fn on_node(&mut self, ev: &WatchEvent) {
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let name = key_of(o).1;
                if self.nodes.insert(name.clone()) {
                    self.dirty_nodes.insert(name);
                }
            }
            WatchEvent::Deleted(o) => {
                let name = key_of(o).1;
                self.nodes.remove(&name);
                self.dirty_nodes.insert(name);
            }
            WatchEvent::Bookmark(_) => {}
        }
    }

    pub fn on_pod(&mut self, ev: &WatchEvent) {
        let (p, deleted) = match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => (p, false),
            WatchEvent::Deleted(p) => (p, true),
            WatchEvent::Bookmark(_) => return,
        };
        let Some((kind, owner)) = controller_of(p) else {
            return;
        };
        let (ns, name) = key_of(p);
        let k = (ns, owner);
        let (map, dirty, status) = match kind.as_str() {
            "ReplicaSet" => (
                &mut self.replicasets,
                &mut self.dirty_rs,
                &mut self.status_rs,
            ),
            "DaemonSet" => (
                &mut self.daemonsets,
                &mut self.dirty_ds,
                &mut self.status_ds,
            ),
            _ => return,
        };
        // A pod may be seen before its owner (watch streams are independent): keep it under
        // a placeholder so the owner's first reconcile counts it.
        if deleted && !map.contains_key(&k) {
            return;
        }
        let o = map.entry(k.clone()).or_insert_with(|| Owned {
            obj: Value::Null,
            pods: PodSet::default(),
        });
        if deleted {
            o.pods.remove(&name);
        } else {
            o.pods.insert(name, PodInfo::of(p));
        }
        dirty.insert(k.clone());
        status.insert(k);
    }

    /// Whether any status is waiting for the debounced write.
    pub fn status_pending(&self) -> bool {
        !(self.status_rs.is_empty() && self.status_ds.is_empty() && self.status_deploy.is_empty())
    }

    /// Act on everything that changed since the last call.
    pub fn reconcile(&mut self, ctx: &mut Ctx) {
        let store = ctx.store.clone();
        for orphan in std::mem::take(&mut self.orphans) {
            match orphan {
                Orphan::ReplicaSetsOf(d) => {
                    let owned: Vec<Key> = self
                        .replicasets
                        .iter()
                        .filter(|(k, rs)| {
                            k.0 == d.0
                                && controller_of(&rs.obj)
                                    .is_some_and(|(kind, n)| kind == "Deployment" && n == d.1)
                        })
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in owned {
                        let _ = store.delete(&ResourceType::replicasets(), Some(&k.0), &k.1);
                    }
                }
                Orphan::Pods(ns, names) => {
                    for n in names {
                        let _ = store.delete(&ResourceType::pods(), Some(&ns), &n);
                    }
                }
            }
        }
        for k in std::mem::take(&mut self.dirty_deploy) {
            self.reconcile_deployment(&store, &k);
        }
        for k in std::mem::take(&mut self.dirty_rs) {
            self.reconcile_replicaset(&store, &k);
        }
        let dirty_nodes = std::mem::take(&mut self.dirty_nodes);
        let dirty_ds = std::mem::take(&mut self.dirty_ds);
        let keys: Vec<Key> = self.daemonsets.keys().cloned().collect();
        for k in keys {
            if dirty_ds.contains(&k) {
                let all: Vec<String> = self.nodes.iter().cloned().collect();
                self.reconcile_daemonset(&store, &k, all.iter().chain(dirty_nodes.iter()));
            } else if !dirty_nodes.is_empty() {
                self.reconcile_daemonset(&store, &k, dirty_nodes.iter());
            }
        }
    }

    fn reconcile_deployment(&mut self, store: &Store, k: &Key) {
        let Some(d) = self.deployments.get(k).cloned() else {
            return;
        };
        let hash = template_hash(&d["spec"]["template"]);
        let rs_name = format!("{}-{hash}", k.1);
        let replicas = d["spec"]["replicas"].as_u64().unwrap_or(1);
        let mut t = d["spec"]["template"].clone();
        t["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        let mut selector = d["spec"]["selector"].clone();
        selector["matchLabels"]["pod-template-hash"] = json!(hash);
        let rt = ResourceType::replicasets();
        let current = (k.0.clone(), rs_name.clone());
        if let Some(rs) = self.replicasets.get(&current) {
            if rs.obj["spec"]["replicas"].as_u64() != Some(replicas) {
                let _ = store.modify(&rt, Some(&k.0), &rs_name, |o| {
                    o["spec"]["replicas"] = json!(replicas);
                    Ok(())
                });
            }
        } else {
            let rs = json!({
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "namespace": k.0,
                    "labels": t["metadata"]["labels"],
                    "ownerReferences": [owner_ref("Deployment", "apps/v1", &d)],
                    "annotations": {"deployment.kubernetes.io/revision": "1"},
                },
                "spec": {"replicas": replicas, "selector": selector, "template": t},
            });
            if let Ok(created) = store.create(&rt, Some(&k.0), rs) {
                self.on_replicaset(&WatchEvent::Added(created));
            }
        }
        // Older ReplicaSets of this Deployment go to zero.
        let old: Vec<Key> = self
            .replicasets
            .iter()
            .filter(|(rk, rs)| {
                rk.0 == k.0
                    && **rk != current
                    && controller_of(&rs.obj)
                        .is_some_and(|(kind, n)| kind == "Deployment" && n == k.1)
                    && rs.obj["spec"]["replicas"].as_u64() != Some(0)
            })
            .map(|(rk, _)| rk.clone())
            .collect();
        for rk in old {
            let _ = store.modify(&rt, Some(&rk.0), &rk.1, |o| {
                o["spec"]["replicas"] = json!(0);
                Ok(())
            });
        }
        self.status_deploy.insert(k.clone());
    }

    fn reconcile_replicaset(&mut self, store: &Store, k: &Key) {
        let Some(rs) = self.replicasets.get_mut(k).filter(|o| !o.obj.is_null()) else {
            return;
        };
        let want = rs.obj["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
        // Counted, not copied: a ReplicaSet of the scale scenario has 50,000 pods and is
        // dirty after every change to any of them.
        let active = rs.pods.active;
        let pods_rt = ResourceType::pods();
        if active < want {
            let owner = owner_ref("ReplicaSet", "apps/v1", &rs.obj);
            for _ in active..want {
                let pod = pod_from_template(
                    &rs.obj["spec"]["template"],
                    &format!("{}-", k.1),
                    &k.0,
                    owner.clone(),
                    None,
                );
                match store.create(&pods_rt, Some(&k.0), pod) {
                    // Count it now: its watch event comes later, and must not cause a second.
                    Ok(p) => {
                        rs.pods.insert(key_of(&p).1, PodInfo::of(&p));
                    }
                    Err(e) => {
                        tracing::warn!(replicaset = %k.1, error = %e, "pod create failed");
                        break;
                    }
                }
            }
        } else if active > want {
            // Scale down: unscheduled first, then not ready, then the newest.
            let extra = active - want;
            let mut victims: Vec<(String, PodInfo)> = rs
                .pods
                .iter()
                .filter(|(_, p)| p.active())
                .map(|(n, p)| (n.clone(), p.clone()))
                .collect();
            victims.sort_by(|(an, a), (bn, b)| {
                (a.bound, a.ready, std::cmp::Reverse(&a.created), an).cmp(&(
                    b.bound,
                    b.ready,
                    std::cmp::Reverse(&b.created),
                    bn,
                ))
            });
            for (name, _) in victims.into_iter().take(extra) {
                if let Ok(p) = store.mark_deleting(&pods_rt, Some(&k.0), &name, 30) {
                    rs.pods.insert(name, PodInfo::of(&p));
                }
            }
        }
        self.status_rs.insert(k.clone());
    }

    fn reconcile_daemonset<'a>(
        &mut self,
        store: &Store,
        k: &Key,
        nodes: impl Iterator<Item = &'a String>,
    ) {
        let Some(ds) = self.daemonsets.get_mut(k).filter(|o| !o.obj.is_null()) else {
            return;
        };
        let pods_rt = ResourceType::pods();
        // Only the nodes asked about: a change of one node must not copy the names of a
        // DaemonSet's 5,000 pods.
        let wanted: BTreeSet<&String> = nodes.collect();
        let mut on_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, p) in ds.pods.iter().filter(|(_, p)| p.active()) {
            if let Some(n) = &p.node
                && wanted.contains(n)
            {
                on_node.entry(n.clone()).or_default().push(name.clone());
            }
        }
        let owner = owner_ref("DaemonSet", "apps/v1", &ds.obj);
        for node in wanted {
            let exists = self.nodes.contains(node);
            let have = on_node.get(node).map_or(0, Vec::len);
            if exists && have == 0 {
                let pod = pod_from_template(
                    &ds.obj["spec"]["template"],
                    &format!("{}-", k.1),
                    &k.0,
                    owner.clone(),
                    Some(node),
                );
                if let Ok(p) = store.create(&pods_rt, Some(&k.0), pod) {
                    ds.pods.insert(key_of(&p).1, PodInfo::of(&p));
                }
            } else if !exists && have > 0 {
                for name in &on_node[node] {
                    let _ = store.delete(&pods_rt, Some(&k.0), name);
                    ds.pods.remove(name);
                }
            }
        }
        self.status_ds.insert(k.clone());
    }

    /// Write the statuses that changed (the debounced part).
    pub fn flush_status(&mut self, store: &Store) {
        for k in std::mem::take(&mut self.status_rs) {
            let Some(rs) = self.replicasets.get(&k).filter(|o| !o.obj.is_null()) else {
                continue;
            };
            let (active, ready) = (rs.pods.active, rs.pods.active_ready);
            let status = json!({
                "replicas": active,
                "fullyLabeledReplicas": active,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": rs.obj["metadata"]["generation"],
            });
            if rs.obj["status"] != status {
                let _ = store.modify(&ResourceType::replicasets(), Some(&k.0), &k.1, |o| {
                    o["status"] = status;
                    Ok(())
                });
            }
            if let Some(("Deployment", d)) = controller_of(&rs.obj)
                .as_ref()
                .map(|(a, b)| (a.as_str(), b))
            {
                self.status_deploy.insert((k.0.clone(), d.clone()));
            }
        }
        for k in std::mem::take(&mut self.status_deploy) {
            let Some(d) = self.deployments.get(&k) else {
                continue;
            };
            let hash = template_hash(&d["spec"]["template"]);
            let (mut replicas, mut ready, mut updated) = (0, 0, 0);
            for (rk, rs) in &self.replicasets {
                let owned = rk.0 == k.0
                    && controller_of(&rs.obj)
                        .is_some_and(|(kind, n)| kind == "Deployment" && n == k.1);
                if !owned {
                    continue;
                }
                replicas += rs.pods.active;
                ready += rs.pods.active_ready;
                if rk.1 == format!("{}-{hash}", k.1) {
                    updated += rs.pods.active;
                }
            }
            let want = d["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
            let available = if ready >= want { "True" } else { "False" };
            let status = json!({
                "observedGeneration": d["metadata"]["generation"],
                "replicas": replicas,
                "updatedReplicas": updated,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "unavailableReplicas": want.saturating_sub(ready),
                "conditions": [{"type": "Available", "status": available,
                                "reason": if available == "True" { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" }}],
            });
            if d["status"] != status {
                let _ = store.modify(&ResourceType::deployments(), Some(&k.0), &k.1, |o| {
                    o["status"] = status;
                    Ok(())
                });
            }
        }
        for k in std::mem::take(&mut self.status_ds) {
            let Some(ds) = self.daemonsets.get(&k).filter(|o| !o.obj.is_null()) else {
                continue;
            };
            let (active, ready) = (ds.pods.active, ds.pods.active_ready);
            let status = json!({
                "desiredNumberScheduled": self.nodes.len(),
                "currentNumberScheduled": active,
                "updatedNumberScheduled": active,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": self.nodes.len().saturating_sub(ready),
                "numberMisscheduled": 0,
                "observedGeneration": ds.obj["metadata"]["generation"],
            });
            if ds.obj["status"] != status {
                let _ = store.modify(&ResourceType::daemonsets(), Some(&k.0), &k.1, |o| {
                    o["status"] = status;
                    Ok(())
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::WorkloadProfile;

    #[test]
    fn a_pod_set_keeps_its_counts_through_replacements_and_removals() {
        let info = |ready, deleting| PodInfo {
            ready,
            deleting,
            ..Default::default()
        };
        let mut set = PodSet::default();
        set.insert("a".into(), info(true, false));
        set.insert("b".into(), info(false, false));
        assert_eq!((set.active, set.active_ready), (2, 1));
        // b becomes Ready, then a is being deleted: replaced entries are uncounted first.
        set.insert("b".into(), info(true, false));
        set.insert("a".into(), info(true, true));
        assert_eq!((set.active, set.active_ready), (1, 1));
        set.remove("a");
        set.remove("a");
        set.remove("b");
        assert_eq!((set.active, set.active_ready), (0, 0));
        assert!(set.into_names().is_empty());
    }

    /// `doNotDisrupt: true` marks the pod template, and a pod made from a template carries
    /// its annotations (as a ReplicaSet's pods do): what the drain reads.
    #[test]
    fn a_do_not_disrupt_profile_marks_every_pod_made_from_it() {
        let w = WorkloadProfile::from_yaml(
            "deployments:\n  - {name: trainer, namespace: ml, replicas: 1, doNotDisrupt: true}\n",
            "t",
        )
        .unwrap();
        let (deploy, _) = deployment_objects(&w.deployments[0], 1);
        let t = &deploy["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"],
            "true"
        );
        let pod = pod_from_template(t, "trainer-", "ml", json!({}), None);
        assert_eq!(
            pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"],
            "true"
        );
        let plain = WorkloadProfile::default();
        let (deploy, _) = deployment_objects(&plain.deployments[0], 1);
        let pod = pod_from_template(&deploy["spec"]["template"], "x-", "ns", json!({}), None);
        assert!(pod["metadata"]["annotations"].is_null(), "{pod}");
    }

    #[test]
    fn profile_entries_become_kubernetes_objects() {
        let w = WorkloadProfile::default();
        let db = w.deployments.iter().find(|d| d.name == "postgres").unwrap();
        let (deploy, pdb) = deployment_objects(db, 3);
        assert_eq!(deploy["spec"]["replicas"], 3);
        assert_eq!(
            deploy["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
            60
        );
        assert_eq!(
            deploy["spec"]["template"]["spec"]["volumes"][0]["emptyDir"],
            json!({})
        );
        assert_eq!(pdb.unwrap()["spec"]["maxUnavailable"], 1);
        let ds = daemonset_object(&w.daemon_sets[0]);
        assert!(
            ds["spec"]["template"]["spec"]["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["key"] == "node.kubernetes.io/unschedulable")
        );
        let h = template_hash(&deploy["spec"]["template"]);
        assert_eq!(h.len(), 10);
        assert_eq!(h, template_hash(&deploy["spec"]["template"]), "stable");
    }
}
