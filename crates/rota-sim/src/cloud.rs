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

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::faults::{Call, FaultProfile};

mod aks;
mod aks_twins;
mod eks;
mod gke;
mod gke_twins;
mod service_drain;
mod surge;
mod twins;
use super::images::{Catalog, SimImage};
use super::naming;
pub use aks::Aks;
pub use gke::Gke;
use rota_core::cloud::{
    Arch, CloudError, CloudErrorKind, FoundImage, GroupRef, GroupState, ImageCheck, ImageQuery,
    Instance, Lifecycle, NodeGroups, provider_id,
};
use rota_core::fleet::owner::ManagedGroup;

/// A group to create in the simulated cloud.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub group: GroupRef,
    pub min: u32,
    pub max: u32,
    pub desired: u32,
    pub image: String,
    /// Zones instances are spread over, round robin. Empty: derived from the group's
    /// location (`<region>a/b/c` for AWS, the zone or `<region>-a/b/c` for GCP, `1/2/3` for
    /// Azure).
    pub zones: Vec<String>,
    /// Start with `desired` instances already in service (a scenario's fleet exists before
    /// time starts) instead of booting them.
    pub prebooted: bool,
}

impl GroupSpec {
    /// A group of `desired` instances on `image`, with min 0 and max `desired` (at least 1).
    pub fn new(group: GroupRef, desired: u32, image: impl Into<String>) -> Self {
        GroupSpec {
            group,
            min: 0,
            max: desired.max(1),
            desired,
            image: image.into(),
            zones: Vec::new(),
            prebooted: false,
        }
    }

    pub fn with_max(mut self, max: u32) -> Self {
        self.max = max;
        self
    }

    pub fn prebooted(mut self) -> Self {
        self.prebooted = true;
        self
    }
}

/// One instance as the cloud tracks it, with the times the control loop acts on.
#[derive(Clone, Debug)]
struct SimInstance {
    public: Instance,
    /// Pending: when boot ends. Terminating: when the instance is gone.
    due: Instant,
    /// Drawn at launch: this boot ends in failure instead of service.
    boot_fails: bool,
    /// Creation order, for scale-in (oldest first among those on a stale image).
    serial: u64,
}

#[derive(Clone, Debug)]
struct SimGroup {
    spec: GroupSpec,
    desired: u32,
    min: u32,
    max: u32,
    template_image: String,
    zones: Vec<String>,
    instances: Vec<SimInstance>,
    next_zone: usize,
    /// Azure VMSS instance IDs count up.
    next_ordinal: u64,
    /// No launch before this instant (after a capacity error).
    launch_blocked_until: Option<Instant>,
    /// An EKS managed node group: its updates and update settings (see [`eks`]).
    eks: Option<eks::Nodegroup>,
    /// A GKE node pool: its operations and upgrade settings (see [`gke`]).
    gke: Option<gke::NodePool>,
    /// An AKS agent pool: its upgrades and upgrade settings (see [`aks`]).
    aks: Option<aks::AgentPool>,
    /// A GKE node pool's or AKS agent pool's own life (creating, active, deleting) and the
    /// pool a blue-green twin was made from (see [`twins`]).
    life: Option<twins::PoolLife>,
    /// The nodes the group's service drains before its update terminates them (see
    /// [`service_drain`]).
    service: service_drain::ServiceDrains,
}

impl SimGroup {
    /// Instances that count towards the desired capacity (all but terminating ones).
    fn live(&self) -> usize {
        self.instances
            .iter()
            .filter(|i| i.public.lifecycle != Lifecycle::Terminating)
            .count()
    }

    fn state(&self) -> GroupState {
        GroupState {
            group: self.spec.group.clone(),
            desired: self.desired,
            min: self.min,
            max: self.max,
            template_image: self.template_image.clone(),
            instances: self.instances.iter().map(|i| i.public.clone()).collect(),
        }
    }
}

/// What happened in the cloud, for tests, logs and the demo: one line per event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloudEvent {
    Launched {
        group: String,
        instance: String,
    },
    InService {
        group: String,
        instance: String,
    },
    BootFailed {
        group: String,
        instance: String,
    },
    LaunchFailed {
        group: String,
        reason: String,
    },
    Terminating {
        group: String,
        instance: String,
    },
    Gone {
        group: String,
        instance: String,
    },
    /// A capacity call changed the desired capacity (a chaos replay shows who raced whom).
    Capacity {
        group: String,
        from: u32,
        to: u32,
    },
}

