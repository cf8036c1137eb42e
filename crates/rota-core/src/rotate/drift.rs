//! A Karpenter pool replaced by Karpenter's drift, paced batch by batch by rota.
//!
//! Pure, like the rest of `rotate`: from the desired pool, the NodePool, NodeClass and
//! NodeClaims as the edge read them ([`DriftPoolState`]) and the checkpoint, it returns the
//! writes ([`Action::SetDisruptionBudgets`], [`Action::PinNodeClassImage`]) and the next
//! checkpoint. rota writes two things of Karpenter's objects only: the NodeClass's
//! `amiSelectorTerms` (pinned to the target AMI by ID) and one disruption budget of its own
//! for reason `Drifted`, appended after the user's budgets (Karpenter applies the most
//! restrictive, so the user's own limits and schedules stay in force).
//!
//! How a rotation goes:
//! 1. start: rota's budget is written as `0` first, then the image is pinned: Karpenter marks
//!    every NodeClaim on another AMI `Drifted` but may disrupt none of them yet;
//! 2. a batch opens when gates pass, inside a window, unpaused: the budget lets Karpenter
//!    start `batch` replacements. Karpenter's `nodes` is how many may be disrupting *at once*,
//!    not how many in total, so rota counts the batch's starts (the NodeClaims off the image
//!    that disappeared or are being deleted since the batch opened) and keeps the budget at
//!    the starts left (`0` once all have started), so that a node that finishes draining does
//!    not open room for more than the batch;
//! 3. when the batch's replacements are Ready and nothing is being deleted, the batch soaks
//!    (`batchSoak`) with the gates held, then the next one opens;
//! 4. with every NodeClaim on the image, the pool soaks (`poolSoak`), then rota's budget is
//!    removed (the user's budgets as they are then are written back).
//!
//! A pause, a closed window, an operator's pause or a failed gate set the budget to `0`:
//! Karpenter finishes the nodes it has started and starts no other. A failed gate with
//! `onGateFailure: rollback` pins the origin AMI back; Karpenter then drifts the new nodes
//! back, paced the same way (without gates: they are what asked for it).
//!
//! Restarts: the checkpoint (the batch, its starting count, the user's budgets) is written
//! before the writes; both writes are absolute, so a restart recomputes the same budget from
//! the NodeClaims it observes and opens no batch twice.

use chrono::{DateTime, Utc};

use super::action::{Action, Planned};
use super::checkpoint::{Checkpoint, Stage};
use super::checkpoint::{DriftBatch, DriftMark};
use super::counts::Counts;
use super::observed::{GateVerdict, Observed};
use super::outcome::Plan;
use super::phase::Phase;
use super::stop::{self, Reason};
use crate::cloud::karpenter::{Budget, DriftPoolState};
use crate::fleet::resolved::{DesiredPool, Mode, OnGateFailure};

/// What one pass decided, before it becomes a [`Plan`].
struct Decision {
    checkpoint: Option<Checkpoint>,
    actions: Vec<Planned>,
    phase: Phase,
    reason: Reason,
    message: String,
    until: Option<DateTime<Utc>>,
}

impl Decision {
    fn stay(cp: Option<&Checkpoint>, phase: Phase, reason: Reason, message: String) -> Decision {
        Decision {
            checkpoint: cp.cloned(),
            actions: Vec::new(),
            phase,
            reason,
            message,
            until: None,
        }
    }
}

/// The inputs every step reads.
struct Ctx<'a> {
    desired: &'a DesiredPool,
    obs: &'a Observed,
    state: &'a DriftPoolState,
    now: DateTime<Utc>,
    /// The AMI the pool's version gives Karpenter.
    target: String,
}

/// How the NodeClaims stand against one image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tally {
    /// NodeClaims on the image.
    on: u32,
    /// NodeClaims on another image and not being deleted: still to be drifted.
    off: u32,
    /// NodeClaims being deleted (Karpenter is draining them).
    deleting: u32,
    /// NodeClaims on the image that are not Ready yet (replacements booting).
    booting: u32,
}

