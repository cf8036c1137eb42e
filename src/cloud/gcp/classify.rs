//! What a failed Compute Engine call means for rota: HTTP status, Google error reasons and
//! operation error codes, mapped to [`CloudErrorKind`].
//!
//! Compute reports failure in two places. A request can be refused at once, with an HTTP
//! status and a body `{"error": {"code", "message", "errors": [{"reason", ...}]}}`; and an
//! accepted mutation returns an `Operation` that may finish `DONE` with
//! `error.errors[].code` set (quota and capacity shortages show up there, not as HTTP errors).
//! The reason or code is more precise than the status and wins when it is known: Compute
//! answers API rate limiting with **403** `rateLimitExceeded`, which the status alone would
//! call a permission problem.

use crate::cloud::CloudErrorKind;
use crate::cloud::retry::kind_for_status;

/// Google error reasons (`error.errors[].reason` of a refused request) that decide the kind
/// on their own.
fn kind_for_reason(reason: &str) -> Option<CloudErrorKind> {
    Some(match reason {
        // Legacy `errors[].reason` (camelCase) and `google.rpc.ErrorInfo.reason` of the
        // `details` form (UPPER_SNAKE, `google.api.ErrorReason` for domain googleapis.com).
        "rateLimitExceeded" | "userRateLimitExceeded" | "RATE_LIMIT_EXCEEDED" => {
            CloudErrorKind::Throttled
        }
        "backendError" | "internalError" => CloudErrorKind::Transient,
        // A mutation on a group whose previous operation is still running: heals on its own.
        "resourceNotReady" | "resourceInUseByAnotherResource" => CloudErrorKind::Transient,
        "quotaExceeded"
        | "RESOURCE_QUOTA_EXCEEDED"
        | "QUOTA_EXCEEDED"
        | "ZONE_RESOURCE_POOL_EXHAUSTED"
        | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
        | "REGION_RESOURCE_POOL_EXHAUSTED" => CloudErrorKind::Quota,
        "notFound" => CloudErrorKind::NotFound,
        "forbidden"
        | "insufficientPermissions"
        | "accessNotConfigured"
        | "SERVICE_DISABLED"
        | "IAM_PERMISSION_DENIED"
        | "ACCESS_TOKEN_EXPIRED"
        | "ACCESS_TOKEN_SCOPE_INSUFFICIENT"
        | "CREDENTIALS_MISSING"
        | "BILLING_DISABLED"
        | "USER_PROJECT_DENIED"
        | "CONSUMER_INVALID"
        | "CONSUMER_SUSPENDED" => CloudErrorKind::Permission,
        "invalid" | "badRequest" | "required" | "conditionNotMet" | "invalidParameter" => {
            CloudErrorKind::Invalid
        }
        _ => return None,
    })
}

/// A refused request: the first reason that decides, else the HTTP status. No status at all
/// means the request never got an answer (connection refused, reset, timed out): transient.
pub fn classify_response(status: Option<u16>, reasons: &[&str]) -> CloudErrorKind {
    if let Some(kind) = reasons.iter().find_map(|r| kind_for_reason(r)) {
        return kind;
    }
    match status {
        Some(s) => kind_for_status(s),
        None => CloudErrorKind::Transient,
    }
}

/// A refused request as the Google client reads it: `google.rpc.ErrorInfo` reasons from
/// `error.details` (or, only when there are no details, the legacy `error.errors[].reason`),
/// the `google.rpc.Code` name of `error.status`, and the HTTP status. A reason rota knows
/// decides; then a code that says more than the status (`RESOURCE_EXHAUSTED` is a rate or
/// quota limit whatever the status, and Compute sends its API rate limit as a 403); then the
/// status.
pub fn classify_rpc(
    status: Option<u16>,
    rpc_code: Option<&str>,
    reasons: &[&str],
) -> CloudErrorKind {
    if let Some(kind) = reasons.iter().find_map(|r| kind_for_reason(r)) {
        return kind;
    }
    match rpc_code {
        Some("RESOURCE_EXHAUSTED") => CloudErrorKind::Throttled,
        Some("UNAVAILABLE" | "DEADLINE_EXCEEDED" | "ABORTED") => CloudErrorKind::Transient,
        _ => classify_response(status, &[]),
    }
}

/// Whether a refused Kubernetes Engine request says the cluster is busy with another
/// operation: GKE runs one operation at a time on a cluster and its node pools, and refuses
/// any other with `FAILED_PRECONDITION` while it runs ("Operation operation-1 is currently
/// upgrading cluster prod. Please wait and try again once it is done.", "... is currently
/// creating node pool batch ...", "Cluster is running incompatible operation operation-1.").
/// It ends on its own: the request is asked again on a later pass, not a stop a person must
/// clear, whichever pool or cluster operation holds it.
pub fn cluster_busy(rpc_code: Option<&str>, message: &str) -> bool {
    if !matches!(rpc_code, None | Some("FAILED_PRECONDITION")) {
        return false;
    }
    let m = message.to_ascii_lowercase();
    (m.contains("operation") && m.contains(" is currently "))
        || m.contains("running incompatible operation")
}

