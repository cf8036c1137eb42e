//! `deploy/`: the kustomize base, the cloud and monitoring components and the example overlays
//! render with the installed `kubectl kustomize`; every object parses into its Kubernetes type
//! with no unknown field; RBAC is exactly the least privilege the docs promise; the alert rules
//! pass `promtool check rules` and `promtool test rules`; the rules and the dashboard only use
//! metrics rota exports; and the objects apply to `rota sim serve` with a real `kubectl`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use crate::support::kustomize;
use kustomize::{render, typed_check};

fn renders() -> Vec<(String, Vec<Value>)> {
    let mut all = vec![("deploy".to_string(), render(&root().join("deploy")))];
    for cloud in ["aws", "gcp", "azure"] {
        let dir = format!("examples/deploy/{cloud}");
        all.push((dir.clone(), render(&root().join(&dir))));
    }
    all
}

/// Every object is one of the kinds rota ships, and valid for its Kubernetes type.
#[test]
fn every_rendered_object_validates_against_its_kubernetes_type() {
    let mut problems = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for (dir, objects) in renders() {
        for obj in &objects {
            let kind = obj["kind"].as_str().unwrap_or("?").to_string();
            let name = obj["metadata"]["name"].as_str().unwrap_or("?");
            let found = match kind.as_str() {
                "Namespace" => typed_check::<Namespace>(obj),
                "ServiceAccount" => typed_check::<ServiceAccount>(obj),
                "ClusterRole" => typed_check::<ClusterRole>(obj),
                "ClusterRoleBinding" => typed_check::<ClusterRoleBinding>(obj),
                "Role" => typed_check::<Role>(obj),
                "RoleBinding" => typed_check::<RoleBinding>(obj),
                "Deployment" => typed_check::<Deployment>(obj),
                "PodDisruptionBudget" => typed_check::<PodDisruptionBudget>(obj),
                "NetworkPolicy" => typed_check::<NetworkPolicy>(obj),
                "Service" => typed_check::<Service>(obj),
                "ConfigMap" => typed_check::<ConfigMap>(obj),
                "CustomResourceDefinition" => typed_check::<CustomResourceDefinition>(obj),
                "ValidatingAdmissionPolicy" => typed_check::<ValidatingAdmissionPolicy>(obj),
                "ValidatingAdmissionPolicyBinding" => {
                    typed_check::<ValidatingAdmissionPolicyBinding>(obj)
                }
                // The Prometheus Operator's kinds have no k8s-openapi type: checked below.
                "PrometheusRule" | "ServiceMonitor" => vec![],
                other => vec![format!("unexpected kind {other}")],
            };
            problems.extend(
                found
                    .into_iter()
                    .map(|p| format!("{dir}: {kind}/{name}: {p}")),
            );
            kinds.insert(kind);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(kinds.len(), 16, "{kinds:?}");
}

#[test]
fn the_base_is_least_privilege_with_two_leader_elected_replicas() {
    let objects = render(&root().join("deploy"));
    let get = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind}/{name}"))
            .clone()
    };
    let role: ClusterRole = serde_json::from_value(get("ClusterRole", "rota")).unwrap();
    let mut rules: Vec<String> = role
        .rules
        .unwrap()
        .iter()
        .flat_map(|r| {
            let groups = r.api_groups.clone().unwrap();
            let resources = r.resources.clone().unwrap();
            assert!(r.resource_names.is_none() && r.non_resource_urls.is_none());
            groups.into_iter().flat_map(move |g| {
                let verbs = r.verbs.join(",");
                resources
                    .clone()
                    .into_iter()
                    .map(move |res| format!("{g}/{res}: {verbs}"))
            })
        })
        .collect();
    rules.sort();
    assert_eq!(
        rules,
        [
            "/events: create,patch",
            "/events: list,watch",
            "/nodes: get,list,watch,patch",
            "/pods/eviction: create",
            "/pods: get,list,watch,delete",
            "events.k8s.io/events: create,patch",
            "karpenter.k8s.aws/ec2nodeclasses: get,patch",
            "karpenter.sh/nodeclaims: list",
            "karpenter.sh/nodepools: get,list,patch",
            "policy/poddisruptionbudgets: get,list,watch",
            "rota.dev/nodepoolrotations/status: get,update,patch",
            "rota.dev/nodepoolrotations: get,list,watch,create,update,patch",
        ]
    );
    // Leases only in rota's namespace.
    let lease: Role = serde_json::from_value(get("Role", "rota-leader-election")).unwrap();
    assert_eq!(lease.metadata.namespace.as_deref(), Some("rota-system"));
    let lr = &lease.rules.unwrap()[0];
    assert_eq!(lr.resources.as_deref(), Some(&["leases".to_string()][..]));

    let d: Deployment = serde_json::from_value(get("Deployment", "rota")).unwrap();
    let spec = d.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("rota"));
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap();
    assert!(
        args.contains(&"--lease-namespace=$(POD_NAMESPACE)".to_string()),
        "{args:?}"
    );
    let probe = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .clone()
            .unwrap()
    };
    assert_eq!(probe(&c.liveness_probe), "/healthz");
    assert_eq!(probe(&c.readiness_probe), "/readyz");
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));

    let pdb: PodDisruptionBudget =
        serde_json::from_value(get("PodDisruptionBudget", "rota")).unwrap();
    assert_eq!(
        pdb.spec.unwrap().min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    // The CRD is deploy/crd.yaml itself (plus the common label).
    let mut crd: CustomResourceDefinition = serde_json::from_value(get(
        "CustomResourceDefinition",
        "nodepoolrotations.rota.dev",
    ))
    .unwrap();
    let on_disk: CustomResourceDefinition =
        serde_yaml::from_str(&std::fs::read_to_string(root().join("deploy/crd.yaml")).unwrap())
            .unwrap();
    crd.metadata.labels = None;
    assert_eq!(crd, on_disk);
}

