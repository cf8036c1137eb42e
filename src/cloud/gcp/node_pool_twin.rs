//! `managedUpdate: blueGreen` on GKE node pools: the twin node pool, a pool's members, its
//! size, one drained node's removal and the old pool's deletion, as [`GkeNodePools`]'
//! blue-green calls of [`rota_core::cloud::managed::OwnerPools`].
//!
//! | call | Kubernetes Engine v1 and Compute v1 |
//! |---|---|
//! | `create_twin` | `nodePools.get` of the twin's name (rota's own twin already there answers `Ok`), `nodePools.get` of the old pool, `nodePools.create` |
//! | `members` | `nodePools.get`, the operation this client started on the pool (`operations.get`, while it runs), and per instance group of the pool Compute's `instanceGroupManagers.get` (its `targetSize`) and `listManagedInstances` |
//! | `set_size` | `nodePools.get`, each group's `instanceGroupManagers.get`; `nodePools.setSize` when the total splits evenly over the pool's groups, else `instanceGroupManagers.resize` of each group, each followed with `zoneOperations.get` until `DONE` |
//! | `remove_node` | `nodePools.get`, `listManagedInstances` of its groups, `instanceGroupManagers.deleteInstances` on the group that lists the node, followed with `zoneOperations.get` until `DONE` |
//! | `delete_pool` | `nodePools.get`, `nodePools.delete` unless already `STOPPING` or gone |
//! | `twins_of` | `nodePools.list` of the cluster, the members of each pool labelled `rota-twin-of: <pool>` |
//!
//! The twin is the old pool's shape: its `config` (machine type, disk, service account,
//! OAuth scopes, Kubernetes labels, taints, metadata, resource labels), `locations`,
//! `management`, `upgradeSettings`, `maxPodsConstraint`, `networkConfig` and
//! `placementPolicy`, with the version form's `nodeVersion` and `imageType`, no node at first,
//! and the resource label `rota-twin-of` naming the old pool (how a restarted agent knows the
//! pool is its own, and how `twins_of` finds it whatever its name). What container v1 marks
//! read-only is left out, and so is the old pool's `autoscaling`: rota sizes the twin batch by
//! batch, and GKE's autoscaler would size it too.
//!
//! Sizes: `nodePools.setSize` takes a count *per zone* (each of the pool's managed instance
//! groups gets `nodeCount`), so a total that does not split evenly over the groups (a batch of
//! 1 in a three-zone pool) is set on the groups themselves with Compute's `resize`, spread as
//! evenly as it goes, the way GKE's cluster autoscaler sizes a node pool's groups; the pool's
//! instance template is never written. One drained node goes with `deleteInstances` on its
//! group, which lowers the group's target size with it (as GKE documents for removing a
//! chosen node): a smaller `setSize` would let the groups pick which node goes.
//!
//! Compute's `resize` and `deleteInstances` answer with a zonal operation, followed with
//! `zoneOperations.get` until `DONE` (Compute marks it so once the group scheduled the
//! change: a short wait) before the call returns, so that the next call on the group does not
//! race it; errors in the finished operation are the call's error.
//!
//! GKE runs each of its own calls as a long-running operation. This client does not block a
//! pass on one: it remembers the operation it started on a pool and `members` reads it with
//! `operations.get` while it runs, as `describe` follows the service update's operation. A
//! twin whose creation ended in an error is `Failed`, with GKE's message; a pool GKE shows as
//! `PROVISIONING`, `RECONCILING` or `STOPPING` is `Creating`, `Updating` or `Deleting`, and a
//! resize asked of it then is refused as `Transient` (GKE would refuse it: one operation at a
//! time), to be asked again on the next pass.

use serde_json::{Value, json};

use super::classify::{classify_container_operation, classify_operation};
use super::names;
use super::node_pools::{
    CREATE_NODE_POOL, DELETE_INSTANCES, DELETE_NODE_POOL, GET_INSTANCE_GROUP_MANAGER,
    GET_NODE_POOL, GET_OPERATION, GET_ZONE_OPERATION, GkeNodePools, LIST_MANAGED_INSTANCES,
    LIST_NODE_POOLS, Pool, RESIZE_INSTANCE_GROUP, SET_NODE_POOL_SIZE, TOKEN_LABEL, gke_target,
    image_of, initial_size, instance_group_path,
};
use rota_core::cloud::managed::{
    GkeTarget, OwnerPoolMembers, PoolOs, PoolStatus, TWIN_OF_LABEL, TwinRequest, renamed,
};
use rota_core::cloud::{CloudError, CloudErrorKind, Instance, LaunchError, Lifecycle, provider_id};
use rota_core::fleet::owner::ManagedGroup;

