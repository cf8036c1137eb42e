//! The in-memory model world the rotation sequence tests and the makespan bench drive the
//! planner against: a cloud group (capacity, instances that boot in a few ticks), nodes,
//! workload pods with PodDisruptionBudgets, DaemonSet pods, a scheduler; and the run loop
//! plan → persist the checkpoint → apply → advance, checking the invariants after each step.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use chrono::{DateTime, Duration, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use rota::cloud::{CloudError, CloudErrorKind, GroupRef, GroupState, Instance, Lifecycle};
use rota::controller::apply::ApplyError;
use rota::errors::Classify;
use rota::fleet::resolved::{BatchSize, DesiredPool, EffectivePolicy, Mode, OnDrainTimeout};
use rota::rotate::aftermath::{self, step_events};
use rota::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
use rota::rotate::status::{Reconciled, compose};
use rota::rotate::stuck::ErrorTracker;
use rota::rotate::{
    Action, Checkpoint, GateVerdict, Observed, ObservedNode, ObservedPod, PdbRef, Phase, Plan,
    PodKind, Stage, plan,
};

pub const OLD: &str = "ami-00000000000000001";
pub const NEW: &str = "ami-00000000000000002";
pub const NEWER: &str = "ami-00000000000000003";
pub const TICK: i64 = 30;

pub fn start_time() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

// --- the model world -----------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct MInstance {
    pub id: String,
    pub image: String,
    pub lifecycle: Lifecycle,
    /// Ticks until it is InService (Pending) or gone (Terminating).
    pub ticks_left: u32,
    /// Its node never becomes Ready (a broken image or bootstrap).
    pub never_ready: bool,
}

#[derive(Clone, Debug)]
pub struct MNode {
    pub instance: String,
    pub ready: bool,
    pub cordoned: bool,
    pub cordoned_by: Option<String>,
    pub do_not_disrupt: bool,
    pub scale_down_disabled: bool,
}

#[derive(Clone, Debug)]
pub struct MPod {
    pub name: String,
    pub workload: String,
    pub node: Option<String>,
    pub kind: PodKind,
    /// Evicted: goes away after this many ticks.
    pub terminating: Option<u32>,
    pub do_not_disrupt: bool,
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    pub replicas: u32,
    /// PDB minAvailable, if the workload has a PDB.
    pub min_available: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub now: DateTime<Utc>,
    pub desired: u32,
    pub max: u32,
    pub template: String,
    pub instances: Vec<MInstance>,
    pub nodes: BTreeMap<String, MNode>,
    pub pods: Vec<MPod>,
    pub workloads: Vec<Workload>,
    pub next_id: u32,
    pub next_pod: u32,
    /// Boot time range in ticks.
    pub boot: (u32, u32),
    /// Instances booting this image never get Ready.
    pub broken_image: Option<String>,
    /// The next this many instances created never get Ready (a boot that failed once and the
    /// cloud did not replace); the ones after boot normally.
    pub flaky_boots: u32,
    /// The cloud accepts capacity but creates nothing (quota exhausted).
    pub quota_exhausted: bool,
    pub rng: ChaCha8Rng,
    /// Broken invariants noticed while time passed (a workload pod killed with its node).
    pub violations: Vec<String>,
}

pub fn node_name(id: &str) -> String {
    format!("node-{}", id.trim_start_matches("i-"))
}

pub fn provider_id(id: &str) -> String {
    format!("aws:///us-east-1a/{id}")
}

impl Model {
    pub fn new(size: u32, workloads: Vec<Workload>, boot: (u32, u32), seed: u64) -> Model {
        let mut m = Model {
            now: start_time(),
            desired: size,
            max: size,
            template: OLD.into(),
            instances: vec![],
            nodes: BTreeMap::new(),
            pods: vec![],
            workloads,
            next_id: 1,
            next_pod: 1,
            boot,
            broken_image: None,
            flaky_boots: 0,
            quota_exhausted: false,
            rng: ChaCha8Rng::seed_from_u64(seed),
            violations: vec![],
        };
        for _ in 0..size {
            let id = m.create_instance();
            let inst = m.instances.iter_mut().find(|i| i.id == id).unwrap();
            inst.lifecycle = Lifecycle::InService;
            inst.ticks_left = 0;
            m.register(&id);
            m.nodes.get_mut(&node_name(&id)).unwrap().ready = true;
        }
        for w in m.workloads.clone() {
            for _ in 0..w.replicas {
                m.add_pod(&w.name);
            }
        }
        m.schedule();
        m
    }

