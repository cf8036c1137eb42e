//! From NodePoolRotation statuses to commit statuses and promotion records. Pure: the run
//! loop posts the result (the stores only write on change).
//!
//! Pool status (`rota/<cluster>/<pool>`):
//! - held by the guard: `pending`, the guard's description;
//! - rotating or soaking: `pending`, `batch 3/8 · 14/40 nodes on general@2026.11.2`, and
//!   once a batch has been timed `· about 25m left`, and after an operator's `rota ctl
//!   retry` or `complete-soak` `· after rota ctl retry by ana`;
//! - succeeded on the pinned version: `success`, `40/40 nodes on general@2026.11.2`;
//! - stopped for a human (a gate failed with `pause`, a drain timed out) or failed: `failure`;
//! - `mode: ignore`: `success`, `ignored (mode: ignore)`; `readOnly` prefixes its description.
//!
//! Cluster status (`rota/<cluster>`): `failure` if any pool failed, else `pending` if any is
//! pending, else `success`.

use chrono::{DateTime, Utc};

use crate::kube::crd::NodePoolRotation;
use crate::report::{CommitStatus, State, cluster_context, pool_context};
use rota_core::fleet::resolved::Mode;
use rota_core::rotate::Phase;
use rota_core::rotate::stop::MovedBy;
use rota_core::waves::{DID_NOT_BOOT, PoolRecord};

use super::desired::PoolIntent;

/// `deferred until <time>` out of a status message of a pool whose next batch waits for a
/// window with room for it or for a blackout's end (`rotate::window::Deferral::describe`).
fn deferred(message: &str) -> Option<&str> {
    let at = message.find(DEFERRED)?;
    let rest = &message[at..];
    Some(rest.split(": ").next().unwrap_or(rest))
}

/// How a pool outside its maintenance window describes itself.
pub const WINDOW_WAIT: &str = "waiting for a maintenance window";

/// How a pool whose next batch waits for a window with room for it (or a blackout's end)
/// begins its description: `deferred until <time>`.
pub const DEFERRED: &str = "deferred until ";

