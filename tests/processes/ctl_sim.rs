//! `rota ctl` on the simulated fleet: the real binary sets the request annotation over the
//! loopback API server, the controller consumes it (planner input, status, Event, then the
//! annotation cleared), and the installed `kubectl` shows the effect. Real time, with the
//! simulation and the controller running 60x faster.

use crate::support::git::rota;
use crate::support::sim_fleet;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use rota::cloud::GroupRef;
use rota::controller::{Config, Controller};
use rota::fleet::duration::GoDuration;
use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy};
use rota::kube::crd::{self, NodePoolRotation};
use rota::sim::apiserver::{ApiServer, serve_http};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};
use rota::sim::world::Fleet;
use serde_json::Value;

const SPEED: f64 = 60.0;
const OLD: &str = "ami-0000000000000old1";
const NEW: &str = "ami-0000000000000new2";

const WORKLOADS: &str = r#"
nodes: {perPool: 2, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 2, pdb: {maxUnavailable: 1}, readyAfter: 5s}
"#;

fn group() -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: "general".into(),
    }
}

fn kubectl(kc: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["--context", "sim-1"])
        .args(args)
        .env("HOME", kc.parent().unwrap())
        .output()
        .expect("kubectl is missing (scripts/test installs it)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `rota ctl VERB` with the kubeconfig `kc` (ana's token), a note that tries to drive the
/// terminal: the request names ana as the API server knows her, the note is only a note.
fn ctl(kc: &Path, verb: &str) {
    let out = Command::new(rota())
        .args([
            "ctl",
            verb,
            "--cluster",
            "sim-1",
            "--pool",
            "general",
            "--by",
            "bob said so\x1b[2K",
        ])
        .arg("--kubeconfig")
        .arg(kc)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rota ctl {verb}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("as ana@example.com (rota.dev/request=")
            && stdout.contains("@ana@example.com"),
        "{stdout}"
    );
}

