//! GKE node pools: [`OwnerPools`] on the Kubernetes Engine API v1 (`container.googleapis.com`),
//! the owner's own surge upgrade (`managedUpdate: service`).
//!
//! Calls, per operation (each request under the shared [`RetryPolicy`]):
//! - `describe`: `projects.locations.clusters.nodePools.get` (version, `config.imageType`,
//!   `instanceGroupUrls`, `upgradeSettings`, the `rota-update` resource label), Compute's
//!   `instanceGroupManagers.get` of each of the pool's managed instance groups (the pool's
//!   size is the sum of their `targetSize`: `initialNodeCount` is only what the pool was
//!   created with, and the autoscaler or a resize moves the groups, not it), then the pool's newest
//!   `UPGRADE_NODES` operation: `projects.locations.operations.get` for the operation this
//!   client started or last saw running, `projects.locations.operations.list` otherwise.
//! - `start_update`: `nodePools.get`, then `nodePools.update` with `nodeVersion`, `imageType`,
//!   `upgradeSettings` (`maxSurge` from rota's batch, `maxUnavailable: 0`, strategy `SURGE`)
//!   and the pool's resource labels with rota's token added.
//!
//! Why REST and not a generated client: the one Google publishes for this API
//! (`google-cloud-container-v1`) would add a large generated crate to every GCP build for
//! four methods; these calls are JSON over the HTTPS connector rota already builds, with the
//! credentials of `google-cloud-auth` that the Compute client uses (Application Default
//! Credentials: Workload Identity on GKE).
//!
//! GKE takes no idempotency token. rota's token rides in the same `nodePools.update` as the
//! node pool's resource label `rota-update` (labels are the node pool's own, and an update's
//! `resourceLabels` replaces them all: the pool's other labels are sent back with it). A
//! start whose token the pool already carries started its operation: it is answered with
//! that operation, never a second update. An operation is taken for rota's only when the label
//! carries a token and the operation started at or after the token's time
//! ([`token_of_operation`]); a later upgrade by someone else that leaves the label in place is
//! still taken for rota's (a loose end, as for AKS's tag; GKE records no requester on an
//! operation).
//!
//! `managedUpdate: blueGreen` (the twin pool, its members and size, one node's removal, the
//! old pool's deletion) is `node_pool_twin.rs`'s, on the same client.
//!
//! Never written: the node pool's instance template, which GKE owns. (A blue-green move
//! sizes a pool's managed instance groups and removes a drained node from one, as GKE's own
//! cluster autoscaler does: `node_pool_twin.rs`.)

use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::Context as _;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::GcpCredentials;
use super::classify::{classify_rpc, cluster_busy};
use crate::cloud::lazy_owner::OwnerFacts;
use crate::cloud::retry::RetryPolicy;
use rota_core::cloud::managed::{
    GkeTarget, MaxUnavailable, OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools,
    OwnerUpdate, TwinRequest, UpdateRequest, UpdateStatus,
};
use rota_core::cloud::{CloudError, CloudErrorKind};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// The Kubernetes Engine API's root.
pub const CONTAINER_ENDPOINT: &str = "https://container.googleapis.com";
/// The node pool resource label that carries rota's token.
pub const TOKEN_LABEL: &str = "rota-update";

pub const GET_NODE_POOL: &str = "nodePools.get";
pub const UPDATE_NODE_POOL: &str = "nodePools.update";

/// What [`GkeNodePools`] is, known before it is built ([`crate::cloud::lazy_owner`]).
pub const FACTS: OwnerFacts = OwnerFacts {
    owner: Owner::GkeNodePool,
    capabilities: OwnerCapabilities {
        service_update: true,
        max_unavailable: true,
        // `operations.cancel` leaves the pool part upgraded; rota does not use it.
        cancel_update: false,
    },
    blue_green: true,
    describe_call: GET_NODE_POOL,
    update_call: UPDATE_NODE_POOL,
};
pub const GET_OPERATION: &str = "operations.get";
pub const LIST_OPERATIONS: &str = "operations.list";
/// Compute's read of one of the pool's managed instance groups (its `targetSize`).
pub const GET_INSTANCE_GROUP_MANAGER: &str = "instanceGroupManagers.get";
/// `managedUpdate: blueGreen`'s node pool calls (`node_pool_twin.rs`).
pub const CREATE_NODE_POOL: &str = "nodePools.create";
pub const SET_NODE_POOL_SIZE: &str = "nodePools.setSize";
pub const DELETE_NODE_POOL: &str = "nodePools.delete";
pub const LIST_NODE_POOLS: &str = "nodePools.list";
/// Compute's list of one of the pool's managed instance groups' instances (blue-green).
pub const LIST_MANAGED_INSTANCES: &str = "instanceGroupManagers.listManagedInstances";
/// Compute's removal of one drained node from its group, the group's size with it.
pub const DELETE_INSTANCES: &str = "instanceGroupManagers.deleteInstances";
/// Compute's resize of one of the pool's groups (a total `setSize` cannot spread evenly).
pub const RESIZE_INSTANCE_GROUP: &str = "instanceGroupManagers.resize";
/// Compute's read of a zonal operation: `deleteInstances` and `resize` followed to `DONE`.
pub const GET_ZONE_OPERATION: &str = "zoneOperations.get";
/// The Compute API's root, where a node pool's instance groups are read.
pub const COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com";

