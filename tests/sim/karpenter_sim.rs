//! Karpenter pools end to end on the simulated fleet: the controller drives the simulated
//! Karpenter (`rota::sim::karpenter`) through its NodePool, EC2NodeClass and NodeClaims only,
//! through kube-rs against the in-process API server, on paused tokio time.
//!
//! After every pass: at most one batch of NodeClaims is being replaced, the pool never holds
//! more than its size plus one batch of instances, no PodDisruptionBudget is below what it
//! requires, and every Karpenter object (the simulated Karpenter's and the two fields rota
//! writes) is valid against Karpenter's published CRD schema (v1.14.1).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use rota::cloud::{GroupRef, Lifecycle, NodeGroups};
use rota::controller::{Controller, Outcome};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{
    BatchSize, Cloud, EffectivePolicy, GateCheck, OnGateFailure, ResolvedGate,
};
use rota::kube::crd::{NodePoolRotation, NodePoolRotationSpec};
use rota::kube::karpenter::{ec2_node_classes, node_claims, node_pools};
use rota::rotate::Phase;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::sim_fleet::{self, SimCluster as Sim, test_config};

const OLD: &str = "ami-0000000000000old1";
const NEW: &str = "ami-0000000000000new2";

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 6, pdb: {minAvailable: "50%"}, readyAfter: 10s}
  - {name: api, namespace: shop, replicas: 3, pdb: {maxUnavailable: 1}, readyAfter: 5s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

fn karpenter() -> GroupRef {
    GroupRef::Managed(rota::fleet::owner::ManagedGroup::KarpenterNodePool {
        region: "us-east-1".into(),
        eks_cluster: "sim-1".into(),
        node_pool: "general".into(),
    })
}

/// The cluster after two minutes: the workloads settled and the simulated Karpenter has
/// adopted the instances.
async fn sim(nodes: u32, seed: u64) -> Sim {
    sim_fleet::cluster(Cloud::Aws, seed)
        .pool("general", karpenter(), OLD, "karpenter.sh/nodepool", nodes)
        .workloads(WORKLOADS)
        .start()
        .await
}

fn policy(batch: u32) -> EffectivePolicy {
    EffectivePolicy {
        batch: BatchSize::Count(batch),
        batch_soak: GoDuration::from_secs(300),
        ..EffectivePolicy::default()
    }
}

async fn create_npr(s: &Sim, policy: EffectivePolicy, gates: Vec<ResolvedGate>) {
    let spec = NodePoolRotationSpec {
        owner_image: Some(rota::fleet::owner::OwnerImage::Ami { id: NEW.into() }),
        gates,
        ..sim_fleet::spec("general", karpenter(), "karpenter.sh/nodepool", NEW, policy)
    };
    s.create(&sim_fleet::npr(spec)).await;
}

async fn status(s: &Sim) -> rota::kube::crd::NodePoolRotationStatus {
    s.status("general").await
}

fn controller(s: &Sim) -> Controller {
    s.controller(test_config("0.1.0", "test-0.1.0"))
}

fn dynamic(s: &Sim, r: &kube::api::ApiResource) -> Api<DynamicObject> {
    Api::all_with(s.client.clone(), r)
}

async fn objects(s: &Sim, r: &kube::api::ApiResource) -> Vec<Value> {
    dynamic(s, r)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .collect()
}

fn has(v: &Value, pointer: &str) -> bool {
    v.pointer(pointer).is_some_and(|x| !x.is_null())
}

/// Karpenter's published schema of each kind (the storage version's `openAPIV3Schema`).
fn schemas() -> BTreeMap<String, jsonschema::Validator> {
    rota::sim::karpenter::crd_objects()
        .into_iter()
        .map(|crd| {
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
            let v = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft4)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{kind}'s schema: {e}"));
            (kind, v)
        })
        .collect()
}

