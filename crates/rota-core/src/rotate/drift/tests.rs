//! The drift strategy pass by pass against a small model of Karpenter's disruption
//! controller ([`Karpenter::step`]): it applies rota's writes, marks NodeClaims off the
//! pinned AMI drifted, and disrupts them only as the most restrictive `Drifted` budget
//! allows, replacement first (as Karpenter's drift does).

use super::*;
use crate::cloud::karpenter::NodeClaimState;
use crate::cloud::{GroupRef, GroupState};
use crate::fleet::duration::GoDuration;
use crate::fleet::owner::{ManagedGroup, OwnerImage};
use crate::fleet::resolved::{BatchSize, EffectivePolicy};
use crate::rotate::ObservedNode;

const OLD: &str = "ami-old";
const NEW: &str = "ami-new";

fn t(m: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
        + chrono::Duration::minutes(m)
}

fn np() -> ManagedGroup {
    ManagedGroup::KarpenterNodePool {
        region: "us-east-1".into(),
        eks_cluster: "prod".into(),
        node_pool: "default".into(),
    }
}

fn desired() -> DesiredPool {
    DesiredPool {
        owner_image: Some(OwnerImage::Ami { id: NEW.into() }),
        cluster: "prod".into(),
        name: "default".into(),
        channel: "general".into(),
        version: "v2".into(),
        image: NEW.into(),
        arch: Default::default(),
        kubelet: None,
        released: None,
        max_age: None,
        group: GroupRef::Managed(np()),
        node_selector: Default::default(),
        policy: EffectivePolicy {
            batch: BatchSize::Count(2),
            ..EffectivePolicy::default()
        },
        gates: vec![],
        mode: Mode::Reconcile,
    }
}

fn user_budget() -> Budget {
    Budget {
        nodes: "20%".into(),
        ..Default::default()
    }
}

/// A simulated NodePool: `n` NodeClaims on OLD, the NodeClass pinned to OLD.
#[derive(Clone, Debug)]
struct Karpenter {
    state: DriftPoolState,
    next_id: u32,
    /// Most NodeClaims seen deleting at once.
    max_deleting: u32,
    /// NodeClaims that started being disrupted, in order.
    disrupted: Vec<String>,
    gates: GateVerdict,
    /// Ticks each deleting NodeClaim has been draining.
    draining: std::collections::BTreeMap<String, u32>,
}

impl Karpenter {
    fn new(n: u32) -> Karpenter {
        let claims = (0..n)
            .map(|i| NodeClaimState {
                name: format!("default-{i}"),
                node: Some(format!("node-{i}")),
                image: Some(OLD.into()),
                ready: true,
                drifted: false,
                deleting: false,
            })
            .collect();
        Karpenter {
            state: DriftPoolState {
                pool: np(),
                node_class: "default".into(),
                ami_ids: vec![OLD.into()],
                other_terms: vec![],
                shared_with: vec![],
                budgets: vec![user_budget()],
                resource_version: "1".into(),
                claims,
            },
            next_id: n,
            max_deleting: 0,
            disrupted: vec![],
            gates: GateVerdict::Passing,
            draining: Default::default(),
        }
    }