impl Ctx<'_> {
    fn tally(&self, image: &str) -> Tally {
        let mut t = Tally {
            on: 0,
            off: 0,
            deleting: 0,
            booting: 0,
        };
        for c in &self.state.claims {
            let here = c.image.as_deref() == Some(image);
            match (c.deleting, here) {
                (true, _) => t.deleting += 1,
                (false, true) => {
                    t.on += 1;
                    if !c.ready {
                        t.booting += 1;
                    }
                }
                (false, false) => t.off += 1,
            }
        }
        t
    }

    /// `k/n nodes on <image>`, counted from the NodeClaims.
    fn progress(&self, image: &str) -> String {
        let t = self.tally(image);
        format!(
            "{}/{} nodes on {image}",
            t.on,
            self.state.claims.iter().filter(|c| !c.deleting).count()
        )
    }

    /// The user's budgets: the NodePool's, without rota's own (the last one, of rota's
    /// shape) unless the list is exactly what the user had when the drift started.
    fn user_budgets(&self, mark: Option<&DriftMark>) -> Vec<Budget> {
        let now = &self.state.budgets;
        if mark.is_some_and(|m| &m.user_budgets == now) {
            return now.clone();
        }
        match now.split_last() {
            Some((last, rest)) if last.is_drift_only() => rest.to_vec(),
            _ => now.clone(),
        }
    }

    /// The write that makes rota's budget `nodes` (after the user's), if it is not already.
    fn budget(&self, mark: &DriftMark, nodes: u32) -> Option<Planned> {
        let mut wanted = mark.user_budgets.clone();
        wanted.push(Budget::drift(nodes));
        (self.state.budgets != wanted).then(|| Planned {
            action: Action::SetDisruptionBudgets {
                budgets: wanted,
                resource_version: self.state.resource_version.clone(),
            },
            reason: format!(
                "Karpenter may disrupt {nodes} drifted node(s) of NodePool {} at once",
                self.desired.group.managed().map_or("", |m| m.name())
            ),
        })
    }

    /// The write that pins the NodeClass to `image`, if it is not already.
    fn pin(&self, image: &str) -> Option<Planned> {
        (self.state.pinned() != Some(image)).then(|| Planned {
            action: Action::PinNodeClassImage {
                node_class: self.state.node_class.clone(),
                image: image.to_string(),
            },
            reason: format!(
                "EC2NodeClass {} selects {}: pin it to {image}",
                self.state.node_class,
                self.selected()
            ),
        })
    }

    fn selected(&self) -> String {
        let mut terms: Vec<String> = self
            .state
            .ami_ids
            .iter()
            .map(|i| format!("id {i}"))
            .collect();
        terms.extend(self.state.other_terms.iter().cloned());
        if terms.is_empty() {
            "no image".into()
        } else {
            terms.join(", ")
        }
    }

    fn all_on(&self, image: &str) -> bool {
        let t = self.tally(image);
        self.state.pinned() == Some(image) && t.off == 0 && t.deleting == 0 && t.booting == 0
    }
}

/// The plan for a Karpenter pool (strategy `drift`).
pub(super) fn plan_drift(
    desired: &DesiredPool,
    observed: &Observed,
    state: &DriftPoolState,
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
        state,
        now,
        target,
    };
    let ours = checkpoint.filter(|c| {
        c.drift.is_some()
            && (c.target_image == cx.target
                || c.rejected_image.as_deref() == Some(cx.target.as_str()))
    });
    let d = match ours {
        Some(cp) => follow(&cx, &adopt_budgets(&cx, cp)),
        None => start(&cx, checkpoint),
    };
    into_plan(&cx, d, checkpoint)
}

/// Applies an operator's request to a drift's checkpoint (`rota ctl pause | resume | retry |
/// complete-soak`); a batch soak of the drift ends early like a self-managed one.
pub(super) fn steer(
    cp: &mut Checkpoint,
    request: &super::operator::Request,
    now: DateTime<Utc>,
) -> Option<String> {
    cp.drift.as_ref()?;
    let soaking = cp.drift.as_ref().and_then(|m| m.batch.as_ref()?.soak_until);
    let done = super::operator::apply(cp, request, now)?;
    match (request.verb, soaking) {
        (super::operator::Verb::CompleteSoak, Some(until)) if until > now => {
            if let Some(b) = cp.drift.as_mut().and_then(|m| m.batch.as_mut()) {
                b.soak_until = Some(now);
            }
            Some(format!("soak ended early ({})", request.describe()))
        }
        _ => Some(done),
    }
}

