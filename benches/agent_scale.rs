//! The agent at scale: `rota sim serve` and `rota agent` as separate processes on the scale
//! scenario (one cluster, 10 pools; `examples/sim/scale.yaml`'s workloads), an image bump
//! pushed to git, every pool rotated (batch 10%, maxParallelPools 10, the sim's fast clock).
//!
//! Prints, read from /proc and from the simulated fleet's request log
//! (`rota sim serve --request-log`): the agent's peak and steady resident memory, its CPU
//! seconds (and idle CPU after the rotation), the time to adopt every pool, the rotation's
//! makespan in fleet time, Kubernetes reads and writes per rotated node (writes split into
//! rota's own and evictions; the pre-terminate pod reads apart), cloud calls per rotated
//! node (describes apart), the describes of the idle window before the bump per pool and
//! fleet hour, the bytes the agent received from the API server, and the sim's peak memory.
//! Lines are `agent_scale <size> <figure> <value>` so a script can read them.
//!
//! `cargo bench --bench figures -- agent_scale` runs 500 nodes / 15,000 pods, then 5,000 / 150,000
//! (`ROTA_SCALE_SIZES=500` or `=5000` runs one; the 10 pools hold a tenth each, so
//! `ROTA_SCALE_SIZES=30,500,5000` rotates pools of 3, 50 and 500 nodes). `ROTA_SCALE_SPEED` (30) is the sim's and the
//! agent's clock, `ROTA_SCALE_POLL` (1s) the agent's git poll; `ROTA_SCALE_IDLE_ONLY=1` stops
//! after adoption and two minutes of idle CPU; `ROTA_SCALE_NO_CLUSTER_AUTOSCALER=1` runs the
//! agent with `--no-cluster-autoscaler` (no scale-down-disabled annotations; printed as the
//! figure `no_cluster_autoscaler`). Without `--bench` (as `cargo test
//! --all-targets` runs it) it runs 20 nodes / 600 pods, as a smoke pass. Asserts nothing
//! about time; it fails only if the rotation does not finish with every node rotated.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn rota() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rota"))
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@rota.dev"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git is installed (apt-get install git)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Kills a child process when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fleet_yaml(version: &str, pools: u32) -> String {
    let mut s = format!(
        r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "2026.11.1": {{aws: ami-0a1b2c3d4e5f60718}}
        "2026.11.2": {{aws: ami-0f9e8d7c6b5a40312}}
  waves:
    - name: main
      clusters: [scale]
      images: {{general: "{version}"}}
  rollout: {{batch: "10%", maxParallelPools: 10}}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: scale}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
"#
    );
    for i in 0..pools {
        s.push_str(&format!(
            "    - {{name: pool-{i}, channel: general, nodeSelector: {{rota.dev/pool: pool-{i}}}, group: {{autoScalingGroup: scale-pool-{i}}}}}\n"
        ));
    }
    s
}

/// `examples/sim/scale.yaml` with `perPool` nodes in each pool (30 pods a node).
fn workloads(per_pool: u32) -> String {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/sim/scale.yaml"
    ))
    .unwrap();
    base.replace("perPool: 500", &format!("perPool: {per_pool}"))
}

/// (VmRSS, VmHWM) in KiB of a process.
fn rss_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// User plus system CPU seconds of a process.
fn cpu_seconds(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; here 11 and 12 (state is 0).
    (ticks(11) + ticks(12)) / 100.0
}

/// `rota status` of the newest commit: whether every pool reported success, and the report.
fn status(origin: &Path) -> (bool, serde_json::Value) {
    let out = Command::new(rota())
        .args(["status", "--format", "json", "--rev", "main", "--repo"])
        .arg(origin)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out.status.success(), v)
}

/// One line of the request log.
struct Req {
    server: String,
    method: String,
    target: String,
    bytes: u64,
}

fn read_log(path: &Path) -> Vec<Req> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some(Req {
                server: f.first()?.to_string(),
                method: f.get(1)?.to_string(),
                target: f.get(2)?.to_string(),
                bytes: f.get(4)?.parse().ok()?,
            })
        })
        .collect()
}

fn is_watch(r: &Req) -> bool {
    r.target.contains("watch=true") || r.target.contains("watch=1")
}

