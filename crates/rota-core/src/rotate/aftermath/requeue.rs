//! When to look at a pool again (pure).
//!
//! After a plan, the interval follows what the pool waits for: right after actions the world
//! needs a moment to react (a cordon shows at once, a boot takes a minute); a soak or a gate
//! is looked at when its next sample or its end is due; a stopped pool only on a slow resync
//! (or a spec change, which a watch reports at once). After an error, the class decides:
//! transient errors back off exponentially, waits and stalls retry on a slow timer (a wait
//! for a PodDisruptionBudget is normally ended earlier by its watch).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::errors::Class;
use crate::fleet::resolved::{EffectivePolicy, ResolvedGate};
use crate::rotate::checkpoint::Stage;
use crate::rotate::outcome::Plan;
use crate::rotate::phase::Phase;

/// A stopped or finished pool is looked at again after this long (spec changes wake it
/// earlier).
pub const RESYNC: Duration = Duration::from_secs(300);

/// The wait after a plan was applied.
pub fn after_plan(
    plan: &Plan,
    policy: &EffectivePolicy,
    gates: &[ResolvedGate],
    now: DateTime<Utc>,
) -> Duration {
    let gate_interval = gates
        .iter()
        .map(|g| g.interval.0)
        .min()
        .unwrap_or(Duration::from_secs(30))
        .max(Duration::from_secs(1));
    let until = |t: DateTime<Utc>| {
        (t - now)
            .to_std()
            .unwrap_or(Duration::ZERO)
            .max(Duration::from_secs(1))
    };
    if !plan.actions.is_empty() {
        // Evictions are spaced by the policy; everything else shows within seconds.
        return policy.drain.eviction_interval.0.max(Duration::from_secs(2));
    }
    // A pipelined next batch booting during the soak is looked at as often as a current one
    // would be, so that it is ready to cordon when the soak ends; one being undone, as
    // often as any undoing, even while the pool is halted.
    let next = match plan.checkpoint.as_ref().and_then(|c| c.next.as_deref()) {
        Some(Stage::Surging { .. } | Stage::WaitingReady { .. }) => Duration::from_secs(10),
        Some(Stage::Abandoning { .. }) => Duration::from_secs(5),
        _ => RESYNC,
    };
    match plan.status.phase {
        Phase::Succeeded | Phase::Failed | Phase::Pending | Phase::Paused => {
            return RESYNC.min(next);
        }
        _ => {}
    }
    let base = match plan.checkpoint.as_ref().map(|c| &c.stage) {
        Some(Stage::Surging { .. } | Stage::WaitingReady { .. }) => Duration::from_secs(10),
        Some(Stage::Gating { .. }) => gate_interval,
        Some(Stage::Soaking { until: t, .. } | Stage::PoolSoak { until: t }) => {
            until(*t).min(gate_interval)
        }
        Some(Stage::Draining { .. } | Stage::Terminating { .. } | Stage::Abandoning { .. }) => {
            Duration::from_secs(5)
        }
        Some(Stage::Cordoning { .. } | Stage::Cleanup) => Duration::from_secs(2),
        // Between batches with nothing to do: a window or the surge budget holds it.
        Some(Stage::Between) | None => Duration::from_secs(60),
        Some(Stage::Done) => RESYNC,
    };
    base.min(next)
}

/// The wait after the `failures`-th failure in a row of class `retry`.
pub fn after_error(retry: Class, failures: u32) -> Duration {
    match retry {
        Class::Transient => {
            let exp = failures.saturating_sub(1).min(6);
            (Duration::from_secs(1) * 2u32.pow(exp)).min(Duration::from_secs(60))
        }
        Class::Wait => Duration::from_secs(60),
        Class::Stalled => Duration::from_secs(60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_halted_pool_undoing_a_pipelined_batch_is_looked_at_soon() {
        use crate::rotate::outcome::StatusSummary;
        use crate::rotate::phase::Phase;
        let checkpoint = serde_json::from_value(serde_json::json!({
            "originImage": "a", "targetImage": "b", "targetVersion": "v2",
            "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 2,
            "halted": "batch 2: not Ready",
            "stage": {"name": "soaking", "until": "2026-11-24T11:00:00Z", "batch": {
                "number": 1, "oldNodes": [], "targetCapacity": 5, "instancesBefore": [],
                "stageSince": "2026-11-24T10:00:00Z"}},
            "next": {"name": "abandoning", "why": "not Ready", "batch": {
                "number": 2, "oldNodes": [], "targetCapacity": 5, "instancesBefore": [],
                "stageSince": "2026-11-24T10:00:00Z"}}
        }))
        .unwrap();
        let mut plan = Plan {
            actions: vec![],
            dry_run: vec![],
            checkpoint: Some(checkpoint),
            status: StatusSummary {
                phase: Phase::Paused,
                reason: "Halted",
                message: "halted".into(),
                stop: None,
                total: 4,
                on_target: 1,
                ready: 4,
                remaining: None,
            },
        };
        let now = DateTime::parse_from_rfc3339("2026-11-24T10:05:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let p = EffectivePolicy::default();
        assert_eq!(after_plan(&plan, &p, &[], now), Duration::from_secs(5));
        plan.checkpoint.as_mut().unwrap().next = None;
        assert_eq!(after_plan(&plan, &p, &[], now), RESYNC);
    }

    #[test]
    fn transient_errors_back_off_exponentially_up_to_a_minute() {
        let d: Vec<u64> = (1..=9)
            .map(|n| after_error(Class::Transient, n).as_secs())
            .collect();
        assert_eq!(d, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(after_error(Class::Stalled, 1), Duration::from_secs(60));
    }
}
