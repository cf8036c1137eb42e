//! A double of the Azure Resource Manager compute API on loopback HTTP, for the Azure
//! provider's tests: the calls rota makes, with bodies and headers shaped as the published
//! REST reference (api-version 2024-07-01) shows them.
//!
//! - `GET/PATCH …/virtualMachineScaleSets/{name}` (Get, Update: `sku.capacity`, `tags`, the
//!   model's `imageReference`; `If-Match` against the ETag, 412 when stale);
//! - `GET …/virtualMachines` (List, paged with `nextLink`), `GET …/virtualMachines/{id}`;
//! - `GET …/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets` (List,
//!   one page);
//! - `POST …/delete` (DeleteInstances: capacity goes down by the instances deleted; an
//!   unknown instance is 400 `InvalidParameter`);
//! - long-running operations: Update answers 200 and DeleteInstances 202, both with an
//!   `Azure-AsyncOperation` URL (`…/locations/{loc}/operations/{id}`) and `Retry-After`; the
//!   status goes `InProgress` until the scale set has settled, then `Succeeded` (or `Failed`
//!   with an `error` when a fault says so);
//! - errors as `{"error":{"code","message"}}`: 404 `ResourceNotFound`, 401 without the
//!   bearer token, 429 `TooManyRequests` with `Retry-After` when a fault says so, 409
//!   `PropertyChangeNotAllowed` for an update that would change the image reference's
//!   publisher or offer (the API reference: they "can only be set when you create the scale
//!   set");
//! - the other ways ARM answers a long-running update ([`LroStyle`]): a `Location` header
//!   only, on a 200 or a 202; or no header at all, the scale set's `provisioningState`
//!   `Updating` until it has settled;
//! - VMs whose provisioning `Failed` ([`AzureDouble::fail_next_vms`]), their instance view
//!   (`$expand=instanceView`) naming the cause as `ProvisioningState/failed/{code}`.
//!
//! Every exchange is recorded and, when the double is dropped, checked against the
//! api-version's models as PyPI `azure-mgmt-compute` publishes them
//! (`tests/support/api_schemas.rs`).
//!
//! Time is the double's own clock in seconds: instances boot in [`BOOT_SECS`] and go in
//! [`DELETE_SECS`]. It moves when a test says [`AzureDouble::pass`], and by the advertised
//! `Retry-After` on each poll of an operation (a client that polls has waited that long), so
//! a provider waiting for an operation sees it finish without the test sleeping.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;

pub const TOKEN: &str = "test-token-for-the-arm-double";
pub const API_VERSION: &str = "2024-07-01";
/// The Compute Gallery's own API version (galleries are versioned apart from scale sets).
pub const GALLERY_API_VERSION: &str = "2023-07-03";
/// Gallery image versions per list page: small, so that `nextLink` is followed.
const GALLERY_PAGE: usize = 2;
pub const BOOT_SECS: u64 = 60;
pub const DELETE_SECS: u64 = 30;
/// What operations advertise as `Retry-After`, and how far each poll moves the clock.
pub const POLL_SECS: u64 = 10;
/// Instances per page of the VM list, small so that paging is exercised.
pub const PAGE: usize = 2;

/// How an update's long-running operation is announced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LroStyle {
    /// 200 with `Azure-AsyncOperation` (and `Retry-After`).
    #[default]
    AsyncOperation,
    /// `Location` only, on an answer of this status (200 or 202): 202 while running.
    Location(u16),
    /// 200 and no header: the scale set's `provisioningState` says `Updating` until done.
    ProvisioningState,
}

#[derive(Clone, Debug)]
struct Vm {
    image: Value,
    zone: String,
    /// Provisioning ends `Failed` with this (code, message) instead of `Succeeded`.
    fails: Option<(String, String)>,
    /// `Creating` until then.
    ready_at: u64,
    /// `Deleting`, gone at this time.
    gone_at: Option<u64>,
}

#[derive(Clone, Debug)]
struct ScaleSet {
    sub: String,
    rg: String,
    name: String,
    location: String,
    capacity: u64,
    tags: BTreeMap<String, String>,
    image: Value,
    upgrade_mode: String,
    etag: u64,
    vms: BTreeMap<u64, Vm>,
    next_id: u64,
    zones: Vec<String>,
    /// The last update failed (reported as `provisioningState` `Failed`).
    failed_update: bool,
}

