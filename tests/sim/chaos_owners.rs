//! The chaos suite's managed pools: seeded random runs of one cluster with pools rota changes
//! only through their owners. A seed's cluster is EKS, GKE or AKS in turn (seed mod 3): on EKS
//! a managed node group under `managedUpdate: service` (`svc`), one under `managedUpdate:
//! blueGreen` (`bg`) and a Karpenter NodePool drifted by rota's budgets (`karp`); on GKE two
//! node pools and on AKS two agent pools, `svc` and `bg`. Every other turn `svc` has
//! `strategy: replace` (the owner's update without a surge): seed mod 6 walks the six cells of
//! owner and strategy ([`cell`]), so any six seeds in a row give each owner (Karpenter riding
//! EKS's) two, one of each strategy. Under the chaos suite's faults:
//! cloud API throttling, 5xx and writes that take effect but answer an error (the owners'
//! calls included), boots that fail, Kubernetes API 429s, 500s and lost responses, and the
//! controller crashing after a random number of a pass's actions and started again. Half
//! the seeds also get a fleet stop (`rota stop`, as the agent carries it: the pool's
//! `spec.policy.stop`) on one pool at a random moment, lifted 10 to 40 minutes later.
//!
//! After every pass: never more than a pool's size plus one batch alive (both pools of the
//! blue-green move together), never more than one twin and never more than one update by the
//! owner to the pinned image, no PodDisruptionBudget below its healthy minimum (the owners'
//! own updates included: the simulated EKS, GKE and AKS drain the nodes they replace through
//! the Eviction API, budgets respected, as rota does), and while a
//! pool's status says `Stopped`, its checkpoint does not move and nothing new is started
//! (no update, no twin, no drift budget opened). At the end (or the time bound): every pool
//! `Succeeded`, the blue-green pool's old node group deleted, every node on the new AMI.
//!
//! `cargo test --test sim chaos_owners::` runs [`DEFAULT_SEEDS`] (48: 16 an owner, 8 of each
//! strategy); `ROTA_CHAOS_OWNERS_SEEDS=N` runs N,
//! `ROTA_CHAOS_OWNERS_SEED=K` replays seed K with its log on stderr.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rota::cloud::{CloudErrorKind, GroupRef, Lifecycle};
use rota::controller::{Config, Controller};
use rota::fleet::duration::GoDuration;
use rota::fleet::owner::{ManagedGroup, ManagedUpdate, OwnerImage};
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy, Mode, RolloutStrategy};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec, NodePoolRotationStatus};
use rota::rotate::{Checkpoint, Phase};
use rota::sim::apiserver::ApiServer;
use rota::sim::apiserver::faults::{ApiFaultProfile, ApiFaults};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::store::Store;
use rota::sim::world::Fleet;
use serde_json::{Value, json};
use tokio::time::Instant;

const CLUSTER: &str = "sim-1";
/// The tests' version, to which `blueGreen` moves `bg` (its twin is named by the planner's
/// rule for the pool's owner).
const TWIN_VERSION: &str = "2026.11.2";
/// Fleet time a seed may take.
const BOUND: Duration = Duration::from_secs(12 * 3600);

const WORKLOADS: &str = r#"
nodes: {perPool: 3, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 6, pdb: {minAvailable: "50%"}, readyAfter: 10s}
  - {name: api, namespace: shop, replicas: 3, pdb: {maxUnavailable: 1}, readyAfter: 5s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Service,
    BlueGreen,
    Drift,
}

/// The service that owns a seed's cluster and its pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Service {
    Eks,
    Gke,
    Aks,
}

impl Service {
    /// Seed mod 3: every service gets a third of the seeds.
    fn of_seed(seed: u64) -> Service {
        [Service::Eks, Service::Gke, Service::Aks][(seed % 3) as usize]
    }