struct Inner {
    groups: BTreeMap<GroupRef, SimGroup>,
    rng: ChaCha8Rng,
    faults: FaultProfile,
    /// Remaining count of each scripted fault, aligned with `faults.scripted`.
    scripted_left: Vec<u32>,
    speed: f64,
    serial: u64,
    events: Vec<CloudEvent>,
    record_events: bool,
    /// Past states of each group, oldest first, kept for `consistency.describeLag` (empty
    /// when reads are consistent).
    history: BTreeMap<GroupRef, Vec<(Instant, GroupState)>>,
    /// The account's published images (see `crate::images`).
    images: Catalog,
    /// Images a managed owner's update to fails (see [`SimCloud::fail_eks_updates_to`],
    /// [`SimCloud::fail_owner_updates_to`]).
    failing_updates: std::collections::BTreeSet<String>,
    /// The newest node image the simulated AKS ships (see `aks`).
    aks_latest_node_image: Option<String>,
    /// The managed owners' API exchanges in their own JSON, oldest first (see
    /// [`SimCloud::owner_exchanges`]).
    exchanges: Vec<Exchange>,
    /// When this cloud was made: the origin of its wall clock ([`Inner::wall`]).
    started: Instant,
    /// Node groups `CreateNodegroup` created, in order (tests: "never a second twin").
    eks_created: Vec<String>,
    /// GKE node pools and AKS agent pools a blue-green twin request created, in order.
    twins_created: Vec<String>,
    /// Every instance that came in service, with the image it booted: the cloud's own
    /// record of what ran where, which the image ledger is checked against.
    ran: Vec<Ran>,
    /// The API server of each managed cluster the services drain nodes of, by owner and
    /// cluster name ([`SimCloud::serve_cluster`]).
    clusters: BTreeMap<(rota_core::fleet::owner::Owner, String), super::store::Store>,
}

/// One call to a managed owner's API and its answer, in the owner's own JSON: what the
/// peers suite holds to the owner's published description.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Exchange {
    pub method: String,
    /// The path below the API's root (GKE: `v1/projects/...`; ARM: `/subscriptions/...?api-version=...`).
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// The answer's body (`null` for a 202 without one).
    pub response: serde_json::Value,
}

impl Exchange {
    fn new(
        method: &str,
        path: &str,
        request: Option<serde_json::Value>,
        response: serde_json::Value,
    ) -> Exchange {
        Exchange {
            method: method.to_string(),
            path: path.to_string(),
            request,
            response,
        }
    }
}

/// An instance that came in service: its group, ID and image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    pub group: String,
    pub instance: String,
    pub image: String,
}

/// A simulated cloud account. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct SimCloud {
    inner: Arc<Mutex<Inner>>,
    /// Wakes the control loop when an API call changed intent.
    wake: Arc<Notify>,
    /// Bumped on every change observers can see.
    generation: Arc<watch::Sender<u64>>,
}

