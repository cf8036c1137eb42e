//! Table-driven tests of the planner with small builders.

use chrono::{DateTime, Duration, Utc};

use super::*;
use crate::cloud::{GroupRef, GroupState, Instance, Lifecycle};
use crate::fleet::duration::GoDuration;
use crate::fleet::resolved::{
    BatchSize, DesiredPool, EffectivePolicy, Mode, OnDrainTimeout, OnGateFailure, Window,
};
use crate::rotate::stop::MovedBy;

const OLD: &str = "ami-0000000000000000a";
const NEW: &str = "ami-0000000000000000b";
const NEWER: &str = "ami-0000000000000000c";

pub(crate) fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn mins(m: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(m)
}

pub(crate) struct NodeB {
    node: ObservedNode,
    image: String,
    lifecycle: Lifecycle,
    registered: bool,
}

pub(crate) fn node(name: &str) -> NodeB {
    NodeB {
        node: ObservedNode {
            name: name.into(),
            provider_id: format!("aws:///us-east-1a/i-{name}"),
            image_label: None,
            ready: false,
            cordoned: false,
            cordoned_by: None,
            do_not_disrupt: false,
            scale_down_disabled: false,
            pods: vec![],
        },
        image: OLD.into(),
        lifecycle: Lifecycle::InService,
        registered: true,
    }
}

impl NodeB {
    fn ready(mut self) -> Self {
        self.node.ready = true;
        self
    }
    fn image(mut self, i: &str) -> Self {
        self.image = i.into();
        self
    }
    fn cordoned_by(mut self, owner: &str) -> Self {
        self.node.cordoned = true;
        self.node.cordoned_by = Some(owner.into());
        self
    }
    fn cordoned(mut self) -> Self {
        self.node.cordoned = true;
        self
    }
    fn pod(mut self, p: PodB) -> Self {
        self.node.pods.push(p.0);
        self
    }
    fn do_not_disrupt(mut self) -> Self {
        self.node.do_not_disrupt = true;
        self
    }
    fn scale_down_disabled(mut self) -> Self {
        self.node.scale_down_disabled = true;
        self
    }
    /// An instance the cloud is terminating.
    fn terminating_instance(mut self) -> Self {
        self.lifecycle = Lifecycle::Terminating;
        self
    }
    /// An instance that has no node yet.
    fn unregistered(mut self) -> Self {
        self.registered = false;
        self.lifecycle = Lifecycle::Pending;
        self
    }
}

struct PodB(ObservedPod);

fn pod(name: &str) -> PodB {
    PodB(ObservedPod {
        namespace: "app".into(),
        name: name.into(),
        kind: PodKind::Workload,
        do_not_disrupt: false,
        uses_empty_dir: false,
        terminating: false,
        pdb: None,
        pdb_count: 0,
    })
}

impl PodB {
    fn pdb(mut self, name: &str, allowed: u32) -> Self {
        self.0.pdb = Some(PdbRef {
            namespace: "app".into(),
            name: name.into(),
            disruptions_allowed: allowed,
        });
        self.0.pdb_count += 1;
        self
    }
    fn empty_dir(mut self) -> Self {
        self.0.uses_empty_dir = true;
        self
    }
    fn terminating(mut self) -> Self {
        self.0.terminating = true;
        self
    }
    fn kind(mut self, k: PodKind) -> Self {
        self.0.kind = k;
        self
    }
    fn do_not_disrupt(mut self) -> Self {
        self.0.do_not_disrupt = true;
        self
    }
}

fn group_ref() -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "general".into(),
    }
}

/// A pool whose group lists one instance per node, desired = max = the number of nodes.
fn managed_eks() -> GroupRef {
    GroupRef::Managed(crate::fleet::owner::ManagedGroup::EksNodegroup {
        region: "us-east-1".into(),
        eks_cluster: "prod".into(),
        nodegroup: "general".into(),
    })
}

/// A managed pool is never acted on by this planner, whatever its nodes, checkpoint, mode or
/// policy say: not a surge, not a template write, not a cordon.
#[test]
fn a_managed_pool_is_never_acted_on() {
    let stages = [
        None,
        Some(cp(Stage::Between)),
        Some(cp(Stage::WaitingReady { batch: batch12() })),
        Some(cp(Stage::Done)),
    ];
    for mode in [Mode::Reconcile, Mode::ReadOnly] {
        for c in &stages {
            let mut d = desired(2);
            d.group = managed_eks();
            d.mode = mode;
            let p = plan(&d, &world(old4()), c.as_ref(), t0());
            assert!(
                p.actions.is_empty() && p.dry_run.is_empty(),
                "{mode:?} {c:?}: {p:?}"
            );
            assert_eq!(p.checkpoint.as_ref(), c.as_ref());
            assert_eq!(p.status.reason, "ManagedPoolNotSupported");
            assert_eq!(p.status.total, 4);
        }
    }
}

pub(crate) fn world(nodes: Vec<NodeB>) -> Observed {
    let n = nodes.len() as u32;
    Observed {
        group: GroupState {
            group: group_ref(),
            desired: n,
            min: 0,
            max: n,
            template_image: OLD.into(),
            instances: nodes
                .iter()
                .map(|b| Instance {
                    id: format!("i-{}", b.node.name),
                    provider_id: b.node.provider_id.clone(),
                    image: b.image.clone(),
                    zone: "us-east-1a".into(),
                    lifecycle: b.lifecycle,
                    launch_error: None,
                })
                .collect(),
        },
        nodes: nodes
            .into_iter()
            .filter(|b| b.registered)
            .map(|b| b.node)
            .collect(),
        departed: vec![],
        gates: GateVerdict::Passing,
        start_hold: None,
        image_hold: None,
        control_plane: None,
        describe_lag: std::time::Duration::ZERO,
        cluster_autoscaler: true,
        leading_since: None,
        owner: None,
        drift: None,
        pools: Vec::new(),
        refused: None,
    }
}

pub(crate) fn desired(batch: u32) -> DesiredPool {
    DesiredPool {
        owner_image: None,
        cluster: "prod".into(),
        name: "general".into(),
        channel: "general".into(),
        version: "v2".into(),
        image: NEW.into(),
        arch: Default::default(),
        kubelet: None,
        released: None,
        max_age: None,
        group: group_ref(),
        node_selector: Default::default(),
        policy: EffectivePolicy {
            batch: BatchSize::Count(batch),
            ..EffectivePolicy::default()
        },
        gates: vec![],
        mode: Mode::Reconcile,
    }
}

fn shown(plan: &Plan) -> Vec<String> {
    plan.actions.iter().map(|a| a.action.to_string()).collect()
}

pub(crate) fn old4() -> Vec<NodeB> {
    vec![
        node("n1").ready(),
        node("n2").ready(),
        node("n3"),
        node("n4").ready(),
    ]
}

/// The checkpoint of a pool of 4 (`old4`) in `stage`, rotating OLD → NEW.
fn cp(stage: Stage) -> Checkpoint {
    Checkpoint {
        origin_image: OLD.into(),
        target_image: NEW.into(),
        target_version: "v2".into(),
        original_desired: 4,
        original_max: 4,
        pool_size: 4,
        batches_started: stage.batch().map_or(0, |b| b.number),
        rolling_back: false,
        rejected_image: None,
        rollback_reason: None,
        last_eviction: None,
        halted: None,
        operator_paused: None,
        operator_request: None,
        fleet_stop: None,
        annotated_nodes: vec![],
        fenced_at: None,
        capacity_changed_at: None,
        stage,
        next: None,
        pace: None,
        owner_update: None,
        drift: None,
        blue_green: None,
    }
}

/// Batch 1 replacing n1, n2 with new instances i-m1, i-m2.
fn batch12() -> Batch {
    Batch {
        number: 1,
        old_nodes: vec![
            ChosenNode {
                node: "n1".into(),
                instance_id: "i-n1".into(),
            },
            ChosenNode {
                node: "n2".into(),
                instance_id: "i-n2".into(),
            },
        ],
        target_capacity: 6,
        instances_before: ["i-n1", "i-n2", "i-n3", "i-n4"].map(String::from).to_vec(),
        terminating_before: vec![],
        taken_back: vec![],
        new_instances: vec!["i-m1".into(), "i-m2".into()],
        replaced: vec![],
        never_ready: vec![],
        ready_retries: 0,
        replace_at: None,
        stage_since: t0(),
        started_at: None,
        cordoned_at: None,
        deferral_ended: vec![],
        replace: false,
    }
}

/// `old4` plus the two Ready new nodes of `batch12`, with capacity raised to 6.
fn surged(mut old: Vec<NodeB>) -> Observed {
    old.push(node("m1").ready().image(NEW).scale_down_disabled());
    old.push(node("m2").ready().image(NEW).scale_down_disabled());
    let mut w = world(old);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    w
}

#[test]
fn an_up_to_date_pool_needs_nothing() {
    let w = world(vec![node("n1").ready().image(NEW)]);
    let mut w = w;
    w.group.template_image = NEW.into();
    let p = plan(&desired(1), &w, None, t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.checkpoint, None);
    assert_eq!(p.status.phase, Phase::Succeeded);
    assert_eq!(p.status.on_target, 1);
}

#[test]
fn a_new_image_starts_batch_one_by_setting_the_image_and_surging() {
    let p = plan(&desired(2), &world(old4()), None, t0());
    assert_eq!(
        shown(&p),
        ["set image ami-0000000000000000b", "set capacity 6 (max 6)"]
    );
    assert!(p.actions.iter().all(|a| !a.reason.is_empty()));
    let cp = p.checkpoint.unwrap();
    let Stage::Surging { batch } = &cp.stage else {
        panic!("{:?}", cp.stage)
    };
    // Ready nodes first (the not-Ready n3 goes last), then by name.
    let chosen: Vec<&str> = batch.old_nodes.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(chosen, ["n1", "n2"]);
    assert_eq!(batch.target_capacity, 6);
    assert_eq!((cp.original_desired, cp.original_max), (4, 4));
    assert_eq!(p.status.phase, Phase::Rotating);
}

#[test]
fn replanning_a_surge_after_a_crash_does_not_surge_twice() {
    // The checkpoint says Surging to 6 and the group already shows desired 6: nothing to send.
    let mut w = world(old4());
    w.group.desired = 6;
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let mut b = batch12();
    b.new_instances.clear();
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Surging { batch: b })),
        t0(),
    );
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert!(p.status.message.contains("waiting for 2 of 2"));
}

#[test]
fn with_lagging_describes_the_autoscaler_is_fenced_and_the_lag_waited_out_before_a_surge() {
    // Describes lag up to 30 s: a scale-down the describe misses would make the surge
    // overshoot. First every node gets scale-down-disabled, no capacity is written.
    let lagging = |mut w: Observed| {
        w.describe_lag = std::time::Duration::from_secs(30);
        w
    };
    let p = plan(&desired(2), &lagging(world(old4())), None, t0());
    assert_eq!(
        shown(&p),
        [
            "annotate n1 scale-down-disabled",
            "annotate n2 scale-down-disabled",
            "annotate n3 scale-down-disabled",
            "annotate n4 scale-down-disabled",
        ]
    );
    assert_eq!(p.status.reason, "DescribeLag");
    let c = p.checkpoint.unwrap();
    assert_eq!(c.annotated_nodes, ["n1", "n2", "n3", "n4"]);
    assert_eq!(c.fenced_at, None);

    // The fence is seen: every node carries the annotation.
    let fenced = || {
        lagging(world(
            old4()
                .into_iter()
                .map(|n| n.scale_down_disabled())
                .collect(),
        ))
    };
    let p = plan(&desired(2), &fenced(), Some(&c), mins(1));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert!(
        p.status.message.contains("catch up"),
        "{}",
        p.status.message
    );
    let c = p.checkpoint.unwrap();
    assert_eq!(c.fenced_at, Some(mins(1)));

    // A lag later, the surge; its capacity change is recorded for the next batch's wait.
    let later = mins(1) + chrono::Duration::seconds(30);
    let p = plan(&desired(2), &fenced(), Some(&c), later);
    assert!(
        shown(&p).contains(&"set capacity 6 (max 6)".to_string()),
        "{:?}",
        shown(&p)
    );
    let c = p.checkpoint.unwrap();
    assert_eq!(c.capacity_changed_at, Some(later));

    // Between batches, a capacity change less than a lag ago holds the next batch.
    let mut c = c;
    c.stage = Stage::Between;
    c.capacity_changed_at = Some(mins(10));
    let p = plan(
        &desired(2),
        &fenced(),
        Some(&c),
        mins(10) + chrono::Duration::seconds(10),
    );
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.reason, "DescribeLag");

    // Without a lag nothing changes: the first plan surges at once.
    let p = plan(&desired(2), &world(old4()), None, t0());
    assert!(shown(&p).iter().all(|a| !a.starts_with("annotate")));
}

/// `w` as observed by an agent told `--no-cluster-autoscaler`.
fn no_autoscaler(mut w: Observed) -> Observed {
    w.cluster_autoscaler = false;
    w
}

#[test]
fn without_a_cluster_autoscaler_new_nodes_are_not_annotated() {
    // The batch of `new_nodes_get_the_autoscaler_annotation_then_gates_then_cordon`, its new
    // nodes Ready and unannotated: only the cordons, nothing recorded.
    let mut w = surged(old4());
    for n in &mut w.nodes {
        n.scale_down_disabled = false;
    }
    let at = Stage::WaitingReady { batch: batch12() };
    let p = plan(
        &desired(2),
        &no_autoscaler(w.clone()),
        Some(&cp(at.clone())),
        t0(),
    );
    assert_eq!(shown(&p), ["cordon n1", "cordon n2"]);
    let next = p.checkpoint.unwrap();
    assert!(next.annotated_nodes.is_empty());
    assert!(matches!(next.stage, Stage::Draining { .. }));
    // The same pass with the default (an autoscaler may share the group) annotates both.
    let p = plan(&desired(2), &w, Some(&cp(at)), t0());
    assert_eq!(
        shown(&p)[..2],
        [
            "annotate m1 scale-down-disabled",
            "annotate m2 scale-down-disabled"
        ]
    );
}

