//! Day one on a fleet that already runs: fresh agents (no NodePoolRotation, no records) on
//! simulated clusters whose pools already run their wave's pins, the promotion guard on. Every
//! pool is adopted (a record of kind `adopted`) and reports success, also in a later wave
//! whose pin the earlier wave is past; a later wave whose earlier-wave cluster has no agent
//! says which cluster never reported. Managed pools are adopted the same way, read through
//! their owners: an EKS managed node group (service and blueGreen), a Karpenter NodePool, a
//! GKE node pool and an AKS agent pool. All in process, real git, paused tokio time.

use crate::support::git::{git, origin_and_clone};

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, ListParams};
use rota::agent::local::{LocalConfig, LocalFleet};
use rota::kube::crd::NodePoolRotation;
use rota::report::{GitNotesStore, State};
use rota::sim::scenario::WorkloadProfile;
use rota::waves::CompletionKind;

/// Every cluster the test's fleets declare (whose notes a reader reads).
const CLUSTERS: [&str; 6] = [
    "canary-1", "canary-2", "main-1", "eks-main", "gke-main", "aks-main",
];

/// Canary pins `canary_v`, main pins `main_v`; `extra_canary` adds a cluster to the canary
/// wave. The guard is on (the default: no `promotion` key).
fn fleet_yaml(canary_v: &str, main_v: &str, extra_canary: Option<&str>) -> String {
    let canaries = match extra_canary {
        Some(c) => format!("[canary-1, {c}]"),
        None => "[canary-1]".into(),
    };
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: ami-0a1b2c3d4e5f60718}}
        "2026.11.2": {{aws: ami-0f9e8d7c6b5a40312}}
  waves:
    - name: canary
      clusters: {canaries}
      images: {{general: "{canary_v}"}}
      soak: 30m
    - name: main
      clusters: [main-1]
      images: {{general: "{main_v}"}}
  rollout: {{batch: 2, nodeReadyTimeout: 10m}}
"#
    )
}

fn cluster_yaml(name: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - name: general
      channel: general
      nodeSelector: {{rota.dev/pool: general}}
      group: {{autoScalingGroup: {name}-general}}
"#
    )
}

const WORKLOADS: &str = r#"
nodes: {perPool: 3, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 3, pdb: {maxUnavailable: 1}, readyAfter: 10s}
"#;

fn commit(dir: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (p, c) in files {
        std::fs::write(dir.join(p), c).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["push", "-q", "origin", "main"]);
    git(dir, &["rev-parse", "HEAD"])
}

async fn status_of(origin: &Path, commit: &str, context: &str) -> Option<(State, String)> {
    let store = GitNotesStore::new(origin, None, None);
    store.scope_to(CLUSTERS.iter().map(|c| c.to_string()));
    store
        .docs(commit)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|d| d.statuses)
        .find(|s| s.context == context)
        .map(|s| (s.state, s.description))
}

