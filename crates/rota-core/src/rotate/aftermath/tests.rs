//! The aftermath of a pass: what it tells, records and waits for, from plans the planner
//! made; and its parts (stop and request Events, the request's clearing patch, healing).

use super::events::{request_event, stop_event};
use super::*;
use crate::rotate::operator::REQUEST_NOTE_ANNOTATION;
use crate::rotate::status::{Reconciled, compose};
use crate::rotate::stop::{MovedBy, StopNote};
use crate::rotate::tests::{desired, old4, t0, world};
use crate::rotate::{Action, plan};

/// The aftermath of `plan` over `previous`, as a pass that wrote it and ran all its
/// actions (`done` what apply recorded).
fn written(
    spec: &NodePoolRotationSpec,
    previous: Option<&NodePoolRotationStatus>,
    plan: &Plan,
    composed: &Composed,
    done: step_events::Digest,
) -> Aftermath {
    let acted = Acted {
        ran: Some(plan.actions.len()),
        unchanged: false,
        written: true,
        done,
        failed: None,
    };
    let d = spec.desired();
    let pass = Pass {
        spec,
        previous,
        composed,
        plan,
        policy: &d.policy,
        gates: &d.gates,
        request: None,
        steered: None,
        request_note: false,
        failed_gate: None,
        acted: &acted,
        failed_action: None,
        alert: None,
        now: t0(),
    };
    of(&pass, Memory::default())
}

/// The first surge of a rotation: the rollout-started notice, the gauges, the kept
/// describe brought up to the surge, a look again in seconds; its step's Event waits for
/// the step to end.
#[test]
fn a_first_surge_tells_the_rollout_started_and_posts_its_step_later() {
    let d = desired(2);
    let spec = NodePoolRotationSpec::from_desired(&d, "c0ffee");
    let p = plan(&d, &world(old4()), None, t0());
    assert!(!p.actions.is_empty());
    let composed = compose(&Reconciled::new(&p, None, "c0ffee", Some(1), t0()));
    let mut done = step_events::Digest::default();
    for a in &p.actions {
        done.add("Surge", &a.reason);
    }
    let a = written(&spec, None, &p, &composed, done);
    assert_eq!(
        a.events,
        vec![],
        "the surge step lasts: its Event comes when it ends"
    );
    assert!(a.memory.events.is_some(), "the step's actions are gathered");
    assert_eq!(
        a.notices,
        vec![Notice {
            cluster: "prod".into(),
            pool: "general".into(),
            kind: NoticeKind::RolloutStarted {
                version: "v2".into()
            },
        }]
    );
    assert_eq!(
        a.metrics,
        vec![MetricUpdate::Status, MetricUpdate::GateCleared]
    );
    assert_eq!(a.describe, Describe::OwnWrites);
    assert_eq!(a.requeue, Some(Duration::from_secs(2)));
    assert!(a.error_healed);
    assert_eq!(a.clear_request, None);
}

/// A pass that failed: nothing is told of the status (not written), the kept describe is
/// dropped, and the failure path (not the plan) decides when to look again.
#[test]
fn a_failed_pass_forgets_the_describe_and_leaves_the_requeue_to_the_failure() {
    let d = desired(2);
    let spec = NodePoolRotationSpec::from_desired(&d, "c0ffee");
    let p = plan(&d, &world(old4()), None, t0());
    let composed = compose(&Reconciled::new(&p, None, "c0ffee", Some(1), t0()));
    let acted = Acted::default();
    let pass = Pass {
        spec: &spec,
        previous: None,
        composed: &composed,
        plan: &p,
        policy: &d.policy,
        gates: &d.gates,
        request: Some(&Request::parse("pause@2026-11-24T06:00:00Z")),
        steered: None,
        request_note: false,
        failed_gate: None,
        acted: &acted,
        failed_action: Some("set image ami-1"),
        alert: None,
        now: t0(),
    };
    let a = of(&pass, Memory::default());
    assert_eq!(a.describe, Describe::Forget);
    assert_eq!(a.requeue, None);
    assert!(!a.error_healed);
    assert!(a.notices.is_empty() && a.events.is_empty(), "{a:?}");
    assert_eq!(a.metrics, vec![MetricUpdate::Status]);
    assert_eq!(a.clear_request, None, "a request is consumed once recorded");
}