/// The status of one pool at `commit`.
pub fn pool_status(
    cluster: &str,
    intent: &PoolIntent,
    npr: Option<&NodePoolRotation>,
    commit: &str,
    now: DateTime<Utc>,
) -> CommitStatus {
    let context = pool_context(cluster, &intent.name);
    let (channel, version) = &intent.pinned;
    let cv = format!("{channel}@{version}");
    if let Some(why) = &intent.waiting {
        return CommitStatus::new(context, State::Pending, why).with_stop(intent.held.clone());
    }
    let Some(npr) = npr else {
        return CommitStatus::new(context, State::Pending, "NodePoolRotation not created yet");
    };
    if npr.spec.mode == Mode::Ignore {
        return CommitStatus::new(context, State::Success, "ignored (mode: ignore)");
    }
    let prefix = if npr.spec.mode == Mode::ReadOnly {
        "readOnly: "
    } else {
        ""
    };
    // The status must be about the current spec: a pool released by the guard keeps its
    // commit but gets a new version (a new generation), and its old status is stale.
    let Some(status) =
        npr.status
            .as_ref()
            .filter(|s| match (s.observed_generation, npr.metadata.generation) {
                (Some(seen), Some(now)) => seen == now,
                _ => s.observed_commit.as_deref() == Some(commit),
            })
    else {
        return CommitStatus::new(
            context,
            State::Pending,
            &format!("{prefix}waiting for the controller to take {cv}"),
        );
    };
    let nodes = format!("{}/{} nodes on {cv}", status.on_target, status.total);
    let halted = status.checkpoint.as_ref().and_then(|c| c.halted.clone());
    // A stop a person must end leads with what they must do: a forge shows 140 characters.
    let person = status.stop.as_ref().filter(|n| n.by == MovedBy::Person);
    let stopped = |word: &str, cause: &str| match person {
        Some(n) => format!("{word}; next: {} · {cause}", n.next),
        None => format!("{word}: {cause}"),
    };
    let (state, text) = match status.phase {
        Phase::Succeeded => (State::Success, nodes),
        Phase::Failed => (State::Failure, stopped("failed", &status.message)),
        Phase::Paused if status.stop.as_ref().is_some_and(|n| n.reason == "Stopped") => (
            State::Pending,
            stopped(
                "paused",
                &super::stops::commit_text(npr.spec.policy.stop.as_ref(), &nodes),
            ),
        ),
        Phase::Paused if halted.is_some() => (
            State::Failure,
            stopped("paused", &halted.unwrap_or_default()),
        ),
        Phase::Paused => (State::Pending, stopped("paused", &status.message)),
        Phase::RollingBack => (State::Pending, format!("rolling back: {}", status.message)),
        Phase::Waiting if deferred(&status.message).is_some() => (
            State::Pending,
            format!(
                "{} · {nodes}",
                deferred(&status.message).unwrap_or(WINDOW_WAIT)
            ),
        ),
        Phase::Waiting if status.message.contains("maintenance window") => {
            (State::Pending, format!("{WINDOW_WAIT} · {nodes}"))
        }
        Phase::Rotating | Phase::Soaking | Phase::Waiting => {
            let batch = status.checkpoint.as_ref().map(|c| {
                let per = npr.spec.policy.batch.nodes(c.pool_size).max(1);
                let goal = (u64::from(c.pool_size) * u64::from(npr.spec.policy.percent))
                    .div_ceil(100) as u32;
                let total = goal.div_ceil(per).max(1);
                format!("batch {}/{} · ", c.batches_started.min(total), total)
            });
            let soak = if status.phase == Phase::Soaking {
                " · soaking"
            } else {
                ""
            };
            // Said coarsely (`eta::about`), so that the status changes every few minutes
            // at most, not on every pass.
            let eta = status
                .estimated_completion
                .and_then(|t| (t - now).to_std().ok())
                .map(|d| format!(" · {} left", rota_core::rotate::eta::about(d)))
                .unwrap_or_default();
            // A wait rota ends by itself names its reason; the note documents carry the rest.
            let waits = status
                .stop
                .as_ref()
                .map(|n| format!(" · waits ({})", n.reason))
                .unwrap_or_default();
            (
                State::Pending,
                format!(
                    "{}{nodes}{soak}{eta}{waits}{}",
                    batch.unwrap_or_default(),
                    steered(status)
                ),
            )
        }
        Phase::Pending => (State::Pending, format!("planning {cv}")),
    };
    // A fleet stop in force says so on every pool it scopes, even one it holds nothing of.
    let text = match &npr.spec.policy.stop {
        Some(s) if status.stop.as_ref().is_none_or(|n| n.reason != "Stopped") => {
            format!("{text} · fleet stop {}", s.short_id())
        }
        _ => text,
    };
    CommitStatus::new(context, state, &format!("{prefix}{text}")).with_stop(status.stop.clone())
}

/// The operator request (`rota ctl`) that last steered the rotation under way, for its
/// commit status: ` · after rota ctl retry by ana` (a pause shows as the phase itself).
fn steered(status: &rota_core::rotate::resource::NodePoolRotationStatus) -> String {
    status
        .checkpoint
        .as_ref()
        .and_then(|c| c.operator_request.as_deref())
        .and_then(|id| rota_core::rotate::operator::Request::parse(id).ok())
        .filter(|r| {
            matches!(
                r.verb,
                rota_core::rotate::operator::Verb::Retry
                    | rota_core::rotate::operator::Verb::CompleteSoak
            )
        })
        .map(|r| {
            let by =
                r.by.map(|w| format!(" by {}", rota_core::sanitize::line(&w)))
                    .unwrap_or_default();
            format!(" · after rota ctl {}{by}", r.verb.as_str())
        })
        .unwrap_or_default()
}

