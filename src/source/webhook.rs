//! The push webhook receiver: GitHub, GitLab and Gitea call it on a push and it fires the poll
//! loop's trigger for an immediate fetch. It never trusts the payload for anything but "a push
//! happened to branch X": the fetch itself decides what changed.
//!
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, delivery id in
//!   `X-GitHub-Delivery`, event in `X-GitHub-Event`.
//! - GitLab: `X-Gitlab-Token: <the secret>`, delivery id in `Idempotency-Key` (or
//!   `X-Gitlab-Event-UUID`), event in `X-Gitlab-Event`.
//! - Gitea (and Forgejo): `X-Gitea-Signature: <hex HMAC-SHA256 of the body>`, delivery id in
//!   `X-Gitea-Delivery`, event in `X-Gitea-Event`.
//!
//! Secrets and signatures are compared in constant time; a delivery id seen before is
//! acknowledged and ignored (forges redeliver on timeouts). Rejections are logged with the
//! reason, the forge and the delivery id, never with a secret or a signature.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::credentials::Secret;
use super::poll::Trigger;

/// Push payloads are small; anything bigger is not a push we care about.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Time allowed for a request's headers, then for its body.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Delivery ids remembered to ignore redeliveries.
const REMEMBERED_DELIVERIES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forge {
    GitHub,
    GitLab,
    Gitea,
}

impl Forge {
    pub fn name(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::GitLab => "gitlab",
            Forge::Gitea => "gitea",
        }
    }
}

/// What the receiver checks.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The shared secret configured in the forge's webhook settings.
    pub secret: Secret,
    /// Only pushes to this branch trigger a fetch (`None`: any push).
    pub branch: Option<String>,
}

/// The outcome of one delivery, decided without I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authentic push to the followed branch: fetch now.
    Fetch {
        forge: Forge,
        delivery: Option<String>,
    },
    /// Authentic, but nothing to do (ping, other event, other branch, redelivery).
    Ignored { forge: Forge, why: String },
    /// Rejected with this status and reason.
    Rejected { status: StatusCode, reason: String },
}

impl Verdict {
    fn reject(status: StatusCode, reason: impl Into<String>) -> Self {
        Verdict::Rejected {
            status,
            reason: reason.into(),
        }
    }
}

/// Checks deliveries and remembers their ids.
#[derive(Debug)]
pub struct Receiver {
    config: WebhookConfig,
    seen: Mutex<Deliveries>,
}

