//! The simulated world end to end on paused time: instances boot into Ready nodes, pods get
//! scheduled, evicted replicas come back elsewhere, terminated instances take their nodes
//! away, and faults repeat under a seed; the world keeps its time under load (deletions due
//! whatever is queued, a lag metric when it falls behind).

use std::collections::BTreeMap;
use std::time::Duration;

use rota::cloud::{Cloud, GroupRef, NodeGroups};
use rota::fleet::resolved::{DesiredCluster, DesiredPool, EffectivePolicy, Mode};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{Scenario, WorkloadProfile};
use rota::sim::store::{ListOptions, ResourceType, Store};
use rota::sim::world::Fleet;
use serde_json::{Value, json};

fn cluster(name: &str, pools: &[(&str, &str)]) -> DesiredCluster {
    DesiredCluster {
        name: name.into(),
        labels: BTreeMap::new(),
        cloud: Cloud::Aws,
        wave: "main".into(),
        wave_index: 0,
        mode: Mode::Reconcile,
        kubernetes: None,
        pools: pools
            .iter()
            .map(|(pool, image)| DesiredPool {
                owner_image: None,
                cluster: name.into(),
                name: (*pool).into(),
                channel: "general".into(),
                version: "2026.11.1".into(),
                image: (*image).into(),
                arch: Default::default(),
                kubelet: None,
                released: None,
                max_age: None,
                group: asg(name, pool),
                node_selector: [("eks.amazonaws.com/nodegroup".to_string(), pool.to_string())]
                    .into(),
                policy: EffectivePolicy::default(),
                gates: vec![],
                mode: Mode::Reconcile,
            })
            .collect(),
    }
}

fn asg(cluster: &str, pool: &str) -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: format!("{cluster}-{pool}"),
    }
}

fn scenario(workloads: WorkloadProfile, faults: FaultProfile, seed: u64) -> Scenario {
    Scenario::from_fleet(
        &[cluster("prod", &[("general", "ami-0a1b2c3d4e5f60718")])],
        workloads,
        faults,
        seed,
    )
}

fn list(store: &Store, rt: ResourceType, opts: &ListOptions) -> Vec<Value> {
    store.list(&rt, None, opts).unwrap().0
}

fn ready(o: &Value) -> bool {
    o["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn pods_of(store: &Store, app: &str) -> Vec<Value> {
    list(
        store,
        ResourceType::pods(),
        &ListOptions::labels(&format!("app={app}")),
    )
}

async fn wait(secs: u64) {
    tokio::time::sleep(Duration::from_secs(secs)).await;
}

#[tokio::test(start_paused = true)]
async fn a_loaded_cluster_is_steady_and_believable() {
    let fleet = Fleet::start(
        &scenario(WorkloadProfile::default(), FaultProfile::default(), 1),
        1.0,
    )
    .await
    .unwrap();
    let store = fleet.store("prod").unwrap();
    wait(5).await;
    let nodes = list(store, ResourceType::nodes(), &ListOptions::default());
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(ready));
    let pods = list(store, ResourceType::pods(), &ListOptions::default());
    // 6 + 4 + 3 + 3 + 1 replicas and 2 daemon pods per node.
    assert_eq!(pods.len(), 17 + 6);
    assert!(
        pods.iter()
            .all(|p| ready(p) && p["spec"]["nodeName"].is_string())
    );
    // Nothing churns once loaded: no pod was added or replaced.
    wait(120).await;
    assert_eq!(
        list(store, ResourceType::pods(), &ListOptions::default()).len(),
        23
    );
    let deploy = store
        .get(&ResourceType::deployments(), Some("shop"), "web")
        .unwrap();
    assert_eq!(deploy["status"]["readyReplicas"], 6);
    let ds = store
        .get(
            &ResourceType::daemonsets(),
            Some("monitoring"),
            "node-exporter",
        )
        .unwrap();
    assert_eq!(ds["status"]["numberReady"], 3);
    assert_eq!(ds["status"]["desiredNumberScheduled"], 3);
}

