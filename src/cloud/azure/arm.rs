//! A thin client of the Azure Resource Manager REST API: one request under rota's retry
//! policy, JSON in and out, errors classified, and the wait for long-running operations.
//!
//! Requests go through the Azure SDK's HTTP pipeline (`azure_core`: client request IDs,
//! user agent, the bearer token) with the SDK's own retries switched off
//! (`RetryOptions::none()`): rota's [`RetryPolicy`] is the one policy for every cloud, and two
//! policies stacked would multiply attempts and hide throttling from it.
//!
//! Links that ARM hands back (`nextLink`, `Azure-AsyncOperation`, `Location`) are followed
//! only when they point at the endpoint the client was made for: the bearer token goes to
//! that endpoint and nowhere else.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use azure_core::error::ErrorKind;
use azure_core::http::headers::{HeaderName, Headers};
use azure_core::http::{
    ClientOptions, Context, Method, Pipeline, PipelineSendOptions, Request, RetryOptions,
    Transport, Url,
};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::classify::classify;
use super::model::{AsyncOperation, ErrorBody};
use super::transport::{BearerPolicy, HyperTransport};
use crate::cloud::retry::RetryPolicy;
use crate::cloud::{CloudError, CloudErrorKind, GroupRef};

/// How long-running operations are waited for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LroOptions {
    /// Wait between polls when ARM sends no `Retry-After`.
    pub poll_interval: Duration,
    /// Bounds on any wait between polls, `Retry-After` included.
    pub min_poll_interval: Duration,
    pub max_poll_interval: Duration,
    /// Give up waiting after this long (the operation goes on in Azure; the error is
    /// `Transient`, and calling again is safe because every call is idempotent).
    pub timeout: Duration,
}

impl Default for LroOptions {
    fn default() -> Self {
        LroOptions {
            poll_interval: Duration::from_secs(10),
            min_poll_interval: Duration::from_secs(1),
            max_poll_interval: Duration::from_secs(60),
            timeout: Duration::from_secs(15 * 60),
        }
    }
}

/// A response that came back: 2xx, or an error that retrying would not cure.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Headers,
    pub body: Bytes,
}

impl Reply {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn header(&self, name: &'static str) -> Option<&str> {
        self.headers
            .get_optional_str(&HeaderName::from_static(name))
    }

    /// The ARM error code and message of a failed response (empty code if the body has none).
    pub fn arm_error(&self) -> (String, String) {
        match serde_json::from_slice::<ErrorBody>(&self.body)
            .ok()
            .and_then(|b| b.error)
        {
            Some(e) => e.most_specific(),
            None => (
                String::new(),
                String::from_utf8_lossy(&self.body)
                    .chars()
                    .take(300)
                    .collect(),
            ),
        }
    }

    /// This failed response as a [`CloudError`].
    pub fn to_error(
        &self,
        call: &'static str,
        group: &(dyn std::fmt::Display + Sync),
    ) -> CloudError {
        let (code, message) = self.arm_error();
        CloudError::about(
            classify(Some(self.status), &code, &message),
            call,
            group,
            describe_failure(Some(self.status), &code, &message),
        )
    }

    pub fn json<T: DeserializeOwned>(
        &self,
        call: &'static str,
        group: &(dyn std::fmt::Display + Sync),
    ) -> Result<T, CloudError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            CloudError::about(
                CloudErrorKind::Transient,
                call,
                group,
                format!("unreadable response from ARM: {e}"),
            )
        })
    }
}

fn describe_failure(status: Option<u16>, code: &str, message: &str) -> String {
    let status = status.map(|s| format!("HTTP {s} ")).unwrap_or_default();
    let code = if code.is_empty() {
        "no error code"
    } else {
        code
    };
    format!("{status}{code}: {message}")
}