/// kubectl as another user (`--as`), expected to fail: its stderr.
fn kubectl_refused(kc: &Path, user: &str, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(["--context", "sim-1", "--as", user])
        .args(args)
        .env("HOME", kc.parent().unwrap())
        .output()
        .expect("kubectl is missing (scripts/test installs it)");
    assert!(!out.status.success(), "kubectl {args:?} was allowed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The NodePoolRotation as kubectl shows it.
fn npr_json(kc: &Path) -> Value {
    serde_json::from_str(&kubectl(
        kc,
        &["get", "nodepoolrotation", "general", "-o", "json"],
    ))
    .unwrap()
}

/// Steps the controller until `done` holds for what kubectl shows (at most 5 minutes).
async fn until(c: &mut Controller, kc: &Path, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let end = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        c.step().await;
        let kc2 = kc.to_path_buf();
        let v = tokio::task::spawn_blocking(move || npr_json(&kc2))
            .await
            .unwrap();
        if done(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "never {what}: {:#}",
            v["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn stage(v: &Value) -> &str {
    v["status"]["checkpoint"]["stage"]["name"]
        .as_str()
        .unwrap_or("")
}

fn annotated(v: &Value) -> bool {
    v["metadata"]["annotations"]
        .get("rota.dev/request")
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_and_complete_soak_steer_the_rotation_and_kubectl_shows_it() {
    let mut workloads = WorkloadProfile::from_yaml(WORKLOADS, "workloads").unwrap();
    workloads.nodes.overrides.insert("sim-1/general".into(), 2);
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "sim-1".into(),
            cloud: Cloud::Aws,
            pools: vec![PoolScenario {
                name: "general".into(),
                group: group(),
                image: OLD.into(),
                node_selector: BTreeMap::from([("rota.dev/pool".into(), "general".into())]),
                nodes: 2,
            }],
        }],
        workloads,
        faults: FaultProfile::from_yaml("{}", "faults").unwrap(),
        seed: 7,
    };
    let fleet = Fleet::start(&scenario, SPEED).await.unwrap();
    let store = fleet.store("sim-1").unwrap().clone();
    let client = rota::kube::sim::client(store.clone());
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd::definition())
        .await
        .unwrap();
    // Two people, ana (on call) and bob. The sim's kubeconfig is an admin's; people are
    // named by impersonation (kubectl sends no bearer token over the sim's plain http).
    let http = serve_http(ApiServer::new(store).with_speed(SPEED))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    rota::sim::kubeconfig::write(&kc, &[("sim-1".to_string(), http.url())]).unwrap();
    // ana's kubeconfig: `as: ana@example.com`, as an admin acting for her would have it.
    let mut doc: Value = serde_yaml::from_str(&std::fs::read_to_string(&kc).unwrap()).unwrap();
    doc["users"][0]["user"]["as"] = Value::from("ana@example.com");
    doc["users"][0]["user"]["as-groups"] = serde_json::json!(["sre"]);
    std::fs::write(&kc, serde_yaml::to_string(&doc).unwrap()).unwrap();
    assert_eq!(
        kubectl(
            &kc,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}"
            ]
        ),
        "ana@example.com"
    );

    // One node per batch, and a batch soak long enough to be ended by hand.
    let mut policy = EffectivePolicy {
        batch: BatchSize::Count(1),
        ..EffectivePolicy::default()
    };
    policy.drain.delete_empty_dir_data = true;
    policy.batch_soak = GoDuration::from_secs(6 * 3600);
    let npr = sim_fleet::npr(sim_fleet::spec(
        "general",
        group(),
        "rota.dev/pool",
        NEW,
        policy,
    ));
    Api::<NodePoolRotation>::all(client.clone())
        .create(&PostParams::default(), &npr)
        .await
        .unwrap();
    let mut cfg = Config::new("0.1.0", "test-ctl");
    cfg.speed = SPEED;
    let mut c = Controller::new(client.clone(), Arc::new(fleet.cloud.clone()), cfg);

    let v = until(&mut c, &kc, "soaking batch 1", |v| stage(v) == "soaking").await;
    assert_eq!(v["status"]["checkpoint"]["stage"]["batch"]["number"], 1);

    // pause: the rotation holds, says who paused it, and the annotation is consumed.
    ctl(&kc, "pause");
    let v = until(&mut c, &kc, "paused", |v| {
        v["status"]["phase"] == "Paused" && !annotated(v)
    })
    .await;
    let message = v["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("rota ctl pause by ana@example.com at ")
            && message.contains("(\"bob said so\\\\u{1b}[2K\")"),
        "who is the API server's identity, the note is a sanitised note: {message}"
    );
    assert!(v["status"]["checkpoint"]["operatorPaused"].is_string());
    let paused = v["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Paused")
        .unwrap();
    assert_eq!(paused["status"], "True");
    let events = kubectl(&kc, &["get", "events", "-A", "-o", "json"]);
    assert!(
        events.contains("OperatorPause") && events.contains("paused (rota ctl pause by ana"),
        "{events}"
    );
    // Every stop says who must do what: the status's stop note, and its Event (a Warning:
    // a person must act), as kubectl shows them.
    assert_eq!(v["status"]["stop"]["reason"], "PausedByOperator", "{v}");
    assert_eq!(v["status"]["stop"]["by"], "person");
    assert_eq!(
        v["status"]["stop"]["next"],
        "rota ctl resume --cluster sim-1 --pool general"
    );
    let events: Value = serde_json::from_str(&events).unwrap();
    let stop_event = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "PausedByOperator")
        .unwrap_or_else(|| panic!("no PausedByOperator Event: {events}"));
    assert_eq!(stop_event["type"], "Warning");
    let note = stop_event["message"]
        .as_str()
        .or_else(|| stop_event["note"].as_str())
        .unwrap_or_default();
    assert!(
        note.contains("next: rota ctl resume --cluster sim-1 --pool general"),
        "{stop_event}"
    );

    // bob cannot make a request in ana's name (nor in nobody's), with kubectl by hand:
    // the admission policy wants the writer's own name.
    let stamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    for forged in [
        format!("rota.dev/request=resume@{stamp}@ana@example.com"),
        format!("rota.dev/request=resume@{stamp}"),
    ] {
        let e = kubectl_refused(
            &kc,
            "bob",
            &[
                "annotate",
                "nodepoolrotation",
                "general",
                &forged,
                "--overwrite",
            ],
        );
        assert!(
            e.contains("ValidatingAdmissionPolicy 'rota-request-identity'")
                && e.contains("@bob (your own Kubernetes user name)"),
            "{e}"
        );
    }
    // Nor attach a note to ana's request.
    let e = kubectl_refused(
        &kc,
        "bob",
        &[
            "annotate",
            "nodepoolrotation",
            "general",
            "rota.dev/request-note=it was ana",
        ],
    );
    assert!(e.contains("denied request"), "{e}");

    // resume: back to the soak, still in batch 1.
    ctl(&kc, "resume");
    let v = until(&mut c, &kc, "resumed", |v| {
        v["status"]["phase"] != "Paused" && !annotated(v)
    })
    .await;
    assert_eq!(stage(&v), "soaking");
    assert!(v["status"]["checkpoint"]["operatorPaused"].is_null());

    // complete-soak: the 6h soak ends now and batch 2 starts.
    ctl(&kc, "complete-soak");
    let v = until(&mut c, &kc, "past the soak of batch 1", |v| {
        v["status"]["checkpoint"]["batchesStarted"].as_u64() >= Some(2) && !annotated(v)
    })
    .await;
    assert!(
        v["status"]["checkpoint"]["operatorRequest"]
            .as_str()
            .unwrap()
            .starts_with("complete-soak@"),
        "{:#}",
        v["status"]
    );
    let events = kubectl(&kc, &["get", "events", "-A", "-o", "json"]);
    assert!(
        events.contains("OperatorResume") && events.contains("resumed (rota ctl resume by ana"),
        "{events}"
    );
    assert!(
        events.contains("OperatorCompleteSoak")
            && events.contains("soak ended early (rota ctl complete-soak by ana"),
        "{events}"
    );
}