/// Someone changed the NodePool's budgets during the drift (not rota's one): theirs are the
/// user's budgets from now on, written back at the end.
fn adopt_budgets(cx: &Ctx<'_>, cp: &Checkpoint) -> Checkpoint {
    let mut next = cp.clone();
    if let Some(m) = next.drift.as_mut()
        && !m.restored
    {
        m.user_budgets = cx.user_budgets(Some(m));
    }
    next
}

/// Why no rotation may start now, if one may not.
fn start_blocked(cx: &Ctx<'_>, previous: Option<&Checkpoint>) -> Option<Decision> {
    let policy = &cx.desired.policy;
    let blocked = |phase, reason, msg: String| Some(Decision::stay(previous, phase, reason, msg));
    if !cx.state.shared_with.is_empty() {
        let msg = format!(
            "EC2NodeClass {} is also referenced by NodePool(s) {}: pinning its image would move them too; give this NodePool a NodeClass of its own",
            cx.state.node_class,
            cx.state.shared_with.join(", ")
        );
        return blocked(Phase::Paused, Reason::Halted, msg);
    }
    if let Some(stop) = &policy.stop {
        let msg = format!(
            "{}: the NodeClass is not pinned; `{}` lifts it",
            stop.describe(),
            stop.clear_command()
        );
        return blocked(Phase::Paused, Reason::Stopped, msg);
    }
    if policy.paused {
        let msg = "rollout.paused: the NodeClass is not pinned".to_string();
        return blocked(Phase::Paused, Reason::PausedByPolicy, msg);
    }
    if let Some(by) = previous.and_then(|p| p.operator_paused.as_ref()) {
        return blocked(Phase::Paused, Reason::PausedByOperator, by.clone());
    }
    match super::window::is_open(&policy.windows, cx.now) {
        Ok(true) => {}
        Ok(false) => {
            let mut d = Decision::stay(
                previous,
                Phase::Waiting,
                Reason::OutsideWindow,
                "outside every window: the NodeClass is pinned when one opens".into(),
            );
            d.until = super::window::next_open(&policy.windows, cx.now);
            return Some(d);
        }
        Err(e) => return blocked(Phase::Paused, Reason::InvalidWindow, e.to_string()),
    }
    if let Some(hold) = &cx.obs.start_hold {
        return blocked(Phase::Waiting, Reason::MaxParallelPools, hold.clone());
    }
    match &cx.obs.gates {
        GateVerdict::Passing => None,
        GateVerdict::Pending(g) => blocked(
            Phase::Waiting,
            Reason::GatePending,
            format!("gate {g} collecting samples before the NodeClass is pinned"),
        ),
        GateVerdict::Failed { gate, reason } => blocked(
            Phase::Paused,
            Reason::GateFailed,
            format!("gate {gate} failed before the NodeClass was pinned: {reason}"),
        ),
    }
}

/// No rotation to this image yet: close rota's budget, then pin the image.
fn start(cx: &Ctx<'_>, previous: Option<&Checkpoint>) -> Decision {
    if cx.all_on(&cx.target) {
        let msg = format!("up to date: {}", cx.progress(&cx.target));
        return Decision::stay(previous, Phase::Succeeded, Reason::UpToDate, msg);
    }
    if let Some(d) = start_blocked(cx, previous) {
        return d;
    }
    let mark = DriftMark {
        user_budgets: cx.user_budgets(previous.and_then(|p| p.drift.as_ref())),
        batch: None,
        restored: false,
    };
    let origin = cx
        .state
        .pinned()
        .map(str::to_string)
        .or_else(|| majority_image(cx.state))
        .unwrap_or_default();
    let cp = Checkpoint {
        origin_image: origin,
        target_image: cx.target.clone(),
        target_version: cx.desired.version.clone(),
        original_desired: cx.state.claims.len() as u32,
        original_max: cx.state.claims.len() as u32,
        pool_size: cx.state.claims.len() as u32,
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
        pace: None,
        owner_update: None,
        fleet_stop: None,
        blue_green: None,
        drift: Some(mark.clone()),
    };
    let actions = cx.budget(&mark, 0).into_iter().chain(cx.pin(&cx.target));
    Decision {
        checkpoint: Some(cp),
        actions: actions.collect(),
        phase: Phase::Rotating,
        reason: Reason::OwnerUpdating,
        message: format!(
            "EC2NodeClass {} pinned to {}, drift held at 0 nodes until the first batch · {}",
            cx.state.node_class,
            cx.target,
            cx.progress(&cx.target)
        ),
        until: None,
    }
}

