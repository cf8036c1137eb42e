//! `deploy/components/ui`: the fleet page beside the agent renders with the installed
//! `kubectl kustomize` (examples/deploy/ui), its container args parse as `rota ui` with
//! rota's own parser, and the pod gets no Kubernetes API token and only the page's port in.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;

fn render() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/deploy/ui");
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

fn find<T: serde::de::DeserializeOwned>(objects: &[Value], kind: &str, name: &str) -> T {
    let o = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    serde_json::from_value(o.clone()).unwrap()
}

#[test]
fn the_ui_component_serves_the_page_without_cluster_access() {
    use clap::Parser;
    let objects = render();
    let d: Deployment = find(&objects, "Deployment", "rota-ui");
    let pod = d.spec.unwrap().template.spec.unwrap();
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
    let rota::cli::Command::Ui(args) = cli.command else {
        panic!("not `rota ui`: {argv:?}");
    };
    assert_eq!(args.listen.port(), 8088);
    let s: Service = find(&objects, "Service", "rota-ui");
    let port = &s.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.port, 8088);
    let np: NetworkPolicy = find(&objects, "NetworkPolicy", "rota-ui");
    let spec = np.spec.unwrap();
    let ingress_ports: Vec<String> = spec
        .ingress
        .iter()
        .flatten()
        .flat_map(|r| r.ports.iter().flatten())
        .map(|p| format!("{:?}", p.port))
        .collect();
    assert_eq!(ingress_ports, vec!["Some(Int(8088))"]);
    // Least privilege: only pods labelled as the page's clients may reach it (it admitted
    // every source), and the page does not load the agent's Secret (notification webhook
    // URLs and settings it has no use for).
    for rule in spec.ingress.iter().flatten() {
        let from = rule
            .from
            .as_ref()
            .expect("an ingress rule names who may reach the page");
        assert!(!from.is_empty());
        for peer in from {
            let labels = peer
                .pod_selector
                .as_ref()
                .and_then(|s| s.match_labels.as_ref())
                .expect("a pod selector");
            assert_eq!(
                labels.get("rota.dev/ui-client").map(String::as_str),
                Some("true")
            );
        }
    }
    let secrets_read: Vec<String> = c
        .env_from
        .iter()
        .flatten()
        .filter_map(|e| e.secret_ref.as_ref().map(|r| r.name.clone()))
        .chain(
            pod.volumes
                .iter()
                .flatten()
                .filter_map(|v| v.secret.as_ref().and_then(|s| s.secret_name.clone())),
        )
        .collect();
    assert_eq!(secrets_read, vec!["rota-ui-git".to_string()]);
    // The people who run `rota ctl` get a role, and the request's identity is enforced.
    let role = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "rota-operator")
        .expect("the rota-operator ClusterRole");
    assert_eq!(role["rules"][0]["resources"][0], "nodepoolrotations");
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "ValidatingAdmissionPolicyBinding"
                && o["spec"]["policyName"] == "rota-request-identity")
    );
    // The agent's Deployment is still there, unchanged by the component.
    let agent: Deployment = find(&objects, "Deployment", "rota");
    assert_eq!(agent.spec.unwrap().replicas, Some(2));
}
