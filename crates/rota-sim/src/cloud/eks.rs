//! Simulated EKS managed node groups: a group of the simulated cloud whose launch template
//! (the AMI its new instances boot from) only EKS writes, served through the owner's API
//! ([`OwnerPools`]: `DescribeNodegroup`, `UpdateNodegroupVersion`) and rolled the way EKS
//! rolls a node group on a version update:
//!
//! - the update records the new launch template version (the AMI) and `updateConfig`, and
//!   is `InProgress`; a second update while one runs is refused (`ResourceInUseException`),
//!   and a `clientRequestToken` seen before answers the update it started (idempotent);
//! - scale up: the group grows by at most `maxUnavailable` nodes on the new AMI (never more
//!   than the old nodes left), bounded like EKS's surge; with `updateStrategy: MINIMAL`
//!   (rota's `strategy: replace`) there is no scale up: `maxUnavailable` old nodes are
//!   terminated first and the group refills them on the new AMI (`surge.rs`, no surge);
//! - every node not on the new AMI is tainted `eks.amazonaws.com/nodegroup=unschedulable:
//!   NoSchedule` when the update starts;
//! - upgrade: once the new nodes are in service, EKS drains as many old nodes, oldest first
//!   (`service_drain`: their pods evicted through the Eviction API, budgets respected, the
//!   node cordoned once they are gone), terminates each once drained (with decrement), and
//!   the next round starts; a node whose pods do not leave within 15 minutes fails the
//!   update with `PodEvictionFailure`, unless the update was sent with `force` (`drain.onTimeout:
//!   force`): then its pods are deleted and it goes;
//! - when no old node is left the update is `Successful`; when the new AMI cannot boot
//!   (`fail_updates_to`) it is `Failed` with `NodeCreationFailure`, the launch template is
//!   put back on the old AMI and the surge taken back.
//!
//! For `managedUpdate: blueGreen` it also serves `CreateNodegroup` (a twin in the shape of
//! the node group it is made from, tagged `rota.dev/twin-of`, `CREATING` for
//! [`CREATE_TIME`] then `ACTIVE`), `UpdateNodegroupConfig` (`scalingConfig`: the size),
//! `TerminateInstanceInAutoScalingGroup` with decrement on the node group's ASG (the size
//! follows) and `DeleteNodegroup` (`DELETING` for [`DELETE_TIME`], then gone; refused while
//! an update runs, as EKS refuses).
//!
//! A node EKS scales in outside an update (its lifecycle hook) is drained as its instance
//! starts terminating: the kubelets evict its pods through the Eviction API then
//! (`kubelet::evict_pods_on`). Nodes carry EKS's labels
//! (`eks.amazonaws.com/nodegroup`, `eks.amazonaws.com/nodegroup-image`), see `kubelet`.

use async_trait::async_trait;
use rand::Rng;
use tokio::time::Instant;

use super::account::{GroupSpec, Inner, SimCloud, SimGroup};
use super::owner_state::{DrainRule, Life, Nodegroup};
use super::service_drain;
use super::surge::{Roll, Upgrade, roll};
use crate::faults::Call;
use rota_core::cloud::managed::{
    OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, OwnerUpdate, PoolStatus,
    TwinRequest, UpdateRequest, UpdateStatus,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef, Lifecycle};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// How long EKS takes to create a node group (before its first node launches).
pub const CREATE_TIME: std::time::Duration = std::time::Duration::from_secs(120);
/// How long EKS takes to delete an empty node group.
pub const DELETE_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// A node group's own life: `CREATING` becomes `ACTIVE`, `DELETING` becomes gone.
pub(super) fn lifecycle(group: &mut SimGroup, now: Instant) -> Life {
    let Some(ng) = group.eks.as_mut() else {
        return Life::Steady;
    };
    match (ng.status, ng.status_due) {
        (_, Some(due)) if due > now => Life::Due(due),
        (PoolStatus::Creating, Some(_)) => {
            ng.status = PoolStatus::Active;
            ng.status_due = None;
            Life::Changed
        }
        (PoolStatus::Deleting, Some(_)) => Life::Gone,
        _ => Life::Steady,
    }
}

impl SimCloud {
    /// From now on, every EKS update to `image` fails (`NodeCreationFailure`): the AMI
    /// makes nodes that never join, as a broken custom AMI does.
    pub fn fail_eks_updates_to(&self, image: &str) {
        self.inner
            .lock()
            .unwrap()
            .failing_updates
            .insert(image.to_string());
        self.changed();
    }
}

