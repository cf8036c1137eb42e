//! The simulated scheduler: binds pending pods to schedulable Ready nodes with room.
//!
//! The decision is a pure function ([`fit`], [`choose`]) over small views of nodes and pods
//! read from their Kubernetes JSON ([`NodeView`], [`PodView`]). It honours what a rotation
//! exercises: readiness, cordon (`spec.unschedulable`), `nodeSelector`, `NoSchedule` /
//! `NoExecute` taints against tolerations, and CPU, memory and pod-count room against
//! allocatable. Among the nodes that fit it picks the least allocated (by CPU share, then by
//! name), which spreads replicas as the default scoring does.
//!
//! The loop ([`Scheduler::run`]) watches the store and binds with an atomic `modify` that
//! re-checks the pod is still unbound.

use std::collections::BTreeMap;

use serde_json::Value;

use super::quantity::{parse_cpu_millis, parse_memory};

/// The taint kubectl cordon is mirrored by, and DaemonSet pods tolerate.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toleration {
    pub key: Option<String>,
    /// `Equal` (default) or `Exists`.
    pub operator: String,
    pub value: Option<String>,
    pub effect: Option<String>,
}

impl Toleration {
    /// Kubernetes' rule: an empty key with `Exists` tolerates everything; the effect must
    /// match unless empty; `Exists` ignores the value, `Equal` compares it.
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self
            .effect
            .as_deref()
            .is_some_and(|e| !e.is_empty() && e != t.effect)
        {
            return false;
        }
        match self.key.as_deref() {
            None | Some("") => self.operator == "Exists",
            Some(k) if k != t.key => false,
            Some(_) => self.operator == "Exists" || self.value.as_deref().unwrap_or("") == t.value,
        }
    }
}

/// What the scheduler needs of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub ready: bool,
    pub cpu_millis: u64,
    pub memory: u64,
    pub pods: u64,
}

/// What the scheduler needs of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    pub cpu_millis: u64,
    pub memory: u64,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// Room already taken on a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_millis: u64,
    pub memory: u64,
    pub pods: u64,
}

impl Usage {
    pub fn add(&mut self, p: &PodView) {
        self.cpu_millis += p.cpu_millis;
        self.memory += p.memory;
        self.pods += 1;
    }

    pub fn sub(&mut self, p: &PodView) {
        self.cpu_millis = self.cpu_millis.saturating_sub(p.cpu_millis);
        self.memory = self.memory.saturating_sub(p.memory);
        self.pods = self.pods.saturating_sub(1);
    }
}

/// Why a pod does not fit a node (the reasons `kubectl describe pod` would show).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfit {
    NotReady,
    Unschedulable,
    NodeSelectorMismatch(String),
    Taint(String),
    InsufficientCpu,
    InsufficientMemory,
    TooManyPods,
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfit::NotReady => f.write_str("node is not ready"),
            Unfit::Unschedulable => f.write_str("node is unschedulable"),
            Unfit::NodeSelectorMismatch(k) => write!(f, "node does not match nodeSelector {k}"),
            Unfit::Taint(k) => write!(f, "node has untolerated taint {k}"),
            Unfit::InsufficientCpu => f.write_str("Insufficient cpu"),
            Unfit::InsufficientMemory => f.write_str("Insufficient memory"),
            Unfit::TooManyPods => f.write_str("Too many pods"),
        }
    }
}

fn tolerated(pod: &PodView, t: &Taint) -> bool {
    pod.tolerations.iter().any(|tol| tol.tolerates(t))
}

