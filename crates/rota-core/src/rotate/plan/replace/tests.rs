//! `strategy: replace` pass by pass against a small model of a self-managed group (a group
//! that launches to its desired capacity from its template, nodes with one workload pod
//! each): the invariant "never more nodes than before the batch" checked after every step,
//! over many pool shapes, and a crash at every step.

use chrono::{DateTime, Duration, Utc};

use crate::cloud::{GroupRef, GroupState, Instance, Lifecycle};
use crate::fleet::resolved::{
    BatchSize, DesiredPool, EffectivePolicy, Mode, OnGateFailure, RolloutStrategy,
};
use crate::rotate::{
    Action, Checkpoint, GateVerdict, Observed, ObservedNode, ObservedPod, Phase, Plan, PodKind,
    Stage, plan,
};

const OLD: &str = "ami-0000000000000000a";
const NEW: &str = "ami-0000000000000000b";

fn t(step: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
        + Duration::minutes(step)
}

fn desired(batch: u32) -> DesiredPool {
    DesiredPool {
        owner_image: None,
        cluster: "prod".into(),
        name: "gpu".into(),
        channel: "general".into(),
        version: "v2".into(),
        image: NEW.into(),
        arch: Default::default(),
        kubelet: None,
        released: None,
        max_age: None,
        group: GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "gpu".into(),
        },
        node_selector: Default::default(),
        policy: EffectivePolicy {
            batch: BatchSize::Count(batch),
            strategy: RolloutStrategy::Replace,
            ..EffectivePolicy::default()
        },
        gates: vec![],
        mode: Mode::Reconcile,
    }
}

#[derive(Clone, Debug)]
struct Inst {
    n: u32,
    image: String,
    lifecycle: Lifecycle,
    /// Pending: ticks until Ready; Terminating: ticks until gone.
    ticks: u32,
    /// A boot that never gets Ready.
    broken: bool,
}

/// One self-managed group as a cloud and a cluster would run it, one tick a minute.
#[derive(Clone, Debug)]
struct Group {
    size: u32,
    desired: u32,
    template: String,
    insts: Vec<Inst>,
    next: u32,
    /// node -> rota's cordon owner
    cordons: std::collections::BTreeMap<String, String>,
    /// pod -> node (None: pending, scheduled on the next tick)
    pods: std::collections::BTreeMap<String, Option<String>>,
    boot_ticks: u32,
    gates: GateVerdict,
    /// Images that never boot.
    broken_image: Option<String>,
    /// Every instance rota terminated, in order (duplicates kept).
    removed: Vec<String>,
}

fn node_name(n: u32) -> String {
    format!("n{n}")
}

impl Group {
    fn new(size: u32, boot_ticks: u32) -> Group {
        let insts = (0..size)
            .map(|n| Inst {
                n,
                image: OLD.into(),
                lifecycle: Lifecycle::InService,
                ticks: 0,
                broken: false,
            })
            .collect();
        let pods = (0..size)
            .map(|n| (format!("p{n}"), Some(node_name(n))))
            .collect();
        Group {
            size,
            desired: size,
            template: OLD.into(),
            insts,
            next: size,
            cordons: Default::default(),
            pods,
            boot_ticks,
            gates: GateVerdict::Passing,
            broken_image: None,
            removed: vec![],
        }
    }

    fn ready(&self, i: &Inst) -> bool {
        i.lifecycle == Lifecycle::InService && !i.broken
    }