/// One pass of EKS's update of `group`; true if it changed anything.
pub(super) fn step(inner: &mut Inner, group: &mut SimGroup) -> bool {
    let Some(ng) = group.eks.as_mut() else {
        return false;
    };
    let Some(update) = ng.running() else {
        return false;
    };
    let target = update.image.clone();
    let size = ng.size;
    let step = ng.unavailable();
    if inner.failing_updates.contains(&target) {
        return fail(
            group,
            "NodeCreationFailure: Instances failed to join the kubernetes cluster",
        );
    }
    if let Some(why) = service_drain::take_failure(group) {
        return fail_drain(group, &why);
    }
    // EKS taints every node not on the new AMI unschedulable when its update starts.
    for i in 0..group.instances.len() {
        let inst = &group.instances[i].public;
        if inst.image != target && inst.lifecycle == Lifecycle::InService {
            service_drain::taint(group, i);
        }
    }
    if ng_minimal(group) {
        // MINIMAL: up to maxUnavailable old nodes drained and terminated first, the group
        // refilling them on the new AMI, never above its size (the services' shared round,
        // no surge).
        let up = Upgrade {
            size,
            surge: 0,
            unavailable: step,
            drain: eks_drain(group),
        };
        return match roll(group, &target, &up) {
            Roll::Busy => false,
            Roll::Moved => true,
            Roll::Done => {
                if let Some(u) = group.eks.as_mut().and_then(Nodegroup::running) {
                    u.status = UpdateStatus::Successful;
                }
                true
            }
        };
    }
    let live: Vec<usize> = (0..group.instances.len())
        .filter(|&i| group.instances[i].public.lifecycle != Lifecycle::Terminating)
        .collect();
    let old: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| group.instances[i].public.image != target)
        .filter(|&i| !service_drain::is_draining(group, &group.instances[i].public.id))
        .collect();
    let pending = live
        .iter()
        .any(|&i| group.instances[i].public.lifecycle == Lifecycle::Pending);
    let terminating = group.instances.len() > live.len();
    let draining = service_drain::any_draining(group);
    if old.is_empty() && !pending && !draining {
        group.desired = size;
        if let Some(u) = group.eks.as_mut().and_then(Nodegroup::running) {
            u.status = UpdateStatus::Successful;
        }
        return true;
    }
    if pending || terminating || draining {
        return false;
    }
    let surge = step.min(old.len() as u32);
    if group.desired < size + surge && live.len() as u32 == group.desired {
        // Scale up: new nodes first, at most maxUnavailable of them.
        group.desired = size + surge;
        group.max = group.max.max(group.desired);
        return true;
    }
    // Upgrade: the surge is in service; EKS drains as many old nodes, oldest first, and
    // terminates each once drained, the size following (`service_drain`).
    let extra = group.desired.saturating_sub(size) as usize;
    let mut oldest = old;
    oldest.sort_by_key(|&i| group.instances[i].serial);
    let rule = eks_drain(group);
    for &i in oldest.iter().take(extra) {
        service_drain::begin(group, i, size, rule);
    }
    extra > 0
}

/// EKS's drain rule for the running update (forced or not).
fn eks_drain(group: &SimGroup) -> DrainRule {
    DrainRule::eks(group.eks.as_ref().is_some_and(|ng| ng.force))
}

fn ng_minimal(group: &SimGroup) -> bool {
    group.eks.as_ref().is_some_and(|ng| ng.minimal)
}

/// The update fails with `error`: the launch template goes back to the AMI it came from and
/// the surge is taken back (EKS leaves a failed update's node group on its previous launch
/// template version).
fn fail(group: &mut SimGroup, error: &str) -> bool {
    let ng = group.eks.as_mut().expect("an EKS node group");
    let size = ng.size;
    if let Some(prev) = ng.previous_image.take() {
        group.template_image = prev;
    }
    if let Some(u) = ng.running() {
        u.status = UpdateStatus::Failed;
        u.errors = vec![error.to_string()];
    }
    group.desired = size;
    true
}

/// A node's pods did not leave within EKS's 15 minutes (`service_drain`, `why` names the
/// node and a pod) and the update was not forced: it fails with `PodEvictionFailure`, as EKS
/// reports it.
fn fail_drain(group: &mut SimGroup, why: &str) -> bool {
    let name = group.spec.group.name().to_string();
    fail(
        group,
        &format!(
            "PodEvictionFailure: Reached max retries while trying to evict pods from nodes in node group {name} ({why})"
        ),
    )
}