/// The image most of the pool's NodeClaims run (the origin when the NodeClass selected by
/// something other than one ID).
fn majority_image(state: &DriftPoolState) -> Option<String> {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for img in state.claims.iter().filter_map(|c| c.image.as_deref()) {
        *counts.entry(img).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(i, _)| i.to_string())
}

/// A rotation under way (or finished) for this image.
fn follow(cx: &Ctx<'_>, cp: &Checkpoint) -> Decision {
    let mark = cp.drift.clone().unwrap_or_default();
    match &cp.stage {
        Stage::Done => return done(cx, cp, &mark),
        Stage::PoolSoak { until } => return pool_soak(cx, cp, &mark, *until),
        _ => {}
    }
    // `rollout.paused: true` lifts a halt, as for self-managed pools: unpausing resumes
    // with a fresh batch decision.
    if cp.halted.is_some() && cx.desired.policy.paused {
        let mut next = cp.clone();
        next.halted = None;
        return follow(cx, &next);
    }
    let heading = heading(cp).to_string();
    // The stops that close rota's budget: Karpenter finishes what it started, starts nothing.
    let stop = if let Some(h) = &cp.halted {
        let reason = if h.starts_with("gate ") {
            Reason::GateFailed
        } else {
            Reason::Halted
        };
        Some((Phase::Paused, reason, h.clone(), None))
    } else if cx.desired.policy.stop.is_some() {
        // Before a failed gate: a rollback would move nodes while the fleet is stopped.
        paused(cx, cp)
    } else if !cp.rolling_back
        && let GateVerdict::Failed { gate, reason } = &cx.obs.gates
    {
        return gate_failed(cx, cp, gate, reason);
    } else {
        paused(cx, cp)
    };
    let pin = cx.pin(&heading);
    if let Some((phase, reason, message, until)) = stop {
        let mut d = Decision::stay(Some(cp), phase, reason, message);
        d.actions = cx.budget(&mark, 0).into_iter().chain(pin).collect();
        d.until = until;
        return d;
    }
    let mut d = match &mark.batch {
        None => between(cx, cp, &mark, &heading),
        Some(b) => in_batch(cx, cp, &mark, b, &heading),
    };
    // The pin before any budget that lets Karpenter drift: pinned first, nothing drifts
    // towards an image the NodeClass no longer selects.
    if let Some(p) = pin {
        d.actions.insert(0, p);
    }
    d
}

/// The image the drift moves the pool to now.
fn heading(cp: &Checkpoint) -> &str {
    if cp.rolling_back {
        &cp.origin_image
    } else {
        &cp.target_image
    }
}

fn moving(cp: &Checkpoint) -> Phase {
    if cp.rolling_back {
        Phase::RollingBack
    } else {
        Phase::Rotating
    }
}

/// A fleet stop (`rota stop`), `rollout.paused`, an operator's pause or a closed window, as
/// (phase, reason, message, until): each closes rota's Drifted budget (0 nodes), so
/// Karpenter finishes the nodes it is disrupting and starts no other. A rollback goes on
/// through the last three (it is what the gates asked for), not through a fleet stop, which
/// holds everything.
fn paused(cx: &Ctx<'_>, cp: &Checkpoint) -> Option<(Phase, Reason, String, Option<DateTime<Utc>>)> {
    let policy = &cx.desired.policy;
    if let Some(stop) = &policy.stop {
        let msg = format!(
            "{}: the Drifted budget is 0 · {}; `{}` lifts it",
            stop.describe(),
            cx.progress(heading(cp)),
            stop.clear_command()
        );
        return Some((Phase::Paused, Reason::Stopped, msg, None));
    }
    if cp.rolling_back {
        return None;
    }
    if let Some(by) = &cp.operator_paused {
        return Some((Phase::Paused, Reason::PausedByOperator, by.clone(), None));
    }
    if policy.paused {
        let msg = format!(
            "rollout.paused: the Drifted budget is 0 · {}",
            cx.progress(heading(cp))
        );
        return Some((Phase::Paused, Reason::PausedByPolicy, msg, None));
    }
    match super::window::is_open(&policy.windows, cx.now) {
        Ok(true) => None,
        Ok(false) => Some((
            Phase::Waiting,
            Reason::OutsideWindow,
            format!(
                "outside every window: the Drifted budget is 0 · {}",
                cx.progress(heading(cp))
            ),
            super::window::next_open(&policy.windows, cx.now),
        )),
        Err(e) => Some((Phase::Paused, Reason::InvalidWindow, e.to_string(), None)),
    }
}