#[derive(Debug, Default)]
struct Deliveries {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Deliveries {
    /// Records `id`; false if it was already there.
    fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == REMEMBERED_DELIVERIES
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.order.push_back(id.to_string());
        self.set.insert(id.to_string());
        true
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn hmac_sha256(secret: &Secret, body: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC accepts any key length");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

impl Receiver {
    pub fn new(config: WebhookConfig) -> Self {
        Receiver {
            config,
            seen: Mutex::new(Deliveries::default()),
        }
    }

    /// Decides what to do with one delivery.
    pub fn check(&self, method: &Method, headers: &HeaderMap, body: &[u8]) -> Verdict {
        if method != Method::POST {
            return Verdict::reject(StatusCode::METHOD_NOT_ALLOWED, "webhooks are POST requests");
        }
        // Gitea first: for compatibility it also sends X-GitHub-Event and X-GitHub-Delivery
        // (and, on older versions, no X-Hub-Signature-256), never the other way round.
        let forge = if headers.contains_key("x-gitea-event")
            || headers.contains_key("x-gitea-signature")
        {
            Forge::Gitea
        } else if headers.contains_key("x-github-event")
            || headers.contains_key("x-hub-signature-256")
        {
            Forge::GitHub
        } else if headers.contains_key("x-gitlab-event") || headers.contains_key("x-gitlab-token") {
            Forge::GitLab
        } else {
            return Verdict::reject(
                StatusCode::BAD_REQUEST,
                "not a GitHub, GitLab or Gitea webhook (no X-GitHub-Event, X-Gitlab-Event or X-Gitea-Event header)",
            );
        };
        if let Err(v) = self.authenticate(forge, headers, body) {
            return v;
        }
        let (event, delivery) = match forge {
            Forge::GitHub => (
                header(headers, "x-github-event"),
                header(headers, "x-github-delivery"),
            ),
            Forge::GitLab => (
                header(headers, "x-gitlab-event"),
                // Idempotency-Key (GitLab 17+) stays the same across retries of a delivery,
                // which is exactly what deduplication needs; older GitLab: the event UUID.
                header(headers, "idempotency-key")
                    .or_else(|| header(headers, "x-gitlab-event-uuid")),
            ),
            Forge::Gitea => (
                header(headers, "x-gitea-event"),
                header(headers, "x-gitea-delivery"),
            ),
        };
        let is_push = match (forge, event) {
            (Forge::GitLab, Some(e)) => e == "Push Hook",
            (_, Some(e)) => e == "push",
            (_, None) => false,
        };
        if !is_push {
            return Verdict::Ignored {
                forge,
                why: format!("event {} is not a push", event.unwrap_or("(none)")),
            };
        }
        #[derive(serde::Deserialize)]
        struct Push {
            #[serde(rename = "ref")]
            reference: String,
        }
        let push: Push = match serde_json::from_slice(body) {
            Ok(p) => p,
            Err(e) => {
                return Verdict::reject(
                    StatusCode::BAD_REQUEST,
                    format!("push payload is not the expected JSON: {e}"),
                );
            }
        };
        if let Some(branch) = &self.config.branch {
            let wanted = format!("refs/heads/{branch}");
            if push.reference != wanted {
                return Verdict::Ignored {
                    forge,
                    why: format!("push to {}, following {wanted}", push.reference),
                };
            }
        }
        // Remember the delivery only once it is authentic and acted on: an attacker cannot
        // burn ids, and a failed delivery can be redelivered.
        if let Some(id) = delivery
            && !self.seen.lock().expect("not poisoned").insert(id)
        {
            return Verdict::Ignored {
                forge,
                why: format!("delivery {id} already received"),
            };
        }
        Verdict::Fetch {
            forge,
            delivery: delivery.map(str::to_string),
        }
    }

    fn authenticate(&self, forge: Forge, headers: &HeaderMap, body: &[u8]) -> Result<(), Verdict> {
        let secret = &self.config.secret;
        match forge {
            Forge::GitHub => {
                let sig = header(headers, "x-hub-signature-256").ok_or_else(|| {
                    Verdict::reject(
                        StatusCode::UNAUTHORIZED,
                        "missing X-Hub-Signature-256 header",
                    )
                })?;
                let hex_sig = sig.strip_prefix("sha256=").ok_or_else(|| {
                    Verdict::reject(
                        StatusCode::BAD_REQUEST,
                        "X-Hub-Signature-256 must be sha256=<hex>",
                    )
                })?;
                verify_hex_hmac(secret, body, hex_sig, "X-Hub-Signature-256")
            }
            Forge::Gitea => {
                let sig = header(headers, "x-gitea-signature").ok_or_else(|| {
                    Verdict::reject(StatusCode::UNAUTHORIZED, "missing X-Gitea-Signature header")
                })?;
                verify_hex_hmac(secret, body, sig, "X-Gitea-Signature")
            }
            Forge::GitLab => {
                let token = header(headers, "x-gitlab-token").ok_or_else(|| {
                    Verdict::reject(StatusCode::UNAUTHORIZED, "missing X-Gitlab-Token header")
                })?;
                // ct_eq on slices of different lengths is false (and leaks only the length).
                if bool::from(token.as_bytes().ct_eq(secret.expose().as_bytes())) {
                    Ok(())
                } else {
                    Err(Verdict::reject(
                        StatusCode::UNAUTHORIZED,
                        "X-Gitlab-Token does not match the configured secret",
                    ))
                }
            }
        }
    }
}

fn verify_hex_hmac(secret: &Secret, body: &[u8], hex_sig: &str, name: &str) -> Result<(), Verdict> {
    let given = hex::decode(hex_sig.trim()).map_err(|_| {
        Verdict::reject(
            StatusCode::BAD_REQUEST,
            format!("{name} is not hexadecimal"),
        )
    })?;
    let expected = hmac_sha256(secret, body);
    if bool::from(expected.as_slice().ct_eq(given.as_slice())) {
        Ok(())
    } else {
        Err(Verdict::reject(
            StatusCode::UNAUTHORIZED,
            format!("{name} does not match the body signed with the configured secret"),
        ))
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body + "\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Handles one HTTP request: reads the body (bounded), checks it, fires the trigger.
pub async fn handle(
    receiver: &Receiver,
    trigger: &Trigger,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let collected =
        tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await;
    let Ok(collected) = collected else {
        tracing::warn!("webhook body not received in time");
        return text(
            StatusCode::REQUEST_TIMEOUT,
            "body not received in time".to_string(),
        );
    };
    let body = match collected {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let status = if e.is::<http_body_util::LengthLimitError>() {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            tracing::warn!(status = status.as_u16(), "webhook body rejected");
            return text(status, format!("body rejected: {e}"));
        }
    };
    match receiver.check(&parts.method, &parts.headers, &body) {
        Verdict::Fetch { forge, delivery } => {
            tracing::info!(forge = forge.name(), delivery = ?delivery, "push webhook: fetching");
            trigger.fire();
            text(StatusCode::ACCEPTED, "fetch triggered".to_string())
        }
        Verdict::Ignored { forge, why } => {
            tracing::debug!(forge = forge.name(), why = %why, "webhook ignored");
            text(StatusCode::OK, format!("ignored: {why}"))
        }
        Verdict::Rejected { status, reason } => {
            tracing::warn!(status = status.as_u16(), reason = %reason, path = %parts.uri.path(), "webhook rejected");
            text(status, reason)
        }
    }
}

/// Serves webhooks on `listener` until `cancel` fires. Any path is accepted: forges are
/// configured with the full URL, e.g. `https://rota.example.com/hooks/push`.
pub async fn serve(
    listener: TcpListener,
    receiver: Arc<Receiver>,
    trigger: Trigger,
    cancel: CancellationToken,
) {
    loop {
        let (stream, peer): (_, SocketAddr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a webhook connection");
                    // Out of file descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = cancel.cancelled() => return,
        };
        let receiver = Arc::clone(&receiver);
        let trigger = trigger.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let receiver = Arc::clone(&receiver);
                let trigger = trigger.clone();
                async move { Ok::<_, Infallible>(handle(&receiver, &trigger, req).await) }
            });
            // Slow or stalled clients must not pin connections: headers within 10s.
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(peer = %peer, error = %e, "webhook connection");
            }
        });
    }
}