    fn create_instance(&mut self) -> String {
        let id = format!("i-{:04}", self.next_id);
        self.next_id += 1;
        let boot = self.rng.random_range(self.boot.0..=self.boot.1);
        let flaky = self.flaky_boots > 0;
        self.flaky_boots = self.flaky_boots.saturating_sub(1);
        self.instances.push(MInstance {
            id: id.clone(),
            image: self.template.clone(),
            lifecycle: Lifecycle::Pending,
            ticks_left: boot,
            never_ready: flaky || self.broken_image.as_deref() == Some(self.template.as_str()),
        });
        id
    }

    fn register(&mut self, id: &str) {
        let name = node_name(id);
        self.nodes.insert(
            name.clone(),
            MNode {
                instance: id.into(),
                ready: false,
                cordoned: false,
                cordoned_by: None,
                do_not_disrupt: false,
                scale_down_disabled: false,
            },
        );
        let pod = format!("ds-{}", name);
        self.pods.push(MPod {
            name: pod,
            workload: "ds".into(),
            node: Some(name),
            kind: PodKind::DaemonSet,
            terminating: None,
            do_not_disrupt: false,
        });
    }

    fn add_pod(&mut self, workload: &str) {
        let name = format!("{workload}-{}", self.next_pod);
        self.next_pod += 1;
        self.pods.push(MPod {
            name,
            workload: workload.into(),
            node: None,
            kind: PodKind::Workload,
            terminating: None,
            do_not_disrupt: false,
        });
    }

    /// Pending pods go to the Ready, schedulable node with the fewest workload pods.
    fn schedule(&mut self) {
        for i in 0..self.pods.len() {
            if self.pods[i].node.is_some() {
                continue;
            }
            let load = |n: &str, pods: &[MPod]| {
                pods.iter()
                    .filter(|p| p.node.as_deref() == Some(n) && p.kind == PodKind::Workload)
                    .count()
            };
            let best = self
                .nodes
                .iter()
                .filter(|(_, n)| n.ready && !n.cordoned)
                .map(|(name, _)| name.clone())
                .min_by_key(|name| (load(name, &self.pods), name.clone()));
            self.pods[i].node = best;
        }
    }

    fn healthy(&self, workload: &str) -> u32 {
        self.pods
            .iter()
            .filter(|p| p.workload == workload && p.terminating.is_none())
            .filter(|p| {
                p.node
                    .as_ref()
                    .and_then(|n| self.nodes.get(n))
                    .is_some_and(|n| n.ready)
            })
            .count() as u32
    }

    fn disruptions_allowed(&self, w: &Workload) -> Option<u32> {
        w.min_available
            .map(|min| self.healthy(&w.name).saturating_sub(min))
    }

    pub fn advance(&mut self) {
        self.now += Duration::seconds(TICK);
        // Evicted pods finish terminating; their workload recreates them.
        let mut recreate = vec![];
        self.pods.retain_mut(|p| match p.terminating {
            Some(0) | Some(1) => {
                recreate.push(p.workload.clone());
                false
            }
            Some(ref mut t) => {
                *t -= 1;
                true
            }
            None => true,
        });
        for w in recreate {
            self.add_pod(&w);
        }
        // Instances boot, register, get Ready; terminating ones go with their node.
        let mut registered = vec![];
        let mut gone = vec![];
        for i in &mut self.instances {
            match i.lifecycle {
                Lifecycle::Pending if i.ticks_left <= 1 => {
                    i.lifecycle = Lifecycle::InService;
                    registered.push(i.id.clone());
                }
                Lifecycle::Terminating if i.ticks_left <= 1 => gone.push(i.id.clone()),
                _ => i.ticks_left = i.ticks_left.saturating_sub(1),
            }
        }
        for n in self.nodes.values_mut() {
            let inst = self.instances.iter().find(|i| i.id == n.instance);
            if let Some(i) = inst
                && i.lifecycle == Lifecycle::InService
                && !i.never_ready
                && !registered.contains(&i.id)
            {
                n.ready = true;
            }
        }
        for id in registered {
            self.register(&id);
        }
        for id in &gone {
            let name = node_name(id);
            self.nodes.remove(&name);
            for p in &self.pods {
                if p.node.as_deref() == Some(name.as_str()) && p.kind == PodKind::Workload {
                    self.violations.push(format!(
                        "invariant 3: pod {} was still running when {id} went away",
                        p.name
                    ));
                }
            }
            self.pods
                .retain(|p| p.node.as_deref() != Some(name.as_str()));
        }
        self.instances.retain(|i| !gone.contains(&i.id));
        // The cloud keeps the group at its desired capacity.
        let live = self
            .instances
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
            .count() as u32;
        if !self.quota_exhausted {
            for _ in live..self.desired {
                self.create_instance();
            }
        }
        self.schedule();
    }

