//! Push webhooks over real HTTP on loopback, driving the poll loop of a real git source:
//! an authentic push fetches at once (long before the poll interval), a forged one is
//! rejected with a 4xx and fetches nothing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rota::source::poll::{SourceState, Trigger, poll_loop};
use rota::source::webhook::{Receiver, WebhookConfig, serve, sign_hex};
use rota::source::{Auth, GitSource, Secret, SourceConfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::support::{commit_file, init_repo, tmp};

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

async fn post(
    client: &HttpClient,
    url: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (u16, String) {
    let mut req = http::Request::post(url);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = client
        .request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = String::from_utf8(
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    (status, text.trim().to_string())
}

/// Waits (real time, bounded) until the published state satisfies `f`.
async fn until(
    rx: &mut watch::Receiver<SourceState>,
    f: impl Fn(&SourceState) -> bool,
) -> SourceState {
    tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|s| f(s)))
        .await
        .expect("state reached")
        .unwrap()
        .clone()
}

#[tokio::test]
async fn signed_push_fetches_at_once_forged_push_is_rejected() {
    let t = tmp();
    let work = t.path().join("work");
    let first = init_repo(&work);
    let source = Arc::new(
        GitSource::open(
            SourceConfig {
                url: work.display().to_string(),
                branch: "main".into(),
                auth: Auth::None,
                depth: Some(1),
            },
            &t.path().join("mirror"),
        )
        .unwrap(),
    );
    let trigger = Trigger::new();
    let (tx, mut rx) = watch::channel(SourceState::default());
    let cancel = CancellationToken::new();
    // An hour between polls: only the webhook can explain a fetch within this test.
    tokio::spawn(poll_loop(
        Arc::clone(&source),
        Duration::from_secs(3600),
        trigger.clone(),
        tx,
        cancel.clone(),
    ));
    let s = until(&mut rx, |s| s.fetches == 1).await;
    assert_eq!(s.commit.unwrap().to_string(), first);

    let secret = Secret::new("hook-secret-42");
    let receiver = Arc::new(Receiver::new(WebhookConfig {
        secret: secret.clone(),
        branch: Some("main".into()),
        senders: &rota::forge::webhook::FORGES,
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/push", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, receiver, trigger.clone(), cancel.clone()));
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();

    let second = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 2\n", "bump");
    let body = br#"{"ref":"refs/heads/main","after":"x"}"#.to_vec();

    // A correctly signed delivery to another path: 404 before the body is read, no fetch.
    let good = format!("sha256={}", sign_hex(&secret, &body));
    let elsewhere = url.replace("/hooks/push", "/admin");
    let (status, text) = post(
        &client,
        &elsewhere,
        &[
            ("x-github-event", "push".into()),
            ("x-github-delivery", "p-1".into()),
            ("x-hub-signature-256", good),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (404, "no such path: push webhooks go to /hooks/push")
    );

    // Forged: signed with another secret. 401, and no fetch follows.
    let forged = format!("sha256={}", sign_hex(&Secret::new("guess"), &body));
    let (status, text) = post(
        &client,
        &url,
        &[
            ("x-github-event", "push".into()),
            ("x-github-delivery", "f-1".into()),
            ("x-hub-signature-256", forged),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (
            401,
            "X-Hub-Signature-256 does not match the body signed with the configured secret"
        )
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rx.borrow().fetches,
        1,
        "a rejected delivery fetches nothing"
    );

    // Authentic: 202 and the new commit is fetched right away.
    let sig = format!("sha256={}", sign_hex(&secret, &body));
    let headers = [
        ("x-github-event", "push".to_string()),
        ("x-github-delivery", "d-1".to_string()),
        ("x-hub-signature-256", sig),
    ];
    let (status, text) = post(&client, &url, &headers, body.clone()).await;
    assert_eq!((status, text.as_str()), (202, "fetch triggered"));
    let s = until(&mut rx, |s| s.fetches >= 2).await;
    assert_eq!(s.commit.unwrap().to_string(), second);

    // The same delivery again: acknowledged, ignored, no fetch.
    let (status, text) = post(&client, &url, &headers, body.clone()).await;
    assert_eq!(
        (status, text.as_str()),
        (200, "ignored: delivery d-1 already received")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.borrow().fetches, 2);

    // Gitea and GitLab deliveries reach the same trigger.
    let third = commit_file(&work, "fleet.yaml", "kind: Fleet\n# 3\n", "bump again");
    let (status, _) = post(
        &client,
        &url,
        &[
            ("x-gitea-event", "push".into()),
            ("x-gitea-delivery", "g-1".into()),
            ("x-gitea-signature", sign_hex(&secret, &body)),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(status, 202);
    let s = until(&mut rx, |s| s.fetches >= 3).await;
    assert_eq!(s.commit.unwrap().to_string(), third);
    let (status, _) = post(
        &client,
        &url,
        &[
            ("x-gitlab-event", "Push Hook".into()),
            ("x-gitlab-token", "hook-secret-42".into()),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(status, 202);
    until(&mut rx, |s| s.fetches >= 4).await;

    // Malformed and oversized requests: clear 4xx.
    let (status, text) = post(
        &client,
        &url,
        &[("content-type", "application/json".into())],
        body.clone(),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let (status, _) = post(
        &client,
        &url,
        &[
            ("x-github-event", "push".into()),
            ("x-hub-signature-256", "sha256=00".into()),
        ],
        vec![b'x'; rota::source::webhook::MAX_BODY_BYTES + 1],
    )
    .await;
    assert_eq!(status, 413);
    let resp = client
        .request(
            http::Request::get(&url)
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    cancel.cancel();
}

/// The follower wires the pieces: a commit in a watched working copy is fetched without any
/// webhook or poll; the webhook listens on the resolved port.
#[tokio::test]
async fn follower_fetches_on_working_copy_changes() {
    use rota::source::follow::{FollowConfig, follow};
    let t = tmp();
    let work = t.path().join("work");
    init_repo(&work);
    let source = Arc::new(
        GitSource::open(
            SourceConfig {
                url: work.display().to_string(),
                branch: "main".into(),
                auth: Auth::None,
                depth: None,
            },
            &t.path().join("mirror"),
        )
        .unwrap(),
    );
    let cancel = CancellationToken::new();
    let mut f = follow(
        source,
        FollowConfig {
            interval: Duration::from_secs(3600),
            webhook: Some((
                "127.0.0.1:0".parse().unwrap(),
                WebhookConfig {
                    secret: Secret::new("s"),
                    branch: None,
                    senders: &rota::forge::webhook::FORGES,
                },
            )),
            watch_dir: Some(work.clone()),
        },
        cancel.clone(),
    )
    .await
    .unwrap();
    assert_ne!(f.webhook_addr.unwrap().port(), 0);
    until(&mut f.state, |s| s.fetches >= 1).await;
    let next = commit_file(&work, "fleet.yaml", "kind: Fleet\n# edited\n", "edit");
    let s = until(&mut f.state, |s| {
        s.commit.map(|c| c.to_string()) == Some(next.clone())
    })
    .await;
    assert!(s.last_error.is_none());
    cancel.cancel();
}