/// Whether `pod` may run on `node` given what is already there.
pub fn fit(node: &NodeView, used: &Usage, pod: &PodView) -> Result<(), Unfit> {
    if !node.ready {
        return Err(Unfit::NotReady);
    }
    if node.unschedulable {
        let cordon = Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            value: String::new(),
            effect: "NoSchedule".into(),
        };
        if !tolerated(pod, &cordon) {
            return Err(Unfit::Unschedulable);
        }
    }
    for (k, v) in &pod.node_selector {
        if node.labels.get(k) != Some(v) {
            return Err(Unfit::NodeSelectorMismatch(format!("{k}={v}")));
        }
    }
    for t in &node.taints {
        if (t.effect == "NoSchedule" || t.effect == "NoExecute") && !tolerated(pod, t) {
            return Err(Unfit::Taint(format!("{}:{}", t.key, t.effect)));
        }
    }
    if used.pods + 1 > node.pods {
        return Err(Unfit::TooManyPods);
    }
    if used.cpu_millis + pod.cpu_millis > node.cpu_millis {
        return Err(Unfit::InsufficientCpu);
    }
    if used.memory + pod.memory > node.memory {
        return Err(Unfit::InsufficientMemory);
    }
    Ok(())
}

/// The node `pod` goes to: among those it fits, the least allocated by CPU share, then by
/// memory share, then by name. `None` when none fits.
pub fn choose<'a>(
    nodes: impl IntoIterator<Item = (&'a NodeView, &'a Usage)>,
    pod: &PodView,
) -> Option<&'a NodeView> {
    let mut best: Option<(&NodeView, (u64, u64))> = None;
    for (n, u) in nodes {
        if fit(n, u, pod).is_err() {
            continue;
        }
        // Shares in parts per million, so the comparison is exact integer arithmetic.
        let share = |used: u64, cap: u64| used.saturating_mul(1_000_000) / cap.max(1);
        let score = (
            share(u.cpu_millis + pod.cpu_millis, n.cpu_millis),
            share(u.memory + pod.memory, n.memory),
        );
        let better = match &best {
            None => true,
            Some((b, s)) => score < *s || (score == *s && n.name < b.name),
        };
        if better {
            best = Some((n, score));
        }
    }
    best.map(|(n, _)| n)
}

