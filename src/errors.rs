//! One error vocabulary: every error rota meets while acting is classified here, once, by
//! what a retry should do about it, with a stable low-cardinality reason.
//!
//! In the manner of kube-rs controller-rs (`Error::metric_label()` and one `error_policy`):
//! the retry and backoff (`controller::requeue::after_error`), stuck detection and alerting
//! (`stuck`), the metrics' `reason` label and the reason of Kubernetes Events all derive from
//! the one [`Classified`] an error maps to; no caller decides "is this retryable" on its own.
//!
//! | class | what a retry does | alerts |
//! |---|---|---|
//! | [`Class::Transient`] | soon, with exponential backoff (network, 5xx, 429, a conflict, an object that went away since it was observed) | no: stuck detection names it if it never clears |
//! | [`Class::Wait`] | when the thing it waits for changes (a PodDisruptionBudget, the lease) | no |
//! | [`Class::Stalled`] | on a slow timer; needs a human (RBAC, credentials, quota, an invalid request, a resource type the cluster does not serve) | yes, once per reason |
//!
//! Pure: no I/O, no clock.

use crate::cloud::{CloudError, CloudErrorKind};

/// What a retry should do with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Retry soon with backoff.
    Transient,
    /// Something must change first: wait for it (watching the object that blocks, not on a
    /// fixed timer).
    Wait,
    /// Needs a human or a change in git: retry slowly, and alert.
    Stalled,
}

impl Class {
    /// Whether an error of this class by itself should page someone.
    pub fn alerts(self) -> bool {
        self == Class::Stalled
    }

    /// The class's label (`transient`, `wait`, `stalled`).
    pub fn label(self) -> &'static str {
        match self {
            Class::Transient => "transient",
            Class::Wait => "wait",
            Class::Stalled => "stalled",
        }
    }
}

/// An error as retry, stuck detection, metrics and events see it: a class and a stable,
/// low-cardinality reason (CamelCase; never a name, an ID or a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classified {
    pub class: Class,
    pub reason: &'static str,
}

const fn c(class: Class, reason: &'static str) -> Classified {
    Classified { class, reason }
}

/// Anything rota classifies.
pub trait Classify {
    fn classify(&self) -> Classified;
}

/// Where a Kubernetes call was made: the same status means different things for a read of
/// the pool and for an action on an object the pass observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeCall {
    /// Listing what a pool is made of: a 404 means the cluster does not serve the resource
    /// (a missing CRD, a wrong API path), which no retry fixes.
    Observe,
    /// An action on an object observed this pass: a 404 means it went away since, and the
    /// next pass observes (and plans) again.
    Act,
}

/// An HTTP status from the Kubernetes API (pure). 409 and 5xx heal, 429 is throttling,
/// 401/403 need credentials or RBAC, other 4xx mean rota sent something wrong.
pub fn kube_status(code: u16, call: KubeCall) -> Classified {
    match (code, call) {
        (409, _) => c(Class::Transient, "Conflict"),
        (429, _) => c(Class::Transient, "Throttled"),
        (408 | 500..=599, _) => c(Class::Transient, "ServerError"),
        (401, _) => c(Class::Stalled, "Unauthorized"),
        (403, _) => c(Class::Stalled, "Forbidden"),
        (404, KubeCall::Act) => c(Class::Transient, "NotFound"),
        (404, KubeCall::Observe) => c(Class::Stalled, "NotFound"),
        _ => c(Class::Stalled, "InvalidRequest"),
    }
}

/// A kube-rs client error: API answers by status, transport failures are transient.
pub fn kube_error(err: &kube::Error, call: KubeCall) -> Classified {
    match err {
        kube::Error::Api(s) => kube_status(s.code, call),
        _ => c(Class::Transient, "ApiUnreachable"),
    }
}

impl Classify for CloudErrorKind {
    /// Quota is stalled: capacity rarely appears on the timescale of a retry loop and someone
    /// has to raise a limit. NotFound of a group: the repo names a group that does not exist.
    fn classify(&self) -> Classified {
        let class = match self {
            CloudErrorKind::Transient | CloudErrorKind::Throttled => Class::Transient,
            CloudErrorKind::NotFound
            | CloudErrorKind::Quota
            | CloudErrorKind::Permission
            | CloudErrorKind::Invalid => Class::Stalled,
        };
        c(class, self.reason())
    }
}