    pub fn observe(&self, gates: GateVerdict) -> Observed {
        let pdb_of = |w: &str| -> Option<PdbRef> {
            let wl = self.workloads.iter().find(|x| x.name == w)?;
            Some(PdbRef {
                namespace: "app".into(),
                name: wl.name.as_str().into(),
                disruptions_allowed: self.disruptions_allowed(wl)?,
            })
        };
        Observed {
            group: GroupState {
                group: group_ref(),
                desired: self.desired,
                min: 0,
                max: self.max,
                template_image: self.template.clone(),
                instances: self
                    .instances
                    .iter()
                    .map(|i| Instance {
                        id: i.id.clone(),
                        provider_id: provider_id(&i.id),
                        image: i.image.clone(),
                        zone: "us-east-1a".into(),
                        lifecycle: i.lifecycle,
                        launch_error: None,
                    })
                    .collect(),
            },
            nodes: self
                .nodes
                .iter()
                .map(|(name, n)| ObservedNode {
                    name: name.clone(),
                    provider_id: provider_id(&n.instance),
                    image_label: None,
                    ready: n.ready,
                    cordoned: n.cordoned,
                    cordoned_by: n.cordoned_by.clone(),
                    do_not_disrupt: n.do_not_disrupt,
                    scale_down_disabled: n.scale_down_disabled,
                    pods: self
                        .pods
                        .iter()
                        .filter(|p| p.node.as_deref() == Some(name.as_str()))
                        .map(|p| ObservedPod {
                            namespace: "app".into(),
                            name: p.name.as_str().into(),
                            kind: p.kind,
                            do_not_disrupt: p.do_not_disrupt,
                            uses_empty_dir: false,
                            terminating: p.terminating.is_some(),
                            pdb: pdb_of(&p.workload),
                            pdb_count: u32::from(pdb_of(&p.workload).is_some()),
                        })
                        .collect(),
                })
                .collect(),
            departed: Vec::new(),
            gates,
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

    /// Apply one action as the cloud and the API server would; a broken invariant is an Err.
    pub fn apply(&mut self, a: &Action, force_allowed: bool) -> Result<(), String> {
        match a {
            // The model world holds one self-managed group: an owner's update here is a bug.
            Action::StartOwnerUpdate { .. }
            | Action::PinNodeClassImage { .. }
            | Action::SetDisruptionBudgets { .. }
            | Action::CreateTwinPool { .. }
            | Action::SetPoolSize { .. }
            | Action::RemovePoolNode { .. }
            | Action::DeletePool { .. } => {
                return Err(format!("{a}: the model world's group is self-managed"));
            }
            Action::SetImage { image } => self.template = image.clone(),
            Action::SetCapacity { desired, max } => {
                if let Some(m) = max {
                    self.max = *m;
                }
                if *desired > self.max {
                    return Err(format!("capacity {desired} above max {}", self.max));
                }
                let live = self
                    .instances
                    .iter()
                    .filter(|i| i.lifecycle != Lifecycle::Terminating)
                    .count() as u32;
                if *desired < live {
                    // The cloud would pick a victim of its own: only acceptable when nothing
                    // runs on the extra instances, which rota never relies on.
                    return Err(format!(
                        "capacity lowered to {desired} below {live} live instances: the cloud would terminate an instance of its choosing"
                    ));
                }
                self.desired = *desired;
                if !self.quota_exhausted {
                    for _ in live..*desired {
                        self.create_instance();
                    }
                }
            }
            Action::SetMax { max } => self.max = (*max).max(self.desired),
            Action::Cordon { node, owner } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.cordoned = true;
                    n.cordoned_by = Some(owner.clone());
                }
            }
            Action::Uncordon { node } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.cordoned = false;
                    n.cordoned_by = None;
                }
            }
            Action::Evict { pod, .. } => {
                let Some(i) = self.pods.iter().position(|p| p.name == *pod) else {
                    return Ok(()); // gone already: eviction of a missing pod is a no-op
                };
                let w = self.pods[i].workload.clone();
                if self.pods[i].kind != PodKind::Workload {
                    return Err(format!(
                        "invariant 2: evicted {pod}, a {:?} pod",
                        self.pods[i].kind
                    ));
                }
                if self.pods[i].terminating.is_none() {
                    if let Some(wl) = self.workloads.iter().find(|x| x.name == w)
                        && self.disruptions_allowed(wl) == Some(0)
                    {
                        return Err(format!(
                            "invariant 2: evicted {pod} while PDB {w} allows no disruption"
                        ));
                    }
                    self.pods[i].terminating = Some(2);
                }
            }
            Action::DeletePod { pod, .. } => {
                if !force_allowed {
                    return Err(format!(
                        "invariant 2: force-deleted {pod} without drain.onTimeout force"
                    ));
                }
                if let Some(i) = self.pods.iter().position(|p| p.name == *pod) {
                    let w = self.pods.remove(i).workload;
                    self.add_pod(&w);
                }
            }
            Action::Terminate { instance_id, .. }
            | Action::TerminateForReplacement { instance_id, .. } => {
                let name = node_name(instance_id);
                if let Some(p) = self.pods.iter().find(|p| {
                    p.node.as_deref() == Some(name.as_str()) && p.kind == PodKind::Workload
                }) {
                    return Err(format!(
                        "invariant 3: terminated {instance_id} while pod {} still runs on it",
                        p.name
                    ));
                }
                if let Some(i) = self.instances.iter_mut().find(|i| i.id == *instance_id)
                    && i.lifecycle != Lifecycle::Terminating
                {
                    i.lifecycle = Lifecycle::Terminating;
                    i.ticks_left = 2;
                    // Without a decrement (`strategy: replace`) the group replaces it.
                    if matches!(a, Action::Terminate { .. }) {
                        self.desired -= 1;
                    }
                }
            }
            Action::WithdrawSurge { desired, instances } => {
                // Re-checked as `apply` does: only when no instance appeared since the plan.
                let appeared = self
                    .instances
                    .iter()
                    .any(|i| i.lifecycle != Lifecycle::Terminating && !instances.contains(&i.id));
                if !appeared {
                    self.desired = *desired;
                }
            }
            Action::SetScaleDownDisabled { node, disabled } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.scale_down_disabled = *disabled;
                }
            }
        }
        Ok(())
    }
}

