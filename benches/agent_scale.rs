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
//! fleet hour, the bytes the agent received from the API server, and the sim's peak memory;
//! the agent's resident size per node and per pod, its pool passes during the rotation
//! with their time percentiles (its `rota_reconcile_duration_seconds`), and how far the
//! simulated cluster ran behind its clock (`rota_sim_lag_seconds_max` of its `/metrics`, its
//! late ticks and lag warnings): a run whose sim lagged measured the machine, not rota.
//! Lines are `agent_scale <size> <figure> <value>` so a script can read them.
//!
//! `cargo bench --bench figures -- agent_scale` runs 500 nodes / 15,000 pods, then 5,000 / 150,000
//! (`ROTA_SCALE_SIZES=500` or `=5000` runs one; the 10 pools hold a tenth each, so
//! `ROTA_SCALE_SIZES=30,500,5000` rotates pools of 3, 50 and 500 nodes; `=20000` the biggest
//! clusters, 600,000 pods, best at `ROTA_SCALE_SPEED=20`). `ROTA_SCALE_BIN` names the `rota`
//! binary to measure (a release build, whatever profile built this harness). `ROTA_SCALE_SPEED` (30) is the sim's and the
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

/// The `rota` binary measured: `ROTA_SCALE_BIN` if set (a release build, while this harness
/// is built in any profile), else the one cargo built beside the bench.
fn rota() -> PathBuf {
    std::env::var_os("ROTA_SCALE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rota")))
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
            // The bench's own reads of the simulated API server's lag.
            "GET" if r.target.starts_with("/metrics") => {}
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
        .stderr(std::fs::File::create(tmp.path().join("sim.log")).unwrap())
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
        // Any free port (logged): the pass times come from its `/metrics`.
        .env("ROTA_METRICS_ADDR", "127.0.0.1:0")
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

    let metrics = metrics_addr(&agent_log);
    let passes_before = reconcile_histogram(metrics.as_deref());
    fig.put(
        "sim_lag_max_seconds_adoption",
        sim_metric(&kubeconfig, "rota_sim_lag_seconds_max"),
    );
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
    let passes = reconcile_histogram(metrics.as_deref()).since(&passes_before);
    let sim_lag_max = sim_metric(&kubeconfig, "rota_sim_lag_seconds_max");
    let sim_late_ticks = sim_metric(&kubeconfig, "rota_sim_late_ticks_total");
    let sim_warnings = std::fs::read_to_string(tmp.path().join("sim.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("behind its clock"))
        .count();
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
    fig.put(
        "agent_rss_kib_per_node",
        format!("{:.2}", steady as f64 / f64::from(nodes)),
    );
    fig.put(
        "agent_rss_bytes_per_pod",
        format!("{:.0}", steady as f64 * 1024.0 / f64::from(nodes * 30)),
    );
    fig.put("pool_passes_during_rotation", passes.count);
    for (name, q) in [
        ("pass_seconds_p50", 0.5),
        ("pass_seconds_p90", 0.9),
        ("pass_seconds_p99", 0.99),
    ] {
        fig.put(name, passes.quantile(q));
    }
    fig.put("sim_lag_max_seconds", sim_lag_max);
    fig.put("sim_late_ticks", sim_late_ticks);
    fig.put("sim_lag_warnings", sim_warnings);
    fig
}

/// Where the agent serves `/metrics` (its log names the port it got).
fn metrics_addr(agent_log: &Path) -> Option<String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let log = std::fs::read_to_string(agent_log).unwrap_or_default();
        if let Some(l) = log.lines().find(|l| l.contains("serving metrics")) {
            // `addr=127.0.0.1:PORT`, whatever the format's colours and quotes around it.
            let (_, rest) = l.split_once("127.0.0.1:")?;
            let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
            return Some(format!("127.0.0.1:{port}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// A plain HTTP GET of `path` on `addr` (loopback, no TLS): the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut c) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = write!(
        c,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s.split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string())
}

/// `rota_reconcile_duration_seconds` summed over the pools: the count in each bucket.
#[derive(Default)]
struct Passes {
    /// (upper bound, cumulative count), in the order of the bounds.
    buckets: Vec<(f64, u64)>,
    count: u64,
}

impl Passes {
    /// The passes between `before` and this one.
    fn since(&self, before: &Passes) -> Passes {
        let prior = |le: f64| {
            before
                .buckets
                .iter()
                .find(|(b, _)| *b == le)
                .map_or(0, |(_, n)| *n)
        };
        Passes {
            buckets: self
                .buckets
                .iter()
                .map(|(le, n)| (*le, n.saturating_sub(prior(*le))))
                .collect(),
            count: self.count.saturating_sub(before.count),
        }
    }

    /// The bucket bound below which a share `q` of the passes took: `0.25` means at most
    /// 0.25 s; `>10` more than the largest bound.
    fn quantile(&self, q: f64) -> String {
        if self.count == 0 {
            return "none".into();
        }
        let want = (q * self.count as f64).ceil() as u64;
        for (le, n) in &self.buckets {
            if *n >= want {
                return if le.is_infinite() {
                    let top = self
                        .buckets
                        .iter()
                        .map(|(b, _)| *b)
                        .filter(|b| b.is_finite())
                        .fold(0.0, f64::max);
                    format!(">{top}")
                } else {
                    format!("{le}")
                };
            }
        }
        "none".into()
    }
}

fn reconcile_histogram(addr: Option<&str>) -> Passes {
    let Some(addr) = addr else {
        return Passes::default();
    };
    let text = http_get(addr, "/metrics");
    let mut by_le: std::collections::BTreeMap<String, u64> = Default::default();
    let mut count = 0;
    for l in text.lines() {
        let Some((name, value)) = l.rsplit_once(' ') else {
            continue;
        };
        let value: u64 = value.parse().unwrap_or(0);
        if name.starts_with("rota_reconcile_duration_seconds_bucket{") {
            if let Some(le) = name.split("le=\"").nth(1).and_then(|r| r.split('"').next()) {
                *by_le.entry(le.to_string()).or_default() += value;
            }
        } else if name.starts_with("rota_reconcile_duration_seconds_count") {
            count += value;
        }
    }
    let mut buckets: Vec<(f64, u64)> = by_le
        .into_iter()
        .map(|(le, n)| (le.parse().unwrap_or(f64::INFINITY), n))
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Passes { buckets, count }
}

/// A value of the simulated API server's `/metrics` (`rota_sim_lag_seconds_max`, ...), read
/// with kubectl (`unavailable` without it).
fn sim_metric(kubeconfig: &Path, name: &str) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", "scale", "get", "--raw", "/metrics"])
        .output();
    let Ok(out) = out else {
        return "unavailable".into();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .map_or_else(|| "unavailable".into(), str::to_string)
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
    // Above 5,000 nodes a batch's drain is thousands of evictions per pool at once, more than
    // the simulated API server on two cores serves within drain.timeout at 30x or 20x (see
    // docs/operations.md, "20,000 nodes"): those sizes run at 10x unless told otherwise.
    let speed_env: Option<f64> = std::env::var("ROTA_SCALE_SPEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let speed = |nodes: u32| speed_env.unwrap_or(if nodes > 5000 { 10.0 } else { 30.0 });
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
        table.push(run(nodes / 10, speed(nodes)));
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