#[tokio::test(start_paused = true)]
async fn new_instances_boot_register_and_take_pods() {
    let mut w = WorkloadProfile::default();
    w.deployments.clear();
    let fleet = Fleet::start(&scenario(w, FaultProfile::default(), 2), 1.0)
        .await
        .unwrap();
    let store = fleet.store("prod").unwrap().clone();
    let g = asg("prod", "general");
    fleet.cloud.set_capacity(&g, 5, Some(5)).await.unwrap();
    wait(59).await;
    assert_eq!(
        list(&store, ResourceType::nodes(), &ListOptions::default()).len(),
        3
    );
    // Boot (60–120 s) + register (15 s) + ready (20 s).
    wait(120 + 15 + 20 - 59 + 2).await;
    let nodes = list(&store, ResourceType::nodes(), &ListOptions::default());
    assert_eq!(nodes.len(), 5);
    assert!(nodes.iter().all(ready));
    let described = fleet.cloud.describe(&g).await.unwrap();
    for n in &nodes {
        let pid = n["spec"]["providerID"].as_str().unwrap();
        assert!(described.instances.iter().any(|i| i.provider_id == pid));
        assert_eq!(
            n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"],
            "general"
        );
    }
    // DaemonSets follow the new nodes.
    wait(10).await;
    assert_eq!(pods_of(&store, "node-exporter").len(), 5);
    // A new Deployment gets a ReplicaSet, pods, a node each, and Ready.
    store
        .create(&ResourceType::deployments(), None, cache_deployment())
        .unwrap();
    wait(30).await;
    let pods = pods_of(&store, "cache");
    assert_eq!(pods.len(), 4);
    assert!(pods.iter().all(ready), "{pods:#?}");
    let spread: std::collections::BTreeSet<_> = pods
        .iter()
        .map(|p| p["spec"]["nodeName"].to_string())
        .collect();
    assert_eq!(
        spread.len(),
        4,
        "least-allocated placement spreads replicas"
    );
    let d = store
        .get(&ResourceType::deployments(), Some("default"), "cache")
        .unwrap();
    assert_eq!(d["status"]["readyReplicas"], 4);
}

/// `default/cache`: four redis replicas on the `general` node group, half a CPU and 1 GiB
/// each, Ready 5 s after they start.
fn cache_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "cache", "namespace": "default"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "cache"}},
            "template": {
                "metadata": {"labels": {"app": "cache"}},
                "spec": {
                    "nodeSelector": {"eks.amazonaws.com/nodegroup": "general"},
                    "containers": [{"name": "c", "image": "redis",
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                        "readinessProbe": {"initialDelaySeconds": 5}}]
                }
            }
        }
    })
}

