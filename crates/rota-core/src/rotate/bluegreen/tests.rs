//! `blueGreen` as a sequence: the planner against a small model of an owner with pools
//! (created, sized, nodes removed one by one, deleted, each as EKS answers), a pod per old
//! node that only an eviction moves. After every pass the invariants hold: never more live
//! instances than the pool's size plus one batch, no node removed before it was cordoned and
//! emptied, no second twin, nothing but owner calls and node writes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::super::{Action, GateVerdict, Observed, ObservedNode, ObservedPod, Phase, PodKind};
use crate::cloud::managed::{OwnerPoolMembers, PoolStatus, renamed};
use crate::cloud::{GroupRef, GroupState, Instance, Lifecycle};
use crate::fleet::duration::GoDuration;
use crate::fleet::owner::{ManagedGroup, ManagedUpdate, OwnerImage};
use crate::fleet::resolved::{BatchSize, DesiredPool, EffectivePolicy, Mode, OnGateFailure};
use crate::rotate::{BlueGreenStep, Checkpoint, Plan};

const OLD: &str = "ami-old";
const NEW: &str = "ami-new";
const SIZE: usize = 4;
const BATCH: u32 = 2;

fn t(s: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
        + chrono::Duration::seconds(s)
}

fn ng() -> ManagedGroup {
    ManagedGroup::EksNodegroup {
        region: "us-east-1".into(),
        eks_cluster: "prod".into(),
        nodegroup: "general".into(),
    }
}

fn desired(image: &str, version: &str) -> DesiredPool {
    DesiredPool {
        owner_image: Some(OwnerImage::Ami { id: image.into() }),
        cluster: "prod".into(),
        name: "general".into(),
        channel: "general".into(),
        version: version.into(),
        image: image.into(),
        arch: Default::default(),
        kubelet: None,
        released: None,
        max_age: None,
        group: GroupRef::Managed(ng()),
        node_selector: Default::default(),
        policy: EffectivePolicy {
            batch: BatchSize::Count(BATCH),
            managed_update: Some(ManagedUpdate::BlueGreen),
            ..EffectivePolicy::default()
        },
        gates: vec![],
        mode: Mode::Reconcile,
    }
}

struct Inst {
    id: String,
    image: String,
    lifecycle: Lifecycle,
    pods: Vec<String>,
    cordoned: Option<String>,
}

struct Pool {
    status: PoolStatus,
    image: String,
    desired: u32,
    max: u32,
    twin_of: Option<String>,
    instances: Vec<Inst>,
}

/// The owner and the cluster, as one model.
struct World {
    pools: BTreeMap<String, Pool>,
    next_id: u32,
    /// Pools created (a second create of a name already there creates nothing).
    created: Vec<String>,
    most_live: usize,
    gates: GateVerdict,
}

impl World {
    fn new() -> World {
        let mut w = World {
            pools: BTreeMap::new(),
            next_id: 0,
            created: Vec::new(),
            most_live: 0,
            gates: GateVerdict::Passing,
        };
        let mut pool = Pool {
            status: PoolStatus::Active,
            image: OLD.into(),
            desired: SIZE as u32,
            max: SIZE as u32,
            twin_of: None,
            instances: Vec::new(),
        };
        for _ in 0..SIZE {
            let mut i = w.instance(OLD);
            i.lifecycle = Lifecycle::InService;
            i.pods = vec![format!("web-{}", i.id)];
            pool.instances.push(i);
        }
        w.pools.insert("general".into(), pool);
        w
    }

    fn instance(&mut self, image: &str) -> Inst {
        self.next_id += 1;
        Inst {
            id: format!("i-{}", self.next_id),
            image: image.into(),
            lifecycle: Lifecycle::Pending,
            pods: Vec::new(),
            cordoned: None,
        }
    }

    fn live(&self) -> usize {
        self.pools.values().map(|p| p.instances.len()).sum()
    }

    /// The owner's own progress: pools become active or go, instances boot, a pool below
    /// its size launches. A pool above its size would let the ASG pick a victim: rota must
    /// never ask for that.
    fn settle(&mut self) {
        self.pools.retain(|_, p| p.status != PoolStatus::Deleting);
        let mut launch = Vec::new();
        for (name, p) in &mut self.pools {
            if p.status == PoolStatus::Creating {
                p.status = PoolStatus::Active;
            }
            for i in &mut p.instances {
                i.lifecycle = Lifecycle::InService;
            }
            let have = p.instances.len() as u32;
            assert!(
                have <= p.desired,
                "pool {name}: {have} > size {}: the ASG would pick",
                p.desired
            );
            launch.push((name.clone(), p.desired - have, p.image.clone()));
        }
        for (name, n, image) in launch {
            for _ in 0..n {
                let i = self.instance(&image);
                self.pools.get_mut(&name).unwrap().instances.push(i);
            }
        }
        self.most_live = self.most_live.max(self.live());
    }

