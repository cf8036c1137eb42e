//! `managedUpdate: blueGreen` on AKS agent pools: the twin agent pool, a pool's members, its
//! size, one drained node's removal and the old pool's deletion, as [`AksAgentPools`]'
//! blue-green calls of [`rota_core::cloud::managed::OwnerPools`].
//!
//! | call | ARM calls |
//! |---|---|
//! | `create_twin` | `AgentPools_Get` of the twin's name (rota's own twin already there answers `Ok`), `AgentPools_Get` of the old pool, `AgentPools_GetUpgradeProfile` (its newest node image), `AgentPools_CreateOrUpdate` of the twin |
//! | `members` | `AgentPools_Get`; once per cluster `ManagedClusters_Get` (its node resource group) and once per pool `VirtualMachineScaleSets_List` there (the scale set tagged `aks-managed-poolName`); `VirtualMachineScaleSetVMs_List` |
//! | `set_size` | `AgentPools_Get`, `AgentPools_CreateOrUpdate` with `count` (`If-Match` its `eTag`) when it differs |
//! | `remove_node` | the members, then `AgentPools_DeleteMachines` naming the node's machine |
//! | `delete_pool` | `AgentPools_Get`, `AgentPools_Delete` unless already `Deleting` or gone |
//! | `twins_of` | `AgentPools_List`, the members of each pool tagged `rota-twin-of: <pool>` |
//!
//! The twin is the old pool's properties (VM size, mode, OS, orchestrator version, zones,
//! subnet, labels, taints, `upgradeSettings`, tags), without what ARM marks read-only, on the
//! version form's `nodeImageVersion`, `count` 0, the cluster autoscaler off (rota sizes the
//! twin batch by batch), and the tag `rota-twin-of` naming the old pool: how a restarted agent
//! knows the pool is its own, and how `twins_of` finds it whatever its name. AKS creates an
//! agent pool on the newest node image it ships for the region; a twin on any other image is
//! refused before anything is written, naming the newest. An agent pool's name is AKS's own
//! rule (a Linux pool: a lowercase letter, then at most 11 lowercase letters or digits; a
//! Windows pool at most 6): a twin name outside it is refused before anything is written too.
//! The planner names a twin within it from the pool's `osType`, which `members` reports.
//!
//! Members are the pool's scale set's VMs, each named by its host name (`osProfile.
//! computerName`): the node's name, and the machine name `AgentPools_DeleteMachines` takes,
//! which removes that VM and lowers the pool's `count` with it (a lower `count` would let AKS
//! pick the VM). The node's `providerID` is the VM's, with the node resource group in lower
//! case as AKS's cloud provider writes it.
//!
//! AKS answers a write with an `Azure-AsyncOperation` and the agent pool's
//! `provisioningState` follows it (`Creating`, `Scaling`, `Deleting`, ... then `Succeeded` or
//! `Failed`). This client does not block a pass on one: `members` reads the state, a pool at
//! work is `Creating`, `Updating` or `Deleting`, and a size or a removal asked of it then is
//! refused as `Transient` (AKS would refuse it with `OperationNotAllowed`), to be asked again
//! on the next pass. A failed one is `Failed` with AKS's `provisioningError`.

use azure_core::http::Method;
use serde_json::{Value, json};

use super::agent_pools::{
    AKS_API_VERSION, AksAgentPools, DELETE_AGENT_POOL, DELETE_MACHINES, GET_AGENT_POOL,
    GET_CLUSTER, IMAGE_TAG, LIST_AGENT_POOLS, LIST_SCALE_SETS, LIST_VMS, Machines, PUT_AGENT_POOL,
    READ_ONLY, TOKEN_TAG, aks_path,
};
use super::inventory::AKS_POOL_TAG;
use super::model::ScaleSetVm;
use super::{API_VERSION, AzureNodeGroups, lifecycle, zone};
use rota_core::cloud::managed::{
    OwnerPoolMembers, PoolOs, PoolStatus, TWIN_OF_LABEL, TwinRequest, renamed,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef, Instance, Lifecycle, provider_id};