#[test]
fn retry_clears_a_halt_once_and_a_malformed_request_is_refused() {
    use rota::rotate::operator::{Request, Verb, apply};
    // The planner side of `retry` and of a request seen twice (a crash between the status
    // write and the clearing): pure, on a halted checkpoint.
    let at: chrono::DateTime<chrono::Utc> = "2026-11-24T06:00:00Z".parse().unwrap();
    let status: Value = serde_json::json!({
        "originImage": OLD, "targetImage": NEW, "targetVersion": "2", "originalDesired": 2,
        "originalMax": 2, "poolSize": 2, "batchesStarted": 1,
        "halted": "drain timed out on node n1",
        "stage": {"name": "draining", "batch": {"number": 1, "oldNodes": [], "targetCapacity": 3,
                  "instancesBefore": [], "newInstances": [], "stageSince": "2026-11-24T05:00:00Z"}}
    });
    let mut cp: rota::rotate::Checkpoint = match serde_json::from_value(status) {
        Ok(cp) => cp,
        Err(e) => panic!("checkpoint fixture: {e}"),
    };
    let retry = Request::new(Verb::Retry, at, Some("ana"));
    let done = apply(&mut cp, &retry, at).unwrap();
    assert!(
        done.contains("retrying after \"drain timed out on node n1\""),
        "{done}"
    );
    assert_eq!(cp.halted, None);
    assert_eq!(cp.stage.batch().unwrap().stage_since, at, "fresh timeouts");
    cp.halted = Some("again".into());
    assert_eq!(
        apply(&mut cp, &retry, at),
        None,
        "the same request is applied once"
    );
    assert_eq!(cp.halted.as_deref(), Some("again"));
    assert!(Request::parse("stop-everything@now").is_err());
}

/// The venv that holds the Python test peers (scripts/test installs cel-python there).
fn peers_python() -> std::path::PathBuf {
    let venv = std::env::var_os("ROTA_PEERS_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap();
            exe.ancestors().nth(3).unwrap().join("peers-venv")
        });
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is missing: scripts/test makes the test peers' venv (with cel-python), or point \
         ROTA_PEERS_VENV at a venv with `pip install cel-python==0.5.0`",
        python.display()
    );
    python
}

/// Evaluates a ValidatingAdmissionPolicy's variables (in order) and validations with
/// cel-python for each case: `[{"object", "oldObject", "username"}]` → one bool per case.
const CEL_EVAL: &str = r#"
import json, sys
import celpy
from celpy import celtypes
spec = json.load(open(sys.argv[1]))
cases = json.load(sys.stdin)
env = celpy.Environment()
variables = [(v["name"], env.program(env.compile(v["expression"]))) for v in spec.get("variables", [])]
checks = [env.program(env.compile(v["expression"])) for v in spec["validations"]]
out = []
for c in cases:
    act = {
        "object": celpy.json_to_cel(c["object"]),
        "oldObject": celpy.json_to_cel(c["oldObject"]),
        "request": celpy.json_to_cel({"userInfo": {"username": c["username"]}}),
    }
    computed = celtypes.MapType({})
    for name, prog in variables:
        act["variables"] = computed
        computed[celtypes.StringType(name)] = prog.evaluate(act)
    act["variables"] = computed
    out.append(all(bool(p.evaluate(act)) for p in checks))