/// A bad build (`SimImage::defective`): its node boots, turns Ready and runs its DaemonSet
/// pods, but a workload pod scheduled there fails its sandbox three times, 10 s apart, with
/// one `FailedCreatePodSandBox` Warning event whose count rises, before it starts; pods on
/// the good nodes start at once.
#[tokio::test(start_paused = true)]
async fn a_bad_builds_node_is_ready_but_its_workload_pods_fail_their_sandbox_first() {
    let mut w = WorkloadProfile::default();
    w.deployments.clear();
    let fleet = Fleet::start(&scenario(w, FaultProfile::default(), 7), 1.0)
        .await
        .unwrap();
    let store = fleet.store("prod").unwrap().clone();
    let bad = "ami-0bad0bad0bad0bad0";
    fleet.cloud.publish_image(
        rota::sim::images::SimImage::new(bad, &["us-east-1"], rota::cloud::Arch::X86_64)
            .defective("the CNI plugin does not start"),
    );
    let g = asg("prod", "general");
    fleet.cloud.set_image(&g, bad).await.unwrap();
    fleet.cloud.set_capacity(&g, 4, Some(4)).await.unwrap();
    // Boot (60–120 s) + register (15 s) + ready (20 s), and the DaemonSets' pods.
    wait(120 + 15 + 20 + 15).await;
    let nodes = list(&store, ResourceType::nodes(), &ListOptions::default());
    let on_bad: Vec<&Value> = nodes
        .iter()
        .filter(|n| n["status"]["nodeInfo"]["osImage"] == bad)
        .collect();
    assert_eq!(on_bad.len(), 1, "{nodes:#?}");
    assert!(ready(on_bad[0]), "the bad build's node turns Ready");
    let bad_node = on_bad[0]["metadata"]["name"].as_str().unwrap().to_string();
    let exporters = pods_of(&store, "node-exporter");
    let exporter = exporters
        .iter()
        .find(|p| p["spec"]["nodeName"] == bad_node.as_str())
        .expect("a node-exporter pod on the bad node");
    assert!(ready(exporter), "DaemonSet pods are not on the pod network");
    store
        .create(&ResourceType::deployments(), None, cache_deployment())
        .unwrap();
    wait(15).await;
    let pods = pods_of(&store, "cache");
    assert_eq!(pods.len(), 4);
    let (stuck, good): (Vec<&Value>, Vec<&Value>) = pods
        .iter()
        .partition(|p| p["spec"]["nodeName"] == bad_node.as_str());
    assert_eq!(stuck.len(), 1, "least-allocated placement puts one there");
    assert!(good.iter().all(|p| ready(p)), "{good:#?}");
    assert!(!ready(stuck[0]), "{:#}", stuck[0]);
    let event = |store: &Store| {
        let name = format!("{}.sandbox", stuck[0]["metadata"]["name"].as_str().unwrap());
        store
            .get(&ResourceType::events(), Some("default"), &name)
            .unwrap()
    };
    let e = event(&store);
    assert_eq!(e["reason"], "FailedCreatePodSandBox", "{e:#}");
    assert_eq!(e["type"], "Warning");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("the CNI plugin does not start"),
        "{e:#}"
    );
    // Three failures 10 s apart, then the pod starts and passes its probe.
    wait(40).await;
    assert_eq!(event(&store)["count"], 3);
    let pod = pods_of(&store, "cache")
        .into_iter()
        .find(|p| p["spec"]["nodeName"] == bad_node.as_str())
        .unwrap();
    assert!(ready(&pod), "{pod:#}");
}

#[tokio::test(start_paused = true)]
async fn an_evicted_replica_comes_back_on_another_node() {
    let fleet = Fleet::start(
        &scenario(WorkloadProfile::default(), FaultProfile::default(), 3),
        1.0,
    )
    .await
    .unwrap();
    let store = fleet.store("prod").unwrap().clone();
    wait(1).await;
    let victim = pods_of(&store, "license-server").remove(0);
    let node = victim["spec"]["nodeName"].as_str().unwrap().to_string();
    // Cordon its node, as a drain does, then evict (graceful deletion).
    store
        .modify(&ResourceType::nodes(), None, &node, |n| {
            n["spec"]["unschedulable"] = json!(true);
            Ok(())
        })
        .unwrap();
    let name = victim["metadata"]["name"].as_str().unwrap();
    store
        .mark_deleting(&ResourceType::pods(), Some("legacy"), name, 30)
        .unwrap();
    wait(2).await;
    let pods = pods_of(&store, "license-server");
    assert_eq!(
        pods.len(),
        2,
        "the replacement exists while the old one terminates"
    );
    let replacement = pods.iter().find(|p| p["metadata"]["name"] != name).unwrap();
    assert_ne!(replacement["spec"]["nodeName"].as_str().unwrap(), node);
    wait(40).await;
    let pods = pods_of(&store, "license-server");
    assert_eq!(
        pods.len(),
        1,
        "the evicted pod is gone after its grace period"
    );
    assert!(ready(&pods[0]));
    assert_ne!(pods[0]["spec"]["nodeName"].as_str().unwrap(), node);
}

