//! The rotation planner: a pure function of (desired, observed, checkpoint, now).
//!
//! `plan` never reads a clock, never calls an API and never mutates its inputs. It returns the
//! actions to take now, each with the reason it was chosen, and the next checkpoint. The caller
//! (`controller::apply`) must persist `Plan::checkpoint` *before* executing `Plan::actions`, in
//! order, stopping at the first failure: the checkpoint then already names everything the
//! actions may touch, and a crash anywhere is recovered by planning again from it.
//!
//! A rotation goes through three stages:
//! 1. pre-checks and cleanup of leftovers: cordons rota owns that no batch claims any more are
//!    undone; the instances of a cancelled batch are drained and terminated;
//! 2. batches, each atomic: set the group's image → surge n → wait Ready (`nodeReadyTimeout`)
//!    → gates → cordon n old → drain → terminate with decrement → soak with gates;
//! 3. pool soak and cleanup: restore the group's maximum size, remove the autoscaler
//!    annotations rota added, restore the template for a partial rollout.
//!
//! `strategy: replace` runs a batch's stages in another order (gate, cordon, drain, remove
//! without a decrement, wait for the group's replacements, soak): see [`replace`].
//!
//! This file holds the pass (`Planner::run`), the stops that hold it and the stage machine
//! (`step`); each rotation phase is one `impl Planner` block of its own under `plan/`:
//! `starting` (the desired image against the checkpoint, holds before a first surge),
//! `surging` (choosing and surging a batch), `waiting_ready`, `soaking` (gates and soaks),
//! `draining` (cordon and drain), `finishing` (terminate, pool cleanup, done), `rollback` (a
//! batch undone), `upkeep` (what every pass looks after: cordons, annotations, the
//! template, describe lag) and `replace` (`strategy: replace`).
//!
//! One call may pass several stages when their conditions already hold (a batch whose new
//! nodes are Ready and whose gates pass goes from WaitingReady to Cordoning at once), and stops
//! at the first stage that has something to do or to wait for.

use chrono::{DateTime, Duration, Utc};

use super::action::{Action, Planned};
use super::checkpoint::{Batch, Checkpoint, ChosenNode, Stage};
use super::counts::Counts;
use super::lookup::Lookup;
use super::observed::{Observed, ObservedNode};
use super::operator::Request;
use super::outcome::Plan;
use super::phase::Phase;
use super::stop::{self, Reason};
use super::window;
use crate::fleet::duration::GoDuration;
use crate::fleet::resolved::{DesiredPool, Mode};

mod draining;
mod finishing;
mod held_nodes;
mod replace;
mod rollback;
mod soaking;
mod starting;
mod surging;
mod upkeep;
mod waiting_ready;

/// Whether a pod a drain waits for holds it (a budget, an annotation, a policy), rather than
/// being on its way (evicting, terminating, paced by `drain.evictionInterval`).
fn holds_the_drain(waiting: &str) -> bool {
    !(waiting.ends_with("(evicting)")
        || waiting.ends_with("(terminating)")
        || waiting.ends_with("(drain.evictionInterval)"))
}

