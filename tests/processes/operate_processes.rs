//! Operating rota, end to end with real processes: `rota sim serve` and `rota agent` (JSON
//! logs, metrics on a loopback port) on a local fleet repo whose Fleet names a notification
//! webhook, received by a local HTTP server.
//!
//! - A rotation: `/metrics` scraped before, during and after shows the per-pool series move,
//!   the counters and histograms fill; the webhook gets a handful of coalesced messages; the
//!   JSON logs carry pool and batch spans and none of the secrets the agent was given.
//! - A drain a PodDisruptionBudget never allows: the pool gets the `Stuck` condition, one
//!   Warning Event and `rota_pool_stuck`, once the configured `--stuck-after` has passed.
//! - Cloud throttling that clears: the rotation completes and nothing stuck or alerting is
//!   raised, while the throttled calls are counted.
//!
//! Waits have deadlines (a hung run fails instead of hanging); no assertion is on wall time.

use crate::support::canary_fleet;
use crate::support::git::{commit_and_push, git, origin_and_clone, rota};
use crate::support::processes::{Kill, SimServe};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

const HOOK_SECRET_PATH: &str = "/services/T0OPS/B0OPS/hookSECRETq8w7e6r5";
const GIT_WEBHOOK_SECRET: &str = "whsec_gitHOOKsecret_3k4j5h";

fn fleet_yaml(version: &str) -> String {
    canary_fleet::canary_fleet_yaml(
        version,
        "{batch: 2}",
        "  notifications:\n    - name: ops-chat\n      urlEnv: ROTA_TEST_WEBHOOK_URL\n      minInterval: 2s\n",
    )
}

/// Every request a receiver got: path and JSON body.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A chat webhook receiver: records every request's path and JSON body, answers 200.
fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap_or(0);
            let path = line.split(' ').nth(1).unwrap_or("").to_string();
            let mut len = 0;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap_or(());
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            g.lock().unwrap().push((path, v));
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (format!("http://{addr}{HOOK_SECRET_PATH}"), got)
}

/// A raw HTTP GET: status and body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let code = buf[9..12].parse().unwrap();
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The value of the sample `name{labels}` (labels exactly as rendered), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

