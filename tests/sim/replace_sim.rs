//! `strategy: replace` end to end on the simulated fleet: the rotation controller through
//! kube-rs and the simulated clouds (an Auto Scaling group, a managed instance group, a
//! scale set), with paused tokio time.
//!
//! After every pass the replace pool's own invariant is checked on what the cloud holds: its
//! desired capacity never moves from the pool's size, and it never holds more live instances
//! than before the batch (so never more nodes); no instance is terminating while a workload
//! pod that was not evicted runs on its node (invariant 3). The pool is adopted (first seen
//! up to date: nothing written), then rotated; a gate failure rolls it back; a crash mid-batch
//! resumes without removing a second batch; a fleet stop holds a batch and its clear resumes
//! it; a window closing mid-batch lets the batch finish and defers the next.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use rota::cloud::{GroupRef, GroupState, Lifecycle};
use rota::controller::{Controller, Outcome};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{
    BatchSize, Cloud, EffectivePolicy, OnGateFailure, ResolvedGate, RolloutStrategy,
};
use rota::kube::crd::{NodePoolRotation, NodePoolRotationSpec, NodePoolRotationStatus};
use rota::rotate::Phase;
use tokio::time::Instant;

use crate::support::sim_fleet::{self, PodsNow, SimCluster, test_config};

const SIZE: u32 = 4;
const BATCH: u32 = 2;

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}, readyAfter: 10s}
  - {name: trainer, namespace: ml, replicas: 2, readyAfter: 5s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

/// The pool's group and its two images on `cloud`.
fn shape(cloud: Cloud) -> (GroupRef, &'static str, &'static str) {
    match cloud {
        Cloud::Aws => (
            GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "gpu".into(),
            },
            "ami-000000000000gpu1",
            "ami-000000000000gpu2",
        ),
        Cloud::Gcp => (
            GroupRef::Gcp {
                project: "acme".into(),
                instance_group_manager: "gpu".into(),
                zone: Some("us-central1-a".into()),
                region: None,
            },
            "projects/acme/global/images/gpu-1",
            "projects/acme/global/images/gpu-2",
        ),
        Cloud::Azure => (
            GroupRef::Azure {
                subscription_id: "s1".into(),
                resource_group: "prod".into(),
                scale_set: "gpu".into(),
            },
            "/subscriptions/s1/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/gpu/versions/1",
            "/subscriptions/s1/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/gpu/versions/2",
        ),
    }
}

/// The cluster, its replace pool's group and the pool's two images.
struct Sim {
    world: SimCluster,
    group: GroupRef,
    old: &'static str,
    new: &'static str,
}

impl std::ops::Deref for Sim {
    type Target = SimCluster;
    fn deref(&self) -> &SimCluster {
        &self.world
    }
}

async fn sim(cloud: Cloud, seed: u64) -> Sim {
    let (group, old, new) = shape(cloud);
    let SimCluster { fleet, client } = sim_fleet::cluster(cloud, seed)
        .pool("gpu", group.clone(), old, "rota.dev/pool", SIZE)
        .workloads(WORKLOADS)
        .start()
        .await;
    Sim {
        world: SimCluster { fleet, client },
        group,
        old,
        new,
    }
}

fn policy() -> EffectivePolicy {
    let mut p = EffectivePolicy {
        batch: BatchSize::Count(BATCH),
        strategy: RolloutStrategy::Replace,
        ..EffectivePolicy::default()
    };
    p.node_ready_timeout = GoDuration::from_secs(600);
    p.drain.timeout = GoDuration::from_secs(900);
    p
}

fn spec(s: &Sim, version: &str, image: &str, policy: EffectivePolicy) -> NodePoolRotationSpec {
    NodePoolRotationSpec {
        channel: "gpu".into(),
        version: version.into(),
        ..sim_fleet::spec("gpu", s.group.clone(), "rota.dev/pool", image, policy)
    }
}

/// The pool's resource created (the agent's first sight of the pool: adoption) or its spec
/// changed as the agent does.
async fn put(s: &Sim, spec: NodePoolRotationSpec) {
    if s.rotations().get_opt("gpu").await.unwrap().is_none() {
        s.create(&sim_fleet::npr(spec)).await;
    } else {
        s.set_spec("gpu", &spec).await;
    }
}

