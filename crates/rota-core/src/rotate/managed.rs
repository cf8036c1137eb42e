//! `managedUpdate: service`: a managed pool replaced by its owner's own update (EKS
//! `UpdateNodegroupVersion`), with rota's waves, guard, gates, windows and pause around it.
//!
//! Pure, like the rest of `rotate`: from the desired pool, the owner's state as the edge
//! described it ([`OwnerPoolState`]), the nodes' image labels and the checkpoint, it returns
//! at most one action ([`Action::StartOwnerUpdate`]) and the next checkpoint. The checkpoint
//! records the update (its image and idempotency token) *before* the call, so that a restart
//! at any point finds the owner's update by its token instead of starting a second one: a
//! token the owner has not seen is sent again (the call never arrived), one it has is
//! followed to its end.
//!
//! What rota keeps around the owner's update (see `fleet::owner::support`):
//! - windows, `paused`, `maxParallelPools` and the guard decide when an update *starts*; an
//!   update the owner runs goes on to its end (EKS cannot cancel one);
//! - gates are checked before the update and while it runs; a failed gate with
//!   `onGateFailure: pause` halts the pool (no further update), with `rollback` starts an
//!   update back to the origin image as soon as the owner accepts one (after its current
//!   update ends);
//! - `poolSoak` after the owner's update succeeded, gates holding throughout;
//! - progress is counted from the nodes' image labels (`eks.amazonaws.com/nodegroup-image`,
//!   `kubernetes.azure.com/node-image-version`; a GKE node's from its kubelet version and
//!   image type labels, `cloud::managed::gke_node_image`).

use chrono::{DateTime, Utc};

use super::action::{Action, Planned};
use super::checkpoint::{Checkpoint, OwnerUpdateMark};
use super::counts::Counts;
use super::observed::{GateVerdict, Observed};
use super::outcome::Plan;
use super::phase::Phase;
use super::stop::{self, Reason};
use crate::cloud::managed::{
    MaxUnavailable, OwnerPoolState, OwnerUpdate, UpdateRequest, UpdateStatus, same_image,
};
use crate::fleet::resolved::{
    BatchSize, DesiredPool, Mode, OnDrainTimeout, OnGateFailure, RolloutStrategy,
};

/// What one pass decided, before it becomes a [`Plan`].
struct Decision {
    checkpoint: Option<Checkpoint>,
    action: Option<Planned>,
    phase: Phase,
    reason: Reason,
    message: String,
    until: Option<DateTime<Utc>>,
}

fn stay(cp: Option<&Checkpoint>, phase: Phase, reason: Reason, message: String) -> Decision {
    Decision {
        checkpoint: cp.cloned(),
        action: None,
        phase,
        reason,
        message,
        until: None,
    }
}

/// The inputs every step reads.
struct Ctx<'a> {
    desired: &'a DesiredPool,
    obs: &'a Observed,
    owner: &'a OwnerPoolState,
    now: DateTime<Utc>,
    /// The image the owner takes for this version (the AMI for EKS).
    target: String,
}

impl Ctx<'_> {
    fn service(&self) -> &'static str {
        self.desired.owner().service()
    }

    /// `k/n nodes on <channel>@<version>`, counted from the nodes' image labels.
    fn progress(&self, image: &str) -> String {
        let on = self.obs.nodes.iter().filter(|n| self.on(n, image)).count();
        format!("{on}/{} nodes on {image}", self.obs.nodes.len())
    }

    /// Whether node `n` runs `image` (by its image labels; a GKE target naming only an
    /// image type takes any node version of it).
    fn on(&self, n: &super::observed::ObservedNode, image: &str) -> bool {
        self.obs
            .image_of(n)
            .is_some_and(|have| same_image(&have, image))
    }

    fn all_on(&self, image: &str) -> bool {
        same_image(&self.owner.image, image) && self.obs.nodes.iter().all(|n| self.on(n, image))
    }

    /// [`Ctx::all_on`], with as many nodes as the owner keeps: an update without a surge
    /// (`strategy: replace`) ends when its last replacement's instance runs, a moment before
    /// its node registers; done then, the pool would report success one batch short.
    fn whole_on(&self, image: &str) -> bool {
        self.all_on(image) && self.obs.nodes.len() >= self.owner.desired as usize
    }

    /// The owner's update `mark` names, found by its token.
    fn update_of(&self, mark: &OwnerUpdateMark) -> Option<&OwnerUpdate> {
        self.owner
            .update
            .as_ref()
            .filter(|u| u.token.as_deref() == Some(mark.token.as_str()))
    }

    fn mark(&self, image: &str) -> OwnerUpdateMark {
        OwnerUpdateMark {
            image: image.to_string(),
            // Unique per start (pool, image, second): the owner starts one update per token.
            // Lowercase letters, digits and dashes, at most 63 characters: the token rides
            // where each owner can carry it (EKS `clientRequestToken`, a GKE node pool's
            // resource label, an AKS agent pool's tag), so it must be a valid value of each.
            token: format!(
                "rota-{}-{:016x}",
                self.now.timestamp(),
                fnv(&format!("{}\n{image}", self.desired.name))
            ),
            started_at: self.now,
        }
    }

    fn send(&self, mark: &OwnerUpdateMark, why: String) -> Planned {
        let max_unavailable = match self.desired.policy.batch {
            BatchSize::Count(n) => MaxUnavailable::Count(n.clamp(1, 100)),
            BatchSize::Percent(p) => MaxUnavailable::Percent(p.clamp(1, 100)),
        };
        Planned {
            action: Action::StartOwnerUpdate {
                request: UpdateRequest {
                    image: mark.image.clone(),
                    max_unavailable,
                    token: mark.token.clone(),
                    drain_timeout_minutes: Some(minutes(self.desired.policy.drain.timeout.0)),
                    node_soak_minutes: Some(minutes(self.desired.policy.batch_soak.0)),
                    // `strategy: replace` on the owner's own settings (no surge, the batch
                    // out at once): what `fleet::strategy` lets through for a service pool.
                    drain_first: self.desired.policy.strategy == RolloutStrategy::Replace,
                    // Invariant 2: force only where the policy says so.
                    force: self.desired.policy.drain.on_timeout == OnDrainTimeout::Force,
                },
            },
            reason: why,
        }
    }
}

