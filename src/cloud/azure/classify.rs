//! What an Azure failure means for rota: HTTP status and ARM error code to [`CloudErrorKind`].
//!
//! A pure function, so that every code ARM documents can be pinned by a table test. The code
//! decides before the status: ARM answers a missing gallery image with 404 too, and that must
//! not read as "the scale set is gone" (`NotFound` is reserved for the group); and a quota
//! refusal comes as 409 `OperationNotAllowed`, which the status alone would call invalid.

use crate::cloud::CloudErrorKind;
use crate::cloud::retry::kind_for_status;

/// Classify a failure. `status` is the HTTP status of the failed response, `None` for a
/// long-running operation that ended `Failed` (its error has a code but no status).
pub fn classify(status: Option<u16>, code: &str, message: &str) -> CloudErrorKind {
    let c = code.to_ascii_lowercase();
    let m = message.to_ascii_lowercase();
    if let Some(kind) = by_code(&c, &m) {
        return kind;
    }
    match status {
        // A stale ETag: someone changed the scale set between our read and our write.
        Some(412) => CloudErrorKind::Transient,
        // 409 without a code we know: most often "another operation is in progress".
        Some(409) => CloudErrorKind::Transient,
        Some(s) => kind_for_status(s),
        // A failed operation with a code we do not know: the platform's own failures
        // (internal errors, provisioning timeouts) may pass on a new attempt.
        None => CloudErrorKind::Transient,
    }
}

fn by_code(c: &str, m: &str) -> Option<CloudErrorKind> {
    use CloudErrorKind::*;
    let kind = match c {
        "toomanyrequests" | "subscriptionrequeststhrottled" | "resourcerequeststhrottled" => {
            Throttled
        }
        "quotaexceeded"
        | "skunotavailable"
        | "allocationfailed"
        | "zonalallocationfailed"
        | "overconstrainedallocationrequest"
        | "overconstrainedzonalallocationrequest"
        | "publicipcountlimitreached" => Quota,
        "operationnotallowed" if m.contains("quota") => Quota,
        "authorizationfailed"
        | "linkedauthorizationfailed"
        | "authenticationfailed"
        | "invalidauthenticationtoken"
        | "invalidauthenticationtokentenant"
        | "expiredauthenticationtoken" => Permission,
        // The image, not the group, is missing: a wrong image ID needs a human.
        _ if c.contains("image") && c.contains("notfound") => Invalid,
        "resourcenotfound"
        | "parentresourcenotfound"
        | "resourcegroupnotfound"
        | "subscriptionnotfound"
        | "notfound" => NotFound,
        // Another operation holds the resource or its cluster (AKS: "Operation is not
        // allowed: Another operation (Upgrading) is in progress, please wait for it to finish
        // before starting a new operation."): it ends on its own, the pool waits and asks
        // again.
        "operationnotallowed" if m.contains("in progress") || m.contains("in the middle") => {
            Transient
        }
        "anotheroperationinprogress" => Transient,
        "operationpreempted"
        | "retryableerror"
        | "internalexecutionerror"
        | "internaloperationerror"
        | "internalservererror"
        | "servertimeout"
        | "gatewaytimeout"
        | "serviceunavailable"
        | "operationcanceled" => Transient,
        "invalidparameter"
        | "invalidrequestcontent"
        | "invalidrequestformat"
        | "badrequest"
        | "propertychangenotallowed"
        | "operationnotallowed" => Invalid,
        _ => return None,
    };
    Some(kind)
}

/// Whether a refused `VirtualMachineScaleSets_DeleteInstances` only says the instance is no
/// longer there (it went between our look and our request): for `terminate` that is success.
pub fn instance_already_gone(code: &str, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code.eq_ignore_ascii_case("InvalidParameter")
        && m.contains("instanceid")
        && (m.contains("not an active") || m.contains("not found"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use CloudErrorKind::*;

    #[test]
    fn arm_codes_and_statuses_map_to_kinds() {
        let cases: &[(Option<u16>, &str, &str, CloudErrorKind)] = &[
            (Some(429), "TooManyRequests", "", Throttled),
            (Some(429), "", "", Throttled),
            (Some(429), "SubscriptionRequestsThrottled", "", Throttled),
            (
                Some(409),
                "OperationNotAllowed",
                "Operation could not be completed as it results in exceeding approved Total Regional Cores quota.",
                Quota,
            ),
            (Some(409), "QuotaExceeded", "", Quota),
            (Some(409), "SkuNotAvailable", "", Quota),
            (None, "AllocationFailed", "", Quota),
            (None, "ZonalAllocationFailed", "", Quota),
            (Some(403), "AuthorizationFailed", "", Permission),
            (Some(403), "LinkedAuthorizationFailed", "", Permission),
            (Some(401), "InvalidAuthenticationToken", "", Permission),
            (Some(401), "", "", Permission),
            (Some(404), "ResourceNotFound", "", NotFound),
            (Some(404), "ParentResourceNotFound", "", NotFound),
            (Some(404), "ResourceGroupNotFound", "", NotFound),
            (Some(404), "GalleryImageNotFound", "", Invalid),
            (Some(404), "ImageNotFound", "", Invalid),
            (Some(500), "InternalServerError", "", Transient),
            (Some(503), "", "", Transient),
            (Some(502), "", "", Transient),
            (
                Some(409),
                "OperationNotAllowed",
                "Operation 'update' is not allowed since the scale set is in the middle of another operation in progress",
                Transient,
            ),
            (
                Some(409),
                "OperationNotAllowed",
                "Operation is not allowed: Another operation (Upgrading) is in progress, please wait for it to finish before starting a new operation.",
                Transient,
            ),
            (
                Some(400),
                "AnotherOperationInProgress",
                "Another operation (Create) is in progress, please wait for it to finish before starting a new operation.",
                Transient,
            ),
            (
                None,
                "AnotherOperationInProgress",
                "The resource is currently being updated.",
                Transient,
            ),
            (
                Some(409),
                "OperationNotAllowed",
                "Orchestration mode",
                Invalid,
            ),
            (Some(400), "InvalidParameter", "", Invalid),
            (Some(400), "", "", Invalid),
            (Some(412), "PreconditionFailed", "", Transient),
            (None, "OperationCanceled", "", Transient),
            (None, "InternalExecutionError", "", Transient),
            (None, "SomethingNew", "", Transient),
        ];
        for (status, code, message, kind) in cases {
            assert_eq!(
                classify(*status, code, message),
                *kind,
                "{status:?} {code} {message}"
            );
        }
    }

    #[test]
    fn codes_are_case_insensitive() {
        assert_eq!(classify(Some(409), "QUOTAEXCEEDED", ""), Quota);
        assert_eq!(classify(Some(404), "resourceNotFound", ""), NotFound);
    }

    #[test]
    fn a_vanished_instance_is_recognised() {
        assert!(instance_already_gone(
            "InvalidParameter",
            "The provided instanceId 7 is not an active Virtual Machine Scale Set VM instanceId."
        ));
        assert!(!instance_already_gone("InvalidParameter", "bad body"));
        assert!(!instance_already_gone(
            "ResourceNotFound",
            "instanceId 7 not found"
        ));
    }
}