impl SimCloud {
    /// A cloud whose randomness is seeded by `seed`, with `faults` injected and its own delays
    /// (boot, shutdown, launch retry) divided by `speed` (1.0 = real time).
    pub fn new(seed: u64, faults: FaultProfile, speed: f64) -> Self {
        let scripted_left = faults.scripted.iter().map(|s| s.times).collect();
        SimCloud {
            inner: Arc::new(Mutex::new(Inner {
                groups: BTreeMap::new(),
                rng: ChaCha8Rng::seed_from_u64(seed),
                faults,
                scripted_left,
                speed: if speed > 0.0 { speed } else { 1.0 },
                serial: 0,
                events: Vec::new(),
                record_events: true,
                history: BTreeMap::new(),
                images: Catalog::default(),
                ran: Vec::new(),
                failing_updates: Default::default(),
                aks_latest_node_image: None,
                exchanges: Vec::new(),
                started: Instant::now(),
                eks_created: Vec::new(),
                twins_created: Vec::new(),
                clusters: BTreeMap::new(),
            })),
            wake: Arc::new(Notify::new()),
            generation: Arc::new(watch::channel(0).0),
        }
    }

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
                .then(|| eks::Nodegroup::new(spec.desired)),
            gke: matches!(g, GroupRef::Managed(ManagedGroup::GkeNodePool { .. }))
                .then(|| gke::NodePool::new(spec.desired)),
            aks: matches!(g, GroupRef::Managed(ManagedGroup::AksAgentPool { .. }))
                .then(|| aks::AgentPool::new(spec.desired, &spec.image)),
            life: matches!(
                g,
                GroupRef::Managed(
                    ManagedGroup::GkeNodePool { .. } | ManagedGroup::AksAgentPool { .. }
                )
            )
            .then(twins::PoolLife::active),
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
                eks::Life::Steady => twins::lifecycle(&mut group, now),
                other => other,
            };
            match life {
                eks::Life::Gone => {
                    changed = true;
                    continue;
                }
                eks::Life::Changed => changed = true,
                eks::Life::Due(at) => next = Some(next.map_or(at, |n| n.min(at))),
                eks::Life::Steady => {}
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

    fn changed(&self) {
        self.wake.notify_one();
        self.generation.send_modify(|g| *g += 1);
    }

    fn call<T>(
        &self,
        call: Call,
        group: &GroupRef,
        f: impl FnOnce(&mut Inner, Instant) -> Result<(T, bool), CloudError>,
    ) -> Result<T, CloudError> {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap();
        inner.inject_api_fault(call, group)?;
        if !inner.groups.contains_key(group) {
            return Err(CloudError::new(
                CloudErrorKind::NotFound,
                call.api_name(),
                group,
                "no such group",
            ));
        }
        let (value, changed) = f(&mut inner, now)?;
        if changed {
            inner.snapshot(now);
        }
        // A write that took effect may still answer an error (the response was lost, the
        // client timed out): the caller cannot tell it from one that did not.
        let lost = inner.faults.api.lost_response_rate;
        let lost = call != Call::Describe && lost > 0.0 && inner.rng.random::<f64>() < lost;
        drop(inner);
        if changed {
            self.changed();
        }
        if lost {
            return Err(CloudError::new(
                CloudErrorKind::Transient,
                call.api_name(),
                group,
                "504 Gateway Timeout (the request may have taken effect)",
            ));
        }
        Ok(value)
    }
}

impl Inner {
    /// The cloud's wall time at `at`: 2026-01-01T00:00:00Z when the cloud was made, then on
    /// tokio's clock (the operations' `startTime`, `endTime`).
    fn wall(&self, at: Instant) -> chrono::DateTime<chrono::Utc> {
        let origin = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("a valid origin")
            .with_timezone(&chrono::Utc);
        origin
            + chrono::Duration::from_std(at.saturating_duration_since(self.started))
                .unwrap_or_default()
    }

    /// Keep one exchange with a managed owner's API (at most the newest 10,000).
    fn exchange(&mut self, e: Exchange) {
        if self.exchanges.len() >= 10_000 {
            self.exchanges.remove(0);
        }
        self.exchanges.push(e);
    }

    fn scale(&self, d: Duration) -> Duration {
        d.div_f64(self.speed)
    }

    /// Remember every group's state at `now` for lagging describes; forget what is older
    /// than the lag (keeping the last state before it, which is what such a read answers).
    fn snapshot(&mut self, now: Instant) {
        let lag = self.faults.consistency.describe_lag.as_duration();
        if lag.is_zero() {
            return;
        }
        let states: Vec<(GroupRef, GroupState)> = self
            .groups
            .iter()
            .map(|(r, g)| (r.clone(), g.state()))
            .collect();
        for (r, st) in states {
            let h = self.history.entry(r).or_default();
            h.push((now, st));
            if let Some(horizon) = now.checked_sub(lag) {
                let keep_from = h.iter().rposition(|(t, _)| *t <= horizon).unwrap_or(0);
                h.drain(..keep_from);
            }
        }
    }

    /// The group as a describe sees it at `now`: with a lag, as it was at a moment drawn
    /// within the lag.
    fn described(&mut self, group: &GroupRef, now: Instant) -> GroupState {
        let lag = self.faults.consistency.describe_lag.as_duration();
        let current = self.groups[group].state();
        if lag.is_zero() {
            return current;
        }
        let back = Duration::from_millis(self.rng.random_range(0..=lag.as_millis() as u64));
        let Some(at) = now.checked_sub(back) else {
            return current;
        };
        let Some(h) = self.history.get(group) else {
            return current;
        };
        match h.iter().rposition(|(t, _)| *t <= at) {
            Some(i) => h[i].1.clone(),
            None => h.first().map_or(current, |(_, st)| st.clone()),
        }
    }

    fn record(&mut self, e: CloudEvent) {
        if self.record_events {
            self.events.push(e);
        }
    }