/// `0/N nodes are available: <count> <reason>, ...` with reasons sorted, as kube-scheduler
/// words it.
pub fn unschedulable_message<'a>(
    nodes: impl IntoIterator<Item = (&'a NodeView, &'a Usage)>,
    pod: &PodView,
) -> String {
    let mut total = 0;
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (n, u) in nodes {
        total += 1;
        if let Err(e) = fit(n, u, pod) {
            let reason = match e {
                Unfit::NotReady => "node(s) were not ready".to_string(),
                Unfit::Unschedulable => "node(s) were unschedulable".to_string(),
                Unfit::NodeSelectorMismatch(_) => {
                    "node(s) didn't match Pod's node affinity/selector".to_string()
                }
                Unfit::Taint(t) => format!("node(s) had untolerated taint {{{t}}}"),
                other => other.to_string(),
            };
            *reasons.entry(reason).or_default() += 1;
        }
    }
    let parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

fn str_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

impl NodeView {
    /// Read a Node's JSON. A node without allocatable has no room.
    pub fn from_json(node: &Value) -> Self {
        let alloc = &node["status"]["allocatable"];
        let ready = node["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        NodeView {
            name: s(&node["metadata"]["name"]),
            labels: str_map(&node["metadata"]["labels"]),
            taints: node["spec"]["taints"]
                .as_array()
                .map(|ts| {
                    ts.iter()
                        .map(|t| Taint {
                            key: s(&t["key"]),
                            value: s(&t["value"]),
                            effect: s(&t["effect"]),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            unschedulable: node["spec"]["unschedulable"].as_bool().unwrap_or(false),
            ready,
            cpu_millis: alloc["cpu"]
                .as_str()
                .and_then(parse_cpu_millis)
                .unwrap_or(0),
            memory: alloc["memory"].as_str().and_then(parse_memory).unwrap_or(0),
            pods: alloc["pods"]
                .as_str()
                .and_then(|p| p.parse().ok())
                .or_else(|| alloc["pods"].as_u64())
                .unwrap_or(0),
        }
    }
}

impl PodView {
    /// Read a Pod's JSON: requests summed over its containers.
    pub fn from_json(pod: &Value) -> Self {
        let mut view = PodView {
            node_selector: str_map(&pod["spec"]["nodeSelector"]),
            ..Default::default()
        };
        if let Some(cs) = pod["spec"]["containers"].as_array() {
            for c in cs {
                let r = &c["resources"]["requests"];
                view.cpu_millis += r["cpu"].as_str().and_then(parse_cpu_millis).unwrap_or(0);
                view.memory += r["memory"].as_str().and_then(parse_memory).unwrap_or(0);
            }
        }
        if let Some(ts) = pod["spec"]["tolerations"].as_array() {
            let opt = |v: &Value| v.as_str().map(str::to_string);
            view.tolerations = ts
                .iter()
                .map(|t| Toleration {
                    key: opt(&t["key"]),
                    operator: t["operator"].as_str().unwrap_or("Equal").to_string(),
                    value: opt(&t["value"]),
                    effect: opt(&t["effect"]),
                })
                .collect();
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> NodeView {
        NodeView {
            name: name.into(),
            labels: [("pool".to_string(), "general".to_string())].into(),
            taints: vec![],
            unschedulable: false,
            ready: true,
            cpu_millis: 1000,
            memory: 1 << 30,
            pods: 3,
        }
    }

    fn pod(cpu: u64) -> PodView {
        PodView {
            cpu_millis: cpu,
            memory: 1 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn room_readiness_and_cordon() {
        let n = node("a");
        let used = Usage {
            cpu_millis: 800,
            memory: 0,
            pods: 1,
        };
        assert_eq!(fit(&n, &used, &pod(200)), Ok(()));
        assert_eq!(fit(&n, &used, &pod(201)), Err(Unfit::InsufficientCpu));
        let full = Usage { pods: 3, ..used };
        assert_eq!(fit(&n, &full, &pod(1)), Err(Unfit::TooManyPods));
        let mut cordoned = node("a");
        cordoned.unschedulable = true;
        assert_eq!(
            fit(&cordoned, &Usage::default(), &pod(1)),
            Err(Unfit::Unschedulable)
        );
        let mut ds = pod(1);
        ds.tolerations.push(Toleration {
            key: Some(UNSCHEDULABLE_TAINT.into()),
            operator: "Exists".into(),
            value: None,
            effect: Some("NoSchedule".into()),
        });
        assert_eq!(fit(&cordoned, &Usage::default(), &ds), Ok(()));
        let mut down = node("a");
        down.ready = false;
        assert_eq!(fit(&down, &Usage::default(), &ds), Err(Unfit::NotReady));
    }

    #[test]
    fn node_selector_and_taints() {
        let mut p = pod(1);
        p.node_selector.insert("pool".into(), "gpu".into());
        assert!(matches!(
            fit(&node("a"), &Usage::default(), &p),
            Err(Unfit::NodeSelectorMismatch(_))
        ));
        let mut gpu = node("g");
        gpu.taints.push(Taint {
            key: "nvidia.com/gpu".into(),
            value: "true".into(),
            effect: "NoSchedule".into(),
        });
        assert!(matches!(
            fit(&gpu, &Usage::default(), &pod(1)),
            Err(Unfit::Taint(_))
        ));
        let mut tolerant = pod(1);
        tolerant.tolerations.push(Toleration {
            key: Some("nvidia.com/gpu".into()),
            operator: "Equal".into(),
            value: Some("true".into()),
            effect: None,
        });
        assert_eq!(fit(&gpu, &Usage::default(), &tolerant), Ok(()));
        // PreferNoSchedule never blocks.
        gpu.taints[0].effect = "PreferNoSchedule".into();
        assert_eq!(fit(&gpu, &Usage::default(), &pod(1)), Ok(()));
        // Exists without a key tolerates everything.
        let all = Toleration {
            key: None,
            operator: "Exists".into(),
            value: None,
            effect: None,
        };
        assert!(all.tolerates(&gpu.taints[0]));
    }

    #[test]
    fn chooses_the_least_allocated_then_by_name() {
        let (a, b, c) = (node("a"), node("b"), node("c"));
        let ua = Usage {
            cpu_millis: 500,
            ..Default::default()
        };
        let ub = Usage::default();
        let uc = Usage::default();
        let nodes = [(&a, &ua), (&b, &ub), (&c, &uc)];
        assert_eq!(choose(nodes, &pod(100)).unwrap().name, "b");
        assert!(choose(nodes, &pod(2000)).is_none());
    }

    #[test]
    fn unschedulable_messages_count_reasons() {
        let mut cordoned = node("a");
        cordoned.unschedulable = true;
        let (b, c) = (node("b"), node("c"));
        let full = Usage {
            cpu_millis: 1000,
            ..Default::default()
        };
        let free = Usage::default();
        let msg = unschedulable_message([(&cordoned, &free), (&b, &full), (&c, &full)], &pod(100));
        assert_eq!(
            msg,
            "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) were unschedulable."
        );
    }

    #[test]
    fn reads_kubernetes_json() {
        let n = NodeView::from_json(&json!({
            "metadata": {"name": "n1", "labels": {"pool": "general"}},
            "spec": {"unschedulable": true, "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
            "status": {
                "allocatable": {"cpu": "3500m", "memory": "15Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }));
        assert!(n.ready && n.unschedulable);
        assert_eq!((n.cpu_millis, n.memory, n.pods), (3500, 15 << 30, 110));
        assert_eq!(n.taints[0].effect, "NoExecute");
        let p = PodView::from_json(&json!({"spec": {
            "nodeSelector": {"pool": "general"},
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"resources": {"requests": {"cpu": "1"}}}
            ]
        }}));
        assert_eq!((p.cpu_millis, p.memory), (1250, 64 << 20));
        assert_eq!(p.tolerations[0].operator, "Exists");
    }
}

/// The scheduler of one cluster: an index of nodes, their usage and the pending pods.
#[derive(Default)]
pub struct Scheduler {
    nodes: BTreeMap<String, (NodeView, Usage)>,
    /// Bound pods: (namespace, name) → (node, demand), to keep usage exact.
    bound: std::collections::HashMap<(String, String), (String, PodView)>,
    /// Pending pods in arrival order: sequence → key, and key → (sequence, demand).
    queue: BTreeMap<u64, (String, String)>,
    pending: std::collections::HashMap<(String, String), (u64, PodView, String)>,
    seq: u64,
    /// The last unschedulable message written per pending pod.
    reported: std::collections::HashMap<(String, String), String>,
    /// Set when something changed that may let a pending pod fit.
    dirty: bool,
    /// Where the next pod's search for a node starts (kube-scheduler's `nextStartNodeIndex`).
    next_start: usize,
}

/// How many feasible nodes kube-scheduler looks for before it scores them
/// (`numFeasibleNodesToFind`, with the default `percentageOfNodesToScore`): every node below
/// 100, else an adaptive share, 50% less a percent per 125 nodes, at least 5%, and never
/// fewer than 100 nodes. At 20,000 nodes that is 1,000: the real scheduler does not score a
/// pod against every node of a large cluster, and neither does the simulated one.
pub fn feasible_nodes_to_find(nodes: usize) -> usize {
    const MIN_FEASIBLE: usize = 100;
    if nodes < MIN_FEASIBLE {
        return nodes;
    }
    let percent = 50usize.saturating_sub(nodes / 125).max(5);
    (nodes * percent / 100).max(MIN_FEASIBLE)
}

fn pod_key(p: &Value) -> (String, String) {
    (s(&p["metadata"]["namespace"]), s(&p["metadata"]["name"]))
}

impl Scheduler {
    pub fn on_node(&mut self, ev: &super::store::WatchEvent) {
        use super::store::WatchEvent as E;
        match ev {
            E::Added(n) | E::Modified(n) => {
                let v = NodeView::from_json(n);
                let name = v.name.clone();
                let usage = self.nodes.get(&name).map(|(_, u)| *u).unwrap_or_default();
                self.nodes.insert(name, (v, usage));
            }
            E::Deleted(n) => {
                self.nodes.remove(&s(&n["metadata"]["name"]));
            }
            E::Bookmark(_) => return,
        }
        self.dirty = true;
    }

    pub fn on_pod(&mut self, ev: &super::store::WatchEvent) {
        use super::store::WatchEvent as E;
        let (p, deleted) = match ev {
            E::Added(p) | E::Modified(p) => (p, false),
            E::Deleted(p) => (p, true),
            E::Bookmark(_) => return,
        };
        let key = pod_key(p);
        let phase = p["status"]["phase"].as_str().unwrap_or("Pending");
        let gone = deleted || phase == "Succeeded" || phase == "Failed";
        // Forget what we knew, then record what is true now.
        if let Some((node, demand)) = self.bound.remove(&key) {
            if let Some((_, u)) = self.nodes.get_mut(&node) {
                u.sub(&demand);
            }
            self.dirty = true;
        }
        if let Some((seq, _, _)) = self.pending.remove(&key) {
            self.queue.remove(&seq);
        }
        if gone || p["spec"]["nodeName"].is_string() {
            self.reported.remove(&key);
        }
        if gone {
            return;
        }
        let demand = PodView::from_json(p);
        match p["spec"]["nodeName"].as_str() {
            Some(node) => {
                if let Some((_, u)) = self.nodes.get_mut(node) {
                    u.add(&demand);
                }
                self.bound.insert(key, (node.to_string(), demand));
            }
            None if p["metadata"]["deletionTimestamp"].is_null() => {
                self.seq += 1;
                self.queue.insert(self.seq, key.clone());
                let uid = s(&p["metadata"]["uid"]);
                self.pending.insert(key, (self.seq, demand, uid));
                self.dirty = true;
            }
            None => {}
        }
    }

    /// Bind every pending pod that fits somewhere, oldest first. Returns how many were bound.
    pub fn schedule(&mut self, store: &super::store::Store) -> usize {
        if !self.dirty || self.queue.is_empty() {
            return 0;
        }
        self.dirty = false;
        let now = store.timestamp();
        let mut bound = 0;
        let queue: Vec<(u64, (String, String))> =
            self.queue.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (seq, key) in queue {
            let Some((_, demand, uid)) = self.pending.get(&key).cloned() else {
                continue;
            };
            let choice = self.choose_sampled(&demand);
            let Some(node) = choice else {
                self.report_unschedulable(store, &key, &uid, &demand, &now);
                continue;
            };
            let res = store.modify(&super::store::ResourceType::pods(), Some(&key.0), &key.1, |p| {
                if p["spec"]["nodeName"].is_string() || s(&p["metadata"]["uid"]) != uid {
                    return Err(super::store::ApiError::new(409, "Conflict", "already bound"));
                }
                p["spec"]["nodeName"] = serde_json::json!(node);
                let conds = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
                let mut conds: Vec<Value> =
                    conds.into_iter().filter(|c| c["type"] != "PodScheduled").collect();
                conds.push(serde_json::json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now}));
                p["status"]["conditions"] = Value::Array(conds);
                Ok(())
            });
            self.queue.remove(&seq);
            self.pending.remove(&key);
            if res.is_ok() {
                if let Some((_, u)) = self.nodes.get_mut(&node) {
                    u.add(&demand);
                }
                self.bound.insert(key, (node, demand));
                bound += 1;
            }
        }
        bound
    }

    /// The node for `demand`, searched as kube-scheduler searches: from where the last search
    /// stopped, round the nodes, until [`feasible_nodes_to_find`] nodes fit (or every node
    /// was looked at); the best of those by [`choose`].
    fn choose_sampled(&mut self, demand: &PodView) -> Option<String> {
        let total = self.nodes.len();
        if total == 0 {
            return None;
        }
        let want = feasible_nodes_to_find(total);
        let start = self.next_start % total;
        let mut looked = 0;
        let choice = {
            let feasible = self
                .nodes
                .values()
                .skip(start)
                .chain(self.nodes.values().take(start))
                .inspect(|_| looked += 1)
                .filter(|(n, u)| fit(n, u, demand).is_ok())
                .take(want);
            choose(feasible.map(|(n, u)| (n, u)), demand).map(|n| n.name.clone())
        };
        self.next_start = (start + looked) % total;
        choice
    }

    /// Tell why a pod waits, as the real scheduler does in its `PodScheduled` condition
    /// (`0/5 nodes are available: 2 Insufficient cpu, 3 node(s) were unschedulable.`). Written
    /// only when the message changes.
    fn report_unschedulable(
        &mut self,
        store: &super::store::Store,
        key: &(String, String),
        uid: &str,
        demand: &PodView,
        now: &str,
    ) {
        let message = unschedulable_message(self.nodes.values().map(|(n, u)| (n, u)), demand);
        if self.reported.get(key) == Some(&message) {
            return;
        }
        self.reported.insert(key.clone(), message.clone());
        let _ = store.modify(
            &super::store::ResourceType::pods(),
            Some(&key.0),
            &key.1,
            |p| {
                if s(&p["metadata"]["uid"]) != uid || p["spec"]["nodeName"].is_string() {
                    return Err(super::store::ApiError::new(409, "Conflict", "changed"));
                }
                let mut conds: Vec<Value> = p["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| c["type"] != "PodScheduled")
                    .collect();
                conds.push(
                    serde_json::json!({"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": message, "lastTransitionTime": now}),
                );
                p["status"]["conditions"] = Value::Array(conds);
                Ok(())
            },
        );
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod sampling_tests {
    use super::*;

    #[test]
    fn the_share_of_nodes_searched_is_kube_schedulers() {
        assert_eq!(feasible_nodes_to_find(3), 3);
        assert_eq!(feasible_nodes_to_find(99), 99);
        assert_eq!(feasible_nodes_to_find(100), 100);
        assert_eq!(feasible_nodes_to_find(1_000), 420);
        assert_eq!(feasible_nodes_to_find(5_000), 500);
        assert_eq!(feasible_nodes_to_find(20_000), 1_000);
    }

    fn scheduler(nodes: usize) -> Scheduler {
        let mut s = Scheduler::default();
        for i in 0..nodes {
            let name = format!("n{i:04}");
            let view = NodeView {
                name: name.clone(),
                labels: BTreeMap::new(),
                taints: vec![],
                unschedulable: false,
                ready: true,
                cpu_millis: 4000,
                memory: 16 << 30,
                pods: 110,
            };
            s.nodes.insert(name, (view, Usage::default()));
        }
        s
    }

    /// Each search starts where the last one stopped: on 1,000 empty nodes the first pod
    /// looks at n0000..n0419 and takes n0000, the second looks at n0420..n0839 and takes
    /// n0420, the third looks at n0840..n0999 and round to n0259, and takes the first name
    /// among equals (n0000).
    #[test]
    fn a_search_starts_where_the_last_one_stopped() {
        let mut s = scheduler(1_000);
        let pod = PodView {
            cpu_millis: 100,
            memory: 1 << 20,
            ..Default::default()
        };
        let picks: Vec<String> = (0..3)
            .map(|_| s.choose_sampled(&pod).expect("a node fits"))
            .collect();
        assert_eq!(picks, ["n0000", "n0420", "n0000"]);
        assert_eq!(s.next_start, 260);
        // Small clusters are searched whole, as before: the least allocated node wins.
        let mut small = scheduler(3);
        small.nodes.get_mut("n0000").unwrap().1.add(&pod);
        assert_eq!(small.choose_sampled(&pod).as_deref(), Some("n0001"));
        assert_eq!(small.choose_sampled(&pod).as_deref(), Some("n0001"));
    }
}