use rota_core::fleet::owner::ManagedGroup;

/// Whether `name` is an agent pool name AKS takes (`os` its `osType`); `Err` says the rule.
pub fn valid_pool_name(name: &str, os: &str) -> Result<(), String> {
    let max = if os.eq_ignore_ascii_case("Windows") {
        6
    } else {
        12
    };
    let ok = name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name} is not an AKS agent pool name: AKS takes a lowercase letter, then lowercase \
             letters or digits, at most {max} in all for an {os} pool; rota creates no twin \
             under it"
        ))
    }
}

/// The PUT that creates `req`'s twin from the old pool `old` as `AgentPools_Get` answered it
/// (see the module header for what is copied).
pub fn create_body(old: &Value, req: &TwinRequest) -> Result<Value, String> {
    let Some(props) = old["properties"].as_object() else {
        return Err(format!(
            "{GET_AGENT_POOL} of {} answered no properties",
            req.from.name()
        ));
    };
    let mut props = props.clone();
    for k in READ_ONLY {
        props.remove(k);
    }
    for k in ["minCount", "maxCount", "powerState"] {
        props.remove(k);
    }
    props.insert("enableAutoScaling".into(), json!(false));
    props.insert("count".into(), json!(req.desired));
    props.insert("nodeImageVersion".into(), json!(req.image));
    let mut tags = props
        .get("tags")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // The old pool's service-update tags are its own: the twin starts without them.
    tags.remove(TOKEN_TAG);
    tags.remove(IMAGE_TAG);
    tags.insert(TWIN_OF_LABEL.into(), json!(req.from.name()));
    props.insert("tags".into(), Value::Object(tags));
    Ok(json!({ "properties": props }))
}

/// An agent pool's life in rota's words, from `provisioningState`, and AKS's error.
pub fn pool_status(ap: &Value) -> (PoolStatus, Vec<String>) {
    let p = &ap["properties"];
    let state = p["provisioningState"].as_str().unwrap_or("Succeeded");
    let status = match state.to_ascii_lowercase().as_str() {
        "succeeded" | "canceled" | "cancelled" => PoolStatus::Active,
        "creating" => PoolStatus::Creating,
        "deleting" => PoolStatus::Deleting,
        "failed" => PoolStatus::Failed,
        // Updating, Scaling, Upgrading, UpgradingNodeImageVersion, Starting, ...
        _ => PoolStatus::Updating,
    };
    let issues = match &p["status"]["provisioningError"] {
        Value::Null => Vec::new(),
        e => vec![format!(
            "{}: {}",
            e["code"].as_str().unwrap_or("Failed"),
            e["message"].as_str().unwrap_or_default()
        )],
    };
    (status, issues)
}

/// A scale set VM as an [`Instance`] of the pool on `image`, named by its host name.
pub fn machine(
    vm: &ScaleSetVm,
    subscription: &str,
    at: &Machines,
    image: &str,
) -> Result<Instance, String> {
    let name = vm
        .properties
        .os_profile
        .as_ref()
        .and_then(|o| o.computer_name.as_deref())
        .filter(|n| valid_machine_name(n))
        .ok_or_else(|| {
            format!(
                "VM {:?} of scale set {} has no properties.osProfile.computerName rota can \
                 name it by (the node's name, which AKS deletes a machine by)",
                vm.instance_id, at.scale_set
            )
        })?;
    if vm.instance_id.is_empty() || !vm.instance_id.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "VM {name} of scale set {} has instanceId {:?}, not a scale set instance ID",
            at.scale_set, vm.instance_id
        ));
    }
    Ok(Instance {
        id: name.to_string(),
        provider_id: provider_id::azure(
            subscription,
            &at.node_resource_group.to_ascii_lowercase(),
            &at.scale_set,
            &vm.instance_id,
        ),
        image: image.to_string(),
        zone: zone(vm),
        lifecycle: lifecycle(vm.properties.provisioning_state.as_deref()),
        launch_error: None,
    })
}

