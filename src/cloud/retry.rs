//! One retry policy for every cloud provider: a timeout on each attempt, exponential backoff
//! with full jitter on throttling and transient failures, and a bound on attempts.
//!
//! Providers classify their own errors into [`CloudErrorKind`] (each cloud words them
//! differently); this module decides what to do with the classification, so that AWS, GCP and
//! Azure behave alike under failure. Only `Transient` and `Throttled` are retried: quota,
//! permission, not-found and invalid requests will not heal by asking again, and the
//! controller pauses the pool and reports them instead.

use std::future::Future;
use std::time::Duration;

use rand::Rng;

use super::{CloudError, CloudErrorKind};

/// How a provider retries and times out its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Backoff ceiling before the first retry; doubled on each further retry.
    pub base_delay: Duration,
    /// Cap on any single backoff.
    pub max_delay: Duration,
    /// Throttling waits at least this long: a rate limiter needs time to refill.
    pub throttle_floor: Duration,
    /// Limit on one attempt, request and response together.
    pub call_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Suits a reconcile loop that will call again anyway: a handful of attempts over about
    /// half a minute, then the error goes back to the controller, which backs off on its own.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            throttle_floor: Duration::from_secs(1),
            call_timeout: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries and a short timeout: for tests against local peers, where a failure
    /// should show at once.
    pub fn no_retries(call_timeout: Duration) -> Self {
        RetryPolicy {
            max_attempts: 1,
            call_timeout,
            ..RetryPolicy::default()
        }
    }

    /// The longest wait before retry number `retry` (1 for the first retry) after a failure
    /// of `kind`: `base * 2^(retry-1)`, capped, and never below the throttle floor for
    /// throttling. The actual wait is drawn uniformly below it ("full jitter"), so many
    /// agents throttled together do not retry together.
    pub fn backoff_ceiling(&self, retry: u32, kind: CloudErrorKind) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << (retry.saturating_sub(1)).min(20))
            .min(self.max_delay);
        if kind == CloudErrorKind::Throttled {
            exp.max(self.throttle_floor)
        } else {
            exp
        }
    }

    fn backoff(&self, retry: u32, kind: CloudErrorKind) -> Duration {
        let ceiling = self.backoff_ceiling(retry, kind);
        let floor = if kind == CloudErrorKind::Throttled {
            self.throttle_floor.min(ceiling) / 2
        } else {
            Duration::ZERO
        };
        let span = ceiling.saturating_sub(floor).as_millis() as u64;
        floor + Duration::from_millis(rand::rng().random_range(0..=span))
    }

    /// Run `attempt` under this policy. Each attempt gets the call timeout (a timeout counts
    /// as `Transient`); a retryable error is retried after a jittered backoff until the
    /// attempts run out; the last error is returned, its message saying how many attempts
    /// were made.
    pub async fn run<T, F, Fut>(
        &self,
        call: &'static str,
        group: &(impl std::fmt::Display + ?Sized),
        mut attempt: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, CloudError>>,
    {
        let attempts = self.max_attempts.max(1);
        let mut n = 0;
        loop {
            n += 1;
            let outcome = match tokio::time::timeout(self.call_timeout, attempt()).await {
                Ok(r) => r,
                // `group` names what the call was about: a group, or an image query.
                Err(_) => Err(CloudError::about(
                    CloudErrorKind::Transient,
                    call,
                    group,
                    format!("no answer within {:?}", self.call_timeout),
                )),
            };
            match outcome {
                Ok(v) => return Ok(v),
                Err(e) if e.kind.is_retryable() && n < attempts => {
                    tracing::debug!(call, group = %group, attempt = n, error = %e, "cloud call failed, retrying");
                    tokio::time::sleep(self.backoff(n, e.kind)).await;
                }
                Err(mut e) => {
                    if n > 1 {
                        e.message = format!("{} (after {n} attempts)", e.message);
                    }
                    return Err(e);
                }
            }
        }
    }
}

