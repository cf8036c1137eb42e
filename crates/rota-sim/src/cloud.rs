//! The simulated cloud: node groups whose instances boot, run and terminate on tokio time.
//!
//! [`SimCloud`] implements [`NodeGroups`] exactly as its contracts say, and is the reference
//! implementation the conformance suite (`tests/peers/cloud_conformance.rs`) is written against. One
//! `SimCloud` stands for one cloud account and may hold groups of any of the three clouds;
//! instance IDs and providerIDs follow the real format of the group's cloud.
//!
//! How it moves: the API calls only change intent (desired capacity, template image, marking
//! an instance terminating). [`SimCloud::run`] is the cloud's own control loop: it launches
//! instances until a group holds its desired capacity (each boots for a time drawn from the
//! fault profile's boot distribution), moves booted instances in service, replaces instances
//! that fail to boot, scales in surplus instances and forgets terminated ones after their
//! shutdown time. Everything random (IDs, boot times, faults) comes from one ChaCha generator
//! seeded by the scenario, so the same seed and the same calls give the same story.
//!
//! Observers (the simulated kubelet) see instances through [`InstanceObserver`], which skips
//! API fault injection (a kubelet is not a client of the cloud API) and can wake on change.
//!
//! Where things are: this file is the control loop ([`SimCloud::step`]) and the
//! `NodeGroups` implementation; the account's data (groups, instances, the state behind
//! the lock, the `SimCloud` handle and its one way in, `call`) is in `cloud/account.rs`, what
//! each owner keeps beside a group in `cloud/owner_state.rs`, and each owner's API in its
//! own file (`eks`, `gke`, `aks`, `twins`, `service_drain`).

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::Instant;

use super::faults::Call;

mod account;
mod aks;
mod aks_twins;
mod eks;
mod gke;
mod gke_twins;
mod owner_state;
mod service_drain;
mod surge;
mod twins;
use super::images::SimImage;
use account::SimGroup;
pub use account::{CloudEvent, Exchange, GroupSpec, Ran, SimCloud};
pub use aks::Aks;
pub use gke::Gke;
use owner_state::{AgentPool, Life, NodePool, Nodegroup, PoolLife};
use rota_core::cloud::{
    Arch, CloudError, CloudErrorKind, FoundImage, GroupRef, GroupState, ImageCheck, ImageQuery,
    Lifecycle, NodeGroups,
};
use rota_core::fleet::owner::ManagedGroup;

