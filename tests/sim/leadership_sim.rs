//! One writer per cluster (invariant 7) on the simulated fleet, through kube-rs: two
//! controllers of one version elect a leader on the Lease; the leader killed mid-batch is
//! replaced without a second surge or a leaked instance; a writer whose lease ran out, or
//! whose term was replaced, writes nothing.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use rota::cloud::{GroupRef, Lifecycle, NodeGroups};
use rota::controller::Controller;
use rota::controller::apply::{self, ApplyError, Edge, Persist};
use rota::controller::leader::Elector;
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy};
use rota::kube::crd::NodePoolRotation;
use rota::rotate::aftermath::step_events::Digest;
use rota::rotate::status::{Reconciled, compose};
use rota::rotate::{Action, Phase, Plan, Planned, StatusSummary};
use tokio::time::Instant;

use crate::support::sim_fleet::{self, SimCluster as Sim, test_config};

const OLD: &str = "ami-0000000000000old1";
const NEW: &str = "ami-0000000000000new2";
const LEASE: &str = "rota-controller-0-1-0";

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 6, pdb: {minAvailable: "50%"}, readyAfter: 10s}
  - {name: api, namespace: shop, replicas: 3, pdb: {maxUnavailable: 1}, readyAfter: 5s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

fn group() -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "general".into(),
    }
}

async fn sim(seed: u64) -> Sim {
    sim_fleet::cluster(Cloud::Aws, seed)
        .pool("general", group(), OLD, "rota.dev/pool", 4)
        .workloads(WORKLOADS)
        .start()
        .await
}

async fn create_pool(s: &Sim, batch: u32) {
    let mut policy = EffectivePolicy {
        batch: BatchSize::Count(batch),
        ..EffectivePolicy::default()
    };
    policy.node_ready_timeout = GoDuration::from_secs(600);
    policy.drain.timeout = GoDuration::from_secs(900);
    let spec = sim_fleet::spec("general", group(), "rota.dev/pool", NEW, policy);
    s.create(&sim_fleet::npr(spec)).await;
}

async fn get(s: &Sim) -> NodePoolRotation {
    s.get("general").await
}

fn controller(s: &Sim, identity: &str) -> Controller {
    s.controller(test_config("0.1.0", identity))
}

async fn holder(s: &Sim) -> Option<(String, i32)> {
    let l = Api::<Lease>::namespaced(s.client.clone(), "kube-system")
        .get_opt(LEASE)
        .await
        .unwrap()?;
    let spec = l.spec?;
    Some((spec.holder_identity?, spec.lease_transitions.unwrap_or(0)))
}