/// `Retry-After` in seconds (ARM sends seconds; an HTTP date is ignored).
pub fn retry_after(headers: &Headers) -> Option<Duration> {
    headers
        .get_optional_str(&HeaderName::from_static("retry-after"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// How long to hold the next attempt after a 429 that said `Retry-After`: the cloud's
/// wish, but never beyond the policy's longest backoff, so the retry policy keeps its bound
/// on how long a call can take. The policy's own jittered backoff runs first; this is a floor.
pub fn throttle_hold(retry_after: Option<Duration>, policy: &RetryPolicy) -> Option<Duration> {
    retry_after.map(|d| d.min(policy.max_delay))
}

/// The wait before the next poll of a long-running operation.
pub fn poll_wait(retry_after: Option<Duration>, lro: &LroOptions) -> Duration {
    retry_after.unwrap_or(lro.poll_interval).clamp(
        lro.min_poll_interval,
        lro.max_poll_interval.max(lro.min_poll_interval),
    )
}

/// How an operation status URL reports, the same for both header kinds ARM uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationState {
    Running,
    Succeeded,
    Failed { code: String, message: String },
    Canceled,
}

/// Where a long-running operation's progress is read, as ARM's asynchronous operation
/// guidelines (and the Azure SDKs' pollers) choose it from the first answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// An `Azure-AsyncOperation` URL: a status body (`InProgress`, `Succeeded`, `Failed`...).
    AsyncOperation,
    /// A `Location` URL only (whether the first answer was 200, 201 or 202): 202 while the
    /// operation runs, another 2xx when it is done, an error status when it failed.
    Location,
    /// No link at all: the resource itself, whose `properties.provisioningState` says whether
    /// the change is still being applied (`Updating`, `Creating`) or ended.
    Resource,
}

/// The `provisioningState` of a resource body as an operation state (`None` if it has none).
pub fn provisioning_state(body: &[u8]) -> Option<OperationState> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let state = v.pointer("/properties/provisioningState")?.as_str()?;
    Some(match state.to_ascii_lowercase().as_str() {
        "succeeded" => OperationState::Succeeded,
        "failed" => OperationState::Failed {
            code: String::new(),
            message: "the resource's provisioningState is Failed".into(),
        },
        "canceled" | "cancelled" => OperationState::Canceled,
        _ => OperationState::Running,
    })
}

/// Read one poll of an operation.
pub fn operation_state(reply: &Reply, poll: Poll) -> OperationState {
    if poll == Poll::Resource {
        if !reply.ok() {
            let (code, message) = reply.arm_error();
            return OperationState::Failed { code, message };
        }
        return provisioning_state(&reply.body).unwrap_or(OperationState::Succeeded);
    }
    if poll == Poll::AsyncOperation {
        let op: AsyncOperation = serde_json::from_slice(&reply.body).unwrap_or_default();
        match op.status.to_ascii_lowercase().as_str() {
            "succeeded" => OperationState::Succeeded,
            "failed" => {
                let (code, message) = op.error.map(|e| e.most_specific()).unwrap_or_default();
                OperationState::Failed { code, message }
            }
            "canceled" | "cancelled" => OperationState::Canceled,
            _ => OperationState::Running,
        }
    } else if reply.status == 202 {
        OperationState::Running
    } else if reply.ok() {
        OperationState::Succeeded
    } else {
        let (code, message) = reply.arm_error();
        OperationState::Failed { code, message }
    }
}

/// The ARM client of one endpoint and credential.
#[derive(Clone)]
pub struct Arm {
    pipeline: Pipeline,
    endpoint: Url,
    pub retry: RetryPolicy,
    pub lro: LroOptions,
}

pub const ARM_ENDPOINT: &str = "https://management.azure.com";

