//! The HTTP side shared by the forge backends: a hyper client (rustls, system roots; plain
//! http allowed for local test doubles and in-cluster forges), JSON in and out, the token in
//! one header that is never logged, and a client-side rate limit (token bucket) on top of the
//! forge's own `Retry-After` / `X-RateLimit-*` answers.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::report::ReportError;
use crate::source::Secret;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The longest wait a forge can impose (`Retry-After`, rate-limit reset): the header is the
/// forge's to set, and `Retry-After: 9223372036854775807` once overflowed an `Instant` and
/// killed the status task.
pub const MAX_SERVER_WAIT: Duration = Duration::from_secs(3600);
/// A request waits at most this long for its turn; beyond it fails at once as rate limited
/// (transient), so that a forge holding statuses back never holds the agent's loop.
pub const MAX_QUEUE_WAIT: Duration = Duration::from_secs(30);
/// Connecting to the forge.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One request, from sending it to the last byte of the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read (a page of statuses is a few hundred KiB at most).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// A token bucket: `burst` requests at once, then one every `1/per_second`. Waiting callers
/// reserve their slot before sleeping, so they are served in order.
#[derive(Debug)]
pub struct RateLimiter {
    state: Mutex<Bucket>,
    burst: f64,
    per_second: f64,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// The forge said to stop until then (rate limit exhausted).
    blocked_until: Option<Instant>,
}

impl RateLimiter {
    pub fn new(burst: u32, per_second: f64) -> Self {
        assert!(
            burst >= 1 && per_second > 0.0,
            "a rate limit lets something through"
        );
        RateLimiter {
            state: Mutex::new(Bucket {
                tokens: burst as f64,
                at: Instant::now(),
                blocked_until: None,
            }),
            burst: burst as f64,
            per_second,
        }
    }

