//! GitOps latencies with real git: how long from `git commit` on the remote to the agent's
//! source holding the new commit, via a signed push webhook and via polling; what a fetch and
//! a git-notes status write (with push) cost; and the promotion guard over a large fleet.
//! Prints figures; asserts nothing about time. Run: `cargo bench --bench figures -- gitops`.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rota::report::notes::PushTarget;
use rota::report::{CommitStatus, GitNotesStore, State, StatusStore};
use rota::source::poll::{SourceState, Trigger, poll_loop};
use rota::source::webhook::{Receiver, WebhookConfig, serve, sign_hex};
use rota::source::{Auth, GitSource, Secret, SourceConfig};
use rota::waves::{PoolRecord, PoolRef, Promotion, WaveView, promotion_guard};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@rota.dev",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn commit(dir: &Path, n: usize) -> String {
    std::fs::write(dir.join("fleet.yaml"), format!("kind: Fleet\n# {n}\n")).unwrap();
    git(dir, &["commit", "-q", "-am", &format!("change {n}")]);
    git(dir, &["rev-parse", "HEAD"])
}

fn summary(name: &str, mut xs: Vec<Duration>) {
    xs.sort();
    let pct = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name:<44} n={:<3} min {:>8.2?}  median {:>8.2?}  p90 {:>8.2?}  max {:>8.2?}",
        xs.len(),
        xs[0],
        pct(0.5),
        pct(0.9),
        xs[xs.len() - 1]
    );
}

async fn wait_for(rx: &mut watch::Receiver<SourceState>, commit: &str) {
    rx.wait_for(|s| s.commit.map(|c| c.to_string()).as_deref() == Some(commit))
        .await
        .unwrap();
}

async fn push_to_fetch(webhook: bool, interval: Duration, rounds: usize) -> Vec<Duration> {
    let t = tempfile::tempdir().unwrap();
    let work = t.path().join("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "start"]);
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
    let trigger = Trigger::new();
    let (tx, mut rx) = watch::channel(SourceState::default());
    let cancel = CancellationToken::new();
    tokio::spawn(poll_loop(
        Arc::clone(&source),
        interval,
        trigger.clone(),
        tx,
        cancel.clone(),
    ));
    let secret = Secret::new("bench");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/push", listener.local_addr().unwrap());
    let receiver = Arc::new(Receiver::new(WebhookConfig {
        secret: secret.clone(),
        branch: Some("main".into()),
        senders: &rota::forge::webhook::FORGES,
    }));
    tokio::spawn(serve(listener, receiver, trigger.clone(), cancel.clone()));
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    rx.wait_for(|s| s.commit.is_some()).await.unwrap();

    let mut out = Vec::new();
    for n in 0..rounds {
        let start = Instant::now();
        let head = commit(&work, n);
        if webhook {
            // A different body per push, as GitHub's `after` makes it (a replay is ignored).
            let body = format!(r#"{{"ref":"refs/heads/main","after":"{head}"}}"#).into_bytes();
            let req = http::Request::post(&url)
                .header("x-github-event", "push")
                .header("x-github-delivery", format!("bench-{n}"))
                .header(
                    "x-hub-signature-256",
                    format!("sha256={}", sign_hex(&secret, &body)),
                )
                .body(Full::new(Bytes::from(body)))
                .unwrap();
            assert_eq!(client.request(req).await.unwrap().status(), 202);
        }
        wait_for(&mut rx, &head).await;
        out.push(start.elapsed());
    }
    cancel.cancel();
    out
}

#[tokio::main]
pub async fn main() {
    println!("rota gitops bench (wall time, this machine; commit = `git commit` of one file)");
    summary(
        "push -> fetched, webhook (poll 1h)",
        push_to_fetch(true, Duration::from_secs(3600), 30).await,
    );
    summary(
        "push -> fetched, polling every 500ms",
        push_to_fetch(false, Duration::from_millis(500), 10).await,
    );

    // Fetch costs on a file:// remote: nothing new, and one new commit.
    let t = tempfile::tempdir().unwrap();
    let work = t.path().join("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("fleet.yaml"), "kind: Fleet\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "start"]);
    let origin = t.path().join("origin.git");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            origin.to_str().unwrap(),
        ],
    );
    let url = format!("file://{}", origin.display());
    let src = GitSource::open(
        SourceConfig {
            url: url.clone(),
            branch: "main".into(),
            auth: Auth::None,
            depth: None,
        },
        &t.path().join("mirror"),
    )
    .unwrap();
    src.fetch().unwrap();
    let idle: Vec<Duration> = (0..30)
        .map(|_| {
            let s = Instant::now();
            src.fetch().unwrap();
            s.elapsed()
        })
        .collect();
    summary("fetch, nothing new (file://)", idle);

    // git-notes status writes, each pushed to the remote.
    let store = GitNotesStore::new(
        &t.path().join("mirror"),
        Some("canary-use1"),
        Some(PushTarget {
            url,
            auth: Auth::None,
            known_hosts: None,
        }),
    );
    let head = src.current().unwrap().unwrap().to_string();
    let mut writes = Vec::new();
    for n in 0..30 {
        let s = Instant::now();
        store
            .set(
                &head,
                &CommitStatus::new(
                    "rota/canary-use1/general",
                    State::Pending,
                    &format!("batch {n}/30"),
                ),
            )
            .await
            .unwrap();
        writes.push(s.elapsed());
    }
    summary("git-notes status write + push (file://)", writes);
    let mut unchanged = Vec::new();
    for _ in 0..30 {
        let s = Instant::now();
        store
            .set(
                &head,
                &CommitStatus::new("rota/canary-use1/general", State::Pending, "batch 29/30"),
            )
            .await
            .unwrap();
        unchanged.push(s.elapsed());
    }
    summary("git-notes status unchanged (read only)", unchanged);

    // The guard over 100 clusters x 5 pools per earlier wave.
    let pools: Vec<PoolRef> = (0..100)
        .flat_map(|c| {
            (0..5).map(move |p| PoolRef::new(&format!("c{c}"), &format!("p{p}"), "general"))
        })
        .collect();
    let waves = vec![
        WaveView {
            name: "canary".into(),
            soak: Duration::from_secs(3600),
            pools: pools.clone(),
        },
        WaveView {
            name: "main".into(),
            soak: Duration::ZERO,
            pools: vec![],
        },
    ];
    let at = chrono::Utc::now() - chrono::Duration::hours(2);
    let records: Vec<PoolRecord> = pools
        .iter()
        .map(|p| PoolRecord::new(&p.cluster, &p.pool).completed("general", "2026.11.2", at))
        .collect();
    let promotion = Promotion {
        wave: "main",
        channel: "general",
        version: "2026.11.2",
    };
    let now = chrono::Utc::now();
    let s = Instant::now();
    let n = 200;
    for _ in 0..n {
        assert!(promotion_guard(true, &waves, promotion, &records, now).is_allowed());
    }
    println!(
        "{:<44} {:>8.2?} per decision (500 earlier pools)",
        "promotion guard",
        s.elapsed() / n
    );
}