    /// The owners a seed of this service runs (its summary's label).
    fn owners(self) -> &'static str {
        match self {
            Service::Eks => "EKS and Karpenter",
            Service::Gke => "GKE",
            Service::Aks => "AKS",
        }
    }

    fn cloud(self) -> Cloud {
        match self {
            Service::Eks => Cloud::Aws,
            Service::Gke => Cloud::Gcp,
            Service::Aks => Cloud::Azure,
        }
    }

    /// (old, new) images in the owner's one-string form.
    fn images(self) -> (&'static str, &'static str) {
        match self {
            Service::Eks => ("ami-0000000000000old1", "ami-0000000000000new2"),
            Service::Gke => (
                "1.31.4-gke.1183000/COS_CONTAINERD",
                "1.31.5-gke.1023000/COS_CONTAINERD",
            ),
            Service::Aks => (
                "AKSUbuntu-2204gen2containerd-202610.01.0",
                "AKSUbuntu-2204gen2containerd-202611.02.0",
            ),
        }
    }

    fn owner_image(self, image: &str) -> OwnerImage {
        match self {
            Service::Eks => OwnerImage::Ami { id: image.into() },
            Service::Gke => {
                let (v, t) = image.split_once('/').unwrap();
                OwnerImage::GkeNode {
                    node_version: Some(v.into()),
                    image_type: t.into(),
                }
            }
            Service::Aks => OwnerImage::AksNodeImage {
                node_image_version: image.into(),
            },
        }
    }

    /// The pools a cluster of this service holds: Karpenter on EKS only.
    fn pools(self) -> &'static [(&'static str, Kind)] {
        match self {
            Service::Eks => &[
                ("svc", Kind::Service),
                ("bg", Kind::BlueGreen),
                ("karp", Kind::Drift),
            ],
            Service::Gke | Service::Aks => &[("svc", Kind::Service), ("bg", Kind::BlueGreen)],
        }
    }
}

#[derive(Clone, Debug)]
struct PoolPlan {
    name: &'static str,
    kind: Kind,
    service: Service,
    size: u32,
    policy: EffectivePolicy,
}

impl PoolPlan {
    fn managed(&self) -> ManagedGroup {
        match (self.kind, self.service) {
            (Kind::Drift, _) => ManagedGroup::KarpenterNodePool {
                region: "us-east-1".into(),
                eks_cluster: CLUSTER.into(),
                node_pool: self.name.into(),
            },
            (_, Service::Eks) => ManagedGroup::EksNodegroup {
                region: "us-east-1".into(),
                eks_cluster: CLUSTER.into(),
                nodegroup: self.name.into(),
            },
            (_, Service::Gke) => ManagedGroup::GkeNodePool {
                project: "acme".into(),
                location: "europe-west1".into(),
                gke_cluster: CLUSTER.into(),
                node_pool: self.name.into(),
            },
            (_, Service::Aks) => ManagedGroup::AksAgentPool {
                subscription_id: "00000000-0000-0000-0000-000000000001".into(),
                resource_group: "rg-prod".into(),
                aks_cluster: CLUSTER.into(),
                agent_pool: self.name.into(),
            },
        }
    }

    fn selector(&self) -> BTreeMap<String, String> {
        let label = match (self.kind, self.service) {
            (Kind::Drift, _) => "karpenter.sh/nodepool",
            (_, Service::Eks) => "eks.amazonaws.com/nodegroup",
            (_, Service::Gke) => "cloud.google.com/gke-nodepool",
            (_, Service::Aks) => "kubernetes.azure.com/agentpool",
        };
        BTreeMap::from([(label.to_string(), self.name.to_string())])
    }

    fn batch(&self) -> usize {
        match self.policy.batch {
            BatchSize::Count(n) => n as usize,
            BatchSize::Percent(_) => unreachable!("drawn as counts"),
        }
    }
}

#[derive(Clone, Debug)]
struct Draw {
    service: Service,
    pools: Vec<PoolPlan>,
    cloud_faults: String,
    api_faults: ApiFaultProfile,
    /// Chance per pass that the controller crashes after a random number of its actions.
    crash_rate: f64,
    /// A fleet stop on one pool: (pool index, after this much fleet time, for this long).
    stop: Option<(usize, Duration, Duration)>,
}

