//! A GKE double: the Kubernetes Engine API v1 calls rota's GKE node pool client makes
//! (`projects.locations.clusters.nodePools.get` and `.update`,
//! `projects.locations.operations.get` and `.list`), on a loopback port, held to Google's
//! published container v1 discovery document (`api_schemas`, `Api::Container`).
//!
//! Every request is checked against the description as it arrives (`api_schemas::checked`):
//! one the description does not allow (a field it does not name, a value of the wrong type or
//! enum, a path no method serves) is refused with 400 `INVALID_ARGUMENT` naming the problems,
//! as GKE refuses a malformed request. Every exchange is checked again, answers included,
//! when the double is dropped.
//!
//! It answers as GKE does: `nodePools.update` starts an `UPGRADE_NODES` operation, `RUNNING`
//! until the test ends it ([`GkeDouble::finish`]: `DONE`, the pool on the new version and image
//! type, or `DONE` with `error`, the pool left where it was); while an operation runs
//! anywhere on the cluster (this pool's or another's), every node pool mutation is refused
//! with 400 `FAILED_PRECONDITION` ("Operation ... is currently upgrading node pool ...
//! Please wait and try again once it is done."), as GKE runs one at a time on a cluster;
//! `resourceLabels` replaces the pool's labels; operations are listed for the
//! whole location, other clusters' and other kinds' among them.
//!
//! And the node pool calls of `managedUpdate: blueGreen`, each answering with its operation:
//! `nodePools.create` (a pool of that name already there is 409 `ALREADY_EXISTS`; the new
//! pool `PROVISIONING` with a running `CREATE_NODE_POOL` until [`GkeDouble::finish`], `RUNNING`
//! then, or `ERROR` with the operation's error), `nodePools.setSize` (`nodeCount` per zone;
//! refused like the others while an operation runs on the cluster) and
//! `nodePools.delete` (`STOPPING` until [`GkeDouble::finish`], then gone). With the Compute
//! double linked ([`GkeDouble::link_compute`]), a created pool gets one managed instance group
//! per zone there, as GKE makes them, and `setSize` resizes each to `nodeCount`.
#![allow(dead_code)]

use std::collections::BTreeMap;

use hyper::{HeaderMap, Uri};
use serde_json::{Value, json};

use super::api_schemas::Api;
use super::api_schemas::checked::{CheckedDouble, Service};
use super::gcp_double::ComputeLink;

#[derive(Clone, Debug)]
struct Pool {
    version: String,
    image_type: String,
    per_zone: u64,
    zones: Vec<String>,
    labels: BTreeMap<String, String>,
    upgrade_settings: Value,
    /// `instanceGroupUrls`: the pool's managed instance groups (Compute's, served by the
    /// GCP double), as GKE lists them.
    instance_groups: Vec<String>,
    /// The rest of the node pool as `nodePools.create` was sent it (`null` for a pool the
    /// test added).
    created_with: Value,
    /// `ERROR` and GKE's message: a creation that failed.
    error: Option<String>,
}

#[derive(Clone, Debug)]
struct Op {
    name: String,
    location: String,
    kind: &'static str,
    target: String,
    status: &'static str,
    start: String,
    end: Option<String>,
    error: Option<String>,
    /// The node version and image type the pool moves to.
    to: Option<(String, String)>,
    /// The `google.rpc.Code` of `error`.
    code: i64,
}

/// GKE's node pools and operations, as the double keeps them.
#[derive(Default)]
pub struct Gke {
    /// By node pool path (`projects/P/locations/L/clusters/C/nodePools/N`).
    pools: BTreeMap<String, Pool>,
    ops: Vec<Op>,
    serial: u32,
    /// The Compute double where the pools' instance groups live.
    compute: Option<ComputeLink>,
}

/// The running double ([`GkeDouble::start`]).
pub type GkeDouble = CheckedDouble<Gke>;

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

const BASE: &str = "https://container.googleapis.com/v1";

