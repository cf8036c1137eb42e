//! Attacks on the agent's servers and clients, against the real `rota agent` binary on
//! loopback (with `rota sim serve` as its cluster and a local fleet repo):
//!
//! - a forge answering `Retry-After: 9223372036854775807` (it made the status task panic on
//!   `Instant` overflow; the process stayed up with green probes and never acted on a later
//!   commit): the agent still acts on the next commit;
//! - half-open connections to the metrics port are closed after the header timeout (50 were
//!   still open after 150 s);
//! - 100 slow connections to the webhook receiver that never authenticate do not grow the
//!   agent's resident memory past a bound (they grew it from 40 to 450 MiB);
//! - a signed delivery replayed under a new delivery id causes no second fetch.
//!
//! Waits have deadlines (a hung run fails instead of hanging); no assertion is on wall time.

use crate::support::canary_fleet;
use crate::support::git::{commit_and_push, git, origin_and_clone, rota};
use crate::support::processes::{Kill, SimServe};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const WEBHOOK_SECRET: &str = "whsec_hostile_9f8e7d";

/// A fleet repo, the simulated cluster and an agent on them.
struct Run {
    _tmp: tempfile::TempDir,
    work: PathBuf,
    kubeconfig: PathBuf,
    log: PathBuf,
    agent: Kill,
    _sim: Kill,
}

impl Run {
    fn start(env: &[(&str, String)]) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let (origin, work) = origin_and_clone(tmp.path(), "work");
        std::fs::write(
            work.join("fleet.yaml"),
            canary_fleet::canary_fleet_yaml("2026.11.1", "{batch: 2}", ""),
        )
        .unwrap();
        commit_and_push(&work, "fleet");

        let kubeconfig = tmp.path().join("kubeconfig");
        let (sim, _) = SimServe::new(&work, &kubeconfig)
            .workloads(
                &tmp.path().join("workloads.yaml"),
                "nodes: {perPool: 2, registerAfter: 5s, readyAfter: 5s}\ndeployments: []\n",
            )
            .speed(30)
            .start();

        let secret = tmp.path().join("webhook-secret");
        std::fs::write(&secret, WEBHOOK_SECRET).unwrap();
        let log = tmp.path().join("agent.log");
        let mut cmd = Command::new(rota());
        cmd.arg("agent")
            .env("ROTA_REPO", &origin)
            .env("ROTA_CLUSTER", "canary-1")
            .env("ROTA_INSTALL_CRD", "true")
            .env("ROTA_KUBECONFIG", &kubeconfig)
            .env("ROTA_CONTEXT", "canary-1")
            .env("ROTA_STATE_DIR", tmp.path().join("state"))
            .env("ROTA_POLL", "1s")
            .env("ROTA_RESYNC", "1s")
            .env("ROTA_SPEED", "30")
            .env("ROTA_WEBHOOK_LISTEN", "127.0.0.1:0")
            .env("ROTA_WEBHOOK_SECRET_FILE", &secret)
            .env_remove("RUST_LOG")
            .args(["--log-format", "json", "--metrics-addr", "127.0.0.1:0"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let agent = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Run {
            _tmp: tmp,
            work,
            kubeconfig,
            log,
            agent: Kill(agent),
            _sim: sim,
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `f` until it yields; fails if the agent exits or after a generous deadline.
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
                start.elapsed() < Duration::from_secs(180),
                "timed out waiting for {what}; agent log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn metrics_addr(&mut self) -> String {
        self.wait("the metrics address in the log", |r| {
            r.log_text().lines().find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                (v["fields"]["message"] == "serving metrics")
                    .then(|| v["fields"]["addr"].as_str().map(String::from))?
            })
        })
    }

    fn webhook_addr(&mut self) -> String {
        self.wait("the webhook address in the banner", |r| {
            r.log_text().lines().find_map(|l| {
                let (_, rest) = l.split_once(", webhooks on ")?;
                Some(rest.trim().to_string())
            })
        })
    }