fn pick<T: Copy>(rng: &mut ChaCha8Rng, xs: &[T]) -> T {
    xs[rng.random_range(0..xs.len())]
}

fn draw(seed: u64) -> Draw {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (service, replace) = cell(seed);
    let pools = service
        .pools()
        .iter()
        .copied()
        .map(|(name, kind)| {
            let mut p = EffectivePolicy {
                batch: BatchSize::Count(rng.random_range(1..=2)),
                max_parallel_pools: 3,
                ..EffectivePolicy::default()
            };
            p.batch_soak = GoDuration::from_secs(pick(&mut rng, &[0, 60, 300]));
            p.pool_soak = GoDuration::from_secs(pick(&mut rng, &[0, 120, 600]));
            if kind == Kind::BlueGreen {
                p.managed_update = Some(ManagedUpdate::BlueGreen);
            }
            if kind == Kind::Service && replace {
                p.strategy = RolloutStrategy::Replace;
            }
            PoolPlan {
                name,
                kind,
                service,
                size: rng.random_range(2..=4),
                policy: p,
            }
        })
        .collect::<Vec<_>>();
    let (boot_min, boot_max) = (rng.random_range(20..60), rng.random_range(60..150));
    let boot_fail = pick(&mut rng, &[0.0, 0.0, 0.1]);
    let (throttle, server, lost) = (
        pick(&mut rng, &[0.0, 0.05]),
        pick(&mut rng, &[0.0, 0.03]),
        pick(&mut rng, &[0.0, 0.05]),
    );
    let cloud_faults = format!(
        "boot: {{min: {boot_min}s, max: {boot_max}s, failureRate: {boot_fail}}}\n\
         api: {{throttleRate: {throttle}, serverErrorRate: {server}, lostResponseRate: {lost}}}\n",
    );
    let api_faults = ApiFaultProfile {
        throttle_rate: pick(&mut rng, &[0.0, 0.02, 0.05]),
        server_error_rate: pick(&mut rng, &[0.0, 0.02]),
        lost_response_rate: pick(&mut rng, &[0.0, 0.02]),
        paths: vec![],
    };
    let crash_rate = pick(&mut rng, &[0.0, 0.03, 0.08]);
    let stop = rng.random_bool(0.5).then(|| {
        (
            rng.random_range(0..pools.len()),
            Duration::from_secs(rng.random_range(60..1800)),
            Duration::from_secs(rng.random_range(600..2400)),
        )
    });
    Draw {
        service,
        pools,
        cloud_faults,
        api_faults,
        crash_rate,
        stop,
    }
}

fn npr(pool: &PoolPlan) -> NodePoolRotation {
    let new = pool.service.images().1;
    let mut n = NodePoolRotation::new(
        pool.name,
        NodePoolRotationSpec {
            owner_image: Some(pool.service.owner_image(new)),
            cluster: CLUSTER.into(),
            pool: pool.name.into(),
            group: GroupRef::Managed(pool.managed()),
            node_selector: pool.selector(),
            channel: "stable".into(),
            version: "2026.11.2".into(),
            image: new.into(),
            arch: Default::default(),
            kubelet: None,
            released: None,
            max_age: None,
            policy: pool.policy.clone(),
            gates: vec![],
            source_commit: "c0ffee".into(),
            mode: Mode::Reconcile,
        },
    );
    n.metadata = ObjectMeta {
        name: Some(pool.name.into()),
        ..ObjectMeta::default()
    };
    n
}

/// What a stopped pool was held at.
#[derive(Clone, Debug, PartialEq)]
struct Held {
    checkpoint: Option<Checkpoint>,
    updates: usize,
    twins: usize,
}

/// A checkpoint as a stop may not move it: what the stop itself records (its id) aside.
fn unstopped(cp: Option<Checkpoint>) -> Option<Checkpoint> {
    cp.map(|mut c| {
        c.fleet_stop = None;
        c
    })
}