impl Classify for CloudError {
    fn classify(&self) -> Classified {
        self.kind.classify()
    }
}

impl Classify for crate::rotate::apply::ApplyError {
    fn classify(&self) -> Classified {
        use crate::rotate::apply::ApplyError;
        match self {
            ApplyError::EvictionBlocked { .. } => c(Class::Wait, "EvictionBlocked"),
            // The index was behind the fresh read before a terminate; it catches up within
            // moments and the next plan drains the pods.
            ApplyError::NotDrained { .. } => c(Class::Transient, "NotDrained"),
            ApplyError::Conflict { .. } => c(Class::Transient, "Conflict"),
            ApplyError::NotLeading(_) => c(Class::Wait, "NotLeading"),
            ApplyError::Fenced { .. } => c(Class::Wait, "Fenced"),
            ApplyError::Cloud { source, .. } => source.classify(),
            ApplyError::Status { source, .. } | ApplyError::Kube { source, .. } => {
                kube_error(source, KubeCall::Act)
            }
        }
    }
}

impl Classify for crate::kube::index::NotObserved {
    /// Not listed yet: transient. A watch the API server refuses (403, 401) needs RBAC and
    /// never heals by retrying: stalled, as any observe call with that answer.
    fn classify(&self) -> Classified {
        use crate::kube::index::NotObserved;
        match self {
            NotObserved::NotSynced(_) => c(Class::Transient, "NotObserved"),
            NotObserved::WatchFailing {
                code: Some(code), ..
            } => kube_status(*code, KubeCall::Observe),
            NotObserved::WatchFailing { code: None, .. } => c(Class::Transient, "WatchFailing"),
        }
    }
}

impl Classify for crate::kube::observe::ObserveError {
    fn classify(&self) -> Classified {
        use crate::kube::observe::ObserveError;
        match self {
            ObserveError::NotObserved(n) => n.classify(),
            ObserveError::Cloud(e) => e.classify(),
        }
    }
}

impl Classify for crate::report::ReportError {
    /// GitHub answers 403 to both "no permission" and "secondary rate limit"; only the latter
    /// comes with a time to wait.
    fn classify(&self) -> Classified {
        use crate::report::ReportError;
        let class = match self {
            ReportError::Http {
                status,
                retry_after,
                ..
            } => {
                if *status == 429 || *status >= 500 || (*status == 403 && retry_after.is_some()) {
                    Class::Transient
                } else {
                    Class::Stalled
                }
            }
            ReportError::Transport { .. } | ReportError::Git { .. } => Class::Transient,
            ReportError::Invalid(_) | ReportError::Config(_) => Class::Stalled,
        };
        c(class, self.reason())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::observe::ObserveError;
    use crate::report::ReportError;
    use crate::rotate::apply::ApplyError;

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

    /// Every error source, with what retry, stuck detection, metrics and events all read
    /// from it.
    #[test]
    fn every_error_has_one_class_and_one_reason() {
        use Class::*;
        let observe = |code| {
            ObserveError::NotObserved(crate::kube::index::NotObserved::WatchFailing {
                kind: crate::kube::index::Kind::Nodes,
                why: "refused".into(),
                code: Some(code),
            })
        };
        let act = |code| ApplyError::Kube {
            action: "cordon n1".into(),
            source: api(code),
        };
        let http = |status, retry_after| ReportError::Http {
            backend: "github",
            status,
            url: "u".into(),
            message: "m".into(),
            retry_after,
        };
        let table: Vec<(String, Classified, Classified)> = vec![
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
            (
                "apply cloud".into(),
                ApplyError::Cloud {
                    action: "set capacity 6".into(),
                    source: cloud(CloudErrorKind::Quota),
                }
                .classify(),
                c(Stalled, "QuotaExceeded"),
            ),
            (
                "observe cloud".into(),
                ObserveError::Cloud(cloud(CloudErrorKind::Throttled)).classify(),
                c(Transient, "Throttled"),
            ),
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
        ];
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
}
