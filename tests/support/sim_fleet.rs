//! One simulated cluster with the rotation controller's resources, as the sim tests and the
//! benches set it up: a scenario of one cluster ([`cluster`], a small builder), the fleet
//! started and settled with the NodePoolRotation CRD installed ([`SimCluster`]), a pool's
//! resource ([`spec`], [`npr`]), a test controller ([`test_config`]), and the reads the
//! invariant checks share (a group retried through the faults a test injects, PDBs short of
//! healthy pods, pods left on a terminating instance), and a cloud whose calls are counted
//! ([`CountedGroups`], [`CountedOwner`]); the benches run theirs on [`block_on_paused`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, ObjectReference, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use rota::cloud::managed::{
    OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, TwinRequest, UpdateRequest,
};
use rota::cloud::{Arch, CloudError, GroupRef, GroupState, ImageCheck, Lifecycle, NodeGroups};
use rota::controller::{Config, Controller};
use rota::fleet::duration::GoDuration;
use rota::fleet::owner::{ManagedGroup, Owner};
use rota::fleet::resolved::{Cloud, EffectivePolicy, GateCheck, Mode, ResolvedGate};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec, NodePoolRotationStatus};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::store::Store;
use rota::sim::world::Fleet;

/// The cluster's name, unless [`ClusterBuilder::named`] says otherwise.
pub const CLUSTER: &str = "sim-1";

/// A scenario of one cluster on `cloud`, drawn from `seed`: no pools yet, no workloads, no
/// faults.
pub fn cluster(cloud: Cloud, seed: u64) -> ClusterBuilder {
    ClusterBuilder {
        scenario: Scenario {
            clusters: vec![ClusterScenario {
                name: CLUSTER.into(),
                cloud,
                pools: Vec::new(),
            }],
            workloads: WorkloadProfile::default(),
            faults: FaultProfile::default(),
            seed,
        },
    }
}

/// The one-cluster scenario being built.
pub struct ClusterBuilder {
    scenario: Scenario,
}

impl ClusterBuilder {
    pub fn named(mut self, name: &str) -> Self {
        self.scenario.clusters[0].name = name.into();
        self
    }

    /// A pool of `nodes` on `image` in `group`, its nodes labelled `label=<name>`.
    pub fn pool(
        mut self,
        name: &str,
        group: GroupRef,
        image: &str,
        label: &str,
        nodes: u32,
    ) -> Self {
        self.scenario.clusters[0].pools.push(PoolScenario {
            name: name.into(),
            group,
            image: image.into(),
            node_selector: selector(label, name),
            nodes,
        });
        self
    }

    /// The workloads, as a profile's YAML.
    pub fn workloads(self, yaml: &str) -> Self {
        self.workload_profile(WorkloadProfile::from_yaml(yaml, "workloads").unwrap())
    }

    pub fn workload_profile(mut self, workloads: WorkloadProfile) -> Self {
        self.scenario.workloads = workloads;
        self
    }

    /// The cloud's faults, as a profile's YAML.
    pub fn faults(mut self, yaml: &str) -> Self {
        self.scenario.faults = FaultProfile::from_yaml(yaml, "faults").unwrap();
        self
    }

    pub fn scenario(self) -> Scenario {
        self.scenario
    }

    /// The fleet started, the CRD installed, and two minutes of fleet time for the
    /// workloads to settle (placed, running, Ready; PDB statuses written).
    pub async fn start(self) -> SimCluster {
        SimCluster::start(&self.scenario).await
    }
}

/// `{label: value}`, a pool's node selector.
pub fn selector(label: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(label.to_string(), value.to_string())])
}

/// The simulated fleet of one cluster and a kube-rs client of its API server.
pub struct SimCluster {
    pub fleet: Fleet,
    pub client: kube::Client,
}

impl SimCluster {
    /// `scenario`'s fleet started, a client of its first cluster, the NodePoolRotation CRD
    /// installed, then two minutes of fleet time for the workloads to settle.
    pub async fn start(scenario: &Scenario) -> SimCluster {
        SimCluster::start_with(scenario, rota::kube::sim::client).await
    }