#[test]
fn without_a_cluster_autoscaler_lagging_describes_wait_only_for_rotas_own_changes() {
    // Describes lag 30 s, but no autoscaler shares the group: no fence (no annotation, no
    // wait for one), the first batch surges at once.
    let lagging = |mut w: Observed| {
        w.describe_lag = std::time::Duration::from_secs(30);
        no_autoscaler(w)
    };
    let p = plan(&desired(2), &lagging(world(old4())), None, t0());
    assert_eq!(
        shown(&p),
        ["set image ami-0000000000000000b", "set capacity 6 (max 6)"]
    );
    let c = p.checkpoint.unwrap();
    assert!(c.annotated_nodes.is_empty());
    assert_eq!(c.fenced_at, None);
    assert_eq!(c.capacity_changed_at, Some(t0()));

    // Between batches, rota's own capacity change less than a lag ago still holds the next
    // batch: a describe that misses it would surge twice.
    let mut c = c;
    c.stage = Stage::Between;
    c.capacity_changed_at = Some(mins(10));
    let p = plan(
        &desired(2),
        &lagging(world(old4())),
        Some(&c),
        mins(10) + chrono::Duration::seconds(10),
    );
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.reason, "DescribeLag");
    // A lag later it surges.
    let p = plan(
        &desired(2),
        &lagging(world(old4())),
        Some(&c),
        mins(10) + chrono::Duration::seconds(30),
    );
    assert!(
        shown(&p).iter().any(|a| a.starts_with("set capacity")),
        "{:?}",
        shown(&p)
    );
}

#[test]
fn annotations_recorded_before_the_flag_are_removed_at_once_and_forgotten_once_seen_gone() {
    // Batch 1 soaks; an earlier pass (the flag off) annotated m1 and m2 and recorded them.
    // The operator then says no autoscaler shares the group: both are removed now, not when
    // the pool is done, and stay recorded until a describe shows them gone, so that a crash
    // after the checkpoint's write and before the patches still removes them.
    let (d, c) = soaking();
    let p = plan(&d, &no_autoscaler(after_batch1(vec![])), Some(&c), mins(2));
    let removals: Vec<String> = shown(&p)
        .into_iter()
        .filter(|a| a.starts_with("remove scale-down-disabled"))
        .collect();
    assert_eq!(
        removals,
        [
            "remove scale-down-disabled from m1",
            "remove scale-down-disabled from m2"
        ]
    );
    assert!(shown(&p).iter().all(|a| !a.starts_with("annotate")));
    let next = p.checkpoint.unwrap();
    assert_eq!(next.annotated_nodes, ["m1", "m2"]);

    // The patches ran: nothing more to remove, nothing left recorded.
    let mut clean = after_batch1(vec![]);
    for n in &mut clean.nodes {
        n.scale_down_disabled = false;
    }
    let p = plan(&d, &no_autoscaler(clean.clone()), Some(&next), mins(3));
    assert!(
        shown(&p).iter().all(|a| !a.contains("scale-down-disabled")),
        "{:?}",
        shown(&p)
    );
    assert!(p.checkpoint.unwrap().annotated_nodes.is_empty());

    // With the default, the same lost annotations are set again until the pool is done.
    let p = plan(&d, &clean, Some(&next), mins(3));
    assert!(
        shown(&p).contains(&"annotate m1 scale-down-disabled".to_string()),
        "{:?}",
        shown(&p)
    );
}

#[test]
fn a_halted_pool_without_a_cluster_autoscaler_does_not_keep_the_annotations() {
    // Halted, the pool may wait days for a person; with the default it keeps its
    // annotations until resumed, with the flag they go at once.
    let (d, mut c) = soaking();
    c.halted = Some("batch 1: a gate failed".into());
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(2));
    assert!(
        shown(&p).iter().all(|a| !a.contains("scale-down-disabled")),
        "{:?}",
        shown(&p)
    );
    let p = plan(&d, &no_autoscaler(after_batch1(vec![])), Some(&c), mins(2));
    assert_eq!(p.status.reason, "Halted");
    assert_eq!(
        shown(&p)
            .into_iter()
            .filter(|a| a.contains("scale-down-disabled"))
            .collect::<Vec<_>>(),
        [
            "remove scale-down-disabled from m1",
            "remove scale-down-disabled from m2"
        ]
    );
}

#[test]
fn the_surge_never_exceeds_the_size_at_start_plus_one_batch() {
    // The autoscaler added a fifth instance since the rotation started at 4: batch 2 may
    // bring the group to 6, so it surges by one only.
    let mut nodes = old4();
    nodes.push(node("n5").ready());
    let p = plan(&desired(2), &world(nodes), Some(&cp(Stage::Between)), t0());
    assert_eq!(shown(&p)[1], "set capacity 6 (max 6)");
    let c = p.checkpoint.unwrap();
    assert_eq!(c.stage.batch().unwrap().old_nodes.len(), 1);
}

#[test]
fn new_nodes_get_the_autoscaler_annotation_then_gates_then_cordon() {
    let mut w = surged(old4());
    for n in &mut w.nodes {
        n.scale_down_disabled = false;
    }
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::WaitingReady { batch: batch12() })),
        t0(),
    );
    // Ready and the gates pass: annotate, cordon, and (nothing to evict here) wait for an
    // observation made after the cordons before terminating.
    assert_eq!(
        shown(&p),
        [
            "annotate m1 scale-down-disabled",
            "annotate m2 scale-down-disabled",
            "cordon n1",
            "cordon n2"
        ]
    );
    let next = p.checkpoint.unwrap();
    assert_eq!(next.annotated_nodes, ["m1", "m2"]);
    assert!(matches!(next.stage, Stage::Draining { .. }));

    // A crash lost all four: the annotations and the cordons are sent again, nothing is
    // terminated on this (pre-cordon) observation.
    let p = plan(&desired(2), &w, Some(&next), mins(1));
    assert_eq!(
        shown(&p),
        [
            "annotate m1 scale-down-disabled",
            "annotate m2 scale-down-disabled",
            "cordon n1",
            "cordon n2"
        ]
    );
    assert!(matches!(
        p.checkpoint.unwrap().stage,
        Stage::Draining { .. }
    ));

    // Once cordoned and empty, the nodes are terminated.
    let mut w = surged(old4());
    w.nodes[0].cordoned = true;
    w.nodes[1].cordoned = true;
    let p = plan(&desired(2), &w, Some(&next), mins(2));
    assert_eq!(shown(&p), ["terminate i-n1", "terminate i-n2"]);
}

#[test]
fn gates_hold_pause_or_roll_back_before_anything_is_cordoned() {
    let c = cp(Stage::Gating { batch: batch12() });
    let mut w = surged(old4());
    w.gates = GateVerdict::Pending("error-rate".into());
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert!(p.actions.is_empty());
    assert!(p.status.message.contains("error-rate"));

    w.gates = GateVerdict::Failed {
        gate: "error-rate".into(),
        reason: "0.07 > max 0.01".into(),
    };
    let p = plan(&desired(2), &w, Some(&c), t0());
    // Halted: the group's template goes back to the origin image (invariant 8).
    assert_eq!(shown(&p), ["set image ami-0000000000000000a"]);
    assert_eq!(p.status.phase, Phase::Paused);
    assert!(p.status.message.contains("0.07 > max 0.01"));
    assert!(p.checkpoint.unwrap().halted.is_some());

    let mut d = desired(2);
    d.policy.on_gate_failure = OnGateFailure::Rollback;
    let p = plan(&d, &w, Some(&c), t0());
    // The surge instances are cordoned; they are terminated once seen empty after that.
    assert_eq!(
        shown(&p),
        ["set image ami-0000000000000000a", "cordon m1", "cordon m2"]
    );
    let next = p.checkpoint.unwrap();
    assert!(next.rolling_back);
    assert_eq!(next.rejected_image.as_deref(), Some(NEW));
    assert_eq!(next.target_image, OLD);
    assert_eq!(p.status.phase, Phase::RollingBack);
}

#[test]
fn a_drain_evicts_within_pdbs_and_skips_daemonset_and_mirror_pods() {
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-1").pdb("web", 1))
            .pod(pod("ds-1").kind(PodKind::DaemonSet))
            .pod(pod("static-1").kind(PodKind::Mirror)),
        node("n2")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-2").pdb("web", 1))
            .pod(pod("db-0").pdb("db", 0)),
        node("n3"),
        node("n4").ready(),
    ];
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&desired(2), &surged(nodes), Some(&c), t0());
    assert_eq!(shown(&p), ["evict app/web-1"]);
    assert!(
        p.status
            .message
            .contains("PodDisruptionBudget app/web allows")
    );
    assert!(
        p.status
            .message
            .contains("PodDisruptionBudget app/db allows")
    );
    assert_eq!(p.status.phase, Phase::Rotating);
}

#[test]
fn a_batch_of_thousands_of_pods_names_ten_in_its_message_halt_and_stop_note() {
    // 3,000 pods on each of the batch's two nodes, every one held by a budget that allows
    // nothing: the draining message, the drain timeout's halt and its stop note name ten
    // and count the rest, so that the pool's status stays small (`rotate::listing`).
    let held = |n: &str| {
        let mut node = node(n).ready().cordoned_by("general/batch-1");
        for i in 0..3000 {
            node = node.pod(pod(&format!("{n}-web-{i}")).pdb("web", 0));
        }
        node
    };
    let nodes = vec![held("n1"), held("n2"), node("n3"), node("n4").ready()];
    let c = cp(Stage::Draining { batch: batch12() });
    let w = surged(nodes);
    let names_ten = |message: &str| {
        assert!(message.contains("… and 5990 more"), "{message}");
        assert!(message.len() < 2000, "{} bytes", message.len());
    };
    let p = plan(&desired(2), &w, Some(&c), mins(29));
    assert_eq!(p.status.reason, "Draining");
    names_ten(&p.status.message);
    let note = p.status.stop.as_ref().expect("a held drain has a note");
    assert_eq!(note.blocked_by.len(), 11, "{:?}", note.blocked_by);
    let p = plan(&desired(2), &w, Some(&c), mins(30));
    assert_eq!(p.status.reason, "DrainTimeout");
    names_ten(&p.status.message);
    let halted = p.checkpoint.as_ref().unwrap().halted.as_deref().unwrap();
    assert!(halted.len() < 2000, "{} bytes", halted.len());
}

#[test]
fn the_eviction_interval_spaces_evictions() {
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("a"))
            .pod(pod("b")),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let mut d = desired(2);
    d.policy.drain.eviction_interval = GoDuration::from_secs(60);
    let mut c = cp(Stage::Draining { batch: batch12() });
    let w = surged(nodes);
    let p = plan(&d, &w, Some(&c), t0());
    assert_eq!(shown(&p), ["evict app/a"]);
    assert_eq!(p.checkpoint.as_ref().unwrap().last_eviction, Some(t0()));
    c.last_eviction = Some(t0());
    let p = plan(&d, &w, Some(&c), t0() + Duration::seconds(59));
    assert!(p.actions.is_empty());
    let p = plan(&d, &w, Some(&c), t0() + Duration::seconds(60));
    assert_eq!(shown(&p), ["evict app/a"]);
}

#[test]
fn a_drain_timeout_pauses_naming_the_blockers_or_forces() {
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("db-0").pdb("db", 0)),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let c = cp(Stage::Draining { batch: batch12() });
    let w = surged(nodes);
    let p = plan(&desired(2), &w, Some(&c), mins(29));
    assert_eq!(p.status.phase, Phase::Rotating);
    let p = plan(&desired(2), &w, Some(&c), mins(30));
    assert_eq!(p.status.phase, Phase::Paused);
    assert_eq!(p.status.reason, "DrainTimeout");
    assert!(p.status.message.contains("app/db-0"));
    assert!(p.status.message.contains("PodDisruptionBudget app/db"));
    assert_eq!(shown(&p), ["set image ami-0000000000000000a"]);
    // Halted: the next plan does nothing but keep the template on the origin until a human
    // resumes.
    let halted = p.checkpoint.unwrap();
    let mut w_old = w.clone();
    w_old.group.template_image = OLD.into();
    let p = plan(&desired(2), &w_old, Some(&halted), mins(31));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, Phase::Paused);
    // Pausing and unpausing resumes with a fresh timeout.
    let mut d = desired(2);
    d.policy.paused = true;
    let resumed = plan(&d, &w, Some(&halted), mins(40)).checkpoint.unwrap();
    assert!(resumed.halted.is_none());
    let p = plan(&desired(2), &w, Some(&resumed), mins(41));
    assert_eq!(p.status.phase, Phase::Rotating);

    let mut d = desired(2);
    d.policy.drain.on_timeout = OnDrainTimeout::Force;
    let p = plan(&d, &w, Some(&c), mins(30));
    assert_eq!(shown(&p), ["force-delete app/db-0"]);
    assert!(p.actions[0].reason.contains("force"));
}

#[test]
fn only_drained_nodes_are_terminated() {
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("ds").kind(PodKind::DaemonSet)),
        node("n2")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("late")),
        node("n3"),
        node("n4").ready(),
    ];
    let c = cp(Stage::Terminating { batch: batch12() });
    let p = plan(&desired(2), &surged(nodes), Some(&c), t0());
    assert_eq!(shown(&p), ["terminate i-n1"]);
}

#[test]
fn cordons_nobody_owns_are_undone_and_human_cordons_are_left_alone() {
    let nodes = vec![
        node("n1").ready().image(NEW).cordoned_by("general/batch-7"),
        node("n2").ready().image(NEW).cordoned(),
        node("n3").ready().image(NEW),
        node("n4").ready().image(NEW),
    ];
    let p = plan(&desired(2), &world(nodes), Some(&cp(Stage::Between)), t0());
    assert_eq!(shown(&p)[0], "uncordon n1");
    assert!(p.actions[0].reason.contains("no batch in progress owns"));
    assert!(!shown(&p).contains(&"uncordon n2".to_string()));
}

#[test]
fn do_not_disrupt_blocks_a_node_with_a_clear_status() {
    let nodes = vec![
        node("n1").ready().image(NEW),
        node("n2").ready().do_not_disrupt(),
        node("n3").ready().pod(pod("batch-job").do_not_disrupt()),
    ];
    let mut w = world(nodes);
    w.group.template_image = NEW.into();
    let p = plan(&desired(1), &w, None, t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, Phase::Paused);
    assert_eq!(p.status.reason, "DoNotDisrupt");
    assert!(
        p.status
            .message
            .contains("node n2 has rota.dev/do-not-disrupt")
    );
    assert!(p.status.message.contains("pod app/batch-job on node n3"));
}

