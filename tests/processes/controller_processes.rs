//! `rota sim serve` and `rota controller` as separate processes, driven with the installed
//! `kubectl`: the CRD from `rota crd | kubectl apply`, a NodePoolRotation manifest applied
//! with kubectl, the pool rotated by the controller (which reaches the simulated cloud over
//! the loopback endpoint the kubeconfig names), progress and the end seen with
//! `kubectl get nodepoolrotations`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SPEED: &str = "60";
const CONTEXT: &str = "dev-usc1";
const NEW_IMAGE: &str = "projects/acme-images/global/images/general-2026-12-1";

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary under test; `ROTA_TEST_BIN` overrides it (a copy, when several worktrees
/// share one target directory and rebuild it under a running test).
fn rota() -> Command {
    Command::new(
        std::env::var("ROTA_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rota").into()),
    )
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", CONTEXT])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(kubeconfig, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn kubectl_applied_rotation_runs_in_a_separate_controller_process() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = dir.path().join("kubeconfig");
    let workloads = dir.path().join("workloads.yaml");
    std::fs::write(
        &workloads,
        "nodes: {perPool: 3}\n\
         deployments:\n\
         - {name: web, namespace: shop, replicas: 6, pdb: {minAvailable: \"50%\"}, readyAfter: 5s}\n\
         daemonSets:\n\
         - {name: node-exporter, namespace: monitoring}\n",
    )
    .unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    let mut serve = rota()
        .args(["sim", "serve", "--repo"])
        .arg(&repo)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--workloads")
        .arg(&workloads)
        .args(["--speed", SPEED, "--seed", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("rota binary");
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _serve = Proc(serve);
    assert!(line.contains("; cloud http://127.0.0.1:"), "{line}");

    // The CRD, as an operator installs it.
    let crd = rota().arg("crd").output().unwrap();
    assert!(crd.status.success());
    ok(
        &kubeconfig,
        &["apply", "--validate=false", "-f", "-"],
        Some(&String::from_utf8(crd.stdout).unwrap()),
    );
    ok(
        &kubeconfig,
        &[
            "wait",
            "--for",
            "condition=established",
            "crd/nodepoolrotations.rota.dev",
        ],
        None,
    );

    // The pool's desired state as the fleet repo resolves it, moved to a newer image.
    let render = rota()
        .args(["render", "--format", "json", "--cluster", CONTEXT, "--repo"])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(render.status.success());
    let cluster: Value = serde_json::from_slice(&render.stdout).unwrap();
    let pool = cluster["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "general")
        .unwrap()
        .clone();
    // The example's pods gate allows 2% not Ready: 0 pods in a 3-node pool, where a
    // replacement pod is briefly not Ready after each eviction. Loosened for this pool size.
    let mut gates = pool["gates"].clone();
    for g in gates.as_array_mut().unwrap() {
        if let Some(p) = g["check"].get_mut("pods") {
            p["maxNotReady"] = json!("50%");
            g["failureLimit"] = json!(2);
        }
    }
    let mut policy = pool["policy"].clone();
    policy["batchSoak"] = json!("1m");
    let manifest = json!({
        "apiVersion": "rota.dev/v1alpha1",
        "kind": "NodePoolRotation",
        "metadata": {"name": "general"},
        "spec": {
            "cluster": CONTEXT,
            "pool": "general",
            "group": pool["group"],
            "nodeSelector": pool["nodeSelector"],
            "channel": pool["channel"],
            "version": "2026.12.1",
            "image": NEW_IMAGE,
            "policy": policy,
            "gates": gates,
            "sourceCommit": "0123abc",
            "mode": "reconcile",
        }
    });
    ok(
        &kubeconfig,
        &["apply", "--validate=false", "-f", "-"],
        Some(&serde_yaml::to_string(&manifest).unwrap()),
    );

    // The controller, in its own process, finds the cloud through the kubeconfig.
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let controller = rota()
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--context", CONTEXT, "--cloud", "sim", "--speed", SPEED])
        .args(["--cluster", CONTEXT])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
        .env("ROTA_LOG", "rota=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let _controller = Proc(controller);

    let start = Instant::now();
    let mut seen = Vec::new();
    let last = loop {
        let table = ok(&kubeconfig, &["get", "nodepoolrotations"], None);
        let row = table.lines().nth(1).unwrap_or_default().to_string();
        if seen.last() != Some(&row) {
            seen.push(row.clone());
        }
        if row.contains("Succeeded") || row.contains("Paused") || row.contains("Failed") {
            break table;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "no end within 180 s:\n{}",
            seen.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let history = seen.join("\n");
    assert!(last.contains("Succeeded"), "{history}");
    // Its metrics carry the cluster it was told (`--cluster`), as an agent's do.
    let scraped = {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        body
    };
    // The process-wide series too (the pools' carry their NodePoolRotation's cluster anyway).
    for series in ["rota_leader", "rota_cloud_calls_total"] {
        assert!(
            scraped
                .lines()
                .any(|l| l.starts_with(&format!("{series}{{"))
                    && l.contains(&format!("cluster=\"{CONTEXT}\""))),
            "no {series} series labelled with the cluster:\n{}",
            scraped
                .lines()
                .filter(|l| l.starts_with(series))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(
        !scraped.contains("cluster=\"\""),
        "a series without its cluster"
    );
    assert!(
        last.lines().next().unwrap().contains("PHASE"),
        "printer columns: {last}"
    );
    assert!(
        history.contains("Rotating"),
        "no progress shown:\n{history}"
    );
    // Every node of the pool boots the new image, and the column counts say so.
    let nodes: Value = serde_json::from_str(&ok(
        &kubeconfig,
        &[
            "get",
            "nodes",
            "-l",
            "cloud.google.com/gke-nodepool=general",
            "-o",
            "json",
        ],
        None,
    ))
    .unwrap();
    let items = nodes["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{nodes}");
    for n in items {
        assert_eq!(n["status"]["nodeInfo"]["osImage"], NEW_IMAGE, "{n}");
        assert!(n["spec"]["unschedulable"].is_null(), "{n}");
    }
    let wide = ok(&kubeconfig, &["get", "npr", "general", "-o", "wide"], None);
    assert!(wide.contains("of 3 node(s) on 2026.12.1"), "{wide}");
}