/// A pool that stops for a person: the stop's Warning, the paused notice, the gate that
/// stopped it held in its metric; the operator's request answered and cleared.
#[test]
fn a_stop_posts_its_warning_the_notice_and_holds_the_failed_gate() {
    let d = desired(2);
    let spec = NodePoolRotationSpec::from_desired(&d, "c0ffee");
    let p = plan(&d, &world(old4()), None, t0());
    let mut composed = compose(&Reconciled::new(&p, None, "c0ffee", Some(1), t0()));
    composed.status.phase = Phase::Paused;
    composed.status.message = "gate error-rate failed".into();
    composed.status.stop = Some(StopNote {
        reason: "GateFailed".into(),
        by: MovedBy::Person,
        cause: "gate error-rate failed".into(),
        blocked_by: vec![],
        next: "rota ctl retry".into(),
    });
    let acted = Acted {
        ran: Some(0),
        unchanged: false,
        written: true,
        done: Default::default(),
        failed: None,
    };
    let request = Request::parse("pause@2026-11-24T06:00:00Z");
    let pass = Pass {
        spec: &spec,
        previous: None,
        composed: &composed,
        plan: &p,
        policy: &d.policy,
        gates: &d.gates,
        request: Some(&request),
        steered: Some("paused at batch 1"),
        request_note: true,
        failed_gate: Some("error-rate"),
        acted: &acted,
        failed_action: None,
        alert: None,
        now: t0(),
    };
    let a = of(&pass, Memory::default());
    let shown: Vec<String> = a.events.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown,
        vec![
            "Normal OperatorPause (Rotate): paused at batch 1",
            "Warning GateFailed (Rotate): gate error-rate failed; next: rota ctl retry",
        ]
    );
    assert_eq!(
        a.notices[0].kind,
        NoticeKind::Paused {
            reason: "gate error-rate failed".into()
        }
    );
    assert!(
        a.metrics
            .contains(&MetricUpdate::GateFailed("error-rate".into())),
        "{:?}",
        a.metrics
    );
    assert_eq!(
        a.clear_request,
        Some(ClearRequest {
            value: "pause@2026-11-24T06:00:00Z".into(),
            with_note: true
        })
    );
}

#[test]
fn each_verb_has_its_own_event_reason_and_a_bad_request_warns() {
    for (value, reason) in [
        ("pause@2026-11-24T06:00:00Z", "OperatorPause"),
        ("resume@2026-11-24T06:00:00Z", "OperatorResume"),
        ("retry@2026-11-24T06:00:00Z", "OperatorRetry"),
    ] {
        let (got, event) = request_event(&Request::parse(value), None);
        assert_eq!(got, value);
        assert_eq!(event, Event::new(false, reason, "Rotate", "applied".into()));
    }
    let (value, event) = request_event(&Request::parse("explode"), None);
    assert_eq!(
        (value.as_str(), event.warning, event.reason.as_str()),
        ("explode", true, "OperatorRequestInvalid")
    );
    assert!(event.note.starts_with("ignored: "), "{}", event.note);
}

#[test]
fn the_clearing_patch_removes_only_this_request_and_its_note() {
    use crate::rotate::operator::REQUEST_ANNOTATION;
    let value = "pause@2026-11-24T06:00:00Z";
    let path = format!(
        "/metadata/annotations/{}",
        REQUEST_ANNOTATION.replace('/', "~1")
    );
    let clear = |with_note| ClearRequest {
        value: value.into(),
        with_note,
    };
    assert_eq!(
        clear(false).ops(),
        serde_json::json!([
            {"op": "test", "path": path, "value": value},
            {"op": "remove", "path": path}
        ])
    );
    let ops = clear(true).ops();
    assert_eq!(ops.as_array().unwrap().len(), 3);
    assert_eq!(
        ops[2]["path"],
        format!(
            "/metadata/annotations/{}",
            REQUEST_NOTE_ANNOTATION.replace('/', "~1")
        )
    );
}

/// Issue 26 (3): no stale error rides along on a stop: the halt's own `set image` that a
/// 504 interrupted, once it succeeds, is no longer named; a quota that stopped the batch
/// is, while the undo's other actions run.
#[test]
fn a_healed_error_is_dropped_even_on_a_stopped_pool() {
    let set_image = Planned {
        action: Action::SetImage {
            image: "ami-old".into(),
        },
        reason: "halted".into(),
    };
    let withdraw = Planned {
        action: Action::WithdrawSurge {
            desired: 4,
            instances: vec![],
        },
        reason: "undo".into(),
    };
    let failed = Some("set image ami-old");
    assert!(error_healed(true, std::slice::from_ref(&set_image), failed));
    assert!(!error_healed(true, std::slice::from_ref(&withdraw), failed));
    assert!(!error_healed(false, &[], failed));
    assert!(error_healed(false, std::slice::from_ref(&withdraw), failed));
    // A describe or a status write that failed: healed by a pass that did both, even
    // one with nothing to do (a pool waiting for its slot).
    assert!(error_healed(true, &[], None));
}

