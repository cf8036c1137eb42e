//! `rota images discover` on a large fleet: 1,000 AWS clusters over 20 regions, half of them
//! with an arm64 pool beside the x86_64 one, a channel whose source is a name filter, and an
//! account holding 26 builds per region and arch. The clouds are the simulated ones behind
//! their HTTP endpoint (as `--cloud-endpoint` reaches them), so every lookup is a request.
//! Prints key=value figures: loading the fleet, the lookups and the decision, and writing
//! the version (edit, validation of the whole fleet, commit). Target: seconds.
//!
//! Run: `cargo bench --bench figures -- images_discover` (`DISCOVER_BENCH_CLUSTERS`,
//! `DISCOVER_BENCH_REGIONS` change the size). `cargo test --all-targets` runs a small smoke
//! pass that must propose the new build.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use rota::cloud::Arch;
use rota::discovery::{WriteTo, describe, discover, write};
use rota::fleet::{SourceFile, load_files};
use rota::sim::cloud::SimCloud;
use rota::sim::faults::FaultProfile;
use rota::sim::images::SimImage;
use rota::sim::wire::{HttpNodeGroups, serve};
use rota_core::images::Outcome;

const REGIONS: [&str; 20] = [
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-central-1",
    "eu-north-1",
    "eu-south-1",
    "ap-south-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-southeast-1",
    "ap-southeast-2",
    "sa-east-1",
    "me-south-1",
    "af-south-1",
];

/// Builds in the account per region and arch: the one the fleet runs (1), 24 older, the new.
const OLD_BUILDS: u64 = 24;

fn ami(build: u64, region: usize, arch: Arch) -> String {
    format!(
        "ami-{:017x}",
        build * 1000 + region as u64 * 10 + (arch == Arch::Arm64) as u64
    )
}

fn fleet_yaml(regions: usize) -> String {
    let mut s = String::from(
        "apiVersion: rota.dev/v1alpha1\nkind: Fleet\nmetadata: {name: bench}\nspec:\n  images:\n    general:\n      source:\n        aws: {nameFilter: \"bench-general-*\", owners: [\"123456789012\"]}\n      minAge: 72h\n      versions:\n        \"2026.11.1\":\n          released: \"2026-11-01T00:00:00Z\"\n          aws:\n",
    );
    for (r, region) in REGIONS.iter().enumerate().take(regions) {
        let _ = writeln!(
            s,
            "            {region}: {{x86_64: {}, arm64: {}}}",
            ami(100, r, Arch::X86_64),
            ami(100, r, Arch::Arm64)
        );
    }
    s.push_str("  waves:\n    - {name: canary, clusterSelector: {matchLabels: {ring: canary}}, images: {general: \"2026.11.1\"}, soak: 1h}\n    - {name: main, clusterSelector: {matchLabels: {ring: main}}, images: {general: \"2026.11.1\"}}\n");
    s
}

fn cluster_yaml(i: usize, regions: usize) -> String {
    let ring = if i.is_multiple_of(20) {
        "canary"
    } else {
        "main"
    };
    let region = REGIONS[i % regions];
    let mut s = format!(
        "apiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: c{i:05}\n  labels: {{ring: {ring}}}\nspec:\n  cloud: {{aws: {{region: {region}}}}}\n  pools:\n    - {{name: general, channel: general, nodeSelector: {{pool: general}}, group: {{autoScalingGroup: general-{i}}}}}\n"
    );
    if i.is_multiple_of(2) {
        let _ = writeln!(
            s,
            "    - {{name: graviton, channel: general, arch: arm64, nodeSelector: {{pool: graviton}}, group: {{autoScalingGroup: graviton-{i}}}}}"
        );
    }
    s
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
pub async fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("DISCOVER_BENCH_CLUSTERS", if benching { 1000 } else { 40 });
    let regions = env("DISCOVER_BENCH_REGIONS", if benching { 20 } else { 4 }).min(20);

    // The account: every build in every region, for both arches.
    let cloud = SimCloud::new(1, FaultProfile::default(), 1000.0);
    let now = Utc::now();
    let builds = (0..OLD_BUILDS)
        .map(|k| (k, 40 + k as i64))
        .chain([(100, 25), (300, 4)]);
    let mut images = 0;
    for (build, days) in builds {
        for (r, region) in REGIONS.iter().enumerate().take(regions) {
            for arch in [Arch::X86_64, Arch::Arm64] {
                let name = match build {
                    100 => "bench-general-2026-11-1".to_string(),
                    300 => "bench-general-2026-11-3".to_string(),
                    k => format!("bench-general-2025-{k}"),
                };
                let name = if arch == Arch::Arm64 {
                    name.replace("general-", "general-arm64-")
                } else {
                    name
                };
                cloud.publish_image(
                    SimImage::new(ami(build, r, arch), &[region], arch)
                        .named(name, now - chrono::Duration::days(days)),
                );
                images += 1;
            }
        }
    }
    let served = serve(Arc::new(cloud.clone())).await.unwrap();
    let clouds = HttpNodeGroups::new(&served.url);

    // The repo, committed (the write commits on top of it).
    let dir = tempfile::tempdir().unwrap();
    let mut files = vec![SourceFile::new("fleet.yaml", fleet_yaml(regions))];
    for i in 0..n {
        files.push(SourceFile::new(
            format!("clusters/c{i:05}.yaml"),
            cluster_yaml(i, regions),
        ));
    }
    for f in &files {
        let p = dir.path().join(&f.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, &f.bytes).unwrap();
    }
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "fleet"]);

    let t = Instant::now();
    let (files, _, commit) = rota::fleet::source::read_git(dir.path(), "HEAD", None).unwrap();
    let fleet = load_files(&files).unwrap_or_else(|d| panic!("generated repo is invalid:\n{d}"));
    let load = t.elapsed();

    let t = Instant::now();
    let reports = discover(&fleet, &clouds, None, Utc::now(), None)
        .await
        .unwrap();
    let lookups = t.elapsed();
    let Ok(Outcome::Propose(p)) = &reports[0].result else {
        panic!(
            "the new build must be proposed: {}",
            describe(&reports[0], now)
        )
    };
    assert_eq!(p.version, "2026.11.3");

    let t = Instant::now();
    let to = WriteTo {
        repo: dir.path(),
        parent: &commit,
        subdir: None,
        target: rota::discovery::Target::NewBranch("images/general".into()),
    };
    write(&files, &fleet, &reports, &to).unwrap().unwrap();
    let written = t.elapsed();

    let queries = regions * 2;
    println!(
        "images_discover clusters={n} regions={regions} queries={queries} account_images={images} load_ms={} lookup_ms={} write_ms={} total_ms={}",
        load.as_millis(),
        lookups.as_millis(),
        written.as_millis(),
        (load + lookups + written).as_millis()
    );
}
