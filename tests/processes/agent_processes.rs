//! `rota sim serve` and `rota agent` as separate processes on a local repo: a commit that
//! bumps an image rotates the pool, and `rota status` shows success.

use crate::support::canary_fleet;
use crate::support::git::{commit_and_push, git, origin_and_clone, rota};
use crate::support::processes::{Kill, SimServe};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fleet_yaml(version: &str) -> String {
    canary_fleet::canary_fleet_yaml(version, "{batch: 2}", "")
}

/// Four nodes a pool and a Deployment behind a PDB that lets one pod go at a time.
const WORKLOADS: &str = "nodes: {perPool: 4, registerAfter: 15s, readyAfter: 20s}\n\
    deployments:\n\
    - {name: web, namespace: shop, replicas: 4, pdb: {maxUnavailable: 1}}\n";

fn status_json(origin: &Path) -> (bool, serde_json::Value) {
    let out = Command::new(rota())
        .args(["status", "--format", "json", "--rev", "main", "--repo"])
        .arg(origin)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (out.status.success(), v)
}

#[test]
fn a_bump_rotates_the_pool_and_rota_status_shows_success() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
    commit_and_push(&work, "fleet");

    let kubeconfig = tmp.path().join("kubeconfig");
    let (_sim, line) = SimServe::new(&work, &kubeconfig)
        .workloads(&tmp.path().join("workloads.yaml"), WORKLOADS)
        .speed(30)
        .start();
    assert!(line.starts_with("rota sim: ready: 1 clusters"), "{line}");

    let log = std::fs::File::create(tmp.path().join("agent.log")).unwrap();
    let agent = Command::new(rota())
        .arg("agent")
        .env("ROTA_REPO", &origin)
        .env("ROTA_CLUSTER", "canary-1")
        // The simulated cluster has no CRD yet: the agent installs it (the sim grants it).
        .env("ROTA_INSTALL_CRD", "true")
        .env("ROTA_KUBECONFIG", &kubeconfig)
        .env("ROTA_CONTEXT", "canary-1")
        .env("ROTA_STATE_DIR", tmp.path().join("state"))
        .env("ROTA_POLL", "1s")
        .env("ROTA_RESYNC", "1s")
        .env("ROTA_SPEED", "30")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut agent = Kill(agent);
    let log_path = tmp.path().join("agent.log");
    let agent_log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let mut wait_success = |what: &str| {
        let start = Instant::now();
        loop {
            if let Ok(Some(code)) = agent.0.try_wait() {
                panic!("rota agent exited ({code}):\n{}", agent_log());
            }
            let (ok, v) = status_json(&origin);
            if ok {
                return v;
            }
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "{what}: rota status never showed success: {v}\nagent log:\n{}",
                agent_log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_success("initial commit");

    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.2")).unwrap();
    git(&work, &["commit", "-q", "-am", "canary: general 2026.11.2"]);
    git(&work, &["push", "-q", "origin", "main"]);
    let v = wait_success("bump");
    let pool = &v["clusters"][0]["pools"][0];
    assert_eq!(pool["target"], "general@2026.11.2", "{v}");
    assert_eq!(pool["description"], "4/4 nodes on general@2026.11.2", "{v}");
    assert_eq!(pool["onTarget"], 4);

    // The human rendering of the same commit.
    let out = Command::new(rota())
        .args(["status", "--repo"])
        .arg(&origin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[####################] 4/4 nodes on general@2026.11.2"),
        "{text}"
    );
    // Really rotated: the nodes run the new image (kubectl against the simulated cluster).
    let nodes = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--context",
            "canary-1",
            "get",
            "npr",
            "general",
            "-o",
            "jsonpath={.spec.image} {.status.phase}",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&nodes.stdout),
        "ami-0f9e8d7c6b5a40312 Succeeded"
    );
}

/// Without `--install-crd` the agent does not install the CRD (its RBAC in deploy/ grants no
/// write on CRDs): where the CRD is missing it stops at once and says how to install it.
#[test]
fn an_agent_without_the_crd_stops_at_start_and_says_how_to_install_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
    commit_and_push(&work, "fleet");
    let kubeconfig = tmp.path().join("kubeconfig");
    let (_sim, line) = SimServe::new(&work, &kubeconfig).start();
    assert!(line.starts_with("rota sim: ready: 1 clusters"), "{line}");
    let out = Command::new(rota())
        .arg("agent")
        .env("ROTA_REPO", &origin)
        .env("ROTA_CLUSTER", "canary-1")
        .env("ROTA_KUBECONFIG", &kubeconfig)
        .env("ROTA_CONTEXT", "canary-1")
        .env("ROTA_STATE_DIR", tmp.path().join("state"))
        .env_remove("ROTA_INSTALL_CRD")
        .args(["--metrics-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the NodePoolRotation CRD is not installed in this cluster")
            && err.contains("rota crd | kubectl apply -f -")
            && err.contains("--install-crd"),
        "{err}"
    );
    // A working copy as --repo is refused before anything else, saying why.
    let out = Command::new(rota())
        .arg("agent")
        .env("ROTA_REPO", &work)
        .env("ROTA_CLUSTER", "canary-1")
        .env("ROTA_KUBECONFIG", &kubeconfig)
        .env("ROTA_CONTEXT", "canary-1")
        .env("ROTA_STATE_DIR", tmp.path().join("state"))
        .env("ROTA_INSTALL_CRD", "true")
        .args(["--metrics-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("a working copy (not a bare repository)"),
        "{err}"
    );
}

