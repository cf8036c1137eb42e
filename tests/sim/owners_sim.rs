//! `managedUpdate: service` on GKE node pools and AKS agent pools, end to end on the
//! simulated fleet: the controller drives each owner's own update through its `OwnerPools`
//! adapter (the simulated GKE's `nodePools.update`, AKS's node image upgrade), never a
//! self-managed call. Per owner: adoption of a pool already on its pin, a rotation to the
//! end, a failed gate with `onGateFailure: rollback`, a crash before the owner's call and a
//! controller lost mid-update, a stop (`paused`) and its resume. After every pass the
//! owner's surge stays within one batch above the pool's size and no second update of the
//! same image starts.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use rota::cloud::GroupRef;
use rota::cloud::managed::{OwnerPools, OwnerUpdate, UpdateStatus};
use rota::controller::{Controller, Outcome};
use rota::fleet::duration::GoDuration;
use rota::fleet::owner::{ManagedGroup, OwnerImage};
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy, OnGateFailure, ResolvedGate};
use rota::kube::crd::{NodePoolRotation, NodePoolRotationSpec};
use rota::rotate::Phase;
use tokio::time::Instant;

pub(super) use crate::support::sim_fleet::SimCluster as Sim;
use crate::support::sim_fleet::{self, CountedGroups, test_config};

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 6, pdb: {minAvailable: "50%"}, readyAfter: 10s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

/// One owner under test: its pool, its images and how the test reads its updates.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Gke,
    Aks,
}

impl Kind {
    pub(super) fn pool(self) -> ManagedGroup {
        match self {
            Kind::Gke => ManagedGroup::GkeNodePool {
                project: "acme".into(),
                location: "europe-west1".into(),
                gke_cluster: "sim-1".into(),
                node_pool: "general".into(),
            },
            Kind::Aks => ManagedGroup::AksAgentPool {
                subscription_id: "00000000-0000-0000-0000-000000000001".into(),
                resource_group: "rg-prod".into(),
                aks_cluster: "sim-1".into(),
                agent_pool: "general".into(),
            },
        }
    }

    pub(super) fn cloud(self) -> Cloud {
        match self {
            Kind::Gke => Cloud::Gcp,
            Kind::Aks => Cloud::Azure,
        }
    }

    /// (old, new) images in the owner's one-string form.
    pub(super) fn images(self) -> (&'static str, &'static str) {
        match self {
            Kind::Gke => (
                "1.31.4-gke.1183000/COS_CONTAINERD",
                "1.31.5-gke.1023000/COS_CONTAINERD",
            ),
            Kind::Aks => (
                "AKSUbuntu-2204gen2containerd-202610.01.0",
                "AKSUbuntu-2204gen2containerd-202611.02.0",
            ),
        }
    }

    pub(super) fn owner_image(self, image: &str) -> OwnerImage {
        match self {
            Kind::Gke => {
                let (v, t) = image.split_once('/').unwrap();
                OwnerImage::GkeNode {
                    node_version: Some(v.into()),
                    image_type: t.into(),
                }
            }
            Kind::Aks => OwnerImage::AksNodeImage {
                node_image_version: image.into(),
            },
        }
    }

    pub(super) fn adapter(self, s: &Sim) -> Arc<dyn OwnerPools> {
        match self {
            Kind::Gke => Arc::new(s.fleet.cloud.gke()),
            Kind::Aks => Arc::new(s.fleet.cloud.aks()),
        }
    }

    pub(super) fn updates(self, s: &Sim) -> Vec<OwnerUpdate> {
        match self {
            Kind::Gke => s.fleet.cloud.gke_operations(&self.pool()),
            Kind::Aks => s.fleet.cloud.aks_upgrades(&self.pool()),
        }
    }

    /// The label that names the pool on its nodes.
    pub(super) fn pool_label(self) -> &'static str {
        match self {
            Kind::Gke => "cloud.google.com/gke-nodepool",
            Kind::Aks => "kubernetes.azure.com/agentpool",
        }
    }
}