    /// [`SimCluster::start`] with the client `client_of` makes of the cluster's store (a
    /// bench counts the requests at the transport).
    pub async fn start_with(
        scenario: &Scenario,
        client_of: impl FnOnce(Store) -> kube::Client,
    ) -> SimCluster {
        let fleet = Fleet::start(scenario, 1.0).await.unwrap();
        let store = fleet.store(&scenario.clusters[0].name).unwrap().clone();
        let client = client_of(store);
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd::definition())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(120)).await;
        SimCluster { fleet, client }
    }

    /// A controller of this cluster on the simulated cloud.
    pub fn controller(&self, cfg: Config) -> Controller {
        Controller::new(self.client.clone(), Arc::new(self.fleet.cloud.clone()), cfg)
    }

    pub fn rotations(&self) -> Api<NodePoolRotation> {
        Api::all(self.client.clone())
    }

    pub async fn create(&self, n: &NodePoolRotation) {
        self.rotations()
            .create(&PostParams::default(), n)
            .await
            .unwrap();
    }

    pub async fn get(&self, pool: &str) -> NodePoolRotation {
        self.rotations().get(pool).await.unwrap()
    }

    /// The pool's status on the server (empty before the controller's first write).
    pub async fn status(&self, pool: &str) -> NodePoolRotationStatus {
        self.get(pool).await.status.unwrap_or_default()
    }

    /// Change the spec as the agent does (a patch of the spec; the status is the
    /// controller's).
    pub async fn set_spec(&self, pool: &str, spec: &NodePoolRotationSpec) {
        self.rotations()
            .patch(
                pool,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    /// The group as the cloud holds it (the test's own reads retry the faults it injects).
    pub async fn describe(&self, group: &GroupRef) -> GroupState {
        loop {
            match NodeGroups::describe(&self.fleet.cloud, group).await {
                Ok(g) => return g,
                Err(e) if e.kind.is_retryable() => continue,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// A `CanaryFailed` Warning event named `name` on the `shop/web` Deployment at `at`
    /// (what [`canary_gate`] fails on).
    pub async fn canary_failed(&self, name: &str, at: chrono::DateTime<chrono::Utc>) {
        let t = Time(k8s_openapi::jiff::Timestamp::from_second(at.timestamp()).unwrap());
        let ev = CoreEvent {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some("Deployment".into()),
                name: Some("web".into()),
                namespace: Some("shop".into()),
                ..ObjectReference::default()
            },
            reason: Some("CanaryFailed".into()),
            message: Some("canary requests fail on the new nodes".into()),
            last_timestamp: Some(t.clone()),
            first_timestamp: Some(t),
            count: Some(1),
            type_: Some("Warning".into()),
            ..CoreEvent::default()
        };
        Api::<CoreEvent>::namespaced(self.client.clone(), "shop")
            .create(&PostParams::default(), &ev)
            .await
            .unwrap();
    }
}

/// Invariant 2: each PodDisruptionBudget with fewer healthy pods than it requires.
pub async fn pdbs_short(client: &kube::Client) -> Vec<String> {
    let pdbs = Api::<PodDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list pdbs");
    pdbs.items
        .iter()
        .filter_map(|b| {
            let st = b.status.as_ref().expect("pdb status");
            (st.current_healthy < st.desired_healthy).then(|| {
                format!(
                    "PDB {}/{} has {} healthy, needs {}",
                    b.metadata.namespace.as_deref().unwrap_or_default(),
                    b.metadata.name.as_deref().unwrap_or_default(),
                    st.current_healthy,
                    st.desired_healthy
                )
            })
        })
        .collect()
}

/// The cluster's nodes and pods at one moment, for invariant 3.
pub struct PodsNow {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
}

impl PodsNow {
    pub async fn list(client: &kube::Client) -> PodsNow {
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("list nodes");
        let pods = Api::<Pod>::all(client.clone())
            .list(&ListParams::default())
            .await
            .expect("list pods");
        PodsNow {
            nodes: nodes.items,
            pods: pods.items,
        }
    }

    /// Invariant 3: each instance of `pool`'s group `g` that is terminating while its node
    /// runs a workload pod that was not evicted (a DaemonSet's pod and a finished pod do not
    /// count).
    pub fn undrained(&self, pool: &str, g: &GroupState) -> Vec<String> {
        let mut found = Vec::new();
        for i in g
            .instances
            .iter()
            .filter(|i| i.lifecycle == Lifecycle::Terminating)
        {
            let Some(node) = self.nodes.iter().find(|n| {
                n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&i.provider_id)
            }) else {
                continue;
            };
            let name = node.metadata.name.as_deref().unwrap_or_default();
            for p in self.pods.iter().filter(|p| left_on(p, name)) {
                found.push(format!(
                    "instance {} of pool {pool} terminating with pod {}/{} not evicted",
                    i.id,
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        found
    }
}

/// Whether `p` is a workload pod still running on node `node`: not a DaemonSet's, not
/// evicted (no deletion timestamp), not finished.
fn left_on(p: &Pod, node: &str) -> bool {
    let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
    let ds = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    let evicted = p.metadata.deletion_timestamp.is_some();
    let done = matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    on && !ds && !evicted && !done
}

/// A test controller's configuration: `version` and `identity`, and no Kubernetes Events
/// written (the tests read the status).
pub fn test_config(version: &str, identity: &str) -> Config {
    let mut cfg = Config::new(version, identity);
    cfg.events = false;
    cfg
}

/// A pool's spec in cluster [`CLUSTER`] as the agent writes it: channel `stable`, version
/// `2026.11.2`, commit `c0ffee`, no gates, `Reconcile`; the nodes selected by
/// `label=<pool>`. A test changes a field with struct update syntax.
pub fn spec(
    pool: &str,
    group: GroupRef,
    label: &str,
    image: &str,
    policy: EffectivePolicy,
) -> NodePoolRotationSpec {
    NodePoolRotationSpec {
        owner_image: None,
        cluster: CLUSTER.into(),
        pool: pool.into(),
        group,
        node_selector: selector(label, pool),
        channel: "stable".into(),
        version: "2026.11.2".into(),
        image: image.into(),
        arch: Default::default(),
        kubelet: None,
        released: None,
        max_age: None,
        policy,
        gates: vec![],
        source_commit: "c0ffee".into(),
        mode: Mode::Reconcile,
    }
}

/// The pool's NodePoolRotation, named after it.
pub fn npr(spec: NodePoolRotationSpec) -> NodePoolRotation {
    let name = spec.pool.clone();
    let mut n = NodePoolRotation::new(&name, spec);
    n.metadata = ObjectMeta {
        name: Some(name),
        ..ObjectMeta::default()
    };
    n
}

/// An events gate that fails while a `CanaryFailed` event is recent (within `window`).
pub fn canary_gate(samples: u32, failure_limit: u32, window: Duration) -> ResolvedGate {
    ResolvedGate {
        name: "canary".into(),
        interval: GoDuration::from_secs(30),
        samples,
        failure_limit,
        check: GateCheck::Events {
            reasons: vec!["CanaryFailed".into()],
            max: 0,
            window: GoDuration::from_secs(window.as_secs()),
        },
    }
}

/// Live (not terminating) instances of a group.
pub fn live(g: &GroupState) -> usize {
    g.instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .count()
}

/// A cloud behind a counter of the controller's calls: describes in one, every other call
/// in the other (the same counter twice counts them all).
pub struct CountedGroups {
    pub inner: Arc<dyn NodeGroups>,
    pub describes: Arc<AtomicU64>,
    pub others: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl NodeGroups for CountedGroups {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        self.describes.fetch_add(1, Ordering::Relaxed);
        self.inner.describe(group).await
    }
    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: Arch,
    ) -> Result<ImageCheck, CloudError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.check_image(group, image, arch).await
    }
    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.set_image(group, image).await
    }
    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.set_capacity(group, desired, max).await
    }
    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.set_max(group, max).await
    }
    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        self.others.fetch_add(1, Ordering::Relaxed);
        self.inner.terminate(group, instance_id, decrement).await
    }
}