/// What the pool holds now, checked against the invariants; returns the NodeClaims being
/// replaced (deleting, or with a replacement launched).
async fn check(
    s: &Sim,
    size: usize,
    batch: usize,
    schemas: &BTreeMap<String, jsonschema::Validator>,
) -> usize {
    let mut claims = objects(s, &node_claims()).await;
    for r in [node_pools(), ec2_node_classes()] {
        claims.extend(objects(s, &r).await);
    }
    for o in &claims {
        let kind = o["kind"].as_str().unwrap();
        let errors: Vec<String> = schemas[kind]
            .iter_errors(o)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{kind} {}: {errors:?}",
            o["metadata"]["name"]
        );
    }
    let replacing = claims
        .iter()
        .filter(|c| c["kind"] == "NodeClaim")
        .filter(|c| {
            has(c, "/metadata/deletionTimestamp")
                || has(c, "/metadata/annotations/sim.rota.dev~1replacement")
        })
        .count();
    assert!(
        replacing <= batch,
        "{replacing} NodeClaims replaced at once > batch {batch}"
    );
    let g = s.fleet.cloud.describe(&karpenter()).await.unwrap();
    let live = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .count();
    assert!(live <= size + batch, "{live} instances > {size} + {batch}");
    for pdb in Api::<PodDisruptionBudget>::all(s.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        let st = pdb.status.unwrap_or_default();
        assert!(
            st.current_healthy >= st.desired_healthy,
            "PDB {:?}: {} healthy < {}",
            pdb.metadata.name,
            st.current_healthy,
            st.desired_healthy
        );
    }
    replacing
}

/// Runs `c` until `until` holds for the status or `span` passes; checks after every pass.
async fn run(
    s: &Sim,
    c: &mut Controller,
    span: Duration,
    size: usize,
    batch: usize,
    until: impl Fn(&rota::kube::crd::NodePoolRotationStatus) -> bool,
) -> rota::kube::crd::NodePoolRotationStatus {
    let schemas = schemas();
    let end = Instant::now() + span;
    loop {
        c.step().await;
        check(s, size, batch, &schemas).await;
        let st = status(s).await;
        if until(&st) || Instant::now() >= end {
            return st;
        }
        c.wait(end.min(Instant::now() + Duration::from_secs(60)), true)
            .await;
    }
}

fn class_pin(class: &Value) -> Value {
    class["spec"]["amiSelectorTerms"].clone()
}

async fn node_pool(s: &Sim) -> Value {
    serde_json::to_value(dynamic(s, &node_pools()).get("general").await.unwrap()).unwrap()
}

async fn node_class(s: &Sim) -> Value {
    serde_json::to_value(
        dynamic(s, &ec2_node_classes())
            .get("general")
            .await
            .unwrap(),
    )
    .unwrap()
}

/// Adoption and a rotation to the end: the pool starts on OLD with a NodeClaim per node;
/// rota pins NEW, Karpenter replaces the nodes a batch at a time, and once done the
/// NodePool's budgets are the user's again and every NodeClaim and node is on NEW.
#[tokio::test(start_paused = true)]
async fn a_karpenter_pool_drifts_to_the_new_ami_a_batch_at_a_time() {
    let s = sim(5, 61).await;
    let before = objects(&s, &node_claims()).await;
    assert_eq!(before.len(), 5, "a NodeClaim per node");
    assert!(before.iter().all(|c| c["status"]["imageID"] == OLD));
    let pool_before = node_pool(&s).await;
    let class_before = node_class(&s).await;
    let user_budgets = pool_before["spec"]["disruption"]["budgets"].clone();
    create_npr(&s, policy(2), vec![]).await;
    let mut c = controller(&s);
    let st = run(&s, &mut c, Duration::from_secs(6 * 3600), 5, 2, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!((st.total, st.on_target), (5, 5), "{}", st.message);
    assert_eq!(class_pin(&node_class(&s).await), json!([{"id": NEW}]));
    // One more pass: the restore is seen and rota lets the budgets be.
    run(&s, &mut c, Duration::from_secs(120), 5, 2, |_| false).await;
    assert_eq!(
        node_pool(&s).await["spec"]["disruption"]["budgets"],
        user_budgets
    );
    // Nothing else of Karpenter's was written: the NodePool's spec as it was, the
    // NodeClass's but for its amiSelectorTerms.
    assert_eq!(node_pool(&s).await["spec"], pool_before["spec"]);
    let mut class = node_class(&s).await["spec"].clone();
    class["amiSelectorTerms"] = class_before["spec"]["amiSelectorTerms"].clone();
    assert_eq!(class, class_before["spec"]);
    let after = objects(&s, &node_claims()).await;
    assert_eq!(after.len(), 5);
    assert!(
        after.iter().all(|c| c["status"]["imageID"] == NEW),
        "{after:?}"
    );
    let cp = Api::<NodePoolRotation>::all(s.client.clone())
        .get("general")
        .await
        .unwrap();
    let cp = cp.status.unwrap().checkpoint.unwrap();
    assert_eq!(cp.batches_started, 3, "5 nodes in batches of 2");
    assert!(cp.drift.unwrap().restored);
}

/// A crash right after each checkpoint write, before its writes: a new controller resumes
/// from the checkpoint, and no batch is opened twice (the invariants hold throughout).
#[tokio::test(start_paused = true)]
async fn a_crash_mid_drift_resumes_without_pacing_twice() {
    let s = sim(4, 62).await;
    create_npr(&s, policy(2), vec![]).await;
    let mut crashes = 0;
    let mut c = controller(&s);
    let schemas = schemas();
    let end = Instant::now() + Duration::from_secs(6 * 3600);
    let mut batches = 0;
    while Instant::now() < end {
        if crashes < 4 {
            c.crash_after = Some(0);
        }
        let out = c.step().await;
        check(&s, 4, 2, &schemas).await;
        if out
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Crashed { .. }))
        {
            crashes += 1;
            c = controller(&s);
        }
        let st = status(&s).await;
        let n = st.checkpoint.as_ref().map_or(0, |c| c.batches_started);
        assert!(n >= batches && n <= batches + 1, "{batches} -> {n}");
        batches = n;
        if st.phase == Phase::Succeeded {
            break;
        }
        c.wait(end.min(Instant::now() + Duration::from_secs(60)), true)
            .await;
    }
    assert!(crashes >= 2, "{crashes} crashes");
    let st = status(&s).await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
    assert_eq!(batches, 2);
}