/// A cluster of `kind`'s cloud with one managed pool of `nodes` on `image`; AKS ships
/// `kind`'s new image as its newest node image.
pub(super) async fn sim(kind: Kind, nodes: u32, image: &str, seed: u64) -> Sim {
    let s = sim_fleet::cluster(kind.cloud(), seed)
        .pool(
            "general",
            GroupRef::Managed(kind.pool()),
            image,
            kind.pool_label(),
            nodes,
        )
        .workloads(WORKLOADS)
        .start()
        .await;
    s.fleet
        .cloud
        .set_aks_latest_node_image(Kind::Aks.images().1);
    s
}

pub(super) fn policy(batch: u32) -> EffectivePolicy {
    EffectivePolicy {
        batch: BatchSize::Count(batch),
        ..EffectivePolicy::default()
    }
}

pub(super) fn npr(kind: Kind, image: &str, policy: EffectivePolicy) -> NodePoolRotation {
    let group = GroupRef::Managed(kind.pool());
    sim_fleet::npr(NodePoolRotationSpec {
        owner_image: Some(kind.owner_image(image)),
        ..sim_fleet::spec("general", group, kind.pool_label(), image, policy)
    })
}

pub(super) async fn create(s: &Sim, n: &NodePoolRotation) {
    s.create(n).await;
}

pub(super) async fn status(s: &Sim) -> rota::kube::crd::NodePoolRotationStatus {
    s.status("general").await
}

/// A controller that drives `kind`'s owner and counts its self-managed cloud calls (which
/// must stay at zero: the pool's template is the owner's).
pub(super) fn controller(s: &Sim, kind: Kind) -> (Controller, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let groups = CountedGroups {
        inner: Arc::new(s.fleet.cloud.clone()),
        describes: calls.clone(),
        others: calls.clone(),
    };
    let cfg = test_config("0.1.0", "test-0.1.0");
    let c = Controller::new(s.client.clone(), Arc::new(groups), cfg).with_owners(kind.adapter(s));
    (c, calls)
}

/// Live instances of the managed pool (what the owner's surge may raise).
pub(super) async fn live(s: &Sim, kind: Kind) -> usize {
    sim_fleet::live(&s.describe(&GroupRef::Managed(kind.pool())).await)
}

/// Run `c` for `span` or until `until` holds of the status, checking after every pass that
/// the owner's surge stays within one batch above the pool's size and that no image is
/// updated to twice at once.
async fn run(
    s: &Sim,
    kind: Kind,
    c: &mut Controller,
    span: Duration,
    sizes: (usize, usize),
    until: impl Fn(&rota::kube::crd::NodePoolRotationStatus) -> bool,
) -> Vec<(String, Outcome)> {
    run_every(s, kind, c, span, sizes, Duration::from_secs(300), until).await
}

/// [`run`] with passes at least every `poll` (a test that must catch the owner mid-update).
async fn run_every(
    s: &Sim,
    kind: Kind,
    c: &mut Controller,
    span: Duration,
    (size, batch): (usize, usize),
    poll: Duration,
    until: impl Fn(&rota::kube::crd::NodePoolRotationStatus) -> bool,
) -> Vec<(String, Outcome)> {
    let end = Instant::now() + span;
    let mut outcomes = Vec::new();
    while Instant::now() < end {
        outcomes.extend(c.step().await);
        let n = live(s, kind).await;
        assert!(n <= size + batch, "{n} live > {size} + {batch}");
        let running = kind
            .updates(s)
            .iter()
            .filter(|u| u.status == UpdateStatus::InProgress)
            .count();
        assert!(running <= 1, "{running} updates at once");
        if until(&status(s).await) {
            break;
        }
        c.wait(end.min(Instant::now() + poll), true).await;
    }
    outcomes
}

pub(super) fn done(st: &rota::kube::crd::NodePoolRotationStatus) -> bool {
    matches!(st.phase, Phase::Succeeded | Phase::Failed)
}