/// A machine (host) name: lowercase letters, digits and `-`, at most 64.
fn valid_machine_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// An ARM resource name rota puts in a path: no `/`, `?`, `#` or `..`.
fn path_safe(n: &str) -> bool {
    !n.is_empty()
        && n != "."
        && n != ".."
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.()".contains(c))
}

fn cluster_path(pool: &ManagedGroup) -> Option<String> {
    match pool {
        ManagedGroup::AksAgentPool {
            subscription_id,
            resource_group,
            aks_cluster,
            ..
        } => Some(format!(
            "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.ContainerService/managedClusters/{aks_cluster}"
        )),
        _ => None,
    }
}

fn subscription(pool: &ManagedGroup) -> &str {
    match pool {
        ManagedGroup::AksAgentPool {
            subscription_id, ..
        } => subscription_id,
        _ => "",
    }
}

fn invalid(call: &'static str, subject: &str, m: String) -> CloudError {
    CloudError::about(CloudErrorKind::Invalid, call, subject, m)
}

fn busy(call: &'static str, subject: &str, ap: &Value) -> Option<CloudError> {
    let (status, _) = pool_status(ap);
    matches!(
        status,
        PoolStatus::Creating | PoolStatus::Updating | PoolStatus::Deleting
    )
    .then(|| {
        CloudError::about(
            CloudErrorKind::Transient,
            call,
            subject,
            format!(
                "the agent pool is {}: AKS takes no other operation on it until that ends; \
                 asked again on the next pass",
                ap["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or_default()
            ),
        )
    })
}

impl AksAgentPools {
    /// `AgentPools_Get`, `None` when AKS has no such pool.
    async fn agent_pool_if_any(
        &self,
        path: &str,
        subject: &str,
    ) -> Result<Option<Value>, CloudError> {
        match self.agent_pool(path, subject).await {
            Ok(ap) => Ok(Some(ap)),
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Where `pool`'s machines live; `None` while AKS has made no scale set for it (a pool
    /// being created). Found once and kept: neither moves in a pool's life.
    async fn machines_at(
        &self,
        pool: &ManagedGroup,
        subject: &str,
    ) -> Result<Option<Machines>, CloudError> {
        let key = pool.to_string();
        if let Some(m) = self.machines.lock().unwrap().get(&key).cloned() {
            return Ok(Some(m));
        }
        let cluster = cluster_path(pool).unwrap_or_default();
        let cached = self.node_groups.lock().unwrap().get(&cluster).cloned();
        let node_rg = match cached {
            Some(rg) => rg,
            None => {
                let url = self
                    .arm
                    .url(&format!("{cluster}?api-version={AKS_API_VERSION}"));
                let mc: Value = self.arm.get_json(GET_CLUSTER, &subject, &url).await?;
                let rg = mc["properties"]["nodeResourceGroup"]
                    .as_str()
                    .filter(|r| path_safe(r))
                    .ok_or_else(|| {
                        invalid(
                            GET_CLUSTER,
                            subject,
                            format!(
                                "properties.nodeResourceGroup is not a resource group name: {}",
                                short(&mc["properties"]["nodeResourceGroup"])
                            ),
                        )
                    })?
                    .to_string();
                self.node_groups
                    .lock()
                    .unwrap()
                    .insert(cluster.clone(), rg.clone());
                rg
            }
        };
        let sub = subscription(pool);
        let mut url = self.arm.url(&format!(
            "/subscriptions/{sub}/resourceGroups/{node_rg}/providers/Microsoft.Compute/virtualMachineScaleSets?api-version={API_VERSION}"
        ));
        let mut found = Vec::new();
        // A bound on pages, as for every ARM list rota follows.
        for _ in 0..100 {
            let page: Value = self.arm.get_json(LIST_SCALE_SETS, &subject, &url).await?;
            for ss in page["value"].as_array().into_iter().flatten() {
                if ss["tags"][AKS_POOL_TAG].as_str() == Some(pool.name()) {
                    found.push(ss["name"].as_str().unwrap_or_default().to_string());
                }
            }
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(link) => url = self.arm.follow(link, LIST_SCALE_SETS, &subject)?,
                None => break,
            }
        }
        let scale_set = match found.as_slice() {
            [] => return Ok(None),
            [one] if path_safe(one) => one.clone(),
            _ => {
                return Err(invalid(
                    LIST_SCALE_SETS,
                    subject,
                    format!(
                        "resource group {node_rg} holds {} scale sets tagged {AKS_POOL_TAG}: {} \
                         ({found:?}); rota acts on one",
                        found.len(),
                        pool.name()
                    ),
                ));
            }
        };
        let m = Machines {
            node_resource_group: node_rg,
            scale_set,
        };
        self.machines.lock().unwrap().insert(key, m.clone());
        Ok(Some(m))
    }

    /// The pool's members from `ap` (its `AgentPools_Get` answer).
    async fn members_of(
        &self,
        pool: &ManagedGroup,
        ap: &Value,
        subject: &str,
    ) -> Result<OwnerPoolMembers, CloudError> {
        let p = &ap["properties"];
        let image = p["nodeImageVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (status, issues) = pool_status(ap);
        let mut instances = Vec::new();
        if let Some(at) = self.machines_at(pool, subject).await? {
            let group = GroupRef::Azure {
                subscription_id: subscription(pool).to_string(),
                resource_group: at.node_resource_group.clone(),
                scale_set: at.scale_set.clone(),
            };
            let path = format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}",
                subscription(pool),
                at.node_resource_group,
                at.scale_set
            );
            let compute = AzureNodeGroups {
                arm: self.arm.clone(),
            };
            for vm in compute.list_vms(&group, &path).await? {
                instances.push(
                    machine(&vm, subscription(pool), &at, &image)
                        .map_err(|m| invalid(LIST_VMS, subject, m))?,
                );
            }
        }
        let desired = p["count"].as_u64().unwrap_or(0) as u32;
        Ok(OwnerPoolMembers {
            pool: pool.clone(),
            status,
            image,
            desired,
            max: p["maxCount"]
                .as_u64()
                .map_or(desired, |m| (m as u32).max(desired)),
            instances,
            issues,
            twin_of: p["tags"][TWIN_OF_LABEL].as_str().map(str::to_string),
            // A Windows pool's twin takes a name of at most six characters.
            os: PoolOs::parse(p["osType"].as_str().unwrap_or_default()),
        })
    }

    pub(crate) async fn twin_create(&self, req: &TwinRequest) -> Result<(), CloudError> {
        let from = aks_path(&req.from, PUT_AGENT_POOL)?;
        let twin = aks_path(&req.twin, PUT_AGENT_POOL)?;
        let subject = req.twin.to_string();
        if let Some(ap) = self.agent_pool_if_any(&twin, &subject).await? {
            return if ap["properties"]["tags"][TWIN_OF_LABEL].as_str() == Some(req.from.name()) {
                Ok(())
            } else {
                Err(invalid(
                    PUT_AGENT_POOL,
                    &subject,
                    format!(
                        "an agent pool named {} exists and is not rota's twin of {} (no tag \
                         {TWIN_OF_LABEL}: {}); rota creates no twin over it",
                        req.twin.name(),
                        req.from.name(),
                        req.from.name()
                    ),
                ))
            };
        }
        let old = self.agent_pool(&from, &req.from.to_string()).await?;
        let os = old["properties"]["osType"].as_str().unwrap_or("Linux");
        valid_pool_name(req.twin.name(), os).map_err(|m| invalid(PUT_AGENT_POOL, &subject, m))?;
        let profile = self.upgrade_profile(&from, &subject).await?;
        let latest = profile["properties"]["latestNodeImageVersion"]
            .as_str()
            .unwrap_or_default();
        if latest != req.image {
            return Err(invalid(
                PUT_AGENT_POOL,
                &subject,
                format!(
                    "AKS creates an agent pool on its newest node image ({latest}): the pin {} \
                     is not it",
                    req.image
                ),
            ));
        }
        let body = create_body(&old, req).map_err(|m| invalid(PUT_AGENT_POOL, &subject, m))?;
        let reply = self
            .arm
            .send(
                PUT_AGENT_POOL,
                &subject,
                Method::Put,
                &self.url(&twin, ""),
                Some(&body),
                None,
            )
            .await?;
        Self::checked(reply, PUT_AGENT_POOL, &subject).map(|_| ())
    }

    pub(crate) async fn twin_members(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Option<OwnerPoolMembers>, CloudError> {
        let path = aks_path(pool, GET_AGENT_POOL)?;
        let subject = pool.to_string();
        let Some(ap) = self.agent_pool_if_any(&path, &subject).await? else {
            return Ok(None);
        };
        self.members_of(pool, &ap, &subject).await.map(Some)
    }

    pub(crate) async fn twin_set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
    ) -> Result<(), CloudError> {
        let path = aks_path(pool, PUT_AGENT_POOL)?;
        let subject = pool.to_string();
        let ap = self.agent_pool(&path, &subject).await?;
        let p = &ap["properties"];
        if p["count"].as_u64() == Some(u64::from(desired)) {
            return Ok(());
        }
        if let Some(e) = busy(PUT_AGENT_POOL, &subject, &ap) {
            return Err(e);
        }
        if p["enableAutoScaling"] == json!(true) {
            return Err(invalid(
                PUT_AGENT_POOL,
                &subject,
                "the agent pool's cluster autoscaler sizes it (enableAutoScaling): rota does not \
                 set the count of an autoscaled pool; turn the autoscaler off for a blueGreen move"
                    .into(),
            ));
        }
        let mut props = p.as_object().cloned().unwrap_or_default();
        for k in READ_ONLY {
            props.remove(k);
        }
        // Sent, it would ask for a node image change.
        props.remove("nodeImageVersion");
        props.insert("count".into(), json!(desired));
        let body = json!({ "properties": props });
        let reply = self
            .arm
            .send(
                PUT_AGENT_POOL,
                &subject,
                Method::Put,
                &self.url(&path, ""),
                Some(&body),
                p["eTag"].as_str(),
            )
            .await?;
        Self::checked(reply, PUT_AGENT_POOL, &subject).map(|_| ())
    }

    pub(crate) async fn twin_remove_node(
        &self,
        pool: &ManagedGroup,
        machine_name: &str,
    ) -> Result<(), CloudError> {
        let path = aks_path(pool, DELETE_MACHINES)?;
        let subject = pool.to_string();
        let Some(ap) = self.agent_pool_if_any(&path, &subject).await? else {
            return Ok(());
        };
        let members = self.members_of(pool, &ap, &subject).await?;
        match members.instances.iter().find(|i| i.id == machine_name) {
            // Not (or no longer) the pool's, or going already.
            None => return Ok(()),
            Some(i) if i.lifecycle == Lifecycle::Terminating => return Ok(()),
            Some(_) => {}
        }
        if let Some(e) = busy(DELETE_MACHINES, &subject, &ap) {
            return Err(e);
        }
        let body = json!({ "machineNames": [machine_name] });
        let reply = self
            .arm
            .send(
                DELETE_MACHINES,
                &subject,
                Method::Post,
                &self.url(&path, "/deleteMachines"),
                Some(&body),
                None,
            )
            .await?;
        Self::checked(reply, DELETE_MACHINES, &subject).map(|_| ())
    }

    pub(crate) async fn twin_delete(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        let path = aks_path(pool, DELETE_AGENT_POOL)?;
        let subject = pool.to_string();
        let Some(ap) = self.agent_pool_if_any(&path, &subject).await? else {
            return Ok(());
        };
        if pool_status(&ap).0 == PoolStatus::Deleting {
            return Ok(());
        }
        let reply = self
            .arm
            .send(
                DELETE_AGENT_POOL,
                &subject,
                Method::Delete,
                &self.url(&path, ""),
                None,
                None,
            )
            .await?;
        if reply.status == 404 {
            return Ok(());
        }
        Self::checked(reply, DELETE_AGENT_POOL, &subject).map(|_| ())
    }

    /// rota's twins of `pool`: the cluster's agent pools tagged `rota-twin-of: <pool>`.
    pub(crate) async fn twin_list(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        let subject = pool.to_string();
        let cluster = cluster_path(pool).ok_or_else(|| {
            invalid(
                LIST_AGENT_POOLS,
                &subject,
                format!("{} is not an AKS agent pool", pool.name()),
            )
        })?;
        let mut url = self.arm.url(&format!(
            "{cluster}/agentPools?api-version={AKS_API_VERSION}"
        ));
        let mut tagged = Vec::new();
        for _ in 0..100 {
            let page: Value = self.arm.get_json(LIST_AGENT_POOLS, &subject, &url).await?;
            for ap in page["value"].as_array().into_iter().flatten() {
                if ap["properties"]["tags"][TWIN_OF_LABEL].as_str() == Some(pool.name()) {
                    tagged.push(ap.clone());
                }
            }
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(link) => url = self.arm.follow(link, LIST_AGENT_POOLS, &subject)?,
                None => break,
            }
        }
        let mut out = Vec::new();
        for ap in tagged {
            let Some(name) = ap["name"].as_str().filter(|n| path_safe(n)) else {
                return Err(invalid(
                    LIST_AGENT_POOLS,
                    &subject,
                    format!(
                        "value[].name of a tagged agent pool is not a name: {}",
                        short(&ap["name"])
                    ),
                ));
            };
            let twin = renamed(pool, name);
            out.push(self.members_of(&twin, &ap, &twin.to_string()).await?);
        }
        Ok(out)
    }
}