/// The model world's pool `general` as the agent resolves it, moving to [`NEW`] (version
/// `v2`) under `policy`.
pub fn desired_pool(policy: EffectivePolicy) -> DesiredPool {
    DesiredPool {
        owner_image: None,
        cluster: "sim".into(),
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
        policy,
        gates: vec![],
        mode: Mode::Reconcile,
    }
}

pub fn group_ref() -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "general".into(),
    }
}

/// The cloud's answer to `action` at `tick` when the scenario has it refuse rota's writes then:
/// the error `controller::apply` stops on, naming the action and the provider's call.
fn refusal(s: &Scenario, tick: u32, action: &Action) -> Option<ApplyError> {
    let (_, _, kind) = *s
        .cloud_refuses
        .iter()
        .find(|(from, to, _)| (*from..*to).contains(&tick))?;
    let call = match action {
        Action::SetImage { .. } => "CreateLaunchTemplateVersion",
        Action::SetCapacity { .. } | Action::WithdrawSurge { .. } => "SetDesiredCapacity",
        Action::SetMax { .. } => "UpdateAutoScalingGroup",
        Action::Terminate { .. } | Action::TerminateForReplacement { .. } => {
            "TerminateInstanceInAutoScalingGroup"
        }
        _ => return None,
    };
    let message = match kind {
        CloudErrorKind::Throttled => "Rate exceeded",
        CloudErrorKind::Permission => "not authorized to perform this operation",
        _ => "refused",
    };
    Some(ApplyError::Cloud {
        action: action.to_string(),
        source: CloudError::new(kind, call, &group_ref(), message.to_string()),
    })
}

// --- scenarios -----------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub size: u32,
    pub batch: BatchSize,
    pub percent: u8,
    pub workloads: Vec<Workload>,
    pub boot: (u32, u32),
    pub policy: fn(&mut EffectivePolicy),
    /// (tick, image, version): the repo changes the desired image at that tick.
    pub changes: Vec<(u32, &'static str, &'static str)>,
    /// Ticks during which the gates fail.
    pub gate_failing: Option<(u32, u32)>,
    /// Ticks during which a workload pod carries do-not-disrupt.
    pub protected: Option<(u32, u32)>,
    pub broken_image: Option<&'static str>,
    /// The first this many instances created after the start never get Ready.
    pub flaky_boots: u32,
    pub quota_exhausted: bool,
    /// The resource's status is lost (deleted and re-created) at this tick.
    pub lose_checkpoint_at: Option<u32>,
    /// Ticks (from, to) during which the cloud refuses rota's writes to the group with this
    /// kind of error (throttled, a permission taken away): the action fails as `apply`
    /// reports it.
    pub cloud_refuses: Vec<(u32, u32, CloudErrorKind)>,
    /// Per step, the chance of a crash after a random prefix of the actions.
    pub crash_chance: f64,
    pub seed: u64,
    pub max_ticks: u32,
}

