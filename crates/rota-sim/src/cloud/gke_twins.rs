//! The simulated GKE's calls for `managedUpdate: blueGreen`, in GKE's own JSON (kept with
//! the others in [`SimCloud::owner_exchanges`], checked against container v1 and Compute v1
//! by the peers suite); the pools' life itself is `twins.rs`'s:
//!
//! - the twin: `nodePools.create` (POST `v1/{parent}/nodePools`) with the new node version
//!   and image type, `initialNodeCount: 0`, and the resource label `rota-twin-of` naming
//!   the pool it is made from; an operation `CREATE_NODE_POOL`; the pool is `PROVISIONING`,
//!   then `RUNNING`;
//! - its size: `nodePools.setSize` (POST `v1/{name}:setSize`, `nodeCount`); GKE takes no
//!   maximum outside autoscaling, so rota's maximum is not sent;
//! - one drained node removed: container v1 has no per-node delete; GKE's own cluster
//!   autoscaler removes a chosen node with Compute's `instanceGroupManagers.deleteInstances`
//!   on the node pool's managed instance group (one of its `instanceGroupUrls`), which lowers
//!   the group's target size with it, and so does rota;
//! - the emptied pool: `nodePools.delete` (DELETE `v1/{name}`), `STOPPING`, then gone.
//!
//! A custom image (`imageType: CUSTOM`) is refused as `nodePools.update` refuses it.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::account::{Exchange, Inner};
use super::gke::{Gke, gke_group, mig, node_pool_json, path, rfc3339};
use super::twins::{self, Existing};
use crate::faults::Call;
use rota_core::cloud::managed::{GkeTarget, OwnerPoolMembers, TWIN_OF_LABEL, TwinRequest};
use rota_core::cloud::{CloudError, CloudErrorKind};
use rota_core::fleet::owner::ManagedGroup;

const BASE: &str = "https://container.googleapis.com/v1";

/// A container v1 operation of `kind` on `pool`, as the call that started it answers.
fn operation(inner: &mut Inner, pool: &ManagedGroup, kind: &str, done: bool) -> Value {
    let (project, location) = match pool {
        ManagedGroup::GkeNodePool {
            project, location, ..
        } => (project.clone(), location.clone()),
        _ => Default::default(),
    };
    let name = op_name(inner);
    let now = Instant::now();
    let mut op = json!({
        "name": name,
        "location": location,
        "operationType": kind,
        "status": if done { "DONE" } else { "RUNNING" },
        "selfLink": format!("{BASE}/projects/{project}/locations/{location}/operations/{name}"),
        "targetLink": format!("{BASE}/{}", path(pool).unwrap_or_default()),
        "startTime": rfc3339(inner, now),
    });
    if done {
        op["endTime"] = json!(rfc3339(inner, now));
    }
    op
}

/// A new operation's name, as GKE and Compute name theirs (`operation-…`).
fn op_name(inner: &mut Inner) -> String {
    use rand::Rng;
    inner.serial += 1;
    let r = inner.rng.random::<u32>();
    format!("operation-{}-{r:08x}", inner.serial)
}

/// The `CreateNodePoolRequest` rota sends for `req`.
pub fn create_request(req: &TwinRequest) -> Result<Value, CloudError> {
    let target = GkeTarget::parse(&req.image).ok_or_else(|| {
        CloudError::about(
            CloudErrorKind::Invalid,
            "nodePools.create",
            &req.twin.to_string(),
            format!(
                "INVALID_ARGUMENT: {} is not a GKE node version and image type (custom images, imageType CUSTOM, are not served by the simulated GKE)",
                req.image
            ),
        )
    })?;
    let mut pool = json!({
        "name": req.twin.name(),
        "config": {
            "imageType": target.image_type,
            "resourceLabels": {TWIN_OF_LABEL: req.from.name()},
        },
        "initialNodeCount": req.desired,
    });
    if let Some(v) = target.node_version {
        pool["version"] = json!(v);
    }
    Ok(json!({ "nodePool": pool }))
}