/// The node pool fields container v1 marks read-only (`readOnly` in its discovery
/// document), by path: never sent in a create.
const READ_ONLY: [&[&str]; 15] = [
    &["conditions"],
    &["etag"],
    &["instanceGroupUrls"],
    &["kubeletCertInfo"],
    &["podIpv4CidrSize"],
    &["selfLink"],
    &["status"],
    &["statusMessage"],
    &["updateInfo"],
    &["config", "effectiveCgroupMode"],
    &["config", "kubeletConfig", "reservedResourcesConfig"],
    &["maintenancePolicy", "exclusionUntilEndOfSupport"],
    &["management", "upgradeOptions"],
    &["networkConfig", "networkTierConfig"],
    &["networkConfig", "podIpv4RangeUtilization"],
];

fn remove_path(v: &mut Value, path: &[&str]) {
    match path {
        [] => {}
        [last] => {
            if let Some(o) = v.as_object_mut() {
                o.remove(*last);
            }
        }
        [first, rest @ ..] => {
            if let Some(inner) = v.get_mut(*first) {
                remove_path(inner, rest);
            }
        }
    }
}

/// The `CreateNodePoolRequest` for `req`'s twin, from the old pool `old` as `nodePools.get`
/// answered it (see the module header for what is copied). `Err` names what GKE could not
/// take: a custom image, or an answer that is not a node pool.
pub fn create_request(old: &Value, req: &TwinRequest) -> Result<Value, String> {
    let target = GkeTarget::parse(&req.image).ok_or_else(|| {
        format!(
            "{} is not a GKE node version and image type: rota's GKE twin pools take \
             gke: {{nodeVersion, imageType}}, not a custom image",
            req.image
        )
    })?;
    if !old.is_object() || !old["config"].is_object() {
        return Err(format!(
            "{GET_NODE_POOL} of {} answered no node pool with a config",
            req.from.name()
        ));
    }
    let mut np = old.clone();
    for path in READ_ONLY {
        remove_path(&mut np, path);
    }
    let o = np.as_object_mut().expect("checked above");
    o.remove("autoscaling");
    o.insert("name".into(), json!(req.twin.name()));
    o.insert("initialNodeCount".into(), json!(req.desired));
    if let Some(v) = target.node_version {
        o.insert("version".into(), json!(v));
    }
    // An existing secondary range is named by `podRange`; its CIDR is only sent to create one.
    // (`get_mut`, not an index: indexing a missing key would add it as `null`.)
    if np["networkConfig"]["createPodRange"] != json!(true)
        && let Some(n) = np.get_mut("networkConfig").and_then(Value::as_object_mut)
    {
        n.remove("podIpv4CidrBlock");
    }
    let mut labels = np["config"]["resourceLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // The old pool's service-update token is its own: the twin starts without one.
    labels.remove(TOKEN_LABEL);
    labels.insert(TWIN_OF_LABEL.into(), json!(req.from.name()));
    np["config"]["imageType"] = json!(target.image_type);
    np["config"]["resourceLabels"] = Value::Object(labels);
    Ok(json!({ "nodePool": np }))
}

/// A node pool's status in rota's words, and GKE's `statusMessage` when it has one.
pub fn pool_status(np: &Value) -> (PoolStatus, Vec<String>) {
    let status = match np["status"].as_str() {
        Some("PROVISIONING") => PoolStatus::Creating,
        Some("RECONCILING") => PoolStatus::Updating,
        Some("STOPPING") => PoolStatus::Deleting,
        Some("ERROR") => PoolStatus::Failed,
        // RUNNING, RUNNING_WITH_ERROR (some nodes failed; the pool serves), unspecified.
        _ => PoolStatus::Active,
    };
    let issues = np["statusMessage"]
        .as_str()
        .filter(|m| !m.is_empty())
        .map(|m| {
            vec![format!(
                "{}: {m}",
                np["status"].as_str().unwrap_or("STATUS")
            )]
        })
        .unwrap_or_default();
    (status, issues)
}

/// One entry of `listManagedInstances` as an [`Instance`] of the pool on `image` (each pool
/// boots one image). `Err` names the field of an answer rota cannot act on: an instance
/// reference that is not a zone's instance, or a name no GCE instance has.
pub fn managed_instance(mi: &Value, project: &str, image: &str) -> Result<Instance, String> {
    let url = mi["instance"]
        .as_str()
        .ok_or_else(|| format!("managedInstances[].instance missing in {}", short(mi)))?;
    let (zone, name) = match (
        names::segment_after(url, "zones"),
        names::segment_after(url, "instances"),
    ) {
        (Some(z), Some(n)) if gce_name(z) && gce_name(n) && names::last_segment(url) == n => {
            (z.to_string(), n.to_string())
        }
        _ => {
            return Err(format!(
                "managedInstances[].instance {url} is not a zone's instance \
                 (projects/P/zones/Z/instances/N)"
            ));
        }
    };
    let lifecycle = names::lifecycle(mi["currentAction"].as_str(), mi["instanceStatus"].as_str());
    let errors = mi["lastAttempt"]["errors"]["errors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let launch_error = (lifecycle == Lifecycle::Pending && !errors.is_empty()).then(|| {
        let codes: Vec<&str> = errors.iter().filter_map(|e| e["code"].as_str()).collect();
        LaunchError {
            kind: super::classify::classify_launch(&codes),
            code: codes.first().copied().unwrap_or("UNKNOWN").to_string(),
            message: errors
                .iter()
                .filter_map(|e| e["message"].as_str())
                .collect::<Vec<_>>()
                .join("; "),
        }
    });
    Ok(Instance {
        provider_id: provider_id::gcp(project, &zone, &name),
        id: name,
        image: image.to_string(),
        zone,
        lifecycle,
        launch_error,
    })
}

