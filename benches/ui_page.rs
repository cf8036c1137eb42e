//! The fleet page's cost per request at scale: a fleet repo of `ROTA_BENCH_CLUSTERS` clusters
//! (default 300; 3 waves, 2 pools each) with `ROTA_BENCH_COMMITS` commits (default 20), every
//! cluster's agent note (statuses and records, as the agents write them) on every commit;
//! then the real `rota ui` binary (`ROTA_BIN`, default the one cargo built beside the bench)
//! serves it and the bench asks for `/` `ROTA_BENCH_REQUESTS` times (default 20), reading the
//! server's CPU time from /proc before and after. A black box, so the same bench measures any
//! build. Without `--bench` (as `cargo test --all-targets` runs it) it is a smoke pass: 12
//! clusters, 2 commits, 2 requests. Either way the first page must name the first and the
//! last cluster.
//!
//! Prints `key=value` lines: `cpu_per_request_ms`, `wall_per_request_ms`, `first_request_ms`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .expect("git is installed");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn fleet_yaml(clusters: usize, main_general: &str) -> String {
    let canary = (clusters / 30).max(1);
    let early = clusters / 3;
    let names = |from: usize, to: usize| -> String {
        (from..to)
            .map(|i| format!("c{i:04}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: bench}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: ami-0a1b2c3d4e5f60718}}
        "2026.11.2": {{aws: ami-0f9e8d7c6b5a40312}}
    gpu:
      versions:
        "2026.10.3": {{aws: ami-07c5e1d2b3a4f5968}}
        "2026.11.1": {{aws: ami-03d4c5b6a7980e1f2}}
  waves:
    - name: canary
      clusters: [{}]
      images: {{general: "2026.11.2", gpu: "2026.11.1"}}
      soak: 2h
    - name: early
      clusters: [{}]
      images: {{general: "2026.11.2", gpu: "2026.10.3"}}
      soak: 24h
    - name: main
      clusters: [{}]
      images: {{general: "{main_general}", gpu: "2026.10.3"}}
  promotion: {{guard: true}}
"#,
        names(0, canary),
        names(canary, early),
        names(early, clusters)
    );
    for i in 0..clusters {
        out += &format!(
            r#"---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: c{i:04}}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - {{name: general, channel: general, nodeSelector: {{pool: general}}, group: {{autoScalingGroup: g{i}}}}}
    - {{name: gpu, channel: gpu, nodeSelector: {{pool: gpu}}, group: {{autoScalingGroup: p{i}}}}}
"#
        );
    }
    out
}

/// The note an agent writes for cluster `c` on a commit: two pool statuses, the cluster's,
/// and each pool's records (a few completions).
fn note(c: &str) -> String {
    let status = |ctx: String, d: &str| {
        serde_json::json!({"context": ctx, "state": "success", "description": d,
                           "updatedAt": "2026-11-22T03:00:00Z"})
    };
    let record = |pool: &str, channel: &str, versions: &[&str]| {
        serde_json::json!({"cluster": c, "pool": pool, "completions": versions.iter().enumerate().map(|(k, v)| serde_json::json!(
            {"channel": channel, "version": v, "completedAt": format!("2026-11-2{k}T02:40:00Z")})).collect::<Vec<_>>(),
            "gateFailures": []})
    };
    serde_json::json!({
        "cluster": c,
        "statuses": [
            status(format!("rota/{c}"), "2/2 pools on target"),
            status(format!("rota/{c}/general"), "4/4 nodes on general@2026.11.1"),
            status(format!("rota/{c}/gpu"), "2/2 nodes on gpu@2026.10.3"),
        ],
        "pools": [
            record("general", "general", &["2026.10.1", "2026.10.2", "2026.11.1"]),
            record("gpu", "gpu", &["2026.10.2", "2026.10.3"]),
        ]
    })
    .to_string()
}

fn build_repo(dir: &Path, clusters: usize, commits: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    // No background `gc --auto` packing refs while the notes are written.
    git(dir, &["config", "gc.auto", "0"]);
    let repo = git2::Repository::open(dir).unwrap();
    let sig = git2::Signature::now("rota", "rota@example.com").unwrap();
    for n in 0..commits {
        let pin = if n + 1 == commits {
            "2026.11.2"
        } else {
            "2026.11.1"
        };
        std::fs::write(dir.join("fleet.yaml"), fleet_yaml(clusters, pin)).unwrap();
        std::fs::write(dir.join("README.md"), format!("commit {n}\n")).unwrap();
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", &format!("commit {n}")]);
        let head = repo.head().unwrap().target().unwrap();
        for i in 0..clusters {
            let c = format!("c{i:04}");
            repo.note(
                &sig,
                &sig,
                Some(&format!("refs/notes/rota/{c}")),
                head,
                &note(&c),
                true,
            )
            .unwrap();
        }
    }
}

/// utime + stime of `pid`, in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn get(addr: &str, path: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    assert!(
        body.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    body
}

pub fn main() {
    // `cargo test --all-targets` runs this without `--bench`: a smoke pass at a small size
    // that still serves the page and checks it; `cargo bench` runs it at the size reported.
    let bench = std::env::args().any(|a| a == "--bench");
    let (clusters, commits, requests) = if bench { (300, 20, 20) } else { (12, 2, 2) };
    let clusters = env_or("ROTA_BENCH_CLUSTERS", clusters);
    let commits = env_or("ROTA_BENCH_COMMITS", commits);
    let requests = env_or("ROTA_BENCH_REQUESTS", requests);
    // The binary cargo built beside this bench (release under `cargo bench`), unless
    // ROTA_BIN names another build to compare.
    let bin = std::env::var_os("ROTA_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rota")));
    assert!(
        bin.exists(),
        "{} is missing: build it, or set ROTA_BIN",
        bin.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    build_repo(tmp.path(), clusters, commits);
    println!("clusters={clusters} commits={commits} requests={requests}");
    println!("repo_build_s={:.1}", t.elapsed().as_secs_f64());
    let mut child = Command::new(&bin)
        .args(["ui", "--listen", "127.0.0.1:0", "--repo"])
        .arg(tmp.path())
        .env("ROTA_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let pid = child.id();
    let t = Instant::now();
    let page = get(&addr, "/");
    println!("first_request_ms={}", t.elapsed().as_millis());
    println!("page_bytes={}", page.len());
    let page = String::from_utf8_lossy(&page);
    let last = format!("c{:04}", clusters - 1);
    assert!(
        page.contains("c0000") && page.contains(&last),
        "the page does not name both c0000 and {last}"
    );
    let cpu0 = cpu_ticks(pid);
    let t = Instant::now();
    for _ in 0..requests {
        get(&addr, "/");
    }
    let wall = t.elapsed();
    let cpu = cpu_ticks(pid) - cpu0;
    println!(
        "cpu_per_request_ms={:.1}",
        cpu as f64 * 10.0 / requests as f64
    );
    println!(
        "wall_per_request_ms={:.1}",
        wall.as_secs_f64() * 1000.0 / requests as f64
    );
    let _ = child.kill();
    let _ = child.wait();
}
