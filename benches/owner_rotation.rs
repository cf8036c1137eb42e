//! One pool rotated per owner on the simulated fleet: the same controller, the same workloads
//! and `batch: 10%`, a pool of 100 nodes (`ROTA_BENCH_NODES`) moved to a new image by each
//! owner rota drives: a self-managed Auto Scaling group, an EKS managed node group with
//! `managedUpdate: service` and with `blueGreen`, a GKE node pool and an AKS agent pool with
//! `service`, and a Karpenter NodePool by drift.
//!
//! For each it prints the cloud calls per rotated node (every call of the self-managed
//! `NodeGroups` API and of the owner's `OwnerPools` adapter, counted at the adapter: what a
//! real agent would send to the cloud; Karpenter's pool is driven through the Kubernetes API,
//! so its cloud calls are what the controller still reads of the group), the simulated
//! makespan and the wall time of the run; the last lines are `key=value` figures, one per
//! owner, for scripts.
//!
//! Run: `cargo bench --bench figures -- owner_rotation` (`ROTA_BENCH_NODES=N`,
//! `ROTA_BENCH_OWNERS=gke,aks` to pick owners). Without `--bench` (as `cargo test
//! --all-targets` runs it) a 4-node smoke run of every owner checks that each ends
//! `Succeeded` with every node on the new image.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use rota::cloud::managed::{
    OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, TwinRequest, UpdateRequest,
};
use rota::cloud::{CloudError, GroupRef, GroupState, NodeGroups};
use rota::controller::{Config, Controller};
use rota::fleet::owner::{ManagedGroup, ManagedUpdate, Owner, OwnerImage};
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy, Mode};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec};
use rota::rotate::Phase;
use rota::sim::cloud::SimCloud;
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::world::Fleet;
use tokio::time::Instant;

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 20, pdb: {minAvailable: "80%"}, readyAfter: 10s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

const AMI_OLD: &str = "ami-0a1b2c3d4e5f60718";
const AMI_NEW: &str = "ami-0f9e8d7c6b5a40312";

/// One owner's pool: where it lives, how its nodes are labelled, its images.
struct Case {
    name: &'static str,
    cloud: Cloud,
    group: GroupRef,
    label: &'static str,
    old: &'static str,
    new: &'static str,
    owner_image: Option<OwnerImage>,
    managed_update: Option<ManagedUpdate>,
}

fn cases() -> Vec<Case> {
    let eks = ManagedGroup::EksNodegroup {
        region: "us-east-1".into(),
        eks_cluster: "bench".into(),
        nodegroup: "general".into(),
    };
    let ami = Some(OwnerImage::Ami { id: AMI_NEW.into() });
    vec![
        Case {
            name: "asg",
            cloud: Cloud::Aws,
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "general".into(),
            },
            label: "rota.dev/pool",
            old: AMI_OLD,
            new: AMI_NEW,
            owner_image: None,
            managed_update: None,
        },
        Case {
            name: "eks_service",
            cloud: Cloud::Aws,
            group: GroupRef::Managed(eks.clone()),
            label: "eks.amazonaws.com/nodegroup",
            old: AMI_OLD,
            new: AMI_NEW,
            owner_image: ami.clone(),
            managed_update: Some(ManagedUpdate::Service),
        },
        Case {
            name: "eks_bluegreen",
            cloud: Cloud::Aws,
            group: GroupRef::Managed(eks),
            label: "eks.amazonaws.com/nodegroup",
            old: AMI_OLD,
            new: AMI_NEW,
            owner_image: ami.clone(),
            managed_update: Some(ManagedUpdate::BlueGreen),
        },
        Case {
            name: "gke_service",
            cloud: Cloud::Gcp,
            group: GroupRef::Managed(ManagedGroup::GkeNodePool {
                project: "acme".into(),
                location: "europe-west1".into(),
                gke_cluster: "bench".into(),
                node_pool: "general".into(),
            }),
            label: "cloud.google.com/gke-nodepool",
            old: "1.31.4-gke.1183000/COS_CONTAINERD",
            new: "1.31.5-gke.1023000/COS_CONTAINERD",
            owner_image: Some(OwnerImage::GkeNode {
                node_version: Some("1.31.5-gke.1023000".into()),
                image_type: "COS_CONTAINERD".into(),
            }),
            managed_update: Some(ManagedUpdate::Service),
        },
        Case {
            name: "aks_service",
            cloud: Cloud::Azure,
            group: GroupRef::Managed(ManagedGroup::AksAgentPool {
                subscription_id: "00000000-0000-0000-0000-000000000001".into(),
                resource_group: "rg-bench".into(),
                aks_cluster: "bench".into(),
                agent_pool: "general".into(),
            }),
            label: "kubernetes.azure.com/agentpool",
            old: "AKSUbuntu-2204gen2containerd-202610.01.0",
            new: "AKSUbuntu-2204gen2containerd-202611.02.0",
            owner_image: Some(OwnerImage::AksNodeImage {
                node_image_version: "AKSUbuntu-2204gen2containerd-202611.02.0".into(),
            }),
            managed_update: Some(ManagedUpdate::Service),
        },
        Case {
            name: "karpenter_drift",
            cloud: Cloud::Aws,
            group: GroupRef::Managed(ManagedGroup::KarpenterNodePool {
                region: "us-east-1".into(),
                eks_cluster: "bench".into(),
                node_pool: "general".into(),
            }),
            label: "karpenter.sh/nodepool",
            old: AMI_OLD,
            new: AMI_NEW,
            owner_image: ami,
            managed_update: None,
        },
    ]
}

