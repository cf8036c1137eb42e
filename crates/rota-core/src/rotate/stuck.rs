//! Stuck detection: what deserves a page (errors are classified in [`crate::errors`]); the
//! status composer ([`super::status`]) runs it on every status it composes.
//!
//! Pure functions, no clock: the controller passes `now`. Two rules keep pages rare and
//! meaningful:
//! - A pool is *stuck* when a rotation is under way and its stage has not changed for longer
//!   than the threshold (plus any wait the plan itself scheduled, such as a soak), or rota
//!   halted it (a drain timeout with `pause`, nodes never Ready) and it has not moved since.
//!   Waiting for a maintenance window, a pause asked for in git, or a finished pool are never
//!   stuck.
//! - An error *alerts* only when retrying cannot fix it (permission denied, quota, an invalid
//!   request, a failed gate, a rejected commit). Throttling and transient failures are retried
//!   quietly; if they never clear, the pool stops progressing and stuck detection names the
//!   last error as the cause, so nothing that truly blocks goes unreported.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::checkpoint::Stage;
use super::phase::Phase;
use super::resource::{Condition, NodePoolRotationStatus};
use crate::errors::Classified;

/// The condition type rota sets on a NodePoolRotation.
pub const CONDITION_TYPE: &str = "Stuck";

/// Why a pool is stuck, for the condition, the Event and `rota_pool_stuck{reason}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// CamelCase, stable: `DrainBlocked`, `NodesNotReady`, ...
    pub reason: &'static str,
    pub message: String,
    /// When the pool last moved.
    pub since: DateTime<Utc>,
}

/// Decide whether the pool is stuck. `last_error` is the most recent error of the pool's
/// reconciles since it last progressed (if any): it names the cause when retries never clear.
pub fn detect(
    status: &NodePoolRotationStatus,
    last_error: Option<&Classified>,
    now: DateTime<Utc>,
    threshold: Duration,
) -> Option<Stuck> {
    // A pool rota itself halted (drain timeout with `pause`, new nodes never Ready, a gate
    // with `pause`) waits for a human just as surely as one that stopped moving; a pause asked
    // for in git (`paused: true`, no halt) is intended and stays quiet.
    let halted = status.phase == Phase::Paused
        && status
            .checkpoint
            .as_ref()
            .is_some_and(|c| c.halted.is_some());
    if !halted
        && !matches!(
            status.phase,
            Phase::Rotating | Phase::Soaking | Phase::RollingBack
        )
    {
        return None;
    }
    let stage = status.checkpoint.as_ref().map(|c| &c.stage);
    // The stage's own start is the truest "last moved" (a drain retrying evictions issues
    // actions without moving); fall back to the status's lastProgressTime.
    let since = stage
        .and_then(|s| s.batch().map(|b| b.stage_since))
        .or(status.last_progress_time)?;
    // A soak is a wait the plan chose: the clock starts when it should have ended (unless
    // the pool halted in it: a pipelined batch that failed during the soak).
    let (since, stage_reason) = match stage {
        Some(Stage::Soaking { until, .. }) | Some(Stage::PoolSoak { until }) if !halted => {
            (since.max(*until), "SoakNotConcluding")
        }
        Some(Stage::Surging { .. }) => (since, "SurgeNotLaunched"),
        Some(Stage::WaitingReady { .. }) => (since, "NodesNotReady"),
        Some(Stage::Gating { .. }) => (since, "GateUndecided"),
        Some(Stage::Cordoning { .. }) => (since, "CordonNotApplied"),
        Some(Stage::Draining { .. }) => (since, "DrainBlocked"),
        Some(Stage::Terminating { .. }) => (since, "TerminationPending"),
        Some(Stage::Abandoning { .. }) => (since, "AbandonPending"),
        _ => (since, "NoProgress"),
    };
    let stage_reason = if halted { "Halted" } else { stage_reason };
    let idle = (now - since).to_std().ok()?;
    if idle <= threshold {
        return None;
    }
    let batch = stage
        .and_then(|s| s.batch())
        .map(|b| format!(" (batch {})", b.number))
        .unwrap_or_default();
    let stage_name = stage.map(|s| s.name()).unwrap_or("none");
    let mut message = format!(
        "no progress for {} in stage {stage_name}{batch} (threshold {})",
        human(idle),
        human(threshold)
    );
    if let Some(e) = last_error {
        message.push_str(&format!("; last error: {}", e.reason));
    }
    if !status.message.is_empty() {
        message.push_str(&format!("; {}", status.message));
    }
    Some(Stuck {
        reason: stage_reason,
        message,
        since,
    })
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// What changed, so that the controller posts one Event per transition (not per reconcile).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Became stuck (Warning Event `Stuck`), or stuck for a different reason.
    Raised(Stuck),
    /// Moved again (Normal Event `Unstuck`).
    Cleared,
}

