//! Simulated AKS agent pools: a group of the simulated cloud (the agent pool's scale set)
//! whose model only AKS writes, served through the owner's API ([`OwnerPools`], implemented
//! by [`Aks`]) in ARM's shapes (`Microsoft.ContainerService` api-version 2026-08-01, the
//! default of the pinned `azure-mgmt-containerservice`), and rolled the way AKS upgrades an
//! agent pool's node image (see `surge.rs`):
//!
//! - AKS upgrades a node image only to the newest one it ships for the region
//!   (`AgentPools_UpgradeNodeImageVersion`, a POST without a body) or back to one of the
//!   pool's `recentlyUsedVersions` (a PUT of the agent pool with `nodeImageVersion`, AKS's
//!   rollback); any other pinned version is refused, naming the newest;
//! - the agent pool's `upgradeSettings.maxSurge` ("2" or "33%") comes from rota's batch
//!   (with `strategy: replace`, `maxSurge` "0" and `maxUnavailable` the batch: old nodes go
//!   first, never a node more than the pool's size),
//!   written with a PUT of the agent pool before the upgrade, together with rota's token
//!   as the agent pool's tag `rota-update` (ARM takes no idempotency token on a POST);
//! - each old node the round takes out is cordoned and drained by AKS, budgets honoured,
//!   within `upgradeSettings.drainTimeoutInMinutes` (30 by default): a drain that outlasts
//!   it fails the upgrade (`UpgradeFailed`), the blocked node made schedulable again
//!   (`service_drain`);
//! - while it runs, the agent pool's `provisioningState` is `UpgradingNodeImageVersion`; a
//!   second upgrade is refused (`OperationNotAllowed`); at the end `Succeeded`, or `Failed`
//!   with `status.provisioningError` when the image does not boot
//!   ([`SimCloud::fail_owner_updates_to`]), the model put back and the surge taken back.
//!
//! Nodes carry AKS's labels (`kubernetes.azure.com/agentpool`,
//! `kubernetes.azure.com/node-image-version`) and report the cluster's Kubernetes version
//! as their kubelet's (`v1.31.5`: a node image upgrade does not change it), see `kubelet`.