#[tokio::test(start_paused = true)]
async fn a_terminated_instance_takes_its_node_and_pods_away() {
    let fleet = Fleet::start(
        &scenario(WorkloadProfile::default(), FaultProfile::default(), 4),
        1.0,
    )
    .await
    .unwrap();
    let store = fleet.store("prod").unwrap().clone();
    let g = asg("prod", "general");
    wait(1).await;
    let state = fleet.cloud.describe(&g).await.unwrap();
    let victim = &state.instances[0];
    let node = list(&store, ResourceType::nodes(), &ListOptions::default())
        .into_iter()
        .find(|n| n["spec"]["providerID"] == victim.provider_id.as_str())
        .unwrap();
    let node_name = node["metadata"]["name"].as_str().unwrap().to_string();
    fleet.cloud.terminate(&g, &victim.id, true).await.unwrap();
    wait(5).await;
    let n = store.get(&ResourceType::nodes(), None, &node_name).unwrap();
    assert!(!ready(&n), "a terminating instance's node is NotReady");
    wait(40).await;
    assert!(store.get(&ResourceType::nodes(), None, &node_name).is_err());
    let on_node = list(
        &store,
        ResourceType::pods(),
        &ListOptions::fields(&format!("spec.nodeName={node_name}")),
    );
    assert!(on_node.is_empty());
    // Every replica is back on the two remaining nodes.
    wait(30).await;
    let pods = list(&store, ResourceType::pods(), &ListOptions::default());
    assert_eq!(pods.len(), 17 + 4);
    assert!(pods.iter().all(ready));
}

#[tokio::test(start_paused = true)]
async fn faults_repeat_under_a_seed() {
    async fn story(seed: u64) -> (Vec<String>, Vec<rota::sim::cloud::CloudEvent>) {
        let faults = FaultProfile::from_yaml(
            "boot: {failureRate: 0.5}\nlaunch: {capacityErrorRate: 0.3}",
            "<t>",
        )
        .unwrap();
        let mut w = WorkloadProfile::default();
        w.deployments.clear();
        let fleet = Fleet::start(&scenario(w, faults, seed), 1.0).await.unwrap();
        let g = asg("prod", "general");
        fleet.cloud.set_capacity(&g, 8, Some(8)).await.unwrap();
        wait(1200).await;
        let store = fleet.store("prod").unwrap();
        let mut names: Vec<String> = list(store, ResourceType::nodes(), &ListOptions::default())
            .iter()
            .filter(|n| ready(n))
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        (names, fleet.cloud.take_events())
    }
    let a = story(7).await;
    let b = story(7).await;
    let c = story(8).await;
    assert_eq!(a.0.len(), 8, "every failed boot or launch was retried");
    use rota::sim::cloud::CloudEvent::{BootFailed, LaunchFailed};
    assert!(a.1.iter().any(|e| matches!(e, BootFailed { .. })));
    assert!(a.1.iter().any(|e| matches!(e, LaunchFailed { .. })));
    assert_eq!(a, b);
    assert_ne!(a.1, c.1);
}

