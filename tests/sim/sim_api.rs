//! rota's own client path (kube-rs) against the in-process simulated API server: watches,
//! server-side apply, the status subresource, conflicts; and the eviction answers of
//! "API-initiated eviction" with PDBs as in "Specifying a Disruption Budget". Paused time.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use rota::sim::pdb;
use rota::sim::store::{ResourceType, Store};
use serde_json::{Value, json};

fn api_err(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Lets spawned tasks (the PDB controller, watch streams) run.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test(start_paused = true)]
async fn watcher_sees_adds_changes_and_deletes() {
    let store = Store::new();
    let client = rota::kube::sim::client(store.clone());
    let nodes: Api<Node> = Api::all(client);
    let node = |n: &str| serde_json::from_value::<Node>(json!({"metadata": {"name": n}})).unwrap();
    nodes
        .create(&PostParams::default(), &node("n1"))
        .await
        .unwrap();

    let mut events = watcher(nodes.clone(), watcher::Config::default()).boxed();
    let mut seen = Vec::new();
    // Initial list: Init, InitApply(n1), InitDone.
    while seen.len() < 3 {
        seen.push(match events.try_next().await.unwrap().unwrap() {
            watcher::Event::Init => "init".to_string(),
            watcher::Event::InitApply(n) => format!("init-apply {}", n.metadata.name.unwrap()),
            watcher::Event::InitDone => "init-done".to_string(),
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(seen, ["init", "init-apply n1", "init-done"]);

    nodes
        .create(&PostParams::default(), &node("n2"))
        .await
        .unwrap();
    let p = json!({"spec": {"unschedulable": true}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&p))
        .await
        .unwrap();
    nodes.delete("n2", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(match events.try_next().await.unwrap().unwrap() {
            watcher::Event::Apply(n) => format!(
                "apply {} {:?}",
                n.metadata.name.unwrap(),
                n.spec.and_then(|s| s.unschedulable)
            ),
            watcher::Event::Delete(n) => format!("delete {}", n.metadata.name.unwrap()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(seen, ["apply n2 None", "apply n1 Some(true)", "delete n2"]);

    // Label selectors on list.
    let labelled = json!({"metadata": {"labels": {"pool": "blue"}}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&labelled))
        .await
        .unwrap();
    let l = nodes
        .list(&ListParams::default().labels("pool=blue"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    assert!(
        nodes
            .list(&ListParams::default().labels("pool=green"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn watch_from_a_compacted_version_is_gone() {
    let store = Store::new();
    let client = rota::kube::sim::client(store.clone());
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "rota"}, "spec": {"holderIdentity": "a"}}),
    )
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let old = store.resource_version();
    for i in 0..10_001 {
        store
            .modify(&ResourceType::leases(), Some("default"), "rota", |l| {
                l["spec"]["leaseTransitions"] = json!(i);
                Ok(())
            })
            .unwrap();
    }
    let mut stream = leases
        .watch(&kube::api::WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        kube::core::WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn apply_status_and_conflicts() {
    let store = Store::new();
    let client = rota::kube::sim::client(store.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    // Server-side apply creates, then updates; a second manager changing the same field
    // conflicts unless it forces.
    let cfg = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "rota-leader"}, "spec": {"holderIdentity": "agent-a", "leaseDurationSeconds": 15}});
    let l = leases
        .patch(
            "rota-leader",
            &PatchParams::apply("rota"),
            &Patch::Apply(&cfg),
        )
        .await
        .unwrap();
    assert_eq!(
        l.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some("agent-a")
    );
    let mf = l.metadata.managed_fields.as_ref().unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("rota"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let other = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "rota-leader"}, "spec": {"holderIdentity": "agent-b"}});
    let e = api_err(
        leases
            .patch(
                "rota-leader",
                &PatchParams::apply("intruder"),
                &Patch::Apply(&other),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains("conflict with \"rota\""),
        "{}",
        e.message
    );
    let l = leases
        .patch(
            "rota-leader",
            &PatchParams::apply("intruder").force(),
            &Patch::Apply(&other),
        )
        .await
        .unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some("agent-b"));

    // Replace with a stale resourceVersion: 409 Conflict.
    let mut stale = leases.get("rota-leader").await.unwrap();
    let mut fresh = stale.clone();
    fresh.spec.as_mut().unwrap().lease_transitions = Some(1);
    leases
        .replace("rota-leader", &PostParams::default(), &fresh)
        .await
        .unwrap();
    stale.spec.as_mut().unwrap().lease_transitions = Some(2);
    let e = api_err(
        leases
            .replace("rota-leader", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(e.message.contains("the object has been modified"));

    // NotFound is a Status too.
    let e = api_err(leases.get("nope").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "leases.coordination.k8s.io \"nope\" not found");

    // Status subresource: a status patch changes status only, a main patch leaves status.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client, "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        "status": {"currentHealthy": 9, "desiredHealthy": 9, "disruptionsAllowed": 9, "expectedPods": 9}})).unwrap();
    let created = pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    assert!(
        created.status.is_none(),
        "status is the controller's, not the creator's"
    );
    let st = json!({"status": {"currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 1},
                    "spec": {"minAvailable": 5}});
    let p = pdbs
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().current_healthy, 1);
    assert_eq!(
        p.spec.as_ref().unwrap().min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    let sp = json!({"spec": {"minAvailable": 2}, "status": {"currentHealthy": 7}});
    let p = pdbs
        .patch("p", &PatchParams::default(), &Patch::Merge(&sp))
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().current_healthy, 1);
    assert_eq!(p.metadata.generation, Some(2));
    // JSON patch.
    let jp: json_patch::Patch = serde_json::from_value(
        json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]),
    )
    .unwrap();
    let p = pdbs
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(p.metadata.labels.unwrap()["a"], "b");
}

/// A ReplicaSet of `n` Ready pods labelled app=web in `default`, and a PDB with `spec`.
fn workload(store: &Store, n: usize, pdb_spec: Value) {
    let ns = Some("default");
    let rs = store
        .create(
            &ResourceType::replicasets(),
            ns,
            json!({"metadata": {"name": "web"}, "spec": {"replicas": n}}),
        )
        .unwrap();
    for i in 0..n {
        store.create(&ResourceType::pods(), ns, json!({
            "metadata": {"name": format!("web-{i}"), "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                              "uid": rs["metadata"]["uid"], "controller": true}]},
            "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})).unwrap();
    }
    let mut spec = pdb_spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    store
        .create(
            &ResourceType::pdbs(),
            ns,
            json!({"metadata": {"name": "web"}, "spec": spec}),
        )
        .unwrap();
}

fn pdb_status(store: &Store) -> (i64, i64, i64, i64) {
    let p = store
        .get(&ResourceType::pdbs(), Some("default"), "web")
        .unwrap();
    let g = |k: &str| p["status"][k].as_i64().unwrap_or(-1);
    (
        g("expectedPods"),
        g("currentHealthy"),
        g("desiredHealthy"),
        g("disruptionsAllowed"),
    )
}

#[tokio::test(start_paused = true)]
async fn eviction_follows_the_budget() {
    let store = Store::new();
    let _ctl = pdb::spawn_controller(store.clone());
    let pods: Api<Pod> = Api::namespaced(rota::kube::sim::client(store.clone()), "default");
    // 3 replicas, minAvailable 2: one disruption at a time.
    workload(&store, 3, json!({"minAvailable": 2}));
    settle().await;
    assert_eq!(pdb_status(&store), (3, 3, 2, 1));

    // Allowed: 201 Success; the pod terminates for its grace period, then is gone.
    let st = pods.evict("web-0", &EvictParams::default()).await.unwrap();
    assert_eq!(st.code, 201);
    let p = pods.get("web-0").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    settle().await;
    // The evicted pod no longer counts, whether or not it is gone yet.
    assert_eq!(pdb_status(&store), (3, 2, 2, 0));

    // Forbidden now: 429 with the Kubernetes message and cause.
    let e = api_err(
        pods.evict("web-1", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        e.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &e.details.as_ref().unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert!(
        pods.get("web-1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );

    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(
        api_err(pods.get("web-0").await.unwrap_err()).code,
        404,
        "deleted after the grace period"
    );
    // A replacement comes up (the workload controller's job; done by hand here).
    let mut new = store
        .get(&ResourceType::pods(), Some("default"), "web-1")
        .unwrap();
    new["metadata"] = json!({"name": "web-3", "labels": {"app": "web"}, "ownerReferences": new["metadata"]["ownerReferences"]});
    store
        .create(&ResourceType::pods(), Some("default"), new)
        .unwrap();
    settle().await;
    assert_eq!(pdb_status(&store), (3, 3, 2, 1));
    assert_eq!(
        pods.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
}

#[tokio::test(start_paused = true)]
async fn eviction_edge_cases_of_the_eviction_api() {
    let store = Store::new();
    let _ctl = pdb::spawn_controller(store.clone());
    let client = rota::kube::sim::client(store.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    workload(&store, 2, json!({"maxUnavailable": 0}));
    settle().await;
    assert_eq!(pdb_status(&store), (2, 2, 2, 0));
    assert_eq!(
        api_err(
            pods.evict("web-0", &EvictParams::default())
                .await
                .unwrap_err()
        )
        .code,
        429
    );

    // A pod that is not running (Pending) is evicted whatever the budget.
    store
        .modify(&ResourceType::pods(), Some("default"), "web-0", |p| {
            p["status"]["phase"] = json!("Pending");
            Ok(())
        })
        .unwrap();
    assert_eq!(
        pods.evict("web-0", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );

    // An unready pod with the default policy (IfHealthyBudget) and an unmet budget: 429.
    store
        .modify(&ResourceType::pods(), Some("default"), "web-1", |p| {
            p["status"]["conditions"][0]["status"] = json!("False");
            Ok(())
        })
        .unwrap();
    settle().await;
    assert_eq!(
        api_err(
            pods.evict("web-1", &EvictParams::default())
                .await
                .unwrap_err()
        )
        .code,
        429
    );
    // With AlwaysAllow it may go.
    store
        .modify(&ResourceType::pdbs(), Some("default"), "web", |p| {
            p["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
            Ok(())
        })
        .unwrap();
    settle().await;
    assert_eq!(
        pods.evict("web-1", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );

    // Two budgets over one pod: 500, the eviction API does not support it.
    let ns = Some("default");
    store.create(&ResourceType::pods(), ns, json!({"metadata": {"name": "db-0", "labels": {"app": "db"}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})).unwrap();
    for n in ["db-a", "db-b"] {
        store
            .create(
                &ResourceType::pdbs(),
                ns,
                json!({"metadata": {"name": n},
            "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "db"}}}}),
            )
            .unwrap();
    }
    settle().await;
    let e = api_err(
        pods.evict("db-0", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 500);
    assert_eq!(
        e.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );

    // A budget whose status has not caught up with its spec: 429 "still being processed".
    store.delete(&ResourceType::pdbs(), ns, "db-b").unwrap();
    settle().await;
    {
        _ctl.abort();
    };
    store
        .modify(&ResourceType::pdbs(), ns, "db-a", |p| {
            p["spec"]["minAvailable"] = json!(1);
            Ok(())
        })
        .unwrap();
    let e = api_err(
        pods.evict("db-0", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 429);
    assert_eq!(
        e.details.as_ref().unwrap().causes[0].message,
        "The disruption budget db-a is still being processed by the server."
    );
    assert_eq!(e.details.as_ref().unwrap().retry_after_seconds, 10);

    // No budget: plain deletion. Unknown pod: 404.
    store.delete(&ResourceType::pdbs(), ns, "db-a").unwrap();
    assert_eq!(
        pods.evict("db-0", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    assert_eq!(
        api_err(
            pods.evict("ghost", &EvictParams::default())
                .await
                .unwrap_err()
        )
        .code,
        404
    );
}

#[tokio::test(start_paused = true)]
async fn percentage_budgets_count_the_controller_scale() {
    let store = Store::new();
    let _ctl = pdb::spawn_controller(store.clone());
    // 7 replicas, minAvailable 50%: ceil(3.5) = 4 must stay, 3 may go (the documentation's
    // rounding example).
    workload(&store, 7, json!({"minAvailable": "50%"}));
    settle().await;
    assert_eq!(pdb_status(&store), (7, 7, 4, 3));
    let pods: Api<Pod> = Api::namespaced(rota::kube::sim::client(store.clone()), "default");
    for i in 0..3 {
        assert_eq!(
            pods.evict(&format!("web-{i}"), &EvictParams::default())
                .await
                .unwrap()
                .code,
            201
        );
    }
    let e = api_err(
        pods.evict("web-3", &EvictParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 429);
    settle().await;
    assert_eq!(pdb_status(&store), (7, 4, 4, 0));
}

/// Raw requests through the tower service: discovery documents, Status bodies, bookmarks and
/// the initial-events marker of streaming lists.
mod raw {
    use super::*;
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use rota::sim::apiserver::ApiServer;

    async fn call(server: &ApiServer, method: &str, uri: &str, body: Value) -> (u16, Value) {
        let req = hyper::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Bytes::from(if body.is_null() {
                String::new()
            } else {
                body.to_string()
            }))
            .unwrap();
        let resp = server.handle(req).await;
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[tokio::test(start_paused = true)]
    async fn discovery_and_errors() {
        let server = ApiServer::new(Store::new());
        let (c, v) = call(&server, "GET", "/api/v1", Value::Null).await;
        assert_eq!(c, 200);
        let names: Vec<&str> = v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"pods/eviction") && names.contains(&"nodes/status"),
            "{names:?}"
        );
        let (_, v) = call(&server, "GET", "/apis", Value::Null).await;
        let groups: Vec<&str> = v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            groups,
            [
                "admissionregistration.k8s.io",
                "apiextensions.k8s.io",
                "apps",
                "coordination.k8s.io",
                "events.k8s.io",
                "networking.k8s.io",
                "policy",
                "rbac.authorization.k8s.io"
            ]
        );
        let (c, v) = call(&server, "GET", "/apis/nope.example/v1/things", Value::Null).await;
        assert_eq!((c, v["reason"].as_str()), (404, Some("NotFound")));
        assert_eq!(v["kind"], "Status");
        let (c, v) = call(
            &server,
            "GET",
            "/api/v1/namespaces/default/pods/missing",
            Value::Null,
        )
        .await;
        assert_eq!(
            (c, v["message"].as_str()),
            (404, Some("pods \"missing\" not found"))
        );
        assert_eq!(
            v["details"],
            json!({"name": "missing", "group": "", "kind": "pods"})
        );
        // Selectors are URL-decoded: app in (a,b).
        let (c, _) = call(
            &server,
            "GET",
            "/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29",
            Value::Null,
        )
        .await;
        assert_eq!(c, 200);
        let (c, v) = call(
            &server,
            "GET",
            "/api/v1/pods?labelSelector=app%20in",
            Value::Null,
        )
        .await;
        assert_eq!((c, v["reason"].as_str()), (400, Some("BadRequest")));
        // A PUT whose body names another object.
        let (c, _) = call(
            &server,
            "POST",
            "/api/v1/nodes",
            json!({"metadata": {"name": "n1"}}),
        )
        .await;
        assert_eq!(c, 201);
        let (c, v) = call(
            &server,
            "PUT",
            "/api/v1/nodes/n1",
            json!({"metadata": {"name": "n2"}}),
        )
        .await;
        assert_eq!(c, 400, "{v}");
        // Apply without a field manager.
        let req = hyper::Request::builder()
            .method("PATCH")
            .uri("/api/v1/nodes/n1")
            .header("content-type", "application/apply-patch+yaml")
            .body(Bytes::from(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",
            ))
            .unwrap();
        assert_eq!(server.handle(req).await.status().as_u16(), 400);
        let req = hyper::Request::builder()
            .method("PATCH")
            .uri("/api/v1/nodes/n1?fieldManager=me")
            .header("content-type", "application/apply-patch+yaml")
            .body(Bytes::from(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    a: b\n",
            ))
            .unwrap();
        assert_eq!(server.handle(req).await.status().as_u16(), 200);
        assert_eq!(
            server
                .store()
                .get(&ResourceType::nodes(), None, "n1")
                .unwrap()["metadata"]["labels"]["a"],
            "b"
        );
        // Paging: limit and continue walk the list once, each page at the first page's version.
        for i in 2..=5 {
            call(
                &server,
                "POST",
                "/api/v1/nodes",
                json!({"metadata": {"name": format!("n{i}")}}),
            )
            .await;
        }
        let (_, p1) = call(&server, "GET", "/api/v1/nodes?limit=2", Value::Null).await;
        let rv = p1["metadata"]["resourceVersion"].clone();
        let tok = p1["metadata"]["continue"].as_str().unwrap().to_string();
        call(
            &server,
            "POST",
            "/api/v1/nodes",
            json!({"metadata": {"name": "n6"}}),
        )
        .await;
        let (_, p2) = call(
            &server,
            "GET",
            &format!("/api/v1/nodes?limit=2&continue={tok}"),
            Value::Null,
        )
        .await;
        assert_eq!(p2["metadata"]["resourceVersion"], rv);
        let tok = p2["metadata"]["continue"].as_str().unwrap().to_string();
        let (_, p3) = call(
            &server,
            "GET",
            &format!("/api/v1/nodes?limit=2&continue={tok}"),
            Value::Null,
        )
        .await;
        assert!(p3["metadata"]["continue"].is_null());
        let names: Vec<String> = [&p1, &p2, &p3]
            .iter()
            .flat_map(|p| {
                p["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(names, ["n1", "n2", "n3", "n4", "n5", "n6"]);
        let (c, _) = call(
            &server,
            "GET",
            "/api/v1/nodes?continue=garbage",
            Value::Null,
        )
        .await;
        assert_eq!(c, 400);
        let (c, _) = call(
            &server,
            "POST",
            "/api/v1/namespaces/default/nodes",
            json!({}),
        )
        .await;
        assert_eq!(c, 404, "nodes are not namespaced");
    }

    async fn lines(server: &ApiServer, uri: &str) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        let req = hyper::Request::builder()
            .uri(uri)
            .body(Bytes::new())
            .unwrap();
        let mut body = server.handle(req).await.into_body();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    for l in String::from_utf8_lossy(&data).lines() {
                        let _ = tx.send(serde_json::from_str::<Value>(l).unwrap());
                    }
                }
            }
        });
        rx
    }

    #[tokio::test(start_paused = true)]
    async fn bookmarks_and_initial_events() {
        let store = Store::new();
        let server = ApiServer::new(store.clone()).with_bookmark_interval(Duration::from_secs(5));
        store
            .create(
                &ResourceType::nodes(),
                None,
                json!({"metadata": {"name": "n1"}}),
            )
            .unwrap();
        let mut w = lines(&server, "/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan").await;
        let first = w.recv().await.unwrap();
        assert_eq!(
            (
                first["type"].as_str(),
                first["object"]["metadata"]["name"].as_str()
            ),
            (Some("ADDED"), Some("n1"))
        );
        let end = w.recv().await.unwrap();
        assert_eq!(end["type"], "BOOKMARK");
        assert_eq!(
            end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        store
            .create(
                &ResourceType::nodes(),
                None,
                json!({"metadata": {"name": "n2"}}),
            )
            .unwrap();
        assert_eq!(w.recv().await.unwrap()["type"], "ADDED");
        // Nothing happens for a while: a bookmark at the current version arrives.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let b = w.recv().await.unwrap();
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(
            b["object"]["metadata"]["resourceVersion"].as_str().unwrap(),
            store.resource_version()
        );
        // Without allowWatchBookmarks: no bookmarks; the watch ends at timeoutSeconds.
        let mut quiet = lines(
            &server,
            "/api/v1/nodes?watch=true&resourceVersion=0&timeoutSeconds=10",
        )
        .await;
        assert_eq!(quiet.recv().await.unwrap()["type"], "ADDED");
        assert_eq!(quiet.recv().await.unwrap()["type"], "ADDED");
        assert!(
            quiet.recv().await.is_none(),
            "closed after the timeout without bookmarks"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn kube_rs_recorder_events_show_as_core_events() {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let store = Store::new();
    let client = rota::kube::sim::client(store.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let n = nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap(),
        )
        .await
        .unwrap();
    let reporter = Reporter {
        controller: "rota".into(),
        instance: Some("rota-0".into()),
    };
    let recorder = Recorder::new(client, reporter);
    let ev = Event {
        type_: EventType::Normal,
        reason: "Cordoned".into(),
        note: Some("cordoned for batch 1".into()),
        action: "Cordon".into(),
        secondary: None,
    };
    let reference = kube::Resource::object_ref(&n, &());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let (core, _) = store
        .list(
            &ResourceType::events(),
            Some("default"),
            &rota::sim::store::ListOptions::fields("involvedObject.name=n1"),
        )
        .unwrap();
    assert_eq!(core.len(), 1, "the repeat is a series on the same event");
    assert_eq!(core[0]["message"], "cordoned for batch 1");
    assert_eq!(core[0]["reason"], "Cordoned");
    assert_eq!(core[0]["reportingComponent"], "rota");
    assert_eq!(core[0]["series"]["count"], 2);
}

#[tokio::test(start_paused = true)]
async fn dry_run_changes_nothing() {
    let store = Store::new();
    let nodes: Api<Node> = Api::all(rota::kube::sim::client(store.clone()));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    nodes.create(&dry, &n).await.unwrap();
    assert!(store.get(&ResourceType::nodes(), None, "n1").is_err());
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let rv = store.resource_version();
    let p = json!({"spec": {"unschedulable": true}});
    let out = nodes
        .patch("n1", &PatchParams::default().dry_run(), &Patch::Merge(&p))
        .await
        .unwrap();
    assert_eq!(
        out.spec.unwrap().unschedulable,
        Some(true),
        "answers with the would-be object"
    );
    let mut cur = nodes.get("n1").await.unwrap();
    assert_ne!(cur.spec.as_ref().and_then(|s| s.unschedulable), Some(true));
    cur.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    nodes.replace("n1", &dry, &cur).await.unwrap();
    nodes
        .delete(
            "n1",
            &DeleteParams {
                dry_run: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(store.resource_version(), rv, "nothing was written");
    assert!(store.get(&ResourceType::nodes(), None, "n1").unwrap()["metadata"]["labels"].is_null());
}