/// No batch open: open the next one, or finish when every NodeClaim is on the image.
fn between(cx: &Ctx<'_>, cp: &Checkpoint, mark: &DriftMark, heading: &str) -> Decision {
    let t = cx.tally(heading);
    if t.off == 0 {
        if t.deleting > 0 || t.booting > 0 {
            let msg = format!(
                "Karpenter finishing {} replacement(s) · {}",
                t.deleting + t.booting,
                cx.progress(heading)
            );
            let mut d = Decision::stay(Some(cp), moving(cp), Reason::OwnerUpdating, msg);
            d.actions = cx.budget(mark, 0).into_iter().collect();
            return d;
        }
        return finished(cx, cp, mark);
    }
    if !cp.rolling_back
        && let GateVerdict::Pending(g) = &cx.obs.gates
    {
        let msg = format!("gate {g} collecting samples before the next batch");
        let mut d = Decision::stay(Some(cp), Phase::Waiting, Reason::GatePending, msg);
        d.actions = cx.budget(mark, 0).into_iter().collect();
        return d;
    }
    let size = cx.desired.policy.batch.nodes(cp.pool_size).min(t.off);
    let batch = DriftBatch {
        number: cp.batches_started + 1,
        size,
        off_at_open: t.off,
        opened_at: cx.now,
        soak_until: None,
    };
    let mut next = cp.clone();
    next.batches_started = batch.number;
    let mut m = mark.clone();
    m.batch = Some(batch.clone());
    next.drift = Some(m.clone());
    in_batch(cx, &next, &m, &batch, heading)
}

/// A batch open: keep the budget at the starts left, then wait for the replacements, soak.
fn in_batch(
    cx: &Ctx<'_>,
    cp: &Checkpoint,
    mark: &DriftMark,
    b: &DriftBatch,
    heading: &str,
) -> Decision {
    let t = cx.tally(heading);
    // The budget is the starts left, not `deleting + left`: Karpenter's `nodes` is how
    // many may be disrupting at once, so a node that finishes draining opens room. Worked
    // example: a batch of 2 opened with 6 NodeClaims off the image; Karpenter deleted one
    // (off 5, deleting 1): 1 started, 1 left, budget 1, which the one deleting fills until
    // it is gone; then Karpenter may start one more. With `deleting + left` = 2 it could
    // start one now and, once the first is gone, a third before rota's next pass. Once off
    // is 4, the budget is 0. A start that also finishes between two passes can still add
    // one (a replacement boots and drains in minutes; rota replans on every node change).
    let started = b.off_at_open.saturating_sub(t.off).min(b.size);
    let left = b.size - started;
    let n = b.number;
    if let Some(until) = b.soak_until {
        if cx.now >= until {
            let mut next = cp.clone();
            let mut m = mark.clone();
            m.batch = None;
            next.drift = Some(m.clone());
            return between(cx, &next, &m, heading);
        }
        let msg = format!("batch {n} soaking · {}", cx.progress(heading));
        let mut d = Decision::stay(Some(cp), Phase::Soaking, Reason::BatchSoak, msg);
        d.actions = cx.budget(mark, 0).into_iter().collect();
        d.until = Some(until);
        return d;
    }
    if left == 0 && t.deleting == 0 && t.booting == 0 {
        let soak = cx.desired.policy.batch_soak.0;
        let mut next = cp.clone();
        let mut m = mark.clone();
        if soak.is_zero() || cp.rolling_back {
            m.batch = None;
            next.drift = Some(m.clone());
            return between(cx, &next, &m, heading);
        }
        let until = cx.now + chrono::Duration::from_std(soak).unwrap_or(chrono::Duration::MAX);
        m.batch = Some(DriftBatch {
            soak_until: Some(until),
            ..b.clone()
        });
        next.drift = Some(m.clone());
        return in_batch(cx, &next, &m, m.batch.as_ref().expect("set"), heading);
    }
    let budget = left;
    let msg = format!(
        "batch {n}: Karpenter replacing {started}/{} drifted node(s), {} draining, {} booting · {}",
        b.size,
        t.deleting,
        t.booting,
        cx.progress(heading)
    );
    let mut d = Decision::stay(Some(cp), moving(cp), Reason::OwnerUpdating, msg);
    d.actions = cx.budget(mark, budget).into_iter().collect();
    d
}

