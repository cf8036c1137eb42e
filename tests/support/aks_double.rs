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
}

/// AKS's agent pools, as the double keeps them.
#[derive(Default)]
pub struct Aks {
    /// By agent pool ARM ID.
    pools: BTreeMap<String, Pool>,
    /// The newest node image AKS ships.
    latest: String,
    upgrades: usize,
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
            },
        );
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
    match (method, tail) {
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
            let (status, upgrade) = put(p, &body["properties"], if_match);
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
fn put(p: &mut Pool, new: &Value, if_match: Option<&str>) -> (Result<(), (u16, Value)>, bool) {
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
    p.props.as_object_mut().unwrap().remove("status");
    p.etag += 1;
    if rollback {
        p.upgrading_to = image.map(str::to_string);
        p.props["provisioningState"] = json!("UpgradingNodeImageVersion");
    } else {
        p.updating = true;
        p.props["provisioningState"] = json!("Updating");
    }
    (Ok(()), rollback)
}