use async_trait::async_trait;
use rand::Rng;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::account::{Exchange, Inner, SimCloud, SimGroup};
use super::owner_state::{AgentPool, DrainRule};
use super::service_drain;
use super::surge::{Roll, Upgrade, roll};
use crate::faults::Call;
use rota_core::cloud::managed::{
    MaxUnavailable, OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, OwnerUpdate,
    PoolStatus, TwinRequest, UpdateRequest, UpdateStatus,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// The ARM api-version the simulated AKS speaks.
pub const API_VERSION: &str = "2026-08-01";
/// The agent pool tag that carries rota's token (ARM takes none on the upgrade's POST).
pub const TOKEN_TAG: &str = "rota-update";

/// One pass of AKS's upgrade of `group`; true if it changed anything.
pub(super) fn step(inner: &mut Inner, group: &mut SimGroup) -> bool {
    let Some(ap) = group.aks.as_mut() else {
        return false;
    };
    let (size, (surge, unavailable)) = (ap.size, ap.surge());
    let drain = DrainRule::aks(ap.drain_timeout_minutes);
    let Some(update) = ap.running() else {
        return false;
    };
    let target = update.image.clone();
    if inner.failing_updates.contains(&target) {
        fail(
            group,
            "VMExtensionProvisioningError: the node image's nodes did not join the cluster",
        );
        return true;
    }
    if let Some(why) = service_drain::take_failure(group) {
        fail(
            group,
            &format!("UpgradeFailed: Drain {why}. See http://aka.ms/aks/debugdrainfailures"),
        );
        return true;
    }
    let up = Upgrade {
        size,
        surge,
        unavailable,
        drain,
    };
    match roll(group, &target, &up) {
        Roll::Busy => false,
        Roll::Moved => true,
        Roll::Done => {
            let ap = group.aks.as_mut().expect("an AKS agent pool");
            if let Some(u) = ap.running() {
                u.status = UpdateStatus::Successful;
            }
            ap.recently_used.retain(|v| *v != target);
            ap.recently_used.push(target);
            true
        }
    }
}

/// The upgrade fails with `error`: the model goes back to the image it came from and the
/// surge is taken back (AKS deletes its surge nodes, best effort).
fn fail(group: &mut SimGroup, error: &str) {
    let Some(ap) = group.aks.as_mut() else {
        return;
    };
    let size = ap.size;
    if let Some(prev) = ap.previous_image.take() {
        group.template_image = prev;
    }
    if let Some(u) = ap.running() {
        u.status = UpdateStatus::Failed;
        u.errors = vec![error.to_string()];
    }
    group.desired = size;
}

/// The agent pool's ARM path.
pub(super) fn path(pool: &ManagedGroup) -> Result<String, CloudError> {
    match pool {
        ManagedGroup::AksAgentPool {
            subscription_id,
            resource_group,
            aks_cluster,
            agent_pool,
        } => Ok(format!(
            "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.ContainerService/managedClusters/{aks_cluster}/agentPools/{agent_pool}"
        )),
        other => Err(CloudError::about(
            CloudErrorKind::Invalid,
            "AgentPools_Get",
            &other.to_string(),
            format!("{} is not an AKS agent pool", other.name()),
        )),
    }
}

/// The agent pool's `upgradeSettings` as AKS answers them.
pub(super) fn upgrade_settings(ap: &AgentPool) -> Value {
    let mut u = json!({"maxSurge": ap.max_surge});
    if let Some(m) = &ap.max_unavailable {
        u["maxUnavailable"] = json!(m);
    }
    if let Some(m) = ap.drain_timeout_minutes {
        u["drainTimeoutInMinutes"] = json!(m);
    }
    if let Some(m) = ap.node_soak_minutes {
        u["nodeSoakDurationInMinutes"] = json!(m);
    }
    u
}

/// The agent pool as `AgentPools_Get` answers it.
pub(super) fn agent_pool_json(g: &SimGroup, pool: &ManagedGroup) -> Value {
    let ap = g.aks.as_ref().expect("an AKS agent pool");
    let last = ap.upgrades.last();
    let life = g.life.as_ref().map(|l| l.status);
    let state = match last.map(|u| u.status) {
        _ if life == Some(PoolStatus::Creating) => "Creating",
        _ if life == Some(PoolStatus::Deleting) => "Deleting",
        Some(UpdateStatus::InProgress) => "UpgradingNodeImageVersion",
        Some(UpdateStatus::Failed) => "Failed",
        Some(UpdateStatus::Cancelled) => "Canceled",
        _ => "Succeeded",
    };
    let mut props = json!({
        "count": ap.size,
        "vmSize": "Standard_D4s_v5",
        "mode": "User",
        "osType": "Linux",
        "type": "VirtualMachineScaleSets",
        "orchestratorVersion": "1.31.5",
        "currentOrchestratorVersion": "1.31.5",
        "nodeImageVersion": g.template_image,
        "upgradeSettings": upgrade_settings(ap),
        "provisioningState": state,
        "tags": ap.tags,
    });
    if let Some(u) = last.filter(|u| u.status == UpdateStatus::Failed) {
        let (code, message) = u.errors[0]
            .split_once(": ")
            .unwrap_or(("Failed", &u.errors[0]));
        props["status"] = json!({"provisioningError": {"code": code, "message": message}});
    }
    json!({
        "id": path(pool).unwrap_or_default(),
        "name": pool.name(),
        "type": "Microsoft.ContainerService/managedClusters/agentPools",
        "properties": props,
    })
}

/// The agent pool PUT rota sends before an upgrade: `upgradeSettings.maxSurge` from the
/// batch, the token as a tag, and for a rollback the recently used `nodeImageVersion`.
pub fn put_body(current: &Value, req: &UpdateRequest, rollback: bool) -> Value {
    let mut props = current["properties"].clone();
    // Read-only fields are not sent back (the model's visibility says "read" only).
    if let Some(o) = props.as_object_mut() {
        for k in ["provisioningState", "currentOrchestratorVersion", "status"] {
            o.remove(k);
        }
        if !rollback {
            o.remove("nodeImageVersion");
        }
    }
    let batch = match req.max_unavailable {
        MaxUnavailable::Count(n) => n.max(1).to_string(),
        MaxUnavailable::Percent(p) => format!("{}%", p.max(1)),
    };
    // `strategy: replace`: no surge, the batch taken out at once.
    let (surge, unavailable) = if req.drain_first {
        ("0".to_string(), batch)
    } else {
        (batch, "0".to_string())
    };
    props["upgradeSettings"]["maxSurge"] = json!(surge);
    props["upgradeSettings"]["maxUnavailable"] = json!(unavailable);
    // AKS's own per-node drain timeout and soak carry drain.timeout and batchSoak.
    if let Some(m) = req.drain_timeout_minutes {
        props["upgradeSettings"]["drainTimeoutInMinutes"] = json!(m);
    }
    if let Some(m) = req.node_soak_minutes {
        props["upgradeSettings"]["nodeSoakDurationInMinutes"] = json!(m);
    }
    props["tags"][TOKEN_TAG] = json!(req.token);
    if rollback {
        props["nodeImageVersion"] = json!(req.image);
    }
    json!({"properties": props})
}

/// The pool's upgrade profile as `AgentPools_GetUpgradeProfile` answers it.
fn upgrade_profile_json(inner: &Inner, g: &SimGroup, pool: &ManagedGroup) -> Value {
    let ap = g.aks.as_ref().expect("an AKS agent pool");
    let at = inner
        .wall(Instant::now())
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let recent: Vec<Value> = ap
        .recently_used
        .iter()
        .map(|v| json!({"orchestratorVersion": "1.31.5", "nodeImageVersion": v, "timestamp": at}))
        .collect();
    json!({
        "id": format!("{}/upgradeProfiles/default", path(pool).unwrap_or_default()),
        "name": "default",
        "type": "Microsoft.ContainerService/managedClusters/agentPools/upgradeProfiles",
        "properties": {
            "kubernetesVersion": "1.31.5",
            "osType": "Linux",
            "upgrades": [],
            "latestNodeImageVersion": inner
                .aks_latest_node_image
                .clone()
                .unwrap_or_else(|| g.template_image.clone()),
            "recentlyUsedVersions": recent,
        },
    })
}

/// Whether the upgrade profile lets AKS take the pool to `image`: `Some(true)` by a
/// rollback (a recently used version), `Some(false)` by the node image upgrade (the
/// newest), `None` not at all.
fn reachable(profile: &Value, image: &str) -> Option<bool> {
    let p = &profile["properties"];
    let recent = p["recentlyUsedVersions"]
        .as_array()
        .is_some_and(|v| v.iter().any(|r| r["nodeImageVersion"] == image));
    if p["latestNodeImageVersion"] == image {
        Some(false)
    } else if recent {
        Some(true)
    } else {
        None
    }
}

/// The upgrade as AKS serves it: the agent pool's PUT (settings, tag; the node image for a
/// rollback), then for a forward upgrade the POST, which moves the pool to the newest
/// image AKS ships (it takes no version).
fn serve(
    inner: &mut Inner,
    group: &GroupRef,
    body: &Value,
    rollback: bool,
) -> Result<String, CloudError> {
    let refuse = |code: &str, msg: String| {
        CloudError::new(
            CloudErrorKind::Invalid,
            "AgentPools_UpgradeNodeImageVersion",
            group,
            format!("{code}: {msg}"),
        )
    };
    let token = body["properties"]["tags"][TOKEN_TAG]
        .as_str()
        .map(String::from);
    let id = format!(
        "{:08x}-{:04x}-sim-aks-upgrade",
        inner.rng.random::<u32>(),
        inner.serial & 0xffff
    );
    let latest = inner.aks_latest_node_image.clone();
    let g = inner.groups.get_mut(group).expect("checked by call");
    let image = if rollback {
        body["properties"]["nodeImageVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    } else {
        latest.unwrap_or_else(|| g.template_image.clone())
    };
    let ap = g.aks.as_mut().expect("an AKS agent pool");
    if let Some(seen) = ap
        .upgrades
        .iter()
        .find(|u| token.is_some() && u.token == token)
    {
        return Ok(seen.id.clone());
    }
    if ap.running().is_some() {
        return Err(refuse(
            "OperationNotAllowed",
            "Operation is not allowed because there's an in progress upgrade node image version operation".into(),
        ));
    }
    if rollback && !ap.recently_used.contains(&image) {
        return Err(refuse(
            "InvalidParameter",
            format!("nodeImageVersion {image} is not one of the agent pool's recentlyUsedVersions"),
        ));
    }
    ap.max_surge = body["properties"]["upgradeSettings"]["maxSurge"]
        .as_str()
        .unwrap_or("1")
        .to_string();
    let settings = &body["properties"]["upgradeSettings"];
    ap.max_unavailable = settings["maxUnavailable"].as_str().map(String::from);
    ap.drain_timeout_minutes = settings["drainTimeoutInMinutes"].as_u64();
    ap.node_soak_minutes = settings["nodeSoakDurationInMinutes"].as_u64();
    if let Some(t) = &token {
        ap.tags.insert(TOKEN_TAG.into(), t.clone());
    }
    ap.previous_image = Some(g.template_image.clone());
    ap.upgrades.push(OwnerUpdate {
        id: id.clone(),
        token,
        image: image.clone(),
        status: UpdateStatus::InProgress,
        errors: Vec::new(),
    });
    g.template_image = image;
    Ok(id)
}

/// The simulated AKS: [`OwnerPools`] for the AKS agent pools of a [`SimCloud`].
#[derive(Clone)]
pub struct Aks(pub SimCloud);

impl SimCloud {
    /// AKS's API over this cloud's AKS agent pools.
    pub fn aks(&self) -> Aks {
        Aks(self.clone())
    }

    /// The newest node image AKS ships (what `upgradeNodeImageVersion` moves a pool to).
    pub fn set_aks_latest_node_image(&self, version: &str) {
        self.inner.lock().unwrap().aks_latest_node_image = Some(version.to_string());
    }

    /// Every upgrade AKS ran on `pool`, oldest first.
    pub fn aks_upgrades(&self, pool: &ManagedGroup) -> Vec<OwnerUpdate> {
        let inner = self.inner.lock().unwrap();
        inner
            .groups
            .get(&GroupRef::Managed(pool.clone()))
            .and_then(|g| g.aks.as_ref())
            .map(|ap| ap.upgrades.clone())
            .unwrap_or_default()
    }
}

pub(super) fn aks_group(pool: &ManagedGroup) -> Result<GroupRef, CloudError> {
    path(pool)?;
    Ok(GroupRef::Managed(pool.clone()))
}

/// The owner's state from AKS's answer (the agent pool); the upgrade it names is the newest
/// one AKS ran, known by the token tag the same PUT set.
fn state_of(pool: &ManagedGroup, ap: &Value, last: Option<&OwnerUpdate>) -> OwnerPoolState {
    let p = &ap["properties"];
    let status = match p["provisioningState"].as_str() {
        Some("UpgradingNodeImageVersion") => UpdateStatus::InProgress,
        Some("Failed") => UpdateStatus::Failed,
        Some("Canceled") => UpdateStatus::Cancelled,
        _ => UpdateStatus::Successful,
    };
    let max_surge =
        p["upgradeSettings"]["maxSurge"]
            .as_str()
            .and_then(|s| match s.strip_suffix('%') {
                Some(n) => n.parse().ok().map(MaxUnavailable::Percent),
                None => s.parse().ok().map(MaxUnavailable::Count),
            });
    OwnerPoolState {
        pool: pool.clone(),
        image: p["nodeImageVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        desired: p["count"].as_u64().unwrap_or(0) as u32,
        max_unavailable: max_surge,
        update: last.map(|u| OwnerUpdate {
            status,
            errors: match &p["status"]["provisioningError"] {
                Value::Null => Vec::new(),
                e => vec![format!(
                    "{}: {}",
                    e["code"].as_str().unwrap_or_default(),
                    e["message"].as_str().unwrap_or_default()
                )],
            },
            ..u.clone()
        }),
    }
}

#[async_trait]
impl OwnerPools for Aks {
    fn owner(&self) -> Owner {
        Owner::AksAgentPool
    }

    fn capabilities(&self) -> OwnerCapabilities {
        OwnerCapabilities {
            service_update: true,
            max_unavailable: true,
            // An upgrade can be aborted (`AgentPools_AbortLatestOperation`), leaving nodes on
            // both images; rota does not use it.
            cancel_update: false,
        }
    }

    fn blue_green(&self) -> bool {
        true
    }

    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        self.create_agent_pool(req)
    }

    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.agent_pool_members(pool)
    }

    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        self.scale_agent_pool(pool, desired, max)
    }

    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        self.delete_machine(pool, instance_id)
    }

    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        self.delete_agent_pool(pool)
    }

    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        // The pools' list, filtered by rota's twin label; each read as the move reads it.
        let mut out = Vec::new();
        for twin in self.0.twin_pools(pool) {
            out.extend(self.agent_pool_members(&twin)?);
        }
        Ok(out)
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let group = aks_group(pool)?;
        let path = path(pool)?;
        self.0.call(Call::GetAgentPool, &group, |inner, _| {
            let g = &inner.groups[&group];
            let ap = agent_pool_json(g, pool);
            let last = g.aks.as_ref().and_then(|a| a.upgrades.last().cloned());
            inner.exchange(Exchange::new(
                "GET",
                &format!("{path}?api-version={API_VERSION}"),
                None,
                ap.clone(),
            ));
            Ok((state_of(pool, &ap, last.as_ref()), false))
        })
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        let group = aks_group(pool)?;
        let path = path(pool)?;
        self.0
            .call(Call::UpgradeNodeImageVersion, &group, |inner, _| {
                let g = &inner.groups[&group];
                let current = agent_pool_json(g, pool);
                let profile = upgrade_profile_json(inner, g, pool);
                let seen = g.aks.as_ref().is_some_and(|a| {
                    a.upgrades
                        .iter()
                        .any(|u| u.token.as_deref() == Some(req.token.as_str()))
                });
                let url = format!("{path}/upgradeProfiles/default?api-version={API_VERSION}");
                inner.exchange(Exchange::new("GET", &url, None, profile.clone()));
                // AKS's upgrade takes no version: a pin that is neither the newest image nor
                // a recent one is refused here, or AKS would move the pool to its newest
                // instead. A token AKS has seen answers its upgrade again (the tag).
                let rollback = match reachable(&profile, &req.image) {
                    Some(r) => r,
                    None if seen => false,
                    None => {
                        let latest = profile["properties"]["latestNodeImageVersion"]
                            .as_str()
                            .unwrap_or_default();
                        return Err(CloudError::new(
                            CloudErrorKind::Invalid,
                            "AgentPools_UpgradeNodeImageVersion",
                            &group,
                            format!(
                                "AKS upgrades a node image only to its newest ({latest}) or back to a recently used one: the pin {} is neither, and the upgrade would move the pool to {latest} instead",
                                req.image
                            ),
                        ));
                    }
                };
                let body = put_body(&current, req, rollback);
                let id = serve(inner, &group, &body, rollback)?;
                let after = agent_pool_json(&inner.groups[&group], pool);
                let url = format!("{path}?api-version={API_VERSION}");
                inner.exchange(Exchange::new("PUT", &url, Some(body), after));
                if !rollback {
                    let post = format!("{path}/upgradeNodeImageVersion?api-version={API_VERSION}");
                    inner.exchange(Exchange::new("POST", &post, None, Value::Null));
                }
                Ok((id, true))
            })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cloud::GroupSpec;
    use crate::faults::FaultProfile;

    const OLD: &str = "AKSUbuntu-2204gen2containerd-202610.01.0";
    const NEW: &str = "AKSUbuntu-2204gen2containerd-202611.02.0";

    fn ap() -> ManagedGroup {
        ManagedGroup::AksAgentPool {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            aks_cluster: "prod".into(),
            agent_pool: "general".into(),
        }
    }

    fn req(image: &str, token: &str) -> UpdateRequest {
        UpdateRequest {
            image: image.into(),
            max_unavailable: MaxUnavailable::Percent(50),
            token: token.into(),
            drain_timeout_minutes: Some(15),
            node_soak_minutes: None,
            drain_first: false,
            force: false,
        }
    }

    async fn settle(cloud: &SimCloud, aks: &Aks) -> OwnerPoolState {
        for _ in 0..3600 {
            cloud.step(Instant::now());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        aks.describe(&ap()).await.unwrap()
    }

    /// To the newest node image by the upgrade, back to a recently used one by the rollback;
    /// any other pin refused, naming the newest; one upgrade per token.
    #[tokio::test(start_paused = true)]
    async fn only_the_newest_image_or_a_recent_one_is_reached() {
        let cloud = SimCloud::new(5, FaultProfile::default(), 1.0);
        cloud
            .create_group(GroupSpec::new(GroupRef::Managed(ap()), 4, OLD).prebooted())
            .unwrap();
        cloud.set_aks_latest_node_image(NEW);
        let aks = cloud.aks();
        let other = "AKSUbuntu-2204gen2containerd-202609.01.0";
        let e = aks
            .start_update(&ap(), &req(other, "t0"))
            .await
            .unwrap_err();
        assert!(
            e.message.contains(&format!("only to its newest ({NEW})")),
            "{e}"
        );
        let id = aks.start_update(&ap(), &req(NEW, "t1")).await.unwrap();
        assert_eq!(aks.start_update(&ap(), &req(NEW, "t1")).await.unwrap(), id);
        let st = aks.describe(&ap()).await.unwrap();
        assert_eq!(st.update.as_ref().unwrap().status, UpdateStatus::InProgress);
        assert_eq!(st.max_unavailable, Some(MaxUnavailable::Percent(50)));
        let st = settle(&cloud, &aks).await;
        assert_eq!(
            (st.image.as_str(), st.update.unwrap().status),
            (NEW, UpdateStatus::Successful)
        );
        // Back to the image it ran before: AKS's rollback.
        aks.start_update(&ap(), &req(OLD, "t2")).await.unwrap();
        let st = settle(&cloud, &aks).await;
        assert_eq!(
            (st.image.as_str(), st.update.unwrap().status),
            (OLD, UpdateStatus::Successful)
        );
        assert_eq!(cloud.aks_upgrades(&ap()).len(), 2);
        let put = cloud
            .owner_exchanges()
            .into_iter()
            .rfind(|x| x.method == "PUT")
            .unwrap();
        let props = &put.request.unwrap()["properties"];
        assert_eq!(props["nodeImageVersion"], OLD, "a rollback names its image");
        assert_eq!(props["upgradeSettings"]["drainTimeoutInMinutes"], 15);
    }
}