/// Every node of the pool, with its image as its owner shows it: AKS's node image label,
/// GKE's kubelet version and image type labels.
pub(super) async fn node_images(s: &Sim, kind: Kind) -> Vec<(String, String)> {
    let nodes = Api::<Node>::all(s.client.clone())
        .list(&ListParams::default().labels(&format!("{}=general", kind.pool_label())))
        .await
        .unwrap();
    nodes
        .items
        .iter()
        .map(|n| {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let kubelet = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.kubelet_version.clone())
                .unwrap_or_default();
            let image = match kind {
                Kind::Gke => {
                    assert_eq!(labels["cloud.google.com/gke-os-distribution"], "cos");
                    assert_eq!(
                        labels["cloud.google.com/gke-container-runtime"],
                        "containerd"
                    );
                    format!("{}/COS_CONTAINERD", kubelet.trim_start_matches('v'))
                }
                Kind::Aks => {
                    assert_eq!(kubelet, "v1.31.5", "a node image upgrade keeps the kubelet");
                    labels["kubernetes.azure.com/node-image-version"].clone()
                }
            };
            (n.metadata.name.clone().unwrap_or_default(), image)
        })
        .collect()
}

async fn all_on(s: &Sim, kind: Kind, image: &str) {
    let nodes = node_images(s, kind).await;
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    assert!(nodes.iter().all(|(_, i)| i == image), "{nodes:?}");
}

// --- the scenarios, each run for both owners --------------------------------------------

/// Rotation to the end: one update by the owner (batch as its max surge), progress counted
/// from the nodes' labels, Succeeded once every node runs the new image; no self-managed call.
async fn rotates_to_the_end(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    create(&s, &npr(kind, new, policy(2))).await;
    let (mut c, calls) = controller(&s, kind);
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3 * 3600),
        (4, 2),
        done,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!((st.total, st.on_target), (4, 4), "{}", st.message);
    let updates = kind.updates(&s);
    assert_eq!(updates.len(), 1, "one update: {updates:?}");
    assert_eq!(
        (updates[0].image.as_str(), updates[0].status),
        (new, UpdateStatus::Successful)
    );
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "no self-managed call"
    );
    all_on(&s, kind, new).await;
    let state = kind.adapter(&s).describe(&kind.pool()).await.unwrap();
    assert_eq!(
        state.max_unavailable,
        Some(rota::cloud::managed::MaxUnavailable::Count(2)),
        "the batch became the owner's max surge"
    );
    // What rota sent, in the owner's own request.
    let sent: Vec<_> = s
        .fleet
        .cloud
        .owner_exchanges()
        .into_iter()
        .filter(|x| x.method == "PUT")
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let body = sent[0].request.as_ref().unwrap();
    match kind {
        Kind::Gke => {
            assert_eq!(body["upgradeSettings"]["maxSurge"], 2);
            assert_eq!(body["upgradeSettings"]["maxUnavailable"], 0);
            assert_eq!(body["nodeVersion"], "1.31.5-gke.1023000");
        }
        Kind::Aks => {
            let u = &body["properties"]["upgradeSettings"];
            assert_eq!(u["maxSurge"], "2");
            assert_eq!(
                u["drainTimeoutInMinutes"], 30,
                "drain.timeout, 30m by default"
            );
        }
    }
}

/// `strategy: replace` on the owner's own update: GKE's and AKS's `maxSurge` 0 with
/// `maxUnavailable` the batch. The pool never holds a node more than its size (checked after
/// every pass, at least every 10 s), dips by one batch, and ends on the new image.
async fn replaces_without_a_surge(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    let mut p = policy(2);
    p.strategy = rota::fleet::resolved::RolloutStrategy::Replace;
    create(&s, &npr(kind, new, p)).await;
    let (mut c, calls) = controller(&s, kind);
    let poll = Duration::from_secs(10);
    run_every(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3 * 3600),
        (4, 0),
        poll,
        done,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!(kind.updates(&s).len(), 1);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 0);
    all_on(&s, kind, new).await;
    let sent: Vec<_> = s
        .fleet
        .cloud
        .owner_exchanges()
        .into_iter()
        .filter(|x| x.method == "PUT")
        .collect();
    let body = sent[0].request.as_ref().unwrap();
    let settings = match kind {
        Kind::Gke => &body["upgradeSettings"],
        Kind::Aks => &body["properties"]["upgradeSettings"],
    };
    let (zero, two) = match kind {
        Kind::Gke => (serde_json::json!(0), serde_json::json!(2)),
        Kind::Aks => (serde_json::json!("0"), serde_json::json!("2")),
    };
    assert_eq!(
        (&settings["maxSurge"], &settings["maxUnavailable"]),
        (&zero, &two)
    );
}