async fn status(s: &Sim) -> NodePoolRotationStatus {
    s.status("gpu").await
}

fn controller(s: &Sim) -> Controller {
    s.controller(test_config("0.1.0", "test-replace"))
}

async fn describe(s: &Sim) -> GroupState {
    s.describe(&s.group).await
}

/// The replace pool's invariants, now: the capacity never moved, never a live instance more
/// than the pool had, and nothing terminating under a workload pod that was not evicted.
async fn check(s: &Sim, log: &str) {
    let g = describe(s).await;
    let live = sim_fleet::live(&g) as u32;
    assert!(
        g.desired == SIZE && live <= SIZE,
        "a replace pool of {SIZE} holds {live} live instance(s), desired {}\n{log}",
        g.desired
    );
    let now = PodsNow::list(&s.client).await;
    if let Some(left) = now.undrained("gpu", &g).first() {
        panic!("invariant 3: {left}\n{log}");
    }
}

/// Pass after pass, the invariants after each, until `done` holds for the status on the
/// server (or `limit` of simulated time passed). `crash(pass)` arms a crash after that many
/// actions of the next plan that acts; the controller is then replaced by a new one that
/// knows only what the cluster holds.
async fn drive(
    s: &Sim,
    c: &mut Controller,
    limit: Duration,
    mut crash: impl FnMut(u32) -> Option<usize>,
    done: impl Fn(&NodePoolRotationStatus) -> bool,
) -> String {
    let end = Instant::now() + limit;
    let mut log = String::new();
    let mut pass = 0;
    while Instant::now() < end {
        pass += 1;
        if c.crash_after.is_none() {
            c.crash_after = crash(pass);
        }
        let out = c.step().await;
        check(s, &log).await;
        if out
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Crashed { .. }))
        {
            *c = controller(s);
            log.push_str("crash: controller replaced\n");
        }
        let st = status(s).await;
        let line = format!("{:?} {}: {}\n", st.phase, reason(&st), st.message);
        if !log.ends_with(&line) {
            log.push_str(&line);
        }
        if done(&st) {
            return log;
        }
        c.wait(Instant::now() + Duration::from_secs(60), true).await;
    }
    panic!("not settled within {limit:?}:\n{log}");
}

/// The status's reason (its first condition's).
fn reason(st: &NodePoolRotationStatus) -> &str {
    st.conditions.first().map_or("", |c| c.reason.as_str())
}

fn settled(st: &NodePoolRotationStatus) -> bool {
    matches!(st.phase, Phase::Succeeded | Phase::Failed | Phase::Paused)
        && st
            .checkpoint
            .as_ref()
            .is_some_and(|c| c.stage.name() == "Done")
}

/// Every live instance on `image`, the group at its size with its template on `image`,
/// nothing cordoned.
async fn assert_on(s: &Sim, image: &str, log: &str) {
    let g = describe(s).await;
    let live: Vec<_> = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .collect();
    assert_eq!(live.len() as u32, SIZE, "{live:?}\n{log}");
    assert!(live.iter().all(|i| i.image == image), "{live:?}\n{log}");
    assert_eq!((g.desired, g.max), (SIZE, SIZE), "{log}");
    assert_eq!(g.template_image, image, "{log}");
    let nodes = Api::<Node>::all(s.client.clone())
        .list(&ListParams::default().labels("rota.dev/pool=gpu"))
        .await
        .unwrap();
    for n in &nodes.items {
        let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        assert!(!cordoned, "{:?} left cordoned\n{log}", n.metadata.name);
    }
}

