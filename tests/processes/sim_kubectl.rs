//! The installed `kubectl` (a real client, with its own discovery, patches and drain logic)
//! against the simulated API server over loopback HTTP.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rota::sim::apiserver::{ApiServer, HttpServer, serve_http};
use rota::sim::store::{ResourceType, Store};
use rota::sim::{kubeconfig, pdb};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

struct Cluster {
    store: Store,
    _http: HttpServer,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn cluster() -> Cluster {
    let store = Store::new();
    // Grace periods run 100x faster so a drain finishes in moments.
    let http = serve_http(ApiServer::new(store.clone()).with_speed(100.0))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    kubeconfig::write(&kubeconfig, &[("sim-eu".to_string(), http.url())]).unwrap();
    Cluster {
        store,
        _http: http,
        _dir: dir,
        kubeconfig,
    }
}

/// Runs kubectl off the async threads (it is a blocking child process).
async fn kubectl(kc: &Path, args: &[&str]) -> Output {
    let kc = kc.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kc)
            .args(&args)
            .env("HOME", kc.parent().unwrap())
            .output()
            .expect("kubectl is installed")
    })
    .await
    .unwrap()
}

async fn kubectl_ok(kc: &Path, args: &[&str]) -> String {
    let out = kubectl(kc, args).await;
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn node(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "spec": {"providerID": format!("aws:///eu-west-1a/i-{name}")},
           "status": {"conditions": [{"type": "Ready", "status": "True"}],
                      "nodeInfo": {"kubeletVersion": "v1.33.0"}}})
}