#[test]
fn modes_read_only_and_ignore_change_nothing() {
    let mut d = desired(2);
    d.mode = Mode::ReadOnly;
    let p = plan(&d, &world(old4()), None, t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.dry_run.len(), 2);
    assert_eq!(p.checkpoint, None);
    assert!(p.status.message.starts_with("readOnly: "));
    assert!(p.status.message.contains("would set image"));

    d.mode = Mode::Ignore;
    let p = plan(&d, &world(old4()), None, t0());
    assert!(p.actions.is_empty() && p.dry_run.is_empty());
    assert_eq!(p.status.reason, "NotManaged");
}

#[test]
fn paused_policy_and_windows_hold_the_next_batch() {
    let mut d = desired(2);
    d.policy.paused = true;
    let p = plan(&d, &world(old4()), None, t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, Phase::Paused);

    let mut d = desired(2);
    // t0 is Monday 10:00 UTC = 11:00 in Berlin.
    d.policy.windows = vec![Window {
        days: vec!["Mon".into()],
        start: "12:00".into(),
        end: "14:00".into(),
        time_zone: "Europe/Berlin".into(),
    }];
    let p = plan(&d, &world(old4()), None, t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, Phase::Waiting);
    let p = plan(&d, &world(old4()), None, mins(60));
    assert_eq!(p.actions.len(), 2);
}

#[test]
fn going_back_to_the_origin_mid_drain_abandons_the_batch() {
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-1")),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let mut w = surged(nodes);
    // An evicted pod already landed on m1.
    w.nodes[4].pods.push(pod("web-0").0);
    let c = cp(Stage::Draining { batch: batch12() });
    let mut d = desired(2);
    d.image = OLD.into();
    d.version = "v1".into();
    let p = plan(&d, &w, Some(&c), t0());
    assert_eq!(
        shown(&p),
        [
            "set image ami-0000000000000000a",
            "uncordon n1",
            "uncordon n2",
            "cordon m1",
            "cordon m2",
            "evict app/web-0"
        ]
    );
    let next = p.checkpoint.unwrap();
    assert!(next.rolling_back);
    assert!(next.rejected_image.is_none());
    assert!(matches!(next.stage, Stage::Abandoning { .. }));
    assert_eq!(p.status.phase, Phase::RollingBack);
}

#[test]
fn a_newer_version_abandons_an_undisrupted_batch_and_finishes_a_started_one() {
    let mut d = desired(2);
    d.image = NEWER.into();
    d.version = "v3".into();
    let w = surged(old4());
    let p = plan(
        &d,
        &w,
        Some(&cp(Stage::WaitingReady { batch: batch12() })),
        t0(),
    );
    assert_eq!(
        shown(&p),
        ["set image ami-0000000000000000a", "cordon m1", "cordon m2"]
    );
    let next = p.checkpoint.unwrap();
    assert_eq!(next.target_image, NEWER);
    assert!(!next.rolling_back);

    let nodes = vec![
        node("n1").ready().cordoned_by("general/batch-1"),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let p = plan(
        &d,
        &surged(nodes),
        Some(&cp(Stage::Terminating { batch: batch12() })),
        t0(),
    );
    assert_eq!(shown(&p), ["terminate i-n1", "terminate i-n2"]);
}

#[test]
fn new_nodes_never_ready_abandon_the_batch_and_pause() {
    // With `nodeReadyRetries: 0`: the first timeout fails the batch.
    let mut d = desired(2);
    d.policy.node_ready_retries = 0;
    let mut nodes = old4();
    nodes.push(node("m1").image(NEW));
    nodes.push(node("m2").image(NEW).unregistered());
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&d, &w, Some(&c), mins(14));
    assert!(p.actions.is_empty());
    let p = plan(&d, &w, Some(&c), mins(15));
    // m2 never registered: there is no node to cordon. m1 is cordoned, and terminated on
    // a later observation.
    assert_eq!(
        shown(&p),
        [
            "set image ami-0000000000000000a",
            "cordon m1",
            "terminate i-m2"
        ]
    );
    assert!(
        p.status
            .message
            .contains("not Ready within nodeReadyTimeout 15m")
    );
    // Once they are gone, the pool is paused with the reason.
    let w = world(old4());
    let p = plan(&d, &w, p.checkpoint.as_ref(), mins(16));
    assert_eq!(p.status.phase, Phase::Paused);
    assert!(p.status.message.contains("nodeReadyTimeout"));
}

/// Issue 26 (2): a new node that is not Ready in time is replaced (`nodeReadyRetries`,
/// default 2), after a backoff, before the batch fails; the replacement gets its own
/// `nodeReadyTimeout`.
#[test]
fn a_new_node_not_ready_in_time_is_replaced_before_the_batch_fails() {
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    nodes.push(node("m2").image(NEW));
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let c = cp(Stage::WaitingReady { batch: batch12() });
    // At the timeout the replacement waits out its backoff; the status says when.
    let p = plan(&desired(2), &w, Some(&c), mins(15));
    assert!(shown(&p).is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.reason, "ReplacingNotReady");
    assert!(
        p.status.message.contains("replacing them at")
            && p.status.message.contains("attempt 2 of 3"),
        "{}",
        p.status.message
    );
    // Then m2 alone is replaced: terminated (its capacity with it), and the batch goes back
    // to surging for it.
    let p = plan(
        &desired(2),
        &w,
        p.checkpoint.as_ref(),
        mins(15) + Duration::seconds(30),
    );
    assert_eq!(shown(&p), ["terminate i-m2"]);
    assert!(matches!(
        &p.actions[0].action,
        Action::Terminate { node: Some(n), .. } if n == "m2"
    ));
    let replaced = p.checkpoint.clone().unwrap();
    let Stage::Surging { batch } = &replaced.stage else {
        panic!("{:?}", replaced.stage);
    };
    assert_eq!(
        (batch.ready_retries, batch.never_ready.clone()),
        (1, vec!["i-m2".to_string()])
    );
    // While m2 terminates, nothing is surged: never more than one batch of surge.
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    nodes.push(node("m2").image(NEW).terminating_instance());
    let mut w = world(nodes);
    w.group.desired = 5;
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(&desired(2), &w, Some(&replaced), mins(16));
    assert!(shown(&p).is_empty(), "{:?}", shown(&p));
    assert!(
        p.status
            .message
            .contains("waiting for replaced instance(s) i-m2 to go"),
        "{}",
        p.status.message
    );
    // Gone: the batch surges again for it.
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(&desired(2), &w, p.checkpoint.as_ref(), mins(17));
    assert_eq!(shown(&p), ["set capacity 6"]);
    // m3 comes, with a fresh nodeReadyTimeout; Ready, the batch goes on.
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    nodes.push(node("m3").image(NEW));
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(&desired(2), &w, p.checkpoint.as_ref(), mins(18));
    assert_eq!(p.status.reason, "WaitingReady", "{}", p.status.message);
    assert!(p.status.message.contains("i-m3"), "{}", p.status.message);
    let waiting = p.checkpoint.clone().unwrap();
    // A fresh timeout, from the replacement (15:30): still waiting at minute 30.
    let p = plan(&desired(2), &w, Some(&waiting), mins(30));
    assert_eq!(p.status.reason, "WaitingReady", "{}", p.status.message);
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    nodes.push(node("m3").ready().image(NEW));
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(&desired(2), &w, Some(&waiting), mins(33));
    assert_ne!(p.status.phase, Phase::Paused, "{}", p.status.message);
    assert!(
        !p.status.message.contains("not Ready"),
        "{}",
        p.status.message
    );
}

/// An image that never boots fails every attempt: once the replacements are spent, the pool
/// halts naming the image, how many of its instances never got Ready, and the last ones.
#[test]
fn an_image_that_never_boots_halts_naming_it_once_the_replacements_are_spent() {
    let mut nodes = old4();
    nodes.push(node("m5").image(NEW));
    nodes.push(node("m6").image(NEW));
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let mut batch = batch12();
    batch.new_instances = vec!["i-m5".into(), "i-m6".into()];
    batch.replaced = ["i-m1", "i-m2", "i-m3", "i-m4"].map(String::from).to_vec();
    batch.never_ready = batch.replaced.clone();
    batch.ready_retries = 2;
    batch.stage_since = mins(40);
    let c = cp(Stage::WaitingReady { batch });
    let p = plan(&desired(2), &w, Some(&c), mins(55));
    assert!(
        !shown(&p).iter().any(|a| a.starts_with("replace")),
        "no third replacement: {:?}",
        shown(&p)
    );
    assert!(
        p.status.message.contains(&format!(
            "image {NEW} (v2) did not boot: 6 of 6 new instance(s) never Ready within nodeReadyTimeout 15m, over 3 attempt(s) (last: i-m5 (node m5 not Ready), i-m6 (node m6 not Ready))"
        )),
        "{}",
        p.status.message
    );
}

/// `old4` plus the surge of `batch12` listed by the cloud but not created: m1 booted and
/// Ready, m2 still being created, its last attempt failed with `error`.
fn surge_failing(error: crate::cloud::LaunchError) -> Observed {
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    nodes.push(node("m2").image(NEW).unregistered());
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    for i in &mut w.group.instances {
        if i.id == "i-m2" {
            i.zone = "us-central1-b".into();
            i.launch_error = Some(error.clone());
        }
    }
    w
}

#[test]
fn a_surge_the_cloud_cannot_create_for_quota_fails_the_batch_at_once_naming_zone_and_code() {
    use crate::cloud::{CloudErrorKind, LaunchError};
    let w = surge_failing(LaunchError {
        kind: CloudErrorKind::Quota,
        code: "QUOTA_EXCEEDED".into(),
        message: "Quota 'CPUS' exceeded. Limit: 24.0 in region us-central1.".into(),
    });
    // Long before nodeReadyTimeout (15m): waiting would only delay the same end.
    for stage in [
        Stage::WaitingReady { batch: batch12() },
        Stage::Surging {
            batch: Batch {
                new_instances: vec![],
                ..batch12()
            },
        },
    ] {
        let p = plan(&desired(2), &w, Some(&cp(stage)), mins(1));
        assert_eq!(p.status.phase, Phase::RollingBack, "{:?}", p.status);
        let msg = &p.status.message;
        assert!(
            msg.contains("i-m2 in zone us-central1-b")
                && msg.contains("QUOTA_EXCEEDED")
                && msg.contains("QuotaExceeded"),
            "{msg}"
        );
        // Undone like any failed batch: the template back on the origin image, the new
        // node cordoned, the instance never created terminated.
        assert_eq!(
            shown(&p),
            [
                "set image ami-0000000000000000a",
                "cordon m1",
                "terminate i-m2"
            ]
        );
        // Once the surge is gone the pool is paused with the cloud's reason.
        let p = plan(&desired(2), &world(old4()), p.checkpoint.as_ref(), mins(2));
        assert_eq!(p.status.phase, Phase::Paused);
        assert!(
            p.status.message.contains("QUOTA_EXCEEDED"),
            "{}",
            p.status.message
        );
        assert!(
            p.checkpoint
                .as_ref()
                .and_then(|c| c.halted.as_deref())
                .is_some_and(|h| h.contains("us-central1-b")),
            "halted with the reason"
        );
    }
}

/// Issue 26 (2): a zone out of capacity heals as capacity frees: the surge is waited out,
/// then asked for again with backoff (`nodeReadyRetries`); when the attempts are spent, the
/// pool stops saying the cloud had no capacity, never that the image did not boot.
#[test]
fn a_zone_out_of_capacity_is_asked_again_with_backoff_and_never_blamed_on_the_image() {
    use crate::cloud::{CloudErrorKind, LaunchError};
    let w = surge_failing(LaunchError {
        kind: CloudErrorKind::Quota,
        code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
        message: "The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request.".into(),
    });
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), mins(1));
    assert_eq!(p.status.phase, Phase::Rotating, "{:?}", p.status);
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert!(
        p.status.message.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{}",
        p.status.message
    );
    // At the timeout: asked again after a backoff, the status saying when and which attempt.
    let p = plan(&desired(2), &w, Some(&c), mins(15));
    assert_eq!(p.status.reason, "ReplacingNotReady");
    let note = p.status.stop.as_ref().expect("a wait says who moves it on");
    assert_eq!(note.by, crate::rotate::stop::MovedBy::Rota);
    assert_eq!(
        note.blocked_by,
        [
            "instance i-m2 (no node registered; the cloud's last attempt to create i-m2 in zone us-central1-b failed: ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/p/zones/us-central1-b' does not have enough resources available to fulfill the request.)"
        ]
    );
    assert!(note.next.contains("at 2026-"), "{}", note.next);
    // The attempts spent: the batch fails naming the capacity, not the image.
    let mut spent = desired(2);
    spent.policy.node_ready_retries = 0;
    let p = plan(&spent, &w, Some(&c), mins(15));
    assert_eq!(p.status.phase, Phase::RollingBack);
    assert!(
        p.status
            .message
            .contains("the cloud had no capacity for 1 new instance(s)")
            && !p.status.message.contains("did not boot"),
        "{}",
        p.status.message
    );
}

#[test]
fn a_launch_failure_the_cloud_retries_is_waited_out_and_named() {
    use crate::cloud::{CloudErrorKind, LaunchError};
    let w = surge_failing(LaunchError {
        kind: CloudErrorKind::Transient,
        code: "INTERNAL_ERROR".into(),
        message: "Internal error. Please try again.".into(),
    });
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), mins(1));
    assert_eq!(p.status.phase, Phase::Rotating);
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert!(
        p.status.message.contains("i-m2")
            && p.status
                .message
                .contains("in zone us-central1-b failed: INTERNAL_ERROR"),
        "{}",
        p.status.message
    );
    // Still not created at the deadline (and no replacement allowed): the batch fails as
    // any that never came Ready, and says why.
    let mut no_retry = desired(2);
    no_retry.policy.node_ready_retries = 0;
    let p = plan(&no_retry, &w, Some(&c), mins(15));
    assert_eq!(p.status.phase, Phase::RollingBack);
    assert!(
        p.status.message.contains("nodeReadyTimeout")
            && p.status.message.contains("INTERNAL_ERROR"),
        "{}",
        p.status.message
    );
}