/// A GCE name (instance, zone): lowercase letters, digits and `-`, at most 63.
fn gce_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn short(v: &Value) -> String {
    v.to_string().chars().take(120).collect()
}

/// `total` nodes spread over `groups` instance groups, as evenly as it goes (the first
/// groups one more): `[2, 1, 1]` for 4 over 3.
pub fn spread(total: u32, groups: usize) -> Vec<u32> {
    let n = groups.max(1) as u32;
    (0..n)
        .map(|i| total / n + u32::from(i < total % n))
        .collect()
}

/// One of the pool's instance groups: its Compute path and target size.
struct Group {
    path: String,
    target: u32,
}

impl GkeNodePools {
    /// `nodePools.get`, `None` when GKE has no such pool.
    async fn node_pool_if_any(
        &self,
        p: &Pool<'_>,
        subject: &str,
    ) -> Result<Option<Value>, CloudError> {
        match self.node_pool(p, subject).await {
            Ok(np) => Ok(Some(np)),
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The pool's instance groups (`instanceGroupUrls`, read at rota's Compute root) and
    /// their target sizes.
    async fn groups(&self, np: &Value, subject: &str) -> Result<Vec<Group>, CloudError> {
        let urls = np["instanceGroupUrls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::new();
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
                .compute(GET_INSTANCE_GROUP_MANAGER, subject, "GET", &path, None)
                .await?;
            let target = mig["targetSize"].as_u64().ok_or_else(|| {
                CloudError::about(
                    CloudErrorKind::Invalid,
                    GET_INSTANCE_GROUP_MANAGER,
                    subject,
                    format!("{path}: the answer has no targetSize: {}", short(&mig)),
                )
            })?;
            out.push(Group {
                path,
                target: u32::try_from(target).unwrap_or(u32::MAX),
            });
        }
        Ok(out)
    }

    /// Every managed instance of the group at `path` (`listManagedInstances`, all pages).
    async fn managed(
        &self,
        path: &str,
        project: &str,
        image: &str,
        subject: &str,
    ) -> Result<Vec<Instance>, CloudError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        // A bound on pages: a group holds at most 2,000 instances, Compute pages 500.
        for _ in 0..100 {
            let query = token
                .as_ref()
                .map(|t| format!("?pageToken={t}"))
                .unwrap_or_default();
            let page = self
                .compute(
                    LIST_MANAGED_INSTANCES,
                    subject,
                    "POST",
                    &format!("{path}/listManagedInstances{query}"),
                    None,
                )
                .await?;
            for mi in page["managedInstances"].as_array().into_iter().flatten() {
                out.push(managed_instance(mi, project, image).map_err(|m| {
                    CloudError::about(CloudErrorKind::Invalid, LIST_MANAGED_INSTANCES, subject, m)
                })?);
            }
            match page["nextPageToken"].as_str().filter(|t| !t.is_empty()) {
                Some(t)
                    if t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_=".contains(c)) =>
                {
                    token = Some(t.to_string())
                }
                Some(t) => {
                    return Err(CloudError::about(
                        CloudErrorKind::Invalid,
                        LIST_MANAGED_INSTANCES,
                        subject,
                        format!("nextPageToken {t:?} is not a page token"),
                    ));
                }
                None => return Ok(out),
            }
        }
        Err(CloudError::about(
            CloudErrorKind::Invalid,
            LIST_MANAGED_INSTANCES,
            subject,
            "more than 100 pages of managed instances: nextPageToken does not end",
        ))
    }