    fn observed(&self) -> Observed {
        let instances = self
            .insts
            .iter()
            .map(|i| Instance {
                id: format!("i-{}", node_name(i.n)),
                provider_id: format!("aws:///us-east-1a/i-{}", node_name(i.n)),
                image: i.image.clone(),
                zone: "us-east-1a".into(),
                lifecycle: i.lifecycle,
                launch_error: None,
            })
            .collect();
        let nodes = self
            .insts
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Pending || i.broken)
            .map(|i| {
                let name = node_name(i.n);
                ObservedNode {
                    provider_id: format!("aws:///us-east-1a/i-{name}"),
                    image_label: None,
                    ready: self.ready(i),
                    cordoned: self.cordons.contains_key(&name),
                    cordoned_by: self.cordons.get(&name).cloned(),
                    do_not_disrupt: false,
                    scale_down_disabled: false,
                    pods: self
                        .pods
                        .iter()
                        .filter(|(_, on)| on.as_deref() == Some(name.as_str()))
                        .map(|(p, _)| ObservedPod {
                            namespace: "ml".into(),
                            name: p.as_str().into(),
                            kind: PodKind::Workload,
                            do_not_disrupt: false,
                            uses_empty_dir: false,
                            terminating: false,
                            pdb: None,
                            pdb_count: 0,
                        })
                        .collect(),
                    name,
                }
            })
            .collect();
        Observed {
            group: GroupState {
                group: desired(1).group,
                desired: self.desired,
                min: 0,
                max: self.size,
                template_image: self.template.clone(),
                instances,
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
            pools: vec![],
            refused: None,
        }
    }

    fn inst(&mut self, id: &str) -> Option<&mut Inst> {
        self.insts
            .iter_mut()
            .find(|i| format!("i-{}", node_name(i.n)) == id)
    }

    /// One action as the cloud and the API server take it; a broken invariant is an Err.
    fn apply(&mut self, a: &Action) -> Result<(), String> {
        match a {
            Action::SetImage { image } => self.template = image.clone(),
            Action::Cordon { node, owner } => {
                self.cordons.insert(node.clone(), owner.clone());
            }
            Action::Uncordon { node } => {
                // A removed node's cordon stays until it is gone: uncordoned, it would take
                // pods that die with it.
                if self
                    .insts
                    .iter()
                    .any(|i| node_name(i.n) == *node && i.lifecycle == Lifecycle::Terminating)
                {
                    return Err(format!(
                        "uncordoned {node}, whose instance is being removed"
                    ));
                }
                self.cordons.remove(node);
            }
            Action::Evict { pod, .. } => {
                self.pods.insert(pod.clone(), None);
            }
            Action::TerminateForReplacement { instance_id, node } => {
                if let Some(node) = node
                    && let Some((p, _)) = self.pods.iter().find(|(_, on)| on.as_ref() == Some(node))
                {
                    return Err(format!(
                        "invariant 3: removed {instance_id} while {p} runs on it"
                    ));
                }
                self.removed.push(instance_id.clone());
                if let Some(i) = self.inst(instance_id)
                    && i.lifecycle != Lifecycle::Terminating
                {
                    i.lifecycle = Lifecycle::Terminating;
                    // Shutting down takes a few minutes: the node outlives the removal.
                    i.ticks = 3;
                }
            }
            // Put back after an interrupted removal: never above the pool's size.
            Action::SetCapacity { desired, max: None } if *desired <= self.size => {
                self.desired = *desired;
            }
            // A replace pool is never surged, shrunk or given a new maximum.
            other => return Err(format!("strategy replace planned {other}")),
        }
        Ok(())
    }

