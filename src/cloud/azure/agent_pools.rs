//! AKS agent pools: [`OwnerPools`] on the Azure Resource Manager REST API
//! (`Microsoft.ContainerService`, api-version [`AKS_API_VERSION`]), the owner's own node
//! image upgrade (`managedUpdate: service`), through the same [`Arm`] client as the scale sets.
//!
//! | `OwnerPools` | ARM calls |
//! |---|---|
//! | `describe` | `AgentPools_Get` |
//! | `start_update` | `AgentPools_Get`, `AgentPools_GetUpgradeProfile`, `AgentPools_CreateOrUpdate` (`upgradeSettings`, rota's tags; for a rollback the `nodeImageVersion`), waited for, then for a forward upgrade `AgentPools_UpgradeNodeImageVersion` |
//!
//! AKS upgrades a node image only to the newest it ships for the region (the POST takes no
//! version) or back to one of the pool's `recentlyUsedVersions` (a PUT with
//! `nodeImageVersion`). A pin that is neither is refused before anything is written, naming
//! the newest: the POST would move the pool there instead.
//!
//! ARM takes no idempotency token on the POST. The PUT before it writes two agent pool tags:
//! `rota-update` (the token) and `rota-image` (the image asked). `describe` reports the
//! update of that token only once AKS has taken it up (the pool upgrading, failed, or on the
//! image asked): a pool that carries the token yet sits `Succeeded` on another image got the
//! PUT and not the POST (a crash between the two), so the token counts as unseen, the planner
//! sends its start again, and the start sends only the POST. The update's ID is the token
//! (AKS keeps no upgrade ID on the agent pool). A later upgrade by someone else that leaves
//! the tags in place is still taken for rota's (a loose end: ARM records no requester on the
//! agent pool).
//!
//! The PUT carries the pool as `AgentPools_Get` answered it, without its read-only fields,
//! and `If-Match` with its `eTag`: a change someone made in between fails the PUT (412)
//! instead of being overwritten; the next pass reads afresh.
//!
//! `managedUpdate: blueGreen` (the twin agent pool, its members and size, one node's
//! removal, the old pool's deletion) is `agent_pool_twin.rs`'s, on the same client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use azure_core::http::Method;
use serde_json::{Value, json};