#[test]
fn a_partial_rollout_stops_at_its_percent_and_restores_the_template() {
    let nodes = vec![
        node("n1").ready().image(NEW),
        node("n2").ready().image(NEW),
        node("n3").ready(),
        node("n4").ready(),
    ];
    let mut w = world(nodes);
    w.group.template_image = NEW.into();
    w.group.max = 6;
    let mut d = desired(2);
    d.policy.percent = 50;
    let p = plan(&d, &w, Some(&cp(Stage::Between)), t0());
    assert_eq!(
        shown(&p),
        ["set max size 4", "set image ami-0000000000000000a"]
    );
    assert!(p.actions[1].reason.contains("partial rollout (50%)"));
    // Restored: done, and it stays done.
    w.group.template_image = OLD.into();
    w.group.max = 4;
    let p = plan(&d, &w, p.checkpoint.as_ref(), t0());
    assert_eq!(p.status.phase, Phase::Succeeded);
    let p = plan(&d, &w, p.checkpoint.as_ref(), mins(5));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, Phase::Succeeded);
}

#[test]
fn a_rolled_back_image_stays_failed_until_the_repo_moves_on() {
    let mut c = cp(Stage::Done);
    c.rejected_image = Some(NEW.into());
    c.rolling_back = true;
    c.target_image = OLD.into();
    c.rollback_reason = Some("health gate error-rate failed".into());
    let w = world(old4());
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.status.phase, Phase::Failed);
    assert!(p.status.message.contains("error-rate"));
    let mut d = desired(2);
    d.image = NEWER.into();
    let p = plan(&d, &w, Some(&c), t0());
    assert_eq!(p.status.phase, Phase::Rotating);
}

#[test]
fn a_rollback_stop_clears_once_the_repo_pins_the_version_in_force() {
    // Rolled back from NEW after a gate; the repo still pins NEW: a person must act.
    let mut c = cp(Stage::Done);
    c.rejected_image = Some(NEW.into());
    c.rolling_back = true;
    c.target_image = OLD.into();
    c.target_version = "the previous version".into();
    c.rollback_reason = Some("health gate error-rate failed".into());
    let w = world(old4());
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert_eq!(p.status.phase, Phase::Failed);
    assert_eq!(p.status.stop.as_ref().map(|s| s.by), Some(MovedBy::Person));
    // The revert pins OLD, the image every node runs: done, no stop, nothing to do.
    let mut back = desired(2);
    back.version = "v1".into();
    back.image = OLD.into();
    let p = plan(&back, &w, Some(&c), t0());
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.phase, Phase::Succeeded);
    assert_eq!(p.status.stop, None, "{}", p.status.message);
    assert!(
        p.status.message.contains("rolled back to v1"),
        "{}",
        p.status.message
    );
    // A fast rollback (the pin went back mid-rotation) ends on the pin: no stop either.
    let mut c = cp(Stage::Done);
    c.rolling_back = true;
    c.target_image = OLD.into();
    c.target_version = "v1".into();
    let p = plan(&back, &w, Some(&c), t0());
    assert_eq!(p.status.phase, Phase::Succeeded);
    assert_eq!(p.status.stop, None, "{}", p.status.message);
}

#[test]
fn a_retry_that_succeeds_clears_the_stop() {
    // Halted by a gate with onGateFailure: pause, before anything was cordoned.
    let mut d = desired(2);
    d.policy.on_gate_failure = OnGateFailure::Pause;
    let nodes = vec![
        node("n1").ready(),
        node("n2").ready(),
        node("n3").ready(),
        node("n4").ready(),
        node("m1").ready().image(NEW),
        node("m2").ready().image(NEW),
    ];
    let mut w = world(nodes);
    w.group.template_image = NEW.into();
    w.group.desired = 6;
    w.group.max = 6;
    w.gates = GateVerdict::Failed {
        gate: "error-rate".into(),
        reason: "0.07 above max 0.01".into(),
    };
    let p = plan(&d, &w, Some(&cp(Stage::Gating { batch: batch12() })), t0());
    assert_eq!(p.status.phase, Phase::Paused);
    assert_eq!(p.status.stop.as_ref().map(|s| s.by), Some(MovedBy::Person));
    // `rota ctl retry` once the gate passes again: the stop is gone on the next pass.
    let mut c = p.checkpoint.clone().unwrap();
    let req = operator::Request::new(operator::Verb::Retry, mins(1), Some("ana"));
    assert!(operator::apply(&mut c, &req, mins(1)).is_some());
    w.gates = GateVerdict::Passing;
    let p = plan(&d, &w, Some(&c), mins(1));
    assert_ne!(p.status.phase, Phase::Paused);
    assert_eq!(p.status.stop, None, "{}", p.status.message);
}

#[test]
fn a_pool_without_a_slot_waits_to_start_but_a_started_rotation_continues() {
    let mut w = world(old4());
    w.start_hold = Some("maxParallelPools is 1 and pool(s) gpu are rotating".into());
    let p = plan(&desired(2), &w, None, t0());
    assert!(p.actions.is_empty());
    assert_eq!(p.checkpoint, None);
    assert_eq!(p.status.phase, Phase::Waiting);
    assert_eq!(p.status.reason, "MaxParallelPools");
    assert!(p.status.message.contains("pool(s) gpu are rotating"));
    // Already rotating: the hold does not apply.
    let p = plan(&desired(2), &w, Some(&cp(Stage::Between)), t0());
    assert_eq!(p.actions.len(), 2);
}

#[test]
fn an_image_the_cloud_cannot_launch_holds_the_start_and_a_switch_but_not_a_rotation_on_it() {
    let mut w = world(old4());
    w.image_hold = Some((
        "ImageNotFound".into(),
        "AMI ami-new does not exist in us-east-1".into(),
    ));
    let p = plan(&desired(2), &w, None, t0());
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.checkpoint, None);
    assert_eq!(p.status.phase, Phase::Waiting);
    assert_eq!(p.status.reason, "ImageNotFound");
    assert!(p.status.message.contains("does not exist in us-east-1"));
    // A rotation already on the image goes on: it was checked when it started.
    let p = plan(&desired(2), &w, Some(&cp(Stage::Between)), t0());
    assert_eq!(p.actions.len(), 2);
    // A rotation under way is not switched to a newer image that cannot launch.
    let mut d = desired(2);
    d.image = NEWER.into();
    let p = plan(&d, &w, Some(&cp(Stage::Between)), t0());
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.reason, "ImageNotFound");
    // An unknown word from the edge is reported as ImageUnavailable.
    w.image_hold = Some(("Odd".into(), "could not check".into()));
    assert_eq!(
        plan(&desired(2), &w, None, t0()).status.reason,
        "ImageUnavailable"
    );
}

#[test]
fn empty_dir_pods_stay_when_the_policy_keeps_their_data() {
    let mut p = pod("cache-0");
    p.0.uses_empty_dir = true;
    let nodes = vec![
        node("n1").ready().cordoned_by("general/batch-1").pod(p),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let c = cp(Stage::Draining { batch: batch12() });
    let mut d = desired(2);
    d.policy.drain.delete_empty_dir_data = false;
    let w = surged(nodes);
    let p = plan(&d, &w, Some(&c), t0());
    assert!(p.actions.is_empty());
    assert!(
        p.status
            .message
            .contains("app/cache-0 (uses emptyDir and drain.deleteEmptyDirData is false)")
    );
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert_eq!(shown(&p), ["evict app/cache-0"]);
}

// --- issue 11 item 3: each defect, a test written before its fix -------------------------

/// The shown form of setting the group's template back to the origin image.
const BACK_TO_OLD: &str = "set image ami-0000000000000000a";

#[test]
fn undoing_a_batch_cordons_its_new_nodes_and_terminates_them_only_once_seen_empty() {
    // (a) A newer version abandons an undisrupted batch whose new nodes are Ready and look
    // empty. A pod may land on them between this observation and the cordon: the plan only
    // cordons; termination waits for an observation made after the cordons.
    let mut d = desired(2);
    d.image = NEWER.into();
    d.version = "v3".into();
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&d, &surged(old4()), Some(&c), t0());
    assert!(
        !shown(&p).iter().any(|a| a.starts_with("terminate")),
        "{:?}",
        shown(&p)
    );
    assert_eq!(shown(&p), [BACK_TO_OLD, "cordon m1", "cordon m2"]);
    // Observed again: m1 cordoned and empty goes; m2 got a pod in between and is drained.
    let next = p.checkpoint.unwrap();
    let mut w = surged(old4());
    w.group.template_image = OLD.into();
    w.nodes[4].cordoned = true;
    w.nodes[5].cordoned = true;
    w.nodes[5].pods.push(pod("web-9").0);
    let p = plan(&d, &w, Some(&next), mins(1));
    assert_eq!(shown(&p), ["terminate i-m1", "evict app/web-9"]);
}

#[test]
fn a_batch_node_that_left_the_selector_is_drained_before_it_is_terminated() {
    // (b) n1 lost the pool's label mid-drain: the selector no longer picks it, but its
    // instance is the batch's and it still runs web-1.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-1")),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let mut w = surged(nodes);
    let n1 = w.nodes.remove(0);
    w.departed.push(n1);
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert!(
        !shown(&p).contains(&"terminate i-n1".to_string()),
        "{:?}",
        shown(&p)
    );
    assert_eq!(shown(&p), ["evict app/web-1"]);
    // Terminating, with the pod back (scheduled before the cordon): still not terminated.
    let c = cp(Stage::Terminating { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert!(
        !shown(&p).contains(&"terminate i-n1".to_string()),
        "{:?}",
        shown(&p)
    );
}

#[test]
fn a_surge_instance_the_cloud_replaced_is_followed_to_its_replacement() {
    // (c) i-m2 failed its boot and the cloud replaced it with i-m3 at minute 14; at minute
    // 16 (past the batch's first nodeReadyTimeout of 15m) the batch waits for i-m3.
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW));
    nodes.push(node("m3").image(NEW).unregistered());
    let mut w = world(nodes);
    w.group.desired = 6;
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), mins(16));
    assert_eq!(p.status.phase, Phase::Rotating, "{}", p.status.message);
    assert!(p.status.message.contains("i-m3"), "{}", p.status.message);
    let next = p.checkpoint.unwrap();
    let Stage::WaitingReady { batch } = &next.stage else {
        panic!("{:?}", next.stage)
    };
    assert_eq!(batch.new_instances, ["i-m1", "i-m3"]);
    assert_eq!(batch.replaced, ["i-m2"]);
    assert_eq!(batch.stage_since, mins(16));
    // Its own nodeReadyTimeout runs out at minute 31: then the batch fails.
    let p = plan(&desired(2), &w, Some(&next), mins(30));
    assert_eq!(p.status.phase, Phase::Rotating);
    let p = plan(&desired(2), &w, Some(&next), mins(31));
    assert!(
        p.status.message.contains("nodeReadyTimeout"),
        "{}",
        p.status.message
    );
    // Bounded: an image that never boots, replaced again and again, gets no fresh timeout
    // once every surge instance has been replaced once.
    let mut b = batch12();
    b.replaced = vec!["i-x1".into(), "i-x2".into()];
    b.new_instances = vec!["i-m1".into(), "i-m2".into()];
    let c = cp(Stage::WaitingReady { batch: b });
    let p = plan(&desired(2), &w, Some(&c), mins(16));
    assert!(
        p.status.message.contains("nodeReadyTimeout"),
        "{}",
        p.status.message
    );
}

/// A describe that lagged made i-m2 look taken back; listed again, alive and Ready, it is the
/// batch's again at once (the cloud took nothing back and will launch no replacement: waiting
/// for one only ran out nodeReadyTimeout, chaos seeds 91 and 107).
#[test]
fn a_surge_instance_a_lagging_describe_hid_is_the_batchs_again_when_listed() {
    let mut b = batch12();
    b.new_instances = vec!["i-m1".into()];
    b.replaced = vec!["i-m2".into()];
    let c = cp(Stage::WaitingReady { batch: b });
    let w = surged(old4());
    let p = plan(&desired(2), &w, Some(&c), mins(5));
    assert!(
        !p.status.message.contains("took back"),
        "{}",
        p.status.message
    );
    let next = p.checkpoint.unwrap();
    let batch = next.stage.batch().expect("a batch");
    assert!(batch.replaced.is_empty(), "{:?}", batch.replaced);
    let mut ids = batch.new_instances.clone();
    ids.sort();
    assert_eq!(ids, ["i-m1", "i-m2"]);
}

#[test]
fn a_halted_batch_puts_the_template_back_on_the_origin_image() {
    // (d) A drain timeout halts batch 1 while the group's template boots NEW: every
    // replacement the cloud or the autoscaler makes while halted would boot it.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("db-0").pdb("db", 0)),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let w = surged(nodes);
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), mins(30));
    assert_eq!(p.status.reason, "DrainTimeout");
    assert_eq!(shown(&p), [BACK_TO_OLD]);
    assert!(p.actions[0].reason.contains("the batch stopped"));
    // Still halted, still on NEW (the call failed): sent again.
    let halted = p.checkpoint.unwrap();
    let p = plan(&desired(2), &w, Some(&halted), mins(31));
    assert_eq!(shown(&p), [BACK_TO_OLD]);
    // A failed gate with onGateFailure: pause, the same.
    let mut w = surged(old4());
    w.gates = GateVerdict::Failed {
        gate: "error-rate".into(),
        reason: "0.07 > max 0.01".into(),
    };
    let c = cp(Stage::Gating { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), t0());
    assert_eq!(p.status.reason, "GateFailed");
    assert_eq!(shown(&p), [BACK_TO_OLD]);
}