#[derive(Clone, Debug)]
enum OpKind {
    /// Done when no instance of the scale set is creating or deleting.
    Settle {
        key: String,
    },
    Failed {
        code: String,
        message: String,
    },
}

#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    polls: u32,
}

/// A canned answer for the next requests that match.
#[derive(Clone, Debug)]
pub struct Fault {
    /// `GET`, `PATCH`, `POST`, or empty for any.
    pub method: &'static str,
    /// A piece of the path (case-insensitive), e.g. `/virtualmachines` or `/delete`.
    pub path_contains: &'static str,
    pub status: u16,
    pub code: &'static str,
    pub message: &'static str,
    pub retry_after: Option<u64>,
    pub times: u32,
}

#[derive(Default)]
struct World {
    now: u64,
    scale_sets: BTreeMap<String, ScaleSet>,
    ops: BTreeMap<String, Op>,
    next_op: u64,
    faults: VecDeque<Fault>,
    /// The next long-running operations started end `Failed` with these, without effect.
    lro_failures: VecDeque<(String, String)>,
    /// Every request: `METHOD /path` (no query).
    log: Vec<String>,
    /// Operation polls answered `InProgress`, and `Succeeded`.
    polls_in_progress: u32,
    polls_done: u32,
    base: String,
    lro_style: LroStyle,
    /// The next VMs created fail their provisioning with these.
    vm_failures: VecDeque<(String, String)>,
    /// Every exchange, for the schema check.
    answers: Vec<super::api_schemas::Exchange>,
    /// Gallery image versions by their gallery image's path (lowercased), as
    /// `GalleryImageVersions_ListByGalleryImage` lists them.
    gallery_versions: BTreeMap<String, Vec<Value>>,
}

fn key(sub: &str, rg: &str, name: &str) -> String {
    format!("{sub}/{rg}/{name}").to_ascii_lowercase()
}

impl World {
    /// Boots finish, deletions end, and the scale set makes its instances match capacity.
    fn settle(&mut self) {
        let now = self.now;
        let vm_failures = &mut self.vm_failures;
        for s in self.scale_sets.values_mut() {
            s.vms.retain(|_, vm| vm.gone_at.is_none_or(|t| t > now));
            let live: Vec<u64> = s
                .vms
                .iter()
                .filter(|(_, vm)| vm.gone_at.is_none())
                .map(|(id, _)| *id)
                .collect();
            let live_n = live.len() as u64;
            if live_n < s.capacity {
                for _ in live_n..s.capacity {
                    let id = s.next_id;
                    s.next_id += 1;
                    let zone = s.zones[(id as usize) % s.zones.len()].clone();
                    s.vms.insert(
                        id,
                        Vm {
                            fails: vm_failures.pop_front(),
                            image: s.image.clone(),
                            zone,
                            ready_at: now + BOOT_SECS,
                            gone_at: None,
                        },
                    );
                }
            } else if live_n > s.capacity {
                // Default scale-in policy, simplified: the highest instance IDs go first.
                for id in live.iter().rev().take((live_n - s.capacity) as usize) {
                    if let Some(vm) = s.vms.get_mut(id) {
                        vm.gone_at = Some(now + DELETE_SECS);
                    }
                }
            }
        }
    }

    fn settled(&self, key: &str) -> bool {
        self.scale_sets.get(key).is_none_or(|s| {
            s.vms
                .values()
                .all(|vm| vm.gone_at.is_none() && vm.ready_at <= self.now)
        })
    }

    /// The failure of a VM of the scale set whose provisioning failed, if any.
    fn failed_vm(&self, key: &str) -> Option<(String, String)> {
        self.scale_sets
            .get(key)?
            .vms
            .values()
            .filter(|vm| vm.gone_at.is_none())
            .find_map(|vm| vm.fails.clone())
    }

