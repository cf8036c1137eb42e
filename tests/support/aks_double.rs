//! An AKS double: the ARM calls rota's AKS agent pool client makes (`AgentPools_Get`,
//! `AgentPools_CreateOrUpdate`, `AgentPools_GetUpgradeProfile`,
//! `AgentPools_UpgradeNodeImageVersion`), on a loopback port, held to the api-version
//! 2026-08-01 models of `azure-mgmt-containerservice` (`api_schemas`, `Api::Aks`).
//!
//! Every request is checked against the models as it arrives (`api_schemas::checked`): a
//! field they do not name, a read-only field sent back, a wrong api-version, a path no
//! operation serves is refused with 400 `InvalidParameter` naming the problems, as ARM refuses
//! a malformed request. Every
//! exchange is checked again, answers included, when the double is dropped.
//!
//! It answers as AKS does: a PUT is `Updating` until the pool is read once more (a settings
//! change), or for a PUT that names a recently used `nodeImageVersion` (a rollback)
//! `UpgradingNodeImageVersion` until the test ends it; the POST moves the pool to the newest
//! node image AKS ships, `UpgradingNodeImageVersion` until [`AksDouble::finish`] (`Succeeded`
//! on it, or `Failed` with `status.provisioningError`, the pool left where it was); a second
//! upgrade while one runs is refused with 409 `OperationNotAllowed`; a PUT whose `If-Match`
//! is not the pool's `eTag` is refused with 412.
//!
//! And the calls of `managedUpdate: blueGreen`: a PUT of a pool that does not exist creates it
//! (on the newest node image AKS ships, or 400 `InvalidParameter`), `Creating` until
//! [`AksDouble::settle`]; a PUT of `count` is a settings change that adds machines or takes
//! the newest ones away; `AgentPools_DeleteMachines` removes the named machines, the `count`
//! with them (400 for a machine the pool does not have); `AgentPools_Delete` is `Deleting`
//! until settled, then gone; `ManagedClusters_Get` names the node resource group. The pools'
//! machines are served where AKS keeps them, as Microsoft.Compute 2024-07-01 does (one scale
//! set per pool in the node resource group, tagged `aks-managed-poolName`, its VMs named by
//! host name): `VirtualMachineScaleSets_List` and `VirtualMachineScaleSetVMs_List`, held to
//! `azure-mgmt-compute`'s models.
#![allow(dead_code)]

use std::collections::BTreeMap;

use hyper::{HeaderMap, Uri};
use serde_json::{Value, json};

use super::api_schemas::Api;
use super::api_schemas::checked::{CheckedDouble, Service};

pub const API_VERSION: &str = "2026-08-01";

#[derive(Clone, Debug)]
struct Pool {
    /// The agent pool's properties as AKS keeps them (`provisioningState`, `eTag` and
    /// `status` among them).
    props: Value,
    recently_used: Vec<String>,
    /// The image an upgrade under way moves to, and whether it was started by a PUT.
    upgrading_to: Option<String>,
    /// A settings PUT is `Updating` for one read.
    updating: bool,
    etag: u32,
    /// `Creating` or `Deleting` until [`AksDouble::settle`].
    creating: bool,
    deleting: bool,
    /// The pool's machines: (scale set instance ID, host name).
    machines: Vec<(u32, String)>,
    next_instance: u32,
    /// The body of the PUT that created it (`null` for a pool the test added).
    created_with: Value,
}

/// AKS's agent pools, as the double keeps them.
#[derive(Default)]
pub struct Aks {
    /// By agent pool ARM ID.
    pools: BTreeMap<String, Pool>,
    /// The newest node image AKS ships.
    latest: String,
    upgrades: usize,
    /// The clusters' node resource group.
    node_resource_group: String,
    creates: usize,
}

/// The running double ([`AksDouble::start`]).
pub type AksDouble = CheckedDouble<Aks>;