/// A wait rota ends is one Event per reason; a person's stop again when what holds it
/// changes.
#[test]
fn stop_events_are_posted_once_per_reason_and_per_blocker_for_a_person() {
    let status = |by, blocked: &str| NodePoolRotationStatus {
        stop: Some(StopNote {
            reason: "Draining".into(),
            by,
            cause: "draining".into(),
            blocked_by: vec![blocked.into()],
            next: "nothing to do".into(),
        }),
        ..Default::default()
    };
    let (a, b) = (
        status(MovedBy::Rota, "pod a"),
        status(MovedBy::Rota, "pod b"),
    );
    assert!(stop_event(None, &a).is_some());
    assert!(stop_event(Some(&a), &b).is_none());
    let (a, b) = (
        status(MovedBy::Person, "pod a"),
        status(MovedBy::Person, "pod b"),
    );
    assert!(stop_event(Some(&a), &a).is_none());
    let e = stop_event(Some(&a), &b).unwrap();
    assert!(e.warning);
    assert_eq!(e.reason, "Draining");
    assert_eq!(e.note, "draining; blocked by: pod b; next: nothing to do");
    assert!(stop_event(Some(&a), &NodePoolRotationStatus::default()).is_none());
}

/// A pass whose action failed: the failed action's Warning first (its reason, its error as
/// rota words it), then the step's Events of what ran before it, and last the alert of an
/// error that retrying will not fix; nothing is requeued (the failure's class decides) and
/// the kept describe is dropped.
#[test]
fn a_failed_action_warns_first_and_an_alert_comes_last() {
    let d = desired(2);
    let spec = NodePoolRotationSpec::from_desired(&d, "c0ffee");
    let p = plan(&d, &world(old4()), None, t0());
    let composed = compose(&Reconciled::new(&p, None, "c0ffee", Some(1), t0()));
    let failed = ActionFailed {
        error: crate::errors::Classified::new(crate::errors::Class::Stalled, "QuotaExceeded"),
        message: format!(
            "{}: SetDesiredCapacity failed (quota): no room",
            p.actions[1].action
        ),
    };
    let mut done = step_events::Digest::default();
    done.add("Surge", &p.actions[0].reason);
    let acted = Acted {
        ran: None,
        unchanged: false,
        written: true,
        done,
        failed: Some(failed),
    };
    let pass = Pass {
        spec: &spec,
        previous: None,
        composed: &composed,
        plan: &p,
        policy: &d.policy,
        gates: &d.gates,
        request: None,
        steered: None,
        request_note: false,
        failed_gate: None,
        acted: &acted,
        failed_action: None,
        alert: Some("QuotaExceeded"),
        now: t0(),
    };
    let a = of(&pass, Memory::default());
    let shown: Vec<String> = a.events.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        shown.first().map(String::as_str),
        Some(
            format!(
                "Warning QuotaExceeded (Rotate): {}: SetDesiredCapacity failed (quota): no room",
                p.actions[1].action
            )
            .as_str()
        ),
        "{shown:#?}"
    );
    assert_eq!(
        shown.last().map(String::as_str),
        Some(
            "Warning QuotaExceeded (Rotate): an error that retrying will not fix; see the status message"
        ),
        "{shown:#?}"
    );
    assert_eq!(a.requeue, None);
    assert_eq!(a.describe, Describe::Forget);
    // Without a failure, neither.
    let healthy = Acted {
        failed: None,
        ..acted.clone()
    };
    let pass = Pass {
        acted: &healthy,
        alert: None,
        ..pass
    };
    let a = of(&pass, Memory::default());
    assert!(a.events.iter().all(|e| !e.warning), "{:?}", a.events);
}

/// A plan made from a kept describe stands only if it calls the cloud for nothing and keeps
/// the checkpoint it read: a surge does not, nor does a pass that moves the stage, and a pass
/// that only waits does.
#[test]
fn only_a_plan_that_writes_nothing_to_the_cloud_and_keeps_the_checkpoint_stands_on_a_kept_describe()
{
    use own_writes::may_stand_on_kept_describe as stands;
    let d = desired(2);
    let surge = plan(&d, &world(old4()), None, t0());
    assert!(own_writes::calls_cloud(&surge));
    assert!(!stands(&surge, surge.checkpoint.as_ref()));
    let mut waits = surge.clone();
    waits.actions.clear();
    assert!(stands(&waits, surge.checkpoint.as_ref()));
    // The same plan over another checkpoint (or none) writes one: made again.
    assert!(!stands(&waits, None));
}
