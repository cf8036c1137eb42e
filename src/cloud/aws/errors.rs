//! What an AWS failure means for a retry: the SDK's error code, HTTP status and transport
//! failure, classified into [`CloudErrorKind`].
//!
//! [`classify`] is a pure function of what the SDK reports, so that the table can be read
//! and tested on its own; [`from_sdk`] takes an `SdkError` apart into those inputs. Codes
//! come from the EC2 and Auto Scaling API references; a code not listed falls back on the
//! HTTP status ([`kind_for_status`]).

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::cloud::retry::kind_for_status;
use crate::cloud::{CloudError, CloudErrorKind};

/// How a request failed before any answer came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Connection refused or reset, DNS, TLS: the network.
    Io,
    /// The SDK's own connect or read timeout.
    Timeout,
    /// The request could not be built or signed from what the caller gave.
    Construction,
    /// Anything else before the answer, for instance loading credentials.
    Other,
}

/// Throttling: the account's or the API's request rate.
const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "EC2ThrottledException",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
];

/// Quotas and capacity: waiting a few seconds will not help.
const QUOTA: &[&str] = &[
    "LimitExceeded",
    "LimitExceededException",
    "InstanceLimitExceeded",
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity",
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "ResourceLimitExceeded",
    "ServiceQuotaExceededException",
    "VersionLimitExceeded",
];

/// Credentials and authorization: a human has to grant or fix something.
const PERMISSION: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "OptInRequired",
    "Blocked",
    "PendingVerification",
];

/// The service or the group is busy or failing on its side: ask again soon.
const TRANSIENT: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
    // Auto Scaling: another activity (a scale-in, an instance refresh) holds the group.
    "ScalingActivityInProgress",
    "ResourceContention",
    "ResourceInUse",
    "IncorrectState",
    "ConcurrentTagAccess",
];

/// Auto Scaling answers a missing group with `ValidationError` and one of these messages
/// (DescribeAutoScalingGroups itself answers with an empty list instead).
fn names_a_missing_group(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("autoscalinggroup name not found")
        || m.contains("auto scaling group not found")
        || (m.contains("group") && m.contains("not found") && !m.contains("instance"))
}

/// The kind of an AWS failure from its error `code` (`Throttling`, `UnauthorizedOperation`,
/// …), its `message` and the HTTP `status` of the answer; `transport` when no answer came.
///
/// `NotFound` is kept for a missing group, as the trait promises: a missing launch template,
/// AMI or instance inside an existing group is a broken configuration (`Invalid`) or, for
/// instances, handled by the caller before classification.
pub fn classify(
    code: Option<&str>,
    message: &str,
    status: Option<u16>,
    transport: Option<Transport>,
) -> CloudErrorKind {
    if let Some(t) = transport {
        return match t {
            Transport::Io | Transport::Timeout => CloudErrorKind::Transient,
            Transport::Construction => CloudErrorKind::Invalid,
            // Credentials that cannot be loaded at all need a human; anything else before
            // an answer (a dropped connection the SDK could not name) is worth a retry.
            Transport::Other => {
                if message.to_ascii_lowercase().contains("credential") {
                    CloudErrorKind::Permission
                } else {
                    CloudErrorKind::Transient
                }
            }
        };
    }
    if let Some(code) = code {
        if THROTTLED.contains(&code) {
            return CloudErrorKind::Throttled;
        }
        if QUOTA.contains(&code) || code.ends_with("LimitExceeded") {
            return CloudErrorKind::Quota;
        }
        if PERMISSION.contains(&code) {
            return CloudErrorKind::Permission;
        }
        if TRANSIENT.contains(&code) {
            return CloudErrorKind::Transient;
        }
        if code == "ValidationError" {
            return if names_a_missing_group(message) {
                CloudErrorKind::NotFound
            } else {
                CloudErrorKind::Invalid
            };
        }
        // EC2's `InvalidAMIID.NotFound`, `InvalidLaunchTemplateId.VersionNotFound`,
        // `InvalidParameterValue`, `MissingParameter`…: the request or the group's
        // configuration is wrong.
        if code.starts_with("Invalid") || code.starts_with("Missing") || code.contains(".") {
            return CloudErrorKind::Invalid;
        }
    }
    match status {
        Some(s) => kind_for_status(s),
        // No code and no status: nothing to go on but that it failed; try again.
        None => CloudErrorKind::Transient,
    }
}

/// Whether a failed `TerminateInstanceInAutoScalingGroup` says the instance is no longer
/// the group's (terminated, detached) — a success for rota's idempotent terminate.
pub fn instance_gone(message: &str) -> bool {
    message.starts_with("ValidationError")
        && (message.contains("No managed instance found")
            || message.contains("Instance Id not found"))
}

/// A failed SDK call as a [`CloudError`] naming the call and the group.
pub fn from_sdk<E>(
    err: SdkError<E, HttpResponse>,
    call: &'static str,
    group: &(impl std::fmt::Display + ?Sized),
) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let (code, message, status, transport) = parts(&err);
    let kind = classify(code.as_deref(), &message, status, transport);
    let message = match (&code, status) {
        (Some(c), Some(s)) => format!("{c} (HTTP {s}): {message}"),
        (Some(c), None) => format!("{c}: {message}"),
        (None, Some(s)) => format!("HTTP {s}: {message}"),
        (None, None) => message,
    };
    CloudError::about(kind, call, group, message)
}

