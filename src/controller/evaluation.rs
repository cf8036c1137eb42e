//! Which gate evaluation a pool is in, so the controller samples its health gates then and
//! only then (a change of evaluation starts the samples afresh): the batch stages of a
//! self-managed or blue-green rotation, a Karpenter drift's batches (`drift`), and a
//! `managedUpdate: service` pool's owner update, which has no batches of rota's: the gates
//! are sampled before the update starts (`pre-1`) and all through it (`update`), so a gate
//! failing while the owner replaces nodes stops the pool then, not only once the update
//! has ended.

use rota_core::fleet::owner::Strategy;
use rota_core::fleet::resolved::DesiredPool;
use rota_core::rotate::{Checkpoint, Phase, Stage};

use crate::kube::crd::NodePoolRotation;

/// The evaluation of stages whose gates are not sampled yet (their verdict is pending).
pub(super) const NOT_YET: &str = "not-yet";

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
            _ => "update".into(),
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