/// An owner's adapter behind a counter of its calls (a bench counts what a real agent would
/// send to the cloud).
pub struct CountedOwner {
    pub inner: Arc<dyn OwnerPools>,
    pub calls: Arc<AtomicU64>,
}

impl CountedOwner {
    fn tick(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait::async_trait]
impl OwnerPools for CountedOwner {
    fn owner(&self) -> Owner {
        self.inner.owner()
    }
    fn capabilities(&self) -> OwnerCapabilities {
        self.inner.capabilities()
    }
    fn blue_green(&self) -> bool {
        self.inner.blue_green()
    }
    async fn describe(&self, p: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        self.tick();
        self.inner.describe(p).await
    }
    async fn start_update(
        &self,
        p: &ManagedGroup,
        r: &UpdateRequest,
    ) -> Result<String, CloudError> {
        self.tick();
        self.inner.start_update(p, r).await
    }
    async fn create_twin(&self, r: &TwinRequest) -> Result<(), CloudError> {
        self.tick();
        self.inner.create_twin(r).await
    }
    async fn members(&self, p: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.tick();
        self.inner.members(p).await
    }
    async fn set_size(&self, p: &ManagedGroup, d: u32, m: u32) -> Result<(), CloudError> {
        self.tick();
        self.inner.set_size(p, d, m).await
    }
    async fn remove_node(&self, p: &ManagedGroup, id: &str) -> Result<(), CloudError> {
        self.tick();
        self.inner.remove_node(p, id).await
    }
    async fn delete_pool(&self, p: &ManagedGroup) -> Result<(), CloudError> {
        self.tick();
        self.inner.delete_pool(p).await
    }
}

/// Run `f` to its end on a current-thread runtime whose clock is paused (fleet time jumps
/// to the next timer): how a bench runs one rotation.
pub fn block_on_paused<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(f)
}