    fn tick(&mut self) {
        for i in &mut self.insts {
            if i.ticks > 0 {
                i.ticks -= 1;
            }
            if i.lifecycle == Lifecycle::Pending && i.ticks == 0 && !i.broken {
                i.lifecycle = Lifecycle::InService;
            }
        }
        let gone: Vec<String> = self
            .insts
            .iter()
            .filter(|i| i.lifecycle == Lifecycle::Terminating && i.ticks == 0)
            .map(|i| node_name(i.n))
            .collect();
        self.insts
            .retain(|i| !(i.lifecycle == Lifecycle::Terminating && i.ticks == 0));
        for n in &gone {
            self.cordons.remove(n);
        }
        // The group launches to its desired capacity from its template.
        let live = self
            .insts
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
            .count() as u32;
        for _ in live..self.desired {
            let broken = self.broken_image.as_deref() == Some(self.template.as_str());
            self.insts.push(Inst {
                n: self.next,
                image: self.template.clone(),
                lifecycle: Lifecycle::Pending,
                ticks: self.boot_ticks,
                broken,
            });
            self.next += 1;
        }
        // Evicted pods land on the schedulable node with the fewest pods.
        let schedulable: Vec<String> = self
            .insts
            .iter()
            .filter(|i| self.ready(i) && !self.cordons.contains_key(&node_name(i.n)))
            .map(|i| node_name(i.n))
            .collect();
        let pending: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, on)| on.is_none())
            .map(|(p, _)| p.clone())
            .collect();
        for p in pending {
            let least = schedulable
                .iter()
                .min_by_key(|n| {
                    self.pods
                        .values()
                        .filter(|on| on.as_deref() == Some(n.as_str()))
                        .count()
                })
                .cloned();
            if let Some(n) = least {
                self.pods.insert(p, Some(n));
            }
        }
    }

    /// "Never more nodes than before the batch": no more live instances or registered
    /// nodes of live instances than the pool had, the capacity never changed, and at most
    /// one batch out of service.
    fn check(&self, batch: u32) -> Result<(), String> {
        let live = self
            .insts
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
            .count() as u32;
        if live > self.size || self.desired != self.size {
            return Err(format!(
                "invariant: {live} live instance(s), desired {} for a pool of {}",
                self.desired, self.size
            ));
        }
        let serving = self
            .insts
            .iter()
            .filter(|i| self.ready(i) && !self.cordons.contains_key(&node_name(i.n)))
            .count() as u32;
        if serving + batch < self.size {
            return Err(format!(
                "capacity dipped by more than a batch: {serving} node(s) serving of {}",
                self.size
            ));
        }
        Ok(())
    }

    /// Every live instance on NEW and Ready, as many as the pool had (a removed one may
    /// still be shutting down).
    fn all_new(&self) -> bool {
        let live: Vec<&Inst> = self
            .insts
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
            .collect();
        live.len() as u32 == self.size && live.iter().all(|i| i.image == NEW && self.ready(i))
    }
}

/// How a crash at one step loses work: the plan never persisted, or persisted with only
/// its first `n` actions carried out.
#[derive(Clone, Copy, Debug)]
enum Crash {
    BeforeCheckpoint,
    After(usize),
}

struct Run {
    steps: usize,
    last: Plan,
    cp: Option<Checkpoint>,
}

fn run(g: &mut Group, d: &DesiredPool, crash: Option<(usize, Crash)>) -> Result<Run, String> {
    let batch = d.policy.batch.nodes(g.size);
    let mut cp: Option<Checkpoint> = None;
    for step in 0..400 {
        let p = plan(d, &g.observed(), cp.as_ref(), t(step as i64));
        let actions: Vec<Action> = p.actions.iter().map(|a| a.action.clone()).collect();
        let (persist, carried) = match crash {
            Some((at, Crash::BeforeCheckpoint)) if at == step => (false, 0),
            Some((at, Crash::After(n))) if at == step => (true, n),
            _ => (true, actions.len()),
        };
        if persist {
            cp = p.checkpoint.clone();
        }
        for a in actions.iter().take(carried) {
            g.apply(a).map_err(|e| format!("step {step}: {e}"))?;
            g.check(batch)
                .map_err(|e| format!("step {step} after {a}: {e}"))?;
        }
        if p.status.phase == Phase::Succeeded && actions.is_empty() {
            // A few passes more while what was removed shuts down: nothing may touch it.
            for extra in 1..=4 {
                g.tick();
                let after = plan(d, &g.observed(), cp.as_ref(), t((step + extra) as i64));
                for a in &after.actions {
                    g.apply(&a.action)
                        .map_err(|e| format!("after the end, step {}: {e}", step + extra))?;
                }
                cp = after.checkpoint;
            }
            return Ok(Run {
                steps: step,
                last: p,
                cp,
            });
        }
        if matches!(p.status.phase, Phase::Paused | Phase::Failed) && actions.is_empty() {
            return Ok(Run {
                steps: step,
                last: p,
                cp,
            });
        }
        g.tick();
        g.check(batch)
            .map_err(|e| format!("step {step} after a tick: {e}"))?;
    }
    Err("did not settle in 400 steps".into())
}