struct Run {
    seed: u64,
    draw: Draw,
    fleet: Fleet,
    store: Store,
    /// A client without faults: what the checks read.
    client: kube::Client,
    restarts: u64,
    log: String,
    violations: Vec<String>,
    /// The pool stopped now, and once its status says so: its checkpoint, the owner's updates and
    /// the twins then.
    held: Option<(usize, Option<Held>)>,
    /// The cloud as the checks see it (no API faults).
    observer: Arc<dyn rota::sim::cloud::InstanceObserver>,
}

impl Run {
    fn controller(&mut self) -> Controller {
        self.restarts += 1;
        let faults = ApiFaults::new(
            self.seed * 1000 + self.restarts,
            self.draw.api_faults.clone(),
        )
        .expect("drawn rates are valid");
        let client =
            rota::kube::sim::server_client(ApiServer::new(self.store.clone()).with_faults(faults));
        let mut cfg = Config::new("0.1.0", &format!("chaos-owners-{}", self.restarts));
        cfg.events = false;
        let cloud = self.fleet.cloud.clone();
        let mut c = Controller::new(client, Arc::new(cloud.clone()), cfg);
        for o in cloud.owners() {
            c = c.with_owners(o);
        }
        c
    }

    fn violation(&mut self, what: String) {
        self.log.push_str(&format!("VIOLATION {what}\n"));
        self.violations.push(what);
    }

