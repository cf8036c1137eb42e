//! One error vocabulary: every error rota meets while acting is classified here, once, by
//! what a retry should do about it, with a stable low-cardinality reason.
//!
//! In the manner of kube-rs controller-rs (`Error::metric_label()` and one `error_policy`):
//! the retry and backoff (`rotate::aftermath::requeue::after_error`), stuck detection and alerting
//! (`stuck`), the metrics' `reason` label and the reason of Kubernetes Events all derive from
//! the one [`Classified`] an error maps to; no caller decides "is this retryable" on its own.
//!
//! | class | what a retry does | alerts |
//! |---|---|---|
//! | [`Class::Transient`] | soon, with exponential backoff (network, 5xx, 429, a conflict, an object that went away since it was observed) | no: stuck detection names it if it never clears |
//! | [`Class::Wait`] | when the thing it waits for changes (a PodDisruptionBudget, the lease) | no |
//! | [`Class::Stalled`] | on a slow timer; needs a human (RBAC, credentials, quota, an invalid request, a resource type the cluster does not serve) | yes, once per reason |
//!
//! Pure: no I/O, no clock, and nothing of rota: each error type classifies itself beside
//! its definition (`impl Classify for …`), with [`kube_status`] for answers of the Kubernetes
//! API; the table of every error source and its class is tested in `controller::error_classes`.

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

impl Classified {
    pub const fn new(class: Class, reason: &'static str) -> Classified {
        Classified { class, reason }
    }
}

const fn c(class: Class, reason: &'static str) -> Classified {
    Classified::new(class, reason)
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
