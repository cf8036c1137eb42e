//! The simulated kubelets of one cluster: nodes that follow their cloud's instances, and the
//! life of the pods bound to them.
//!
//! Nodes: an instance in service registers a Node after `registerAfter` (with its pool's
//! `nodeSelector` labels, the topology labels of its zone and a providerID in its cloud's real
//! format), which turns Ready after `readyAfter`. An instance that is terminating makes its
//! node NotReady (status Unknown, as when a kubelet stops posting); an instance that is gone
//! takes its node with it, and the pods bound there are deleted (the pod garbage collector's
//! job). The kubelet sees instances through an [`InstanceObserver`], so it follows any
//! `NodeGroups` provider, not only the simulated cloud.
//!
//! Pods: a pod bound to a node starts running a second later and turns Ready after its
//! readiness probe's `initialDelaySeconds`; a pod marked for deletion is removed once its
//! grace period has passed, counted on the simulated clock from the mark (`timekeeping`).
//! On a node of a bad build ([`InstanceObserver::defect`]) the pod network fails to come up
//! for a workload's pod: its sandbox fails [`SANDBOX_FAILURES`] times, [`SANDBOX_RETRY`]
//! apart, each posting a `Warning` `FailedCreatePodSandBox` event (one Event, its `count`
//! raised, as the kubelet aggregates them), before the pod starts. DaemonSet and
//! host-network pods are not on the pod network and start as usual, so the node turns Ready
//! and drains are not held: what catches the build is an events gate.
//!
//! A kubelet can die ([`kill_kubelet`], a fault): its node turns NotReady (Unknown) while its
//! instance keeps running, and nothing on it changes any more. Pods marked for deletion there
//! stay Terminating forever (nobody confirms their end), and no pod starts there.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::cloud::InstanceObserver;
use super::ctx::{Ctx, Timer};
use super::naming::vmss_computer_name;
use super::store::{ListOptions, ResourceType, Store, WatchEvent};
use super::timekeeping::DueDeletion;
use rota_core::cloud::{GroupRef, Instance, Lifecycle};
use rota_core::fleet::owner::ManagedGroup;

/// One pool as the kubelet registers its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolNodes {
    pub pool: String,
    pub group: GroupRef,
    /// The pool's `nodeSelector`: every node of the pool carries these labels.
    pub labels: BTreeMap<String, String>,
}

/// Size and timings of simulated nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeShape {
    pub cpu: String,
    pub memory: String,
    pub pods: u32,
    pub register_after: Duration,
    pub ready_after: Duration,
}

/// The Node name a cloud gives an instance: `ip-…` on AWS, the instance name on GCP, the
/// scale set name plus a six-digit base-36 ordinal on Azure (as AKS names them).
///
/// `attempt` resolves collisions: AWS names come from a private address hashed from the
/// instance ID, and two instances of a large cluster may hash to the same one; the kubelet
/// then takes the next address, as a VPC would never hand out the same address twice.
pub fn node_name(group: &GroupRef, inst: &Instance, attempt: u32) -> String {
    match group {
        GroupRef::Aws { region, .. } => {
            // A stable private address derived from the instance ID.
            let h = fnv(inst.id.as_bytes()).wrapping_add(u64::from(attempt) * 7919);
            let domain = if region == "us-east-1" {
                "ec2.internal".to_string()
            } else {
                format!("{region}.compute.internal")
            };
            format!(
                "ip-10-{}-{}-{}.{domain}",
                (h >> 16) & 0xff,
                (h >> 8) & 0xff,
                (h & 0xff).max(1)
            )
        }
        GroupRef::Gcp { .. } => inst.id.clone(),
        GroupRef::Azure { scale_set, .. } => {
            vmss_computer_name(scale_set, inst.id.parse().unwrap_or(0))
        }
        // An AKS agent pool's VM is known by its computer name (its scale set's name and
        // ordinal), which is its node's name too.
        GroupRef::Managed(ManagedGroup::AksAgentPool { .. }) => inst.id.clone(),
        GroupRef::Managed(m) => format!("{}-{}", m.name(), inst.id),
    }
}

pub use super::naming::fnv;