    /// Waits until a request may go; `Err(wait)` without waiting when the turn is more than
    /// [`MAX_QUEUE_WAIT`] away (the forge said to hold off).
    pub async fn acquire(&self) -> Result<(), Duration> {
        let wait = {
            let mut b = self.state.lock().await;
            let now = Instant::now();
            let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
            b.tokens = (b.tokens + elapsed * self.per_second).min(self.burst);
            b.at = now;
            b.tokens -= 1.0;
            let refill = if b.tokens >= 0.0 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(-b.tokens / self.per_second)
            };
            let blocked = b
                .blocked_until
                .map(|t| t.saturating_duration_since(now))
                .unwrap_or_default();
            if blocked > MAX_QUEUE_WAIT {
                // Not taken: give the token back.
                b.tokens += 1.0;
                return Err(blocked);
            }
            refill.max(blocked)
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    /// Holds every request until `wait` (at most [`MAX_SERVER_WAIT`]) has passed (the
    /// forge's rate limit is exhausted).
    pub async fn block_for(&self, wait: Duration) {
        let mut b = self.state.lock().await;
        let now = Instant::now();
        let until = now.checked_add(wait.min(MAX_SERVER_WAIT)).unwrap_or(now);
        b.blocked_until = Some(b.blocked_until.map_or(until, |t| t.max(until)));
    }
}

/// A JSON client for one forge API.
pub struct ForgeClient {
    backend: &'static str,
    base: String,
    auth: (HeaderName, HeaderValue),
    client: HttpsClient,
    limiter: RateLimiter,
    /// Kept only to scrub it out of error text (a proxy or forge may echo the request).
    token: Secret,
}

impl std::fmt::Debug for ForgeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeClient")
            .field("backend", &self.backend)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl ForgeClient {
    /// `auth_value` is formatted with the token, e.g. `|t| format!("Bearer {t}")`.
    pub fn new(
        backend: &'static str,
        api_url: &str,
        auth_header: &'static str,
        token: &Secret,
        auth_value: impl Fn(&str) -> String,
        limiter: RateLimiter,
    ) -> Result<Self, ReportError> {
        let config_err = |m: String| ReportError::Config(format!("{backend}: {m}"));
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(config_err(format!(
                "API URL {api_url} must start with https:// (or http:// for a local forge)"
            )));
        }
        let mut value = HeaderValue::from_str(&auth_value(token.expose()))
            .map_err(|_| config_err("the token holds characters not allowed in a header".into()))?;
        value.set_sensitive(true);
        let connector = crate::https::connector(Some(CONNECT_TIMEOUT)).map_err(config_err)?;
        Ok(ForgeClient {
            backend,
            base: api_url.trim_end_matches('/').to_string(),
            auth: (HeaderName::from_static(auth_header), value),
            client: Client::builder(TokioExecutor::new()).build(connector),
            limiter,
            token: token.clone(),
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, ReportError> {
        let url = format!("{}{path}", self.base);
        if let Err(wait) = self.limiter.acquire().await {
            return Err(ReportError::Http {
                backend: self.backend,
                status: 429,
                url,
                message: format!(
                    "rate limited by the forge for {}s more: not waiting",
                    wait.as_secs()
                ),
                retry_after: Some(wait),
            });
        }
        let mut req = Request::builder()
            .method(method)
            .uri(&url)
            .header(
                http::header::USER_AGENT,
                concat!("rota/", env!("CARGO_PKG_VERSION")),
            )
            .header(http::header::ACCEPT, "application/json")
            .header(self.auth.0.clone(), self.auth.1.clone());
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ReportError::Transport {
                backend: self.backend,
                message: format!("building request to {url}: {e}"),
            })?;
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| {
                    format!("reading the answer of {url} (at most {MAX_BODY} bytes): {e}")
                })?
                .to_bytes();
            Ok::<_, String>((status, headers, body))
        };
        let (status, headers, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                format!(
                    "{url}: no complete answer within {}s",
                    REQUEST_TIMEOUT.as_secs()
                )
            })
            .and_then(|r| r)
            .map_err(|message| ReportError::Transport {
                backend: self.backend,
                message,
            })?;
        let retry_after = retry_after(&headers);
        if let Some(wait) = retry_after {
            self.limiter.block_for(wait).await;
        }
        if status.is_success() {
            return Ok(body);
        }
        Err(ReportError::Http {
            backend: self.backend,
            status: status.as_u16(),
            url,
            message: crate::telemetry::redact(&error_message(status, &body), &[&self.token]),
            retry_after,
        })
    }

    pub async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ReportError> {
        let body = self.send(Method::GET, path, None).await?;
        serde_json::from_slice(&body).map_err(|e| ReportError::Transport {
            backend: self.backend,
            message: format!("unexpected answer from {}{path}: {e}", self.base),
        })
    }

    /// The backend's name (`github`, `gitlab`, `gitea`), for errors.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// Any method with an optional JSON body; the answer's JSON (`null` when empty).
    pub async fn request_json(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, ReportError> {
        let answer = self
            .send(method, path, body.map(|b| b.to_string().into_bytes()))
            .await?;
        if answer.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&answer).map_err(|e| ReportError::Transport {
            backend: self.backend,
            message: format!("unexpected answer from {}{path}: {e}", self.base),
        })
    }

    pub async fn post_json(&self, path: &str, body: &serde_json::Value) -> Result<(), ReportError> {
        self.send(Method::POST, path, Some(body.to_string().into_bytes()))
            .await
            .map(|_| ())
    }
}

/// How long the forge asks us to wait: `Retry-After` seconds, or, when the quota is spent
/// (`X-RateLimit-Remaining: 0`), until `X-RateLimit-Reset` (epoch seconds; GitHub, Gitea and
/// GitLab all send it).
fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let num = |name: &str| -> Option<i64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    if let Some(secs) = num("retry-after") {
        return Some(Duration::from_secs(
            secs.clamp(0, MAX_SERVER_WAIT.as_secs() as i64) as u64,
        ));
    }
    let remaining = num("x-ratelimit-remaining").or_else(|| num("ratelimit-remaining"))?;
    if remaining > 0 {
        return None;
    }
    let reset = num("x-ratelimit-reset").or_else(|| num("ratelimit-reset"))?;
    let now = chrono::Utc::now().timestamp();
    Some(Duration::from_secs(
        reset
            .saturating_sub(now)
            .clamp(1, MAX_SERVER_WAIT.as_secs() as i64) as u64,
    ))
}

