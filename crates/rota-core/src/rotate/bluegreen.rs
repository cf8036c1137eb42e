//! `managedUpdate: blueGreen`: a managed pool moved to a twin pool on the new image, in
//! rota's own batches, only through the owner's API.
//!
//! Pure, like the rest of `rotate`. The move has four steps, recorded in the checkpoint's
//! [`BlueGreenMark`] before anything is asked of the owner:
//!
//! 1. `CreatingTwin`: the twin (named by `cloud::managed::twin_name_on` from the pool, its
//!    OS and the version, so a restart finds it instead of creating a second) is created
//!    empty, in the old pool's shape, on the new image; the move waits until the owner says
//!    it is active.
//! 2. `Moving`: the two pools are planned as *one* group by the batch planner the
//!    self-managed groups use ([`super::plan::plan_group`]): its instances are both pools',
//!    its capacity their sum, its template the image of the pool that grows. The planner's
//!    surge becomes the growing pool's size ([`Action::SetPoolSize`], absolute), its
//!    terminations of drained nodes become [`Action::RemovePoolNode`] on the pool that lists
//!    the instance, and everything it does between (cordon, eviction through the Eviction
//!    API with budgets and `drain.evictionInterval`, gates, batch soaks, `drain.timeout`,
//!    windows, pause, the checkpointed stages) is the self-managed rotation's, invariants
//!    and crash tests included. So the pool never holds more than its size plus one batch
//!    (invariant 1): the twin grows by one batch, the old pool shrinks by the nodes drained.
//!    The planner's pool soak holds the old pool at zero; a gate failing then (with
//!    `onGateFailure: rollback`) is the planner's rollback: the old pool grows back batch by
//!    batch and the twin is drained.
//! 3. `DeletingEmpty`: the pool the move emptied (the old one, or the twin after a rollback)
//!    is deleted, once it lists no instance.
//! 4. `Done`: the pool's nodes now live in the twin (or still in the old pool): the next move
//!    starts from it.
//!
//! What the planner asks of a self-managed group and an owner does not take is dropped: the
//! template (each pool boots one image: the twin the new, the old pool the origin) and the
//! group's maximum outside a resize.

use chrono::{DateTime, Utc};

use super::checkpoint::{BlueGreenStep, Checkpoint};
use super::observed::Observed;
use super::operator::Request;
use super::outcome::Plan;
use crate::fleet::resolved::{DesiredPool, Mode};
use steps::{Ctx, follow, start};

/// The plan for a managed pool under `managedUpdate: blueGreen`, from the pools the edge
/// listed (`Observed::pools`).
pub(super) fn plan(
    desired: &DesiredPool,
    observed: &Observed,
    checkpoint: Option<&Checkpoint>,
    request: Option<&Request>,
    steered: &mut Option<String>,
    now: DateTime<Utc>,
) -> Plan {
    let Some(base) = desired.group.managed() else {
        unreachable!("routed here for managed pools only")
    };
    let target = desired
        .owner_image
        .as_ref()
        .map_or_else(|| desired.image.clone(), |o| o.as_image());
    let cx = Ctx {
        desired,
        obs: observed,
        now,
        base,
        target,
    };
    let moving = checkpoint.and_then(|c| c.blue_green.as_ref().map(|m| (c, m)));
    let recorded = checkpoint.and_then(|c| c.blue_green.as_ref()).is_some();
    let mut plan = match moving {
        Some((cp, m)) if m.step != BlueGreenStep::Done => follow(&cx, cp, m, request, steered),
        // No move recorded: one may have been lost with the pool's status (`found`).
        _ if !recorded => found::resume(&cx, checkpoint, request, steered)
            .unwrap_or_else(|| start(&cx, checkpoint)),
        _ => start(&cx, checkpoint),
    };
    if desired.mode == Mode::ReadOnly && !plan.actions.is_empty() {
        plan.dry_run = std::mem::take(&mut plan.actions);
        plan.checkpoint = checkpoint.cloned();
        plan.status.message = format!("readOnly: {}", plan.status.message);
    }
    plan
}

mod found;
mod steps;

#[cfg(test)]
mod tests;
