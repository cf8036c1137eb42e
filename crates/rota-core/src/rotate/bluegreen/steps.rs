//! The steps of a blue-green move ([`Ctx`], what every step reads): starting one
//! ([`start`]), following the one recorded ([`follow`]) through creating the twin, moving
//! the batches ([`crate::rotate::plan::plan_group`] on both pools as one group) and deleting
//! the emptied pool. The router (`bluegreen.rs`) and a move found again (`found`) both go on
//! from here; it lives below both.

use chrono::{DateTime, Utc};

use crate::cloud::managed::{OwnerPoolMembers, PoolStatus, TwinRequest, renamed, twin_name_on};
use crate::cloud::{GroupRef, GroupState};
use crate::fleet::owner::ManagedGroup;
use crate::fleet::resolved::DesiredPool;
use crate::rotate::action::{Action, Planned};
use crate::rotate::checkpoint::Stage;
use crate::rotate::checkpoint::{BlueGreenMark, BlueGreenStep, Checkpoint};
use crate::rotate::counts::Counts;
use crate::rotate::observed::Observed;
use crate::rotate::operator::Request;
use crate::rotate::outcome::Plan;
use crate::rotate::phase::Phase;
use crate::rotate::plan::plan_group;
use crate::rotate::stop::{self, Reason};

/// The inputs every step reads.
pub(super) struct Ctx<'a> {
    pub(super) desired: &'a DesiredPool,
    pub(super) obs: &'a Observed,
    pub(super) now: DateTime<Utc>,
    /// The fleet repo's pool (its name is the twins' stem).
    pub(super) base: &'a ManagedGroup,
    /// The image the owner takes for this version (the AMI for EKS).
    pub(super) target: String,
}

impl Ctx<'_> {
    pub(super) fn pool(&self, name: &str) -> ManagedGroup {
        renamed(self.base, name)
    }

    pub(super) fn members(&self, name: &str) -> Option<&OwnerPoolMembers> {
        self.obs.pools.iter().find(|m| m.pool.name() == name)
    }

    /// The desired pool as the batch planner sees it: the owner's image, every node.
    pub(super) fn as_group(&self, image: &str) -> DesiredPool {
        let mut d = self.desired.clone();
        d.image = image.to_string();
        // A twin holds the whole pool or nothing: the old pool is deleted at the end.
        d.policy.percent = 100;
        // The twin grows by a batch before the old pool shrinks: always a surge
        // (`validate` refuses `strategy: replace` with blueGreen).
        d.policy.strategy = crate::fleet::resolved::RolloutStrategy::Surge;
        d
    }

    pub(super) fn stop(
        &self,
        cp: Option<Checkpoint>,
        phase: Phase,
        reason: Reason,
        msg: String,
    ) -> Plan {
        let counts = Counts::of(&self.as_group(&self.target), self.obs);
        let halted = cp.as_ref().and_then(|c| c.halted.clone());
        let note = (phase != Phase::Succeeded).then(|| {
            stop::explain(
                reason,
                &msg,
                &stop::Context {
                    cluster: &self.desired.cluster,
                    pool: &self.desired.name,
                    halted: halted.as_deref().filter(|_| phase == Phase::Paused),
                    clear: self.desired.policy.stop.as_ref().map(|s| s.clear_command()),
                    ..Default::default()
                },
            )
        });
        Plan {
            actions: Vec::new(),
            dry_run: Vec::new(),
            checkpoint: cp,
            status: counts.status(phase, reason, msg, note.flatten()),
        }
    }
}

/// The pool the nodes are on now: the one the last move left them in, else the repo's.
fn current(cx: &Ctx<'_>, previous: Option<&Checkpoint>) -> String {
    match previous.and_then(|c| c.blue_green.as_ref().map(|m| (c, m))) {
        Some((c, m)) if m.step == BlueGreenStep::Done && !c.rolling_back => m.twin_pool.clone(),
        Some((_, m)) => m.old_pool.clone(),
        None => cx.base.name().to_string(),
    }
}