#[test]
fn each_cloud_overlay_sets_its_workload_identity() {
    let expect = [
        ("aws", "eks.amazonaws.com/role-arn"),
        ("gcp", "iam.gke.io/gcp-service-account"),
        ("azure", "azure.workload.identity/client-id"),
    ];
    for (cloud, annotation) in expect {
        let objects = render(&root().join(format!("examples/deploy/{cloud}")));
        let sa = objects
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .unwrap();
        assert!(
            sa["metadata"]["annotations"][annotation].is_string(),
            "{cloud}: {sa}"
        );
        let d = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let use_label = &d["spec"]["template"]["metadata"]["labels"]["azure.workload.identity/use"];
        assert_eq!(use_label.is_string(), cloud == "azure", "{cloud}");
    }
}

#[test]
fn the_example_overlays_label_rules_and_scrapes_for_kube_prometheus_stack() {
    // kube-prometheus-stack's default ruleSelector and serviceMonitorSelector match
    // `release: <helm release>`: without the label the alerts are never loaded.
    for cloud in ["aws", "gcp", "azure"] {
        let objects = render(&root().join(format!("examples/deploy/{cloud}")));
        for kind in ["PrometheusRule", "ServiceMonitor"] {
            let o = objects.iter().find(|o| o["kind"] == kind).unwrap();
            assert_eq!(
                o["metadata"]["labels"]["release"], "kube-prometheus-stack",
                "{cloud}: {o}"
            );
        }
    }
}

