//! The push webhook receiver: a forge calls it on a push and it fires the poll loop's trigger
//! for an immediate fetch. It never trusts the payload for anything but "a push happened to
//! branch X": the fetch itself decides what changed.
//!
//! What is each forge's (which headers say who sent a delivery, its event and its id, and
//! how it is signed) is a [`Sender`], handed in with the configuration ([`Senders`]):
//! `crate::forge::webhook` has GitHub's, GitLab's and Gitea's. This module keeps what every
//! forge shares: the checks before the body, the body's bounds, the branch, redeliveries,
//! replays, and the HMAC-SHA256 a signature is checked with.
//!
//! Secrets and signatures are compared in constant time; a delivery id seen before is
//! acknowledged and ignored (forges redeliver on timeouts). Rejections are logged with the
//! reason, the forge and the delivery id, never with a secret or a signature.
//!
//! Hardening against a hostile network ([`crate::serving`] caps connections and times their
//! headers): method, forge headers, the signature's framing (or GitLab's token, in full) and
//! the declared size are checked *before* any body byte is read ([`Receiver::precheck`]), so
//! an unauthenticated client costs no buffer; bodies are capped at [`MAX_BODY_BYTES`]. A
//! replay of a signed delivery is ignored: the delivery id is not signed (an attacker who
//! captured a delivery can send it under a new id), so the signed body itself is remembered
//! for [`REPLAY_WINDOW`], and a GitHub push older than the window (`repository.pushed_at`,
//! inside the signed body) is ignored as stale.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::credentials::Secret;
use super::poll::Trigger;

/// Push payloads are small (GitHub lists at most 20 commits); anything bigger is not a push
/// we care about, and the poll loop still finds the commit.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Time allowed for a request's body (its headers: [`crate::serving::WEBHOOK`]).
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Delivery ids (and signed bodies) remembered to ignore redeliveries and replays.
const REMEMBERED_DELIVERIES: usize = 4096;
/// How long a signed body is remembered; a GitHub push older than this is stale.
pub const REPLAY_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

/// What the receiver checks.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The shared secret configured in the forge's webhook settings.
    pub secret: Secret,
    /// Only pushes to this branch trigger a fetch (`None`: any push).
    pub branch: Option<String>,
    /// The forges whose deliveries it takes (`crate::forge::webhook::FORGES`).
    pub senders: &'static Senders,
}

/// One forge's webhook deliveries as the receiver reads them.
pub trait Sender: std::fmt::Debug + Send + Sync {
    /// Its name in logs and verdicts (`github`).
    fn name(&self) -> &'static str;
    /// Whether a delivery with these headers is its (`has`: whether a header, by its
    /// lowercase name, is there).
    fn claims(&self, has: &dyn Fn(&str) -> bool) -> bool;
    /// The header naming a delivery's event.
    fn event_header(&self) -> &'static str;
    /// The headers naming a delivery (the first one there counts).
    fn delivery_headers(&self) -> &'static [&'static str];
    /// The event a push is.
    fn push_event(&self) -> &'static str;
    /// What can be checked of a delivery's authentication before its body is read: its
    /// signature header is there and of the right form (see [`hex_framed`]), or a token,
    /// which is the whole authentication, in full.
    fn authenticate_headers(&self, secret: &Secret, headers: &HeaderMap) -> Result<(), Verdict>;
    /// The delivery's authentication with its body (see [`verify_hex_hmac`]).
    fn authenticate(
        &self,
        secret: &Secret,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), Verdict>;
}

/// The forges a receiver takes deliveries from, and what a delivery none of them claims is
/// told.
#[derive(Debug)]
pub struct Senders {
    pub all: &'static [&'static dyn Sender],
    pub unknown: &'static str,
}

/// The outcome of one delivery, decided without I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authentic push to the followed branch: fetch now.
    Fetch {
        /// The sender's name (`github`).
        forge: &'static str,
        delivery: Option<String>,
    },
    /// Authentic, but nothing to do (ping, other event, other branch, redelivery).
    Ignored { forge: &'static str, why: String },
    /// Rejected with this status and reason.
    Rejected { status: StatusCode, reason: String },
}