    /// Scripted faults first (they are precise), then the per-call rates.
    fn inject_api_fault(&mut self, call: Call, group: &GroupRef) -> Result<(), CloudError> {
        for (i, s) in self.faults.scripted.iter().enumerate() {
            let matches = s.call == call
                && s.group.as_deref().is_none_or(|n| n == group.name())
                && self.scripted_left[i] > 0;
            if matches {
                self.scripted_left[i] -= 1;
                let kind = s.error.kind();
                return Err(CloudError::new(
                    kind,
                    call.api_name(),
                    group,
                    format!("injected {}", kind.reason()),
                ));
            }
        }
        let (throttle, server) = (
            self.faults.api.throttle_rate,
            self.faults.api.server_error_rate,
        );
        if throttle + server > 0.0 {
            let x: f64 = self.rng.random();
            if x < throttle {
                return Err(CloudError::new(
                    CloudErrorKind::Throttled,
                    call.api_name(),
                    group,
                    "429 Rate exceeded",
                ));
            }
            if x < throttle + server {
                return Err(CloudError::new(
                    CloudErrorKind::Transient,
                    call.api_name(),
                    group,
                    "503 Service Unavailable",
                ));
            }
        }
        Ok(())
    }

    /// A new pending instance of `group` with a seeded ID, zone and boot time.
    fn new_instance(&mut self, group: &mut SimGroup, now: Instant) -> SimInstance {
        let zone = group.zones[group.next_zone % group.zones.len()].clone();
        group.next_zone += 1;
        let (id, pid) = match &group.spec.group {
            GroupRef::Aws { .. } => {
                let id = format!("i-0{:016x}", self.rng.random::<u64>());
                let pid = provider_id::aws(&zone, &id);
                (id, pid)
            }
            GroupRef::Gcp {
                project,
                instance_group_manager,
                ..
            } => {
                let suffix: String = (0..4)
                    .map(|_| {
                        let n = self.rng.random_range(0..36u32);
                        char::from_digit(n, 36).unwrap()
                    })
                    .collect();
                let id = format!("{instance_group_manager}-{suffix}");
                let pid = provider_id::gcp(project, &zone, &id);
                (id, pid)
            }
            GroupRef::Azure {
                subscription_id,
                resource_group,
                scale_set,
            } => {
                let id = group.next_ordinal.to_string();
                group.next_ordinal += 1;
                let pid = provider_id::azure(subscription_id, resource_group, scale_set, &id);
                (id, pid)
            }
            // A managed pool's instance, with the providerID its cloud's kubelet registers
            // (what the ledger and `rota audit` read an instance from). An AKS agent pool's
            // VM is known by its computer name (`aks-<pool>-<digits>-vmss` and its ordinal:
            // its node's name, and the machine name `deleteMachines` takes, as the real
            // client names members), its providerID ends in the ordinal, as AKS reports it;
            // the others' are named after their pool (unique across the cluster's pools).
            GroupRef::Managed(m) => {
                let ordinal = group.next_ordinal;
                group.next_ordinal += 1;
                match naming::aks_scale_set(m) {
                    Some(set) => (
                        naming::vmss_computer_name(&set, ordinal),
                        managed_provider_id(m, &zone, &ordinal.to_string()),
                    ),
                    None => {
                        let id = format!("{}-{ordinal}", m.name());
                        let pid = managed_provider_id(m, &zone, &id);
                        (id, pid)
                    }
                }
            }
        };
        let boot = &self.faults.boot;
        let (lo, hi) = (boot.min.as_duration(), boot.max.as_duration());
        let span = hi.saturating_sub(lo).as_millis() as u64;
        let extra = if span == 0 {
            0
        } else {
            self.rng.random_range(0..=span)
        };
        let boot_time = self.scale(lo + Duration::from_millis(extra));
        let boot_fails = boot.failure_rate > 0.0 && self.rng.random::<f64>() < boot.failure_rate;
        self.serial += 1;
        self.record(CloudEvent::Launched {
            group: group.spec.group.name().to_string(),
            instance: id.clone(),
        });
        SimInstance {
            public: Instance {
                id,
                provider_id: pid,
                image: group.template_image.clone(),
                zone,
                lifecycle: Lifecycle::Pending,
                launch_error: None,
            },
            due: now + boot_time,
            boot_fails,
            serial: self.serial,
        }
    }

    fn begin_termination(&mut self, group: &SimGroup, inst: &mut SimInstance, now: Instant) {
        inst.public.lifecycle = Lifecycle::Terminating;
        inst.due = now + self.scale(self.faults.boot.shutdown.as_duration());
        self.record(CloudEvent::Terminating {
            group: group.spec.group.name().to_string(),
            instance: inst.public.id.clone(),
        });
    }