    fn observed(&self) -> Observed {
        let mut nodes = Vec::new();
        let mut pools = Vec::new();
        for (name, p) in &self.pools {
            for i in &p.instances {
                if i.lifecycle != Lifecycle::InService {
                    continue;
                }
                nodes.push(ObservedNode {
                    name: format!("node-{}", i.id),
                    provider_id: format!("aws:///us-east-1a/{}", i.id),
                    image_label: Some(i.image.clone()),
                    ready: true,
                    cordoned: i.cordoned.is_some(),
                    cordoned_by: i.cordoned.clone(),
                    do_not_disrupt: false,
                    scale_down_disabled: false,
                    pods: i.pods.iter().map(|p| pod(p)).collect(),
                });
            }
            pools.push(OwnerPoolMembers {
                pool: renamed(&ng(), name),
                status: p.status,
                image: p.image.clone(),
                desired: p.desired,
                max: p.max,
                instances: p
                    .instances
                    .iter()
                    .map(|i| Instance {
                        id: i.id.clone(),
                        provider_id: format!("aws:///us-east-1a/{}", i.id),
                        image: i.image.clone(),
                        zone: "us-east-1a".into(),
                        lifecycle: i.lifecycle,
                        launch_error: None,
                    })
                    .collect(),
                issues: vec![],
                twin_of: p.twin_of.clone(),
                os: Default::default(),
            });
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Observed {
            group: GroupState {
                group: GroupRef::Managed(ng()),
                desired: 0,
                min: 0,
                max: 0,
                template_image: String::new(),
                instances: vec![],
            },
            nodes,
            departed: vec![],
            gates: self.gates.clone(),
            start_hold: None,
            image_hold: None,
            control_plane: None,
            describe_lag: std::time::Duration::ZERO,
            cluster_autoscaler: false,
            leading_since: None,
            owner: None,
            drift: None,
            pools,
            refused: None,
        }
    }

    fn node(&mut self, node: &str) -> &mut Inst {
        let id = node.trim_start_matches("node-");
        self.pools
            .values_mut()
            .flat_map(|p| p.instances.iter_mut())
            .find(|i| i.id == id)
            .unwrap_or_else(|| panic!("no node {node}"))
    }

    fn apply(&mut self, plan: &Plan) {
        for a in &plan.actions {
            match &a.action {
                Action::CreateTwinPool { request } => {
                    let name = request.twin.name().to_string();
                    if !self.pools.contains_key(&name) {
                        self.created.push(name.clone());
                        self.pools.insert(
                            name,
                            Pool {
                                status: PoolStatus::Creating,
                                image: request.image.clone(),
                                desired: request.desired,
                                max: request.max,
                                twin_of: Some(request.from.name().to_string()),
                                instances: Vec::new(),
                            },
                        );
                    }
                }
                Action::SetPoolSize { pool, desired, max } => {
                    let p = self.pools.get_mut(pool.name()).expect("sized pool exists");
                    assert!(
                        *desired >= p.instances.len() as u32,
                        "{a:?} lowers past live instances"
                    );
                    (p.desired, p.max) = (*desired, *max);
                }
                Action::RemovePoolNode {
                    pool, instance_id, ..
                } => {
                    let p = self.pools.get_mut(pool.name()).expect("pool exists");
                    let at = p.instances.iter().position(|i| &i.id == instance_id);
                    let i = p.instances.remove(at.expect("a listed instance"));
                    assert!(
                        i.cordoned.is_some() && i.pods.is_empty(),
                        "{instance_id} removed undrained"
                    );
                    p.desired -= 1;
                }
                Action::DeletePool { pool } => {
                    let p = self.pools.get_mut(pool.name()).expect("pool exists");
                    assert!(p.instances.is_empty(), "deleted with instances");
                    p.status = PoolStatus::Deleting;
                }
                Action::Cordon { node, owner } => self.node(node).cordoned = Some(owner.clone()),
                Action::Uncordon { node } => self.node(node).cordoned = None,
                Action::Evict { pod, node, .. } => self.node(node).pods.retain(|p| p != pod),
                Action::SetScaleDownDisabled { .. } => {}
                other => panic!("not an owner call: {other:?}"),
            }
        }
    }
}

fn pod(name: &str) -> ObservedPod {
    ObservedPod {
        namespace: "app".into(),
        name: name.into(),
        kind: PodKind::Workload,
        do_not_disrupt: false,
        uses_empty_dir: false,
        terminating: false,
        pdb: None,
        pdb_count: 0,
    }
}

/// Plan, persist, apply (unless the pass `crash`es after the checkpoint), let the owner move,
/// for `passes` passes a minute apart. Returns the last plan.
fn run(
    w: &mut World,
    d: &DesiredPool,
    cp: &mut Option<Checkpoint>,
    from: i64,
    passes: i64,
    crash: Option<i64>,
) -> Plan {
    let mut last = None;
    for k in 0..passes {
        let p = super::super::plan(d, &w.observed(), cp.as_ref(), t((from + k) * 60));
        *cp = p.checkpoint.clone();
        if crash != Some(from + k) {
            w.apply(&p);
        }
        w.settle();
        assert!(w.most_live <= SIZE + BATCH as usize, "{} live", w.most_live);
        last = Some(p);
    }
    last.unwrap()
}

fn images(w: &World, pool: &str) -> Vec<String> {
    w.pools[pool]
        .instances
        .iter()
        .map(|i| i.image.clone())
        .collect()
}

/// The whole move: twin created once, nodes moved in batches of two, the old pool held at
/// zero through the pool soak, then deleted; the next version moves from the twin.
#[test]
fn a_pool_moves_to_its_twin_in_batches_and_the_old_pool_is_deleted_after_the_soak() {
    let mut w = World::new();
    let mut d = desired(NEW, "v2");
    d.policy.pool_soak = GoDuration::from_secs(600);
    let mut cp = None;
    let p = run(&mut w, &d, &mut cp, 0, 10, None);
    assert!(
        w.pools.contains_key("general"),
        "held through the soak: {}",
        p.status.message
    );
    assert_eq!(w.pools["general"].desired, 0);
    assert_eq!(p.status.phase, Phase::Soaking, "{}", p.status.message);
    let p = run(&mut w, &d, &mut cp, 10, 14, None);
    assert_eq!(p.status.phase, Phase::Succeeded, "{}", p.status.message);
    assert!(!w.pools.contains_key("general"), "deleted after the soak");
    assert_eq!(images(&w, "general-rota-v2"), vec![NEW; SIZE]);
    assert_eq!(w.created, vec!["general-rota-v2"]);
    let mark = cp.as_ref().unwrap().blue_green.clone().unwrap();
    assert_eq!(mark.step, BlueGreenStep::Done);
    // Nothing more while the version stays.
    let p = run(&mut w, &d, &mut cp, 20, 3, None);
    assert!(
        p.actions.is_empty() && p.status.phase == Phase::Succeeded,
        "{:?}",
        p.actions
    );
    // The next version starts from the twin.
    let d3 = desired("ami-v3", "v3");
    let p = run(&mut w, &d3, &mut cp, 23, 30, None);
    assert_eq!(p.status.phase, Phase::Succeeded, "{}", p.status.message);
    assert_eq!(w.pools.keys().collect::<Vec<_>>(), vec!["general-rota-v3"]);
    assert_eq!(images(&w, "general-rota-v3"), vec!["ami-v3"; SIZE]);
}

/// A gate failing during the pool soak with `onGateFailure: rollback`: the old pool grows
/// back batch by batch, the twin is drained and deleted, the pool ends Failed (RolledBack)
/// on its old nodes' image and stays there.
#[test]
fn a_gate_failing_in_the_pool_soak_rolls_back_to_the_old_pool_and_deletes_the_twin() {
    let mut w = World::new();
    let mut d = desired(NEW, "v2");
    d.policy.pool_soak = GoDuration::from_secs(3600);
    d.policy.on_gate_failure = OnGateFailure::Rollback;
    let mut cp = None;
    let p = run(&mut w, &d, &mut cp, 0, 10, None);
    assert_eq!(p.status.phase, Phase::Soaking, "{}", p.status.message);
    w.gates = GateVerdict::Failed {
        gate: "errors".into(),
        reason: "0.2 > 0.01".into(),
    };
    let p = run(&mut w, &d, &mut cp, 10, 30, None);
    assert_eq!(p.status.phase, Phase::Failed, "{}", p.status.message);
    assert_eq!(p.status.reason, "RolledBack");
    assert_eq!(w.pools.keys().collect::<Vec<_>>(), vec!["general"]);
    assert_eq!(images(&w, "general"), vec![OLD; SIZE]);
    let p = run(&mut w, &d, &mut cp, 40, 3, None);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(w.created.len(), 1, "no second twin");
}

/// A crash after the checkpoint and before the pass's calls, at every pass of the move: the
/// move ends as without the crash, with one twin, within the surge bound.
#[test]
fn a_crash_at_any_pass_resumes_without_a_second_twin_or_surge() {
    for at in 0..12 {
        let mut w = World::new();
        let d = desired(NEW, "v2");
        let mut cp = None;
        let p = run(&mut w, &d, &mut cp, 0, 24, Some(at));
        assert_eq!(
            p.status.phase,
            Phase::Succeeded,
            "crash at {at}: {}",
            p.status.message
        );
        assert_eq!(w.created, vec!["general-rota-v2"], "crash at {at}");
        assert_eq!(w.pools.keys().collect::<Vec<_>>(), vec!["general-rota-v2"]);
    }
}

/// Paused, nothing is created; an owner that lists a foreign pool under the twin's name
/// halts the move without touching it.
#[test]
fn paused_creates_nothing_and_a_foreign_pool_of_the_twins_name_is_left_alone() {
    let mut w = World::new();
    let mut d = desired(NEW, "v2");
    d.policy.paused = true;
    let mut cp = None;
    let p = run(&mut w, &d, &mut cp, 0, 2, None);
    assert!(w.created.is_empty());
    assert_eq!(p.status.phase, Phase::Paused);
    let mut w = World::new();
    w.pools.insert(
        "general-rota-v2".into(),
        Pool {
            status: PoolStatus::Active,
            image: "ami-someone".into(),
            desired: 0,
            max: 1,
            twin_of: None,
            instances: vec![],
        },
    );
    let d = desired(NEW, "v2");
    let mut cp = None;
    let p = run(&mut w, &d, &mut cp, 0, 3, None);
    assert_eq!(p.status.phase, Phase::Paused, "{}", p.status.message);
    assert!(
        p.status.message.contains("not rota's twin"),
        "{}",
        p.status.message
    );
    assert_eq!(images(&w, "general"), vec![OLD; SIZE]);
}

/// Stopped mid-move (`rollout.paused` after the first batch) nothing moves, nothing is
/// created or removed; resumed, the move ends from where it stood with the same twin.
#[test]
fn a_move_paused_mid_way_holds_and_resumes_with_the_same_twin() {
    let mut w = World::new();
    let mut d = desired(NEW, "v2");
    let mut cp = None;
    run(&mut w, &d, &mut cp, 0, 5, None);
    assert_eq!(images(&w, "general"), vec![OLD; 2], "one batch moved");
    d.policy.paused = true;
    let before = (images(&w, "general"), images(&w, "general-rota-v2"));
    let p = run(&mut w, &d, &mut cp, 5, 10, None);
    assert_eq!(p.status.phase, Phase::Paused, "{}", p.status.message);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(
        (images(&w, "general"), images(&w, "general-rota-v2")),
        before
    );
    d.policy.paused = false;
    let p = run(&mut w, &d, &mut cp, 15, 15, None);
    assert_eq!(p.status.phase, Phase::Succeeded, "{}", p.status.message);
    assert_eq!(w.created, vec!["general-rota-v2"]);
    assert_eq!(w.pools.keys().collect::<Vec<_>>(), vec!["general-rota-v2"]);
}

/// A newer version merged mid-move waits for the move to end, then moves from the twin;
/// the repo back on the origin version mid-move is a rollback into the old pool at once.
#[test]
fn a_newer_version_waits_for_the_move_and_a_revert_rolls_back_at_once() {
    let mut w = World::new();
    let mut cp = None;
    run(&mut w, &desired(NEW, "v2"), &mut cp, 0, 5, None);
    let p = run(&mut w, &desired("ami-v3", "v3"), &mut cp, 5, 40, None);
    assert_eq!(p.status.phase, Phase::Succeeded, "{}", p.status.message);
    assert_eq!(w.created, vec!["general-rota-v2", "general-rota-v3"]);
    assert_eq!(images(&w, "general-rota-v3"), vec!["ami-v3"; SIZE]);
    let mut w = World::new();
    let mut cp = None;
    run(&mut w, &desired(NEW, "v2"), &mut cp, 0, 5, None);
    let p = run(&mut w, &desired(OLD, "v1"), &mut cp, 5, 20, None);
    assert_eq!(
        images(&w, "general"),
        vec![OLD; SIZE],
        "{}",
        p.status.message
    );
    assert_eq!(w.pools.keys().collect::<Vec<_>>(), vec!["general"]);
}

/// The checkpoint lost mid-move (the status gone): the move is found again by the twin's
/// label and resumes within the surge bound, with no second twin; lost again once the move
/// ended, the pool is up to date in its twin and that is recorded as a finished move.
#[test]
fn a_move_whose_checkpoint_is_lost_is_found_again_by_the_twins_label() {
    let mut w = World::new();
    let d = desired(NEW, "v2");
    let mut cp = None;
    run(&mut w, &d, &mut cp, 0, 5, None);
    assert_eq!(images(&w, "general"), vec![OLD; 2], "one batch moved");
    let mut lost = None;
    let p = run(&mut w, &d, &mut lost, 5, 60, None);
    assert_eq!(p.status.phase, Phase::Succeeded, "{}", p.status.message);
    assert_eq!(w.created, vec!["general-rota-v2"], "no second twin");
    assert!(!w.pools.contains_key("general"), "the old pool is deleted");
    let mut lost = None;
    let p = run(&mut w, &d, &mut lost, 65, 2, None);
    assert_eq!(p.status.reason, "UpToDate", "{}", p.status.message);
    let mark = lost.and_then(|c| c.blue_green).expect("recorded");
    assert_eq!(
        (mark.twin_pool.as_str(), mark.step),
        ("general-rota-v2", BlueGreenStep::Done)
    );
    assert_eq!(w.created.len(), 1);
}

/// The checkpoint lost after any pass of a move (mid-batch included: the twin surged, the
/// old nodes not yet removed): the move resumes within the surge bound and ends with one
/// twin.
#[test]
fn a_checkpoint_lost_at_any_pass_resumes_within_the_bound_with_one_twin() {
    for k in 1..30 {
        let mut w = World::new();
        let d = desired(NEW, "v2");
        let mut cp = None;
        run(&mut w, &d, &mut cp, 0, k, None);
        let mut lost = None;
        let p = run(&mut w, &d, &mut lost, k, 120, None);
        assert_eq!(
            p.status.phase,
            Phase::Succeeded,
            "lost after pass {k}: {}",
            p.status.message
        );
        assert_eq!(w.created.len(), 1, "lost after pass {k}: {:?}", w.created);
        assert!(!w.pools.contains_key("general"), "lost after pass {k}");
    }
}

/// An AKS Windows agent pool takes at most six characters for a name: the planner names the
/// twin within them (from the OS the owner describes the pool with), so the real client
/// creates it rather than refusing every Windows twin and leaving the pool paused. A Linux
/// pool's twin keeps its twelve.
#[test]
fn a_windows_aks_pools_twin_is_named_within_six_characters() {
    use crate::cloud::managed::{PoolOs, twin_name_for};
    let aks = |name: &str| ManagedGroup::AksAgentPool {
        subscription_id: "s".into(),
        resource_group: "rg".into(),
        aks_cluster: "c".into(),
        agent_pool: name.into(),
    };
    let image = "AKSWindows-2022-containerd-202611.02.0";
    let twin_of = |os: PoolOs| {
        let mut d = desired(NEW, "2026.11.2");
        d.name = "win22".into();
        d.group = GroupRef::Managed(aks("win22"));
        d.owner_image = Some(OwnerImage::AksNodeImage {
            node_image_version: image.into(),
        });
        let mut o = World::new().observed();
        for p in &mut o.pools {
            p.pool = aks("win22");
            p.os = os;
        }
        let plan = super::super::plan(&d, &o, None, t(0));
        plan.actions
            .iter()
            .find_map(|a| match &a.action {
                Action::CreateTwinPool { request } => Some(request.twin.name().to_string()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("a twin is created: {}", plan.status.message))
    };
    let windows = twin_of(PoolOs::Windows);
    assert_eq!(windows.len(), 6, "{windows}");
    assert!(windows.starts_with("wi"), "{windows}");
    assert!(
        windows
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "{windows}"
    );
    assert_ne!(windows, "win22");
    let linux = twin_of(PoolOs::Linux);
    assert_eq!(
        linux,
        twin_name_for(
            crate::fleet::owner::Owner::AksAgentPool,
            "win22",
            "2026.11.2"
        )
    );
    assert!(linux.len() > 6, "{linux}");
}