    /// The pool's members from `np` (its `nodePools.get` answer).
    async fn members_of(
        &self,
        pool: &ManagedGroup,
        p: &Pool<'_>,
        np: &Value,
        subject: &str,
    ) -> Result<OwnerPoolMembers, CloudError> {
        let image = image_of(np);
        let (mut status, mut issues) = pool_status(np);
        if let Some(op) = self.followed(p, subject).await?
            && let Some(e) = container_op_error(&op, GET_OPERATION, subject)
        {
            issues.push(format!("{} ({})", e.message, e.kind.reason()));
            if op["operationType"] == "CREATE_NODE_POOL" {
                status = PoolStatus::Failed;
            }
        }
        let groups = self.groups(np, subject).await?;
        let mut instances = Vec::new();
        for g in &groups {
            instances.extend(self.managed(&g.path, p.project, &image, subject).await?);
        }
        let desired = if groups.is_empty() {
            initial_size(np)
        } else {
            groups.iter().map(|g| g.target).sum()
        };
        Ok(OwnerPoolMembers {
            pool: pool.clone(),
            status,
            image,
            desired,
            // GKE keeps no maximum outside autoscaling, which a twin does not have.
            max: desired,
            instances,
            issues,
            twin_of: np["config"]["resourceLabels"][TWIN_OF_LABEL]
                .as_str()
                .map(str::to_string),
            // GKE names node pools alike on every OS.
            os: PoolOs::Linux,
        })
    }

    /// The operation this client last started on the pool, read with `operations.get` until
    /// it is `DONE` (then forgotten: the answer that says so is the last).
    async fn followed(&self, p: &Pool<'_>, subject: &str) -> Result<Option<Value>, CloudError> {
        let path = p.path();
        let Some(name) = self.twin_ops.lock().unwrap().get(&path).cloned() else {
            return Ok(None);
        };
        let op = self
            .request(
                GET_OPERATION,
                subject,
                http::Method::GET,
                &format!("{}/{name}", p.operations()),
                None,
            )
            .await?;
        if op["status"] == "DONE" {
            self.twin_ops.lock().unwrap().remove(&path);
        }
        Ok(Some(op))
    }

