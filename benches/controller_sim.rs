//! The rotation controller on the simulated fleet (`sim` API server through kube-rs, the
//! simulated cloud), paused tokio time: a cluster of 3 pools × 100 nodes moves to a new
//! image with `batch: "10%"`.
//!
//! Prints, in simulated time: the makespan with the pools rotating in parallel
//! (`maxParallelPools: 3`); the lower bound the policy allows (batches per pool × the
//! fastest boot + registration + readiness, times the rounds of parallel pools); and a
//! one-pool-at-a-time baseline (`maxParallelPools: 1`, batches one at a time as always).
//! Also the Kubernetes API requests (counted at the transport, watches included) and cloud
//! calls per rotated node, and the wall time each run took.
//!
//! Run: `cargo bench --bench controller_sim`. Without `--bench` (as `cargo test
//! --all-targets` runs it) a 3 × 2-node smoke run checks that it completes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use rota::cloud::{CloudError, GroupRef, GroupState, NodeGroups};
use rota::controller::{Config, Controller};
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy, Mode};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec};
use rota::rotate::Phase;
use rota::sim::apiserver::ApiServer;
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::world::Fleet;
use tokio::time::Instant;

const POOLS: [&str; 3] = ["general", "memory", "batch"];
const BOOT_MIN: u64 = 60;
const REGISTER: u64 = 15;
const READY: u64 = 20;

const WORKLOADS: &str = r#"
nodes: {perPool: 100, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicasPerNode: 2, pdb: {minAvailable: "90%"}, readyAfter: 10s}
  - {name: api, namespace: shop, replicasPerNode: 1, pdb: {maxUnavailable: "10%"}, readyAfter: 5s}
  - {name: worker, namespace: shop, replicasPerNode: 1}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

/// Counts the cloud calls the controller makes.
struct Counted {
    inner: rota::sim::cloud::SimCloud,
    calls: Arc<AtomicU64>,
}

#[async_trait]
impl NodeGroups for Counted {
    async fn describe(&self, g: &GroupRef) -> Result<GroupState, CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.describe(g).await
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

fn group(p: &str) -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: p.into(),
    }
}

struct Run {
    makespan: Duration,
    kube_requests: u64,
    cloud_calls: u64,
    rotated: u32,
    wall: std::time::Duration,
}

async fn run(nodes: u32, parallel: u32) -> Run {
    let wall = std::time::Instant::now();
    let mut workloads = WorkloadProfile::from_yaml(WORKLOADS, "bench").unwrap();
    workloads.nodes.per_pool = nodes;
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "bench".into(),
            cloud: Cloud::Aws,
            pools: POOLS
                .iter()
                .map(|p| PoolScenario {
                    name: p.to_string(),
                    group: group(p),
                    image: "ami-old".into(),
                    node_selector: BTreeMap::from([("rota.dev/pool".into(), p.to_string())]),
                    nodes,
                })
                .collect(),
        }],
        workloads,
        faults: FaultProfile::from_yaml("boot: {min: 60s, max: 120s}", "bench").unwrap(),
        seed: 1,
    };
    let fleet = Fleet::start(&scenario, 1.0).await.unwrap();
    let store = fleet.store("bench").unwrap().clone();
    let requests = Arc::new(AtomicU64::new(0));
    let counter = requests.clone();
    let svc = tower::ServiceBuilder::new()
        .map_request(move |r| {
            counter.fetch_add(1, Ordering::Relaxed);
            r
        })
        .service(ApiServer::new(store));
    let client = kube::Client::new(svc, "default");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    for p in POOLS {
        let mut policy = EffectivePolicy {
            batch: BatchSize::Percent(10),
            max_parallel_pools: parallel,
            ..EffectivePolicy::default()
        };
        policy.drain.delete_empty_dir_data = true;
        let n = NodePoolRotation {
            metadata: ObjectMeta {
                name: Some(p.into()),
                ..ObjectMeta::default()
            },
            spec: NodePoolRotationSpec {
                cluster: "bench".into(),
                pool: p.into(),
                group: group(p),
                node_selector: BTreeMap::from([("rota.dev/pool".into(), p.into())]),
                channel: "stable".into(),
                version: "v2".into(),
                image: "ami-new".into(),
                policy,
                gates: vec![],
                source_commit: "bench".into(),
                mode: Mode::Reconcile,
            },
            status: None,
        };
        Api::<NodePoolRotation>::all(client.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
    }
    let calls = Arc::new(AtomicU64::new(0));
    let cloud = Counted {
        inner: fleet.cloud.clone(),
        calls: calls.clone(),
    };
    let mut cfg = Config::new("bench", "bench");
    cfg.events = false;
    let before = requests.load(Ordering::Relaxed);
    let mut c = Controller::new(client.clone(), Arc::new(cloud), cfg);
    let start = Instant::now();
    let api = Api::<NodePoolRotation>::all(client.clone());
    loop {
        c.step().await;
        let all = api.list(&Default::default()).await.unwrap();
        let done = all.items.iter().all(|n| {
            n.status
                .as_ref()
                .is_some_and(|s| s.phase == Phase::Succeeded)
        });
        let stuck = all.items.iter().find(|n| {
            n.status
                .as_ref()
                .is_some_and(|s| matches!(s.phase, Phase::Paused | Phase::Failed))
        });
        if let Some(n) = stuck {
            panic!(
                "{} stopped: {}",
                n.metadata.name.as_deref().unwrap(),
                n.status.as_ref().unwrap().message
            );
        }
        if done {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(48 * 3600),
            "no end in 48 h"
        );
        c.wait(Instant::now() + Duration::from_secs(300), true)
            .await;
    }
    Run {
        makespan: start.elapsed(),
        kube_requests: requests.load(Ordering::Relaxed) - before,
        cloud_calls: calls.load(Ordering::Relaxed),
        rotated: nodes * POOLS.len() as u32,
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

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let nodes = if bench { 100 } else { 2 };
    let parallel = block_on(run(nodes, 3));
    let serial = block_on(run(nodes, 1));
    let batch = (nodes * 10).div_ceil(100);
    let batches = u64::from(nodes.div_ceil(batch));
    let per_batch = BOOT_MIN + REGISTER + READY;
    let bound =
        |p: u64| Duration::from_secs(batches * per_batch * (POOLS.len() as u64).div_ceil(p));
    let min = |d: Duration| d.as_secs_f64() / 60.0;
    println!(
        "controller on the simulated fleet: {} pools x {nodes} nodes, batch 10% ({batches} batches per pool)",
        POOLS.len()
    );
    println!(
        "  makespan, maxParallelPools 3:      {:7.1} min simulated ({:.1} s wall)",
        min(parallel.makespan),
        parallel.wall.as_secs_f64()
    );
    println!(
        "  lower bound the policy allows:     {:7.1} min ({batches} batches x {per_batch} s fastest boot+register+ready)",
        min(bound(3))
    );
    println!(
        "  baseline, one pool at a time:      {:7.1} min simulated ({:.1} s wall; its bound {:.1} min)",
        min(serial.makespan),
        serial.wall.as_secs_f64(),
        min(bound(1))
    );
    for (name, r) in [("parallel", &parallel), ("one pool at a time", &serial)] {
        println!(
            "  {name}: {:.1} Kubernetes API requests and {:.1} cloud calls per rotated node",
            r.kube_requests as f64 / f64::from(r.rotated),
            r.cloud_calls as f64 / f64::from(r.rotated)
        );
    }
    assert!(parallel.makespan >= bound(3));
}