/// Signs a body the way GitHub and Gitea do (hex HMAC-SHA256): for tests and for
/// `rota` users who want to send a test delivery with curl.
pub fn sign_hex(secret: &Secret, body: &[u8]) -> String {
    hex::encode(hmac_sha256(secret, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver() -> Receiver {
        Receiver::new(WebhookConfig {
            secret: Secret::new("It's a Secret to Everybody"),
            branch: Some("main".into()),
        })
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn github_documented_example_signature() {
        // The worked example of GitHub's "Validating webhook deliveries" page.
        let body = b"Hello, World!";
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let r = Receiver::new(WebhookConfig {
            secret: Secret::new("It's a Secret to Everybody"),
            branch: None,
        });
        let h = headers(&[("x-github-event", "ping"), ("x-hub-signature-256", sig)]);
        assert_eq!(
            r.check(&Method::POST, &h, body),
            Verdict::Ignored {
                forge: Forge::GitHub,
                why: "event ping is not a push".into()
            }
        );
    }

    #[test]
    fn table_of_deliveries() {
        let r = receiver();
        let push_main = br#"{"ref":"refs/heads/main","after":"abc"}"#;
        let push_dev = br#"{"ref":"refs/heads/dev"}"#;
        let s = r.config.secret.clone();
        let gh_sig = format!("sha256={}", sign_hex(&s, push_main));
        let gitea_sig = sign_hex(&s, push_main);
        let wrong = format!("sha256={}", sign_hex(&Secret::new("other"), push_main));
        use StatusCode as S;
        let reject = |status: S, reason: &str| Verdict::Rejected {
            status,
            reason: reason.into(),
        };
        let cases: Vec<(&str, Method, HeaderMap, &[u8], Verdict)> = vec![
            (
                "github push",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-github-delivery", "d1"),
                    ("x-hub-signature-256", &gh_sig),
                ]),
                push_main,
                Verdict::Fetch {
                    forge: Forge::GitHub,
                    delivery: Some("d1".into()),
                },
            ),
            (
                "github redelivery",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-github-delivery", "d1"),
                    ("x-hub-signature-256", &gh_sig),
                ]),
                push_main,
                Verdict::Ignored {
                    forge: Forge::GitHub,
                    why: "delivery d1 already received".into(),
                },
            ),
            (
                "github wrong secret",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-github-delivery", "d2"),
                    ("x-hub-signature-256", &wrong),
                ]),
                push_main,
                reject(
                    S::UNAUTHORIZED,
                    "X-Hub-Signature-256 does not match the body signed with the configured secret",
                ),
            ),
            (
                "github body tampered",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-github-delivery", "d3"),
                    ("x-hub-signature-256", &gh_sig),
                ]),
                push_dev,
                reject(
                    S::UNAUTHORIZED,
                    "X-Hub-Signature-256 does not match the body signed with the configured secret",
                ),
            ),
            (
                "github unsigned",
                Method::POST,
                headers(&[("x-github-event", "push")]),
                push_main,
                reject(S::UNAUTHORIZED, "missing X-Hub-Signature-256 header"),
            ),
            (
                "github sha1 form",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-hub-signature-256", "sha1=abcd"),
                ]),
                push_main,
                reject(S::BAD_REQUEST, "X-Hub-Signature-256 must be sha256=<hex>"),
            ),
            (
                "gitlab push",
                Method::POST,
                headers(&[
                    ("x-gitlab-event", "Push Hook"),
                    ("x-gitlab-token", "It's a Secret to Everybody"),
                    ("x-gitlab-event-uuid", "u1"),
                ]),
                push_main,
                Verdict::Fetch {
                    forge: Forge::GitLab,
                    delivery: Some("u1".into()),
                },
            ),
            (
                "gitlab wrong token",
                Method::POST,
                headers(&[
                    ("x-gitlab-event", "Push Hook"),
                    ("x-gitlab-token", "It's a Secret to Everybod"),
                ]),
                push_main,
                reject(
                    S::UNAUTHORIZED,
                    "X-Gitlab-Token does not match the configured secret",
                ),
            ),
            (
                "gitlab other branch",
                Method::POST,
                headers(&[
                    ("x-gitlab-event", "Push Hook"),
                    ("x-gitlab-token", "It's a Secret to Everybody"),
                ]),
                push_dev,
                Verdict::Ignored {
                    forge: Forge::GitLab,
                    why: "push to refs/heads/dev, following refs/heads/main".into(),
                },
            ),
            (
                "gitlab tag push",
                Method::POST,
                headers(&[
                    ("x-gitlab-event", "Tag Push Hook"),
                    ("x-gitlab-token", "It's a Secret to Everybody"),
                ]),
                push_main,
                Verdict::Ignored {
                    forge: Forge::GitLab,
                    why: "event Tag Push Hook is not a push".into(),
                },
            ),
            (
                "gitea push",
                Method::POST,
                headers(&[
                    ("x-gitea-event", "push"),
                    ("x-gitea-delivery", "g1"),
                    ("x-gitea-signature", &gitea_sig),
                ]),
                push_main,
                Verdict::Fetch {
                    forge: Forge::Gitea,
                    delivery: Some("g1".into()),
                },
            ),
            (
                "gitea with its GitHub compatibility headers",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-github-delivery", "g2"),
                    ("x-gitea-event", "push"),
                    ("x-gitea-delivery", "g2"),
                    ("x-gitea-signature", &gitea_sig),
                ]),
                push_main,
                Verdict::Fetch {
                    forge: Forge::Gitea,
                    delivery: Some("g2".into()),
                },
            ),
            (
                "gitea not hex",
                Method::POST,
                headers(&[("x-gitea-event", "push"), ("x-gitea-signature", "zz")]),
                push_main,
                reject(S::BAD_REQUEST, "X-Gitea-Signature is not hexadecimal"),
            ),
            (
                "unknown sender",
                Method::POST,
                headers(&[("content-type", "application/json")]),
                push_main,
                reject(
                    S::BAD_REQUEST,
                    "not a GitHub, GitLab or Gitea webhook (no X-GitHub-Event, X-Gitlab-Event or X-Gitea-Event header)",
                ),
            ),
            (
                "GET",
                Method::GET,
                headers(&[]),
                b"",
                reject(S::METHOD_NOT_ALLOWED, "webhooks are POST requests"),
            ),
        ];
        for (name, method, h, body, want) in cases {
            assert_eq!(r.check(&method, &h, body), want, "case {name}");
        }
    }

    #[test]
    fn authentic_but_malformed_payload_is_a_400() {
        let r = receiver();
        let body = b"not json";
        let sig = format!("sha256={}", sign_hex(&r.config.secret, body));
        let v = r.check(
            &Method::POST,
            &headers(&[("x-github-event", "push"), ("x-hub-signature-256", &sig)]),
            body,
        );
        assert!(
            matches!(&v, Verdict::Rejected { status, reason } if *status == StatusCode::BAD_REQUEST && reason.starts_with("push payload is not the expected JSON")),
            "{v:?}"
        );
    }

    proptest::proptest! {
        /// Whatever arrives from the network, the receiver answers without panicking, and
        /// nothing unsigned ever triggers a fetch.
        #[test]
        fn arbitrary_deliveries_never_panic_nor_fetch(
            event in proptest::option::of("push|Push Hook|ping|[a-z ]{0,12}"),
            forge in 0u8..3,
            sig in "[0-9a-fA-Fsha=]{0,80}",
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
        ) {
            let r = receiver();
            let mut h = HeaderMap::new();
            let (event_h, sig_h) = match forge {
                0 => ("x-github-event", "x-hub-signature-256"),
                1 => ("x-gitlab-event", "x-gitlab-token"),
                _ => ("x-gitea-event", "x-gitea-signature"),
            };
            if let Some(e) = event {
                h.insert(event_h, e.parse().unwrap());
            }
            h.insert(sig_h, sig.parse().unwrap());
            let v = r.check(&Method::POST, &h, &body);
            proptest::prop_assert!(!matches!(v, Verdict::Fetch { .. }), "{:?}", v);
        }
    }

    #[test]
    fn old_deliveries_are_forgotten_past_the_bound() {
        let mut d = Deliveries::default();
        for i in 0..REMEMBERED_DELIVERIES + 1 {
            assert!(d.insert(&i.to_string()));
        }
        assert!(d.insert("0"), "the oldest id was evicted");
        assert!(!d.insert("5"));
        assert_eq!(d.order.len(), REMEMBERED_DELIVERIES);
    }
}