    async fn status(&self, pool: &str) -> NodePoolRotationStatus {
        loop {
            match Api::<NodePoolRotation>::all(self.client.clone())
                .get(pool)
                .await
            {
                Ok(n) => return n.status.unwrap_or_default(),
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// Live instances of a managed group; 0 once it is gone.
    async fn live(&self, m: &ManagedGroup) -> usize {
        // Through the cloud's observer: no API fault, no draw from the seed's faults.
        match self.observer.observe(&GroupRef::Managed(m.clone())).await {
            Ok(g) => g
                .instances
                .iter()
                .filter(|i| i.lifecycle != Lifecycle::Terminating)
                .count(),
            Err(e) if e.kind == CloudErrorKind::NotFound => 0,
            Err(e) => panic!("{e}"),
        }
    }

    /// Every update the owner made of `svc` (EKS's updates, GKE's operations, AKS's node
    /// image upgrades).
    fn owner_updates(&self) -> Vec<rota::cloud::managed::OwnerUpdate> {
        let svc = self.draw.pools[0].managed();
        match self.draw.service {
            Service::Eks => self.fleet.cloud.eks_updates(&svc),
            Service::Gke => self.fleet.cloud.gke_operations(&svc),
            Service::Aks => self.fleet.cloud.aks_upgrades(&svc),
        }
    }

    /// The twins the owners created (EKS's node groups, GKE's node pools, AKS's agent pools).
    fn twins(&self) -> Vec<String> {
        let mut t = self.fleet.cloud.eks_created();
        t.extend(self.fleet.cloud.twins_created());
        t
    }

    /// Invariants 1 and 2 and the owners' own: checked after every pass.
    async fn check(&mut self) {
        for p in self.draw.pools.clone() {
            let mut live = self.live(&p.managed()).await;
            if p.kind == Kind::BlueGreen {
                live += self
                    .live(&rota::cloud::managed::renamed(
                        &p.managed(),
                        &rota::cloud::managed::twin_name_for(
                            p.managed().owner(),
                            p.name,
                            TWIN_VERSION,
                        ),
                    ))
                    .await;
            }
            if live > p.size as usize + p.batch() {
                self.violation(format!(
                    "{}: {live} live > {} + {}",
                    p.name,
                    p.size,
                    p.batch()
                ));
            }
        }
        let twins = self.twins();
        if twins.len() > 1 {
            self.violation(format!("a second twin: {twins:?}"));
        }
        let updates = self.owner_updates();
        let new = self.draw.service.images().1;
        if updates.iter().filter(|u| u.image == new).count() > 1 {
            self.violation(format!("a second update by the owner: {updates:?}"));
        }
        // Invariant 2, for every pool alike: rota's evictions and the owners' (their updates
        // drain through the Eviction API) keep every budget.
        let pdbs = Api::<PodDisruptionBudget>::all(self.client.clone())
            .list(&ListParams::default())
            .await;
        for pdb in pdbs.map(|l| l.items).unwrap_or_default() {
            let st = pdb.status.unwrap_or_default();
            if st.current_healthy >= st.desired_healthy {
                continue;
            }
            let what = format!(
                "PDB {:?}: {} healthy < {}",
                pdb.metadata.name, st.current_healthy, st.desired_healthy
            );
            self.violation(what);
            let pods =
                Api::<k8s_openapi::api::core::v1::Pod>::namespaced(self.client.clone(), "shop")
                    .list(&ListParams::default())
                    .await;
            for pod in pods.map(|l| l.items).unwrap_or_default() {
                let st = pod.status.clone().unwrap_or_default();
                let ready = st
                    .conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                let line = format!(
                    "  pod {:?} on {:?} {:?} ready={ready} deleting={}\n",
                    pod.metadata.name,
                    pod.spec.as_ref().and_then(|s| s.node_name.clone()),
                    st.phase,
                    pod.metadata.deletion_timestamp.is_some()
                );
                self.log.push_str(&line);
            }
            for p in self.draw.pools.clone() {
                let st = self.status(p.name).await;
                let line = format!("  {}: {:?} {}\n", p.name, st.phase, st.message);
                self.log.push_str(&line);
            }
        }
        self.check_stop().await;
    }

    /// While a stopped pool's status says `Stopped`: its checkpoint holds and nothing new
    /// starts (no owner update, no twin).
    async fn check_stop(&mut self) {
        let Some((i, held)) = self.held.clone() else {
            return;
        };
        let name = self.draw.pools[i].name;
        let st = self.status(name).await;
        if st.stop.as_ref().is_none_or(|n| n.reason != "Stopped") {
            return;
        }
        let now = Held {
            checkpoint: unstopped(st.checkpoint.clone()),
            updates: self.owner_updates().len(),
            twins: self.twins().len(),
        };
        match held {
            None => {
                self.log.push_str(&format!("{name} held: {}\n", st.message));
                self.held = Some((i, Some(now)));
            }
            Some(h) if h != now => {
                self.violation(format!("{name} moved while stopped: {h:?} -> {now:?}"));
                self.held = Some((i, Some(now)));
            }
            Some(_) => {}
        }
    }

    async fn set_stop(&self, pool: &str, stop: Value) {
        let api = Api::<NodePoolRotation>::all(self.client.clone());
        let patch = json!({"spec": {"policy": {"stop": stop}}});
        api.patch(pool, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }
}

fn a_stop() -> Value {
    json!({
        "id": "ab".repeat(20),
        "cluster": CLUSTER,
        "reason": "chaos",
        "by": "chaos <chaos@example.com>",
        "at": "2026-01-01T00:00:00Z",
    })
}

struct SeedReport {
    violations: Vec<String>,
    log: String,
    fleet_time: Duration,
}

async fn run_seed(seed: u64) -> SeedReport {
    let d = draw(seed);
    let mut workloads = WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap();
    for p in &d.pools {
        workloads
            .nodes
            .overrides
            .insert(format!("{CLUSTER}/{}", p.name), p.size);
    }
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: CLUSTER.into(),
            cloud: d.service.cloud(),
            pools: d
                .pools
                .iter()
                .map(|p| PoolScenario {
                    name: p.name.into(),
                    group: GroupRef::Managed(p.managed()),
                    image: d.service.images().0.into(),
                    node_selector: p.selector(),
                    nodes: p.size,
                })
                .collect(),
        }],
        workloads,
        faults: FaultProfile::from_yaml(&d.cloud_faults, "faults").unwrap(),
        seed,
    };
    let fleet = Fleet::start(&scenario, 1.0).await.unwrap();
    // AKS creates a twin only on its newest node image: the pin.
    fleet
        .cloud
        .set_aks_latest_node_image(Service::Aks.images().1);
    let store = fleet.store(CLUSTER).unwrap().clone();
    let client = rota::kube::sim::client(store.clone());
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    for p in &d.pools {
        Api::<NodePoolRotation>::all(client.clone())
            .create(&PostParams::default(), &npr(p))
            .await
            .unwrap();
    }
    let cloud = fleet.cloud.clone();
    let mut run = Run {
        seed,
        log: format!("seed {seed}: {d:?}\n"),
        draw: d,
        fleet,
        store,
        client,
        restarts: 0,
        violations: Vec::new(),
        held: None,
        observer: cloud.observer(),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0c0a);
    let mut c = run.controller();
    let start = Instant::now();
    let stop = run.draw.stop;
    let (mut stopped, mut cleared) = (false, false);
    while start.elapsed() < BOUND {
        if rng.random_bool(run.draw.crash_rate) {
            c.crash_after = Some(rng.random_range(0..3));
        }
        let out = c.step().await;
        if out
            .iter()
            .any(|(_, o)| matches!(o, rota::controller::Outcome::Crashed { .. }))
        {
            run.log.push_str("controller crashed; a new one starts\n");
            c = run.controller();
        }
        run.check().await;
        if let Some((i, at, long)) = stop {
            let name = run.draw.pools[i].name;
            if !stopped && start.elapsed() >= at {
                run.set_stop(name, a_stop()).await;
                run.log.push_str(&format!("stop {name}\n"));
                run.held = Some((i, None));
                stopped = true;
            } else if stopped && !cleared && start.elapsed() >= at + long {
                run.set_stop(name, Value::Null).await;
                run.log.push_str(&format!("clear {name}\n"));
                run.held = None;
                cleared = true;
            }
        }
        let mut all = true;
        for p in &run.draw.pools {
            all &= run.status(p.name).await.phase == Phase::Succeeded;
        }
        if all && (stop.is_none() || cleared) {
            break;
        }
        c.wait(Instant::now() + Duration::from_secs(60), true).await;
    }
    end_state(&mut run).await;
    SeedReport {
        violations: run.violations,
        log: run.log,
        fleet_time: start.elapsed(),
    }
}

/// Every pool done on the new AMI; the blue-green move's old node group deleted.
async fn end_state(run: &mut Run) {
    for p in run.draw.pools.clone() {
        let st = run.status(p.name).await;
        if st.phase != Phase::Succeeded {
            run.violation(format!(
                "{} ended {:?} within the bound: {}",
                p.name, st.phase, st.message
            ));
            continue;
        }
        if (st.total, st.on_target) != (p.size, p.size) {
            run.violation(format!(
                "{}: {}/{} on target",
                p.name, st.on_target, st.total
            ));
        }
    }
    if !run.violations.is_empty() {
        // What the replay shows: the Karpenter pool's NodeClaims and instances.
        let claims = Api::<kube::api::DynamicObject>::all_with(
            run.client.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
                "nodeclaims",
            ),
        )
        .list(&ListParams::default())
        .await;
        for c in claims.map(|l| l.items).unwrap_or_default() {
            let v = serde_json::to_value(&c).unwrap_or_default();
            run.log.push_str(&format!(
                "claim {}: {} {} deleting={}\n",
                c.metadata.name.unwrap_or_default(),
                v["status"]["providerID"],
                v["status"]["imageID"],
                v["metadata"]["deletionTimestamp"]
            ));
        }
        if let Some(karp) = run.draw.pools.iter().find(|p| p.kind == Kind::Drift) {
            let karp = GroupRef::Managed(karp.managed());
            if let Ok(g) = run.observer.observe(&karp).await {
                run.log.push_str(&format!(
                    "karp group: desired {} {:?}\n",
                    g.desired, g.instances
                ));
            }
        }
    }
    if run.live(&run.draw.pools[1].managed()).await > 0 {
        run.violation("bg: the old pool still has instances".into());
    }
}