/// The forge's own error text (`{"message": ...}` on all three), shortened.
fn error_message(status: StatusCode, body: &[u8]) -> String {
    let from_json = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").map(|m| m.to_string()));
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    // A forge's text goes into logs and statuses: made safe to print.
    let text: String = rota_core::sanitize::line(text.trim())
        .chars()
        .take(300)
        .collect();
    if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    }
}

/// `/repos/{owner}/{repo}`, each segment escaped: GitHub's and Gitea's repository path.
pub fn repo_path(owner: &str, repo: &str) -> String {
    format!("/repos/{}/{}", path_segment(owner), path_segment(repo))
}

/// Percent-encodes one path segment (GitLab's `group%2Fproject` ids, owner and repo names).
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn token_bucket_spaces_requests_after_the_burst() {
        let limiter = RateLimiter::new(2, 1.0);
        let start = Instant::now();
        limiter.acquire().await.unwrap();
        limiter.acquire().await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes at once");
        limiter.acquire().await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        limiter.acquire().await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle = Instant::now();
        limiter.acquire().await.unwrap();
        limiter.acquire().await.unwrap();
        assert_eq!(
            idle.elapsed(),
            Duration::ZERO,
            "refilled up to the burst only"
        );
        limiter.acquire().await.unwrap();
        assert_eq!(idle.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn forge_rate_limit_blocks_everything() {
        let limiter = RateLimiter::new(10, 10.0);
        limiter.block_for(Duration::from_secs(30)).await;
        let start = Instant::now();
        limiter.acquire().await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(30));
    }

    /// `Retry-After: 9223372036854775807` made `Instant + wait` panic in the status task.
    #[tokio::test(start_paused = true)]
    async fn a_huge_retry_after_is_clamped_and_fails_fast() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", "9223372036854775807".parse().unwrap());
        assert_eq!(retry_after(&h), Some(MAX_SERVER_WAIT));
        h.insert("retry-after", "-5".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        let mut h = http::HeaderMap::new();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", i64::MIN.to_string().parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(1)));
        h.insert("x-ratelimit-reset", i64::MAX.to_string().parse().unwrap());
        assert_eq!(retry_after(&h), Some(MAX_SERVER_WAIT));

        let limiter = RateLimiter::new(10, 10.0);
        limiter.block_for(Duration::MAX).await;
        let start = Instant::now();
        let wait = limiter.acquire().await.unwrap_err();
        assert!(wait > MAX_QUEUE_WAIT && wait <= MAX_SERVER_WAIT, "{wait:?}");
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "fails at once, never sleeps an hour"
        );
    }

    #[test]
    fn retry_after_headers() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", "60".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(60)));
        let mut h = http::HeaderMap::new();
        h.insert("x-ratelimit-remaining", "12".parse().unwrap());
        assert_eq!(retry_after(&h), None);
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        let reset = chrono::Utc::now().timestamp() + 120;
        h.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
        let wait = retry_after(&h).unwrap();
        assert!(wait <= Duration::from_secs(120) && wait >= Duration::from_secs(100));
    }

    /// A forge's error body reaches logs and terminals: OSC 8 links, OSC 52 clipboard
    /// writes, bells and carriage returns in it are shown escaped, JSON or not.
    #[test]
    fn forge_error_bodies_are_made_safe_to_print() {
        let hostile =
            "denied \x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b]52;c;cm0=\x07\x07\rok";
        let json = serde_json::json!({"message": hostile}).to_string();
        for body in [json.as_bytes(), hostile.as_bytes()] {
            let m = error_message(StatusCode::FORBIDDEN, body);
            for c in ['\x1b', '\x07', '\r'] {
                assert!(!m.contains(c), "{c:?} in {m:?}");
            }
            // JSON's own escape (`\u001b`, from the message as JSON) or the sanitiser's.
            assert!(
                m.contains("\\u{1b}]52;c;") || m.contains("\\u001b]52;c;"),
                "{m}"
            );
        }
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(
            path_segment("acme/platform/fleet"),
            "acme%2Fplatform%2Ffleet"
        );
        assert_eq!(path_segment("fleet.git-2_x"), "fleet.git-2_x");
    }
}