/// The cluster's status from its pools' statuses.
pub fn cluster_status(cluster: &str, pools: &[CommitStatus]) -> CommitStatus {
    let context = cluster_context(cluster);
    let count = |s: State| pools.iter().filter(|p| p.state == s).count();
    let (failed, pending, ok) = (
        count(State::Failure) + count(State::Error),
        count(State::Pending),
        count(State::Success),
    );
    let n = pools.len();
    if n == 0 {
        return CommitStatus::new(context, State::Success, "no pools");
    }
    if failed > 0 {
        CommitStatus::new(
            context,
            State::Failure,
            &format!("{failed}/{n} pools failed, {ok} done"),
        )
    } else if pending > 0 {
        CommitStatus::new(
            context,
            State::Pending,
            &format!("{ok}/{n} pools on the desired image, {pending} in progress or waiting"),
        )
    } else {
        CommitStatus::new(context, State::Success, "all pools on the desired image")
    }
}

/// Records what `npr` shows into `record`: a completion of its version when it succeeded with
/// every node on target (once per version in a row), a gate failure when it stopped on a gate,
/// and one under the reserved gate [`DID_NOT_BOOT`] when it halted because the version's image
/// did not boot (the later waves' guard holds on either, and a revert is proposed from them).
/// Returns true if the record changed.
pub fn observe_record(record: &mut PoolRecord, npr: &NodePoolRotation, now: DateTime<Utc>) -> bool {
    let Some(status) = npr.status.as_ref() else {
        return false;
    };
    if npr.spec.mode != Mode::Reconcile {
        return false;
    }
    let current = status.observed_generation.is_some()
        && status.observed_generation == npr.metadata.generation;
    if !current {
        return false;
    }
    let (channel, version) = (&npr.spec.channel, &npr.spec.version);
    match status.phase {
        Phase::Succeeded if status.total > 0 && status.on_target >= status.total => {
            let last = record.completions.last();
            if last.is_some_and(|c| &c.channel == channel && &c.version == version) {
                return false;
            }
            record.record_completion(channel, version, now);
            true
        }
        Phase::Failed | Phase::Paused => {
            let text = status
                .checkpoint
                .as_ref()
                .and_then(|c| c.rollback_reason.clone().or_else(|| c.halted.clone()))
                .unwrap_or_else(|| status.message.clone());
            let Some(gate) = failure_named(&text) else {
                return false;
            };
            let last = record.gate_failures.last();
            let already = last
                .is_some_and(|g| &g.channel == channel && &g.version == version && g.gate == gate)
                && record
                    .latest_completion(channel, version)
                    .is_none_or(|c| last.is_some_and(|g| g.at > c));
            if already {
                return false;
            }
            record.record_gate_failure(channel, version, &gate, now);
            true
        }
        _ => false,
    }
}

/// The channel, version and image every node of the pool runs, when its NodePoolRotation
/// shows it (succeeded on its current spec, every node on target); `None` while it rotates.
pub fn runs(npr: &NodePoolRotation) -> Option<(&str, &str, &str)> {
    let status = npr.status.as_ref()?;
    let current = status.observed_generation.is_some()
        && status.observed_generation == npr.metadata.generation;
    (current
        && status.phase == Phase::Succeeded
        && status.total > 0
        && status.on_target >= status.total)
        .then_some((
            npr.spec.channel.as_str(),
            npr.spec.version.as_str(),
            npr.spec.image.as_str(),
        ))
}

/// The failure a stop message records: the image did not boot (`image ami-0f9e… (2026.11.2)
/// did not boot: 6 of 6 new instance(s) never Ready …`, the planner's words) → [`DID_NOT_BOOT`],
/// else the gate it names. The boot message is matched first and by its start: its tail lists
/// instances and nodes, whose names are anyone's.
fn failure_named(text: &str) -> Option<String> {
    if text.starts_with("image ") && text.contains(" did not boot: ") {
        return Some(DID_NOT_BOOT.to_string());
    }
    gate_named(text)
}

