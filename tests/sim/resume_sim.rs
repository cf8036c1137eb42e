//! Resume and recovery through the real write path: the rotation controller on the simulated
//! fleet, through kube-rs (the in-process API server), with the checkpoint read back from the
//! server after every pass, never kept as a Rust value between passes.
//!
//! Each test stops a rotation (a drain timeout, a gate rollback), changes the resource as a
//! human or the agent would (pause and unpause, a new version), and checks that what the
//! server holds lets the pool go on. A checkpoint field that became empty must be empty on
//! the server too: written as a merge patch, `halted`, `rejectedImage` and `rollbackReason`
//! used to survive and stop the pool again.

use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams};
use rota::cloud::{GroupRef, Lifecycle, NodeGroups};
use rota::controller::Controller;
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy, OnGateFailure, ResolvedGate};
use rota::kube::crd::{NodePoolRotationSpec, NodePoolRotationStatus};
use rota::rotate::Phase;
use tokio::time::Instant;

use crate::support::sim_fleet::{self, SimCluster as Sim, test_config};

const V1: &str = "ami-00000000000000v1";
const V2: &str = "ami-00000000000000v2";
const V3: &str = "ami-00000000000000v3";

/// A singleton behind a PDB that never allows a disruption: its node cannot be drained.
const BLOCKED: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 4, pdb: {minAvailable: "50%"}, readyAfter: 10s}
  - {name: license-server, namespace: legacy, replicas: 1, pdb: {minAvailable: 1}}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

const EASY: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}, readyAfter: 10s}
"#;

fn group() -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "general".into(),
    }
}

async fn sim(workloads: &str, seed: u64) -> Sim {
    sim_fleet::cluster(Cloud::Aws, seed)
        .pool("general", group(), V1, "rota.dev/pool", 4)
        .workloads(workloads)
        .start()
        .await
}

fn policy() -> EffectivePolicy {
    let mut p = EffectivePolicy {
        batch: BatchSize::Count(2),
        ..EffectivePolicy::default()
    };
    p.drain.delete_empty_dir_data = true;
    p.node_ready_timeout = GoDuration::from_secs(600);
    p.drain.timeout = GoDuration::from_secs(600);
    p
}

fn spec(version: &str, image: &str, policy: EffectivePolicy) -> NodePoolRotationSpec {
    NodePoolRotationSpec {
        version: version.into(),
        ..sim_fleet::spec("general", group(), "rota.dev/pool", image, policy)
    }
}

async fn create(s: &Sim, spec: NodePoolRotationSpec) {
    s.create(&sim_fleet::npr(spec)).await;
}

async fn set_spec(s: &Sim, spec: &NodePoolRotationSpec) {
    s.set_spec("general", spec).await;
}

async fn status(s: &Sim) -> NodePoolRotationStatus {
    s.status("general").await
}

fn controller(s: &Sim) -> Controller {
    s.controller(test_config("0.1.0", "test-resume"))
}

