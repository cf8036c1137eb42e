//! How long a rotation takes at best under its policy: one function, [`floor`], used for the
//! remaining-time estimate in statuses ([`remaining`]) and as the lower bound the controller
//! bench compares its makespans with.
//!
//! The model is the planner's own rules, with the durations the policy does not fix (a
//! node's boot to Ready and gated, a batch's drain) as inputs:
//! - a batch surges only once the old instances of the batch before it are gone (invariant
//!   1 allows one batch of surge), and only one batch disrupts at a time;
//! - sequential: boot, drain, soak, then the next batch;
//! - pipelined (`rollout.pipeline`): the next batch boots during the soak, so after the first
//!   boot each batch costs its drain plus the longer of the next boot and the soak.
//!
//! Timeline of three pipelined batches (B boot, D drain, S soak, B ≤ S):
//!
//! ```text
//! batch 1  BBBB DD SSSSS
//! batch 2          BBBB  DD SSSSS
//! batch 3                    BBBB  DD SSSSS
//! ```

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::checkpoint::{Checkpoint, Stage};
use crate::fleet::resolved::EffectivePolicy;

/// The durations a rotation's length depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// A batch's surge to its new nodes Ready (the gates' first samples come on top).
    pub boot: Duration,
    /// A batch's first cordon to its last old instance gone.
    pub drain: Duration,
    pub batch_soak: Duration,
    pub pool_soak: Duration,
}

/// The least time `batches` batches take from a pool at rest (no batch under way) to the
/// end of the pool soak.
pub fn floor(batches: u32, t: &Timings, pipelined: bool) -> Duration {
    if batches == 0 {
        return t.pool_soak;
    }
    let n = batches;
    if pipelined {
        t.boot + t.drain * n + t.boot.max(t.batch_soak) * (n - 1) + t.batch_soak + t.pool_soak
    } else {
        (t.boot + t.drain + t.batch_soak) * n + t.pool_soak
    }
}

/// The batches a rotation of `nodes` nodes takes at `batch_size` per batch.
pub fn batches(nodes: u32, batch_size: u32) -> u32 {
    nodes.div_ceil(batch_size.max(1))
}

/// About how long the rotation in `cp` has left, from what its own batches took so far
/// (`Checkpoint::pace`); `None` until a batch has both booted and drained, or when nothing
/// is under way. `left` is the number of nodes still to replace.
pub fn remaining(
    policy: &EffectivePolicy,
    cp: &Checkpoint,
    left: u32,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let pace = cp.pace?;
    let t = Timings {
        boot: Duration::from_secs(pace.boot_seconds?),
        drain: Duration::from_secs(pace.drain_seconds?),
        batch_soak: policy.batch_soak.0,
        pool_soak: policy.pool_soak.0,
    };
    let until = |u: DateTime<Utc>| (u - now).to_std().unwrap_or(Duration::ZERO);
    let size = policy.batch.nodes(cp.pool_size);
    let ahead = floor(batches(left, size), &t, policy.pipeline);
    match &cp.stage {
        Stage::Done => None,
        Stage::PoolSoak { until: u } => Some(until(*u)),
        Stage::Cleanup => Some(Duration::ZERO),
        Stage::Soaking { until: u, .. } => {
            let rest = until(*u);
            // A pipelined next batch boots during this soak: its boot is not ahead any more.
            let booting = if cp.next.is_some() {
                t.boot.min(rest)
            } else {
                Duration::ZERO
            };
            Some(rest + ahead.saturating_sub(booting))
        }
        _ => Some(ahead),
    }
}

/// `d` as people say it: "about 25m", "about 2h10m"; rounded up to 5 minutes above ten
/// minutes and to the minute below, so that it changes rarely.
pub fn about(d: Duration) -> String {
    let mins = d.as_secs().div_ceil(60);
    let mins = if mins > 10 {
        mins.div_ceil(5) * 5
    } else {
        mins
    };
    match (mins / 60, mins % 60) {
        (0, m) => format!("about {m}m"),
        (h, 0) => format!("about {h}h"),
        (h, m) => format!("about {h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(boot: u64, drain: u64, soak: u64) -> Timings {
        Timings {
            boot: Duration::from_secs(boot * 60),
            drain: Duration::from_secs(drain * 60),
            batch_soak: Duration::from_secs(soak * 60),
            pool_soak: Duration::ZERO,
        }
    }

    fn mins(d: Duration) -> u64 {
        d.as_secs() / 60
    }

    #[test]
    fn pipelining_hides_the_boot_behind_the_soak_and_never_costs_more() {
        // Boot-dominated: 3m boot, 1m drain, 1m soak, 10 batches.
        assert_eq!(mins(floor(10, &t(3, 1, 1), false)), 50);
        assert_eq!(mins(floor(10, &t(3, 1, 1), true)), 3 + 10 + 27 + 1);
        // Soak-dominated: the boots vanish behind the soaks but the first.
        assert_eq!(mins(floor(10, &t(2, 1, 10), false)), 130);
        assert_eq!(mins(floor(10, &t(2, 1, 10), true)), 2 + 10 + 90 + 10);
        // Without soaks there is nothing to overlap: the same either way.
        assert_eq!(floor(10, &t(3, 1, 0), true), floor(10, &t(3, 1, 0), false));
        for (b, d, s) in [(1, 10, 1), (3, 1, 1), (2, 1, 10), (5, 5, 5)] {
            for n in 1..12 {
                assert!(floor(n, &t(b, d, s), true) <= floor(n, &t(b, d, s), false));
            }
        }
        assert_eq!(floor(0, &t(3, 1, 1), true), Duration::ZERO);
    }

    #[test]
    fn estimates_are_said_coarsely() {
        assert_eq!(about(Duration::from_secs(61)), "about 2m");
        assert_eq!(about(Duration::from_secs(23 * 60)), "about 25m");
        assert_eq!(about(Duration::from_secs(2 * 3600 + 7 * 60)), "about 2h10m");
        assert_eq!(about(Duration::from_secs(3600)), "about 1h");
    }
}