/// The usual classification of an HTTP status code, for providers that speak HTTP
/// directly; a provider refines it with the error code in the body where the cloud
/// documents one (AWS `Throttling`, GCP `QUOTA_EXCEEDED`, Azure `OperationNotAllowed`).
pub fn kind_for_status(status: u16) -> CloudErrorKind {
    match status {
        401 | 403 => CloudErrorKind::Permission,
        404 | 410 => CloudErrorKind::NotFound,
        408 => CloudErrorKind::Transient,
        429 => CloudErrorKind::Throttled,
        400..=499 => CloudErrorKind::Invalid,
        _ => CloudErrorKind::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::GroupRef;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn group() -> GroupRef {
        GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "general".into(),
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            throttle_floor: Duration::from_millis(2),
            call_timeout: Duration::from_millis(200),
        }
    }

    fn err(kind: CloudErrorKind) -> CloudError {
        CloudError::new(kind, "DescribeAutoScalingGroups", &group(), "boom")
    }

    #[tokio::test]
    async fn retries_transient_and_throttled_until_success() {
        for kind in [CloudErrorKind::Transient, CloudErrorKind::Throttled] {
            let calls = AtomicU32::new(0);
            let r = fast()
                .run("DescribeAutoScalingGroups", &group(), || async {
                    if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                        Err(err(kind))
                    } else {
                        Ok(7)
                    }
                })
                .await;
            assert_eq!(r.unwrap(), 7);
            assert_eq!(calls.load(Ordering::SeqCst), 3);
        }
    }

    #[tokio::test]
    async fn does_not_retry_what_cannot_heal() {
        for kind in [
            CloudErrorKind::Quota,
            CloudErrorKind::Permission,
            CloudErrorKind::NotFound,
            CloudErrorKind::Invalid,
        ] {
            let calls = AtomicU32::new(0);
            let r: Result<(), _> = fast()
                .run("SetDesiredCapacity", &group(), || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err(err(kind))
                })
                .await;
            assert_eq!(r.unwrap_err().kind, kind);
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{kind:?} was retried");
        }
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts_and_says_so() {
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = fast()
            .run("SetDesiredCapacity", &group(), || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(err(CloudErrorKind::Throttled))
            })
            .await;
        let e = r.unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert_eq!(e.kind, CloudErrorKind::Throttled);
        assert!(e.message.contains("after 4 attempts"), "{e}");
        assert!(e.to_string().contains("general"), "names the group: {e}");
    }

    #[tokio::test]
    async fn a_hung_call_times_out_as_transient() {
        let p = RetryPolicy {
            max_attempts: 2,
            call_timeout: Duration::from_millis(20),
            ..fast()
        };
        let calls = AtomicU32::new(0);
        let r: Result<(), _> = p
            .run("DescribeAutoScalingGroups", &group(), || async {
                calls.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok(())
            })
            .await;
        let e = r.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Transient);
        assert!(e.message.contains("no answer within"), "{e}");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn backoff_doubles_caps_and_floors_throttling() {
        let p = RetryPolicy::default();
        let t = CloudErrorKind::Transient;
        assert_eq!(p.backoff_ceiling(1, t), Duration::from_millis(200));
        assert_eq!(p.backoff_ceiling(2, t), Duration::from_millis(400));
        assert_eq!(p.backoff_ceiling(30, t), Duration::from_secs(10));
        assert_eq!(
            p.backoff_ceiling(1, CloudErrorKind::Throttled),
            Duration::from_secs(1)
        );
        for retry in 1..8 {
            let d = p.backoff(retry, CloudErrorKind::Throttled);
            assert!(d >= Duration::from_millis(500) && d <= p.max_delay, "{d:?}");
        }
    }

    #[test]
    fn http_statuses_map_to_kinds() {
        assert_eq!(kind_for_status(403), CloudErrorKind::Permission);
        assert_eq!(kind_for_status(404), CloudErrorKind::NotFound);
        assert_eq!(kind_for_status(429), CloudErrorKind::Throttled);
        assert_eq!(kind_for_status(400), CloudErrorKind::Invalid);
        assert_eq!(kind_for_status(503), CloudErrorKind::Transient);
    }
}