#[derive(Default, Debug)]
struct Counts {
    reads: u64,
    preterminate_reads: u64,
    writes: u64,
    /// rota's writes by what they wrote: (events, Lease, NodePoolRotations, nodes, other).
    writes_by: [u64; 5],
    evictions: u64,
    cloud: u64,
    /// Of `cloud`, the group describes.
    describes: u64,
}

fn count(reqs: &[Req]) -> Counts {
    let mut c = Counts::default();
    for r in reqs {
        if r.server == "cloud" {
            c.cloud += 1;
            if r.target.starts_with("/describe") {
                c.describes += 1;
            }
            continue;
        }
        match r.method.as_str() {
            "GET" if is_watch(r) => {}
            "GET" if r.target.contains("fieldSelector=spec.nodeName") => {
                c.preterminate_reads += 1;
                c.reads += 1;
            }
            "GET" => c.reads += 1,
            "POST"
                if r.target
                    .split('?')
                    .next()
                    .is_some_and(|p| p.ends_with("/eviction")) =>
            {
                c.evictions += 1
            }
            "POST" | "PUT" | "PATCH" | "DELETE" => {
                c.writes += 1;
                let path = r.target.split('?').next().unwrap_or_default();
                let i = if path.contains("/events") {
                    0
                } else if path.contains("/leases/") {
                    1
                } else if path.contains("/nodepoolrotations") {
                    2
                } else if path.contains("/nodes/") {
                    3
                } else {
                    4
                };
                c.writes_by[i] += 1;
            }
            _ => {}
        }
    }
    c
}

fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

