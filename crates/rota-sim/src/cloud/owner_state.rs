//! What each simulated owner keeps about a pool beside its instance group: EKS's node group
//! ([`Nodegroup`]), GKE's node pool ([`NodePool`]), AKS's agent pool ([`AgentPool`]), a
//! blue-green twin's own life ([`PoolLife`], [`Life`]) and the services' drains
//! ([`ServiceDrains`], by their [`DrainRule`]). A group (`account::SimGroup`) holds them and
//! each owner's file (`eks`, `gke`, `aks`, `twins`, `service_drain`) moves them on; they live
//! below both, so no owner's file imports the file that steps it.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use rota_core::cloud::managed::{MaxUnavailable, OwnerUpdate, PoolStatus, UpdateStatus};

/// What EKS keeps about a node group beside its Auto Scaling group.
#[derive(Clone, Debug)]
pub(super) struct Nodegroup {
    /// `scalingConfig.desiredSize`: the size the group returns to after an update's surge.
    pub(super) size: u32,
    pub(super) max_unavailable: MaxUnavailable,
    /// `updateConfig.updateStrategy: MINIMAL`: an update terminates old nodes before it
    /// launches their replacements (`DEFAULT`, false: new nodes first).
    pub(super) minimal: bool,
    /// The running update was sent with `force`: pods a budget holds past EKS's 15 minutes
    /// are deleted instead of failing it.
    pub(super) force: bool,
    /// Every update, oldest first.
    pub(super) updates: Vec<OwnerUpdate>,
    /// The AMI the running update came from (put back if it fails).
    pub(super) previous_image: Option<String>,
    /// `CREATING`, `ACTIVE`, `DELETING` (the others are not simulated).
    pub(super) status: PoolStatus,
    /// When a `CREATING` or `DELETING` node group is done.
    pub(super) status_due: Option<Instant>,
    /// The tag `rota.dev/twin-of` a blue-green twin is created with.
    pub(super) twin_of: Option<String>,
}

impl Nodegroup {
    pub(super) fn new(size: u32) -> Nodegroup {
        Nodegroup {
            size,
            max_unavailable: MaxUnavailable::Count(1),
            minimal: false,
            force: false,
            updates: Vec::new(),
            previous_image: None,
            status: PoolStatus::Active,
            status_due: None,
            twin_of: None,
        }
    }

    pub(super) fn running(&mut self) -> Option<&mut OwnerUpdate> {
        self.updates
            .last_mut()
            .filter(|u| u.status == UpdateStatus::InProgress)
    }

    /// Nodes EKS may take out at once for a group of `size`.
    pub(super) fn unavailable(&self) -> u32 {
        match self.max_unavailable {
            MaxUnavailable::Count(n) => n.max(1),
            MaxUnavailable::Percent(p) => (self.size * u32::from(p)).div_ceil(100).max(1),
        }
    }
}

/// What a pool's own life did on one step of the cloud (`eks::lifecycle`,
/// `twins::lifecycle`).
pub(super) enum Life {
    Steady,
    Changed,
    Due(Instant),
    /// Deleted: the caller forgets the group.
    Gone,
}

/// What GKE keeps about a node pool beside its instance group.
#[derive(Clone, Debug)]
pub(super) struct NodePool {
    /// The pool's node count (`initialNodeCount`; autoscaling is not simulated).
    pub(super) size: u32,
    pub(super) max_surge: u32,
    pub(super) max_unavailable: u32,
    pub(super) resource_labels: std::collections::BTreeMap<String, String>,
    /// Every `UPGRADE_NODES` operation, oldest first, with the token it was started with.
    pub(super) ops: Vec<(OwnerUpdate, Instant)>,
    pub(super) previous_image: Option<String>,
}

impl NodePool {
    pub(super) fn new(size: u32) -> NodePool {
        // GKE's defaults for a new node pool: surge 1, unavailable 0.
        NodePool {
            size,
            max_surge: 1,
            max_unavailable: 0,
            resource_labels: Default::default(),
            ops: Vec::new(),
            previous_image: None,
        }
    }

    /// The pool's node count as GKE keeps it (`nodePools.setSize`, a node deleted from its MIG).
    pub(super) fn set_size(&mut self, n: u32) {
        self.size = n;
    }

    /// Whether an upgrade operation is running.
    pub(super) fn busy(&self) -> bool {
        self.ops
            .last()
            .is_some_and(|(u, _)| u.status == UpdateStatus::InProgress)
    }

    /// The pool's resource labels (a twin's `rota-twin-of`).
    pub(super) fn label(&mut self, key: &str, value: &str) {
        self.resource_labels.insert(key.into(), value.into());
    }

    pub(super) fn running(&mut self) -> Option<&mut OwnerUpdate> {
        self.ops
            .last_mut()
            .map(|(u, _)| u)
            .filter(|u| u.status == UpdateStatus::InProgress)
    }
}

/// What AKS keeps about an agent pool beside its scale set.
#[derive(Clone, Debug)]
pub(super) struct AgentPool {
    pub(super) size: u32,
    /// `upgradeSettings.maxSurge` as AKS stores it: "1", "33%" ("0": no surge).
    pub(super) max_surge: String,
    /// `upgradeSettings.maxUnavailable` as AKS stores it, when set: "0", "2", "25%".
    pub(super) max_unavailable: Option<String>,
    /// `upgradeSettings.drainTimeoutInMinutes` (how long a node's drain may take before the
    /// upgrade fails, `service_drain`) and `nodeSoakDurationInMinutes` (kept and answered;
    /// the simulated upgrade does not wait on it), as last set.
    pub(super) drain_timeout_minutes: Option<u64>,
    pub(super) node_soak_minutes: Option<u64>,
    pub(super) tags: std::collections::BTreeMap<String, String>,
    /// Node image versions the pool ran (newest last): what a rollback may go back to.
    pub(super) recently_used: Vec<String>,
    /// Every upgrade, oldest first.
    pub(super) upgrades: Vec<OwnerUpdate>,
    pub(super) previous_image: Option<String>,
}