#[tokio::test(start_paused = true)]
async fn kubelets_follow_any_node_groups_provider_by_polling() {
    use rota::sim::cloud::{GroupSpec, PollingObserver, SimCloud};
    use rota::sim::world::World;
    use std::sync::Arc;
    let mut w = WorkloadProfile::default();
    w.deployments.clear();
    w.daemon_sets.clear();
    let s = scenario(w, FaultProfile::default(), 5);
    // The provider is only known as `dyn NodeGroups` (as a real cloud would be), with API
    // faults the observer has to ride out.
    let cloud = SimCloud::new(
        5,
        FaultProfile::from_yaml("api: {throttleRate: 0.3}", "<t>").unwrap(),
        1.0,
    );
    let g = asg("prod", "general");
    cloud
        .create_group(
            GroupSpec::new(g.clone(), 2, "ami-1")
                .with_max(3)
                .prebooted(),
        )
        .unwrap();
    let _cloud_task = cloud.spawn();
    let provider: Arc<dyn NodeGroups> = Arc::new(cloud.clone());
    let world = World::load(
        &s.clusters[0],
        &s,
        None,
        Arc::new(PollingObserver(provider.clone())),
        1.0,
    )
    .await
    .unwrap();
    let store = world.store.clone();
    let _task = world.spawn();
    assert_eq!(
        list(&store, ResourceType::nodes(), &ListOptions::default()).len(),
        2
    );
    loop {
        match provider.set_capacity(&g, 3, None).await {
            Ok(()) => break,
            Err(e) => assert!(e.kind.is_retryable(), "{e}"),
        }
    }
    wait(120 + 15 + 20 + 30).await;
    let nodes = list(&store, ResourceType::nodes(), &ListOptions::default());
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(ready));
}

#[tokio::test(start_paused = true)]
async fn a_replica_with_nowhere_to_go_waits_and_says_why() {
    let fleet = Fleet::start(
        &scenario(WorkloadProfile::default(), FaultProfile::default(), 6),
        1.0,
    )
    .await
    .unwrap();
    let store = fleet.store("prod").unwrap().clone();
    wait(1).await;
    let nodes = list(&store, ResourceType::nodes(), &ListOptions::default());
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap();
        store
            .modify(&ResourceType::nodes(), None, name, |n| {
                n["spec"]["unschedulable"] = json!(true);
                Ok(())
            })
            .unwrap();
    }
    let victim = pods_of(&store, "worker").remove(0);
    let name = victim["metadata"]["name"].as_str().unwrap();
    store
        .delete(&ResourceType::pods(), Some("shop"), name)
        .unwrap();
    wait(5).await;
    let pending: Vec<Value> = pods_of(&store, "worker")
        .into_iter()
        .filter(|p| p["spec"]["nodeName"].is_null())
        .collect();
    assert_eq!(pending.len(), 1);
    let cond = pending[0]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .unwrap()
        .clone();
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "Unschedulable");
    assert_eq!(
        cond["message"],
        "0/3 nodes are available: 3 node(s) were unschedulable."
    );
    let first = nodes[0]["metadata"]["name"].as_str().unwrap();
    store
        .modify(&ResourceType::nodes(), None, first, |n| {
            n["spec"]["unschedulable"] = json!(false);
            Ok(())
        })
        .unwrap();
    wait(15).await;
    let pods = pods_of(&store, "worker");
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(ready));
}

#[tokio::test(start_paused = true)]
async fn deleting_an_owner_collects_its_dependents() {
    let fleet = Fleet::start(
        &scenario(WorkloadProfile::default(), FaultProfile::default(), 7),
        1.0,
    )
    .await
    .unwrap();
    let store = fleet.store("prod").unwrap().clone();
    wait(1).await;
    store
        .delete(&ResourceType::deployments(), Some("shop"), "web")
        .unwrap();
    store
        .delete(&ResourceType::daemonsets(), Some("logging"), "log-shipper")
        .unwrap();
    wait(60).await;
    assert!(pods_of(&store, "web").is_empty());
    assert!(pods_of(&store, "log-shipper").is_empty());
    let rs = list(
        &store,
        ResourceType::replicasets(),
        &ListOptions::labels("app=web"),
    );
    assert!(rs.is_empty());
    assert_eq!(pods_of(&store, "api").len(), 4, "others are untouched");
}