impl SimCloud {
    /// Create a group. Errors if it already exists or its bounds are inconsistent.
    pub fn create_group(&self, spec: GroupSpec) -> Result<(), CloudError> {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap();
        let g = &spec.group;
        // Every owner is simulated: EKS node groups, GKE node pools and AKS agent pools
        // (`eks`, `gke`, `aks`), and Karpenter's instances are a group only the simulated
        // Karpenter sizes (`crate::karpenter`).
        if inner.groups.contains_key(g) {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                "CreateGroup",
                g,
                "group already exists",
            ));
        }
        if spec.min > spec.desired || spec.desired > spec.max {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                "CreateGroup",
                g,
                format!(
                    "need min <= desired <= max, got {} <= {} <= {}",
                    spec.min, spec.desired, spec.max
                ),
            ));
        }
        let zones = if spec.zones.is_empty() {
            default_zones(g)
        } else {
            spec.zones.clone()
        };
        let mut group = SimGroup {
            desired: spec.desired,
            min: spec.min,
            max: spec.max,
            template_image: spec.image.clone(),
            zones,
            instances: Vec::new(),
            next_zone: 0,
            next_ordinal: 0,
            launch_blocked_until: None,
            eks: matches!(g, GroupRef::Managed(ManagedGroup::EksNodegroup { .. }))
                .then(|| Nodegroup::new(spec.desired)),
            gke: matches!(g, GroupRef::Managed(ManagedGroup::GkeNodePool { .. }))
                .then(|| NodePool::new(spec.desired)),
            aks: matches!(g, GroupRef::Managed(ManagedGroup::AksAgentPool { .. }))
                .then(|| AgentPool::new(spec.desired, &spec.image)),
            life: matches!(
                g,
                GroupRef::Managed(
                    ManagedGroup::GkeNodePool { .. } | ManagedGroup::AksAgentPool { .. }
                )
            )
            .then(PoolLife::active),
            service: Default::default(),
            spec,
        };
        if group.spec.prebooted {
            // A fleet that exists before the simulation starts: no boot, no faults.
            inner.record_events = false;
            for _ in 0..group.desired {
                let inst = inner.new_instance(&mut group, now);
                let mut inst = inst;
                inst.public.lifecycle = Lifecycle::InService;
                inst.boot_fails = false;
                inner.ran.push(Ran {
                    group: group.spec.group.name().to_string(),
                    instance: inst.public.id.clone(),
                    image: inst.public.image.clone(),
                });
                group.instances.push(inst);
            }
            inner.record_events = true;
        }
        inner.groups.insert(group.spec.group.clone(), group);
        inner.snapshot(now);
        drop(inner);
        self.changed();
        Ok(())
    }

    /// From now on, every update of a GKE node pool or an AKS agent pool to `image` fails:
    /// its nodes never join (a broken node image).
    pub fn fail_owner_updates_to(&self, image: &str) {
        self.inner
            .lock()
            .unwrap()
            .failing_updates
            .insert(image.to_string());
        self.changed();
    }

    /// The managed owners' API exchanges so far (GKE's and AKS's JSON), oldest first.
    pub fn owner_exchanges(&self) -> Vec<Exchange> {
        self.inner.lock().unwrap().exchanges.clone()
    }

    /// The owners' APIs this cloud serves, one adapter each (EKS, GKE, AKS): what an agent
    /// of the simulated fleet drives its managed pools through.
    pub fn owners(&self) -> Vec<std::sync::Arc<dyn rota_core::cloud::managed::OwnerPools>> {
        vec![
            std::sync::Arc::new(self.clone()),
            std::sync::Arc::new(self.gke()),
            std::sync::Arc::new(self.aks()),
        ]
    }

    /// Publish an image (or change one: its state, its regions); launches waiting on it go on.
    pub fn publish_image(&self, image: SimImage) {
        let mut inner = self.inner.lock().unwrap();
        inner.images.publish(image);
        for g in inner.groups.values_mut() {
            g.launch_blocked_until = None;
        }
        drop(inner);
        self.changed();
    }

    /// Set an SSM parameter in `region` (what an `ssmParameter` image source reads).
    pub fn set_parameter(&self, region: &str, name: &str, value: &str) {
        self.inner
            .lock()
            .unwrap()
            .images
            .set_parameter(region, name, value);
    }

    /// Refuse to launch images that were not published (see `crate::images`).
    pub fn require_published_images(&self, on: bool) {
        self.inner.lock().unwrap().images.require_published = on;
    }

    /// Every group's reference, in a stable order.
    pub fn groups(&self) -> Vec<GroupRef> {
        self.inner.lock().unwrap().groups.keys().cloned().collect()
    }

    /// The cloud's events since the last call (oldest first).
    /// Every instance that came in service so far, with its image, in order.
    pub fn ran(&self) -> Vec<Ran> {
        self.inner.lock().unwrap().ran.clone()
    }

    pub fn take_events(&self) -> Vec<CloudEvent> {
        std::mem::take(&mut self.inner.lock().unwrap().events)
    }

    /// Add a scripted fault at run time (tests, the demo's fault buttons).
    pub fn inject(&self, fault: super::faults::ScriptedFault) {
        let mut inner = self.inner.lock().unwrap();
        inner.scripted_left.push(fault.times);
        inner.faults.scripted.push(fault);
    }

    /// An observer that sees this cloud's instances without API faults.
    pub fn observer(&self) -> Arc<dyn InstanceObserver> {
        Arc::new(SimObserver(self.clone()))
    }

    /// One pass of the cloud's control loop at `now`; returns when it next has work to do.
    ///
    /// Order within a group: finish shutdowns, finish boots (in service or failed), then
    /// compare live instances with desired capacity: launch the missing ones or terminate the
    /// surplus (stale image first, then oldest, as clouds' default termination policies do).
    pub fn step(&self, now: Instant) -> Option<Instant> {
        // The services' drains first (they call the clusters' API servers, outside the
        // lock): a node drained now is terminated, and replaced, in this pass.
        let mut next = self.service_drains(now);
        let mut inner = self.inner.lock().unwrap();
        let mut changed = false;
        let refs: Vec<GroupRef> = inner.groups.keys().cloned().collect();
        for r in refs {
            let mut group = inner.groups.remove(&r).expect("group listed");
            changed |= inner.step_group(&mut group, now);
            // An EKS update moves the node group on (surge, terminate) once the group has
            // acted on what is due; what it asks for is launched in the same pass.
            if eks::step(&mut inner, &mut group)
                || gke::step(&mut inner, &mut group)
                || aks::step(&mut inner, &mut group)
            {
                changed = true;
                inner.step_group(&mut group, now);
            }
            // A node group EKS finished deleting is gone; one being created or deleted
            // wakes the loop when that is due.
            let life = match eks::lifecycle(&mut group, now) {
                Life::Steady => twins::lifecycle(&mut group, now),
                other => other,
            };
            match life {
                Life::Gone => {
                    changed = true;
                    continue;
                }
                Life::Changed => changed = true,
                Life::Due(at) => next = Some(next.map_or(at, |n| n.min(at))),
                Life::Steady => {}
            }
            // A node the service drains (or must taint) is looked at again next round.
            if service_drain::pending(&group) {
                let at = now + inner.scale(service_drain::ROUND);
                next = Some(next.map_or(at, |n| n.min(at)));
            }
            for i in &group.instances {
                if i.public.lifecycle != Lifecycle::InService {
                    next = Some(next.map_or(i.due, |n| n.min(i.due)));
                }
            }
            if group.live() < group.desired as usize
                && let Some(t) = group.launch_blocked_until
            {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
            inner.groups.insert(r, group);
        }
        if changed {
            inner.snapshot(now);
        }
        drop(inner);
        if changed {
            self.changed();
        }
        next
    }

    /// The cloud's control loop: runs [`SimCloud::step`] whenever something is due or an API
    /// call changed intent. Runs until the task is dropped.
    pub async fn run(self) {
        loop {
            let notified = self.wake.notified();
            let next = self.step(Instant::now());
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Spawn [`SimCloud::run`] on the current runtime.
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.clone().run())
    }
}