/// `paused: true` mid-drift closes the Drifted budget: Karpenter starts nothing new;
/// unpaused, the drift goes on to the end.
#[tokio::test(start_paused = true)]
async fn a_pause_closes_the_drift_and_a_resume_finishes_it() {
    let s = sim(4, 63).await;
    create_npr(&s, policy(1), vec![]).await;
    let mut c = controller(&s);
    run(&s, &mut c, Duration::from_secs(3600), 4, 1, |st| {
        st.checkpoint
            .as_ref()
            .is_some_and(|c| c.batches_started >= 1)
    })
    .await;
    let set_paused = |on: bool| {
        let api = Api::<NodePoolRotation>::all(s.client.clone());
        async move {
            api.patch(
                "general",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"policy": {"paused": on}}})),
            )
            .await
            .unwrap();
        }
    };
    set_paused(true).await;
    let st = run(&s, &mut c, Duration::from_secs(1800), 4, 1, |_| false).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    let budgets = node_pool(&s).await["spec"]["disruption"]["budgets"].clone();
    assert_eq!(budgets.as_array().unwrap().last().unwrap()["nodes"], "0");
    let claims = objects(&s, &node_claims()).await;
    let on_new = claims
        .iter()
        .filter(|c| c["status"]["imageID"] == NEW)
        .count();
    let st = run(&s, &mut c, Duration::from_secs(3600), 4, 1, |_| false).await;
    assert_eq!(st.phase, Phase::Paused);
    let later = objects(&s, &node_claims()).await;
    assert_eq!(
        later
            .iter()
            .filter(|c| c["status"]["imageID"] == NEW)
            .count(),
        on_new,
        "nothing drifted while paused"
    );
    set_paused(false).await;
    let st = run(&s, &mut c, Duration::from_secs(6 * 3600), 4, 1, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
}

/// A fleet stop (`rota stop`, put in the spec by the agent as here) mid-drift: rota's
/// Drifted budget goes to 0 nodes, Karpenter starts nothing new for an hour, the status
/// names the stop and its clear; lifted, the drift goes on to the end.
#[tokio::test(start_paused = true)]
async fn a_fleet_stop_closes_the_drift_and_its_clear_finishes_it() {
    let s = sim(4, 64).await;
    create_npr(&s, policy(1), vec![]).await;
    let mut c = controller(&s);
    run(&s, &mut c, Duration::from_secs(3600), 4, 1, |st| {
        st.checkpoint
            .as_ref()
            .is_some_and(|c| c.batches_started >= 1)
    })
    .await;
    let stop = json!({
        "id": "ab".repeat(20),
        "wave": "main",
        "reason": "INC-4711",
        "by": "oncall <oncall@example.com>",
        "at": "2026-01-01T00:00:00Z",
    });
    let set_stop = |stop: Value| {
        let api = Api::<NodePoolRotation>::all(s.client.clone());
        async move {
            api.patch(
                "general",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"policy": {"stop": stop}}})),
            )
            .await
            .unwrap();
        }
    };
    set_stop(stop).await;
    let st = run(&s, &mut c, Duration::from_secs(1800), 4, 1, |_| false).await;
    assert_eq!(st.phase, Phase::Paused, "{}", st.message);
    assert_eq!(st.stop.as_ref().map(|n| n.reason.as_str()), Some("Stopped"));
    assert!(
        st.message.contains("rota stop --clear --wave main"),
        "{}",
        st.message
    );
    let budgets = node_pool(&s).await["spec"]["disruption"]["budgets"].clone();
    assert_eq!(budgets.as_array().unwrap().last().unwrap()["nodes"], "0");
    let on_new = |claims: &[Value]| {
        claims
            .iter()
            .filter(|c| c["status"]["imageID"] == NEW)
            .count()
    };
    let held = on_new(&objects(&s, &node_claims()).await);
    run(&s, &mut c, Duration::from_secs(3600), 4, 1, |_| false).await;
    assert_eq!(
        on_new(&objects(&s, &node_claims()).await),
        held,
        "nothing drifted while stopped"
    );
    set_stop(Value::Null).await;
    let st = run(&s, &mut c, Duration::from_secs(6 * 3600), 4, 1, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
}