/// One pool of 40 nodes running 30 pods each (1,200 pods, two PDB-less Deployments).
fn crowded() -> Scenario {
    let profile = WorkloadProfile::from_yaml(
        "nodes: {perPool: 40, cpu: '16', memory: 64Gi, pods: 110}\n\
         deployments:\n  \
           - {name: web, namespace: shop, replicasPerNode: 15, cpu: 100m, memory: 128Mi}\n  \
           - {name: api, namespace: shop, replicasPerNode: 15, cpu: 100m, memory: 128Mi}\n",
        "crowded",
    )
    .unwrap();
    scenario(profile, FaultProfile::default(), 7)
}

/// The API server's `/metrics` value of `name`.
async fn sim_metric(store: &Store, name: &str) -> f64 {
    let client = rota::kube::sim::client(store.clone());
    let text = client
        .request_text(http::Request::get("/metrics").body(vec![]).unwrap())
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
}

#[tokio::test(start_paused = true)]
async fn a_pod_past_its_grace_period_is_gone_at_the_next_tick_however_many_terminate() {
    let fleet = Fleet::start(&crowded(), 1.0).await.unwrap();
    let store = fleet.store("prod").unwrap().clone();
    wait(5).await;
    // Every pod of the cluster marked for deletion at once (a drain of the whole pool), with
    // no chance for the world to run in between: 1,200 watch events queue up.
    let marked: Vec<(String, String)> = pods_of(&store, "web")
        .into_iter()
        .chain(pods_of(&store, "api"))
        .map(|p| {
            let name = p["metadata"]["name"].as_str().unwrap().to_string();
            let uid = p["metadata"]["uid"].as_str().unwrap().to_string();
            (name, uid)
        })
        .collect();
    assert_eq!(marked.len(), 1_200);
    for (name, _) in &marked {
        store
            .mark_deleting(&ResourceType::pods(), Some("shop"), name, 30)
            .unwrap();
    }
    // The world does not run for 31 s (a starved process), then gets one tick.
    tokio::time::advance(Duration::from_secs(31)).await;
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    let left: Vec<&String> = marked
        .iter()
        .filter(|(name, uid)| {
            store
                .get(&ResourceType::pods(), Some("shop"), name)
                .is_ok_and(|p| p["metadata"]["uid"] == uid.as_str())
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        left.is_empty(),
        "{} of 1,200 pods past their grace period still there, e.g. {:?}",
        left.len(),
        left.first()
    );
    assert!(
        sim_metric(&store, "rota_sim_lag_seconds_max").await >= 0.9,
        "the deletions were handled a second late"
    );
}

#[tokio::test(start_paused = true)]
async fn the_lag_metric_rises_when_the_sim_is_starved_and_falls_when_it_keeps_up() {
    let fleet = Fleet::start(&crowded(), 10.0).await.unwrap();
    let store = fleet.store("prod").unwrap().clone();
    wait(5).await;
    let idle = sim_metric(&store, "rota_sim_lag_seconds").await;
    assert!(idle < 1.0, "an idle world keeps up: lag {idle}");
    // One pod terminating (3 real seconds at 10x), then 60 real seconds without the world
    // running: it handles the deletion 57 real seconds, 570 simulated seconds, late.
    let victim = pods_of(&store, "web").remove(0);
    let name = victim["metadata"]["name"].as_str().unwrap();
    store
        .mark_deleting(&ResourceType::pods(), Some("shop"), name, 30)
        .unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    let starved = sim_metric(&store, "rota_sim_lag_seconds").await;
    assert!(
        (560.0..=580.0).contains(&starved),
        "starved for 57 s at 10x: lag {starved}; pod {:?}",
        store
            .get(&ResourceType::pods(), Some("shop"), name)
            .map(|p| p["metadata"]["deletionTimestamp"].clone())
    );
    assert!(sim_metric(&store, "rota_sim_late_ticks_total").await >= 1.0);
    // Running freely again: once the gauge's window is over the rounds show on time; the
    // maximum is kept.
    wait(15).await;
    assert!(sim_metric(&store, "rota_sim_lag_seconds").await < 1.0);
    assert!(sim_metric(&store, "rota_sim_lag_seconds_max").await >= 560.0);
}
