//! The whole agent (`LocalFleet`: simulated cluster, rotation controller, agent loop, real git
//! repo) with its edges on real loopback HTTP: push webhooks into the agent's follower, and
//! statuses out to the GitHub-compatible status API double. Real time at speed 60 (not paused:
//! real sockets are involved).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kube::api::Api;
use rota::agent::local::{LocalConfig, LocalFleet};
use rota::forge::StoreConfig;
use rota::forge::github::GitHubConfig;
use rota::kube::crd::NodePoolRotation;
use rota::sim::scenario::WorkloadProfile;
use rota::source::Secret;
use rota::source::webhook::WebhookConfig;
use serde_json::Value;
use sha2::Sha256;

use super::forge_double::ForgeDouble;
use super::support::git;
use crate::support::git::{commit_and_push, origin_and_clone};

const SECRET: &str = "hook-secret-4d1f9a";

fn fleet_yaml(version: &str) -> String {
    crate::support::canary_fleet::canary_fleet_yaml(version, "{batch: 2}", "")
}

const WORKLOADS: &str = "nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}\n\
deployments:\n- {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}}\n";

/// A bare origin and a work clone on 2026.11.1; returns (tmp, origin, work, first commit).
fn repo() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    String,
) {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    let first = bump(&work, "2026.11.1");
    (tmp, origin, work, first)
}

fn bump(work: &Path, version: &str) -> String {
    std::fs::write(work.join("fleet.yaml"), fleet_yaml(version)).unwrap();
    commit_and_push(work, &format!("canary: general {version}"));
    git(work, &["rev-parse", "HEAD"])
}

fn config(origin: &Path, state: &Path) -> LocalConfig {
    let mut c = LocalConfig::new(
        origin.to_path_buf(),
        state.to_path_buf(),
        WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap(),
    );
    c.speed = 60.0;
    c.poll = Duration::from_secs(3600);
    c.resync = Duration::from_millis(200);
    c
}

/// Waits (real time, at most 60 s) until `f` holds for canary-1's agent.
async fn until(fleet: &LocalFleet, what: &str, f: impl Fn(&rota::agent::Snapshot) -> bool) {
    let mut rx = fleet.agents["canary-1"].clone();
    let reached = tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|s| f(s)))
        .await
        .is_ok();
    assert!(
        reached,
        "{what}: not reached; agent: {:?}",
        fleet.agents["canary-1"].borrow()
    );
}

/// A log sink for this test's thread (current-thread runtime: every task logs here).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn post(url: &str, signature: &str, delivery: &str, body: &str) -> u16 {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = http::Request::post(url)
        .header("X-GitHub-Event", "push")
        .header("X-GitHub-Delivery", delivery)
        .header("X-Hub-Signature-256", signature)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    client.request(req).await.unwrap().status().as_u16()
}

fn sign(secret: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn a_forged_push_webhook_is_rejected_and_a_signed_one_makes_the_agent_act_at_once() {
    let logs = Logs::default();
    let sink = logs.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter("rota=debug")
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish(),
    );
    let (tmp, origin, work, first) = repo();
    let mut c = config(&origin, &tmp.path().join("state"));
    c.webhook = Some(WebhookConfig {
        secret: Secret::new(SECRET),
        branch: Some("main".into()),
        senders: &rota::forge::webhook::FORGES,
    });
    let fleet = LocalFleet::start(c).await.unwrap();
    let url = format!("http://{}/hooks/push", fleet.webhooks["canary-1"]);
    until(&fleet, "the first commit in force", |s| {
        s.in_force.as_deref() == Some(first.as_str())
    })
    .await;

    let next = bump(&work, "2026.11.2");
    let body = r#"{"ref":"refs/heads/main"}"#;
    // Signed with another secret: 401, and nothing is fetched (the poll is an hour away).
    let code = post(&url, &sign("not-the-secret", body), "d-1", body).await;
    assert_eq!(code, 401);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let snap = fleet.agents["canary-1"].borrow().clone();
    assert_eq!(snap.head.as_deref(), Some(first.as_str()), "{snap:?}");
    let npr = Api::<NodePoolRotation>::all(fleet.clients["canary-1"].clone());
    assert_eq!(npr.get("general").await.unwrap().spec.version, "2026.11.1");

    // Signed right: fetched at once, and the agent acts on it.
    let code = post(&url, &sign(SECRET, body), "d-2", body).await;
    assert_eq!(code, 202);
    until(&fleet, "the pushed commit applied and reported", |s| {
        s.reported.as_deref() == Some(next.as_str())
    })
    .await;
    let n = npr.get("general").await.unwrap();
    assert_eq!(n.spec.version, "2026.11.2");
    assert_eq!(n.spec.source_commit, next);

    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("webhook rejected"), "{text}");
    assert!(text.contains("push webhook: fetching"), "{text}");
    assert!(!text.contains(SECRET), "the secret must never be logged");
    assert!(!text.contains(&sign(SECRET, body)[7..]), "nor a signature");
}