/// `d` in whole minutes, rounded up (the owners' settings take minutes).
fn minutes(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_secs().div_ceil(60)).unwrap_or(u32::MAX)
}

/// FNV-1a of `s`: a stable short digest (the token names the pool and image without
/// carrying characters an owner's label or tag refuses).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The plan for a managed pool under `managedUpdate: service`.
pub(super) fn plan_service(
    desired: &DesiredPool,
    observed: &Observed,
    owner: &OwnerPoolState,
    checkpoint: Option<&Checkpoint>,
    now: DateTime<Utc>,
) -> Plan {
    let target = desired
        .owner_image
        .as_ref()
        .map_or_else(|| desired.image.clone(), |o| o.as_image());
    let cx = Ctx {
        desired,
        obs: observed,
        owner,
        now,
        target,
    };
    let ours = checkpoint.filter(|c| {
        c.target_image == cx.target || c.rejected_image.as_deref() == Some(cx.target.as_str())
    });
    let d = match ours {
        Some(cp) => follow(&cx, cp),
        None => start(&cx, checkpoint),
    };
    into_plan(&cx, d, checkpoint)
}

/// No rotation to this image yet: start the owner's update when everything allows.
fn start(cx: &Ctx<'_>, previous: Option<&Checkpoint>) -> Decision {
    let svc = cx.service();
    let policy = &cx.desired.policy;
    if cx.all_on(&cx.target) {
        let msg = format!("up to date: {}", cx.progress(&cx.target));
        return stay(previous, Phase::Succeeded, Reason::UpToDate, msg);
    }
    if let Some(u) = cx.owner.update.as_ref().filter(|_| cx.owner.updating()) {
        let msg = format!(
            "{svc} is updating the pool to {} (update {}): rota starts its own update once it ends",
            u.image, u.id
        );
        return stay(previous, Phase::Waiting, Reason::OwnerUpdating, msg);
    }
    if let Some(held) = held_before(cx, previous) {
        return held;
    }
    match super::window::is_open(&policy.windows, cx.now) {
        Ok(true) => {}
        Ok(false) => {
            let mut d = stay(
                previous,
                Phase::Waiting,
                Reason::OutsideWindow,
                format!("outside every window: the {svc} update starts when one opens"),
            );
            d.until = super::window::next_open(&policy.windows, cx.now);
            return d;
        }
        Err(e) => {
            return stay(
                previous,
                Phase::Paused,
                Reason::InvalidWindow,
                e.to_string(),
            );
        }
    }
    if let Some(hold) = &cx.obs.start_hold {
        return stay(
            previous,
            Phase::Waiting,
            Reason::MaxParallelPools,
            hold.clone(),
        );
    }
    match &cx.obs.gates {
        GateVerdict::Passing => {}
        GateVerdict::Pending(g) => {
            let msg = format!("gate {g} collecting samples before the {svc} update starts");
            return stay(previous, Phase::Waiting, Reason::GatePending, msg);
        }
        GateVerdict::Failed { gate, reason } => {
            let msg = format!("gate {gate} failed before the {svc} update: {reason}");
            return stay(previous, Phase::Paused, Reason::GateFailed, msg);
        }
    }
    let mark = cx.mark(&cx.target);
    let action = cx.send(
        &mark,
        format!("start {svc}'s update of the pool to {}", cx.target),
    );
    let cp = first_checkpoint(cx, mark);
    Decision {
        checkpoint: Some(cp),
        action: Some(action),
        phase: Phase::Rotating,
        reason: Reason::OwnerUpdating,
        message: format!(
            "{svc} update to {} started · {}",
            cx.target,
            cx.progress(&cx.target)
        ),
        until: None,
    }
}

/// A fleet stop or `rollout.paused`: no update starts.
fn held_before(cx: &Ctx<'_>, previous: Option<&Checkpoint>) -> Option<Decision> {
    if let Some(stop) = &cx.desired.policy.stop {
        let msg = format!(
            "{}: no {} update starts; `{}` lifts it",
            stop.describe(),
            cx.service(),
            stop.clear_command()
        );
        return Some(stay(previous, Phase::Paused, Reason::Stopped, msg));
    }
    cx.desired.policy.paused.then(|| {
        let msg = "rollout.paused: no update starts".to_string();
        stay(previous, Phase::Paused, Reason::PausedByPolicy, msg)
    })
}