impl CheckedDouble<Gke> {
    /// A node pool at `path` of `per_zone` nodes in each of `zones`, on `version` and
    /// `image_type`, with GKE's default upgrade settings (surge 1, unavailable 0).
    pub fn add_pool(
        &self,
        path: &str,
        version: &str,
        image_type: &str,
        per_zone: u64,
        zones: &[&str],
    ) {
        self.with(|s| {
            s.pools.insert(
            path.into(),
            Pool {
                version: version.into(),
                image_type: image_type.into(),
                per_zone,
                zones: zones.iter().map(|z| z.to_string()).collect(),
                labels: BTreeMap::from([("team".to_string(), "payments".to_string())]),
                upgrade_settings: json!({"maxSurge": 1, "maxUnavailable": 0, "strategy": "SURGE"}),
                instance_groups: vec![],
                created_with: Value::Null,
                error: None,
            },
        )
        });
    }

    /// Make and size the pools' instance groups in the Compute double `compute` from now on.
    pub fn link_compute(&self, compute: ComputeLink) {
        self.with(|s| s.compute = Some(compute));
    }

    /// The node pool as `nodePools.create` was sent it (`nodePool`); `None` for a pool that
    /// was not created through the API or is gone.
    pub fn created(&self, path: &str) -> Option<Value> {
        self.with(|s| s.pools.get(path).map(|p| p.created_with.clone()))
    }

    /// Whether the double has a node pool at `path`.
    pub fn has_pool(&self, path: &str) -> bool {
        self.with(|s| s.pools.contains_key(path))
    }

    /// How many node pools `nodePools.create` made (tests: "never a second twin").
    pub fn creates(&self) -> usize {
        self.with(|s| {
            s.ops
                .iter()
                .filter(|o| o.kind == "CREATE_NODE_POOL")
                .count()
        })
    }

    /// The pool's managed instance groups (`instanceGroupUrls`), as full Compute URLs.
    pub fn set_instance_groups(&self, path: &str, urls: &[String]) {
        self.with(|s| s.pools.get_mut(path).unwrap().instance_groups = urls.to_vec());
    }

    /// An operation that is not this pool's upgrade (another cluster's, another kind), so
    /// that the client has to pick the pool's own out of the location's list.
    pub fn add_other_operation(&self, location: &str, kind: &'static str, target: &str) {
        self.with(|s| s.add_other_operation(location, kind, target))
    }

    /// End the running upgrade: `DONE` with the pool on its target, or `DONE` with an
    /// error and the pool where it was.
    pub fn finish(&self, ok: bool) {
        self.with(|s| s.finish(ok))
    }

    /// How many upgrades `nodePools.update` started (tests: "never a second update").
    pub fn upgrades(&self) -> usize {
        self.with(|s| s.ops.iter().filter(|o| o.to.is_some()).count())
    }

    /// The pool's resource labels now.
    pub fn labels(&self, path: &str) -> BTreeMap<String, String> {
        self.with(|s| s.pools[path].labels.clone())
    }
}

impl Gke {
    fn add_other_operation(&mut self, location: &str, kind: &'static str, target: &str) {
        self.serial += 1;
        let name = format!("operation-{}-other", self.serial);
        self.ops.push(Op {
            name,
            location: location.into(),
            kind,
            target: format!("{BASE}/{target}"),
            status: "DONE",
            start: now(),
            end: Some(now()),
            error: None,
            to: None,
            code: 13,
        });
    }

    fn finish(&mut self, ok: bool) {
        let op = self
            .ops
            .iter_mut()
            .rev()
            .find(|o| o.status == "RUNNING")
            .expect("an operation running");
        op.status = "DONE";
        op.end = Some(now());
        let path = op
            .target
            .strip_prefix(&format!("{BASE}/"))
            .unwrap()
            .to_string();
        match (op.kind, ok) {
            ("DELETE_NODE_POOL", _) => {
                self.pools.remove(&path);
            }
            ("CREATE_NODE_POOL", true) => {}
            ("CREATE_NODE_POOL", false) => {
                let e = "Insufficient regional quota to satisfy request: resource \"CPUS\"";
                op.error = Some(e.into());
                op.code = 8;
                self.pools.get_mut(&path).unwrap().error = Some(e.into());
            }
            (_, true) => {
                let (v, t) = op.to.clone().unwrap();
                let pool = self.pools.get_mut(&path).unwrap();
                pool.version = v;
                pool.image_type = t;
            }
            (_, false) => {
                op.error = Some("Nodes failed to register: the node image does not boot".into());
            }
        }
    }
}