/// `(context, state, description)` of the POSTs for `sha`, in order.
fn posts_for(double: &ForgeDouble, sha: &str) -> Vec<(String, String, String)> {
    double
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with(sha))
        .map(|r| {
            let b: Value = r.body.unwrap();
            (
                b["context"].as_str().unwrap().to_string(),
                b["state"].as_str().unwrap().to_string(),
                b["description"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_rotation_posts_exactly_its_statuses_to_a_github_compatible_api() {
    let double = ForgeDouble::start(("authorization", "Bearer ghs_tok".into())).await;
    let (tmp, origin, work, first) = repo();
    let mut c = config(&origin, &tmp.path().join("state"));
    c.poll = Duration::from_millis(300);
    let mut gh = GitHubConfig::new("acme", "fleet", Secret::new("ghs_tok"));
    gh.api_url = double.base.clone();
    gh.requests_per_second = 1000.0;
    c.statuses = Some(StoreConfig::GitHub(gh));
    let fleet = LocalFleet::start(c).await.unwrap();
    until(&fleet, "the first commit reported", |s| {
        s.reported.as_deref() == Some(first.as_str())
            && s.statuses
                .first()
                .is_some_and(|st| st.state == rota::report::State::Success)
    })
    .await;
    let next = bump(&work, "2026.11.2");
    fleet.poke();
    until(&fleet, "the rotation reported done", |s| {
        s.reported.as_deref() == Some(next.as_str())
            && s.statuses
                .first()
                .is_some_and(|st| st.state == rota::report::State::Success)
    })
    .await;
    // The statuses of the rotated commit, as GitHub received them.
    let posts = posts_for(&double, &next);
    let pool: Vec<_> = posts
        .iter()
        .filter(|p| p.0 == "rota/canary-1/general")
        .collect();
    let cluster: Vec<_> = posts.iter().filter(|p| p.0 == "rota/canary-1").collect();
    assert_eq!(
        pool.len() + cluster.len(),
        posts.len(),
        "only rota's contexts: {posts:?}"
    );
    // Posted only on change: never the same status twice in a row for a context.
    for seq in [&pool, &cluster] {
        for w in seq.windows(2) {
            assert_ne!(w[0], w[1], "reposted unchanged: {posts:?}");
        }
    }
    // The pool: pending progress through both batches, then success, in that order.
    assert!(pool.len() >= 3, "{pool:?}");
    assert!(
        pool[..pool.len() - 1].iter().all(|p| p.1 == "pending"),
        "{pool:?}"
    );
    assert_eq!(
        pool.last().map(|p| (p.1.as_str(), p.2.as_str())),
        Some(("success", "4/4 nodes on general@2026.11.2"))
    );
    let batches: Vec<&str> = pool
        .iter()
        .filter_map(|p| p.2.split(" · ").next().filter(|b| b.starts_with("batch ")))
        .collect();
    assert!(
        batches.contains(&"batch 1/2") && batches.contains(&"batch 2/2"),
        "{pool:?}"
    );
    let mut sorted = batches.clone();
    sorted.sort();
    assert_eq!(batches, sorted, "batches go forward: {pool:?}");
    // The cluster: pending, then success last.
    assert_eq!(
        cluster.first().map(|p| p.1.as_str()),
        Some("pending"),
        "{cluster:?}"
    );
    assert_eq!(
        cluster.last().map(|p| (p.1.as_str(), p.2.as_str())),
        Some(("success", "all pools on the desired image"))
    );
    // Listed once before the first post on the commit (a restarted agent does not repost).
    let reqs = double.requests();
    let first_get = reqs
        .iter()
        .position(|r| r.method == "GET" && r.path.contains(&next))
        .expect("listed");
    let first_post = reqs
        .iter()
        .position(|r| r.method == "POST" && r.path.ends_with(&next))
        .unwrap();
    assert!(first_get < first_post);
    // The first commit was superseded after it finished: its statuses stayed success.
    let old = posts_for(&double, &first);
    assert!(old.iter().all(|p| p.1 != "error"), "{old:?}");
    // A commit that changes nothing for the pool (a file the fleet does not read) costs it
    // nothing: no `waiting for the controller`, no second `success`, nor for its cluster.
    std::fs::write(work.join("NOTES.txt"), "who to call\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "notes for the on-call"]);
    git(&work, &["push", "-q", "origin", "main"]);
    let quiet = git(&work, &["rev-parse", "HEAD"]);
    fleet.poke();
    until(&fleet, "the quiet commit reported", |s| {
        s.reported.as_deref() == Some(quiet.as_str())
            && s.statuses
                .first()
                .is_some_and(|st| st.state == rota::report::State::Success)
    })
    .await;
    let posts = posts_for(&double, &quiet);
    assert!(posts.is_empty(), "{posts:?}");
}

/// A wave of two clusters, `canary-a` and `canary-b`, on `version`.
fn two_cluster_wave(version: &str) -> String {
    let cluster = |name: &str| {
        format!(
            "---\napiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n\
             spec:\n  cloud: {{aws: {{region: us-east-1}}}}\n  pools:\n    - name: general\n      \
             channel: general\n      nodeSelector: {{rota.dev/pool: general}}\n      \
             group: {{autoScalingGroup: {name}-general}}\n"
        )
    };
    format!(
        "apiVersion: rota.dev/v1alpha1\nkind: Fleet\nmetadata: {{name: acme}}\nspec:\n  images:\n    \
         general:\n      versions:\n        \"2026.11.1\": {{aws: ami-0a1b2c3d4e5f60718}}\n        \
         \"2026.11.2\": {{aws: ami-0f9e8d7c6b5a40312}}\n  waves:\n    - name: canary\n      \
         clusters: [canary-a, canary-b]\n      images: {{general: \"{version}\"}}\n  \
         rollout: {{batch: 2}}\n{}{}",
        cluster("canary-a"),
        cluster("canary-b")
    )
}

/// With `--status-contexts waves`, the wave's rollup is the first cluster's agent's to write
/// (`canary-a`). When that agent is down, the next candidate (`canary-b`) writes it once it has
/// seen no note from `canary-a` on the commit for ten minutes of fleet time (ten seconds at
/// speed 60), so the wave's status does not stall with one agent.
#[tokio::test]
async fn a_waves_rollup_is_written_by_the_next_cluster_when_the_first_ones_agent_is_down() {
    let double = ForgeDouble::start(("authorization", "Bearer ghs_tok".into())).await;
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    let commit = |version: &str| {
        std::fs::write(work.join("fleet.yaml"), two_cluster_wave(version)).unwrap();
        commit_and_push(&work, &format!("canary: general {version}"));
        git(&work, &["rev-parse", "HEAD"])
    };
    commit("2026.11.1");
    let mut c = config(&origin, &tmp.path().join("state"));
    c.poll = Duration::from_millis(300);
    let mut gh = GitHubConfig::new("acme", "fleet", Secret::new("ghs_tok"));
    gh.api_url = double.base.clone();
    gh.requests_per_second = 1000.0;
    c.statuses = Some(StoreConfig::GitHub(gh));
    c.report.contexts = rota::report::economy::Contexts::Waves;
    let mut fleet = LocalFleet::start(c).await.unwrap();
    fleet.kill_agent("canary-a");
    let next = commit("2026.11.2");
    fleet.poke();
    let rollup = |double: &ForgeDouble| {
        posts_for(double, &next)
            .into_iter()
            .filter(|p| p.0 == "rota/wave/canary")
            .collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while rollup(&double).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let posts = posts_for(&double, &next);
    assert!(
        !rollup(&double).is_empty(),
        "no rollup on {next} from canary-b; posts: {posts:?}; canary-b: {:?}",
        fleet.agents["canary-b"].borrow()
    );
    // Only the rollup goes to the forge with wave contexts.
    assert!(posts.iter().all(|p| p.0 == "rota/wave/canary"), "{posts:?}");
}
