//! Simulated GKE node pools: a group of the simulated cloud whose instance template only
//! GKE writes, served through the owner's API ([`OwnerPools`], implemented by [`Gke`]) in
//! GKE's own shapes (container v1: `projects.locations.clusters.nodePools.get` and
//! `.update`, `projects.locations.operations.get`), and rolled the way GKE's surge upgrade
//! rolls a node pool (see `surge.rs`):
//!
//! - `nodePools.update` with `nodeVersion` and `imageType` (and the pool's
//!   `upgradeSettings`: `maxSurge`, `maxUnavailable`, strategy `SURGE`) starts an
//!   `UPGRADE_NODES` operation, `RUNNING`; a second update while one runs is refused
//!   (`FAILED_PRECONDITION`, as GKE answers "operation ... is currently upgrading");
//! - GKE takes no idempotency token: rota's token rides in the same request as the node
//!   pool's resource label `rota-update`, and the operation started with it is known by it
//!   (a request whose label the pool already carries answers that operation again);
//! - each old node the round takes out is cordoned and drained by GKE, budgets respected for
//!   up to an hour (`service_drain`), then deleted;
//! - the operation is `DONE` when every node runs the new version; when the new image
//!   cannot boot ([`SimCloud::fail_owner_updates_to`]) it is `DONE` with an `error`, the
//!   template goes back and the surge is taken back.
//!
//! Every request and answer is kept in GKE's JSON ([`SimCloud::owner_exchanges`]) so the
//! peers suite can hold them to Google's published `container.v1` discovery document. The
//! nodes carry GKE's labels (`cloud.google.com/gke-nodepool`, the image type's
//! `gke-os-distribution` and `gke-container-runtime`) and a GKE kubelet version
//! (`v1.31.5-gke.1023000`), see `kubelet`.