fn region_of(group: &GroupRef, zone: &str) -> Option<String> {
    match group {
        GroupRef::Aws { region, .. } => Some(region.clone()),
        GroupRef::Gcp {
            region, zone: z, ..
        } => region
            .clone()
            .or_else(|| {
                z.as_ref()
                    .and_then(|z| z.rsplit_once('-').map(|(r, _)| r.into()))
            })
            .or_else(|| zone.rsplit_once('-').map(|(r, _)| r.to_string())),
        GroupRef::Azure { .. } => zone
            .rsplit_once('-')
            .filter(|(_, n)| n.chars().all(|c| c.is_ascii_digit()))
            .map(|(r, _)| r.to_string()),
        GroupRef::Managed(m) => m.region().map(str::to_string),
    }
}

/// The Node object an instance registers, NotReady until its kubelet reports Ready.
pub fn node_object(
    pool: &PoolNodes,
    inst: &Instance,
    name: &str,
    shape: &NodeShape,
    now: &str,
    ready: bool,
) -> Value {
    let name = name.to_string();
    let mut labels: BTreeMap<String, String> = pool.labels.clone();
    let instance_type = match pool.group {
        GroupRef::Aws { .. } => "m6i.xlarge",
        GroupRef::Gcp { .. } => "e2-standard-4",
        GroupRef::Azure { .. } => "Standard_D4s_v5",
        GroupRef::Managed(ref m) => match m.cloud() {
            rota_core::fleet::resolved::Cloud::Aws => "m6i.xlarge",
            rota_core::fleet::resolved::Cloud::Gcp => "e2-standard-4",
            rota_core::fleet::resolved::Cloud::Azure => "Standard_D4s_v5",
        },
    };
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    labels.insert(
        "node.kubernetes.io/instance-type".into(),
        instance_type.into(),
    );
    labels.insert("topology.kubernetes.io/zone".into(), inst.zone.clone());
    if let Some(region) = region_of(&pool.group, &inst.zone) {
        labels.insert("topology.kubernetes.io/region".into(), region);
    }
    let resources =
        json!({"cpu": shape.cpu, "memory": shape.memory, "pods": shape.pods.to_string()});
    let h = fnv(inst.id.as_bytes());
    let mut kubelet = "v1.33.4".to_string();
    // EKS labels a managed node group's nodes with the group and the AMI, and its kubelets
    // report an EKS build (`v1.33.4-eks-<hash>`).
    if let GroupRef::Managed(m @ rota_core::fleet::owner::ManagedGroup::EksNodegroup { .. }) =
        &pool.group
    {
        use rota_core::cloud::managed::{EKS_NODEGROUP_IMAGE_LABEL, EKS_NODEGROUP_LABEL};
        labels.insert(EKS_NODEGROUP_LABEL.into(), m.name().to_string());
        labels.insert(EKS_NODEGROUP_IMAGE_LABEL.into(), inst.image.clone());
        kubelet = format!(
            "v1.33.4-eks-{:07x}",
            fnv(inst.image.as_bytes()) & 0xfff_ffff
        );
    }
    // GKE labels a node pool's nodes with the pool and its image type's OS and runtime; the
    // node version is the kubelet's own (`v1.31.5-gke.1023000`): no label carries it.
    if let GroupRef::Managed(m @ rota_core::fleet::owner::ManagedGroup::GkeNodePool { .. }) =
        &pool.group
    {
        use rota_core::cloud::managed::{self as owned, GkeTarget};
        labels.insert(owned::GKE_NODEPOOL_LABEL.into(), m.name().to_string());
        if let Some(t) = GkeTarget::parse(&inst.image) {
            if let Some((os, runtime)) = owned::gke_image_type_labels(&t.image_type) {
                labels.insert(owned::GKE_OS_DISTRIBUTION_LABEL.into(), os.into());
                labels.insert(owned::GKE_CONTAINER_RUNTIME_LABEL.into(), runtime.into());
            }
            if let Some(v) = t.node_version {
                kubelet = format!("v{v}");
            }
        }
    }
    // AKS labels an agent pool's nodes with the pool and the node image; a node image
    // upgrade leaves the kubelet at the cluster's Kubernetes version.
    if let GroupRef::Managed(m @ rota_core::fleet::owner::ManagedGroup::AksAgentPool { .. }) =
        &pool.group
    {
        use rota_core::cloud::managed::{AKS_AGENTPOOL_LABEL, AKS_NODE_IMAGE_LABEL};
        labels.insert(AKS_AGENTPOOL_LABEL.into(), m.name().to_string());
        labels.insert(AKS_NODE_IMAGE_LABEL.into(), inst.image.clone());
        kubelet = "v1.31.5".into();
    }
    // Karpenter labels its nodes with the NodePool and the NodeClass (named alike here).
    if let GroupRef::Managed(m @ rota_core::fleet::owner::ManagedGroup::KarpenterNodePool { .. }) =
        &pool.group
    {
        use rota_core::cloud::karpenter::NODEPOOL_LABEL;
        labels.insert(NODEPOOL_LABEL.into(), m.name().to_string());
        labels.insert(
            "karpenter.k8s.aws/ec2nodeclass".into(),
            m.name().to_string(),
        );
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": inst.provider_id},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": node_conditions(ready, now),
            "addresses": [
                {"type": "InternalIP", "address": node_ip(&name)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": kubelet,
                "kubeProxyVersion": "v1.33.4",
                "containerRuntimeVersion": "containerd://1.7.27",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": inst.image,
                "kernelVersion": "6.1.0",
                "machineID": format!("{h:032x}"),
                "systemUUID": format!("{h:032x}"),
                "bootID": format!("{:032x}", h.rotate_left(17)),
            },
        },
    })
}

