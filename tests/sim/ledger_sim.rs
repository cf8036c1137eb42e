//! The image ledger end to end on the simulated fleet: real agents (`LocalFleet`) record
//! their nodes' lives into `refs/rota/ledger/<cluster>` of the bare repo they follow, through
//! a rotation, an agent killed mid-rotation and restarted on a fresh mirror, and a revert
//! (rollback) to the old version. The ledger is then checked against the simulated cloud's
//! own record of which instance ran which image: every instance that came in service appears
//! exactly once, with its image, and the chain verifies.

use crate::support::git::{git, origin_and_clone};

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kube::api::Api;
use rota::agent::local::{LocalConfig, LocalFleet};
use rota::kube::crd::NodePoolRotation;
use rota::ledger::{Filter, Life};
use rota::report::{GitNotesStore, State};
use rota::sim::scenario::WorkloadProfile;

const V1: &str = "ami-0a1b2c3d4e5f60718";
const V2: &str = "ami-0f9e8d7c6b5a40312";

fn fleet_yaml(pin: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      maxAge: 30d
      versions:
        "2026.11.1": {{aws: {V1}, released: "2026-10-01T00:00:00Z"}}
        "2026.11.2": {{aws: {V2}, released: "2026-11-20T00:00:00Z"}}
  waves:
    - name: canary
      clusters: [canary-1]
      images: {{general: "{pin}"}}
  rollout: {{batch: 1, nodeReadyTimeout: 10m}}
"#
    )
}

const CLUSTER: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: canary-1}
spec:
  cloud: {aws: {region: us-east-1}}
  pools:
    - name: general
      channel: general
      nodeSelector: {rota.dev/pool: general}
      group: {autoScalingGroup: canary-1-general}
"#;

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}, readyAfter: 10s}
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

/// The state of `context` (`rota/<cluster>/<pool>`) on `commit`, from its cluster's notes.
async fn state_of(origin: &Path, commit: &str, context: &str) -> Option<State> {
    status_of(origin, commit, context).await.map(|(s, _)| s)
}

/// The state and description of `context` on `commit`.
async fn status_of(origin: &Path, commit: &str, context: &str) -> Option<(State, String)> {
    let store = GitNotesStore::new(origin, None, None);
    let cluster = context.split('/').nth(1).unwrap_or_default();
    store.scope_to([cluster.to_string()]);
    store
        .docs(commit)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|d| d.statuses)
        .find(|s| s.context == context)
        .map(|s| (s.state, s.description))
}

async fn wait_success(fleet: &LocalFleet, origin: &Path, commit: &str) {
    wait_context(fleet, origin, commit, "rota/canary-1/general").await;
}

