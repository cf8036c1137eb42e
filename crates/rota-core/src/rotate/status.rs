//! The one status composer: the NodePoolRotation status a reconcile writes is computed here,
//! in one place, from what the reconcile saw and decided (in the manner of cluster-api's
//! `machinedeployment_status.go`): the plan's summary and checkpoint, the previous status,
//! the error the edge met, stuck detection, and the leadership term that writes.
//!
//! Pure: no I/O, no clock (the caller passes `now`).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::observed::Refusal;
use super::outcome::{Plan, StatusSummary};
use super::phase::Phase;
use super::resource::{Condition, Fence, NodePoolRotationStatus};
use super::stop::Reason;
use super::stuck::{self, Stuck, Transition};
use crate::errors::Classified;

/// What a reconcile saw and decided, from which its status is composed.
#[derive(Clone, Debug)]
pub struct Reconciled<'a> {
    pub plan: &'a Plan,
    /// The status the reconcile read (`None` for a new resource).
    pub previous: Option<&'a NodePoolRotationStatus>,
    /// The fleet commit of the spec.
    pub commit: &'a str,
    /// The spec's `metadata.generation`.
    pub generation: Option<i64>,
    pub now: DateTime<Utc>,
    /// The last error only the edge saw (quota, throttling), in words: the cause of a stall is
    /// often one, so it is named next to what the planner says.
    pub last_error: Option<&'a str>,
    /// The last classified error since the pool last moved: the likely cause should it stick.
    pub cause: Option<&'a Classified>,
    /// `--stuck-after`: a rotation without progress for this long is Stuck.
    pub stuck_after: Duration,
    /// The leadership term that writes: ours under election; without one, the term already
    /// stored is kept.
    pub fence: Option<Fence>,
    /// The owner's refusal the plan was made with (`Observed::refused`): kept in the status
    /// while the plan pauses the pool on it, so that a restart does not ask again.
    pub refused: Option<&'a Refusal>,
}

/// `--stuck-after`'s default.
pub const STUCK_AFTER: Duration = Duration::from_secs(30 * 60);

impl<'a> Reconciled<'a> {
    /// A reconcile that met no error, written without election (the stored term is kept).
    pub fn new(
        plan: &'a Plan,
        previous: Option<&'a NodePoolRotationStatus>,
        commit: &'a str,
        generation: Option<i64>,
        now: DateTime<Utc>,
    ) -> Self {
        Reconciled {
            plan,
            previous,
            commit,
            generation,
            now,
            last_error: None,
            cause: None,
            stuck_after: STUCK_AFTER,
            fence: previous.and_then(|p| p.fence.clone()),
            refused: None,
        }
    }
}

/// The composed status and what changed with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Composed {
    pub status: NodePoolRotationStatus,
    /// The rotation moved (a new phase, stage or batch): whatever failed before has healed.
    pub progressed: bool,
    /// Why the pool is stuck, if it is (`rota_pool_stuck{reason}`).
    pub stuck: Option<Stuck>,
    /// A change of the `Stuck` condition, to post as one Event.
    pub transition: Option<Transition>,
    /// Whether the status must be written: it carries a decision or something new to say
    /// against the status the pass read ([`must_write`]); else the pass writes nothing, or
    /// only checks the stored status before it evicts.
    pub must_write: bool,
}