/// Pass after pass until the status on the server satisfies `done` (or `limit` of simulated
/// time). Returns the log of phases and messages.
async fn drive(
    s: &Sim,
    c: &mut Controller,
    limit: Duration,
    done: impl Fn(&NodePoolRotationStatus) -> bool,
) -> String {
    let end = Instant::now() + limit;
    let mut log = String::new();
    while Instant::now() < end {
        c.step().await;
        let st = status(s).await;
        let line = format!("{:?}: {}\n", st.phase, st.message);
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

/// Every instance live on `image`, the pool at its size, nothing cordoned.
async fn assert_rotated_to(s: &Sim, image: &str, log: &str) {
    let g = s.fleet.cloud.describe(&group()).await.unwrap();
    let live: Vec<_> = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .collect();
    assert_eq!(live.len(), 4, "{live:?}\n{log}");
    assert!(live.iter().all(|i| i.image == image), "{live:?}\n{log}");
    assert_eq!(g.template_image, image, "{log}");
}

#[tokio::test(start_paused = true)]
async fn a_pool_halted_by_a_drain_timeout_resumes_after_pause_and_unpause() {
    let s = sim(BLOCKED, 21).await;
    let mut p = policy();
    p.batch = BatchSize::Count(4);
    create(&s, spec("v2", V2, p.clone())).await;
    let mut c = controller(&s);
    let log = drive(&s, &mut c, Duration::from_secs(3600), |st| {
        st.phase == Phase::Paused
    })
    .await;
    let halted = status(&s).await;
    assert!(halted.message.contains("drain.timeout"), "{log}");
    assert!(
        halted.checkpoint.as_ref().unwrap().halted.is_some(),
        "{log}"
    );

    // The human frees the singleton's PDB, then pauses and unpauses the pool.
    Api::<PodDisruptionBudget>::namespaced(s.client.clone(), "legacy")
        .delete("license-server", &DeleteParams::default())
        .await
        .unwrap();
    p.paused = true;
    set_spec(&s, &spec("v2", V2, p.clone())).await;
    let log2 = drive(&s, &mut c, Duration::from_secs(600), |st| {
        st.message.contains("paused by policy")
    })
    .await;
    let paused = status(&s).await;
    assert_eq!(
        paused.checkpoint.as_ref().unwrap().halted,
        None,
        "pausing clears the halt on the server too\n{log2}"
    );
    p.paused = false;
    set_spec(&s, &spec("v2", V2, p)).await;
    let log3 = drive(&s, &mut c, Duration::from_secs(3 * 3600), |st| {
        matches!(st.phase, Phase::Succeeded | Phase::Failed) || st.message.contains("drain.timeout")
    })
    .await;
    let done = status(&s).await;
    assert_eq!(done.phase, Phase::Succeeded, "{log}{log2}{log3}");
    assert_rotated_to(&s, V2, &log3).await;
}

/// An events gate that fails while a `CanaryFailed` event is recent.
fn canary_gate() -> ResolvedGate {
    sim_fleet::canary_gate(2, 1, Duration::from_secs(300))
}

async fn canary_failed(s: &Sim, at: chrono::DateTime<chrono::Utc>, n: u32) {
    s.canary_failed(&format!("canary-failed-{n}"), at).await;
}

#[tokio::test(start_paused = true)]
async fn a_gate_rolls_v2_back_then_a_move_to_v3_succeeds() {
    let s = sim(EASY, 22).await;
    let mut p = policy();
    p.on_gate_failure = OnGateFailure::Rollback;
    let mut v2 = spec("v2", V2, p.clone());
    v2.gates = vec![canary_gate()];
    create(&s, v2).await;
    let mut c = controller(&s);
    let clock = c.clock();
    let log = drive(&s, &mut c, Duration::from_secs(3600), |st| {
        st.checkpoint
            .as_ref()
            .is_some_and(|cp| cp.stage.name() == "Gating" && !cp.rolling_back)
    })
    .await;
    // The canary fails while v2's first batch is gated.
    canary_failed(&s, clock.now(), 1).await;
    let log = log
        + &drive(&s, &mut c, Duration::from_secs(3 * 3600), |st| {
            matches!(st.phase, Phase::Failed | Phase::Succeeded)
        })
        .await;
    let failed = status(&s).await;
    assert_eq!(failed.phase, Phase::Failed, "{log}");
    assert!(failed.message.contains("rolled back"), "{log}");
    assert_rotated_to(&s, V1, &log).await;

    // The repo moves on to v3 once the canary's events are out of the window.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let mut v3 = spec("v3", V3, p);
    v3.gates = vec![canary_gate()];
    set_spec(&s, &v3).await;
    let log3 = drive(&s, &mut c, Duration::from_secs(3 * 3600), |st| {
        st.checkpoint
            .as_ref()
            .is_some_and(|cp| cp.target_image == V3)
            && matches!(st.phase, Phase::Failed | Phase::Succeeded)
    })
    .await;
    let done = status(&s).await;
    assert_eq!(done.phase, Phase::Succeeded, "{log}{log3}");
    let cp = done.checkpoint.unwrap();
    assert_eq!(cp.rejected_image, None, "{log3}");
    assert_eq!(cp.rollback_reason, None, "{log3}");
    assert!(!done.message.contains("rolled back"), "{}", done.message);
    assert_rotated_to(&s, V3, &log3).await;
}

#[tokio::test(start_paused = true)]
async fn a_pool_given_a_new_version_while_halted_does_not_halt_again() {
    let s = sim(BLOCKED, 23).await;
    let mut p = policy();
    p.batch = BatchSize::Count(4);
    create(&s, spec("v2", V2, p.clone())).await;
    let mut c = controller(&s);
    let log = drive(&s, &mut c, Duration::from_secs(3600), |st| {
        st.phase == Phase::Paused
    })
    .await;
    assert!(status(&s).await.message.contains("drain.timeout"), "{log}");

    // The singleton's owner fixes its PDB and the repo names v3.
    Api::<PodDisruptionBudget>::namespaced(s.client.clone(), "legacy")
        .delete("license-server", &DeleteParams::default())
        .await
        .unwrap();
    set_spec(&s, &spec("v3", V3, p)).await;
    let log3 = drive(&s, &mut c, Duration::from_secs(4 * 3600), |st| {
        st.checkpoint
            .as_ref()
            .is_some_and(|cp| cp.target_image == V3)
            && matches!(st.phase, Phase::Succeeded | Phase::Failed | Phase::Paused)
    })
    .await;
    let done = status(&s).await;
    assert_eq!(done.phase, Phase::Succeeded, "{log}{log3}");
    assert_rotated_to(&s, V3, &log3).await;
}