/// A tiny deterministic generator for the shapes of the property test.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn a_batch_is_drained_and_removed_first_and_the_group_brings_up_its_replacements() {
    let d = desired(2);
    let mut g = Group::new(4, 2);
    // Pass 1: the batch opens (gates pass) and cordons; nothing is surged.
    let p = plan(&d, &g.observed(), None, t(0));
    let shown: Vec<String> = p.actions.iter().map(|a| a.action.to_string()).collect();
    assert_eq!(
        shown,
        ["cordon n0", "cordon n1", "evict ml/p0", "evict ml/p1"]
    );
    let b = p
        .checkpoint
        .as_ref()
        .unwrap()
        .stage
        .batch()
        .unwrap()
        .clone();
    assert!(b.replace && b.target_capacity == 4, "{b:?}");
    assert!(
        p.actions[0].reason.contains("strategy replace"),
        "{}",
        p.actions[0].reason
    );
    let r = run(&mut g, &d, None).unwrap();
    assert_eq!(r.last.status.reason, "Done", "{:?}", r.last.status);
    assert!(g.all_new(), "{g:?}");
    assert_eq!(
        g.removed.len(),
        4,
        "each old instance removed once: {:?}",
        g.removed
    );
}

#[test]
fn the_template_is_set_right_before_the_first_removal_and_the_refill_is_named() {
    let d = desired(2);
    let mut g = Group::new(4, 3);
    let mut cp = None;
    let mut seen_refill = false;
    for step in 0..40 {
        let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        let kinds: Vec<&Action> = p.actions.iter().map(|a| &a.action).collect();
        if let Some(first) = kinds
            .iter()
            .position(|a| matches!(a, Action::TerminateForReplacement { .. }))
            && g.template == OLD
        {
            assert!(
                matches!(kinds[first - 1], Action::SetImage { image } if image == NEW),
                "{kinds:?}"
            );
        }
        if p.status.reason == "Refilling" || p.status.reason == "WaitingReady" {
            seen_refill = true;
            assert_eq!(p.status.phase, Phase::Rotating);
        }
        for a in &kinds {
            g.apply(a).unwrap();
        }
        if p.status.phase == Phase::Succeeded {
            break;
        }
        g.tick();
    }
    assert!(seen_refill);
    assert!(g.all_new());
}

/// The invariant as a property over each step, across pool sizes, batch sizes, boot times
/// and partial rollouts.
#[test]
fn never_more_nodes_than_before_the_batch_at_any_step() {
    let mut rng = Lcg(7);
    for case in 0..200 {
        let size = 1 + rng.below(12) as u32;
        let batch = 1 + rng.below(5) as u32;
        let boot = 1 + rng.below(4) as u32;
        let mut d = desired(batch);
        if rng.below(3) == 0 {
            d.policy.batch = BatchSize::Percent(1 + rng.below(60) as u8);
        }
        let mut g = Group::new(size, boot);
        let r = run(&mut g, &d, None)
            .unwrap_or_else(|e| panic!("case {case} (size {size}, batch {batch}): {e}"));
        assert_eq!(r.last.status.phase, Phase::Succeeded, "case {case}");
        assert!(g.all_new(), "case {case}: {g:?}");
        let distinct: std::collections::BTreeSet<&String> = g.removed.iter().collect();
        assert_eq!(distinct.len() as u32, size, "case {case}");
    }
}

/// A crash at every step, losing the whole plan or part of its actions: the rotation ends
/// the same, each old instance removed and none twice over, no capacity ever raised, and
/// as many batches as without the crash.
#[test]
fn a_crash_at_any_step_resumes_without_a_second_removal_or_a_surge() {
    let d = desired(2);
    let mut clean = Group::new(5, 2);
    let base = run(&mut clean, &d, None).unwrap();
    let batches = base.cp.as_ref().unwrap().batches_started;
    assert_eq!(batches, 3);
    for step in 0..=base.steps {
        for crash in [Crash::BeforeCheckpoint, Crash::After(0), Crash::After(1)] {
            let mut g = Group::new(5, 2);
            let r = run(&mut g, &d, Some((step, crash)))
                .unwrap_or_else(|e| panic!("crash {crash:?} at step {step}: {e}"));
            assert_eq!(r.last.status.phase, Phase::Succeeded, "{crash:?} at {step}");
            assert!(g.all_new(), "{crash:?} at {step}");
            let old: Vec<&String> = g
                .removed
                .iter()
                .filter(|i| i.as_str() < "i-n5" && i.len() == 4)
                .collect();
            let distinct: std::collections::BTreeSet<&String> = g.removed.iter().collect();
            assert_eq!(
                distinct.len(),
                5,
                "{crash:?} at {step}: only the 5 old instances are removed: {:?} ({old:?})",
                g.removed
            );
            assert_eq!(
                r.cp.as_ref().unwrap().batches_started,
                batches,
                "{crash:?} at {step}: no second batch"
            );
        }
    }
}

