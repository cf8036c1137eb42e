//! `managedUpdate: blueGreen` on GKE node pools and AKS agent pools, end to end on the
//! simulated fleet, through the blue-green planner EKS node groups use: a twin pool created
//! through the owner's API (GKE `nodePools.create`, an AKS agent pool's PUT), the nodes moved
//! in rota's batches (the twin resized, each drained old node deleted through the owner:
//! Compute's `deleteInstances` on the node pool's group, AKS `deleteMachines`), the old pool
//! held at zero through `poolSoak` and then deleted. Per owner: adoption of a pool already on
//! its pin, a move to the end, a gate failing in the pool soak with `onGateFailure:
//! rollback` (the old pool scaled back up, the twin emptied and deleted), a crash at every
//! acting pass (one twin), and a stop mid-move and its resume. After every pass both pools
//! together hold at most the pool's size plus one batch, and no self-managed call is made.

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use rota::cloud::{CloudErrorKind, GroupRef, Lifecycle, NodeGroups};
use rota::controller::{Controller, Outcome};
use rota::fleet::duration::GoDuration;
use rota::fleet::owner::ManagedUpdate;
use rota::fleet::resolved::{EffectivePolicy, OnGateFailure};
use rota::kube::crd::NodePoolRotation;
use rota::rotate::{BlueGreenStep, Phase};
use tokio::time::Instant;

use super::owners_sim::{
    Kind, Sim, canary_failed, canary_gate, controller, create, npr, policy, sim, status,
};

/// The twin `blueGreen` makes of `general` for version 2026.11.2 (the tests' version): GKE's
/// readable name, and on AKS a name AKS accepts (1 to 12 lowercase letters and digits).
fn twin(kind: Kind) -> &'static str {
    match kind {
        Kind::Gke => "general-rota-2026-11-2",
        Kind::Aks => "generaxupok6",
    }
}

#[test]
fn the_twins_named_here_are_the_planners() {
    for kind in [Kind::Gke, Kind::Aks] {
        let owner = kind.pool().owner();
        let planned = rota::cloud::managed::twin_name_for(owner, "general", "2026.11.2");
        assert_eq!(twin(kind), planned);
    }
}

fn pool(kind: Kind, name: &str) -> GroupRef {
    GroupRef::Managed(rota::cloud::managed::renamed(&kind.pool(), name))
}

fn blue_green(batch: u32) -> EffectivePolicy {
    let mut p = policy(batch);
    p.managed_update = Some(ManagedUpdate::BlueGreen);
    p.pool_soak = GoDuration::from_secs(600);
    p
}

/// Live instances of pool `name` of `kind`'s owner; `None` once the owner deleted it.
async fn pool_live(s: &Sim, kind: Kind, name: &str) -> Option<usize> {
    loop {
        match NodeGroups::describe(&s.fleet.cloud, &pool(kind, name)).await {
            Ok(g) => {
                let live = g.instances.iter();
                return Some(
                    live.filter(|i| i.lifecycle != Lifecycle::Terminating)
                        .count(),
                );
            }
            Err(e) if e.kind == CloudErrorKind::NotFound => return None,
            Err(e) if e.kind.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

/// One pass, then the surge bound over both pools; true if the pass crashed.
async fn pass(s: &Sim, kind: Kind, c: &mut Controller, batch: usize) -> bool {
    let out = c.step().await;
    let live = pool_live(s, kind, "general").await.unwrap_or(0)
        + pool_live(s, kind, twin(kind)).await.unwrap_or(0);
    assert!(live <= 4 + batch, "{live} live > 4 + {batch}");
    c.wait(Instant::now() + Duration::from_secs(60), true).await;
    out.iter()
        .any(|(_, o)| matches!(o, Outcome::Crashed { .. }))
}

/// Passes for `span` or until `until` holds of the status.
async fn run(
    s: &Sim,
    kind: Kind,
    c: &mut Controller,
    span: Duration,
    batch: usize,
    until: impl Fn(&rota::kube::crd::NodePoolRotationStatus) -> bool,
) {
    let end = Instant::now() + span;
    while Instant::now() < end {
        pass(s, kind, c, batch).await;
        if until(&status(s).await) {
            return;
        }
    }
}

/// Every node of the pool's owner: (its pool, its image as the owner shows it).
async fn nodes(s: &Sim, kind: Kind) -> Vec<(String, String)> {
    let list = Api::<Node>::all(s.client.clone())
        .list(&ListParams::default().labels(kind.pool_label()))
        .await
        .unwrap();
    list.items
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
                Kind::Gke => format!("{}/COS_CONTAINERD", kubelet.trim_start_matches('v')),
                Kind::Aks => labels["kubernetes.azure.com/node-image-version"].clone(),
            };
            (labels[kind.pool_label()].clone(), image)
        })
        .collect()
}