/// Polls until `context` succeeds on `commit`; six fleet hours without it fail the test with
/// the last status the agent wrote.
async fn wait_context(fleet: &LocalFleet, origin: &Path, commit: &str, context: &str) {
    let start = tokio::time::Instant::now();
    while state_of(origin, commit, context).await != Some(State::Success) {
        if start.elapsed() >= Duration::from_secs(6 * 3600) {
            let last = status_of(origin, commit, context).await;
            panic!("{context} never succeeded on {commit}: {last:?}");
        }
        fleet.poke();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// How many times the cloud ran each (instance, image).
fn ran_per_instance(fleet: &LocalFleet) -> BTreeMap<(String, String), usize> {
    let mut ran: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in fleet.sim.cloud.ran() {
        *ran.entry((r.instance, r.image)).or_default() += 1;
    }
    ran
}

fn lives(origin: &Path) -> Vec<Life> {
    lives_of(origin, "canary-1")
}

/// The lives in `cluster`'s ledger.
fn lives_of(origin: &Path, cluster: &str) -> Vec<Life> {
    let repo = git2::Repository::open_bare(origin).unwrap();
    rota::ledger::read_lives(&repo, cluster, &Filter::default()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn every_instance_that_ran_has_exactly_one_life_through_a_crash_and_a_revert() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let tmp = tempfile::tempdir().unwrap();
    let (origin, repo) = origin_and_clone(tmp.path(), "fleet");
    let first = commit(
        &repo,
        &[
            ("fleet.yaml", &fleet_yaml("2026.11.1")),
            ("canary-1.yaml", CLUSTER),
        ],
        "fleet on 2026.11.1",
    );
    let mut fleet = LocalFleet::start(LocalConfig::new(
        origin.clone(),
        tmp.path().join("state"),
        WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
    ))
    .await
    .unwrap();
    wait_success(&fleet, &origin, &first).await;
    // Give the recorder a pass after the pool settled.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let adopted = lives(&origin);
    assert_eq!(adopted.len(), 4, "{adopted:#?}");
    // The simulated nodes register after the agent started, so the ledger saw them join
    // (a pool met with its nodes already there marks them `joinedBefore: adoption`: see
    // `rota_core::ledger` tests).
    assert!(
        adopted
            .iter()
            .all(|l| l.version.as_deref() == Some("general@2026.11.1") && l.left.is_none()),
        "{adopted:#?}"
    );

    let bump = commit(
        &repo,
        &[("fleet.yaml", &fleet_yaml("2026.11.2"))],
        "canary: 2026.11.2",
    );
    fleet.poke();
    // Mid-rotation: a node of the new image is in, old ones remain. Kill the agent there.
    let api: Api<NodePoolRotation> = Api::all(fleet.clients["canary-1"].clone());
    let start = tokio::time::Instant::now();
    loop {
        let n = api.get("general").await.unwrap();
        let st = n.status.unwrap_or_default();
        if n.spec.version == "2026.11.2" && st.on_target >= 1 && st.on_target < st.total {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3 * 3600),
            "no rotation under way"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    fleet
        .crash_and_restart("canary-1", &tmp.path().join("state-after-crash"))
        .await
        .unwrap();
    wait_success(&fleet, &origin, &bump).await;

    git(&repo, &["revert", "--no-edit", "HEAD"]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let revert = git(&repo, &["rev-parse", "HEAD"]);
    fleet.poke();
    wait_success(&fleet, &origin, &revert).await;
    tokio::time::sleep(Duration::from_secs(20)).await;

    // The sim's own record: every instance of the pool's group that came in service.
    let ran: BTreeMap<String, String> = fleet
        .sim
        .cloud
        .ran()
        .into_iter()
        .filter(|r| r.group == "canary-1-general")
        .map(|r| (r.instance, r.image))
        .collect();
    let all = lives(&origin);
    let mut per_instance: BTreeMap<&str, Vec<&Life>> = BTreeMap::new();
    for l in &all {
        per_instance.entry(l.instance.as_str()).or_default().push(l);
    }
    for (instance, image) in &ran {
        let mine = per_instance
            .get(instance.as_str())
            .cloned()
            .unwrap_or_default();
        assert_eq!(mine.len(), 1, "instance {instance} ({image}): {mine:#?}");
        assert_eq!(&mine[0].image, image, "{mine:#?}");
    }
    assert_eq!(
        all.len(),
        ran.len(),
        "a life of no instance that ran: {all:#?}"
    );
    // 4 adopted on 2026.11.1, 4 rotated in on 2026.11.2, 4 back on 2026.11.1.
    assert_eq!(ran.len(), 12, "{ran:?}");
    let open: Vec<&Life> = all.iter().filter(|l| l.left.is_none()).collect();
    assert_eq!(open.len(), 4);
    assert!(
        open.iter().all(|l| l.image == V1 && l.rotation.is_some()),
        "{open:#?}"
    );
    let on_v2: Vec<&Life> = all.iter().filter(|l| l.image == V2).collect();
    assert_eq!(on_v2.len(), 4);
    assert!(
        on_v2
            .iter()
            .all(|l| l.version.as_deref() == Some("general@2026.11.2"))
    );
    assert!(
        on_v2
            .iter()
            .all(|l| l.left_how == Some(rota::ledger::Left::Rotated)),
        "the revert drained them: {on_v2:#?}"
    );
    // The chain holds: one parent each, months appended to, no life twice.
    let bare = git2::Repository::open_bare(&origin).unwrap();
    let v = rota::ledger::verify::verify_chain(&bare, "canary-1", None).unwrap();
    assert!(v.faults.is_empty(), "{:?}", v.faults);
    assert_eq!(v.lives, 12);
    // rota's own leaves name the rotation that did them: the revert's rollback.
    assert!(
        on_v2
            .iter()
            .all(|l| l.left_rotation.as_deref() == Some("general:rollback to general@2026.11.1")),
        "{on_v2:#?}"
    );

    // A node lost behind rota's back (its instance terminated by someone else, the group
    // replacing it): `lost`, with no rotation; the replacement opens a life of its own.
    use rota::cloud::NodeGroups;
    let victim = open[0].clone();
    let group = rota::cloud::GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "canary-1-general".into(),
    };
    fleet
        .sim
        .cloud
        .terminate(&group, &victim.instance, false)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
    let after = lives(&origin);
    let gone: Vec<&Life> = after
        .iter()
        .filter(|l| l.instance == victim.instance)
        .collect();
    assert_eq!(gone.len(), 1, "{gone:#?}");
    assert_eq!(
        gone[0].left_how,
        Some(rota::ledger::Left::Lost),
        "{gone:#?}"
    );
    assert_eq!(gone[0].left_rotation, None, "{gone:#?}");
    assert_eq!(after.len(), 13, "the replacement's life: {after:#?}");
}

const MANAGED: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: canary-1}
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

/// Managed pools in the ledger: an EKS managed node group updated by EKS, one moved
/// blue-green to its twin, a Karpenter NodePool drifted, each from 2026.11.1 to 2026.11.2.
/// Every instance the simulated owners brought in service has exactly one life with its
/// image (read from the owners' node labels and Karpenter's NodeClaims: the self-managed
/// describe knows none of them), the twin's nodes included.
#[tokio::test(start_paused = true)]
async fn managed_pools_instances_each_have_one_life_with_their_image() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let tmp = tempfile::tempdir().unwrap();
    let (origin, repo) = origin_and_clone(tmp.path(), "fleet");
    let first = commit(
        &repo,
        &[
            ("fleet.yaml", &fleet_yaml("2026.11.1")),
            ("canary-1.yaml", MANAGED),
        ],
        "managed pools on 2026.11.1",
    );
    let fleet = LocalFleet::start(LocalConfig::new(
        origin.clone(),
        tmp.path().join("state"),
        WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
    ))
    .await
    .unwrap();
    let pools = ["system", "memory", "spot"];
    let wait_all = |commit: String| {
        let (fleet, origin) = (&fleet, &origin);
        async move {
            for pool in pools {
                wait_context(fleet, origin, &commit, &format!("rota/canary-1/{pool}")).await;
            }
        }
    };
    wait_all(first).await;
    let bump = commit(
        &repo,
        &[("fleet.yaml", &fleet_yaml("2026.11.2"))],
        "canary: 2026.11.2",
    );
    fleet.poke();
    wait_all(bump).await;
    tokio::time::sleep(Duration::from_secs(60)).await;

    let ran = ran_per_instance(&fleet);
    let all = lives(&origin);
    let mut recorded: BTreeMap<(String, String), usize> = BTreeMap::new();
    for l in &all {
        *recorded
            .entry((l.instance.clone(), l.image.clone()))
            .or_default() += 1;
    }
    assert_eq!(recorded, ran, "lives per instance and image: {all:#?}");
    for pool in pools {
        let on_v2: Vec<&Life> = all
            .iter()
            .filter(|l| l.pool == pool && l.image == V2 && l.left.is_none())
            .collect();
        assert_eq!(on_v2.len(), 4, "{pool}: {all:#?}");
        assert!(
            on_v2
                .iter()
                .all(|l| l.version.as_deref() == Some("general@2026.11.2")),
            "{on_v2:#?}"
        );
    }
    // The blue-green move's nodes ended in the twin, recorded under the pool.
    assert!(
        all.iter()
            .any(|l| l.pool == "memory" && l.node.contains("memory-rota-2026-11-2")),
        "{all:#?}"
    );
    // EKS's own update drained the nodes it replaced (its taint when the update started):
    // `drained`, by someone else than rota.
    let replaced: Vec<&Life> = all
        .iter()
        .filter(|l| l.pool == "system" && l.left.is_some())
        .collect();
    assert!(!replaced.is_empty(), "{all:#?}");
    assert!(
        replaced
            .iter()
            .all(|l| l.left_how == Some(rota::ledger::Left::Drained) && l.drained_by.is_none()),
        "{replaced:#?}"
    );
}

const AKS_V1: &str = "AKSUbuntu-2204gen2containerd-202610.01.0";
const AKS_V2: &str = "AKSUbuntu-2204gen2containerd-202611.02.0";

fn aks_fleet_yaml(pin: &str) -> String {
    format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      maxAge: 30d
      versions:
        "2026.11.1": {{aks: {{nodeImageVersion: {AKS_V1}}}, released: "2026-10-01T00:00:00Z"}}
        "2026.11.2": {{aks: {{nodeImageVersion: {AKS_V2}}}, released: "2026-11-20T00:00:00Z"}}
  waves:
    - name: canary
      clusters: [aks-1]
      images: {{general: "{pin}"}}
  rollout: {{batch: 1, nodeReadyTimeout: 10m}}
"#
    )
}

const AKS: &str = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: aks-1}
spec:
  cloud: {azure: {subscriptionId: 00000000-0000-0000-0000-000000000001, resourceGroup: rg-prod}}
  pools:
    - name: system
      channel: general
      nodeSelector: {kubernetes.azure.com/agentpool: system}
      group: {aksAgentPool: system}