/// The checkpoint of a rotation that starts the owner's update `mark` now.
fn first_checkpoint(cx: &Ctx<'_>, mark: OwnerUpdateMark) -> Checkpoint {
    Checkpoint {
        origin_image: cx.owner.image.clone(),
        target_image: cx.target.clone(),
        target_version: cx.desired.version.clone(),
        original_desired: cx.owner.desired,
        original_max: cx.owner.desired,
        pool_size: cx.obs.nodes.len() as u32,
        batches_started: 1,
        rolling_back: false,
        rejected_image: None,
        rollback_reason: None,
        last_eviction: None,
        halted: None,
        operator_paused: None,
        operator_request: None,
        fleet_stop: None,
        annotated_nodes: Vec::new(),
        fenced_at: None,
        capacity_changed_at: None,
        stage: super::checkpoint::Stage::Between,
        next: None,
        pace: None,
        owner_update: Some(mark),
        drift: None,
        blue_green: None,
    }
}

/// A rotation under way (or finished) for this image: follow the owner's update.
fn follow(cx: &Ctx<'_>, cp: &Checkpoint) -> Decision {
    let svc = cx.service();
    if let Some(ended) = ended(cx, cp) {
        return ended;
    }
    // A fleet stop holds the rotation wherever it is, a pool soak and a rollback included;
    // lifted, the checkpoint forgets it.
    if cp.fleet_stop.is_some() && cx.desired.policy.stop.is_none() {
        let mut next = cp.clone();
        next.fleet_stop = None;
        return follow(cx, &next);
    }
    if let Some(held) = cp.owner_update.as_ref().and_then(|m| fleet_stop(cx, cp, m)) {
        return held;
    }
    if let super::checkpoint::Stage::PoolSoak { until } = &cp.stage {
        return pool_soak(cx, cp, *until);
    }
    if let Some(h) = &cp.halted {
        let reason = if h.starts_with("gate ") {
            Reason::GateFailed
        } else if h.starts_with(&format!("{svc} refused")) {
            Reason::OwnerRefused
        } else {
            Reason::OwnerUpdateFailed
        };
        return stay(Some(cp), Phase::Paused, reason, h.clone());
    }
    if !cp.rolling_back
        && let GateVerdict::Failed { gate, reason } = &cx.obs.gates
    {
        return gate_failed(cx, cp, gate, reason);
    }
    let Some(mark) = &cp.owner_update else {
        let msg = "a rotation without an owner's update recorded".to_string();
        return stay(Some(cp), Phase::Paused, Reason::Halted, msg);
    };
    let phase = if cp.rolling_back {
        Phase::RollingBack
    } else {
        Phase::Rotating
    };
    match cx.update_of(mark) {
        Some(u) if u.status == UpdateStatus::InProgress => {
            let msg = format!(
                "{svc} update {} in progress · {}",
                u.id,
                cx.progress(&mark.image)
            );
            stay(Some(cp), phase, Reason::OwnerUpdating, msg)
        }
        Some(u) if u.status == UpdateStatus::Successful => succeeded(cx, cp, mark, u),
        Some(u) => {
            let mut next = cp.clone();
            next.halted = Some(format!(
                "{svc} update {} to {} {:?}: {}",
                u.id,
                mark.image,
                u.status,
                if u.errors.is_empty() {
                    "no cause given".to_string()
                } else {
                    u.errors.join("; ")
                }
            ));
            let msg = next.halted.clone().unwrap_or_default();
            stay(Some(&next), Phase::Paused, Reason::OwnerUpdateFailed, msg)
        }
        None => not_seen(cx, cp, mark, phase),
    }
}

/// A rotation that ended: done, or rolled back from this image.
fn ended(cx: &Ctx<'_>, cp: &Checkpoint) -> Option<Decision> {
    if cp.stage != super::checkpoint::Stage::Done {
        return None;
    }
    Some(if cp.rolling_back {
        let msg = format!(
            "rolled back from {} to {}: {}",
            cx.target,
            cp.origin_image,
            cp.rollback_reason.as_deref().unwrap_or("a gate failed")
        );
        stay(Some(cp), Phase::Failed, Reason::RolledBack, msg)
    } else {
        let msg = format!("done: {}", cx.progress(&cx.target));
        stay(Some(cp), Phase::Succeeded, Reason::Done, msg)
    })
}

/// A fleet stop (`rota stop`) while a rotation is under way: no update is sent (the
/// recorded one, a rollback) until it is lifted. An update the owner has already started
/// runs to its end: no owner rota drives can stop one where it is (EKS cannot cancel an
/// update; GKE's `operations.cancel` and AKS's abort leave the pool half on each image), so
/// the stop says so, and holds the pool at the end of it. The checkpoint records the stop.
fn fleet_stop(cx: &Ctx<'_>, cp: &Checkpoint, mark: &OwnerUpdateMark) -> Option<Decision> {
    let stop = cx.desired.policy.stop.as_ref()?;
    let svc = cx.service();
    let mut next = cp.clone();
    next.fleet_stop = Some(stop.id.clone());
    let lift = format!("`{}` lifts it", stop.clear_command());
    let msg = match cx.update_of(mark) {
        Some(u) if u.status == UpdateStatus::InProgress => format!(
            "{}: {svc} update {} to {} was under way and runs to its end ({svc} cannot stop it between nodes); nothing more starts · {}; {lift}",
            stop.describe(),
            u.id,
            mark.image,
            cx.progress(&mark.image)
        ),
        _ => format!(
            "{}: held before the {svc} update to {} · {}; {lift}",
            stop.describe(),
            mark.image,
            cx.progress(&mark.image)
        ),
    };
    Some(stay(Some(&next), Phase::Paused, Reason::Stopped, msg))
}