/// The IAM permissions each call needs (`docs/cloud-gcp.md` grants them in one custom role).
pub const PERMISSIONS: &[(&str, &str)] = &[
    (GET_NODE_POOL, "container.clusters.get"),
    (UPDATE_NODE_POOL, "container.clusters.update"),
    (GET_OPERATION, "container.operations.get"),
    (LIST_OPERATIONS, "container.operations.list"),
    (
        GET_INSTANCE_GROUP_MANAGER,
        "compute.instanceGroupManagers.get",
    ),
    // `managedUpdate: blueGreen` (node_pool_twin.rs). GKE asks `container.clusters.update`
    // to create, resize or delete a node pool and `container.clusters.get` to list them.
    (CREATE_NODE_POOL, "container.clusters.update"),
    (SET_NODE_POOL_SIZE, "container.clusters.update"),
    (DELETE_NODE_POOL, "container.clusters.update"),
    (LIST_NODE_POOLS, "container.clusters.get"),
    (LIST_MANAGED_INSTANCES, "compute.instanceGroupManagers.get"),
    (DELETE_INSTANCES, "compute.instanceGroupManagers.update"),
    (
        RESIZE_INSTANCE_GROUP,
        "compute.instanceGroupManagers.update",
    ),
    (GET_ZONE_OPERATION, "compute.zoneOperations.get"),
];

/// Settings of a [`GkeNodePools`].
#[derive(Clone, Debug)]
pub struct GkeOptions {
    /// The API root, e.g. `http://127.0.0.1:8123` for a test double; `None` for
    /// [`CONTAINER_ENDPOINT`].
    pub endpoint: Option<String>,
    /// The Compute API's root for the pools' instance groups, e.g. a test double's; `None`
    /// for [`COMPUTE_ENDPOINT`].
    pub compute_endpoint: Option<String>,
    pub credentials: GcpCredentials,
    pub retry: RetryPolicy,
}

impl Default for GkeOptions {
    fn default() -> Self {
        GkeOptions {
            endpoint: None,
            compute_endpoint: None,
            credentials: GcpCredentials::ApplicationDefault,
            retry: RetryPolicy::default(),
        }
    }
}

/// What this client remembers of an operation it started or saw running: its name and the
/// image it moves the pool to (GKE's operation does not say).
#[derive(Clone, Debug)]
struct Known {
    operation: String,
    image: Option<String>,
}

/// [`OwnerPools`] for GKE node pools, in any project and location.
pub struct GkeNodePools {
    http: Client<crate::https::Connector, Full<Bytes>>,
    credentials: google_cloud_auth::credentials::Credentials,
    endpoint: String,
    compute_endpoint: String,
    retry: RetryPolicy,
    /// By node pool path: the operation to read with `operations.get` while it runs.
    known: Mutex<HashMap<String, Known>>,
    /// By node pool path: the blue-green operation (create, setSize, delete) this client
    /// started on it, read with `operations.get` by `members` while it runs.
    pub(super) twin_ops: Mutex<HashMap<String, String>>,
}

/// A node pool's coordinates.
pub(super) struct Pool<'a> {
    pub(super) project: &'a str,
    pub(super) location: &'a str,
    pub(super) cluster: &'a str,
    pub(super) name: &'a str,
}

impl Pool<'_> {
    /// The cluster's path, the parent of its node pools.
    pub(super) fn cluster_path(&self) -> String {
        format!(
            "projects/{}/locations/{}/clusters/{}",
            self.project, self.location, self.cluster
        )
    }

    pub(super) fn path(&self) -> String {
        format!(
            "projects/{}/locations/{}/clusters/{}/nodePools/{}",
            self.project, self.location, self.cluster, self.name
        )
    }

    pub(super) fn operations(&self) -> String {
        format!(
            "projects/{}/locations/{}/operations",
            self.project, self.location
        )
    }
}