/// Compose the status of one reconcile.
pub fn compose(r: &Reconciled<'_>) -> Composed {
    let mut summary = r.plan.status.clone();
    if let Some(e) = r.last_error
        && summary.phase != Phase::Succeeded
    {
        summary.message = format!("{}{LAST_ERROR}{e})", summary.message);
    }
    // The message is stored four times in the status (once and in three conditions).
    if let std::borrow::Cow::Owned(cut) = super::listing::bounded(&summary.message) {
        summary.message = cut;
    }
    let mut status = summarize(r.plan, &summary, r.previous, r.commit, r.generation, r.now);
    status.fence = r.fence.clone();
    // Only while the pool is paused on it: a plan that moves on (another version) drops it.
    status.refused = r
        .refused
        .filter(|_| r.plan.status.reason == Reason::OwnerRefused.as_str())
        .cloned();
    let progressed = progressed(r.previous, &status);
    // Real progress heals whatever failed before: it is no longer the cause of anything.
    let cause = if progressed { None } else { r.cause };
    // The `Stuck` condition is carried over from the previous status, evaluated anew, and kept
    // as it was while the pool stays stuck for the same reason (so that a stuck pool is not
    // rewritten on every reconcile just to update "no progress for ...").
    let previous_stuck = r.previous.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == stuck::CONDITION_TYPE)
            .cloned()
    });
    if let Some(c) = &previous_stuck {
        status.conditions.push(c.clone());
    }
    let stuck = stuck::detect(&status, cause, r.now, r.stuck_after);
    let transition = stuck::apply_condition(&mut status, stuck.as_ref(), r.now);
    if transition.is_none()
        && let Some(prev) = previous_stuck
        && let Some(c) = status
            .conditions
            .iter_mut()
            .find(|c| c.type_ == stuck::CONDITION_TYPE)
        && c.status == prev.status
        && c.reason == prev.reason
    {
        *c = prev;
    }
    Composed {
        must_write: must_write(r.previous, &status),
        status,
        progressed,
        stuck,
        transition,
    }
}

/// How the last error is appended to a status message (` (last error: ...)`).
const LAST_ERROR: &str = " (last error: ";

/// Whether a composed status that differs from the stored one carries something the next
/// pass, a person or another replica must read now, so that it is written in this pass.
/// While a rotation is under way, a status whose checkpoint, phase, writer, observed spec,
/// conditions, error and stop are the stored ones differs only in what follows from them
/// (the message's wording, the node counts, the progress time and estimate, what holds a
/// wait rota ends by itself): that is folded into the next write that carries a decision
/// (issue 25: a pass that only said "waiting for n7 to be Ready" instead of "... (no node
/// registered)" was a status write each). A pool with no rotation under way (idle, done,
/// not started) is written whenever anything differs, as those writes are rare.
///
/// The checkpoint is compared whole: every checkpoint a plan makes is written before the
/// pass acts on it (invariants 4 and 7) — this only drops writes whose checkpoint is the
/// stored one.
pub fn must_write(prev: Option<&NodePoolRotationStatus>, next: &NodePoolRotationStatus) -> bool {
    let Some(prev) = prev else {
        return true;
    };
    if prev == next {
        return false;
    }
    let rotating = next
        .checkpoint
        .as_ref()
        .is_some_and(|c| c.stage != super::checkpoint::Stage::Done);
    if !rotating {
        return true;
    }
    let error =
        |s: &NodePoolRotationStatus| s.message.split_once(LAST_ERROR).map(|(_, e)| e.to_string());
    // A stop a person must end is said again when anything of it changes (its Event is
    // posted then); one rota ends by itself, when its reason changes. A drain is moving
    // unless something holds it: held or not is the same wait.
    let stop = |s: &NodePoolRotationStatus| {
        s.stop.as_ref().and_then(|n| match n.by {
            super::stop::MovedBy::Person => Some(n.clone()),
            super::stop::MovedBy::Rota if n.reason == "Draining" => None,
            super::stop::MovedBy::Rota => Some(super::stop::StopNote {
                reason: n.reason.clone(),
                by: n.by,
                cause: String::new(),
                blocked_by: Vec::new(),
                next: String::new(),
            }),
        })
    };
    let conditions = |s: &NodePoolRotationStatus| {
        s.conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect::<Vec<_>>()
    };
    prev.checkpoint != next.checkpoint
        || prev.phase != next.phase
        || prev.fence != next.fence
        || prev.observed_generation != next.observed_generation
        || prev.observed_commit != next.observed_commit
        || error(prev) != error(next)
        || stop(prev) != stop(next)
        || conditions(prev) != conditions(next)
}

/// Whether the rotation moved between two statuses: a new phase, stage or batch.
pub fn progressed(prev: Option<&NodePoolRotationStatus>, next: &NodePoolRotationStatus) -> bool {
    let key = |s: &NodePoolRotationStatus| {
        let stage = s.checkpoint.as_ref().map(|c| &c.stage);
        (
            s.phase,
            stage.map(|st| st.name()),
            stage.and_then(|st| st.batch()).map(|b| b.number),
        )
    };
    prev.is_none_or(|p| key(p) != key(next))
}