impl Gke {
    /// `nodePools.create` of the twin; idempotent by name for rota's own twin.
    pub(super) fn create_node_pool(&self, req: &TwinRequest) -> Result<(), CloudError> {
        let from = gke_group(&req.from)?;
        gke_group(&req.twin)?;
        let body = create_request(req)?;
        let parent = path(&req.from)?;
        let parent = parent
            .rsplit_once("/nodePools/")
            .map_or(parent.clone(), |(c, _)| c.to_string());
        let call = Call::CreateNodePool.api_name();
        let zones = self.0.call(
            Call::CreateNodePool,
            &from,
            |inner, _| match twins::check_create(inner, call, req, "ALREADY_EXISTS")? {
                Existing::Ours => Ok((None, false)),
                Existing::Create(z) => Ok((Some(z), false)),
            },
        )?;
        let Some(zones) = zones else {
            return Ok(());
        };
        self.0.create_twin_group(req, zones)?;
        let mut inner = self.0.inner.lock().unwrap();
        let twin = rota_core::cloud::GroupRef::Managed(req.twin.clone());
        if let Some(np) = inner.groups.get_mut(&twin).and_then(|g| g.gke.as_mut()) {
            np.label(TWIN_OF_LABEL, req.from.name());
        }
        let op = operation(&mut inner, &req.twin, "CREATE_NODE_POOL", false);
        inner.exchange(Exchange::new(
            "POST",
            &format!("v1/{parent}/nodePools"),
            Some(body),
            op,
        ));
        Ok(())
    }

    /// `nodePools.get` of a pool a move names; `None` when GKE has no such pool.
    pub(super) fn node_pool_members(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Option<OwnerPoolMembers>, CloudError> {
        let group = gke_group(pool)?;
        if !self.0.inner.lock().unwrap().groups.contains_key(&group) {
            return Ok(None);
        }
        let path = path(pool)?;
        self.0.call(Call::GetNodePool, &group, |inner, _| {
            let g = &inner.groups[&group];
            let np = node_pool_json(g, pool);
            let members = twins::members(g, pool);
            inner.exchange(Exchange::new("GET", &format!("v1/{path}"), None, np));
            Ok((Some(members), false))
        })
    }

    /// `nodePools.setSize` (GKE keeps no maximum without autoscaling: `max` is not sent).
    pub(super) fn set_node_pool_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        let group = gke_group(pool)?;
        let path = path(pool)?;
        let call = Call::SetNodePoolSize.api_name();
        self.0.call(Call::SetNodePoolSize, &group, |inner, _| {
            let changed = twins::resize(inner, call, &group, desired, max, "FAILED_PRECONDITION")?;
            let op = operation(inner, pool, "SET_NODE_POOL_SIZE", true);
            let body = json!({ "nodeCount": desired });
            inner.exchange(Exchange::new(
                "POST",
                &format!("v1/{path}:setSize"),
                Some(body),
                op,
            ));
            Ok(((), changed))
        })
    }

    /// Compute's `instanceGroupManagers.deleteInstances` on the node pool's managed instance
    /// group in the instance's zone: the node goes, the pool's size with it.
    pub(super) fn delete_instance(&self, pool: &ManagedGroup, id: &str) -> Result<(), CloudError> {
        let group = gke_group(pool)?;
        self.0.call(Call::DeleteInstances, &group, |inner, now| {
            let g = &inner.groups[&group];
            let Some(zone) = g
                .instances
                .iter()
                .find(|i| i.public.id == id)
                .map(|i| i.public.zone.clone())
            else {
                return Ok(((), false));
            };
            let mig = mig(pool, &zone);
            let changed = twins::remove(inner, &group, id, now)?;
            let project = mig.split('/').nth(1).unwrap_or_default().to_string();
            let op_name = op_name(inner);
            let link = |p: &str| format!("https://www.googleapis.com/compute/v1/{p}");
            let op = json!({
                "kind": "compute#operation",
                "name": op_name,
                "operationType": "compute.instanceGroupManagers.deleteInstances",
                "targetLink": link(&mig),
                "status": "DONE",
                "progress": 100,
                "zone": link(&format!("projects/{project}/zones/{zone}")),
                "selfLink": link(&format!("projects/{project}/zones/{zone}/operations/{op_name}")),
            });
            let body = json!({
                "instances": [format!("zones/{zone}/instances/{id}")],
                "skipInstancesOnValidationError": true,
            });
            inner.exchange(Exchange::new(
                "POST",
                &format!("{mig}/deleteInstances"),
                Some(body),
                op,
            ));
            Ok(((), changed))
        })
    }

    /// `nodePools.delete`: `STOPPING`, then gone; a pool already going or gone answers Ok.
    pub(super) fn delete_node_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        let group = gke_group(pool)?;
        if !self.0.inner.lock().unwrap().groups.contains_key(&group) {
            return Ok(());
        }
        let path = path(pool)?;
        let call = Call::DeleteNodePool.api_name();
        self.0.call(Call::DeleteNodePool, &group, |inner, now| {
            let changed = twins::delete(inner, call, &group, "FAILED_PRECONDITION", now)?;
            if changed {
                let op = operation(inner, pool, "DELETE_NODE_POOL", false);
                inner.exchange(Exchange::new("DELETE", &format!("v1/{path}"), None, op));
            }
            Ok(((), changed))
        })
    }
}