/// An operation that finished `DONE` with errors: its `error.errors[].code` values, and the
/// `httpErrorStatusCode` Compute sets on the operation.
pub fn classify_operation(codes: &[&str], http_status: Option<u16>) -> CloudErrorKind {
    for code in codes {
        let kind = match *code {
            "QUOTA_EXCEEDED"
            | "ZONE_RESOURCE_POOL_EXHAUSTED"
            | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
            | "REGION_RESOURCE_POOL_EXHAUSTED"
            | "RESOURCE_POOL_EXHAUSTED" => CloudErrorKind::Quota,
            "RATE_LIMIT_EXCEEDED" => CloudErrorKind::Throttled,
            "RESOURCE_NOT_FOUND" | "NOT_FOUND" => CloudErrorKind::NotFound,
            "PERMISSIONS_ERROR" | "FORBIDDEN" => CloudErrorKind::Permission,
            "INTERNAL_ERROR" | "RESOURCE_NOT_READY" | "TIMEOUT" => CloudErrorKind::Transient,
            "INVALID_FIELD_VALUE" | "INVALID_USAGE" | "CONDITION_NOT_MET" | "BAD_REQUEST" => {
                CloudErrorKind::Invalid
            }
            _ => continue,
        };
        return kind;
    }
    match http_status {
        Some(s) if s >= 400 => kind_for_status(s),
        // A failed operation with no code we know and no status: the request was accepted,
        // so it was well-formed; something in the cloud refused it. Not worth retrying blind.
        _ => CloudErrorKind::Invalid,
    }
}

/// A Kubernetes Engine operation that finished `DONE` with an `error` (a `google.rpc.Status`:
/// its `code` is the number of a `google.rpc.Code`). In an operation, `RESOURCE_EXHAUSTED` is a
/// quota or a stock-out GKE met creating nodes, not a rate limit: retrying soon will not find
/// them. A code rota does not know (or none) is `Invalid`: GKE accepted the request and then
/// refused it; not worth retrying blind.
pub fn classify_container_operation(code: Option<i64>) -> CloudErrorKind {
    match code {
        // CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, ABORTED, INTERNAL, UNAVAILABLE.
        Some(1 | 2 | 4 | 10 | 13 | 14) => CloudErrorKind::Transient,
        Some(5) => CloudErrorKind::NotFound,
        // PERMISSION_DENIED, UNAUTHENTICATED.
        Some(7 | 16) => CloudErrorKind::Permission,
        Some(8) => CloudErrorKind::Quota,
        // INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION, OUT_OF_RANGE, ...
        _ => CloudErrorKind::Invalid,
    }
}