/// The gate a stop message names: `gate error-rate failed ...` → `error-rate`.
fn gate_named(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w.eq_ignore_ascii_case("gate") {
            return words
                .next()
                .map(|g| g.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-'))
                .filter(|g| !g.is_empty())
                .map(str::to_string);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_names_are_read_from_stop_messages() {
        assert_eq!(
            gate_named("gate error-rate failed: 0.2 > 0.01").as_deref(),
            Some("error-rate")
        );
        assert_eq!(gate_named("drain timed out on node-1"), None);
    }

    #[test]
    fn an_image_that_did_not_boot_is_a_failure_a_drain_is_not() {
        assert_eq!(
            failure_named(
                "image ami-0f9e8d7c6b5a40312 (2026.11.2) did not boot: 6 of 6 new instance(s) never Ready within nodeReadyTimeout 15m, over 3 attempt(s) (last: i-m5 (node gate not Ready))"
            )
            .as_deref(),
            Some(DID_NOT_BOOT)
        );
        assert_eq!(
            failure_named("health gate error-rate failed before batch 2: 0.2 > 0.01").as_deref(),
            Some("error-rate")
        );
        // Some instances not Ready (others booted): the instances, not the image.
        assert_eq!(
            failure_named("batch 2: new instance(s) i-m5 not Ready within nodeReadyTimeout 15m"),
            None
        );
    }

    /// Pool `prod/general` on `general@version` (AWS, default policy, reconcile).
    fn desired_pool(version: &str) -> rota_core::fleet::resolved::DesiredPool {
        use crate::cloud::GroupRef;
        use rota_core::fleet::resolved::{DesiredPool, EffectivePolicy};
        DesiredPool {
            owner_image: None,
            cluster: "prod".into(),
            name: "general".into(),
            channel: "general".into(),
            version: version.into(),
            image: "ami-new".into(),
            arch: Default::default(),
            kubelet: None,
            released: None,
            max_age: None,
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "eks-general".into(),
            },
            node_selector: Default::default(),
            policy: EffectivePolicy::default(),
            gates: vec![],
            mode: Mode::Reconcile,
        }
    }

    /// A pool of `version` halted with `halted`, on its current spec (generation 1).
    fn halted_pool(version: &str, halted: &str) -> NodePoolRotation {
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        let pool = desired_pool(version);
        let mut npr =
            NodePoolRotation::new("general", NodePoolRotationSpec::from_desired(&pool, "abc"));
        npr.metadata.generation = Some(1);
        let checkpoint = serde_json::from_value(serde_json::json!({
            "originImage": "ami-old", "targetImage": "ami-new", "targetVersion": version,
            "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 1,
            "halted": halted, "stage": {"name": "between"}
        }))
        .unwrap();
        npr.status = Some(NodePoolRotationStatus {
            phase: Phase::Paused,
            total: 4,
            on_target: 0,
            message: halted.into(),
            checkpoint: Some(checkpoint),
            observed_generation: Some(1),
            observed_commit: Some("abc".into()),
            ..Default::default()
        });
        npr
    }

    #[test]
    fn an_image_that_did_not_boot_is_recorded_once_for_the_guard_and_the_reverts() {
        let now = DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let npr = halted_pool(
            "2026.11.2",
            "image ami-new (2026.11.2) did not boot: 4 of 4 new instance(s) never Ready within nodeReadyTimeout 15m, over 3 attempt(s) (last: i-1 (node n1 not Ready))",
        );
        let mut record = PoolRecord::new("prod", "general");
        assert!(observe_record(&mut record, &npr, now));
        assert_eq!(record.gate_failures.len(), 1);
        let f = &record.gate_failures[0];
        assert!(f.did_not_boot(), "{f:?}");
        assert_eq!(
            (f.channel.as_str(), f.version.as_str()),
            ("general", "2026.11.2")
        );
        // The same halt seen again: nothing new.
        assert!(!observe_record(
            &mut record,
            &npr,
            now + chrono::Duration::minutes(5)
        ));
        assert_eq!(record.gate_failures.len(), 1);
        // A halt that is not a failure of the image (a drain): not recorded.
        let drain = halted_pool("2026.11.2", "drain.timeout 30m reached on node n1");
        let mut other = PoolRecord::new("prod", "general");
        assert!(!observe_record(&mut other, &drain, now));
        assert!(other.gate_failures.is_empty());
    }

    #[test]
    fn a_rotating_pool_says_how_long_it_has_left_and_who_steered_it() {
        use crate::cloud::GroupRef;
        use rota_core::fleet::resolved::{DesiredPool, EffectivePolicy};
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        let pool = DesiredPool {
            owner_image: None,
            cluster: "prod".into(),
            name: "general".into(),
            channel: "general".into(),
            version: "2026.11.2".into(),
            image: "ami-new".into(),
            arch: Default::default(),
            kubelet: None,
            released: None,
            max_age: None,
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "eks-general".into(),
            },
            node_selector: Default::default(),
            policy: EffectivePolicy::default(),
            gates: vec![],
            mode: Mode::Reconcile,
        };
        let now = DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut npr =
            NodePoolRotation::new("general", NodePoolRotationSpec::from_desired(&pool, "abc"));
        let checkpoint = serde_json::from_value(serde_json::json!({
            "originImage": "ami-old", "targetImage": "ami-new", "targetVersion": "2026.11.2",
            "originalDesired": 10, "originalMax": 10, "poolSize": 10, "batchesStarted": 3,
            "operatorRequest": "complete-soak@2026-11-24T09:50:00Z@ana",
            "stage": {"name": "between"}
        }))
        .unwrap();
        npr.status = Some(NodePoolRotationStatus {
            phase: Phase::Soaking,
            total: 10,
            on_target: 3,
            checkpoint: Some(checkpoint),
            observed_commit: Some("abc".into()),
            estimated_completion: Some(now + chrono::Duration::minutes(23)),
            ..Default::default()
        });
        let intent = PoolIntent {
            name: "general".into(),
            spec: None,
            pinned: ("general".into(), "2026.11.2".into()),
            waiting: None,
            held: None,
        };
        let s = pool_status("prod", &intent, Some(&npr), "abc", now);
        assert_eq!(s.state, State::Pending);
        assert_eq!(
            s.description,
            "batch 3/10 · 3/10 nodes on general@2026.11.2 · soaking · about 25m left · after rota ctl complete-soak by ana"
        );
        // Past the estimate: nothing said rather than a negative time.
        let s = pool_status(
            "prod",
            &intent,
            Some(&npr),
            "abc",
            now + chrono::Duration::hours(1),
        );
        assert!(!s.description.contains("left"), "{}", s.description);
    }

    #[test]
    fn a_deferred_pool_says_until_when_in_its_commit_status() {
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        let pool = desired_pool("2026.11.2");
        let now = DateTime::parse_from_rfc3339("2026-11-23T16:30:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut npr =
            NodePoolRotation::new("general", NodePoolRotationSpec::from_desired(&pool, "abc"));
        let intent = PoolIntent {
            name: "general".into(),
            spec: None,
            pinned: ("general".into(), "2026.11.2".into()),
            waiting: None,
            held: None,
        };
        for (message, said) in [
            (
                "4 node(s) left; deferred until 2026-11-24T09:00:00+00:00: a batch takes about 45m, the window closes at 2026-11-23T17:00:00+00:00",
                "deferred until 2026-11-24T09:00:00+00:00 · 0/4 nodes on general@2026.11.2",
            ),
            (
                "4 node(s) left; deferred until 2027-01-04T06:00:00+00:00: blackout until 2027-01-04T06:00:00+00:00 (year-end freeze)",
                "deferred until 2027-01-04T06:00:00+00:00 · 0/4 nodes on general@2026.11.2",
            ),
        ] {
            npr.status = Some(NodePoolRotationStatus {
                phase: Phase::Waiting,
                total: 4,
                on_target: 0,
                message: message.into(),
                observed_commit: Some("abc".into()),
                ..Default::default()
            });
            let s = pool_status("prod", &intent, Some(&npr), "abc", now);
            assert_eq!((s.state, s.description.as_str()), (State::Pending, said));
        }
    }

    /// A pool a fleet stop holds says who stopped it and why in its commit status, with the
    /// note's next step (the clear command); a pool the stop scopes but holds nothing of (up
    /// to date) names the stop after its own words.
    #[test]
    fn a_stopped_pool_says_who_and_why_in_its_commit_status() {
        use rota_core::fleet::stops::{FleetStop, Trust};
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        use rota_core::rotate::stop::StopNote;
        let mut pool = desired_pool("2026.11.2");
        pool.policy.stop = Some(FleetStop {
            id: "ab".repeat(20),
            wave: Some("main".into()),
            cluster: None,
            reason: "INC-4711".into(),
            by: "ssh:ana@example.com SHA256:abc".into(),
            at: Utc::now(),
            trust: Trust::Signed,
        });
        let now = Utc::now();
        let mut npr =
            NodePoolRotation::new("general", NodePoolRotationSpec::from_desired(&pool, "abc"));
        let intent = PoolIntent {
            name: "general".into(),
            spec: None,
            pinned: ("general".into(), "2026.11.2".into()),
            waiting: None,
            held: None,
        };
        npr.status = Some(NodePoolRotationStatus {
            phase: Phase::Paused,
            total: 4,
            on_target: 1,
            message: "fleet stop abababababab (wave main) ...".into(),
            stop: Some(StopNote {
                reason: "Stopped".into(),
                by: MovedBy::Person,
                cause: "fleet stop".into(),
                blocked_by: vec![],
                next: "rota stop --clear --wave main".into(),
            }),
            observed_commit: Some("abc".into()),
            ..Default::default()
        });
        let s = pool_status("prod", &intent, Some(&npr), "abc", now);
        assert_eq!(s.state, State::Pending);
        assert_eq!(
            s.description,
            "paused; next: rota stop --clear --wave main · stopped by ssh:ana@example.com (wave main): INC-4711 · 1/4 nodes on general@2026.11.2"
        );
        assert_eq!(
            s.stop.as_ref().map(|n| n.next.as_str()),
            Some("rota stop --clear --wave main")
        );
        npr.status = Some(NodePoolRotationStatus {
            phase: Phase::Succeeded,
            total: 4,
            on_target: 4,
            observed_commit: Some("abc".into()),
            ..Default::default()
        });
        let s = pool_status("prod", &intent, Some(&npr), "abc", now);
        assert_eq!(s.state, State::Success);
        assert_eq!(
            s.description,
            "4/4 nodes on general@2026.11.2 · fleet stop abababababab"
        );
    }

    #[test]
    fn cluster_status_summarises_pools() {
        let ok = CommitStatus::new("rota/c/a", State::Success, "4/4");
        let wait = CommitStatus::new("rota/c/b", State::Pending, "batch 1/2");
        let bad = CommitStatus::new("rota/c/d", State::Failure, "failed");
        assert_eq!(
            cluster_status("c", std::slice::from_ref(&ok)).state,
            State::Success
        );
        let s = cluster_status("c", &[ok.clone(), wait.clone()]);
        assert_eq!(s.state, State::Pending);
        assert_eq!(
            s.description,
            "1/2 pools on the desired image, 1 in progress or waiting"
        );
        assert_eq!(cluster_status("c", &[ok, wait, bad]).state, State::Failure);
    }
}
