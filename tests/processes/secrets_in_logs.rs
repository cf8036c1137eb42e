//! Secrets never reach the logs: a run of every part of rota that holds a credential (git
//! fetch with an HTTPS token, a forge status store, a webhook receiver's secret, a
//! notification webhook URL) against a hostile local server that echoes every request it
//! gets (headers, path and body) in its error answers. All logs at `trace`, captured in JSON,
//! and every error rota returns, must be free of the secrets.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rota::forge::github::{GitHubConfig, GitHubStore};
use rota::notify::{Notice, NoticeKind, Notifier, Webhook};
use rota::report::{CommitStatus, State, StatusStore};
use rota::source::webhook::WebhookConfig;
use rota::source::{Auth, GitSource, Secret, SourceConfig};
use rota::telemetry::{CapturedLogs, LogFormat, pool_span, subscriber};
use tracing_subscriber::EnvFilter;

const GIT_TOKEN: &str = "ghp_gitTOKEN9f8e7d6c5b";
const FORGE_TOKEN: &str = "ghp_forgeTOKEN1a2b3c4d";
const HOOK_SECRET: &str = "whsec_HOOKsecret4d5e6f";
const SLACK_PATH: &str = "/services/T01ABC/B02DEF/slackSECRET7g8h9i";

/// Answers 401 to everything, echoing the request line, every header and the body.
async fn hostile_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                    let mut echo = format!("{} {}\n", req.method(), req.uri());
                    for (k, v) in req.headers() {
                        echo.push_str(&format!("{k}: {}\n", String::from_utf8_lossy(v.as_bytes())));
                    }
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    echo.push_str(&String::from_utf8_lossy(&body));
                    let json = serde_json::json!({ "message": echo }).to_string();
                    Ok::<_, Infallible>(
                        http::Response::builder()
                            .status(401)
                            .header("www-authenticate", "Basic realm=\"fleet\"")
                            .body(Full::new(Bytes::from(json)))
                            .unwrap(),
                    )
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_full_run_logs_none_of_its_secrets() {
    let base = hostile_server().await;
    let logs = CapturedLogs::default();
    let dispatch = tracing::Dispatch::new(subscriber(
        LogFormat::Json,
        EnvFilter::new("trace"),
        logs.clone(),
    ));
    let _guard = tracing::dispatcher::set_default(&dispatch);
    let mut errors = Vec::new();
    let _pool = pool_span("prod-use1", "general").entered();

    // 1. Git fetch over HTTPS-style auth with a token.
    let mirror = tempfile::tempdir().unwrap();
    let config = SourceConfig {
        url: format!("{base}/acme/fleet.git"),
        branch: "main".into(),
        auth: Auth::HttpsToken {
            username: "x-access-token".into(),
            token: Secret::new(GIT_TOKEN),
        },
        depth: Some(1),
    };
    tracing::info!(?config, "source configured");
    let source = GitSource::open(config, mirror.path()).unwrap();
    let d = dispatch.clone();
    let fetched = tokio::task::spawn_blocking(move || {
        tracing::dispatcher::with_default(&d, || source.fetch())
    })
    .await
    .unwrap();
    let e = fetched.expect_err("the server refuses");
    tracing::warn!(error = %e, debug = ?e, "fetch failed");
    errors.push(format!("{e} {e:?}"));

    // 2. A commit status to a forge.
    let mut gh = GitHubConfig::new("acme", "fleet", Secret::new(FORGE_TOKEN));
    gh.api_url = base.clone();
    tracing::info!(config = ?gh.token, "status store configured");
    let store = GitHubStore::new(gh).unwrap();
    let status = CommitStatus::new("rota/prod-use1", State::Pending, "rotating");
    let e = store
        .set(&"a".repeat(40), &status)
        .await
        .expect_err("the server refuses");
    tracing::warn!(error = %e, debug = ?e, "posting a status failed");
    errors.push(format!("{e} {e:?}"));

    // 3. A webhook receiver's shared secret.
    let hook = WebhookConfig {
        secret: Secret::new(HOOK_SECRET),
        branch: Some("main".into()),
        senders: &rota::forge::webhook::FORGES,
    };
    tracing::info!(?hook, "webhook receiver configured");
    let sig = rota::source::webhook::sign_hex(&hook.secret, b"{}");
    assert!(!sig.contains(HOOK_SECRET));

    // 4. A notification webhook whose URL is the credential.
    let mut w = Webhook::from_spec(
        &rota::fleet::model::WebhookSpec {
            name: "ops".into(),
            url: Some(format!("{base}{SLACK_PATH}")),
            url_env: None,
            url_secret: None,
            url_file: None,
            events: None,
            min_interval: None,
        },
        None,
    )
    .unwrap();
    w.window = Duration::from_millis(10);
    w.min_interval = Duration::from_millis(10);
    tracing::info!(webhook = ?w, "notifier configured");
    let n = Notifier::spawn(vec![w], None).unwrap();
    n.notify(Notice {
        cluster: "prod-use1".into(),
        pool: "general".into(),
        kind: NoticeKind::Paused {
            reason: "drain blocked".into(),
        },
    });
    for _ in 0..300 {
        if logs.contents().contains("notification not delivered") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(n);

    let text = logs.contents();
    // The run did reach the server and log its refusals (the test can fail).
    assert!(text.contains("fetch failed"), "{text}");
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(text.contains("notification not delivered"), "{text}");
    assert!(
        text.contains("Authorization") || text.contains("authorization"),
        "the server echoed headers: {text}"
    );
    for secret in [
        GIT_TOKEN,
        FORGE_TOKEN,
        HOOK_SECRET,
        SLACK_PATH,
        "slackSECRET",
    ] {
        assert!(!text.contains(secret), "{secret} in the logs:\n{text}");
        for e in &errors {
            assert!(!e.contains(secret), "{secret} in an error: {e}");
        }
    }
}

/// The same secrets given to a real `rota agent` process (JSON logs, every rota event at
/// trace): its fleet repo and forge are the hostile server, so every fetch is refused with
/// the request echoed back. The agent keeps running and logging; none of it shows a secret.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_agent_run_logs_none_of_its_secrets() {
    let base = hostile_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let token = file("git-token", GIT_TOKEN);
    let forge = file("forge-token", FORGE_TOKEN);
    let hook = file("hook-secret", HOOK_SECRET);
    // No cluster to reach: the agent still starts, fetches and logs (the controller's
    // failures to reach the API server are logged too).
    let kubeconfig = file(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n\
         contexts: [{name: c, context: {cluster: c, user: u}}]\n\
         users: [{name: u, user: {token: not-a-secret-of-the-test}}]\n",
    );
    let log = tmp.path().join("agent.log");
    let bin = std::env::var_os("ROTA_TEST_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_rota").into());
    let mut child = std::process::Command::new(bin)
        .arg("agent")
        .args([
            "--repo",
            &format!("{base}/acme/fleet.git"),
            "--cluster",
            "prod-use1",
        ])
        .arg("--token-file")
        .arg(&token)
        .args(["--github-repo", "acme/fleet", "--github-api-url", &base])
        .arg("--github-token-file")
        .arg(&forge)
        .args(["--webhook-listen", "127.0.0.1:0"])
        .arg("--webhook-secret-file")
        .arg(&hook)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--cloud-endpoint", "http://127.0.0.1:9"])
        .arg("--state-dir")
        .arg(tmp.path().join("state"))
        .args(["--poll", "200ms", "--metrics-addr", "127.0.0.1:0"])
        .args(["--log-format", "json", "--log-filter", "info,rota=trace"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut text = String::new();
    for _ in 0..600 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.matches("fetching the fleet repo failed").count() >= 3 {
            break;
        }
        if let Ok(Some(code)) = child.try_wait() {
            panic!("rota agent exited ({code}):\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        text.matches("fetching the fleet repo failed").count() >= 3,
        "{text}"
    );
    // The refusal reached the log line (as rota words a 401 from a git server), redacted.
    assert!(text.contains("rejected the token"), "{text}");
    let json_lines = text.lines().filter(|l| l.starts_with('{')).count();
    assert!(json_lines >= 3, "{text}");
    for secret in [GIT_TOKEN, FORGE_TOKEN, HOOK_SECRET, "slackSECRET"] {
        assert!(
            !text.contains(secret),
            "{secret} in the agent's log:\n{text}"
        );
    }
}