fn eks_group(pool: &ManagedGroup) -> Result<GroupRef, CloudError> {
    match pool {
        ManagedGroup::EksNodegroup { .. } => Ok(GroupRef::Managed(pool.clone())),
        other => Err(CloudError::about(
            CloudErrorKind::Invalid,
            "DescribeNodegroup",
            &other.to_string(),
            format!("{} is not an EKS managed node group", other.name()),
        )),
    }
}

#[async_trait]
impl OwnerPools for SimCloud {
    fn owner(&self) -> Owner {
        Owner::EksNodegroup
    }

    fn capabilities(&self) -> OwnerCapabilities {
        OwnerCapabilities {
            service_update: true,
            max_unavailable: true,
            cancel_update: false,
        }
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let group = eks_group(pool)?;
        self.call(Call::DescribeNodegroup, &group, |inner, _| {
            let g = &inner.groups[&group];
            let ng = g.eks.as_ref().expect("an EKS node group");
            Ok((
                OwnerPoolState {
                    pool: pool.clone(),
                    image: g.template_image.clone(),
                    desired: ng.size,
                    max_unavailable: Some(ng.max_unavailable),
                    update: ng.updates.last().cloned(),
                },
                false,
            ))
        })
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        let group = eks_group(pool)?;
        self.call(Call::UpdateNodegroupVersion, &group, |inner, _| {
            let id = format!("{:08x}-sim-update", inner.rng.random::<u32>());
            let g = inner.groups.get_mut(&group).expect("checked by call");
            let ng = g.eks.as_mut().expect("an EKS node group");
            if let Some(seen) = ng
                .updates
                .iter()
                .find(|u| u.token.as_deref() == Some(req.token.as_str()))
            {
                return Ok((seen.id.clone(), false));
            }
            if let Some(u) = ng.running() {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    "UpdateNodegroupVersion",
                    &group,
                    format!(
                        "ResourceInUseException: the node group has update {} in progress",
                        u.id
                    ),
                ));
            }
            ng.max_unavailable = req.max_unavailable;
            ng.minimal = req.drain_first;
            ng.force = req.force;
            ng.previous_image = Some(g.template_image.clone());
            ng.updates.push(OwnerUpdate {
                id: id.clone(),
                token: Some(req.token.clone()),
                image: req.image.clone(),
                status: UpdateStatus::InProgress,
                errors: Vec::new(),
            });
            // The new launch template version: instances launched from now on boot from it.
            g.template_image = req.image.clone();
            Ok((id, true))
        })
    }

    fn blue_green(&self) -> bool {
        true
    }

    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        self.create_nodegroup(req).await
    }

    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.nodegroup_members(pool)
    }

    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        self.scale_nodegroup(pool, desired, max).await
    }

    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        // TerminateInstanceInAutoScalingGroup with decrement on the node group's own ASG;
        // EKS's desired size follows the ASG's.
        let group = eks_group(pool)?;
        rota_core::cloud::NodeGroups::terminate(self, &group, instance_id, true).await?;
        let mut inner = self.inner.lock().unwrap();
        if let Some(g) = inner.groups.get_mut(&group) {
            let desired = g.desired;
            if let Some(ng) = g.eks.as_mut() {
                ng.size = desired;
            }
        }
        Ok(())
    }

    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        self.delete_nodegroup(pool).await
    }

    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        // ListNodegroups, then each node group's tags (DescribeNodegroup).
        let mut out = Vec::new();
        for twin in self.twin_pools(pool) {
            out.extend(self.nodegroup_members(&twin)?);
        }
        Ok(out)
    }
}

/// `ResourceInUseException`, as EKS names a conflict.
fn in_use(call: &'static str, group: &GroupRef, why: String) -> CloudError {
    CloudError::new(
        CloudErrorKind::Invalid,
        call,
        group,
        format!("ResourceInUseException: {why}"),
    )
}