pub(super) fn gke_target<'a>(
    pool: &'a ManagedGroup,
    call: &'static str,
) -> Result<Pool<'a>, CloudError> {
    match pool {
        ManagedGroup::GkeNodePool {
            project,
            location,
            gke_cluster,
            node_pool,
        } => Ok(Pool {
            project,
            location,
            cluster: gke_cluster,
            name: node_pool,
        }),
        other => Err(CloudError::about(
            CloudErrorKind::Invalid,
            call,
            &other.to_string(),
            format!("{} is not a GKE node pool", other.name()),
        )),
    }
}

impl GkeNodePools {
    /// The client; with [`GcpCredentials::ApplicationDefault`] the credentials are found now
    /// (and their absence is an error here, not at the first call).
    pub fn new(options: GkeOptions) -> anyhow::Result<GkeNodePools> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let credentials = match options.credentials {
            GcpCredentials::ApplicationDefault => {
                google_cloud_auth::credentials::Builder::default()
                    .build()
                    .context("finding Google Application Default Credentials (on GKE: Workload Identity for rota's service account)")?
            }
            GcpCredentials::Anonymous => {
                google_cloud_auth::credentials::anonymous::Builder::new().build()
            }
        };
        let connector = crate::https::connector(Some(std::time::Duration::from_secs(10)))
            .map_err(anyhow::Error::msg)?;
        Ok(GkeNodePools {
            http: Client::builder(TokioExecutor::new()).build(connector),
            credentials,
            endpoint: options
                .endpoint
                .unwrap_or_else(|| CONTAINER_ENDPOINT.to_string())
                .trim_end_matches('/')
                .to_string(),
            compute_endpoint: options
                .compute_endpoint
                .unwrap_or_else(|| COMPUTE_ENDPOINT.to_string())
                .trim_end_matches('/')
                .to_string(),
            retry: options.retry,
            known: Mutex::new(HashMap::new()),
            twin_ops: Mutex::new(HashMap::new()),
        })
    }

    /// One request under the retry policy: the JSON answer of a 2xx, else the Google error
    /// classified.
    pub(crate) async fn request(
        &self,
        call: &'static str,
        subject: &str,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, CloudError> {
        let url = format!("{}/v1/{path}", self.endpoint);
        self.retry
            .run(call, subject, || async {
                self.once(call, subject, method.clone(), &url, body).await
            })
            .await
    }

    async fn once(
        &self,
        call: &'static str,
        subject: &str,
        method: http::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Value, CloudError> {
        let err = |kind, m: String| CloudError::about(kind, call, subject, m);
        let uri: http::Uri = url
            .parse()
            .map_err(|e| err(CloudErrorKind::Invalid, format!("bad URL {url}: {e}")))?;
        if !crate::https::bearer_may_go_to(uri.scheme_str(), uri.host()) {
            return Err(err(
                CloudErrorKind::Invalid,
                format!("refusing to send Google credentials to {url} (not HTTPS, not loopback)"),
            ));
        }
        let headers = match self.credentials.headers(http::Extensions::new()).await {
            Ok(google_cloud_auth::credentials::CacheableResource::New { data, .. }) => data,
            Ok(google_cloud_auth::credentials::CacheableResource::NotModified) => {
                http::HeaderMap::new()
            }
            Err(e) => {
                let kind = if e.is_transient() {
                    CloudErrorKind::Transient
                } else {
                    CloudErrorKind::Permission
                };
                return Err(err(kind, format!("no Google credentials: {e}")));
            }
        };
        let mut req = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("accept", "application/json");
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let payload = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let req = req
            .body(Full::new(payload))
            .map_err(|e| err(CloudErrorKind::Invalid, e.to_string()))?;
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| err(CloudErrorKind::Transient, format!("no answer: {e}")))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| {
                err(
                    CloudErrorKind::Transient,
                    format!("reading the answer: {e}"),
                )
            })?
            .to_bytes();
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes).map_err(|e| {
                err(
                    CloudErrorKind::Transient,
                    format!("unreadable answer from GKE: {e}"),
                )
            });
        }
        let (kind, message) = google_error(status, &bytes);
        Err(err(kind, message))
    }

    /// The pool's size: the sum of its managed instance groups' `targetSize` (Compute
    /// `instanceGroupManagers.get` of each of its `instanceGroupUrls`); a pool that lists none
    /// yet (being created) has the size it was created with.
    async fn size(&self, np: &Value, subject: &str) -> Result<u32, CloudError> {
        let urls = np["instanceGroupUrls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if urls.is_empty() {
            return Ok(initial_size(np));
        }
        let mut total: u64 = 0;
        for u in &urls {
            let path = instance_group_path(u.as_str().unwrap_or_default()).map_err(|m| {
                CloudError::about(
                    CloudErrorKind::Invalid,
                    GET_INSTANCE_GROUP_MANAGER,
                    subject,
                    m,
                )
            })?;
            let mig = self
                .compute_get(GET_INSTANCE_GROUP_MANAGER, subject, &path)
                .await?;
            total += mig["targetSize"].as_u64().unwrap_or(0);
        }
        Ok(u32::try_from(total).unwrap_or(u32::MAX))
    }

    /// A Compute GET of `path` (after `compute/v1/`) at rota's Compute root, under the
    /// retry policy.
    pub(crate) async fn compute_get(
        &self,
        call: &'static str,
        subject: &str,
        path: &str,
    ) -> Result<Value, CloudError> {
        self.compute(call, subject, "GET", path, None).await
    }

    /// A Compute request (`GET` or `POST`) of `path` (after `compute/v1/`, with its query) at
    /// rota's Compute root, under the retry policy (a mutation's `requestId` is in `path`, so
    /// every retry carries the same one).
    pub(super) async fn compute(
        &self,
        call: &'static str,
        subject: &str,
        method: &'static str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, CloudError> {
        let url = format!("{}/compute/v1/{path}", self.compute_endpoint);
        let method = if method == "POST" {
            http::Method::POST
        } else {
            http::Method::GET
        };
        self.retry
            .run(call, subject, || async {
                self.once(call, subject, method.clone(), &url, body).await
            })
            .await
    }

    /// `nodePools.get`.
    pub(super) async fn node_pool(&self, p: &Pool<'_>, subject: &str) -> Result<Value, CloudError> {
        self.request(GET_NODE_POOL, subject, http::Method::GET, &p.path(), None)
            .await
    }

    /// The pool's newest `UPGRADE_NODES` operation: by name when this client knows one
    /// running, else from the location's operations.
    async fn newest_upgrade(
        &self,
        p: &Pool<'_>,
        subject: &str,
    ) -> Result<Option<Value>, CloudError> {
        let path = p.path();
        let known = self.known.lock().unwrap().get(&path).cloned();
        if let Some(k) = known {
            let op = self
                .request(
                    GET_OPERATION,
                    subject,
                    http::Method::GET,
                    &format!("{}/{}", p.operations(), k.operation),
                    None,
                )
                .await?;
            return Ok(Some(op));
        }
        let list = self
            .request(
                LIST_OPERATIONS,
                subject,
                http::Method::GET,
                &p.operations(),
                None,
            )
            .await?;
        let ops = list["operations"].as_array().cloned().unwrap_or_default();
        Ok(newest_upgrade_of(&ops, p.cluster, p.name).cloned())
    }

    fn remember(&self, path: &str, op: &Value, image: Option<String>) {
        let mut known = self.known.lock().unwrap();
        match op["name"].as_str() {
            Some(name) if op["status"].as_str() != Some("DONE") => {
                let image = image.or_else(|| {
                    known
                        .get(path)
                        .filter(|k| k.operation == name)
                        .and_then(|k| k.image.clone())
                });
                known.insert(
                    path.to_string(),
                    Known {
                        operation: name.to_string(),
                        image,
                    },
                );
            }
            // A finished operation is not read again: the next describe lists, and finds
            // any newer one.
            _ => {
                known.remove(path);
            }
        }
    }
}

