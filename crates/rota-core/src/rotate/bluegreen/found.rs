//! A blue-green move found again by rota's twin label when no move is recorded: the pool's
//! status was lost (its NodePoolRotation deleted and created again, a restore from backup)
//! after a twin was created. The edge lists the repo's pool and rota's twins of it, found by
//! the label rota put on them whatever their name (`OwnerPools::twins_of`); from them:
//!
//! - the repo's pool alone: nothing was under way, the move starts as usual;
//! - one twin alone (the move had ended, the emptied pool deleted): the nodes live in the
//!   twin, recorded as a finished move so the next one starts from it;
//! - the pool and its twin on the pinned image: the move was under way and resumes where
//!   the pools are, as after a crash (the batches count again from there);
//! - anything else (a twin on another image than the pin, several live twins): the pool is
//!   paused naming them; nothing is created or deleted.
//!
//! The move's size at its start is not in any pool: it is taken as the smaller of the two
//! pools' sizes together (between batches, exactly the pool's size; mid-batch, the size plus
//! the surge) and the twin's maximum (rota creates a twin with the old pool's maximum: its
//! size, unless the pool allowed more). Found mid-batch (the twin already holds more than
//! its share), the nodes above that size are taken as the lost batch's surge: a batch is
//! recorded with them as its new instances and as many old nodes (those rota had cordoned
//! first), waiting for them to be Ready, so the move goes on without a second surge.

use super::steps::{Ctx, first_checkpoint, follow, start, with_step};
use crate::cloud::Lifecycle;
use crate::cloud::managed::{OwnerPoolMembers, PoolStatus};
use crate::rotate::checkpoint::{Batch, ChosenNode};
use crate::rotate::checkpoint::{BlueGreenStep, Checkpoint, Stage};
use crate::rotate::operator::Request;
use crate::rotate::outcome::Plan;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

/// The plan for a move found again, or `None` when no twin of rota's is listed.
pub(super) fn resume(
    cx: &Ctx<'_>,
    previous: Option<&Checkpoint>,
    request: Option<&Request>,
    steered: &mut Option<String>,
) -> Option<Plan> {
    let live: Vec<&OwnerPoolMembers> = cx
        .obs
        .pools
        .iter()
        // The repo's pool and rota's own twins; a foreign pool is none of rota's business.
        .filter(|m| m.pool.name() == cx.base.name() || m.twin_of.is_some())
        .filter(|m| m.status != PoolStatus::Deleting)
        .collect();
    // The twins made of a pool still listed: a move under way (a second move's twin is
    // labelled with the first twin's name).
    let listed = |name: &str| live.iter().any(|m| m.pool.name() == name);
    let moving: Vec<&&OwnerPoolMembers> = live
        .iter()
        .filter(|m| m.twin_of.as_deref().is_some_and(listed))
        .collect();
    let keep = previous.cloned();
    match (live.as_slice(), moving.as_slice()) {
        ([only], []) if only.twin_of.is_none() => None,
        ([], _) => None,
        ([twin], []) => {
            // The move had ended: its twin holds the nodes.
            let old = twin.twin_of.clone().unwrap_or_default();
            let mut cp = first_checkpoint(cx, twin, previous, &old, twin.pool.name());
            cp.origin_image = twin.image.clone();
            cp.target_image = twin.image.clone();
            cp.stage = Stage::Done;
            let done = with_step(&cp, BlueGreenStep::Done);
            Some(start(cx, Some(&done)))
        }
        ([_, _], [twin]) => {
            let old_name = twin.twin_of.clone().unwrap_or_default();
            let Some(old) = live.iter().find(|m| m.pool.name() == old_name) else {
                return Some(halt(cx, keep, &live));
            };
            if twin.image != cx.target {
                let msg = format!(
                    "found rota's twin {} of {} on {}, not the pinned {}: finish or remove that move first (nothing is created or deleted)",
                    twin.pool.name(),
                    old_name,
                    twin.image,
                    cx.target
                );
                return Some(cx.stop(keep, Phase::Paused, Reason::Halted, msg));
            }
            let mut cp = first_checkpoint(cx, old, previous, &old_name, twin.pool.name());
            let together = old.desired + twin.desired;
            cp.original_desired = together.min(twin.max.max(1));
            cp.original_max = cp.original_max.max(cp.original_desired);
            cp.pool_size = cp.pool_size.min(cp.original_desired.max(1));
            if let Some((batch, cordoned)) =
                lost_batch(cx, old, twin, together - cp.original_desired)
            {
                cp.batches_started = batch.number;
                // Past its cordons already (the new nodes were Ready then): the batch goes on
                // from them, which it claims; else it waits for its new nodes to be Ready.
                cp.stage = if cordoned {
                    Stage::Cordoning { batch }
                } else {
                    Stage::WaitingReady { batch }
                };
            }
            let mark = cp
                .blue_green
                .clone()
                .expect("a first checkpoint has its mark");
            Some(follow(cx, &cp, &mark, request, steered))
        }
        _ => Some(halt(cx, keep, &live)),
    }
}

