//! The chaos suite's guardrails: pools rotated drain-first (`strategy: replace`), maintenance
//! windows that close while a batch runs, and pods marked `karpenter.sh/do-not-disrupt`
//! that hold a drain up to `drain.maxDeferral`.
//!
//! A seed draws them from a generator of their own (`seed ^ GUARDRAILS`), after everything
//! else, so that its other draws are what they were without them. The invariant they add is
//! checked with the others (`Run::check`): a replace pool never holds more live instances,
//! nor a higher desired capacity, than before its batch (its size at start, plus what the
//! autoscaler added), where a surge pool may hold one batch more.

use chrono::{DateTime, Duration as Span, Timelike, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{RolloutStrategy, Window};
use rota::sim::scenario::WorkloadProfile;

use super::{PoolPlan, Run};

const GUARDRAILS: u64 = 0x6a4d_1a11;

/// What one seed draws of the guardrails.
#[derive(Clone, Debug, Default)]
pub(super) struct Guardrails {
    /// Pools rotated drain-first.
    pub replace: Vec<String>,
    /// A window open since an hour before the rotation that closes this many minutes into
    /// it, and a second one opening this many minutes after that (for ten hours): a batch
    /// running at the close finishes, the next waits for the second window.
    pub window: Option<(i64, i64)>,
    /// Do-not-disrupt pods run, and every pool's `drain.maxDeferral` (seconds) bounds them.
    pub max_deferral: Option<u64>,
}

pub(super) fn draw(seed: u64, pools: &[PoolPlan]) -> Guardrails {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ GUARDRAILS);
    let replace = pools
        .iter()
        .filter(|_| rng.random_bool(0.35))
        .map(|p| p.name.clone())
        .collect();
    let window = rng
        .random_bool(0.3)
        .then(|| (rng.random_range(10..=60), rng.random_range(30..=120)));
    let max_deferral = rng
        .random_bool(0.3)
        .then(|| [300, 900, 1800][rng.random_range(0..3)]);
    Guardrails {
        replace,
        window,
        max_deferral,
    }
}

impl Guardrails {
    /// The seed's do-not-disrupt pods: a two-replica training job, no budget, on any pool.
    pub(super) fn workloads(&self, w: &mut WorkloadProfile) {
        if self.max_deferral.is_none() {
            return;
        }
        let extra = WorkloadProfile::from_yaml(
            "deployments:\n  - {name: trainer, namespace: ml, replicas: 2, readyAfter: 5s, doNotDisrupt: true}\n",
            "guardrails",
        )
        .expect("the trainer's profile parses");
        w.deployments.extend(extra.deployments);
    }

    /// The policies of the seed's pools, at `now` (the controllers' clock when the pools'
    /// resources are created: the windows are placed around it).
    pub(super) fn apply(&self, pools: &mut [PoolPlan], now: DateTime<Utc>) {
        let hhmm = |t: DateTime<Utc>| format!("{:02}:{:02}", t.hour(), t.minute());
        for p in pools.iter_mut() {
            if self.replace.contains(&p.name) {
                p.policy.strategy = RolloutStrategy::Replace;
            }
            if let Some((closes, gap)) = self.window {
                let close = now + Span::minutes(closes);
                let reopen = close + Span::minutes(gap);
                p.policy.windows = vec![
                    window(hhmm(now - Span::hours(1)), hhmm(close)),
                    window(hhmm(reopen), hhmm(reopen + Span::hours(10))),
                ];
            }
            if let Some(s) = self.max_deferral {
                p.policy.drain.max_deferral = Some(GoDuration::from_secs(s));
            }
        }
    }
}

fn window(start: String, end: String) -> Window {
    Window {
        days: vec![],
        start,
        end,
        time_zone: "UTC".into(),
    }
}

/// How many instances above its size at start a pool may hold for its batch: one batch for
/// a surge pool, none for a replace pool.
pub(super) fn surge_allowance(p: &PoolPlan) -> i64 {
    match p.policy.strategy {
        RolloutStrategy::Replace => 0,
        RolloutStrategy::Surge => i64::from(p.policy.batch.nodes(p.size)),
    }
}

/// What the guardrails were seen doing, once each per pool (stderr, beside the progress):
/// a replace batch waiting for its group's replacements, a batch deferred to the next window,
/// a window that closed while a batch ran, a drain held by a do-not-disrupt pod, and one
/// evicted past `drain.maxDeferral`.
pub(super) async fn note_exercised(
    run: &Run,
    guard: &Guardrails,
    seen: &mut std::collections::BTreeSet<String>,
) {
    for p in &run.draw.pools {
        let Some(st) = run.status(&p.name).await else {
            continue;
        };
        closed_mid_batch(run, guard, &p.name, &st, seen);
        let batch = st.checkpoint.as_ref().and_then(|c| c.stage.batch());
        let refilling = st.checkpoint.as_ref().is_some_and(|c| {
            matches!(c.stage.name(), "Surging" | "WaitingReady")
                && c.stage.batch().is_some_and(|b| b.replace)
        });
        for (now, what) in [
            (
                refilling,
                "refilling after removing first (strategy replace)",
            ),
            (
                st.message.contains("deferred until"),
                "deferred to a window",
            ),
            (
                st.message.contains("drain.maxDeferral)"),
                "drain held by a do-not-disrupt pod",
            ),
            (
                batch.is_some_and(|b| !b.deferral_ended.is_empty()),
                "a do-not-disrupt pod evicted past drain.maxDeferral",
            ),
        ] {
            if now && seen.insert(format!("{} {what}", p.name)) {
                eprintln!(
                    "chaos guardrail in seed {}: pool {} {what}",
                    run.seed, p.name
                );
            }
        }
    }
}

/// What `note_exercised` records when a window closed strictly mid-batch.
pub(super) const CLOSED_MID_BATCH: &str = "window closed mid-batch";

/// A window that closed strictly while a batch ran: the same batch was under way (booting,
/// gated, cordoning, draining or terminating) a minute before the close and still is a
/// minute after it (the windows are written to the minute, so a minute either way is sure
/// to be on its side), and the window after it has not opened yet. Being deferred to the
/// next window is the other half, counted apart ("deferred to a window").
fn closed_mid_batch(
    run: &Run,
    guard: &Guardrails,
    pool: &str,
    st: &rota::kube::crd::NodePoolRotationStatus,
    seen: &mut std::collections::BTreeSet<String>,
) {
    let Some((closes, gap)) = guard.window else {
        return;
    };
    let Some(cp) = st.checkpoint.as_ref() else {
        return;
    };
    let running = matches!(
        cp.stage.name(),
        "Surging" | "WaitingReady" | "Gating" | "Cordoning" | "Draining" | "Terminating"
    );
    let Some(batch) = cp.stage.batch().filter(|_| running) else {
        return;
    };
    let minute = std::time::Duration::from_secs(60);
    let close = run.started + std::time::Duration::from_secs(closes as u64 * 60);
    let reopen = close + std::time::Duration::from_secs(gap as u64 * 60);
    let now = tokio::time::Instant::now();
    let before = format!("{pool} batch {} under way before the close", batch.number);
    if now + minute <= close {
        seen.insert(before);
    } else if now >= close + minute
        && now + minute <= reopen
        && seen.contains(&before)
        && seen.insert(format!("{pool} {CLOSED_MID_BATCH}"))
    {
        eprintln!(
            "chaos guardrail in seed {}: pool {pool} {CLOSED_MID_BATCH} (batch {}, stage {})",
            run.seed,
            batch.number,
            cp.stage.name()
        );
    }
}
