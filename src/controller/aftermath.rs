//! The executor of a pass's aftermath: what `rota_core::rotate::aftermath::of` decided
//! (Events, notices, metric updates, the request's clearing patch, the kept describe, the
//! requeue) carried out against the recorder, the notifier, the metrics registry, the API
//! server and the pool's runtime state. Nothing is decided here; a new Event, notice or
//! metric is decided in the core and only a new kind of effect needs an arm here.

use kube::api::Api;
use kube::{Resource, ResourceExt};
use rota_core::errors::Classify;

use super::apply::ApplyError;
use super::state::Controller;
use crate::kube::crd::NodePoolRotation;
use crate::metrics::PoolMetrics;
use rota_core::rotate::aftermath::{self, Aftermath, ClearRequest, Describe, Event, MetricUpdate};
use rota_core::rotate::operator::{OperatorError, REQUEST_NOTE_ANNOTATION, Request};
use rota_core::rotate::resource::NodePoolRotationStatus;
use rota_core::rotate::status::Composed;
use rota_core::rotate::{GateVerdict, Plan};

/// What a pass did that its aftermath follows from, besides the plan and the status.
pub(super) struct Facts<'a> {
    /// The error the pass stopped on, when it is the pool's ([`not_ours`]: not a write
    /// someone else's made stale): counted, and alerted on once if retrying cannot fix it.
    pub error: Option<&'a ApplyError>,
    pub desired: &'a rota_core::fleet::resolved::DesiredPool,
    pub request: Option<&'a Result<Request, OperatorError>>,
    pub steered: Option<&'a str>,
    pub gates: &'a GateVerdict,
    pub acted: &'a aftermath::Acted,
    /// The pass stopped short as a crash would (the test hook `Controller::crash_after`).
    pub crashed: bool,
    pub now: chrono::DateTime<chrono::Utc>,
}

impl Controller {
    /// What follows from the pass: its aftermath decided (pure, in the core) and carried
    /// out, so that the pass hands off here once.
    pub(super) async fn follow_up(
        &mut self,
        npr: &NodePoolRotation,
        plan: &Plan,
        composed: &Composed,
        facts: &Facts<'_>,
    ) {
        let mut after = self.aftermath(npr, plan, composed, facts);
        if facts.crashed {
            // A crash settles nothing: the caller drops this controller and starts another.
            after.requeue = None;
        }
        self.carry_out(npr, plan, &composed.status, after).await;
    }

