//! The one table of every error source rota meets while acting, with the class and reason
//! that retry (`requeue::after_error`), stuck detection, metrics and events all read from it.
//! Each error type classifies itself beside its definition; this checks them side by side.

use crate::cloud::{CloudError, CloudErrorKind};
use crate::controller::apply::ApplyError;
use crate::kube::observe::ObserveError;
use crate::report::ReportError;
use rota_core::errors::{Class, Classified, Classify};

const fn c(class: Class, reason: &'static str) -> Classified {
    Classified::new(class, reason)
}

fn api(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("m", "r")
            .with_code(code)
            .boxed(),
    )
}

fn cloud(kind: CloudErrorKind) -> CloudError {
    CloudError {
        kind,
        call: "SetDesiredCapacity",
        group: "aws:us-east-1/asg/general".into(),
        message: "m".into(),
    }
}

type Row = (String, Classified, Classified);

fn observe(code: u16) -> ObserveError {
    ObserveError::NotObserved(crate::kube::index::NotObserved::WatchFailing {
        kind: crate::kube::index::Kind::Nodes,
        why: "refused".into(),
        code: Some(code),
    })
}

fn act(code: u16) -> ApplyError {
    ApplyError::Kube {
        action: "cordon n1".into(),
        source: api(code),
    }
}

fn http(status: u16, retry_after: Option<std::time::Duration>) -> ReportError {
    ReportError::Http {
        backend: "github",
        status,
        url: "u".into(),
        message: "m".into(),
        retry_after,
    }
}

/// Observing the pool (watches of the cluster index).
fn observe_rows() -> Vec<Row> {
    use Class::*;
    vec![
        // An observe 403 needs RBAC: stalled (alerts, slow retry), never retried quietly
        // forever.
        (
            "observe 403".into(),
            observe(403).classify(),
            c(Stalled, "Forbidden"),
        ),
        (
            "observe 401".into(),
            observe(401).classify(),
            c(Stalled, "Unauthorized"),
        ),
        (
            "observe 404".into(),
            observe(404).classify(),
            c(Stalled, "NotFound"),
        ),
        (
            "observe 500".into(),
            observe(500).classify(),
            c(Transient, "ServerError"),
        ),
        (
            "observe 429".into(),
            observe(429).classify(),
            c(Transient, "Throttled"),
        ),
        (
            "observe unreachable".into(),
            ObserveError::NotObserved(crate::kube::index::NotObserved::WatchFailing {
                kind: crate::kube::index::Kind::Nodes,
                why: "connection reset".into(),
                code: None,
            })
            .classify(),
            c(Transient, "WatchFailing"),
        ),
        (
            "observe cloud".into(),
            ObserveError::Cloud(cloud(CloudErrorKind::Throttled)).classify(),
            c(Transient, "Throttled"),
        ),
    ]
}

/// Acting on Kubernetes: a 404 means the object went away since it was observed.
fn act_rows() -> Vec<Row> {
    use Class::*;
    vec![
        // A 404 on an action: the object went away since it was observed; transient, and
        // it neither alerts nor backs off slowly.
        (
            "act 404".into(),
            act(404).classify(),
            c(Transient, "NotFound"),
        ),
        (
            "act 403".into(),
            act(403).classify(),
            c(Stalled, "Forbidden"),
        ),
        (
            "act 409".into(),
            act(409).classify(),
            c(Transient, "Conflict"),
        ),
        (
            "act 422".into(),
            act(422).classify(),
            c(Stalled, "InvalidRequest"),
        ),
        (
            "status 409".into(),
            ApplyError::Conflict { name: "p".into() }.classify(),
            c(Transient, "Conflict"),
        ),
        (
            "eviction 429".into(),
            ApplyError::EvictionBlocked {
                namespace: "a".into(),
                pod: "b".into(),
            }
            .classify(),
            c(Wait, "EvictionBlocked"),
        ),
        (
            "not leading".into(),
            ApplyError::NotLeading(crate::controller::leader::LeaseError::NotHeld).classify(),
            c(Wait, "NotLeading"),
        ),
        (
            "apply cloud".into(),
            ApplyError::Cloud {
                action: "set capacity 6".into(),
                source: cloud(CloudErrorKind::Quota),
            }
            .classify(),
            c(Stalled, "QuotaExceeded"),
        ),
    ]
}

/// The clouds, by kind, directly and through observe and apply.
fn cloud_rows() -> Vec<Row> {
    use Class::*;
    vec![
        (
            "cloud throttled".into(),
            cloud(CloudErrorKind::Throttled).classify(),
            c(Transient, "Throttled"),
        ),
        (
            "cloud transient".into(),
            cloud(CloudErrorKind::Transient).classify(),
            c(Transient, "Transient"),
        ),
        (
            "cloud quota".into(),
            cloud(CloudErrorKind::Quota).classify(),
            c(Stalled, "QuotaExceeded"),
        ),
        (
            "cloud not found".into(),
            cloud(CloudErrorKind::NotFound).classify(),
            c(Stalled, "NotFound"),
        ),
        (
            "cloud permission".into(),
            cloud(CloudErrorKind::Permission).classify(),
            c(Stalled, "PermissionDenied"),
        ),
        (
            "cloud invalid".into(),
            cloud(CloudErrorKind::Invalid).classify(),
            c(Stalled, "InvalidRequest"),
        ),
    ]
}

/// Commit-status backends (forges).
fn forge_rows() -> Vec<Row> {
    use Class::*;
    vec![
        (
            "forge 401".into(),
            http(401, None).classify(),
            c(Stalled, "Unauthorized"),
        ),
        (
            "forge 403".into(),
            http(403, None).classify(),
            c(Stalled, "Forbidden"),
        ),
        (
            "forge 403 rate limit".into(),
            http(403, Some(std::time::Duration::from_secs(5))).classify(),
            c(Transient, "RateLimited"),
        ),
        (
            "forge 429".into(),
            http(429, None).classify(),
            c(Transient, "RateLimited"),
        ),
        (
            "forge 502".into(),
            http(502, None).classify(),
            c(Transient, "HttpError"),
        ),
    ]
}

/// Every error source, with what retry, stuck detection, metrics and events all read
/// from it.
#[test]
fn every_error_has_one_class_and_one_reason() {
    use Class::*;
    let table: Vec<Row> = [observe_rows(), act_rows(), cloud_rows(), forge_rows()].concat();
    let wrong: Vec<String> = table
        .iter()
        .filter(|(_, got, want)| got != want)
        .map(|(what, got, want)| format!("{what}: got {got:?}, want {want:?}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The deriving callers agree with the table.
    assert!(!CloudErrorKind::Quota.is_retryable());
    assert!(CloudErrorKind::Throttled.is_retryable());
    assert!(http(429, None).is_transient() && !http(401, None).is_transient());
    assert_eq!(act(404).retry(), Transient);
    assert_eq!(observe(403).classify().class, Stalled);
}