impl CheckedDouble<Aks> {
    /// An agent pool at `path` (its ARM ID) of `count` nodes on `image`, AKS's defaults
    /// otherwise (`maxSurge` 10%).
    pub fn add_pool(&self, path: &str, count: u64, image: &str) {
        self.with(|s| s.add_pool(path, count, image))
    }

    /// Set one of the agent pool's properties (`mode: System`, say).
    pub fn set_property(&self, path: &str, key: &str, value: Value) {
        self.with(|s| s.pools.get_mut(path).unwrap().props[key] = value)
    }

    /// The newest node image AKS ships (where the POST takes a pool).
    pub fn set_latest(&self, image: &str) {
        self.with(|s| s.latest = image.to_string())
    }

    /// End the running upgrade: `Succeeded` on its image, or `Failed` with a provisioning
    /// error and the pool where it was.
    pub fn finish(&self, ok: bool) {
        self.with(|s| s.finish(ok))
    }

    /// Upgrades AKS started (POSTs and rollback PUTs).
    pub fn upgrades(&self) -> usize {
        self.with(|s| s.upgrades)
    }

    pub fn properties(&self, path: &str) -> Value {
        self.with(|s| s.pools[path].props.clone())
    }

    /// The node resource group AKS keeps the clusters' machines in.
    pub fn set_node_resource_group(&self, rg: &str) {
        self.with(|s| s.node_resource_group = rg.to_string())
    }

    /// End a creation (`Succeeded`) or a deletion (the pool gone) under way.
    pub fn settle(&self, path: &str) {
        self.with(|s| {
            let p = s.pools.get_mut(path).expect("a pool");
            if p.deleting {
                s.pools.remove(path);
            } else {
                p.creating = false;
                p.props["provisioningState"] = json!("Succeeded");
            }
        })
    }

    /// The PUT that created the pool at `path` (`None`: not created through the API).
    pub fn created(&self, path: &str) -> Option<Value> {
        self.with(|s| {
            s.pools
                .get(path)
                .map(|p| p.created_with.clone())
                .filter(|v| !v.is_null())
        })
    }

    /// Pools the API created (tests: "never a second twin").
    pub fn creates(&self) -> usize {
        self.with(|s| s.creates)
    }

    /// The machines' host names of the pool at `path`.
    pub fn machines(&self, path: &str) -> Vec<String> {
        self.with(|s| {
            s.pools[path]
                .machines
                .iter()
                .map(|(_, n)| n.clone())
                .collect()
        })
    }
}

impl Aks {
    fn add_pool(&mut self, path: &str, count: u64, image: &str) {
        if self.latest.is_empty() {
            self.latest = image.to_string();
        }
        self.pools.insert(
            path.to_string(),
            Pool {
                props: json!({
                    "count": count,
                    "vmSize": "Standard_D4s_v5",
                    "mode": "User",
                    "osType": "Linux",
                    "type": "VirtualMachineScaleSets",
                    "orchestratorVersion": "1.31.5",
                    "currentOrchestratorVersion": "1.31.5",
                    "nodeImageVersion": image,
                    "upgradeSettings": {"maxSurge": "10%"},
                    "provisioningState": "Succeeded",
                    "nodeLabels": {"workload": "general"},
                    "tags": {"team": "payments"},
                }),
                recently_used: vec![image.to_string()],
                upgrading_to: None,
                updating: false,
                etag: 1,
                creating: false,
                deleting: false,
                machines: Vec::new(),
                next_instance: 0,
                created_with: Value::Null,
            },
        );
        let p = self.pools.get_mut(path).unwrap();
        grow(path, p, count);
    }

    fn finish(&mut self, ok: bool) {
        let p = self
            .pools
            .values_mut()
            .find(|p| p.upgrading_to.is_some())
            .expect("an upgrade running");
        let to = p.upgrading_to.take().unwrap();
        p.etag += 1;
        if ok {
            p.props["nodeImageVersion"] = json!(to);
            p.props["provisioningState"] = json!("Succeeded");
            p.recently_used.retain(|v| *v != to);
            p.recently_used.push(to);
        } else {
            p.props["provisioningState"] = json!("Failed");
            p.props["status"] = json!({"provisioningError": {
                "code": "VMExtensionProvisioningError",
                "message": "the node image's nodes did not join the cluster",
            }});
        }
    }
}

