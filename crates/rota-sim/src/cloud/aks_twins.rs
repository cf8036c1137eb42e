//! The simulated AKS's calls for `managedUpdate: blueGreen`, in ARM's JSON (api-version
//! 2026-08-01, kept in [`SimCloud::owner_exchanges`] and checked against the pinned
//! `azure-mgmt-containerservice` models by the peers suite); the pools' life itself is
//! `twins.rs`'s:
//!
//! - the twin: a PUT of a new agent pool (`AgentPools_CreateOrUpdate`) in the shape of the
//!   one it is made from (VM size, mode, OS, orchestrator version), `count: 0`, the new
//!   `nodeImageVersion` and the tag `rota-twin-of`; `provisioningState` `Creating`, then
//!   `Succeeded`. AKS creates a pool on the newest node image it ships for the region, so
//!   a twin on any other image is refused, naming the newest (as the service update is);
//! - its size: a PUT of the agent pool with its new `count`;
//! - one drained node removed: `AgentPools_DeleteMachines` (POST `deleteMachines`,
//!   `machineNames`), which lowers the pool's `count` with it;
//! - the emptied pool: `AgentPools_Delete`, `Deleting`, then gone.

use serde_json::{Value, json};

use super::account::{Exchange, SimGroup};
use super::aks::{API_VERSION, Aks, agent_pool_json, aks_group, path};
use super::twins::{self, Existing};
use crate::faults::Call;
use rota_core::cloud::managed::{OwnerPoolMembers, TWIN_OF_LABEL, TwinRequest};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef};
use rota_core::fleet::owner::ManagedGroup;

/// The agent pool's properties as a PUT may carry them back (read-only ones left out).
fn writable(current: &Value) -> Value {
    let mut props = current["properties"].clone();
    if let Some(o) = props.as_object_mut() {
        for k in ["provisioningState", "currentOrchestratorVersion", "status"] {
            o.remove(k);
        }
    }
    props
}

/// The PUT rota sends to create the twin `req` asks for, from the agent pool it is made
/// from as AKS answers it.
pub fn create_body(from: &Value, req: &TwinRequest) -> Value {
    let mut props = writable(from);
    props["count"] = json!(req.desired);
    props["nodeImageVersion"] = json!(req.image);
    props["tags"] = json!({ TWIN_OF_LABEL: req.from.name() });
    json!({ "properties": props })
}

fn url(path: &str, tail: &str) -> String {
    format!("{path}{tail}?api-version={API_VERSION}")
}

impl Aks {
    /// The twin's PUT; idempotent by name for rota's own twin; refused on an image that is
    /// not the newest AKS ships.
    pub(super) fn create_agent_pool(&self, req: &TwinRequest) -> Result<(), CloudError> {
        let from = aks_group(&req.from)?;
        let twin = aks_group(&req.twin)?;
        let twin_path = path(&req.twin)?;
        let call = Call::CreateAgentPool.api_name();
        let found = self.0.call(Call::CreateAgentPool, &from, |inner, _| {
            let existing = twins::check_create(inner, call, req, "Conflict")?;
            let latest = inner.aks_latest_node_image.clone();
            if matches!(existing, Existing::Create(_))
                && latest.as_ref().is_some_and(|l| *l != req.image)
            {
                let latest = latest.unwrap_or_default();
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    call,
                    &twin,
                    format!(
                        "InvalidParameter: AKS creates an agent pool on its newest node image ({latest}): the pin {} is not it",
                        req.image
                    ),
                ));
            }
            let body = create_body(&agent_pool_json(&inner.groups[&from], &req.from), req);
            Ok(((existing, body), false))
        })?;
        let (Existing::Create(zones), body) = found else {
            return Ok(());
        };
        self.0.create_twin_group(req, zones)?;
        let mut inner = self.0.inner.lock().unwrap();
        if let Some(ap) = inner.groups.get_mut(&twin).and_then(|g| g.aks.as_mut()) {
            ap.tag(TWIN_OF_LABEL, req.from.name());
        }
        let answer = agent_pool_json(&inner.groups[&twin], &req.twin);
        inner.exchange(Exchange::new(
            "PUT",
            &url(&twin_path, ""),
            Some(body),
            answer,
        ));
        Ok(())
    }

    /// `AgentPools_Get` of a pool a move names; `None` when AKS has no such pool.
    pub(super) fn agent_pool_members(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Option<OwnerPoolMembers>, CloudError> {
        let group = aks_group(pool)?;
        if !self.0.inner.lock().unwrap().groups.contains_key(&group) {
            return Ok(None);
        }
        let path = path(pool)?;
        self.0.call(Call::GetAgentPool, &group, |inner, _| {
            let g: &SimGroup = &inner.groups[&group];
            let answer = agent_pool_json(g, pool);
            let members = twins::members(g, pool);
            inner.exchange(Exchange::new("GET", &url(&path, ""), None, answer));
            Ok((Some(members), false))
        })
    }

    /// A PUT of the agent pool with `count` (AKS keeps no maximum without autoscaling).
    pub(super) fn scale_agent_pool(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        let group = aks_group(pool)?;
        let path = path(pool)?;
        let call = Call::ScaleAgentPool.api_name();
        self.0.call(Call::ScaleAgentPool, &group, |inner, _| {
            let mut props = writable(&agent_pool_json(&inner.groups[&group], pool));
            props["count"] = json!(desired);
            if let Some(o) = props.as_object_mut() {
                // Not sent: a PUT with it would ask for a node image upgrade.
                o.remove("nodeImageVersion");
            }
            let changed = twins::resize(inner, call, &group, desired, max, "OperationNotAllowed")?;
            let answer = agent_pool_json(&inner.groups[&group], pool);
            let body = json!({ "properties": props });
            inner.exchange(Exchange::new("PUT", &url(&path, ""), Some(body), answer));
            Ok(((), changed))
        })
    }

    /// `AgentPools_DeleteMachines` of the machine `id`; one already gone answers Ok.
    pub(super) fn delete_machine(&self, pool: &ManagedGroup, id: &str) -> Result<(), CloudError> {
        let group = aks_group(pool)?;
        let path = path(pool)?;
        self.0.call(Call::DeleteMachines, &group, |inner, now| {
            let changed = twins::remove(inner, &group, id, now)?;
            let body = json!({ "machineNames": [id] });
            inner.exchange(Exchange::new(
                "POST",
                &url(&path, "/deleteMachines"),
                Some(body),
                Value::Null,
            ));
            Ok(((), changed))
        })
    }

    /// `AgentPools_Delete`: `Deleting`, then gone; one already going or gone answers Ok.
    pub(super) fn delete_agent_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        let group: GroupRef = aks_group(pool)?;
        if !self.0.inner.lock().unwrap().groups.contains_key(&group) {
            return Ok(());
        }
        let path = path(pool)?;
        let call = Call::DeleteAgentPool.api_name();
        self.0.call(Call::DeleteAgentPool, &group, |inner, now| {
            let changed = twins::delete(inner, call, &group, "OperationNotAllowed", now)?;
            if changed {
                inner.exchange(Exchange::new("DELETE", &url(&path, ""), None, Value::Null));
            }
            Ok(((), changed))
        })
    }
}
