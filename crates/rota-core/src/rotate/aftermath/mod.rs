//! What follows from one pass over a pool, as data: [`of`] takes the plan, the status the
//! pass composed, the status before it and what the pass carried out, and returns an
//! [`Aftermath`]: the Events to post, the chat notices, the metric updates, the patch that
//! clears an operator's request, what becomes of the group's kept describe, and when to look
//! at the pool again. Nothing here does I/O; `controller::aftermath` carries the value out.
//!
//! Why one function: what rota tells people (Events, notices, metrics) follows from the
//! same few facts in every pass. Deciding it in one place keeps the controller's tail a
//! short sequence (act, then carry out the aftermath) and lets the model world's golden
//! logs (`tests/model/rotation_sequences.rs`) record every Event and notice, so that a
//! change in what rota says is a reviewed diff.
//!
//! Where a new one goes: a new Event reason, notice or metric update is one more case here
//! (or in the part it belongs to: [`step_events`] for what a batch step did, [`events`] for
//! stops and operator requests, [`notice`], [`transitions`] for what finished), and one
//! more arm in the executor if it is a new kind of effect.

pub mod events;
pub mod failure;
pub mod metric_update;
pub mod notice;
pub mod own_writes;
pub mod requeue;
pub mod step_events;
pub mod transitions;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::fleet::resolved::{EffectivePolicy, ResolvedGate};
use crate::rotate::action::Planned;
use crate::rotate::checkpoint::Stage;
use crate::rotate::operator::{OperatorError, Request};
use crate::rotate::outcome::Plan;
use crate::rotate::phase::Phase;
use crate::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
use crate::rotate::status::Composed;
pub use events::{ClearRequest, Event};
pub use failure::ActionFailed;
pub use metric_update::MetricUpdate;
pub use notice::{Notice, NoticeKind};

/// What the pass carried out (`controller::apply`'s answer).
#[derive(Clone, Debug, Default)]
pub struct Acted {
    /// How many of the plan's actions ran; `None` when the status write or an action failed
    /// (the failure path decides the requeue then).
    pub ran: Option<usize>,
    /// Nothing to do and nothing new to say: nothing was written.
    pub unchanged: bool,
    /// The status was written.
    pub written: bool,
    /// The actions that ran, for the step's Event.
    pub done: step_events::Digest,
    /// The action that failed, if one did (the rest did not run).
    pub failed: Option<ActionFailed>,
}

impl Acted {
    /// Whether the status now records this reconcile (written, or already saying the same):
    /// only then is an operator's request consumed. A crash before this leaves the
    /// annotation, and the checkpoint's `operator_request` keeps it from being applied twice.
    pub fn recorded(&self) -> bool {
        self.written || (self.unchanged && self.ran.is_some())
    }
}

/// The facts of one pass that its aftermath follows from.
pub struct Pass<'a> {
    /// The pool's spec: its cluster, name and version (the notices name them).
    pub spec: &'a NodePoolRotationSpec,
    /// The status before the pass (the resource's, as read).
    pub previous: Option<&'a NodePoolRotationStatus>,
    /// The status the pass composed (and wrote, if `acted.written`).
    pub composed: &'a Composed,
    pub plan: &'a Plan,
    /// The desired pool's policy and gates: the requeue follows them.
    pub policy: &'a EffectivePolicy,
    pub gates: &'a [ResolvedGate],
    /// The operator's request the pass planned with, what it steered, and whether the
    /// resource carries the request's free-text note too (the clearing patch removes both).
    pub request: Option<&'a Result<Request, OperatorError>>,
    pub steered: Option<&'a str>,
    pub request_note: bool,
    /// The gate whose failure the observation carried, if any.
    pub failed_gate: Option<&'a str>,
    pub acted: &'a Acted,
    /// The action whose failure the pool's last error is (`set image ami-1`), if any.
    pub failed_action: Option<&'a str>,
    /// The reason of an error of this pass that retrying will not fix, when the pool's error
    /// tracker alerts on it now (once per reason: `stuck::ErrorTracker::record`).
    pub alert: Option<&'a str>,
    pub now: DateTime<Utc>,
}

/// What the controller keeps of a pool between passes for its aftermath (lost on a restart:
/// only an Event of the step under way and a batch's duration metric go with it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    /// The actions of the batch step under way, posted as one Event when it ends.
    pub events: Option<step_events::Gathered>,
    /// The batch under way and when its surge began (`rota_batch_duration_seconds`,
    /// boot-to-Ready).
    pub batch_started: Option<(u32, DateTime<Utc>)>,
}

/// What becomes of the group's kept describe (`controller::Described`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Describe {
    /// Nothing rota did changed the group: keep it as it is.
    Keep,
    /// A failed call may have taken effect, or not: describe again next pass.
    Forget,
    /// rota changed the group and every action succeeded: bring the kept describe up to
    /// its own writes ([`own_writes::applied`]; dropped where the cloud chooses).
    OwnWrites,
}