impl Arm {
    pub fn new(
        credential: Arc<dyn TokenCredential>,
        transport: HyperTransport,
        endpoint: &str,
        retry: RetryPolicy,
        lro: LroOptions,
    ) -> Result<Arm, String> {
        let endpoint = Url::parse(endpoint.trim_end_matches('/'))
            .map_err(|e| format!("ARM endpoint {endpoint:?}: {e}"))?;
        // The token's audience is the ARM endpoint itself (public or sovereign cloud); a
        // loopback double gets a token for the public cloud's, which it does not check.
        let audience = match endpoint.host_str() {
            Some(h) if endpoint.scheme() == "https" => h.to_string(),
            _ => "management.azure.com".to_string(),
        };
        let scope = format!("https://{audience}/.default");
        let options = ClientOptions {
            transport: Some(Transport::new(Arc::new(transport))),
            // rota's RetryPolicy wraps every request; see the module header.
            retry: RetryOptions::none(),
            per_try_policies: vec![Arc::new(BearerPolicy::new(credential, scope))],
            ..Default::default()
        };
        let pipeline = Pipeline::new(
            Some("rota"),
            Some(env!("CARGO_PKG_VERSION")),
            options,
            Vec::new(),
            Vec::new(),
            None,
        );
        Ok(Arm {
            pipeline,
            endpoint,
            retry,
            lro,
        })
    }

    /// `{endpoint}{path}?api-version=…`.
    pub fn url(&self, path_and_query: &str) -> Url {
        let mut u = self.endpoint.clone();
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        u.set_path(path);
        u.set_query((!query.is_empty()).then_some(query));
        u
    }

    /// A link ARM returned, accepted only on this client's endpoint.
    pub fn follow(
        &self,
        link: &str,
        call: &'static str,
        group: &(dyn std::fmt::Display + Sync),
    ) -> Result<Url, CloudError> {
        let invalid = |m: String| CloudError::about(CloudErrorKind::Invalid, call, group, m);
        let url = Url::parse(link).map_err(|e| invalid(format!("bad link {link:?}: {e}")))?;
        if url.scheme() != self.endpoint.scheme()
            || url.host_str() != self.endpoint.host_str()
            || url.port_or_known_default() != self.endpoint.port_or_known_default()
        {
            return Err(invalid(format!(
                "ARM returned a link to {link}, outside {}; not following it with our token",
                self.endpoint
            )));
        }
        Ok(url)
    }

    /// One request under the retry policy. Transport failures and retryable answers are
    /// retried; what comes back is a 2xx or an error that retrying would not cure.
    pub async fn send(
        &self,
        call: &'static str,
        group: &(dyn std::fmt::Display + Sync),
        method: Method,
        url: &Url,
        body: Option<&serde_json::Value>,
        if_match: Option<&str>,
    ) -> Result<Reply, CloudError> {
        let hold: Mutex<Option<Instant>> = Mutex::new(None);
        self.retry
            .run(call, group, || async {
                let until = hold.lock().expect("not poisoned").take();
                if let Some(until) = until {
                    tokio::time::sleep_until(until).await;
                }
                let mut req = Request::new(url.clone(), method);
                req.insert_header("accept", "application/json");
                if let Some(b) = body {
                    req.insert_header("content-type", "application/json");
                    req.set_body(Bytes::from(b.to_string()));
                }
                if let Some(etag) = if_match {
                    req.insert_header("if-match", etag.to_string());
                }
                let raw = self
                    .pipeline
                    .send(
                        &Context::new(),
                        &mut req,
                        Some(PipelineSendOptions {
                            skip_checks: true,
                            ..Default::default()
                        }),
                    )
                    .await
                    .map_err(|e| pipeline_error(&e, call, group))?;
                let (status, headers, body) = raw.deconstruct();
                let reply = Reply {
                    status: u16::from(status),
                    headers,
                    body: Bytes::from(body),
                };
                if reply.ok() {
                    return Ok(reply);
                }
                let err = reply.to_error(call, group);
                // 412: the same If-Match again cannot pass; the caller reads afresh.
                if err.kind.is_retryable() && reply.status != 412 {
                    if reply.status == 429
                        && let Some(d) = throttle_hold(retry_after(&reply.headers), &self.retry)
                    {
                        *hold.lock().expect("not poisoned") = Some(Instant::now() + d);
                    }
                    return Err(err);
                }
                Ok(reply)
            })
            .await
    }