#[test]
fn a_failing_gate_before_the_removal_rolls_back_without_touching_a_node() {
    let mut d = desired(2);
    d.policy.on_gate_failure = OnGateFailure::Rollback;
    let mut g = Group::new(4, 2);
    g.gates = GateVerdict::Failed {
        gate: "errors".into(),
        reason: "5xx at 3%".into(),
    };
    let p = plan(&d, &g.observed(), None, t(0));
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a.action, Action::Cordon { .. } | Action::Evict { .. })),
        "{:?}",
        p.actions
    );
    // The rollback has nothing to move back: the pool ends rolled back, untouched.
    let cp = p.checkpoint.clone().unwrap();
    assert!(cp.rolling_back, "{cp:?}");
    assert_eq!(p.status.phase, Phase::Failed, "{:?}", p.status);
    assert!(g.removed.is_empty());
}

#[test]
fn a_gate_failing_in_the_soak_rolls_the_replaced_nodes_back_by_replacing_them_again() {
    let mut d = desired(2);
    d.policy.on_gate_failure = OnGateFailure::Rollback;
    d.policy.batch_soak = crate::fleet::duration::GoDuration::from_secs(600);
    let mut g = Group::new(4, 2);
    let mut cp = None;
    let mut failed_at = None;
    for step in 0..200 {
        let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        if failed_at.is_none() && p.status.reason == "BatchSoak" {
            g.gates = GateVerdict::Failed {
                gate: "errors".into(),
                reason: "5xx at 3%".into(),
            };
            failed_at = Some(step);
        }
        for a in &p.actions {
            g.apply(&a.action).unwrap();
            g.check(2).unwrap();
        }
        if matches!(p.status.phase, Phase::Failed | Phase::Succeeded) && p.actions.is_empty() {
            assert_eq!(p.status.reason, "RolledBack", "{:?}", p.status);
            break;
        }
        g.tick();
        g.check(2).unwrap();
    }
    assert!(failed_at.is_some());
    assert!(
        g.insts.iter().all(|i| i.image == OLD) && g.template == OLD,
        "{g:?}"
    );
    // Two of batch 1 removed, then the two replacements on NEW removed again.
    assert_eq!(g.removed.len(), 4, "{:?}", g.removed);
}

#[test]
fn replacements_that_never_boot_are_retried_then_halt_with_the_template_on_the_origin() {
    let d = desired(1);
    let mut g = Group::new(3, 2);
    g.broken_image = Some(NEW.into());
    let r = run(&mut g, &d, None).unwrap();
    assert_eq!(r.last.status.phase, Phase::Paused, "{:?}", r.last.status);
    assert_eq!(r.last.status.reason, "Halted", "{:?}", r.last.status);
    let note = r.last.status.stop.as_ref().unwrap();
    assert_eq!(note.reason, "BatchFailed", "{note:?}");
    assert!(
        r.last.status.message.contains("did not boot"),
        "{}",
        r.last.status.message
    );
    // Invariant 8: what the group launches from now on boots the origin.
    assert_eq!(g.template, OLD);
    // One old node removed (batch 1 of 1 node), its replacement tried 1 + nodeReadyRetries times.
    let old_removed = g.removed.iter().filter(|i| *i == "i-n0").count();
    assert_eq!(old_removed, 1, "{:?}", g.removed);
    assert_eq!(g.removed.len(), 1 + 2, "{:?}", g.removed);
}