struct Figures {
    label: String,
    values: Vec<(&'static str, String)>,
}

impl Figures {
    fn put(&mut self, name: &'static str, v: impl ToString) {
        let v = v.to_string();
        println!("agent_scale {} {name} {v}", self.label);
        self.values.push((name, v));
    }
}

fn run(per_pool: u32, speed: f64) -> Figures {
    let pools = 10;
    let nodes = per_pool * pools;
    let mut fig = Figures {
        label: format!("{nodes}n"),
        values: Vec::new(),
    };
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("fleet.git");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "--bare", "-b", "main"]);
    git(tmp.path(), &["clone", "-q", "fleet.git", "work"]);
    let work = tmp.path().join("work");
    git(&work, &["checkout", "-q", "-b", "main"]);
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1", pools)).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "fleet"]);
    git(&work, &["push", "-q", "origin", "main"]);

    let kubeconfig = tmp.path().join("kubeconfig");
    let wl = tmp.path().join("workloads.yaml");
    std::fs::write(&wl, workloads(per_pool)).unwrap();
    let log = tmp.path().join("requests.log");
    let loading = Instant::now();
    let mut sim = Command::new(rota())
        .args(["sim", "serve", "--repo"])
        .arg(&work)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--workloads")
        .arg(&wl)
        .arg("--request-log")
        .arg(&log)
        .args(["--speed", &speed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let sim_pid = sim.id();
    let _sim = Kill(sim);
    assert!(line.starts_with("rota sim: ready"), "{line}");
    fig.put(
        "sim_load_seconds",
        format!("{:.1}", loading.elapsed().as_secs_f64()),
    );

    // The bench polls git every second (a bump is seen at once); `ROTA_SCALE_POLL=1m` with
    // `ROTA_SCALE_SPEED=1` and `ROTA_SCALE_IDLE_ONLY=1` measures idle CPU as deployed.
    let poll = std::env::var("ROTA_SCALE_POLL").unwrap_or_else(|_| "1s".into());
    let agent_log = tmp.path().join("agent.log");
    // Set by the bench alone, whatever the caller's environment holds.
    let no_autoscaler = std::env::var_os("ROTA_SCALE_NO_CLUSTER_AUTOSCALER").is_some();
    fig.put("no_cluster_autoscaler", u8::from(no_autoscaler));
    let mut agent = Command::new(rota());
    if no_autoscaler {
        agent.env("ROTA_NO_CLUSTER_AUTOSCALER", "true");
    } else {
        agent.env_remove("ROTA_NO_CLUSTER_AUTOSCALER");
    }
    let started = Instant::now();
    let agent = agent
        .arg("agent")
        .env("ROTA_REPO", &origin)
        .env("ROTA_CLUSTER", "scale")
        .env("ROTA_INSTALL_CRD", "true")
        .env("ROTA_KUBECONFIG", &kubeconfig)
        .env("ROTA_CONTEXT", "scale")
        .env("ROTA_STATE_DIR", tmp.path().join("state"))
        .env("ROTA_POLL", &poll)
        .env("ROTA_SPEED", speed.to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&agent_log).unwrap())
        .spawn()
        .unwrap();
    let agent_pid = agent.id();
    let mut agent = Kill(agent);
    let mut peak_rss = 0u64;
    let mut wait = |what: &str, limit: Duration, agent: &mut Kill| {
        let start = Instant::now();
        loop {
            if let Ok(Some(code)) = agent.0.try_wait() {
                panic!(
                    "rota agent exited ({code}):\n{}",
                    std::fs::read_to_string(&agent_log).unwrap_or_default()
                );
            }
            peak_rss = peak_rss.max(rss_kib(agent_pid).0);
            let (ok, v) = status(&origin);
            if ok {
                return (start.elapsed(), v);
            }
            assert!(
                start.elapsed() < limit,
                "{what}: not done after {limit:?}; agent log tail:\n{}",
                tail(&agent_log)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let limit = Duration::from_secs(600 + u64::from(nodes) / 2);
    wait("adopting every pool", limit, &mut agent);
    fig.put(
        "adopt_all_pools_seconds",
        format!("{:.1}", started.elapsed().as_secs_f64()),
    );
    // Settle, then the idle figures before the bump.
    std::thread::sleep(Duration::from_secs(5));
    let idle_only = std::env::var_os("ROTA_SCALE_IDLE_ONLY").is_some();
    let window = if idle_only { 120 } else { 10 };
    let cpu0 = cpu_seconds(agent_pid);
    let idle_from = lines_in(&log);
    std::thread::sleep(Duration::from_secs(window));
    let idle_before = (cpu_seconds(agent_pid) - cpu0) / window as f64 * 100.0;
    fig.put("idle_cpu_percent_before", format!("{idle_before:.2}"));
    // Describes while every pool is on its image, per pool and hour of fleet time (at 30x
    // the two-minute window of `ROTA_SCALE_IDLE_ONLY` is one fleet hour).
    let idle_reqs = read_log(&log);
    let idle = count(&idle_reqs[idle_from.min(idle_reqs.len())..]);
    let fleet_hours = window as f64 * speed / 3600.0;
    fig.put(
        "idle_describes_per_pool_hour",
        format!(
            "{:.2}",
            idle.describes as f64 / f64::from(pools) / fleet_hours
        ),
    );
    fig.put("idle_cloud_calls", idle.cloud);
    if idle_only {
        fig.put("idle_window_seconds", window.to_string());
        fig.put("poll", poll.clone());
        fig.put("speed", speed.to_string());
        fig.put("agent_rss_mib", (rss_kib(agent_pid).0 / 1024).to_string());
        return fig;
    }

    let from = lines_in(&log);
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.2", pools)).unwrap();
    git(&work, &["commit", "-q", "-am", "main: general 2026.11.2"]);
    git(&work, &["push", "-q", "origin", "main"]);
    let bumped = Instant::now();
    let bumped_at = chrono::Utc::now();
    // Wait until the new commit reports (its statuses replace the old one's).
    std::thread::sleep(Duration::from_secs(2));
    let (took, report) = wait("rotating every pool", limit * 4, &mut agent);
    // Every node on the new image: each pool reports all its nodes on target.
    let pools_done = report["clusters"][0]["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["onTarget"].as_u64() == Some(u64::from(per_pool)))
        .count();
    assert_eq!(
        pools_done, pools as usize,
        "not every node rotated: {report}"
    );
    let makespan = (took + Duration::from_secs(2)).as_secs_f64() * speed;
    fig.put("makespan_fleet_minutes", format!("{:.1}", makespan / 60.0));
    fig.put(
        "makespan_wall_seconds",
        format!("{:.1}", bumped.elapsed().as_secs_f64()),
    );
    let to = lines_in(&log);
    let cpu_rotation = cpu_seconds(agent_pid);
    std::thread::sleep(Duration::from_secs(5));
    let steady = rss_kib(agent_pid).0;
    let cpu1 = cpu_seconds(agent_pid);
    std::thread::sleep(Duration::from_secs(10));
    let idle_after = (cpu_seconds(agent_pid) - cpu1) / 10.0 * 100.0;
    let (_, agent_hwm) = rss_kib(agent_pid);
    let (_, sim_hwm) = rss_kib(sim_pid);
    let cpu_total = cpu_seconds(agent_pid);
    let events = events_by_reason(&kubeconfig, bumped_at);
    // Stop the agent so its watches close and their lines (with bytes) are written.
    drop(agent);
    std::thread::sleep(Duration::from_secs(2));

    let reqs = read_log(&log);
    let during = count(&reqs[from.min(reqs.len())..to.min(reqs.len())]);
    let all_kube_bytes: u64 = reqs
        .iter()
        .filter(|r| r.server.starts_with("kube:"))
        .map(|r| r.bytes)
        .sum();
    let per = |n: u64| format!("{:.2}", n as f64 / f64::from(nodes));
    fig.put("nodes", nodes);
    fig.put("pods", nodes * 30);
    fig.put("agent_peak_rss_mib", agent_hwm.max(peak_rss) / 1024);
    fig.put("agent_steady_rss_mib", steady / 1024);
    fig.put("agent_cpu_seconds_total", format!("{cpu_total:.1}"));
    fig.put(
        "agent_cpu_seconds_to_end_of_rotation",
        format!("{cpu_rotation:.1}"),
    );
    fig.put("idle_cpu_percent_after", format!("{idle_after:.2}"));
    fig.put("reads_per_rotated_node", per(during.reads));
    fig.put(
        "preterminate_reads_per_rotated_node",
        per(during.preterminate_reads),
    );
    fig.put("rota_writes_per_rotated_node", per(during.writes));
    for (i, name) in [
        "writes_events_per_rotated_node",
        "writes_lease_per_rotated_node",
        "writes_nodepoolrotations_per_rotated_node",
        "writes_nodes_per_rotated_node",
        "writes_other_per_rotated_node",
    ]
    .into_iter()
    .enumerate()
    {
        fig.put(name, per(during.writes_by[i]));
    }
    fig.put("events_by_reason_since_the_bump", events);
    fig.put("evictions_per_rotated_node", per(during.evictions));
    fig.put("cloud_calls_per_rotated_node", per(during.cloud));
    fig.put("describes_per_rotated_node", per(during.describes));
    fig.put(
        "agent_received_mib",
        format!("{:.1}", all_kube_bytes as f64 / 1048576.0),
    );
    fig.put("sim_peak_rss_mib", sim_hwm / 1024);
    fig
}

/// rota's Events since `since` by reason, each counted with its series (a repeat the
/// recorder folds into a series is a write too): `Draining=10,Surging=10,...`, read with
/// `kubectl` (`unavailable` without it).
fn events_by_reason(kubeconfig: &Path, since: chrono::DateTime<chrono::Utc>) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--context",
            "scale",
            "get",
            "events.v1.events.k8s.io",
            "-A",
            "-o",
            "json",
        ])
        .output();
    let Ok(out) = out else {
        return "unavailable".into();
    };
    if !out.status.success() {
        return "unavailable".into();
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    for e in v["items"].as_array().into_iter().flatten() {
        let at = e["eventTime"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        if at.is_none_or(|t| t < since) || e["reportingController"] != "rota" {
            continue;
        }
        let reason = e["reason"].as_str().unwrap_or("?").to_string();
        *by.entry(reason).or_default() += e["series"]["count"].as_u64().unwrap_or(1);
    }
    by.iter()
        .map(|(r, n)| format!("{r}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

pub fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let speed: f64 = std::env::var("ROTA_SCALE_SPEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30.0);
    let sizes: Vec<u32> = if bench {
        std::env::var("ROTA_SCALE_SIZES")
            .ok()
            .map(|s| {
                s.split(',')
                    .filter_map(|n| n.trim().parse::<u32>().ok())
                    .collect()
            })
            .unwrap_or_else(|| vec![500, 5000])
    } else {
        vec![20]
    };
    let mut table = Vec::new();
    for nodes in sizes {
        table.push(run(nodes / 10, speed));
    }
    // The same figures as a Markdown table (docs/operations.md, "Sizing").
    if let Some(first) = table.first() {
        let head: Vec<&str> = first.values.iter().map(|(n, _)| *n).collect();
        println!(
            "| figure | {} |",
            table
                .iter()
                .map(|f| f.label.as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        );
        println!("|---|{}", "---|".repeat(table.len()));
        for (i, name) in head.iter().enumerate() {
            let vals: Vec<&str> = table
                .iter()
                .map(|f| f.values.get(i).map_or("", |(_, v)| v.as_str()))
                .collect();
            println!("| {name} | {} |", vals.join(" | "));
        }
    }
}