async fn group_state(s: &Sim) -> rota::cloud::GroupState {
    loop {
        match s.fleet.cloud.describe(&group()).await {
            Ok(g) => return g,
            Err(e) if e.kind.is_retryable() => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Invariant 1, and the instances the cloud holds that are not terminating.
async fn live_within(s: &Sim, start: u32, batch: u32, log: &str) -> usize {
    let g = group_state(s).await;
    let live: Vec<_> = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .collect();
    assert!(
        live.len() as u32 <= start + batch && g.desired <= start + batch,
        "invariant 1: {} live, desired {}, above {start} + {batch}\n{log}",
        live.len(),
        g.desired
    );
    live.len()
}

fn spawn_run(mut c: Controller) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move { c.run(std::future::pending()).await })
}

#[tokio::test(start_paused = true)]
async fn the_leader_killed_mid_batch_is_replaced_without_a_second_surge_or_a_leak() {
    let s = sim(31).await;
    create_pool(&s, 1).await;
    let a = controller(&s, "a");
    let (la, sa) = (a.leadership(), a.stats.clone());
    let ta = spawn_run(a);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let b = controller(&s, "b");
    let (lb, sb) = (b.leadership(), b.stats.clone());
    let tb = spawn_run(b);

    // Wait until a leads and its first batch is past the surge, before any drain finished.
    let mut log = String::new();
    let end = Instant::now() + Duration::from_secs(1800);
    loop {
        assert!(Instant::now() < end, "never mid-batch\n{log}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        live_within(&s, 4, 1, &log).await;
        let st = get(&s).await.status.unwrap_or_default();
        let stage = st
            .checkpoint
            .as_ref()
            .map(|c| c.stage.name())
            .unwrap_or("-");
        let line = format!("{:?} {stage}: {}\n", st.phase, st.message);
        if !log.ends_with(&line) {
            log.push_str(&line);
        }
        if matches!(stage, "WaitingReady" | "Gating" | "Cordoning" | "Draining") {
            break;
        }
    }
    assert!(la.leading() && !lb.leading(), "{log}");
    assert_eq!(sb.reconciles.load(std::sync::atomic::Ordering::Relaxed), 0);
    let (who, term) = holder(&s).await.unwrap();
    assert_eq!(who, "a");
    let fence = get(&s).await.status.unwrap().fence.unwrap();
    assert_eq!((fence.holder.as_str(), fence.transitions), ("a", term));

    // Kill a: no release, no clean-up; its renewal task dies with it.
    ta.abort();
    let _ = ta.await;
    drop(la);
    log.push_str("--- a killed\n");
    let end = Instant::now() + Duration::from_secs(4 * 3600);
    loop {
        assert!(Instant::now() < end, "b never finished\n{log}");
        tokio::time::sleep(Duration::from_secs(5)).await;
        live_within(&s, 4, 1, &log).await;
        let st = get(&s).await.status.unwrap_or_default();
        let stage = st
            .checkpoint
            .as_ref()
            .map(|c| c.stage.name())
            .unwrap_or("-");
        let line = format!("{:?} {stage}: {}\n", st.phase, st.message);
        if !log.ends_with(&line) {
            log.push_str(&line);
        }
        if st.phase == Phase::Succeeded {
            break;
        }
    }
    assert!(lb.leading(), "{log}");
    assert!(sb.reconciles.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let (who, term_b) = holder(&s).await.unwrap();
    assert_eq!(who, "b");
    assert!(
        term_b > term,
        "a takeover is a new term: {term_b} after {term}"
    );
    let st = get(&s).await.status.unwrap();
    assert_eq!(st.fence.unwrap().holder, "b");
    // No leaked instance: exactly the pool's size, all on the new image, capacity back.
    let g = group_state(&s).await;
    let live: Vec<_> = g
        .instances
        .iter()
        .filter(|i| i.lifecycle != Lifecycle::Terminating)
        .collect();
    assert_eq!(live.len(), 4, "{live:?}\n{log}");
    assert!(live.iter().all(|i| i.image == NEW), "{live:?}\n{log}");
    assert_eq!(g.desired, 4, "{log}");
    tb.abort();
    let _ = sa;
}

fn set_capacity_plan(desired: u32) -> Plan {
    Plan {
        actions: vec![Planned {
            action: Action::SetCapacity { desired, max: None },
            reason: "test".into(),
        }],
        dry_run: vec![],
        checkpoint: None,
        status: StatusSummary {
            phase: Phase::Rotating,
            reason: "Test",
            message: "a write from a stale writer".into(),
            stop: None,
            total: 4,
            on_target: 0,
            ready: 4,
            remaining: None,
        },
    }
}

#[tokio::test(start_paused = true)]
async fn a_writer_whose_lease_ran_out_or_whose_term_was_replaced_writes_nothing() {
    let s = sim(32).await;
    create_pool(&s, 1).await;
    let cloud = s.fleet.cloud.clone();
    let before = group_state(&s).await;

    // a wins the Lease once and never renews (its renewal task is stuck, say).
    let mut ea = Elector::new(s.client.clone(), "kube-system", LEASE.into(), "a".into());
    assert!(ea.try_acquire(chrono::Utc::now()).await.unwrap());
    let la = ea.leadership();
    let read = get(&s).await;
    let edge = |lease| Edge {
        client: s.client.clone(),
        groups: &cloud,
        metrics: None,
        lease: Some(lease),
        owners: None,
        departures: None,
        drift: None,
    };
    let plan = set_capacity_plan(5);
    let status = compose(&Reconciled::new(
        &plan,
        None,
        "c0ffee",
        read.metadata.generation,
        chrono::Utc::now(),
    ))
    .status;

    // 1. Mid-pass the lease runs down to its margin: the pass writes nothing more.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let r = apply::apply(
        &edge(la.clone()),
        &read,
        &plan,
        &status,
        Persist::Write,
        &mut Digest::default(),
    )
    .await;
    assert!(matches!(r, Err(ApplyError::NotLeading(_))), "{r:?}");
    assert_eq!(
        get(&s).await.metadata.resource_version,
        read.metadata.resource_version
    );
    assert_eq!(group_state(&s).await.desired, before.desired);

    // 2. b takes the expired Lease over (a new term) and writes the status.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut eb = Elector::new(s.client.clone(), "kube-system", LEASE.into(), "b".into());
    // b saw a's record unchanged for a whole lease duration on its own clock.
    assert!(!eb.try_acquire(chrono::Utc::now()).await.unwrap());
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(eb.try_acquire(chrono::Utc::now()).await.unwrap());
    let lb = eb.leadership();
    let mut b_plan = set_capacity_plan(4);
    b_plan.status.message = "b leads".into();
    let b_status = compose(&Reconciled::new(
        &b_plan,
        None,
        "c0ffee",
        read.metadata.generation,
        chrono::Utc::now(),
    ))
    .status;
    apply::apply(
        &edge(lb.clone()),
        &read,
        &b_plan,
        &b_status,
        Persist::Write,
        &mut Digest::default(),
    )
    .await
    .unwrap();
    let after_b = get(&s).await;
    let fence_b = after_b.status.as_ref().unwrap().fence.clone().unwrap();
    assert_eq!(fence_b.holder, "b");

    // 3. a, partitioned, believes for a moment that it still leads (its last renewal just
    // succeeded, as far as it knows): its write based on the old read is refused by the
    // resourceVersion, and even on a fresh read by the fence. Nothing of its plan runs.
    let stale = stale_leadership(&s).await;
    let r = apply::apply(
        &edge(stale.clone()),
        &read,
        &plan,
        &status,
        Persist::Write,
        &mut Digest::default(),
    )
    .await;
    assert!(matches!(r, Err(ApplyError::Conflict { .. })), "{r:?}");
    let r = apply::apply(
        &edge(stale.clone()),
        &after_b,
        &plan,
        &status,
        Persist::Write,
        &mut Digest::default(),
    )
    .await;
    assert!(matches!(r, Err(ApplyError::Fenced { .. })), "{r:?}");
    // The same for a drain's pass that checks the stored status instead of writing it
    // (issue 25): refused on the old read, and on a fresh one by the fence; nothing evicted.
    let mut evict = plan.clone();
    evict.actions = vec![rota::rotate::Planned {
        action: rota::rotate::Action::Evict {
            namespace: "shop".into(),
            pod: "web-0".into(),
            node: "n1".into(),
            grace_period: None,
        },
        reason: "batch 1: drain node n1".into(),
    }];
    let mut evicted = Digest::default();
    let r = apply::apply(
        &edge(stale.clone()),
        &read,
        &evict,
        &status,
        Persist::Check,
        &mut evicted,
    )
    .await;
    assert!(matches!(r, Err(ApplyError::Conflict { .. })), "{r:?}");
    let r = apply::apply(
        &edge(stale),
        &after_b,
        &evict,
        &status,
        Persist::Check,
        &mut evicted,
    )
    .await;
    assert!(matches!(r, Err(ApplyError::Fenced { .. })), "{r:?}");
    assert!(evicted.is_empty());
    let now = get(&s).await;
    assert_eq!(
        now.metadata.resource_version,
        after_b.metadata.resource_version
    );
    assert_eq!(now.status.unwrap().message, "b leads");
    assert_eq!(group_state(&s).await.desired, before.desired);
}

/// A leadership for "a" at term 0, as a partitioned replica that won the first term would
/// still hold in memory: won on a Lease of its own in another namespace (same term number),
/// so that the real Lease stays b's.
async fn stale_leadership(s: &Sim) -> rota::controller::leader::Leadership {
    let mut other = Elector::new(s.client.clone(), "default", LEASE.into(), "a".into());
    assert!(other.try_acquire(chrono::Utc::now()).await.unwrap());
    let l = other.leadership();
    assert_eq!(l.fence().unwrap().transitions, 0);
    l
}