/// The batch rotation of a group whose template and capacity rota sets: a self-managed
/// group, or the two pools of a blue-green move seen as one (`rotate::bluegreen`).
pub(super) fn plan_group(
    desired: &DesiredPool,
    observed: &Observed,
    checkpoint: Option<&Checkpoint>,
    request: Option<&Request>,
    steered: &mut Option<String>,
    now: DateTime<Utc>,
) -> Plan {
    let counts = Counts::of(desired, observed);
    let mut p = Planner {
        desired,
        obs: &Lookup::new(observed),
        now,
        actions: Vec::new(),
        request,
        steered: None,
        blocked_by: Vec::new(),
        until: None,
    };
    let mut out = p.run(checkpoint.cloned());
    *steered = p.steered.take();
    // With lagging describes, the next capacity computed must come from a describe that
    // already shows this plan's capacity changes (see `Planner::lag_wait`).
    if !observed.describe_lag.is_zero()
        && p.actions.iter().any(|a| {
            matches!(
                a.action,
                Action::SetCapacity { .. }
                    | Action::Terminate { .. }
                    | Action::WithdrawSurge { .. }
            )
        })
        && let Some(cp) = out.checkpoint.as_mut()
    {
        cp.capacity_changed_at = Some(now);
    }
    let left = out.checkpoint.as_ref().map(|c| p.remaining(Some(c)));
    // Every stop says who must do what (`rotate::stop`): for a halt, what halted it.
    let halted = out.checkpoint.as_ref().and_then(|c| c.halted.as_deref());
    let note_reason = match (out.reason, out.checkpoint.as_ref()) {
        (Reason::Halted, Some(cp)) => stop::halt_cause(cp),
        (r, _) => r,
    };
    // A pool that succeeded has nothing to stop it: a rollback done onto the version the
    // repo pins (a revert) is the end of the story, not a person's step.
    let note = (out.phase != Phase::Succeeded)
        .then(|| {
            stop::explain(
                note_reason,
                &out.message,
                &stop::Context {
                    cluster: &desired.cluster,
                    pool: &desired.name,
                    blocked_by: std::mem::take(&mut p.blocked_by),
                    until: p.until,
                    halted: halted.filter(|_| out.phase == Phase::Paused),
                    clear: desired.policy.stop.as_ref().map(|s| s.clear_command()),
                },
            )
        })
        .flatten();
    let mut plan = Plan {
        actions: p.actions,
        dry_run: Vec::new(),
        checkpoint: out.checkpoint,
        status: counts.status(out.phase, out.reason, out.message, note),
    };
    if let (Some(cp), Some(left)) = (plan.checkpoint.as_ref(), left)
        && matches!(
            plan.status.phase,
            Phase::Rotating | Phase::Soaking | Phase::RollingBack
        )
    {
        plan.status.remaining = super::eta::remaining(&desired.policy, cp, left, now);
    }
    if desired.mode == Mode::ReadOnly {
        read_only(&mut plan, checkpoint);
    }
    plan
}

/// `readOnly`: plans and reports, changes nothing: the checkpoint does not move either,
/// since none of the actions it would record happened.
fn read_only(plan: &mut Plan, checkpoint: Option<&Checkpoint>) {
    plan.dry_run = std::mem::take(&mut plan.actions);
    plan.checkpoint = checkpoint.cloned();
    plan.status.message = format!("readOnly: {}", plan.status.message);
    if !plan.dry_run.is_empty() {
        let would: Vec<String> = plan.dry_run.iter().map(|a| a.action.to_string()).collect();
        plan.status
            .message
            .push_str(&format!("; would {}", would.join(", ")));
    }
}

/// What one run of the stage machine ends with.
struct Outcome {
    checkpoint: Option<Checkpoint>,
    phase: Phase,
    reason: Reason,
    message: String,
}

/// The result of one stage handler.
enum Step {
    /// Move to this stage and evaluate it in the same call.
    Next(Stage),
    /// Stop here (actions, if any, were pushed): the stage to record and the status.
    Stop {
        stage: Stage,
        phase: Phase,
        reason: Reason,
        message: String,
    },
}

fn stop(stage: Stage, phase: Phase, reason: Reason, message: impl Into<String>) -> Step {
    Step::Stop {
        stage,
        phase,
        reason,
        message: message.into(),
    }
}

struct Planner<'a> {
    desired: &'a DesiredPool,
    /// The observation, each lookup of a node's instance (and back) by hash rather than by
    /// a scan per node (`rotate::lookup`).
    obs: &'a Lookup<'a>,
    now: DateTime<Utc>,
    actions: Vec<Planned>,
    /// An operator's request (`rota ctl`), and what applying it did.
    request: Option<&'a Request>,
    steered: Option<String>,
    /// What holds the pool where it stops (pods, budgets, windows, gates, pools), for its
    /// stop note (`rotate::stop`).
    blocked_by: Vec<String>,
    /// When the stop ends by itself, if it does.
    until: Option<DateTime<Utc>>,
}

fn dur(d: GoDuration) -> Duration {
    Duration::from_std(d.0).unwrap_or(Duration::MAX)
}

impl<'a> Planner<'a> {
    fn push(&mut self, action: Action, reason: impl Into<String>) {
        self.actions.push(Planned {
            action,
            reason: reason.into(),
        });
    }

    fn image_of(&self, n: &ObservedNode) -> Option<String> {
        self.obs.image_of(n)
    }