/// The owner does not know the recorded token: the call never arrived (a crash between the
/// checkpoint and the call, a lost request), or the owner is busy with an earlier update (a
/// rollback waits for the forward update to end). Sent again, with the same token, once the
/// owner takes one.
fn not_seen(cx: &Ctx<'_>, cp: &Checkpoint, mark: &OwnerUpdateMark, phase: Phase) -> Decision {
    let svc = cx.service();
    if let Some(u) = cx.owner.update.as_ref().filter(|_| cx.owner.updating()) {
        let msg = format!(
            "{svc} update {} to {} runs to its end; then the update to {} starts",
            u.id, u.image, mark.image
        );
        return stay(Some(cp), phase, Reason::OwnerUpdating, msg);
    }
    if cx.desired.policy.paused && !cp.rolling_back {
        let msg = "rollout.paused: the recorded update is not started".to_string();
        return stay(Some(cp), Phase::Paused, Reason::PausedByPolicy, msg);
    }
    let send = cx.send(
        mark,
        format!(
            "{svc} has no update with token {}: send it (again)",
            mark.token
        ),
    );
    // Refused last time (the owner does not offer the image): not sent again; the halt is
    // recorded, so a restart does not send it either. A new version starts afresh.
    if let Some(r) = cx
        .obs
        .refused
        .as_ref()
        .filter(|r| r.action == send.action.to_string())
    {
        let mut next = cp.clone();
        next.halted = Some(format!(
            "{svc} refused the update to {}: {}",
            mark.image, r.why
        ));
        let msg = next.halted.clone().unwrap_or_default();
        return stay(Some(&next), Phase::Paused, Reason::OwnerRefused, msg);
    }
    let mut d = stay(
        Some(cp),
        phase,
        Reason::OwnerUpdating,
        format!(
            "{svc} update to {} (re)sent · {}",
            mark.image,
            cx.progress(&mark.image)
        ),
    );
    d.action = Some(send);
    d
}

/// The owner's update succeeded: once every node carries its image, the pool soaks (or is
/// done; a rollback ends Failed, naming why).
fn succeeded(cx: &Ctx<'_>, cp: &Checkpoint, mark: &OwnerUpdateMark, u: &OwnerUpdate) -> Decision {
    let svc = cx.service();
    if !cx.whole_on(&mark.image) {
        let msg = format!(
            "{svc} update {} succeeded; waiting for the nodes and their labels · {}",
            u.id,
            cx.progress(&mark.image)
        );
        return stay(Some(cp), Phase::Rotating, Reason::OwnerUpdating, msg);
    }
    let mut next = cp.clone();
    if cp.rolling_back {
        next.stage = super::checkpoint::Stage::Done;
        return follow(cx, &next);
    }
    let soak = cx.desired.policy.pool_soak.0;
    if soak.is_zero() {
        next.stage = super::checkpoint::Stage::Done;
    } else {
        let until = cx.now + chrono::Duration::from_std(soak).unwrap_or(chrono::Duration::MAX);
        next.stage = super::checkpoint::Stage::PoolSoak { until };
    }
    follow(cx, &next)
}

/// After the owner's update: gates must hold until `until`.
fn pool_soak(cx: &Ctx<'_>, cp: &Checkpoint, until: DateTime<Utc>) -> Decision {
    if let GateVerdict::Failed { gate, reason } = &cx.obs.gates {
        return gate_failed(cx, cp, gate, reason);
    }
    if cx.now >= until {
        let mut next = cp.clone();
        next.stage = super::checkpoint::Stage::Done;
        return follow(cx, &next);
    }
    let mut d = stay(
        Some(cp),
        Phase::Soaking,
        Reason::PoolSoak,
        format!(
            "pool soak until {} · {}",
            until.to_rfc3339(),
            cx.progress(&cx.target)
        ),
    );
    d.until = Some(until);
    d
}

/// A gate failed while the owner's update ran or the pool soaked: halt (`pause`) or go
/// back to the origin image with a second update (`rollback`), sent once the owner takes it.
fn gate_failed(cx: &Ctx<'_>, cp: &Checkpoint, gate: &str, reason: &str) -> Decision {
    let svc = cx.service();
    let why = format!("gate {gate} failed: {reason}");
    let mut next = cp.clone();
    if cx.desired.policy.on_gate_failure == OnGateFailure::Pause {
        next.halted = Some(format!(
            "{why} (an update {svc} has started runs to its end; no further update starts)"
        ));
        let msg = next.halted.clone().unwrap_or_default();
        return stay(Some(&next), Phase::Paused, Reason::GateFailed, msg);
    }
    next.rolling_back = true;
    next.rejected_image = Some(cp.target_image.clone());
    next.rollback_reason = Some(why);
    next.stage = super::checkpoint::Stage::Between;
    next.owner_update = Some(cx.mark(&cp.origin_image));
    follow(cx, &next)
}