    /// GET and parse, any failure as an error.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        call: &'static str,
        group: &(dyn std::fmt::Display + Sync),
        url: &Url,
    ) -> Result<T, CloudError> {
        let reply = self.send(call, group, Method::Get, url, None, None).await?;
        if !reply.ok() {
            return Err(reply.to_error(call, group));
        }
        reply.json(call, group)
    }

    /// Wait for the long-running operation `accepted` started (the 2xx answer to a PATCH or
    /// POST on `resource`). Polls `Azure-AsyncOperation` if given, else `Location` (on a 200
    /// as on a 202), else the resource itself while its `provisioningState` says a change is
    /// being applied; an answer with none of these finished the operation by itself.
    pub async fn wait(
        &self,
        call: &'static str,
        group: &GroupRef,
        accepted: &Reply,
        resource: &Url,
    ) -> Result<(), CloudError> {
        let (link, poll) = match (
            accepted.header("azure-asyncoperation"),
            accepted.header("location"),
        ) {
            (Some(a), _) => (a.to_string(), Poll::AsyncOperation),
            (None, Some(l)) => (l.to_string(), Poll::Location),
            (None, None) => match provisioning_state(&accepted.body) {
                Some(OperationState::Running) => (resource.to_string(), Poll::Resource),
                Some(OperationState::Failed { .. }) => {
                    return Err(CloudError::new(
                        CloudErrorKind::Transient,
                        call,
                        group,
                        "the resource's provisioningState is Failed after the change",
                    ));
                }
                _ => return Ok(()),
            },
        };
        let async_op = poll == Poll::AsyncOperation;
        let url = self.follow(&link, call, group)?;
        let started = Instant::now();
        let mut wait = poll_wait(retry_after(&accepted.headers), &self.lro);
        loop {
            if started.elapsed() + wait > self.lro.timeout {
                return Err(CloudError::new(
                    CloudErrorKind::Transient,
                    call,
                    group,
                    format!(
                        "operation still running after {:?}; it goes on in Azure ({link})",
                        self.lro.timeout
                    ),
                ));
            }
            tokio::time::sleep(wait).await;
            let reply = self
                .send(call, group, Method::Get, &url, None, None)
                .await?;
            if async_op && !reply.ok() {
                return Err(reply.to_error(call, group));
            }
            match operation_state(&reply, poll) {
                OperationState::Running => {
                    wait = poll_wait(retry_after(&reply.headers), &self.lro);
                }
                OperationState::Succeeded => return Ok(()),
                OperationState::Canceled => {
                    return Err(CloudError::new(
                        CloudErrorKind::Transient,
                        call,
                        group,
                        "operation was canceled (a newer operation on the scale set may have replaced it)",
                    ));
                }
                OperationState::Failed { code, message } => {
                    return Err(CloudError::new(
                        classify(None, &code, &message),
                        call,
                        group,
                        format!(
                            "operation failed: {}",
                            describe_failure(None, &code, &message)
                        ),
                    ));
                }
            }
        }
    }
}

