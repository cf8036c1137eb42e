//! The installed `kubectl` against `rota sim serve`: the simulated fleet of the example fleet
//! repo, served over loopback HTTP with a kubeconfig of one context per cluster.
//!
//! Covers what an operator does during a rotation: get nodes as JSON, label, cordon,
//! uncordon, a drain blocked by a singleton's PDB and completing once the PDB allows it, then
//! a CRD with custom resources created, read and watched.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// `rota sim serve` running; killed when dropped.
struct Serve {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Serve {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let workloads = dir.path().join("workloads.yaml");
    // Small and fast: two nodes per pool, the default workloads.
    std::fs::write(
        &workloads,
        "nodes: {perPool: 2}\n\
         deployments:\n\
         - {name: web, namespace: shop, replicas: 4, pdb: {minAvailable: \"50%\"}}\n\
         - {name: license-server, namespace: legacy, replicas: 1, pdb: {minAvailable: 1}}\n\
         daemonSets:\n\
         - {name: node-exporter, namespace: monitoring}\n\
         controlPlanes: {prod-use1: \"1.31\"}\n",
    )
    .unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rota"))
        .args(["sim", "serve", "--repo"])
        .arg(&repo)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--workloads")
        .arg(&workloads)
        .args(["--speed", "60", "--seed", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("rota binary");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("rota sim: ready: 7 clusters"), "{line}");
    assert!(line.contains("prod-use1"), "{line}");
    // The simulated fleet's server runs on jemalloc (`rota::allocator`), chosen in-process.
    assert!(line.trim_end().ends_with("; allocator jemalloc"), "{line}");
    Serve {
        child,
        kubeconfig,
        _dir: dir,
    }
}

impl Serve {
    fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--context", "prod-use1"])
            .args(args)
            .output()
            .expect("kubectl is installed")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }
}

#[test]
fn kubectl_operates_the_simulated_fleet() {
    let s = start();
    // Every cluster is a context.
    let contexts = s.ok(&["config", "get-contexts", "-o", "name"]);
    for c in ["canary-use1", "prod-use1", "prod-weu", "dev-usc1"] {
        assert!(contexts.lines().any(|l| l == c), "{contexts}");
    }

    // Each simulated API server reports its scenario's control plane on /version.
    let v = s.json(&["version"]);
    assert_eq!(
        (&v["serverVersion"]["major"], &v["serverVersion"]["minor"]),
        (&Value::from("1"), &Value::from("31")),
        "{v}"
    );
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["--context", "canary-use1", "version", "-o", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["serverVersion"]["minor"], "33", "the default: {v}");

    let nodes = s.json(&["get", "nodes"]);
    let items = nodes["items"].as_array().unwrap();
    assert!(!items.is_empty());
    for n in items {
        let pid = n["spec"]["providerID"].as_str().unwrap();
        assert!(pid.starts_with("aws:///us-east-1"), "{pid}");
    }

    // The singleton's node: label, cordon, uncordon.
    let pods = s.json(&["get", "pods", "-n", "legacy", "-l", "app=license-server"]);
    let node = pods["items"][0]["spec"]["nodeName"]
        .as_str()
        .unwrap()
        .to_string();
    s.ok(&["label", "node", &node, "rota.dev/test=yes"]);
    let n = s.json(&["get", "node", &node]);
    assert_eq!(n["metadata"]["labels"]["rota.dev/test"], "yes");
    s.ok(&["cordon", &node]);
    assert_eq!(
        s.json(&["get", "node", &node])["spec"]["unschedulable"],
        true
    );
    s.ok(&["uncordon", &node]);
    assert!(s.json(&["get", "node", &node])["spec"]["unschedulable"].is_null());

    // A drain is blocked by the singleton's PDB (minAvailable 1)...
    let drain = [
        "drain",
        node.as_str(),
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=4s",
    ];
    let out = s.kubectl(&drain);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drain must not pass the PDB");
    assert!(
        stderr.contains("disruption budget"),
        "kubectl reports the PDB: {stderr}"
    );
    // ...and completes once the PDB allows it.
    s.ok(&[
        "patch",
        "pdb",
        "license-server",
        "-n",
        "legacy",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"minAvailable":0}}"#,
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let out = s.ok(&drain);
    assert!(out.contains("drained"), "{out}");
    // The singleton came back on another node.
    std::thread::sleep(Duration::from_secs(2));
    let pods = s.json(&["get", "pods", "-n", "legacy", "-l", "app=license-server"]);
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_ne!(items[0]["spec"]["nodeName"].as_str().unwrap(), node);
    assert_eq!(items[0]["status"]["phase"], "Running");
    let on_node = s.json(&[
        "get",
        "pods",
        "-A",
        "--field-selector",
        &format!("spec.nodeName={node}"),
    ]);
    assert!(
        on_node["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["metadata"]["namespace"] == "monitoring"),
        "only daemon pods stay on a drained node"
    );

    // A CRD and its custom resources: create, get, watch.
    let dir = tempfile::tempdir().unwrap();
    let crd = dir.path().join("crd.yaml");
    std::fs::write(
        &crd,
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#,
    )
    .unwrap();
    // The simulated API serves no OpenAPI documents, so client-side validation is off.
    s.ok(&["apply", "--validate=false", "-f", crd.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(300));
    let cr = dir.path().join("cr.yaml");
    std::fs::write(
        &cr,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}\n",
    )
    .unwrap();
    s.ok(&["create", "--validate=false", "-f", cr.to_str().unwrap()]);
    let w = s.json(&["get", "widget", "w1"]);
    assert_eq!(w["spec"]["size"], 3);
    let watch = s.kubectl(&["get", "widgets", "--watch", "--request-timeout=2s"]);
    let out = String::from_utf8_lossy(&watch.stdout);
    assert!(out.contains("w1"), "watch lists the resource: {out}");
}

#[test]
fn bad_profiles_and_repos_are_refused_with_their_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    let faults = dir.path().join("faults.yaml");
    std::fs::write(&faults, "api: {throttleRate: 1.5}\n").unwrap();
    let run = |extra: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_rota"))
            .args(["sim", "serve", "--kubeconfig"])
            .arg(dir.path().join("kubeconfig"))
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[
        "--repo".as_ref(),
        repo.as_os_str(),
        "--faults".as_ref(),
        faults.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("faults.yaml: api.throttleRate: 1.5 is not a share between 0 and 1"),
        "{stderr}"
    );
    let out = run(&["--repo".as_ref(), dir.path().join("nope").as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("kubeconfig").exists(), "nothing written");
}

/// A simulated cluster that falls behind its clock says so on `rota sim serve`'s stderr:
/// a pod is deleted with a grace period, the process is stopped (SIGSTOP) for longer than
/// that period, and when it runs again the pod's deletion is handled late, past the 10 s of
/// simulated time after which the simulated fleet warns.
#[test]
fn a_simulated_cluster_behind_its_clock_warns_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let log = dir.path().join("stderr.log");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rota"))
        .args(["sim", "serve", "--repo"])
        .arg(&repo)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--speed", "60", "--seed", "3"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("rota binary");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("rota sim: ready"), "{line}");
    let s = Serve {
        child,
        kubeconfig,
        _dir: dir,
    };
    let pods = s.ok(&[
        "get",
        "pods",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}",
    ]);
    let (ns, pod) = pods
        .split_whitespace()
        .next()
        .and_then(|p| p.split_once('/'))
        .expect("a pod");
    // 30 s of grace at 60x: due half a real second from now.
    s.ok(&[
        "delete",
        "pod",
        "-n",
        ns,
        pod,
        "--grace-period=30",
        "--wait=false",
    ]);
    let pid = s.child.id().to_string();
    let signal = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_secs(3));
    signal("-CONT");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("behind its clock") {
            assert!(text.contains("lower --speed"), "{text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no lag warning on stderr after the sim was stopped for 3 s at 60x:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
