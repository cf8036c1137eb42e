//! One round of a managed service's own surge upgrade, as GKE (surge upgrade:
//! `upgradeSettings.maxSurge` and `maxUnavailable`) and AKS (node image upgrade:
//! `upgradeSettings.maxSurge`) roll a pool's nodes onto a new image:
//!
//! - surge: the group grows by at most `surge` nodes on the new image (never more than the
//!   old nodes left), new nodes first;
//! - once they are in service, `surge + unavailable` old nodes at most are drained by the
//!   service (oldest first, `service_drain`: cordoned, their pods evicted through the
//!   Eviction API within the service's timeout) and terminated once drained; the first
//!   `surge` of them give the surge back, the others are replaced on the new template (what
//!   `maxUnavailable` lets the service take out at once);
//! - with no surge (`surge` 0: rota's `strategy: replace`), the round drains up to
//!   `unavailable` old nodes first and the group refills them on the new image, never above
//!   its size;
//! - done when no old node is left, none drains, nothing is booting and the group is back at
//!   its size.

use super::account::SimGroup;
use super::owner_state::DrainRule;
use super::service_drain;
use rota_core::cloud::Lifecycle;

/// What one round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Roll {
    /// Waiting for nodes to boot, drain or go.
    Busy,
    /// Surged or started draining: something changed.
    Moved,
    /// Every node runs the target; the group is back at its size.
    Done,
}

/// A service's upgrade settings for one pool.
#[derive(Clone, Copy, Debug)]
pub(super) struct Upgrade {
    /// The pool's size, which the group returns to.
    pub size: u32,
    pub surge: u32,
    pub unavailable: u32,
    pub drain: DrainRule,
}

/// One round of the service's upgrade of `group` to `target`.
pub(super) fn roll(group: &mut SimGroup, target: &str, up: &Upgrade) -> Roll {
    let size = up.size;
    let live: Vec<usize> = (0..group.instances.len())
        .filter(|&i| group.instances[i].public.lifecycle != Lifecycle::Terminating)
        .collect();
    let mut old: Vec<usize> = live
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
        let moved = group.desired != size;
        group.desired = size;
        if moved {
            return Roll::Moved;
        }
        // Without a surge the last old nodes go before their replacements exist: done only
        // once the group has launched them (else the pool would end a batch short).
        return if (live.len() as u32) < size {
            Roll::Busy
        } else {
            Roll::Done
        };
    }
    // A launch still owed (booting, blocked on capacity), a node still draining or going:
    // the round waits, so no old node goes before its replacement is in service.
    if pending || terminating || draining || (live.len() as u32) < group.desired {
        return Roll::Busy;
    }
    let round = (up.surge + up.unavailable).max(1).min(old.len() as u32);
    let surge = up.surge.min(round);
    if surge > 0 && group.desired < size + surge {
        group.desired = size + surge;
        group.max = group.max.max(group.desired);
        return Roll::Moved;
    }
    // The surge is in service: the service drains the round's old nodes, oldest first; each
    // is terminated once drained, the group's size following (`service_drain`).
    old.sort_by_key(|&i| group.instances[i].serial);
    for &i in old.iter().take(round as usize) {
        service_drain::begin(group, i, size, up.drain);
    }
    Roll::Moved
}
