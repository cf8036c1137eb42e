//! `deploy/components/proposals`: the scheduled proposer renders with the installed `kubectl
//! kustomize` (examples/deploy/proposals), every object is valid for its Kubernetes type, its
//! container args parse as `rota propose` with rota's own parser, one pass runs at a time,
//! and the pod gets no Kubernetes API token, no ingress and only its own Secret.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;

fn render() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/deploy/proposals");
    let out = Command::new("kubectl")
        .args(["kustomize"])
        .arg(&dir)
        .output()
        .expect("kubectl is missing (scripts/test installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let v: serde_yaml::Value = serde::Deserialize::deserialize(d).unwrap();
            serde_json::to_value(v).unwrap()
        })
        .collect()
}

/// The object, read as its Kubernetes type; every field it has must survive the round trip
/// (a misspelt field would be dropped by the API server without a word).
fn find<T: serde::de::DeserializeOwned + serde::Serialize>(
    objects: &[Value],
    kind: &str,
    name: &str,
) -> T {
    let o = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    let typed: T = serde_json::from_value(o.clone()).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    let mut lost = Vec::new();
    dropped(o, &back, "", &mut lost);
    assert!(lost.is_empty(), "{kind}/{name}: unknown fields {lost:?}");
    typed
}

fn dropped(original: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                match t.get(k) {
                    Some(tv) => dropped(v, tv, &format!("{path}.{k}"), out),
                    None if v.is_null() => {}
                    None => out.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            for (i, (a, b)) in o.iter().zip(t).enumerate() {
                dropped(a, b, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_proposals_component_runs_rota_propose_hourly_one_pass_at_a_time() {
    use clap::Parser;
    let objects = render();
    let cj: CronJob = find(&objects, "CronJob", "rota-proposals");
    let spec = cj.spec.unwrap();
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    assert_eq!(
        spec.schedule.split_whitespace().count(),
        5,
        "{}",
        spec.schedule
    );
    let job = spec.job_template.spec.unwrap();
    assert!(job.active_deadline_seconds.is_some(), "a hung pass ends");
    let pod = job.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.service_account_name.as_deref(), Some("rota-proposals"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    let c = &pod.containers[0];
    let repo = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "ROTA_REPO")
        .and_then(|e| e.value.clone())
        .unwrap();
    let mut argv = vec!["rota".to_string()];
    argv.extend(
        c.args
            .iter()
            .flatten()
            .map(|a| a.replace("$(ROTA_REPO)", &repo)),
    );
    let cli = rota::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let rota::cli::Command::Propose(args) = cli.command else {
        panic!("not `rota propose`: {argv:?}");
    };
    assert_eq!(args.repo, repo);
    assert!(!args.no_images && !args.no_promotions, "both halves run");
    // The mirror is written to a volume: the root filesystem stays read-only.
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    let mounts: Vec<&str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert!(
        mounts.contains(&args.state_dir.to_str().unwrap()),
        "{mounts:?}"
    );
    // Its own Secret only: not the agents' rota-credentials.
    let secrets: Vec<String> = c
        .env_from
        .iter()
        .flatten()
        .filter_map(|e| e.secret_ref.as_ref().map(|r| r.name.clone()))
        .collect();
    assert_eq!(secrets, vec!["rota-proposals".to_string()]);
    let sa: ServiceAccount = find(&objects, "ServiceAccount", "rota-proposals");
    assert_eq!(sa.automount_service_account_token, Some(false));
    // No role binds the proposer's account: it never reads the Kubernetes API.
    for o in &objects {
        if o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding" {
            let subjects = o["subjects"].to_string();
            assert!(!subjects.contains("rota-proposals"), "{o}");
        }
    }
    let np: NetworkPolicy = find(&objects, "NetworkPolicy", "rota-proposals");
    let spec = np.spec.unwrap();
    assert!(spec.ingress.unwrap_or_default().is_empty(), "no ingress");
    let egress_ports: Vec<String> = spec
        .egress
        .iter()
        .flatten()
        .flat_map(|r| r.ports.iter().flatten())
        .map(|p| format!("{:?}", p.port))
        .collect();
    assert!(
        !egress_ports.iter().any(|p| p.contains("6443")),
        "no Kubernetes API: {egress_ports:?}"
    );
}
