//! Which gate evaluation a pool is in, so the controller samples its health gates then and
//! only then (a change of evaluation starts the samples afresh): the batch stages of a
//! self-managed or blue-green rotation, a Karpenter drift's batches (`drift`), and a
//! `managedUpdate: service` pool's owner update, which has no batches of rota's: the gates
//! are sampled before the update starts (`pre-1`) and all through it (`update`), so a gate
//! failing while the owner replaces nodes stops the pool then, not only once the update
//! has ended. Samples of `update` wait while the owner drains a node of the pool
//! ([`owner_draining`]), as a batch's wait for its soak while rota drains.

use rota_core::fleet::owner::Strategy;
use rota_core::fleet::resolved::DesiredPool;
use rota_core::rotate::{Checkpoint, Phase, Stage};

use crate::kube::crd::NodePoolRotation;

/// The evaluation of stages whose gates are not sampled yet (their verdict is pending).
pub(super) const NOT_YET: &str = "not-yet";

/// The evaluation of a `managedUpdate: service` pool while its owner runs the update.
pub(super) const UPDATE: &str = "update";

/// The gate evaluation a checkpoint stage belongs to: the pre-check of batch n, its soak, the
/// pool soak; [`NOT_YET`] while the batch's nodes boot; empty when no gate is consulted.
pub fn evaluation(stage: Option<&Stage>) -> String {
    match stage {
        // Sampled from Gating on: while the new nodes boot, their own pods are not Ready yet
        // and would fail a pods gate for no reason.
        Some(Stage::Surging { .. } | Stage::WaitingReady { .. }) => NOT_YET.into(),
        Some(Stage::Gating { batch }) => format!("pre-{}", batch.number),
        // Not while draining: evicted pods are briefly not Ready by design; the soak judges
        // the cluster once the batch is done.
        Some(Stage::Soaking { batch, .. }) => format!("soak-{}", batch.number),
        Some(Stage::PoolSoak { .. } | Stage::Cleanup) => "pool".into(),
        _ => String::new(),
    }
}

/// The evaluation `npr`'s pool is in now, whatever replaces it.
pub(super) fn of_pool(npr: &NodePoolRotation, desired: &DesiredPool) -> String {
    let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
    super::drift::evaluation(checkpoint)
        .or_else(|| service(npr, desired, checkpoint))
        .unwrap_or_else(|| evaluation(checkpoint.map(|c| &c.stage)))
}

/// A `managedUpdate: service` pool: `pre-1` until its update to the pinned image starts
/// (none while the pool last reported itself up to date for this very spec), `update`
/// while the owner runs it, `pool` in the pool soak; nothing once it halted, while it rolls
/// back (the gates asked for that) or when it is done. `None` for any other pool.
fn service(
    npr: &NodePoolRotation,
    desired: &DesiredPool,
    checkpoint: Option<&Checkpoint>,
) -> Option<String> {
    desired.group.managed()?;
    if desired.strategy() != Strategy::Service {
        return None;
    }
    let target = desired
        .owner_image
        .as_ref()
        .map_or_else(|| desired.image.clone(), |o| o.as_image());
    let ours = checkpoint.filter(|c| {
        c.target_image == target || c.rejected_image.as_deref() == Some(target.as_str())
    });
    Some(match ours {
        Some(cp) if cp.halted.is_some() || cp.rolling_back => String::new(),
        Some(cp) => match &cp.stage {
            Stage::PoolSoak { .. } => "pool".into(),
            Stage::Done => String::new(),
            _ => UPDATE.into(),
        },
        None => {
            // Up to date at the last look, for this generation of the spec: nothing to gate.
            let status = npr.status.as_ref();
            let current = status.is_some_and(|s| {
                s.phase == Phase::Succeeded && s.observed_generation == npr.metadata.generation
            });
            if current {
                String::new()
            } else {
                "pre-1".into()
            }
        }
    })
}

/// A node of a pool as [`owner_draining`] reads it.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeDrain<'a> {
    pub name: &'a str,
    /// Kept off by someone: cordoned (GKE and AKS cordon before they evict), or tainted
    /// unschedulable by its owner (EKS, when its update starts).
    pub kept_off: bool,
    /// Pods on it that are not DaemonSets' and are terminating (evicted).
    pub going: usize,
}

/// The node of the pool its owner is draining now, if any: kept off, with evicted pods still
/// terminating on it. While it drains, its evicted pods' replacements are starting elsewhere
/// and briefly not Ready by design, as during rota's own drains (whose gates wait for the
/// batch's soak): the `update` evaluation takes no sample then, and what it counted before
/// stands. Worked example, the demo's EKS node group under `maxNotReady: "2%"` of 41 pods
/// (none allowed): EKS evicts a node's `api` and `worker` pods at once; each replacement is
/// Pending about 11 seconds, and two samples 30 seconds apart, during two of the three
/// nodes' drains, each caught one and failed the gate. Once the node's pods are gone, samples
/// are taken again: a replacement still not Ready then counts, as a pod a batch's soak finds.
pub(super) fn owner_draining<'a>(
    nodes: impl IntoIterator<Item = NodeDrain<'a>>,
) -> Option<&'a str> {
    nodes
        .into_iter()
        .find(|n| n.kept_off && n.going > 0)
        .map(|n| n.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, kept_off: bool, going: usize) -> NodeDrain<'_> {
        NodeDrain {
            name,
            kept_off,
            going,
        }
    }

    #[test]
    fn a_kept_off_node_with_pods_going_is_being_drained() {
        let nodes = [node("a", false, 0), node("b", true, 2), node("c", true, 1)];
        assert_eq!(owner_draining(nodes), Some("b"));
    }

    #[test]
    fn pods_going_from_a_schedulable_node_or_a_kept_off_node_with_none_going_is_no_drain() {
        // A deployment's own rollout terminates pods on a node nobody keeps off; EKS taints
        // every old node when its update starts, before it drains any.
        let nodes = [node("a", false, 3), node("b", true, 0)];
        assert_eq!(owner_draining(nodes), None);
        assert_eq!(owner_draining([]), None);
    }
}