/// The errors of a managed instance's last creation attempt (`lastAttempt.errors.errors[].code`).
/// Compute marks `resize` DONE once the creations are scheduled; a creation that then fails
/// shows up here, per instance, and the group keeps trying. Known codes classify as in an
/// operation (quota and stock-outs are `Quota`); a code rota does not know is `Transient`:
/// the group retries it, and the rotation waits for it within `nodeReadyTimeout`.
pub fn classify_launch(codes: &[&str]) -> CloudErrorKind {
    if codes.is_empty() {
        return CloudErrorKind::Transient;
    }
    match classify_operation(codes, None) {
        // classify_operation's fallback for an unknown code (a refused request), not a
        // verdict on a creation the group goes on retrying.
        CloudErrorKind::Invalid
            if !codes.iter().any(|c| {
                matches!(
                    *c,
                    "INVALID_FIELD_VALUE" | "INVALID_USAGE" | "CONDITION_NOT_MET" | "BAD_REQUEST"
                )
            }) =>
        {
            CloudErrorKind::Transient
        }
        kind => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CloudErrorKind::*;

    #[test]
    fn reasons_win_over_statuses() {
        // Compute's API rate limit is a 403, not a permission problem.
        assert_eq!(
            classify_response(Some(403), &["rateLimitExceeded"]),
            Throttled
        );
        assert_eq!(
            classify_response(Some(403), &["userRateLimitExceeded"]),
            Throttled
        );
        assert_eq!(classify_response(Some(403), &["quotaExceeded"]), Quota);
        assert_eq!(classify_response(Some(403), &["forbidden"]), Permission);
        assert_eq!(
            classify_response(Some(400), &["resourceNotReady"]),
            Transient
        );
        assert_eq!(classify_response(Some(500), &["backendError"]), Transient);
        assert_eq!(
            classify_response(Some(400), &["somethingNew", "invalid"]),
            Invalid
        );
    }

    #[test]
    fn the_details_form_is_read_as_the_google_client_reads_it() {
        // A 403 whose details say rate limit: throttled, never a permission problem.
        assert_eq!(
            classify_rpc(
                Some(403),
                Some("PERMISSION_DENIED"),
                &["RATE_LIMIT_EXCEEDED"]
            ),
            Throttled
        );
        assert_eq!(
            classify_rpc(
                Some(429),
                Some("RESOURCE_EXHAUSTED"),
                &["RATE_LIMIT_EXCEEDED"]
            ),
            Throttled
        );
        // Details with no ErrorInfo (a Help link only): the code still says rate limit.
        assert_eq!(
            classify_rpc(Some(403), Some("RESOURCE_EXHAUSTED"), &[]),
            Throttled
        );
        assert_eq!(
            classify_rpc(
                Some(403),
                Some("PERMISSION_DENIED"),
                &["IAM_PERMISSION_DENIED"]
            ),
            Permission
        );
        assert_eq!(
            classify_rpc(Some(403), Some("PERMISSION_DENIED"), &["SERVICE_DISABLED"]),
            Permission
        );
        assert_eq!(
            classify_rpc(Some(403), Some("PERMISSION_DENIED"), &[]),
            Permission
        );
        assert_eq!(classify_rpc(Some(503), Some("UNAVAILABLE"), &[]), Transient);
        assert_eq!(classify_rpc(Some(409), Some("ABORTED"), &[]), Transient);
        assert_eq!(
            classify_rpc(
                Some(403),
                Some("PERMISSION_DENIED"),
                &["RESOURCE_QUOTA_EXCEEDED"]
            ),
            Quota
        );
        assert_eq!(classify_rpc(Some(404), Some("NOT_FOUND"), &[]), NotFound);
        assert_eq!(classify_rpc(None, None, &[]), Transient);
    }

    #[test]
    fn statuses_decide_without_a_known_reason() {
        assert_eq!(classify_response(Some(403), &[]), Permission);
        assert_eq!(classify_response(Some(401), &["unknownReason"]), Permission);
        assert_eq!(classify_response(Some(404), &[]), NotFound);
        assert_eq!(classify_response(Some(429), &[]), Throttled);
        assert_eq!(classify_response(Some(400), &[]), Invalid);
        assert_eq!(classify_response(Some(409), &[]), Invalid);
        assert_eq!(classify_response(Some(500), &[]), Transient);
        assert_eq!(classify_response(Some(503), &[]), Transient);
        assert_eq!(classify_response(None, &[]), Transient);
    }

    #[test]
    fn operation_errors_map_by_code() {
        assert_eq!(classify_operation(&["QUOTA_EXCEEDED"], Some(403)), Quota);
        assert_eq!(
            classify_operation(&["ZONE_RESOURCE_POOL_EXHAUSTED"], None),
            Quota
        );
        assert_eq!(
            classify_operation(&["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"], Some(503)),
            Quota,
            "a stock-out is not transient: retrying soon will not find capacity"
        );
        assert_eq!(
            classify_operation(&["RESOURCE_NOT_FOUND"], Some(404)),
            NotFound
        );
        assert_eq!(classify_operation(&["PERMISSIONS_ERROR"], None), Permission);
        assert_eq!(
            classify_operation(&["INTERNAL_ERROR"], Some(500)),
            Transient
        );
        assert_eq!(
            classify_operation(&["SOMETHING_NEW"], Some(403)),
            Permission
        );
        assert_eq!(classify_operation(&["SOMETHING_NEW"], None), Invalid);
    }

    #[test]
    fn launch_errors_of_managed_instances_map_by_code() {
        assert_eq!(classify_launch(&["QUOTA_EXCEEDED"]), Quota);
        assert_eq!(classify_launch(&["ZONE_RESOURCE_POOL_EXHAUSTED"]), Quota);
        assert_eq!(
            classify_launch(&["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"]),
            Quota
        );
        assert_eq!(classify_launch(&["REGION_RESOURCE_POOL_EXHAUSTED"]), Quota);
        assert_eq!(classify_launch(&["RESOURCE_NOT_FOUND"]), NotFound);
        assert_eq!(classify_launch(&["INVALID_FIELD_VALUE"]), Invalid);
        assert_eq!(classify_launch(&["INTERNAL_ERROR"]), Transient);
        assert_eq!(
            classify_launch(&["SOMETHING_NEW"]),
            Transient,
            "the group retries what rota cannot name"
        );
        assert_eq!(classify_launch(&[]), Transient);
    }

    #[test]
    fn container_operation_errors_map_by_rpc_code() {
        assert_eq!(classify_container_operation(Some(8)), Quota);
        assert_eq!(classify_container_operation(Some(7)), Permission);
        assert_eq!(classify_container_operation(Some(16)), Permission);
        assert_eq!(classify_container_operation(Some(5)), NotFound);
        assert_eq!(classify_container_operation(Some(13)), Transient);
        assert_eq!(classify_container_operation(Some(14)), Transient);
        assert_eq!(classify_container_operation(Some(9)), Invalid);
        assert_eq!(classify_container_operation(Some(3)), Invalid);
        assert_eq!(classify_container_operation(None), Invalid);
    }

    #[test]
    fn quota_is_never_retried() {
        assert!(!classify_operation(&["QUOTA_EXCEEDED"], None).is_retryable());
        assert!(classify_response(Some(429), &[]).is_retryable());
    }
}