impl Verdict {
    pub fn reject(status: StatusCode, reason: impl Into<String>) -> Self {
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
    /// Signed bodies acted on: (sender, SHA-256 of the body) and when (Unix seconds).
    bodies: VecDeque<((&'static str, [u8; 32]), u64)>,
}

impl Deliveries {
    /// Records the body digest `key` seen at `now`; false if it was seen within the window.
    fn insert_body(&mut self, key: (&'static str, [u8; 32]), now: u64) -> bool {
        let window = REPLAY_WINDOW.as_secs();
        while self
            .bodies
            .front()
            .is_some_and(|(_, at)| now.saturating_sub(*at) > window)
            || self.bodies.len() >= REMEMBERED_DELIVERIES
        {
            self.bodies.pop_front();
        }
        if self.bodies.iter().any(|(k, _)| *k == key) {
            return false;
        }
        self.bodies.push_back((key, now));
        true
    }

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

/// A header's value, if it is there and text.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
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

    /// What can be decided before reading the body: the method, which forge, the declared
    /// size, and the authentication's framing (a signature header of the right form; GitLab's
    /// token in full). `Ok(sender)`: read the body (at most [`MAX_BODY_BYTES`]) and [`check`].
    ///
    /// [`check`]: Receiver::check
    pub fn precheck(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<&'static dyn Sender, Verdict> {
        if method != Method::POST {
            return Err(Verdict::reject(
                StatusCode::METHOD_NOT_ALLOWED,
                "webhooks are POST requests",
            ));
        }
        let senders = self.config.senders;
        let has = |name: &str| headers.contains_key(name);
        let Some(&forge) = senders.all.iter().find(|s| s.claims(&has)) else {
            return Err(Verdict::reject(StatusCode::BAD_REQUEST, senders.unknown));
        };
        let declared = header(headers, "content-length").map(|v| v.trim().parse::<u64>());
        match declared {
            Some(Ok(n)) if n > MAX_BODY_BYTES as u64 => {
                return Err(Verdict::reject(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("a push payload is at most {MAX_BODY_BYTES} bytes"),
                ));
            }
            Some(Err(_)) => {
                return Err(Verdict::reject(
                    StatusCode::BAD_REQUEST,
                    "Content-Length is not a number",
                ));
            }
            _ => {}
        }
        forge.authenticate_headers(&self.config.secret, headers)?;
        Ok(forge)
    }

    /// Decides what to do with one delivery, at the current time.
    pub fn check(&self, method: &Method, headers: &HeaderMap, body: &[u8]) -> Verdict {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.check_at(method, headers, body, now)
    }

    /// Decides what to do with one delivery received at `now` (Unix seconds).
    pub fn check_at(&self, method: &Method, headers: &HeaderMap, body: &[u8], now: u64) -> Verdict {
        let forge = match self.precheck(method, headers) {
            Ok(f) => f,
            Err(v) => return v,
        };
        if body.len() > MAX_BODY_BYTES {
            return Verdict::reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a push payload is at most {MAX_BODY_BYTES} bytes"),
            );
        }
        if let Err(v) = forge.authenticate(&self.config.secret, headers, body) {
            return v;
        }
        let from = forge.name();
        let event = header(headers, forge.event_header());
        let delivery = forge
            .delivery_headers()
            .iter()
            .find_map(|name| header(headers, name));
        let is_push = event.is_some_and(|e| e == forge.push_event());
        if !is_push {
            return Verdict::Ignored {
                forge: from,
                why: format!("event {} is not a push", event.unwrap_or("(none)")),
            };
        }
        #[derive(serde::Deserialize)]
        struct Push {
            #[serde(rename = "ref")]
            reference: String,
            #[serde(default)]
            repository: Option<Repository>,
        }
        #[derive(serde::Deserialize)]
        struct Repository {
            /// GitHub: when the push happened (Unix seconds; other events send a date string).
            #[serde(default)]
            pushed_at: Option<serde_json::Value>,
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
            // A fleet stop (`rota stop`) is a push to its own ref: fetched at once too.
            if push.reference != wanted && push.reference != rota_core::fleet::stops::STOP_REF {
                return Verdict::Ignored {
                    forge: from,
                    why: format!("push to {}, following {wanted}", push.reference),
                };
            }
        }
        // A signed push from long ago is a replay whatever its delivery id says.
        if let Some(pushed) = push
            .repository
            .as_ref()
            .and_then(|r| r.pushed_at.as_ref())
            .and_then(serde_json::Value::as_u64)
            && now.saturating_sub(pushed) > REPLAY_WINDOW.as_secs()
        {
            return Verdict::Ignored {
                forge: from,
                why: format!(
                    "stale delivery: pushed {}s ago (more than {}s)",
                    now - pushed,
                    REPLAY_WINDOW.as_secs()
                ),
            };
        }
        // Remember the delivery only once it is authentic and acted on: an attacker cannot
        // burn ids, and a failed delivery can be redelivered.
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = delivery
            && !seen.insert(id)
        {
            return Verdict::Ignored {
                forge: from,
                why: format!("delivery {id} already received"),
            };
        }
        let digest: [u8; 32] = <Sha256 as sha2::Digest>::digest(body).into();
        if !seen.insert_body((from, digest), now) {
            return Verdict::Ignored {
                forge: from,
                why: "a replay of a delivery already received (same signed body)".to_string(),
            };
        }
        drop(seen);
        Verdict::Fetch {
            forge: from,
            delivery: delivery.map(str::to_string),
        }
    }
}

/// A signature's framing, before the body is read: `sig` (the header `name`'s value, its
/// prefix stripped) is 64 hex digits, as an HMAC-SHA256 is.
pub fn hex_framed(sig: &str, name: &str) -> Result<(), Verdict> {
    let sig = sig.trim();
    if !sig.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Verdict::reject(
            StatusCode::BAD_REQUEST,
            format!("{name} is not hexadecimal"),
        ));
    }
    if sig.len() != 64 {
        return Err(Verdict::reject(
            StatusCode::UNAUTHORIZED,
            format!("{name} is not an HMAC-SHA256 (64 hex digits)"),
        ));
    }
    Ok(())
}

/// `hex_sig` (the header `name`'s value) is the HMAC-SHA256 of `body` under `secret`,
/// compared in constant time.
pub fn verify_hex_hmac(
    secret: &Secret,
    body: &[u8],
    hex_sig: &str,
    name: &str,
) -> Result<(), Verdict> {
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

/// A token compared in full with `secret`, in constant time (a forge that sends the secret
/// itself instead of a signature: GitLab).
pub fn verify_token(secret: &Secret, token: &str, name: &str) -> Result<(), Verdict> {
    // ct_eq on slices of different lengths is false (and leaks only the length).
    if bool::from(token.as_bytes().ct_eq(secret.expose().as_bytes())) {
        Ok(())
    } else {
        Err(Verdict::reject(
            StatusCode::UNAUTHORIZED,
            format!("{name} does not match the configured secret"),
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
    // One path: anything else is a scanner or a typo, answered without reading a byte of it.
    if parts.uri.path() != WEBHOOK_PATH {
        tracing::debug!(path = %parts.uri.path().chars().take(128).collect::<String>(), "webhook request to an unknown path");
        return text(
            StatusCode::NOT_FOUND,
            format!("no such path: push webhooks go to {WEBHOOK_PATH}"),
        );
    }
    // Nothing is read from a client that is not even framed as an authentic forge delivery.
    if let Err(Verdict::Rejected { status, reason }) =
        receiver.precheck(&parts.method, &parts.headers)
    {
        tracing::warn!(status = status.as_u16(), reason = %reason, path = %parts.uri.path(), "webhook rejected before its body");
        return text(status, reason);
    }
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
            tracing::info!(forge, delivery = ?delivery, "push webhook: fetching");
            trigger.fire();
            text(StatusCode::ACCEPTED, "fetch triggered".to_string())
        }
        Verdict::Ignored { forge, why } => {
            tracing::debug!(forge, why = %why, "webhook ignored");
            text(StatusCode::OK, format!("ignored: {why}"))
        }
        Verdict::Rejected { status, reason } => {
            tracing::warn!(status = status.as_u16(), reason = %reason, path = %parts.uri.path(), "webhook rejected");
            text(status, reason)
        }
    }
}

/// The one path the receiver answers: forges are configured with the full URL, e.g.
/// `https://rota.example.com/hooks/push`. Any other path is 404, before the body is read.
pub const WEBHOOK_PATH: &str = "/hooks/push";

/// Serves webhooks on `listener` until `cancel` fires, at [`WEBHOOK_PATH`] only.
pub async fn serve(
    listener: TcpListener,
    receiver: Arc<Receiver>,
    trigger: Trigger,
    cancel: CancellationToken,
) {
    let slots = crate::serving::Slots::new(crate::serving::WEBHOOK);
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
        // Over the cap, the connection is closed unread.
        let Some(slot) = slots.admit() else {
            tracing::debug!(peer = %peer, "webhook connection refused: too many open");
            continue;
        };
        let receiver = Arc::clone(&receiver);
        let trigger = trigger.clone();
        let slots = slots.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let receiver = Arc::clone(&receiver);
                let trigger = trigger.clone();
                async move { Ok::<_, Infallible>(handle(&receiver, &trigger, req).await) }
            });
            // Slow or stalled clients must not pin connections: headers in time, and a
            // connection lives at most its age limit.
            let conn = slots
                .http1()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = slots.run(slot, conn).await {
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
    use crate::forge::webhook::FORGES;

    fn receiver() -> Receiver {
        Receiver::new(WebhookConfig {
            secret: Secret::new("It's a Secret to Everybody"),
            branch: Some("main".into()),
            senders: &FORGES,
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
            senders: &FORGES,
        });
        let h = headers(&[("x-github-event", "ping"), ("x-hub-signature-256", sig)]);
        assert_eq!(
            r.check(&Method::POST, &h, body),
            Verdict::Ignored {
                forge: "github",
                why: "event ping is not a push".into()
            }
        );
    }

    #[test]
    fn table_of_deliveries() {
        let r = receiver();
        let push_main = br#"{"ref":"refs/heads/main","after":"abc"}"#;
        let push_dev = br#"{"ref":"refs/heads/dev"}"#;
        let push_stop = br#"{"ref":"refs/rota/stop","after":"5a5"}"#;
        let s = r.config.secret.clone();
        let gh_sig = format!("sha256={}", sign_hex(&s, push_main));
        let gitea_sig = sign_hex(&s, push_main);
        // Another push (a new body): the same body again would be a replay.
        let push_main_again = br#"{"ref":"refs/heads/main","after":"def"}"#;
        let gitea_sig_again = sign_hex(&s, push_main_again);
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
                    forge: "github",
                    delivery: Some("d1".into()),
                },
            ),
            (
                "github push to the fleet stop's ref",
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-github-delivery", "d-stop"),
                    (
                        "x-hub-signature-256",
                        &format!("sha256={}", sign_hex(&s, push_stop)),
                    ),
                ]),
                push_stop,
                Verdict::Fetch {
                    forge: "github",
                    delivery: Some("d-stop".into()),
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
                    forge: "github",
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
                    forge: "gitlab",
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
                    forge: "gitlab",
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
                    forge: "gitlab",
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
                    forge: "gitea",
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
                    ("x-gitea-signature", &gitea_sig_again),
                ]),
                push_main_again,
                Verdict::Fetch {
                    forge: "gitea",
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

    /// The delivery id is not signed: a captured delivery sent again under a new id used to
    /// trigger a fetch each time.
    #[test]
    fn a_replayed_signed_body_fetches_once_and_old_pushes_are_stale() {
        let r = receiver();
        let now = 1_800_000_000;
        let body = format!(r#"{{"ref":"refs/heads/main","repository":{{"pushed_at":{now}}}}}"#);
        let sig = format!("sha256={}", sign_hex(&r.config.secret, body.as_bytes()));
        let h = |id: &str| {
            headers(&[
                ("x-github-event", "push"),
                ("x-github-delivery", id),
                ("x-hub-signature-256", &sig),
            ])
        };
        assert!(matches!(
            r.check_at(&Method::POST, &h("a"), body.as_bytes(), now),
            Verdict::Fetch { .. }
        ));
        assert_eq!(
            r.check_at(&Method::POST, &h("b"), body.as_bytes(), now + 5),
            Verdict::Ignored {
                forge: "github",
                why: "a replay of a delivery already received (same signed body)".into()
            }
        );
        // Past the window the digest is forgotten, but the signed push time is old.
        let later = now + REPLAY_WINDOW.as_secs() + 1;
        assert_eq!(
            r.check_at(&Method::POST, &h("c"), body.as_bytes(), later),
            Verdict::Ignored {
                forge: "github",
                why: format!(
                    "stale delivery: pushed {}s ago (more than 3600s)",
                    later - now
                ),
            }
        );
    }

    /// Nothing of the body is needed to turn away a client that is not framed as a forge.
    #[test]
    fn prechecks_need_no_body() {
        let r = receiver();
        let too_big = (MAX_BODY_BYTES + 1).to_string();
        let cases = [
            (Method::GET, headers(&[]), StatusCode::METHOD_NOT_ALLOWED),
            (Method::POST, headers(&[]), StatusCode::BAD_REQUEST),
            (
                Method::POST,
                headers(&[("x-github-event", "push")]),
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("x-hub-signature-256", "sha256=00"),
                ]),
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::POST,
                headers(&[
                    ("x-github-event", "push"),
                    ("content-length", &too_big),
                    ("x-hub-signature-256", &format!("sha256={}", "0".repeat(64))),
                ]),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            (
                Method::POST,
                headers(&[("x-gitlab-event", "Push Hook"), ("x-gitlab-token", "guess")]),
                StatusCode::UNAUTHORIZED,
            ),
        ];
        for (m, h, want) in cases {
            match r.precheck(&m, &h) {
                Err(Verdict::Rejected { status, .. }) => assert_eq!(status, want, "{h:?}"),
                other => panic!("{h:?}: {other:?}"),
            }
        }
        let framed = headers(&[
            ("x-github-event", "push"),
            ("x-hub-signature-256", &format!("sha256={}", "0".repeat(64))),
        ]);
        assert_eq!(
            r.precheck(&Method::POST, &framed).map(|s| s.name()),
            Ok("github")
        );
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