#[tokio::test(start_paused = true)]
async fn a_gke_node_pool_under_strategy_replace_never_holds_more_than_its_size() {
    replaces_without_a_surge(Kind::Gke, 71).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_agent_pool_under_strategy_replace_never_holds_more_than_its_size() {
    replaces_without_a_surge(Kind::Aks, 72).await;
}

#[tokio::test(start_paused = true)]
async fn a_gke_node_pool_is_updated_by_gke_once_to_the_end() {
    rotates_to_the_end(Kind::Gke, 61).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_agent_pool_is_upgraded_by_aks_once_to_the_end() {
    rotates_to_the_end(Kind::Aks, 62).await;
}

/// Adoption: a pool whose nodes already run the pin is up to date; no update starts.
async fn adopts_a_pool_on_its_pin(kind: Kind, seed: u64) {
    let (_, new) = kind.images();
    let s = sim(kind, 4, new, seed).await;
    create(&s, &npr(kind, new, policy(2))).await;
    let (mut c, calls) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(1800), (4, 2), |_| {
        false
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert!(st.message.starts_with("up to date"), "{}", st.message);
    assert!(kind.updates(&s).is_empty());
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[tokio::test(start_paused = true)]
async fn a_gke_node_pool_on_its_pin_is_adopted_without_an_update() {
    adopts_a_pool_on_its_pin(Kind::Gke, 63).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_agent_pool_on_its_pin_is_adopted_without_an_upgrade() {
    adopts_a_pool_on_its_pin(Kind::Aks, 64).await;
}

/// An events gate that fails while a `CanaryFailed` event is recent.
pub(super) fn canary_gate() -> ResolvedGate {
    sim_fleet::canary_gate(1, 0, Duration::from_secs(3600))
}

pub(super) async fn canary_failed(s: &Sim, at: chrono::DateTime<chrono::Utc>) {
    s.canary_failed("canary-failed", at).await;
}

/// A gate failing while the owner updates, with `onGateFailure: rollback`: the owner's
/// update runs to its end, then rota starts one update back to the old image (GKE: a second
/// `nodePools.update`; AKS: the agent pool's rollback to a recently used node image); the
/// pool ends Failed (RolledBack) with every node on the old image, and starts nothing more.
async fn rolls_back_on_a_failed_gate(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    let mut p = policy(1);
    p.on_gate_failure = OnGateFailure::Rollback;
    // Gates hold through the pool soak too: the canary fails before the pool is done
    // whether the owner's update is still running or has just ended.
    p.pool_soak = GoDuration::from_secs(1800);
    let mut n = npr(kind, new, p);
    n.spec.gates = vec![canary_gate()];
    create(&s, &n).await;
    let (mut c, _) = controller(&s, kind);
    let clock = c.clock();
    // Wait until the owner's update is under way, then the canary fails.
    let poll = Duration::from_secs(5);
    run_every(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3600),
        (4, 1),
        poll,
        |st| st.phase == Phase::Rotating,
    )
    .await;
    assert_eq!(kind.updates(&s).len(), 1, "the owner's update started");
    canary_failed(&s, clock.now()).await;
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(6 * 3600),
        (4, 1),
        |st| st.phase == Phase::Failed,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Failed, "{}", st.message);
    assert!(st.message.contains("rolled back"), "{}", st.message);
    let updates = kind.updates(&s);
    assert_eq!(updates.len(), 2, "forward and back: {updates:?}");
    assert_eq!(updates[1].image, old);
    assert!(
        updates.iter().all(|u| u.status == UpdateStatus::Successful),
        "{updates:?}"
    );
    all_on(&s, kind, old).await;
    run(&s, kind, &mut c, Duration::from_secs(3600), (4, 1), |_| {
        false
    })
    .await;
    assert_eq!(kind.updates(&s).len(), 2, "nothing more starts");
}

#[tokio::test(start_paused = true)]
async fn a_failed_gate_rolls_a_gke_node_pool_back_with_a_second_update() {
    rolls_back_on_a_failed_gate(Kind::Gke, 65).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_gate_rolls_an_aks_agent_pool_back_to_its_recent_node_image() {
    rolls_back_on_a_failed_gate(Kind::Aks, 66).await;
}

/// A crash right after the checkpoint recorded the update, before the owner was called; then
/// the next controller lost mid-update: each restart follows the one update by its token.
async fn resumes_after_crashes(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    create(&s, &npr(kind, new, policy(1))).await;
    let (mut c, _) = controller(&s, kind);
    c.crash_after = Some(0);
    let mut crashed = false;
    for _ in 0..20 {
        let out = c.step().await;
        if out
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Crashed { .. }))
        {
            crashed = true;
            break;
        }
        c.wait(Instant::now() + Duration::from_secs(30), true).await;
    }
    assert!(crashed, "the pass that starts the update crashed");
    let cp = status(&s).await.checkpoint.expect("a checkpoint");
    let token = cp.owner_update.expect("recorded before the call").token;
    assert!(kind.updates(&s).is_empty(), "the call was not made");
    drop(c);
    // The next controller sends it; it is lost once the owner has moved some nodes.
    let (mut c, _) = controller(&s, kind);
    let end = Instant::now() + Duration::from_secs(3600);
    while Instant::now() < end {
        c.step().await;
        let moved = node_images(&s, kind)
            .await
            .iter()
            .filter(|(_, i)| i == new)
            .count();
        if (1..4).contains(&moved) {
            break;
        }
        c.wait(Instant::now() + Duration::from_secs(5), true).await;
    }
    assert_eq!(kind.updates(&s).len(), 1);
    assert_eq!(
        kind.updates(&s)[0].status,
        UpdateStatus::InProgress,
        "mid-update"
    );
    drop(c);
    let (mut c, _) = controller(&s, kind);
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3 * 3600),
        (4, 1),
        done,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    let updates = kind.updates(&s);
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0].token, Some(token));
    all_on(&s, kind, new).await;
}