/// Every NodeClaim on the image: the pool soaks (a rollback ends).
fn finished(cx: &Ctx<'_>, cp: &Checkpoint, mark: &DriftMark) -> Decision {
    let mut next = cp.clone();
    let soak = cx.desired.policy.pool_soak.0;
    next.stage = if cp.rolling_back || soak.is_zero() {
        Stage::Done
    } else {
        Stage::PoolSoak {
            until: cx.now + chrono::Duration::from_std(soak).unwrap_or(chrono::Duration::MAX),
        }
    };
    match next.stage {
        Stage::PoolSoak { until } => pool_soak(cx, &next, mark, until),
        _ => done(cx, &next, mark),
    }
}

/// After the last batch: gates must hold until `until`, the budget stays closed.
fn pool_soak(cx: &Ctx<'_>, cp: &Checkpoint, mark: &DriftMark, until: DateTime<Utc>) -> Decision {
    if let GateVerdict::Failed { gate, reason } = &cx.obs.gates {
        return gate_failed(cx, cp, gate, reason);
    }
    if cx.now >= until {
        let mut next = cp.clone();
        next.stage = Stage::Done;
        return done(cx, &next, mark);
    }
    let msg = format!(
        "pool soak until {} · {}",
        until.to_rfc3339(),
        cx.progress(&cp.target_image)
    );
    let mut d = Decision::stay(Some(cp), Phase::Soaking, Reason::PoolSoak, msg);
    d.actions = cx.budget(mark, 0).into_iter().collect();
    d.until = Some(until);
    d
}

/// The drift ended: rota's budget is removed (the user's written back) until the NodePool
/// is seen without it; then rota no longer touches the budgets.
fn done(cx: &Ctx<'_>, cp: &Checkpoint, mark: &DriftMark) -> Decision {
    let mut next = cp.clone();
    let user = cx.user_budgets(Some(mark));
    let restore = (!mark.restored && cx.state.budgets != user).then(|| Planned {
        action: Action::SetDisruptionBudgets {
            budgets: user.clone(),
            resource_version: cx.state.resource_version.clone(),
        },
        reason: "the drift ended: the NodePool's own disruption budgets, without rota's".into(),
    });
    if restore.is_none() && !mark.restored {
        let mut m = mark.clone();
        m.restored = true;
        next.drift = Some(m);
    }
    let (phase, reason, msg) = if cp.rolling_back {
        (
            Phase::Failed,
            Reason::RolledBack,
            format!(
                "rolled back from {} to {}: {}",
                cp.target_image,
                cp.origin_image,
                cp.rollback_reason.as_deref().unwrap_or("a gate failed")
            ),
        )
    } else {
        (
            Phase::Succeeded,
            Reason::Done,
            format!("done: {}", cx.progress(&cp.target_image)),
        )
    };
    let mut d = Decision::stay(Some(&next), phase, reason, msg);
    d.actions = restore.into_iter().collect();
    d
}

/// A gate failed during a batch, a batch soak or the pool soak: `pause` halts with the budget
/// at 0; `rollback` pins the origin AMI back and drifts the pool back to it.
fn gate_failed(cx: &Ctx<'_>, cp: &Checkpoint, gate: &str, reason: &str) -> Decision {
    let why = format!("gate {gate} failed: {reason}");
    let mut next = cp.clone();
    if let Some(m) = next.drift.as_mut() {
        m.batch = None;
    }
    // Out of the pool soak too: a halt is lifted into a fresh batch decision, not a soak.
    next.stage = Stage::Between;
    if cx.desired.policy.on_gate_failure == OnGateFailure::Pause {
        next.halted = Some(format!(
            "{why} (Drifted budget 0: Karpenter finishes the nodes it started, starts no other)"
        ));
        return follow(cx, &next);
    }
    next.rolling_back = true;
    next.rejected_image = Some(cp.target_image.clone());
    next.rollback_reason = Some(why);
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
        actions: d.actions,
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
mod tests;