/// Node conditions: Ready (`True`, `False` while starting) and the pressure conditions a
/// healthy node reports.
fn node_conditions(ready: bool, now: &str) -> Value {
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        (
            "False",
            "KubeletNotReady",
            "container runtime network not ready",
        )
    };
    json!([
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
         "lastHeartbeatTime": now, "lastTransitionTime": now},
        {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
         "lastHeartbeatTime": now, "lastTransitionTime": now},
        {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
         "lastHeartbeatTime": now, "lastTransitionTime": now},
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "lastHeartbeatTime": now, "lastTransitionTime": now},
    ])
}

/// Annotation on a Node whose kubelet is dead (set by [`kill_kubelet`]).
pub const KUBELET_DEAD: &str = "sim.rota.dev/kubelet-dead";

/// Kill the kubelet of `node`: it stops posting status (Ready turns Unknown) and stops
/// acting on its pods. The instance keeps running.
pub fn kill_kubelet(store: &Store, node: &str) -> Result<(), super::store::ApiError> {
    let now = store.timestamp();
    store
        .modify(&ResourceType::nodes(), None, node, |n| {
            n["metadata"]["annotations"][KUBELET_DEAD] = json!("true");
            set_ready(
                n,
                "Unknown",
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
                &now,
            );
            Ok(())
        })
        .map(|_| ())
}

/// Whether the kubelet of the node named `node` is dead.
fn kubelet_dead(store: &Store, node: &str) -> bool {
    store
        .get(&ResourceType::nodes(), None, node)
        .is_ok_and(|n| n["metadata"]["annotations"][KUBELET_DEAD] == "true")
}