impl Transition {
    /// The Event to post for this transition: (warning?, reason, note). The controller hands
    /// these to its kube-rs `Recorder` on the NodePoolRotation.
    pub fn event(&self) -> (bool, &'static str, String) {
        match self {
            Transition::Raised(s) => (true, "Stuck", format!("{}: {}", s.reason, s.message)),
            Transition::Cleared => (false, "Unstuck", "the rotation moves again".to_string()),
        }
    }
}

/// Set the `Stuck` condition on `status` (keeping `lastTransitionTime` while it holds) and
/// return the transition, if any, against the condition already there.
pub fn apply_condition(
    status: &mut NodePoolRotationStatus,
    stuck: Option<&Stuck>,
    now: DateTime<Utc>,
) -> Option<Transition> {
    let previous = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_TYPE)
        .cloned();
    let was = previous
        .as_ref()
        .filter(|c| c.status == "True")
        .map(|c| c.reason.clone());
    let (cond_status, reason, message) = match stuck {
        Some(s) => ("True", s.reason.to_string(), s.message.clone()),
        None => ("False", "Progressing".to_string(), String::new()),
    };
    let kept_time = previous
        .as_ref()
        .filter(|c| c.status == cond_status)
        .map(|c| c.last_transition_time);
    let mut condition = Condition::new(
        CONDITION_TYPE,
        cond_status,
        &reason,
        &message,
        status.observed_generation,
        now,
    );
    if let Some(kept) = kept_time {
        condition.last_transition_time = kept;
    }
    status.conditions.retain(|c| c.type_ != CONDITION_TYPE);
    status.conditions.push(condition);
    match (was, stuck) {
        (Some(r), Some(s)) if r == s.reason => None,
        (_, Some(s)) => Some(Transition::Raised(s.clone())),
        (Some(_), None) => Some(Transition::Cleared),
        (None, None) => None,
    }
}

/// Remembers a pool's errors since its last progress: the first one that alerts is reported
/// once; retryable ones are only kept as the likely cause should the pool become stuck.
#[derive(Clone, Debug, Default)]
pub struct ErrorTracker {
    last: Option<Classified>,
    alerted: Option<&'static str>,
}