impl SimCloud {
    /// `CreateNodegroup` of a twin in the shape of `req.from` (its zones); idempotent by
    /// name for rota's own twin of the same node group.
    async fn create_nodegroup(&self, req: &TwinRequest) -> Result<(), CloudError> {
        let from = eks_group(&req.from)?;
        let twin = eks_group(&req.twin)?;
        let zones = self.call(Call::CreateNodegroup, &from, |inner, _| {
            if let Some(g) = inner.groups.get(&twin) {
                let ours =
                    g.eks.as_ref().and_then(|n| n.twin_of.as_deref()) == Some(req.from.name());
                return if ours {
                    Ok((None, false))
                } else {
                    Err(in_use(
                        "CreateNodegroup",
                        &twin,
                        "NodeGroup already exists with name".into(),
                    ))
                };
            }
            Ok((Some(inner.groups[&from].zones.clone()), false))
        })?;
        let Some(zones) = zones else {
            return Ok(());
        };
        let mut spec = GroupSpec::new(twin.clone(), req.desired, req.image.clone())
            .with_max(req.max.max(req.desired).max(1));
        spec.zones = zones;
        self.create_group(spec)?;
        let mut inner = self.inner.lock().unwrap();
        let g = inner.groups.get_mut(&twin).expect("just created");
        let ng = g.eks.as_mut().expect("an EKS node group");
        ng.status = PoolStatus::Creating;
        ng.status_due = Some(Instant::now() + CREATE_TIME);
        ng.twin_of = Some(req.from.name().to_string());
        inner.eks_created.push(req.twin.name().to_string());
        drop(inner);
        self.changed();
        Ok(())
    }

    /// `UpdateNodegroupConfig` with `scalingConfig {desiredSize, maxSize}`.
    async fn scale_nodegroup(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        let group = eks_group(pool)?;
        self.call(Call::UpdateNodegroupConfig, &group, |inner, _| {
            let g = inner.groups.get_mut(&group).expect("checked by call");
            let ng = g.eks.as_mut().expect("an EKS node group");
            if ng.status != PoolStatus::Active || ng.running().is_some() {
                let why = format!("node group is {:?} or updating", ng.status);
                return Err(in_use("UpdateNodegroupConfig", &group, why));
            }
            let changed = (g.desired, g.max) != (desired, max.max(desired));
            ng.size = desired;
            g.desired = desired;
            g.max = max.max(desired);
            Ok(((), changed))
        })
    }

    /// `DeleteNodegroup`: `DELETING`, then gone; a node group already deleting answers Ok.
    async fn delete_nodegroup(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        let group = eks_group(pool)?;
        if !self.inner.lock().unwrap().groups.contains_key(&group) {
            return Ok(());
        }
        self.call(Call::DeleteNodegroup, &group, |inner, now| {
            let g = inner.groups.get_mut(&group).expect("checked by call");
            let ng = g.eks.as_mut().expect("an EKS node group");
            if ng.status == PoolStatus::Deleting {
                return Ok(((), false));
            }
            if ng.running().is_some() {
                return Err(in_use(
                    "DeleteNodegroup",
                    &group,
                    "an update is in progress".into(),
                ));
            }
            ng.status = PoolStatus::Deleting;
            ng.status_due = Some(now + DELETE_TIME);
            // EKS drains and terminates what is left; rota deletes only empty node groups.
            g.desired = 0;
            Ok(((), true))
        })
    }