pub fn scenario(name: &str) -> Scenario {
    Scenario {
        name: name.into(),
        size: 6,
        batch: BatchSize::Count(2),
        percent: 100,
        workloads: vec![
            Workload {
                name: "web".into(),
                replicas: 4,
                min_available: Some(3),
            },
            Workload {
                name: "db".into(),
                replicas: 2,
                min_available: Some(1),
            },
            Workload {
                name: "batch".into(),
                replicas: 3,
                min_available: None,
            },
        ],
        boot: (2, 4),
        policy: |_| {},
        changes: vec![],
        gate_failing: None,
        protected: None,
        broken_image: None,
        flaky_boots: 0,
        quota_exhausted: false,
        lose_checkpoint_at: None,
        cloud_refuses: vec![],
        crash_chance: 0.0,
        seed: 1,
        max_ticks: 600,
    }
}

/// What a run ended with.
pub struct Outcome {
    pub log: String,
    pub phase: Phase,
    pub message: String,
    pub model: Model,
    pub checkpoint: Option<Checkpoint>,
    pub image: &'static str,
    pub steps: u32,
    /// Plans made (one per reconcile) and actions executed.
    pub plans: u32,
    pub actions: u32,
    /// The tick the pool first reported Succeeded.
    pub succeeded_at: Option<u32>,
}

/// What rota tells people, as the controller does after each pass: the status it composes
/// and writes (or leaves, when it says nothing new), and the pass's aftermath, whose Events
/// and notices the golden logs record (`event ...`, `notice ...`), so that a change in what
/// rota says is a reviewed diff.
#[derive(Default)]
struct Teller {
    /// The status as last written (the resource's).
    stored: Option<NodePoolRotationStatus>,
    /// The controller's memory between passes (lost on a crash).
    memory: aftermath::Memory,
    /// The pool's errors as the controller keeps them (lost on a crash too): the tracker
    /// that alerts once per reason, the last error and the action it was.
    errors: ErrorTracker,
    last_error: Option<String>,
    failed_action: Option<String>,
}

impl Teller {
    /// One pass: `ran` of the plan's actions ran (all, unless it `crashed` after them or the
    /// next one `failed`).
    #[allow(clippy::too_many_arguments)]
    fn pass(
        &mut self,
        desired: &DesiredPool,
        p: &Plan,
        ran: usize,
        crashed: bool,
        failed: Option<&ApplyError>,
        failed_gate: Option<&str>,
        now: DateTime<Utc>,
        log: &mut String,
        stamp: &str,
    ) {
        let spec = NodePoolRotationSpec::from_desired(desired, "c0ffee");
        let composed = compose(&Reconciled {
            last_error: self.last_error.as_deref(),
            cause: self.errors.last(),
            ..Reconciled::new(p, self.stored.as_ref(), "c0ffee", Some(1), now)
        });
        if composed.progressed {
            self.errors.healed();
        }
        // As `controller::act`: nothing written when nothing is to be done or said, the
        // stored status checked (not written) for a pass that only evicts.
        let write = composed.must_write;
        let unchanged = p.actions.is_empty() && !write;
        let evicts_only = p
            .actions
            .iter()
            .all(|a| matches!(a.action, Action::Evict { .. }));
        let written = !unchanged && (write || !evicts_only);
        let previous = self.stored.clone();
        if written {
            self.stored = Some(composed.status.clone());
        }
        if crashed {
            // The status was written before the actions; what the controller kept dies with it.
            *self = Teller {
                stored: self.stored.take(),
                ..Default::default()
            };
            return;
        }
        let mut done = step_events::Digest::default();
        for a in &p.actions[..ran] {
            done.add(step_events::kind(&a.action), &a.reason);
        }
        let acted = aftermath::Acted {
            ran: failed.is_none().then_some(ran),
            unchanged,
            written,
            done,
            failed: failed.and_then(ApplyError::action_failed),
        };
        // As the controller's aftermath: the error counted, an alert once per reason.
        let alert = failed.and_then(|e| self.errors.record(e.classify()));
        let pass = aftermath::Pass {
            spec: &spec,
            previous: previous.as_ref(),
            composed: &composed,
            plan: p,
            policy: &desired.policy,
            gates: &desired.gates,
            request: None,
            steered: None,
            request_note: false,
            failed_gate,
            acted: &acted,
            failed_action: self.failed_action.as_deref(),
            alert,
            now,
        };
        let after = aftermath::of(&pass, std::mem::take(&mut self.memory));
        for e in &after.events {
            writeln!(log, "{stamp} event {e}").unwrap();
        }
        for n in &after.notices {
            writeln!(log, "{stamp} notice {:?}", n.kind).unwrap();
        }
        self.memory = after.memory;
        // As the controller's error path (`failed`) and its healing (`carry_out`).
        if let Some(e) = failed {
            self.last_error = Some(e.to_string());
            self.failed_action = p.actions.get(ran).map(|a| a.action.to_string());
        } else if after.error_healed {
            self.last_error = None;
            self.failed_action = None;
        }
    }
}