fn into_plan(cx: &Ctx<'_>, d: Decision, previous: Option<&Checkpoint>) -> Plan {
    let counts = Counts::of(cx.desired, cx.obs);
    let halted = d.checkpoint.as_ref().and_then(|c| c.halted.as_deref());
    let note = stop::explain(
        d.reason,
        &d.message,
        &stop::Context {
            cluster: &cx.desired.cluster,
            pool: &cx.desired.name,
            blocked_by: Vec::new(),
            until: d.until,
            halted: halted.filter(|_| d.phase == Phase::Paused),
            clear: cx.desired.policy.stop.as_ref().map(|s| s.clear_command()),
        },
    );
    let mut plan = Plan {
        actions: d.action.into_iter().collect(),
        dry_run: Vec::new(),
        checkpoint: d.checkpoint,
        status: counts.status(d.phase, d.reason, d.message, note),
    };
    if cx.desired.mode == Mode::ReadOnly {
        plan.dry_run = std::mem::take(&mut plan.actions);
        plan.checkpoint = previous.cloned();
        plan.status.message = format!("readOnly: {}", plan.status.message);
    }
    plan
}

#[cfg(test)]
mod tests {
    //! The service strategy as a sequence of owner states: each test is one pass or a few,
    //! the owner's answers written out as EKS would give them.

    use super::*;
    use crate::cloud::{GroupRef, GroupState};
    use crate::fleet::duration::GoDuration;
    use crate::fleet::owner::{ManagedGroup, OwnerImage};
    use crate::fleet::resolved::EffectivePolicy;
    use crate::rotate::observed::ObservedNode;

    const OLD: &str = "ami-old";
    const NEW: &str = "ami-new";

    fn t(m: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + chrono::Duration::minutes(m)
    }

    fn ng() -> ManagedGroup {
        ManagedGroup::EksNodegroup {
            region: "us-east-1".into(),
            eks_cluster: "prod".into(),
            nodegroup: "general".into(),
        }
    }

    fn desired() -> DesiredPool {
        DesiredPool {
            owner_image: Some(OwnerImage::Ami { id: NEW.into() }),
            cluster: "prod".into(),
            name: "general".into(),
            channel: "general".into(),
            version: "v2".into(),
            image: NEW.into(),
            arch: Default::default(),
            kubelet: None,
            released: None,
            max_age: None,
            group: GroupRef::Managed(ng()),
            node_selector: Default::default(),
            policy: EffectivePolicy {
                batch: BatchSize::Count(2),
                ..EffectivePolicy::default()
            },
            gates: vec![],
            mode: Mode::Reconcile,
        }
    }

    /// Nodes labelled with `images`, and the owner's state.
    fn world(images: &[&str], owner: OwnerPoolState) -> Observed {
        Observed {
            group: GroupState {
                group: GroupRef::Managed(ng()),
                desired: 0,
                min: 0,
                max: 0,
                template_image: String::new(),
                instances: vec![],
            },
            nodes: images
                .iter()
                .enumerate()
                .map(|(i, img)| ObservedNode {
                    name: format!("n{i}"),
                    provider_id: format!("aws:///us-east-1a/i-{i}"),
                    image_label: Some(img.to_string()),
                    ready: true,
                    cordoned: false,
                    cordoned_by: None,
                    do_not_disrupt: false,
                    scale_down_disabled: false,
                    pods: vec![],
                })
                .collect(),
            departed: vec![],
            gates: GateVerdict::Passing,
            start_hold: None,
            image_hold: None,
            control_plane: None,
            describe_lag: std::time::Duration::ZERO,
            cluster_autoscaler: true,
            leading_since: None,
            owner: Some(owner),
            drift: None,
            pools: Vec::new(),
            refused: None,
        }
    }

    fn owner(image: &str, update: Option<(&str, &str, UpdateStatus)>) -> OwnerPoolState {
        OwnerPoolState {
            pool: ng(),
            image: image.into(),
            desired: 4,
            max_unavailable: Some(MaxUnavailable::Count(1)),
            update: update.map(|(token, img, status)| OwnerUpdate {
                id: format!("u-{token}"),
                token: Some(token.into()),
                image: img.into(),
                status,
                errors: if status == UpdateStatus::Failed {
                    vec!["NodeCreationFailure: Instances failed to join".into()]
                } else {
                    vec![]
                },
            }),
        }
    }

    fn plan(d: &DesiredPool, o: &Observed, cp: Option<&Checkpoint>, now: DateTime<Utc>) -> Plan {
        super::super::plan(d, o, cp, now)
    }

    fn request(p: &Plan) -> Option<UpdateRequest> {
        p.actions.iter().find_map(|a| match &a.action {
            Action::StartOwnerUpdate { request } => Some(request.clone()),
            _ => None,
        })
    }