/// The status for `plan` alone, given the previous one: phase, counts, the plan's
/// conditions, progress time and estimate (the part of [`compose`] that reads only the plan).
fn summarize(
    plan: &Plan,
    s: &StatusSummary,
    previous: Option<&NodePoolRotationStatus>,
    commit: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> NodePoolRotationStatus {
    let moved = !plan.actions.is_empty()
        || previous.is_none_or(|p| {
            p.phase != s.phase
                || p.checkpoint.as_ref().map(|c| c.stage.name())
                    != plan.checkpoint.as_ref().map(|c| c.stage.name())
        });
    let last_progress_time = if moved {
        Some(now)
    } else {
        previous.and_then(|p| p.last_progress_time)
    };
    // The estimate is taken when the stage (or phase) changes and kept in between: it is a
    // time, not a countdown, and a status that changed on every pass would be written on
    // every pass.
    let estimated_completion = match (moved, previous) {
        (false, Some(p)) => p.estimated_completion,
        _ => s.remaining.and_then(|d| {
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
        }),
    };
    let old = previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    let cond = |type_: &str, on: bool| {
        let status = if on { "True" } else { "False" };
        let mut c = Condition::new(type_, status, s.reason, &s.message, generation, now);
        if let Some(kept) = old.iter().find(|c| c.type_ == type_ && c.status == status) {
            c.last_transition_time = kept.last_transition_time;
        }
        c
    };
    NodePoolRotationStatus {
        phase: s.phase,
        message: s.message.clone(),
        stop: s.stop.clone(),
        total: s.total,
        on_target: s.on_target,
        ready: s.ready,
        checkpoint: plan.checkpoint.clone(),
        conditions: vec![
            cond("Ready", s.phase == Phase::Succeeded),
            cond(
                "Progressing",
                matches!(
                    s.phase,
                    Phase::Rotating | Phase::Soaking | Phase::RollingBack
                ),
            ),
            cond("Paused", s.phase == Phase::Paused),
        ],
        observed_commit: Some(commit.to_string()),
        observed_generation: generation,
        last_progress_time,
        estimated_completion,
        fence: None,
        refused: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rotate::action::{Action, Planned};

    fn status_for(
        plan: &Plan,
        previous: Option<&NodePoolRotationStatus>,
        commit: &str,
        generation: Option<i64>,
        now: DateTime<Utc>,
    ) -> NodePoolRotationStatus {
        compose(&Reconciled::new(plan, previous, commit, generation, now)).status
    }

    fn plan(phase: Phase, actions: usize) -> Plan {
        Plan {
            actions: (0..actions)
                .map(|i| Planned {
                    action: Action::Uncordon {
                        node: format!("n{i}"),
                    },
                    reason: "r".into(),
                })
                .collect(),
            dry_run: vec![],
            checkpoint: None,
            status: StatusSummary {
                phase,
                reason: "Draining",
                message: "draining: app/web-1 (evicting)".into(),
                stop: None,
                total: 4,
                on_target: 2,
                ready: 4,
                remaining: None,
            },
        }
    }

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + s, 0).unwrap()
    }

    /// An owner's refusal is kept in the status while the plan pauses the pool on it (a
    /// restart reads it there), and dropped once the plan moves on.
    #[test]
    fn a_refusal_is_kept_only_while_the_pool_is_paused_on_it() {
        let refusal = Refusal {
            action: "create pool general-rota-2 on x (0 nodes)".into(),
            why: "InvalidParameter: not the newest node image".into(),
        };
        let mut paused = plan(Phase::Paused, 0);
        paused.status.reason = Reason::OwnerRefused.as_str();
        let mut r = Reconciled::new(&paused, None, "c", None, at(0));
        r.refused = Some(&refusal);
        assert_eq!(compose(&r).status.refused.as_ref(), Some(&refusal));
        let moving = plan(Phase::Rotating, 1);
        let mut r = Reconciled::new(&moving, None, "c", None, at(0));
        r.refused = Some(&refusal);
        assert_eq!(compose(&r).status.refused, None, "the pool moved on");
    }

    #[test]
    fn status_records_progress_and_keeps_condition_transition_times() {
        let s1 = status_for(&plan(Phase::Rotating, 1), None, "abc", Some(3), at(0));
        assert_eq!(s1.last_progress_time, Some(at(0)));
        assert_eq!(s1.observed_commit.as_deref(), Some("abc"));
        let progressing = s1
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .unwrap();
        assert_eq!(progressing.status, "True");
        // Same phase, nothing done: no progress, transition times kept.
        let s2 = status_for(&plan(Phase::Rotating, 0), Some(&s1), "abc", Some(3), at(60));
        assert_eq!(s2.last_progress_time, Some(at(0)));
        assert_eq!(s2.conditions, s1.conditions);
        // Paused: the Paused condition flips and gets a new transition time.
        let s3 = status_for(&plan(Phase::Paused, 0), Some(&s2), "abc", Some(3), at(120));
        let paused = s3.conditions.iter().find(|c| c.type_ == "Paused").unwrap();
        assert_eq!(paused.status, "True");
        assert_eq!(paused.last_transition_time, at(120));
        assert_eq!(s3.last_progress_time, Some(at(120)));
    }

    #[test]
    fn the_estimated_completion_is_a_time_kept_until_the_rotation_moves() {
        let timed = |phase, actions, mins: u64| {
            let mut p = plan(phase, actions);
            p.status.remaining = Some(std::time::Duration::from_secs(mins * 60));
            p
        };
        let s1 = status_for(&timed(Phase::Rotating, 1, 30), None, "abc", Some(3), at(0));
        assert_eq!(s1.estimated_completion, Some(at(1800)));
        // A pass later, nothing moved: the same time, even if the estimate drifted (so the
        // status is not rewritten for it).
        let s2 = status_for(
            &timed(Phase::Rotating, 0, 29),
            Some(&s1),
            "abc",
            Some(3),
            at(90),
        );
        assert_eq!(s2.estimated_completion, Some(at(1800)));
        // The rotation moved: estimated again.
        let s3 = status_for(
            &timed(Phase::Soaking, 0, 10),
            Some(&s2),
            "abc",
            Some(3),
            at(600),
        );
        assert_eq!(s3.estimated_completion, Some(at(1200)));
    }

    #[test]
    fn the_edges_last_error_is_named_until_the_pool_succeeds() {
        let p = plan(Phase::Rotating, 0);
        let mut r = Reconciled::new(&p, None, "abc", Some(1), at(0));
        r.last_error = Some("SetDesiredCapacity on g failed (QuotaExceeded): limit");
        let s = compose(&r).status;
        assert_eq!(
            s.message,
            "draining: app/web-1 (evicting) (last error: SetDesiredCapacity on g failed (QuotaExceeded): limit)"
        );
        let done = plan(Phase::Succeeded, 0);
        let mut r = Reconciled::new(&done, None, "abc", Some(1), at(0));
        r.last_error = Some("old");
        assert_eq!(compose(&r).status.message, "draining: app/web-1 (evicting)");
    }

    #[test]
    fn a_stuck_condition_is_kept_as_it_was_while_the_reason_holds() {
        use crate::errors::{Class, Classified};
        let mut p = plan(Phase::Rotating, 0);
        p.checkpoint = Some(
            serde_json::from_value(serde_json::json!({
                "originImage": "a", "targetImage": "b", "targetVersion": "v2",
                "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 1,
                "stage": {"name": "draining", "batch": {
                    "number": 1, "oldNodes": [], "targetCapacity": 6, "instancesBefore": [],
                    "stageSince": "2026-09-21T13:46:40Z"}}
            }))
            .unwrap(),
        );
        let throttled = Classified::new(Class::Transient, "Throttled");
        let first = Reconciled::new(&p, None, "abc", Some(1), at(0));
        let s0 = compose(&first);
        assert!(s0.progressed && s0.stuck.is_none());
        let mut later = Reconciled::new(&p, Some(&s0.status), "abc", Some(1), at(3600));
        later.cause = Some(&throttled);
        let s1 = compose(&later);
        assert!(!s1.progressed);
        assert_eq!(s1.stuck.as_ref().map(|s| s.reason), Some("DrainBlocked"));
        assert!(matches!(s1.transition, Some(Transition::Raised(_))));
        let again = Reconciled::new(&p, Some(&s1.status), "abc", Some(1), at(3700));
        let s2 = compose(&again);
        assert_eq!(s2.transition, None);
        assert_eq!(s2.status.conditions, s1.status.conditions, "not rewritten");
    }

    /// Issue 25: while a pool rotates, a status whose decision is the stored one (only the
    /// message's wording, the counts, the progress time changed) waits for the next write;
    /// a new checkpoint, phase, error, stop or condition is written at once; an idle pool's
    /// any change.
    #[test]
    fn only_a_status_that_carries_a_decision_is_written_while_a_pool_rotates() {
        use super::super::stop::{MovedBy, StopNote};
        let mut p = plan(Phase::Rotating, 0);
        p.checkpoint = Some(
            serde_json::from_value(serde_json::json!({
                "originImage": "a", "targetImage": "b", "targetVersion": "v2",
                "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 1,
                "stage": {"name": "waitingReady", "batch": {
                    "number": 1, "oldNodes": [], "targetCapacity": 5, "instancesBefore": [],
                    "stageSince": "2026-09-21T13:46:40Z"}}
            }))
            .unwrap(),
        );
        let stored = status_for(&p, None, "abc", Some(1), at(0));
        assert!(must_write(None, &stored));
        assert!(!must_write(Some(&stored), &stored));
        // The composer says it of the status it composed, against the one the pass read.
        assert!(compose(&Reconciled::new(&p, None, "abc", Some(1), at(0))).must_write);
        let again = compose(&Reconciled::new(&p, Some(&stored), "abc", Some(1), at(0)));
        assert_eq!(again.must_write, must_write(Some(&stored), &again.status));
        assert!(!again.must_write);
        // Wording and counts: folded.
        let mut next = stored.clone();
        next.message = "waiting for i-5 (node n5 not Ready)".into();
        next.conditions[1].message = next.message.clone();
        next.total = 5;
        next.ready = 4;
        next.last_progress_time = Some(at(30));
        assert!(!must_write(Some(&stored), &next));
        // What holds a wait rota ends: folded; its reason: written.
        let wait = |reason: &str, by, blocked: &str| StopNote {
            reason: reason.into(),
            by,
            cause: "c".into(),
            blocked_by: vec![blocked.into()],
            next: "n".into(),
        };
        let mut held = stored.clone();
        held.stop = Some(wait("GatePending", MovedBy::Rota, "gate a"));
        let mut other = held.clone();
        other.stop = Some(wait("GatePending", MovedBy::Rota, "gate b"));
        assert!(must_write(Some(&stored), &held));
        assert!(!must_write(Some(&held), &other));
        let mut drain = stored.clone();
        drain.stop = Some(wait("Draining", MovedBy::Rota, "pod a"));
        assert!(
            !must_write(Some(&stored), &drain),
            "a held drain is a drain"
        );
        // A person's stop: any change.
        let mut person = stored.clone();
        person.stop = Some(wait("DoNotDisrupt", MovedBy::Person, "pod a"));
        let mut person_b = person.clone();
        person_b.stop = Some(wait("DoNotDisrupt", MovedBy::Person, "pod b"));
        assert!(must_write(Some(&person), &person_b));
        // A decision: the checkpoint, the phase, an error.
        let mut moved = stored.clone();
        moved.checkpoint.as_mut().unwrap().batches_started = 2;
        assert!(must_write(Some(&stored), &moved));
        let mut paused = stored.clone();
        paused.phase = Phase::Paused;
        assert!(must_write(Some(&stored), &paused));
        let mut failing = stored.clone();
        failing.message = format!("{}{LAST_ERROR}throttled)", stored.message);
        assert!(must_write(Some(&stored), &failing));
        // No rotation under way: any change.
        let mut idle = stored.clone();
        idle.checkpoint = None;
        let mut idle_next = idle.clone();
        idle_next.total = 5;
        assert!(must_write(Some(&idle), &idle_next));
    }
}