/// Crash control for the exhaustive crash test: crash at `step`, after `prefix` actions.
#[derive(Clone, Copy)]
pub struct CrashAt {
    pub step: u32,
    pub prefix: usize,
}

pub fn run(s: &Scenario, crash_at: Option<CrashAt>) -> Result<Outcome, String> {
    let mut model = Model::new(s.size, s.workloads.clone(), s.boot, s.seed);
    model.broken_image = s.broken_image.map(String::from);
    model.quota_exhausted = s.quota_exhausted;
    model.flaky_boots = s.flaky_boots;
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed ^ 0x5eed);
    let mut policy = EffectivePolicy {
        batch: s.batch,
        percent: s.percent,
        ..EffectivePolicy::default()
    };
    (s.policy)(&mut policy);
    let force = policy.drain.on_timeout == OnDrainTimeout::Force;
    let mut desired = desired_pool(policy);
    let mut image: &'static str = NEW;
    // The persisted checkpoint: the only state that survives a crash.
    let mut persisted: Option<Checkpoint> = None;
    let bound_batch = s.batch.nodes(s.size);
    let mut start_size = s.size;
    // Surges per (generation, target image, batch, replacement attempt): a batch surges once,
    // and once more per not-Ready replacement it made (`nodeReadyRetries`: terminated with
    // its capacity first, so never more than one batch of surge at a time).
    let mut surges: BTreeMap<(u32, String, u32, u32), u32> = BTreeMap::new();
    let mut generation = 0;
    let mut log = String::new();
    let mut last_msg = String::new();
    let mut settled = 0;
    let mut last = (Phase::Pending, String::new());
    let (mut plans, mut actions) = (0u32, 0u32);
    let mut succeeded_at = None;
    let mut teller = Teller::default();
    for step in 0..s.max_ticks {
        let tick = step;
        for (at, img, ver) in &s.changes {
            if *at == tick {
                desired.image = img.to_string();
                desired.version = ver.to_string();
                image = img;
                writeln!(log, "{} repo: desired version {ver} ({img})", stamp(&model)).unwrap();
            }
        }
        if let Some((from, to)) = s.protected {
            let on = tick >= from && tick < to;
            if let Some(p) = model
                .pods
                .iter_mut()
                .filter(|p| p.workload == "web")
                .min_by_key(|p| p.name.clone())
            {
                p.do_not_disrupt = on;
            }
        }
        let gates = match s.gate_failing {
            Some((from, to)) if tick >= from && tick < to => GateVerdict::Failed {
                gate: "error-rate".into(),
                reason: "0.07 above max 0.01".into(),
            },
            _ => GateVerdict::Passing,
        };
        if s.lose_checkpoint_at == Some(tick) {
            // Invariants 1 and 4 are stated relative to the checkpoint; without it the next
            // rotation starts from what it sees (see `fixed_a_lost_status_...`).
            persisted = None;
            teller.stored = None;
            generation += 1;
            writeln!(log, "{} status lost: the checkpoint is gone", stamp(&model)).unwrap();
        }
        let failed_gate = match &gates {
            GateVerdict::Failed { gate, .. } => Some(gate.clone()),
            _ => None,
        };
        let obs = model.observe(gates);
        let p = plan(&desired, &obs, persisted.as_ref(), model.now);
        plans += 1;
        // The world does not wait for rota: pods pending now get scheduled between the
        // observation and the actions (onto any node still schedulable).
        model.schedule();

        // Persist first (the checkpoint names everything the actions may touch)...
        if persisted.is_none()
            && let Some(c) = &p.checkpoint
        {
            start_size = c.original_desired;
        }
        persisted = p.checkpoint.clone();
        // ...then act, possibly crashing after a prefix of the actions.
        let mut n = p.actions.len();
        let mut crashed = false;
        if let Some(c) = crash_at
            && c.step == step
        {
            n = c.prefix.min(n);
            crashed = true;
        } else if s.crash_chance > 0.0 && !p.actions.is_empty() && rng.random_bool(s.crash_chance) {
            n = rng.random_range(0..p.actions.len());
            crashed = true;
        }
        let stage = persisted.as_ref().map_or("-", |c| c.stage.name());
        let mut failed = None;
        for (i, a) in p.actions[..n].iter().enumerate() {
            if let Some(e) = refusal(s, tick, &a.action) {
                // As `apply`: the first failure stops the rest; the Warning says which.
                failed = Some(e);
                n = i;
                break;
            }
            writeln!(
                log,
                "{} [{stage}] {}: {}",
                stamp(&model),
                a.action,
                a.reason
            )
            .unwrap();
            actions += 1;
            let before = model.desired;
            model
                .apply(&a.action, force)
                .map_err(|e| format!("{}: step {step}: {e}\n--- log ---\n{log}", s.name))?;
            // The batch that surged: the pipelined next one when it is surging, else the
            // current one.
            let surging = persisted.as_ref().and_then(|c| {
                c.next
                    .as_deref()
                    .filter(|n| matches!(n, Stage::Surging { .. }))
                    .or(Some(&c.stage))
                    .and_then(|st| st.batch())
            });
            if model.desired > before
                && let Some(b) = surging
            {
                let key = (
                    generation,
                    persisted.as_ref().unwrap().target_image.clone(),
                    b.number,
                    b.ready_retries,
                );
                *surges.entry(key).or_default() += 1;
            }
        }
        if crashed {
            writeln!(
                log,
                "{} crash after {n} of {} action(s); restart from the checkpoint",
                stamp(&model),
                p.actions.len()
            )
            .unwrap();
        }
        if p.status.message != last_msg {
            writeln!(
                log,
                "{} {:?}: {}",
                stamp(&model),
                p.status.phase,
                p.status.message
            )
            .unwrap();
            last_msg = p.status.message.clone();
        }
        let stamped = stamp(&model);
        teller.pass(
            &desired,
            &p,
            n,
            crashed,
            failed.as_ref(),
            failed_gate.as_deref(),
            model.now,
            &mut log,
            &stamped,
        );

        // Invariants after every step.
        let held = model.instances.len() as u32;
        if held > start_size + bound_batch {
            return Err(format!(
                "{}: step {step}: invariant 1: {held} instances > size at start {start_size} + batch {bound_batch}\n{log}",
                s.name
            ));
        }
        if let Some((k, c)) = surges.iter().find(|(_, c)| **c > 1) {
            return Err(format!(
                "{}: invariant 4: batch {k:?} surged {c} times\n{log}",
                s.name
            ));
        }
        // Invariant 9: a stopped rotation (halted, paused, held) leaves the group's maximum as
        // the user left it, or at the instances still up, once its actions are applied.
        if !crashed
            && p.status.phase == Phase::Paused
            && let Some(c) = &persisted
            && model.max > c.original_max.max(model.desired)
        {
            return Err(format!(
                "{}: step {step}: invariant 9: stopped ({}) with the group's maximum at {}, above the user's {} and the desired {}\n{log}",
                s.name, p.status.reason, model.max, c.original_max, model.desired
            ));
        }
        if !crashed {
            // Only one batch disrupts at a time (pipelining brings the next one up, never
            // cordons it early): rota's cordons name one batch.
            let owners: BTreeSet<&String> = model
                .nodes
                .values()
                .filter_map(|n| n.cordoned_by.as_ref())
                .collect();
            if owners.len() > 1 {
                return Err(format!(
                    "{}: step {step}: cordons of more than one batch at once: {owners:?}\n{log}",
                    s.name
                ));
            }
            let claimed = claimed(persisted.as_ref(), &model);
            for (name, n) in &model.nodes {
                if n.cordoned_by.is_some() && !claimed.contains(name) {
                    return Err(format!(
                        "{}: step {step}: invariant 4: {name} cordoned by {:?}, which the checkpoint does not claim\n{log}",
                        s.name, n.cordoned_by
                    ));
                }
            }
        }

        let cur = (p.status.phase, p.status.message.clone());
        if cur.0 == Phase::Succeeded && succeeded_at.is_none() {
            succeeded_at = Some(step);
        }
        if p.actions.is_empty()
            && matches!(cur.0, Phase::Succeeded | Phase::Failed | Phase::Paused)
            && cur == last
        {
            settled += 1;
            // Paused pools are given time: a do-not-disrupt window may end, a PDB may clear.
            let protection_over = s.protected.is_none_or(|(_, to)| step >= to);
            if protection_over && (settled >= 40 || (settled >= 3 && cur.0 != Phase::Paused)) {
                return Ok(Outcome {
                    log,
                    phase: cur.0,
                    message: cur.1,
                    model,
                    checkpoint: persisted,
                    image,
                    steps: step,
                    plans,
                    actions,
                    succeeded_at,
                });
            }
        } else {
            settled = 0;
        }
        last = cur;
        model.advance();
        if let Some(v) = model.violations.first() {
            return Err(format!("{}: step {step}: {v}\n{log}", s.name));
        }
    }
    Err(format!(
        "{}: did not settle in {} ticks\n{log}",
        s.name, s.max_ticks
    ))
}