fn short(v: &Value) -> String {
    v.to_string().chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> ManagedGroup {
        ManagedGroup::AksAgentPool {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            aks_cluster: "c".into(),
            agent_pool: name.into(),
        }
    }

    const NEW: &str = "AKSUbuntu-2204gen2containerd-202611.02.0";

    #[test]
    fn twin_names_are_held_to_akss_rules() {
        assert!(valid_pool_name("general2", "Linux").is_ok());
        assert!(valid_pool_name("abcdefghijkl", "Linux").is_ok());
        let long = valid_pool_name("general-rota-2026-11-2", "Linux").unwrap_err();
        assert!(
            long.contains("at most 12") && long.contains("general-rota-2026-11-2"),
            "{long}"
        );
        assert!(valid_pool_name("1pool", "Linux").is_err());
        assert!(valid_pool_name("win1234", "Windows").is_err());
        assert!(valid_pool_name("win123", "Windows").is_ok());
        // The planner names an AKS twin within these rules, a Windows pool's within six.
        use rota_core::cloud::managed::twin_name_on;
        let owner = rota_core::fleet::owner::Owner::AksAgentPool;
        for (pool, version) in [("general", "2026.11.2"), ("system-pool", "2026.11.2-2")] {
            let twin = twin_name_on(owner, PoolOs::Linux, pool, version);
            assert!(valid_pool_name(&twin, "Linux").is_ok(), "{twin}");
        }
        for (pool, version) in [
            ("win22", "2026.11.2"),
            ("npwin", "2026.11.2-2"),
            ("w", "v1"),
        ] {
            let twin = twin_name_on(owner, PoolOs::parse("Windows"), pool, version);
            assert!(valid_pool_name(&twin, "Windows").is_ok(), "{twin}");
            // The Linux rule's twelve would be refused for a Windows pool.
            let long = twin_name_on(owner, PoolOs::Linux, pool, version);
            assert!(valid_pool_name(&long, "Windows").is_err(), "{long}");
        }
    }

    /// The twin is the old pool's writable properties on the new image, no node, no
    /// autoscaler, tagged rota's; the old pool's own tags kept, its update tags not.
    #[test]
    fn the_twin_is_the_old_pool_on_the_new_image_without_read_only_fields() {
        let old = json!({"properties": {"count": 4, "vmSize": "Standard_D4s_v5", "mode": "User",
            "osType": "Linux", "orchestratorVersion": "1.31.5", "currentOrchestratorVersion": "1.31.5",
            "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202610.01.0", "provisioningState": "Succeeded",
            "eTag": "\"3\"", "enableAutoScaling": true, "minCount": 2, "maxCount": 8,
            "nodeLabels": {"workload": "general"}, "powerState": {"code": "Running"},
            "tags": {"team": "payments", TOKEN_TAG: "rota-1-a", IMAGE_TAG: "x"}}});
        let req = TwinRequest {
            from: pool("general"),
            twin: pool("general2"),
            image: NEW.into(),
            desired: 0,
            max: 4,
        };
        let body = create_body(&old, &req).unwrap();
        let p = &body["properties"];
        assert_eq!(
            (
                &p["count"],
                &p["nodeImageVersion"],
                &p["enableAutoScaling"],
                &p["vmSize"]
            ),
            (
                &json!(0),
                &json!(NEW),
                &json!(false),
                &json!("Standard_D4s_v5")
            )
        );
        for k in [
            "provisioningState",
            "currentOrchestratorVersion",
            "eTag",
            "minCount",
            "maxCount",
            "powerState",
        ] {
            assert!(p.get(k).is_none(), "{k} sent: {body}");
        }
        assert_eq!(
            p["tags"],
            json!({"team": "payments", TWIN_OF_LABEL: "general"})
        );
        assert_eq!(p["nodeLabels"]["workload"], "general");
        assert!(
            create_body(&json!({}), &req)
                .unwrap_err()
                .contains(GET_AGENT_POOL)
        );
    }

    #[test]
    fn provisioning_states_map_to_pool_statuses() {
        let st = |s: &str| pool_status(&json!({"properties": {"provisioningState": s}})).0;
        assert_eq!(st("Succeeded"), PoolStatus::Active);
        assert_eq!(st("Creating"), PoolStatus::Creating);
        assert_eq!(st("Scaling"), PoolStatus::Updating);
        assert_eq!(st("Deleting"), PoolStatus::Deleting);
        let failed = json!({"properties": {"provisioningState": "Failed",
            "status": {"provisioningError": {"code": "QuotaExceeded", "message": "cores"}}}});
        assert_eq!(
            pool_status(&failed),
            (PoolStatus::Failed, vec!["QuotaExceeded: cores".to_string()])
        );
    }

    /// A VM is named by its host name, its providerID is AKS's node's; a VM without a host
    /// name or with a hostile one is refused, naming the field.
    #[test]
    fn machines_are_named_by_host_name_and_broken_ones_refused() {
        let at = Machines {
            node_resource_group: "MC_rg_c_westeurope".into(),
            scale_set: "aks-general-12345678-vmss".into(),
        };
        let vm: ScaleSetVm = serde_json::from_value(json!({"instanceId": "3", "location": "westeurope", "zones": ["1"],
            "properties": {"provisioningState": "Succeeded", "osProfile": {"computerName": "aks-general-12345678-vmss000003"}}})).unwrap();
        let i = machine(&vm, "s", &at, NEW).unwrap();
        assert_eq!(i.id, "aks-general-12345678-vmss000003");
        assert_eq!(
            i.provider_id,
            "azure:///subscriptions/s/resourceGroups/mc_rg_c_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-general-12345678-vmss/virtualMachines/3"
        );
        assert_eq!(
            (i.zone.as_str(), i.lifecycle),
            ("westeurope-1", Lifecycle::InService)
        );
        for bad in [
            json!({"instanceId": "3", "properties": {}}),
            json!({"instanceId": "3", "properties": {"osProfile": {"computerName": "../../x"}}}),
            json!({"instanceId": "3/../4", "properties": {"osProfile": {"computerName": "aks-x-1"}}}),
        ] {
            let vm: ScaleSetVm = serde_json::from_value(bad).unwrap();
            let e = machine(&vm, "s", &at, NEW).unwrap_err();
            assert!(
                e.contains("computerName") || e.contains("instanceId"),
                "{e}"
            );
        }
    }
}
