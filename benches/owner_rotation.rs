//! One pool rotated per owner on the simulated fleet: the same controller, the same workloads
//! and `batch: 10%`, a pool of 100 nodes (`ROTA_BENCH_NODES`) moved to a new image by each
//! owner rota drives: a self-managed Auto Scaling group, an EKS managed node group with
//! `managedUpdate: service` and with `blueGreen`, a GKE node pool and an AKS agent pool with
//! each strategy too, and a Karpenter NodePool by drift.
//!
//! For each it prints the cloud calls per rotated node (every call of the self-managed
//! `NodeGroups` API and of the owner's `OwnerPools` adapter, counted at the adapter: what a
//! real agent would send to the cloud; Karpenter's pool is driven through the Kubernetes API,
//! so its cloud calls are what the controller still reads of the group), the simulated
//! makespan and the wall time of the run; the last lines are `key=value` figures, one per
//! owner, for scripts.
//!
//! Run: `cargo bench --bench figures -- owner_rotation` (`ROTA_BENCH_NODES=N`,
//! `ROTA_BENCH_OWNERS=gke,aks` to pick owners). Without `--bench` (as `cargo test
//! --all-targets` runs it) a 4-node smoke run of every owner checks that each ends
//! `Succeeded` with every node on the new image.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rota::cloud::GroupRef;
use rota::cloud::managed::OwnerPools;
use rota::controller::Controller;
use rota::fleet::owner::{ManagedGroup, ManagedUpdate, OwnerImage};
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy};
use rota::kube::crd::{NodePoolRotation, NodePoolRotationSpec};
use rota::rotate::Phase;
use rota::sim::cloud::SimCloud;
use tokio::time::Instant;

use crate::support::sim_fleet::{self, CountedGroups, CountedOwner, block_on_paused, test_config};

const WORKLOADS: &str = r#"
nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 20, pdb: {minAvailable: "80%"}, readyAfter: 10s}
daemonSets:
  - {name: node-exporter, namespace: monitoring, readyAfter: 5s}
"#;

const AMI_OLD: &str = "ami-0a1b2c3d4e5f60718";
const AMI_NEW: &str = "ami-0f9e8d7c6b5a40312";

/// One owner's pool: where it lives, how its nodes are labelled, its images.
#[derive(Clone)]
struct Case {
    name: &'static str,
    cloud: Cloud,
    group: GroupRef,
    label: &'static str,
    old: &'static str,
    new: &'static str,
    owner_image: Option<OwnerImage>,
    managed_update: Option<ManagedUpdate>,
}

fn cases() -> Vec<Case> {
    let eks = ManagedGroup::EksNodegroup {
        region: "us-east-1".into(),
        eks_cluster: "bench".into(),
        nodegroup: "general".into(),
    };
    let ami = Some(OwnerImage::Ami { id: AMI_NEW.into() });
    let gke = ManagedGroup::GkeNodePool {
        project: "acme".into(),
        location: "europe-west1".into(),
        gke_cluster: "bench".into(),
        node_pool: "general".into(),
    };
    let gke_image = Some(OwnerImage::GkeNode {
        node_version: Some("1.31.5-gke.1023000".into()),
        image_type: "COS_CONTAINERD".into(),
    });
    let aks = ManagedGroup::AksAgentPool {
        subscription_id: "00000000-0000-0000-0000-000000000001".into(),
        resource_group: "rg-bench".into(),
        aks_cluster: "bench".into(),
        agent_pool: "general".into(),
    };
    let aks_image = Some(OwnerImage::AksNodeImage {
        node_image_version: "AKSUbuntu-2204gen2containerd-202611.02.0".into(),
    });
    let mut cases = vec![Case {
        name: "asg",
        cloud: Cloud::Aws,
        group: GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "general".into(),
        },
        label: "rota.dev/pool",
        old: AMI_OLD,
        new: AMI_NEW,
        owner_image: None,
        managed_update: None,
    }];
    cases.extend(both_strategies(
        Case {
            name: "eks_service",
            cloud: Cloud::Aws,
            group: GroupRef::Managed(eks),
            label: "eks.amazonaws.com/nodegroup",
            old: AMI_OLD,
            new: AMI_NEW,
            owner_image: ami.clone(),
            managed_update: None,
        },
        "eks_bluegreen",
    ));
    cases.extend(both_strategies(
        Case {
            name: "gke_service",
            cloud: Cloud::Gcp,
            group: GroupRef::Managed(gke),
            label: "cloud.google.com/gke-nodepool",
            old: "1.31.4-gke.1183000/COS_CONTAINERD",
            new: "1.31.5-gke.1023000/COS_CONTAINERD",
            owner_image: gke_image,
            managed_update: None,
        },
        "gke_bluegreen",
    ));
    cases.extend(both_strategies(
        Case {
            name: "aks_service",
            cloud: Cloud::Azure,
            group: GroupRef::Managed(aks),
            label: "kubernetes.azure.com/agentpool",
            old: "AKSUbuntu-2204gen2containerd-202610.01.0",
            new: "AKSUbuntu-2204gen2containerd-202611.02.0",
            owner_image: aks_image,
            managed_update: None,
        },
        "aks_bluegreen",
    ));
    cases.push(Case {
        name: "karpenter_drift",
        cloud: Cloud::Aws,
        group: GroupRef::Managed(ManagedGroup::KarpenterNodePool {
            region: "us-east-1".into(),
            eks_cluster: "bench".into(),
            node_pool: "general".into(),
        }),
        label: "karpenter.sh/nodepool",
        old: AMI_OLD,
        new: AMI_NEW,
        owner_image: ami,
        managed_update: None,
    });
    cases
}