fn default_zones(group: &GroupRef) -> Vec<String> {
    match group {
        GroupRef::Aws { region, .. } => ["a", "b", "c"]
            .iter()
            .map(|s| format!("{region}{s}"))
            .collect(),
        GroupRef::Gcp {
            zone: Some(zone), ..
        } => vec![zone.clone()],
        GroupRef::Gcp { region, .. } => {
            let region = region.as_deref().unwrap_or("us-central1");
            ["a", "b", "c"]
                .iter()
                .map(|s| format!("{region}-{s}"))
                .collect()
        }
        // AKS node resource groups are `MC_<group>_<cluster>_<region>`: zones then read as
        // AKS labels them (`westeurope-1`); otherwise bare zone numbers.
        GroupRef::Azure { resource_group, .. } => {
            let region = resource_group
                .strip_prefix("MC_")
                .and_then(|r| r.rsplit_once('_'))
                .map(|(_, region)| region.to_ascii_lowercase());
            (1..=3)
                .map(|n| match &region {
                    Some(r) => format!("{r}-{n}"),
                    None => n.to_string(),
                })
                .collect()
        }
        GroupRef::Managed(m) => vec![m.region().unwrap_or("zone").to_string()],
    }
}

#[async_trait]
impl NodeGroups for SimCloud {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        self.call(Call::Describe, group, |inner, now| {
            Ok((inner.described(group, now), false))
        })
    }

    async fn find_image(&self, query: &ImageQuery) -> Result<FoundImage, CloudError> {
        let inner = self.inner.lock().unwrap();
        inner
            .images
            .find(query)
            .map_err(|(kind, message)| CloudError::query(kind, "FindImage", query, message))
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: Arch,
    ) -> Result<ImageCheck, CloudError> {
        let inner = self.inner.lock().unwrap();
        if !inner.groups.contains_key(group) {
            return Err(CloudError::new(
                CloudErrorKind::NotFound,
                "CheckImage",
                group,
                "no such group",
            ));
        }
        Ok(inner.images.check(group, image, arch))
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        if image.trim().is_empty() {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                Call::SetImage.api_name(),
                group,
                "image is empty",
            ));
        }
        self.call(Call::SetImage, group, |inner, _| {
            let g = inner.groups.get_mut(group).expect("checked");
            let changed = g.template_image != image;
            g.template_image = image.to_string();
            Ok(((), changed))
        })
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        let api = Call::SetCapacity.api_name();
        self.call(Call::SetCapacity, group, |inner, _| {
            let g = &inner.groups[group];
            let new_max = max.unwrap_or(g.max);
            if desired > new_max {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    api,
                    group,
                    format!("desired capacity {desired} is above the maximum size {new_max}"),
                ));
            }
            if desired < g.min || new_max < g.min {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    api,
                    group,
                    format!("desired capacity {desired} is below the minimum size {}", g.min),
                ));
            }
            if let Some(limit) = inner.faults.quota.instances {
                let others: u32 = inner
                    .groups
                    .iter()
                    .filter(|(r, _)| *r != group)
                    .map(|(_, g)| g.desired)
                    .sum();
                if others + desired > limit {
                    return Err(CloudError::new(
                        CloudErrorKind::Quota,
                        api,
                        group,
                        format!(
                            "instance quota of {limit} exceeded: {others} elsewhere + {desired} requested"
                        ),
                    ));
                }
            }
            let g = inner.groups.get_mut(group).expect("checked");
            let changed = g.desired != desired || g.max != new_max;
            let from = g.desired;
            g.desired = desired;
            g.max = new_max;
            if from != desired {
                inner.record(CloudEvent::Capacity {
                    group: group.name().to_string(),
                    from,
                    to: desired,
                });
            }
            Ok(((), changed))
        })
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        let api = Call::SetCapacity.api_name();
        self.call(Call::SetCapacity, group, |inner, _| {
            let g = inner.groups.get_mut(group).expect("checked");
            let max = max.max(g.desired);
            if max < g.min {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    api,
                    group,
                    format!("maximum size {max} is below the minimum size {}", g.min),
                ));
            }
            let changed = g.max != max;
            g.max = max;
            Ok(((), changed))
        })
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        let api = Call::Terminate.api_name();
        self.call(Call::Terminate, group, |inner, now| {
            let g = &inner.groups[group];
            let live = g
                .instances
                .iter()
                .position(|i| i.public.id == instance_id)
                .filter(|&i| g.instances[i].public.lifecycle != Lifecycle::Terminating);
            // As AWS answers a decrement below the minimum size: refused, nothing changes.
            if live.is_some() && decrement && g.desired <= g.min {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    api,
                    group,
                    format!(
                        "decrementing desired capacity {} would go below the minimum size {}",
                        g.desired, g.min
                    ),
                ));
            }
            let mut g = inner.groups.remove(group).expect("checked");
            let mut changed = false;
            if let Some(i) = live {
                let mut inst = g.instances[i].clone();
                inner.begin_termination(&g, &mut inst, now);
                g.instances[i] = inst;
                if decrement {
                    g.desired -= 1;
                    inner.record(CloudEvent::Capacity {
                        group: group.name().to_string(),
                        from: g.desired + 1,
                        to: g.desired,
                    });
                }
                changed = true;
            }
            inner.groups.insert(group.clone(), g);
            Ok(((), changed))
        })
    }
}