use async_trait::async_trait;
use rand::Rng;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::account::{Exchange, Inner, SimCloud, SimGroup};
use super::owner_state::{DrainRule, NodePool};
use super::surge::{Roll, Upgrade, roll};
use crate::faults::Call;
use rota_core::cloud::managed::{
    GkeTarget, MaxUnavailable, OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools,
    OwnerUpdate, PoolStatus, TwinRequest, UpdateRequest, UpdateStatus,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// The resource label that carries rota's token on a node pool (GKE has no request token).
pub const TOKEN_LABEL: &str = "rota-update";

/// One pass of GKE's upgrade of `group`; true if it changed anything.
pub(super) fn step(inner: &mut Inner, group: &mut SimGroup) -> bool {
    let Some(np) = group.gke.as_mut() else {
        return false;
    };
    let (size, surge, unavailable) = (np.size, np.max_surge, np.max_unavailable);
    let Some(update) = np.running() else {
        return false;
    };
    let target = update.image.clone();
    if inner.failing_updates.contains(&target) {
        let np = group.gke.as_mut().expect("a GKE node pool");
        if let Some(prev) = np.previous_image.take() {
            group.template_image = prev;
        }
        if let Some(u) = np.running() {
            u.status = UpdateStatus::Failed;
            u.errors =
                vec!["code 13: Nodes failed to register: the node image does not boot".to_string()];
        }
        group.desired = size;
        return true;
    }
    let up = Upgrade {
        size,
        surge,
        unavailable,
        drain: DrainRule::GKE,
    };
    match roll(group, &target, &up) {
        Roll::Busy => false,
        Roll::Moved => true,
        Roll::Done => {
            if let Some(u) = group.gke.as_mut().and_then(NodePool::running) {
                u.status = UpdateStatus::Successful;
            }
            true
        }
    }
}

/// GKE's node pool path (`projects/P/locations/L/clusters/C/nodePools/N`).
pub(super) fn path(pool: &ManagedGroup) -> Result<String, CloudError> {
    match pool {
        ManagedGroup::GkeNodePool {
            project,
            location,
            gke_cluster,
            node_pool,
        } => Ok(format!(
            "projects/{project}/locations/{location}/clusters/{gke_cluster}/nodePools/{node_pool}"
        )),
        other => Err(CloudError::about(
            CloudErrorKind::Invalid,
            "nodePools.get",
            &other.to_string(),
            format!("{} is not a GKE node pool", other.name()),
        )),
    }
}

pub(super) fn rfc3339(inner: &Inner, at: Instant) -> String {
    inner
        .wall(at)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// An operation as `projects.locations.operations.get` answers it.
fn operation_json(inner: &Inner, pool: &ManagedGroup, u: &OwnerUpdate, at: Instant) -> Value {
    let path = path(pool).unwrap_or_default();
    let (project, location) = match pool {
        ManagedGroup::GkeNodePool {
            project, location, ..
        } => (project.as_str(), location.as_str()),
        _ => ("", ""),
    };
    let base = "https://container.googleapis.com/v1";
    let mut op = json!({
        "name": u.id,
        "location": location,
        "operationType": "UPGRADE_NODES",
        "status": if u.status == UpdateStatus::InProgress { "RUNNING" } else { "DONE" },
        "selfLink": format!("{base}/projects/{project}/locations/{location}/operations/{}", u.id),
        "targetLink": format!("{base}/{path}"),
        "startTime": rfc3339(inner, at),
    });
    if u.status != UpdateStatus::InProgress {
        op["endTime"] = json!(rfc3339(inner, Instant::now()));
    }
    if u.status == UpdateStatus::Failed {
        op["error"] = json!({"code": 13, "message": u.errors.join("; ")});
        op["statusMessage"] = json!(u.errors.join("; "));
    }
    op
}

/// A node pool as `nodePools.get` answers it.
pub(super) fn node_pool_json(g: &SimGroup, pool: &ManagedGroup) -> Value {
    let np = g.gke.as_ref().expect("a GKE node pool");
    let target = GkeTarget::parse(&g.template_image);
    let updating = np
        .ops
        .last()
        .is_some_and(|(u, _)| u.status == UpdateStatus::InProgress);
    json!({
        "name": pool.name(),
        "version": target.as_ref().and_then(|t| t.node_version.clone()).unwrap_or_default(),
        "config": {
            "imageType": target.map(|t| t.image_type).unwrap_or_else(|| "CUSTOM".into()),
            "resourceLabels": np.resource_labels,
        },
        "initialNodeCount": np.size,
        "upgradeSettings": {
            "maxSurge": np.max_surge,
            "maxUnavailable": np.max_unavailable,
            "strategy": "SURGE",
        },
        "status": match g.life.as_ref().map(|l| l.status) {
            Some(PoolStatus::Creating) => "PROVISIONING",
            Some(PoolStatus::Deleting) => "STOPPING",
            _ if updating => "RECONCILING",
            _ => "RUNNING",
        },
        "instanceGroupUrls": instance_group_urls(g, pool),
        "selfLink": format!("https://container.googleapis.com/v1/{}", path(pool).unwrap_or_default()),
    })
}

/// The path of the node pool's managed instance group in `zone` (GKE names it after the
/// cluster and pool).
pub(super) fn mig(pool: &ManagedGroup, zone: &str) -> String {
    let (project, cluster) = match pool {
        ManagedGroup::GkeNodePool {
            project,
            gke_cluster,
            ..
        } => (project.as_str(), gke_cluster.as_str()),
        _ => ("", ""),
    };
    let name = format!("gke-{cluster}-{}-grp", pool.name());
    format!("projects/{project}/zones/{zone}/instanceGroupManagers/{name}")
}

/// The node pool's `instanceGroupUrls`: one managed instance group per zone.
pub(super) fn instance_group_urls(g: &SimGroup, pool: &ManagedGroup) -> Value {
    let urls: Vec<String> = g
        .zones
        .iter()
        .map(|z| format!("https://www.googleapis.com/compute/v1/{}", mig(pool, z)))
        .collect();
    json!(urls)
}

/// The `UpdateNodePoolRequest` rota sends for `req` on a pool of `size` nodes: the target's
/// node version and image type, `maxSurge` from the batch (a percent of the pool's size,
/// rounded up; GKE takes a count), `maxUnavailable` 0 (surge: capacity never dips; with
/// `drain_first`, `maxSurge` 0 and `maxUnavailable` the batch), and the token as the pool's
/// resource label.
pub fn update_request(
    pool: &ManagedGroup,
    req: &UpdateRequest,
    size: u32,
) -> Result<Value, CloudError> {
    let target = GkeTarget::parse(&req.image).ok_or_else(|| {
        CloudError::about(
            CloudErrorKind::Invalid,
            "nodePools.update",
            &pool.to_string(),
            format!(
                "{} is not a GKE node version and image type (custom images, imageType CUSTOM, are not served by the simulated GKE)",
                req.image
            ),
        )
    })?;
    let batch = match req.max_unavailable {
        MaxUnavailable::Count(n) => n.max(1),
        MaxUnavailable::Percent(p) => (size * u32::from(p)).div_ceil(100).max(1),
    };
    // `strategy: replace`: no surge, the batch taken out at once.
    let (surge, unavailable) = if req.drain_first {
        (0, batch)
    } else {
        (batch, 0)
    };
    let mut body = json!({
        "name": path(pool)?,
        "imageType": target.image_type,
        "upgradeSettings": {"maxSurge": surge, "maxUnavailable": unavailable, "strategy": "SURGE"},
        "resourceLabels": {"labels": {TOKEN_LABEL: req.token}},
    });
    // GKE requires nodeVersion; "-" keeps the pool's current version.
    body["nodeVersion"] = json!(target.node_version.unwrap_or_else(|| "-".into()));
    Ok(body)
}

/// `nodePools.update` as GKE serves it, from the request's JSON.
fn serve_update(inner: &mut Inner, group: &GroupRef, body: &Value) -> Result<Value, CloudError> {
    let GroupRef::Managed(pool) = group else {
        unreachable!("checked by the adapter")
    };
    let refuse = |code: &str, msg: String| {
        CloudError::new(
            CloudErrorKind::Invalid,
            "nodePools.update",
            group,
            format!("{code}: {msg}"),
        )
    };
    let token = body["resourceLabels"]["labels"][TOKEN_LABEL]
        .as_str()
        .map(String::from);
    let image_type = body["imageType"].as_str().unwrap_or_default().to_string();
    let id = format!(
        "operation-{}-{:08x}",
        inner.serial,
        inner.rng.random::<u32>()
    );
    let g = inner.groups.get_mut(group).expect("checked by call");
    let current = GkeTarget::parse(&g.template_image);
    let version = match body["nodeVersion"].as_str() {
        Some("-") | None => current.and_then(|c| c.node_version),
        Some(v) => Some(v.to_string()),
    };
    let image = match version {
        Some(v) => format!("{v}/{image_type}"),
        None => image_type.clone(),
    };
    let np = g.gke.as_mut().expect("a GKE node pool");
    if let Some((seen, at)) = np
        .ops
        .iter()
        .find(|(u, _)| token.is_some() && u.token == token)
    {
        let (seen, at) = (seen.clone(), *at);
        return Ok(operation_json(inner, pool, &seen, at));
    }
    if let Some(u) = np.running() {
        return Err(refuse(
            "FAILED_PRECONDITION",
            format!(
                "Operation {} is currently upgrading node pool {}. Please wait and try again once it is done.",
                u.id,
                pool.name()
            ),
        ));
    }
    let settings = &body["upgradeSettings"];
    let surge = settings["maxSurge"].as_u64().unwrap_or(1) as u32;
    let unavailable = settings["maxUnavailable"].as_u64().unwrap_or(0) as u32;
    if surge + unavailable == 0 {
        return Err(refuse(
            "INVALID_ARGUMENT",
            "maxSurge and maxUnavailable cannot both be 0".into(),
        ));
    }
    np.max_surge = surge;
    np.max_unavailable = unavailable;
    if let Some(t) = &token {
        np.resource_labels.insert(TOKEN_LABEL.into(), t.clone());
    }
    np.previous_image = Some(g.template_image.clone());
    let update = OwnerUpdate {
        id,
        token,
        image: image.clone(),
        status: UpdateStatus::InProgress,
        errors: Vec::new(),
    };
    let now = Instant::now();
    np.ops.push((update.clone(), now));
    // The pool's new instance template: nodes created from now on run the new version.
    g.template_image = image;
    Ok(operation_json(inner, pool, &update, now))
}

/// The simulated GKE: [`OwnerPools`] for the GKE node pools of a [`SimCloud`].
#[derive(Clone)]
pub struct Gke(pub SimCloud);

impl SimCloud {
    /// GKE's API over this cloud's GKE node pools.
    pub fn gke(&self) -> Gke {
        Gke(self.clone())
    }
}

pub(super) fn gke_group(pool: &ManagedGroup) -> Result<GroupRef, CloudError> {
    path(pool)?;
    Ok(GroupRef::Managed(pool.clone()))
}

/// The owner's state from GKE's answers: the node pool and its newest operation.
fn state_of(
    pool: &ManagedGroup,
    np: &Value,
    op: Option<&Value>,
    ops: &[(OwnerUpdate, Instant)],
) -> OwnerPoolState {
    let version = np["version"].as_str().unwrap_or_default();
    let image_type = np["config"]["imageType"].as_str().unwrap_or_default();
    let image = if version.is_empty() {
        image_type.to_string()
    } else {
        format!("{version}/{image_type}")
    };
    let update = op.map(|op| {
        let name = op["name"].as_str().unwrap_or_default();
        let known = ops.iter().find(|(u, _)| u.id == name).map(|(u, _)| u);
        let status = match (op["status"].as_str(), op.get("error")) {
            (Some("DONE"), Some(_)) => UpdateStatus::Failed,
            (Some("DONE"), None) => UpdateStatus::Successful,
            _ => UpdateStatus::InProgress,
        };
        OwnerUpdate {
            id: name.to_string(),
            // The token the operation was started with: the pool's resource label, set by
            // the same request.
            token: known.and_then(|u| u.token.clone()),
            image: known.map_or_else(|| image.clone(), |u| u.image.clone()),
            status,
            errors: op["error"]["message"]
                .as_str()
                .map(|m| vec![m.to_string()])
                .unwrap_or_default(),
        }
    });
    OwnerPoolState {
        pool: pool.clone(),
        image,
        desired: np["initialNodeCount"].as_u64().unwrap_or(0) as u32,
        // The batch: the surge, or without one (`strategy: replace`) what goes at once.
        max_unavailable: ["maxSurge", "maxUnavailable"]
            .iter()
            .find_map(|k| np["upgradeSettings"][k].as_u64().filter(|n| *n > 0))
            .map(|n| MaxUnavailable::Count(n as u32)),
        update,
    }
}

#[async_trait]
impl OwnerPools for Gke {
    fn owner(&self) -> Owner {
        Owner::GkeNodePool
    }

    fn capabilities(&self) -> OwnerCapabilities {
        OwnerCapabilities {
            service_update: true,
            max_unavailable: true,
            // `operations.cancel` exists, but leaves the pool part upgraded; rota does not
            // use it.
            cancel_update: false,
        }
    }

    fn blue_green(&self) -> bool {
        true
    }

    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        self.create_node_pool(req)
    }

    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.node_pool_members(pool)
    }

    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        self.set_node_pool_size(pool, desired, max)
    }

    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        self.delete_instance(pool, instance_id)
    }

    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        self.delete_node_pool(pool)
    }

    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        // The pools' list, filtered by rota's twin label; each read as the move reads it.
        let mut out = Vec::new();
        for twin in self.0.twin_pools(pool) {
            out.extend(self.node_pool_members(&twin)?);
        }
        Ok(out)
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let group = gke_group(pool)?;
        let path = path(pool)?;
        self.0.call(Call::GetNodePool, &group, |inner, _| {
            let g = &inner.groups[&group];
            let np = node_pool_json(g, pool);
            let ops = g.gke.as_ref().expect("a GKE node pool").ops.clone();
            let op = ops
                .last()
                .map(|(u, at)| operation_json(inner, pool, u, *at));
            inner.exchange(Exchange::new(
                "GET",
                &format!("v1/{path}"),
                None,
                np.clone(),
            ));
            if let Some(op) = &op {
                let name = op["name"].as_str().unwrap_or_default();
                let (project, location) = match pool {
                    ManagedGroup::GkeNodePool {
                        project, location, ..
                    } => (project, location),
                    _ => unreachable!(),
                };
                inner.exchange(Exchange::new(
                    "GET",
                    &format!("v1/projects/{project}/locations/{location}/operations/{name}"),
                    None,
                    op.clone(),
                ));
            }
            Ok((state_of(pool, &np, op.as_ref(), &ops), false))
        })
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        let group = gke_group(pool)?;
        let path = path(pool)?;
        self.0.call(Call::UpdateNodePool, &group, |inner, _| {
            let size = inner.groups[&group]
                .gke
                .as_ref()
                .expect("a GKE node pool")
                .size;
            let body = update_request(pool, req, size)?;
            let op = serve_update(inner, &group, &body)?;
            inner.exchange(Exchange::new(
                "PUT",
                &format!("v1/{path}"),
                Some(body),
                op.clone(),
            ));
            Ok((op["name"].as_str().unwrap_or_default().to_string(), true))
        })
    }
}