    /// The pass's aftermath (pure, in the core), from the facts and the pool's memory.
    fn aftermath(
        &mut self,
        npr: &NodePoolRotation,
        plan: &Plan,
        composed: &Composed,
        facts: &Facts<'_>,
    ) -> Aftermath {
        let alert = facts
            .error
            .and_then(|e| self.record_error(npr, e.classify()));
        if let (Some(reason), Some(e)) = (alert, facts.error) {
            tracing::error!(%reason, error = %e, "an action failed and will not heal by retrying");
        }
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        let failed_gate = match facts.gates {
            GateVerdict::Failed { gate, .. } => Some(gate.as_str()),
            _ => None,
        };
        let pass = aftermath::Pass {
            spec: &npr.spec,
            previous: npr.status.as_ref(),
            composed,
            plan,
            policy: &facts.desired.policy,
            gates: &facts.desired.gates,
            request: facts.request,
            steered: facts.steered,
            request_note: npr
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(REQUEST_NOTE_ANNOTATION)),
            failed_gate,
            acted: facts.acted,
            failed_action: state.last_error_action.as_deref(),
            alert,
            now: facts.now,
        };
        aftermath::of(&pass, std::mem::take(&mut state.aftermath))
    }

    /// Count an error of the pool (`rota_errors_total`) and remember it as the likely cause
    /// should the pool stick. Returns the reason when it alerts now (an error that retrying
    /// will not fix, once per reason: `ErrorTracker::record`); the caller posts the alert
    /// (`failure::alert`).
    pub(super) fn record_error(
        &mut self,
        npr: &NodePoolRotation,
        err: rota_core::errors::Classified,
    ) -> Option<&'static str> {
        self.metrics
            .pool(&npr.spec.cluster, &npr.spec.pool)
            .record_error(err.reason, err.class.alerts());
        self.pools.get_mut(&npr.name_any())?.errors.record(err)
    }

    /// Carry the aftermath out, in the order it lists: the Events (the failed action's, the
    /// step's, the request's, the stop's, the Stuck condition's, the alert), the kept describe, the request's annotation, the
    /// metrics, the notices; then the pool's runtime state (its memory, and on success its
    /// healed error and when it is due).
    async fn carry_out(
        &mut self,
        npr: &NodePoolRotation,
        plan: &Plan,
        status: &NodePoolRotationStatus,
        a: Aftermath,
    ) {
        for e in &a.events {
            self.event(npr, e).await;
        }
        match a.describe {
            Describe::Keep => {}
            Describe::Forget => self.forget_describe(npr),
            Describe::OwnWrites => self.note_own_writes(npr, &plan.actions),
        }
        if let Some(clear) = &a.clear_request {
            self.clear_request(npr, clear).await;
        }
        let pm = self.metrics.pool(&npr.spec.cluster, &npr.spec.pool);
        for m in &a.metrics {
            record(&pm, m, status);
        }
        for notice in a.notices {
            tracing::info!(?notice.kind, "rollout notice");
            self.notifier.notify(notice);
        }
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        state.aftermath = a.memory;
        if let Some(wait) = a.requeue {
            if a.error_healed {
                state.last_error = None;
                state.last_error_action = None;
                state.refused = None;
            }
            state.failures = 0;
            state.blocked_on = None;
            state.due = self.clock.after(wait);
        }
    }

    /// Remove the operator's request annotation (only if it still holds this request: a
    /// newer one stays for the next reconcile), while this replica leads.
    async fn clear_request(&self, npr: &NodePoolRotation, clear: &ClearRequest) {
        // A Kubernetes write like any other: only while this replica leads. A request left
        // in place is read again by the next leader's pass, whose checkpoint knows it was
        // applied.
        if !self.may_act() {
            return;
        }
        let patch: json_patch::Patch = match serde_json::from_value(clear.ops()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "building the request-clearing patch failed");
                return;
            }
        };
        let api: Api<NodePoolRotation> = Api::all(self.client.clone());
        if let Err(e) = api
            .patch(
                &npr.name_any(),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::<()>::Json(patch),
            )
            .await
        {
            // A newer request replaced it (the test op fails), or a transient error: the next
            // reconcile sees the annotation again and the checkpoint knows it was applied.
            tracing::info!(error = %e, "clearing the operator request annotation failed");
        }
    }

    /// Publish an Event on the NodePoolRotation (when events are on, and while this replica
    /// leads: an Event is a write like any other); failures are logged.
    pub(super) async fn event(&self, npr: &NodePoolRotation, e: &Event) {
        use kube::runtime::events::{Event as KubeEvent, EventType};
        if e.warning {
            tracing::warn!(reason = %e.reason, note = %e.note, "warning event");
        }
        let Some(rec) = &self.recorder else { return };
        if !self.may_act() {
            return;
        }
        let ev = KubeEvent {
            type_: if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason.clone(),
            note: Some(e.note.clone()),
            action: e.action.clone(),
            secondary: None,
        };
        if let Err(err) = rec.publish(&ev, &npr.object_ref(&())).await {
            tracing::warn!(error = %err, "publishing an event failed");
        }
    }
}

/// One metric update on the pool's series (`status`: the composed status the gauges follow).
fn record(pm: &PoolMetrics<'_>, m: &MetricUpdate, status: &NodePoolRotationStatus) {
    match m {
        MetricUpdate::Status => pm.observe_status(status),
        MetricUpdate::BroughtUp(n) => pm.record_brought_up(*n),
        MetricUpdate::BootToReady(s) => pm.observe_boot_to_ready(*s),
        MetricUpdate::Drained(n) => pm.record_drained(*n),
        MetricUpdate::DrainDuration(s) => pm.observe_drain_duration(*s),
        MetricUpdate::BatchDuration(s) => pm.observe_batch_duration(*s),
        MetricUpdate::GateFailed(g) => pm.record_gate_failed(g),
        MetricUpdate::GateCleared => pm.clear_gate_failed(),
    }
}

/// Whether an apply error is not the pool's: someone else wrote the resource since it was
/// read, or leads. Nothing planned from this read is acted on, nothing is counted against the
/// pool; the next pass observes again.
pub(super) fn not_ours(e: &ApplyError) -> bool {
    matches!(
        e,
        ApplyError::Conflict { .. } | ApplyError::NotLeading(_) | ApplyError::Fenced { .. }
    )
}