fn pool_json(path: &str, p: &Pool) -> Value {
    let mut props = p.props.clone();
    props["eTag"] = json!(format!("\"{}\"", p.etag));
    json!({
        "id": path,
        "name": path.rsplit('/').next().unwrap(),
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": props,
    })
}

fn arm_error(status: u16, code: &str, message: &str) -> (u16, Value) {
    (status, json!({"error": {"code": code, "message": message}}))
}

impl Service for Aks {
    const API: Api = Api::Aks;

    fn path(uri: &Uri) -> String {
        uri.path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default()
    }

    fn refuse(problems: &str) -> (u16, Value) {
        arm_error(400, "InvalidParameter", problems)
    }

    fn answer(
        &mut self,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        body: &Value,
    ) -> (u16, Value) {
        let if_match = headers.get("if-match").and_then(|v| v.to_str().ok());
        answer(self, method, path, body, if_match)
    }
}

fn answer(
    s: &mut Aks,
    method: &str,
    path: &str,
    body: &Value,
    if_match: Option<&str>,
) -> (u16, Value) {
    let (path, _) = path.split_once('?').unwrap_or((path, ""));
    if path.contains("/providers/Microsoft.Compute/") {
        return compute(s, method, path);
    }
    if method == "GET" && path.contains("/managedClusters/") && !path.contains("/agentPools") {
        return (
            200,
            json!({
                "id": path,
                "name": path.rsplit('/').next().unwrap(),
                "type": "Microsoft.ContainerService/ManagedClusters",
                "location": "westeurope",
                "properties": {"nodeResourceGroup": s.node_resource_group},
            }),
        );
    }
    if method == "PUT" && !path.ends_with("/agentPools") && !s.pools.contains_key(path) {
        return create(s, path, body);
    }
    if method == "GET" && path.ends_with("/agentPools") {
        let prefix = format!("{path}/");
        let value: Vec<Value> = s
            .pools
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, p)| pool_json(k, p))
            .collect();
        return (200, json!({"value": value}));
    }
    let (pool_path, tail) = match path.find("/agentPools/") {
        Some(i) => {
            let rest = &path[i + "/agentPools/".len()..];
            let end = rest
                .find('/')
                .map_or(path.len(), |j| i + "/agentPools/".len() + j);
            (&path[..end], &path[end..])
        }
        None => return arm_error(404, "NotFound", "not an agent pool"),
    };
    let latest = s.latest.clone();
    let Some(p) = s.pools.get_mut(pool_path) else {
        return arm_error(
            404,
            "NotFound",
            &format!("agent pool {pool_path} not found"),
        );
    };
    let busy = p.upgrading_to.is_some();
    if (p.creating || p.deleting || p.updating) && method != "GET" {
        return arm_error(
            409,
            "OperationNotAllowed",
            "Operation is not allowed because there's another operation in progress on the agent pool",
        );
    }
    match (method, tail) {
        ("POST", "/deleteMachines") => {
            let names: Vec<String> = body["machineNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect();
            if let Some(n) = names
                .iter()
                .find(|n| !p.machines.iter().any(|(_, m)| m == *n))
            {
                return arm_error(
                    400,
                    "InvalidParameter",
                    &format!("machine {n} is not a machine of agent pool {pool_path}"),
                );
            }
            p.machines.retain(|(_, m)| !names.contains(m));
            p.props["count"] = json!(p.machines.len());
            p.etag += 1;
            // At work until the next read, as a settings change is.
            p.updating = true;
            p.props["provisioningState"] = json!("Scaling");
            (202, Value::Null)
        }
        ("DELETE", "") => {
            p.deleting = true;
            p.props["provisioningState"] = json!("Deleting");
            (202, Value::Null)
        }
        ("GET", "") => {
            let v = pool_json(pool_path, p);
            if p.updating {
                // A settings change is applied by the next read.
                p.updating = false;
                p.props["provisioningState"] = json!("Succeeded");
            }
            (200, v)
        }
        ("GET", "/upgradeProfiles/default") => {
            let recent: Vec<Value> = p
                .recently_used
                .iter()
                .map(|v| json!({"orchestratorVersion": "1.31.5", "nodeImageVersion": v, "timestamp": "2026-11-01T10:00:00Z"}))
                .collect();
            (
                200,
                json!({
                    "id": format!("{pool_path}/upgradeProfiles/default"),
                    "name": "default",
                    "type": "Microsoft.ContainerService/managedClusters/agentPools/upgradeProfiles",
                    "properties": {
                        "kubernetesVersion": "1.31.5",
                        "osType": "Linux",
                        "upgrades": [],
                        "latestNodeImageVersion": latest,
                        "recentlyUsedVersions": recent,
                    },
                }),
            )
        }
        ("PUT", "") => {
            let (status, upgrade) = put(pool_path, p, &body["properties"], if_match);
            if upgrade {
                s.upgrades += 1;
            }
            match status {
                Ok(()) => (200, pool_json(pool_path, &s.pools[pool_path])),
                Err(e) => e,
            }
        }
        ("POST", "/upgradeNodeImageVersion") => {
            if busy || p.updating {
                return arm_error(
                    409,
                    "OperationNotAllowed",
                    "Operation is not allowed because there's an in progress upgrade node image version operation",
                );
            }
            p.upgrading_to = Some(latest);
            p.props["provisioningState"] = json!("UpgradingNodeImageVersion");
            p.props.as_object_mut().unwrap().remove("status");
            p.etag += 1;
            s.upgrades += 1;
            (202, Value::Null)
        }
        _ => arm_error(
            404,
            "NotFound",
            &format!("{method} {path}: not served by the AKS double"),
        ),
    }
}