    /// The whole story: start (batch mapped to maxUnavailable, checkpoint first), follow the
    /// owner's update, soak, done; never a second update.
    #[test]
    fn an_update_is_started_once_followed_soaked_and_done() {
        let mut d = desired();
        d.policy.pool_soak = GoDuration::from_secs(600);
        let old4 = [OLD, OLD, OLD, OLD];
        let p1 = plan(&d, &world(&old4, owner(OLD, None)), None, t(0));
        let req = request(&p1).expect("an update starts");
        assert_eq!(req.image, NEW);
        assert_eq!(req.max_unavailable, MaxUnavailable::Count(2));
        // drain.timeout (30m by default) and batchSoak (0s) in the owners' minutes.
        assert_eq!(
            (req.drain_timeout_minutes, req.node_soak_minutes),
            (Some(30), Some(0))
        );
        let cp1 = p1.checkpoint.clone().expect("the checkpoint records it");
        assert_eq!(cp1.owner_update.as_ref().unwrap().token, req.token);
        assert_eq!(cp1.origin_image, OLD);
        assert_eq!(p1.status.phase, Phase::Rotating);
        // The owner runs it: no second update, progress from the labels.
        let running = owner(NEW, Some((&req.token, NEW, UpdateStatus::InProgress)));
        let p2 = plan(&d, &world(&[NEW, NEW, OLD, OLD], running), Some(&cp1), t(5));
        assert!(p2.actions.is_empty(), "{:?}", p2.actions);
        assert!(
            p2.status.message.contains("2/4 nodes on ami-new"),
            "{}",
            p2.status.message
        );
        assert_eq!(p2.status.on_target, 2);
        // Successful, every node on the new AMI: the pool soaks, then is done.
        let done = owner(NEW, Some((&req.token, NEW, UpdateStatus::Successful)));
        let w = world(&[NEW; 4], done);
        let p3 = plan(&d, &w, Some(&cp1), t(20));
        assert_eq!(p3.status.phase, Phase::Soaking, "{}", p3.status.message);
        let cp3 = p3.checkpoint.clone().unwrap();
        let p4 = plan(&d, &w, Some(&cp3), t(31));
        assert_eq!(p4.status.phase, Phase::Succeeded);
        assert!(p4.actions.is_empty());
        let p5 = plan(&d, &w, p4.checkpoint.as_ref(), t(90));
        assert_eq!(p5.status.phase, Phase::Succeeded);
    }

    /// An update that succeeded while a node of the pool has not registered yet (the last
    /// replacement of a drain-first update) is not done until the pool has as many nodes as
    /// the owner keeps.
    #[test]
    fn a_succeeded_update_waits_for_every_node_the_owner_keeps() {
        let d = desired();
        let old4 = [OLD, OLD, OLD, OLD];
        let p1 = plan(&d, &world(&old4, owner(OLD, None)), None, t(0));
        let req = request(&p1).unwrap();
        let cp1 = p1.checkpoint.unwrap();
        let done = owner(NEW, Some((&req.token, NEW, UpdateStatus::Successful)));
        let p = plan(
            &d,
            &world(&[NEW, NEW, NEW], done.clone()),
            Some(&cp1),
            t(20),
        );
        assert_eq!(p.status.phase, Phase::Rotating, "{}", p.status.message);
        assert!(
            p.status.message.contains("waiting for the nodes"),
            "{}",
            p.status.message
        );
        let p = plan(&d, &world(&[NEW; 4], done), Some(&cp1), t(21));
        assert_ne!(p.status.phase, Phase::Rotating, "{}", p.status.message);
    }

    /// `strategy: replace` on a service pool: the update asks the owner to remove before it
    /// adds (its no-surge setting), the batch as the nodes it takes out at once; a surge
    /// pool's update does not.
    #[test]
    fn a_replace_pool_asks_the_owner_for_its_update_without_a_surge() {
        let mut d = desired();
        let old4 = [OLD, OLD, OLD, OLD];
        let surge = request(&plan(&d, &world(&old4, owner(OLD, None)), None, t(0))).unwrap();
        assert!(!surge.drain_first);
        d.policy.strategy = crate::fleet::resolved::RolloutStrategy::Replace;
        let req = request(&plan(&d, &world(&old4, owner(OLD, None)), None, t(0))).unwrap();
        assert!(req.drain_first);
        assert_eq!(req.max_unavailable, MaxUnavailable::Count(2));
        // Carried in the action as the checkpoint's tests and the step logs show it.
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(json["drainFirst"], true);
        assert!(
            serde_json::to_value(&surge)
                .unwrap()
                .get("drainFirst")
                .is_none()
        );
    }

    /// `drain.onTimeout: force` asks the owner to force its update past a node it cannot
    /// drain; `pause` (the default) never does (invariant 2: force only where the policy
    /// says so).
    #[test]
    fn the_owner_is_asked_to_force_only_when_the_policy_says_force() {
        let mut d = desired();
        let old4 = [OLD, OLD, OLD, OLD];
        let paused = request(&plan(&d, &world(&old4, owner(OLD, None)), None, t(0))).unwrap();
        assert!(!paused.force);
        assert!(
            serde_json::to_value(&paused)
                .unwrap()
                .get("force")
                .is_none()
        );
        d.policy.drain.on_timeout = crate::fleet::resolved::OnDrainTimeout::Force;
        let forced = request(&plan(&d, &world(&old4, owner(OLD, None)), None, t(0))).unwrap();
        assert!(forced.force);
        assert_eq!(serde_json::to_value(&forced).unwrap()["force"], true);
    }