    fn start_op(&mut self, key: &str, location: &str, sub: &str) -> (String, String) {
        self.next_op += 1;
        let id = format!("00000000-0000-0000-0000-{:012}", self.next_op);
        self.ops.insert(
            id.clone(),
            Op {
                kind: OpKind::Settle {
                    key: key.to_string(),
                },
                polls: 0,
            },
        );
        let url = format!(
            "{}/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/operations/{id}?api-version={API_VERSION}",
            self.base
        );
        (id, url)
    }

    fn vmss_json(&self, s: &ScaleSet) -> Value {
        json!({
            "name": s.name,
            "id": format!("/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}", s.sub, s.rg, s.name),
            "type": "Microsoft.Compute/virtualMachineScaleSets",
            "location": s.location,
            "etag": format!("\"{}\"", s.etag),
            "tags": s.tags,
            "zones": s.zones,
            "sku": {"name": "Standard_D4s_v5", "tier": "Standard", "capacity": s.capacity},
            "properties": {
                "singlePlacementGroup": false,
                "orchestrationMode": "Uniform",
                "upgradePolicy": {"mode": s.upgrade_mode},
                "provisioningState": if s.failed_update { "Failed" } else if self.settled(&key(&s.sub, &s.rg, &s.name)) { "Succeeded" } else { "Updating" },
                "overprovision": false,
                "uniqueId": "afa2afa8-9e49-48fb-9d18-c86323b5d064",
                "virtualMachineProfile": {
                    "osProfile": {"computerNamePrefix": s.name, "adminUsername": "azureuser"},
                    "storageProfile": {
                        "imageReference": s.image,
                        "osDisk": {"caching": "ReadWrite", "createOption": "FromImage",
                                   "managedDisk": {"storageAccountType": "Premium_LRS"}}
                    },
                    "networkProfile": {"networkInterfaceConfigurations": [{
                        "name": s.name,
                        "properties": {"primary": true, "ipConfigurations": [{
                            "name": "ipconfig1",
                            "properties": {"subnet": {"id": format!("/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes", s.sub, s.rg)}}
                        }]}
                    }]}
                }
            }
        })
    }

    fn vm_json(&self, s: &ScaleSet, id: u64, vm: &Vm, instance_view: bool) -> Value {
        let state = if vm.gone_at.is_some() {
            "Deleting"
        } else if vm.ready_at > self.now {
            "Creating"
        } else if vm.fails.is_some() {
            "Failed"
        } else {
            "Succeeded"
        };
        let mut image = vm.image.clone();
        if image.get("version").is_some() {
            image["exactVersion"] = image["version"].clone();
        }
        let mut v = json!({
            "name": format!("{}_{id}", s.name),
            "id": format!("/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{id}", s.sub, s.rg, s.name),
            "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
            "instanceId": id.to_string(),
            "location": s.location,
            "zones": [vm.zone],
            "sku": {"name": "Standard_D4s_v5", "tier": "Standard"},
            "properties": {
                "latestModelApplied": vm.image == s.image,
                "vmId": format!("0f47b100-583c-48e3-a4c0-{id:012}"),
                "provisioningState": state,
                "osProfile": {"computerName": format!("{}{id:06}", s.name)},
                "storageProfile": {"imageReference": image}
            }
        });
        if instance_view {
            let mut statuses = vec![match (state, &vm.fails) {
                ("Failed", Some((code, message))) => json!({
                    "code": format!("ProvisioningState/failed/{code}"), "level": "Error",
                    "displayStatus": "Provisioning failed", "message": message,
                    "time": "2026-11-22T07:00:00.0000000+00:00"}),
                _ => json!({"code": format!("ProvisioningState/{}", state.to_ascii_lowercase()),
                    "level": "Info", "displayStatus": format!("Provisioning {}", state.to_ascii_lowercase())}),
            }];
            if state == "Succeeded" {
                statuses.push(json!({"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"}));
            }
            v["properties"]["instanceView"] = json!({
                "platformUpdateDomain": 0, "platformFaultDomain": 0,
                "computerName": format!("{}{id:06}", s.name),
                "statuses": statuses,
            });
        }
        v
    }
}

fn err(status: u16, code: &str, message: &str) -> (u16, Vec<(String, String)>, Value) {
    (
        status,
        Vec::new(),
        json!({"error": {"code": code, "message": message}}),
    )
}