/// Issue 26 (4): the group as the user left it on every stop, not only at the end. Measured
/// before: after a never-Ready halt the template and desired capacity were back but the
/// maximum stayed raised (4, was 3), room for an autoscaler to grow the pool past it while
/// the rotation waited for a person.
#[test]
fn a_stopped_rotation_gives_the_raised_max_back_while_it_waits() {
    let set_max = |p: &Plan| -> Vec<String> {
        shown(p)
            .into_iter()
            .filter(|a| a.starts_with("set max size"))
            .collect()
    };
    // Batch 1's surge (max 4 raised to 6) never became Ready and was taken back: four old
    // nodes, desired 4, the maximum still 6.
    let mut w = world(old4());
    w.group.max = 6;
    let mut c = cp(Stage::Between);
    c.halted =
        Some("batch 1: new instance(s) i-m1, i-m2 not Ready within nodeReadyTimeout 15m".into());
    let p = plan(&desired(2), &w, Some(&c), mins(20));
    assert_eq!(p.status.reason, "Halted");
    assert_eq!(set_max(&p), ["set max size 4"]);
    assert!(
        p.actions.iter().any(|a| a.reason.contains("the user's 4")),
        "{:?}",
        p.actions
    );
    // Given back, the next passes leave it.
    w.group.max = 4;
    let p = plan(&desired(2), &w, p.checkpoint.as_ref(), mins(21));
    assert!(set_max(&p).is_empty(), "{:?}", shown(&p));
    // The autoscaler grew the group to 5 before the halt: never below what runs.
    let mut grown = old4();
    grown.push(node("n5").ready());
    let mut w = world(grown);
    w.group.max = 6;
    let p = plan(&desired(2), &w, Some(&c), mins(20));
    assert_eq!(set_max(&p), ["set max size 5"]);
    // Paused (by policy, or by an operator) between batches with the maximum still raised:
    // given back too.
    let mut paused = desired(2);
    paused.policy.paused = true;
    let mut w = world(old4());
    w.group.max = 6;
    let p = plan(&paused, &w, Some(&cp(Stage::Between)), mins(20));
    assert_eq!(p.status.reason, "PausedByPolicy");
    assert_eq!(set_max(&p), ["set max size 4"]);
    let mut by_operator = cp(Stage::Between);
    by_operator.operator_paused = Some("paused by alice".into());
    let p = plan(&desired(2), &w, Some(&by_operator), mins(20));
    assert_eq!(p.status.reason, "PausedByOperator");
    assert_eq!(set_max(&p), ["set max size 4"]);
    // Paused mid-batch with its surge up (desired 6): the maximum holds them, no lower.
    let p = plan(
        &paused,
        &surged(old4()),
        Some(&cp(Stage::Draining { batch: batch12() })),
        mins(20),
    );
    assert!(set_max(&p).is_empty(), "{:?}", shown(&p));
}

#[test]
fn cleanup_restores_the_raised_max_even_when_the_group_grew() {
    // (e) max 4 was raised to 6 for the surge; the autoscaler grew the group to 5 since.
    let nodes = (1..=5)
        .map(|i| node(&format!("n{i}")).ready().image(NEW))
        .collect();
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(&desired(2), &w, Some(&cp(Stage::Cleanup)), t0());
    assert_eq!(shown(&p), ["set max size 5"]);
    assert!(
        p.actions[0].reason.contains("grew to 5"),
        "{}",
        p.actions[0].reason
    );
}

#[test]
fn ready_old_nodes_go_first_and_a_dead_kubelets_evicted_pods_do_not_hold_the_batch() {
    // (f) n3 is not Ready (old4): it is chosen last.
    let p = plan(&desired(2), &world(old4()), None, t0());
    let chosen: Vec<String> = p
        .checkpoint
        .unwrap()
        .stage
        .batch()
        .unwrap()
        .old_nodes
        .iter()
        .map(|c| c.node.clone())
        .collect();
    assert_eq!(chosen, ["n1", "n2"]);
    // n1's kubelet died after web-1's eviction was accepted: the pod stays Terminating
    // forever. It was evicted; the node is terminated rather than waited on (or forced).
    let nodes = vec![
        node("n1")
            .cordoned_by("general/batch-1")
            .pod(pod("web-1").terminating()),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&desired(2), &surged(nodes), Some(&c), mins(1));
    assert_eq!(shown(&p), ["terminate i-n1", "terminate i-n2"]);
    // On a Ready node a terminating pod is still shutting down: it is waited for.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-1").terminating()),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let p = plan(&desired(2), &surged(nodes), Some(&c), mins(1));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
}

#[test]
fn withdrawing_an_unfulfilled_surge_never_lets_the_cloud_choose_an_instance() {
    // (g) Batch 1 is undone; the cloud never created its two surge instances and the group's
    // capacity is still 6 with 4 instances listed. Lowering it to 4 blindly lets the cloud
    // pick an instance to remove if one appears in between; the withdrawal names the
    // instances it expects, for `apply` to re-check against a fresh description.
    let mut w = world(old4());
    w.group.desired = 6;
    w.group.max = 6;
    let mut b = batch12();
    b.new_instances.clear();
    let c = cp(Stage::Abandoning {
        batch: b,
        why: "quota".into(),
        halt: Some("quota".into()),
    });
    let p = plan(&desired(2), &w, Some(&c), mins(15));
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a.action, Action::SetCapacity { .. })),
        "{:?}",
        shown(&p)
    );
    let withdraw = p
        .actions
        .iter()
        .find_map(|a| match &a.action {
            Action::WithdrawSurge { desired, instances } => Some((*desired, instances.clone())),
            _ => None,
        })
        .expect("a withdrawal");
    assert_eq!(
        withdraw,
        (
            4,
            ["i-n1", "i-n2", "i-n3", "i-n4"].map(String::from).to_vec()
        )
    );
}

#[test]
fn a_pod_under_two_pdbs_waits_named_and_does_not_stop_the_drain() {
    // (i) The Eviction API answers 500 for web-1 (two PDBs select it): asking again on every
    // pass would fail the plan and starve web-2's eviction behind it.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-1").pdb("web", 1).pdb("all", 1)),
        node("n2")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("api-2")),
        node("n3"),
        node("n4").ready(),
    ];
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&desired(2), &surged(nodes), Some(&c), t0());
    assert_eq!(shown(&p), ["evict app/api-2"]);
    assert!(
        p.status
            .message
            .contains("app/web-1 (covered by 2 PodDisruptionBudgets"),
        "{}",
        p.status.message
    );
}

#[test]
fn force_keeps_empty_dir_pods_when_the_policy_keeps_their_data() {
    // (j) drain.onTimeout force, deleteEmptyDirData false: the timeout passes with only the
    // emptyDir pod left. Force must not delete it; the batch halts naming it.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("cache-0").empty_dir())
            .pod(pod("db-0").pdb("db", 0)),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let mut d = desired(2);
    d.policy.drain.on_timeout = OnDrainTimeout::Force;
    d.policy.drain.delete_empty_dir_data = false;
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&d, &surged(nodes), Some(&c), mins(30));
    assert!(
        !shown(&p).contains(&"force-delete app/cache-0".to_string()),
        "{:?}",
        shown(&p)
    );
    assert_eq!(shown(&p), ["force-delete app/db-0"]);
    // Only the emptyDir pod left: halted, named, not an endless force loop.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("cache-0").empty_dir()),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let p = plan(&d, &surged(nodes), Some(&c), mins(30));
    assert_eq!(p.status.phase, Phase::Paused);
    assert!(
        p.status.message.contains("app/cache-0"),
        "{}",
        p.status.message
    );
    assert!(p.checkpoint.unwrap().halted.is_some());
}

// --- pipelining: the next batch boots while the current one soaks -------------------------

/// `old4` after batch 1 (`batch12`): n1 and n2 are gone, m1 and m2 run the new image; plus
/// `extra` (the pipelined batch's new nodes, when they are up).
fn after_batch1(extra: Vec<NodeB>) -> Observed {
    let mut nodes = vec![
        node("n3").ready(),
        node("n4").ready(),
        node("m1").ready().image(NEW).scale_down_disabled(),
        node("m2").ready().image(NEW).scale_down_disabled(),
    ];
    nodes.extend(extra);
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    w
}

/// Batch 2 of `old4`: n3 and n4, replaced by m3 and m4.
fn batch34() -> Batch {
    Batch {
        number: 2,
        old_nodes: ["n3", "n4"]
            .map(|n| ChosenNode {
                node: n.into(),
                instance_id: format!("i-{n}"),
            })
            .to_vec(),
        target_capacity: 6,
        instances_before: ["i-n3", "i-n4", "i-m1", "i-m2"].map(String::from).to_vec(),
        terminating_before: vec![],
        taken_back: vec![],
        new_instances: vec!["i-m3".into(), "i-m4".into()],
        replaced: vec![],
        never_ready: vec![],
        ready_retries: 0,
        replace_at: None,
        stage_since: mins(1),
        started_at: Some(mins(1)),
        cordoned_at: None,
        deferral_ended: vec![],
        replace: false,
    }
}

/// Batch 1 soaking until minute 10, with 10-minute soaks in the policy.
fn soaking() -> (DesiredPool, Checkpoint) {
    let mut d = desired(2);
    d.policy.batch_soak = GoDuration::from_secs(600);
    let mut c = cp(Stage::Soaking {
        batch: batch12(),
        until: mins(10),
    });
    c.batches_started = 1;
    c.annotated_nodes = vec!["m1".into(), "m2".into()];
    (d, c)
}

fn cordons(p: &Plan) -> Vec<String> {
    shown(p)
        .into_iter()
        .filter(|a| a.starts_with("cordon"))
        .collect()
}

#[test]
fn the_next_batch_boots_while_the_current_one_soaks_and_cordons_when_the_soak_ends() {
    let (d, c) = soaking();
    // Batch 1's old instances are gone: batch 2 surges at once, within the bound (4 + 2).
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(1));
    assert_eq!(shown(&p), ["set capacity 6"]);
    assert_eq!(p.status.phase, Phase::Soaking);
    assert!(
        p.status.message.contains("meanwhile batch 2"),
        "{}",
        p.status.message
    );
    let c = p.checkpoint.unwrap();
    assert_eq!(c.stage.name(), "Soaking");
    let Some(Stage::Surging { batch }) = c.next.as_deref() else {
        panic!("{:?}", c.next)
    };
    let old: Vec<&str> = batch.old_nodes.iter().map(|o| o.node.as_str()).collect();
    assert_eq!((batch.number, old), (2, vec!["n3", "n4"]));
    assert_eq!(c.batches_started, 2);

    // Its nodes come up Ready during the soak: annotated and gated, never cordoned yet.
    let up = || {
        let mut w = after_batch1(vec![
            node("m3").ready().image(NEW),
            node("m4").ready().image(NEW),
        ]);
        w.group.desired = 6;
        w
    };
    let p = plan(&d, &up(), Some(&c), mins(5));
    assert_eq!(
        shown(&p),
        [
            "annotate m3 scale-down-disabled",
            "annotate m4 scale-down-disabled"
        ]
    );
    assert!(
        p.status.message.contains("cordons when the soak ends"),
        "{}",
        p.status.message
    );
    let c = p.checkpoint.unwrap();
    assert!(matches!(c.next.as_deref(), Some(Stage::Gating { .. })));
    assert_eq!(c.pace.unwrap().boot_seconds, Some(4 * 60));

    // The soak ends: batch 2 is the current batch and cordons in the same plan.
    let mut w = up();
    for n in &mut w.nodes {
        n.scale_down_disabled |= n.name.starts_with('m');
    }
    let p = plan(&d, &w, Some(&c), mins(10));
    assert_eq!(cordons(&p), ["cordon n3", "cordon n4"]);
    let c = p.checkpoint.unwrap();
    assert_eq!(c.stage.name(), "Draining");
    assert_eq!(c.next, None);
}

#[test]
fn with_pipeline_false_the_next_batch_waits_for_the_soak() {
    let (mut d, c) = soaking();
    d.policy.pipeline = false;
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(1));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.checkpoint.unwrap().next, None);
    // And it starts when the soak ends, as before pipelining.
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(10));
    assert_eq!(shown(&p), ["set capacity 6"]);
    assert_eq!(p.checkpoint.unwrap().stage.name(), "Surging");
}

#[test]
fn a_gate_failing_during_the_soak_undoes_the_pipelined_batch() {
    let booting = || {
        let mut w = after_batch1(vec![node("m3").image(NEW), node("m4").image(NEW)]);
        w.group.desired = 6;
        w.gates = GateVerdict::Failed {
            gate: "errors".into(),
            reason: "5% > 1%".into(),
        };
        w
    };
    let with_next = || {
        let (d, mut c) = soaking();
        c.batches_started = 2;
        c.next = Some(Box::new(Stage::WaitingReady { batch: batch34() }));
        (d, c)
    };

    // onGateFailure rollback: batch 2, which disrupted nothing, is undone first.
    let (mut d, c) = with_next();
    d.policy.on_gate_failure = OnGateFailure::Rollback;
    let p = plan(&d, &booting(), Some(&c), mins(3));
    let c2 = p.checkpoint.clone().unwrap();
    let Stage::Abandoning { batch, why, .. } = &c2.stage else {
        panic!("{:?}", c2.stage)
    };
    assert_eq!(batch.number, 2);
    assert!(why.contains("health gate errors failed"), "{why}");
    assert!(c2.rolling_back);
    assert_eq!(c2.next, None);
    assert!(
        shown(&p).contains(&"cordon m3".to_string()),
        "{:?}",
        shown(&p)
    );
    assert!(
        !cordons(&p)
            .iter()
            .any(|a| a.contains("n3") || a.contains("n4"))
    );

    // onGateFailure pause: the pool halts in the soak, and batch 2 is undone all the same.
    let (d, c) = with_next();
    let p = plan(&d, &booting(), Some(&c), mins(3));
    assert_eq!(p.status.reason, "GateFailed");
    let c2 = p.checkpoint.clone().unwrap();
    assert!(c2.halted.is_some());
    assert!(matches!(c2.next.as_deref(), Some(Stage::Abandoning { .. })));
    let p = plan(&d, &booting(), Some(&c2), mins(4));
    assert_eq!(p.status.reason, "Halted");
    assert!(
        shown(&p).contains(&"cordon m3".to_string()),
        "{:?}",
        shown(&p)
    );
}

#[test]
fn a_newer_version_during_the_soak_undoes_the_pipelined_batch() {
    let (mut d, mut c) = soaking();
    c.batches_started = 2;
    c.next = Some(Box::new(Stage::Gating { batch: batch34() }));
    d.image = NEWER.into();
    d.version = "v3".into();
    let mut w = after_batch1(vec![
        node("m3").ready().image(NEW).scale_down_disabled(),
        node("m4").ready().image(NEW).scale_down_disabled(),
    ]);
    w.group.desired = 6;
    let p = plan(&d, &w, Some(&c), mins(3));
    let c2 = p.checkpoint.clone().unwrap();
    let Stage::Abandoning { batch, why, .. } = &c2.stage else {
        panic!("{:?}", c2.stage)
    };
    assert_eq!(batch.number, 2);
    assert!(why.contains("superseded"), "{why}");
    assert_eq!(c2.next, None);
    assert_eq!(cordons(&p), ["cordon m3", "cordon m4"]);
}