impl SimCloud {
    /// Every operation GKE ran on `pool`, oldest first (tests: "never a second update").
    pub fn gke_operations(&self, pool: &ManagedGroup) -> Vec<OwnerUpdate> {
        let inner = self.inner.lock().unwrap();
        inner
            .groups
            .get(&GroupRef::Managed(pool.clone()))
            .and_then(|g| g.gke.as_ref())
            .map(|np| np.ops.iter().map(|(u, _)| u.clone()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cloud::GroupSpec;
    use crate::faults::FaultProfile;
    use rota_core::cloud::{Lifecycle, NodeGroups};

    const OLD: &str = "1.31.4-gke.1183000/COS_CONTAINERD";
    const NEW: &str = "1.31.5-gke.1023000/COS_CONTAINERD";

    fn np() -> ManagedGroup {
        ManagedGroup::GkeNodePool {
            project: "acme".into(),
            location: "europe-west1".into(),
            gke_cluster: "prod".into(),
            node_pool: "general".into(),
        }
    }

    fn req(image: &str, token: &str) -> UpdateRequest {
        UpdateRequest {
            image: image.into(),
            max_unavailable: MaxUnavailable::Count(2),
            token: token.into(),
            drain_timeout_minutes: None,
            node_soak_minutes: None,
            drain_first: false,
            force: false,
        }
    }

    /// One operation per token, a second refused while it runs, the pool never above its
    /// size plus maxSurge, every node on the new version at the end.
    #[tokio::test(start_paused = true)]
    async fn an_update_surges_within_max_surge_once_per_token() {
        let cloud = SimCloud::new(3, FaultProfile::default(), 1.0);
        let g = GroupRef::Managed(np());
        cloud
            .create_group(GroupSpec::new(g.clone(), 5, OLD).prebooted())
            .unwrap();
        let gke = cloud.gke();
        let id = gke.start_update(&np(), &req(NEW, "t1")).await.unwrap();
        assert!(id.starts_with("operation-"), "{id}");
        assert_eq!(gke.start_update(&np(), &req(NEW, "t1")).await.unwrap(), id);
        let busy = gke.start_update(&np(), &req(OLD, "t2")).await.unwrap_err();
        assert!(busy.message.contains("FAILED_PRECONDITION"), "{busy}");
        let mut most = 0;
        for _ in 0..3600 {
            cloud.step(Instant::now());
            let st = NodeGroups::describe(&cloud, &g).await.unwrap();
            let live = st
                .instances
                .iter()
                .filter(|i| i.lifecycle != Lifecycle::Terminating)
                .count();
            most = most.max(live);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(most <= 7, "{most} alive at once");
        let st = gke.describe(&np()).await.unwrap();
        assert_eq!(st.image, NEW);
        let u = st.update.unwrap();
        assert_eq!(
            (u.id, u.status, u.token.as_deref()),
            (id, UpdateStatus::Successful, Some("t1"))
        );
        let g = NodeGroups::describe(&cloud, &g).await.unwrap();
        assert_eq!(g.instances.len(), 5);
        assert!(g.instances.iter().all(|i| i.image == NEW));
        assert_eq!(cloud.gke_operations(&np()).len(), 1);
    }

    /// A custom image is not a GKE node version: refused before anything starts.
    #[tokio::test(start_paused = true)]
    async fn a_custom_image_is_refused_by_name() {
        let cloud = SimCloud::new(4, FaultProfile::default(), 1.0);
        cloud
            .create_group(GroupSpec::new(GroupRef::Managed(np()), 2, OLD).prebooted())
            .unwrap();
        let e = cloud
            .gke()
            .start_update(&np(), &req("projects/acme/global/images/node-7", "t1"))
            .await
            .unwrap_err();
        assert!(
            e.message.contains("projects/acme/global/images/node-7"),
            "{e}"
        );
        assert!(cloud.gke_operations(&np()).is_empty());
    }
}