fn monitoring() -> PathBuf {
    root().join("deploy/components/monitoring")
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(monitoring())
        .output()
        .expect("promtool is installed (Debian package `prometheus`)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

#[test]
fn alert_rules_pass_promtool_checks_and_unit_tests() {
    let checked = promtool(&["check", "rules", "rules.yaml"]);
    assert!(checked.contains("SUCCESS: 8 rules found"), "{checked}");
    promtool(&["test", "rules", "rules_test.yaml"]);
    // The PrometheusRule carries exactly the same groups.
    let plain: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(monitoring().join("rules.yaml")).unwrap())
            .unwrap();
    let cr: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(monitoring().join("prometheusrule.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(plain["groups"], cr["spec"]["groups"]);
    let names: Vec<&str> = plain["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    for a in [
        "RotaPoolStuck",
        "RotaGateFailed",
        "RotaAgentDown",
        "RotaRepoFetchFailing",
        "RotaCommitRejected",
        "RotaHistoryRewritten",
    ] {
        assert!(names.contains(&a), "{names:?}");
    }
}

/// The container's args, with Kubernetes' `$(VAR)` expansion from the container's env
/// (`fieldRef`s get a stand-in value), as `rota` receives them.
fn container_argv(d: &Deployment) -> Vec<String> {
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    let mut vars = std::collections::BTreeMap::new();
    for e in c.env.iter().flatten() {
        let v = match (&e.value, &e.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(_)) => format!("stand-in-{}", e.name.to_lowercase()),
            (None, None) => String::new(),
        };
        vars.insert(e.name.clone(), v);
    }
    let mut argv = vec!["rota".to_string()];
    for a in c
        .command
        .iter()
        .flatten()
        .skip(1)
        .chain(c.args.iter().flatten())
    {
        let mut a = a.clone();
        for (k, v) in &vars {
            a = a.replace(&format!("$({k})"), v);
        }
        assert!(!a.contains("$("), "unexpanded variable in {a}");
        argv.push(a);
    }
    argv
}

/// The Deployment passes exactly the flags `rota agent` takes: its args (base and every
/// overlay) go through rota's own command-line parser, so neither side can drift.
#[test]
fn the_deployment_args_parse_with_rotas_own_parser() {
    use clap::Parser;
    for (dir, objects) in renders() {
        let d: Deployment = serde_json::from_value(
            objects
                .iter()
                .find(|o| o["kind"] == "Deployment")
                .unwrap()
                .clone(),
        )
        .unwrap();
        let argv = container_argv(&d);
        let cli = rota::cli::Cli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("{dir}: rota {argv:?}:\n{e}"));
        let rota::cli::Command::Agent(a) = cli.command else {
            panic!("{dir}: not `rota agent`: {argv:?}");
        };
        assert_eq!(a.cluster, "change-me", "{dir}");
        assert_eq!(a.repo, "https://github.com/OWNER/fleet.git", "{dir}");
        assert_eq!(a.lease_namespace, "stand-in-pod_namespace", "{dir}");
        assert_eq!(a.ops.log_format, rota::telemetry::LogFormat::Json, "{dir}");
        assert_eq!(a.ops.metrics_addr.port(), 9090, "{dir}");
        assert_eq!(a.ops.stuck_after.as_duration().as_secs(), 1800, "{dir}");
        // The repo mirror goes to the writable emptyDir (the root filesystem is read-only).
        let mounts: Vec<String> = d
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.clone())
            .collect();
        assert!(
            mounts.contains(&a.state_dir.display().to_string()),
            "{dir}: {mounts:?}"
        );
        // The probes and the metrics port are where the agent serves them.
        if dir.ends_with("aws") {
            assert_eq!(
                a.webhook_listen.map(|s| s.port()),
                Some(8080),
                "{dir}: the git-webhook component"
            );
            let secret = a.webhook_secret_file.unwrap();
            assert!(mounts.iter().any(|m| secret.starts_with(m)), "{dir}");
        }
    }
    // A misspelt flag is caught by the same parser.
    assert!(
        rota::cli::Cli::try_parse_from(["rota", "agent", "--repo-url=x", "--cluster=c"]).is_err()
    );
}

