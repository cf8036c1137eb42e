//! Discovery documents: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/<group>[/<version>]`,
//! built from the store's registered types (so a new CRD shows up at once).
//!
//! Only the legacy (unaggregated) documents are served, with `Content-Type:
//! application/json`: kubectl and client-go ask for aggregated discovery
//! (`as=APIGroupDiscoveryList`) first and fall back to these when the answer is not in that
//! form. OpenAPI endpoints answer 404, which makes kubectl skip client-side schema
//! validation and use the built-in patch metadata.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::store::{ResourceType, Store};

/// The Kubernetes version the simulated cluster claims to be (its scenario's control plane,
/// see `Store::kubernetes_version`).
pub fn version(store: &Store) -> Value {
    let v = store.kubernetes_version();
    json!({
        "major": v.major.to_string(), "minor": v.minor.to_string(),
        "gitVersion": format!("v{}.{}.0-rota-sim", v.major, v.minor),
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

fn groups(store: &Store) -> BTreeMap<String, Vec<String>> {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in store.types().into_iter().filter(|t| !t.group.is_empty()) {
        let vs = g.entry(rt.group.clone()).or_default();
        if !vs.contains(&rt.version) {
            vs.push(rt.version.clone());
        }
    }
    g
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": vs,
           "preferredVersion": vs[0]})
}

pub fn group_list(store: &Store) -> Value {
    let gs: Vec<Value> = groups(store)
        .iter()
        .map(|(n, vs)| {
            let mut d = group_doc(n, vs);
            let o = d.as_object_mut().expect("object");
            o.remove("kind");
            o.remove("apiVersion");
            d
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

pub fn group(store: &Store, name: &str) -> Option<Value> {
    groups(store).get(name).map(|vs| group_doc(name, vs))
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entry(rt: &ResourceType) -> Value {
    let mut e = json!({
        "name": rt.plural, "singularName": rt.kind.to_lowercase(), "namespaced": rt.namespaced,
        "kind": rt.kind, "verbs": VERBS,
    });
    if !rt.short_names.is_empty() {
        e["shortNames"] = json!(rt.short_names);
    }
    if matches!(
        rt.plural.as_str(),
        "pods" | "deployments" | "replicasets" | "daemonsets" | "statefulsets"
    ) {
        e["categories"] = json!(["all"]);
    }
    e
}

/// `APIResourceList` of one group/version, with the status and eviction subresources.
pub fn resource_list(store: &Store, group: &str, version: &str) -> Option<Value> {
    let types: Vec<ResourceType> = store
        .types()
        .into_iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if types.is_empty() {
        return None;
    }
    let mut rs = Vec::new();
    for rt in &types {
        rs.push(resource_entry(rt));
        if rt.status {
            rs.push(
                json!({"name": format!("{}/status", rt.plural), "singularName": "",
                           "namespaced": rt.namespaced, "kind": rt.kind,
                           "verbs": ["get", "patch", "update"]}),
            );
        }
        if rt.group == "apps"
            && matches!(
                rt.plural.as_str(),
                "deployments" | "replicasets" | "statefulsets"
            )
        {
            rs.push(
                json!({"name": format!("{}/scale", rt.plural), "singularName": "",
                           "namespaced": true, "group": "autoscaling", "version": "v1",
                           "kind": "Scale", "verbs": ["get", "patch", "update"]}),
            );
        }
        if rt.group.is_empty() && rt.plural == "pods" {
            // kubectl drain looks for exactly this entry to decide it can evict.
            rs.push(
                json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                           "group": "policy", "version": "v1", "kind": "Eviction",
                           "verbs": ["create"]}),
            );
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs}),
    )
}

/// `GET /`: the paths the server answers.
pub fn root_paths(store: &Store) -> Value {
    let mut paths = vec![
        "/api".to_string(),
        "/api/v1".into(),
        "/apis".into(),
        "/healthz".into(),
        "/livez".into(),
        "/metrics".into(),
        "/readyz".into(),
        "/version".into(),
    ];
    for (g, vs) in groups(store) {
        paths.push(format!("/apis/{g}"));
        for v in vs {
            paths.push(format!("/apis/{g}/{v}"));
        }
    }
    paths.sort();
    json!({"paths": paths})
}

/// The group-version key OpenAPI v3 uses: `api/v1`, `apis/<group>/<version>`.
fn gv_key(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("api/{}", rt.version)
    } else {
        format!("apis/{}/{}", rt.group, rt.version)
    }
}

/// `GET /openapi/v3`: one entry per group-version. The hash changes when the types of the
/// group-version do, so kubectl's disk cache never serves a stale document.
pub fn openapi_v3_root(store: &Store) -> Value {
    let mut by_gv: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in store.types() {
        by_gv
            .entry(gv_key(&rt))
            .or_default()
            .push(format!("{}/{}/{}", rt.plural, rt.kind, rt.namespaced));
    }
    let paths: serde_json::Map<String, Value> = by_gv
        .into_iter()
        .map(|(k, names)| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            names.hash(&mut h);
            let url = format!("/openapi/v3/{k}?hash={:016X}", h.finish());
            (k, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// `GET /openapi/v3/<gv>`: the operations of each resource, without schemas. It exists so
/// that kubectl sees the `fieldValidation` parameter on PATCH and leaves validation to the
/// server instead of downloading schemas (the simulated server accepts unknown fields).
pub fn openapi_v3_gv(store: &Store, key: &str) -> Option<Value> {
    let types: Vec<ResourceType> = store
        .types()
        .into_iter()
        .filter(|t| gv_key(t) == key)
        .collect();
    if types.is_empty() {
        return None;
    }
    let param = |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string"}});
    let mut paths = serde_json::Map::new();
    for rt in &types {
        let gvk = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
        let base = if rt.namespaced {
            format!("/{key}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("/{key}/{}", rt.plural)
        };
        let op = |action: &str| {
            json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                   "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation")],
                   "responses": {"200": {"description": "OK"}}})
        };
        paths.insert(base.clone(), json!({"post": op("post"), "get": op("list")}));
        paths.insert(format!("{base}/{{name}}"), json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes (rota simulation)", "version": "v1.33.0"},
                "paths": paths, "components": {"schemas": {}}}),
    )
}
