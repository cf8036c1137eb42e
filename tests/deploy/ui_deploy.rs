//! `deploy/components/ui`: the fleet page beside the agent renders with the installed
//! `kubectl kustomize` (examples/deploy/ui), its container args parse as `rota ui` with
//! rota's own parser, and the pod gets no Kubernetes API token and only the page's port in.

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;

use crate::support::kustomize;
use kustomize::find;

fn render() -> Vec<Value> {
    kustomize::render(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/deploy/ui"))
}

#[test]
fn the_ui_component_serves_the_page_without_cluster_access() {
    let objects = render();
    let d: Deployment = find(&objects, "Deployment", "rota-ui");
    let pod = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.automount_service_account_token, Some(false));
    let c = &pod.containers[0];
    let (command, argv) = kustomize::container_cli(c);
    let rota::cli::Command::Ui(args) = command else {
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