/// How a kubelet (or anything else not a client of the cloud API) sees a group's instances.
#[async_trait]
pub trait InstanceObserver: Send + Sync {
    async fn observe(&self, group: &GroupRef) -> Result<GroupState, CloudError>;

    /// A channel that changes whenever instances may have changed; `None`: poll.
    fn changes(&self) -> Option<watch::Receiver<u64>>;

    /// Groups created from `group` since (an EKS node group's blue-green twins), whose
    /// nodes carry the same labels.
    fn derived(&self, group: &GroupRef) -> Vec<GroupRef> {
        let _ = group;
        Vec::new()
    }

    /// Why the pod network fails on nodes of `image` (a bad build the cloud published,
    /// [`super::images::SimImage::defect`]); `None`: a good image, or a provider that does
    /// not know.
    fn defect(&self, image: &str) -> Option<String> {
        let _ = image;
        None
    }
}

struct SimObserver(SimCloud);

#[async_trait]
impl InstanceObserver for SimObserver {
    fn derived(&self, group: &GroupRef) -> Vec<GroupRef> {
        SimCloud::twins_of(&self.0.inner.lock().unwrap(), group)
    }

    fn defect(&self, image: &str) -> Option<String> {
        self.0.inner.lock().unwrap().images.defect(image)
    }