type Answer = (u16, Vec<(String, String)>, Value);

/// The running double.
pub struct AzureDouble {
    pub url: String,
    world: Arc<Mutex<World>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AzureDouble {
    fn drop(&mut self) {
        self.task.abort();
        // Every answer the double gave, held to the published models.
        let answers = std::mem::take(&mut self.world.lock().unwrap().answers);
        super::api_schemas::check_on_drop(super::api_schemas::Api::Arm, answers);
    }
}

impl AzureDouble {
    pub async fn start() -> AzureDouble {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let world = Arc::new(Mutex::new(World {
            base: url.clone(),
            ..Default::default()
        }));
        let w = world.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                while connections.try_join_next().is_some() {}
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let w = w.clone();
                connections.spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<Incoming>| {
                        let w = w.clone();
                        async move {
                            let method = req.method().to_string();
                            let path = req.uri().path().to_string();
                            let query = req.uri().query().unwrap_or("").to_string();
                            let headers = req.headers().clone();
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let mut world = w.lock().unwrap();
                            let (status, extra, v) =
                                handle(&mut world, &method, &path, &query, &headers, &body);
                            world.answers.push(super::api_schemas::Exchange {
                                method: method.clone(),
                                path: format!("{path}?{query}"),
                                status,
                                request: serde_json::from_slice(&body).unwrap_or(Value::Null),
                                response: v.clone(),
                                headers: extra.clone(),
                            });
                            drop(world);
                            let mut resp = hyper::Response::builder()
                                .status(status)
                                .header("content-type", "application/json; charset=utf-8")
                                .header("x-ms-request-id", "b0f2c8a4-0000-0000-0000-000000000000");
                            for (k, val) in extra {
                                resp = resp.header(k, val);
                            }
                            let body = if v.is_null() {
                                Bytes::new()
                            } else {
                                Bytes::from(v.to_string())
                            };
                            Ok::<_, std::convert::Infallible>(
                                resp.body(Full::new(body)).expect("a valid response"),
                            )
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        AzureDouble { url, world, task }
    }

    /// A version of the gallery image at `gallery_image` (its ARM path), as the gallery
    /// lists it: `state` its provisioning state, `exclude` excluded from latest, replicated
    /// to `regions` (display names, as ARM writes them). Returns its ID.
    pub fn add_gallery_version(
        &self,
        gallery_image: &str,
        name: &str,
        published: &str,
        (state, exclude): (&str, bool),
        regions: &[&str],
    ) -> String {
        let id = format!("{gallery_image}/versions/{name}");
        let v = json!({
            "id": id,
            "name": name,
            "type": "Microsoft.Compute/galleries/images/versions",
            "location": "westeurope",
            "properties": {
                "publishingProfile": {
                    "targetRegions": regions.iter().map(|r| json!({"name": r, "regionalReplicaCount": 1, "storageAccountType": "Standard_LRS"})).collect::<Vec<_>>(),
                    "replicaCount": 1,
                    "excludeFromLatest": exclude,
                    "publishedDate": published,
                    "storageAccountType": "Standard_LRS",
                },
                "provisioningState": state,
                "storageProfile": {
                    "osDiskImage": {"sizeInGB": 30, "hostCaching": "ReadOnly"},
                },
            },
        });
        let key = gallery_image.trim_matches('/').to_ascii_lowercase();
        self.world
            .lock()
            .unwrap()
            .gallery_versions
            .entry(key)
            .or_default()
            .push(v);
        id
    }

    /// A scale set with `capacity` instances already created (booting until time passes),
    /// bounds as the autoscaler tags say, `image` as its model's `imageReference` JSON.
    #[allow(clippy::too_many_arguments)]
    pub fn create_scale_set(
        &self,
        sub: &str,
        rg: &str,
        name: &str,
        capacity: u64,
        max: u32,
        image: Value,
        upgrade_mode: &str,
    ) {
        let mut w = self.world.lock().unwrap();
        let s = ScaleSet {
            sub: sub.into(),
            rg: rg.into(),
            name: name.into(),
            location: "westeurope".into(),
            capacity,
            tags: [
                ("min".to_string(), "0".to_string()),
                ("max".to_string(), max.to_string()),
                ("aks-managed-poolName".to_string(), "general".to_string()),
            ]
            .into(),
            image,
            upgrade_mode: upgrade_mode.into(),
            etag: 1,
            vms: BTreeMap::new(),
            next_id: 0,
            zones: vec!["1".into(), "2".into(), "3".into()],
            failed_update: false,
        };
        w.scale_sets.insert(key(sub, rg, name), s);
        w.settle();
    }

    /// Replace a scale set's tags.
    pub fn set_tags(&self, sub: &str, rg: &str, name: &str, tags: &[(&str, &str)]) {
        let mut w = self.world.lock().unwrap();
        w.scale_sets.get_mut(&key(sub, rg, name)).unwrap().tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Let the double's clock run.
    pub fn pass(&self, d: Duration) {
        let mut w = self.world.lock().unwrap();
        w.now += d.as_secs();
        w.settle();
    }

    pub fn inject(&self, fault: Fault) {
        self.world.lock().unwrap().faults.push_back(fault);
    }

    /// The next long-running operation is accepted, changes nothing, and ends `Failed`.
    pub fn fail_next_operation(&self, code: &str, message: &str) {
        self.world
            .lock()
            .unwrap()
            .lro_failures
            .push_back((code.into(), message.into()));
    }

    /// How updates announce their long-running operation from now on.
    pub fn set_lro_style(&self, style: LroStyle) {
        self.world.lock().unwrap().lro_style = style;
    }

    /// The next `n` VMs created end their provisioning `Failed` with `code` and `message`.
    pub fn fail_next_vms(&self, n: usize, code: &str, message: &str) {
        let mut w = self.world.lock().unwrap();
        for _ in 0..n {
            w.vm_failures.push_back((code.into(), message.into()));
        }
    }

    /// How many requests matched `METHOD` and a piece of the path.
    pub fn count(&self, method: &str, path_contains: &str) -> usize {
        let needle = path_contains.to_ascii_lowercase();
        self.world
            .lock()
            .unwrap()
            .log
            .iter()
            .filter(|l| l.starts_with(method) && l.to_ascii_lowercase().contains(&needle))
            .count()
    }

    /// `(InProgress answers, Succeeded answers)` of operation polls.
    pub fn polls(&self) -> (u32, u32) {
        let w = self.world.lock().unwrap();
        (w.polls_in_progress, w.polls_done)
    }

    pub fn capacity(&self, sub: &str, rg: &str, name: &str) -> u64 {
        self.world.lock().unwrap().scale_sets[&key(sub, rg, name)].capacity
    }

    pub fn tags(&self, sub: &str, rg: &str, name: &str) -> BTreeMap<String, String> {
        self.world.lock().unwrap().scale_sets[&key(sub, rg, name)]
            .tags
            .clone()
    }
}

fn handle(
    w: &mut World,
    method: &str,
    path: &str,
    query: &str,
    headers: &hyper::HeaderMap,
    body: &[u8],
) -> Answer {
    w.log.push(format!("{method} {path}"));
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth.is_empty() {
        return err(
            401,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        );
    }
    if auth != format!("Bearer {TOKEN}") {
        return err(
            401,
            "InvalidAuthenticationToken",
            "The access token is invalid.",
        );
    }
    let api_version = if path.to_ascii_lowercase().contains("/galleries/") {
        GALLERY_API_VERSION
    } else {
        API_VERSION
    };
    if !query
        .split('&')
        .any(|kv| kv == format!("api-version={api_version}"))
    {
        return err(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let lower = path.to_ascii_lowercase();
    if let Some(i) = w.faults.iter().position(|f| {
        (f.method.is_empty() || f.method == method)
            && lower.contains(&f.path_contains.to_ascii_lowercase())
    }) {
        let f = w.faults[i].clone();
        if f.times <= 1 {
            w.faults.remove(i);
        } else {
            w.faults[i].times -= 1;
        }
        let mut a = err(f.status, f.code, f.message);
        if let Some(s) = f.retry_after {
            a.1.push(("retry-after".into(), s.to_string()));
        }
        return a;
    }
    w.settle();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let lp: Vec<String> = parts.iter().map(|p| p.to_ascii_lowercase()).collect();
    let is = |i: usize, s: &str| lp.get(i).is_some_and(|p| p == s);

    // /subscriptions/{s}/providers/Microsoft.Compute/locations/{loc}/operations/{id}
    if method == "GET"
        && lp.len() == 8
        && is(0, "subscriptions")
        && is(2, "providers")
        && is(3, "microsoft.compute")
        && is(4, "locations")
        && is(6, "operations")
    {
        return poll(w, parts[7], query.split('&').any(|kv| kv == "monitor=true"));
    }
    // /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/{g}/images/{i}/versions
    if method == "GET"
        && lp.len() == 11
        && is(0, "subscriptions")
        && is(2, "resourcegroups")
        && is(5, "microsoft.compute")
        && is(6, "galleries")
        && is(8, "images")
        && is(10, "versions")
    {
        let image = lp[..10].join("/");
        let Some(all) = w.gallery_versions.get(&image) else {
            return err(
                404,
                "ResourceNotFound",
                &format!(
                    "The Resource 'Microsoft.Compute/galleries/{}/images/{}' under resource group '{}' was not found.",
                    parts[7], parts[9], parts[3]
                ),
            );
        };
        let skip: usize = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("$skiptoken="))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let page: Vec<Value> = all.iter().skip(skip).take(GALLERY_PAGE).cloned().collect();
        let mut body = json!({ "value": page });
        if skip + GALLERY_PAGE < all.len() {
            body["nextLink"] = json!(format!(
                "{}{path}?api-version={GALLERY_API_VERSION}&$skiptoken={}",
                w.base,
                skip + GALLERY_PAGE
            ));
        }
        return (200, Vec::new(), body);
    }
    // /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets
    // (List: the resource group's scale sets, one page).
    if method == "GET"
        && lp.len() == 7
        && is(0, "subscriptions")
        && is(2, "resourcegroups")
        && is(4, "providers")
        && is(5, "microsoft.compute")
        && is(6, "virtualmachinescalesets")
    {
        let prefix = key(parts[1], parts[3], "");
        let value: Vec<Value> = w
            .scale_sets
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, s)| w.vmss_json(s))
            .collect();
        return (200, Vec::new(), json!({ "value": value }));
    }
    // /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{n}[/...]
    if !(lp.len() >= 8
        && is(0, "subscriptions")
        && is(2, "resourcegroups")
        && is(4, "providers")
        && is(5, "microsoft.compute")
        && is(6, "virtualmachinescalesets"))
    {
        return err(404, "InvalidResourceType", &format!("no route for {path}"));
    }
    let k = key(parts[1], parts[3], parts[7]);
    if !w.scale_sets.contains_key(&k) {
        return if lp.len() == 8 {
            err(
                404,
                "ResourceNotFound",
                &format!(
                    "The Resource 'Microsoft.Compute/virtualMachineScaleSets/{}' under resource group '{}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
                    parts[7], parts[3]
                ),
            )
        } else {
            err(
                404,
                "ParentResourceNotFound",
                &format!(
                    "Can not perform requested operation on nested resource. Parent resource '{}' not found.",
                    parts[7]
                ),
            )
        };
    }
    match (method, &lp[8..]) {
        ("GET", []) => {
            if w.lro_style == LroStyle::ProvisioningState && !w.settled(&k) {
                // With no operation to poll, the client polls the scale set: it waited too.
                w.now += POLL_SECS;
                w.settle();
            }
            let s = &w.scale_sets[&k];
            (200, Vec::new(), w.vmss_json(s))
        }
        ("PATCH", []) => update(w, &k, headers, body),
        ("POST", [d]) if d == "delete" => delete_instances(w, &k, body),
        ("GET", [v]) if v == "virtualmachines" => list(w, &k, query),
        ("GET", [v, id]) if v == "virtualmachines" => {
            let s = &w.scale_sets[&k];
            match id
                .parse::<u64>()
                .ok()
                .and_then(|n| s.vms.get(&n).map(|vm| (n, vm)))
            {
                Some((n, vm)) => (
                    200,
                    Vec::new(),
                    w.vm_json(s, n, vm, query.contains("$expand=instanceView")),
                ),
                None => err(
                    404,
                    "NotFound",
                    "The entity was not found in this Azure location.",
                ),
            }
        }
        _ => err(
            405,
            "MethodNotAllowed",
            &format!("{method} is not supported on {path}"),
        ),
    }
}

fn async_headers(url: &str) -> Vec<(String, String)> {
    vec![
        ("azure-asyncoperation".into(), url.to_string()),
        ("retry-after".into(), POLL_SECS.to_string()),
    ]
}

fn update(w: &mut World, k: &str, headers: &hyper::HeaderMap, body: &[u8]) -> Answer {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return err(
            400,
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized.",
        );
    };
    if let Some(m) = headers.get("if-match").and_then(|v| v.to_str().ok()) {
        let etag = format!("\"{}\"", w.scale_sets[k].etag);
        if m != "*" && m != etag {
            return err(
                412,
                "PreconditionFailed",
                "The specified precondition 'If-Match' failed.",
            );
        }
    }
    if let Some(img) = patch
        .pointer("/properties/virtualMachineProfile/storageProfile/imageReference")
        .and_then(Value::as_object)
    {
        // "Image reference publisher and offer can only be set when you create the scale set."
        let cur = &w.scale_sets[k].image;
        for field in ["publisher", "offer"] {
            let now = cur
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase);
            let asked = match img.get(field) {
                None => continue,
                Some(v) => v.as_str().map(str::to_ascii_lowercase),
            };
            if asked != now {
                return err(
                    409,
                    "PropertyChangeNotAllowed",
                    &format!("Changing property 'imageReference.{field}' is not allowed."),
                );
            }
        }
    }
    let (location, sub) = {
        let s = &w.scale_sets[k];
        (s.location.clone(), s.sub.clone())
    };
    let (op_id, url) = w.start_op(k, &location, &sub);
    if let Some((code, message)) = w.lro_failures.pop_front() {
        w.ops.get_mut(&op_id).unwrap().kind = OpKind::Failed { code, message };
        w.scale_sets.get_mut(k).unwrap().failed_update = true;
    } else {
        let s = w.scale_sets.get_mut(k).unwrap();
        s.failed_update = false;
        if let Some(c) = patch.pointer("/sku/capacity").and_then(Value::as_u64) {
            s.capacity = c;
        }
        if let Some(t) = patch.get("tags").and_then(Value::as_object) {
            s.tags = t
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
        }
        if let Some(img) = patch
            .pointer("/properties/virtualMachineProfile/storageProfile/imageReference")
            .and_then(Value::as_object)
        {
            // Merge: null clears a field, anything else sets it.
            let mut cur = s.image.as_object().cloned().unwrap_or_default();
            for (f, v) in img {
                if v.is_null() {
                    cur.remove(f);
                } else {
                    cur.insert(f.clone(), v.clone());
                }
            }
            s.image = Value::Object(cur);
        }
        s.etag += 1;
        w.settle();
    }
    let body = w.vmss_json(&w.scale_sets[k]);
    match w.lro_style {
        LroStyle::AsyncOperation => (200, async_headers(&url), body),
        LroStyle::Location(status) => {
            let headers = vec![
                ("location".into(), format!("{url}&monitor=true")),
                ("retry-after".into(), POLL_SECS.to_string()),
            ];
            (
                status,
                headers,
                if status == 202 { Value::Null } else { body },
            )
        }
        // Nothing to poll but the scale set itself.
        LroStyle::ProvisioningState => (200, Vec::new(), body),
    }
}

fn delete_instances(w: &mut World, k: &str, body: &[u8]) -> Answer {
    let ids: Vec<String> = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("instanceIds").cloned())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    if ids.is_empty() {
        return err(
            400,
            "InvalidParameter",
            "Required parameter 'instanceIds' is missing (null).",
        );
    }
    let now = w.now;
    {
        let s = &w.scale_sets[k];
        for id in &ids {
            let live = id
                .parse::<u64>()
                .ok()
                .and_then(|n| s.vms.get(&n))
                .is_some_and(|vm| vm.gone_at.is_none());
            if !live {
                return err(
                    400,
                    "InvalidParameter",
                    &format!(
                        "The provided instanceId {id} is not an active Virtual Machine Scale Set VM instanceId."
                    ),
                );
            }
        }
    }
    let (location, sub) = {
        let s = &w.scale_sets[k];
        (s.location.clone(), s.sub.clone())
    };
    let (op_id, url) = w.start_op(k, &location, &sub);
    if let Some((code, message)) = w.lro_failures.pop_front() {
        w.ops.get_mut(&op_id).unwrap().kind = OpKind::Failed { code, message };
    } else {
        let s = w.scale_sets.get_mut(k).unwrap();
        for id in &ids {
            let n: u64 = id.parse().unwrap();
            s.vms.get_mut(&n).unwrap().gone_at = Some(now + DELETE_SECS);
        }
        // Deleting instances lowers the capacity by as many.
        s.capacity = s.capacity.saturating_sub(ids.len() as u64);
        s.etag += 1;
    }
    let mut headers = async_headers(&url);
    headers.push(("location".into(), format!("{url}&monitor=true")));
    (202, headers, Value::Null)
}