#[tokio::test(start_paused = true)]
async fn a_gke_update_resumes_after_crashes_without_a_second_update() {
    resumes_after_crashes(Kind::Gke, 67).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_upgrade_resumes_after_crashes_without_a_second_upgrade() {
    resumes_after_crashes(Kind::Aks, 68).await;
}

/// `paused: true` holds the pool before the owner's update (nothing starts for hours);
/// resumed, the one update runs to the end.
async fn stops_and_resumes(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    let mut p = policy(2);
    p.paused = true;
    let n = npr(kind, new, p);
    create(&s, &n).await;
    let (mut c, _) = controller(&s, kind);
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(2 * 3600),
        (4, 2),
        |_| false,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert!(kind.updates(&s).is_empty(), "no update while paused");
    all_on(&s, kind, old).await;
    let api = Api::<NodePoolRotation>::all(s.client.clone());
    let mut cur = api.get("general").await.unwrap();
    cur.spec.policy.paused = false;
    api.replace("general", &PostParams::default(), &cur)
        .await
        .unwrap();
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3 * 3600),
        (4, 2),
        done,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!(kind.updates(&s).len(), 1);
    all_on(&s, kind, new).await;
}

#[tokio::test(start_paused = true)]
async fn a_paused_gke_node_pool_waits_and_resumes() {
    stops_and_resumes(Kind::Gke, 69).await;
}

#[tokio::test(start_paused = true)]
async fn a_paused_aks_agent_pool_waits_and_resumes() {
    stops_and_resumes(Kind::Aks, 70).await;
}

/// AKS upgrades only to its newest node image (or back to a recent one): a pin to any
/// other is refused by name before any call that would move the pool, and nothing is
/// upgraded.
#[tokio::test(start_paused = true)]
async fn an_aks_pin_that_is_not_the_newest_node_image_is_refused_by_name() {
    let kind = Kind::Aks;
    let (old, _) = kind.images();
    let s = sim(kind, 4, old, 71).await;
    let pin = "AKSUbuntu-2204gen2containerd-202609.01.0";
    create(&s, &npr(kind, pin, policy(1))).await;
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(1800), (4, 1), |_| {
        false
    })
    .await;
    let st = status(&s).await;
    assert!(
        st.message
            .contains("only to its newest (AKSUbuntu-2204gen2containerd-202611.02.0)"),
        "{:?}: {}",
        st.phase,
        st.message
    );
    // Paused with a reason of its own, the refusal asked once: sent again it would be
    // refused again (each attempt reads the upgrade profile first).
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("OwnerRefused")
    );
    let attempts = s
        .fleet
        .cloud
        .owner_exchanges()
        .iter()
        .filter(|x| x.path.contains("/upgradeProfiles/default"))
        .count();
    assert_eq!(attempts, 1, "refused once, not sent again");
    assert!(kind.updates(&s).is_empty());
    all_on(&s, kind, old).await;
    // A restarted controller does not send it again either: the halt is in the checkpoint.
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(1800), (4, 1), |_| {
        false
    })
    .await;
    let again = s
        .fleet
        .cloud
        .owner_exchanges()
        .iter()
        .filter(|x| x.path.contains("/upgradeProfiles/default"))
        .count();
    assert_eq!(again, 1);
    assert_eq!(status(&s).await.phase, Phase::Paused);
}