/// A seed's owner and whether its service pool takes `strategy: replace` (the owner's own
/// no-surge update: EKS MINIMAL, GKE and AKS maxSurge 0; else the owner's surge): seed mod 6
/// walks the six cells, the owner turning every seed and the strategy every three. A coin
/// per seed gave one owner's cells 17 seeds split as unevenly as 5 and 12.
fn cell(seed: u64) -> (Service, bool) {
    (Service::of_seed(seed), (seed / 3) % 2 == 1)
}

/// The seeds a run takes by default: 8 for each cell, 16 for each owner, in about the time 50
/// seeds of owners by turn and strategies by coin took.
const DEFAULT_SEEDS: u64 = 48;

fn seeds() -> Vec<u64> {
    if let Some(one) = std::env::var("ROTA_CHAOS_OWNERS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return vec![one];
    }
    let n: u64 = std::env::var("ROTA_CHAOS_OWNERS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    (0..n).collect()
}

#[tokio::test(start_paused = true)]
async fn seeded_managed_pool_chaos_keeps_the_invariants() {
    let trace = std::env::var("ROTA_CHAOS_OWNERS_SEED").is_ok();
    let mut failed = Vec::new();
    let (mut stops, mut crashes) = (0, 0);
    // Per owner: seeds, of them with `strategy: replace`, and their wall time.
    let mut share: BTreeMap<&str, (u32, u32, Duration)> = BTreeMap::new();
    for seed in seeds() {
        let wall = std::time::Instant::now();
        let r = run_seed(seed).await;
        let (service, replace) = cell(seed);
        let s = share.entry(service.owners()).or_default();
        *s = (s.0 + 1, s.1 + u32::from(replace), s.2 + wall.elapsed());
        stops += usize::from(r.log.contains("\nstop "));
        crashes += r.log.matches("controller crashed").count();
        eprintln!(
            "chaos_owners seed {seed}: {} violations, fleet {:?}, wall {:?}",
            r.violations.len(),
            r.fleet_time,
            wall.elapsed()
        );
        if trace {
            eprintln!("{}", r.log);
        }
        if !r.violations.is_empty() {
            failed.push((seed, r.violations));
        }
    }
    let shares: Vec<String> = share
        .iter()
        .map(|(o, (n, r, w))| format!("{o} {n} ({r} replace, wall {w:.1?})"))
        .collect();
    eprintln!(
        "chaos_owners: {} seeds ({}), {stops} with a fleet stop, {crashes} controller crashes, {} failed",
        seeds().len(),
        shares.join(", "),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{}",
        failed
            .iter()
            .map(|(s, v)| format!(
                "seed {s}: {}\n  replay: ROTA_CHAOS_OWNERS_SEED={s} cargo test --test sim chaos_owners:: -- --nocapture",
                v.join("; ")
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The default seeds give every owner the same share, and each owner's service pool as many
/// seeds with the owner's surge as with `strategy: replace`.
#[test]
fn the_default_seeds_give_every_owner_and_strategy_an_equal_share() {
    let mut cells: BTreeMap<(&str, bool), u64> = BTreeMap::new();
    for seed in 0..DEFAULT_SEEDS {
        let (service, replace) = cell(seed);
        *cells.entry((service.owners(), replace)).or_default() += 1;
    }
    assert_eq!(cells.len(), 6, "{cells:?}");
    assert!(cells.values().all(|&n| n == DEFAULT_SEEDS / 6), "{cells:?}");
    // The strategy drawn is the pool's: `svc` takes `replace` exactly on its cell's seeds.
    for seed in 0..12 {
        let d = draw(seed);
        let replace = d.pools[0].policy.strategy == RolloutStrategy::Replace;
        assert_eq!((d.service, replace), cell(seed), "seed {seed}");
    }
}
