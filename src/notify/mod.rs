//! Rollout notifications to chat webhooks (Slack-compatible `{"text": ...}` payloads).
//!
//! The controller calls [`Notifier::notify`] with a [`Notice`] (rollout started, batch failed,
//! paused, completed, per pool); never blocks. One task per configured webhook coalesces and
//! rate-limits notices ([`coalesce`]) and posts the messages. Webhooks come from the fleet
//! repo (`spec.notifications` of the Fleet or the Cluster, see [`rota_core::fleet::Fleet::notifications_for`]);
//! their URLs are secrets: read from the environment or, by name, from the agent's
//! `--secrets-dir` ([`secrets`]), never logged.

pub mod coalesce;
pub mod secrets;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::metrics::{Metrics, Outcome};
use crate::telemetry::{Secret, redact};
pub use coalesce::{Coalescer, Message};
use rota_core::fleet::model::{NoticeKindName, WebhookSpec};

pub use rota_core::rotate::aftermath::notice::{Notice, NoticeKind, notices_for};

/// Default rate limit: at most one message a minute per webhook.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(60);
/// How long a burst gathers before it is sent.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("notification webhook {name}: {message}")]
    Config { name: String, message: String },
    /// The message names the webhook, never its URL (the URL is the credential).
    #[error("notification webhook {name}: {message}")]
    Send { name: String, message: String },
}

/// A webhook ready to use: its name, URL (secret) and coalescing settings.
#[derive(Clone, Debug)]
pub struct Webhook {
    pub name: String,
    pub url: Secret,
    pub events: BTreeSet<NoticeKindName>,
    pub window: Duration,
    pub min_interval: Duration,
}