/// No move under way: up to date, rolled back from this image, or a new move starts by
/// recording the twin (the call follows in the same plan).
pub(super) fn start(cx: &Ctx<'_>, previous: Option<&Checkpoint>) -> Plan {
    let keep = previous.cloned();
    let name = current(cx, previous);
    let Some(old) = cx.members(&name) else {
        let msg = format!("the pool's nodes are in {name}, which the owner does not list");
        return cx.stop(keep, Phase::Paused, Reason::Halted, msg);
    };
    let on_target = cx
        .obs
        .nodes
        .iter()
        .all(|n| cx.obs.image_of(n).as_deref() == Some(cx.target.as_str()));
    if old.image == cx.target && on_target {
        let msg = format!("up to date: pool {name} runs {}", cx.target);
        return cx.stop(keep, Phase::Succeeded, Reason::UpToDate, msg);
    }
    if let Some(cp) = previous.filter(|c| c.rejected_image.as_deref() == Some(&*cx.target)) {
        let why = cp.rollback_reason.clone().unwrap_or_default();
        let msg = format!(
            "rolled back from {}: {why}; waiting for a new version",
            cx.target
        );
        return cx.stop(keep, Phase::Failed, Reason::RolledBack, msg);
    }
    if let Some(held) = fleet_stop(cx, keep.clone(), "no twin pool is created") {
        return held;
    }
    if cx.desired.policy.paused {
        let msg = "rollout.paused: no twin pool is created".to_string();
        return cx.stop(keep, Phase::Paused, Reason::PausedByPolicy, msg);
    }
    if let Some(hold) = &cx.obs.start_hold {
        return cx.stop(keep, Phase::Waiting, Reason::MaxParallelPools, hold.clone());
    }
    let owner = cx.base.owner();
    // Named within the owner's rule for the pool's OS (an AKS Windows pool: six characters).
    let twin_name = |version: &str| twin_name_on(owner, old.os, cx.base.name(), version);
    let mut twin = twin_name(&cx.desired.version);
    if twin == name {
        // The version's image changed in place: the nodes' pool already has this name.
        twin = twin_name(&format!("{}-2", cx.desired.version));
    }
    let cp = first_checkpoint(cx, old, previous, &name, &twin);
    let mut plan = cx.stop(
        Some(cp),
        Phase::Rotating,
        Reason::OwnerUpdating,
        format!(
            "creating twin pool {twin} on {} to replace {name}",
            cx.target
        ),
    );
    plan.actions.push(create(cx, &name, &twin, old));
    plan
}

pub(super) fn first_checkpoint(
    cx: &Ctx<'_>,
    old: &OwnerPoolMembers,
    previous: Option<&Checkpoint>,
    name: &str,
    twin: &str,
) -> Checkpoint {
    Checkpoint {
        origin_image: old.image.clone(),
        target_image: cx.target.clone(),
        target_version: cx.desired.version.clone(),
        original_desired: old.desired,
        original_max: old.desired.max(old.max),
        pool_size: cx.obs.nodes.len() as u32,
        batches_started: 0,
        rolling_back: false,
        rejected_image: None,
        rollback_reason: None,
        last_eviction: None,
        halted: None,
        operator_paused: previous.and_then(|p| p.operator_paused.clone()),
        operator_request: previous.and_then(|p| p.operator_request.clone()),
        annotated_nodes: Vec::new(),
        fenced_at: None,
        capacity_changed_at: None,
        stage: Stage::Between,
        next: None,
        pace: previous.and_then(|p| p.pace),
        owner_update: None,
        fleet_stop: None,
        drift: None,
        blue_green: Some(BlueGreenMark {
            old_pool: name.to_string(),
            twin_pool: twin.to_string(),
            step: BlueGreenStep::CreatingTwin,
        }),
    }
}