#[test]
fn a_pipelined_batch_that_never_becomes_ready_halts_the_pool() {
    let (mut d, mut c) = soaking();
    // Replacements spent (or none allowed): the next timeout fails it.
    d.policy.node_ready_retries = 0;
    c.batches_started = 2;
    c.next = Some(Box::new(Stage::WaitingReady { batch: batch34() }));
    // Soaks are long here; the nodes are still not Ready after nodeReadyTimeout (15m).
    c.stage = Stage::Soaking {
        batch: batch12(),
        until: mins(60),
    };
    let mut w = after_batch1(vec![node("m3").image(NEW), node("m4").image(NEW)]);
    w.group.desired = 6;
    let p = plan(&d, &w, Some(&c), mins(17));
    // Undone: its instances are cordoned and leave; nothing of batch 1's soak is touched.
    assert_eq!(cordons(&p), ["cordon m3", "cordon m4"]);
    let c2 = p.checkpoint.clone().unwrap();
    assert_eq!(c2.stage.name(), "Soaking");
    let Some(Stage::Abandoning { halt, .. }) = c2.next.as_deref() else {
        panic!("{:?}", c2.next)
    };
    assert!(halt.as_deref().unwrap().contains("not Ready within"));
}

#[test]
fn the_status_estimates_what_is_left_from_the_batches_timed_so_far() {
    let (d, mut c) = soaking();
    // Not timed yet: no estimate rather than a guess.
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(1));
    assert_eq!(p.status.remaining, None);
    // Batch 1 booted in 4 minutes and drained in 2. Left: n3 and n4, one batch: its boot
    // runs during the 9 minutes of soak left, then its drain (2m) and its soak (10m).
    c.pace = Some(super::checkpoint::Pace {
        boot_seconds: Some(240),
        drain_seconds: Some(120),
    });
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(1));
    assert_eq!(
        p.status.remaining,
        Some(std::time::Duration::from_secs((9 + 2 + 10) * 60))
    );
    // Sequentially the boot would come after the soak.
    let mut d = d;
    d.policy.pipeline = false;
    let p = plan(&d, &after_batch1(vec![]), Some(&c), mins(1));
    assert_eq!(
        p.status.remaining,
        Some(std::time::Duration::from_secs((9 + 4 + 2 + 10) * 60))
    );
}

#[test]
fn a_newer_version_lifts_the_halt_a_failed_pipelined_batch_would_leave() {
    // Batch 2 was not Ready in time during batch 1's soak and is being undone (it would halt
    // the pool when done); then the repo moves on. The undoing goes on, the halt does not.
    let (mut d, mut c) = soaking();
    c.batches_started = 2;
    c.next = Some(Box::new(Stage::Abandoning {
        batch: batch34(),
        why: "batch 2: new instance(s) not Ready".into(),
        halt: Some("batch 2: new instance(s) not Ready".into()),
    }));
    d.image = NEWER.into();
    d.version = "v3".into();
    let mut w = after_batch1(vec![node("m3").image(NEW), node("m4").image(NEW)]);
    w.group.desired = 6;
    let p = plan(&d, &w, Some(&c), mins(3));
    let c2 = p.checkpoint.unwrap();
    let Stage::Abandoning { batch, halt, .. } = &c2.stage else {
        panic!("{:?}", c2.stage)
    };
    assert_eq!((batch.number, halt), (2, &None));
    assert_eq!(c2.halted, None);
}

#[test]
fn a_node_the_autoscaler_added_on_the_new_image_does_not_finish_the_rotation_early() {
    // Pool of 4 at the start; 3 replaced, and the autoscaler added m9 on the new image: 4
    // nodes on the target, but n4 still runs the old one.
    let mut w = world(vec![
        node("n4").ready(),
        node("m1").ready().image(NEW),
        node("m2").ready().image(NEW),
        node("m3").ready().image(NEW),
        node("m9").ready().image(NEW),
    ]);
    w.group.template_image = NEW.into();
    let p = plan(&desired(1), &w, Some(&cp(Stage::Between)), t0());
    // Not done: n4 waits for the surge budget (the group already holds 4 + 1).
    assert_eq!(p.status.reason, "SurgeBudget", "{}", p.status.message);
    assert_eq!(p.checkpoint.unwrap().stage, Stage::Between);
}

#[test]
fn a_surge_is_not_sent_again_for_an_instance_the_autoscaler_removed_meanwhile() {
    // Batch 1 asked for 6 (4 + 2). Before the surge shows, the autoscaler scaled n4 down
    // (terminate with decrement: capacity 5). Sending 6 again would make room for a third
    // new instance: the surge now needs 5.
    let mut b = batch12();
    b.new_instances.clear();
    let mut w = world(vec![node("n1").ready(), node("n2").ready(), node("n3")]);
    w.group.desired = 5;
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Surging { batch: b.clone() })),
        t0(),
    );
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    // Nothing removed: after a crash before the request, the recorded target is sent.
    let mut w = world(old4());
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Surging { batch: b })),
        t0(),
    );
    assert_eq!(shown(&p), ["set capacity 6"]);
}

/// Chaos seed 718: describes that lag may go back in time from one pass to the next. Once
/// one has listed n4 as terminating (the autoscaler took it back), an older one that still
/// shows it alive must not raise the surge back to the recorded target: that would be a
/// second surge in its place (invariant 1).
#[test]
fn an_instance_once_seen_terminating_stays_taken_from_the_surge() {
    let mut b = batch12();
    b.new_instances.clear();
    let mut w = world(vec![
        node("n1").ready(),
        node("n2").ready(),
        node("n3"),
        node("n4").terminating_instance(),
    ]);
    w.group.desired = 3;
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Surging { batch: b })),
        t0(),
    );
    assert_eq!(shown(&p), ["set capacity 5"], "{}", p.status.message);
    let c = p.checkpoint.unwrap();
    let Stage::Surging { batch } = &c.stage else {
        panic!("{:?}", c.stage)
    };
    assert_eq!(batch.taken_back, ["i-n4"]);
    // The next describe is older: n4 alive, capacity 4. The surge still asks for 5.
    let mut w = world(old4());
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(&desired(2), &w, Some(&c), mins(1));
    assert_eq!(shown(&p), ["set capacity 5"], "{}", p.status.message);
}

/// Chaos seed 524: a surge instance that did not boot was terminated with decrement (the
/// capacity already back to 4) and was still terminating when the next batch started, so
/// that batch of 2 surged by 1 only (the bound counts the terminating instance). Its going
/// away took nothing from the new surge: the batch asks for 5 and keeps asking for 5 once
/// it is gone, rather than subtracting it and asking for nothing.
#[test]
fn an_instance_terminating_when_a_batch_starts_takes_nothing_from_its_surge() {
    let mut failed = node("x").image(NEW).terminating_instance();
    failed.registered = false;
    let mut nodes = old4();
    nodes.push(failed);
    let mut w = world(nodes);
    w.group.desired = 4;
    w.group.max = 4;
    let p = plan(&desired(2), &w, None, t0());
    assert_eq!(
        shown(&p),
        ["set image ami-0000000000000000b", "set capacity 5 (max 5)"],
        "{}",
        p.status.message
    );
    let c = p.checkpoint.unwrap();
    let Stage::Surging { batch } = &c.stage else {
        panic!("{:?}", c.stage)
    };
    // Batch size 2, but the terminating instance still counts against the bound (4 + 2).
    assert_eq!(batch.old_nodes.len(), 1);
    assert_eq!(batch.terminating_before, ["i-x"]);
    assert_eq!(batch.target_capacity, 5);
    // A pass later the request had not reached the group (or it was lost): the terminating
    // instance is gone now, and the surge is still one instance.
    let mut w = world(old4());
    w.group.template_image = NEW.into();
    w.group.max = 5;
    let p = plan(&desired(2), &w, Some(&c), mins(1));
    assert_eq!(shown(&p), ["set capacity 5"], "{}", p.status.message);
    // An instance the autoscaler removes after the batch started still counts (invariant 1).
    let mut w = world(vec![node("n1").ready(), node("n2").ready(), node("n3")]);
    w.group.template_image = NEW.into();
    w.group.desired = 3;
    w.group.max = 5;
    let p = plan(&desired(2), &w, Some(&c), mins(1));
    assert_eq!(shown(&p), ["set capacity 4"], "{}", p.status.message);
}