/// A failure inside the pipeline, before any ARM answer: no connection, no token.
fn pipeline_error(
    e: &azure_core::Error,
    call: &'static str,
    group: &(dyn std::fmt::Display + Sync),
) -> CloudError {
    let mut kind = match e.kind() {
        ErrorKind::Io | ErrorKind::Connection => CloudErrorKind::Transient,
        ErrorKind::Credential => CloudErrorKind::Permission,
        _ => CloudErrorKind::Invalid,
    };
    // A credential that failed because the token endpoint was unreachable or busy will
    // recover by itself; one that was refused will not.
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(inner) = s.downcast_ref::<azure_core::Error>() {
            match inner.kind() {
                ErrorKind::Io | ErrorKind::Connection => kind = CloudErrorKind::Transient,
                ErrorKind::HttpResponse { status, .. } => {
                    let s = u16::from(*status);
                    if s == 429 || s >= 500 {
                        kind = CloudErrorKind::Transient;
                    }
                }
                _ => {}
            }
        }
        source = s.source();
    }
    CloudError::about(kind, call, group, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: Headers::new(),
            body: Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn retry_after_is_a_floor_within_the_policy() {
        let p = RetryPolicy::default();
        assert_eq!(
            throttle_hold(Some(Duration::from_secs(3)), &p),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            throttle_hold(Some(Duration::from_secs(600)), &p),
            Some(p.max_delay),
            "capped so the policy's bound holds"
        );
        assert_eq!(throttle_hold(None, &p), None);
    }

    #[test]
    fn poll_waits_follow_retry_after_within_bounds() {
        let lro = LroOptions::default();
        assert_eq!(poll_wait(None, &lro), Duration::from_secs(10));
        assert_eq!(
            poll_wait(Some(Duration::from_secs(30)), &lro),
            Duration::from_secs(30)
        );
        assert_eq!(
            poll_wait(Some(Duration::ZERO), &lro),
            Duration::from_secs(1)
        );
        assert_eq!(
            poll_wait(Some(Duration::from_secs(3600)), &lro),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn operation_states_from_both_header_kinds() {
        assert_eq!(
            operation_state(
                &reply(200, r#"{"status":"InProgress"}"#),
                Poll::AsyncOperation
            ),
            OperationState::Running
        );
        assert_eq!(
            operation_state(
                &reply(200, r#"{"status":"Succeeded"}"#),
                Poll::AsyncOperation
            ),
            OperationState::Succeeded
        );
        assert_eq!(
            operation_state(
                &reply(
                    200,
                    r#"{"status":"Failed","error":{"code":"AllocationFailed","message":"no capacity"}}"#
                ),
                Poll::AsyncOperation
            ),
            OperationState::Failed {
                code: "AllocationFailed".into(),
                message: "no capacity".into()
            }
        );
        assert_eq!(
            operation_state(
                &reply(200, r#"{"status":"Canceled"}"#),
                Poll::AsyncOperation
            ),
            OperationState::Canceled
        );
        assert_eq!(
            operation_state(&reply(202, ""), Poll::Location),
            OperationState::Running
        );
        assert_eq!(
            operation_state(&reply(204, ""), Poll::Location),
            OperationState::Succeeded
        );
        assert!(matches!(
            operation_state(&reply(409, r#"{"error":{"code":"QuotaExceeded","message":"m"}}"#), Poll::Location),
            OperationState::Failed { code, .. } if code == "QuotaExceeded"
        ));
    }

    #[test]
    fn a_resource_polled_for_its_provisioning_state() {
        let body = |state: &str| {
            reply(
                200,
                &format!(r#"{{"properties":{{"provisioningState":"{state}"}}}}"#),
            )
        };
        assert_eq!(
            operation_state(&body("Updating"), Poll::Resource),
            OperationState::Running
        );
        assert_eq!(
            operation_state(&body("Succeeded"), Poll::Resource),
            OperationState::Succeeded
        );
        assert!(matches!(
            operation_state(&body("Failed"), Poll::Resource),
            OperationState::Failed { .. }
        ));
        assert_eq!(
            operation_state(&body("Canceled"), Poll::Resource),
            OperationState::Canceled
        );
        assert_eq!(
            operation_state(&reply(200, "{}"), Poll::Resource),
            OperationState::Succeeded,
            "no provisioningState: nothing is being applied"
        );
    }

    #[test]
    fn errors_say_status_code_and_message() {
        let g = GroupRef::Azure {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            scale_set: "vmss".into(),
        };
        let e = reply(
            403,
            r#"{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization"}}"#,
        )
        .to_error("VirtualMachineScaleSets_Get", &g);
        assert_eq!(e.kind, CloudErrorKind::Permission);
        let text = e.to_string();
        assert!(text.contains("VirtualMachineScaleSets_Get") && text.contains("vmss"));
        assert!(text.contains("HTTP 403 AuthorizationFailed"), "{text}");
        let e = reply(502, "<html>bad gateway</html>").to_error("X", &g);
        assert_eq!(e.kind, CloudErrorKind::Transient);
        assert!(e.message.contains("bad gateway"));
    }
}