print(json.dumps(out))
"#;

/// The admission policy rota ships, evaluated by an independent CEL implementation, agrees
/// with the simulated API server's model of it on every case (so what ctl_sim shows of the
/// model holds for the real policy in a real cluster).
#[test]
fn the_shipped_request_identity_policy_and_the_sim_model_agree() {
    use rota::sim::apiserver::admission::request_identity;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/manifests/request-identity.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let policy: Value = serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v: serde_yaml::Value = serde::Deserialize::deserialize(d).unwrap();
            serde_json::to_value(v).unwrap()
        })
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("the policy");
    assert_eq!(policy["spec"]["validations"][0]["reason"], "Forbidden");
    let npr = |request: Option<&str>, note: Option<&str>| {
        let mut a = serde_json::Map::new();
        if let Some(r) = request {
            a.insert("rota.dev/request".into(), Value::from(r));
        }
        if let Some(n) = note {
            a.insert("rota.dev/request-note".into(), Value::from(n));
        }
        let mut o = serde_json::json!({"apiVersion": "rota.dev/v1alpha1", "kind": "NodePoolRotation",
                                       "metadata": {"name": "general"}, "spec": {"pool": "general"}});
        if !a.is_empty() {
            o["metadata"]["annotations"] = Value::Object(a);
        }
        o
    };
    let ana = "pause@2026-11-24T06:00:00Z@ana@example.com";
    let old = npr(Some(ana), Some("oncall"));
    let cases: Vec<(Option<Value>, Value, &str)> = vec![
        (None, npr(None, None), "bob"),
        (None, npr(Some(ana), None), "ana@example.com"),
        (None, npr(Some(ana), None), "bob"),
        (None, npr(Some("pause@2026-11-24T06:00:00Z"), None), "ana"),
        (
            None,
            npr(Some("pause@2026-11-24T06:00:00Z@mallory@ana"), None),
            "ana",
        ),
        (
            None,
            npr(Some("pause@2026-11-24T06:00:00Z@ana"), None),
            "mallory@ana",
        ),
        (None, npr(Some("pause@yesterday@ana"), None), "ana"),
        (
            None,
            npr(Some("stop@2026-11-24T06:00:00Z@ana"), None),
            "ana",
        ),
        (
            None,
            npr(Some("complete-soak@2026-11-24T06:00:00Z@ana"), None),
            "ana",
        ),
        (None, npr(None, Some("it was bob")), "bob"),
        (
            Some(old.clone()),
            npr(Some(ana), Some("oncall")),
            "system:serviceaccount:rota-system:rota",
        ),
        (
            Some(old.clone()),
            npr(None, None),
            "system:serviceaccount:rota-system:rota",
        ),
        (Some(old.clone()), npr(Some(ana), Some("it was bob")), "bob"),
        (Some(old.clone()), npr(Some(ana), None), "ana@example.com"),
        (
            Some(old.clone()),
            npr(Some("resume@2026-11-24T07:00:00Z@bob"), None),
            "bob",
        ),
        (
            Some(npr(None, None)),
            npr(Some("resume@2026-11-24T07:00:00Z@bob"), None),
            "ana@example.com",
        ),
    ];
    let input: Vec<Value> = cases
        .iter()
        .map(|(old, new, user)| {
            serde_json::json!({"object": new, "oldObject": old, "username": user})
        })
        .collect();
    let spec_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(spec_file.path(), policy["spec"].to_string()).unwrap();
    let mut child = Command::new(peers_python())
        .args(["-c", CEL_EVAL])
        .arg(spec_file.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(input).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "cel-python: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cel: Vec<bool> = serde_json::from_slice(&out.stdout).unwrap();
    let want = [
        true, true, false, false, false, false, false, false, true, false, true, true, false, true,
        true, false,
    ];
    for (i, (old, new, user)) in cases.iter().enumerate() {
        let model = request_identity(old.as_ref(), new, user).is_ok();
        assert_eq!(
            (cel[i], model),
            (want[i], want[i]),
            "case {i}: user {user}, {:?} -> {:?}: (CEL, sim model)",
            old.as_ref().map(|o| &o["metadata"]),
            new["metadata"]
        );
    }
}