/// Every `rota_*` metric the alerts and the dashboard query is one rota exports.
#[test]
fn rules_and_dashboard_query_only_exported_metrics() {
    use rota::metrics::{GateResult, Metrics, Outcome};
    let m = Metrics::new();
    let p = m.pool("c", "p");
    p.set_nodes(1, 1);
    p.set_phase(rota::rotate::Phase::Rotating);
    p.set_batch(Some(1));
    p.set_last_progress(chrono::Utc::now());
    p.set_stuck(Some("DrainBlocked"));
    p.record_brought_up(1);
    p.record_drained(1);
    p.record_terminated(1);
    p.record_eviction(Outcome::Ok);
    p.record_gate("g", GateResult::Pass);
    p.record_gate_failed("g");
    p.record_error("Throttled", false);
    p.observe_batch_duration(1.0);
    p.observe_drain_duration(1.0);
    p.observe_boot_to_ready(1.0);
    p.observe_reconcile(1.0);
    m.record_cloud_call("aws", "x", Outcome::Ok);
    m.record_git_fetch(Outcome::Ok, chrono::Utc::now());
    m.record_commit_rejected("signature");
    m.set_history_rewritten(Some(("a", "b")));
    m.record_status_posted("github", Outcome::Ok);
    m.record_notification(Outcome::Ok);
    m.set_pool_info("p", "general", "2026.11.1", "ami-1");
    m.set_pool_image_age(
        "p",
        Some(chrono::Utc::now()),
        Some(std::time::Duration::from_secs(86_400)),
        chrono::Utc::now(),
    );
    let exported: std::collections::BTreeSet<String> = m
        .render()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        // The fleet-wide series `rota ui` serves (per wave: only the fleet view knows waves).
        .chain(rota::ui::metrics::NAMES.iter().map(|n| n.to_string()))
        .collect();
    let used = |text: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("rota_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            out.push(name);
        }
        out
    };
    let rules = std::fs::read_to_string(monitoring().join("rules.yaml")).unwrap();
    let dashboard = std::fs::read_to_string(monitoring().join("dashboard.json")).unwrap();
    let parsed: Value = serde_json::from_str(&dashboard).unwrap();
    assert!(parsed["panels"].as_array().unwrap().len() >= 10);
    let mut unknown = Vec::new();
    for name in used(&rules).into_iter().chain(used(&dashboard)) {
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name)
            .to_string();
        // `rota-metrics` (the job) and `rota-fleet` (the uid) are not metric names.
        if !exported.contains(&base) && !exported.contains(&name) && name != "rota_" {
            unknown.push(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported: {unknown:?}\nexported: {exported:?}"
    );
}

/// `rota sim serve`, killed when dropped.
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