/// Adopted up to date (nothing written), then rotated drain-first on each self-managed
/// group kind of the simulated clouds.
#[tokio::test(start_paused = true)]
async fn a_replace_pool_is_adopted_then_rotated_with_no_node_more_than_before_on_each_cloud() {
    for (seed, cloud) in [(41, Cloud::Aws), (42, Cloud::Gcp), (43, Cloud::Azure)] {
        let s = sim(cloud, seed).await;
        let before = describe(&s).await;
        put(&s, spec(&s, "v1", s.old, policy())).await;
        let mut c = controller(&s);
        let log = drive(
            &s,
            &mut c,
            Duration::from_secs(600),
            |_| None,
            |st| st.phase == Phase::Succeeded,
        )
        .await;
        let adopted = status(&s).await;
        assert_eq!(reason(&adopted), "UpToDate", "{cloud:?}\n{log}");
        assert_eq!(
            describe(&s).await,
            before,
            "{cloud:?}: adoption wrote nothing"
        );

        put(&s, spec(&s, "v2", s.new, policy())).await;
        let log = drive(&s, &mut c, Duration::from_secs(4 * 3600), |_| None, settled).await;
        let st = status(&s).await;
        assert_eq!(st.phase, Phase::Succeeded, "{cloud:?}\n{log}");
        assert!(
            log.contains("the group brings up their replacements")
                && log.contains("waiting for replacement(s)"),
            "{cloud:?}: not removed first\n{log}"
        );
        let cp = st.checkpoint.unwrap();
        assert_eq!(cp.batches_started, SIZE / BATCH, "{cloud:?}\n{log}");
        assert_on(&s, s.new, &log).await;
    }
}

/// Crashes at every other pass that acts, after none and after one of its actions: every
/// checkpoint of both batches is crashed at. The rotation ends as without crashes, with two
/// batches: no second batch removed, nothing surged.
#[tokio::test(start_paused = true)]
async fn a_crash_mid_batch_resumes_without_removing_a_second_batch() {
    for prefix in [0usize, 1] {
        for offset in [0u32, 1] {
            let s = sim(Cloud::Aws, 50 + prefix as u64 * 2 + offset as u64).await;
            put(&s, spec(&s, "v2", s.new, policy())).await;
            let mut c = controller(&s);
            let mut n = 0u32;
            let log = drive(
                &s,
                &mut c,
                Duration::from_secs(6 * 3600),
                |_| {
                    n += 1;
                    (n % 2 == offset).then_some(prefix)
                },
                settled,
            )
            .await;
            assert!(log.matches("crash:").count() >= 4, "{log}");
            let st = status(&s).await;
            assert_eq!(st.phase, Phase::Succeeded, "{log}");
            assert_eq!(
                st.checkpoint.unwrap().batches_started,
                SIZE / BATCH,
                "{log}"
            );
            assert_on(&s, s.new, &log).await;
        }
    }
}

/// An events gate that fails while a `CanaryFailed` event is recent.
fn canary_gate() -> ResolvedGate {
    sim_fleet::canary_gate(2, 1, Duration::from_secs(300))
}

async fn canary_failed(s: &Sim, at: chrono::DateTime<chrono::Utc>) {
    s.canary_failed("canary-failed", at).await;
}

/// The gate fails while batch 1's replacements soak: the pool rolls back to the old image
/// the same way, drain-first, and ends Failed naming the gate; nothing is ever surged.
#[tokio::test(start_paused = true)]
async fn a_gate_failing_in_the_soak_rolls_the_pool_back_drain_first() {
    let s = sim(Cloud::Aws, 44).await;
    let mut p = policy();
    p.on_gate_failure = OnGateFailure::Rollback;
    p.batch_soak = GoDuration::from_secs(20 * 60);
    let mut v2 = spec(&s, "v2", s.new, p);
    v2.gates = vec![canary_gate()];
    put(&s, v2).await;
    let mut c = controller(&s);
    let clock = c.clock();
    let log = drive(
        &s,
        &mut c,
        Duration::from_secs(3600),
        |_| None,
        |st| {
            st.checkpoint
                .as_ref()
                .is_some_and(|cp| cp.stage.name() == "Soaking")
        },
    )
    .await;
    canary_failed(&s, clock.now()).await;
    let log = log
        + &drive(
            &s,
            &mut c,
            Duration::from_secs(4 * 3600),
            |_| None,
            |st| st.phase == Phase::Failed,
        )
        .await;
    let st = status(&s).await;
    assert!(
        st.message.contains("rolled back") && st.message.contains("health gate canary"),
        "{log}"
    );
    assert_on(&s, s.old, &log).await;
}