/// Issue 26 (3): every stop the planner makes names its cause, what holds the pool, who
/// moves it on and how. One scenario per reason that stops a pool; the last assertion fails
/// when the planner learns a reason no scenario here covers.
#[test]
fn every_stop_the_planner_makes_says_who_must_do_what() {
    use super::stop::{MovedBy, Reason};
    use std::collections::BTreeSet;
    let retry = "rota ctl retry --cluster prod --pool general";
    let mut seen = BTreeSet::new();
    let mut check = |p: &Plan, by: MovedBy, blocked: &[&str], next: &str| {
        let note =
            p.status.stop.as_ref().unwrap_or_else(|| {
                panic!("{} stops without a note: {:?}", p.status.reason, p.status)
            });
        assert_eq!(note.by, by, "{}: {note:?}", p.status.reason);
        assert!(!note.cause.is_empty(), "{note:?}");
        for b in blocked {
            assert!(
                note.blocked_by.iter().any(|x| x.contains(b)),
                "{}: {b:?} not among {:?}",
                p.status.reason,
                note.blocked_by
            );
        }
        assert!(
            note.next.contains(next),
            "{}: {}",
            p.status.reason,
            note.next
        );
        seen.insert(Reason::parse(p.status.reason).expect("a known reason"));
        if note.reason != p.status.reason {
            // A halt: the note names what halted it.
            assert_eq!(p.status.reason, "Halted");
            seen.insert(Reason::parse(&note.reason).expect("a known reason"));
        }
    };

    // A maintenance window: rota starts when it opens (t0 is Monday 10:00 UTC).
    let mut d = desired(2);
    d.policy.windows = vec![Window {
        days: vec!["Mon".into()],
        start: "12:00".into(),
        end: "14:00".into(),
        time_zone: "Europe/Berlin".into(),
    }];
    let p = plan(&d, &world(old4()), None, t0());
    check(
        &p,
        MovedBy::Rota,
        &["window Mon 12:00-14:00 Europe/Berlin"],
        "at 2026-11-23T11:00:00+00:00",
    );
    // A window that cannot be evaluated: a commit fixes it.
    d.policy.windows[0].time_zone = "Mars/Olympus".into();
    let p = plan(&d, &world(old4()), Some(&cp(Stage::Between)), t0());
    check(&p, MovedBy::Person, &[], "rollout.windows");

    // The surge budget: the autoscaler's scale-down frees it.
    let mut w = world(vec![
        node("n4").ready(),
        node("m1").ready().image(NEW),
        node("m2").ready().image(NEW),
        node("m3").ready().image(NEW),
        node("m9").ready().image(NEW),
    ]);
    w.group.template_image = NEW.into();
    let p = plan(&desired(1), &w, Some(&cp(Stage::Between)), t0());
    check(
        &p,
        MovedBy::Rota,
        &["group aws:us-east-1/asg/general (5 instances, bound 5)"],
        "shrinks",
    );

    // maxParallelPools: the pools that hold the slots.
    let mut w = world(old4());
    w.start_hold = Some("maxParallelPools is 1 and pool(s) gpu, batch are rotating".into());
    let p = plan(&desired(2), &w, None, t0());
    check(
        &p,
        MovedBy::Rota,
        &["pool gpu", "pool batch"],
        "a pool holding a slot finishes",
    );

    // A lagging describe.
    let mut w = world(old4());
    w.describe_lag = std::time::Duration::from_secs(30);
    let p = plan(&desired(2), &w, None, t0());
    check(&p, MovedBy::Rota, &[], "describe");

    // Images the cloud cannot launch: some heal, some need a commit.
    for (word, by) in [
        ("ImageNotReady", MovedBy::Rota),
        ("ImageNotReplicated", MovedBy::Rota),
        ("ImageNotFound", MovedBy::Person),
        ("ImageDeprecated", MovedBy::Person),
        ("ImageWrongArch", MovedBy::Person),
        ("Odd", MovedBy::Person),
    ] {
        let mut w = world(old4());
        w.image_hold = Some((word.into(), "the cloud says so".into()));
        let p = plan(&desired(2), &w, None, t0());
        let next = if by == MovedBy::Rota {
            "asks the cloud again"
        } else {
            "a commit pinning an image"
        };
        check(&p, by, &[], next);
    }

    // A node not Ready in time: replaced after a backoff.
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW).scale_down_disabled());
    nodes.push(node("m2").image(NEW));
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::WaitingReady { batch: batch12() })),
        mins(15),
    );
    check(
        &p,
        MovedBy::Rota,
        &["instance i-m2 (node m2 not Ready)"],
        "replaces",
    );

    // A surge the cloud did not create in time: another nodeReadyTimeout.
    let mut w = world(old4());
    w.group.desired = 6;
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let short = Batch {
        new_instances: vec![],
        ..batch12()
    };
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Surging { batch: short })),
        mins(15),
    );
    assert_eq!(p.status.reason, "SurgeShort", "{:?}", p.status);
    check(&p, MovedBy::Rota, &[], "replaces");

    // A gate without its samples yet.
    let mut w = surged(old4());
    w.gates = GateVerdict::Pending("error-rate".into());
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Gating { batch: batch12() })),
        t0(),
    );
    check(&p, MovedBy::Rota, &["gate error-rate"], "samples");
    // A gate that failed, with `pause`: a person, then `rota ctl retry`; halted from then on.
    w.gates = GateVerdict::Failed {
        gate: "error-rate".into(),
        reason: "0.07 > max 0.01".into(),
    };
    let p = plan(
        &desired(2),
        &w,
        Some(&cp(Stage::Gating { batch: batch12() })),
        t0(),
    );
    check(&p, MovedBy::Person, &[], retry);
    let p = plan(&desired(2), &w, p.checkpoint.as_ref(), mins(1));
    assert_eq!(p.status.stop.as_ref().unwrap().reason, "GateFailed");
    check(&p, MovedBy::Person, &[], retry);

    // A drain a PodDisruptionBudget holds: rota evicts when it allows, until drain.timeout.
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("db-0").pdb("db", 0)),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3"),
        node("n4").ready(),
    ];
    let w = surged(nodes);
    let c = cp(Stage::Draining { batch: batch12() });
    let p = plan(&desired(2), &w, Some(&c), mins(1));
    check(
        &p,
        MovedBy::Rota,
        &["app/db-0 (PodDisruptionBudget app/db allows no disruption now)"],
        "at 2026-11-23T10:30:00+00:00",
    );
    // ... and at the timeout, a person: the pod and its budget named, then `rota ctl retry`.
    let p = plan(&desired(2), &w, Some(&c), mins(30));
    check(&p, MovedBy::Person, &["PodDisruptionBudget app/db"], retry);
    let p = plan(&desired(2), &w, p.checkpoint.as_ref(), mins(31));
    assert_eq!(p.status.stop.as_ref().unwrap().reason, "DrainTimeout");
    check(&p, MovedBy::Person, &[], retry);

    // A batch whose new nodes never came up: failed, a person retries.
    let mut d = desired(2);
    d.policy.node_ready_retries = 0;
    let mut nodes = old4();
    nodes.push(node("m1").image(NEW));
    nodes.push(node("m2").image(NEW).unregistered());
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.template_image = NEW.into();
    let p = plan(
        &d,
        &w,
        Some(&cp(Stage::WaitingReady { batch: batch12() })),
        mins(15),
    );
    let p = plan(&d, &world(old4()), p.checkpoint.as_ref(), mins(16));
    assert_eq!(p.status.reason, "BatchFailed", "{:?}", p.status);
    check(&p, MovedBy::Person, &[], retry);
    // An image that never boots: a commit that pins one that does (the revert).
    let mut c = p.checkpoint.clone().unwrap();
    c.halted = Some(format!(
        "image {NEW} (v2) did not boot: 6 of 6 new instance(s) never Ready"
    ));
    let p = plan(&d, &world(old4()), Some(&c), mins(17));
    check(
        &p,
        MovedBy::Person,
        &[],
        "a commit pinning a version that boots",
    );

    // A do-not-disrupt pod: its owner.
    let mut w = world(vec![
        node("n1").ready().image(NEW),
        node("n3").ready().pod(pod("batch-job").do_not_disrupt()),
    ]);
    w.group.template_image = NEW.into();
    let p = plan(&desired(1), &w, None, t0());
    check(
        &p,
        MovedBy::Person,
        &["pod app/batch-job on node n3"],
        "owner",
    );

    // Nodes that match no instance of the group: a commit fixing the selector or group.
    let mut w = world(vec![node("n1").ready().image(NEW), node("n2").ready()]);
    w.group.instances.retain(|i| i.id != "i-n2");
    w.group.template_image = NEW.into();
    // (Under 100%: a full rollout counts only nodes the group runs.)
    let mut d = desired(1);
    d.policy.percent = 99;
    let p = plan(&d, &w, Some(&cp(Stage::Between)), t0());
    check(&p, MovedBy::Person, &["node n2"], "nodeSelector or group");

    // Paused by an operator, by policy.
    let mut c = cp(Stage::Between);
    c.operator_paused = Some("paused by ana".into());
    let p = plan(&desired(2), &world(old4()), Some(&c), t0());
    check(
        &p,
        MovedBy::Person,
        &[],
        "rota ctl resume --cluster prod --pool general",
    );
    let mut d = desired(2);
    d.policy.paused = true;
    let p = plan(&d, &world(old4()), None, t0());
    check(&p, MovedBy::Person, &[], "rollout.paused back to false");

    // Rolled back after a gate: a commit pinning another version.
    let mut c = cp(Stage::Done);
    c.rejected_image = Some(NEW.into());
    c.rolling_back = true;
    c.target_image = OLD.into();
    c.rollback_reason = Some("health gate error-rate failed".into());
    let p = plan(&desired(2), &world(old4()), Some(&c), t0());
    check(&p, MovedBy::Person, &[], "a commit pinning another version");

    // A managed pool (here an EKS managed node group): reported, never acted on, the
    // checkpoint untouched; a person brings an agent that drives it, or a self-managed group.
    let mut d = desired(2);
    d.group = managed_eks();
    let c = cp(Stage::Between);
    let p = plan(&d, &world(old4()), Some(&c), t0());
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.checkpoint.as_ref(), Some(&c));
    assert_eq!(p.status.reason, "ManagedPoolNotSupported");
    assert!(
        p.status
            .message
            .contains("eksNodegroup general of cluster prod")
            && p.status.message.contains("EKS's API"),
        "{}",
        p.status.message
    );
    check(
        &p,
        MovedBy::Person,
        &[],
        "a commit giving the pool a self-managed group",
    );

    // A blackout: rota starts once it ends.
    let mut d = desired(2);
    d.policy.blackouts = vec![crate::fleet::resolved::Blackout {
        from: mins(-60),
        to: mins(24 * 60),
        reason: "year-end freeze".into(),
    }];
    let p = plan(&d, &world(old4()), None, t0());
    check(
        &p,
        MovedBy::Rota,
        &["blackout until 2026-11-24T10:00:00+00:00 (year-end freeze)"],
        "at 2026-11-24T10:00:00+00:00",
    );

    // A kubelet the live control plane refuses: upgrade it, or a commit.
    let mut d = desired(2);
    d.kubelet = Some("1.31".into());
    let mut w = world(old4());
    w.control_plane = on_control_plane("1.30");
    let p = plan(&d, &w, None, t0());
    check(&p, MovedBy::Person, &[], "upgrade the control plane");

    // The owner's own update failed (managedUpdate: service): EKS's errors, and a commit.
    let mut d = desired(2);
    d.group = managed_eks();
    let mut w = world(old4());
    let mut c = cp(Stage::Between);
    c.owner_update = Some(OwnerUpdateMark {
        image: NEW.into(),
        token: "t1".into(),
        started_at: t0(),
    });
    w.owner = Some(crate::cloud::managed::OwnerPoolState {
        pool: d.group.managed().unwrap().clone(),
        image: OLD.into(),
        desired: 4,
        max_unavailable: None,
        update: Some(crate::cloud::managed::OwnerUpdate {
            id: "u1".into(),
            token: Some("t1".into()),
            image: NEW.into(),
            status: crate::cloud::managed::UpdateStatus::Failed,
            errors: vec!["NodeCreationFailure: Instances failed to join".into()],
        }),
    });
    let p = plan(&d, &w, Some(&c), t0());
    assert_eq!(p.status.reason, "OwnerUpdateFailed");
    check(
        &p,
        MovedBy::Person,
        &[],
        "a commit pinning a version the owner",
    );

    // The owner refused the update rota recorded (an image it does not offer): not sent
    // again, the pool paused for a commit pinning one it offers.
    let mut w = world(old4());
    w.owner = Some(crate::cloud::managed::OwnerPoolState {
        pool: d.group.managed().unwrap().clone(),
        image: OLD.into(),
        desired: 4,
        max_unavailable: None,
        update: None,
    });
    let resend = plan(&d, &w, Some(&c), t0());
    let ask = resend.actions.first().expect("the recorded update is sent");
    w.refused = Some(super::Refusal {
        action: ask.action.to_string(),
        why: "InvalidParameter: not offered".into(),
    });
    let p = plan(&d, &w, Some(&c), t0());
    assert_eq!(p.status.reason, "OwnerRefused", "{}", p.status.message);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(
        p.status.message.contains("not offered"),
        "{}",
        p.status.message
    );
    check(
        &p,
        MovedBy::Person,
        &[],
        "a commit pinning a version the owner offers",
    );

    // A fleet stop (`rota stop`): lifted by the clear with the stop's own scope.
    let mut d = desired(2);
    d.policy.stop = Some(fleet_stop());
    let p = plan(&d, &world(old4()), None, t0());
    assert_eq!(p.status.reason, "Stopped");
    check(&p, MovedBy::Person, &[], "rota stop --clear --wave main");

    // Every reason that stops a pool has a scenario above, but one: the planner's own bug
    // guard, which no world can reach (`explain` covers it, see `rotate::stop`).
    let stops: BTreeSet<Reason> = Reason::ALL
        .iter()
        .copied()
        .filter(|r| !r.moving() && *r != Reason::PlannerLoop)
        .collect();
    let missing: Vec<_> = stops.difference(&seen).collect();
    assert!(
        missing.is_empty(),
        "stop reasons without a scenario: {missing:?}"
    );
}

// ------------------------------------------------------------------ version skew (rotate::skew)

fn on_control_plane(minor: &str) -> Option<Result<crate::fleet::kubernetes::KubeMinor, String>> {
    Some(Ok(
        crate::fleet::kubernetes::KubeMinor::parse(minor).unwrap()
    ))
}

#[test]
fn a_kubelet_newer_than_the_live_control_plane_waits_naming_both_and_starts_once_upgraded() {
    let mut d = desired(2);
    d.kubelet = Some("1.31".into());
    let mut w = world(old4());
    w.control_plane = on_control_plane("1.30");
    let p = plan(&d, &w, None, t0());
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.checkpoint, None);
    assert_eq!(p.status.phase, Phase::Waiting);
    assert_eq!(p.status.reason, "VersionSkew");
    assert!(
        p.status
            .message
            .contains("general@v2 carries kubelet 1.31, newer than the control plane 1.30"),
        "{}",
        p.status.message
    );
    let note = p.status.stop.as_ref().expect("a stop note");
    assert_eq!(note.by, stop::MovedBy::Person);
    assert!(
        note.next.contains("upgrade the control plane"),
        "{}",
        note.next
    );

    // Three minors behind is allowed; four is not.
    w.control_plane = on_control_plane("1.35");
    let p = plan(&d, &w, None, t0());
    assert_eq!(p.status.reason, "VersionSkew");
    assert!(
        p.status
            .message
            .contains("more than three minors older than the control plane 1.35")
            && p.status.message.contains("allows 1.32 to 1.35"),
        "{}",
        p.status.message
    );
    for ok in ["1.31", "1.34"] {
        w.control_plane = on_control_plane(ok);
        let p = plan(&d, &w, None, t0());
        assert_eq!(
            shown(&p),
            ["set image ami-0000000000000000b", "set capacity 6 (max 6)"],
            "on {ok}"
        );
    }
}

#[test]
fn an_unreadable_control_plane_holds_and_an_undeclared_kubelet_is_not_checked() {
    let mut d = desired(2);
    d.kubelet = Some("1.31".into());
    let mut w = world(old4());
    w.control_plane = Some(Err("GET /version: 503".into()));
    let p = plan(&d, &w, None, t0());
    assert_eq!(p.status.reason, "VersionSkew");
    assert!(
        p.status
            .message
            .contains("could not be read (GET /version: 503)")
    );
    assert!(p.actions.is_empty());

    // No `kubernetes` on the version: rota cannot know, the rotation starts.
    d.kubelet = None;
    w.control_plane = on_control_plane("1.20");
    let p = plan(&d, &w, None, t0());
    assert_eq!(shown(&p).len(), 2, "{:?}", shown(&p));
}

#[test]
fn a_rotation_under_way_is_not_held_by_skew_but_a_switch_to_a_skewed_version_is() {
    let mut w = surged(old4());
    w.control_plane = on_control_plane("1.30");
    let mut d = desired(2);
    d.kubelet = Some("1.31".into());
    // Already on NEW (it passed the check when it started): it goes on.
    let under_way = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&d, &w, Some(&under_way), t0());
    assert_ne!(p.status.reason, "VersionSkew", "{}", p.status.message);
    // A newer version mid-rotation whose kubelet is too new: held, the checkpoint kept.
    d.image = NEWER.into();
    d.version = "v3".into();
    let p = plan(&d, &w, Some(&under_way), t0());
    assert_eq!(p.status.reason, "VersionSkew");
    assert_eq!(p.checkpoint.as_ref(), Some(&under_way));
    assert!(p.actions.is_empty());
    // Back to the origin image (a revert): never held, it ran here.
    d.image = OLD.into();
    let p = plan(&d, &w, Some(&under_way), t0());
    assert_ne!(p.status.reason, "VersionSkew", "{}", p.status.message);
}

// ------------------------------------------------------- windows with a runway (rotate::window)

/// Monday and Tuesday 09:00-17:00 UTC (t0 is Monday 10:00).
fn weekdays() -> Vec<Window> {
    vec![Window {
        days: vec!["Mon".into(), "Tue".into()],
        start: "09:00".into(),
        end: "17:00".into(),
        time_zone: "UTC".into(),
    }]
}

#[test]
fn a_batch_that_would_not_finish_before_the_window_closes_is_deferred_to_the_next_opening() {
    let mut d = desired(2);
    d.policy.windows = weekdays();
    // Without a measured batch: nodeReadyTimeout 15m + drain.timeout 30m = 45m.
    let p = plan(&d, &world(old4()), None, mins(6 * 60 + 15)); // 16:15
    assert_eq!(p.actions.len(), 2, "16:15 + 45m fits: {}", p.status.message);
    let p = plan(&d, &world(old4()), None, mins(6 * 60 + 16)); // 16:16
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.phase, Phase::Waiting);
    assert_eq!(p.status.reason, "OutsideWindow");
    assert!(
        p.status.message.contains(
            "deferred until 2026-11-24T09:00:00+00:00: a batch takes about 45m, the window closes at 2026-11-23T17:00:00+00:00"
        ),
        "{}",
        p.status.message
    );
    // The change is accepted: the rotation is recorded, and waits.
    let cp0 = p.checkpoint.clone().expect("a rotation recorded");
    assert_eq!(cp0.stage, Stage::Between);
    assert_eq!(cp0.batches_started, 0);

    // Measured batches of 10 minutes (5 boot + 5 drain) fit at 16:45.
    let mut c = cp(Stage::Between);
    c.pace = Some(super::checkpoint::Pace {
        boot_seconds: Some(300),
        drain_seconds: Some(300),
    });
    let p = plan(&d, &world(old4()), Some(&c), mins(6 * 60 + 45));
    assert_eq!(p.actions.len(), 2, "{}", p.status.message);
    let p = plan(&d, &world(old4()), Some(&c), mins(6 * 60 + 51));
    assert!(
        p.status.message.contains("about 10m"),
        "{}",
        p.status.message
    );
    // Outside every window (a change merged at night): deferred until the next opening.
    let p = plan(&d, &world(old4()), None, mins(12 * 60));
    assert!(
        p.status
            .message
            .contains("deferred until 2026-11-24T09:00:00+00:00: outside every maintenance window"),
        "{}",
        p.status.message
    );
    assert_eq!(p.status.stop.unwrap().reason, "OutsideWindow");
}