/// A GKE pin GKE refuses (a custom image, which the simulated GKE does not take): the pool
/// pauses with `OwnerRefused`, naming the image, and no operation starts.
#[tokio::test(start_paused = true)]
async fn a_gke_image_gke_refuses_pauses_the_pool() {
    let kind = Kind::Gke;
    let (old, _) = kind.images();
    let s = sim(kind, 4, old, 77).await;
    let mut n = npr(kind, old, policy(1));
    n.spec.owner_image = Some(OwnerImage::GkeCustom {
        image: "projects/acme/global/images/node-7".into(),
        node_version: None,
    });
    create(&s, &n).await;
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(1800), (4, 1), |_| {
        false
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("OwnerRefused")
    );
    assert!(
        st.message.contains("projects/acme/global/images/node-7"),
        "{}",
        st.message
    );
    assert!(kind.updates(&s).is_empty());
}

/// A GKE node image that does not boot: GKE's operation ends DONE with an error, the pool
/// stops naming it and starts nothing more.
#[tokio::test(start_paused = true)]
async fn a_failed_gke_operation_pauses_the_pool_naming_its_error() {
    let kind = Kind::Gke;
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, 72).await;
    s.fleet.cloud.fail_owner_updates_to(new);
    create(&s, &npr(kind, new, policy(1))).await;
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(3600), (4, 1), |_| {
        false
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert!(st.message.contains("code 13"), "{}", st.message);
    assert_eq!(kind.updates(&s).len(), 1);
}

/// Gates are sampled while the owner's update runs, not only before it and in the pool
/// soak: a gate failing mid-update with `onGateFailure: pause` stops the pool while the
/// owner's update is still in progress, naming the gate; the update runs to its end (no
/// owner here can stop one between nodes) and nothing more starts.
async fn a_gate_failing_mid_update_is_seen_mid_update(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    let mut n = npr(kind, new, policy(1));
    n.spec.gates = vec![canary_gate()];
    create(&s, &n).await;
    let (mut c, _) = controller(&s, kind);
    let clock = c.clock();
    let poll = Duration::from_secs(5);
    run_every(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3600),
        (4, 1),
        poll,
        |st| st.phase == Phase::Rotating,
    )
    .await;
    assert_eq!(kind.updates(&s).len(), 1, "the owner's update started");
    canary_failed(&s, clock.now()).await;
    let end = Instant::now() + Duration::from_secs(2 * 3600);
    let mut seen = None;
    while Instant::now() < end {
        c.step().await;
        if status(&s).await.phase == Phase::Paused {
            seen = Some(kind.updates(&s)[0].status);
            break;
        }
        c.wait(Instant::now() + poll, true).await;
    }
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("GateFailed")
    );
    assert!(st.message.contains("gate canary failed"), "{}", st.message);
    assert_eq!(
        seen,
        Some(UpdateStatus::InProgress),
        "seen while the update ran"
    );
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3 * 3600),
        (4, 1),
        |_| false,
    )
    .await;
    let updates = kind.updates(&s);
    assert_eq!(updates.len(), 1, "nothing more starts: {updates:?}");
    assert_eq!(status(&s).await.phase, Phase::Paused);
}

#[tokio::test(start_paused = true)]
async fn a_gate_failing_mid_update_stops_a_gke_node_pool_while_gke_updates_it() {
    a_gate_failing_mid_update_is_seen_mid_update(Kind::Gke, 73).await;
}