impl Serve {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--context", "prod-use1"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        } else {
            drop(child.stdin.take());
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

/// Whether the NetworkPolicies among `objects` that select rota's pods let it open a TCP or
/// UDP connection to `port` on a pod of namespace `namespace` (labels `pod_labels`): the
/// union of their egress rules, as Kubernetes evaluates it (a rule without `to` or `ports`
/// allows any peer or any port; a peer with only a podSelector is in the policy's namespace).
fn egress_allowed(
    objects: &[Value],
    namespace: &str,
    pod_labels: &[(&str, &str)],
    port: i32,
    protocol: &str,
) -> bool {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let matches = |sel: &LabelSelector, labels: &[(&str, &str)]| {
        sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
            && sel.match_labels.as_ref().is_none_or(|m| {
                m.iter()
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
    };
    let ns_labels = [("kubernetes.io/metadata.name", namespace)];
    let rota = [("app.kubernetes.io/name", "rota")];
    let mut selected = false;
    for o in objects.iter().filter(|o| o["kind"] == "NetworkPolicy") {
        let np: NetworkPolicy = serde_json::from_value(o.clone()).unwrap();
        let own_ns = np.metadata.namespace.clone().unwrap_or_default();
        let spec = np.spec.unwrap();
        let egress_policy = spec
            .policy_types
            .as_ref()
            .is_some_and(|t| t.iter().any(|t| t == "Egress"));
        if !egress_policy || !matches(&spec.pod_selector.unwrap_or_default(), &rota) {
            continue;
        }
        selected = true;
        for rule in spec.egress.unwrap_or_default() {
            let peer_ok = rule.to.as_ref().is_none_or(|to| {
                to.is_empty()
                    || to.iter().any(|peer| {
                        let ns_ok = match &peer.namespace_selector {
                            Some(sel) => matches(sel, &ns_labels),
                            None => peer.pod_selector.is_some() && own_ns == namespace,
                        };
                        let pod_ok = peer
                            .pod_selector
                            .as_ref()
                            .is_none_or(|sel| matches(sel, pod_labels));
                        let ip_ok = peer
                            .ip_block
                            .as_ref()
                            .is_some_and(|b| b.cidr == "0.0.0.0/0" && b.except.is_none());
                        ip_ok || (peer.ip_block.is_none() && ns_ok && pod_ok)
                    })
            });
            let port_ok = rule.ports.as_ref().is_none_or(|ports| {
                ports.is_empty()
                    || ports.iter().any(|p| {
                        p.protocol.as_deref().unwrap_or("TCP") == protocol
                            && match &p.port {
                                None => true,
                                Some(IntOrString::Int(n)) => match p.end_port {
                                    Some(end) => (*n..=end).contains(&port),
                                    None => *n == port,
                                },
                                Some(IntOrString::String(_)) => false,
                            }
                    })
            });
            if peer_ok && port_ok {
                return true;
            }
        }
    }
    // No policy selects the pod for egress: everything is allowed.
    !selected
}

/// The shipped NetworkPolicy blocked a plain-http in-cluster Prometheus, so every Prometheus
/// gate failed: the gates' addresses (the example fleet's, `http://prometheus.monitoring:9090`)
/// must be reachable from every rendering, while egress stays restricted otherwise.
#[test]
fn the_network_policies_let_the_agent_reach_its_gates_prometheus() {
    let mut addresses = Vec::new();
    for entry in std::fs::read_dir(root().join("examples/fleet-repo/gates")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if let Some(a) = v["spec"]["prometheus"]["address"].as_str() {
                addresses.push(a.parse::<http::Uri>().unwrap());
            }
        }
    }
    assert!(
        !addresses.is_empty(),
        "the example fleet has Prometheus gates"
    );
    for (dir, objects) in renders() {
        for uri in &addresses {
            let host = uri.host().unwrap();
            // `service.namespace[.svc...]`: the Prometheus pods live in that namespace.
            let namespace = host.split('.').nth(1).unwrap_or("default");
            let port = uri.port_u16().map(i32::from).unwrap_or(80);
            assert!(
                egress_allowed(
                    &objects,
                    namespace,
                    &[("app.kubernetes.io/name", "prometheus")],
                    port,
                    "TCP"
                ),
                "{dir}: rota cannot reach its gate's Prometheus at {uri}"
            );
        }
        assert!(
            egress_allowed(&objects, "kube-system", &[], 53, "UDP"),
            "{dir}: DNS"
        );
        assert!(
            !egress_allowed(&objects, "shop", &[], 5432, "TCP"),
            "{dir}: egress must stay restricted"
        );
    }
}

/// Every rendered object (base and each cloud overlay) applies to the simulated API server
/// with a real `kubectl apply`, and reads back with `kubectl get`; applying again changes
/// nothing.
#[test]
fn the_base_and_overlays_apply_to_the_simulated_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let workloads = dir.path().join("workloads.yaml");
    std::fs::write(
        &workloads,
        "nodes: {perPool: 1}\ndeployments: []\ndaemonSets: []\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rota"))
        .args(["sim", "serve", "--repo"])
        .arg(root().join("examples/fleet-repo"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--workloads")
        .arg(&workloads)
        .args(["--speed", "60", "--seed", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
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
    let (ok, resources) = s.kubectl(&["api-resources", "--no-headers", "-o", "name"], None);
    assert!(ok, "{resources}");
    let served: Vec<&str> = resources.lines().collect();
    let plural = |o: &Value| -> String {
        let kind = o["kind"].as_str().unwrap().to_lowercase();
        let group = o["apiVersion"]
            .as_str()
            .unwrap()
            .rsplit_once('/')
            .map(|(g, _)| g.to_string());
        let p = match kind.as_str() {
            "networkpolicy" => "networkpolicies".to_string(),
            "poddisruptionbudget" => "poddisruptionbudgets".to_string(),
            "validatingadmissionpolicy" => "validatingadmissionpolicies".to_string(),
            k => format!("{k}s"),
        };
        match group {
            Some(g) => format!("{p}.{g}"),
            None => p,
        }
    };
    for (dir, objects) in renders() {
        // The Prometheus Operator's kinds need its CRDs, as on a real cluster: install them
        // as the operator would (only the names matter to the API server).
        if dir != "deploy" {
            for (plural, kind) in [
                ("prometheusrules", "PrometheusRule"),
                ("servicemonitors", "ServiceMonitor"),
            ] {
                let crd = serde_json::json!({
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
                    "spec": {
                        "group": "monitoring.coreos.com",
                        "scope": "Namespaced",
                        "names": {"plural": plural, "kind": kind, "singular": kind.to_lowercase()},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                            "schema": {"openAPIV3Schema": {"type": "object",
                                "x-kubernetes-preserve-unknown-fields": true}}}]
                    }
                });
                let (ok, out) = s.kubectl(&["apply", "-f", "-"], Some(&crd.to_string()));
                assert!(ok, "{out}");
            }
        }
        apply_all(&s, &dir, &objects, &served, &plural);
    }
}

fn apply_all(
    s: &Serve,
    dir: &str,
    objects: &[Value],
    served: &[&str],
    plural: &dyn Fn(&Value) -> String,
) {
    // Every kind is served (refreshing discovery after the CRDs above).
    let (_, resources) = s.kubectl(&["api-resources", "--no-headers", "-o", "name"], None);
    let now_served: Vec<&str> = resources.lines().collect();
    let missing: Vec<String> = objects
        .iter()
        .map(plural)
        .filter(|p| !served.contains(&p.as_str()) && !now_served.contains(&p.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{dir}: not served by the simulated API server: {missing:?}"
    );
    let apply: Vec<&Value> = objects.iter().collect();
    let yaml: String = apply
        .iter()
        .map(|o| format!("---\n{}", serde_yaml::to_string(o).unwrap()))
        .collect();
    let (ok, out) = s.kubectl(&["apply", "--validate=false", "-f", "-"], Some(&yaml));
    assert!(ok, "{dir}: kubectl apply: {out}");
    for o in &apply {
        let name = o["metadata"]["name"].as_str().unwrap();
        let mut args = vec!["get", o["kind"].as_str().unwrap(), name, "-o", "json"];
        if let Some(ns) = o["metadata"]["namespace"].as_str() {
            args.extend(["-n", ns]);
        }
        let (ok, out) = s.kubectl(&args, None);
        assert!(ok, "{dir}: kubectl get {args:?}: {out}");
        let got: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            got["metadata"]["labels"]["app.kubernetes.io/part-of"], "rota",
            "{got}"
        );
    }
    // Applying again changes nothing (idempotent install).
    let (ok, out) = s.kubectl(&["apply", "--validate=false", "-f", "-"], Some(&yaml));
    assert!(ok, "{dir}: {out}");
    assert!(!out.contains("created"), "{dir}: {out}");
}

/// The unknown-field check catches what the API server would silently drop.
#[test]
fn the_type_check_catches_a_misspelt_field() {
    let mut d = render(&root().join("deploy"))
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    assert!(typed_check::<Deployment>(&d).is_empty());
    d["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = serde_json::json!({});
    d["spec"]["replicas"] = serde_json::json!("2");
    let found = typed_check::<Deployment>(&d);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("does not parse"), "{found:?}");
    d["spec"]["replicas"] = serde_json::json!(2);
    assert_eq!(
        typed_check::<Deployment>(&d),
        [".spec.template.spec.containers[0].readinesProbe"]
    );
}
