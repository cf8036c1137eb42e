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

/// `deploy` with the proposals component and `components` (names under deploy/components),
/// rendered from a kustomization in a temporary folder (kustomize refuses absolute paths: the
/// repo is named relative to it).
fn render_with(components: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let up = "../".repeat(dir.path().components().count() - 1);
    let repo = env!("CARGO_MANIFEST_DIR").trim_start_matches('/');
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {up}{repo}/deploy\ncomponents:\n  - {up}{repo}/deploy/components/proposals\n"
    );
    for c in components {
        text += &format!("  - {up}{repo}/deploy/components/{c}\n");
    }
    std::fs::write(dir.path().join("kustomization.yaml"), text).unwrap();
    kustomize::render(dir.path())
}

/// Whether the NetworkPolicy `name` lets its pods open TCP `port` on address `ip`: a rule
/// whose peers include an ipBlock holding `ip` (or no peers) and whose ports include `port`
/// (or no ports).
fn egress_to(objects: &[Value], name: &str, ip: std::net::IpAddr, port: i32) -> bool {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let np: NetworkPolicy = find(objects, "NetworkPolicy", name);
    let holds = |cidr: &str| {
        let (net, len) = cidr.split_once('/').unwrap();
        let (net, len): (std::net::IpAddr, u32) = (net.parse().unwrap(), len.parse().unwrap());
        let bits = |a: std::net::IpAddr| match a {
            std::net::IpAddr::V4(v) => (u32::from(v) as u128, 32),
            std::net::IpAddr::V6(v) => (u128::from(v), 128),
        };
        let ((n, w), (a, wa)) = (bits(net), bits(ip));
        w == wa && (len == 0 || (n ^ a) >> (w - len) == 0)
    };
    np.spec
        .unwrap()
        .egress
        .unwrap_or_default()
        .iter()
        .any(|rule| {
            let peer = rule.to.as_ref().is_none_or(|to| {
                to.is_empty()
                    || to
                        .iter()
                        .any(|p| p.ip_block.as_ref().is_some_and(|b| holds(&b.cidr)))
            });
            let ports = rule.ports.as_ref().is_none_or(|ps| {
                ps.is_empty()
                    || ps.iter().any(|p| {
                        p.protocol.as_deref().unwrap_or("TCP") == "TCP"
                            && p.port.as_ref().is_none_or(|q| *q == IntOrString::Int(port))
                    })
            });
            peer && ports
        })
}

/// The proposer's NetworkPolicy allowed DNS, 443 and 22 only: with GKE Workload Identity its
/// image lookups fetch tokens from the metadata server (169.254.169.254:80, 169.254.169.252:988
/// without Dataplane V2), with EKS Pod Identity from the node's agent (169.254.170.23:80,
/// [fd00:ec2::23]:80), and each fetch hung until the pass's deadline. Now each cloud's
/// component opens its identity endpoints for the proposer as for the agent, and nothing
/// else: without a cloud's component, or on AWS, the instance metadata service stays shut
/// (a pod must not borrow the node's role).
#[test]
fn the_proposer_reaches_its_clouds_workload_identity_and_nothing_more() {
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let gke = render_with(&["gcp"]);
    let eks = render_with(&["aws"]);
    for name in ["rota", "rota-proposals"] {
        assert!(egress_to(&gke, name, ip("169.254.169.254"), 80), "{name}");
        assert!(egress_to(&gke, name, ip("169.254.169.252"), 988), "{name}");
        assert!(egress_to(&eks, name, ip("169.254.170.23"), 80), "{name}");
        assert!(egress_to(&eks, name, ip("fd00:ec2::23"), 80), "{name}");
        assert!(
            !egress_to(&eks, name, ip("169.254.169.254"), 80),
            "{name}: IMDS stays shut on AWS"
        );
    }
    let bare = render();
    for (addr, port) in [("169.254.169.254", 80), ("169.254.170.23", 80)] {
        assert!(
            !egress_to(&bare, "rota-proposals", ip(addr), port),
            "{addr}"
        );
    }
    // Still HTTPS for the clouds' APIs, the forge and the git remote.
    assert!(egress_to(&eks, "rota-proposals", ip("140.82.112.3"), 443));
}
