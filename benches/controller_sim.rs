//! The rotation controller on the simulated fleet (`sim` API server through kube-rs, the
//! simulated cloud), paused tokio time: a cluster of 3 pools × 100 nodes moves to a new
//! image with `batch: "10%"`, in several shapes of the durations that set a rotation's
//! length (boot, drain, soak).
//!
//! For each shape it prints, in simulated time and on the same seed: the makespan pipelined
//! (`rollout.pipeline`, the default; `maxParallelPools: 3`), sequential (the algorithm before
//! pipelining, `pipeline: false`, same parallelism), the baseline of one batch at a time and
//! one pool at a time (`maxParallelPools: 1`, `pipeline: false`), and the lower bound the
//! policy allows (`rotate::eta::floor` with the shape's fastest boot + registration +
//! readiness and its drain: grace period + instance shutdown), with their ratios; the peak
//! surge of any pool in batches; the Kubernetes API requests (counted at the transport,
//! watches included) and cloud calls per rotated node; the wall time of each run. The last
//! lines are `key=value` figures for scripts.
//!
//! Run: `cargo bench --bench figures -- controller_sim` (`ROTA_BENCH_NODES=N` per pool, default 100;
//! `ROTA_BENCH_SHAPES=boot,drain` to pick shapes). Without `--bench` (as `cargo test
//! --all-targets` runs it) a 3 × 3-node smoke run of every shape checks that it completes
//! and that pipelining is never slower than sequential there.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rota::cloud::{GroupRef, NodeGroups};
use rota::controller::Controller;
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy};
use rota::kube::crd::NodePoolRotationSpec;
use rota::rotate::Phase;
use rota::rotate::eta::{self, Timings};
use rota::sim::apiserver::ApiServer;
use tokio::time::Instant;

use crate::support::sim_fleet::{self, CountedGroups, SimCluster, block_on_paused, test_config};

const POOLS: [&str; 3] = ["general", "memory", "batch"];
const REGISTER: u64 = 15;
const READY: u64 = 20;
/// How long a terminated instance stays listed (the sim's default `shutdown`).
const SHUTDOWN: u64 = 30;

/// One shape of the durations a rotation's length depends on.
struct Shape {
    name: &'static str,
    /// Boot range of a new instance, seconds (registration and readiness come on top).
    boot: (u64, u64),
    /// Pods' termination grace period, seconds: how long a drain takes at least.
    grace: u64,
    soak: u64,
    /// The workloads (the default shape keeps the PDB-heavy mix of the first version).
    workloads: String,
}

fn plain(grace: u64) -> String {
    format!(
        r#"
nodes: {{perPool: 100, registerAfter: {REGISTER}s, readyAfter: {READY}s}}
deployments:
  - {{name: web, namespace: shop, replicasPerNode: 2, readyAfter: 5s, gracePeriod: {grace}s}}
daemonSets:
  - {{name: node-exporter, namespace: monitoring, readyAfter: 5s}}
"#
    )
}

fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            name: "default",
            boot: (60, 120),
            grace: 30,
            soak: 0,
            workloads: format!(
                r#"
nodes: {{perPool: 100, registerAfter: {REGISTER}s, readyAfter: {READY}s}}
deployments:
  - {{name: web, namespace: shop, replicasPerNode: 2, pdb: {{minAvailable: "90%"}}, readyAfter: 10s}}
  - {{name: api, namespace: shop, replicasPerNode: 1, pdb: {{maxUnavailable: "10%"}}, readyAfter: 5s}}
  - {{name: worker, namespace: shop, replicasPerNode: 1}}
daemonSets:
  - {{name: node-exporter, namespace: monitoring, readyAfter: 5s}}
"#
            ),
        },
        Shape {
            name: "boot",
            boot: (180, 180),
            grace: 30,
            soak: 60,
            workloads: plain(30),
        },
        Shape {
            name: "drain",
            boot: (60, 60),
            grace: 600,
            soak: 60,
            workloads: plain(600),
        },
        Shape {
            name: "soak",
            boot: (120, 120),
            grace: 60,
            soak: 600,
            workloads: plain(60),
        },
    ]
}

