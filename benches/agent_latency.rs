//! The whole agent's latencies, wall time, with real git and the real loops (`LocalFleet`: a
//! simulated cluster, its rotation controller and agent, at real time):
//!
//! - push → first action: from `git push` of a bump to the agent having applied the new
//!   NodePoolRotation spec (what the controller acts on), via a signed push webhook (poll 1h)
//!   and via polling (every 500 ms, no webhook);
//! - revert → first rollback action: from `git push` of a `git revert` while a batch is under
//!   way to the controller's first rollback step (the NodePoolRotation's checkpoint turns
//!   `rollingBack`), with the webhook.
//!
//! Prints figures; asserts nothing about time. Run: `cargo bench --bench figures -- agent_latency`.
//! Without `--bench` (as `cargo test --all-targets` runs it) one sample of each, as a smoke run.

use crate::support::canary_fleet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use kube::api::Api;
use rota::agent::local::{LocalConfig, LocalFleet};
use rota::kube::crd::NodePoolRotation;
use rota::sim::scenario::WorkloadProfile;
use rota::source::Secret;
use rota::source::webhook::{WebhookConfig, sign_hex};

const SECRET: &str = "bench-secret";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@rota.dev"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn fleet_yaml(version: &str) -> String {
    canary_fleet::canary_fleet_yaml(version, "{batch: 1, batchSoak: 10m}", "")
}

struct Rig {
    _tmp: tempfile::TempDir,
    work: std::path::PathBuf,
    fleet: LocalFleet,
    hook: Option<String>,
}

impl Rig {
    async fn start(webhook: bool, poll: Duration) -> Rig {
        let tmp = tempfile::tempdir().unwrap();
        let origin = tmp.path().join("fleet.git");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        git(tmp.path(), &["clone", "-q", "fleet.git", "work"]);
        let work = tmp.path().join("work");
        git(&work, &["checkout", "-q", "-b", "main"]);
        std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "start"]);
        git(&work, &["push", "-q", "origin", "main"]);
        let fleet = LocalFleet::start(LocalConfig {
            repo: origin,
            branch: "main".into(),
            state_dir: tmp.path().join("state"),
            workloads: WorkloadProfile::from_yaml(
                "nodes: {perPool: 3, registerAfter: 15s, readyAfter: 20s}\n",
                "bench",
            )
            .unwrap(),
            // Boots take a second or so of wall time; soaks 10 s.
            speed: 60.0,
            poll,
            resync: Duration::from_millis(500),
            trust: None,
            webhook: webhook.then(|| WebhookConfig {
                secret: Secret::new(SECRET),
                branch: Some("main".into()),
                senders: &rota::forge::webhook::FORGES,
            }),
            statuses: None,
            report: Default::default(),
            start: None,
        })
        .await
        .unwrap();
        let hook = fleet
            .webhooks
            .get("canary-1")
            .map(|a| format!("http://{a}/hooks/push"));
        let rig = Rig {
            _tmp: tmp,
            work,
            fleet,
            hook,
        };
        rig.until(|n| {
            n.status
                .as_ref()
                .is_some_and(|s| s.total > 0 && s.on_target == s.total)
        })
        .await;
        rig
    }

    fn npr(&self) -> Api<NodePoolRotation> {
        Api::all(self.fleet.clients["canary-1"].clone())
    }

    /// Polls the NodePoolRotation every 2 ms until `f` (at most 60 s).
    async fn until(&self, f: impl Fn(&NodePoolRotation) -> bool) -> Instant {
        let start = Instant::now();
        loop {
            if let Ok(n) = self.npr().get("general").await
                && f(&n)
            {
                return Instant::now();
            }
            assert!(start.elapsed() < Duration::from_secs(60), "never reached");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Pushes what is committed in the work clone and, with a webhook, delivers it.
    async fn push(&self, n: usize) -> Instant {
        git(&self.work, &["push", "-q", "origin", "main"]);
        let t = Instant::now();
        if let Some(url) = &self.hook {
            // Each push is a different delivery body (as GitHub's `after` makes it): the
            // receiver ignores a replayed body.
            let body = format!(r#"{{"ref":"refs/heads/main","after":"{n:040x}"}}"#);
            let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
            let req = http::Request::post(url)
                .header("X-GitHub-Event", "push")
                .header("X-GitHub-Delivery", format!("bench-{n}"))
                .header(
                    "X-Hub-Signature-256",
                    format!("sha256={}", sign_hex(&Secret::new(SECRET), body.as_bytes())),
                )
                .body(Full::new(Bytes::from(body)))
                .unwrap();
            let status = client.request(req).await.unwrap().status();
            assert_eq!(status.as_u16(), 202);
        }
        t
    }

    fn commit(&self, version: &str) {
        std::fs::write(self.work.join("fleet.yaml"), fleet_yaml(version)).unwrap();
        git(
            &self.work,
            &["commit", "-q", "-am", &format!("general {version}")],
        );
    }
}

/// Push of a bump → the agent applied it; then a revert midway → the first rollback step.
async fn sample(rig: &Rig, n: usize) -> (Duration, Duration) {
    rig.commit("2026.11.2");
    let pushed = rig.push(2 * n).await;
    let acted = rig.until(|x| x.spec.version == "2026.11.2").await;
    // Midway: the first new node is up and the batch soaks.
    rig.until(|x| {
        x.status
            .as_ref()
            .is_some_and(|s| s.on_target >= 1 && s.on_target < s.total)
    })
    .await;
    git(&rig.work, &["revert", "--no-edit", "HEAD"]);
    let reverted = rig.push(2 * n + 1).await;
    let rolled = rig
        .until(|x| {
            x.status
                .as_ref()
                .and_then(|s| s.checkpoint.as_ref())
                .is_some_and(|c| c.rolling_back)
        })
        .await;
    // Back on 2026.11.1 everywhere before the next sample.
    rig.until(|x| {
        x.spec.version == "2026.11.1"
            && x.status.as_ref().is_some_and(|s| {
                s.observed_generation == x.metadata.generation
                    && s.total > 0
                    && s.on_target == s.total
            })
    })
    .await;
    (acted - pushed, rolled - reverted)
}

fn summary(name: &str, mut xs: Vec<Duration>) {
    xs.sort();
    let pct = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name:<52} n={:<3} min {:>8.2?}  median {:>8.2?}  max {:>8.2?}",
        xs.len(),
        xs[0],
        pct(0.5),
        xs[xs.len() - 1]
    );
}

#[tokio::main]
pub async fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n = if bench { 8 } else { 1 };
    println!("rota agent latency (wall time, whole agent on a simulated cluster, real git)");
    let hook = Rig::start(true, Duration::from_secs(3600)).await;
    let (mut act, mut back) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (a, b) = sample(&hook, i).await;
        act.push(a);
        back.push(b);
    }
    summary("push -> first action, webhook (poll 1h)", act);
    summary("revert -> first rollback action, webhook", back);
    drop(hook);
    let poll = Rig::start(false, Duration::from_millis(500)).await;
    let mut act = Vec::new();
    for i in 0..n {
        act.push(sample(&poll, i).await.0);
    }
    summary("push -> first action, polling every 500ms", act);
}