/// `AgentPools_CreateOrUpdate` on `p` with `new` properties: applied (and whether it started
/// an upgrade: a rollback to a recently used image), or the error ARM answers.
fn put(
    path: &str,
    p: &mut Pool,
    new: &Value,
    if_match: Option<&str>,
) -> (Result<(), (u16, Value)>, bool) {
    if if_match.is_some_and(|m| m != format!("\"{}\"", p.etag)) {
        let e = arm_error(
            412,
            "PreconditionFailed",
            "the agent pool changed: its eTag is not the If-Match",
        );
        return (Err(e), false);
    }
    if p.upgrading_to.is_some() || p.updating {
        let e = arm_error(
            409,
            "OperationNotAllowed",
            "Operation is not allowed because there's an in progress upgrade node image version operation",
        );
        return (Err(e), false);
    }
    let image = new["nodeImageVersion"].as_str();
    let rollback = image.is_some_and(|i| Some(i) != p.props["nodeImageVersion"].as_str());
    if rollback && !p.recently_used.iter().any(|v| Some(v.as_str()) == image) {
        let e = arm_error(
            400,
            "InvalidParameter",
            "nodeImageVersion is not one of the agent pool's recentlyUsedVersions",
        );
        return (Err(e), false);
    }
    for (k, v) in new.as_object().into_iter().flatten() {
        if k != "nodeImageVersion" {
            p.props[k] = v.clone();
        }
    }
    let count = p.props["count"].as_u64().unwrap_or(0) as usize;
    p.machines.truncate(count);
    p.props.as_object_mut().unwrap().remove("status");
    p.etag += 1;
    grow(path, p, count as u64);
    if rollback {
        p.upgrading_to = image.map(str::to_string);
        p.props["provisioningState"] = json!("UpgradingNodeImageVersion");
    } else {
        p.updating = true;
        p.props["provisioningState"] = json!("Updating");
    }
    (Ok(()), rollback)
}

/// Machines of the pool at `path` up to `count`, named as AKS names them
/// (`aks-<pool>-12345678-vmss` and the instance ID in six base-36 digits).
fn grow(path: &str, p: &mut Pool, count: u64) {
    let pool = path.rsplit('/').next().unwrap_or_default();
    while (p.machines.len() as u64) < count {
        let id = p.next_instance;
        p.next_instance += 1;
        p.machines
            .push((id, format!("{}{:06}", scale_set(pool), id)));
    }
}