    /// `.spec.image` of the pool's NodePoolRotation (kubectl against the simulated API).
    fn npr_image(&self) -> String {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--context", "canary-1", "get", "npr", "general", "-o"])
            .arg("jsonpath={.spec.image}")
            .output()
            .expect("kubectl is installed (scripts/test installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn push_version(&self, version: &str) {
        std::fs::write(
            self.work.join("fleet.yaml"),
            canary_fleet::canary_fleet_yaml(version, "{batch: 2}", ""),
        )
        .unwrap();
        git(
            &self.work,
            &["commit", "-q", "-am", &format!("general {version}")],
        );
        git(&self.work, &["push", "-q", "origin", "main"]);
    }

    /// Resident memory of the agent, in KiB.
    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.agent.0.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// A raw HTTP/1.1 exchange: status and body.
fn request(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

fn fetches(metrics: &str) -> f64 {
    let (code, text) = request(
        metrics,
        "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(code, 200, "{text}");
    text.lines()
        .filter(|l| l.starts_with("rota_git_fetches_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A forge that answers every request `429` with the largest `Retry-After` there is.
fn hostile_forge() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let _ = s.write_all(
                b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 9223372036854775807\r\ncontent-type: application/json\r\ncontent-length: 27\r\nconnection: close\r\n\r\n{\"message\":\"slow down now\"}",
            );
        }
    });
    (format!("http://{addr}"), hits)
}

#[test]
fn a_forge_answering_a_huge_retry_after_does_not_stop_the_agent() {
    let (forge, hits) = hostile_forge();
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    std::fs::write(&token, "ghp_hostileTEST").unwrap();
    let mut run = Run::start(&[
        ("ROTA_GITHUB_REPO", "acme/fleet".into()),
        ("ROTA_GITHUB_TOKEN_FILE", token.display().to_string()),
        ("ROTA_GITHUB_API_URL", forge),
    ]);
    run.wait("the first commit applied", |r| {
        (r.npr_image() == "ami-0a1b2c3d4e5f60718").then_some(())
    });
    run.wait("a status posted to the forge", |_| {
        (hits.load(Ordering::SeqCst) > 0).then_some(())
    });
    // Give a panicking status task time to die before the next commit arrives.
    std::thread::sleep(Duration::from_secs(2));
    run.push_version("2026.11.2");
    run.wait("the later commit acted on", |r| {
        (r.npr_image() == "ami-0f9e8d7c6b5a40312").then_some(())
    });
    assert!(!run.log_text().contains("panicked"), "{}", run.log_text());
}

#[test]
fn half_open_connections_to_the_metrics_port_are_closed() {
    let mut run = Run::start(&[]);
    let metrics = run.metrics_addr();
    // 50 connections that send half a request line and nothing more.
    let mut open: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = TcpStream::connect(&metrics).unwrap();
            s.write_all(b"GET /metr").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            s
        })
        .collect();
    let start = Instant::now();
    while !open.is_empty() {
        open.retain_mut(|s| {
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(0) => false,
                Ok(_) => false,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    true
                }
                Err(_) => false,
            }
        });
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{} half-open metrics connections still open after 90 s",
            open.len()
        );
    }
    // The server still answers.
    let (code, _) = request(
        &metrics,
        "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(code, 200);
}

#[test]
fn slow_unauthenticated_webhook_connections_do_not_grow_memory() {
    let mut run = Run::start(&[]);
    let hook = run.webhook_addr();
    let metrics = run.metrics_addr();
    run.wait("the first commit applied", |r| {
        (r.npr_image() == "ami-0a1b2c3d4e5f60718").then_some(())
    });
    // Not even framed as a forge delivery: refused before any body byte is read.
    let (code, text) = request(
        &hook,
        "POST /hooks/push HTTP/1.1\r\nhost: x\r\nx-github-event: push\r\ncontent-length: 1000000\r\n\r\n",
        b"",
    );
    assert_eq!(code, 401, "{text}");
    let before = run.rss_kib();
    // 100 connections that claim a signature (it cannot be checked before the body) and send
    // almost a megabyte of body, then stall.
    let chunk = vec![b'x'; 1_000_000];
    let fake = "0".repeat(64);
    let mut held = Vec::new();
    for _ in 0..100 {
        let Ok(mut s) = TcpStream::connect(&hook) else {
            continue;
        };
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let head = format!(
            "POST /hooks/push HTTP/1.1\r\nhost: x\r\nx-github-event: push\r\nx-github-delivery: slow\r\nx-hub-signature-256: sha256={fake}\r\ncontent-length: 1040000\r\n\r\n"
        );
        // Over the connection cap the server closes at once: writes may fail, that is fine.
        let _ = s
            .write_all(head.as_bytes())
            .and_then(|_| s.write_all(&chunk));
        held.push(s);
    }
    std::thread::sleep(Duration::from_secs(2));
    let during = run.rss_kib();
    let grown = during.saturating_sub(before);
    eprintln!(
        "agent RSS: {before} KiB before, {during} KiB with 100 slow connections (+{grown} KiB)"
    );
    assert!(
        grown < 64 * 1024,
        "100 slow unauthenticated connections grew the agent by {grown} KiB (bound 64 MiB)"
    );
    drop(held);
    // Still serving.
    let (code, _) = request(
        &metrics,
        "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(code, 200);
}

#[test]
fn a_replayed_signed_delivery_causes_no_second_fetch() {
    // An hour between polls: only webhooks explain a fetch.
    let mut run = Run::start(&[("ROTA_POLL", "1h".into())]);
    let hook = run.webhook_addr();
    let metrics = run.metrics_addr();
    run.wait("the first fetch", |_| {
        (fetches(&metrics) >= 1.0).then_some(())
    });
    let base = fetches(&metrics);
    let body = br#"{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000001"}"#;
    let sig = rota::source::webhook::sign_hex(&rota::source::Secret::new(WEBHOOK_SECRET), body);
    let deliver = |id: &str| {
        request(
            &hook,
            &format!(
                "POST /hooks/push HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\nx-github-event: push\r\nx-github-delivery: {id}\r\nx-hub-signature-256: sha256={sig}\r\ncontent-length: {}\r\n\r\n",
                body.len()
            ),
            body,
        )
    };
    let (code, text) = deliver("first");
    assert_eq!(code, 202, "{text}");
    run.wait("the fetch the delivery triggered", |_| {
        (fetches(&metrics) > base).then_some(())
    });
    let after_first = fetches(&metrics);
    // The same signed body under a new delivery id (the id is not signed).
    let (code, text) = deliver("replayed");
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("replay"), "{text}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(fetches(&metrics), after_first, "the replay caused a fetch");
}
