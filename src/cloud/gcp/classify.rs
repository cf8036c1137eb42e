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
        "rateLimitExceeded" | "userRateLimitExceeded" | "RATE_LIMIT_EXCEEDED" => {
            CloudErrorKind::Throttled
        }
        "backendError" | "internalError" => CloudErrorKind::Transient,
        // A mutation on a group whose previous operation is still running: heals on its own.
        "resourceNotReady" | "resourceInUseByAnotherResource" => CloudErrorKind::Transient,
        "quotaExceeded"
        | "QUOTA_EXCEEDED"
        | "ZONE_RESOURCE_POOL_EXHAUSTED"
        | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
        | "REGION_RESOURCE_POOL_EXHAUSTED" => CloudErrorKind::Quota,
        "notFound" => CloudErrorKind::NotFound,
        "forbidden" | "insufficientPermissions" | "accessNotConfigured" | "SERVICE_DISABLED" => {
            CloudErrorKind::Permission
        }
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
    fn quota_is_never_retried() {
        assert!(!classify_operation(&["QUOTA_EXCEEDED"], None).is_retryable());
        assert!(classify_response(Some(429), &[]).is_retryable());
    }
}
