//! Managed node pools in the fleet repo (`tests/fixtures/fleet/managed`: an EKS managed node
//! group, a Karpenter NodePool, GKE node pools on GKE's image and on a custom one, an AKS
//! agent pool, beside a self-managed Auto Scaling group): the repo is valid, each owner
//! resolves, and the commands say what each pool keeps of its policy: `rota validate` warns
//! at the line of a field the owner cannot honour, `rota render` shows the owner, the
//! strategy and the capabilities, `rota diff` shows a change of owner, of `managedUpdate`
//! and of the GKE form per pool.

#[path = "support/git.rs"]
mod git;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use git::{git, rota};
use rota::fleet::owner::{Owner, OwnerImage, Strategy};
use rota::fleet::resolved::{ManagedUpdate, Mode};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet/managed")
}

fn run(args: &[&str]) -> Output {
    Command::new(rota()).args(args).output().expect("rota runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The 1-based line of the first line of `file` (in the fixture) holding `needle` after the
/// first line holding `after`.
fn line_of(file: &str, after: &str, needle: &str) -> u32 {
    let t = std::fs::read_to_string(fixture().join(file)).unwrap();
    let start = t.lines().position(|l| l.contains(after)).unwrap();
    let at = t
        .lines()
        .skip(start)
        .position(|l| l.contains(needle))
        .unwrap();
    (start + at + 1) as u32
}

#[test]
fn the_managed_fixture_is_valid_and_each_owner_resolves() {
    let fleet = rota::source::read::load_dir(fixture()).unwrap_or_else(|d| panic!("{d}"));
    let eks = fleet.resolve_cluster("eks-canary").unwrap();
    let owners: Vec<(Owner, Strategy)> = eks
        .pools
        .iter()
        .map(|p| (p.owner(), p.strategy()))
        .collect();
    assert_eq!(
        owners,
        [
            (Owner::SelfManaged, Strategy::Rota),
            (Owner::EksNodegroup, Strategy::Service),
            (Owner::EksNodegroup, Strategy::BlueGreen),
            (Owner::KarpenterNodePool, Strategy::Drift),
        ]
    );
    assert_eq!(
        eks.pools[1].group.managed().unwrap().cluster(),
        "acme-canary"
    );
    assert_eq!(eks.pools[1].image, "ami-0f9e8d7c6b5a40312");
    let gke = fleet.resolve_cluster("gke-canary").unwrap();
    assert_eq!(
        gke.pools[0].owner_image,
        Some(OwnerImage::GkeNode {
            node_version: Some("1.31.5-gke.1023000".into()),
            image_type: "COS_CONTAINERD".into()
        })
    );
    assert_eq!(
        gke.pools[1].owner_image,
        Some(OwnerImage::GkeCustom {
            image: "projects/acme-images/global/images/general-2026-11-2".into(),
            node_version: None
        })
    );
    let aks = fleet.resolve_cluster("aks-main").unwrap();
    assert_eq!(
        aks.pools[0].image,
        "AKSUbuntu-2204gen2containerd-202610.27.0"
    );
    assert_eq!(
        aks.pools[0].policy.managed_update,
        Some(ManagedUpdate::Service)
    );
    assert_eq!(aks.pools[0].mode, Mode::Reconcile);
}

#[test]
fn rota_validate_warns_at_the_line_of_a_field_the_owner_cannot_honour() {
    let dir = fixture();
    let dir = dir.to_str().unwrap();
    let file = format!("{dir}/clusters/eks-canary.yaml");
    // The service-updated node group's batchSoak: EKS moves on without waiting. The
    // blue-green node group's batchSoak and evictionInterval are rota's own: no warning.
    let line = line_of("clusters/eks-canary.yaml", "name: general", "batchSoak");

    let out = run(&["validate", dir, "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], true);
    let w = v["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{v}");
    assert_eq!(
        (w[0]["file"].as_str(), w[0]["line"].as_u64()),
        (Some(file.as_str()), Some(line.into()))
    );
    assert_eq!(w[0]["path"], "spec.pools[1].rollout.batchSoak");
    assert!(
        w[0]["message"]
            .as_str()
            .unwrap()
            .contains("rollout.batchSoak is not honoured for eksNodegroup pools replaced by service (eks-canary/general)"),
        "{v}"
    );

    let out = run(&["validate", dir]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).starts_with(&format!("{file}:{line}:"))
            && text(&out.stderr).contains(": warning: "),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).ends_with("(1 warning)\n"),
        "{}",
        text(&out.stdout)
    );

    let out = run(&["validate", dir, "--format", "github"]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).starts_with(&format!("::warning file={file},line={line},")),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn rota_render_shows_owner_strategy_and_what_the_owner_cannot_honour() {
    let dir = fixture();
    let repo = dir.to_str().unwrap();
    let out = run(&[
        "render",
        "--cluster",
        "eks-canary",
        "--repo",
        repo,
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pools = v["pools"].as_array().unwrap();
    // The self-managed pool renders as before: no capabilities.
    assert!(pools[0].get("capabilities").is_none(), "{}", pools[0]);
    assert!(pools[0]["group"].get("aws").is_some());
    let ng = &pools[1]["capabilities"];
    assert_eq!(
        (ng["owner"].as_str(), ng["strategy"].as_str()),
        (Some("eksNodegroup"), Some("service"))
    );
    for lost in [
        "batchSoak",
        "drain.evictionInterval",
        "drain.timeout",
        "percent",
    ] {
        assert!(ng["notHonoured"].get(lost).is_some(), "{lost}: {ng}");
    }
    assert!(
        ng["byService"]["batch"]
            .as_str()
            .unwrap()
            .contains("maxUnavailable"),
        "{ng}"
    );
    assert!(ng["poolLevel"].get("windows").is_some(), "{ng}");
    assert_eq!(
        pools[1]["group"]["managed"]["eksNodegroup"]["eksCluster"],
        "acme-canary"
    );
    assert_eq!(pools[1]["policy"]["managedUpdate"], "service");
    let bg = &pools[2]["capabilities"];
    assert_eq!(bg["strategy"], "blueGreen");
    assert!(bg["notHonoured"].get("batchSoak").is_none(), "{bg}");
    assert_eq!(pools[3]["capabilities"]["strategy"], "drift");
    assert!(pools[3]["policy"].get("managedUpdate").is_none());

    let out = run(&["render", "--cluster", "gke-canary", "--repo", repo]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    for s in [
        "owner: gkeNodePool",
        "strategy: service",
        "notHonoured:",
        "nodeVersion: 1.31.5-gke.1023000",
        "gkeCustom:",
    ] {
        assert!(yaml.contains(s), "{s} not in:\n{yaml}");
    }
}

#[test]
fn rota_diff_shows_a_change_of_owner_of_managed_update_and_of_the_gke_form() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    git(repo, &["init", "-q", "-b", "main"]);
    copy_dir(&fixture(), repo);
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "managed fleet"]);
    let eks = repo.join("clusters/eks-canary.yaml");
    // The self-managed batch pool moves to an EKS managed node group; the general node
    // group goes blue-green; GKE's version of 2026.11.2 is corrected in place.
    edit(
        &eks,
        "group: {autoScalingGroup: eks-canary-batch}",
        "group: {eksNodegroup: batch}",
    );
    edit(
        &eks,
        "      rollout:\n        batchSoak: 10m\n    # An EKS",
        "      rollout:\n        managedUpdate: blueGreen\n        batchSoak: 10m\n    # An EKS",
    );
    edit(
        &repo.join("fleet.yaml"),
        "1.31.5-gke.1023000",
        "1.31.5-gke.1046000",
    );
    git(repo, &["commit", "-q", "-am", "owners and forms"]);

    let r = repo.to_str().unwrap();
    let out = run(&[
        "diff", "--repo", r, "--from", "HEAD~1", "--to", "HEAD", "--format", "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes: Vec<&serde_json::Value> = v["waves"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["changes"].as_array().unwrap())
        .collect();
    let pool = |c: &str, p: &str| {
        *changes
            .iter()
            .find(|x| x["cluster"] == c && x["pool"] == p)
            .unwrap_or_else(|| panic!("{c}/{p} not in {v}"))
    };
    let setting = |x: &serde_json::Value, field: &str| -> (String, String) {
        let s = x["settings"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["field"] == field))
            .unwrap_or_else(|| panic!("{field} not in {x}"));
        (
            s["from"].as_str().unwrap().into(),
            s["to"].as_str().unwrap().into(),
        )
    };
    let batch = pool("eks-canary", "batch");
    assert_eq!(
        setting(batch, "owner"),
        ("selfManaged".into(), "eksNodegroup".into())
    );
    assert_eq!(
        setting(batch, "strategy"),
        ("rota".into(), "service".into())
    );
    let general = pool("eks-canary", "general");
    assert_eq!(
        setting(general, "strategy"),
        ("service".into(), "blueGreen".into())
    );
    assert_eq!(
        setting(general, "rollout.managedUpdate"),
        ("service".into(), "blueGreen".into())
    );
    let gke = pool("gke-canary", "general");
    assert_eq!(gke["kind"], "changed");
    assert_eq!(gke["to"]["image"], "1.31.5-gke.1046000/COS_CONTAINERD");
    // The AKS pool of the main wave changes nothing.
    assert!(changes.iter().all(|x| x["cluster"] != "aks-main"), "{v}");

    let out = run(&["diff", "--repo", r, "--from", "HEAD~1", "--to", "HEAD"]);
    let human = text(&out.stdout);
    assert!(
        human.contains("eks-canary/batch: owner: selfManaged -> eksNodegroup"),
        "{human}"
    );
    assert!(
        human.contains("gke-canary/general: general 2026.11.2 -> 2026.11.2 (1.31.5-gke.1023000/COS_CONTAINERD -> 1.31.5-gke.1046000/COS_CONTAINERD)"),
        "{human}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn edit(path: &Path, from: &str, to: &str) {
    let t = std::fs::read_to_string(path).unwrap();
    assert!(t.contains(from), "{} lacks {from:?}", path.display());
    std::fs::write(path, t.replacen(from, to, 1)).unwrap();
}