/// Whether the kubelet that runs pod `ns/name` is dead.
fn pods_kubelet_dead(store: &Store, ns: &str, name: &str) -> bool {
    store
        .get(&ResourceType::pods(), Some(ns), name)
        .ok()
        .and_then(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
        .is_some_and(|node| kubelet_dead(store, &node))
}

fn set_ready(node: &mut Value, status: &str, reason: &str, message: &str, now: &str) {
    if let Some(cs) = node["status"]["conditions"].as_array_mut() {
        for c in cs.iter_mut().filter(|c| c["type"] == "Ready") {
            if c["status"] != status {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            c["lastHeartbeatTime"] = json!(now);
        }
    }
}

/// A pod as its kubelet reports it once containers run (`ready`: readiness passed).
pub fn pod_running(pod: &mut Value, host_ip: &str, pod_ip: &str, now: &str, ready: bool) {
    let r = if ready { "True" } else { "False" };
    let started = pod["status"]["startTime"]
        .as_str()
        .unwrap_or(now)
        .to_string();
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    json!({
                        "name": c["name"], "image": c["image"], "imageID": "",
                        "ready": ready, "started": true, "restartCount": 0,
                        "containerID": format!("containerd://{:016x}", fnv(pod_ip.as_bytes())),
                        "state": {"running": {"startedAt": started}},
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    pod["status"] = json!({
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": started,
        "qosClass": "Burstable",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": started},
            {"type": "Initialized", "status": "True", "lastTransitionTime": started},
            {"type": "Ready", "status": r, "lastTransitionTime": now},
            {"type": "ContainersReady", "status": r, "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
        ],
        "containerStatuses": containers,
    });
}

/// How many times a workload pod's sandbox fails on a bad build's node before it starts.
pub const SANDBOX_FAILURES: u32 = 3;
/// How long the kubelet waits before it tries a failed sandbox again.
pub const SANDBOX_RETRY: Duration = Duration::from_secs(10);

/// The kubelet's Warning Event for a pod sandbox that failed (reason
/// `FailedCreatePodSandBox`, as the real kubelet words it): one Event per pod, its `count`
/// raised on each failure.
fn sandbox_failed(store: &Store, ns: &str, pod: &str, uid: &str, count: u32, why: &str) {
    // On the cluster's simulated clock, where the events gate looks for it.
    let now = store
        .sim_now()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let name = format!("{pod}.sandbox");
    let raised = store.modify(&ResourceType::events(), Some(ns), &name, |e| {
        e["count"] = json!(count);
        e["lastTimestamp"] = json!(now);
        Ok(())
    });
    if raised.is_ok() {
        return;
    }
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": ns, "uid": uid},
        "reason": "FailedCreatePodSandBox",
        "message": format!("Failed to create pod sandbox: {why}"),
        "type": "Warning",
        "source": {"component": "kubelet"},
        "firstTimestamp": now, "lastTimestamp": now, "count": count,
    });
    if let Err(e) = store.create(&ResourceType::events(), Some(ns), event) {
        tracing::warn!(pod, error = %e, "cannot record the sandbox failure");
    }
}

/// Whether a pod's JSON says it is Ready.
pub fn pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The readiness delay of a pod: its first container's readiness probe initial delay.
fn readiness_delay(pod: &Value) -> Duration {
    let secs = pod["spec"]["containers"][0]["readinessProbe"]["initialDelaySeconds"]
        .as_u64()
        .unwrap_or(0);
    Duration::from_secs(secs)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// In service; the node registers when its timer fires.
    Booting,
    Registered,
    Ready,
    /// The instance is terminating: the node is NotReady until the instance is gone.
    Lost,
}

#[derive(Clone, Debug)]
struct Known {
    pool: usize,
    name: String,
    instance: Instance,
    phase: Phase,
}

/// Every kubelet of one cluster.
pub struct Kubelets {
    pools: Vec<PoolNodes>,
    observer: Arc<dyn InstanceObserver>,
    shape: NodeShape,
    /// providerID → the node it is (or will be).
    nodes: BTreeMap<String, Known>,
    by_name: BTreeMap<String, String>,
    started: HashSet<String>,
    /// Sandbox failures so far, by pod UID, on nodes of a bad build.
    sandbox_failures: BTreeMap<String, u32>,
    next_ip: u32,
}

impl Kubelets {
    pub fn new(
        pools: Vec<PoolNodes>,
        observer: Arc<dyn InstanceObserver>,
        shape: NodeShape,
    ) -> Self {
        Kubelets {
            pools,
            observer,
            shape,
            nodes: BTreeMap::new(),
            by_name: BTreeMap::new(),
            started: HashSet::new(),
            sandbox_failures: BTreeMap::new(),
            next_ip: 0,
        }
    }

    pub fn observer(&self) -> &Arc<dyn InstanceObserver> {
        &self.observer
    }

    /// Node groups created beside a pool's group (an EKS node group's blue-green twin)
    /// register their nodes with the pool's labels, as `CreateNodegroup` copies the labels
    /// of the node group it is made from.
    fn add_derived(&mut self) {
        let mut add: Vec<PoolNodes> = Vec::new();
        for p in &self.pools {
            for g in self.observer.derived(&p.group) {
                if !self.pools.iter().chain(&add).any(|q| q.group == g) {
                    add.push(PoolNodes {
                        pool: p.pool.clone(),
                        group: g,
                        labels: p.labels.clone(),
                    });
                }
            }
        }
        self.pools.extend(add);
    }

    /// Take over nodes that exist already (a scenario loaded with its fleet running).
    pub fn adopt(&mut self, store: &Store) {
        let (nodes, _) = store
            .list(&ResourceType::nodes(), None, &ListOptions::default())
            .unwrap_or_default();
        for n in nodes {
            let pid = n["spec"]["providerID"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let Some(pool) = self.pools.iter().position(|p| {
                p.labels
                    .iter()
                    .all(|(k, v)| n["metadata"]["labels"][k].as_str() == Some(v))
            }) else {
                continue;
            };
            let ready = n["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            let instance = Instance {
                id: String::new(),
                provider_id: pid.clone(),
                image: n["status"]["nodeInfo"]["osImage"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
                zone: String::new(),
                lifecycle: Lifecycle::InService,
                launch_error: None,
            };
            self.by_name.insert(name.clone(), pid.clone());
            self.nodes.insert(
                pid,
                Known {
                    pool,
                    name,
                    instance,
                    phase: if ready {
                        Phase::Ready
                    } else {
                        Phase::Registered
                    },
                },
            );
        }
    }

    /// Compare every pool's instances with the nodes and act on the difference.
    pub async fn sync(&mut self, ctx: &mut Ctx) {
        self.add_derived();
        for (pi, pool) in self.pools.clone().iter().enumerate() {
            // An observer that fails (a throttled describe) just tries again next time.
            let Ok(state) = self.observer.observe(&pool.group).await else {
                continue;
            };
            let mut seen = HashSet::new();
            for inst in &state.instances {
                seen.insert(inst.provider_id.clone());
                match (inst.lifecycle, self.nodes.get_mut(&inst.provider_id)) {
                    (Lifecycle::InService, None) => {
                        let name = node_name(&pool.group, inst, 0);
                        self.nodes.insert(
                            inst.provider_id.clone(),
                            Known {
                                pool: pi,
                                name,
                                instance: inst.clone(),
                                phase: Phase::Booting,
                            },
                        );
                        ctx.after(
                            self.shape.register_after,
                            Timer::RegisterNode(inst.provider_id.clone()),
                        );
                    }
                    (Lifecycle::InService, Some(k)) if k.instance.id.is_empty() => {
                        // Adopted from the store: learn the instance's details.
                        k.instance = inst.clone();
                    }
                    (Lifecycle::Terminating, Some(k)) if k.phase != Phase::Lost => {
                        let was_registered = k.phase != Phase::Booting;
                        k.phase = Phase::Lost;
                        if was_registered && matches!(pool.group, GroupRef::Managed(_)) {
                            evict_pods_on(&ctx.store, &k.name, ctx.speed());
                        }
                        if was_registered {
                            let now = ctx.store.timestamp();
                            let _ = ctx
                                .store
                                .modify(&ResourceType::nodes(), None, &k.name, |n| {
                                    set_ready(
                                        n,
                                        "Unknown",
                                        "NodeStatusUnknown",
                                        "Kubelet stopped posting node status.",
                                        &now,
                                    );
                                    Ok(())
                                });
                        }
                    }
                    _ => {}
                }
            }
            let gone: Vec<String> = self
                .nodes
                .iter()
                .filter(|(pid, k)| k.pool == pi && !seen.contains(*pid))
                .map(|(pid, _)| pid.clone())
                .collect();
            for pid in gone {
                if let Some(k) = self.nodes.remove(&pid) {
                    self.by_name.remove(&k.name);
                    remove_node(&ctx.store, &k.name);
                }
            }
        }
    }

    pub fn on_timer(&mut self, ctx: &mut Ctx, timer: &Timer) {
        let store = ctx.store.clone();
        match timer {
            Timer::RegisterNode(pid) => {
                let Some(k) = self.nodes.get_mut(pid) else {
                    return;
                };
                if k.phase != Phase::Booting {
                    return;
                }
                let pool = &self.pools[k.pool];
                match register(&store, pool, &k.instance, &self.shape, false) {
                    Ok(name) => {
                        k.name = name.clone();
                        k.phase = Phase::Registered;
                        self.by_name.insert(name.clone(), pid.clone());
                        ctx.after(self.shape.ready_after, Timer::NodeReady(name));
                    }
                    Err(e) => {
                        tracing::warn!(node = %k.name, error = %e, "node registration failed")
                    }
                }
            }
            Timer::NodeReady(name) => {
                let Some(k) = self
                    .by_name
                    .get(name)
                    .and_then(|pid| self.nodes.get_mut(pid))
                else {
                    return;
                };
                if k.phase != Phase::Registered || kubelet_dead(&store, name) {
                    return;
                }
                k.phase = Phase::Ready;
                let now = store.timestamp();
                let _ = store.modify(&ResourceType::nodes(), None, name, |n| {
                    set_ready(
                        n,
                        "True",
                        "KubeletReady",
                        "kubelet is posting ready status",
                        &now,
                    );
                    Ok(())
                });
            }
            Timer::PodStart { ns, name, uid } | Timer::PodReady { ns, name, uid } => {
                if pods_kubelet_dead(&store, ns, name) {
                    return;
                }
                let ready = matches!(timer, Timer::PodReady { .. });
                if !ready && let Some(why) = self.bad_image_under(&store, ns, name) {
                    let failed = self.sandbox_failures.entry(uid.clone()).or_insert(0);
                    if *failed < SANDBOX_FAILURES {
                        // The pod network of a bad build's node does not come up: the
                        // sandbox fails, the kubelet says so and tries again.
                        *failed += 1;
                        sandbox_failed(&store, ns, name, uid, *failed, &why);
                        ctx.after(SANDBOX_RETRY, timer.clone());
                        return;
                    }
                }
                let now = store.timestamp();
                let mut delay = None;
                let ip = self.next_ip;
                let res = store.modify(&ResourceType::pods(), Some(ns), name, |p| {
                    let same = p["metadata"]["uid"].as_str() == Some(uid.as_str());
                    if !same || p["metadata"]["deletionTimestamp"].is_string() {
                        return Err(super::store::ApiError::new(409, "Conflict", "pod changed"));
                    }
                    let node = p["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let host = node_ip(&node);
                    let pod_ip = p["status"]["podIP"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| {
                            format!(
                                "100.{}.{}.{}",
                                64 + (ip >> 16) % 64,
                                (ip >> 8) & 0xff,
                                ip & 0xff
                            )
                        });
                    pod_running(p, &host, &pod_ip, &now, ready);
                    if !ready {
                        delay = Some(readiness_delay(p));
                    }
                    Ok(())
                });
                if res.is_ok() {
                    self.next_ip = self.next_ip.wrapping_add(1);
                    if let Some(d) = delay {
                        ctx.after(
                            d,
                            Timer::PodReady {
                                ns: ns.clone(),
                                name: name.clone(),
                                uid: uid.clone(),
                            },
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// Why the pod `ns/name`'s network does not come up: its node runs a bad build
    /// ([`InstanceObserver::defect`]). The node agents of DaemonSets (on the host's
    /// network) and host-network pods are not on the pod network: the node looks healthy.
    fn bad_image_under(&self, store: &Store, ns: &str, name: &str) -> Option<String> {
        let pod = store.get(&ResourceType::pods(), Some(ns), name).ok()?;
        let daemon = pod["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "DaemonSet"));
        if daemon || pod["spec"]["hostNetwork"] == true {
            return None;
        }
        let node = pod["spec"]["nodeName"].as_str()?;
        let known = self.by_name.get(node).and_then(|pid| self.nodes.get(pid))?;
        self.observer.defect(&known.instance.image)
    }

    /// Pods whose grace period is over go, as their kubelets confirm their end: all of them
    /// at once, whatever else the world has queued (`timekeeping`). A dead kubelet never
    /// confirms the end of its pods: they stay Terminating until the node goes (the pod
    /// garbage collector then removes them).
    pub fn reap(&self, store: &Store, due: &[DueDeletion]) {
        for d in due {
            if pods_kubelet_dead(store, &d.namespace, &d.name) {
                continue;
            }
            let _ = store.delete_if(
                &ResourceType::pods(),
                Some(&d.namespace),
                &d.name,
                Some(&d.uid),
            );
        }
    }

    /// Pods bound to a node start (pods marked for deletion go when [`Kubelets::reap`] finds
    /// their grace period over).
    pub fn on_pod(&mut self, ctx: &mut Ctx, ev: &WatchEvent) {
        let (pod, deleted) = match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => (p, false),
            WatchEvent::Deleted(p) => (p, true),
            WatchEvent::Bookmark(_) => return,
        };
        let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
        if deleted {
            self.started.remove(uid);
            self.sandbox_failures.remove(uid);
            return;
        }
        let ns = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if pod["metadata"]["deletionTimestamp"].is_string() {
            return;
        }
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            return;
        };
        let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
        let node_up = self
            .by_name
            .get(node)
            .and_then(|pid| self.nodes.get(pid))
            .is_some_and(|k| k.phase != Phase::Lost && k.phase != Phase::Booting);
        if phase == "Pending" && node_up && self.started.insert(uid.to_string()) {
            ctx.after(
                Duration::from_secs(1),
                Timer::PodStart {
                    ns,
                    name,
                    uid: uid.to_string(),
                },
            );
        }
    }

    /// A node deleted by someone else (`kubectl delete node`): its pods go, and a kubelet
    /// whose instance still runs registers it again.
    pub fn on_node_deleted(&mut self, ctx: &mut Ctx, node: &Value) {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        delete_pods_on(&ctx.store, name);
        if let Some(pid) = self.by_name.get(name).cloned()
            && let Some(k) = self.nodes.get_mut(&pid)
            && k.phase != Phase::Lost
            && k.phase != Phase::Booting
        {
            k.phase = Phase::Booting;
            ctx.after(self.shape.register_after, Timer::RegisterNode(pid));
        }
    }
}

/// Create the Node of `inst`, taking the first free name; returns it.
pub fn register(
    store: &Store,
    pool: &PoolNodes,
    inst: &Instance,
    shape: &NodeShape,
    ready: bool,
) -> Result<String, super::store::ApiError> {
    let now = store.timestamp();
    let mut attempt = 0;
    loop {
        let name = node_name(&pool.group, inst, attempt);
        match store.create(
            &ResourceType::nodes(),
            None,
            node_object(pool, inst, &name, shape, &now, ready),
        ) {
            Err(e) if e.code == 409 && attempt < 64 => attempt += 1,
            Err(e) => return Err(e),
            Ok(_) => return Ok(name),
        }
    }
}

/// The InternalIP a node name maps to (same derivation as [`node_object`] for AWS names,
/// a hash for others): only used to fill `status.hostIP`.
fn node_ip(node: &str) -> String {
    if let Some(rest) = node.strip_prefix("ip-")
        && let Some((ip, _)) = rest.split_once('.')
    {
        return ip.replace('-', ".");
    }
    let h = fnv(node.as_bytes());
    format!(
        "10.{}.{}.{}",
        (h >> 16) & 0xff,
        (h >> 8) & 0xff,
        (h & 0xff).max(1)
    )
}

fn remove_node(store: &Store, name: &str) {
    let _ = store.delete(&ResourceType::nodes(), None, name);
    delete_pods_on(store, name);
}

/// EKS drains a managed node group's node when its instance is scaled in or replaced (the
/// node group's lifecycle hook): every pod but a DaemonSet's is evicted through the Eviction
/// API, budgets respected. Modelled at the moment the instance starts terminating: the pods
/// go gracefully while it shuts down; a pod a budget protects is left to the garbage
/// collector when the node is gone, as EKS forces a drain that outlasts its 15 minutes.
fn evict_pods_on(store: &Store, node: &str, speed: f64) {
    let opts = ListOptions::fields(&format!("spec.nodeName={node}"));
    let Ok((pods, _)) = store.list(&ResourceType::pods(), None, &opts) else {
        return;
    };
    for p in pods {
        let daemon = p["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "DaemonSet"));
        if daemon {
            continue;
        }
        let ns = p["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                          "metadata": {"name": name, "namespace": ns}});
        let _ = super::eviction::evict(store, ns, name, &body, speed);
    }
}

/// The pod garbage collector: pods bound to a node that no longer exists are deleted.
fn delete_pods_on(store: &Store, node: &str) {
    let opts = ListOptions::fields(&format!("spec.nodeName={node}"));
    if let Ok((pods, _)) = store.list(&ResourceType::pods(), None, &opts) {
        for p in pods {
            let ns = p["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            let _ = store.delete(&ResourceType::pods(), Some(ns), name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(id: &str, pid: &str, zone: &str) -> Instance {
        Instance {
            id: id.into(),
            provider_id: pid.into(),
            image: "ami-1".into(),
            zone: zone.into(),
            lifecycle: Lifecycle::InService,
            launch_error: None,
        }
    }

    #[test]
    fn nodes_are_named_and_labelled_as_their_cloud_does() {
        let aws = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "g".into(),
        };
        let i = inst("i-0abc", "aws:///us-east-1a/i-0abc", "us-east-1a");
        let name = node_name(&aws, &i, 0);
        assert_ne!(name, node_name(&aws, &i, 1));
        assert!(
            name.starts_with("ip-10-") && name.ends_with(".ec2.internal"),
            "{name}"
        );
        let az = GroupRef::Azure {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            scale_set: "aks-general-vmss".into(),
        };
        assert_eq!(
            node_name(&az, &inst("37", "", "1"), 0),
            "aks-general-vmss000011"
        );
        let pool = PoolNodes {
            pool: "general".into(),
            group: aws,
            labels: [(
                "eks.amazonaws.com/nodegroup".to_string(),
                "general".to_string(),
            )]
            .into(),
        };
        let shape = NodeShape {
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: 110,
            register_after: Duration::ZERO,
            ready_after: Duration::ZERO,
        };
        let n = node_object(&pool, &i, &name, &shape, "2026-01-01T00:00:00Z", false);
        let labels = &n["metadata"]["labels"];
        assert_eq!(labels["eks.amazonaws.com/nodegroup"], "general");
        assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1a");
        assert_eq!(labels["topology.kubernetes.io/region"], "us-east-1");
        assert_eq!(n["spec"]["providerID"], "aws:///us-east-1a/i-0abc");
        assert_eq!(n["status"]["allocatable"]["pods"], "110");
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "False");
        assert_eq!(
            node_ip(&name),
            n["status"]["addresses"][0]["address"].as_str().unwrap()
        );
    }

    /// EKS's drain of a node it scales in: the workload's pod is evicted (a pod not yet
    /// running goes at once, as the Eviction API deletes it), a DaemonSet's is left.
    #[tokio::test(start_paused = true)]
    async fn a_managed_nodes_pods_are_evicted_but_not_its_daemon_sets() {
        let store = Store::new();
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}});
        store.create(&ResourceType::namespaces(), None, ns).unwrap();
        for (name, owner) in [("web-1", "ReplicaSet"), ("agent-1", "DaemonSet")] {
            let pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "app", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "u1",
                     "controller": true}]},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}
            });
            store
                .create(&ResourceType::pods(), Some("app"), pod)
                .unwrap();
        }
        evict_pods_on(&store, "n1", 1.0);
        let web = store.get(&ResourceType::pods(), Some("app"), "web-1");
        let evicted = match &web {
            Ok(p) => p["metadata"]["deletionTimestamp"].is_string(),
            Err(_) => true,
        };
        assert!(evicted, "{web:?}");
        let agent = store
            .get(&ResourceType::pods(), Some("app"), "agent-1")
            .unwrap();
        assert!(agent["metadata"]["deletionTimestamp"].is_null(), "{agent}");
    }
}