/// A replacement not Ready within `nodeReadyTimeout` is replaced after the surge's backoff
/// (30 s for the first retry), not at once: the batch waits with reason
/// `ReplacingNotReady`, saying when, and the moment is in the checkpoint, so a restart waits
/// for the same one. Then the group replaces it (a terminate without a decrement).
#[test]
fn a_replacement_not_ready_in_time_is_replaced_after_a_backoff() {
    let d = desired(1);
    let mut g = Group::new(2, 2);
    g.broken_image = Some(NEW.into());
    let mut cp = None;
    let mut at = 0;
    for step in 0..20 {
        let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        for a in &p.actions {
            g.apply(&a.action).unwrap();
        }
        g.tick();
        at = step;
        if matches!(cp.as_ref().unwrap().stage, Stage::WaitingReady { .. }) {
            break;
        }
    }
    let waiting = cp.clone().unwrap();
    assert!(
        matches!(waiting.stage, Stage::WaitingReady { .. }),
        "{waiting:?}"
    );
    // Past nodeReadyTimeout (15m): nothing terminated yet, the retry is 30 s away.
    let timed_out = t(at + 16);
    let p = plan(&d, &g.observed(), Some(&waiting), timed_out);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.reason, "ReplacingNotReady", "{}", p.status.message);
    assert!(
        p.status.message.contains("attempt 2 of 3"),
        "{}",
        p.status.message
    );
    let held = p.checkpoint.clone().unwrap();
    let due = held.stage.batch().unwrap().replace_at.expect("recorded");
    assert_eq!(due, timed_out + Duration::seconds(30));
    // A restart 10 s later waits for the same moment.
    let p = plan(
        &d,
        &g.observed(),
        Some(&held),
        timed_out + Duration::seconds(10),
    );
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(
        p.checkpoint.unwrap().stage.batch().unwrap().replace_at,
        Some(due)
    );
    // Due: the group replaces it.
    let p = plan(&d, &g.observed(), Some(&held), due);
    assert!(
        p.actions
            .iter()
            .any(|a| matches!(a.action, Action::TerminateForReplacement { .. })),
        "{:?}",
        p.actions
    );
    let b = p.checkpoint.unwrap();
    let b = b.stage.batch().unwrap();
    assert_eq!((b.ready_retries, b.replace_at), (1, None));
}

#[test]
fn a_revert_mid_refill_replaces_what_boots_the_image_left() {
    let d = desired(1);
    let mut g = Group::new(2, 2);
    g.broken_image = Some(NEW.into());
    let mut cp = None;
    // Up to the refill of batch 1 (its replacement booting NEW, never Ready).
    for step in 0..10 {
        let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        for a in &p.actions {
            g.apply(&a.action).unwrap();
        }
        g.tick();
        if matches!(cp.as_ref().unwrap().stage, Stage::WaitingReady { .. }) {
            break;
        }
    }
    assert!(matches!(
        cp.as_ref().unwrap().stage,
        Stage::WaitingReady { .. }
    ));
    // The repo goes back to OLD: a fast rollback.
    let mut back = d.clone();
    back.image = OLD.into();
    back.version = "v1".into();
    let r = {
        let mut cp = cp;
        let mut out = None;
        for step in 10..200 {
            let p = plan(&back, &g.observed(), cp.as_ref(), t(step));
            cp = p.checkpoint.clone();
            for a in &p.actions {
                g.apply(&a.action).unwrap();
                g.check(1).unwrap();
            }
            if p.status.phase == Phase::Succeeded && p.actions.is_empty() {
                out = Some(p);
                break;
            }
            g.tick();
        }
        out.expect("settles")
    };
    assert_eq!(r.status.reason, "RolledBack", "{:?}", r.status);
    assert!(g.insts.iter().all(|i| i.image == OLD && !i.broken), "{g:?}");
}