fn create(cx: &Ctx<'_>, old: &str, twin: &str, members: &OwnerPoolMembers) -> Planned {
    Planned {
        action: Action::CreateTwinPool {
            request: TwinRequest {
                from: cx.pool(old),
                twin: cx.pool(twin),
                image: cx.target.clone(),
                // Empty: the batches grow it, one batch at a time (invariant 1).
                desired: 0,
                max: members.desired.max(members.max).max(1),
            },
        },
        reason: format!("blueGreen: a twin of {old} on {}", cx.target),
    }
}

/// A move under way, at its recorded step.
pub(super) fn follow(
    cx: &Ctx<'_>,
    cp: &Checkpoint,
    m: &BlueGreenMark,
    request: Option<&Request>,
    steered: &mut Option<String>,
) -> Plan {
    // A fleet stop holds the owner's pools as they are; while the batches move, the batch
    // planner holds them (and records the stop) like a self-managed group's.
    let what = match m.step {
        BlueGreenStep::CreatingTwin => Some("the twin pool is not asked for"),
        BlueGreenStep::DeletingEmpty => Some("the emptied pool is not deleted"),
        _ => None,
    };
    if let Some(held) = what.and_then(|w| fleet_stop(cx, Some(cp.clone()), w)) {
        return held;
    }
    match m.step {
        BlueGreenStep::CreatingTwin => creating(cx, cp, m, request, steered),
        BlueGreenStep::Moving => moving(cx, cp, m, request, steered),
        BlueGreenStep::DeletingEmpty => deleting(cx, cp, m),
        BlueGreenStep::Done => start(cx, Some(cp)),
    }
}

/// A fleet stop (`rota stop`) in force: the pool held where it is, `what` saying what is
/// not done; the checkpoint records the stop.
fn fleet_stop(cx: &Ctx<'_>, keep: Option<Checkpoint>, what: &str) -> Option<Plan> {
    let stop = cx.desired.policy.stop.as_ref()?;
    let keep = keep.map(|mut c| {
        c.fleet_stop = Some(stop.id.clone());
        c
    });
    let msg = format!(
        "{}: {what}; `{}` lifts it",
        stop.describe(),
        stop.clear_command()
    );
    Some(cx.stop(keep, Phase::Paused, Reason::Stopped, msg))
}

pub(super) fn with_step(cp: &Checkpoint, step: BlueGreenStep) -> Checkpoint {
    let mut next = cp.clone();
    if let Some(m) = next.blue_green.as_mut() {
        m.step = step;
    }
    next
}

/// Step 1: the twin is asked for until the owner lists it, then waited for until active.
fn creating(
    cx: &Ctx<'_>,
    cp: &Checkpoint,
    m: &BlueGreenMark,
    request: Option<&Request>,
    steered: &mut Option<String>,
) -> Plan {
    let keep = Some(cp.clone());
    let Some(twin) = cx.members(&m.twin_pool) else {
        let Some(old) = cx.members(&m.old_pool) else {
            let msg = format!("pool {} is not listed by its owner", m.old_pool);
            return cx.stop(keep, Phase::Paused, Reason::Halted, msg);
        };
        let ask = create(cx, &m.old_pool, &m.twin_pool, old);
        // Refused last time (an image the owner does not create pools on): not asked again.
        if let Some(r) = cx
            .obs
            .refused
            .as_ref()
            .filter(|r| r.action == ask.action.to_string())
        {
            let msg = format!(
                "{} refused twin pool {}: {}",
                cx.base.owner().service(),
                m.twin_pool,
                r.why
            );
            return cx.stop(keep, Phase::Paused, Reason::OwnerRefused, msg);
        }
        // Not there: the call never arrived (a crash after the checkpoint) or was lost.
        let msg = format!("twin pool {} asked for (again)", m.twin_pool);
        let mut plan = cx.stop(keep, Phase::Rotating, Reason::OwnerUpdating, msg);
        plan.actions.push(ask);
        return plan;
    };
    if twin.twin_of.as_deref() != Some(m.old_pool.as_str()) {
        let msg = format!(
            "a pool named {} exists and is not rota's twin of {}: nothing is done to it",
            m.twin_pool, m.old_pool
        );
        return cx.stop(keep, Phase::Paused, Reason::Halted, msg);
    }
    match twin.status {
        PoolStatus::Active => moving(
            cx,
            &with_step(cp, BlueGreenStep::Moving),
            m,
            request,
            steered,
        ),
        PoolStatus::Failed => {
            let msg = format!(
                "twin pool {} failed: {}",
                m.twin_pool,
                twin.issues.join("; ")
            );
            cx.stop(keep, Phase::Paused, Reason::OwnerUpdateFailed, msg)
        }
        s => {
            let msg = format!(
                "twin pool {} is {s:?}; the batches start once it is active",
                m.twin_pool
            );
            cx.stop(keep, Phase::Rotating, Reason::OwnerUpdating, msg)
        }
    }
}