/// Waits (simulated time) until `context` on `commit` is `want`; returns its description.
async fn wait_for(
    fleet: &LocalFleet,
    origin: &Path,
    commit: &str,
    context: &str,
    want: State,
) -> String {
    let start = tokio::time::Instant::now();
    loop {
        let now = status_of(origin, commit, context).await;
        if let Some((state, d)) = &now
            && *state == want
        {
            return d.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(3600),
            "{context} on {commit} never became {want}: {now:?}"
        );
        fleet.poke();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_fresh_fleet_on_its_pins_is_adopted_with_the_guard_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, repo) = origin_and_clone(tmp.path(), "fleet");
    // The canary is past main's version: it will never complete 2026.11.1 again, so before
    // adoption main-1 waited for it forever and had no NodePoolRotation.
    let first = commit(
        &repo,
        &[
            ("fleet.yaml", &fleet_yaml("2026.11.2", "2026.11.1", None)),
            ("canary-1.yaml", &cluster_yaml("canary-1")),
            ("main-1.yaml", &cluster_yaml("main-1")),
        ],
        "fleet as it runs today",
    );
    let fleet = LocalFleet::start(LocalConfig::new(
        origin.clone(),
        tmp.path().join("state"),
        WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
    ))
    .await
    .unwrap();

    let main = wait_for(
        &fleet,
        &origin,
        &first,
        "rota/main-1/general",
        State::Success,
    )
    .await;
    assert_eq!(main, "3/3 nodes on general@2026.11.1");
    wait_for(&fleet, &origin, &first, "rota/canary-1", State::Success).await;
    wait_for(&fleet, &origin, &first, "rota/main-1", State::Success).await;
    for (cluster, version) in [("main-1", "2026.11.1"), ("canary-1", "2026.11.2")] {
        let nprs = Api::<NodePoolRotation>::all(fleet.clients[cluster].clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        assert_eq!(nprs.items.len(), 1, "{cluster}");
        assert_eq!(nprs.items[0].spec.version, version, "{cluster}");
        // Nothing was rotated: no batch ever started.
        let started = nprs.items[0]
            .status
            .as_ref()
            .and_then(|s| s.checkpoint.as_ref())
            .map_or(0, |c| c.batches_started);
        assert_eq!(started, 0, "{cluster}: {:?}", nprs.items[0].status);
    }
    // The evidence: adoptions, not rotations, and nothing was rotated.
    let store = GitNotesStore::new(&origin, None, None);
    store.scope_to(CLUSTERS.iter().map(|c| c.to_string()));
    let records = store.pool_records(&first).await.unwrap();
    for (cluster, version) in [("main-1", "2026.11.1"), ("canary-1", "2026.11.2")] {
        let r = records
            .iter()
            .find(|r| r.cluster == cluster && r.pool == "general")
            .unwrap_or_else(|| panic!("no record of {cluster}/general: {records:?}"));
        assert_eq!(r.completions.len(), 1, "{r:?}");
        let c = &r.completions[0];
        assert_eq!(
            (c.kind, c.channel.as_str(), c.version.as_str()),
            (CompletionKind::Adopted, "general", version),
            "{r:?}"
        );
    }

    // A second canary cluster joins the wave in git, but no agent runs there yet; main is
    // promoted to the canary's version. Main waits, and names the cluster that never reported.
    let promote = commit(
        &repo,
        &[
            (
                "fleet.yaml",
                &fleet_yaml("2026.11.2", "2026.11.2", Some("canary-2")),
            ),
            ("canary-2.yaml", &cluster_yaml("canary-2")),
        ],
        "canary-2 joins the canary wave; main: general 2026.11.2",
    );
    let waiting = wait_for(
        &fleet,
        &origin,
        &promote,
        "rota/main-1/general",
        State::Pending,
    )
    .await;
    assert_eq!(
        waiting,
        "waiting for wave canary: no rota agent has reported from canary-2 (is one running there?)"
    );
    let npr = Api::<NodePoolRotation>::all(fleet.clients["main-1"].clone())
        .get("general")
        .await
        .unwrap();
    assert_eq!(npr.spec.version, "2026.11.1", "held on its version");
}

/// The managed fleet: the canary (a self-managed pool) is past main's version, main's
/// clusters hold one pool of each managed owner, all on main's pin.
fn managed_fleet_yaml() -> String {
    r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: acme}
spec:
  images:
    general:
      versions:
        "2026.11.1":
          aws: ami-0a1b2c3d4e5f60718
          gke: {nodeVersion: "1.31.4-gke.1256000", imageType: COS_CONTAINERD}
          aks: {nodeImageVersion: AKSUbuntu-2204gen2containerd-202610.27.0}
        "2026.11.2":
          aws: ami-0f9e8d7c6b5a40312
          gke: {nodeVersion: "1.31.5-gke.1023000", imageType: COS_CONTAINERD}
          aks: {nodeImageVersion: AKSUbuntu-2204gen2containerd-202611.02.0}
  waves:
    - name: canary
      clusters: [canary-1]
      images: {general: "2026.11.2"}
      soak: 30m
    - name: main
      clusters: [eks-main, gke-main, aks-main]
      images: {general: "2026.11.1"}
  rollout: {batch: 2, nodeReadyTimeout: 10m}
"#
    .into()
}