fn scale_set(pool: &str) -> String {
    format!("aks-{pool}-12345678-vmss")
}

/// A PUT of a pool that does not exist: created on the newest node image, `Creating`.
fn create(s: &mut Aks, path: &str, body: &Value) -> (u16, Value) {
    let image = body["properties"]["nodeImageVersion"].as_str();
    if image.is_some_and(|i| i != s.latest) {
        return arm_error(
            400,
            "InvalidParameter",
            &format!(
                "AKS creates an agent pool on its newest node image {}: nodeImageVersion {} is not it",
                s.latest,
                image.unwrap_or_default()
            ),
        );
    }
    let mut props = body["properties"].clone();
    props["nodeImageVersion"] = json!(s.latest);
    props["provisioningState"] = json!("Creating");
    props["currentOrchestratorVersion"] = props["orchestratorVersion"].clone();
    let count = props["count"].as_u64().unwrap_or(0);
    let mut p = Pool {
        props,
        recently_used: vec![s.latest.clone()],
        upgrading_to: None,
        updating: false,
        etag: 1,
        creating: true,
        deleting: false,
        machines: Vec::new(),
        next_instance: 0,
        created_with: body.clone(),
    };
    grow(path, &mut p, count);
    s.creates += 1;
    let v = pool_json(path, &p);
    s.pools.insert(path.to_string(), p);
    (201, v)
}

/// The Microsoft.Compute calls on the node resource group: its scale sets (one per pool,
/// tagged with it) and a scale set's VMs.
fn compute(s: &Aks, method: &str, path: &str) -> (u16, Value) {
    let sub = path.split('/').nth(2).unwrap_or_default().to_string();
    let rg = &s.node_resource_group;
    let vmss_id = |name: &str| {
        format!(
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"
        )
    };
    let pools: Vec<(&String, &Pool)> = s.pools.iter().collect();
    if method == "GET" && path.ends_with("/virtualMachineScaleSets") {
        let value: Vec<Value> = pools
            .iter()
            .map(|(k, p)| {
                let pool = k.rsplit('/').next().unwrap();
                let name = scale_set(pool);
                json!({
                    "id": vmss_id(&name),
                    "name": name,
                    "type": "Microsoft.Compute/virtualMachineScaleSets",
                    "location": "westeurope",
                    "tags": {"aks-managed-poolName": pool, "aks-managed-createOperationID": "00000000-0000-0000-0000-000000000001"},
                    "sku": {"name": "Standard_D4s_v5", "tier": "Standard", "capacity": p.machines.len()},
                    "properties": {"provisioningState": "Succeeded", "orchestrationMode": "Uniform", "upgradePolicy": {"mode": "Manual"}},
                })
            })
            .collect();
        return (200, json!({ "value": value }));
    }
    if method == "GET" && path.ends_with("/virtualMachines") {
        let name = path.rsplit('/').nth(1).unwrap_or_default();
        let Some((_, p)) = pools
            .iter()
            .find(|(k, _)| scale_set(k.rsplit('/').next().unwrap()) == name)
        else {
            return arm_error(
                404,
                "ResourceNotFound",
                &format!("scale set {name} not found"),
            );
        };
        let value: Vec<Value> = p
            .machines
            .iter()
            .map(|(id, host)| {
                json!({
                    "instanceId": id.to_string(),
                    "id": format!("{}/virtualMachines/{id}", vmss_id(name)),
                    "name": format!("{name}_{id}"),
                    "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
                    "location": "westeurope",
                    "zones": [(id % 3 + 1).to_string()],
                    "properties": {"provisioningState": "Succeeded", "osProfile": {"computerName": host}},
                })
            })
            .collect();
        return (200, json!({ "value": value }));
    }
    arm_error(
        404,
        "NotFound",
        &format!("{method} {path}: not served by the AKS double"),
    )
}
