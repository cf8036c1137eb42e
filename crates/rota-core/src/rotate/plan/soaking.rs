//! Gating and soaking: a batch's gates once its new nodes are Ready, a failed gate (pause
//! or roll back), the batch soak with the next batch pipelined during it, and the pool soak.

use chrono::{DateTime, Utc};

use super::{Planner, Step, abandon, cancel_next, stop};
use crate::fleet::resolved::OnGateFailure;
use crate::rotate::checkpoint::{Batch, Checkpoint, Stage};
use crate::rotate::observed::GateVerdict;
use crate::rotate::phase::Phase;
use crate::rotate::stop::Reason;

impl<'a> Planner<'a> {
    pub(super) fn gating(&mut self, cp: &mut Checkpoint, mut batch: Batch) -> Step {
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
    pub(super) fn gate_failed(&mut self, cp: &mut Checkpoint, stage: Stage, why: String) -> Step {
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

    pub(super) fn soaking(
        &mut self,
        cp: &mut Checkpoint,
        batch: Batch,
        until: DateTime<Utc>,
    ) -> Step {
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
    pub(super) fn advance_next(&mut self, cp: &mut Checkpoint) -> Option<String> {
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

    pub(super) fn pool_soak(&mut self, cp: &mut Checkpoint, until: DateTime<Utc>) -> Step {
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
}