const EKS_MAIN: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: eks-main}
spec:
  cloud: {aws: {region: us-east-1}}
  pools:
    - name: system
      channel: general
      nodeSelector: {eks.amazonaws.com/nodegroup: system}
      group: {eksNodegroup: system}
    - name: memory
      channel: general
      nodeSelector: {eks.amazonaws.com/nodegroup: memory}
      group: {eksNodegroup: memory}
      rollout: {managedUpdate: blueGreen}
    - name: spot
      channel: general
      nodeSelector: {karpenter.sh/nodepool: spot}
      group: {karpenterNodePool: spot}
"#;

const GKE_MAIN: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: gke-main}
spec:
  cloud: {gcp: {project: acme, region: europe-west1}}
  pools:
    - name: general
      channel: general
      nodeSelector: {cloud.google.com/gke-nodepool: general}
      group: {gkeNodePool: general}
"#;

const AKS_MAIN: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: aks-main}
spec:
  cloud: {azure: {subscriptionId: 00000000-0000-0000-0000-000000000001, resourceGroup: rg-prod}}
  pools:
    - name: general
      channel: general
      nodeSelector: {kubernetes.azure.com/agentpool: general}
      group: {aksAgentPool: general}
"#;

/// Day one on managed pools: each owner's pool already on main's pin is adopted (read
/// through its owner, its nodes' image labels, Karpenter's NodeClaims), gets its
/// NodePoolRotation on the pin and reports success, though the canary will never complete
/// main's version. Without adoption they would wait for the canary forever.
#[tokio::test(start_paused = true)]
async fn managed_pools_on_their_pins_are_adopted_through_their_owners() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, repo) = origin_and_clone(tmp.path(), "fleet");
    let first = commit(
        &repo,
        &[
            ("fleet.yaml", &managed_fleet_yaml()),
            ("canary-1.yaml", &cluster_yaml("canary-1")),
            ("eks-main.yaml", EKS_MAIN),
            ("gke-main.yaml", GKE_MAIN),
            ("aks-main.yaml", AKS_MAIN),
        ],
        "managed pools as they run today",
    );
    let fleet = LocalFleet::start(LocalConfig::new(
        origin.clone(),
        tmp.path().join("state"),
        WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
    ))
    .await
    .unwrap();

    let pools = [
        ("eks-main", "system"),
        ("eks-main", "memory"),
        ("eks-main", "spot"),
        ("gke-main", "general"),
        ("aks-main", "general"),
    ];
    for (cluster, pool) in pools {
        let context = format!("rota/{cluster}/{pool}");
        let done = wait_for(&fleet, &origin, &first, &context, State::Success).await;
        assert!(
            done.ends_with("nodes on general@2026.11.1"),
            "{context}: {done}"
        );
        let npr = Api::<NodePoolRotation>::all(fleet.clients[cluster].clone())
            .get(pool)
            .await
            .unwrap();
        assert_eq!(npr.spec.version, "2026.11.1", "{context}");
        // Nothing was asked of the owner: no update.
        let m = npr.spec.group.managed().expect("a managed pool").clone();
        let cloud = &fleet.sim.cloud;
        let updates = match cluster {
            "gke-main" => cloud.gke_operations(&m),
            "aks-main" => cloud.aks_upgrades(&m),
            _ if pool == "spot" => vec![],
            _ => cloud.eks_updates(&m),
        };
        assert!(updates.is_empty(), "{context}: {updates:?}");
    }
    let store = GitNotesStore::new(&origin, None, None);
    store.scope_to(CLUSTERS.iter().map(|c| c.to_string()));
    let records = store.pool_records(&first).await.unwrap();
    for (cluster, pool) in pools {
        let r = records
            .iter()
            .find(|r| r.cluster == cluster && r.pool == pool)
            .unwrap_or_else(|| panic!("no record of {cluster}/{pool}: {records:?}"));
        let kinds: Vec<_> = r
            .completions
            .iter()
            .map(|c| (c.kind, c.version.as_str()))
            .collect();
        assert_eq!(kinds, [(CompletionKind::Adopted, "2026.11.1")], "{r:?}");
    }
}