/// Whether `name` may be read as a webhook URL: `^[A-Z][A-Z0-9_]*_WEBHOOK_URL$`, at most 128.
pub fn webhook_env_name(name: &str) -> bool {
    name.len() <= 128
        && name.ends_with("_WEBHOOK_URL")
        && name.len() > "_WEBHOOK_URL".len()
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

impl Webhook {
    /// Resolve a webhook of the fleet repo: read its URL from `url`, `urlEnv` or the secret
    /// `urlSecret` of `secrets` (the agent's `--secrets-dir`). `urlFile` (a path) is refused.
    pub fn from_spec(
        spec: &WebhookSpec,
        secrets: Option<&secrets::SecretsDir>,
    ) -> Result<Webhook, NotifyError> {
        let err = |message: String| NotifyError::Config {
            name: spec.name.clone(),
            message,
        };
        if spec.url_file.is_some() {
            return Err(err(
                "urlFile is no longer supported (rota never opens a path the fleet repo names): use urlSecret with --secrets-dir".into(),
            ));
        }
        let url = match (&spec.url, &spec.url_env, &spec.url_secret) {
            (Some(u), None, None) => Secret::new(u.clone()),
            (None, Some(var), None) => {
                // The repo is not trusted with the agent's environment: only a variable named
                // for this purpose may be read (the schema says the same at load time).
                if !webhook_env_name(var) {
                    return Err(err(format!(
                        "urlEnv {:?} is not a webhook variable: its name must be upper case and end in _WEBHOOK_URL (the agent's other variables hold tokens and endpoints)",
                        var.chars().take(64).collect::<String>()
                    )));
                }
                Secret::from_env(var).map_err(|e| err(e.to_string()))?
            }
            (None, None, Some(name)) => match secrets {
                Some(dir) => dir.read(name).map_err(|e| err(e.to_string()))?,
                None => {
                    return Err(err(
                        secrets::SecretsError::NoDir { name: name.clone() }.to_string()
                    ));
                }
            },
            _ => return Err(err("set exactly one of url, urlEnv, urlSecret".into())),
        };
        let u = url.expose();
        if !(u.starts_with("https://") || u.starts_with("http://")) {
            // Do not echo the value: it may be a token pasted in the wrong place.
            return Err(err("the URL must start with https:// or http://".into()));
        }
        let min_interval = spec
            .min_interval
            .map(|d| d.as_duration())
            .unwrap_or(DEFAULT_MIN_INTERVAL);
        let events = spec
            .events
            .clone()
            .map(BTreeSet::from_iter)
            .unwrap_or_else(|| {
                [
                    NoticeKindName::RolloutStarted,
                    NoticeKindName::BatchFailed,
                    NoticeKindName::Paused,
                    NoticeKindName::Completed,
                ]
                .into()
            });
        Ok(Webhook {
            name: spec.name.clone(),
            url,
            events,
            // A burst gathers for 15 s, or less when the webhook allows messages more often.
            window: DEFAULT_WINDOW.min(min_interval),
            min_interval,
        })
    }
}

/// The Slack-compatible payload (also accepted by Mattermost, Rocket.Chat, Discord's
/// `/slack` endpoint and Google Chat).
pub fn payload(message: &Message) -> serde_json::Value {
    serde_json::json!({ "text": message.text })
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Posts messages to one webhook.
pub struct Sender {
    webhook: Webhook,
    client: HttpsClient,
}

impl Sender {
    pub fn new(webhook: Webhook) -> Result<Sender, NotifyError> {
        let connector = crate::https::connector(None).map_err(|message| NotifyError::Config {
            name: webhook.name.clone(),
            message,
        })?;
        Ok(Sender {
            webhook,
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    pub async fn send(&self, message: &Message) -> Result<(), NotifyError> {
        // Errors may quote the URL, or the server may echo its path (where Slack-style URLs
        // keep their token): scrub both.
        let path = self
            .webhook
            .url
            .expose()
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.path_and_query().map(|p| p.as_str().to_string()))
            .filter(|p| p.len() > 1)
            .map(Secret::new);
        let fail = |message: String| {
            let mut secrets = vec![&self.webhook.url];
            secrets.extend(path.as_ref());
            NotifyError::Send {
                name: self.webhook.name.clone(),
                message: redact(&message, &secrets),
            }
        };
        let req = http::Request::post(self.webhook.url.expose())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(
                http::header::USER_AGENT,
                concat!("rota/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::from(payload(message).to_string())))
            .map_err(|e| fail(format!("building the request: {e}")))?;
        let resp = tokio::time::timeout(Duration::from_secs(30), self.client.request(req))
            .await
            .map_err(|_| fail("timed out after 30s".into()))?
            .map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if status.is_success() {
            return Ok(());
        }
        let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
        Err(fail(format!("HTTP {}: {}", status.as_u16(), text.trim())))
    }
}

/// The handle the controller keeps: cheap to clone, `notify` never blocks.
#[derive(Clone, Debug)]
pub struct Notifier {
    senders: Vec<mpsc::UnboundedSender<Notice>>,
}

impl Notifier {
    /// A notifier that drops everything (no webhooks configured).
    pub fn disabled() -> Notifier {
        Notifier { senders: vec![] }
    }

    /// Start one task per webhook.
    pub fn spawn(
        webhooks: Vec<Webhook>,
        metrics: Option<Metrics>,
    ) -> Result<Notifier, NotifyError> {
        let mut senders = Vec::new();
        for w in webhooks {
            let (tx, rx) = mpsc::unbounded_channel();
            let coalescer = Coalescer::new(w.window, w.min_interval, w.events.clone());
            let sender = Sender::new(w)?;
            tokio::spawn(run(sender, coalescer, rx, metrics.clone()));
            senders.push(tx);
        }
        Ok(Notifier { senders })
    }

    pub fn notify(&self, notice: Notice) {
        for s in &self.senders {
            // A closed channel means the task ended (runtime shutting down): nothing to do.
            let _ = s.send(notice.clone());
        }
    }
}

/// The notifier the controller holds while the agent may replace it (a new fleet commit
/// changes `spec.notifications`): cheap to clone, shared.
#[derive(Clone, Debug)]
pub struct SharedNotifier(std::sync::Arc<std::sync::Mutex<Notifier>>);

impl Default for SharedNotifier {
    fn default() -> Self {
        SharedNotifier(std::sync::Arc::new(std::sync::Mutex::new(
            Notifier::disabled(),
        )))
    }
}

impl SharedNotifier {
    /// Use `notifier` from now on; the previous one's tasks flush what they hold and end.
    pub fn set(&self, notifier: Notifier) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = notifier;
    }

    pub fn notify(&self, notice: Notice) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .notify(notice);
    }
}

/// One webhook's loop: gather notices, post each due message, retry failures after the rate
/// limit. Ends when every `Notifier` clone is dropped, after flushing what is pending.
async fn run(
    sender: Sender,
    mut coalescer: Coalescer,
    mut rx: mpsc::UnboundedReceiver<Notice>,
    metrics: Option<Metrics>,
) {
    let mut open = true;
    loop {
        let due = coalescer.next_due();
        if !open && due.is_none() {
            return;
        }
        tokio::select! {
            n = rx.recv(), if open => match n {
                Some(n) => coalescer.push(n, Instant::now()),
                None => open = false,
            },
            () = sleep_until(due), if due.is_some() => {
                let now = Instant::now();
                if let Some(message) = coalescer.take_due(now) {
                    let result = sender.send(&message).await;
                    let outcome = if result.is_ok() { Outcome::Ok } else { Outcome::Error };
                    if let Some(m) = &metrics {
                        m.record_notification(outcome);
                    }
                    if let Err(e) = result {
                        tracing::warn!(error = %e, notices = message.notices.len(), "notification not delivered; will retry");
                        if !open {
                            return;
                        }
                        coalescer.restore(message, Instant::now());
                    }
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    /// A local webhook receiver: records every JSON body; answers `fail_first` requests 500.
    async fn receiver(fail_first: usize) -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Mutex::new(0usize));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let g = got.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (g, seen) = (g.clone(), seen.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (g, seen) = (g.clone(), seen.clone());
                        async move {
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let n = {
                                let mut s = seen.lock().unwrap();
                                *s += 1;
                                *s
                            };
                            let code = if n <= fail_first {
                                500
                            } else {
                                g.lock()
                                    .unwrap()
                                    .push(serde_json::from_slice(&body).unwrap());
                                200
                            };
                            Ok::<_, Infallible>(
                                http::Response::builder()
                                    .status(code)
                                    .body(Full::new(Bytes::from_static(b"ok")))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        (format!("http://{addr}/services/T000/B000/XXXX"), got)
    }

    fn webhook(url: &str, window_ms: u64, interval_ms: u64) -> Webhook {
        let mut w = Webhook::from_spec(
            &WebhookSpec {
                name: "ops".into(),
                url: Some(url.into()),
                url_env: None,
                url_secret: None,
                url_file: None,
                events: None,
                min_interval: None,
            },
            None,
        )
        .unwrap();
        w.window = Duration::from_millis(window_ms);
        w.min_interval = Duration::from_millis(interval_ms);
        w
    }

    fn notice(pool: usize, kind: NoticeKind) -> Notice {
        Notice {
            cluster: "prod-use1".into(),
            pool: format!("pool-{pool:02}"),
            kind,
        }
    }

    async fn wait_for(got: &Arc<Mutex<Vec<serde_json::Value>>>, n: usize) {
        for _ in 0..500 {
            if got.lock().unwrap().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("only {} messages arrived", got.lock().unwrap().len());
    }

    /// A 30-pool rotation (started, a few failures and pauses, completed) arrives as a handful
    /// of coalesced messages, rate-limited, every pool accounted for.
    #[tokio::test]
    async fn a_large_rotation_sends_a_handful_of_messages() {
        let (url, got) = receiver(0).await;
        let metrics = Metrics::new();
        let n = Notifier::spawn(vec![webhook(&url, 100, 400)], Some(metrics.clone())).unwrap();
        let v = || "2026.11.2".to_string();
        for p in 0..30 {
            n.notify(notice(p, NoticeKind::RolloutStarted { version: v() }));
        }
        for p in 0..3 {
            n.notify(notice(
                p,
                NoticeKind::BatchFailed {
                    batch: 1,
                    reason: "gate error-rate failed".into(),
                },
            ));
            n.notify(notice(
                p,
                NoticeKind::Paused {
                    reason: "rolled back".into(),
                },
            ));
        }
        wait_for(&got, 1).await;
        let sent_first = std::time::Instant::now();
        for p in 3..30 {
            n.notify(notice(p, NoticeKind::Completed { version: v() }));
        }
        wait_for(&got, 2).await;
        assert!(
            sent_first.elapsed() >= Duration::from_millis(300),
            "rate limit held"
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        let got = got.lock().unwrap().clone();
        assert_eq!(got.len(), 2, "{got:#?}");
        let first = got[0]["text"].as_str().unwrap();
        assert!(
            first.starts_with("rota: 3 batch failed, 3 paused, 30 rollout started\n*Batch failed* (3)\n• prod-use1/pool-00 batch 1: gate error-rate failed"),
            "{first}"
        );
        assert!(first.contains("• and 20 more"), "{first}");
        let second = got[1]["text"].as_str().unwrap();
        assert!(
            second.starts_with(
                "rota: 27 completed\n*Completed* (27)\n• prod-use1/pool-03 on 2026.11.2"
            ),
            "{second}"
        );
        assert!(
            metrics
                .render()
                .contains(r#"rota_notifications_total{cluster="",outcome="ok"} 2"#)
        );
    }

    #[tokio::test]
    async fn a_failed_post_is_retried_without_leaking_the_url() {
        let (url, got) = receiver(1).await;
        let logs = crate::telemetry::CapturedLogs::default();
        let sub = crate::telemetry::subscriber(
            crate::telemetry::LogFormat::Json,
            tracing_subscriber::EnvFilter::new("debug"),
            logs.clone(),
        );
        let _guard = tracing::subscriber::set_default(sub);
        let n = Notifier::spawn(vec![webhook(&url, 20, 100)], None).unwrap();
        n.notify(notice(
            1,
            NoticeKind::Paused {
                reason: "drain blocked".into(),
            },
        ));
        wait_for(&got, 1).await;
        assert!(
            got.lock().unwrap()[0]["text"]
                .as_str()
                .unwrap()
                .ends_with("• prod-use1/pool-01: drain blocked")
        );
        let text = logs.contents();
        assert!(text.contains("notification not delivered"), "{text}");
        assert!(!text.contains("XXXX"), "{text}");
    }

    #[test]
    fn urls_come_from_exactly_one_place_and_are_checked() {
        let spec = |url: Option<&str>, env: Option<&str>| WebhookSpec {
            name: "ops".into(),
            url: url.map(Into::into),
            url_env: env.map(Into::into),
            url_secret: None,
            url_file: None,
            events: None,
            min_interval: None,
        };
        let e = Webhook::from_spec(&spec(Some("http://a"), Some("X")), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "notification webhook ops: set exactly one of url, urlEnv, urlSecret"
        );
        let e = Webhook::from_spec(&spec(Some("xoxb-secret-token"), None), None).unwrap_err();
        assert!(!e.to_string().contains("xoxb"));
        let w = Webhook::from_spec(
            &spec(Some("https://hooks.slack.com/services/T/B/secret"), None),
            None,
        )
        .unwrap();
        assert!(!format!("{w:?}").contains("secret"));
        let e =
            Webhook::from_spec(&spec(None, Some("ROTA_TEST_UNSET_WEBHOOK_URL")), None).unwrap_err();
        assert!(e.to_string().contains("ROTA_TEST_UNSET_WEBHOOK_URL"), "{e}");
        // A fleet repo cannot make the agent read its other variables (the repo URL may carry
        // a token; endpoints; anything of the pod's environment).
        for var in [
            "ROTA_REPO",
            "AWS_SECRET_ACCESS_KEY",
            "HOME",
            "rota_ops_webhook_url",
        ] {
            let e = Webhook::from_spec(&spec(None, Some(var)), None).unwrap_err();
            assert!(e.to_string().contains("_WEBHOOK_URL"), "{var}: {e}");
        }
        assert!(webhook_env_name("ROTA_SLACK_WEBHOOK_URL"));
        assert!(!webhook_env_name("_WEBHOOK_URL"));
    }

    /// `urlFile: /dev/zero` made the agent read without end; now a path is never opened and
    /// a secret comes by name from the secrets dir only.
    #[test]
    fn a_path_is_never_opened_and_secrets_come_by_name() {
        let mut s = WebhookSpec {
            name: "ops".into(),
            url: None,
            url_env: None,
            url_secret: None,
            url_file: Some("/dev/zero".into()),
            events: None,
            min_interval: None,
        };
        let e = Webhook::from_spec(&s, None).unwrap_err();
        assert!(
            e.to_string().contains("urlFile is no longer supported"),
            "{e}"
        );
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("ops-slack"), "https://hooks.example/T/B/x\n").unwrap();
        let dir = secrets::SecretsDir::new(d.path());
        s.url_file = None;
        s.url_secret = Some("ops-slack".into());
        let w = Webhook::from_spec(&s, Some(&dir)).unwrap();
        assert_eq!(w.url.expose(), "https://hooks.example/T/B/x");
        let e = Webhook::from_spec(&s, None).unwrap_err();
        assert!(e.to_string().contains("no --secrets-dir"), "{e}");
        s.url_secret = Some("/dev/zero".into());
        let e = Webhook::from_spec(&s, Some(&dir)).unwrap_err();
        assert!(e.to_string().contains("not a secret name"), "{e}");
    }
}
