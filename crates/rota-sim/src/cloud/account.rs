//! One simulated cloud account as data: its groups ([`SimGroup`], their instances and what
//! their owner keeps beside them), the state behind the lock ([`Inner`]: the seeded
//! generator, the faults, the images, the events and the owners' exchanges) and the handle
//! ([`SimCloud`]) with the one way an API call reaches that state ([`SimCloud::call`]: a
//! fault drawn, the group looked up, a lost answer drawn). How an instance boots, runs and
//! goes is here too ([`Inner::step_group`]). The control loop (`cloud.rs`) and each owner's
//! API (`eks`, `gke`, `aks`, the twins and the services' drains) work on it; it lives below
//! all of them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::owner_state::{AgentPool, NodePool, Nodegroup, PoolLife, ServiceDrains};
use crate::faults::{Call, FaultProfile};
use crate::images::Catalog;
use crate::naming;
use rota_core::cloud::{
    CloudError, CloudErrorKind, GroupRef, GroupState, Instance, Lifecycle, provider_id,
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
pub(super) struct SimInstance {
    pub(super) public: Instance,
    /// Pending: when boot ends. Terminating: when the instance is gone.
    pub(super) due: Instant,
    /// Drawn at launch: this boot ends in failure instead of service.
    pub(super) boot_fails: bool,
    /// Creation order, for scale-in (oldest first among those on a stale image).
    pub(super) serial: u64,
}

#[derive(Clone, Debug)]
pub(super) struct SimGroup {
    pub(super) spec: GroupSpec,
    pub(super) desired: u32,
    pub(super) min: u32,
    pub(super) max: u32,
    pub(super) template_image: String,
    pub(super) zones: Vec<String>,
    pub(super) instances: Vec<SimInstance>,
    pub(super) next_zone: usize,
    /// Azure VMSS instance IDs count up.
    pub(super) next_ordinal: u64,
    /// No launch before this instant (after a capacity error).
    pub(super) launch_blocked_until: Option<Instant>,
    /// An EKS managed node group: its updates and update settings (see `eks`).
    pub(super) eks: Option<Nodegroup>,
    /// A GKE node pool: its operations and upgrade settings (see `gke`).
    pub(super) gke: Option<NodePool>,
    /// An AKS agent pool: its upgrades and upgrade settings (see `aks`).
    pub(super) aks: Option<AgentPool>,
    /// A GKE node pool's or AKS agent pool's own life (creating, active, deleting) and the
    /// pool a blue-green twin was made from (see `twins`).
    pub(super) life: Option<PoolLife>,
    /// The nodes the group's service drains before its update terminates them (see
    /// `service_drain`).
    pub(super) service: ServiceDrains,
}

impl SimGroup {
    /// Instances that count towards the desired capacity (all but terminating ones).
    pub(super) fn live(&self) -> usize {
        self.instances
            .iter()
            .filter(|i| i.public.lifecycle != Lifecycle::Terminating)
            .count()
    }

    pub(super) fn state(&self) -> GroupState {
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

pub(super) struct Inner {
    pub(super) groups: BTreeMap<GroupRef, SimGroup>,
    pub(super) rng: ChaCha8Rng,
    pub(super) faults: FaultProfile,
    /// Remaining count of each scripted fault, aligned with `faults.scripted`.
    pub(super) scripted_left: Vec<u32>,
    pub(super) speed: f64,
    pub(super) serial: u64,
    pub(super) events: Vec<CloudEvent>,
    pub(super) record_events: bool,
    /// Past states of each group, oldest first, kept for `consistency.describeLag` (empty
    /// when reads are consistent).
    pub(super) history: BTreeMap<GroupRef, Vec<(Instant, GroupState)>>,
    /// The account's published images (see `crate::images`).
    pub(super) images: Catalog,
    /// Images a managed owner's update to fails (see [`SimCloud::fail_eks_updates_to`],
    /// [`SimCloud::fail_owner_updates_to`]).
    pub(super) failing_updates: std::collections::BTreeSet<String>,
    /// The newest node image the simulated AKS ships (see `aks`).
    pub(super) aks_latest_node_image: Option<String>,
    /// The managed owners' API exchanges in their own JSON, oldest first (see
    /// [`SimCloud::owner_exchanges`]).
    pub(super) exchanges: Vec<Exchange>,
    /// When this cloud was made: the origin of its wall clock ([`Inner::wall`]).
    pub(super) started: Instant,
    /// Node groups `CreateNodegroup` created, in order (tests: "never a second twin").
    pub(super) eks_created: Vec<String>,
    /// GKE node pools and AKS agent pools a blue-green twin request created, in order.
    pub(super) twins_created: Vec<String>,
    /// Every instance that came in service, with the image it booted: the cloud's own
    /// record of what ran where, which the image ledger is checked against.
    pub(super) ran: Vec<Ran>,
    /// The API server of each managed cluster the services drain nodes of, by owner and
    /// cluster name ([`SimCloud::serve_cluster`]).
    pub(super) clusters: BTreeMap<(rota_core::fleet::owner::Owner, String), crate::store::Store>,
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
    pub(super) fn new(
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
    pub(super) inner: Arc<Mutex<Inner>>,
    /// Wakes the control loop when an API call changed intent.
    pub(super) wake: Arc<Notify>,
    /// Bumped on every change observers can see.
    pub(super) generation: Arc<watch::Sender<u64>>,
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

    pub(super) fn changed(&self) {
        self.wake.notify_one();
        self.generation.send_modify(|g| *g += 1);
    }

    pub(super) fn call<T>(
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
    pub(super) fn wall(&self, at: Instant) -> chrono::DateTime<chrono::Utc> {
        let origin = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("a valid origin")
            .with_timezone(&chrono::Utc);
        origin
            + chrono::Duration::from_std(at.saturating_duration_since(self.started))
                .unwrap_or_default()
    }

    /// Keep one exchange with a managed owner's API (at most the newest 10,000).
    pub(super) fn exchange(&mut self, e: Exchange) {
        if self.exchanges.len() >= 10_000 {
            self.exchanges.remove(0);
        }
        self.exchanges.push(e);
    }

    pub(super) fn scale(&self, d: Duration) -> Duration {
        d.div_f64(self.speed)
    }

    /// Remember every group's state at `now` for lagging describes; forget what is older
    /// than the lag (keeping the last state before it, which is what such a read answers).
    pub(super) fn snapshot(&mut self, now: Instant) {
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
    pub(super) fn described(&mut self, group: &GroupRef, now: Instant) -> GroupState {
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

    pub(super) fn record(&mut self, e: CloudEvent) {
        if self.record_events {
            self.events.push(e);
        }
    }

    /// Scripted faults first (they are precise), then the per-call rates.
    pub(super) fn inject_api_fault(
        &mut self,
        call: Call,
        group: &GroupRef,
    ) -> Result<(), CloudError> {
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
    pub(super) fn new_instance(&mut self, group: &mut SimGroup, now: Instant) -> SimInstance {
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

    pub(super) fn begin_termination(
        &mut self,
        group: &SimGroup,
        inst: &mut SimInstance,
        now: Instant,
    ) {
        inst.public.lifecycle = Lifecycle::Terminating;
        inst.due = now + self.scale(self.faults.boot.shutdown.as_duration());
        self.record(CloudEvent::Terminating {
            group: group.spec.group.name().to_string(),
            instance: inst.public.id.clone(),
        });
    }

    /// One control-loop pass over one group; true if anything observable changed.
    pub(super) fn step_group(&mut self, group: &mut SimGroup, now: Instant) -> bool {
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

/// The providerID a managed pool's node registers with: EKS's and Karpenter's
/// `aws:///ZONE/ID`, GKE's `gce://PROJECT/ZONE/NAME`, AKS's scale set VM in the cluster's
/// node resource group (`MC_RG_CLUSTER`), the scale set named as AKS names it
/// (`naming::aks_scale_set`) and the VM by its ordinal.
pub(super) fn managed_provider_id(m: &ManagedGroup, zone: &str, id: &str) -> String {
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