    /// A crash after the checkpoint and before the call: the owner has no update with the
    /// token, so the same request (same token) is sent again; once the owner has it, never.
    #[test]
    fn a_restart_sends_the_recorded_update_again_with_its_token_and_only_then() {
        let d = desired();
        let p1 = plan(&d, &world(&[OLD; 4], owner(OLD, None)), None, t(0));
        let cp = p1.checkpoint.unwrap();
        let token = cp.owner_update.as_ref().unwrap().token.clone();
        // An earlier update of someone else's, finished: not ours.
        let other = owner(OLD, Some(("console", OLD, UpdateStatus::Successful)));
        let again = plan(&d, &world(&[OLD; 4], other), Some(&cp), t(3));
        assert_eq!(request(&again).map(|r| r.token), Some(token.clone()));
        assert_eq!(
            again.checkpoint.as_ref(),
            Some(&cp),
            "the checkpoint is unchanged"
        );
        let seen = owner(NEW, Some((&token, NEW, UpdateStatus::InProgress)));
        let follow = plan(&d, &world(&[OLD; 4], seen), Some(&cp), t(4));
        assert!(follow.actions.is_empty());
    }

    /// Windows, pause, the parallel-pools hold, a pending or failed gate and someone
    /// else's update in progress each keep a new update from starting.
    #[test]
    fn no_update_starts_outside_a_window_paused_held_gated_or_while_the_owner_updates() {
        let w = world(&[OLD; 4], owner(OLD, None));
        let mut paused = desired();
        paused.policy.paused = true;
        let mut windowed = desired();
        windowed.policy.windows = vec![crate::fleet::resolved::Window {
            days: vec!["Sat".into()],
            start: "01:00".into(),
            end: "02:00".into(),
            time_zone: "UTC".into(),
        }];
        let mut held = w.clone();
        held.start_hold = Some("maxParallelPools 1: pool other rotates".into());
        let mut gated = w.clone();
        gated.gates = GateVerdict::Failed {
            gate: "errors".into(),
            reason: "0.2 > 0.01".into(),
        };
        let busy = world(
            &[OLD; 4],
            owner(OLD, Some(("console", "ami-x", UpdateStatus::InProgress))),
        );
        let cases = [
            (paused, w.clone(), Reason::PausedByPolicy),
            (windowed, w.clone(), Reason::OutsideWindow),
            (desired(), held, Reason::MaxParallelPools),
            (desired(), gated, Reason::GateFailed),
            (desired(), busy, Reason::OwnerUpdating),
        ];
        for (d, o, reason) in cases {
            let p = plan(&d, &o, None, t(0));
            assert!(p.actions.is_empty(), "{reason:?}: {:?}", p.actions);
            assert!(p.checkpoint.is_none(), "{reason:?}");
            assert_eq!(p.status.reason, reason.as_str(), "{}", p.status.message);
        }
    }

    /// A gate failing while EKS updates: `rollback` records an update back to the origin
    /// image and sends it only once EKS has finished the running one (EKS refuses a second);
    /// the pool then ends Failed and stays there while the desired image is the rejected one.
    #[test]
    fn a_failed_gate_with_rollback_sends_an_update_back_once_the_owner_takes_it() {
        let mut d = desired();
        d.policy.on_gate_failure = OnGateFailure::Rollback;
        let p1 = plan(&d, &world(&[OLD; 4], owner(OLD, None)), None, t(0));
        let cp1 = p1.checkpoint.unwrap();
        let token = cp1.owner_update.as_ref().unwrap().token.clone();
        let mut w = world(
            &[NEW, OLD, OLD, OLD],
            owner(NEW, Some((&token, NEW, UpdateStatus::InProgress))),
        );
        w.gates = GateVerdict::Failed {
            gate: "errors".into(),
            reason: "0.2 > 0.01".into(),
        };
        let p2 = plan(&d, &w, Some(&cp1), t(5));
        assert!(
            p2.actions.is_empty(),
            "EKS refuses a second update while one runs"
        );
        assert_eq!(p2.status.phase, Phase::RollingBack);
        let cp2 = p2.checkpoint.unwrap();
        assert!(cp2.rolling_back);
        let back = cp2.owner_update.clone().unwrap();
        assert_eq!(back.image, OLD);
        // The forward update ended: the rollback update is sent.
        w.owner = Some(owner(NEW, Some((&token, NEW, UpdateStatus::Successful))));
        let p3 = plan(&d, &w, Some(&cp2), t(15));
        let req = request(&p3).expect("the update back starts");
        assert_eq!(
            (req.image.as_str(), req.token.as_str()),
            (OLD, back.token.as_str())
        );
        // Done back on the old AMI: Failed, and it stays there.
        let home = world(
            &[OLD; 4],
            owner(OLD, Some((&back.token, OLD, UpdateStatus::Successful))),
        );
        let p4 = plan(&d, &home, p3.checkpoint.as_ref(), t(30));
        assert_eq!(p4.status.phase, Phase::Failed, "{}", p4.status.message);
        assert!(p4.status.message.contains("gate errors failed"));
        let p5 = plan(&d, &home, p4.checkpoint.as_ref(), t(60));
        assert_eq!(p5.status.phase, Phase::Failed);
        assert!(p5.actions.is_empty());
    }

