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

use crate::fleet::resolved::{EffectivePolicy, ResolvedGate};
use crate::rotate::apply::Retry;
use crate::rotate::{Phase, Plan, Stage};

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
    match plan.status.phase {
        Phase::Succeeded | Phase::Failed | Phase::Pending | Phase::Paused => return RESYNC,
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
    // A pipelined next batch booting during the soak is looked at as often as a current one
    // would be, so that it is ready to cordon when the soak ends.
    match plan.checkpoint.as_ref().and_then(|c| c.next.as_deref()) {
        Some(Stage::Surging { .. } | Stage::WaitingReady { .. }) => {
            base.min(Duration::from_secs(10))
        }
        Some(Stage::Abandoning { .. }) => base.min(Duration::from_secs(5)),
        _ => base,
    }
}

/// The wait after the `failures`-th failure in a row of class `retry`.
pub fn after_error(retry: Retry, failures: u32) -> Duration {
    match retry {
        Retry::Transient => {
            let exp = failures.saturating_sub(1).min(6);
            (Duration::from_secs(1) * 2u32.pow(exp)).min(Duration::from_secs(60))
        }
        Retry::Wait => Duration::from_secs(60),
        Retry::Stalled => Duration::from_secs(60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_back_off_exponentially_up_to_a_minute() {
        let d: Vec<u64> = (1..=9)
            .map(|n| after_error(Retry::Transient, n).as_secs())
            .collect();
        assert_eq!(d, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(after_error(Retry::Stalled, 1), Duration::from_secs(60));
    }
}