/// What follows from a pass (see the module's header).
#[derive(Clone, Debug, PartialEq)]
pub struct Aftermath {
    /// In the order they are posted: the failed action's Warning, the step's Events, the
    /// operator request's, the stop's, the Stuck condition's, the alert.
    pub events: Vec<Event>,
    pub notices: Vec<Notice>,
    pub metrics: Vec<MetricUpdate>,
    /// Remove the operator's request annotation (only while it still holds this request).
    pub clear_request: Option<ClearRequest>,
    pub describe: Describe,
    /// When to look at the pool again; `None` when the pass failed (the failure's class
    /// decides then).
    pub requeue: Option<Duration>,
    /// The pool's last error has healed with this pass ([`error_healed`]).
    pub error_healed: bool,
    /// What to keep for the next pass.
    pub memory: Memory,
}

/// The aftermath of one pass (pure): see the module's header.
pub fn of(pass: &Pass<'_>, memory: Memory) -> Aftermath {
    let Memory {
        events: mut gathered,
        batch_started,
    } = memory;
    let step = step_events::Step::of(pass.plan);
    let mut events: Vec<Event> = pass.acted.failed.iter().map(ActionFailed::event).collect();
    events.extend(
        step_events::record(&mut gathered, step, &pass.acted.done, pass.now)
            .into_iter()
            .map(|(reason, action, note)| Event::new(false, reason, &action, note)),
    );
    let clear_request = match pass.request {
        Some(request) if pass.acted.recorded() => {
            let (value, event) = events::request_event(request, pass.steered);
            events.push(event);
            Some(ClearRequest {
                value,
                with_note: pass.request_note,
            })
        }
        _ => None,
    };
    let mut metrics = Vec::new();
    let mut notices = Vec::new();
    let mut batch_started = batch_started;
    let status = &pass.composed.status;
    if pass.acted.written {
        metrics.push(MetricUpdate::Status);
        batch_started =
            transitions::count(pass.previous, status, batch_started, pass.now, &mut metrics);
        metrics.extend(gate_metric(pass.previous, status, pass.failed_gate));
        events.extend(events::stop_event(pass.previous, status));
        if let Some(t) = &pass.composed.transition {
            let (warning, reason, note) = t.event();
            events.push(Event::new(warning, reason, "Rotate", note));
        }
        notices = notice::notices_for(pass.spec, pass.previous, status);
    } else if !pass.acted.unchanged {
        // Folded into the next write (`must_write`): the pool's gauges follow anyway.
        metrics.push(MetricUpdate::Status);
    }
    events.extend(pass.alert.map(failure::alert));
    let describe = match pass.acted.ran {
        None => Describe::Forget,
        Some(_) if own_writes::calls_cloud(pass.plan) => Describe::OwnWrites,
        Some(_) => Describe::Keep,
    };
    let requeue = pass
        .acted
        .ran
        .map(|_| requeue::after_plan(pass.plan, pass.policy, pass.gates, pass.now));
    let error_healed = pass.acted.ran.is_some_and(|ran| {
        let ran = &pass.plan.actions[..ran.min(pass.plan.actions.len())];
        error_healed(stopping(pass.plan), ran, pass.failed_action)
    });
    Aftermath {
        events,
        notices,
        metrics,
        clear_request,
        describe,
        requeue,
        error_healed,
        memory: Memory {
            events: gathered,
            batch_started,
        },
    }
}

/// A gate that stopped the rotation holds `rota_pool_gate_failed` until the pool moves.
fn gate_metric(
    prev: Option<&NodePoolRotationStatus>,
    status: &NodePoolRotationStatus,
    failed_gate: Option<&str>,
) -> Option<MetricUpdate> {
    let stopped = |p: Phase| matches!(p, Phase::Failed | Phase::RollingBack | Phase::Paused);
    let was_stopped = prev.is_some_and(|p| stopped(p.phase));
    match failed_gate {
        Some(g) if stopped(status.phase) && !was_stopped => {
            Some(MetricUpdate::GateFailed(g.to_string()))
        }
        _ if !stopped(status.phase) => Some(MetricUpdate::GateCleared),
        _ => None,
    }
}

/// Whether the plan stops or undoes the rotation: its undoing does not clear the last error
/// (a paused pool keeps naming the error that stopped it: quota, throttling).
fn stopping(plan: &Plan) -> bool {
    matches!(plan.status.phase, Phase::Paused | Phase::Failed)
        || plan
            .checkpoint
            .as_ref()
            .is_some_and(|c| c.halted.is_some() || matches!(c.stage, Stage::Abandoning { .. }))
}

/// Whether a pass that observed, wrote its status and ran its first actions (`ran`) heals
/// the pool's last error. An error of no action (observing, writing the status) has healed
/// with this pass, which did both (a pool waiting for a slot must not name a describe that
/// was throttled an hour ago). An action's error heals with any progress of a moving pool;
/// a stopping pool (a halt, an undo) keeps naming it (quota, throttling) unless the very
/// action that failed has now succeeded (the halt's own `set image` back to the origin,
/// which a 504 interrupted).
pub fn error_healed(stopping: bool, ran: &[Planned], failed_action: Option<&str>) -> bool {
    match failed_action {
        None => true,
        Some(f) => !ran.is_empty() && (!stopping || ran.iter().any(|p| p.action.to_string() == f)),
    }
}

#[cfg(test)]
mod tests;