/// A fleet stop lands while batch 1 drains: nothing is removed or evicted while it holds;
/// its clear lets the batch finish and the rotation complete.
#[tokio::test(start_paused = true)]
async fn a_stop_holds_a_replace_batch_and_its_clear_resumes_it() {
    let s = sim(Cloud::Aws, 45).await;
    let mut p = policy();
    // Long enough a drain for the stop to land in it.
    p.drain.delay = GoDuration::from_secs(15 * 60);
    put(&s, spec(&s, "v2", s.new, p.clone())).await;
    let mut c = controller(&s);
    let log = drive(
        &s,
        &mut c,
        Duration::from_secs(3600),
        |_| None,
        |st| {
            st.checkpoint
                .as_ref()
                .is_some_and(|cp| cp.stage.name() == "Draining")
        },
    )
    .await;
    let mut stopped = p.clone();
    stopped.stop = Some(rota::fleet::stops::FleetStop {
        id: "0123456789abcdef0123456789abcdef01234567".into(),
        wave: None,
        cluster: None,
        reason: "INC-4711: GPU jobs failing".into(),
        by: "oncall@example.com".into(),
        at: c.clock().now(),
        trust: Default::default(),
    });
    put(&s, spec(&s, "v2", s.new, stopped)).await;
    let log = log
        + &drive(
            &s,
            &mut c,
            Duration::from_secs(600),
            |_| None,
            |st| reason(st) == "Stopped",
        )
        .await;
    let held = describe(&s).await;
    let stage = status(&s).await.checkpoint.unwrap().stage;
    assert_eq!(stage.name(), "Draining", "{log}");
    tokio::time::sleep(Duration::from_secs(40 * 60)).await;
    c.step().await;
    assert_eq!(
        describe(&s).await,
        held,
        "the group moved while stopped\n{log}"
    );
    assert_eq!(status(&s).await.checkpoint.unwrap().stage, stage);

    // Cleared as the agent clears it: the stop written as null (a merge patch would keep
    // an absent field).
    Api::<NodePoolRotation>::all(s.client.clone())
        .patch(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"policy": {"stop": null}}})),
        )
        .await
        .unwrap();
    let log = log + &drive(&s, &mut c, Duration::from_secs(4 * 3600), |_| None, settled).await;
    assert_eq!(status(&s).await.phase, Phase::Succeeded, "{log}");
    assert_on(&s, s.new, &log).await;
}

/// A window that closes while a replace batch runs lets the batch finish (its replacements
/// come up after the close); the next batch is deferred to the next opening.
#[tokio::test(start_paused = true)]
async fn a_window_closing_mid_batch_finishes_the_replace_batch_and_defers_the_next() {
    use chrono::{Duration as Span, DurationRound, Timelike};
    let s = sim(Cloud::Aws, 46).await;
    let now = rota::controller::clock::Clock::new(1.0)
        .now()
        .duration_trunc(Span::minutes(1))
        .unwrap();
    let hhmm = |t: chrono::DateTime<chrono::Utc>| format!("{:02}:{:02}", t.hour(), t.minute());
    let (opens, closes) = (now - Span::hours(1), now + Span::minutes(30));
    let mut p = policy();
    p.batch_soak = GoDuration::from_secs(40 * 60);
    p.windows = vec![rota::fleet::resolved::Window {
        days: vec![],
        start: hhmm(opens),
        end: hhmm(closes),
        time_zone: "UTC".into(),
    }];
    put(&s, spec(&s, "v2", s.new, p)).await;
    let mut c = controller(&s);
    let log = drive(
        &s,
        &mut c,
        Duration::from_secs(3 * 3600),
        |_| None,
        |st| st.message.contains("deferred until"),
    )
    .await;
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Waiting, "{log}");
    let next = (opens + Span::days(1)).to_rfc3339();
    assert!(
        st.message.contains(&format!(
            "2 node(s) left; deferred until {next}: outside every maintenance window"
        )),
        "{log}"
    );
    assert_eq!(st.checkpoint.unwrap().batches_started, 1, "{log}");
    assert_eq!(st.on_target, 2, "the first batch finished\n{log}");
    let log = log
        + &drive(
            &s,
            &mut c,
            Duration::from_secs(26 * 3600),
            |_| None,
            settled,
        )
        .await;
    assert_eq!(status(&s).await.phase, Phase::Succeeded, "{log}");
    assert_on(&s, s.new, &log).await;
}