    async fn observe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        let inner = self.0.inner.lock().unwrap();
        inner.groups.get(group).map(SimGroup::state).ok_or_else(|| {
            CloudError::new(
                CloudErrorKind::NotFound,
                Call::Describe.api_name(),
                group,
                "no such group",
            )
        })
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.0.generation.subscribe())
    }
}

/// Observe any [`NodeGroups`] provider by polling `describe` (its faults included: an observer
/// that fails simply tries again on its next poll).
pub struct PollingObserver<G: ?Sized>(pub Arc<G>);

#[async_trait]
impl<G: NodeGroups + ?Sized> InstanceObserver for PollingObserver<G> {
    async fn observe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        self.0.describe(group).await
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::faults::FaultProfile;
    use crate::faults::{ScriptedError, ScriptedFault};
    use rota_core::cloud::provider_id;

    fn asg(name: &str) -> GroupRef {
        GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: name.into(),
        }
    }

    async fn settle(cloud: &SimCloud, secs: u64) {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let next = cloud.step(Instant::now());
            match next {
                Some(t) if t <= end => tokio::time::sleep_until(t).await,
                _ => break,
            }
        }
        tokio::time::sleep_until(end).await;
        cloud.step(Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn launches_to_desired_and_boots_within_the_default_distribution() {
        let cloud = SimCloud::new(7, FaultProfile::default(), 1.0);
        let g = asg("general");
        cloud
            .create_group(GroupSpec::new(g.clone(), 0, "ami-1").with_max(5))
            .unwrap();
        cloud.set_capacity(&g, 3, None).await.unwrap();
        cloud.step(Instant::now());
        let s = cloud.describe(&g).await.unwrap();
        assert_eq!(s.instances.len(), 3);
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::Pending)
        );
        settle(&cloud, 59).await;
        assert!(
            cloud
                .describe(&g)
                .await
                .unwrap()
                .instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::Pending),
            "nothing boots in under 60 s"
        );
        settle(&cloud, 62).await;
        let s = cloud.describe(&g).await.unwrap();
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::InService)
        );
        for i in &s.instances {
            assert!(i.id.starts_with("i-0") && i.id.len() == 19, "{}", i.id);
            assert_eq!(i.provider_id, format!("aws:///{}/{}", i.zone, i.id));
            assert_eq!(i.image, "ami-1");
        }
        let zones: std::collections::BTreeSet<_> =
            s.instances.iter().map(|i| i.zone.as_str()).collect();
        assert_eq!(zones.len(), 3, "spread over three zones");
    }

    #[tokio::test(start_paused = true)]
    async fn set_max_never_writes_the_desired_capacity_back() {
        // The rotation restores the maximum after a concurrent scale-down it has not seen
        // yet (describes lag): the desired capacity the other writer set must stay.
        let cloud = SimCloud::new(3, FaultProfile::default(), 1.0);
        let g = asg("g");
        cloud
            .create_group(GroupSpec::new(g.clone(), 3, "ami-1").with_max(6))
            .unwrap();
        cloud.set_capacity(&g, 5, None).await.unwrap();
        cloud.set_max(&g, 4).await.unwrap();
        let s = cloud.describe(&g).await.unwrap();
        assert_eq!(
            (s.desired, s.max),
            (5, 5),
            "never below the desired capacity"
        );
        cloud.set_capacity(&g, 2, None).await.unwrap();
        cloud.set_max(&g, 4).await.unwrap();
        let s = cloud.describe(&g).await.unwrap();
        assert_eq!(
            (s.desired, s.max),
            (2, 4),
            "the desired capacity is left as it is"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failed_boots_are_replaced_and_seeds_repeat() {
        let story = |seed| async move {
            let mut faults = FaultProfile::default();
            faults.boot.failure_rate = 0.5;
            let cloud = SimCloud::new(seed, faults, 1.0);
            let g = asg("g");
            cloud
                .create_group(GroupSpec::new(g.clone(), 4, "ami-1"))
                .unwrap();
            settle(&cloud, 900).await;
            let s = cloud.describe(&g).await.unwrap();
            assert_eq!(s.instances.len(), 4);
            assert!(
                s.instances
                    .iter()
                    .all(|i| i.lifecycle == Lifecycle::InService)
            );
            cloud.take_events()
        };
        let a = story(11).await;
        let b = story(11).await;
        let c = story(12).await;
        assert!(a.iter().any(|e| matches!(e, CloudEvent::BootFailed { .. })));
        assert_eq!(a, b, "same seed, same story");
        assert_ne!(a, c, "another seed, another story");
    }

    #[tokio::test(start_paused = true)]
    async fn scale_in_prefers_stale_images_then_oldest() {
        let cloud = SimCloud::new(1, FaultProfile::default(), 1.0);
        let g = asg("g");
        cloud
            .create_group(
                GroupSpec::new(g.clone(), 2, "ami-old")
                    .prebooted()
                    .with_max(4),
            )
            .unwrap();
        cloud.set_image(&g, "ami-new").await.unwrap();
        cloud.set_capacity(&g, 4, None).await.unwrap();
        settle(&cloud, 200).await;
        cloud.set_capacity(&g, 2, None).await.unwrap();
        settle(&cloud, 60).await;
        let s = cloud.describe(&g).await.unwrap();
        assert_eq!(s.instances.len(), 2);
        assert!(s.instances.iter().all(|i| i.image == "ami-new"));
    }

    #[tokio::test(start_paused = true)]
    async fn capacity_errors_delay_launches_and_quota_refuses_capacity() {
        let mut faults = FaultProfile::default();
        faults.launch.capacity_error_rate = 1.0;
        faults.quota.instances = Some(5);
        let cloud = SimCloud::new(3, faults, 1.0);
        let g = asg("g");
        cloud
            .create_group(GroupSpec::new(g.clone(), 0, "ami").with_max(10))
            .unwrap();
        let e = cloud.set_capacity(&g, 6, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota);
        cloud.set_capacity(&g, 5, None).await.unwrap();
        settle(&cloud, 300).await;
        assert!(cloud.describe(&g).await.unwrap().instances.is_empty());
        assert!(cloud.take_events().iter().all(|e| matches!(
            e,
            CloudEvent::LaunchFailed { .. } | CloudEvent::Capacity { .. }
        )));
    }

    #[tokio::test(start_paused = true)]
    async fn scripted_faults_hit_exactly_the_named_calls() {
        let mut faults = FaultProfile::default();
        faults.scripted.push(ScriptedFault {
            call: Call::SetCapacity,
            group: Some("g".into()),
            error: ScriptedError::Throttled,
            times: 2,
        });
        let cloud = SimCloud::new(3, faults, 1.0);
        let (g, h) = (asg("g"), asg("h"));
        for r in [&g, &h] {
            cloud
                .create_group(GroupSpec::new(r.clone(), 1, "ami"))
                .unwrap();
        }
        cloud.set_capacity(&h, 1, None).await.unwrap();
        for _ in 0..2 {
            let e = cloud.set_capacity(&g, 1, None).await.unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Throttled);
            assert_eq!(e.call, "SetDesiredCapacity");
        }
        cloud.set_capacity(&g, 1, None).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn speed_divides_boot_time() {
        let cloud = SimCloud::new(5, FaultProfile::default(), 60.0);
        let g = asg("g");
        cloud
            .create_group(GroupSpec::new(g.clone(), 2, "ami"))
            .unwrap();
        settle(&cloud, 2).await;
        let s = cloud.describe(&g).await.unwrap();
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::InService)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_decrement_below_the_minimum_is_refused() {
        let cloud = SimCloud::new(1, FaultProfile::default(), 1.0);
        let g = asg("g");
        let mut spec = GroupSpec::new(g.clone(), 2, "ami").prebooted();
        spec.min = 2;
        cloud.create_group(spec).unwrap();
        let id = cloud.describe(&g).await.unwrap().instances[0].id.clone();
        let e = cloud.terminate(&g, &id, true).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid);
        let s = cloud.describe(&g).await.unwrap();
        assert_eq!(s.desired, 2);
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::InService)
        );
        // Without decrement the cloud replaces it.
        cloud.terminate(&g, &id, false).await.unwrap();
        assert_eq!(cloud.describe(&g).await.unwrap().desired, 2);
    }

    #[test]
    fn aks_zones_carry_the_region_of_the_node_resource_group() {
        let aks = GroupRef::Azure {
            subscription_id: "s".into(),
            resource_group: "MC_prod_prod-weu_westeurope".into(),
            scale_set: "vmss".into(),
        };
        assert_eq!(default_zones(&aks)[0], "westeurope-1");
        let other = GroupRef::Azure {
            subscription_id: "s".into(),
            resource_group: "nodes".into(),
            scale_set: "vmss".into(),
        };
        assert_eq!(default_zones(&other), ["1", "2", "3"]);
    }

    /// An AKS agent pool's VMs as AKS reports them: the scale set `aks-<pool>-<8 digits>-vmss`
    /// in the node resource group, the VM by its ordinal; the node named after both.
    #[tokio::test(start_paused = true)]
    async fn aks_agent_pool_vms_carry_the_provider_ids_aks_reports() {
        let pool = ManagedGroup::AksAgentPool {
            subscription_id: "sub".into(),
            resource_group: "rg-prod".into(),
            aks_cluster: "prod".into(),
            agent_pool: "general".into(),
        };
        let g = GroupRef::Managed(pool.clone());
        let cloud = SimCloud::new(1, FaultProfile::default(), 1.0);
        cloud
            .create_group(GroupSpec::new(g.clone(), 2, "img").prebooted())
            .unwrap();
        let st = cloud.describe(&g).await.unwrap();
        let set = crate::naming::aks_scale_set(&pool).unwrap();
        assert!(
            set.len() == "aks-general-12345678-vmss".len()
                && set.starts_with("aks-general-")
                && set.ends_with("-vmss"),
            "{set}"
        );
        // Known by their computer names (the node's, and the machine name AKS deletes by).
        let ids: Vec<_> = st.instances.iter().map(|i| i.id.clone()).collect();
        assert_eq!(ids, [format!("{set}000000"), format!("{set}000001")]);
        assert_eq!(
            st.instances[1].provider_id,
            format!(
                "azure:///subscriptions/sub/resourceGroups/MC_rg-prod_prod/providers/Microsoft.Compute/virtualMachineScaleSets/{set}/virtualMachines/1"
            )
        );
        let parsed = provider_id::parse(&st.instances[1].provider_id).expect("parses");
        assert_eq!(parsed.instance, "1");
        assert_eq!(
            super::super::kubelet::node_name(&g, &st.instances[1], 0),
            format!("{set}000001")
        );
        // A second pool of the cluster (a blue-green twin) has a scale set of its own: its
        // VMs count from 0 too, and neither their names nor their providerIDs meet the first's.
        let twin = rota_core::cloud::managed::renamed(&pool, "generaxupok6");
        let t = GroupRef::Managed(twin);
        cloud
            .create_group(GroupSpec::new(t.clone(), 2, "img").prebooted())
            .unwrap();
        let twin_st = cloud.describe(&t).await.unwrap();
        for (a, b) in st.instances.iter().zip(&twin_st.instances) {
            assert!(b.id.starts_with("aks-generaxupok6-"), "{b:?}");
            assert_ne!(a.id, b.id);
            assert_ne!(a.provider_id, b.provider_id);
            assert_eq!(
                provider_id::parse(&a.provider_id).unwrap().instance,
                provider_id::parse(&b.provider_id).unwrap().instance
            );
        }
    }

    #[test]
    fn ids_follow_each_clouds_format() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let cloud = SimCloud::new(9, FaultProfile::default(), 1.0);
            let gcp = GroupRef::Gcp {
                project: "acme".into(),
                instance_group_manager: "gke-general".into(),
                zone: Some("us-central1-a".into()),
                region: None,
            };
            let az = GroupRef::Azure {
                subscription_id: "sub".into(),
                resource_group: "MC_rg".into(),
                scale_set: "aks-general-vmss".into(),
            };
            for g in [&gcp, &az] {
                cloud
                    .create_group(GroupSpec::new(g.clone(), 2, "img").prebooted())
                    .unwrap();
            }
            let s = cloud.describe(&gcp).await.unwrap();
            let i = &s.instances[0];
            assert!(i.id.starts_with("gke-general-"));
            assert_eq!(i.provider_id, format!("gce://acme/us-central1-a/{}", i.id));
            let s = cloud.describe(&az).await.unwrap();
            assert_eq!(s.instances[1].id, "1");
            assert_eq!(
                s.instances[1].provider_id,
                "azure:///subscriptions/sub/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-general-vmss/virtualMachines/1"
            );
        });
    }
}