    fn run(&mut self, cp: Option<Checkpoint>) -> Outcome {
        let mut cp = match self.reconcile_desired(cp) {
            Ok(cp) => cp,
            Err(outcome) => return *outcome,
        };

        // Before a stop can return: a halted or paused pool may wait for a person for days.
        self.release_annotations(&mut cp);
        if let Some(stopped) = self.stopped(&mut cp) {
            return self.after_a_stop(stopped);
        }
        self.keep_annotations(&mut cp);
        let outcome = self.stage_machine(cp);
        self.after_a_stop(outcome)
    }

    /// Whatever stopped the rotation (a halt, a pause by policy or by an operator, a batch
    /// held by a do-not-disrupt pod, no node left to replace), the group's maximum goes back
    /// as the user left it.
    fn after_a_stop(&mut self, outcome: Outcome) -> Outcome {
        if outcome.phase == Phase::Paused
            && let Some(cp) = &outcome.checkpoint
        {
            self.max_as_the_user_left_it(cp, outcome.reason);
        }
        outcome
    }

    /// What holds the rotation where it is before any stage runs: an operator's request (a
    /// pause from `rota ctl`), `rollout.paused`, a halt; cordons left over from a crash are
    /// undone first. `None`: the stage machine runs.
    fn stopped(&mut self, cp: &mut Checkpoint) -> Option<Outcome> {
        // An operator's request steers the rotation under way (rotate::operator); a pause
        // holds it here like `rollout.paused`, without forgetting a halt.
        if let Some(r) = self.request {
            self.steered = super::operator::apply(cp, r, self.now);
        }
        if let Some(held) = self.fleet_stop(cp) {
            return Some(held);
        }
        if let Some(by) = cp.operator_paused.clone() {
            let at = cp.stage.name();
            return Some(Outcome {
                checkpoint: Some(cp.clone()),
                phase: Phase::Paused,
                reason: Reason::PausedByOperator,
                message: format!("{by} at stage {at}; `rota ctl resume` continues"),
            });
        }
        if self.desired.policy.paused {
            // A paused pool forgets a halt: unpausing is how a human resumes it.
            if cp.halted.take().is_some() {
                cp.restart_clocks(self.now);
            }
            let at = cp.stage.name();
            return Some(Outcome {
                checkpoint: Some(cp.clone()),
                phase: Phase::Paused,
                reason: Reason::PausedByPolicy,
                message: format!("paused by policy (rollout.paused: true) at stage {at}"),
            });
        }
        // Stage 1: cordons rota set that the current stage does not claim are leftovers of a
        // crash or a cancelled batch; undoing them first means a node is never left cordoned
        // with nothing owning it (invariant 4).
        self.clean_orphaned_cordons(cp);

        if let Some(why) = cp.halted.clone() {
            // A pipelined batch cancelled by the halt is still undone: it only takes back
            // instances this rotation brought up, draining them first.
            if matches!(cp.next.as_deref(), Some(Stage::Abandoning { .. })) {
                self.advance_next(cp);
            }
            self.template_on_origin(cp);
            return Some(Outcome {
                phase: Phase::Paused,
                reason: Reason::Halted,
                // The one command that moves it on (the git commits still work).
                message: format!(
                    "{why}; once the cause is fixed, `rota ctl retry --cluster {} --pool {}` resumes it (or set rollout.paused to true and back to false, or change the version)",
                    self.desired.cluster, self.desired.name
                ),
                checkpoint: Some(cp.clone()),
            });
        }
        None
    }

    /// A fleet stop (`rota stop`, carried in the policy by the agent) holds the rotation
    /// where it is, before any stage runs: no new surge, no new cordon or eviction, while
    /// what the cloud already started (a boot) completes by itself. The checkpoint records
    /// the stop, so that when it is cleared the stage's clocks start again (a boot that
    /// waited out a two-hour stop is not "never Ready").
    fn fleet_stop(&mut self, cp: &mut Checkpoint) -> Option<Outcome> {
        match &self.desired.policy.stop {
            Some(stop) => {
                cp.fleet_stop = Some(stop.id.clone());
                self.protect_held_nodes(cp);
                let at = cp.stage.name();
                Some(Outcome {
                    checkpoint: Some(cp.clone()),
                    phase: Phase::Paused,
                    reason: Reason::Stopped,
                    message: format!(
                        "{} (held at stage {at}); `{}` lifts it",
                        stop.describe(),
                        stop.clear_command()
                    ),
                })
            }
            None => {
                if cp.fleet_stop.take().is_some() {
                    cp.restart_clocks(self.now);
                }
                None
            }
        }
    }