    /// One control-loop pass over one group; true if anything observable changed.
    fn step_group(&mut self, group: &mut SimGroup, now: Instant) -> bool {
        let name = group.spec.group.name().to_string();
        let mut changed = false;
        let mut kept = Vec::with_capacity(group.instances.len());
        for mut inst in std::mem::take(&mut group.instances) {
            match inst.public.lifecycle {
                Lifecycle::Terminating if inst.due <= now => {
                    self.record(CloudEvent::Gone {
                        group: name.clone(),
                        instance: inst.public.id.clone(),
                    });
                    changed = true;
                    continue;
                }
                Lifecycle::Pending if inst.due <= now => {
                    changed = true;
                    if inst.boot_fails {
                        // The cloud marks it unhealthy and terminates it; desired capacity is
                        // unchanged, so a replacement is launched below.
                        self.record(CloudEvent::BootFailed {
                            group: name.clone(),
                            instance: inst.public.id.clone(),
                        });
                        self.begin_termination(group, &mut inst, now);
                    } else {
                        inst.public.lifecycle = Lifecycle::InService;
                        self.record(CloudEvent::InService {
                            group: name.clone(),
                            instance: inst.public.id.clone(),
                        });
                        self.ran.push(Ran {
                            group: name.clone(),
                            instance: inst.public.id.clone(),
                            image: inst.public.image.clone(),
                        });
                    }
                }
                _ => {}
            }
            kept.push(inst);
        }
        group.instances = kept;

        let live = group.live();
        let desired = group.desired as usize;
        if live < desired {
            if group.launch_blocked_until.is_some_and(|t| t > now) {
                return changed;
            }
            group.launch_blocked_until = None;
            // An image that does not exist where the group launches: the launch fails and is
            // retried later, as an Auto Scaling group's scaling activity does.
            if let Some(code) = self
                .images
                .launch_error(&group.spec.group, &group.template_image)
            {
                self.record(CloudEvent::LaunchFailed {
                    group: name.clone(),
                    reason: code,
                });
                group.launch_blocked_until =
                    Some(now + self.scale(self.faults.launch.retry_after.as_duration()));
                return changed;
            }
            for _ in live..desired {
                let rate = self.faults.launch.capacity_error_rate;
                if rate > 0.0 && self.rng.random::<f64>() < rate {
                    self.record(CloudEvent::LaunchFailed {
                        group: name.clone(),
                        reason: "InsufficientInstanceCapacity".into(),
                    });
                    group.launch_blocked_until =
                        Some(now + self.scale(self.faults.launch.retry_after.as_duration()));
                    break;
                }
                let inst = self.new_instance(group, now);
                group.instances.push(inst);
                changed = true;
            }
        } else if live > desired {
            // Scale in: pending first, then instances on a stale image, then the oldest.
            let template = group.template_image.clone();
            let mut order: Vec<usize> = (0..group.instances.len())
                .filter(|&i| group.instances[i].public.lifecycle != Lifecycle::Terminating)
                .collect();
            order.sort_by_key(|&i| {
                let inst = &group.instances[i];
                (
                    inst.public.lifecycle != Lifecycle::Pending,
                    inst.public.image == template,
                    inst.serial,
                )
            });
            for &i in order.iter().take(live - desired) {
                let mut inst = group.instances[i].clone();
                self.begin_termination(group, &mut inst, now);
                group.instances[i] = inst;
            }
            changed = true;
        }
        changed
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

/// The providerID a managed pool's node registers with: EKS's and Karpenter's
/// `aws:///ZONE/ID`, GKE's `gce://PROJECT/ZONE/NAME`, AKS's scale set VM in the cluster's
/// node resource group (`MC_RG_CLUSTER`), the scale set named as AKS names it
/// (`naming::aks_scale_set`) and the VM by its ordinal.
fn managed_provider_id(m: &ManagedGroup, zone: &str, id: &str) -> String {
    match m {
        ManagedGroup::EksNodegroup { .. } | ManagedGroup::KarpenterNodePool { .. } => {
            provider_id::aws(zone, id)
        }
        ManagedGroup::GkeNodePool { project, .. } => provider_id::gcp(project, zone, id),
        ManagedGroup::AksAgentPool {
            subscription_id,
            resource_group,
            aks_cluster,
            ..
        } => provider_id::azure(
            subscription_id,
            &format!("MC_{resource_group}_{aks_cluster}"),
            &naming::aks_scale_set(m).unwrap_or_default(),
            id,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{ScriptedError, ScriptedFault};

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