    /// `pause` on a failed gate halts; a failed owner update halts naming EKS's errors.
    #[test]
    fn a_failed_gate_with_pause_and_a_failed_update_halt_the_pool() {
        let d = desired();
        let p1 = plan(&d, &world(&[OLD; 4], owner(OLD, None)), None, t(0));
        let cp1 = p1.checkpoint.unwrap();
        let token = cp1.owner_update.as_ref().unwrap().token.clone();
        let mut w = world(
            &[OLD; 4],
            owner(NEW, Some((&token, NEW, UpdateStatus::InProgress))),
        );
        w.gates = GateVerdict::Failed {
            gate: "errors".into(),
            reason: "0.2".into(),
        };
        let p = plan(&d, &w, Some(&cp1), t(5));
        assert_eq!(
            (p.status.phase, p.status.reason),
            (Phase::Paused, "GateFailed")
        );
        assert!(p.checkpoint.unwrap().halted.is_some());
        let failed = world(
            &[OLD; 4],
            owner(OLD, Some((&token, NEW, UpdateStatus::Failed))),
        );
        let p = plan(&d, &failed, Some(&cp1), t(20));
        assert_eq!(
            (p.status.phase, p.status.reason),
            (Phase::Paused, "OwnerUpdateFailed")
        );
        assert!(
            p.status.message.contains("NodeCreationFailure"),
            "{}",
            p.status.message
        );
        assert!(p.actions.is_empty());
        let again = plan(&d, &failed, p.checkpoint.as_ref(), t(30));
        assert!(again.actions.is_empty(), "a halted pool starts nothing");
    }

    /// Without the owner's state (an agent that does not drive the owner), or under
    /// `blueGreen`, the pool is still only reported.
    #[test]
    fn without_the_owner_or_under_blue_green_nothing_is_acted_on() {
        let mut w = world(&[OLD; 4], owner(OLD, None));
        let mut bg = desired();
        bg.policy.managed_update = Some(crate::fleet::owner::ManagedUpdate::BlueGreen);
        let p = plan(&bg, &w, None, t(0));
        assert_eq!(p.status.reason, "ManagedPoolNotSupported");
        assert!(p.actions.is_empty());
        w.owner = None;
        let p = plan(&desired(), &w, None, t(0));
        assert_eq!(p.status.reason, "ManagedPoolNotSupported");
        assert!(p.actions.is_empty());
    }

    fn fleet_stop() -> crate::fleet::stops::FleetStop {
        crate::fleet::stops::FleetStop {
            id: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d".into(),
            wave: Some("main".into()),
            cluster: None,
            reason: "INC-4711".into(),
            by: "oncall".into(),
            at: t(0),
            trust: Default::default(),
        }
    }

    /// A fleet stop holds a service pool: no update starts; one the owner runs is left to
    /// its end, said so, and nothing follows it (no pool soak's end, no rollback) until the
    /// stop is lifted; the checkpoint records the stop and forgets it once lifted.
    #[test]
    fn a_fleet_stop_starts_no_update_and_holds_one_under_way_at_its_end() {
        let mut d = desired();
        d.policy.stop = Some(fleet_stop());
        let old4 = [OLD; 4];
        let p = plan(&d, &world(&old4, owner(OLD, None)), None, t(0));
        assert!(request(&p).is_none(), "{:?}", p.actions);
        assert_eq!(
            (p.status.phase, p.status.reason),
            (Phase::Paused, "Stopped")
        );
        assert!(
            p.status.message.contains("rota stop --clear --wave main"),
            "{}",
            p.status.message
        );
        // Started before the stop: the owner's update runs on, rota says it cannot stop it.
        d.policy.stop = None;
        let p1 = plan(&d, &world(&old4, owner(OLD, None)), None, t(0));
        let req = request(&p1).unwrap();
        let cp1 = p1.checkpoint.unwrap();
        d.policy.stop = Some(fleet_stop());
        let running = owner(NEW, Some((&req.token, NEW, UpdateStatus::InProgress)));
        let p2 = plan(&d, &world(&[NEW, OLD, OLD, OLD], running), Some(&cp1), t(5));
        assert!(p2.actions.is_empty());
        assert_eq!(p2.status.reason, "Stopped");
        assert!(
            p2.status.message.contains("runs to its end"),
            "{}",
            p2.status.message
        );
        let cp2 = p2.checkpoint.unwrap();
        assert_eq!(cp2.fleet_stop.as_deref(), Some(fleet_stop().id.as_str()));
        // The recorded update not sent yet (a crash before the call): not sent while stopped.
        let p3 = plan(&d, &world(&old4, owner(OLD, None)), Some(&cp1), t(6));
        assert!(request(&p3).is_none(), "{:?}", p3.actions);
        // A gate failing with rollback while stopped: no update back either.
        d.policy.on_gate_failure = OnGateFailure::Rollback;
        let done = owner(NEW, Some((&req.token, NEW, UpdateStatus::Successful)));
        let mut w = world(&[NEW; 4], done);
        w.gates = GateVerdict::Failed {
            gate: "errors".into(),
            reason: "5xx".into(),
        };
        let p4 = plan(&d, &w, Some(&cp2), t(30));
        assert!(request(&p4).is_none(), "{:?}", p4.actions);
        assert_eq!(p4.status.reason, "Stopped");
        // Lifted: the rollback the gate asks for is sent, the stop forgotten.
        d.policy.stop = None;
        let p5 = plan(&d, &w, Some(&cp2), t(31));
        assert_eq!(request(&p5).map(|r| r.image).as_deref(), Some(OLD));
        assert_eq!(p5.checkpoint.unwrap().fleet_stop, None);
    }
}
