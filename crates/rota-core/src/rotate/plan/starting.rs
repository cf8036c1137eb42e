//! A rotation's start: the desired image reconciled with the checkpoint (a new version, a
//! revert rolled back fast, a superseded target), the holds before a first surge (an image
//! the cloud cannot launch, a kubelet the control plane would not accept, a start hold), and
//! the checkpoint a new rotation begins with.

use std::collections::BTreeMap;

use super::{Outcome, Planner, abandon, cancel_next};
use crate::rotate::checkpoint::{Checkpoint, Stage};
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl<'a> Planner<'a> {
    /// Compare the desired image with the checkpoint: keep going, start a rotation, supersede
    /// it with a newer version, or roll back fast to the origin.
    pub(super) fn reconcile_desired(
        &mut self,
        cp: Option<Checkpoint>,
    ) -> Result<Checkpoint, Box<Outcome>> {
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
    pub(super) fn image_held(
        &self,
        cp: Option<&Checkpoint>,
        needs_rotation: bool,
    ) -> Option<Outcome> {
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
    pub(super) fn skew_held(
        &self,
        cp: Option<&Checkpoint>,
        needs_rotation: bool,
    ) -> Option<Outcome> {
        let d = self.desired;
        let onto_it = match cp {
            None => needs_rotation || self.obs.group.template_image != d.image,
            Some(c) if c.target_image == d.image => c.stage == Stage::Done && needs_rotation,
            Some(c) => c.origin_image != d.image,
        };
        if !onto_it {
            return None;
        }
        let why = crate::rotate::skew::hold(d, self.obs.control_plane.as_ref())?;
        Some(Outcome {
            checkpoint: None,
            phase: Phase::Waiting,
            reason: Reason::VersionSkew,
            message: why,
        })
    }

    /// Back to the image the pool came from, mid-rotation: a fast rollback. A batch that has
    /// not finished draining is undone rather than finished.
    pub(super) fn roll_back_fast(&self, cp: &mut Checkpoint) {
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
    pub(super) fn supersede(&self, cp: &mut Checkpoint) {
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
    pub(super) fn held(&mut self, cp: Option<Checkpoint>, hold: &str) -> Outcome {
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
    pub(super) fn start(&self, previous: Option<&Checkpoint>) -> Checkpoint {
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
    pub(super) fn remaining(&self, cp: Option<&Checkpoint>) -> u32 {
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
}