use super::AzureOptions;
use super::arm::{Arm, Reply};
use super::transport::HyperTransport;
use crate::cloud::lazy_owner::OwnerFacts;
use rota_core::cloud::managed::{
    MaxUnavailable, OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, OwnerUpdate,
    TwinRequest, UpdateRequest, UpdateStatus,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// The `Microsoft.ContainerService` API version rota speaks.
pub const AKS_API_VERSION: &str = "2026-08-01";
/// The agent pool tag that carries rota's token.
pub const TOKEN_TAG: &str = "rota-update";
/// The agent pool tag that carries the node image rota asked for with that token.
pub const IMAGE_TAG: &str = "rota-image";

pub const GET_AGENT_POOL: &str = "AgentPools_Get";
pub const PUT_AGENT_POOL: &str = "AgentPools_CreateOrUpdate";
pub const GET_UPGRADE_PROFILE: &str = "AgentPools_GetUpgradeProfile";
pub const UPGRADE_NODE_IMAGE: &str = "AgentPools_UpgradeNodeImageVersion";
/// `managedUpdate: blueGreen`'s calls (`agent_pool_twin.rs`).
pub const DELETE_AGENT_POOL: &str = "AgentPools_Delete";
pub const DELETE_MACHINES: &str = "AgentPools_DeleteMachines";
pub const GET_CLUSTER: &str = "ManagedClusters_Get";
pub const LIST_AGENT_POOLS: &str = "AgentPools_List";
pub const LIST_SCALE_SETS: &str = "VirtualMachineScaleSets_List";
pub const LIST_VMS: &str = "VirtualMachineScaleSetVMs_List";

/// Where an agent pool's machines live: the cluster's node resource group and the pool's
/// scale set there, as `agent_pool_twin.rs` finds them.
#[derive(Clone, Debug)]
pub struct Machines {
    pub node_resource_group: String,
    pub scale_set: String,
}

/// What [`AksAgentPools`] is, known before it is built ([`crate::cloud::lazy_owner`]).
pub const FACTS: OwnerFacts = OwnerFacts {
    owner: Owner::AksAgentPool,
    capabilities: OwnerCapabilities {
        service_update: true,
        max_unavailable: true,
        // `AgentPools_AbortLatestOperation` leaves nodes on both images; rota does not use
        // it.
        cancel_update: false,
    },
    blue_green: true,
    describe_call: GET_AGENT_POOL,
    update_call: UPGRADE_NODE_IMAGE,
};

/// The ARM permissions each call needs (`docs/cloud-azure.md` puts them in one custom role).
pub const PERMISSIONS: &[(&str, &str)] = &[
    (
        GET_AGENT_POOL,
        "Microsoft.ContainerService/managedClusters/agentPools/read",
    ),
    (
        GET_UPGRADE_PROFILE,
        "Microsoft.ContainerService/managedClusters/agentPools/upgradeProfiles/read",
    ),
    (
        PUT_AGENT_POOL,
        "Microsoft.ContainerService/managedClusters/agentPools/write",
    ),
    (
        UPGRADE_NODE_IMAGE,
        "Microsoft.ContainerService/managedClusters/agentPools/upgradeNodeImageVersion/action",
    ),
    // `managedUpdate: blueGreen` (agent_pool_twin.rs): the twin's PUT and a size are
    // agentPools/write, like the service update's PUT.
    (
        DELETE_AGENT_POOL,
        "Microsoft.ContainerService/managedClusters/agentPools/delete",
    ),
    (
        DELETE_MACHINES,
        "Microsoft.ContainerService/managedClusters/agentPools/deleteMachines/action",
    ),
    (
        GET_CLUSTER,
        "Microsoft.ContainerService/managedClusters/read",
    ),
    (
        LIST_AGENT_POOLS,
        "Microsoft.ContainerService/managedClusters/agentPools/read",
    ),
    (
        LIST_SCALE_SETS,
        "Microsoft.Compute/virtualMachineScaleSets/read",
    ),
    (
        LIST_VMS,
        "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
    ),
];

/// The agent pool fields ARM marks read-only: never sent back in a PUT.
pub(super) const READ_ONLY: [&str; 4] = [
    "provisioningState",
    "currentOrchestratorVersion",
    "eTag",
    "status",
];

/// [`OwnerPools`] for AKS agent pools, in any subscription.
#[derive(Clone)]
pub struct AksAgentPools {
    pub(crate) arm: Arm,
    /// By agent pool: where its machines live (`agent_pool_twin.rs`), found once.
    pub(super) machines: Arc<Mutex<HashMap<String, Machines>>>,
    /// By managed cluster path: its node resource group, read once.
    pub(super) node_groups: Arc<Mutex<HashMap<String, String>>>,
}

impl AksAgentPools {
    pub fn new(
        credential: Arc<dyn TokenCredential>,
        options: AzureOptions,
    ) -> Result<Self, String> {
        let arm = Arm::new(
            credential,
            HyperTransport::new()?,
            &options.endpoint,
            options.retry,
            options.lro,
        )?;
        Ok(AksAgentPools {
            arm,
            machines: Arc::default(),
            node_groups: Arc::default(),
        })
    }

    /// With Microsoft Entra Workload ID, as [`super::AzureNodeGroups::with_workload_identity`].
    pub fn with_workload_identity(options: AzureOptions) -> Result<Self, String> {
        Self::new(super::workload_identity()?, options)
    }
}

/// The agent pool's ARM path, or `Invalid` for a pool of another owner.
pub(super) fn aks_path(pool: &ManagedGroup, call: &'static str) -> Result<String, CloudError> {
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
            call,
            &other.to_string(),
            format!("{} is not an AKS agent pool", other.name()),
        )),
    }
}