impl AgentPool {
    pub(super) fn new(size: u32, image: &str) -> AgentPool {
        AgentPool {
            size,
            // AKS's default for a new agent pool.
            max_surge: "10%".into(),
            max_unavailable: None,
            drain_timeout_minutes: None,
            node_soak_minutes: None,
            tags: Default::default(),
            recently_used: vec![image.to_string()],
            upgrades: Vec::new(),
            previous_image: None,
        }
    }

    /// The agent pool's `count` as AKS keeps it (a PUT of it, a machine deleted).
    pub(super) fn set_size(&mut self, n: u32) {
        self.size = n;
    }

    /// Whether a node image upgrade is running.
    pub(super) fn busy(&self) -> bool {
        self.upgrades
            .last()
            .is_some_and(|u| u.status == UpdateStatus::InProgress)
    }

    /// The agent pool's tags (a twin's `rota-twin-of`).
    pub(super) fn tag(&mut self, key: &str, value: &str) {
        self.tags.insert(key.into(), value.into());
    }

    pub(super) fn running(&mut self) -> Option<&mut OwnerUpdate> {
        self.upgrades
            .last_mut()
            .filter(|u| u.status == UpdateStatus::InProgress)
    }

    /// Nodes AKS surges at once for `max_surge`, and takes out at once for
    /// `max_unavailable`; with both 0, a surge of one (AKS's default).
    pub(super) fn surge(&self) -> (u32, u32) {
        let nodes = |v: &str| match v.strip_suffix('%') {
            Some(p) => (self.size * p.parse::<u32>().unwrap_or(10)).div_ceil(100),
            None => v.parse::<u32>().unwrap_or(1),
        };
        let surge = nodes(&self.max_surge);
        let unavailable = self.max_unavailable.as_deref().map_or(0, nodes);
        match (surge, unavailable) {
            (0, 0) => (1, 0),
            other => other,
        }
    }
}

/// Where a GKE node pool or an AKS agent pool is in its own life.
#[derive(Clone, Debug)]
pub(super) struct PoolLife {
    pub(super) status: PoolStatus,
    /// When a `Creating` or `Deleting` pool is done.
    pub(super) due: Option<Instant>,
    /// The pool a blue-green twin was made from (GKE: its resource label, AKS: its tag).
    pub(super) twin_of: Option<String>,
}

impl PoolLife {
    pub(super) fn active() -> PoolLife {
        PoolLife {
            status: PoolStatus::Active,
            due: None,
            twin_of: None,
        }
    }
}

/// What a service does with a node whose drain outlasts its timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OnTimeout {
    /// The pods left are deleted and the node goes (GKE after its hour).
    Force,
    /// The update fails and the node stays (EKS unless forced, AKS).
    Fail,
}

/// A service's rules for the nodes it drains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DrainRule {
    pub timeout: Duration,
    pub on_timeout: OnTimeout,
    /// GKE and AKS cordon a node before they evict its pods; EKS cordons it once they are
    /// gone (its taint keeps new pods off the node until then).
    pub cordon_first: bool,
}

impl DrainRule {
    /// EKS: 15 minutes, then the update fails, or with `force` the pods left are deleted.
    pub(super) fn eks(force: bool) -> DrainRule {
        DrainRule {
            timeout: Duration::from_secs(15 * 60),
            on_timeout: if force {
                OnTimeout::Force
            } else {
                OnTimeout::Fail
            },
            cordon_first: false,
        }
    }
    pub(super) const GKE: DrainRule = DrainRule {
        timeout: Duration::from_secs(3600),
        on_timeout: OnTimeout::Force,
        cordon_first: true,
    };

    /// AKS with the agent pool's `drainTimeoutInMinutes` (30 when unset).
    pub(super) fn aks(minutes: Option<u64>) -> DrainRule {
        DrainRule {
            timeout: Duration::from_secs(minutes.unwrap_or(30) * 60),
            on_timeout: OnTimeout::Fail,
            cordon_first: true,
        }
    }
}

/// A node the service is draining.
#[derive(Clone, Debug)]
pub(super) struct Drain {
    pub(super) instance: String,
    pub(super) provider_id: String,
    pub(super) rule: DrainRule,
    /// The pool's size: a drained node's termination lowers the group's desired capacity
    /// down to it (a surge node given back), never below (a node taken out is replaced).
    pub(super) floor: u32,
    /// When the drain began, on the cluster's clock (its first round).
    pub(super) started: Option<DateTime<Utc>>,
}

/// What a group's service is draining and marking.
#[derive(Clone, Debug, Default)]
pub(super) struct ServiceDrains {
    pub(super) draining: Vec<Drain>,
    /// Nodes (by providerID) to taint as EKS does when its update starts.
    pub(super) to_taint: Vec<String>,
    pub(super) tainted: BTreeSet<String>,
    /// A drain that timed out under [`OnTimeout::Fail`]: the error the owner's update fails
    /// with, taken by the owner's next step ([`take_failure`]).
    pub(super) failed: Option<String>,
}
