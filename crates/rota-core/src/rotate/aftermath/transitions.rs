//! What finished between two statuses of a pool, as metric updates: new nodes brought up
//! and their boot-to-Ready, old nodes drained and the drain's duration, a batch's whole
//! duration. [`super::of`] calls [`count`] after each status write; the controller's
//! executor records the updates.

use chrono::{DateTime, Utc};

use super::metric_update::MetricUpdate;
use crate::rotate::checkpoint::{Batch, Stage};
use crate::rotate::resource::NodePoolRotationStatus;

/// Count what finished between the status before and after a reconcile into `pm`: a
/// batch's new nodes Ready (brought up, boot-to-Ready from the surge), its old nodes drained
/// (drain duration from the drain's start), the batch done (batch duration from the surge).
/// Returns the batch under way and when its surge began.
pub fn count(
    prev: Option<&NodePoolRotationStatus>,
    next: &NodePoolRotationStatus,
    started: Option<(u32, DateTime<Utc>)>,
    now: DateTime<Utc>,
    pm: &mut Vec<MetricUpdate>,
) -> Option<(u32, DateTime<Utc>)> {
    let before = prev.and_then(|p| p.checkpoint.as_ref()).map(|c| &c.stage);
    let after = next.checkpoint.as_ref().map(|c| &c.stage);
    let before_next = prev
        .and_then(|p| p.checkpoint.as_ref())
        .and_then(|c| c.next.as_deref());
    let after_next = next.checkpoint.as_ref().and_then(|c| c.next.as_deref());
    let started = surge_start(started, [before, after, before_next, after_next]);
    if let Some(Stage::WaitingReady { batch }) = before_next {
        pipelined_ready(batch, [after_next, after], started, now, pm);
    }
    if let Some(before) = before {
        left_stage(before, after, started, now, pm);
    }
    started
}

/// The surge's start: the Surging stage's own start, seen before or after, of the current
/// batch or of the pipelined one (`checkpoint.next`, brought up during a soak; the soaking
/// batch's duration was taken when its soak began).
fn surge_start(
    started: Option<(u32, DateTime<Utc>)>,
    stages: [Option<&Stage>; 4],
) -> Option<(u32, DateTime<Utc>)> {
    let mut started = started;
    for st in stages.into_iter().flatten() {
        if let Stage::Surging { batch } = st
            && started.is_none_or(|(n, _)| n != batch.number)
        {
            started = Some((batch.number, batch.stage_since));
        }
    }
    started
}

/// The pipelined batch's nodes all Ready: it left WaitingReady, in `next` or promoted.
fn pipelined_ready(
    batch: &Batch,
    now_in: [Option<&Stage>; 2],
    started: Option<(u32, DateTime<Utc>)>,
    now: DateTime<Utc>,
    pm: &mut Vec<MetricUpdate>,
) {
    let now_at = now_in
        .into_iter()
        .flatten()
        .find(|s| s.batch().is_some_and(|b| b.number == batch.number));
    let ready = now_at.is_some_and(|s| {
        !matches!(
            s,
            Stage::WaitingReady { .. } | Stage::Surging { .. } | Stage::Abandoning { .. }
        )
    });
    if ready {
        let surge = started.filter(|(n, _)| *n == batch.number).map(|(_, t)| t);
        brought_up(batch, surge, now, pm);
    }
}

/// The current batch left `before` for `after`: what that finished.
fn left_stage(
    before: &Stage,
    after: Option<&Stage>,
    started: Option<(u32, DateTime<Utc>)>,
    now: DateTime<Utc>,
    pm: &mut Vec<MetricUpdate>,
) {
    let same_batch =
        before.batch().map(|x| x.number) == after.and_then(|s| s.batch()).map(|x| x.number);
    if before.name() == after.map(|s| s.name()).unwrap_or("Done") && same_batch {
        return;
    }
    let surge = started
        .filter(|(n, _)| before.batch().is_some_and(|b| b.number == *n))
        .map(|(_, t)| t);
    match before {
        // Every new node of the batch is Ready (the stage moved on to the gates).
        Stage::WaitingReady { batch } if !matches!(after, Some(Stage::Abandoning { .. })) => {
            brought_up(batch, surge, now, pm);
            // A replace batch ends here, its replacements Ready: from its start (its gate).
            if let Some(t) = batch.started_at.filter(|_| batch.replace) {
                pm.push(MetricUpdate::BatchDuration(secs(t, now)));
            }
        }
        Stage::Draining { batch } if matches!(after, Some(Stage::Terminating { .. })) => {
            let n = batch.old_nodes.len() as u64;
            pm.push(MetricUpdate::Drained(n));
            for _ in 0..n {
                pm.push(MetricUpdate::DrainDuration(secs(batch.stage_since, now)));
            }
        }
        Stage::Terminating { .. } => {
            if let Some(t) = surge {
                pm.push(MetricUpdate::BatchDuration(secs(t, now)));
            }
        }
        _ => {}
    }
}

