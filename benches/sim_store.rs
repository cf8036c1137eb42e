//! Scale of the simulated API: loads 5,000 nodes and 150,000 pods into one cluster's store and
//! prints memory (RSS) and the latency of listing nodes and listing the pods of one node,
//! directly on the store and through kube-rs and the in-process API server.
//!
//! `cargo bench --bench figures -- sim_store` runs the full size. Under `cargo test` (no `--bench`
//! argument) it runs a small size as a smoke test so the suite stays fast.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use rota::sim::store::{ListOptions, ResourceType, Store};
use serde_json::{Value, json};

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn node(i: usize) -> Value {
    let zone = ["a", "b", "c"][i % 3];
    json!({"metadata": {"name": format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i / 250, i % 250),
        "labels": {"kubernetes.io/hostname": format!("node-{i}"), "topology.kubernetes.io/zone": format!("eu-west-1{zone}"),
                   "node.kubernetes.io/instance-type": "m6i.xlarge", "rota.dev/pool": format!("pool-{}", i % 10)}},
        "spec": {"providerID": format!("aws:///eu-west-1{zone}/i-{i:017x}")},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                   "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                   "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Bottlerocket OS 1.30.0"}}})
}

fn pod(i: usize, node: &str) -> Value {
    let app = format!("app-{}", i % 500);
    json!({"metadata": {"name": format!("{app}-{i:06}"), "labels": {"app": app, "pod-template-hash": "5d8f7c9b4"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-5d8f7c9b4"),
                             "uid": "6b1e2f4a-0000-4000-8000-000000000000", "controller": true}]},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "main", "image": "registry.example/app:1.2.3",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        "status": {"phase": "Running", "podIP": "10.1.2.3",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0}]}})
}

fn time<T>(iters: usize, mut f: impl FnMut() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(f());
    }
    start.elapsed() / iters as u32
}

pub fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (nodes, pods_per_node) = if full { (5_000, 30) } else { (50, 30) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();

    let rss0 = rss_mib();
    let store = Store::new();
    let t = Instant::now();
    let mut names = Vec::new();
    for i in 0..nodes {
        let n = store.create(&ResourceType::nodes(), None, node(i)).unwrap();
        names.push(n["metadata"]["name"].as_str().unwrap().to_string());
    }
    let mut k = 0;
    for n in &names {
        for _ in 0..pods_per_node {
            store
                .create(&ResourceType::pods(), Some("default"), pod(k, n))
                .unwrap();
            k += 1;
        }
    }
    let load = t.elapsed();
    let rss1 = rss_mib();
    println!(
        "sim_store: loaded {nodes} nodes and {k} pods in {load:.2?}; RSS {rss1:.0} MiB ({:.0} MiB for the objects, {:.2} KiB per pod)",
        rss1 - rss0,
        (rss1 - rss0) * 1024.0 / (nodes + k) as f64
    );

    let target = &names[nodes / 2];
    let sel = ListOptions::fields(&format!("spec.nodeName={target}"));
    let d = time(5, || {
        store
            .list(&ResourceType::nodes(), None, &ListOptions::default())
            .unwrap()
            .0
            .len()
    });
    println!("sim_store: store list nodes ({nodes}): {d:.2?}");
    let d = time(200, || {
        store
            .list(&ResourceType::pods(), None, &sel)
            .unwrap()
            .0
            .len()
    });
    println!("sim_store: store list pods of one node ({pods_per_node} of {k}): {d:.2?}");

    let client = rota::kube::sim::client(store.clone());
    let node_api: Api<Node> = Api::all(client.clone());
    let pod_api: Api<Pod> = Api::all(client);
    let lp = ListParams::default().fields(&format!("spec.nodeName={target}"));
    rt.block_on(async {
        assert_eq!(
            node_api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
            nodes
        );
        let start = Instant::now();
        for _ in 0..5 {
            std::hint::black_box(node_api.list(&ListParams::default()).await.unwrap());
        }
        println!(
            "sim_store: kube-rs list nodes ({nodes}): {:.2?}",
            start.elapsed() / 5
        );
        assert_eq!(pod_api.list(&lp).await.unwrap().items.len(), pods_per_node);
        let start = Instant::now();
        for _ in 0..200 {
            std::hint::black_box(pod_api.list(&lp).await.unwrap());
        }
        println!(
            "sim_store: kube-rs list pods of one node ({pods_per_node}): {:.2?}",
            start.elapsed() / 200
        );
    });
    println!("sim_store: RSS at end {:.0} MiB", rss_mib());
}