    fn nodegroup_members(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Option<OwnerPoolMembers>, CloudError> {
        let group = eks_group(pool)?;
        if !self.inner.lock().unwrap().groups.contains_key(&group) {
            return Ok(None);
        }
        self.call(Call::DescribeNodegroup, &group, |inner, _| {
            let g = &inner.groups[&group];
            let ng = g.eks.as_ref().expect("an EKS node group");
            let state = g.state();
            Ok((
                Some(OwnerPoolMembers {
                    pool: pool.clone(),
                    status: ng.status,
                    image: g.template_image.clone(),
                    desired: g.desired,
                    max: g.max,
                    instances: state.instances,
                    issues: Vec::new(),
                    twin_of: ng.twin_of.clone(),
                    os: Default::default(),
                }),
                false,
            ))
        })
    }

    /// The twins rota created from `group`, of any owner (the kubelets serve their nodes with
    /// the same labels, as `CreateNodegroup`, `nodePools.create` and the agent pool's PUT
    /// are given them).
    pub(super) fn twins_of(inner: &Inner, group: &GroupRef) -> Vec<GroupRef> {
        let GroupRef::Managed(from) = group else {
            return Vec::new();
        };
        inner
            .groups
            .iter()
            .filter(|(r, g)| {
                let twin_of = g.eks.as_ref().and_then(|n| n.twin_of.as_deref());
                // GKE's and AKS's twins (`twins`): the same owner's pools only.
                let twin_of =
                    twin_of.or_else(|| g.life.as_ref().and_then(|l| l.twin_of.as_deref()));
                twin_of == Some(from.name())
                    && r.managed().is_some_and(|m| m.owner() == from.owner())
            })
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// The pools of `pool`'s owner and cluster that rota labelled as its twins.
    pub(super) fn twin_pools(&self, pool: &ManagedGroup) -> Vec<ManagedGroup> {
        let inner = self.inner.lock().unwrap();
        SimCloud::twins_of(&inner, &GroupRef::Managed(pool.clone()))
            .into_iter()
            .filter_map(|g| g.managed().cloned())
            .filter(|m| m.cluster() == pool.cluster())
            .collect()
    }

    /// Every node group `CreateNodegroup` created, in order.
    pub fn eks_created(&self) -> Vec<String> {
        self.inner.lock().unwrap().eks_created.clone()
    }

    /// Every update EKS made of `pool`, oldest first (tests: "never a second update").
    pub fn eks_updates(&self, pool: &ManagedGroup) -> Vec<OwnerUpdate> {
        let inner = self.inner.lock().unwrap();
        inner
            .groups
            .get(&GroupRef::Managed(pool.clone()))
            .and_then(|g| g.eks.as_ref())
            .map(|ng| ng.updates.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cloud::GroupSpec;
    use crate::faults::FaultProfile;
    use rota_core::cloud::managed::MaxUnavailable;

    fn ng() -> ManagedGroup {
        ManagedGroup::EksNodegroup {
            region: "us-east-1".into(),
            eks_cluster: "prod".into(),
            nodegroup: "general".into(),
        }
    }

    fn req(token: &str) -> UpdateRequest {
        UpdateRequest {
            image: "ami-new".into(),
            max_unavailable: MaxUnavailable::Count(2),
            token: token.into(),
            drain_timeout_minutes: None,
            node_soak_minutes: None,
            drain_first: false,
            force: false,
        }
    }

    /// Step the cloud every second for `secs`, returning the most instances alive at once.
    async fn run(cloud: &SimCloud, secs: u64) -> usize {
        let mut most = 0;
        for _ in 0..secs {
            cloud.step(Instant::now());
            let g = rota_core::cloud::NodeGroups::describe(cloud, &GroupRef::Managed(ng()))
                .await
                .unwrap();
            let live = g
                .instances
                .iter()
                .filter(|i| i.lifecycle != Lifecycle::Terminating)
                .count();
            most = most.max(live);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        most
    }

    /// One update per token, a second one refused while it runs, the group never above its
    /// size plus maxUnavailable, every instance on the new AMI at the end.
    #[tokio::test(start_paused = true)]
    async fn an_update_rolls_the_group_within_max_unavailable_once_per_token() {
        let cloud = SimCloud::new(3, FaultProfile::default(), 1.0);
        cloud
            .create_group(GroupSpec::new(GroupRef::Managed(ng()), 5, "ami-old").prebooted())
            .unwrap();
        let id = cloud.start_update(&ng(), &req("t1")).await.unwrap();
        assert_eq!(cloud.start_update(&ng(), &req("t1")).await.unwrap(), id);
        let busy = cloud.start_update(&ng(), &req("t2")).await.unwrap_err();
        assert!(busy.message.contains("ResourceInUseException"), "{busy}");
        let most = run(&cloud, 3600).await;
        assert!(most <= 7, "{most} alive at once");
        let st = OwnerPools::describe(&cloud, &ng()).await.unwrap();
        let u = st.update.unwrap();
        assert_eq!((u.id, u.status), (id, UpdateStatus::Successful));
        assert_eq!(st.image, "ami-new");
        let g = rota_core::cloud::NodeGroups::describe(&cloud, &GroupRef::Managed(ng()))
            .await
            .unwrap();
        assert_eq!(g.instances.len(), 5);
        assert!(g.instances.iter().all(|i| i.image == "ami-new"));
        assert_eq!(cloud.eks_updates(&ng()).len(), 1);
    }

    /// An AMI whose nodes never join: the update fails and the launch template goes back.
    #[tokio::test(start_paused = true)]
    async fn a_failing_ami_fails_the_update_and_restores_the_template() {
        let cloud = SimCloud::new(4, FaultProfile::default(), 1.0);
        cloud
            .create_group(GroupSpec::new(GroupRef::Managed(ng()), 3, "ami-old").prebooted())
            .unwrap();
        cloud.fail_eks_updates_to("ami-new");
        cloud.start_update(&ng(), &req("t1")).await.unwrap();
        run(&cloud, 600).await;
        let st = OwnerPools::describe(&cloud, &ng()).await.unwrap();
        let u = st.update.unwrap();
        assert_eq!(u.status, UpdateStatus::Failed);
        assert!(u.errors[0].starts_with("NodeCreationFailure"));
        assert_eq!(st.image, "ami-old");
    }

    /// Step the cloud every second for `secs`, describing nothing.
    async fn tick(cloud: &SimCloud, secs: u64) {
        for _ in 0..secs {
            cloud.step(Instant::now());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn twin() -> ManagedGroup {
        rota_core::cloud::managed::renamed(&ng(), "general-rota-v2")
    }

    fn twin_req() -> TwinRequest {
        TwinRequest {
            from: ng(),
            twin: twin(),
            image: "ami-new".into(),
            desired: 0,
            max: 3,
        }
    }

    /// CreateNodegroup once per name (rota's own twin answers Ok, a foreign one is refused),
    /// CREATING then ACTIVE; sized through scalingConfig; a node removed with decrement;
    /// DeleteNodegroup: DELETING, then gone.
    #[tokio::test(start_paused = true)]
    async fn a_twin_is_created_once_sized_emptied_and_deleted_as_eks_does() {
        let cloud = SimCloud::new(5, FaultProfile::default(), 1.0);
        cloud
            .create_group(GroupSpec::new(GroupRef::Managed(ng()), 3, "ami-old").prebooted())
            .unwrap();
        assert_eq!(cloud.members(&twin()).await.unwrap(), None);
        cloud.create_twin(&twin_req()).await.unwrap();
        cloud.create_twin(&twin_req()).await.unwrap();
        assert_eq!(cloud.eks_created(), vec!["general-rota-v2"]);
        // A node group of the twin's name that is not rota's twin of this one: refused.
        let taken = rota_core::cloud::managed::renamed(&ng(), "taken");
        cloud
            .create_group(GroupSpec::new(GroupRef::Managed(taken.clone()), 0, "ami-x"))
            .unwrap();
        let mut foreign = twin_req();
        foreign.twin = taken;
        let refused = cloud.create_twin(&foreign).await.unwrap_err();
        assert!(
            refused.message.contains("ResourceInUseException"),
            "{refused}"
        );
        let m = cloud.members(&twin()).await.unwrap().unwrap();
        assert_eq!((m.status, m.desired), (PoolStatus::Creating, 0));
        assert_eq!(m.twin_of.as_deref(), Some("general"));
        assert!(
            cloud.set_size(&twin(), 2, 3).await.is_err(),
            "not while CREATING"
        );
        tick(&cloud, 150).await;
        assert_eq!(
            cloud.members(&twin()).await.unwrap().unwrap().status,
            PoolStatus::Active
        );
        cloud.set_size(&twin(), 2, 3).await.unwrap();
        tick(&cloud, 600).await;
        let m = cloud.members(&twin()).await.unwrap().unwrap();
        assert_eq!(m.instances.len(), 2);
        assert!(m.instances.iter().all(|i| i.image == "ami-new"));
        let old = cloud.members(&ng()).await.unwrap().unwrap();
        for i in &old.instances {
            cloud.remove_node(&ng(), &i.id).await.unwrap();
        }
        let old = cloud.members(&ng()).await.unwrap().unwrap();
        assert_eq!(old.desired, 0, "the node group's size follows its ASG's");
        tick(&cloud, 600).await;
        assert!(
            cloud
                .members(&ng())
                .await
                .unwrap()
                .unwrap()
                .instances
                .is_empty()
        );
        cloud.delete_pool(&ng()).await.unwrap();
        cloud.delete_pool(&ng()).await.unwrap();
        let m = cloud.members(&ng()).await.unwrap().unwrap();
        assert_eq!(m.status, PoolStatus::Deleting);
        tick(&cloud, 120).await;
        assert_eq!(cloud.members(&ng()).await.unwrap(), None);
        cloud.delete_pool(&ng()).await.unwrap();
    }
}