fn pool_json(path: &str, p: &Pool, running: Option<&'static str>) -> Value {
    let status = match (running, &p.error) {
        (Some("CREATE_NODE_POOL"), _) => "PROVISIONING",
        (Some("DELETE_NODE_POOL"), _) => "STOPPING",
        (Some(_), _) => "RECONCILING",
        (None, Some(_)) => "ERROR",
        (None, None) => "RUNNING",
    };
    let mut config = match &p.created_with["config"] {
        Value::Object(c) => Value::Object(c.clone()),
        _ => json!({"machineType": "e2-standard-4"}),
    };
    config["imageType"] = json!(p.image_type);
    config["resourceLabels"] = json!(p.labels);
    let mut v = json!({
        "name": path.rsplit('/').next().unwrap(),
        "version": p.version,
        "config": config,
        "initialNodeCount": p.per_zone,
        "locations": p.zones,
        "upgradeSettings": p.upgrade_settings,
        "status": status,
        "selfLink": format!("{BASE}/{path}"),
    });
    if let Some(e) = &p.error {
        v["statusMessage"] = json!(e);
    }
    for k in [
        "management",
        "networkConfig",
        "maxPodsConstraint",
        "placementPolicy",
    ] {
        if let Some(x) = p.created_with.get(k) {
            v[k] = x.clone();
        }
    }
    if !p.instance_groups.is_empty() {
        v["instanceGroupUrls"] = json!(p.instance_groups);
    }
    v
}

fn op_json(project: &str, o: &Op) -> Value {
    let mut v = json!({
        "name": o.name,
        "location": o.location,
        "operationType": o.kind,
        "status": o.status,
        "selfLink": format!("{BASE}/projects/{project}/locations/{}/operations/{}", o.location, o.name),
        "targetLink": o.target,
        "startTime": o.start,
    });
    if let Some(e) = &o.end {
        v["endTime"] = json!(e);
    }
    if let Some(e) = &o.error {
        v["error"] = json!({"code": o.code, "message": e});
        v["statusMessage"] = json!(e);
    }
    v
}

fn google_error(status: u16, code: &str, message: &str) -> (u16, Value) {
    (
        status,
        json!({"error": {"code": status, "message": message, "status": code}}),
    )
}

impl Service for Gke {
    const API: Api = Api::Container;

    fn path(uri: &Uri) -> String {
        uri.path().trim_start_matches('/').to_string()
    }

    fn refuse(problems: &str) -> (u16, Value) {
        google_error(400, "INVALID_ARGUMENT", problems)
    }

    fn answer(&mut self, method: &str, path: &str, _: &HeaderMap, body: &Value) -> (u16, Value) {
        answer(self, method, path, body)
    }
}

