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
//! One call may pass several stages when their conditions already hold (a batch whose new
//! nodes are Ready and whose gates pass goes from WaitingReady to Cordoning at once), and stops
//! at the first stage that has something to do or to wait for.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};

use super::checkpoint::{Batch, Checkpoint, ChosenNode, Stage};
use super::counts::Counts;
use super::lookup::Lookup;
use super::observed::{GateVerdict, Observed, ObservedNode};
use super::operator::Request;
use super::stop::{self, Reason};
use super::window;
use super::{Action, Phase, Plan, Planned};
use crate::fleet::duration::GoDuration;
use crate::fleet::resolved::{DesiredPool, Mode, OnDrainTimeout, OnGateFailure};

mod replace;

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

    /// Compare the desired image with the checkpoint: keep going, start a rotation, supersede
    /// it with a newer version, or roll back fast to the origin.
    fn reconcile_desired(&mut self, cp: Option<Checkpoint>) -> Result<Checkpoint, Box<Outcome>> {
        let d = self.desired;
        let obs = self.obs;
        let needs_rotation = self.remaining(None) > 0;
        if let Some(held) = self
            .image_held(cp.as_ref(), needs_rotation)
            .or_else(|| self.skew_held(cp.as_ref(), needs_rotation))
        {
            return Err(Box::new(Outcome {
                checkpoint: cp,
                ..held
            }));
        }
        let cp = match cp {
            Some(cp) if cp.rejected_image.as_deref() == Some(d.image.as_str()) => {
                // Rolled back from this image after a gate failure: stay there until the
                // repo names another version.
                let why = cp.rollback_reason.clone().unwrap_or_default();
                let finished = cp.stage == Stage::Done;
                let msg = format!(
                    "rolled back from {}: {why}; waiting for a new version",
                    d.version
                );
                if finished {
                    return Err(Box::new(Outcome {
                        checkpoint: Some(cp),
                        phase: Phase::Failed,
                        reason: Reason::RolledBack,
                        message: msg,
                    }));
                }
                cp
            }
            Some(cp)
                if cp.stage == Stage::Done && (cp.target_image != d.image || needs_rotation) =>
            {
                if let Some(hold) = &obs.start_hold {
                    return Err(Box::new(self.held(Some(cp), hold)));
                }
                let back = cp.target_image != d.image && cp.origin_image == d.image;
                let mut next = self.start(Some(&cp));
                if back {
                    // Back to the image the finished rotation came from (a revert): every
                    // node goes back, whatever `percent` says.
                    next.rolling_back = true;
                    next.rollback_reason =
                        Some(format!("the desired version went back to {}", d.version));
                }
                next
            }
            Some(cp) if cp.stage == Stage::Done => cp,
            Some(mut cp) if cp.target_image != d.image => {
                if d.image == cp.origin_image {
                    self.roll_back_fast(&mut cp);
                } else {
                    self.supersede(&mut cp);
                }
                cp
            }
            Some(cp) => cp,
            None if needs_rotation || obs.group.template_image != d.image => {
                if let Some(hold) = &obs.start_hold {
                    return Err(Box::new(self.held(None, hold)));
                }
                self.start(None)
            }
            None => {
                return Err(Box::new(Outcome {
                    checkpoint: None,
                    phase: Phase::Succeeded,
                    reason: Reason::UpToDate,
                    message: format!("every node runs {} ({})", d.version, d.image),
                }));
            }
        };
        Ok(cp)
    }

    /// Nothing is surged on an image its cloud cannot launch here (`Observed::image_hold`): no
    /// rotation starts onto it and none under way switches to it. A rotation already on it
    /// goes on (it was checked when it started). The outcome's checkpoint is the caller's.
    fn image_held(&self, cp: Option<&Checkpoint>, needs_rotation: bool) -> Option<Outcome> {
        let d = self.desired;
        let (reason, why) = self.obs.image_hold.as_ref()?;
        let onto_it = match cp {
            None => needs_rotation || self.obs.group.template_image != d.image,
            Some(c) if c.stage == Stage::Done => c.target_image != d.image || needs_rotation,
            Some(c) => c.target_image != d.image,
        };
        onto_it.then(|| Outcome {
            checkpoint: None,
            phase: Phase::Waiting,
            reason: Reason::of_image_hold(reason),
            message: format!(
                "{} waits for its image: {why}; nothing is surged until the cloud can launch it",
                d.version
            ),
        })
    }

    /// Nothing is surged onto a version whose kubelet the live control plane refuses
    /// (`rotate::skew`), at the same points as [`Self::image_held`]; going back to the
    /// image a rotation came from is never held (it ran here).
    fn skew_held(&self, cp: Option<&Checkpoint>, needs_rotation: bool) -> Option<Outcome> {
        let d = self.desired;
        let onto_it = match cp {
            None => needs_rotation || self.obs.group.template_image != d.image,
            Some(c) if c.target_image == d.image => c.stage == Stage::Done && needs_rotation,
            Some(c) => c.origin_image != d.image,
        };
        if !onto_it {
            return None;
        }
        let why = super::skew::hold(d, self.obs.control_plane.as_ref())?;
        Some(Outcome {
            checkpoint: None,
            phase: Phase::Waiting,
            reason: Reason::VersionSkew,
            message: why,
        })
    }

    /// Back to the image the pool came from, mid-rotation: a fast rollback. A batch that has
    /// not finished draining is undone rather than finished.
    fn roll_back_fast(&self, cp: &mut Checkpoint) {
        let d = self.desired;
        cp.target_image = cp.origin_image.clone();
        cp.target_version = d.version.clone();
        cp.rolling_back = true;
        cp.rejected_image = None;
        cp.halted = None;
        cp.rollback_reason = Some(format!("the desired version went back to {}", d.version));
        cancel_next(
            cp,
            format!(
                "the desired version went back to {} (fast rollback)",
                d.version
            ),
            self.now,
        );
        cp.stage = match std::mem::replace(&mut cp.stage, Stage::Between) {
            // A replace batch whose old instances are removed is refilled whatever the image:
            // its replacements on the image left are rotated back by the next batches.
            s @ (Stage::Surging { .. } | Stage::WaitingReady { .. })
                if s.batch().is_some_and(|b| b.replace) =>
            {
                s
            }
            Stage::Surging { batch }
            | Stage::WaitingReady { batch }
            | Stage::Gating { batch }
            | Stage::Cordoning { batch }
            | Stage::Draining { batch } => abandon(
                batch,
                format!(
                    "the desired version went back to {} (fast rollback)",
                    d.version
                ),
                None,
                self.now,
            ),
            Stage::Soaking { .. } | Stage::PoolSoak { .. } | Stage::Cleanup => Stage::Between,
            other => other,
        };
    }

    /// A newer version supersedes the one being rolled out. A batch that has not disrupted
    /// anything is undone (its surge runs the superseded image); one that has started
    /// cordoning finishes, and its nodes are rotated again.
    fn supersede(&self, cp: &mut Checkpoint) {
        let d = self.desired;
        cp.target_image = d.image.clone();
        cp.target_version = d.version.clone();
        cp.rolling_back = false;
        cp.rejected_image = None;
        cp.rollback_reason = None;
        // A new version lifts a halt as unpausing does: the stage's timeout counts
        // from now, or a drain halted by its timeout would halt again at once.
        if cp.halted.take().is_some() {
            cp.restart_clocks(self.now);
        }
        cancel_next(cp, format!("version {} superseded it", d.version), self.now);
        cp.stage = match std::mem::replace(&mut cp.stage, Stage::Between) {
            s if s.before_disruption() => {
                let batch = s.batch().cloned().expect("a batch stage has a batch");
                abandon(
                    batch,
                    format!("version {} superseded it", d.version),
                    None,
                    self.now,
                )
            }
            Stage::Soaking { .. } | Stage::PoolSoak { .. } | Stage::Cleanup => Stage::Between,
            other => other,
        };
    }

    /// A rotation that may not start yet (`maxParallelPools`).
    fn held(&mut self, cp: Option<Checkpoint>, hold: &str) -> Outcome {
        // The holders, as `admit` names them: "... pool(s) a, b are rotating".
        self.blocked_by = hold
            .split_once("pool(s) ")
            .map(|(_, rest)| rest.trim_end_matches(" are rotating"))
            .into_iter()
            .flat_map(|p| p.split(", "))
            .map(|p| format!("pool {p}"))
            .collect();
        Outcome {
            checkpoint: cp,
            phase: Phase::Waiting,
            reason: Reason::MaxParallelPools,
            message: format!("{} waits to start: {hold}", self.desired.version),
        }
    }

    /// A new rotation from what the pool runs now.
    fn start(&self, previous: Option<&Checkpoint>) -> Checkpoint {
        let d = self.desired;
        let obs = self.obs;
        // The origin is the image most nodes not on the target run; with none, the template.
        let mut by_image: BTreeMap<String, usize> = BTreeMap::new();
        for n in &obs.nodes {
            if let Some(img) = self.image_of(n).filter(|i| *i != d.image) {
                *by_image.entry(img).or_default() += 1;
            }
        }
        let origin = by_image
            .iter()
            .max_by_key(|(img, count)| (**count, std::cmp::Reverse((*img).clone())))
            .map(|(img, _)| img.clone())
            .or_else(|| previous.map(|p| p.origin_image.clone()))
            .unwrap_or_else(|| obs.group.template_image.clone());
        Checkpoint {
            origin_image: origin,
            target_image: d.image.clone(),
            target_version: d.version.clone(),
            original_desired: obs.group.desired,
            original_max: obs.group.max,
            pool_size: self.live_nodes().count() as u32,
            batches_started: 0,
            rolling_back: false,
            rejected_image: None,
            rollback_reason: None,
            last_eviction: None,
            halted: None,
            // An operator's pause and the last request applied outlive one rotation.
            operator_paused: previous.and_then(|p| p.operator_paused.clone()),
            operator_request: previous.and_then(|p| p.operator_request.clone()),
            fleet_stop: None,
            annotated_nodes: Vec::new(),
            fenced_at: None,
            capacity_changed_at: None,
            stage: Stage::Between,
            next: None,
            pace: previous.and_then(|p| p.pace),
            owner_update: None,
            drift: None,
            blue_green: None,
        }
    }

    /// Nodes that still have to move to the target for the rotation to be complete.
    fn remaining(&self, cp: Option<&Checkpoint>) -> u32 {
        let target = cp.map_or(self.desired.image.as_str(), |c| c.target_image.as_str());
        let rolling_back = cp.is_some_and(|c| c.rolling_back);
        let pool = cp.map_or(self.obs.nodes.len() as u32, |c| c.pool_size);
        // A partial rollout stops at `percent` of the pool; a rollback takes every node back.
        let percent = if rolling_back {
            100
        } else {
            u32::from(self.desired.policy.percent)
        };
        let needed = (pool * percent).div_ceil(100);
        let (mut on_target, mut off_target) = (0, 0);
        for n in self.live_nodes() {
            if self.image_of(n).as_deref() == Some(target) {
                on_target += 1;
            } else {
                off_target += 1;
            }
        }
        if percent == 100 {
            // Every node: one the autoscaler added on the target image must not stand in
            // for an old node still running (the count would say done with one left). Only
            // nodes the group still runs count: a node object whose instance is gone (being
            // removed) or was never the group's cannot be replaced by it.
            return self
                .live_nodes()
                .filter(|n| self.image_of(n).as_deref() != Some(target))
                .filter(|n| self.obs.instance_of(n).is_some())
                .count() as u32;
        }
        // Never more than the nodes left to replace: the pool may have shrunk since the start.
        needed.saturating_sub(on_target).min(off_target)
    }

    /// Nodes that are not on their way out (their instance is not terminating).
    fn live_nodes(&self) -> impl Iterator<Item = &'a ObservedNode> + '_ {
        let obs = self.obs;
        obs.nodes.iter().filter(move |n| {
            obs.instance_of(n)
                .is_none_or(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating)
        })
    }

    /// Nodes a stage may have cordoned, with the owner of those cordons.
    fn claimed_cordons(&self, stage: &Stage) -> BTreeSet<(String, String)> {
        let Some(batch) = stage.batch() else {
            return BTreeSet::new();
        };
        let owner = owner(&self.desired.name, batch);
        let nodes = match stage {
            Stage::Cordoning { batch }
            | Stage::Draining { batch }
            | Stage::Terminating { batch } => {
                batch.old_nodes.iter().map(|c| c.node.clone()).collect()
            }
            // A replace batch's old nodes may outlive their removal while the group refills:
            // their cordons stay until the node objects are gone.
            Stage::Surging { batch }
            | Stage::WaitingReady { batch }
            | Stage::Soaking { batch, .. }
                if batch.replace =>
            {
                batch.old_nodes.iter().map(|c| c.node.clone()).collect()
            }
            Stage::Abandoning { batch, .. } => self.new_nodes_of(batch),
            _ => Vec::new(),
        };
        nodes.into_iter().map(|n| (n, owner.clone())).collect()
    }

    fn clean_orphaned_cordons(&mut self, cp: &Checkpoint) {
        // The current batch and the pipelined next one (which only cordons when undone).
        let stages: Vec<&Stage> = std::iter::once(&cp.stage)
            .chain(cp.next.as_deref())
            .collect();
        let claimed: BTreeSet<(String, String)> = stages
            .iter()
            .flat_map(|s| self.claimed_cordons(s))
            .collect();
        for n in self.obs.nodes.iter().chain(&self.obs.departed) {
            let Some(by) = &n.cordoned_by else { continue };
            if !n.cordoned {
                continue;
            }
            if claimed.contains(&(n.name.clone(), by.clone())) {
                continue;
            }
            // A node whose instance is being terminated keeps its cordon until it is gone:
            // uncordoned, it could take pods that would die with it (a replace batch's old
            // nodes may outlive the batch).
            if self
                .obs
                .instance_of(n)
                .is_some_and(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating)
            {
                continue;
            }
            // In Abandoning, the old nodes' cordons are undone by the stage itself (with a
            // more specific reason).
            if stages.iter().any(|s| {
                matches!(s, Stage::Abandoning { batch, .. }
                    if batch.old_nodes.iter().any(|c| c.node == n.name))
            }) {
                continue;
            }
            self.push(
                Action::Uncordon {
                    node: n.name.clone(),
                },
                format!(
                    "node {} is cordoned by {by}, which no batch in progress owns (left by a crash or a cancelled batch)",
                    n.name
                ),
            );
        }
    }

    /// Invariant 8: a batch that stopped (halted, or being undone) leaves the group able to
    /// make only nodes of the image the pool came from. Without this, every replacement the
    /// cloud or the autoscaler makes while a human looks at the halt boots the image that
    /// may be what broke. The next batch's surge sets the target again.
    fn template_on_origin(&mut self, cp: &Checkpoint) {
        if self.obs.group.template_image == cp.origin_image
            || self.actions.iter().any(
                |a| matches!(&a.action, Action::SetImage { image } if *image == cp.origin_image),
            )
        {
            return;
        }
        self.push(
            Action::SetImage {
                image: cp.origin_image.clone(),
            },
            format!(
                "the batch stopped: replacements the cloud or the autoscaler makes must boot the image the pool came from, {}",
                cp.origin_image
            ),
        );
    }

    /// Until the rotation is done, the nodes rota brought up keep the autoscaler's
    /// scale-down-disabled annotation: one lost (a crash before it was set, someone removing
    /// it) is set again.
    fn keep_annotations(&mut self, cp: &mut Checkpoint) {
        if matches!(cp.stage, Stage::Cleanup | Stage::Done) || !self.obs.cluster_autoscaler {
            return;
        }
        if !self.obs.describe_lag.is_zero() {
            self.fence_autoscaler(cp);
        }
        for name in &cp.annotated_nodes {
            let again = Action::SetScaleDownDisabled {
                node: name.clone(),
                disabled: true,
            };
            if let Some(n) = self.obs.node(name)
                && !n.scale_down_disabled
                && !self.actions.iter().any(|a| a.action == again)
            {
                self.push(
                    again,
                    format!("keep the autoscaler off node {name} until the pool is done"),
                );
            }
        }
    }

    /// With `--no-cluster-autoscaler` (no autoscaler shares the group): the annotations an
    /// earlier pass recorded (before the operator said so, mid-rotation) protect against
    /// nothing, so they are removed now rather than when the pool is done, which a halted
    /// pool may never reach. A name stays recorded until a describe shows its node without
    /// the annotation (or the node gone): the checkpoint is written before the removal runs,
    /// and a crash in between must not leave an annotation nothing records (invariant 4).
    /// Nodes rota did not record are left alone, as at cleanup.
    fn release_annotations(&mut self, cp: &mut Checkpoint) {
        if self.obs.cluster_autoscaler {
            return;
        }
        let mut still = Vec::new();
        for name in std::mem::take(&mut cp.annotated_nodes) {
            if self.obs.node(&name).is_some_and(|n| n.scale_down_disabled) {
                self.push(
                    Action::SetScaleDownDisabled {
                        node: name.clone(),
                        disabled: false,
                    },
                    format!(
                        "no cluster autoscaler shares the group (--no-cluster-autoscaler): node {name} needs no scale-down-disabled annotation"
                    ),
                );
                still.push(name);
            }
        }
        cp.annotated_nodes = still;
    }

    /// With `--describe-lag`: keep the cluster autoscaler from scaling down any node of the
    /// pool while it rotates. The autoscaler's scale-down is a terminate with decrement, and
    /// a describe that lags behind one makes a surge computed from it overshoot the bound
    /// (invariant 1) by what it missed. With every node fenced, and a lag waited out after
    /// the fence (`lag_wait`), no describe rota computes a capacity from misses a scale-down;
    /// a scale-up it misses makes it ask for less, never more. Nodes that carry the annotation
    /// from someone else are left alone (and not recorded, so cleanup leaves them as well).
    fn fence_autoscaler(&mut self, cp: &mut Checkpoint) {
        let mut unfenced = 0;
        let live: Vec<&ObservedNode> = self.live_nodes().collect();
        for n in live {
            if n.scale_down_disabled {
                continue;
            }
            unfenced += 1;
            if !cp.annotated_nodes.contains(&n.name) {
                cp.annotated_nodes.push(n.name.clone());
            }
            self.actions.push(Planned {
                action: Action::SetScaleDownDisabled {
                    node: n.name.clone(),
                    disabled: true,
                },
                reason: format!(
                    "keep the autoscaler from scaling down node {} while the pool rotates (describes lag up to {}s)",
                    n.name,
                    self.obs.describe_lag.as_secs()
                ),
            });
        }
        // Forget nodes that are gone, so the list stays the size of the pool.
        let present: BTreeSet<&str> = self
            .obs
            .nodes
            .iter()
            .chain(&self.obs.departed)
            .map(|n| n.name.as_str())
            .collect();
        cp.annotated_nodes.retain(|n| present.contains(n.as_str()));
        if unfenced == 0 && cp.fenced_at.is_none() {
            cp.fenced_at = Some(self.now);
        }
    }

    /// With `--describe-lag`: why the next batch may not compute its capacity yet (the fence
    /// not yet seen, or seen less than a lag ago; the last capacity change less than a lag
    /// ago), or `None`.
    fn lag_wait(&self, cp: &Checkpoint) -> Option<String> {
        let lag = self.obs.describe_lag;
        if lag.is_zero() {
            return None;
        }
        let lag_c = chrono::Duration::from_std(lag).unwrap_or(chrono::Duration::MAX);
        // With no autoscaler sharing the group, there is no scale-down to fence and none a
        // describe could miss: only rota's own capacity changes are waited out.
        let anchor = if self.obs.cluster_autoscaler {
            let Some(fenced) = cp.fenced_at else {
                return Some(
                    "keeping the cluster autoscaler from scaling down the pool's nodes before the first batch".into(),
                );
            };
            fenced
        } else {
            cp.capacity_changed_at?
        };
        let since = [Some(anchor), cp.capacity_changed_at, self.obs.leading_since]
            .into_iter()
            .flatten()
            .max()
            .expect("anchor is some");
        let ready = since + lag_c;
        (self.now < ready).then(|| {
            format!(
                "waiting until {} for the group's describe to catch up ({}s lag) before computing the next surge",
                ready.to_rfc3339(),
                lag.as_secs()
            )
        })
    }

    /// The capacity a batch's surge asks for now: its recorded absolute target, less the
    /// instances of the group before the surge that someone else has since removed (the
    /// autoscaler's scale-down decrements the capacity too). Re-sending the recorded target
    /// after such a removal would surge a second time (invariant 1); after a crash before
    /// the first request, nothing is gone and the target is sent as recorded. An instance
    /// already terminating when the batch started is not counted: the capacity it held was
    /// not in the target (seed 524 of the chaos suite: a failed boot's instance terminated
    /// with decrement just before the next batch, whose surge of one then asked for nothing).
    fn surge_capacity(&self, batch: &Batch) -> u32 {
        let gone = batch
            .instances_before
            .iter()
            .filter(|id| !batch.terminating_before.contains(id))
            .filter(|id| {
                batch.taken_back.contains(id)
                    || self
                        .obs
                        .instance(id)
                        .is_none_or(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating)
            })
            .count() as u32;
        batch.target_capacity.saturating_sub(gone)
    }

    /// Records in `batch.taken_back` the instances of the group before its surge that this
    /// describe lists as terminating (see [`Batch::taken_back`]).
    fn note_taken_back(&self, batch: &mut Batch) {
        for id in &batch.instances_before {
            let terminating = self
                .obs
                .instance(id)
                .is_some_and(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating);
            if terminating
                && !batch.terminating_before.contains(id)
                && !batch.taken_back.contains(id)
            {
                batch.taken_back.push(id.clone());
            }
        }
    }

    /// Node names of the instances a batch brought up.
    fn new_nodes_of(&self, batch: &Batch) -> Vec<String> {
        self.new_instances_of(batch)
            .iter()
            .filter_map(|id| self.obs.node_of(id).map(|n| n.name.clone()))
            .collect()
    }

    /// Instances a batch brought up: recorded ones, plus any the group lists now that were
    /// not there before the surge (the surge may have been requested before a crash and
    /// listed only after it).
    fn new_instances_of(&self, batch: &Batch) -> Vec<String> {
        let before: BTreeSet<&str> = batch.instances_before.iter().map(|s| s.as_str()).collect();
        let mut ids: BTreeSet<String> = batch.new_instances.iter().cloned().collect();
        for i in &self.obs.group.instances {
            if !before.contains(i.id.as_str()) {
                ids.insert(i.id.clone());
            }
        }
        ids.into_iter().collect()
    }

    /// The instances among `ids` that have no Ready node and whose creation the cloud reports
    /// failed (GCP's per-instance `lastAttempt`, an Azure VM whose provisioning failed), each
    /// named with its zone and the cloud's code.
    fn launch_failures(&self, ids: &[String]) -> Vec<(String, &'a crate::cloud::LaunchError)> {
        let obs = self.obs;
        ids.iter()
            .filter(|id| obs.node_of(id).is_none_or(|n| !n.ready))
            .filter_map(|id| {
                let i = obs.instance(id)?;
                let e = i.launch_error.as_ref()?;
                let zone = if i.zone.is_empty() {
                    String::new()
                } else {
                    format!(" in zone {}", i.zone)
                };
                Some((format!("{id}{zone}"), e))
            })
            .collect()
    }

    /// A launch failure that retrying cannot fix (a quota, an invalid template: classified as
    /// a failed call would be, [`crate::errors::Class::Stalled`]) fails the batch at once and
    /// pauses the pool, naming instance, zone and code. Others are waited out within
    /// `nodeReadyTimeout` and then replaced like a node not Ready (`nodeReadyRetries`, with
    /// backoff): a transient failure the cloud retries itself, and a zone out of capacity,
    /// which heals as capacity frees.
    fn stalled_launch(&self, batch: &Batch, ids: &[String]) -> Option<String> {
        use crate::errors::{Class, Classify};
        let failed: Vec<String> = self
            .launch_failures(ids)
            .into_iter()
            .filter(|(_, e)| e.kind.classify().class == Class::Stalled)
            .filter(|(_, e)| !e.is_capacity_shortfall())
            .map(|(at, e)| format!("{at}: {e} ({})", e.kind.reason()))
            .collect();
        (!failed.is_empty()).then(|| {
            format!(
                "batch {}: group {} cannot create surge instance(s): {}",
                batch.number,
                self.desired.group,
                failed.join("; ")
            )
        })
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

    /// Between batches: start the next one, or go to the pool soak.
    fn between(&mut self, cp: &mut Checkpoint) -> Step {
        let d = self.desired;
        let remaining = self.remaining(Some(cp));
        if remaining == 0 {
            if cp.rolling_back {
                return Step::Next(Stage::Cleanup);
            }
            return Step::Next(Stage::PoolSoak {
                until: self.now + dur(d.policy.pool_soak),
            });
        }
        match self.choose_batch(cp, remaining) {
            // A replace batch checks the gates before it disrupts anything (`replace`).
            Ok(batch) if batch.replace => Step::Next(Stage::Gating { batch }),
            Ok(batch) => Step::Next(Stage::Surging { batch }),
            Err(step) => *step,
        }
    }

    /// The next batch: its old nodes and its surge, within the window, the describe lag and
    /// the surge bound (invariant 1); or why none may start now. Used between batches and,
    /// pipelined, while the current batch soaks (its old instances are gone by then).
    fn choose_batch(&mut self, cp: &mut Checkpoint, remaining: u32) -> Result<Batch, Box<Step>> {
        let obs = self.obs;
        self.may_start_batch(cp, remaining)?;
        let candidates = self.candidates(cp, remaining)?;
        let replace = self.replaces();
        let n = if replace {
            self.replace_size(cp, remaining, candidates.len() as u32)?
        } else {
            self.batch_surge(cp, remaining, candidates.len() as u32)?
        };
        cp.batches_started += 1;
        let batch = Batch {
            number: cp.batches_started,
            old_nodes: candidates
                .iter()
                .take(n as usize)
                .map(|(n, id)| ChosenNode {
                    node: n.name.clone(),
                    instance_id: id.clone(),
                })
                .collect(),
            // A replace batch leaves the capacity as it is.
            target_capacity: obs.group.desired + if replace { 0 } else { n },
            instances_before: obs.group.instances.iter().map(|i| i.id.clone()).collect(),
            terminating_before: obs
                .group
                .instances
                .iter()
                .filter(|i| i.lifecycle == crate::cloud::Lifecycle::Terminating)
                .map(|i| i.id.clone())
                .collect(),
            taken_back: Vec::new(),
            new_instances: Vec::new(),
            replaced: Vec::new(),
            never_ready: Vec::new(),
            ready_retries: 0,
            replace_at: None,
            stage_since: self.now,
            started_at: Some(self.now),
            cordoned_at: None,
            deferral_ended: Vec::new(),
            replace,
        };
        Ok(batch)
    }

    /// Whether a batch may start now: inside a maintenance window with room for it before
    /// the window closes, outside every blackout (`rotate::window::may_start`), and with a
    /// describe that shows the rotation's own capacity changes (`--describe-lag`).
    fn may_start_batch(&mut self, cp: &Checkpoint, remaining: u32) -> Result<(), Box<Step>> {
        let d = self.desired;
        let expected = expected_batch(d, cp);
        match window::may_start(&d.policy.windows, &d.policy.blackouts, self.now, expected) {
            Ok(None) => {}
            Ok(Some(deferral)) => {
                self.blocked_by = held_by(d, &deferral);
                self.until = deferral.until();
                let reason = match deferral {
                    window::Deferral::Blackout { .. } => Reason::Blackout,
                    _ => Reason::OutsideWindow,
                };
                return Err(Box::new(stop(
                    Stage::Between,
                    Phase::Waiting,
                    reason,
                    format!("{remaining} node(s) left; {}", deferral.describe(expected)),
                )));
            }
            Err(e) => {
                return Err(Box::new(stop(
                    Stage::Between,
                    Phase::Failed,
                    Reason::InvalidWindow,
                    e.to_string(),
                )));
            }
        }

        if let Some(why) = self.lag_wait(cp) {
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Rotating,
                Reason::DescribeLag,
                format!("{remaining} node(s) left; {why}"),
            )));
        }
        Ok(())
    }

    /// Why `n` may not be disrupted at all. A pod's do-not-disrupt holds only the drain, up
    /// to `drain.maxDeferral`, where one is set: such a node is taken and cordoned, and
    /// the pod goes last. A node's own annotation always holds.
    fn disruption_blocker(&self, n: &ObservedNode) -> Option<String> {
        if self.desired.policy.drain.max_deferral.is_some() && !n.do_not_disrupt {
            return None;
        }
        n.disruption_blocker()
    }

    /// The old nodes a batch may take, in the order it takes them: nodes not on the target,
    /// backed by a running instance of the group, not protected by do-not-disrupt; or why
    /// none can be replaced.
    fn candidates(
        &mut self,
        cp: &Checkpoint,
        remaining: u32,
    ) -> Result<Vec<(&'a ObservedNode, String)>, Box<Step>> {
        let d = self.desired;
        let obs = self.obs;
        // Ready nodes go first, then by name so that plans
        // are deterministic: a not-Ready node may be a kubelet that is down, whose pods can
        // be evicted but never confirmed gone, so it goes last, when nothing else is left.
        let mut blocked = Vec::new();
        let mut orphans = Vec::new();
        let mut candidates: Vec<(&ObservedNode, String)> = Vec::new();
        for n in &obs.nodes {
            if self.image_of(n).as_deref() == Some(cp.target_image.as_str()) {
                continue;
            }
            let Some(inst) = obs.instance_of(n) else {
                orphans.push(n.name.clone());
                continue;
            };
            if inst.lifecycle == crate::cloud::Lifecycle::Terminating {
                continue;
            }
            if let Some(why) = self.disruption_blocker(n) {
                blocked.push(why);
                continue;
            }
            candidates.push((n, inst.id.clone()));
        }
        candidates.sort_by_key(|(n, _)| (!n.ready, n.name.clone()));
        if candidates.is_empty() {
            let mut why = Vec::new();
            if !blocked.is_empty() {
                why.push(blocked.join("; "));
            }
            if !orphans.is_empty() {
                why.push(format!(
                    "node(s) {} match no instance of group {}",
                    orphans.join(", "),
                    d.group
                ));
            }
            if why.is_empty() {
                why.push("the remaining old instances are terminating".into());
            }
            self.blocked_by = if blocked.is_empty() {
                orphans.iter().map(|n| format!("node {n}")).collect()
            } else {
                blocked.clone()
            };
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Paused,
                if blocked.is_empty() {
                    Reason::NoCandidates
                } else {
                    Reason::DoNotDisrupt
                },
                format!(
                    "{remaining} node(s) left but none can be replaced: {}",
                    why.join("; ")
                ),
            )));
        }
        Ok(candidates)
    }

    /// How many nodes the next batch replaces: the batch size, what is left, the candidates,
    /// and the surge bound (invariant 1); or why the group must shrink first.
    fn batch_surge(
        &mut self,
        cp: &Checkpoint,
        remaining: u32,
        candidates: u32,
    ) -> Result<u32, Box<Step>> {
        let d = self.desired;
        let obs = self.obs;
        // Invariant 1: never more than the size at start plus one batch. Worked example: a
        // pool of 10 with batch 3 may hold 13 instances; if the autoscaler grew it to 12 in
        // the meantime, this batch surges by 1 only.
        let batch_size = d.policy.batch.nodes(cp.pool_size);
        // With `--describe-lag`, a describe here shows every capacity change of this rotation
        // and every scale-down (`lag_wait`, `fence_autoscaler`); it can only miss a scale-up.
        // So the pool's size is what it shows when that is more than at the start (the
        // autoscaler grew the pool) and the bound follows it; otherwise a pool the autoscaler
        // grew by a batch would wait for it to shrink again.
        let size = if self.obs.describe_lag.is_zero() {
            cp.original_desired
        } else {
            cp.original_desired.max(obs.group.desired)
        };
        let bound = size + batch_size;
        let held = obs.group.desired.max(obs.group.instances.len() as u32);
        let n = batch_size
            .min(remaining)
            .min(candidates)
            .min(bound.saturating_sub(held));
        if n == 0 {
            self.blocked_by = vec![format!(
                "group {} ({held} instances, bound {bound})",
                d.group
            )];
            return Err(Box::new(stop(
                Stage::Between,
                Phase::Waiting,
                Reason::SurgeBudget,
                format!(
                    "the group holds {held} instances; the surge bound is {bound} (size {size} + batch {batch_size}); waiting for it to shrink{}",
                    if self.obs.describe_lag.is_zero() {
                        " (with --describe-lag set, the bound follows a size the autoscaler grew)"
                    } else {
                        ""
                    }
                ),
            )));
        }
        Ok(n)
    }

    fn surging(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let d = self.desired;
        let n = batch.old_nodes.len();
        if let Some(wait) = self.replaced_gone(&mut batch) {
            return stop(
                Stage::Surging { batch },
                Phase::Rotating,
                Reason::ReplacingNotReady,
                wait,
            );
        }
        let g = &self.obs.group;
        if g.template_image != cp.target_image {
            self.push(
                Action::SetImage {
                    image: cp.target_image.clone(),
                },
                format!(
                    "batch {}: new instances must boot {} ({}) before the surge",
                    batch.number, cp.target_version, cp.target_image
                ),
            );
        }
        self.note_taken_back(&mut batch);
        let want = self.surge_capacity(&batch);
        if g.desired < want {
            let max = (want > g.max).then_some(want);
            let raise = max
                .map(|m| format!(", raising the maximum size from {} to {m}", g.max))
                .unwrap_or_default();
            let what = if batch.never_ready.is_empty() {
                format!(
                    "surge {n} new node(s) to replace {}",
                    names(&batch.old_nodes)
                )
            } else {
                format!(
                    "surge again in place of {} (replaced, not Ready in time)",
                    batch.never_ready.join(", ")
                )
            };
            self.push(
                Action::SetCapacity { desired: want, max },
                format!("batch {}: {what}{raise}", batch.number),
            );
        }
        let mut new = self.new_instances_of(&batch);
        new.retain(|id| !batch.never_ready.contains(id));
        if let Some(why) = self.stalled_launch(&batch, &new) {
            // The cloud listed the surge but cannot create it (quota, a stock-out): waiting
            // out nodeReadyTimeout would only delay the same end. The batch fails and is
            // undone; the pool pauses with the cloud's reason.
            self.actions.clear();
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        let deadline = batch.stage_since + dur(d.policy.node_ready_timeout);
        if new.len() < n
            && self.now >= deadline
            && batch.ready_retries < d.policy.node_ready_retries
        {
            // A capacity shortfall is often cured minutes later, and the cloud keeps trying
            // while the capacity stays asked for: it gets another nodeReadyTimeout, as many
            // times as a not-Ready node would be replaced.
            batch.ready_retries += 1;
            batch.stage_since = self.now;
            let message = format!(
                "batch {}: group {} created {} of {n} surge instance(s) within nodeReadyTimeout {} (quota or capacity?); the cloud keeps trying: another nodeReadyTimeout (attempt {} of {})",
                batch.number,
                d.group,
                new.len(),
                d.policy.node_ready_timeout,
                batch.ready_retries + 1,
                d.policy.node_ready_retries + 1
            );
            return stop(
                Stage::Surging { batch },
                Phase::Rotating,
                Reason::SurgeShort,
                message,
            );
        }
        if new.len() < n && self.now >= deadline {
            // Capacity was asked for but the cloud never listed the instances: typically a
            // quota or capacity shortage. The batch fails; what did come up is undone.
            self.actions.clear();
            let why = format!(
                "batch {}: group {} created {} of {n} surge instance(s) within nodeReadyTimeout {} (quota or capacity?)",
                batch.number,
                d.group,
                new.len(),
                d.policy.node_ready_timeout
            );
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        if !self.actions.is_empty() || new.len() < n {
            let mut msg = format!(
                "batch {}: waiting for {} of {n} new instance(s) of group {}",
                batch.number,
                n - new.len().min(n),
                d.group
            );
            for (at, e) in self.launch_failures(&new) {
                msg.push_str(&format!(
                    "; the cloud's last attempt to create {at} failed: {e}"
                ));
            }
            return stop(
                Stage::Surging { batch },
                Phase::Rotating,
                Reason::Surging,
                msg,
            );
        }
        batch.new_instances = new;
        Step::Next(Stage::WaitingReady { batch })
    }

    fn waiting_ready(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        let d = self.desired;
        self.follow_replacements(&mut batch);
        if let Some(why) = self.stalled_launch(&batch, &batch.new_instances) {
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        let not_ready = self.not_ready(cp, &batch);
        if not_ready.is_empty() {
            // The annotations are independent of what follows: go on in the same step.
            let mut batch = batch;
            if let Some(t) = batch.started_at {
                cp.pace.get_or_insert_default().boot_seconds = Some(seconds(self.now - t));
            }
            batch.stage_since = self.now;
            return Step::Next(Stage::Gating { batch });
        }
        let deadline = batch.stage_since + dur(d.policy.node_ready_timeout);
        if self.now >= deadline {
            let stuck = self.stuck_instances(&batch);
            if batch.ready_retries < d.policy.node_ready_retries && !stuck.is_empty() {
                return self.replace_not_ready(batch, stuck, &not_ready);
            }
            let why = self.never_ready_reason(cp, &batch, stuck.len(), &not_ready);
            return Step::Next(abandon(batch, why.clone(), Some(why), self.now));
        }
        stop(
            Stage::WaitingReady { batch },
            Phase::Rotating,
            Reason::WaitingReady,
            format!("waiting for {} to be Ready", not_ready.join(", ")),
        )
    }

    /// The batch's new instances that exist but have no Ready node: what a replacement can
    /// heal (a missing replacement of one the cloud took back is the cloud's to launch).
    fn stuck_instances(&self, batch: &Batch) -> Vec<(String, Option<String>)> {
        batch
            .new_instances
            .iter()
            .filter(|id| {
                self.obs
                    .instance(id)
                    .is_some_and(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating)
            })
            .filter_map(|id| match self.obs.node_of(id) {
                Some(n) if n.ready => None,
                n => Some((id.clone(), n.map(|n| n.name.clone()))),
            })
            .collect()
    }

    /// `nodeReadyRetries`: new instances not Ready within `nodeReadyTimeout` are replaced,
    /// after a backoff of 30 s, then 60 s, ... (at most 10 min): terminated (the desired
    /// capacity lowered with them), then, once they are gone, surged again from the batch's
    /// own target, so the pool never holds more than its size plus one batch, terminating
    /// instances included; the new ones get a fresh `nodeReadyTimeout`. A boot the cloud did
    /// not replace, a node that registered late, a capacity shortfall cured minutes later
    /// heal this way; an image that never boots fails every attempt.
    fn replace_not_ready(
        &mut self,
        mut batch: Batch,
        stuck: Vec<(String, Option<String>)>,
        not_ready: &[String],
    ) -> Step {
        let d = self.desired;
        let attempt = batch.ready_retries + 2;
        let of = d.policy.node_ready_retries + 1;
        let timeout = d.policy.node_ready_timeout;
        let at = *batch.replace_at.get_or_insert_with(|| {
            let backoff =
                Duration::seconds(30 << batch.ready_retries.min(4)).min(Duration::minutes(10));
            self.now + backoff
        });
        self.blocked_by = not_ready.iter().map(|i| format!("instance {i}")).collect();
        if self.now < at {
            self.until = Some(at);
            let message = format!(
                "batch {}: new instance(s) {} not Ready within nodeReadyTimeout {timeout}: replacing them at {} (attempt {attempt} of {of})",
                batch.number,
                not_ready.join(", "),
                at.to_rfc3339()
            );
            return stop(
                Stage::WaitingReady { batch },
                Phase::Rotating,
                Reason::ReplacingNotReady,
                message,
            );
        }
        for (id, node) in &stuck {
            self.push(
                Action::Terminate {
                    instance_id: id.clone(),
                    node: node.clone(),
                },
                format!(
                    "batch {}: new instance {id} not Ready within nodeReadyTimeout {timeout}: replaced (attempt {attempt} of {of})",
                    batch.number
                ),
            );
        }
        let ids: Vec<String> = stuck.into_iter().map(|(id, _)| id).collect();
        batch.new_instances.retain(|id| !ids.contains(id));
        let message = format!(
            "batch {}: replacing {} (not Ready within nodeReadyTimeout {timeout}; attempt {attempt} of {of})",
            batch.number,
            ids.join(", ")
        );
        batch.never_ready.extend(ids);
        batch.ready_retries += 1;
        batch.replace_at = None;
        batch.stage_since = self.now;
        stop(
            Stage::Surging { batch },
            Phase::Rotating,
            Reason::ReplacingNotReady,
            message,
        )
    }

    /// Before a batch surges again for the instances it replaced: those still terminating
    /// are waited for (the pool never holds more than one batch of surge); one the terminate
    /// did not take (it got Ready and pods meanwhile, so it was not drained) is the batch's
    /// again if Ready, else terminated again. `Some`: wait, with why.
    fn replaced_gone(&mut self, batch: &mut Batch) -> Option<String> {
        let mut leaving = Vec::new();
        let mut back = Vec::new();
        for id in &batch.never_ready {
            let Some(i) = self.obs.instance(id) else {
                continue;
            };
            if i.lifecycle == crate::cloud::Lifecycle::Terminating {
                leaving.push(id.clone());
                continue;
            }
            match self.obs.node_of(id) {
                Some(n) if n.ready => back.push(id.clone()),
                node => {
                    let node = node.map(|n| n.name.clone());
                    self.push(
                        Action::Terminate {
                            instance_id: id.clone(),
                            node,
                        },
                        format!(
                            "batch {}: new instance {id} was not Ready in time: replaced",
                            batch.number
                        ),
                    );
                    leaving.push(id.clone());
                }
            }
        }
        batch.never_ready.retain(|id| !back.contains(id));
        batch.new_instances.extend(back);
        (!leaving.is_empty()).then(|| {
            format!(
                "batch {}: waiting for replaced instance(s) {} to go before surging again",
                batch.number,
                leaving.join(", ")
            )
        })
    }

    /// Why the batch fails once its replacements are spent: the image, when no attempt on
    /// it ever got a node Ready ("image X did not boot: 3 of 3 new instance(s) never
    /// Ready"), else the instances that are not.
    fn never_ready_reason(
        &self,
        cp: &Checkpoint,
        batch: &Batch,
        stuck: usize,
        not_ready: &[String],
    ) -> String {
        let d = self.desired;
        let tried = batch.never_ready.len() + batch.new_instances.len();
        let failed = batch.never_ready.len() + stuck;
        // A zone out of capacity says nothing about the image: the pool waits for a person
        // (or a retry later) without blaming it.
        let short: Vec<String> = self
            .launch_failures(&batch.new_instances)
            .into_iter()
            .filter(|(_, e)| e.is_capacity_shortfall())
            .map(|(at, e)| format!("{at}: {e}"))
            .collect();
        if !short.is_empty() {
            return format!(
                "batch {}: the cloud had no capacity for {} new instance(s) within nodeReadyTimeout {}, over {} attempt(s) (last: {})",
                batch.number,
                short.len(),
                d.policy.node_ready_timeout,
                batch.ready_retries + 1,
                short.join("; ")
            );
        }
        if batch.ready_retries > 0 && failed == tried {
            return format!(
                "image {} ({}) did not boot: {failed} of {tried} new instance(s) never Ready within nodeReadyTimeout {}, over {} attempt(s) (last: {})",
                cp.target_image,
                cp.target_version,
                d.policy.node_ready_timeout,
                batch.ready_retries + 1,
                not_ready.join(", ")
            );
        }
        let after = if batch.ready_retries > 0 {
            format!(" after {} replacement(s)", batch.ready_retries)
        } else {
            String::new()
        };
        format!(
            "batch {}: new instance(s) {} not Ready within nodeReadyTimeout {}{after}",
            batch.number,
            not_ready.join(", "),
            d.policy.node_ready_timeout
        )
    }

    /// The cloud replaces a surge instance that failed to boot (desired capacity is
    /// unchanged): the batch follows it to its replacement rather than wait for an instance
    /// that is gone. Worked example: i-m2 fails its boot at minute 5 and the cloud launches
    /// i-m3 at minute 6; the batch now waits for i-m1 and i-m3, and i-m3 gets its own
    /// nodeReadyTimeout from minute 6.
    fn follow_replacements(&self, batch: &mut Batch) {
        let n = batch.old_nodes.len();
        let alive = |id: &String| {
            self.obs
                .instance(id)
                .is_some_and(|i| i.lifecycle != crate::cloud::Lifecycle::Terminating)
        };
        // With lagging describes, an instance missing from one may simply be newer than what
        // it shows: missing counts as gone only once the describe is a lag newer than the
        // moment every instance of the batch had been seen (`stage_since`). Listed as
        // terminating is gone at once.
        let lag =
            chrono::Duration::from_std(self.obs.describe_lag).unwrap_or(chrono::Duration::MAX);
        let seen = batch
            .stage_since
            .max(self.obs.leading_since.unwrap_or(batch.stage_since));
        let absence_proves = self.obs.describe_lag.is_zero() || self.now >= seen + lag;
        let taken_back = |id: &String| match self.obs.instance(id) {
            Some(i) => i.lifecycle == crate::cloud::Lifecycle::Terminating,
            None => absence_proves,
        };
        // An instance counted as taken back because a describe did not list it, listed again
        // and alive: that describe lagged (the cloud took nothing back). It is the batch's
        // again, with the time it has had (measured in the chaos suite, seeds 91 and 107:
        // without this, the batch waited out nodeReadyTimeout for replacements the cloud had
        // no reason to launch, and halted).
        let returned: Vec<String> = batch
            .replaced
            .iter()
            .filter(|id| alive(id))
            .cloned()
            .collect();
        if !returned.is_empty() {
            batch.replaced.retain(|id| !returned.contains(id));
            batch.new_instances.extend(returned);
        }
        let (gone, kept): (Vec<String>, Vec<String>) = batch
            .new_instances
            .iter()
            .cloned()
            .partition(|id| taken_back(id));
        // Newcomers only fill the places of the gone (an instance the autoscaler added
        // meanwhile is not the batch's).
        let newcomers: Vec<String> = self
            .new_instances_of(batch)
            .into_iter()
            .filter(|id| {
                !batch.new_instances.contains(id)
                    && !batch.replaced.contains(id)
                    && !batch.never_ready.contains(id)
            })
            .filter(|id| alive(id))
            .take(n.saturating_sub(kept.len()))
            .collect();
        if !gone.is_empty() || !newcomers.is_empty() {
            batch.replaced.extend(gone);
            batch.new_instances = kept;
            if !newcomers.is_empty() && batch.replaced.len() <= n {
                batch.stage_since = self.now;
            }
            batch.new_instances.extend(newcomers);
        }
    }

    /// What keeps the batch's new instances from counting as Ready (none: all are); each
    /// Ready node is kept off the autoscaler's scale-down until the pool is done.
    fn not_ready(&mut self, cp: &mut Checkpoint, batch: &Batch) -> Vec<String> {
        let n = batch.old_nodes.len();
        let mut not_ready = Vec::new();
        if batch.new_instances.len() < n {
            not_ready.push(format!(
                "{} replacement(s) of surge instance(s) {} the cloud took back",
                n - batch.new_instances.len(),
                batch.replaced.join(", ")
            ));
        }
        for id in &batch.new_instances {
            match self.obs.node_of(id) {
                Some(n) if n.ready => {
                    // Nodes already recorded are re-annotated by `keep_annotations`. With
                    // no autoscaler sharing the group, nothing would remove a Ready node
                    // that waits empty: no annotation (two node patches a node saved).
                    if self.obs.cluster_autoscaler
                        && !n.scale_down_disabled
                        && !cp.annotated_nodes.contains(&n.name)
                    {
                        cp.annotated_nodes.push(n.name.clone());
                        self.push(
                            Action::SetScaleDownDisabled {
                                node: n.name.clone(),
                                disabled: true,
                            },
                            format!(
                                "batch {}: keep the autoscaler off new node {} until the pool is done",
                                batch.number, n.name
                            ),
                        );
                    }
                }
                Some(n) => not_ready.push(format!("{id} (node {} not Ready)", n.name)),
                // A cause that may still clear (the cloud retries it, or the node comes up
                // after all): say why the node has not come yet.
                None => match self.launch_failures(std::slice::from_ref(id)).first() {
                    Some((at, e)) => not_ready.push(format!(
                        "{id} (no node registered; the cloud's last attempt to create {at} failed: {e})"
                    )),
                    None => not_ready.push(format!("{id} (no node registered)")),
                },
            }
        }
        not_ready
    }

    fn gating(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
        if cp.rolling_back {
            batch.stage_since = self.now;
            return Step::Next(Stage::Cordoning { batch });
        }
        match &self.obs.gates {
            GateVerdict::Passing => {
                batch.stage_since = self.now;
                Step::Next(Stage::Cordoning { batch })
            }
            GateVerdict::Pending(g) => {
                self.blocked_by = vec![format!("gate {g}")];
                stop(
                    Stage::Gating { batch },
                    Phase::Rotating,
                    Reason::GatePending,
                    format!("new nodes Ready; waiting for health gate {g} before cordoning"),
                )
            }
            GateVerdict::Failed { gate, reason } => {
                let why = format!(
                    "health gate {gate} failed before batch {}: {reason}",
                    batch.number
                );
                self.gate_failed(cp, Stage::Gating { batch }, why)
            }
        }
    }

    /// `onGateFailure`: pause where we are, or roll back to the origin image.
    fn gate_failed(&mut self, cp: &mut Checkpoint, stage: Stage, why: String) -> Step {
        match self.desired.policy.on_gate_failure {
            OnGateFailure::Pause => {
                cp.halted = Some(why.clone());
                stop(stage, Phase::Paused, Reason::GateFailed, why)
            }
            OnGateFailure::Rollback => {
                cp.rejected_image = Some(cp.target_image.clone());
                cp.rollback_reason = Some(why.clone());
                cp.target_image = cp.origin_image.clone();
                cp.target_version = "the previous version".into();
                cp.rolling_back = true;
                let next = match stage {
                    s if s.before_disruption() => {
                        let batch = s.batch().cloned().expect("a batch stage has a batch");
                        abandon(
                            batch,
                            format!("{why} (onGateFailure: rollback)"),
                            None,
                            self.now,
                        )
                    }
                    _ => Stage::Between,
                };
                Step::Next(next)
            }
        }
    }

    fn cordoning(&mut self, cp: &mut Checkpoint, batch: Batch) -> Step {
        let owner = owner(&self.desired.name, &batch);
        let rolling_back = cp.rolling_back;
        let mut cordons = 0;
        let mut blocked = Vec::new();
        for c in &batch.old_nodes {
            let Some(n) = self.obs.node(&c.node) else {
                continue;
            };
            if let Some(why) = self.disruption_blocker(n) {
                blocked.push(why);
                continue;
            }
            if !n.cordoned {
                cordons += 1;
                self.push(
                    Action::Cordon {
                        node: n.name.clone(),
                        owner: owner.clone(),
                    },
                    if batch.replace {
                        format!(
                            "batch {}: drained and removed first, the group brings up its replacement (strategy replace)",
                            batch.number
                        )
                    } else if rolling_back {
                        format!(
                            "batch {}: its replacement is Ready (rolling back: gates are not consulted)",
                            batch.number
                        )
                    } else {
                        format!(
                            "batch {}: its replacement is Ready and the gates pass",
                            batch.number
                        )
                    },
                );
            }
        }
        if !blocked.is_empty() {
            self.blocked_by = blocked.clone();
            return stop(
                Stage::Cordoning { batch },
                Phase::Paused,
                Reason::DoNotDisrupt,
                format!("batch held: {}", blocked.join("; ")),
            );
        }
        let mut batch = batch;
        batch.cordoned_at.get_or_insert(self.now);
        if cordons > 0 {
            // Evictions can go out right behind the cordons (apply runs them in order), but
            // termination waits for a fresh observation: one taken before the cordon may miss
            // a pod scheduled in between.
            batch.stage_since = self.now;
            let old: Vec<String> = batch.old_nodes.iter().map(|c| c.node.clone()).collect();
            let mut ended = std::mem::take(&mut batch.deferral_ended);
            let waiting = self.drain(cp, batch.number, &old, batch.cordoned_at, &mut ended);
            batch.deferral_ended = ended;
            let mut msg = format!("cordoning {}", names(&batch.old_nodes));
            if !waiting.is_empty() {
                msg.push_str(&format!("; draining: {}", waiting.join(", ")));
            }
            return stop(
                Stage::Draining { batch },
                Phase::Rotating,
                Reason::Cordoning,
                msg,
            );
        }
        batch.stage_since = self.now;
        Step::Next(Stage::Draining { batch })
    }

    /// Evict what must go from `nodes`, within PDBs and the eviction interval. Returns the
    /// pods still to go, each with why it is still there (empty: the nodes are drained).
    ///
    /// `since` is when the batch's nodes were cordoned: evictions wait `drain.delay` after
    /// it, and a do-not-disrupt pod holds the drain `drain.maxDeferral` after that, then is
    /// evicted like any other and added to `ended` (the record). `None` (a batch being
    /// undone): no delay, and do-not-disrupt holds as long as it is set.
    fn drain(
        &mut self,
        cp: &mut Checkpoint,
        batch_no: u32,
        nodes: &[String],
        since: Option<DateTime<Utc>>,
        ended: &mut Vec<String>,
    ) -> Vec<String> {
        let policy = &self.desired.policy.drain;
        let delay_end = since.map(|t| t + dur(policy.delay));
        if let Some(end) = delay_end.filter(|end| self.now < *end) {
            // Long jobs finish on their own: nothing is evicted before the delay ends.
            return nodes
                .iter()
                .filter_map(|name| self.obs.node(name))
                .flat_map(|n| n.blocking_termination())
                .map(|p| format!("{} (drain.delay until {})", p.key(), end.to_rfc3339()))
                .collect();
        }
        let deferral_end = delay_end.zip(policy.max_deferral).map(|(t, m)| t + dur(m));
        let interval = dur(policy.eviction_interval);
        let mut budget: BTreeMap<(String, String), u32> = BTreeMap::new();
        let mut waiting = Vec::new();
        let may_evict = |last: Option<DateTime<Utc>>, now: DateTime<Utc>| {
            interval.is_zero() || last.is_none_or(|t| now >= t + interval)
        };
        for name in nodes {
            let Some(n) = self.obs.node(name) else {
                continue;
            };
            for pod in n.blocking_termination() {
                if pod.terminating {
                    waiting.push(format!("{} (terminating)", pod.key()));
                    continue;
                }
                let past_deferral = deferral_end.is_some_and(|end| self.now >= end);
                match deferral_end {
                    _ if !pod.do_not_disrupt || past_deferral => {}
                    None => {
                        waiting.push(format!("{} (rota.dev/do-not-disrupt)", pod.key()));
                        continue;
                    }
                    Some(end) => {
                        waiting.push(format!(
                            "{} (do-not-disrupt until {}, drain.maxDeferral)",
                            pod.key(),
                            end.to_rfc3339()
                        ));
                        continue;
                    }
                }
                if pod.uses_empty_dir && !policy.delete_empty_dir_data {
                    waiting.push(format!(
                        "{} (uses emptyDir and drain.deleteEmptyDirData is false)",
                        pod.key()
                    ));
                    continue;
                }
                if pod.pdb_count > 1 {
                    // The Eviction API answers 500 for such a pod: asking would fail the
                    // plan on every pass and starve the evictions behind it.
                    waiting.push(format!(
                        "{} (covered by {} PodDisruptionBudgets; the Eviction API refuses it)",
                        pod.key(),
                        pod.pdb_count
                    ));
                    continue;
                }
                // Invariant 2: within one plan, evict no more pods of a PDB than it allows now.
                if let Some(pdb) = &pod.pdb {
                    let left = budget
                        .entry((pdb.namespace.clone(), pdb.name.clone()))
                        .or_insert(pdb.disruptions_allowed);
                    if *left == 0 {
                        waiting.push(format!(
                            "{} (PodDisruptionBudget {}/{} allows no disruption now)",
                            pod.key(),
                            pdb.namespace,
                            pdb.name
                        ));
                        continue;
                    }
                    *left -= 1;
                }
                if !may_evict(cp.last_eviction, self.now) {
                    waiting.push(format!("{} (drain.evictionInterval)", pod.key()));
                    continue;
                }
                if !interval.is_zero() {
                    cp.last_eviction = Some(self.now);
                }
                let reason = if pod.do_not_disrupt {
                    // Recorded: the pod's owner asked not to be disrupted and was overruled.
                    if !ended.contains(&pod.key()) {
                        ended.push(pod.key());
                    }
                    format!(
                        "batch {batch_no}: drain node {}; {} held it past drain.maxDeferral {} (do-not-disrupt), evicted like any other",
                        n.name,
                        pod.key(),
                        policy.max_deferral.unwrap_or_default()
                    )
                } else {
                    format!("batch {batch_no}: drain node {}", n.name)
                };
                self.actions.push(Planned {
                    action: Action::Evict {
                        namespace: pod.namespace.clone(),
                        pod: pod.name.clone(),
                        node: n.name.clone(),
                        grace_period: policy.grace_period,
                    },
                    reason,
                });
                waiting.push(format!("{} (evicting)", pod.key()));
            }
        }
        waiting
    }

    fn draining(&mut self, cp: &mut Checkpoint, batch: Batch) -> Step {
        let d = self.desired;
        // The checkpoint says Draining as soon as the cordons are planned; after a crash
        // before they ran, they are sent again (idempotent), or evicted pods would come back.
        let owner = owner(&d.name, &batch);
        for c in &batch.old_nodes {
            if let Some(n) = self.obs.node(&c.node)
                && !n.cordoned
            {
                self.push(
                    Action::Cordon {
                        node: n.name.clone(),
                        owner: owner.clone(),
                    },
                    format!("batch {}: node {} is being drained", batch.number, n.name),
                );
            }
        }
        let recordoned = self
            .actions
            .iter()
            .any(|a| matches!(a.action, Action::Cordon { .. }));
        let old: Vec<String> = batch.old_nodes.iter().map(|c| c.node.clone()).collect();
        let mut batch = batch;
        let mut ended = std::mem::take(&mut batch.deferral_ended);
        let since = batch.cordoned_at.or(Some(batch.stage_since));
        let waiting = self.drain(cp, batch.number, &old, since, &mut ended);
        batch.deferral_ended = ended;
        // A node cordoned just now is terminated only after an observation made after its
        // cordon: one made before may miss a pod scheduled in between.
        if waiting.is_empty() && !recordoned {
            batch.stage_since = self.now;
            return Step::Next(Stage::Terminating { batch });
        }
        let deadline = drain_deadline(d, &batch, &waiting);
        if self.now >= deadline
            && let Some(step) = self.drain_timed_out(cp, &batch, &old, &waiting)
        {
            return step;
        }
        let blocked = waiting
            .iter()
            .any(|w| w.ends_with("(rota.dev/do-not-disrupt)"));
        self.blocked_by = waiting
            .iter()
            .filter(|w| holds_the_drain(w))
            .cloned()
            .collect();
        self.until = Some(deadline);
        let message = format!("draining: {}{}", waiting.join(", "), past_deferral(&batch));
        stop(
            Stage::Draining { batch },
            if blocked {
                Phase::Paused
            } else {
                Phase::Rotating
            },
            if blocked {
                Reason::DoNotDisrupt
            } else {
                Reason::Draining
            },
            message,
        )
    }

    /// The drain ran past `drain.timeout`: halt (`pause`), or force-delete what eviction
    /// could not move (`force`). `None`: nothing new to do, the drain goes on.
    fn drain_timed_out(
        &mut self,
        cp: &mut Checkpoint,
        batch: &Batch,
        old: &[String],
        waiting: &[String],
    ) -> Option<Step> {
        let d = self.desired;
        // Evictions planned in this very call are dropped: the timeout decides first.
        self.actions
            .retain(|a| !matches!(a.action, Action::Evict { .. }));
        match d.policy.drain.on_timeout {
            OnDrainTimeout::Pause => {
                self.blocked_by = waiting
                    .iter()
                    .filter(|w| holds_the_drain(w))
                    .cloned()
                    .collect();
                let why = format!(
                    "batch {}: drain not done within drain.timeout {}; blocked by: {}",
                    batch.number,
                    d.policy.drain.timeout,
                    waiting.join(", ")
                );
                cp.halted = Some(why.clone());
                return Some(stop(
                    Stage::Draining {
                        batch: batch.clone(),
                    },
                    Phase::Paused,
                    Reason::DrainTimeout,
                    why,
                ));
            }
            OnDrainTimeout::Force => {
                let (forced, kept) = self.force_drain(batch, old);
                if forced == 0 && !kept.is_empty() {
                    // Nothing left that force may delete, and waiting changes nothing:
                    // halt, naming the pods, rather than loop.
                    let why = format!(
                        "batch {}: drain not done within drain.timeout {}; drain.onTimeout force keeps {} (emptyDir data, drain.deleteEmptyDirData is false)",
                        batch.number,
                        d.policy.drain.timeout,
                        kept.join(", ")
                    );
                    cp.halted = Some(why.clone());
                    return Some(stop(
                        Stage::Draining {
                            batch: batch.clone(),
                        },
                        Phase::Paused,
                        Reason::DrainTimeout,
                        why,
                    ));
                }
                if forced > 0 {
                    return Some(stop(
                        Stage::Draining {
                            batch: batch.clone(),
                        },
                        Phase::Rotating,
                        Reason::DrainForced,
                        format!("forcing the drain: {}", waiting.join(", ")),
                    ));
                }
            }
        }
        None
    }

    /// Force-delete the pods that block the batch's old nodes, except what a human protected
    /// with do-not-disrupt (that always wins) and the data of emptyDir pods the policy keeps
    /// (`deleteEmptyDirData: false`). Returns how many it deletes and the pods it keeps.
    fn force_drain(&mut self, batch: &Batch, old: &[String]) -> (usize, Vec<String>) {
        let d = self.desired;
        let keep_data = !d.policy.drain.delete_empty_dir_data;
        let mut forced = 0;
        let mut kept = Vec::new();
        for name in old {
            let Some(n) = self.obs.node(name) else {
                continue;
            };
            for pod in n.blocking_termination() {
                if pod.do_not_disrupt || pod.terminating {
                    continue;
                }
                if pod.uses_empty_dir && keep_data {
                    kept.push(pod.key());
                    continue;
                }
                forced += 1;
                self.actions.push(Planned {
                    action: Action::DeletePod {
                        namespace: pod.namespace.clone(),
                        pod: pod.name.clone(),
                        node: n.name.clone(),
                    },
                    reason: format!(
                        "batch {}: drain.timeout {} passed and drain.onTimeout is force",
                        batch.number, d.policy.drain.timeout
                    ),
                });
            }
        }
        (forced, kept)
    }

    fn terminating(&mut self, cp: &mut Checkpoint, batch: Batch) -> Step {
        let pushed_before = self.actions.len();
        let mut left = Vec::new();
        let mut undrained = false;
        for c in &batch.old_nodes {
            let Some(inst) = self.obs.instance(&c.instance_id) else {
                continue;
            };
            left.push(c.instance_id.clone());
            if inst.lifecycle == crate::cloud::Lifecycle::Terminating {
                continue;
            }
            // Re-validate right before the destructive call (invariant 3): a pod may have been
            // scheduled on the cordoned node since the drain (one that tolerates it).
            if let Some(n) = self.obs.node(&c.node) {
                if n.blocking_termination().next().is_some() {
                    undrained = true;
                    continue;
                }
                if !n.cordoned {
                    // Its cordon was lost (a crash before it was sent, or someone undid it):
                    // cordon again and terminate on a later, fresher observation.
                    self.push(
                        Action::Cordon {
                            node: n.name.clone(),
                            owner: owner(&self.desired.name, &batch),
                        },
                        format!(
                            "batch {}: node {} is about to be terminated",
                            batch.number, n.name
                        ),
                    );
                    continue;
                }
            }
            self.push(
                Action::Terminate {
                    instance_id: c.instance_id.clone(),
                    node: Some(c.node.clone()),
                },
                format!(
                    "batch {}: node {} is drained; terminate it and decrement capacity",
                    batch.number, c.node
                ),
            );
        }
        if undrained && self.actions.len() == pushed_before {
            let mut batch = batch;
            batch.stage_since = self.now;
            return Step::Next(Stage::Draining { batch });
        }
        if left.is_empty() {
            if let Some(t) = batch.cordoned_at {
                cp.pace.get_or_insert_default().drain_seconds = Some(seconds(self.now - t));
            }
            let until = self.now + dur(self.desired.policy.batch_soak);
            return Step::Next(Stage::Soaking { batch, until });
        }
        stop(
            Stage::Terminating { batch },
            Phase::Rotating,
            Reason::Terminating,
            format!("terminating {}", left.join(", ")),
        )
    }

    fn soaking(&mut self, cp: &mut Checkpoint, batch: Batch, until: DateTime<Utc>) -> Step {
        if !cp.rolling_back {
            match &self.obs.gates {
                GateVerdict::Failed { gate, reason } => {
                    let why = format!(
                        "health gate {gate} failed during the soak of batch {}: {reason}",
                        batch.number
                    );
                    cancel_next(cp, why.clone(), self.now);
                    return self.gate_failed(cp, Stage::Soaking { batch, until }, why);
                }
                GateVerdict::Pending(g) if self.now >= until => {
                    let mut msg =
                        format!("batch {} soaked; waiting for health gate {g}", batch.number);
                    if let Some(next) = self.advance_next(cp) {
                        msg.push_str(&format!("; meanwhile {next}"));
                    }
                    self.blocked_by = vec![format!("gate {g}")];
                    return stop(
                        Stage::Soaking { batch, until },
                        Phase::Soaking,
                        Reason::GatePending,
                        msg,
                    );
                }
                _ => {}
            }
        }
        if self.now >= until {
            return Step::Next(Stage::Between);
        }
        // Pipelining: the next batch boots while this one soaks.
        let next = self.advance_next(cp);
        if let Some(why) = cp.halted.clone() {
            // The next batch failed to come up (and is undone): the pool stops here.
            return stop(
                Stage::Soaking { batch, until },
                Phase::Paused,
                Reason::BatchFailed,
                why,
            );
        }
        let mut msg = format!(
            "batch {} done; soaking until {}",
            batch.number,
            until.to_rfc3339()
        );
        if let Some(next) = next {
            msg.push_str(&format!("; meanwhile {next}"));
        }
        stop(
            Stage::Soaking { batch, until },
            Phase::Soaking,
            Reason::BatchSoak,
            msg,
        )
    }

    /// Pipelining: start or advance the next batch while the current one soaks, through the
    /// stages that disrupt nothing (surge, Ready, gates); it stops short of cordoning, which
    /// waits until it is the current batch. A cancelled one is undone here. Returns what it
    /// does or waits for, for the status.
    fn advance_next(&mut self, cp: &mut Checkpoint) -> Option<String> {
        let mut stage = match cp.next.take() {
            Some(next) => *next,
            None => {
                // A replace pool brings nothing up before it removes: its next batch has
                // nothing to pipeline, and waits for the soak like any removal.
                if !self.desired.policy.pipeline || cp.halted.is_some() || self.replaces() {
                    return None;
                }
                let remaining = self.remaining(Some(cp));
                if remaining == 0 {
                    return None;
                }
                Stage::Surging {
                    batch: self.choose_batch(cp, remaining).ok()?,
                }
            }
        };
        for _ in 0..8 {
            let number = stage.batch().map_or(0, |b| b.number);
            let named = move |m: String| {
                if m.starts_with("batch ") || m.starts_with("undoing batch") {
                    m
                } else {
                    format!("batch {number}: {m}")
                }
            };
            let step = match stage {
                Stage::Surging { batch } => self.surging(cp, batch),
                Stage::WaitingReady { batch } => self.waiting_ready(cp, batch),
                Stage::Gating { batch } => self.gating(cp, batch),
                Stage::Abandoning { batch, why, halt } => self.abandoning(cp, batch, why, halt),
                other => {
                    // Never recorded as a next batch; kept rather than lost.
                    cp.next = Some(Box::new(other));
                    return None;
                }
            };
            match step {
                Step::Next(Stage::Cordoning { batch }) => {
                    let note = format!(
                        "batch {} is Ready and gated and cordons when the soak ends",
                        batch.number
                    );
                    cp.next = Some(Box::new(Stage::Gating { batch }));
                    return Some(note);
                }
                Step::Next(Stage::Between) => return None,
                Step::Next(s) => stage = s,
                Step::Stop {
                    stage: Stage::Between,
                    message,
                    ..
                } => return Some(named(message)),
                Step::Stop { stage, message, .. } => {
                    cp.next = Some(Box::new(stage));
                    return Some(named(message));
                }
            }
        }
        None
    }

    fn abandoning(
        &mut self,
        cp: &mut Checkpoint,
        batch: Batch,
        why: String,
        halt: Option<String>,
    ) -> Step {
        let owner = owner(&self.desired.name, &batch);
        // Invariant 8 while the batch is undone: what the cloud makes meanwhile boots the
        // image the pool came from.
        self.template_on_origin(cp);
        self.give_back_old_nodes(&batch, &owner, &why);
        let (left, to_drain, new) = self.take_back_new_nodes(&batch, &owner, &why);
        let waiting = self.drain(cp, batch.number, &to_drain, None, &mut Vec::new());
        let pending_surge = self.pending_surge(&batch, new.len());
        if left.is_empty() && !pending_surge && self.actions.is_empty() {
            if let Some(why) = halt {
                cp.halted = Some(why.clone());
                return stop(Stage::Between, Phase::Paused, Reason::BatchFailed, why);
            }
            return Step::Next(Stage::Between);
        }
        let mut msg = format!("undoing batch {}: {why}", batch.number);
        if !waiting.is_empty() {
            msg.push_str(&format!("; draining {}", waiting.join(", ")));
        }
        if pending_surge {
            msg.push_str("; waiting for the cloud to list the surge instances");
        }
        stop(
            Stage::Abandoning { batch, why, halt },
            Phase::RollingBack,
            Reason::Abandoning,
            msg,
        )
    }

    /// Undoing a batch gives its old nodes back first: capacity returns before anything
    /// else is drained.
    fn give_back_old_nodes(&mut self, batch: &Batch, owner: &str, why: &str) {
        for c in &batch.old_nodes {
            if let Some(n) = self.obs.node(&c.node)
                && n.cordoned
                && n.cordoned_by.as_deref() == Some(owner)
            {
                self.push(
                    Action::Uncordon {
                        node: n.name.clone(),
                    },
                    format!("batch {} abandoned: {why}", batch.number),
                );
            }
        }
    }

    /// The instances an undone batch brought up leave like any replaced node: cordoned, then
    /// re-observed and drained, then terminated with decrement. Never cordon and terminate in
    /// the same plan: a pod scheduled onto a Ready, apparently empty node between this
    /// observation and the cordon would die without eviction (invariant 3). Returns the
    /// instances still there, the nodes to drain, and the batch's new instances.
    fn take_back_new_nodes(
        &mut self,
        batch: &Batch,
        owner: &str,
        why: &str,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        let mut left = Vec::new();
        let mut to_drain = Vec::new();
        let new: Vec<String> = self
            .new_instances_of(batch)
            .into_iter()
            .filter(|id| !batch.replaced.contains(id))
            .collect();
        for id in &new {
            let Some(inst) = self.obs.instance(id) else {
                continue;
            };
            left.push(id.clone());
            if inst.lifecycle == crate::cloud::Lifecycle::Terminating {
                continue;
            }
            match self.obs.node_of(id) {
                Some(n) if !n.cordoned => {
                    // Cordoned first, so that nothing new lands on it; terminated once an
                    // observation made after the cordon shows it empty.
                    self.push(
                        Action::Cordon {
                            node: n.name.clone(),
                            owner: owner.to_string(),
                        },
                        format!(
                            "batch {} abandoned: its new node {} leaves",
                            batch.number, n.name
                        ),
                    );
                    if n.evictable().next().is_some() {
                        to_drain.push(n.name.clone());
                    }
                }
                Some(n) if n.blocking_termination().next().is_some() => {
                    to_drain.push(n.name.clone())
                }
                n => self.push(
                    Action::Terminate {
                        instance_id: id.clone(),
                        node: n.map(|n| n.name.clone()),
                    },
                    format!(
                        "batch {} abandoned ({why}): its instance {id} runs no workload",
                        batch.number
                    ),
                ),
            }
        }
        (left, to_drain, new)
    }

    /// Whether surge instances of an undone batch may still be listed late: a group whose
    /// capacity is still raised for the batch has instances to come, and they must be
    /// terminated too. Once `nodeReadyTimeout` has passed, the request is taken back instead.
    fn pending_surge(&mut self, batch: &Batch, listed_new: usize) -> bool {
        let expected = batch.old_nodes.len();
        let mut pending_surge =
            self.obs.group.desired >= self.surge_capacity(batch) && listed_new < expected;
        if pending_surge
            && self.now >= batch.stage_since + dur(self.desired.policy.node_ready_timeout)
        {
            // The cloud still has not created them: take the request back, down to exactly
            // the instances it lists, re-checked right before the call (`WithdrawSurge`), so
            // that the cloud never gets to choose an instance to remove.
            let listed: Vec<String> = self.obs.live_instances().map(|i| i.id.clone()).collect();
            let missing = (expected - listed_new) as u32;
            if (listed.len() as u32) < self.obs.group.desired {
                self.push(
                    Action::WithdrawSurge {
                        desired: listed.len() as u32,
                        instances: listed,
                    },
                    format!(
                        "batch {} abandoned: withdraw the {missing} surge instance(s) the cloud never created",
                        batch.number
                    ),
                );
            }
            pending_surge = false;
        }
        pending_surge
    }

    fn pool_soak(&mut self, cp: &mut Checkpoint, until: DateTime<Utc>) -> Step {
        match &self.obs.gates {
            GateVerdict::Failed { gate, reason } => {
                let why = format!("health gate {gate} failed during the pool soak: {reason}");
                self.gate_failed(cp, Stage::PoolSoak { until }, why)
            }
            GateVerdict::Pending(g) if self.now >= until => {
                self.blocked_by = vec![format!("gate {g}")];
                stop(
                    Stage::PoolSoak { until },
                    Phase::Soaking,
                    Reason::GatePending,
                    format!("pool soaked; waiting for health gate {g}"),
                )
            }
            _ if self.now >= until => Step::Next(Stage::Cleanup),
            _ => stop(
                Stage::PoolSoak { until },
                Phase::Soaking,
                Reason::PoolSoak,
                format!(
                    "every batch done; soaking the pool until {}",
                    until.to_rfc3339()
                ),
            ),
        }
    }

    fn cleanup(&mut self, cp: &mut Checkpoint) -> Step {
        let g = &self.obs.group;
        // Worked example: max 4 raised to 6 for the surge; the autoscaler grew the group to 5
        // meanwhile. The max goes back to 5: as close to 4 as it can without the cloud
        // removing an instance of its choosing, and no headroom is left for more growth.
        let max = cp.original_max.max(g.desired);
        if g.max != max {
            let grew = if max > cp.original_max {
                format!(
                    " (not {}: the group grew to {} meanwhile)",
                    cp.original_max, g.desired
                )
            } else {
                String::new()
            };
            self.push(
                Action::SetMax { max },
                format!(
                    "rotation done: restore the group's maximum size from {} to {max}{grew}",
                    g.max
                ),
            );
        }
        let partial = !cp.rolling_back && self.desired.policy.percent < 100;
        let template = if partial {
            cp.origin_image.clone()
        } else {
            cp.target_image.clone()
        };
        if g.template_image != template {
            self.push(
                Action::SetImage {
                    image: template.clone(),
                },
                if partial {
                    format!(
                        "partial rollout ({}%) done: replacements the cloud makes must boot the old image {template}",
                        self.desired.policy.percent
                    )
                } else {
                    format!("rotation done: new instances boot {template}")
                },
            );
        }
        for name in &cp.annotated_nodes {
            let removal = Action::SetScaleDownDisabled {
                node: name.clone(),
                disabled: false,
            };
            // `release_annotations` may have asked for it already in this plan.
            if let Some(n) = self.obs.node(name)
                && n.scale_down_disabled
                && !self.actions.iter().any(|a| a.action == removal)
            {
                self.push(
                    removal,
                    "rotation done: the autoscaler may manage this node again",
                );
            }
        }
        if !self.actions.is_empty() {
            return stop(
                Stage::Cleanup,
                Phase::Soaking,
                Reason::Cleanup,
                "rotation done; restoring the group",
            );
        }
        cp.annotated_nodes.clear();
        Step::Next(Stage::Done)
    }

    fn done(&mut self, cp: &mut Checkpoint) -> Step {
        let d = self.desired;
        if let Some(from) = cp
            .rejected_image
            .as_ref()
            .filter(|_| d.image != cp.target_image)
        {
            let why = cp.rollback_reason.clone().unwrap_or_default();
            return stop(
                Stage::Done,
                Phase::Failed,
                Reason::RolledBack,
                format!("rolled back from {from}: {why}"),
            );
        }
        if let Some(from) = &cp.rejected_image {
            // The repo pins the image the pool rolled back to again (the revert of the bad
            // pin): the stop's cause is gone, nobody needs to act. The pool stays done and
            // keeps the rejected image, so pinning it again still stays put.
            return stop(
                Stage::Done,
                Phase::Succeeded,
                Reason::RolledBack,
                format!(
                    "rolled back to {} ({}), which the repo pins; {from} was rejected",
                    d.version, cp.target_image
                ),
            );
        }
        if cp.rolling_back {
            return stop(
                Stage::Done,
                Phase::Succeeded,
                Reason::RolledBack,
                format!("rolled back to {} ({})", cp.target_version, cp.target_image),
            );
        }
        stop(
            Stage::Done,
            Phase::Succeeded,
            Reason::Done,
            format!(
                "{} of {} node(s) on {} ({})",
                self.obs
                    .nodes
                    .iter()
                    .filter(|n| self.image_of(n).as_deref() == Some(cp.target_image.as_str()))
                    .count(),
                self.obs.nodes.len(),
                cp.target_version,
                cp.target_image
            ),
        )
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
    nodes
        .iter()
        .map(|c| c.node.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
