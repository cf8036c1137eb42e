//! The scale scenario: one simulated cluster of 5,000 nodes (10 pools of 500) running
//! 150,000 pods (`examples/sim/scale.yaml`). Prints how long loading takes, the memory it
//! holds, how long the controllers take to settle on it, and the latency of listing nodes and
//! listing the pods of one node, through the store and through kube-rs against the in-process
//! API server.
//!
//! `cargo bench --bench figures -- sim_scale` runs the full scenario. Run without `--bench` (as
//! `cargo test --all-targets` does) it loads a small cluster with the same profile, so the
//! bench cannot rot unnoticed.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use rota::cloud::{Cloud, GroupRef};
use rota::fleet::resolved::{DesiredCluster, DesiredPool, EffectivePolicy, Mode};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{Scenario, WorkloadProfile};
use rota::sim::store::{ListOptions, ResourceType};
use rota::sim::world::Fleet;

fn cluster(pools: u32) -> DesiredCluster {
    DesiredCluster {
        name: "scale".into(),
        labels: BTreeMap::new(),
        cloud: Cloud::Aws,
        wave: "main".into(),
        wave_index: 0,
        mode: Mode::Reconcile,
        kubernetes: None,
        pools: (0..pools)
            .map(|i| DesiredPool {
                owner_image: None,
                cluster: "scale".into(),
                name: format!("pool-{i}"),
                channel: "general".into(),
                version: "2026.11.1".into(),
                image: "ami-0a1b2c3d4e5f60718".into(),
                arch: Default::default(),
                kubelet: None,
                released: None,
                max_age: None,
                group: GroupRef::Aws {
                    region: "us-east-1".into(),
                    auto_scaling_group: format!("scale-pool-{i}"),
                },
                node_selector: [("rota.dev/pool".to_string(), format!("pool-{i}"))].into(),
                policy: EffectivePolicy::default(),
                gates: vec![],
                mode: Mode::Reconcile,
            })
            .collect(),
    }
}

/// Resident memory (current, peak) in MiB, from /proc.
fn memory_mib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time (user + system) this process used so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sim/scale.yaml");
    let mut workloads = WorkloadProfile::load(&dir).expect("examples/sim/scale.yaml");
    if !full {
        workloads.nodes.per_pool = 5;
    }
    let scenario = Scenario::from_fleet(&[cluster(10)], workloads, FaultProfile::default(), 1);
    // As `rota sim serve` runs it: a multi-threaded runtime.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (rss0, _) = memory_mib();
        let t = Instant::now();
        let fleet = Fleet::start(&scenario, 1.0)
            .await
            .expect("scale scenario loads");
        let load = t.elapsed();
        let store = fleet.store("scale").unwrap().clone();
        let nodes = store.count(&ResourceType::nodes());
        let pods = store.count(&ResourceType::pods());
        let (rss, _) = memory_mib();
        println!(
            "sim_scale: loaded {nodes} nodes and {pods} pods in {:.2?}; resident memory +{} MiB",
            load,
            rss.saturating_sub(rss0)
        );
        // Let the controllers index everything (they start with a watch of every object).
        // Settled: a second with no write and under 5% of a core busy (the controllers
        // start by indexing a watch of every object, which takes a while at this size).
        let t = Instant::now();
        let idle_cpu = loop {
            let (rv, cpu) = (store.resource_version(), cpu_time());
            tokio::time::sleep(Duration::from_secs(1)).await;
            let used = cpu_time().saturating_sub(cpu);
            if store.resource_version() == rv && used < Duration::from_millis(50) {
                break used;
            }
        };
        let (_, peak) = memory_mib();
        println!(
            "sim_scale: controllers settled in {:.2?}; peak resident memory {peak} MiB",
            t.elapsed()
        );
        println!("sim_scale: CPU used by an idle second once settled: {idle_cpu:.2?}");
        assert_eq!(
            store.count(&ResourceType::pods()),
            pods,
            "a loaded cluster is steady: nothing created or deleted"
        );

        let node_name = store
            .list(&ResourceType::nodes(), None, &ListOptions::default())
            .unwrap()
            .0[nodes / 2]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        let by_node = ListOptions::fields(&format!("spec.nodeName={node_name}"));
        let rounds = if full { 20 } else { 3 };
        let time = |f: &dyn Fn() -> usize| {
            let mut v = Vec::new();
            let mut n = 0;
            for _ in 0..rounds {
                let t = Instant::now();
                n = f();
                v.push(t.elapsed());
            }
            (median(v), n)
        };
        let (d, n) = time(&|| {
            store
                .list(&ResourceType::nodes(), None, &ListOptions::default())
                .unwrap()
                .0
                .len()
        });
        println!("sim_scale: store list nodes ({n}): median {d:.2?}");
        let (d, n) = time(&|| {
            store
                .list(&ResourceType::pods(), None, &by_node)
                .unwrap()
                .0
                .len()
        });
        println!("sim_scale: store list pods of one node ({n}): median {d:.2?}");

        let client = rota::kube::sim::client(store.clone());
        let nodes_api: Api<Node> = Api::all(client.clone());
        let pods_api: Api<Pod> = Api::all(client);
        let mut v = Vec::new();
        let mut n = 0;
        for _ in 0..rounds.min(5) {
            let t = Instant::now();
            n = nodes_api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
            v.push(t.elapsed());
        }
        println!(
            "sim_scale: kube-rs list nodes ({n}): median {:.2?}",
            median(v)
        );
        let mut v = Vec::new();
        let lp = ListParams::default().fields(&format!("spec.nodeName={node_name}"));
        for _ in 0..rounds {
            let t = Instant::now();
            n = pods_api.list(&lp).await.unwrap().items.len();
            v.push(t.elapsed());
        }
        println!(
            "sim_scale: kube-rs list pods of one node ({n}): median {:.2?}",
            median(v)
        );
        drop(fleet);
    });
}