fn answer(s: &mut Gke, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let parts: Vec<&str> = path.split('/').collect();
    // v1/projects/P/locations/L/...
    let (project, location) = (
        parts.get(2).copied().unwrap_or(""),
        parts.get(4).copied().unwrap_or(""),
    );
    let tail = &parts[1.min(parts.len())..].join("/");
    let running_on = |s: &Gke, target: &str| {
        s.ops
            .iter()
            .find(|o| o.status == "RUNNING" && o.target == format!("{BASE}/{target}"))
            .cloned()
    };
    match (method, parts.get(5).copied(), parts.len()) {
        ("GET", Some("operations"), 6) => {
            let ops: Vec<Value> = s
                .ops
                .iter()
                .filter(|o| o.location == location)
                .map(|o| op_json(project, o))
                .collect();
            (200, json!({"operations": ops}))
        }
        ("GET", Some("operations"), 7) => match s.ops.iter().find(|o| o.name == parts[6]) {
            Some(o) => (200, op_json(project, o)),
            None => google_error(
                404,
                "NOT_FOUND",
                &format!("Operation {} not found", parts[6]),
            ),
        },
        ("GET", Some("clusters"), 8) if parts[7] == "nodePools" => {
            let prefix = format!("{tail}/");
            let pools: Vec<Value> = s
                .pools
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, p)| pool_json(k, p, running_on(s, k).map(|o| o.kind)))
                .collect();
            (200, json!({"nodePools": pools}))
        }
        ("GET", Some("clusters"), 9) => match s.pools.get(tail.as_str()) {
            Some(p) => (200, pool_json(tail, p, running_on(s, tail).map(|o| o.kind))),
            None => google_error(
                404,
                "NOT_FOUND",
                &format!("Node pool {} not found.", parts[8]),
            ),
        },
        ("POST", Some("clusters"), 8) if parts[7] == "nodePools" => create(
            s,
            project,
            location,
            tail.trim_end_matches("/nodePools"),
            &body["nodePool"],
        ),
        ("POST", Some("clusters"), 9) if parts[8].ends_with(":setSize") => {
            let pool_path = tail.trim_end_matches(":setSize").to_string();
            set_size(s, project, location, &pool_path, body["nodeCount"].as_u64())
        }
        ("DELETE", Some("clusters"), 9) => {
            if !s.pools.contains_key(tail.as_str()) {
                return google_error(
                    404,
                    "NOT_FOUND",
                    &format!("Node pool {} not found.", parts[8]),
                );
            }
            if let Some(refused) = cluster_busy(s, cluster_of(tail)) {
                return refused;
            }
            let op = s.start(location, "DELETE_NODE_POOL", tail, false);
            (200, op_json(project, &op))
        }
        ("PUT", Some("clusters"), 9) => {
            if !s.pools.contains_key(tail.as_str()) {
                return google_error(
                    404,
                    "NOT_FOUND",
                    &format!("Node pool {} not found.", parts[8]),
                );
            }
            if let Some(refused) = cluster_busy(s, cluster_of(tail)) {
                return refused;
            }
            let pool = s.pools.get_mut(tail.as_str()).unwrap();
            let version = match body["nodeVersion"].as_str() {
                Some("-") | None => pool.version.clone(),
                Some(v) => v.to_string(),
            };
            let image_type = body["imageType"]
                .as_str()
                .unwrap_or(&pool.image_type)
                .to_string();
            if let Some(u) = body.get("upgradeSettings") {
                pool.upgrade_settings = u.clone();
            }
            if let Some(l) = body["resourceLabels"]["labels"].as_object() {
                pool.labels = l
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect();
            }
            s.serial += 1;
            let op = Op {
                name: format!(
                    "operation-{}-{:08x}",
                    s.serial,
                    s.serial.wrapping_mul(2_654_435_761)
                ),
                location: location.to_string(),
                kind: "UPGRADE_NODES",
                target: format!("{BASE}/{tail}"),
                status: "RUNNING",
                start: now(),
                end: None,
                error: None,
                to: Some((version, image_type)),
                code: 13,
            };
            let v = op_json(project, &op);
            s.ops.push(op);
            (200, v)
        }
        _ => google_error(
            404,
            "NOT_FOUND",
            &format!("{method} {path}: not served by the GKE double"),
        ),
    }
}

/// GKE's refusal of any node pool mutation while an operation runs anywhere on the cluster
/// (`cluster`: `projects/P/locations/L/clusters/C`), in GKE's words: `None` when none runs.
fn cluster_busy(s: &Gke, cluster: &str) -> Option<(u16, Value)> {
    let prefix = format!("{BASE}/{cluster}/");
    let o = s
        .ops
        .iter()
        .find(|o| o.status == "RUNNING" && o.target.starts_with(&prefix))?;
    let verb = match o.kind {
        "CREATE_NODE_POOL" => "creating",
        "DELETE_NODE_POOL" => "deleting",
        _ => "upgrading",
    };
    let pool = o.target.rsplit('/').next().unwrap_or_default();
    Some(google_error(
        400,
        "FAILED_PRECONDITION",
        &format!(
            "Operation {} is currently {verb} node pool {pool}. Please wait and try again once it is done.",
            o.name
        ),
    ))
}