    fn observed(&self) -> Observed {
        let nodes = self
            .state
            .claims
            .iter()
            .filter_map(|c| {
                Some(ObservedNode {
                    name: c.node.clone()?,
                    provider_id: format!("aws:///us-east-1a/i-{}", c.name),
                    image_label: c.image.clone(),
                    ready: c.ready,
                    cordoned: c.deleting,
                    cordoned_by: None,
                    do_not_disrupt: false,
                    scale_down_disabled: false,
                    pods: vec![],
                })
            })
            .collect();
        Observed {
            group: GroupState {
                group: GroupRef::Managed(np()),
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
            drift: Some(self.state.clone()),
            pools: Vec::new(),
            refused: None,
        }
    }

    /// rota's writes, as the API server takes them (a stale resourceVersion is refused).
    fn apply(&mut self, plan: &Plan) {
        for p in &plan.actions {
            match &p.action {
                Action::PinNodeClassImage { node_class, image } => {
                    assert_eq!(node_class, "default");
                    self.state.ami_ids = vec![image.clone()];
                }
                Action::SetDisruptionBudgets {
                    budgets,
                    resource_version,
                } => {
                    if *resource_version == self.state.resource_version {
                        self.state.budgets = budgets.clone();
                        let rv: u32 = self.state.resource_version.parse().unwrap();
                        self.state.resource_version = (rv + 1).to_string();
                    }
                }
                other => panic!("a Karpenter pool gets no {other}"),
            }
        }
    }

    /// The most restrictive budget for reason Drifted, in nodes.
    fn allowed(&self) -> u32 {
        let total = self.state.claims.len() as u32;
        self.state
            .budgets
            .iter()
            .filter(|b| {
                b.reasons
                    .as_ref()
                    .is_none_or(|r| r.iter().any(|x| x == "Drifted"))
            })
            .map(|b| match b.nodes.strip_suffix('%') {
                Some(p) => (total * p.parse::<u32>().unwrap()).div_ceil(100),
                None => b.nodes.parse().unwrap(),
            })
            .min()
            .unwrap_or(u32::MAX)
    }

    /// One tick of Karpenter: replacements boot, drained NodeClaims go, drifted ones are
    /// disrupted within the budget (each with a replacement on the pinned AMI).
    fn step(&mut self) {
        let pinned = self.state.pinned().map(str::to_string);
        // A drain takes two ticks: longer than rota's passes, which see 1 or 2 ticks.
        let draining = &mut self.draining;
        self.state.claims.retain(|c| {
            if !c.deleting {
                return true;
            }
            let age = draining.entry(c.name.clone()).or_insert(0);
            *age += 1;
            *age < 2
        });
        for c in &mut self.state.claims {
            c.ready = true;
            c.drifted = pinned.is_some() && c.image != pinned;
        }
        let mut deleting = self.state.claims.iter().filter(|c| c.deleting).count() as u32;
        let allowed = self.allowed();
        let mut fresh = vec![];
        // One disruption decision per tick, as Karpenter's disruption loop takes one command
        // at a time: over several ticks between two of rota's passes, a budget left open
        // would let it start more than the batch.
        if deleting < allowed
            && let Some(c) = self
                .state
                .claims
                .iter_mut()
                .find(|c| c.drifted && !c.deleting)
        {
            c.deleting = true;
            deleting += 1;
            self.disrupted.push(c.name.clone());
            fresh.push(NodeClaimState {
                name: format!("default-{}", self.next_id),
                node: Some(format!("node-{}", self.next_id)),
                image: pinned.clone(),
                ready: false,
                drifted: false,
                deleting: false,
            });
            self.next_id += 1;
        }
        self.state.claims.extend(fresh);
        self.max_deleting = self.max_deleting.max(deleting);
    }
}

fn plan(d: &DesiredPool, k: &Karpenter, cp: Option<&Checkpoint>, now: DateTime<Utc>) -> Plan {
    super::super::plan(d, &k.observed(), cp, now)
}

/// Runs passes a minute apart from `from` until `stop` holds or 200 passes; returns the
/// last plan and checkpoint.
fn run(
    d: &DesiredPool,
    k: &mut Karpenter,
    mut cp: Option<Checkpoint>,
    from: i64,
    stop: impl Fn(&Plan) -> bool,
) -> (Plan, Option<Checkpoint>, i64) {
    for m in from..from + 200 {
        let p = plan(d, k, cp.as_ref(), t(m));
        k.apply(&p);
        cp = p.checkpoint.clone();
        if stop(&p) {
            return (p, cp, m);
        }
        // One or two ticks of Karpenter between two passes.
        for _ in 0..1 + m % 2 {
            k.step();
        }
    }
    panic!("no end after 200 passes: {:?}", cp);
}

/// The first pass closes the drift (budget 0, after the user's) before it pins the image,
/// and the checkpoint keeps the user's budgets.
#[test]
fn the_first_pass_closes_the_drift_before_it_pins_the_image() {
    let k = Karpenter::new(4);
    let p = plan(&desired(), &k, None, t(0));
    let kinds: Vec<_> = p.actions.iter().map(|a| a.action.to_string()).collect();
    assert_eq!(
        kinds,
        [
            "set the NodePool's disruption budgets (Drifted: 0)",
            "pin EC2NodeClass default to ami-new"
        ]
    );
    let Action::SetDisruptionBudgets { budgets, .. } = &p.actions[0].action else {
        panic!()
    };
    assert_eq!(budgets, &[user_budget(), Budget::drift(0)]);
    let cp = p.checkpoint.unwrap();
    assert_eq!(cp.origin_image, OLD);
    assert_eq!(cp.drift.unwrap().user_budgets, [user_budget()]);
    assert_eq!(p.status.phase, Phase::Rotating);
}

/// The whole drift: batches of 2 of 5 nodes (2, 2, 1), never more than the batch disrupted
/// between two batch soaks, the pool soak, then the user's budgets alone again.
#[test]
fn a_drift_is_paced_batch_by_batch_soaked_and_the_budgets_restored() {
    let mut d = desired();
    d.policy.batch_soak = GoDuration::from_secs(300);
    d.policy.pool_soak = GoDuration::from_secs(600);
    let mut k = Karpenter::new(5);
    let mut cp = None;
    let mut at = 0;
    let mut seen = vec![];
    for batch in 1..=3 {
        let (p, c, m) = run(&d, &mut k, cp, at, |p| {
            let n = p.checkpoint.as_ref().map_or(0, |c| c.batches_started);
            (p.status.reason == "BatchSoak" && n == batch) || p.status.reason == "PoolSoak"
        });
        seen.push((k.disrupted.len(), p.status.reason));
        cp = c;
        at = m + 1;
    }
    assert_eq!(
        seen,
        [(2, "BatchSoak"), (4, "BatchSoak"), (5, "BatchSoak")],
        "each batch disrupts its size and no more"
    );
    assert!(k.max_deleting <= 2, "at most a batch at once");
    let (_, cp, m) = run(&d, &mut k, cp, at, |p| p.status.reason == "PoolSoak");
    assert!(m >= at + 4, "the last batch soaked first");
    let at = m + 1;
    let (p, cp, _) = run(&d, &mut k, cp, at, |p| p.status.phase == Phase::Succeeded);
    assert_eq!(p.status.reason, "Done");
    assert!(
        p.status.message.contains("5/5 nodes on ami-new"),
        "{}",
        p.status.message
    );
    // The restore was written; the next pass sees it and marks it done.
    assert_eq!(k.state.budgets, [user_budget()]);
    let after = plan(&d, &k, cp.as_ref(), t(at + 300));
    assert!(after.actions.is_empty(), "{:?}", after.actions);
    assert!(after.checkpoint.unwrap().drift.unwrap().restored);
    assert_eq!(after.status.phase, Phase::Succeeded);
    // Later budgets of the user's own are theirs: rota no longer writes them.
    k.state.budgets.push(Budget::drift(1));
    let later = plan(&d, &k, after_cp(&d, &k, cp.as_ref()).as_ref(), t(at + 400));
    assert!(later.actions.is_empty(), "{:?}", later.actions);
}

fn after_cp(d: &DesiredPool, k: &Karpenter, cp: Option<&Checkpoint>) -> Option<Checkpoint> {
    let mut k = k.clone();
    k.state.budgets = vec![user_budget()];
    plan(d, &k, cp, t(1000)).checkpoint
}

/// A restart at every pass: each pass planned twice from the same checkpoint and state
/// gives the same writes (absolute) and checkpoint, and a pass whose writes were lost
/// (crash after the checkpoint) is made good by the next one, with no batch opened twice.
#[test]
fn a_restart_mid_drift_recomputes_the_same_writes_and_opens_no_batch_twice() {
    let d = desired();
    let mut k = Karpenter::new(6);
    let mut cp: Option<Checkpoint> = None;
    let mut lost = 0;
    for m in 0..200 {
        let p = plan(&d, &k, cp.as_ref(), t(m));
        let again = plan(&d, &k, cp.as_ref(), t(m));
        assert_eq!(p.actions, again.actions);
        assert_eq!(p.checkpoint, again.checkpoint);
        // Every third pass "crashes" after writing the checkpoint, before the writes.
        if m % 3 == 1 && !p.actions.is_empty() {
            lost += 1;
        } else {
            k.apply(&p);
        }
        let before = cp.as_ref().map_or(0, |c| c.batches_started);
        cp = p.checkpoint.clone();
        let after = cp.as_ref().map_or(0, |c| c.batches_started);
        assert!(after <= before + 1);
        if p.status.phase == Phase::Succeeded && p.actions.is_empty() {
            break;
        }
        k.step();
    }
    assert!(lost > 0, "the test lost some writes");
    let cp = cp.unwrap();
    assert_eq!(cp.batches_started, 3, "6 nodes in batches of 2");
    assert!(k.max_deleting <= 2);
    assert_eq!(k.disrupted.len(), 6);
    assert_eq!(k.state.budgets, [user_budget()]);
}

/// `rollout.paused`, a closed window and `rota ctl pause` close the budget mid-drift;
/// lifting them opens it again where the batch was.
#[test]
fn a_pause_a_closed_window_and_an_operator_pause_close_the_budget() {
    let d = desired();
    let mut k = Karpenter::new(4);
    let (_, cp, m) = run(&d, &mut k, None, 0, |p| {
        p.status.message.contains("Karpenter replacing 0/2")
    });
    let cp = cp.unwrap();
    let mut paused = desired();
    paused.policy.paused = true;
    let mut windowed = desired();
    windowed.policy.windows = vec![crate::fleet::resolved::Window {
        days: vec!["Sat".into()],
        start: "01:00".into(),
        end: "02:00".into(),
        time_zone: "UTC".into(),
    }];
    let mut operator = cp.clone();
    operator.operator_paused = Some("paused by alice".into());
    for (d, c, reason) in [
        (&paused, &cp, "PausedByPolicy"),
        (&windowed, &cp, "OutsideWindow"),
        (&d, &operator, "PausedByOperator"),
    ] {
        let p = plan(d, &k, Some(c), t(m + 1));
        assert_eq!(p.status.reason, reason, "{}", p.status.message);
        let Some(Action::SetDisruptionBudgets { budgets, .. }) =
            p.actions.first().map(|a| &a.action)
        else {
            panic!("{reason}: {:?}", p.actions)
        };
        assert_eq!(budgets.last(), Some(&Budget::drift(0)), "{reason}");
        assert_eq!(
            p.checkpoint.as_ref(),
            Some(c),
            "{reason}: the batch is kept"
        );
    }
    // Paused for a while: Karpenter finishes the batch's starts the open budget allowed and
    // starts no other; unpaused, the drift goes on to the end.
    let mut kp = k.clone();
    let held = passes(&paused, &mut kp, Some(cp.clone()), m + 1, 10);
    assert!(kp.disrupted.len() <= 2, "{:?}", kp.disrupted);
    let frozen = kp.disrupted.len();
    let held = passes(&paused, &mut kp, held, m + 11, 10);
    assert_eq!(kp.disrupted.len(), frozen, "nothing new while paused");
    let (p, _, _) = run(&d, &mut kp, held, m + 30, |p| {
        p.status.phase == Phase::Succeeded
    });
    assert_eq!(p.status.reason, "Done");
    assert_eq!(kp.disrupted.len(), 4);
}

/// `n` passes a minute apart from `from`; the last checkpoint.
fn passes(
    d: &DesiredPool,
    k: &mut Karpenter,
    mut cp: Option<Checkpoint>,
    from: i64,
    n: i64,
) -> Option<Checkpoint> {
    for m in from..from + n {
        let p = plan(d, k, cp.as_ref(), t(m));
        k.apply(&p);
        cp = p.checkpoint;
        k.step();
    }
    cp
}

fn failing() -> GateVerdict {
    GateVerdict::Failed {
        gate: "errors".into(),
        reason: "0.2 > 0.01".into(),
    }
}

/// A gate failing after the first batch with `rollback`: the origin AMI is pinned back and
/// the new nodes drift back, paced; the pool ends Failed (RolledBack) with the user's budgets
/// back, and stays there while the rejected image is desired.
#[test]
fn a_failed_gate_with_rollback_pins_the_origin_back_and_drifts_the_pool_back() {
    let mut d = desired();
    d.policy.on_gate_failure = OnGateFailure::Rollback;
    d.policy.batch_soak = GoDuration::from_secs(600);
    let mut k = Karpenter::new(4);
    let (_, cp, m) = run(&d, &mut k, None, 0, |p| p.status.reason == "BatchSoak");
    k.gates = failing();
    let p = plan(&d, &k, cp.as_ref(), t(m + 1));
    assert_eq!(p.status.phase, Phase::RollingBack, "{}", p.status.message);
    assert!(
        p.actions.iter().any(|a| a.action
            == Action::PinNodeClassImage {
                node_class: "default".into(),
                image: OLD.into()
            }),
        "{:?}",
        p.actions
    );
    let cp = p.checkpoint.clone();
    assert!(cp.as_ref().unwrap().rolling_back);
    k.apply(&p);
    k.step();
    let (p, cp, m) = run(&d, &mut k, cp, m + 2, |p| p.status.phase == Phase::Failed);
    assert_eq!(p.status.reason, "RolledBack");
    assert!(
        p.status.message.contains("gate errors failed"),
        "{}",
        p.status.message
    );
    assert!(
        k.state
            .claims
            .iter()
            .all(|c| c.image.as_deref() == Some(OLD))
    );
    assert_eq!(k.state.pinned(), Some(OLD));
    assert_eq!(k.state.budgets, [user_budget()]);
    assert!(k.max_deleting <= 2);
    k.gates = GateVerdict::Passing;
    let again = plan(&d, &k, cp.as_ref(), t(m + 100));
    assert_eq!(again.status.phase, Phase::Failed);
    assert!(again.actions.is_empty(), "{:?}", again.actions);
}

/// A gate failing with `pause` halts with the budget at 0; `paused: true` lifts the halt and
/// unpausing resumes.
#[test]
fn a_failed_gate_with_pause_halts_with_the_budget_closed() {
    let d = desired();
    let mut k = Karpenter::new(4);
    let (_, cp, m) = run(&d, &mut k, None, 0, |p| {
        p.status.message.contains("Karpenter replacing 0/2")
    });
    k.gates = failing();
    let p = plan(&d, &k, cp.as_ref(), t(m + 1));
    assert_eq!(
        (p.status.phase, p.status.reason),
        (Phase::Paused, "GateFailed")
    );
    assert!(p.checkpoint.as_ref().unwrap().halted.is_some());
    k.apply(&p);
    assert_eq!(k.state.budgets.last(), Some(&Budget::drift(0)));
    assert_eq!(
        k.state.pinned(),
        Some(NEW),
        "pause keeps the pin; only the budget stops it"
    );
    k.gates = GateVerdict::Passing;
    let still = plan(&d, &k, p.checkpoint.as_ref(), t(m + 2));
    assert_eq!(
        still.status.reason, "GateFailed",
        "a halt waits for a person"
    );
    let mut paused = desired();
    paused.policy.paused = true;
    let lifted = plan(&paused, &k, p.checkpoint.as_ref(), t(m + 3));
    assert_eq!(lifted.status.reason, "PausedByPolicy");
    assert!(lifted.checkpoint.as_ref().unwrap().halted.is_none());
    let (p, _, _) = run(&d, &mut k, lifted.checkpoint, m + 4, |p| {
        p.status.phase == Phase::Succeeded
    });
    assert_eq!(p.status.reason, "Done");
}

/// A NodeClass another NodePool references is not pinned: the pool is halted naming it.
#[test]
fn a_shared_nodeclass_is_not_pinned_and_the_other_pools_are_named() {
    let mut k = Karpenter::new(2);
    k.state.shared_with = vec!["batch-jobs".into()];
    let p = plan(&desired(), &k, None, t(0));
    assert!(p.actions.is_empty());
    assert!(p.checkpoint.is_none());
    assert_eq!(p.status.reason, "Halted");
    assert!(
        p.status.message.contains("batch-jobs"),
        "{}",
        p.status.message
    );
}

/// Budgets the user changes during the drift are theirs: kept (rota's appended after them)
/// and written back at the end; readOnly plans the writes without making them.
#[test]
fn budgets_changed_during_the_drift_are_kept_and_readonly_writes_nothing() {
    let d = desired();
    let mut k = Karpenter::new(4);
    let (_, cp, m) = run(&d, &mut k, None, 0, |p| {
        p.status.message.contains("Karpenter replacing 0/2")
    });
    let theirs = Budget {
        nodes: "0".into(),
        reasons: Some(vec!["Underutilized".into()]),
        ..Default::default()
    };
    // Someone edited the NodePool: their budget inserted before rota's.
    let n = k.state.budgets.len();
    k.state.budgets.insert(n - 1, theirs.clone());
    let (_, _, _) = run(&d, &mut k, cp, m + 1, |p| {
        p.status.phase == Phase::Succeeded
    });
    assert_eq!(k.state.budgets, [user_budget(), theirs]);
    let mut ro = desired();
    ro.mode = Mode::ReadOnly;
    let fresh = Karpenter::new(2);
    let p = plan(&ro, &fresh, None, t(0));
    assert!(p.actions.is_empty());
    assert_eq!(p.dry_run.len(), 2);
    assert!(p.checkpoint.is_none());
}

/// Every NodeClaim already on the pinned AMI: up to date, nothing written.
#[test]
fn a_pool_on_the_pinned_image_is_up_to_date() {
    let mut k = Karpenter::new(3);
    k.state.ami_ids = vec![NEW.into()];
    for c in &mut k.state.claims {
        c.image = Some(NEW.into());
    }
    let p = plan(&desired(), &k, None, t(0));
    assert_eq!(p.status.reason, "UpToDate");
    assert!(p.actions.is_empty());
}

/// `rota ctl pause` closes the budget, `resume` opens it again, `complete-soak` ends a
/// batch soak early: the requests steer a drift like any rotation.
#[test]
fn operator_requests_steer_the_drift() {
    use crate::rotate::operator::{Request, Verb};
    let mut d = desired();
    d.policy.batch_soak = GoDuration::from_secs(3600);
    let mut k = Karpenter::new(4);
    let (_, cp, m) = run(&d, &mut k, None, 0, |p| p.status.phase == Phase::Soaking);
    let steer = |cp: Option<&Checkpoint>, verb, at: i64| {
        let r = Request::new(verb, t(at), Some("ana"));
        crate::rotate::plan_with(&d, &k.observed(), cp, Some(&r), t(at))
    };
    let (p, said) = steer(cp.as_ref(), Verb::Pause, m + 1);
    assert!(said.unwrap().starts_with("paused"));
    assert_eq!(p.status.reason, "PausedByOperator");
    let (p, said) = steer(p.checkpoint.as_ref(), Verb::Resume, m + 2);
    assert!(said.unwrap().starts_with("resumed"));
    assert_eq!(p.status.reason, "BatchSoak");
    let (p, said) = steer(p.checkpoint.as_ref(), Verb::CompleteSoak, m + 3);
    assert!(
        said.unwrap().starts_with("soak ended early"),
        "{}",
        p.status.message
    );
    assert_ne!(p.status.reason, "BatchSoak", "{}", p.status.message);
}

fn fleet_stop() -> crate::fleet::stops::FleetStop {
    crate::fleet::stops::FleetStop {
        id: "cd".repeat(20),
        wave: None,
        cluster: Some("prod".into()),
        reason: "INC-4712".into(),
        by: "oncall".into(),
        at: t(0),
        trust: Default::default(),
    }
}

/// A fleet stop (`rota stop`) holds a Karpenter drift: before the pin, nothing is pinned;
/// mid-drift, rota's Drifted budget goes to 0 nodes, Karpenter finishes what it started and
/// starts nothing more, a failed gate's rollback waits too; lifted, the drift goes on.
#[test]
fn a_fleet_stop_closes_the_drifted_budget_and_holds_a_rollback() {
    let mut stopped = desired();
    stopped.policy.stop = Some(fleet_stop());
    let k = Karpenter::new(4);
    let p = plan(&stopped, &k, None, t(0));
    assert_eq!(p.status.reason, "Stopped", "{}", p.status.message);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a.action, Action::PinNodeClassImage { .. })),
        "{:?}",
        p.actions
    );
    let d = desired();
    let mut k = Karpenter::new(4);
    let (_, cp, m) = run(&d, &mut k, None, 0, |p| {
        p.status.message.contains("Karpenter replacing 0/2")
    });
    let p = plan(&stopped, &k, cp.as_ref(), t(m + 1));
    assert_eq!(p.status.reason, "Stopped", "{}", p.status.message);
    assert!(
        p.status
            .message
            .contains("rota stop --clear --cluster prod"),
        "{}",
        p.status.message
    );
    let Some(Action::SetDisruptionBudgets { budgets, .. }) = p.actions.first().map(|a| &a.action)
    else {
        panic!("{:?}", p.actions)
    };
    assert_eq!(budgets.last(), Some(&Budget::drift(0)));
    let held = passes(&stopped, &mut k, cp.clone(), m + 1, 10);
    let frozen = k.disrupted.len();
    assert!(frozen <= 2, "{:?}", k.disrupted);
    // A gate failing with rollback while stopped: nothing is pinned back yet.
    let mut rollback = stopped.clone();
    rollback.policy.on_gate_failure = OnGateFailure::Rollback;
    k.gates = failing();
    let held = passes(&rollback, &mut k, held, m + 11, 10);
    assert_eq!(k.disrupted.len(), frozen, "nothing new while stopped");
    assert_eq!(k.state.pinned(), Some(NEW));
    assert!(!held.as_ref().unwrap().rolling_back);
    k.gates = GateVerdict::Passing;
    let (p, _, _) = run(&d, &mut k, held, m + 30, |p| {
        p.status.phase == Phase::Succeeded
    });
    assert_eq!(p.status.reason, "Done");
    assert_eq!(k.disrupted.len(), 4);
}