#[test]
fn no_batch_starts_while_the_group_is_short_of_its_capacity() {
    let d = desired(2);
    let mut g = Group::new(4, 2);
    // An instance the cloud has not brought back yet (someone else terminated it).
    g.insts[3].lifecycle = Lifecycle::Terminating;
    g.insts[3].ticks = 5;
    let p = plan(&d, &g.observed(), None, t(0));
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.reason, "Refilling");
    assert!(
        p.status
            .message
            .contains("3 live instance(s) of its desired 4"),
        "{}",
        p.status.message
    );
}

#[test]
fn a_replace_batch_keeps_its_order_when_the_strategy_changes_mid_batch() {
    let d = desired(2);
    let mut g = Group::new(4, 3);
    let mut cp = None;
    for step in 0..6 {
        let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        for a in &p.actions {
            g.apply(&a.action).unwrap();
        }
        g.tick();
    }
    assert!(cp.as_ref().unwrap().stage.batch().unwrap().replace);
    // Back to surge: the batch under way finishes as the replace batch it is (no surge);
    // the next one surges.
    let mut surge = d.clone();
    surge.policy.strategy = RolloutStrategy::Surge;
    let batch = cp.as_ref().unwrap().stage.batch().unwrap().number;
    for step in 6..60 {
        let p = plan(&surge, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        let same = cp
            .as_ref()
            .and_then(|c| c.stage.batch())
            .is_some_and(|b| b.number == batch);
        if !same {
            break;
        }
        for a in &p.actions {
            g.apply(&a.action).unwrap();
            g.check(2).unwrap();
        }
        g.tick();
    }
}

#[test]
fn a_fleet_stop_holds_a_replace_batch_before_its_removal() {
    let d = desired(2);
    let mut g = Group::new(4, 2);
    let mut cp = None;
    // Up to the drain of batch 1.
    let p = plan(&d, &g.observed(), cp.as_ref(), t(0));
    cp = p.checkpoint.clone();
    for a in &p.actions {
        g.apply(&a.action).unwrap();
    }
    let mut stopped = d.clone();
    stopped.policy.stop = Some(crate::fleet::stops::FleetStop {
        id: "s1".into(),
        wave: None,
        cluster: None,
        reason: "incident 42".into(),
        by: "oncall@example.com".into(),
        at: t(0),
        trust: Default::default(),
    });
    for step in 1..10 {
        let p = plan(&stopped, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        assert_eq!(p.status.reason, "Stopped");
        assert!(p.actions.is_empty(), "{:?}", p.actions);
        g.tick();
    }
    assert!(g.removed.is_empty());
    // Cleared: the batch goes on where it was, and ends.
    let r = {
        let mut out = None;
        for step in 10..200 {
            let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
            cp = p.checkpoint.clone();
            for a in &p.actions {
                g.apply(&a.action).unwrap();
                g.check(2).unwrap();
            }
            if p.status.phase == Phase::Succeeded && p.actions.is_empty() {
                out = Some(p);
                break;
            }
            g.tick();
        }
        out.expect("settles")
    };
    assert_eq!(r.status.reason, "Done");
    assert_eq!(cp.unwrap().batches_started, 2);
}

/// A terminate without a decrement that is two calls at the cloud (GCP, Azure: delete, then
/// resize back) interrupted between them: the group is one short. The batch puts the
/// capacity back to what it was before it, and no higher, and ends.
#[test]
fn a_removal_interrupted_before_its_resize_gets_the_capacity_put_back() {
    let d = desired(1);
    let mut g = Group::new(3, 2);
    let mut cp = None;
    let mut interrupted = false;
    for step in 0..100 {
        let p = plan(&d, &g.observed(), cp.as_ref(), t(step));
        cp = p.checkpoint.clone();
        for a in &p.actions {
            g.apply(&a.action).unwrap();
            if !interrupted && matches!(a.action, Action::TerminateForReplacement { .. }) {
                // The delete lowered the size; the resize back never ran.
                g.desired -= 1;
                interrupted = true;
            }
        }
        if p.status.phase == Phase::Succeeded && p.actions.is_empty() {
            break;
        }
        g.tick();
        assert!(g.desired <= 3);
    }
    assert!(interrupted);
    assert!(g.all_new(), "{g:?}");
    assert_eq!(g.desired, 3);
}
