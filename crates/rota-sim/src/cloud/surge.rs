//! One round of a managed service's own surge upgrade, as GKE (surge upgrade:
//! `upgradeSettings.maxSurge` and `maxUnavailable`) and AKS (node image upgrade:
//! `upgradeSettings.maxSurge`) roll a pool's nodes onto a new image:
//!
//! - surge: the group grows by at most `surge` nodes on the new image (never more than the
//!   old nodes left), new nodes first;
//! - once they are in service, `surge + unavailable` old nodes at most are terminated
//!   (oldest first) and the group returns to its size, so that up to `unavailable` more new
//!   nodes launch in their place;
//! - with no surge (`surge` 0: rota's `strategy: replace`), the round terminates up to
//!   `unavailable` old nodes first and the group refills them on the new image, never above
//!   its size;
//! - done when no old node is left, nothing is booting and the group is back at its size.
//!
//! Like the simulated EKS (`eks.rs`), the services' own drain is not modelled: an old node
//! goes with its instance and the workloads recreate its pods elsewhere.

use tokio::time::Instant;

use super::{Inner, SimGroup};
use rota_core::cloud::Lifecycle;

/// What one round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Roll {
    /// Waiting for nodes to boot or go.
    Busy,
    /// Surged or terminated: something changed.
    Moved,
    /// Every node runs the target; the group is back at its size.
    Done,
}

/// One round of the service's upgrade of `group` to `target` at size `size`.
pub(super) fn roll(
    inner: &mut Inner,
    group: &mut SimGroup,
    target: &str,
    size: u32,
    surge: u32,
    unavailable: u32,
    now: Instant,
) -> Roll {
    let live: Vec<usize> = (0..group.instances.len())
        .filter(|&i| group.instances[i].public.lifecycle != Lifecycle::Terminating)
        .collect();
    let mut old: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| group.instances[i].public.image != target)
        .collect();
    let pending = live
        .iter()
        .any(|&i| group.instances[i].public.lifecycle == Lifecycle::Pending);
    let terminating = group.instances.len() > live.len();
    if old.is_empty() && !pending {
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
    // A launch still owed (booting, blocked on capacity) or a node still going: the round
    // waits, so no old node goes before its replacement is in service.
    if pending || terminating || (live.len() as u32) < group.desired {
        return Roll::Busy;
    }
    let round = (surge + unavailable).max(1).min(old.len() as u32);
    let up = surge.min(round);
    if up > 0 && group.desired < size + up {
        group.desired = size + up;
        group.max = group.max.max(group.desired);
        return Roll::Moved;
    }
    old.sort_by_key(|&i| group.instances[i].serial);
    for &i in old.iter().take(round as usize) {
        let mut inst = group.instances[i].clone();
        inner.begin_termination(group, &mut inst, now);
        group.instances[i] = inst;
    }
    // Back to the pool's size: the terminated nodes beyond the surge are replaced on the
    // new template (what `maxUnavailable` lets the service take out at once).
    group.desired = size;
    Roll::Moved
}