async fn setup(kind: Kind, image: &str, p: EffectivePolicy, seed: u64) -> (Sim, Controller) {
    let (old, _) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    create(&s, &npr(kind, image, p)).await;
    let (c, _) = controller(&s, kind);
    (s, c)
}

/// A move to the end: one twin, the nodes in it on the new image, the old pool deleted, no
/// self-managed call; each owner's calls in its own JSON.
async fn moves_to_its_twin(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let s = sim(kind, 4, old, seed).await;
    create(&s, &npr(kind, new, blue_green(2))).await;
    let (mut c, calls) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(4 * 3600), 2, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!((st.total, st.on_target), (4, 4), "{}", st.message);
    assert_eq!(s.fleet.cloud.twins_created(), vec![twin(kind)]);
    assert_eq!(
        pool_live(&s, kind, "general").await,
        None,
        "old pool deleted"
    );
    let on = nodes(&s, kind).await;
    assert_eq!(on.len(), 4, "{on:?}");
    assert!(
        on.iter().all(|(p, i)| p == twin(kind) && i == new),
        "{on:?}"
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0, "no self-managed call");
    assert!(kind.updates(&s).is_empty(), "no service update");
    let cp = st.checkpoint.unwrap();
    assert_eq!(cp.blue_green.unwrap().step, BlueGreenStep::Done);
    let sent: Vec<String> = s
        .fleet
        .cloud
        .owner_exchanges()
        .iter()
        .filter(|x| x.method != "GET")
        .map(|x| format!("{} {}", x.method, x.path))
        .collect();
    let has = |what: &str| sent.iter().any(|x| x.contains(what));
    match kind {
        Kind::Gke => {
            assert!(has(
                "POST v1/projects/acme/locations/europe-west1/clusters/sim-1/nodePools"
            ));
            assert!(
                has(&format!("nodePools/{}:setSize", twin(kind))),
                "{sent:?}"
            );
            assert!(has(
                "instanceGroupManagers/gke-sim-1-general-grp/deleteInstances"
            ));
            assert!(has(
                "DELETE v1/projects/acme/locations/europe-west1/clusters/sim-1/nodePools/general"
            ));
        }
        Kind::Aks => {
            assert!(has(&format!(
                "PUT /subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-prod/providers/Microsoft.ContainerService/managedClusters/sim-1/agentPools/{}?",
                twin(kind)
            )));
            assert!(has("agentPools/general/deleteMachines"), "{sent:?}");
            assert!(has("DELETE /subscriptions/"), "{sent:?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_gke_node_pool_moves_to_its_blue_green_twin_in_batches() {
    moves_to_its_twin(Kind::Gke, 81).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_agent_pool_moves_to_its_blue_green_twin_in_batches() {
    moves_to_its_twin(Kind::Aks, 82).await;
}

/// A pool already on its pin: up to date, no twin.
async fn adopts_on_its_pin(kind: Kind, seed: u64) {
    let (old, _) = kind.images();
    let (s, mut c) = setup(kind, old, blue_green(2), seed).await;
    run(&s, kind, &mut c, Duration::from_secs(1800), 2, |_| false).await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert!(st.message.starts_with("up to date"), "{}", st.message);
    assert!(s.fleet.cloud.twins_created().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_blue_green_gke_node_pool_on_its_pin_is_adopted_without_a_twin() {
    adopts_on_its_pin(Kind::Gke, 83).await;
}

#[tokio::test(start_paused = true)]
async fn a_blue_green_aks_agent_pool_on_its_pin_is_adopted_without_a_twin() {
    adopts_on_its_pin(Kind::Aks, 84).await;
}

/// A gate failing in the pool soak (every node in the twin, the old pool at zero) with
/// `onGateFailure: rollback`: the old pool is scaled back up, the twin drained and deleted;
/// the pool ends Failed (RolledBack) on the old image, in the old pool.
async fn rolls_back_by_scaling_up(kind: Kind, seed: u64) {
    let (old, new) = kind.images();
    let mut p = blue_green(2);
    p.on_gate_failure = OnGateFailure::Rollback;
    p.pool_soak = GoDuration::from_secs(3600);
    let s = sim(kind, 4, old, seed).await;
    let mut n = npr(kind, new, p);
    n.spec.gates = vec![canary_gate()];
    create(&s, &n).await;
    let (mut c, _) = controller(&s, kind);
    let clock = c.clock();
    run(&s, kind, &mut c, Duration::from_secs(4 * 3600), 2, |st| {
        st.phase == Phase::Soaking
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Soaking, "{}", st.message);
    assert_eq!(
        pool_live(&s, kind, "general").await,
        Some(0),
        "held at zero"
    );
    canary_failed(&s, clock.now()).await;
    run(&s, kind, &mut c, Duration::from_secs(6 * 3600), 2, |st| {
        matches!(st.phase, Phase::Failed | Phase::Succeeded)
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Failed, "{}", st.message);
    assert!(st.message.contains("rolled back"), "{}", st.message);
    assert_eq!(
        pool_live(&s, kind, twin(kind)).await,
        None,
        "the twin is deleted"
    );
    let on = nodes(&s, kind).await;
    assert_eq!(on.len(), 4, "{on:?}");
    assert!(on.iter().all(|(p, i)| p == "general" && i == old), "{on:?}");
    assert_eq!(s.fleet.cloud.twins_created(), vec![twin(kind)]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_gate_scales_a_gke_node_pool_back_up_and_deletes_the_twin() {
    rolls_back_by_scaling_up(Kind::Gke, 85).await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_gate_scales_an_aks_agent_pool_back_up_and_deletes_the_twin() {
    rolls_back_by_scaling_up(Kind::Aks, 86).await;
}

/// A crash after the checkpoint and before the pass's owner calls, on every pass that acts,
/// each time with a new controller: one twin, the move ends, the bound holds.
async fn survives_crashes(kind: Kind, seed: u64) {
    let (_, new) = kind.images();
    let (s, mut c) = setup(kind, new, blue_green(2), seed).await;
    let end = Instant::now() + Duration::from_secs(8 * 3600);
    let (mut crashes, mut crash_next) = (0, true);
    while Instant::now() < end {
        c.crash_after = crash_next.then_some(0);
        if pass(&s, kind, &mut c, 2).await {
            crashes += 1;
            c = controller(&s, kind).0;
            crash_next = false;
            continue;
        }
        crash_next = true;
        if status(&s).await.phase == Phase::Succeeded {
            break;
        }
    }
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert!(crashes >= 6, "crashed {crashes} times");
    assert_eq!(s.fleet.cloud.twins_created(), vec![twin(kind)]);
    assert_eq!(pool_live(&s, kind, "general").await, None);
}

#[tokio::test(start_paused = true)]
async fn a_gke_blue_green_move_crashing_at_every_acting_pass_creates_one_twin() {
    survives_crashes(Kind::Gke, 87).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_blue_green_move_crashing_at_every_acting_pass_creates_one_twin() {
    survives_crashes(Kind::Aks, 88).await;
}

async fn set_paused(s: &Sim, paused: bool) {
    let api = Api::<NodePoolRotation>::all(s.client.clone());
    let mut cur = api.get("general").await.unwrap();
    cur.spec.policy.paused = paused;
    api.replace("general", &PostParams::default(), &cur)
        .await
        .unwrap();
}

/// `paused` set mid-move (nodes in both pools): once what was started settles, no node is
/// added or removed for an hour; unpaused, the move ends with the one twin.
async fn stops_mid_move_and_resumes(kind: Kind, seed: u64) {
    let (_, new) = kind.images();
    let (s, mut c) = setup(kind, new, blue_green(1), seed).await;
    let end = Instant::now() + Duration::from_secs(4 * 3600);
    while Instant::now() < end {
        pass(&s, kind, &mut c, 1).await;
        let on = nodes(&s, kind).await;
        let in_twin = on.iter().filter(|(p, _)| p == twin(kind)).count();
        if in_twin >= 1 && in_twin < on.len() {
            break;
        }
    }
    set_paused(&s, true).await;
    run(&s, kind, &mut c, Duration::from_secs(1800), 1, |_| false).await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    let held = (
        pool_live(&s, kind, "general").await,
        pool_live(&s, kind, twin(kind)).await,
        nodes(&s, kind).await,
    );
    assert!(held.0 > Some(0) && held.1 > Some(0), "mid-move: {held:?}");
    run(&s, kind, &mut c, Duration::from_secs(3600), 1, |_| false).await;
    let after = (
        pool_live(&s, kind, "general").await,
        pool_live(&s, kind, twin(kind)).await,
        nodes(&s, kind).await,
    );
    assert_eq!(held, after, "nothing moves while paused");
    set_paused(&s, false).await;
    run(&s, kind, &mut c, Duration::from_secs(4 * 3600), 1, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!(s.fleet.cloud.twins_created(), vec![twin(kind)]);
    assert_eq!(pool_live(&s, kind, "general").await, None);
}

#[tokio::test(start_paused = true)]
async fn a_gke_blue_green_move_paused_mid_move_holds_and_resumes() {
    stops_mid_move_and_resumes(Kind::Gke, 89).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_blue_green_move_paused_mid_move_holds_and_resumes() {
    stops_mid_move_and_resumes(Kind::Aks, 90).await;
}

/// The pool's NodePoolRotation deleted and created again (its status, the checkpoint with
/// it, lost), as a restore from a backup would.
async fn lose_status(s: &Sim, kind: Kind, image: &str, p: EffectivePolicy) {
    let api = Api::<NodePoolRotation>::all(s.client.clone());
    api.delete("general", &Default::default()).await.unwrap();
    create(s, &npr(kind, image, p)).await;
    assert!(
        status(s).await.checkpoint.is_none(),
        "the checkpoint is gone"
    );
}

/// The status lost mid-move (nodes in both pools) and after the move: the agent finds
/// rota's twin by its label and resumes (one twin, the bound kept, the old pool deleted at
/// the end), then finds the finished move and reports the pool up to date in its twin.
async fn finds_its_twin_again(kind: Kind, seed: u64) {
    let (_, new) = kind.images();
    let (s, mut c) = setup(kind, new, blue_green(1), seed).await;
    let end = Instant::now() + Duration::from_secs(4 * 3600);
    while Instant::now() < end {
        pass(&s, kind, &mut c, 1).await;
        let on = nodes(&s, kind).await;
        let in_twin = on.iter().filter(|(p, _)| p == twin(kind)).count();
        if (2..on.len()).contains(&in_twin) {
            break;
        }
    }
    drop(c);
    lose_status(&s, kind, new, blue_green(1)).await;
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(4 * 3600), 1, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!(s.fleet.cloud.twins_created(), vec![twin(kind)], "one twin");
    assert_eq!(pool_live(&s, kind, "general").await, None);
    let on = nodes(&s, kind).await;
    assert!(
        on.iter().all(|(p, i)| p == twin(kind) && i == new),
        "{on:?}"
    );
    drop(c);
    lose_status(&s, kind, new, blue_green(1)).await;
    let (mut c, _) = controller(&s, kind);
    run(&s, kind, &mut c, Duration::from_secs(1800), 1, |_| false).await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert!(st.message.starts_with("up to date"), "{}", st.message);
    assert_eq!((st.total, st.on_target), (4, 4), "{}", st.message);
    assert_eq!(s.fleet.cloud.twins_created(), vec![twin(kind)]);
    let cp = st.checkpoint.expect("the finished move is recorded");
    assert_eq!(cp.blue_green.unwrap().twin_pool, twin(kind));
}

#[tokio::test(start_paused = true)]
async fn a_gke_twin_is_found_again_by_its_label_when_the_status_is_lost() {
    finds_its_twin_again(Kind::Gke, 91).await;
}

#[tokio::test(start_paused = true)]
async fn an_aks_twin_is_found_again_by_its_tag_when_the_status_is_lost() {
    finds_its_twin_again(Kind::Aks, 92).await;
}

/// AKS creates an agent pool only on its newest node image: a twin on another is refused,
/// and the pool pauses with `OwnerRefused` instead of asking again every pass.
#[tokio::test(start_paused = true)]
async fn an_aks_twin_on_an_image_aks_does_not_offer_pauses_the_pool() {
    let kind = Kind::Aks;
    let pin = "AKSUbuntu-2204gen2containerd-202609.01.0";
    let (s, mut c) = setup(kind, pin, blue_green(1), 93).await;
    run(&s, kind, &mut c, Duration::from_secs(1800), 1, |_| false).await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("OwnerRefused")
    );
    assert!(st.message.contains("newest node image"), "{}", st.message);
    assert!(s.fleet.cloud.twins_created().is_empty());
    let puts = s
        .fleet
        .cloud
        .owner_exchanges()
        .iter()
        .filter(|x| x.method == "PUT")
        .count();
    assert_eq!(puts, 0, "nothing created");
}

/// An owner's adapter whose twin requests are counted (refused ones too).
struct CountedTwins {
    inner: std::sync::Arc<dyn rota::cloud::managed::OwnerPools>,
    asks: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

#[async_trait::async_trait]
impl rota::cloud::managed::OwnerPools for CountedTwins {
    fn owner(&self) -> rota::fleet::owner::Owner {
        self.inner.owner()
    }
    fn capabilities(&self) -> rota::cloud::managed::OwnerCapabilities {
        self.inner.capabilities()
    }
    async fn describe(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
    ) -> Result<rota::cloud::managed::OwnerPoolState, rota::cloud::CloudError> {
        self.inner.describe(p).await
    }
    async fn start_update(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
        r: &rota::cloud::managed::UpdateRequest,
    ) -> Result<String, rota::cloud::CloudError> {
        self.inner.start_update(p, r).await
    }
    fn blue_green(&self) -> bool {
        self.inner.blue_green()
    }
    async fn create_twin(
        &self,
        r: &rota::cloud::managed::TwinRequest,
    ) -> Result<(), rota::cloud::CloudError> {
        self.asks.fetch_add(1, Ordering::Relaxed);
        self.inner.create_twin(r).await
    }
    async fn members(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
    ) -> Result<Option<rota::cloud::managed::OwnerPoolMembers>, rota::cloud::CloudError> {
        self.inner.members(p).await
    }
    async fn set_size(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), rota::cloud::CloudError> {
        self.inner.set_size(p, desired, max).await
    }
    async fn remove_node(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
        id: &str,
    ) -> Result<(), rota::cloud::CloudError> {
        self.inner.remove_node(p, id).await
    }
    async fn delete_pool(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
    ) -> Result<(), rota::cloud::CloudError> {
        self.inner.delete_pool(p).await
    }
    async fn twins_of(
        &self,
        p: &rota::fleet::owner::ManagedGroup,
    ) -> Result<Vec<rota::cloud::managed::OwnerPoolMembers>, rota::cloud::CloudError> {
        self.inner.twins_of(p).await
    }
}

/// A controller of `kind`'s pools whose twin requests are counted in `asks`.
fn counting_controller(
    s: &Sim,
    kind: Kind,
    asks: &std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Controller {
    let mut cfg = rota::controller::Config::new("0.1.0", "test-0.1.0");
    cfg.events = false;
    let owner = CountedTwins {
        inner: kind.adapter(s),
        asks: asks.clone(),
    };
    Controller::new(
        s.client.clone(),
        std::sync::Arc::new(s.fleet.cloud.clone()),
        cfg,
    )
    .with_owners(std::sync::Arc::new(owner))
}

/// The refusal of a twin is kept in the NodePoolRotation's status: a controller started
/// after it (a restart, another replica) reads it there and does not ask the owner again.
#[tokio::test(start_paused = true)]
async fn a_refused_twin_is_not_asked_for_again_after_a_restart() {
    let kind = Kind::Aks;
    let pin = "AKSUbuntu-2204gen2containerd-202609.01.0";
    let (s, _) = setup(kind, pin, blue_green(1), 94).await;
    let asks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut c = counting_controller(&s, kind, &asks);
    run(&s, kind, &mut c, Duration::from_secs(1800), 1, |st| {
        st.phase == Phase::Paused
    })
    .await;
    let st = status(&s).await;
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("OwnerRefused"),
        "{}",
        st.message
    );
    assert_eq!(asks.load(Ordering::Relaxed), 1, "asked once");
    let kept = st.refused.as_ref().expect("the refusal is in the status");
    assert!(kept.why.contains("newest node image"), "{kept:?}");
    drop(c);

    // Restarted: the new controller remembers nothing of its own.
    let mut c = counting_controller(&s, kind, &asks);
    run(&s, kind, &mut c, Duration::from_secs(1800), 1, |_| false).await;
    assert_eq!(
        asks.load(Ordering::Relaxed),
        1,
        "not asked again after the restart"
    );
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("OwnerRefused")
    );
    assert!(s.fleet.cloud.twins_created().is_empty());
}