/// Counts every call of the self-managed API.
struct CountedGroups {
    inner: SimCloud,
    calls: Arc<AtomicU64>,
}

#[async_trait]
impl NodeGroups for CountedGroups {
    async fn describe(&self, g: &GroupRef) -> Result<GroupState, CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        NodeGroups::describe(&self.inner, g).await
    }
    async fn check_image(
        &self,
        g: &GroupRef,
        image: &str,
        arch: rota::cloud::Arch,
    ) -> Result<rota::cloud::ImageCheck, CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.check_image(g, image, arch).await
    }
    async fn set_image(&self, g: &GroupRef, image: &str) -> Result<(), CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.set_image(g, image).await
    }
    async fn set_capacity(&self, g: &GroupRef, d: u32, m: Option<u32>) -> Result<(), CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.set_capacity(g, d, m).await
    }
    async fn set_max(&self, g: &GroupRef, max: u32) -> Result<(), CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.set_max(g, max).await
    }
    async fn terminate(&self, g: &GroupRef, id: &str, dec: bool) -> Result<(), CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.terminate(g, id, dec).await
    }
}

/// Counts every call of an owner's API.
struct CountedOwner {
    inner: Arc<dyn OwnerPools>,
    calls: Arc<AtomicU64>,
}

impl CountedOwner {
    fn tick(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
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

/// The simulated owner's adapter for `case` (none for a self-managed group or Karpenter,
/// which the controller drives through `NodeGroups` and the Kubernetes API).
fn adapter(case: &Case, cloud: &SimCloud) -> Option<Arc<dyn OwnerPools>> {
    match &case.group {
        GroupRef::Managed(ManagedGroup::EksNodegroup { .. }) => Some(Arc::new(cloud.clone())),
        GroupRef::Managed(ManagedGroup::GkeNodePool { .. }) => Some(Arc::new(cloud.gke())),
        GroupRef::Managed(ManagedGroup::AksAgentPool { .. }) => Some(Arc::new(cloud.aks())),
        _ => None,
    }
}

struct Run {
    makespan: Duration,
    calls: u64,
    rotated: u32,
    wall: std::time::Duration,
}

fn npr(case: &Case) -> NodePoolRotation {
    let mut policy = EffectivePolicy {
        batch: BatchSize::Percent(10),
        managed_update: case.managed_update,
        ..EffectivePolicy::default()
    };
    policy.drain.delete_empty_dir_data = true;
    NodePoolRotation {
        metadata: ObjectMeta {
            name: Some("general".into()),
            ..ObjectMeta::default()
        },
        spec: NodePoolRotationSpec {
            owner_image: case.owner_image.clone(),
            cluster: "bench".into(),
            pool: "general".into(),
            group: case.group.clone(),
            node_selector: BTreeMap::from([(case.label.into(), "general".into())]),
            channel: "stable".into(),
            version: "2026.11.2".into(),
            image: case.new.into(),
            arch: Default::default(),
            kubelet: None,
            released: None,
            max_age: None,
            policy,
            gates: vec![],
            source_commit: "bench".into(),
            mode: Mode::Reconcile,
        },
        status: None,
    }
}

async fn run(case: &Case, nodes: u32) -> Run {
    let wall = std::time::Instant::now();
    let mut workloads = WorkloadProfile::from_yaml(WORKLOADS, "bench").unwrap();
    workloads.nodes.per_pool = nodes;
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "bench".into(),
            cloud: case.cloud,
            pools: vec![PoolScenario {
                name: "general".into(),
                group: case.group.clone(),
                image: case.old.into(),
                node_selector: BTreeMap::from([(case.label.into(), "general".into())]),
                nodes,
            }],
        }],
        workloads,
        faults: FaultProfile::default(),
        seed: 1,
    };
    let fleet = Fleet::start(&scenario, 1.0).await.unwrap();
    fleet.cloud.set_aks_latest_node_image(case.new);
    let client = rota::kube::sim::client(fleet.store("bench").unwrap().clone());
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    // The workloads settle (and a simulated Karpenter adopts its instances).
    tokio::time::sleep(Duration::from_secs(120)).await;
    let api = Api::<NodePoolRotation>::all(client.clone());
    api.create(&PostParams::default(), &npr(case))
        .await
        .unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let groups = CountedGroups {
        inner: fleet.cloud.clone(),
        calls: calls.clone(),
    };
    let mut cfg = Config::new("bench", "bench");
    cfg.events = false;
    let mut c = Controller::new(client.clone(), Arc::new(groups), cfg);
    if let Some(owner) = adapter(case, &fleet.cloud) {
        c = c.with_owners(Arc::new(CountedOwner {
            inner: owner,
            calls: calls.clone(),
        }));
    }
    let start = Instant::now();
    loop {
        c.step().await;
        let st = api.get("general").await.unwrap().status.unwrap_or_default();
        match st.phase {
            Phase::Succeeded if st.on_target == nodes => break,
            Phase::Paused | Phase::Failed => {
                panic!("{}: {:?}: {}", case.name, st.phase, st.message)
            }
            _ => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(72 * 3600),
            "{}: no end in 72 h: {}",
            case.name,
            st.message
        );
        c.wait(Instant::now() + Duration::from_secs(300), true)
            .await;
    }
    Run {
        makespan: start.elapsed(),
        calls: calls.load(Ordering::Relaxed),
        rotated: nodes,
        wall: wall.elapsed(),
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(f)
}

pub fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let nodes: u32 = std::env::var("ROTA_BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 100 } else { 4 });
    let picked = std::env::var("ROTA_BENCH_OWNERS").ok();
    println!("one pool of {nodes} nodes per owner on the simulated fleet, batch 10%, paused time");
    let mut figures = Vec::new();
    for case in cases() {
        if picked
            .as_deref()
            .is_some_and(|p| !p.split(',').any(|s| s == case.name))
        {
            continue;
        }
        let r = block_on(run(&case, nodes));
        let per_node = r.calls as f64 / f64::from(r.rotated);
        println!(
            "  {:<16} {:6.1} cloud calls per rotated node ({} calls)  {:7.1} min simulated  {:6.1} s wall",
            case.name,
            per_node,
            r.calls,
            r.makespan.as_secs_f64() / 60.0,
            r.wall.as_secs_f64()
        );
        figures.push(format!(
            "owner={} nodes={nodes} cloud_calls={} calls_per_node={per_node:.2} makespan_min={:.1} wall_s={:.1}",
            case.name,
            r.calls,
            r.makespan.as_secs_f64() / 60.0,
            r.wall.as_secs_f64()
        ));
    }
    println!();
    for f in figures {
        println!("{f}");
    }
}
