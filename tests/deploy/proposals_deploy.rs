//! `deploy/components/proposals`: the scheduled proposer renders with the installed `kubectl
//! kustomize` (examples/deploy/proposals), every object is valid for its Kubernetes type, its
//! container args parse as `rota propose` with rota's own parser, one pass runs at a time,
//! and the pod gets no Kubernetes API token, no ingress and only its own Secret.

use std::path::Path;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;

use crate::support::kustomize;
use kustomize::find;

fn render() -> Vec<Value> {
    kustomize::render(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/deploy/proposals"))
}

#[test]
fn the_proposals_component_runs_rota_propose_hourly_one_pass_at_a_time() {
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
    let (command, argv) = kustomize::container_cli(c);
    let rota::cli::Command::Propose(args) = command else {
        panic!("not `rota propose`: {argv:?}");
    };
    assert!(args.repo.starts_with("https://"), "{}", args.repo);
    assert!(
        !args.no_images && !args.no_promotions && !args.no_reverts,
        "every part runs"
    );
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