/// The SDK's code, message (with its causes), HTTP status and transport failure.
fn parts<E>(
    err: &SdkError<E, HttpResponse>,
) -> (Option<String>, String, Option<u16>, Option<Transport>)
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let chain = error_chain(err);
    match err {
        SdkError::ServiceError(se) => {
            let e = se.err();
            let status = status_of(se.raw());
            let message = e.message().map(str::to_string).unwrap_or(chain);
            (e.code().map(str::to_string), message, status, None)
        }
        SdkError::ResponseError(re) => (None, chain, status_of(re.raw()), None),
        SdkError::TimeoutError(_) => (None, chain, None, Some(Transport::Timeout)),
        SdkError::DispatchFailure(d) => {
            let t = if d.is_io() {
                Transport::Io
            } else if d.is_timeout() {
                Transport::Timeout
            } else if d.is_user() {
                Transport::Construction
            } else {
                Transport::Other
            };
            (None, chain, None, Some(t))
        }
        SdkError::ConstructionFailure(_) => (None, chain, None, Some(Transport::Construction)),
        _ => (None, chain, None, Some(Transport::Other)),
    }
}

fn status_of(raw: &HttpResponse) -> Option<u16> {
    Some(raw.status().as_u16())
}

/// "outer: cause: cause", so that a credentials failure says why.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut s = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let m = e.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        source = e.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use CloudErrorKind::*;

    fn code(c: &str, message: &str, status: u16) -> CloudErrorKind {
        classify(Some(c), message, Some(status), None)
    }

    #[test]
    fn throttling_codes_are_throttled() {
        assert_eq!(code("Throttling", "Rate exceeded", 400), Throttled);
        assert_eq!(
            code("RequestLimitExceeded", "Request limit exceeded.", 503),
            Throttled
        );
        assert_eq!(code("ThrottlingException", "", 400), Throttled);
        assert_eq!(classify(None, "", Some(429), None), Throttled);
    }

    #[test]
    fn quotas_and_capacity_are_quota() {
        assert_eq!(code("LimitExceeded", "max number of groups", 400), Quota);
        assert_eq!(code("InsufficientInstanceCapacity", "", 500), Quota);
        assert_eq!(code("VcpuLimitExceeded", "", 400), Quota);
        assert_eq!(code("InstanceLimitExceeded", "", 400), Quota);
        assert_eq!(code("LaunchTemplateVersionLimitExceeded", "", 400), Quota);
    }

    #[test]
    fn authorization_is_permission() {
        assert_eq!(code("AccessDenied", "not authorized", 403), Permission);
        assert_eq!(
            code("UnauthorizedOperation", "You are not authorized", 403),
            Permission
        );
        assert_eq!(code("AuthFailure", "", 401), Permission);
        assert_eq!(code("ExpiredToken", "", 400), Permission);
        assert_eq!(
            classify(
                None,
                "failed to construct request: no credentials in the property bag",
                None,
                Some(Transport::Other)
            ),
            Permission
        );
    }

    #[test]
    fn a_missing_group_is_not_found_and_other_validation_is_invalid() {
        assert_eq!(
            code(
                "ValidationError",
                "AutoScalingGroup name not found - null",
                400
            ),
            NotFound
        );
        assert_eq!(
            code(
                "ValidationError",
                "New SetDesiredCapacity value 5 is above max value 4 for the AutoScalingGroup.",
                400
            ),
            Invalid
        );
        assert_eq!(
            code(
                "ValidationError",
                "Instance Id not found - No managed instance found for instance ID: i-0abc",
                400
            ),
            Invalid
        );
        assert_eq!(code("InvalidAMIID.NotFound", "", 400), Invalid);
        assert_eq!(
            code("InvalidLaunchTemplateId.VersionNotFound", "", 400),
            Invalid
        );
        assert_eq!(code("MissingParameter", "", 400), Invalid);
    }

    #[test]
    fn server_side_and_transport_failures_are_transient() {
        assert_eq!(code("InternalFailure", "", 500), Transient);
        assert_eq!(code("ScalingActivityInProgress", "", 400), Transient);
        assert_eq!(code("ResourceContention", "", 500), Transient);
        assert_eq!(classify(None, "", Some(503), None), Transient);
        assert_eq!(
            classify(Some("SomethingNew"), "", Some(502), None),
            Transient
        );
        for t in [Transport::Io, Transport::Timeout] {
            assert_eq!(
                classify(None, "connection refused", None, Some(t)),
                Transient
            );
        }
        assert_eq!(classify(None, "", None, None), Transient);
        assert_eq!(
            classify(None, "bad", None, Some(Transport::Construction)),
            Invalid
        );
    }

    #[test]
    fn an_instance_no_longer_in_the_group_is_recognised() {
        assert!(instance_gone(
            "ValidationError (HTTP 400): Instance Id not found - No managed instance found for instance ID: i-0abc"
        ));
        assert!(!instance_gone(
            "ValidationError (HTTP 400): AutoScalingGroup name not found - null"
        ));
    }

    #[test]
    fn unknown_codes_fall_back_on_the_status() {
        assert_eq!(
            classify(Some("SomethingNew"), "", Some(403), None),
            Permission
        );
        assert_eq!(classify(Some("SomethingNew"), "", Some(400), None), Invalid);
    }
}