fn halt(cx: &Ctx<'_>, keep: Option<Checkpoint>, live: &[&OwnerPoolMembers]) -> Plan {
    let names: Vec<String> = live
        .iter()
        .map(|m| match &m.twin_of {
            Some(of) => format!("{} (rota's twin of {of}, on {})", m.pool.name(), m.image),
            None => format!("{} (on {})", m.pool.name(), m.image),
        })
        .collect();
    let msg = format!(
        "no move is recorded and the owner lists {}: rota does not guess which holds the pool; remove the extra pools or restore the pool's status",
        names.join(", ")
    );
    cx.stop(keep, Phase::Paused, Reason::Halted, msg)
}

/// The batch a lost checkpoint had under way, from the `surplus` nodes the twin holds above
/// the move's size: its newest instances as the surge, as many of the old pool's nodes
/// (those rota cordoned first) as the nodes it replaces, and whether any of those is
/// cordoned. `None` between batches.
fn lost_batch(
    cx: &Ctx<'_>,
    old: &OwnerPoolMembers,
    twin: &OwnerPoolMembers,
    surplus: u32,
) -> Option<(Batch, bool)> {
    if surplus == 0 {
        return None;
    }
    let live = |m: &OwnerPoolMembers| -> Vec<crate::cloud::Instance> {
        m.instances
            .iter()
            .filter(|i| i.lifecycle != Lifecycle::Terminating)
            .cloned()
            .collect()
    };
    let new: Vec<String> = live(twin)
        .iter()
        .rev()
        .take(surplus as usize)
        .map(|i| i.id.clone())
        .collect();
    let (old_nodes, number) = replaced(cx, &live(old), surplus);
    let cordoned = number.is_some();
    let moved = (live(twin).len() as u32).saturating_sub(surplus);
    let number = number.unwrap_or(moved.div_ceil(surplus) + 1);
    let instances_before = old
        .instances
        .iter()
        .chain(&twin.instances)
        .map(|i| i.id.clone())
        .filter(|id| !new.contains(id))
        .collect();
    let batch = Batch {
        number,
        old_nodes,
        target_capacity: old.desired + twin.desired,
        instances_before,
        terminating_before: Vec::new(),
        taken_back: Vec::new(),
        new_instances: new,
        replaced: Vec::new(),
        never_ready: Vec::new(),
        ready_retries: 0,
        replace_at: None,
        stage_since: cx.now,
        started_at: Some(cx.now),
        cordoned_at: None,
        deferral_ended: Vec::new(),
        // A blue-green move surges into its twin: never a drain-first batch.
        replace: false,
    };
    Some((batch, cordoned))
}

/// The old pool's nodes a lost batch replaces: `surplus` of them, those rota had cordoned
/// first; and the batch's number as those cordons name it (`<pool>/batch-N`, so the batch
/// still owns them), `None` when none is cordoned.
fn replaced(
    cx: &Ctx<'_>,
    old: &[crate::cloud::Instance],
    surplus: u32,
) -> (Vec<ChosenNode>, Option<u32>) {
    // The batch's number is the one its cordons name (`<pool>/batch-N`, so the batch still
    // owns them); before its cordons, the one after the batches the twin's nodes hold.
    let mut number = None;
    let mut olds: Vec<(bool, ChosenNode)> = old
        .iter()
        .filter_map(|i| {
            let n = cx
                .obs
                .nodes
                .iter()
                .find(|n| n.provider_id == i.provider_id)?;
            let ours = n.cordoned_by.as_deref().and_then(|by| {
                by.strip_prefix(&format!("{}/batch-", cx.desired.name))?
                    .parse::<u32>()
                    .ok()
            });
            if n.cordoned && ours.is_some() {
                number = number.max(ours);
            }
            let chosen = ChosenNode {
                node: n.name.clone(),
                instance_id: i.id.clone(),
            };
            Some((!(n.cordoned && ours.is_some()), chosen))
        })
        .collect();
    olds.sort_by_key(|a| a.0);
    let chosen = olds
        .into_iter()
        .take(surplus as usize)
        .map(|(_, c)| c)
        .collect();
    (chosen, number)
}