/// Nodes the persisted stage may hold cordoned.
pub fn claimed(cp: Option<&Checkpoint>, model: &Model) -> BTreeSet<String> {
    let Some(cp) = cp else { return BTreeSet::new() };
    // The current batch and the pipelined next one (which cordons only when undone).
    let mut all = claimed_by(&cp.stage, model);
    if let Some(next) = cp.next.as_deref() {
        all.extend(claimed_by(next, model));
    }
    all
}

fn claimed_by(stage: &Stage, model: &Model) -> BTreeSet<String> {
    match stage {
        Stage::Cordoning { batch } | Stage::Draining { batch } | Stage::Terminating { batch } => {
            batch.old_nodes.iter().map(|c| c.node.clone()).collect()
        }
        Stage::Abandoning { batch, .. } => {
            // Its new nodes, and its old nodes until the uncordons of this very step ran.
            let before: BTreeSet<&String> = batch.instances_before.iter().collect();
            let mut s: BTreeSet<String> = model
                .instances
                .iter()
                .filter(|i| !before.contains(&i.id))
                .map(|i| node_name(&i.id))
                .collect();
            s.extend(batch.old_nodes.iter().map(|c| c.node.clone()));
            s
        }
        _ => BTreeSet::new(),
    }
}

pub fn stamp(m: &Model) -> String {
    let t = m.now - start_time();
    format!(
        "t+{:02}:{:02}:{:02}",
        t.num_hours(),
        t.num_minutes() % 60,
        t.num_seconds() % 60
    )
}