impl ErrorTracker {
    /// Record an error; returns `Some(reason)` when it should alert now (once per reason).
    pub fn record(&mut self, err: Classified) -> Option<&'static str> {
        let alert = (err.class.alerts() && self.alerted != Some(err.reason)).then_some(err.reason);
        if alert.is_some() {
            self.alerted = alert;
        }
        self.last = Some(err);
        alert
    }

    /// The pool moved or a call succeeded: whatever failed before has healed.
    pub fn healed(&mut self) {
        *self = ErrorTracker::default();
    }

    pub fn last(&self) -> Option<&Classified> {
        self.last.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{CloudError, CloudErrorKind};
    use crate::errors::{Classify, KubeCall, kube_status};

    fn http(code: u16) -> Classified {
        kube_status(code, KubeCall::Act)
    }
    use crate::rotate::checkpoint::{Batch, Checkpoint};
    use chrono::TimeZone;

    const TEN_MIN: Duration = Duration::from_secs(600);

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn batch(since: i64) -> Batch {
        Batch {
            number: 2,
            old_nodes: vec![],
            target_capacity: 6,
            instances_before: vec![],
            terminating_before: vec![],
            taken_back: vec![],
            new_instances: vec![],
            replaced: vec![],
            never_ready: vec![],
            ready_retries: 0,
            replace_at: None,
            stage_since: t(since),
            started_at: None,
            cordoned_at: None,
            deferral_ended: Vec::new(),
            replace: false,
        }
    }

    fn status(phase: Phase, stage: Option<Stage>, last_progress: i64) -> NodePoolRotationStatus {
        NodePoolRotationStatus {
            phase,
            total: 6,
            on_target: 2,
            last_progress_time: Some(t(last_progress)),
            checkpoint: stage.map(|stage| Checkpoint {
                origin_image: "ami-old".into(),
                target_image: "ami-new".into(),
                target_version: "2026.11.2".into(),
                original_desired: 4,
                original_max: 8,
                pool_size: 4,
                batches_started: 2,
                rolling_back: false,
                rejected_image: None,
                rollback_reason: None,
                last_eviction: None,
                halted: None,
                operator_paused: None,
                operator_request: None,
                fleet_stop: None,
                annotated_nodes: vec![],
                fenced_at: None,
                capacity_changed_at: None,
                stage,
                next: None,
                pace: None,
                owner_update: None,
                drift: None,
                blue_green: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_drain_without_progress_past_the_threshold_is_stuck_with_the_cause() {
        let s = status(
            Phase::Rotating,
            Some(Stage::Draining { batch: batch(0) }),
            0,
        );
        assert_eq!(
            detect(&s, None, t(600), TEN_MIN),
            None,
            "at the threshold: not yet"
        );
        let err = http(429);
        let stuck = detect(&s, Some(&err), t(601), TEN_MIN).expect("stuck");
        assert_eq!(stuck.reason, "DrainBlocked");
        assert_eq!(stuck.since, t(0));
        assert_eq!(
            stuck.message,
            "no progress for 10m1s in stage Draining (batch 2) (threshold 10m); last error: Throttled"
        );
    }

    #[test]
    fn the_stage_clock_wins_over_churning_progress_times() {
        // Evictions retried every loop bump lastProgressTime; the stage has not moved.
        let s = status(
            Phase::Rotating,
            Some(Stage::Draining { batch: batch(0) }),
            3000,
        );
        assert_eq!(
            detect(&s, None, t(3001), TEN_MIN).unwrap().reason,
            "DrainBlocked"
        );
    }

    #[test]
    fn waiting_paused_failed_and_done_pools_are_never_stuck() {
        for phase in [
            Phase::Pending,
            Phase::Waiting,
            Phase::Paused,
            Phase::Failed,
            Phase::Succeeded,
        ] {
            let s = status(phase, Some(Stage::Draining { batch: batch(0) }), 0);
            assert_eq!(detect(&s, None, t(100_000), TEN_MIN), None, "{phase}");
        }
    }

    #[test]
    fn a_pool_halted_during_a_soak_is_stuck_from_the_halt_not_the_soak_end() {
        // A pipelined batch failed during batch 2's soak: the pool halts in Soaking, whose
        // planned end (t = 100,000) does not delay the alert.
        let mut s = status(
            Phase::Paused,
            Some(Stage::Soaking {
                batch: batch(0),
                until: t(100_000),
            }),
            0,
        );
        s.checkpoint.as_mut().unwrap().halted = Some("batch 3: not Ready within 15m".into());
        let stuck = detect(&s, None, t(601), TEN_MIN).expect("stuck");
        assert_eq!(stuck.reason, "Halted");
        assert_eq!(stuck.since, t(0));
    }

    #[test]
    fn a_pool_rota_halted_is_stuck_but_a_pause_from_git_is_not() {
        let mut s = status(Phase::Paused, Some(Stage::Draining { batch: batch(0) }), 0);
        assert_eq!(detect(&s, None, t(100_000), TEN_MIN), None);
        s.checkpoint.as_mut().unwrap().halted = Some("drain timed out after 1h".into());
        s.message = "drain timed out after 1h".into();
        let stuck = detect(&s, None, t(601), TEN_MIN).unwrap();
        assert_eq!(stuck.reason, "Halted");
        assert!(
            stuck.message.ends_with("; drain timed out after 1h"),
            "{}",
            stuck.message
        );
    }

    #[test]
    fn a_soak_counts_from_its_planned_end() {
        let s = status(Phase::Soaking, Some(Stage::PoolSoak { until: t(7200) }), 0);
        assert_eq!(detect(&s, None, t(7200 + 600), TEN_MIN), None);
        let stuck = detect(&s, None, t(7200 + 601), TEN_MIN).unwrap();
        assert_eq!(stuck.reason, "SoakNotConcluding");
    }

    #[test]
    fn stage_names_the_reason() {
        let cases = [
            (Stage::Surging { batch: batch(0) }, "SurgeNotLaunched"),
            (Stage::WaitingReady { batch: batch(0) }, "NodesNotReady"),
            (Stage::Gating { batch: batch(0) }, "GateUndecided"),
            (Stage::Terminating { batch: batch(0) }, "TerminationPending"),
            (Stage::Between, "NoProgress"),
        ];
        for (stage, reason) in cases {
            let s = status(Phase::Rotating, Some(stage), 0);
            assert_eq!(detect(&s, None, t(601), TEN_MIN).unwrap().reason, reason);
        }
    }

    #[test]
    fn condition_transitions_once_and_keeps_its_transition_time() {
        let mut s = status(
            Phase::Rotating,
            Some(Stage::Draining { batch: batch(0) }),
            0,
        );
        assert_eq!(apply_condition(&mut s, None, t(10)), None);
        let stuck = detect(&s, None, t(700), TEN_MIN).unwrap();
        assert!(matches!(
            apply_condition(&mut s, Some(&stuck), t(700)),
            Some(Transition::Raised(_))
        ));
        let again = detect(&s, None, t(900), TEN_MIN).unwrap();
        assert_eq!(
            apply_condition(&mut s, Some(&again), t(900)),
            None,
            "no second Event"
        );
        let c = s.conditions.iter().find(|c| c.type_ == "Stuck").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "DrainBlocked")
        );
        assert_eq!(c.last_transition_time, t(700));
        assert_eq!(
            s.conditions.iter().filter(|c| c.type_ == "Stuck").count(),
            1
        );
        assert_eq!(
            apply_condition(&mut s, None, t(950)),
            Some(Transition::Cleared)
        );
        let c = s.conditions.iter().find(|c| c.type_ == "Stuck").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "Progressing")
        );
    }

    #[test]
    fn only_what_cannot_heal_alerts() {
        assert!(!http(429).class.alerts());
        assert!(!http(503).class.alerts());
        assert!(!http(409).class.alerts());
        assert!(http(403).class.alerts());
        let cloud = |kind| CloudError {
            kind,
            call: "SetDesiredCapacity",
            group: "asg/general".into(),
            message: "x".into(),
        };
        assert!(!cloud(CloudErrorKind::Throttled).classify().class.alerts());
        assert!(!cloud(CloudErrorKind::Transient).classify().class.alerts());
        assert!(cloud(CloudErrorKind::Quota).classify().class.alerts());
        assert_eq!(
            cloud(CloudErrorKind::Permission).classify().reason,
            "PermissionDenied"
        );
    }

    /// Throttling for a few minutes that then clears: no alert, no stuck condition, no Event.
    #[test]
    fn a_throttled_fault_that_clears_raises_nothing() {
        let mut tracker = ErrorTracker::default();
        let mut s = status(Phase::Rotating, Some(Stage::Surging { batch: batch(0) }), 0);
        for minute in 0..8 {
            let now = t(minute * 60);
            assert_eq!(tracker.record(http(429)), None);
            let stuck = detect(&s, tracker.last(), now, TEN_MIN);
            assert_eq!(stuck, None);
            assert_eq!(apply_condition(&mut s, stuck.as_ref(), now), None);
        }
        // The call succeeds; the batch moves to the next stage.
        tracker.healed();
        s.checkpoint.as_mut().unwrap().stage = Stage::WaitingReady { batch: batch(480) };
        for minute in 8..15 {
            let now = t(minute * 60);
            let stuck = detect(&s, tracker.last(), now, TEN_MIN);
            assert_eq!(stuck, None);
            assert_eq!(apply_condition(&mut s, stuck.as_ref(), now), None);
        }
        assert!(s.conditions.iter().all(|c| c.status == "False"));
    }

    /// Throttling that never clears ends as a stuck pool naming it, within the threshold.
    #[test]
    fn throttling_that_never_clears_becomes_stuck_naming_it() {
        let mut tracker = ErrorTracker::default();
        let mut s = status(Phase::Rotating, Some(Stage::Surging { batch: batch(0) }), 0);
        let mut raised_at = None;
        for minute in 0..20 {
            let now = t(minute * 60);
            tracker.record(http(429));
            let stuck = detect(&s, tracker.last(), now, TEN_MIN);
            if let Some(Transition::Raised(st)) = apply_condition(&mut s, stuck.as_ref(), now) {
                assert!(
                    st.message.ends_with("last error: Throttled"),
                    "{}",
                    st.message
                );
                raised_at.get_or_insert(minute);
            }
        }
        assert_eq!(raised_at, Some(11));
    }

    #[test]
    fn a_stalled_error_alerts_once_per_reason() {
        let mut tracker = ErrorTracker::default();
        assert_eq!(tracker.record(http(403)), Some("Forbidden"));
        assert_eq!(tracker.record(http(403)), None);
        assert_eq!(tracker.record(http(429)), None);
        tracker.healed();
        assert_eq!(tracker.record(http(403)), Some("Forbidden"));
    }
}