    /// Follow the Compute operation `op` (the answer of `deleteInstances` or `resize` on the
    /// group at `group`, `projects/P/zones/Z/instanceGroupManagers/N`) with
    /// `zoneOperations.get` until it is `DONE`; the finished operation's errors are the call's
    /// error. Compute marks these `DONE` once the group has scheduled the change (the
    /// instances' own progress shows in the group's members), so the wait is short; one not
    /// `DONE` within [`COMPUTE_OP_WAIT`] is `Transient`, naming it: the next pass asks again,
    /// which the group answers from where it is (a size is absolute, a node going is seen
    /// going).
    async fn compute_done(
        &self,
        group: &str,
        mut op: Value,
        call: &'static str,
        subject: &str,
    ) -> Result<(), CloudError> {
        let started = tokio::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(100);
        loop {
            if op["status"] == "DONE" {
                return compute_op_result(&op, call, subject);
            }
            let name = op["name"].as_str().filter(|n| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            });
            let (Some(name), Some((zone, _))) = (name, group.split_once("/instanceGroupManagers/"))
            else {
                return Err(CloudError::about(
                    CloudErrorKind::Invalid,
                    call,
                    subject,
                    format!(
                        "Compute answered without an operation name to follow: {}",
                        short(&op)
                    ),
                ));
            };
            if started.elapsed() >= COMPUTE_OP_WAIT {
                return Err(CloudError::about(
                    CloudErrorKind::Transient,
                    call,
                    subject,
                    format!(
                        "Compute operation {name} still {} after {}s; asked again on the next pass",
                        op["status"].as_str().unwrap_or("PENDING"),
                        COMPUTE_OP_WAIT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_secs(2));
            op = self
                .compute(
                    GET_ZONE_OPERATION,
                    subject,
                    "GET",
                    &format!("{zone}/operations/{name}"),
                    None,
                )
                .await?;
        }
    }

    /// Remember the operation `op` (a call's answer) to follow it on the pool at `path`.
    fn follow(
        &self,
        path: String,
        op: &Value,
        call: &'static str,
        subject: &str,
    ) -> Result<(), CloudError> {
        let name = op["name"].as_str().filter(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
        let Some(name) = name else {
            return Err(CloudError::about(
                CloudErrorKind::Invalid,
                call,
                subject,
                format!("GKE answered without an operation name: {}", short(op)),
            ));
        };
        self.twin_ops.lock().unwrap().insert(path, name.to_string());
        Ok(())
    }

    pub(crate) async fn twin_create(&self, req: &TwinRequest) -> Result<(), CloudError> {
        let from = gke_target(&req.from, CREATE_NODE_POOL)?;
        let twin = gke_target(&req.twin, CREATE_NODE_POOL)?;
        let subject = req.twin.to_string();
        if let Some(np) = self.node_pool_if_any(&twin, &subject).await? {
            let label = np["config"]["resourceLabels"][TWIN_OF_LABEL].as_str();
            return if label == Some(from.name) {
                Ok(())
            } else {
                Err(CloudError::about(
                    CloudErrorKind::Invalid,
                    CREATE_NODE_POOL,
                    &subject,
                    format!(
                        "ALREADY_EXISTS: a node pool named {} exists and is not rota's twin of {} \
                         (no resource label {TWIN_OF_LABEL}: {}); rota creates no twin over it",
                        twin.name, from.name, from.name
                    ),
                ))
            };
        }
        let old = self.node_pool(&from, &req.from.to_string()).await?;
        let body = create_request(&old, req).map_err(|m| {
            CloudError::about(CloudErrorKind::Invalid, CREATE_NODE_POOL, &subject, m)
        })?;
        let parent = twin.cluster_path();
        let op = self
            .request(
                CREATE_NODE_POOL,
                &subject,
                http::Method::POST,
                &format!("{parent}/nodePools"),
                Some(&body),
            )
            .await?;
        self.follow(twin.path(), &op, CREATE_NODE_POOL, &subject)
    }

    pub(crate) async fn twin_members(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Option<OwnerPoolMembers>, CloudError> {
        let p = gke_target(pool, GET_NODE_POOL)?;
        let subject = pool.to_string();
        let Some(np) = self.node_pool_if_any(&p, &subject).await? else {
            return Ok(None);
        };
        self.members_of(pool, &p, &np, &subject).await.map(Some)
    }

    pub(crate) async fn twin_set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
    ) -> Result<(), CloudError> {
        let p = gke_target(pool, SET_NODE_POOL_SIZE)?;
        let subject = pool.to_string();
        let np = self.node_pool(&p, &subject).await?;
        let (status, _) = pool_status(&np);
        if matches!(
            status,
            PoolStatus::Creating | PoolStatus::Updating | PoolStatus::Deleting
        ) {
            return Err(CloudError::about(
                CloudErrorKind::Transient,
                SET_NODE_POOL_SIZE,
                &subject,
                format!(
                    "the node pool is {}: GKE runs one operation on it at a time; the size is \
                     asked again on the next pass",
                    np["status"].as_str().unwrap_or_default()
                ),
            ));
        }
        let groups = self.groups(&np, &subject).await?;
        if groups.is_empty() {
            return Err(CloudError::about(
                CloudErrorKind::Invalid,
                SET_NODE_POOL_SIZE,
                &subject,
                "GKE lists no instance group for the node pool (instanceGroupUrls)",
            ));
        }
        if groups.iter().map(|g| g.target).sum::<u32>() == desired {
            return Ok(());
        }
        let n = groups.len() as u32;
        if desired.is_multiple_of(n) {
            let body = json!({ "nodeCount": desired / n });
            let op = self
                .request(
                    SET_NODE_POOL_SIZE,
                    &subject,
                    http::Method::POST,
                    &format!("{}:setSize", p.path()),
                    Some(&body),
                )
                .await?;
            return self.follow(p.path(), &op, SET_NODE_POOL_SIZE, &subject);
        }
        // Uneven: each group to its share, the way the cluster autoscaler sizes them.
        for (g, size) in groups.iter().zip(spread(desired, groups.len())) {
            if g.target == size {
                continue;
            }
            let op = self
                .compute(
                    RESIZE_INSTANCE_GROUP,
                    &subject,
                    "POST",
                    &format!(
                        "{}/resize?size={size}&requestId={}",
                        g.path,
                        names::request_id()
                    ),
                    None,
                )
                .await?;
            self.compute_done(&g.path, op, RESIZE_INSTANCE_GROUP, &subject)
                .await?;
        }
        Ok(())
    }

    pub(crate) async fn twin_remove_node(
        &self,
        pool: &ManagedGroup,
        instance_id: &str,
    ) -> Result<(), CloudError> {
        let p = gke_target(pool, DELETE_INSTANCES)?;
        let subject = pool.to_string();
        let Some(np) = self.node_pool_if_any(&p, &subject).await? else {
            return Ok(());
        };
        let image = image_of(&np);
        for g in self.groups(&np, &subject).await? {
            let listed = self.managed(&g.path, p.project, &image, &subject).await?;
            let Some(i) = listed.iter().find(|i| i.id == instance_id) else {
                continue;
            };
            if i.lifecycle == Lifecycle::Terminating {
                return Ok(());
            }
            let body = json!({
                "instances": [format!("zones/{}/instances/{}", i.zone, i.id)],
                // Gone since it was listed: nothing to do, not an error.
                "skipInstancesOnValidationError": true,
            });
            let op = self
                .compute(
                    DELETE_INSTANCES,
                    &subject,
                    "POST",
                    &format!(
                        "{}/deleteInstances?requestId={}",
                        g.path,
                        names::request_id()
                    ),
                    Some(&body),
                )
                .await?;
            return self
                .compute_done(&g.path, op, DELETE_INSTANCES, &subject)
                .await;
        }
        // No group lists it: gone already.
        Ok(())
    }

    pub(crate) async fn twin_delete(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        let p = gke_target(pool, DELETE_NODE_POOL)?;
        let subject = pool.to_string();
        let Some(np) = self.node_pool_if_any(&p, &subject).await? else {
            return Ok(());
        };
        if np["status"] == "STOPPING" {
            return Ok(());
        }
        let out = self
            .request(
                DELETE_NODE_POOL,
                &subject,
                http::Method::DELETE,
                &p.path(),
                None,
            )
            .await;
        match out {
            Ok(op) => self.follow(p.path(), &op, DELETE_NODE_POOL, &subject),
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// rota's twins of `pool`: the cluster's node pools labelled `rota-twin-of: <pool>`.
    pub(crate) async fn twin_list(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        let p = gke_target(pool, LIST_NODE_POOLS)?;
        let subject = pool.to_string();
        let list = self
            .request(
                LIST_NODE_POOLS,
                &subject,
                http::Method::GET,
                &format!("{}/nodePools", p.cluster_path()),
                None,
            )
            .await?;
        let mut out = Vec::new();
        for np in list["nodePools"].as_array().into_iter().flatten() {
            if np["config"]["resourceLabels"][TWIN_OF_LABEL].as_str() != Some(p.name) {
                continue;
            }
            let Some(name) = np["name"].as_str().filter(|n| gce_name(n)) else {
                return Err(CloudError::about(
                    CloudErrorKind::Invalid,
                    LIST_NODE_POOLS,
                    &subject,
                    format!(
                        "nodePools[].name of a labelled pool is not a node pool name: {}",
                        short(&np["name"])
                    ),
                ));
            };
            let twin = renamed(pool, name);
            let tp = gke_target(&twin, LIST_NODE_POOLS)?;
            out.push(self.members_of(&twin, &tp, np, &twin.to_string()).await?);
        }
        Ok(out)
    }
}

/// How long a blue-green call waits for its Compute operation to be `DONE`
/// ([`GkeNodePools::compute_done`]).
const COMPUTE_OP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A finished Compute operation's outcome: `Ok` unless it is `DONE` with errors, then the
/// call's error, classified by the operation's codes.
fn compute_op_result(op: &Value, call: &'static str, subject: &str) -> Result<(), CloudError> {
    let errors = op["error"]["errors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if op["status"] != "DONE" || errors.is_empty() {
        return Ok(());
    }
    let codes: Vec<&str> = errors.iter().filter_map(|e| e["code"].as_str()).collect();
    let status = op["httpErrorStatusCode"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok());
    let message = errors
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["code"].as_str().unwrap_or("ERROR"),
                e["message"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(CloudError::about(
        classify_operation(&codes, status),
        call,
        subject,
        message,
    ))
}

/// A container v1 operation that ended in an error, as a classified error of `call`.
pub fn container_op_error(op: &Value, call: &'static str, subject: &str) -> Option<CloudError> {
    let e = &op["error"];
    if op["status"] != "DONE" || e.is_null() {
        return None;
    }
    Some(CloudError::about(
        classify_container_operation(e["code"].as_i64()),
        call,
        subject,
        format!(
            "{} {}: {}",
            op["operationType"].as_str().unwrap_or("operation"),
            op["name"].as_str().unwrap_or_default(),
            e["message"].as_str().unwrap_or("failed")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str) -> ManagedGroup {
        ManagedGroup::GkeNodePool {
            project: "acme".into(),
            location: "europe-west1".into(),
            gke_cluster: "prod".into(),
            node_pool: name.into(),
        }
    }

    fn req(image: &str) -> TwinRequest {
        TwinRequest {
            from: pool("general"),
            twin: pool("general-rota-2026-11-2"),
            image: image.into(),
            desired: 0,
            max: 6,
        }
    }

    fn old() -> Value {
        json!({
            "name": "general", "version": "1.31.4-gke.1183000", "status": "RUNNING",
            "initialNodeCount": 3, "locations": ["europe-west1-b", "europe-west1-c"],
            "selfLink": "https://container.googleapis.com/v1/projects/acme/locations/europe-west1/clusters/prod/nodePools/general",
            "instanceGroupUrls": ["https://www.googleapis.com/compute/v1/projects/acme/zones/europe-west1-b/instanceGroupManagers/gke-prod-general-1-grp"],
            "etag": "abc", "podIpv4CidrSize": 24,
            "autoscaling": {"enabled": true, "minNodeCount": 1, "maxNodeCount": 5},
            "management": {"autoRepair": true, "autoUpgrade": false, "upgradeOptions": {"description": "x"}},
            "networkConfig": {"podRange": "pods", "podIpv4CidrBlock": "10.4.0.0/14", "podIpv4RangeUtilization": 0.1},
            "config": {"machineType": "e2-standard-4", "imageType": "COS_CONTAINERD",
                "effectiveCgroupMode": "EFFECTIVE_CGROUP_MODE_V2",
                "labels": {"workload": "general"},
                "taints": [{"key": "dedicated", "value": "general", "effect": "NO_SCHEDULE"}],
                "resourceLabels": {"team": "payments", TOKEN_LABEL: "rota-1-a"}},
        })
    }

    /// The twin is the old pool in its shape on the version form's node version and image
    /// type, no node, labelled as rota's twin; nothing read-only, no autoscaling, no token.
    #[test]
    fn the_twin_is_the_old_pool_on_the_new_version_without_read_only_fields() {
        let body = create_request(&old(), &req("1.31.5-gke.1023000/UBUNTU_CONTAINERD")).unwrap();
        let np = &body["nodePool"];
        assert_eq!(np["name"], "general-rota-2026-11-2");
        assert_eq!(np["version"], "1.31.5-gke.1023000");
        assert_eq!(np["initialNodeCount"], 0);
        assert_eq!(np["config"]["imageType"], "UBUNTU_CONTAINERD");
        assert_eq!(np["config"]["machineType"], "e2-standard-4");
        assert_eq!(np["config"]["taints"][0]["key"], "dedicated");
        assert_eq!(np["locations"], json!(["europe-west1-b", "europe-west1-c"]));
        assert_eq!(
            np["config"]["resourceLabels"],
            json!({"team": "payments", TWIN_OF_LABEL: "general"})
        );
        for gone in [
            &np["etag"],
            &np["selfLink"],
            &np["status"],
            &np["instanceGroupUrls"],
            &np["podIpv4CidrSize"],
            &np["autoscaling"],
            &np["config"]["effectiveCgroupMode"],
            &np["management"]["upgradeOptions"],
            &np["networkConfig"]["podIpv4RangeUtilization"],
            &np["networkConfig"]["podIpv4CidrBlock"],
        ] {
            assert!(gone.is_null(), "{body}");
        }
        assert_eq!(np["networkConfig"]["podRange"], "pods");
        assert_eq!(np["management"]["autoRepair"], true);
        // An image type alone keeps the old pool's node version.
        let same = create_request(&old(), &req("UBUNTU_CONTAINERD")).unwrap();
        assert_eq!(same["nodePool"]["version"], "1.31.4-gke.1183000");
        let custom = create_request(&old(), &req("projects/acme/global/images/node-7"));
        assert!(custom.unwrap_err().contains("node-7"));
        let mut plain = old();
        plain.as_object_mut().unwrap().remove("networkConfig");
        let body = create_request(&plain, &req("UBUNTU_CONTAINERD")).unwrap();
        assert!(body["nodePool"].get("networkConfig").is_none(), "{body}");
        let broken = create_request(&json!([1]), &req("UBUNTU_CONTAINERD"));
        assert!(broken.unwrap_err().contains(GET_NODE_POOL));
    }

    #[test]
    fn statuses_map_to_rotas_and_keep_gkes_message() {
        let s = |st: &str| pool_status(&json!({"status": st, "statusMessage": "quota"}));
        assert_eq!(s("PROVISIONING").0, PoolStatus::Creating);
        assert_eq!(s("RUNNING").0, PoolStatus::Active);
        assert_eq!(s("RUNNING_WITH_ERROR").0, PoolStatus::Active);
        assert_eq!(s("RECONCILING").0, PoolStatus::Updating);
        assert_eq!(s("STOPPING").0, PoolStatus::Deleting);
        assert_eq!(
            s("ERROR"),
            (PoolStatus::Failed, vec!["ERROR: quota".to_string()])
        );
    }

    /// A managed instance is read into the instance its node registers as; an entry naming
    /// anything but a zone's instance is refused, naming the field.
    #[test]
    fn managed_instances_become_instances_and_hostile_ones_are_refused() {
        let mi = json!({"instance": "https://www.googleapis.com/compute/v1/projects/acme/zones/europe-west1-b/instances/gke-prod-general-1-abcd",
            "currentAction": "NONE", "instanceStatus": "RUNNING"});
        let i = managed_instance(&mi, "acme", "1.31.4-gke.1183000/COS_CONTAINERD").unwrap();
        assert_eq!(i.id, "gke-prod-general-1-abcd");
        assert_eq!(
            i.provider_id,
            "gce://acme/europe-west1-b/gke-prod-general-1-abcd"
        );
        assert_eq!(i.lifecycle, Lifecycle::InService);
        let failing = json!({"instance": "https://www.googleapis.com/compute/v1/projects/acme/zones/z-a/instances/n-1",
            "currentAction": "CREATING", "lastAttempt": {"errors": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no e2 left"}]}}});
        let i = managed_instance(&failing, "acme", "x").unwrap();
        assert_eq!(i.lifecycle, Lifecycle::Pending);
        assert_eq!(i.launch_error.unwrap().kind, CloudErrorKind::Quota);
        for bad in [
            json!({}),
            json!({"instance": "https://www.googleapis.com/compute/v1/projects/acme/zones/z/instances/../../x"}),
            json!({"instance": "https://www.googleapis.com/compute/v1/projects/acme/zones/z/instances/N_UPPER"}),
            json!({"instance": "https://www.googleapis.com/compute/v1/projects/acme/global/images/i"}),
        ] {
            let e = managed_instance(&bad, "acme", "x").unwrap_err();
            assert!(e.contains("managedInstances[].instance"), "{e}");
        }
    }

    #[test]
    fn a_total_is_spread_over_the_groups_as_evenly_as_it_goes() {
        assert_eq!(spread(4, 3), vec![2, 1, 1]);
        assert_eq!(spread(1, 3), vec![1, 0, 0]);
        assert_eq!(spread(6, 3), vec![2, 2, 2]);
        assert_eq!(spread(0, 2), vec![0, 0]);
        assert_eq!(spread(5, 1), vec![5]);
    }

    #[test]
    fn operations_that_failed_are_classified_errors_naming_the_call() {
        let op = json!({"name": "operation-1", "status": "DONE", "operationType": "CREATE_NODE_POOL",
            "error": {"code": 8, "message": "Insufficient regional quota to satisfy request: resource \"CPUS\""}});
        let e = container_op_error(&op, CREATE_NODE_POOL, "p").unwrap();
        assert_eq!(e.kind, CloudErrorKind::Quota);
        assert!(
            e.message.contains("CPUS") && e.call == CREATE_NODE_POOL,
            "{e}"
        );
        assert!(container_op_error(&json!({"status": "RUNNING"}), CREATE_NODE_POOL, "p").is_none());
        let del = json!({"status": "DONE", "httpErrorStatusCode": 400,
            "error": {"errors": [{"code": "RESOURCE_NOT_READY", "message": "busy"}]}});
        let e = compute_op_result(&del, DELETE_INSTANCES, "p").unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Transient);
        assert!(compute_op_result(&json!({"status": "PENDING"}), DELETE_INSTANCES, "p").is_ok());
    }
}