/// A batch's new nodes are Ready: counted, each with its boot-to-Ready from the surge.
fn brought_up(
    batch: &Batch,
    surge: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    pm: &mut Vec<MetricUpdate>,
) {
    let n = batch.new_instances.len() as u64;
    pm.push(MetricUpdate::BroughtUp(n));
    if let Some(t) = surge {
        for _ in 0..n {
            pm.push(MetricUpdate::BootToReady(secs(t, now)));
        }
    }
}

fn secs(since: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    (now - since).num_milliseconds().max(0) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(value: serde_json::Value) -> NodePoolRotationStatus {
        NodePoolRotationStatus {
            checkpoint: Some(serde_json::from_value(value).unwrap()),
            ..Default::default()
        }
    }

    fn soaking_with_next(next: &str) -> NodePoolRotationStatus {
        status(serde_json::json!({
            "originImage": "a", "targetImage": "b", "targetVersion": "v2",
            "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 2,
            "stage": {"name": "soaking", "until": "2026-11-24T11:00:00Z", "batch": {
                "number": 1, "oldNodes": [], "targetCapacity": 6, "instancesBefore": [],
                "stageSince": "2026-11-24T10:00:00Z"}},
            "next": {"name": next, "batch": {
                "number": 2, "oldNodes": [], "targetCapacity": 6, "instancesBefore": [],
                "newInstances": ["i-m3", "i-m4"], "stageSince": "2026-11-24T10:01:00Z"}}
        }))
    }

    #[test]
    fn a_pipelined_batch_counts_its_nodes_brought_up_and_their_boot() {
        let mut pm = Vec::new();
        let at = |min: i64| {
            chrono::DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z")
                .unwrap()
                .with_timezone(&chrono::Utc)
                + chrono::Duration::minutes(min)
        };
        // Batch 2 surges during batch 1's soak: its start is taken from `next`.
        let started = count(
            Some(&soaking_with_next("surging")),
            &soaking_with_next("waitingReady"),
            None,
            at(2),
            &mut pm,
        );
        assert_eq!(started, Some((2, at(1))));
        // Its nodes are Ready (it moved on to the gates): two brought up, booted in 3 min.
        count(
            Some(&soaking_with_next("waitingReady")),
            &soaking_with_next("gating"),
            started,
            at(4),
            &mut pm,
        );
        assert_eq!(
            pm,
            vec![
                MetricUpdate::BroughtUp(2),
                MetricUpdate::BootToReady(180.0),
                MetricUpdate::BootToReady(180.0),
            ]
        );
    }

    /// A replace batch's duration is observed when its replacements are Ready (it has no
    /// termination after them): from its start to that moment.
    #[test]
    fn a_replace_batch_is_timed_from_its_start_to_its_replacements_ready() {
        let mut pm = Vec::new();
        let at = |min: i64| {
            chrono::DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z")
                .unwrap()
                .with_timezone(&chrono::Utc)
                + chrono::Duration::minutes(min)
        };
        let stage = |name: &str| {
            status(serde_json::json!({
                "originImage": "a", "targetImage": "b", "targetVersion": "v2",
                "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 1,
                "stage": {"name": name, "until": "2026-11-24T11:00:00Z", "batch": {
                    "number": 1, "oldNodes": [], "targetCapacity": 4, "instancesBefore": [],
                    "newInstances": ["i-m1"], "stageSince": "2026-11-24T10:20:00Z",
                    "startedAt": "2026-11-24T10:00:00Z", "replace": true}}
            }))
        };
        count(
            Some(&stage("waitingReady")),
            &stage("soaking"),
            None,
            at(25),
            &mut pm,
        );
        assert_eq!(
            pm,
            vec![
                MetricUpdate::BroughtUp(1),
                MetricUpdate::BatchDuration(1500.0)
            ]
        );
    }
}