/// Where the agent pool's last operation is, from its `provisioningState`.
fn status_of(state: &str) -> UpdateStatus {
    match state.to_ascii_lowercase().as_str() {
        "succeeded" => UpdateStatus::Successful,
        "failed" => UpdateStatus::Failed,
        "canceled" | "cancelled" => UpdateStatus::Cancelled,
        // UpgradingNodeImageVersion, Upgrading, Updating, Scaling, Creating...: AKS is at work.
        _ => UpdateStatus::InProgress,
    }
}

/// `upgradeSettings.maxSurge` ("2", "33%") in rota's words.
fn max_surge_of(props: &Value) -> Option<MaxUnavailable> {
    let s = props["upgradeSettings"]["maxSurge"].as_str()?;
    match s.strip_suffix('%') {
        Some(n) => n.parse().ok().map(MaxUnavailable::Percent),
        None => s.parse().ok().map(MaxUnavailable::Count),
    }
}

/// The owner's state from `AgentPools_Get`'s answer; see the module header for when the
/// token's update counts as seen.
pub fn state_of(pool: &ManagedGroup, ap: &Value) -> OwnerPoolState {
    let p = &ap["properties"];
    let image = p["nodeImageVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let status = status_of(p["provisioningState"].as_str().unwrap_or("Succeeded"));
    let token = p["tags"][TOKEN_TAG].as_str().map(str::to_string);
    let asked = p["tags"][IMAGE_TAG]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let errors = match &p["status"]["provisioningError"] {
        Value::Null => Vec::new(),
        e => vec![format!(
            "{}: {}",
            e["code"].as_str().unwrap_or("Failed"),
            e["message"].as_str().unwrap_or_default()
        )],
    };
    let update = match token {
        // The PUT arrived, the POST did not: not an update yet.
        Some(_) if status == UpdateStatus::Successful && image != asked => None,
        Some(t) => Some(OwnerUpdate {
            id: t.clone(),
            token: Some(t),
            image: asked,
            status,
            errors,
        }),
        // Someone else's operation: rota waits for it, and never takes it for its own.
        None if status == UpdateStatus::InProgress => Some(OwnerUpdate {
            id: format!(
                "{} ({})",
                pool.name(),
                p["provisioningState"].as_str().unwrap_or_default()
            ),
            token: None,
            image: image.clone(),
            status,
            errors,
        }),
        None => None,
    };
    OwnerPoolState {
        pool: pool.clone(),
        image,
        desired: p["count"].as_u64().unwrap_or(0) as u32,
        max_unavailable: max_surge_of(p),
        update,
    }
}

/// Whether the upgrade profile lets AKS take the pool to `image`: `Some(true)` back to a
/// recently used version (a PUT, AKS's rollback), `Some(false)` forward to the newest (the
/// POST), `None` not at all.
pub fn reachable(profile: &Value, image: &str) -> Option<bool> {
    let p = &profile["properties"];
    if p["latestNodeImageVersion"] == image {
        return Some(false);
    }
    p["recentlyUsedVersions"]
        .as_array()
        .is_some_and(|v| v.iter().any(|r| r["nodeImageVersion"] == image))
        .then_some(true)
}

/// The agent pool PUT for `req`: the pool as it is without its read-only fields,
/// `upgradeSettings.maxSurge` from the batch (`maxUnavailable` 0; with `drain_first`, the other
/// way round: `maxSurge` 0, `maxUnavailable` the batch), AKS's per-node drain timeout and soak from
/// `drain.timeout` and `batchSoak`, rota's tags, and for a rollback the `nodeImageVersion`.
pub fn put_body(current: &Value, req: &UpdateRequest, rollback: bool) -> Value {
    let mut props = current["properties"].clone();
    if let Some(o) = props.as_object_mut() {
        for k in READ_ONLY {
            o.remove(k);
        }
        if !rollback {
            // Sent unchanged it would ask for the image the pool is on; left out, AKS keeps it.
            o.remove("nodeImageVersion");
        }
    }
    let batch = match req.max_unavailable {
        MaxUnavailable::Count(n) => n.max(1).to_string(),
        MaxUnavailable::Percent(p) => format!("{}%", p.max(1)),
    };
    // `strategy: replace`: no surge, the batch taken out at once (AKS's maxSurge 0 with
    // maxUnavailable); a surge pool sets maxUnavailable back to 0, as a replace may have left it.
    let (surge, unavailable) = if req.drain_first {
        ("0".to_string(), batch)
    } else {
        (batch, "0".to_string())
    };
    props["upgradeSettings"]["maxSurge"] = json!(surge);
    props["upgradeSettings"]["maxUnavailable"] = json!(unavailable);
    if let Some(m) = req.drain_timeout_minutes {
        props["upgradeSettings"]["drainTimeoutInMinutes"] = json!(m.max(1));
    }
    if let Some(m) = req.node_soak_minutes {
        props["upgradeSettings"]["nodeSoakDurationInMinutes"] = json!(m);
    }
    // A node AKS cannot drain within drainTimeoutInMinutes fails the upgrade (`Schedule`),
    // and the pool stops on the failure: `drain.onTimeout: pause`. AKS has nothing that
    // forces (`Cordon` leaves the node cordoned with its pods and goes on), so `force` gets
    // the same; set, not left to the pool, since a pool set to `Cordon` would go on past it.
    props["upgradeSettings"]["undrainableNodeBehavior"] = json!("Schedule");
    if !props["tags"].is_object() {
        props["tags"] = json!({});
    }
    props["tags"][TOKEN_TAG] = json!(req.token);
    props["tags"][IMAGE_TAG] = json!(req.image);
    if rollback {
        props["nodeImageVersion"] = json!(req.image);
    }
    json!({"properties": props})
}

impl AksAgentPools {
    /// The pool's upgrade profile (`AgentPools_GetUpgradeProfile`): the newest node image
    /// AKS offers it and the recently used ones.
    pub(super) async fn upgrade_profile(
        &self,
        path: &str,
        subject: &str,
    ) -> Result<Value, CloudError> {
        self.arm
            .get_json(
                GET_UPGRADE_PROFILE,
                &subject,
                &self.url(path, "/upgradeProfiles/default"),
            )
            .await
    }

    pub(super) fn url(&self, path: &str, tail: &str) -> azure_core::http::Url {
        self.arm
            .url(&format!("{path}{tail}?api-version={AKS_API_VERSION}"))
    }

    pub(super) async fn agent_pool(&self, path: &str, subject: &str) -> Result<Value, CloudError> {
        self.arm
            .get_json(GET_AGENT_POOL, &subject, &self.url(path, ""))
            .await
    }

    pub(super) fn checked(
        reply: Reply,
        call: &'static str,
        subject: &str,
    ) -> Result<Reply, CloudError> {
        if reply.ok() {
            Ok(reply)
        } else {
            Err(reply.to_error(call, &subject))
        }
    }

    /// The forward upgrade's POST (AKS moves the pool to its newest node image).
    async fn upgrade(&self, path: &str, subject: &str) -> Result<(), CloudError> {
        let url = self.url(path, "/upgradeNodeImageVersion");
        let reply = self
            .arm
            .send(UPGRADE_NODE_IMAGE, &subject, Method::Post, &url, None, None)
            .await?;
        Self::checked(reply, UPGRADE_NODE_IMAGE, subject).map(|_| ())
    }
}

#[async_trait]
impl OwnerPools for AksAgentPools {
    fn owner(&self) -> Owner {
        FACTS.owner
    }

    fn capabilities(&self) -> OwnerCapabilities {
        FACTS.capabilities
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let path = aks_path(pool, GET_AGENT_POOL)?;
        let ap = self.agent_pool(&path, &pool.to_string()).await?;
        Ok(state_of(pool, &ap))
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        let path = aks_path(pool, UPGRADE_NODE_IMAGE)?;
        let subject = pool.to_string();
        let invalid =
            |m: String| CloudError::about(CloudErrorKind::Invalid, UPGRADE_NODE_IMAGE, &subject, m);
        let ap = self.agent_pool(&path, &subject).await?;
        let p = &ap["properties"];
        let ours = p["tags"][TOKEN_TAG].as_str() == Some(req.token.as_str());
        if ours && state_of(pool, &ap).update.is_some() {
            // AKS took this token's update up already: a retry starts nothing.
            return Ok(req.token.clone());
        }
        let profile = self.upgrade_profile(&path, &subject).await?;
        let latest = profile["properties"]["latestNodeImageVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let rollback = reachable(&profile, &req.image).ok_or_else(|| {
            invalid(format!(
                "AKS upgrades a node image only to its newest ({latest}) or back to a recently \
                 used one: the pin {} is neither, and the upgrade would move the pool to \
                 {latest} instead",
                req.image
            ))
        })?;
        if ours && !rollback {
            // The PUT of this token arrived and its POST did not (module header).
            self.upgrade(&path, &subject).await?;
            return Ok(req.token.clone());
        }
        if status_of(p["provisioningState"].as_str().unwrap_or("Succeeded"))
            == UpdateStatus::InProgress
        {
            return Err(invalid(format!(
                "the agent pool is {}: AKS takes no upgrade until that ends",
                p["provisioningState"].as_str().unwrap_or_default()
            )));
        }
        let body = put_body(&ap, req, rollback);
        let url = self.url(&path, "");
        let reply = self
            .arm
            .send(
                PUT_AGENT_POOL,
                &subject,
                Method::Put,
                &url,
                Some(&body),
                p["eTag"].as_str(),
            )
            .await?;
        let reply = Self::checked(reply, PUT_AGENT_POOL, &subject)?;
        if rollback {
            // The PUT is the rollback: it runs as long as an upgrade, followed by describe.
            return Ok(req.token.clone());
        }
        self.arm
            .wait(
                PUT_AGENT_POOL,
                &GroupRef::Managed(pool.clone()),
                &reply,
                &url,
            )
            .await?;
        self.upgrade(&path, &subject).await?;
        Ok(req.token.clone())
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

    /// AKS keeps no maximum outside its autoscaler (which a twin does not have): `max` is
    /// not sent.
    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        _max: u32,
    ) -> Result<(), CloudError> {
        self.twin_set_size(pool, desired).await
    }

    /// `instance_id` is the machine's name (the node's): what `members` names it by.
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

    fn pool() -> ManagedGroup {
        ManagedGroup::AksAgentPool {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            aks_cluster: "c".into(),
            agent_pool: "general".into(),
        }
    }

    fn ap(state: &str, image: &str, tags: Value) -> Value {
        json!({"properties": {"count": 4, "nodeImageVersion": image, "provisioningState": state,
            "upgradeSettings": {"maxSurge": "33%"}, "tags": tags}})
    }

    const OLD: &str = "AKSUbuntu-2204gen2containerd-202610.01.0";
    const NEW: &str = "AKSUbuntu-2204gen2containerd-202611.02.0";

    /// A token's update is seen once AKS took it up; the PUT alone (a crash before the POST)
    /// leaves it unseen, so the start is sent again; someone else's upgrade is waited for.
    #[test]
    fn a_tokens_update_is_seen_only_once_aks_took_it_up() {
        let tags = json!({TOKEN_TAG: "rota-1-a", IMAGE_TAG: NEW});
        let st = state_of(&pool(), &ap("UpgradingNodeImageVersion", NEW, tags.clone()));
        let u = st.update.unwrap();
        assert_eq!(
            (u.token.as_deref(), u.status, u.image.as_str()),
            (Some("rota-1-a"), UpdateStatus::InProgress, NEW)
        );
        assert_eq!(st.max_unavailable, Some(MaxUnavailable::Percent(33)));
        assert_eq!(st.desired, 4);
        let done = state_of(&pool(), &ap("Succeeded", NEW, tags.clone()));
        assert_eq!(done.update.unwrap().status, UpdateStatus::Successful);
        assert!(
            state_of(&pool(), &ap("Succeeded", OLD, tags.clone()))
                .update
                .is_none()
        );
        let mut failed = ap("Failed", NEW, tags);
        failed["properties"]["status"] = json!({"provisioningError": {"code": "VMExtensionProvisioningError", "message": "nodes did not join"}});
        let u = state_of(&pool(), &failed).update.unwrap();
        assert_eq!(u.status, UpdateStatus::Failed);
        assert_eq!(
            u.errors,
            vec!["VMExtensionProvisioningError: nodes did not join"]
        );
        let theirs = state_of(&pool(), &ap("UpgradingNodeImageVersion", NEW, json!({})))
            .update
            .unwrap();
        assert_eq!(
            (theirs.token, theirs.status),
            (None, UpdateStatus::InProgress)
        );
        assert!(
            state_of(&pool(), &ap("Succeeded", OLD, json!({})))
                .update
                .is_none()
        );
    }

    #[test]
    fn only_the_newest_or_a_recent_image_is_reachable() {
        let profile = json!({"properties": {"latestNodeImageVersion": NEW,
            "recentlyUsedVersions": [{"nodeImageVersion": OLD}]}});
        assert_eq!(reachable(&profile, NEW), Some(false));
        assert_eq!(reachable(&profile, OLD), Some(true));
        assert_eq!(
            reachable(&profile, "AKSUbuntu-2204gen2containerd-202501.01.0"),
            None
        );
    }

    /// The PUT drops what ARM marks read-only, keeps the pool's own tags and settings, and
    /// names the image only for a rollback.
    #[test]
    fn the_put_carries_the_pool_without_read_only_fields() {
        let mut current = ap("Succeeded", OLD, json!({"team": "payments"}));
        current["properties"]["eTag"] = json!("abc");
        current["properties"]["currentOrchestratorVersion"] = json!("1.31.5");
        let req = UpdateRequest {
            image: NEW.into(),
            max_unavailable: MaxUnavailable::Count(2),
            token: "rota-1-a".into(),
            drain_timeout_minutes: Some(30),
            node_soak_minutes: Some(0),
            drain_first: false,
            force: false,
        };
        let fwd = put_body(&current, &req, false);
        let p = &fwd["properties"];
        for k in READ_ONLY.iter().chain(["nodeImageVersion"].iter()) {
            assert!(p.get(*k).is_none(), "{k} sent");
        }
        assert_eq!(
            p["upgradeSettings"],
            json!({"maxSurge": "2", "maxUnavailable": "0", "drainTimeoutInMinutes": 30,
                "nodeSoakDurationInMinutes": 0, "undrainableNodeBehavior": "Schedule"})
        );
        // A pool someone set to `Cordon` would go on past an undrainable node: `pause` (and
        // `force`, which AKS cannot do) set it back to failing the upgrade there.
        let mut cordon = current.clone();
        cordon["properties"]["upgradeSettings"]["undrainableNodeBehavior"] = json!("Cordon");
        for force in [false, true] {
            let body = put_body(
                &cordon,
                &UpdateRequest {
                    force,
                    ..req.clone()
                },
                false,
            );
            assert_eq!(
                body["properties"]["upgradeSettings"]["undrainableNodeBehavior"],
                "Schedule"
            );
        }
        // `strategy: replace`: no surge, the batch out at once.
        let drain_first = put_body(
            &current,
            &UpdateRequest {
                drain_first: true,
                ..req.clone()
            },
            false,
        );
        assert_eq!(
            (
                &drain_first["properties"]["upgradeSettings"]["maxSurge"],
                &drain_first["properties"]["upgradeSettings"]["maxUnavailable"]
            ),
            (&json!("0"), &json!("2"))
        );
        assert_eq!(
            p["tags"],
            json!({"team": "payments", TOKEN_TAG: "rota-1-a", IMAGE_TAG: NEW})
        );
        assert_eq!(p["count"], 4);
        let back = put_body(
            &current,
            &UpdateRequest {
                image: OLD.into(),
                ..req
            },
            true,
        );
        assert_eq!(back["properties"]["nodeImageVersion"], OLD);
    }

    /// Every permission a call needs is granted by the role the docs give.
    #[test]
    fn the_docs_grant_every_permission_a_call_needs() {
        let doc = include_str!("../../../docs/cloud-azure.md");
        for (call, permission) in PERMISSIONS {
            assert!(
                doc.contains(permission),
                "{call} needs {permission}, which docs/cloud-azure.md does not grant"
            );
        }
    }
}