    /// A stopped rotation (halted, paused by policy or by an operator) gives the group's
    /// maximum back as the user left it, as soon as it can: what it was when the rotation
    /// started, or the desired capacity where that is higher (the instances still up, a
    /// surge not yet undone among them: lowering the maximum below them would let the cloud
    /// remove instances of its choosing). So an autoscaler cannot grow the pool past the
    /// user's maximum while the rotation waits for a person; a resumed rotation raises it
    /// again for its next surge. Only ever lowers.
    fn max_as_the_user_left_it(&mut self, cp: &Checkpoint, why: Reason) {
        let g = &self.obs.group;
        let max = cp.original_max.max(g.desired);
        if g.max > max {
            let from = g.max;
            self.push(
                Action::SetMax { max },
                format!(
                    "rotation stopped ({why}): give the group's maximum size back, from {from} to {max} (the user's {}, or the instances still up)",
                    cp.original_max
                ),
            );
        }
    }

    /// Stages 2 and 3: run the stage machine from the checkpoint's stage until a stage stops.
    fn stage_machine(&mut self, mut cp: Checkpoint) -> Outcome {
        // The stage machine. Each stage is evaluated at most a few times per
        // call; the bound only guards against a bug turning into a busy loop.
        for _ in 0..16 {
            if cp.stage == Stage::Between
                && let Some(next) = cp.next.take()
            {
                // The soak passed (or was cut short): the pipelined batch, Ready and gated
                // by now or still on its way, becomes the current one. Cancelled, it is
                // undone first.
                cp.stage = *next;
            }
            let stage = std::mem::replace(&mut cp.stage, Stage::Between);
            match self.step(&mut cp, stage) {
                Step::Next(next) => cp.stage = next,
                Step::Stop {
                    stage,
                    phase,
                    reason,
                    message,
                } => {
                    cp.stage = stage;
                    if cp.halted.is_some() {
                        // The batch stopped on this plan: the group must not go on booting
                        // the image it stopped on (invariant 8).
                        self.template_on_origin(&cp);
                    }
                    let phase = match phase {
                        // A rollback says so until it is done, its soaks included.
                        Phase::Rotating | Phase::Soaking if cp.rolling_back => Phase::RollingBack,
                        p => p,
                    };
                    return Outcome {
                        checkpoint: Some(cp),
                        phase,
                        reason,
                        message,
                    };
                }
            }
        }
        // A bug, not a state of the world: stop acting and say so rather than crash the
        // controller in a loop. The sequence tests would see this phase and fail.
        let at = cp.stage.name();
        self.actions.clear();
        Outcome {
            checkpoint: Some(cp),
            phase: Phase::Failed,
            reason: Reason::PlannerLoop,
            message: format!("internal error: the planner did not settle at stage {at}"),
        }
    }

    fn step(&mut self, cp: &mut Checkpoint, stage: Stage) -> Step {
        let stage = match self.replace_step(cp, stage) {
            Ok(step) => return step,
            Err(stage) => stage,
        };
        match stage {
            Stage::Between => self.between(cp),
            Stage::Surging { batch } => self.surging(cp, batch),
            Stage::WaitingReady { batch } => self.waiting_ready(cp, batch),
            Stage::Gating { batch } => self.gating(cp, batch),
            Stage::Cordoning { batch } => self.cordoning(cp, batch),
            Stage::Draining { batch } => self.draining(cp, batch),
            Stage::Terminating { batch } => self.terminating(cp, batch),
            Stage::Soaking { batch, until } => self.soaking(cp, batch, until),
            Stage::Abandoning { batch, why, halt } => self.abandoning(cp, batch, why, halt),
            Stage::PoolSoak { until } => self.pool_soak(cp, until),
            Stage::Cleanup => self.cleanup(cp),
            Stage::Done => self.done(cp),
        }
    }
}