/// The cluster a node pool path (`.../clusters/C/nodePools/N`) is in.
fn cluster_of(pool_path: &str) -> &str {
    pool_path.split("/nodePools/").next().unwrap_or_default()
}

impl Gke {
    /// A new operation of `kind` on the pool at `target`, `RUNNING` (or `DONE` at once).
    fn start(&mut self, location: &str, kind: &'static str, target: &str, done: bool) -> Op {
        self.serial += 1;
        let op = Op {
            name: format!(
                "operation-{}-{:08x}",
                self.serial,
                self.serial.wrapping_mul(2_654_435_761)
            ),
            location: location.to_string(),
            kind,
            target: format!("{BASE}/{target}"),
            status: if done { "DONE" } else { "RUNNING" },
            start: now(),
            end: done.then(now),
            error: None,
            to: None,
            code: 13,
        };
        self.ops.push(op.clone());
        op
    }
}

/// `nodePools.create` under the cluster at `parent`: the pool as sent, its groups made in the
/// linked Compute double (one a zone, `initialNodeCount` each), `PROVISIONING` until finished.
fn create(s: &mut Gke, project: &str, location: &str, parent: &str, np: &Value) -> (u16, Value) {
    let name = np["name"].as_str().unwrap_or_default().to_string();
    let path = format!("{parent}/nodePools/{name}");
    if s.pools.contains_key(&path) {
        return google_error(
            409,
            "ALREADY_EXISTS",
            &format!("Already exists: Node pool \"{name}\" already exists."),
        );
    }
    if let Some(refused) = cluster_busy(s, parent) {
        return refused;
    }
    let per_zone = np["initialNodeCount"].as_u64().unwrap_or(0);
    let zones: Vec<String> = np["locations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|z| z.as_str().map(str::to_string))
        .collect();
    let cluster = parent.rsplit('/').next().unwrap_or_default();
    let version = np["version"]
        .as_str()
        .unwrap_or("1.31.4-gke.1183000")
        .to_string();
    let image_type = np["config"]["imageType"]
        .as_str()
        .unwrap_or("COS_CONTAINERD");
    let instance_groups = match &s.compute {
        Some(c) => zones
            .iter()
            .map(|z| {
                let key = c.add_group(
                    project,
                    z,
                    &format!("gke-{cluster}-{name}-{z}-grp"),
                    per_zone as u32,
                    "projects/gke-node-images/global/images/gke-node",
                );
                format!("https://www.googleapis.com/compute/v1/{key}")
            })
            .collect(),
        None => vec![],
    };
    let labels = np["config"]["resourceLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    s.pools.insert(
        path.clone(),
        Pool {
            version,
            image_type: image_type.to_string(),
            per_zone,
            zones,
            labels,
            upgrade_settings: np.get("upgradeSettings").cloned().unwrap_or_else(
                || json!({"maxSurge": 1, "maxUnavailable": 0, "strategy": "SURGE"}),
            ),
            instance_groups,
            created_with: np.clone(),
            error: None,
        },
    );
    let op = s.start(location, "CREATE_NODE_POOL", &path, false);
    (200, op_json(project, &op))
}

/// `nodePools.setSize`: each of the pool's groups to `nodeCount` (GKE's count is per zone).
fn set_size(
    s: &mut Gke,
    project: &str,
    location: &str,
    path: &str,
    count: Option<u64>,
) -> (u16, Value) {
    let Some(pool) = s.pools.get(path) else {
        return google_error(404, "NOT_FOUND", &format!("Node pool {path} not found."));
    };
    let Some(count) = count else {
        return google_error(400, "INVALID_ARGUMENT", "nodeCount is required");
    };
    if let Some(refused) = cluster_busy(s, cluster_of(path)) {
        return refused;
    }
    if let Some(c) = &s.compute {
        for url in &pool.instance_groups {
            let key = url.split_once("/compute/v1/").unwrap().1;
            c.resize(key, count as u32);
        }
    }
    let op = s.start(location, "SET_NODE_POOL_SIZE", path, true);
    (200, op_json(project, &op))
}