/// A pods gate fails after the first batch (a pod that cannot be scheduled): with
/// `onGateFailure: rollback` rota pins the old AMI back and Karpenter drifts the new nodes
/// back; the pool ends Failed (RolledBack) with every NodeClaim on the old AMI.
#[tokio::test(start_paused = true)]
async fn a_failed_gate_pins_the_old_ami_back_and_the_pool_drifts_back() {
    let s = sim(4, 64).await;
    let mut p = policy(2);
    p.on_gate_failure = OnGateFailure::Rollback;
    let gate = ResolvedGate {
        name: "canary-pending".into(),
        interval: GoDuration::from_secs(10),
        samples: 1,
        failure_limit: 0,
        check: GateCheck::Pods {
            namespaces: vec!["canary".into()],
            max_not_ready: None,
            max_pending: Some(0),
        },
    };
    create_npr(&s, p, vec![gate]).await;
    let mut c = controller(&s);
    run(&s, &mut c, Duration::from_secs(3 * 3600), 4, 2, |st| {
        st.phase == Phase::Soaking
    })
    .await;
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "canary"}})).unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(s.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stuck", "namespace": "canary"},
        "spec": {"nodeSelector": {"nowhere": "true"},
                 "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    Api::<Pod>::namespaced(s.client.clone(), "canary")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let st = run(&s, &mut c, Duration::from_secs(6 * 3600), 4, 2, |st| {
        st.phase == Phase::Failed
    })
    .await;
    assert_eq!(st.phase, Phase::Failed, "{}", st.message);
    assert_eq!(
        st.stop.as_ref().map(|n| n.reason.as_str()),
        Some("RolledBack")
    );
    assert_eq!(class_pin(&node_class(&s).await), json!([{"id": OLD}]));
    let claims = objects(&s, &node_claims()).await;
    assert_eq!(claims.len(), 4);
    assert!(
        claims.iter().all(|c| c["status"]["imageID"] == OLD),
        "{claims:?}"
    );
}

/// A pod marked `karpenter.sh/do-not-disrupt` keeps its node: Karpenter drifts every other
/// node and never that one; rota reports the drift under way, not done, until the pod goes.
#[tokio::test(start_paused = true)]
async fn a_do_not_disrupt_pod_holds_its_node_until_it_goes() {
    let s = sim(3, 65).await;
    let claims = objects(&s, &node_claims()).await;
    let held = claims[0]["status"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "long-job", "namespace": "shop",
                     "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        "spec": {"nodeName": held, "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    let pods = Api::<Pod>::namespaced(s.client.clone(), "shop");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    create_npr(&s, policy(1), vec![]).await;
    let mut c = controller(&s);
    let st = run(&s, &mut c, Duration::from_secs(4 * 3600), 3, 1, |_| false).await;
    assert_ne!(st.phase, Phase::Succeeded, "{}", st.message);
    let claims = objects(&s, &node_claims()).await;
    let on_old: Vec<_> = claims
        .iter()
        .filter(|c| c["status"]["imageID"] == OLD)
        .filter_map(|c| c["status"]["nodeName"].as_str())
        .collect();
    assert_eq!(
        on_old,
        [held.as_str()],
        "only the held node is left on the old AMI"
    );
    pods.delete("long-job", &Default::default()).await.unwrap();
    let st = run(&s, &mut c, Duration::from_secs(3 * 3600), 3, 1, |st| {
        st.phase == Phase::Succeeded
    })
    .await;
    assert_eq!(st.phase, Phase::Succeeded, "{}", st.message);
}