#[test]
fn a_window_closing_mid_batch_lets_the_batch_finish_and_defers_the_next() {
    let mut d = desired(2);
    d.policy.windows = weekdays();
    // Batch 1 started at 16:10 (inside, it fits); now it is 17:05, the window has closed.
    let mut b = batch12();
    b.started_at = Some(mins(6 * 60 + 10));
    b.stage_since = mins(6 * 60 + 10);
    let c = cp(Stage::WaitingReady { batch: b });
    let p = plan(&d, &surged(old4()), Some(&c), mins(7 * 60 + 5));
    assert_ne!(p.status.reason, "OutsideWindow", "{}", p.status.message);
    assert!(
        shown(&p).iter().any(|a| a.starts_with("cordon")),
        "the started batch goes on: {:?}",
        shown(&p)
    );
    // Between batches after the close: nothing starts, deferred until Tuesday 09:00.
    let w = world(vec![
        node("m1").ready().image(NEW),
        node("m2").ready().image(NEW),
        node("n3").ready(),
        node("n4").ready(),
    ]);
    let mut c = cp(Stage::Between);
    c.batches_started = 1;
    let p = plan(&d, &w, Some(&c), mins(7 * 60 + 30));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.reason, "OutsideWindow");
    assert!(
        p.status
            .message
            .contains("2 node(s) left; deferred until 2026-11-24T09:00:00+00:00"),
        "{}",
        p.status.message
    );
    // Tuesday 09:00: the next batch starts.
    let p = plan(&d, &w, Some(&c), mins(23 * 60));
    assert_eq!(p.actions.len(), 2, "{}", p.status.message);
}

#[test]
fn no_batch_starts_in_a_blackout_and_a_started_one_finishes() {
    let mut d = desired(2);
    d.policy.blackouts = vec![crate::fleet::resolved::Blackout {
        from: mins(30),
        to: mins(90),
        reason: String::new(),
    }];
    // Before it: starts.
    assert_eq!(plan(&d, &world(old4()), None, t0()).actions.len(), 2);
    // Inside it: waits, until its end.
    let p = plan(&d, &world(old4()), None, mins(31));
    assert!(p.actions.is_empty());
    assert_eq!(p.status.reason, "Blackout");
    assert!(
        p.status.message.contains(
            "deferred until 2026-11-23T11:30:00+00:00: blackout until 2026-11-23T11:30:00+00:00"
        ),
        "{}",
        p.status.message
    );
    // A batch started before it goes on inside it.
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&d, &surged(old4()), Some(&c), mins(45));
    assert!(
        shown(&p).iter().any(|a| a.starts_with("cordon")),
        "{:?}",
        shown(&p)
    );
    // After it: starts.
    assert_eq!(plan(&d, &world(old4()), None, mins(90)).actions.len(), 2);
}

// ------------------------------------------- long jobs: drain.delay and drain.maxDeferral

/// `old4` with batch 1 (n1, n2) cordoned at t0: n1 runs a do-not-disrupt training job and a
/// web pod, n2 a web pod.
fn cordoned_with_a_long_job() -> (Observed, Checkpoint) {
    let nodes = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("train-0").do_not_disrupt())
            .pod(pod("web-1")),
        node("n2")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-2")),
        node("n3"),
        node("n4").ready(),
    ];
    let mut b = batch12();
    b.cordoned_at = Some(t0());
    (surged(nodes), cp(Stage::Draining { batch: b }))
}

#[test]
fn drain_delay_lets_pods_finish_on_their_own_before_any_eviction() {
    let (w, c) = cordoned_with_a_long_job();
    let mut d = desired(2);
    d.policy.drain.delay = GoDuration::from_secs(2 * 3600);
    d.policy.drain.max_deferral = Some(GoDuration::from_secs(3600));
    let p = plan(&d, &w, Some(&c), mins(119));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert!(
        p.status
            .message
            .contains("app/web-1 (drain.delay until 2026-11-23T12:00:00+00:00)"),
        "{}",
        p.status.message
    );
    // Not a timeout: the drain's 30 minutes count after the delay.
    assert_eq!(p.status.phase, Phase::Rotating);
    let p = plan(&d, &w, Some(&c), mins(120));
    assert_eq!(shown(&p), ["evict app/web-1", "evict app/web-2"]);
    assert!(
        p.status.message.contains(
            "app/train-0 (do-not-disrupt until 2026-11-23T13:00:00+00:00, drain.maxDeferral)"
        ),
        "{}",
        p.status.message
    );
}

#[test]
fn a_do_not_disrupt_pod_holds_the_drain_up_to_max_deferral_then_is_evicted_and_recorded() {
    let (w, c) = cordoned_with_a_long_job();
    let mut d = desired(2);
    d.policy.drain.max_deferral = Some(GoDuration::from_secs(3600));
    // 50 minutes in: past drain.timeout (30m) but the deferral holds, no halt.
    let p = plan(&d, &w, Some(&c), mins(50));
    assert_eq!(shown(&p), ["evict app/web-1", "evict app/web-2"]);
    assert_eq!(p.status.phase, Phase::Rotating, "{}", p.status.message);
    assert!(p.checkpoint.as_ref().unwrap().halted.is_none());
    // At the bound: evicted like any other, with a reason that says so, and recorded.
    let p = plan(&d, &w, Some(&c), mins(60));
    let evict = p
        .actions
        .iter()
        .find(|a| a.action.to_string() == "evict app/train-0")
        .expect("the long job is evicted");
    assert!(
        evict.reason.contains(
            "app/train-0 held it past drain.maxDeferral 1h (do-not-disrupt), evicted like any other"
        ),
        "{}",
        evict.reason
    );
    let cp = p.checkpoint.unwrap();
    let batch = cp.stage.batch().unwrap();
    assert_eq!(batch.deferral_ended, ["app/train-0"]);
    assert!(
        p.status
            .message
            .ends_with("; evicted past drain.maxDeferral: app/train-0"),
        "{}",
        p.status.message
    );
    // After a crash the record is still there, and the pod is not evicted twice once its
    // eviction was accepted.
    let mut w2 = w.clone();
    w2.nodes[0].pods[0].terminating = true;
    let p = plan(&d, &w2, Some(&cp), mins(61));
    assert!(!shown(&p).contains(&"evict app/train-0".to_string()));
    assert_eq!(
        p.checkpoint.unwrap().stage.batch().unwrap().deferral_ended,
        ["app/train-0"]
    );
}

#[test]
fn without_max_deferral_do_not_disrupt_holds_forever_and_with_it_the_node_is_taken() {
    let nodes = || {
        vec![
            node("n1").ready().pod(pod("train-0").do_not_disrupt()),
            node("n2").ready().do_not_disrupt(),
        ]
    };
    let p = plan(&desired(1), &world(nodes()), None, t0());
    assert_eq!(p.status.reason, "DoNotDisrupt");
    let mut d = desired(1);
    d.policy.drain.max_deferral = Some(GoDuration::from_secs(3600));
    let p = plan(&d, &world(nodes()), None, t0());
    assert_eq!(
        shown(&p),
        ["set image ami-0000000000000000b", "set capacity 3 (max 3)"],
        "{}",
        p.status.message
    );
    // The node's own annotation still holds: n1 is chosen, never n2.
    let batch = p.checkpoint.unwrap();
    assert_eq!(batch.stage.batch().unwrap().old_nodes[0].node, "n1");
}

/// A fleet stop as the agent puts it in the policy.
pub(crate) fn fleet_stop() -> crate::fleet::stops::FleetStop {
    crate::fleet::stops::FleetStop {
        id: "ab".repeat(20),
        wave: Some("main".into()),
        cluster: None,
        reason: "INC-4711".into(),
        by: "ssh:ana SHA256:x".into(),
        at: t0(),
        trust: crate::fleet::stops::Trust::Signed,
    }
}

/// A fleet stop seen mid-batch holds the rotation at its next safe point: the surge already
/// sent is left to boot (no withdrawal, no new surge), nothing is cordoned or evicted, and
/// the status names who stopped it, why, and the command that lifts it. Cleared, the batch
/// goes on from where it was with fresh clocks (the boot that outlived the stop is not
/// "never Ready").
#[test]
fn a_fleet_stop_racing_a_batch_lets_its_boot_complete_and_starts_nothing() {
    let mut d = desired(2);
    d.policy.stop = Some(fleet_stop());
    // Surge sent, new instances booting (not registered yet).
    let mut booting = old4();
    booting.push(node("m1").image(NEW).unregistered());
    booting.push(node("m2").image(NEW).unregistered());
    let mut w = world(booting);
    w.group.max = 6;
    w.group.desired = 6;
    w.group.template_image = NEW.into();
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&d, &w, Some(&c), mins(5));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.phase, Phase::Paused);
    assert_eq!(p.status.reason, "Stopped");
    assert!(
        p.status
            .message
            .starts_with("fleet stop abababababab (wave main) by ssh:ana SHA256:x, signed"),
        "{}",
        p.status.message
    );
    assert!(p.status.message.contains("INC-4711"));
    let note = p.status.stop.clone().unwrap();
    assert_eq!(note.by, MovedBy::Person);
    assert_eq!(note.next, "rota stop --clear --wave main");
    let held = p.checkpoint.clone().unwrap();
    assert_eq!(held.fleet_stop.as_deref(), Some("ab".repeat(20).as_str()));
    assert!(matches!(held.stage, Stage::WaitingReady { .. }));

    // The boot completed while stopped: still nothing (no cordon, no eviction), even two
    // hours later, past nodeReadyTimeout.
    let mut ready = old4();
    for n in &mut ready {
        n.node.pods.push(pod(&format!("web-{}", n.node.name)).0);
    }
    let w = surged(ready);
    let p = plan(&d, &w, Some(&held), mins(120));
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.reason, "Stopped");
    // Draining when the stop came: no eviction either.
    let draining = cp(Stage::Draining { batch: batch12() });
    let mut cordoned = vec![
        node("n1")
            .ready()
            .cordoned_by("general/batch-1")
            .pod(pod("web-1")),
        node("n2").ready().cordoned_by("general/batch-1"),
        node("n3").ready(),
        node("n4").ready(),
    ];
    cordoned[2].node.pods.push(pod("web-3").0);
    let p = plan(&d, &surged(cordoned), Some(&draining), mins(10));
    assert!(
        !shown(&p)
            .iter()
            .any(|a| a.starts_with("evict") || a.starts_with("cordon") || a.starts_with("surge")),
        "{:?}",
        shown(&p)
    );

    // Cleared: the batch goes on from WaitingReady with its clock restarted, so the new
    // nodes (Ready) move it on rather than the two hours counting as a boot timeout.
    d.policy.stop = None;
    let p = plan(&d, &w, Some(&held), mins(120));
    assert_ne!(p.status.reason, "Stopped");
    assert_ne!(p.status.phase, Phase::Paused, "{}", p.status.message);
    let next = p.checkpoint.unwrap();
    assert_eq!(next.fleet_stop, None);
}

/// A fleet stop keeps the cluster autoscaler off the new nodes of the batch it holds: they
/// turn Ready during the stop and wait, empty, for the clear. Without the annotation the
/// autoscaler removed them with a decrement, and after the clear the batch waited for
/// replacements nobody launched and halted (the chaos suite's seeds 144, 266 and 319).
/// Nothing else happens: no cordon, no eviction, no surge.
#[test]
fn a_fleet_stop_keeps_the_autoscaler_off_the_new_nodes_it_holds() {
    let mut d = desired(2);
    d.policy.stop = Some(fleet_stop());
    let mut nodes = old4();
    nodes.push(node("m1").ready().image(NEW));
    nodes.push(node("m2").image(NEW));
    let mut w = world(nodes);
    w.group.max = 6;
    w.group.desired = 6;
    w.group.template_image = NEW.into();
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&d, &w, Some(&c), mins(30));
    assert_eq!(p.status.reason, "Stopped", "{}", p.status.message);
    let annotate: Vec<&Planned> = p
        .actions
        .iter()
        .filter(|a| {
            matches!(
                a.action,
                Action::SetScaleDownDisabled { disabled: true, .. }
            )
        })
        .collect();
    assert_eq!(annotate.len(), 1, "{:?}", shown(&p));
    assert_eq!(
        annotate[0].action,
        Action::SetScaleDownDisabled {
            node: "m1".into(),
            disabled: true
        }
    );
    assert!(
        annotate[0].reason.contains("fleet stop"),
        "{}",
        annotate[0].reason
    );
    assert_eq!(
        p.actions.len(),
        1,
        "nothing but the annotation: {:?}",
        shown(&p)
    );
    // Recorded, so cleanup removes it and a later pass re-asserts it if it is lost.
    let held = p.checkpoint.unwrap();
    assert_eq!(held.annotated_nodes, vec!["m1".to_string()]);
    let p = plan(&d, &w, Some(&held), mins(31));
    assert_eq!(
        shown(&p).len(),
        1,
        "re-asserted while missing: {:?}",
        shown(&p)
    );
    // Without an autoscaler sharing the group, nothing to keep off.
    w.cluster_autoscaler = false;
    assert!(plan(&d, &w, Some(&c), mins(30)).actions.is_empty());
}

/// A stop in force when a new version arrives holds it before its first surge.
#[test]
fn a_fleet_stop_holds_a_new_rotation_before_its_first_surge() {
    let mut d = desired(2);
    d.policy.stop = Some(fleet_stop());
    let p = plan(&d, &world(old4()), None, t0());
    assert!(p.actions.is_empty(), "{:?}", shown(&p));
    assert_eq!(p.status.reason, "Stopped");
    // The same pool without the stop surges at once.
    d.policy.stop = None;
    assert!(shown(&plan(&d, &world(old4()), None, t0()))[0].starts_with("set image"));
}

/// The stop survives a restart: it lives in the spec (the policy) and in the checkpoint, both
/// written to the NodePoolRotation, and a plan from the re-read objects holds the same way.
#[test]
fn a_fleet_stop_round_trips_through_the_resource() {
    let mut d = desired(2);
    d.policy.stop = Some(fleet_stop());
    let spec = crate::rotate::resource::NodePoolRotationSpec::from_desired(&d, "c0ffee");
    let back: crate::rotate::resource::NodePoolRotationSpec =
        serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    assert_eq!(back.desired().policy.stop, Some(fleet_stop()));
    let c = cp(Stage::WaitingReady { batch: batch12() });
    let p = plan(&back.desired(), &surged(old4()), Some(&c), t0());
    let stored: Checkpoint =
        serde_json::from_value(serde_json::to_value(p.checkpoint.as_ref().unwrap()).unwrap())
            .unwrap();
    let again = plan(&back.desired(), &surged(old4()), Some(&stored), mins(30));
    assert!(again.actions.is_empty());
    assert_eq!(again.status.reason, "Stopped");
    // `null`, never absent: a merge patch must clear it once the stop is lifted.
    let mut lifted = stored.clone();
    lifted.fleet_stop = None;
    assert!(
        serde_json::to_value(&lifted)
            .unwrap()
            .as_object()
            .unwrap()
            .contains_key("fleetStop")
    );
}
