//! Stuck detection on real planner statuses: the pure planner (`rotate::plan`) and the
//! status it writes (`rotate::apply::status_for`) drive the model world of the sequence tests;
//! `stuck::detect` and `stuck::apply_condition` run after every reconcile, as the controller
//! will run them. A drain that a PodDisruptionBudget blocks for good raises the condition
//! (once) within the threshold; a disruption block that clears raises nothing.

use std::time::Duration as StdDuration;

use crate::support::model::{Model, TICK, Workload, desired_pool};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{BatchSize, EffectivePolicy};
use rota::kube::crd::NodePoolRotationStatus;
use rota::metrics::Metrics;
use rota::rotate::status::{Reconciled, compose};
use rota::rotate::stuck::{ErrorTracker, Transition};
use rota::rotate::{GateVerdict, Phase, plan};

const THRESHOLD: StdDuration = StdDuration::from_secs(600);

struct Run {
    raised: Vec<(i64, String)>,
    cleared: usize,
    final_phase: Phase,
    draining_since: Option<i64>,
    succeeded_at: Option<u32>,
    metrics: String,
}

/// Reconcile every tick for `ticks`; `block(tick)` says whether the web pods' PDB allows no
/// disruption at that tick (the Eviction API answers 429, as for throttling).
fn run(ticks: u32, block: impl Fn(u32) -> bool) -> Run {
    let workloads = vec![Workload {
        name: "web".into(),
        replicas: 3,
        min_available: Some(2),
    }];
    let mut model = Model::new(4, workloads, (2, 3), 7);
    let mut policy = EffectivePolicy {
        batch: BatchSize::Count(2),
        ..EffectivePolicy::default()
    };
    // Long enough that the planner's own drain timeout does not end the test first.
    policy.drain.timeout = GoDuration::from_secs(6 * 3600);
    let desired = desired_pool(policy);
    let start = model.now;
    let metrics = Metrics::new();
    let mut status: Option<NodePoolRotationStatus> = None;
    let errors = ErrorTracker::default();
    let mut out = Run {
        raised: vec![],
        cleared: 0,
        final_phase: Phase::Pending,
        draining_since: None,
        succeeded_at: None,
        metrics: String::new(),
    };
    for tick in 0..ticks {
        // The web PDB: minAvailable 3 of 3 replicas (no eviction allowed) while blocked.
        for w in model.workloads.iter_mut().filter(|w| w.name == "web") {
            w.min_available = Some(if block(tick) { 3 } else { 2 });
        }
        let obs = model.observe(GateVerdict::Passing);
        let checkpoint = status.as_ref().and_then(|s| s.checkpoint.clone());
        let p = plan(&desired, &obs, checkpoint.as_ref(), model.now);
        let mut reconciled = Reconciled::new(&p, status.as_ref(), "c0ffee", Some(1), model.now);
        reconciled.stuck_after = THRESHOLD;
        reconciled.cause = errors.last();
        let composed = compose(&reconciled);
        let next = composed.status;
        let secs = (model.now - start).num_seconds();
        if out.draining_since.is_none()
            && next
                .checkpoint
                .as_ref()
                .is_some_and(|c| c.stage.name() == "Draining")
        {
            out.draining_since = Some(secs);
        }
        let pm = metrics.pool("sim", "general");
        pm.observe_status(&next);
        pm.set_stuck(composed.stuck.as_ref().map(|s| s.reason));
        match composed.transition {
            Some(t @ Transition::Raised(_)) => {
                let (warning, reason, note) = t.event();
                assert!(warning && reason == "Stuck", "{note}");
                let Transition::Raised(s) = t else {
                    unreachable!()
                };
                out.raised.push((secs, s.reason.to_string()));
            }
            Some(Transition::Cleared) => out.cleared += 1,
            None => {}
        }
        for a in &p.actions {
            model.apply(&a.action, false).unwrap();
        }
        out.final_phase = next.phase;
        if next.phase == Phase::Succeeded && out.succeeded_at.is_none() {
            out.succeeded_at = Some(tick);
        }
        status = Some(next);
        model.advance();
    }
    out.metrics = metrics.render_at(model.now);
    out
}

#[test]
fn a_drain_blocked_for_good_raises_the_condition_once_within_the_threshold() {
    let r = run(200, |_| true);
    let drain = r.draining_since.expect("reached the drain");
    assert_eq!(r.raised.len(), 1, "{:?}", r.raised);
    let (at, reason) = &r.raised[0];
    assert_eq!(reason, "DrainBlocked");
    let late = at - drain - THRESHOLD.as_secs() as i64;
    assert!(
        (0..=TICK).contains(&late),
        "raised {late}s after the threshold"
    );
    assert_eq!(r.cleared, 0);
    assert!(
        r.metrics
            .contains(r#"rota_pool_stuck{cluster="sim",pool="general",reason="DrainBlocked"} 1"#),
        "{}",
        r.metrics
    );
}

#[test]
fn a_disruption_block_that_clears_in_time_raises_nothing() {
    let free = run(400, |_| false);
    assert!(free.raised.is_empty());
    let from = (free.draining_since.unwrap() / TICK) as u32;
    // Blocked from the first drain on for 8 minutes (16 ticks, under the 10-minute
    // threshold): delayed, then completes; no condition, no Event, no stuck series.
    let r = run(400, |tick| (from..from + 16).contains(&tick));
    assert_eq!(r.final_phase, Phase::Succeeded);
    assert!(
        r.succeeded_at.unwrap() >= free.succeeded_at.unwrap() + 10,
        "the block delayed the rotation: {:?} vs {:?}",
        r.succeeded_at,
        free.succeeded_at
    );
    assert!(r.raised.is_empty(), "{:?}", r.raised);
    assert!(!r.metrics.contains("rota_pool_stuck{"), "{}", r.metrics);
    assert!(
        r.metrics
            .contains(r#"rota_pool_progress_ratio{cluster="sim",pool="general"} 1"#)
    );
    // The same block held for 15 minutes is reported, then cleared when the drain resumes.
    let long = run(400, |tick| (from..from + 30).contains(&tick));
    assert_eq!(long.raised.len(), 1, "{:?}", long.raised);
    assert_eq!(long.cleared, 1);
    assert_eq!(long.final_phase, Phase::Succeeded);
}