fn running_pod(name: &str, node: &str, labels: Value, owner: Option<(&str, &str, &str)>) -> Value {
    let mut p = json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "app", "image": "registry.example/app:1"}]},
        "status": {"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0}]}
    });
    if let Some((kind, oname, uid)) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
            "name": oname, "uid": uid, "controller": true}]);
    }
    p
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_nodes_label_cordon_and_drain_blocked_by_a_pdb() {
    let c = cluster().await;
    let s = &c.store;
    let kc = c.kubeconfig.as_path();
    let _pdbs = pdb::spawn_controller(s.clone());
    for n in ["n1", "n2"] {
        s.create(&ResourceType::nodes(), None, node(n)).unwrap();
    }

    let out = kubectl_ok(kc, &["get", "nodes", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["kind"], "List");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["n1", "n2"]);
    assert_eq!(
        list["items"][0]["spec"]["providerID"],
        "aws:///eu-west-1a/i-n1"
    );

    // Human output goes through the server-side Table.
    let out = kubectl_ok(kc, &["get", "nodes"]).await;
    assert!(out.starts_with("NAME"), "{out}");
    assert!(
        out.contains("n1") && out.contains("Ready") && out.contains("v1.33.0"),
        "{out}"
    );

    kubectl_ok(kc, &["label", "node", "n1", "rota.dev/pool=blue"]).await;
    let n1 = s.get(&ResourceType::nodes(), None, "n1").unwrap();
    assert_eq!(n1["metadata"]["labels"]["rota.dev/pool"], "blue");
    let out = kubectl_ok(
        kc,
        &["get", "nodes", "-l", "rota.dev/pool=blue", "-o", "name"],
    )
    .await;
    assert_eq!(out.trim(), "node/n1");
    kubectl_ok(kc, &["annotate", "node", "n1", "rota.dev/batch=1"]).await;
    assert_eq!(
        s.get(&ResourceType::nodes(), None, "n1").unwrap()["metadata"]["annotations"]["rota.dev/batch"],
        "1"
    );

    kubectl_ok(kc, &["cordon", "n1"]).await;
    let n1 = s.get(&ResourceType::nodes(), None, "n1").unwrap();
    assert_eq!(n1["spec"]["unschedulable"], true);
    let out = kubectl_ok(kc, &["get", "node", "n1"]).await;
    assert!(out.contains("Ready,SchedulingDisabled"), "{out}");
    // An event written the way kube-rs' Recorder does (events.k8s.io/v1) is what
    // `kubectl get events` and `kubectl describe` show (core v1).
    s.create(
        &ResourceType::events_v1(),
        Some("default"),
        json!({
        "metadata": {"name": "n1.cordon"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Node", "name": "n1", "uid": uid(&n1)}, "reason": "Cordoned",
        "note": "rota cordoned n1 for batch 1", "type": "Normal", "action": "Cordon",
        "reportingController": "rota", "reportingInstance": "rota-0"}),
    )
    .unwrap();
    let out = kubectl_ok(kc, &["get", "events", "-o", "json"]).await;
    let ev: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ev["items"][0]["message"], "rota cordoned n1 for batch 1");
    assert_eq!(ev["items"][0]["involvedObject"]["name"], "n1");
    let out = kubectl_ok(kc, &["get", "events"]).await;
    assert!(out.contains("node/n1") && out.contains("Cordoned"), "{out}");
    let out = kubectl_ok(kc, &["describe", "node", "n1"]).await;
    assert!(out.contains("Unschedulable:      true"), "{out}");
    kubectl_ok(kc, &["uncordon", "n1"]).await;
    let n1 = s.get(&ResourceType::nodes(), None, "n1").unwrap();
    assert_ne!(n1["spec"]["unschedulable"], true);

    // Workloads on n1: a singleton Deployment pod guarded by a PDB that forbids any
    // disruption, a DaemonSet pod, and a pod with emptyDir data.
    let ns = Some("default");
    let dep = s
        .create(
            &ResourceType::deployments(),
            ns,
            json!({"metadata": {"name": "solo"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "solo"}}}}),
        )
        .unwrap();
    let rs = s
        .create(
            &ResourceType::replicasets(),
            ns,
            json!({"metadata": {"name": "solo-1",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "solo",
                             "uid": uid(&dep), "controller": true}]},
        "spec": {"replicas": 1}}),
        )
        .unwrap();
    s.create(
        &ResourceType::pods(),
        ns,
        running_pod(
            "solo-1-abcde",
            "n1",
            json!({"app": "solo"}),
            Some(("ReplicaSet", "solo-1", &uid(&rs))),
        ),
    )
    .unwrap();
    let ds = s
        .create(
            &ResourceType::daemonsets(),
            ns,
            json!({"metadata": {"name": "logs"},
        "spec": {"selector": {"matchLabels": {"app": "logs"}}}}),
        )
        .unwrap();
    s.create(
        &ResourceType::pods(),
        ns,
        running_pod(
            "logs-n1",
            "n1",
            json!({"app": "logs"}),
            Some(("DaemonSet", "logs", &uid(&ds))),
        ),
    )
    .unwrap();
    let cache_rs = s
        .create(
            &ResourceType::replicasets(),
            ns,
            json!({"metadata": {"name": "cache-1"},
        "spec": {"replicas": 1}}),
        )
        .unwrap();
    let mut cache = running_pod(
        "cache-1-xyz",
        "n1",
        json!({"app": "cache"}),
        Some(("ReplicaSet", "cache-1", &uid(&cache_rs))),
    );
    cache["spec"]["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
    s.create(&ResourceType::pods(), ns, cache).unwrap();
    s.create(
        &ResourceType::pods(),
        ns,
        running_pod("other", "n2", json!({"app": "solo"}), None),
    )
    .unwrap();
    s.create(
        &ResourceType::pdbs(),
        ns,
        json!({"metadata": {"name": "solo"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "solo"}}}}),
    )
    .unwrap();

    // The disruption controller runs concurrently: wait for its first status.
    tokio::time::timeout(Duration::from_secs(10), async {
        while s.get(&ResourceType::pdbs(), ns, "solo").unwrap()["status"]["observedGeneration"] != 1
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("PDB status computed");
    let out = kubectl_ok(kc, &["get", "pdb", "solo", "-o", "json"]).await;
    let p: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(p["status"]["disruptionsAllowed"], 0, "{p}");
    assert_eq!(p["status"]["currentHealthy"], 2);
    assert_eq!(p["status"]["desiredHealthy"], 2);
    // The documentation's `kubectl get poddisruptionbudgets` view.
    let out = kubectl_ok(kc, &["get", "poddisruptionbudgets"]).await;
    let mut rows = out.lines();
    let header: Vec<&str> = rows
        .next()
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE"
        ]
    );
    let row: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["solo", "2", "N/A", "0"]);
    let out = kubectl_ok(
        kc,
        &[
            "get",
            "pods",
            "--field-selector",
            "spec.nodeName=n1",
            "-o",
            "name",
        ],
    )
    .await;
    assert_eq!(out.lines().count(), 3, "{out}");

    // Drain: cordons, evicts the cache pod, skips the DaemonSet pod, and keeps retrying the
    // singleton (429) until the budget is relaxed.
    let kcs = kc.to_path_buf();
    let mut drain = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kcs)
        .args([
            "drain",
            "n1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=120s",
        ])
        .env("HOME", kcs.parent().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(drain.stderr.take().unwrap()).lines();
    let blocked = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(l) = stderr.next_line().await.unwrap() {
            if l.contains("Cannot evict pod as it would violate the pod's disruption budget") {
                return l;
            }
        }
        panic!("drain ended without hitting the PDB");
    })
    .await
    .expect("drain reports the PDB block");
    assert!(blocked.contains("solo-1-abcde"), "{blocked}");
    assert!(
        s.get(&ResourceType::pods(), ns, "solo-1-abcde").is_ok(),
        "still running while blocked"
    );
    assert_eq!(
        s.get(&ResourceType::nodes(), None, "n1").unwrap()["spec"]["unschedulable"],
        true
    );
    // The emptyDir pod is evicted meanwhile (drain evicts pods concurrently, so it may come
    // after the first 429): it goes away while the singleton stays blocked.
    tokio::time::timeout(Duration::from_secs(30), async {
        while s.get(&ResourceType::pods(), ns, "cache-1-xyz").is_ok() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("emptyDir pod evicted");
    assert!(s.get(&ResourceType::pods(), ns, "solo-1-abcde").is_ok());

    // Relax the budget (through kubectl too); the next retry goes through.
    kubectl_ok(
        kc,
        &[
            "patch",
            "pdb",
            "solo",
            "--type=merge",
            "-p",
            r#"{"spec":{"minAvailable":1}}"#,
        ],
    )
    .await;
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
        drain.wait().await.unwrap()
    })
    .await
    .expect("drain completes once the PDB allows");
    let mut rest = String::new();
    if let Some(mut o) = drain.stdout.take() {
        use tokio::io::AsyncReadExt;
        o.read_to_string(&mut rest).await.unwrap();
    }
    assert!(status.success(), "drain failed: {rest}");
    assert!(rest.contains("node/n1 drained"), "{rest}");
    let left: Vec<String> = s
        .list(
            &ResourceType::pods(),
            None,
            &rota::sim::store::ListOptions::fields("spec.nodeName=n1"),
        )
        .unwrap()
        .0
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, ["logs-n1"], "only the DaemonSet pod stays");
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.rota.dev
spec:
  group: example.rota.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
        - {name: Phase, type: string, jsonPath: .status.phase}
        - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_crd_then_creates_gets_and_watches_its_resources() {
    let c = cluster().await;
    let kc = c.kubeconfig.as_path();
    let dir = kc.parent().unwrap();
    std::fs::write(dir.join("crd.yaml"), CRD).unwrap();
    let out = kubectl_ok(kc, &["apply", "-f", dir.join("crd.yaml").to_str().unwrap()]).await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/widgets.example.rota.dev created"
        ),
        "{out}"
    );
    // Applying again is a no-op.
    let out = kubectl_ok(kc, &["apply", "-f", dir.join("crd.yaml").to_str().unwrap()]).await;
    assert!(out.contains("unchanged"), "{out}");

    std::fs::write(
        dir.join("w1.yaml"),
        "apiVersion: example.rota.dev/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n",
    )
    .unwrap();
    kubectl_ok(kc, &["create", "-f", dir.join("w1.yaml").to_str().unwrap()]).await;
    let out = kubectl_ok(kc, &["get", "widgets", "w1", "-o", "json"]).await;
    let w: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(w["spec"]["size"], 3);
    // The CRD's printer columns, through the short name; status written by a controller.
    let rt = c
        .store
        .resource_type("example.rota.dev", "widgets")
        .unwrap();
    c.store
        .modify(&rt, Some("default"), "w1", |w| {
            w["status"] = json!({"phase": "Ready"});
            Ok(())
        })
        .unwrap();
    let out = kubectl_ok(kc, &["get", "wd"]).await;
    let mut rows = out.lines();
    let header: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "PHASE", "AGE"]);
    let row: Vec<&str> = rows.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "3", "Ready"]);
    let again = kubectl(kc, &["create", "-f", dir.join("w1.yaml").to_str().unwrap()]).await;
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("AlreadyExists"),
        "{:?}",
        again
    );

    // Watch: kubectl prints the current widget, then one created while it watches.
    let mut watch = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args([
            "get",
            "widgets",
            "--watch",
            "-o",
            "name",
            "--request-timeout=30s",
        ])
        .env("HOME", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.as_deref(), Some("widget.example.rota.dev/w1"));
    let rt = c
        .store
        .resource_type("example.rota.dev", "widgets")
        .unwrap();
    c.store
        .create(
            &rt,
            Some("default"),
            json!({"metadata": {"name": "w2"}, "spec": {"size": 1}}),
        )
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.as_deref(), Some("widget.example.rota.dev/w2"));
    watch.kill().await.unwrap();

    kubectl_ok(kc, &["delete", "widget", "w1"]).await;
    let out = kubectl_ok(kc, &["get", "widgets", "-o", "name"]).await;
    assert_eq!(out.trim(), "widget.example.rota.dev/w2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_uses_the_scale_subresource() {
    let c = cluster().await;
    let kc = c.kubeconfig.as_path();
    c.store
        .create(
            &ResourceType::deployments(),
            Some("default"),
            json!({"metadata": {"name": "web"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}}),
        )
        .unwrap();
    let out = kubectl_ok(kc, &["scale", "deployment", "web", "--replicas=5"]).await;
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    let d = c
        .store
        .get(&ResourceType::deployments(), Some("default"), "web")
        .unwrap();
    assert_eq!(d["spec"]["replicas"], 5);
    let out = kubectl(
        kc,
        &[
            "scale",
            "deployment",
            "web",
            "--replicas=3",
            "--current-replicas=4",
        ],
    )
    .await;
    assert!(
        !out.status.success(),
        "precondition --current-replicas=4 fails at 5"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_context_per_cluster() {
    let (eu, us) = (Store::new(), Store::new());
    eu.create(&ResourceType::nodes(), None, node("eu-node"))
        .unwrap();
    us.create(&ResourceType::nodes(), None, node("us-node"))
        .unwrap();
    let eu_http = serve_http(ApiServer::new(eu)).await.unwrap();
    let us_http = serve_http(ApiServer::new(us)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    kubeconfig::write(
        &kc,
        &[
            ("eu-prod-1".into(), eu_http.url()),
            ("us-prod-1".into(), us_http.url()),
        ],
    )
    .unwrap();
    let out = kubectl_ok(&kc, &["config", "get-contexts", "-o", "name"]).await;
    assert_eq!(out.lines().collect::<Vec<_>>(), ["eu-prod-1", "us-prod-1"]);
    assert_eq!(
        kubectl_ok(&kc, &["get", "nodes", "-o", "name"])
            .await
            .trim(),
        "node/eu-node"
    );
    let out = kubectl_ok(
        &kc,
        &["--context", "us-prod-1", "get", "nodes", "-o", "name"],
    )
    .await;
    assert_eq!(out.trim(), "node/us-node");
}