/// `case` (a managed pool) under `managedUpdate: service`, then the same pool under
/// `blueGreen`, named `bluegreen`.
fn both_strategies(case: Case, bluegreen: &'static str) -> [Case; 2] {
    let twin = Case {
        name: bluegreen,
        managed_update: Some(ManagedUpdate::BlueGreen),
        ..case.clone()
    };
    [
        Case {
            managed_update: Some(ManagedUpdate::Service),
            ..case
        },
        twin,
    ]
}

/// The simulated owner's adapter for `case` (none for a self-managed group or Karpenter,
/// which the controller drives through `NodeGroups` and the Kubernetes API).
fn adapter(case: &Case, cloud: &SimCloud) -> Option<Arc<dyn OwnerPools>> {
    match &case.group {
        GroupRef::Managed(ManagedGroup::EksNodegroup { .. }) => Some(Arc::new(cloud.clone())),
        GroupRef::Managed(ManagedGroup::GkeNodePool { .. }) => Some(Arc::new(cloud.gke())),
        GroupRef::Managed(ManagedGroup::AksAgentPool { .. }) => Some(Arc::new(cloud.aks())),
        _ => None,
    }
}

struct Run {
    makespan: Duration,
    calls: u64,
    rotated: u32,
    wall: std::time::Duration,
}

fn npr(case: &Case) -> NodePoolRotation {
    let mut policy = EffectivePolicy {
        batch: BatchSize::Percent(10),
        managed_update: case.managed_update,
        ..EffectivePolicy::default()
    };
    policy.drain.delete_empty_dir_data = true;
    sim_fleet::npr(NodePoolRotationSpec {
        owner_image: case.owner_image.clone(),
        cluster: "bench".into(),
        source_commit: "bench".into(),
        ..sim_fleet::spec("general", case.group.clone(), case.label, case.new, policy)
    })
}

async fn run(case: &Case, nodes: u32) -> Run {
    let wall = std::time::Instant::now();
    let s = sim_fleet::cluster(case.cloud, 1)
        .named("bench")
        .pool("general", case.group.clone(), case.old, case.label, nodes)
        .workloads(WORKLOADS)
        .start()
        .await;
    s.fleet.cloud.set_aks_latest_node_image(case.new);
    s.create(&npr(case)).await;
    let calls = Arc::new(AtomicU64::new(0));
    let groups = CountedGroups {
        inner: Arc::new(s.fleet.cloud.clone()),
        describes: calls.clone(),
        others: calls.clone(),
    };
    let mut c = Controller::new(
        s.client.clone(),
        Arc::new(groups),
        test_config("bench", "bench"),
    );
    if let Some(owner) = adapter(case, &s.fleet.cloud) {
        c = c.with_owners(Arc::new(CountedOwner {
            inner: owner,
            calls: calls.clone(),
        }));
    }
    let start = Instant::now();
    loop {
        c.step().await;
        let st = s.status("general").await;
        match st.phase {
            Phase::Succeeded if st.on_target == nodes => break,
            Phase::Paused | Phase::Failed => {
                panic!("{}: {:?}: {}", case.name, st.phase, st.message)
            }
            _ => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(72 * 3600),
            "{}: no end in 72 h: {}",
            case.name,
            st.message
        );
        c.wait(Instant::now() + Duration::from_secs(300), true)
            .await;
    }
    Run {
        makespan: start.elapsed(),
        calls: calls.load(Ordering::Relaxed),
        rotated: nodes,
        wall: wall.elapsed(),
    }
}

pub fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let nodes: u32 = std::env::var("ROTA_BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 100 } else { 4 });
    let picked = std::env::var("ROTA_BENCH_OWNERS").ok();
    println!("one pool of {nodes} nodes per owner on the simulated fleet, batch 10%, paused time");
    let mut figures = Vec::new();
    for case in cases() {
        if picked
            .as_deref()
            .is_some_and(|p| !p.split(',').any(|s| s == case.name))
        {
            continue;
        }
        let r = block_on_paused(run(&case, nodes));
        let per_node = r.calls as f64 / f64::from(r.rotated);
        println!(
            "  {:<16} {:6.1} cloud calls per rotated node ({} calls)  {:7.1} min simulated  {:6.1} s wall",
            case.name,
            per_node,
            r.calls,
            r.makespan.as_secs_f64() / 60.0,
            r.wall.as_secs_f64()
        );
        figures.push(format!(
            "owner={} nodes={nodes} cloud_calls={} calls_per_node={per_node:.2} makespan_min={:.1} wall_s={:.1}",
            case.name,
            r.calls,
            r.makespan.as_secs_f64() / 60.0,
            r.wall.as_secs_f64()
        ));
    }
    println!();
    for f in figures {
        println!("{f}");
    }
}