/// Cancel the pipelined next batch (it has disrupted nothing): it is undone, and becomes the
/// current batch when the soak it overlapped ends.
///
/// An undoing already under way keeps going but no longer halts the pool when done: what
/// cancels it now (a new version, a revert, a gate failure with its own halt) decides what
/// follows. A next stage without a batch (never written by rota; a hand-edited status) holds
/// nothing and is dropped.
fn cancel_next(cp: &mut Checkpoint, why: String, now: DateTime<Utc>) {
    cp.next = cp.next.take().and_then(|next| match *next {
        Stage::Abandoning { batch, why, .. } => Some(Box::new(Stage::Abandoning {
            batch,
            why,
            halt: None,
        })),
        s => s
            .batch()
            .cloned()
            .map(|batch| Box::new(abandon(batch, why, None, now))),
    });
}

/// Cancel a batch: timeouts of the undoing count from now.
fn abandon(mut batch: Batch, why: String, halt: Option<String>, now: DateTime<Utc>) -> Stage {
    batch.stage_since = now;
    Stage::Abandoning { batch, why, halt }
}

/// The owner annotation value of a batch's cordons.
/// When a drain that has not finished is past `drain.timeout`: counted from the cordon
/// plus `drain.delay` (the pods' own time comes first), and, while a do-not-disrupt pod still
/// defers the drain or was evicted past it, from the end of `drain.maxDeferral` (the pod is
/// evicted then, and the drain gets its whole timeout after it).
fn drain_deadline(d: &DesiredPool, batch: &Batch, waiting: &[String]) -> DateTime<Utc> {
    let drain = &d.policy.drain;
    let start = batch
        .cordoned_at
        .unwrap_or(batch.stage_since)
        .max(batch.stage_since);
    let evictions = batch.cordoned_at.unwrap_or(batch.stage_since) + dur(drain.delay);
    let base = start.max(evictions) + dur(drain.timeout);
    match drain.max_deferral {
        Some(m)
            if !batch.deferral_ended.is_empty()
                || waiting.iter().any(|w| w.ends_with(", drain.maxDeferral)")) =>
        {
            base.max(evictions + dur(m) + dur(drain.timeout))
        }
        _ => base,
    }
}

/// `; evicted past drain.maxDeferral: ns/pod` for a batch that overruled do-not-disrupt.
fn past_deferral(batch: &Batch) -> String {
    if batch.deferral_ended.is_empty() {
        return String::new();
    }
    format!(
        "; evicted past drain.maxDeferral: {}",
        batch.deferral_ended.join(", ")
    )
}

/// How long the next batch is expected to take, surge to its old instances gone: what the
/// pool's own batches took (`Checkpoint::pace`, kept from one rotation to the next), else
/// the policy's bounds (`nodeReadyTimeout` plus `drain.timeout`).
fn expected_batch(d: &DesiredPool, cp: &Checkpoint) -> Duration {
    match cp.pace.and_then(|p| p.boot_seconds.zip(p.drain_seconds)) {
        Some((boot, drain)) => Duration::seconds((boot + drain) as i64),
        None => dur(d.policy.node_ready_timeout)
            .checked_add(&dur(d.policy.drain.timeout))
            .unwrap_or(Duration::MAX),
    }
}

/// What holds a deferred batch: the windows, or the blackout in force.
fn held_by(d: &DesiredPool, deferral: &window::Deferral) -> Vec<String> {
    if let window::Deferral::Blackout { reason, ends, .. } = deferral {
        let why = if reason.is_empty() {
            String::new()
        } else {
            format!(" ({reason})")
        };
        return vec![format!("blackout until {}{why}", ends.to_rfc3339())];
    }
    d.policy
        .windows
        .iter()
        .map(|w| {
            let days = if w.days.is_empty() {
                "every day".to_string()
            } else {
                w.days.join(",")
            };
            let tz = if w.time_zone.is_empty() {
                "UTC"
            } else {
                &w.time_zone
            };
            format!("window {days} {}-{} {tz}", w.start, w.end)
        })
        .collect()
}

pub fn owner(pool: &str, batch: &Batch) -> String {
    format!("{pool}/batch-{}", batch.number)
}

/// Whole seconds of a non-negative duration (a clock that went back counts as zero).
fn seconds(d: Duration) -> u64 {
    d.num_seconds().max(0) as u64
}

fn names(nodes: &[ChosenNode]) -> String {
    let names: Vec<&str> = nodes.iter().map(|c| c.node.as_str()).collect();
    super::listing::listed(&names, ", ")
}