/// Step 2: the batch planner over the two pools seen as one, its actions translated.
fn moving(
    cx: &Ctx<'_>,
    cp: &Checkpoint,
    m: &BlueGreenMark,
    request: Option<&Request>,
    steered: &mut Option<String>,
) -> Plan {
    let (Some(old), Some(twin)) = (cx.members(&m.old_pool), cx.members(&m.twin_pool)) else {
        let msg = format!(
            "pools {} and {} are not both listed by their owner",
            m.old_pool, m.twin_pool
        );
        return cx.stop(Some(cp.clone()), Phase::Paused, Reason::Halted, msg);
    };
    // A new version while a move is under way waits for its end; going back to the origin
    // is the planner's fast rollback (the old pool grows back).
    let image = if cx.target == cp.origin_image {
        cx.target.clone()
    } else {
        cp.target_image.clone()
    };
    let desired = cx.as_group(&image);
    let growing_twin = !cp.rolling_back && image == cp.target_image;
    let obs = composite(cx, old, twin, growing_twin);
    let mut plan = plan_group(&desired, &obs, Some(cp), request, steered, cx.now);
    let next = plan.checkpoint.clone();
    let grows_twin = !next.as_ref().is_some_and(|c| c.rolling_back);
    plan.actions = translate(std::mem::take(&mut plan.actions), old, twin, grows_twin);
    plan.dry_run = translate(std::mem::take(&mut plan.dry_run), old, twin, grows_twin);
    let Some(mut next) = next else {
        return plan;
    };
    next.blue_green = Some(m.clone());
    if next.stage == Stage::Done {
        // Every batch done and soaked (the old pool held at zero throughout the soak): the
        // emptied pool goes, in this same pass.
        let next = with_step(&next, BlueGreenStep::DeletingEmpty);
        let mut more = deleting(cx, &next, next.blue_green.as_ref().expect("set above"));
        let mut actions = plan.actions;
        actions.append(&mut more.actions);
        more.actions = actions;
        return more;
    }
    plan.checkpoint = Some(next);
    plan
}

/// The two pools as one group for the batch planner: the growing pool's image is the
/// template, the capacity is their sum, the instances are both pools'.
fn composite(
    cx: &Ctx<'_>,
    old: &OwnerPoolMembers,
    twin: &OwnerPoolMembers,
    growing_twin: bool,
) -> Observed {
    let (grows, shrinks) = if growing_twin {
        (twin, old)
    } else {
        (old, twin)
    };
    let mut obs = cx.obs.clone();
    obs.group = GroupState {
        group: GroupRef::Managed(cx.base.clone()),
        desired: old.desired + twin.desired,
        min: 0,
        max: shrinks.desired + grows.max.max(grows.desired),
        template_image: grows.image.clone(),
        instances: old
            .instances
            .iter()
            .chain(&twin.instances)
            .cloned()
            .collect(),
    };
    obs
}