/// The sum of every sample of `name` whose labels contain all of `having`.
fn sum(text: &str, name: &str, having: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| having.iter().all(|h| l.contains(h)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A fleet repo, a simulated fleet and an agent on it.
struct Run {
    _tmp: tempfile::TempDir,
    work: PathBuf,
    kubeconfig: PathBuf,
    log: PathBuf,
    metrics: String,
    agent: Kill,
    _sim: Kill,
}

impl Run {
    fn start(workloads: &str, faults: Option<&str>, stuck_after: &str, hook_url: &str) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let (origin, work) = origin_and_clone(tmp.path(), "work");
        std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
        commit_and_push(&work, "fleet");

        let kubeconfig = tmp.path().join("kubeconfig");
        let mut sim = SimServe::new(&work, &kubeconfig)
            .workloads(&tmp.path().join("workloads.yaml"), workloads)
            .speed(30);
        if let Some(f) = faults {
            sim = sim.faults(&tmp.path().join("faults.yaml"), f);
        }
        let (sim, line) = sim.start();
        assert!(line.starts_with("rota sim: ready: 1 clusters"), "{line}");

        let secret_file = tmp.path().join("git-webhook-secret");
        std::fs::write(&secret_file, GIT_WEBHOOK_SECRET).unwrap();
        let log = tmp.path().join("agent.log");
        let agent = Command::new(rota())
            .arg("agent")
            .env("ROTA_REPO", &origin)
            .env("ROTA_CLUSTER", "canary-1")
            // The simulated cluster has no CRD yet: the agent installs it.
            .env("ROTA_INSTALL_CRD", "true")
            .env("ROTA_KUBECONFIG", &kubeconfig)
            .env("ROTA_CONTEXT", "canary-1")
            .env("ROTA_STATE_DIR", tmp.path().join("state"))
            .env("ROTA_POLL", "1s")
            .env("ROTA_RESYNC", "1s")
            .env("ROTA_SPEED", "30")
            .env("ROTA_WEBHOOK_LISTEN", "127.0.0.1:0")
            .env("ROTA_WEBHOOK_SECRET_FILE", &secret_file)
            .env("ROTA_TEST_WEBHOOK_URL", hook_url)
            .env_remove("RUST_LOG")
            .args(["--log-format", "json", "--log-filter", "rota=debug"])
            .args([
                "--metrics-addr",
                "127.0.0.1:0",
                "--stuck-after",
                stuck_after,
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut run = Run {
            _tmp: tmp,
            work,
            kubeconfig,
            log,
            metrics: String::new(),
            agent: Kill(agent),
            _sim: sim,
        };
        // The metrics address is logged (port 0 picks one).
        run.metrics = run.wait("the metrics address in the log", |r| {
            r.logs().iter().find_map(|v| {
                (v["fields"]["message"] == "serving metrics")
                    .then(|| v["fields"]["addr"].as_str().map(String::from))
                    .flatten()
            })
        });
        run
    }

    /// The agent's log lines that are JSON (every log line; the start-up banner is not).
    fn logs(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn scrape(&self) -> String {
        let (code, body) = get(&self.metrics, "/metrics");
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Poll `f` until it yields, failing after a generous deadline.
    fn wait<T>(&mut self, what: &str, mut f: impl FnMut(&Run) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Ok(Some(code)) = self.agent.0.try_wait() {
                panic!(
                    "rota agent exited ({code}) waiting for {what}:\n{}",
                    self.log_text()
                );
            }
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                start.elapsed() < Duration::from_secs(240),
                "gave up waiting for {what}; agent log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn log_text(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        t.lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--context", "canary-1"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn npr(&self) -> Value {
        serde_json::from_str(&self.kubectl(&["get", "npr", "general", "-o", "json"])).unwrap()
    }

    fn bump(&self) {
        std::fs::write(self.work.join("fleet.yaml"), fleet_yaml("2026.11.2")).unwrap();
        git(
            &self.work,
            &["commit", "-q", "-am", "canary: general 2026.11.2"],
        );
        git(&self.work, &["push", "-q", "origin", "main"]);
    }

    fn stuck_condition(&self) -> Option<Value> {
        self.npr()["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Stuck")
            .cloned()
    }

    /// Events about the NodePoolRotation with `reason`.
    fn events(&self, reason: &str) -> Vec<Value> {
        let v: Value =
            serde_json::from_str(&self.kubectl(&["get", "events", "-A", "-o", "json"])).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == reason && e["involvedObject"]["kind"] == "NodePoolRotation")
            .cloned()
            .collect()
    }
}

const POOL: &str = r#"{cluster="canary-1",pool="general"}"#;

fn series(name: &str) -> String {
    format!("{name}{POOL}")
}

#[test]
fn metrics_notifications_and_logs_follow_a_real_rotation() {
    let (hook_url, messages) = receiver();
    let mut run = Run::start(
        "nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}\n\
         deployments:\n\
         - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}}\n",
        None,
        "30m",
        &hook_url,
    );
    // Before: the pool is on its image (the first commit's), the leader is ready.
    let before = run.wait("the pool settled on the first commit", |r| {
        let m = r.scrape();
        (sample(&m, &series("rota_pool_nodes_on_target")) == Some(4.0)
            && sample(
                &m,
                r#"rota_pool_phase{cluster="canary-1",phase="Succeeded",pool="general"}"#,
            ) == Some(1.0)
            // The agent's next pass records what the pool runs.
            && m.contains("rota_pool_info{"))
        .then_some(m)
    });
    assert_eq!(
        sample(&before, &series("rota_pool_progress_ratio")),
        Some(1.0)
    );
    assert_eq!(
        sample(&before, r#"rota_leader{cluster="canary-1"}"#),
        Some(1.0)
    );
    // What the pool runs, by name (the dashboard's panel reads it).
    assert!(
        before.lines().any(|l| l
            .starts_with(r#"rota_pool_info{channel="general",cluster="canary-1",image="ami-"#)
            && l.contains(r#"pool="general",version="#)),
        "{before}"
    );
    assert_eq!(get(&run.metrics, "/healthz").0, 200);
    assert_eq!(
        get(&run.metrics, "/readyz"),
        (200, "ready (leader)\n".to_string())
    );
    assert!(
        sum(&before, "rota_git_fetches_total", &[r#"outcome="ok""#]) >= 1.0,
        "{before}"
    );
    let brought_up_before = sample(&before, &series("rota_nodes_brought_up_total")).unwrap_or(0.0);

    run.bump();
    // During: the ratio drops when the target changes and climbs batch by batch.
    let mut ratios = Vec::new();
    let mut phases = std::collections::BTreeSet::new();
    let after = run.wait("the rotation to finish", |r| {
        let m = r.scrape();
        let ratio = sample(&m, &series("rota_pool_progress_ratio"))?;
        for p in ["Rotating", "Soaking", "Succeeded"] {
            let s = format!(r#"rota_pool_phase{{cluster="canary-1",phase="{p}",pool="general"}}"#);
            if sample(&m, &s) == Some(1.0) {
                phases.insert(p);
            }
        }
        ratios.push(ratio);
        let done = ratio == 1.0
            && sample(&m, &series("rota_nodes_terminated_total")).unwrap_or(0.0) >= 4.0
            && sample(
                &m,
                r#"rota_pool_phase{cluster="canary-1",phase="Succeeded",pool="general"}"#,
            ) == Some(1.0);
        done.then_some(m)
    });
    let low = ratios.iter().cloned().fold(f64::MAX, f64::min);
    assert!(low < 1.0, "the ratio never dropped: {ratios:?}");
    assert!(
        ratios.iter().any(|r| *r > low && *r < 1.0),
        "no intermediate progress seen: {ratios:?}"
    );
    assert!(phases.contains("Rotating"), "{phases:?}");
    // After: every node on the new image, counters and histograms filled.
    assert_eq!(
        sample(&after, &series("rota_pool_nodes_on_target")),
        Some(4.0)
    );
    assert_eq!(sample(&after, &series("rota_pool_batch")), Some(0.0));
    assert!(
        sample(&after, &series("rota_nodes_brought_up_total")).unwrap() >= brought_up_before + 4.0
    );
    assert!(sample(&after, &series("rota_nodes_drained_total")).unwrap() >= 4.0);
    assert!(sample(&after, &series("rota_nodes_terminated_total")).unwrap() >= 4.0);
    assert!(
        sum(&after, "rota_evictions_total", &[r#"outcome="ok""#]) >= 4.0,
        "{after}"
    );
    for h in [
        "rota_batch_duration_seconds_count",
        "rota_drain_duration_seconds_count",
        "rota_node_boot_to_ready_seconds_count",
        "rota_reconcile_duration_seconds_count",
    ] {
        assert!(
            sample(&after, &series(h)).unwrap_or(0.0) > 0.0,
            "{h}:\n{after}"
        );
    }
    assert!(sample(&after, &series("rota_batch_duration_seconds_count")).unwrap() >= 1.0);
    for call in ["describe", "set_image", "set_capacity", "terminate"] {
        let n = sum(
            &after,
            "rota_cloud_calls_total",
            &[
                &format!(r#"call="{call}""#),
                r#"provider="aws""#,
                r#"outcome="ok""#,
            ],
        );
        assert!(n >= 1.0, "{call}:\n{after}");
    }
    assert!(
        sum(
            &after,
            "rota_statuses_posted_total",
            &[r#"backend="git-notes""#, r#"outcome="ok""#]
        ) >= 2.0,
        "{after}"
    );
    assert!(sample(&after, &series("rota_pool_seconds_since_progress")).is_some());
    // Labels stay low-cardinality: no node, pod or instance name anywhere.
    assert!(!after.contains("node=") && !after.contains("pod=") && !after.contains("instance="));

    // Notifications: started and completed, coalesced into a handful of messages.
    let got = run.wait("the completion notice", |_| {
        let g = messages.lock().unwrap().clone();
        g.iter()
            .any(|(_, v)| v["text"].as_str().unwrap_or("").contains("*Completed*"))
            .then_some(g)
    });
    let texts: Vec<&str> = got
        .iter()
        .map(|(_, v)| v["text"].as_str().unwrap())
        .collect();
    assert!(got.iter().all(|(p, _)| p == HOOK_SECRET_PATH), "{got:?}");
    assert!(texts.len() <= 3, "not coalesced: {texts:#?}");
    let all = texts.join("\n");
    assert!(all.contains("• canary-1/general → 2026.11.2"), "{all}");
    assert!(all.contains("• canary-1/general on 2026.11.2"), "{all}");
    assert_eq!(all.matches("*Rollout started*").count(), 1, "{all}");
    assert_eq!(all.matches("*Completed*").count(), 1, "{all}");
    let m = run.scrape();
    assert_eq!(
        sample(
            &m,
            r#"rota_notifications_total{cluster="canary-1",outcome="ok"}"#
        ),
        Some(texts.len() as f64),
        "{m}"
    );

    // Logs: JSON lines, reconciles inside pool and batch spans, no secret.
    let logs = run.logs();
    assert!(logs.len() > 3, "{}", run.log_text());
    let in_batch = logs.iter().any(|v| {
        let spans = v["spans"].as_array();
        spans.is_some_and(|s| {
            s.iter().any(|x| {
                x["name"] == "pool" && x["cluster"] == "canary-1" && x["pool"] == "general"
            }) && s
                .iter()
                .any(|x| x["name"] == "batch" && x["batch"].is_number())
        })
    });
    assert!(
        in_batch,
        "no line in a pool and batch span:\n{}",
        run.log_text()
    );
    let text = std::fs::read_to_string(&run.log).unwrap();
    for secret in [GIT_WEBHOOK_SECRET, "hookSECRETq8w7e6r5", HOOK_SECRET_PATH] {
        assert!(!text.contains(secret), "{secret} in the agent's log");
    }
}

#[test]
fn a_drain_no_pdb_allows_gets_stuck_once_the_threshold_passes() {
    let (hook_url, _messages) = receiver();
    // Two replicas, minAvailable 2: no eviction is ever allowed.
    let mut run = Run::start(
        "nodes: {perPool: 2, registerAfter: 15s, readyAfter: 20s}\n\
         deployments:\n\
         - {name: db, namespace: shop, replicas: 2, pdb: {minAvailable: 2}}\n",
        None,
        "3m",
        &hook_url,
    );
    run.wait("the pool settled", |r| {
        let m = r.scrape();
        (sample(&m, &series("rota_pool_nodes_on_target")) == Some(2.0)).then_some(())
    });
    run.bump();
    let cond = run.wait("the Stuck condition", |r| {
        r.stuck_condition().filter(|c| c["status"] == "True")
    });
    assert_eq!(cond["reason"], "DrainBlocked", "{cond}");
    let msg = cond["message"].as_str().unwrap();
    assert!(
        msg.contains("in stage Draining (batch 1) (threshold 3m)"),
        "{msg}"
    );
    // The cause is named: the planner sees the PDB allows nothing (no eviction is even sent).
    assert!(
        msg.contains("PodDisruptionBudget shop/db allows no disruption"),
        "{msg}"
    );
    // Raised once the threshold passed since the drain began, at the next reconcile (a
    // blocked drain is re-checked on its PDB's changes and at least every minute).
    let npr = run.npr();
    let since = npr["status"]["checkpoint"]["stage"]["batch"]["stageSince"]
        .as_str()
        .unwrap();
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap();
    let raised = parse(cond["lastTransitionTime"].as_str().unwrap());
    let idle = (raised - parse(since)).num_seconds();
    assert!(
        (179..=180 + 90).contains(&idle),
        "raised {idle}s after the drain began"
    );
    let m = run.scrape();
    assert_eq!(
        sample(
            &m,
            r#"rota_pool_stuck{cluster="canary-1",pool="general",reason="DrainBlocked"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert!(
        sample(&m, &series("rota_pool_seconds_since_progress")).unwrap() >= 0.0,
        "{m}"
    );
    assert_eq!(
        sum(&m, "rota_errors_total", &[r#"alerting="true""#]),
        0.0,
        "{m}"
    );
    // One Warning Event, even after more reconciles while still stuck.
    let events = run.wait("the Stuck event", |r| {
        let e = r.events("Stuck");
        (!e.is_empty()).then_some(e)
    });
    assert_eq!(events[0]["type"], "Warning", "{events:?}");
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("DrainBlocked: no progress")
    );
    let evictions = sum(&m, "rota_reconcile_duration_seconds_count", &[]);
    run.wait("more reconciles of the stuck pool", |r| {
        (sum(&r.scrape(), "rota_reconcile_duration_seconds_count", &[]) >= evictions + 3.0)
            .then_some(())
    });
    let again = run.events("Stuck");
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(again[0]["count"].as_i64().unwrap_or(1) <= 1, "{again:?}");
}

#[test]
fn throttling_that_clears_raises_nothing() {
    let (hook_url, _messages) = receiver();
    let mut run = Run::start(
        "nodes: {perPool: 2, registerAfter: 15s, readyAfter: 20s}\n\
         deployments:\n\
         - {name: web, namespace: shop, replicas: 2, pdb: {maxUnavailable: 1}}\n",
        Some(
            "scripted:\n\
             - {call: setCapacity, group: canary-general, error: throttled, times: 3}\n\
             - {call: terminate, group: canary-general, error: throttled, times: 2}\n",
        ),
        "10m",
        &hook_url,
    );
    run.wait("the pool settled", |r| {
        (sample(&r.scrape(), &series("rota_pool_nodes_on_target")) == Some(2.0)).then_some(())
    });
    run.bump();
    let m = run.wait("the rotation to finish", |r| {
        let m = r.scrape();
        let done = sample(
            &m,
            r#"rota_pool_phase{cluster="canary-1",phase="Succeeded",pool="general"}"#,
        ) == Some(1.0)
            && sample(&m, &series("rota_nodes_terminated_total")).unwrap_or(0.0) >= 2.0;
        done.then_some(m)
    });
    // The faults happened and were retried quietly.
    assert!(
        sum(
            &m,
            "rota_cloud_calls_total",
            &[r#"outcome="throttled""#, r#"provider="aws""#]
        ) >= 3.0,
        "{m}"
    );
    assert!(
        sum(
            &m,
            "rota_errors_total",
            &[r#"reason="Throttled""#, r#"alerting="false""#]
        ) >= 1.0,
        "{m}"
    );
    // Nothing stuck, nothing alerting, no Stuck Event, the condition (if any) False.
    assert_eq!(
        sum(&m, "rota_errors_total", &[r#"alerting="true""#]),
        0.0,
        "{m}"
    );
    assert!(!m.contains("rota_pool_stuck{"), "{m}");
    assert!(run.events("Stuck").is_empty());
    if let Some(c) = run.stuck_condition() {
        assert_eq!(c["status"], "False", "{c}");
    }
}