fn holder(kubeconfig: &Path) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--context",
            "canary-1",
            "-n",
            "kube-system",
            "get",
            "lease",
            "-o",
            "jsonpath={.items[0].spec.holderIdentity}",
        ])
        .output()
        .expect("kubectl is needed (scripts/test installs it)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The 2-replica Deployment's situation: two `rota agent` processes for one cluster. Only the
/// leader admits commits, posts statuses and pushes notes (no push is ever rejected as
/// non-fast-forward); killed, it is replaced by the other, which finishes the next commit.
#[test]
fn two_agents_one_writer_and_the_standby_takes_over() {
    let tmp = tempfile::tempdir().unwrap();
    let (origin, work) = origin_and_clone(tmp.path(), "work");
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
    commit_and_push(&work, "fleet");

    let kubeconfig = tmp.path().join("kubeconfig");
    let (_sim, line) = SimServe::new(&work, &kubeconfig)
        .workloads(&tmp.path().join("workloads.yaml"), WORKLOADS)
        .speed(30)
        .start();
    assert!(line.starts_with("rota sim: ready: 1 clusters"), "{line}");

    let start_agent = |id: &str| {
        let log = std::fs::File::create(tmp.path().join(format!("{id}.log"))).unwrap();
        let child = Command::new(rota())
            .arg("agent")
            .env("ROTA_REPO", &origin)
            .env("ROTA_CLUSTER", "canary-1")
            .env("ROTA_KUBECONFIG", &kubeconfig)
            .env("ROTA_CONTEXT", "canary-1")
            .env("ROTA_STATE_DIR", tmp.path().join(format!("state-{id}")))
            .env("ROTA_IDENTITY", id)
            // Two agents on one machine: each its own metrics port.
            .env("ROTA_METRICS_ADDR", "127.0.0.1:0")
            .env("ROTA_INSTALL_CRD", "true")
            .env("ROTA_POLL", "1s")
            .env("ROTA_RESYNC", "1s")
            .env("ROTA_SPEED", "30")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Kill(child)
    };
    let log_of = |id: &str| {
        std::fs::read_to_string(tmp.path().join(format!("{id}.log"))).unwrap_or_default()
    };
    let mut agents = vec![("rota-a", start_agent("rota-a"))];
    std::thread::sleep(Duration::from_millis(500));
    agents.push(("rota-b", start_agent("rota-b")));
    let logs = || {
        ["rota-a", "rota-b"]
            .iter()
            .map(|id| format!("--- {id}:\n{}", log_of(id)))
            .collect::<String>()
    };
    let wait_success = |what: &str| {
        let start = Instant::now();
        loop {
            let (ok, v) = status_json(&origin);
            if ok {
                return v;
            }
            assert!(
                start.elapsed() < Duration::from_secs(240),
                "{what}: rota status never showed success: {v}\n{}",
                logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_success("initial commit");
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.2")).unwrap();
    git(&work, &["commit", "-q", "-am", "canary: general 2026.11.2"]);
    git(&work, &["push", "-q", "origin", "main"]);
    let v = wait_success("bump");
    assert_eq!(v["clusters"][0]["pools"][0]["onTarget"], 4, "{v}");

    let leader = holder(&kubeconfig);
    let standby = match leader.as_str() {
        "rota-a" => "rota-b",
        "rota-b" => "rota-a",
        other => panic!("lease held by {other:?}\n{}", logs()),
    };
    // Only the leader admitted commits (and so reported them); no notes push of either was
    // refused as non-fast-forward, as it was when both wrote.
    assert!(
        log_of(&leader).contains("acting on fleet commit"),
        "{}",
        logs()
    );
    assert!(
        !log_of(standby).contains("acting on fleet commit"),
        "{}",
        logs()
    );
    for bad in ["non-fastforwardable", "notes push rejected"] {
        assert!(!logs().contains(bad), "{bad}:\n{}", logs());
    }

    // Kill the leader (no clean shutdown): the standby takes the Lease and finishes the
    // next commit on its own.
    let i = agents.iter().position(|(id, _)| *id == leader).unwrap();
    drop(agents.remove(i));
    std::fs::write(work.join("fleet.yaml"), fleet_yaml("2026.11.1")).unwrap();
    git(
        &work,
        &["commit", "-q", "-am", "canary: general back to 2026.11.1"],
    );
    git(&work, &["push", "-q", "origin", "main"]);
    let v = wait_success("after the leader was killed");
    assert_eq!(
        v["clusters"][0]["pools"][0]["target"], "general@2026.11.1",
        "{v}"
    );
    assert_eq!(holder(&kubeconfig), standby, "{}", logs());
    assert!(
        log_of(standby).contains("acting on fleet commit"),
        "{}",
        logs()
    );
    assert!(
        !log_of(standby).contains("non-fastforwardable"),
        "{}",
        logs()
    );
}