/// The end state of a run that succeeded: every node that should be is on the image, no
/// leaked instance, no cordon, the group restored.
pub fn assert_clean_success(s: &Scenario, o: &Outcome) {
    let m = &o.model;
    assert_eq!(
        o.phase,
        Phase::Succeeded,
        "{}: {}\n{}",
        s.name,
        o.message,
        o.log
    );
    assert_eq!(
        m.instances.len() as u32,
        s.size,
        "{}: leaked or lost instances\n{}",
        s.name,
        o.log
    );
    assert_eq!(m.desired, s.size, "{}", s.name);
    assert_eq!(m.max, s.size, "{}: max not restored\n{}", s.name, o.log);
    let on = m.instances.iter().filter(|i| i.image == o.image).count() as u32;
    let rolled_back = o.checkpoint.as_ref().is_some_and(|c| c.rolling_back);
    let want = if rolled_back {
        s.size
    } else {
        (s.size * u32::from(s.percent)).div_ceil(100)
    };
    assert!(
        on >= want,
        "{}: {on} of {} on {}, want {want}\n{}",
        s.name,
        s.size,
        o.image,
        o.log
    );
    if s.percent < 100 && !rolled_back {
        assert_eq!(
            m.template, OLD,
            "{}: partial rollout must restore the template\n{}",
            s.name, o.log
        );
    } else {
        assert_eq!(m.template, o.image, "{}", s.name);
    }
    for (name, n) in &m.nodes {
        assert!(!n.cordoned, "{}: {name} left cordoned\n{}", s.name, o.log);
        assert!(
            !n.scale_down_disabled,
            "{}: {name} keeps scale-down-disabled",
            s.name
        );
        assert!(n.ready, "{}: {name} not ready", s.name);
    }
    let running: u32 = m
        .pods
        .iter()
        .filter(|p| p.kind == PodKind::Workload)
        .count() as u32;
    let want: u32 = s.workloads.iter().map(|w| w.replicas).sum();
    assert_eq!(running, want, "{}: workload pods lost", s.name);
}

pub fn golden(name: &str, log: &str) {
    let path = format!("{}/tests/golden/{name}.log", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("ROTA_BLESS").is_some() {
        std::fs::write(&path, log).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{path} missing: run with ROTA_BLESS=1 to create it"));
    if want != log {
        let line = want
            .lines()
            .zip(log.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(log.lines().count()));
        panic!(
            "{path} differs from this run at line {}:\n  golden: {:?}\n  now:    {:?}\n(ROTA_BLESS=1 regenerates it; review the diff)",
            line + 1,
            want.lines().nth(line),
            log.lines().nth(line)
        );
    }
}