/// The batch planner's actions on one group, as calls on the two pools. Capacities are
/// absolute: the growing pool's size is the group's less the other pool's, as this plan
/// leaves it (a removal earlier in the plan lowers it by one).
fn translate(
    actions: Vec<Planned>,
    old: &OwnerPoolMembers,
    twin: &OwnerPoolMembers,
    growing_twin: bool,
) -> Vec<Planned> {
    let (grows, shrinks) = if growing_twin {
        (twin, old)
    } else {
        (old, twin)
    };
    let (mut grows_desired, mut shrinks_desired) = (grows.desired, shrinks.desired);
    let mut out = Vec::new();
    for p in actions {
        let action = match p.action {
            // Each pool boots one image; the maximum is set with the size.
            Action::SetImage { .. } | Action::SetMax { .. } => continue,
            Action::SetCapacity { desired, max } => {
                grows_desired = desired.saturating_sub(shrinks_desired);
                let max = max.map_or(0, |m| m.saturating_sub(shrinks_desired));
                Action::SetPoolSize {
                    pool: grows.pool.clone(),
                    desired: grows_desired,
                    max: max.max(grows.max).max(grows_desired),
                }
            }
            Action::WithdrawSurge { desired, .. } => {
                grows_desired = desired.saturating_sub(shrinks_desired);
                Action::SetPoolSize {
                    pool: grows.pool.clone(),
                    desired: grows_desired,
                    max: grows.max.max(grows_desired),
                }
            }
            Action::Terminate { instance_id, node } => {
                let lists = |m: &OwnerPoolMembers| m.instances.iter().any(|i| i.id == instance_id);
                let pool = if lists(shrinks) {
                    shrinks_desired = shrinks_desired.saturating_sub(1);
                    shrinks.pool.clone()
                } else if lists(grows) {
                    grows_desired = grows_desired.saturating_sub(1);
                    grows.pool.clone()
                } else {
                    continue;
                };
                Action::RemovePoolNode {
                    pool,
                    instance_id,
                    node,
                }
            }
            other => other,
        };
        out.push(Planned {
            action,
            reason: p.reason,
        });
    }
    out
}

/// Step 3: the emptied pool is deleted once it lists no instance; then the move is done.
fn deleting(cx: &Ctx<'_>, cp: &Checkpoint, m: &BlueGreenMark) -> Plan {
    let empty = if cp.rolling_back {
        &m.twin_pool
    } else {
        &m.old_pool
    };
    let keep = Some(cp.clone());
    match cx.members(empty) {
        None => {
            let done = with_step(cp, BlueGreenStep::Done);
            let (phase, reason, msg) = if cp.rolling_back && cx.target == cp.origin_image {
                // The repo went back (a revert): the end of the story, not a person's step.
                let msg = format!("back on pool {} ({})", m.old_pool, cp.origin_image);
                (Phase::Succeeded, Reason::Done, msg)
            } else if cp.rolling_back {
                let why = cp.rollback_reason.clone().unwrap_or_default();
                (
                    Phase::Failed,
                    Reason::RolledBack,
                    format!("rolled back to pool {}: {why}", m.old_pool),
                )
            } else {
                (
                    Phase::Succeeded,
                    Reason::Done,
                    format!("done: pool {} runs {}", m.twin_pool, cp.target_image),
                )
            };
            cx.stop(Some(done), phase, reason, msg)
        }
        Some(p) if p.status == PoolStatus::Deleting => {
            let msg = format!("pool {empty} is being deleted");
            cx.stop(keep, Phase::Rotating, Reason::Cleanup, msg)
        }
        Some(p) if !p.instances.is_empty() || p.desired > 0 => {
            let msg = format!(
                "pool {empty} still has {} instances (size {}): it is not deleted",
                p.instances.len(),
                p.desired
            );
            cx.stop(keep, Phase::Paused, Reason::Halted, msg)
        }
        Some(p) => {
            let msg = format!("deleting the emptied pool {empty}");
            let mut plan = cx.stop(keep, Phase::Rotating, Reason::Cleanup, msg);
            plan.actions.push(Planned {
                action: Action::DeletePool {
                    pool: p.pool.clone(),
                },
                reason: format!("blueGreen: {empty} has no node left and the pool soak passed"),
            });
            plan
        }
    }
}
