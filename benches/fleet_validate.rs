//! Validates a generated fleet repo of 1,000 clusters (3,000 pools, 3 clouds, 3 waves) and
//! prints how long loading, validating and resolving take. Target: under 1 s in release.
//!
//! Run: `cargo bench --bench figures -- fleet_validate` (set `FLEET_BENCH_CLUSTERS` to change the size).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use rota::fleet::{SourceFile, load_dir, load_files};

fn fleet_yaml() -> String {
    r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: bench}
spec:
  images:
    general:
      versions:
        "2026.11.1":
          aws: ami-0a1b2c3d4e5f60718
          gcp: projects/acme-images/global/images/general-2026-11-1
          azure: /subscriptions/s1/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.1
        "2026.11.2":
          aws: ami-0f9e8d7c6b5a40312
          gcp: projects/acme-images/global/images/general-2026-11-2
          azure: /subscriptions/s1/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.2
  waves:
    - {name: canary, clusterSelector: {matchLabels: {ring: canary}}, images: {general: "2026.11.2"}, soak: 1h}
    - {name: early, clusterSelector: {matchLabels: {ring: early}}, images: {general: "2026.11.2"}, soak: 24h}
    - {name: main, clusterSelector: {matchLabels: {ring: main}}, images: {general: "2026.11.1"}}
  rollout: {batch: "10%", batchSoak: 5m}
  gates: [pods-healthy]
---
apiVersion: rota.dev/v1alpha1
kind: HealthGate
metadata: {name: pods-healthy}
spec:
  pods: {maxNotReady: "2%"}
---
apiVersion: rota.dev/v1alpha1
kind: HealthGate
metadata: {name: error-rate}
spec:
  prometheus: {address: "http://prometheus:9090", query: "sum(rate(errors[5m]))", max: 0.01}
"#
    .to_string()
}

fn cluster_yaml(i: usize) -> String {
    let ring = match i % 20 {
        0 => "canary",
        1..=5 => "early",
        _ => "main",
    };
    let name = format!("cluster-{i:04}");
    let (cloud, groups): (String, [String; 3]) = match i % 3 {
        0 => (
            "aws: {region: us-east-1}".into(),
            ["general", "batch", "system"].map(|p| format!("{{autoScalingGroup: eks-{p}-{i}}}")),
        ),
        1 => (
            "gcp: {project: acme-prod, region: europe-west1}".into(),
            ["general", "batch", "system"].map(|p| {
                format!("{{instanceGroupManager: gke-{p}-{i}-grp, zone: europe-west1-b}}")
            }),
        ),
        _ => (
            "azure: {subscriptionId: s1, resourceGroup: rg-prod}".into(),
            ["general", "batch", "system"].map(|p| format!("{{scaleSet: aks-{p}-{i}-vmss}}")),
        ),
    };
    let mut s = format!(
        "apiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: {name}\n  labels: {{ring: {ring}, index: \"{i}\"}}\nspec:\n  cloud: {{{cloud}}}\n  gates: [error-rate]\n  rollout:\n    maxParallelPools: 2\n    windows:\n      - {{days: [Mon, Tue, Wed, Thu], start: \"09:00\", end: \"17:00\", timeZone: Europe/Berlin}}\n  pools:\n"
    );
    for (p, g) in ["general", "batch", "system"].iter().zip(groups) {
        let _ = write!(
            s,
            "    - name: {p}\n      channel: general\n      nodeSelector: {{pool: {p}}}\n      group: {g}\n      rollout: {{batch: 2, drain: {{timeout: 20m}}}}\n"
        );
    }
    s
}

fn files(n: usize) -> Vec<SourceFile> {
    let mut f = vec![SourceFile {
        path: "fleet.yaml".into(),
        bytes: fleet_yaml().into_bytes(),
    }];
    for i in 0..n {
        f.push(SourceFile {
            path: format!("clusters/cluster-{i:04}.yaml"),
            bytes: cluster_yaml(i).into_bytes(),
        });
    }
    f
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        last = Some(v);
    }
    (best, last.unwrap())
}

pub fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // in a debug build: then only a small smoke run, to keep the test suite fast.
    let benching = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("FLEET_BENCH_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if benching { 1000 } else { 30 });
    let files = files(n);
    let bytes: usize = files.iter().map(|f| f.bytes.len()).sum();

    // The first load also compiles the embedded schemas: report it on its own.
    let t = Instant::now();
    let fleet = load_files(&files).unwrap_or_else(|d| panic!("generated repo is invalid:\n{d}"));
    let cold = t.elapsed();
    let (warm, _) = best_of(5, || load_files(&files).unwrap());

    let dir = tempfile::tempdir().unwrap();
    for f in &files {
        let p = dir.path().join(&f.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, &f.bytes).unwrap();
    }
    let (from_disk, _) = best_of(5, || load_dir(dir.path()).unwrap());
    let (resolve, all) = best_of(5, || fleet.resolve_all().unwrap());
    let pools: usize = all.iter().map(|c| c.pools.len()).sum();

    println!(
        "fleet_validate: {n} clusters, {pools} pools, {} files, {} KiB",
        files.len(),
        bytes / 1024
    );
    println!("  load+validate in memory, first (schemas compiled): {cold:?}");
    println!("  load+validate in memory, best of 5:                {warm:?}");
    println!("  load+validate from disk, best of 5:                {from_disk:?}");
    println!("  resolve every cluster, best of 5:                  {resolve:?}");
    if benching {
        let verdict = if from_disk < Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        };
        println!("  target < 1s for validating the repo from disk: {verdict}");
    }
}