fn list(w: &mut World, k: &str, query: &str) -> Answer {
    let skip: usize = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("$skiptoken="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let s = &w.scale_sets[k];
    let all: Vec<Value> = s
        .vms
        .iter()
        .map(|(n, vm)| w.vm_json(s, *n, vm, false))
        .collect();
    let page: Vec<Value> = all.iter().skip(skip).take(PAGE).cloned().collect();
    let mut v = json!({ "value": page });
    if skip + PAGE < all.len() {
        v["nextLink"] = json!(format!(
            "{}/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines?api-version={API_VERSION}&$skiptoken={}",
            w.base,
            s.sub,
            s.rg,
            s.name,
            skip + PAGE
        ));
    }
    (200, Vec::new(), v)
}

/// One poll of an operation: its `Azure-AsyncOperation` status body, or with `monitor` (its
/// `Location` URL) 202 while it runs, then 200, or the error with an error status.
fn poll(w: &mut World, id: &str, monitor: bool) -> Answer {
    // The client waited the Retry-After it was given before asking again.
    w.now += POLL_SECS;
    w.settle();
    let Some(op) = w.ops.get_mut(id) else {
        return err(404, "NotFound", "The operation was not found.");
    };
    op.polls += 1;
    let kind = op.kind.clone();
    let started = "2026-11-22T07:00:00.0000000+00:00";
    if monitor {
        return match kind {
            OpKind::Failed { code, message } => {
                w.polls_done += 1;
                err(400, &code, &message)
            }
            OpKind::Settle { key } if w.settled(&key) => {
                w.polls_done += 1;
                match w.failed_vm(&key) {
                    Some((code, message)) => err(400, &code, &message),
                    None => (200, Vec::new(), Value::Null),
                }
            }
            OpKind::Settle { .. } => {
                w.polls_in_progress += 1;
                (
                    202,
                    vec![("retry-after".into(), POLL_SECS.to_string())],
                    Value::Null,
                )
            }
        };
    }
    let body = match kind {
        OpKind::Failed { code, message } => {
            w.polls_done += 1;
            json!({"startTime": started, "endTime": started, "status": "Failed", "name": id,
                   "error": {"code": code, "message": message}})
        }
        OpKind::Settle { key } => {
            if let Some((code, message)) = w.settled(&key).then(|| w.failed_vm(&key)).flatten() {
                // A VM the operation created failed its provisioning: so does the operation.
                w.polls_done += 1;
                json!({"startTime": started, "endTime": started, "status": "Failed", "name": id,
                       "error": {"code": code, "message": message}})
            } else if w.settled(&key) {
                w.polls_done += 1;
                json!({"startTime": started, "endTime": started, "status": "Succeeded", "name": id})
            } else {
                w.polls_in_progress += 1;
                return (
                    200,
                    vec![("retry-after".into(), POLL_SECS.to_string())],
                    json!({"startTime": started, "status": "InProgress", "name": id}),
                );
            }
        }
    };
    (200, Vec::new(), body)
}