"#;

/// An AKS agent pool updated by AKS's own node image upgrade: its nodes register with the
/// providerIDs AKS reports (the scale set `aks-system-<8 digits>-vmss`, the VM's ordinal),
/// every instance has one life with its image, read from them, and the nodes AKS replaced
/// left `drained` (AKS cordoned them before it drained them).
#[tokio::test(start_paused = true)]
async fn an_aks_agent_pools_instances_are_read_from_the_provider_ids_aks_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, repo) = origin_and_clone(tmp.path(), "fleet");
    let first = commit(
        &repo,
        &[
            ("fleet.yaml", &aks_fleet_yaml("2026.11.1")),
            ("aks-1.yaml", AKS),
        ],
        "an AKS agent pool on 2026.11.1",
    );
    let fleet = LocalFleet::start(LocalConfig::new(
        origin.clone(),
        tmp.path().join("state"),
        WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
    ))
    .await
    .unwrap();
    // AKS upgrades a node image only to the newest it ships.
    fleet.sim.cloud.set_aks_latest_node_image(AKS_V2);
    let wait = |commit: String| {
        let (fleet, origin) = (&fleet, &origin);
        async move { wait_context(fleet, origin, &commit, "rota/aks-1/system").await }
    };
    wait(first).await;
    let bump = commit(
        &repo,
        &[("fleet.yaml", &aks_fleet_yaml("2026.11.2"))],
        "canary: 2026.11.2",
    );
    fleet.poke();
    wait(bump).await;
    tokio::time::sleep(Duration::from_secs(60)).await;

    // The cloud knows a VM by its computer name, which is its node's name.
    let ran = ran_per_instance(&fleet);
    let all = lives_of(&origin, "aks-1");
    let mut recorded: BTreeMap<(String, String), usize> = BTreeMap::new();
    for l in &all {
        assert!(
            l.instance.parse::<u32>().is_ok() && l.node.starts_with("aks-system-"),
            "a VM ordinal on a scale set node: {l:#?}"
        );
        *recorded
            .entry((l.node.clone(), l.image.clone()))
            .or_default() += 1;
    }
    assert_eq!(recorded, ran, "lives per instance and image: {all:#?}");
    let replaced: Vec<&Life> = all.iter().filter(|l| l.left.is_some()).collect();
    assert!(!replaced.is_empty(), "{all:#?}");
    assert!(
        replaced
            .iter()
            .all(|l| l.image == AKS_V1 && l.left_how == Some(rota::ledger::Left::Drained)),
        "{replaced:#?}"
    );
}