/// Whether an apply error means the status was not written (the write failed or was
/// refused): the aftermath then tells nothing of it.
pub(super) fn unwritten(e: &ApplyError) -> bool {
    matches!(
        e,
        ApplyError::Status { .. }
            | ApplyError::Conflict { .. }
            | ApplyError::NotLeading(_)
            | ApplyError::Fenced { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each metric update the aftermath decides lands in its series (the names the
    /// dashboards and alerts read).
    #[test]
    fn each_metric_update_lands_in_its_series() {
        let m = crate::metrics::Metrics::new();
        let pm = m.pool("c", "p");
        let status = NodePoolRotationStatus::default();
        for u in [
            MetricUpdate::BroughtUp(2),
            MetricUpdate::BootToReady(180.0),
            MetricUpdate::BootToReady(180.0),
            MetricUpdate::Drained(1),
            MetricUpdate::DrainDuration(60.0),
            MetricUpdate::BatchDuration(1500.0),
            MetricUpdate::GateFailed("error-rate".into()),
        ] {
            record(&pm, &u, &status);
        }
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-24T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let text = m.render_at(at);
        for line in [
            r#"rota_nodes_brought_up_total{cluster="c",pool="p"} 2"#,
            r#"rota_node_boot_to_ready_seconds_sum{cluster="c",pool="p"} 360"#,
            r#"rota_nodes_drained_total{cluster="c",pool="p"} 1"#,
            r#"rota_drain_duration_seconds_sum{cluster="c",pool="p"} 60"#,
            r#"rota_batch_duration_seconds_sum{cluster="c",pool="p"} 1500"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(text.contains("rota_pool_gate_failed"), "{text}");
    }

    /// One Event of each kind the aftermath posts, made by the core as it makes them: a
    /// batch step's (gathered, posted as the pool stops in it), a stop's, the Warning of a
    /// failed action, the alert of an error retrying will not fix. `n` makes the notes
    /// differ, so that a second round is new Events rather than repeats the recorder folds.
    #[cfg(feature = "sim")]
    fn one_event_of_each_kind(n: u32) -> Vec<Event> {
        use rota_core::errors::{Class, Classified};
        use rota_core::rotate::aftermath::{events, failure, step_events};
        use rota_core::rotate::stop::{MovedBy, StopNote};
        let now = chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap();
        let mut done = step_events::Digest::default();
        done.add("Evict", &format!("drain of batch 2, round {n}"));
        let step = step_events::Step {
            batch: Some(2),
            stage: "Draining",
            phase: rota_core::rotate::Phase::Paused,
        };
        let mut steps = step_events::record(&mut None, step, &done, now);
        assert_eq!(steps.len(), 1, "a stopped step is posted at once");
        let (reason, action, note) = steps.remove(0);
        let stopped = NodePoolRotationStatus {
            stop: Some(StopNote {
                reason: "DrainTimeout".into(),
                by: MovedBy::Person,
                cause: format!("batch 2's drain ran past drain.timeout (round {n})"),
                blocked_by: vec!["pod app/db-0".into()],
                next: "rota ctl retry --cluster c --pool p".into(),
            }),
            ..NodePoolRotationStatus::default()
        };
        let failed = failure::ActionFailed {
            error: Classified::new(Class::Transient, "Throttled"),
            message: format!("set image ami-2: throttled (round {n})"),
        };
        vec![
            Event::new(false, reason, &action, note),
            events::stop_event(None, &stopped).expect("a stop is said"),
            failed.event(),
            failure::alert(if n == 0 {
                "QuotaExceeded"
            } else {
                "AccessDenied"
            }),
        ]
    }

    /// A controller on `client` under an election the test decides: the lease held until
    /// the test calls `leadership.lose()`; with the pool `p` prepared.
    #[cfg(feature = "sim")]
    fn leading(client: kube::Client) -> (Controller, NodePoolRotation) {
        use rota_core::rotate::resource::{Fence, NodePoolRotationSpec};
        let groups = std::sync::Arc::new(crate::cloud::registry::Providers::new());
        let mut c = Controller::new(client, groups, crate::controller::Config::new("v1", "r-0"));
        c.election = Some(super::super::leader::Renewal::by_the_test());
        let fence = Fence {
            holder: "r-0".into(),
            transitions: 1,
        };
        c.leadership.grant(
            "rota-v1",
            tokio::time::Instant::now() + std::time::Duration::from_secs(3600),
            std::time::Duration::from_secs(5),
            fence,
        );
        let spec: NodePoolRotationSpec = serde_json::from_value(serde_json::json!({
            "cluster": "c", "pool": "p", "channel": "stable", "version": "v", "image": "i",
            "sourceCommit": "abc",
            "group": {"aws": {"region": "r", "autoScalingGroup": "g"}},
            "policy": serde_json::to_value(
                rota_core::fleet::resolved::EffectivePolicy::default()
            ).unwrap(),
        }))
        .unwrap();
        let npr = NodePoolRotation::new("p", spec);
        c.pools
            .insert(npr.name_any(), crate::controller::PoolState::new());
        (c, npr)
    }

    /// A plan with nothing to do, its pool paused (what the Events below tell of).
    #[cfg(feature = "sim")]
    fn paused() -> Plan {
        Plan {
            actions: Vec::new(),
            dry_run: Vec::new(),
            checkpoint: None,
            status: rota_core::rotate::StatusSummary {
                phase: rota_core::rotate::Phase::Paused,
                reason: "DrainTimeout",
                message: String::new(),
                stop: None,
                total: 0,
                on_target: 0,
                ready: 0,
                remaining: None,
            },
        }
    }

    /// An aftermath of these Events and this request's clearing, nothing else.
    #[cfg(feature = "sim")]
    fn of(events: Vec<Event>, clear_request: Option<ClearRequest>) -> Aftermath {
        Aftermath {
            events,
            notices: Vec::new(),
            metrics: Vec::new(),
            clear_request,
            describe: Describe::Keep,
            requeue: None,
            error_healed: false,
            memory: Default::default(),
        }
    }

    /// Invariant 7 for Events: a replica that lost its lease posts none, of any kind, even
    /// with a pass's aftermath in hand (the lease can run out between `act` and the
    /// aftermath). Posted on the simulated API server: all four while the lease is held
    /// (so the count can see them), none once it is lost.
    #[cfg(feature = "sim")]
    #[tokio::test]
    async fn no_event_of_any_kind_is_posted_once_the_lease_is_lost() {
        use rota_sim::store::{ListOptions, ResourceType, Store};
        let store = Store::new();
        let (mut c, npr) = leading(crate::kube::sim::client(store.clone()));
        let status = NodePoolRotationStatus::default();
        let posted = || {
            let (events, _) = store
                .list(&ResourceType::events(), None, &ListOptions::default())
                .unwrap();
            events
        };
        let a = of(one_event_of_each_kind(0), None);
        c.carry_out(&npr, &paused(), &status, a).await;
        let leading = posted();
        let mut reasons: Vec<_> = leading
            .iter()
            .filter_map(|e| e["reason"].as_str())
            .collect();
        reasons.sort();
        assert_eq!(
            reasons,
            ["DrainTimeout", "Draining", "QuotaExceeded", "Throttled"],
            "while leading, each kind is posted"
        );
        c.leadership.lose();
        let a = of(one_event_of_each_kind(1), None);
        c.carry_out(&npr, &paused(), &status, a).await;
        assert_eq!(posted(), leading, "nothing posted once the lease is lost");
    }

    /// The patch that clears an operator's request is a Kubernetes write like any other:
    /// sent while the lease is held, not once it is lost (the next leader reads the request
    /// again, and the checkpoint knows it was applied). Counted at the API server.
    #[cfg(feature = "sim")]
    #[tokio::test]
    async fn the_request_is_cleared_only_while_the_lease_is_held() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let server = rota_sim::apiserver::ApiServer::new(rota_sim::store::Store::new());
        let log = seen.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            log.lock()
                .unwrap()
                .push(format!("{} {}", req.method(), req.uri().path()));
            let mut server = server.clone();
            async move { tower::Service::call(&mut server, req).await }
        });
        let (mut c, npr) = leading(kube::Client::new(svc, "default"));
        let patches = || {
            let seen = seen.lock().unwrap();
            let on_npr =
                |r: &&String| r.starts_with("PATCH") && r.ends_with("/nodepoolrotations/p");
            seen.iter().filter(on_npr).count()
        };
        let clear = ClearRequest {
            value: "pause".into(),
            with_note: false,
        };
        let status = NodePoolRotationStatus::default();
        c.carry_out(
            &npr,
            &paused(),
            &status,
            of(Vec::new(), Some(clear.clone())),
        )
        .await;
        assert_eq!(
            patches(),
            1,
            "sent while leading: {:?}",
            seen.lock().unwrap()
        );
        c.leadership.lose();
        c.carry_out(&npr, &paused(), &status, of(Vec::new(), Some(clear)))
            .await;
        assert_eq!(patches(), 1, "none once the lease is lost");
    }
}
