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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, ObjectReference, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use rota::cloud::{GroupRef, GroupState, Lifecycle, NodeGroups};
use rota::controller::{Config, Controller, Outcome};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{
    BatchSize, Cloud, EffectivePolicy, GateCheck, Mode, OnGateFailure, ResolvedGate,
    RolloutStrategy,
};
use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec, NodePoolRotationStatus};
use rota::rotate::Phase;
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::world::Fleet;
use tokio::time::Instant;

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

struct Sim {
    fleet: Fleet,
    client: kube::Client,
    group: GroupRef,
    old: &'static str,
    new: &'static str,
}

async fn sim(cloud: Cloud, seed: u64) -> Sim {
    let (group, old, new) = shape(cloud);
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "sim-1".into(),
            cloud,
            pools: vec![PoolScenario {
                name: "gpu".into(),
                group: group.clone(),
                image: old.into(),
                node_selector: BTreeMap::from([("rota.dev/pool".into(), "gpu".into())]),
                nodes: SIZE,
            }],
        }],
        workloads: WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
        faults: FaultProfile::from_yaml("{}", "faults").unwrap(),
        seed,
    };
    let fleet = Fleet::start(&scenario, 1.0).await.unwrap();
    let client = rota::kube::sim::client(fleet.store("sim-1").unwrap().clone());
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    Sim {
        fleet,
        client,
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
        owner_image: None,
        cluster: "sim-1".into(),
        pool: "gpu".into(),
        group: s.group.clone(),
        node_selector: BTreeMap::from([("rota.dev/pool".into(), "gpu".into())]),
        channel: "gpu".into(),
        version: version.into(),
        image: image.into(),
        arch: Default::default(),
        kubelet: None,
        released: None,
        max_age: None,
        policy,
        gates: vec![],
        source_commit: "c0ffee".into(),
        mode: Mode::Reconcile,
    }
}

/// The pool's resource created (the agent's first sight of the pool: adoption) or its spec
/// changed as the agent does.
async fn put(s: &Sim, spec: NodePoolRotationSpec) {
    let api = Api::<NodePoolRotation>::all(s.client.clone());
    if api.get_opt("gpu").await.unwrap().is_none() {
        let mut n = NodePoolRotation::new("gpu", spec);
        n.metadata = ObjectMeta {
            name: Some("gpu".into()),
            ..ObjectMeta::default()
        };
        api.create(&PostParams::default(), &n).await.unwrap();
        return;
    }
    api.patch(
        "gpu",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "spec": spec })),
    )
    .await
    .unwrap();
}

async fn status(s: &Sim) -> NodePoolRotationStatus {
    Api::<NodePoolRotation>::all(s.client.clone())
        .get("gpu")
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

fn controller(s: &Sim) -> Controller {
    let mut cfg = Config::new("0.1.0", "test-replace");
    cfg.events = false;
    Controller::new(s.client.clone(), Arc::new(s.fleet.cloud.clone()), cfg)
}

async fn describe(s: &Sim) -> GroupState {
    loop {
        match s.fleet.cloud.describe(&s.group).await {
            Ok(g) => return g,
            Err(e) if e.kind.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

/// The replace pool's invariants, now: the capacity never moved, never a live instance more
/// than the pool had, and nothing terminating under a workload pod that was not evicted.
async fn check(s: &Sim, log: &str) {
    let g = describe(s).await;
    let live = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .count() as u32;
    assert!(
        g.desired == SIZE && live <= SIZE,
        "a replace pool of {SIZE} holds {live} live instance(s), desired {}\n{log}",
        g.desired
    );
    let nodes = Api::<Node>::all(s.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let pods = Api::<Pod>::all(s.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    for i in g
        .instances
        .iter()
        .filter(|i| i.lifecycle == Lifecycle::Terminating)
    {
        let Some(node) = nodes.items.iter().find(|n| {
            n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&i.provider_id)
        }) else {
            continue;
        };
        let name = node.metadata.name.as_deref().unwrap();
        for p in &pods.items {
            let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name);
            let ds = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet");
            let gone = p.metadata.deletion_timestamp.is_some()
                || matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                );
            assert!(
                !on || ds || gone,
                "invariant 3: {} removed under pod {}\n{log}",
                i.id,
                p.metadata.name.as_deref().unwrap_or_default()
            );
        }
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
    ResolvedGate {
        name: "canary".into(),
        interval: GoDuration::from_secs(30),
        samples: 2,
        failure_limit: 1,
        check: GateCheck::Events {
            reasons: vec!["CanaryFailed".into()],
            max: 0,
            window: GoDuration::from_secs(300),
        },
    }
}

async fn canary_failed(s: &Sim, at: chrono::DateTime<chrono::Utc>) {
    let t = Time(k8s_openapi::jiff::Timestamp::from_second(at.timestamp()).unwrap());
    let ev = CoreEvent {
        metadata: ObjectMeta {
            name: Some("canary-failed".into()),
            namespace: Some("shop".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            kind: Some("Deployment".into()),
            name: Some("web".into()),
            namespace: Some("shop".into()),
            ..ObjectReference::default()
        },
        reason: Some("CanaryFailed".into()),
        message: Some("canary requests fail on the new nodes".into()),
        last_timestamp: Some(t.clone()),
        first_timestamp: Some(t),
        count: Some(1),
        type_: Some("Warning".into()),
        ..CoreEvent::default()
    };
    Api::<CoreEvent>::namespaced(s.client.clone(), "shop")
        .create(&PostParams::default(), &ev)
        .await
        .unwrap();
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