#[tokio::test(start_paused = true)]
async fn a_gate_failing_mid_update_stops_an_aks_agent_pool_while_aks_upgrades_it() {
    a_gate_failing_mid_update_is_seen_mid_update(Kind::Aks, 74).await;
}

/// A gate failing before the owner's update starts: no update starts, the pool stops
/// naming the gate (the pre-check a self-managed batch has).
async fn a_gate_failing_before_the_update_starts_none(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    let mut n = npr(kind, new, policy(1));
    n.spec.gates = vec![canary_gate()];
    let (mut c, _) = controller(&s, kind);
    canary_failed(&s, c.clock().now()).await;
    create(&s, &n).await;
    run(&s, kind, &mut c, Duration::from_secs(1800), (4, 1), |_| {
        false
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert!(st.message.contains("gate canary failed"), "{}", st.message);
    assert!(kind.updates(&s).is_empty(), "no update started");
    all_on(&s, kind, old).await;
}

#[tokio::test(start_paused = true)]
async fn a_gate_failing_before_a_gke_update_starts_none() {
    a_gate_failing_before_the_update_starts_none(Kind::Gke, 75).await;
}

#[tokio::test(start_paused = true)]
async fn a_gate_failing_before_an_aks_upgrade_starts_none() {
    a_gate_failing_before_the_update_starts_none(Kind::Aks, 76).await;
}

async fn set_stop(s: &Sim, stop: serde_json::Value) {
    use kube::api::{Patch, PatchParams};
    Api::<NodePoolRotation>::all(s.client.clone())
        .patch(
            "general",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"policy": {"stop": stop}}})),
        )
        .await
        .unwrap();
}

fn a_stop() -> serde_json::Value {
    serde_json::json!({
        "id": "ab".repeat(20),
        "cluster": "sim-1",
        "reason": "INC-4711",
        "by": "oncall <oncall@example.com>",
        "at": "2026-01-01T00:00:00Z",
    })
}

/// A fleet stop (`rota stop`, put in the spec as the agent puts it) holds a service pool:
/// before its update, none starts; stopped mid-update, the owner's update runs to its end
/// (the status says rota cannot stop it between nodes) and the pool is held there (no pool
/// soak's end, nothing more); the clear lets it finish.
async fn a_fleet_stop_holds_a_service_pool(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    let mut p = policy(1);
    p.pool_soak = GoDuration::from_secs(600);
    let mut n = npr(kind, new, p);
    n.spec.policy.stop = serde_json::from_value(a_stop()).unwrap();
    create(&s, &n).await;
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(1800), (4, 1), |_| {
        false
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(st.stop.as_ref().map(|n| n.reason.as_str()), Some("Stopped"));
    assert!(kind.updates(&s).is_empty(), "no update while stopped");
    set_stop(&s, serde_json::Value::Null).await;
    let poll = Duration::from_secs(5);
    run_every(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3600),
        (4, 1),
        poll,
        |st| st.phase == Phase::Rotating,
    )
    .await;
    set_stop(&s, a_stop()).await;
    run_every(
        &s,
        kind,
        &mut c,
        Duration::from_secs(600),
        (4, 1),
        poll,
        |st| st.phase == Phase::Paused,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert!(st.message.contains("runs to its end"), "{}", st.message);
    assert_eq!(kind.updates(&s)[0].status, UpdateStatus::InProgress);
    run(
        &s,
        kind,
        &mut c,
        Duration::from_secs(3 * 3600),
        (4, 1),
        |_| false,
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "held at the end: {}", st.message);
    assert_eq!(kind.updates(&s).len(), 1);
    assert_eq!(kind.updates(&s)[0].status, UpdateStatus::Successful);
    set_stop(&s, serde_json::Value::Null).await;
    run(&s, kind, &mut c, Duration::from_secs(3600), (4, 1), done).await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!(kind.updates(&s).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_fleet_stop_holds_a_gke_node_pool_and_its_clear_finishes_it() {
    a_fleet_stop_holds_a_service_pool(Kind::Gke, 78).await;
}

#[tokio::test(start_paused = true)]
async fn a_fleet_stop_holds_an_aks_agent_pool_and_its_clear_finishes_it() {
    a_fleet_stop_holds_a_service_pool(Kind::Aks, 79).await;
}