/// The pool's newest upgrade among a location's operations (`UPGRADE_NODES` whose target is
/// this cluster's node pool; GKE names it by zone or by location, so the tail is compared).
fn newest_upgrade_of<'a>(ops: &'a [Value], cluster: &str, pool: &str) -> Option<&'a Value> {
    let tail = format!("/clusters/{cluster}/nodePools/{pool}");
    ops.iter()
        .filter(|op| op["operationType"] == "UPGRADE_NODES")
        .filter(|op| {
            op["targetLink"]
                .as_str()
                .is_some_and(|t| t.ends_with(&tail))
        })
        .max_by_key(|op| started(op))
}

fn started(op: &Value) -> Option<DateTime<Utc>> {
    op["startTime"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// The token of `op` when it is rota's: the pool carries `label` (set by the same request
/// that started an upgrade) and the operation started at or after the token's time (a rota
/// token is `rota-<unix seconds>-<digest>`, made just before its request). An operation
/// older than the token is someone else's.
pub fn token_of_operation(label: Option<&str>, op: &Value) -> Option<String> {
    let token = label?;
    let secs: i64 = token
        .strip_prefix("rota-")?
        .split('-')
        .next()?
        .parse()
        .ok()?;
    let at = started(op)?;
    (at.timestamp() >= secs).then(|| token.to_string())
}

/// A Google error body as a kind and a message: the `google.rpc.ErrorInfo` reasons (or the
/// legacy `errors[].reason`), the `status` code name, the HTTP status.
fn google_error(status: u16, body: &[u8]) -> (CloudErrorKind, String) {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let e = &v["error"];
    let mut reasons: Vec<&str> = e["details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["reason"].as_str())
        .collect();
    if reasons.is_empty() {
        reasons = e["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["reason"].as_str())
            .collect();
    }
    let code = e["status"].as_str();
    let message = e["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(300).collect());
    let busy = status == 400 && cluster_busy(code, &message);
    let kind = if busy {
        CloudErrorKind::Transient
    } else {
        classify_rpc(Some(status), code, &reasons)
    };
    let code = code.map(|c| format!(" {c}")).unwrap_or_default();
    let waiting = if busy {
        "GKE runs another operation on the cluster; rota asks again on a later pass: "
    } else {
        ""
    };
    (kind, format!("{waiting}HTTP {status}{code}: {message}"))
}

/// The pool's image in rota's one-string form (`NODE_VERSION/IMAGE_TYPE`).
pub(super) fn image_of(np: &Value) -> String {
    let version = np["version"].as_str().unwrap_or_default();
    let image_type = np["config"]["imageType"].as_str().unwrap_or_default();
    if version.is_empty() {
        image_type.to_string()
    } else {
        format!("{version}/{image_type}")
    }
}

/// What the pool was created with: `initialNodeCount` per zone, times its zones
/// (`locations`; a zonal cluster's pool lists one or none). Only the size of a pool that lists
/// no instance group yet (being created): a resize or the autoscaler moves the groups.
pub(super) fn initial_size(np: &Value) -> u32 {
    let per_zone = np["initialNodeCount"].as_u64().unwrap_or(0);
    let zones = np["locations"].as_array().map_or(1, |l| l.len().max(1)) as u64;
    u32::try_from(per_zone * zones).unwrap_or(u32::MAX)
}

/// The Compute path of one of a pool's `instanceGroupUrls`
/// (`https://www.googleapis.com/compute/v1/projects/P/zones/Z/instanceGroupManagers/N`):
/// `projects/P/zones/Z/instanceGroupManagers/N`. Read on rota's own Compute root, never the
/// host the answer names (credentials go to Google only); anything else is refused, naming it.
pub fn instance_group_path(url: &str) -> Result<String, String> {
    let path = url
        .split_once("/compute/v1/")
        .map(|(_, p)| p)
        .ok_or_else(|| format!("instanceGroupUrls: {url} is not a Compute v1 resource"))?;
    let parts: Vec<&str> = path.split('/').collect();
    let name_ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' || c == ':'
            })
    };
    match parts.as_slice() {
        [
            "projects",
            p,
            "zones" | "regions",
            z,
            "instanceGroupManagers",
            n,
        ] if name_ok(p) && name_ok(z) && name_ok(n) => Ok(path.to_string()),
        _ => Err(format!(
            "instanceGroupUrls: {url} is not a managed instance group \
             (projects/P/zones/Z/instanceGroupManagers/N)"
        )),
    }
}

/// An operation in rota's words.
fn owner_update(op: &Value, token: Option<String>, image: String) -> OwnerUpdate {
    let status = match (op["status"].as_str(), op.get("error")) {
        (Some("DONE"), Some(e)) if !e.is_null() => UpdateStatus::Failed,
        (Some("DONE"), _) => UpdateStatus::Successful,
        (Some("ABORTING"), _) => UpdateStatus::Cancelled,
        _ => UpdateStatus::InProgress,
    };
    let errors = op["error"]["message"]
        .as_str()
        .or_else(|| {
            op["statusMessage"]
                .as_str()
                .filter(|_| status == UpdateStatus::Failed)
        })
        .map(|m| {
            vec![format!(
                "code {}: {m}",
                op["error"]["code"].as_i64().unwrap_or(2)
            )]
        })
        .unwrap_or_default();
    OwnerUpdate {
        id: op["name"].as_str().unwrap_or_default().to_string(),
        token,
        image,
        status,
        errors,
    }
}

/// The `UpdateNodePoolRequest` for `req` on the pool `np` (as `nodePools.get` answered it) of
/// `size` nodes: the target's node version (`-`: the pool's own) and image type, `maxSurge`
/// from the batch (a percent of the pool's size, rounded up; GKE takes a count),
/// `maxUnavailable` 0 (surge: capacity never dips; with `drain_first`, `strategy: replace`,
/// the other way round: `maxSurge` 0 and `maxUnavailable` the batch), and the pool's resource
/// labels with the token.
pub fn update_request(
    path: &str,
    np: &Value,
    size: u32,
    req: &UpdateRequest,
) -> Result<Value, String> {
    let target = GkeTarget::parse(&req.image).ok_or_else(|| {
        format!(
            "{} is not a GKE node version and image type: rota's GKE service update takes \
             gke: {{nodeVersion, imageType}}, not a custom image",
            req.image
        )
    })?;
    let batch = match req.max_unavailable {
        MaxUnavailable::Count(n) => n.max(1),
        MaxUnavailable::Percent(p) => (size * u32::from(p)).div_ceil(100).max(1),
    };
    // `strategy: replace`: no surge, the batch taken out at once (GKE refuses both at 0).
    let (surge, unavailable) = if req.drain_first {
        (0, batch)
    } else {
        (batch, 0)
    };
    let mut labels = np["config"]["resourceLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(TOKEN_LABEL.into(), json!(req.token));
    Ok(json!({
        "name": path,
        "nodeVersion": target.node_version.unwrap_or_else(|| "-".into()),
        "imageType": target.image_type,
        "upgradeSettings": {"maxSurge": surge, "maxUnavailable": unavailable, "strategy": "SURGE"},
        "resourceLabels": {"labels": labels},
    }))
}

#[async_trait]
impl OwnerPools for GkeNodePools {
    fn owner(&self) -> Owner {
        FACTS.owner
    }

    fn capabilities(&self) -> OwnerCapabilities {
        FACTS.capabilities
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let p = gke_target(pool, GET_NODE_POOL)?;
        let subject = pool.to_string();
        let np = self.node_pool(&p, &subject).await?;
        let op = self.newest_upgrade(&p, &subject).await?;
        let path = p.path();
        let image = image_of(&np);
        let update = op.as_ref().map(|op| {
            self.remember(&path, op, None);
            let label = np["config"]["resourceLabels"][TOKEN_LABEL].as_str();
            let known = self.known.lock().unwrap().get(&path).cloned();
            let target = known
                .filter(|k| Some(k.operation.as_str()) == op["name"].as_str())
                .and_then(|k| k.image)
                .unwrap_or_else(|| image.clone());
            owner_update(op, token_of_operation(label, op), target)
        });
        Ok(OwnerPoolState {
            pool: pool.clone(),
            image,
            desired: self.size(&np, &subject).await?,
            // The batch: the surge, or without one (`strategy: replace`) what goes at once.
            max_unavailable: ["maxSurge", "maxUnavailable"]
                .iter()
                .find_map(|k| np["upgradeSettings"][k].as_u64().filter(|n| *n > 0))
                .map(|n| MaxUnavailable::Count(n as u32)),
            update,
        })
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        let p = gke_target(pool, UPDATE_NODE_POOL)?;
        let subject = pool.to_string();
        let path = p.path();
        let np = self.node_pool(&p, &subject).await?;
        // The pool carries this token: the request that set it started the upgrade (a
        // retry after a lost answer or a restart): answer with that operation.
        if np["config"]["resourceLabels"][TOKEN_LABEL].as_str() == Some(req.token.as_str())
            && let Some(op) = self.newest_upgrade(&p, &subject).await?
        {
            let label = Some(req.token.as_str());
            if token_of_operation(label, &op).is_some() {
                self.remember(&path, &op, Some(req.image.clone()));
                return Ok(op["name"].as_str().unwrap_or_default().to_string());
            }
        }
        let size = self.size(&np, &subject).await?;
        let body = update_request(&path, &np, size, req).map_err(|m| {
            CloudError::about(CloudErrorKind::Invalid, UPDATE_NODE_POOL, &subject, m)
        })?;
        let op = self
            .request(
                UPDATE_NODE_POOL,
                &subject,
                http::Method::PUT,
                &path,
                Some(&body),
            )
            .await?;
        let name = op["name"].as_str().unwrap_or_default().to_string();
        if name.is_empty() {
            return Err(CloudError::about(
                CloudErrorKind::Invalid,
                UPDATE_NODE_POOL,
                &subject,
                "GKE answered without the operation's name",
            ));
        }
        self.remember(&path, &op, Some(req.image.clone()));
        Ok(name)
    }

    fn blue_green(&self) -> bool {
        FACTS.blue_green
    }

    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        self.twin_create(req).await
    }

    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.twin_members(pool).await
    }

    /// GKE keeps no maximum outside autoscaling (which a twin does not have): `max` is not
    /// sent.
    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        _max: u32,
    ) -> Result<(), CloudError> {
        self.twin_set_size(pool, desired).await
    }

    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        self.twin_remove_node(pool, instance_id).await
    }

    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        self.twin_delete(pool).await
    }

    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        self.twin_list(pool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, ty: &str, target: &str, at: &str) -> Value {
        json!({"name": name, "operationType": ty, "targetLink": target, "startTime": at, "status": "DONE"})
    }

    /// The pool's newest upgrade, by start time, among a location's operations of every
    /// cluster and kind; a zone-named target counts.
    #[test]
    fn the_newest_upgrade_of_this_pool_is_found_among_the_locations_operations() {
        let base = "https://container.googleapis.com/v1/projects/acme";
        let ops = [
            op(
                "a",
                "UPGRADE_NODES",
                &format!("{base}/locations/europe-west1/clusters/prod/nodePools/general"),
                "2026-11-01T10:00:00Z",
            ),
            op(
                "b",
                "UPGRADE_NODES",
                &format!("{base}/zones/europe-west1-b/clusters/prod/nodePools/general"),
                "2026-11-02T10:00:00Z",
            ),
            op(
                "c",
                "SET_LABELS",
                &format!("{base}/locations/europe-west1/clusters/prod/nodePools/general"),
                "2026-11-03T10:00:00Z",
            ),
            op(
                "d",
                "UPGRADE_NODES",
                &format!("{base}/locations/europe-west1/clusters/prod/nodePools/general2"),
                "2026-11-04T10:00:00Z",
            ),
            op(
                "e",
                "UPGRADE_NODES",
                &format!("{base}/locations/europe-west1/clusters/staging/nodePools/general"),
                "2026-11-05T10:00:00Z",
            ),
        ];
        let got = newest_upgrade_of(&ops, "prod", "general").unwrap();
        assert_eq!(got["name"], "b");
        assert!(newest_upgrade_of(&ops[2..3], "prod", "general").is_none());
    }

    /// An operation is rota's only when the label carries a token and the operation
    /// started at or after the token's time.
    #[test]
    fn an_operation_older_than_the_token_is_someone_elses() {
        let t = DateTime::parse_from_rfc3339("2026-11-02T10:00:00Z")
            .unwrap()
            .timestamp();
        let token = format!("rota-{t}-00000000000000ab");
        let at = |s: &str| json!({"startTime": s});
        assert_eq!(
            token_of_operation(Some(&token), &at("2026-11-02T10:00:01Z")),
            Some(token.clone())
        );
        assert_eq!(
            token_of_operation(Some(&token), &at("2026-11-02T09:59:59Z")),
            None
        );
        assert_eq!(token_of_operation(None, &at("2026-11-02T10:00:01Z")), None);
        assert_eq!(
            token_of_operation(Some("terraform"), &at("2026-11-02T10:00:01Z")),
            None
        );
    }

    /// The request carries the target, a surge count from a percent of the pool's size
    /// (its instance groups' sizes), and the pool's own labels beside the token.
    #[test]
    fn the_update_request_keeps_the_pools_labels_and_counts_the_surge() {
        let np = json!({"initialNodeCount": 1, "locations": ["a", "b"], "config": {"resourceLabels": {"team": "payments"}}});
        let req = UpdateRequest {
            image: "1.31.5-gke.1023000/COS_CONTAINERD".into(),
            max_unavailable: MaxUnavailable::Percent(25),
            token: "rota-1-a".into(),
            drain_timeout_minutes: None,
            node_soak_minutes: None,
            drain_first: false,
            force: false,
        };
        let body = update_request(
            "projects/p/locations/l/clusters/c/nodePools/n",
            &np,
            6,
            &req,
        )
        .unwrap();
        assert_eq!(body["nodeVersion"], "1.31.5-gke.1023000");
        assert_eq!(body["imageType"], "COS_CONTAINERD");
        assert_eq!(
            body["upgradeSettings"]["maxSurge"], 2,
            "25% of 6 nodes, rounded up"
        );
        assert_eq!(body["upgradeSettings"]["maxUnavailable"], 0);
        assert_eq!(
            body["resourceLabels"]["labels"],
            json!({"team": "payments", TOKEN_LABEL: "rota-1-a"})
        );
        // `strategy: replace`: no surge, the batch out at once.
        let drain_first = UpdateRequest {
            drain_first: true,
            ..req.clone()
        };
        let body = update_request("x", &np, 6, &drain_first).unwrap();
        assert_eq!(
            (
                &body["upgradeSettings"]["maxSurge"],
                &body["upgradeSettings"]["maxUnavailable"]
            ),
            (&json!(0), &json!(2))
        );
        let custom = UpdateRequest {
            image: "projects/acme/global/images/node-7".into(),
            ..req
        };
        assert!(
            update_request("x", &np, 6, &custom)
                .unwrap_err()
                .contains("node-7")
        );
    }

    /// A pool's instance group is read at rota's own Compute root, by its path; a URL that
    /// is not a managed instance group (a hostile or broken answer) is refused, naming it.
    #[test]
    fn instance_group_urls_are_read_by_their_compute_path_only() {
        assert_eq!(
            instance_group_path("https://www.googleapis.com/compute/v1/projects/acme/zones/europe-west1-b/instanceGroupManagers/gke-prod-general-1a2b3c4d-grp"),
            Ok("projects/acme/zones/europe-west1-b/instanceGroupManagers/gke-prod-general-1a2b3c4d-grp".into())
        );
        for bad in [
            "https://evil.example/steal",
            "https://www.googleapis.com/compute/v1/projects/acme/zones/z/instances/i-1",
            "https://www.googleapis.com/compute/v1/projects/acme/zones/z/instanceGroupManagers/../../x",
            "https://www.googleapis.com/compute/v1/projects/acme/zones/z/instanceGroupManagers/n?alt=x",
            "https://www.googleapis.com/compute/v1/projects/../zones/z/instanceGroupManagers/n",
        ] {
            let e = instance_group_path(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        let np = json!({"initialNodeCount": 3, "locations": ["a", "b"]});
        assert_eq!(initial_size(&np), 6, "a pool listing no group yet");
    }

    #[test]
    fn google_errors_are_classified_by_reason_then_code_then_status() {
        let busy = br#"{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "Operation operation-1 is currently upgrading node pool general."}}"#;
        let (kind, m) = google_error(400, busy);
        // Another operation holds the cluster: it ends on its own, the pool waits and asks
        // again (a pause here would need a person to clear what heals by itself).
        assert_eq!(kind, CloudErrorKind::Transient);
        assert!(
            m.contains("FAILED_PRECONDITION")
                && m.contains("operation-1")
                && m.contains("asks again on a later pass"),
            "{m}"
        );
        for other in [
            r#"{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "Operation operation-2 is currently creating node pool batch. Please wait and try again once it is done."}}"#,
            r#"{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "Operation operation-3 is currently upgrading cluster prod. Please wait and try again once it is done."}}"#,
            r#"{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "Cluster is running incompatible operation operation-4."}}"#,
        ] {
            assert_eq!(
                google_error(400, other.as_bytes()).0,
                CloudErrorKind::Transient,
                "{other}"
            );
        }
        // Other preconditions are the request's own: a person must look.
        let version = br#"{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "Node version \"1.29.1-gke.1\" must not be older than the node pool's current version."}}"#;
        assert_eq!(google_error(400, version).0, CloudErrorKind::Invalid);
        let bad = br#"{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "Operation x is currently nonsense. Please try again."}}"#;
        assert_eq!(google_error(400, bad).0, CloudErrorKind::Invalid);
        let rate = br#"{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED"}]}}"#;
        assert_eq!(google_error(429, rate).0, CloudErrorKind::Throttled);
        assert_eq!(google_error(503, b"<html>").0, CloudErrorKind::Transient);
    }

    /// Every permission a call needs is granted by the role the docs give.
    #[test]
    fn the_docs_grant_every_permission_a_call_needs() {
        let doc = include_str!("../../../docs/cloud-gcp.md");
        for (call, permission) in PERMISSIONS {
            assert!(
                doc.contains(permission),
                "{call} needs {permission}, which docs/cloud-gcp.md does not grant"
            );
        }
    }
}