impl Shape {
    /// The floor the policy allows for one pool: the fastest boot (+ registration and
    /// readiness) and the shortest drain (grace period + shutdown), no control latency.
    fn floor(&self, nodes: u32, pipelined: bool) -> Duration {
        let batch = BatchSize::Percent(10).nodes(nodes);
        let t = Timings {
            boot: Duration::from_secs(self.boot.0 + REGISTER + READY),
            drain: Duration::from_secs(self.grace + SHUTDOWN),
            batch_soak: Duration::from_secs(self.soak),
            pool_soak: Duration::ZERO,
        };
        eta::floor(eta::batches(nodes, batch), &t, pipelined)
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
    /// The most instances any pool held above its size at start, in batches.
    peak_surge: f64,
    wall: std::time::Duration,
}

async fn run(shape: &Shape, nodes: u32, parallel: u32, pipeline: bool) -> Run {
    let wall = std::time::Instant::now();
    let mut world = sim_fleet::cluster(Cloud::Aws, 1)
        .named("bench")
        .workloads(&shape.workloads)
        .faults(&format!(
            "boot: {{min: {}s, max: {}s}}",
            shape.boot.0, shape.boot.1
        ));
    for p in POOLS {
        world = world.pool(p, group(p), "ami-old", "rota.dev/pool", nodes);
    }
    let requests = Arc::new(AtomicU64::new(0));
    let counter = requests.clone();
    let s = SimCluster::start_with(&world.scenario(), |store| {
        let svc = tower::ServiceBuilder::new()
            .map_request(move |r| {
                counter.fetch_add(1, Ordering::Relaxed);
                r
            })
            .service(ApiServer::new(store));
        kube::Client::new(svc, "default")
    })
    .await;
    for p in POOLS {
        let mut policy = EffectivePolicy {
            batch: BatchSize::Percent(10),
            max_parallel_pools: parallel,
            batch_soak: GoDuration::from_secs(shape.soak),
            pipeline,
            ..EffectivePolicy::default()
        };
        policy.drain.delete_empty_dir_data = true;
        s.create(&sim_fleet::npr(NodePoolRotationSpec {
            cluster: "bench".into(),
            version: "v2".into(),
            source_commit: "bench".into(),
            ..sim_fleet::spec(p, group(p), "rota.dev/pool", "ami-new", policy)
        }))
        .await;
    }
    let calls = Arc::new(AtomicU64::new(0));
    let cloud = CountedGroups {
        inner: Arc::new(s.fleet.cloud.clone()),
        describes: calls.clone(),
        others: calls.clone(),
    };
    let before = requests.load(Ordering::Relaxed);
    let cfg = test_config("bench", "bench");
    let mut c = Controller::new(s.client.clone(), Arc::new(cloud), cfg);
    let start = Instant::now();
    let api = s.rotations();
    let batch = BatchSize::Percent(10).nodes(nodes);
    let mut peak = 0u32;
    loop {
        c.step().await;
        // Invariant 1 as the bench sees it: instances listed above the size at start.
        for p in POOLS {
            let g = s.fleet.cloud.describe(&group(p)).await.unwrap();
            peak = peak.max((g.instances.len() as u32).saturating_sub(nodes));
        }
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
        peak_surge: f64::from(peak) / f64::from(batch),
        wall: wall.elapsed(),
    }
}

pub fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let nodes: u32 = std::env::var("ROTA_BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 100 } else { 3 });
    let picked = std::env::var("ROTA_BENCH_SHAPES").ok();
    let min = |d: Duration| d.as_secs_f64() / 60.0;
    let pools = POOLS.len() as u32;
    let batch = BatchSize::Percent(10).nodes(nodes);
    println!(
        "controller on the simulated fleet: {pools} pools x {nodes} nodes, batch 10% ({} batches per pool), maxParallelPools 3 unless said",
        eta::batches(nodes, batch)
    );
    let mut figures = Vec::new();
    for shape in shapes() {
        if picked
            .as_deref()
            .is_some_and(|p| !p.split(',').any(|s| s == shape.name))
        {
            continue;
        }
        let pipelined = block_on_paused(run(&shape, nodes, 3, true));
        let sequential = block_on_paused(run(&shape, nodes, 3, false));
        let baseline = block_on_paused(run(&shape, nodes, 1, false));
        // Three pools at once: one round of the per-pool floor.
        let bound = shape.floor(nodes, true);
        let ratio = |r: &Run| r.makespan.as_secs_f64() / bound.as_secs_f64();
        println!(
            "\nshape {} (boot {}-{} s + {} s to Ready, drain {} s + {} s shutdown, batch soak {} s)",
            shape.name,
            shape.boot.0,
            shape.boot.1,
            REGISTER + READY,
            shape.grace,
            SHUTDOWN,
            shape.soak
        );
        println!(
            "  lower bound the policy allows:  {:7.1} min (sequential floor {:.1} min)",
            min(bound),
            min(shape.floor(nodes, false))
        );
        for (name, r) in [
            ("pipelined", &pipelined),
            ("sequential", &sequential),
            ("baseline (1 batch, 1 pool)", &baseline),
        ] {
            println!(
                "  {name:<28}  {:7.1} min  {:5.2}x the bound  peak surge {:.2} batch  {:.1} API requests and {:.1} cloud calls per node  ({:.0} s wall)",
                min(r.makespan),
                ratio(r),
                r.peak_surge,
                r.kube_requests as f64 / f64::from(r.rotated),
                r.cloud_calls as f64 / f64::from(r.rotated),
                r.wall.as_secs_f64()
            );
        }
        println!(
            "  pipelined is {:.2}x faster than sequential and {:.2}x faster than the baseline",
            sequential.makespan.as_secs_f64() / pipelined.makespan.as_secs_f64(),
            baseline.makespan.as_secs_f64() / pipelined.makespan.as_secs_f64()
        );
        // The floor is a floor: a makespan below it means the bound or the bench is wrong.
        assert!(
            pipelined.makespan >= bound,
            "{}: below the bound",
            shape.name
        );
        assert!(
            pipelined.peak_surge <= 1.0 && sequential.peak_surge <= 1.0,
            "{}: surge above one batch",
            shape.name
        );
        figures.push(format!(
            "shape={} nodes={nodes} bound_min={:.1} pipelined_min={:.1} sequential_min={:.1} baseline_min={:.1} pipelined_ratio={:.3} speedup_vs_baseline={:.2} peak_surge_batches={:.2}",
            shape.name,
            min(bound),
            min(pipelined.makespan),
            min(sequential.makespan),
            min(baseline.makespan),
            ratio(&pipelined),
            baseline.makespan.as_secs_f64() / pipelined.makespan.as_secs_f64(),
            pipelined.peak_surge.max(sequential.peak_surge)
        ));
    }
    println!();
    for f in figures {
        println!("{f}");
    }
}
