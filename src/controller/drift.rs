//! Karpenter pools in the reconcile: their NodePool, NodeClass and NodeClaims observed
//! through [`DriftPools`] beside the nodes, and the two writes the drift planner makes
//! (`rotate::drift`) executed through it. Kept out of `controller/mod.rs` and `apply.rs`,
//! which only call in here.

use rota_core::cloud::CloudError;
use rota_core::cloud::karpenter::DriftPools;
use rota_core::fleet::owner::Strategy;
use rota_core::fleet::resolved::DesiredPool;
use rota_core::rotate::{Action, Checkpoint, Observed, Stage};

/// Adds the Karpenter pool's state to `observed` when `desired` is one (strategy `drift`):
/// read on every pass, as the planner decides from it. A node whose image no label carries
/// gets its NodeClaim's `status.imageID`, so the status counts nodes on the target as the
/// planner does.
pub(super) async fn observe(
    drift: Option<&dyn DriftPools>,
    desired: &DesiredPool,
    observed: &mut Observed,
) -> Result<(), CloudError> {
    let (Some(drift), Some(m)) = (drift, desired.group.managed()) else {
        return Ok(());
    };
    if desired.strategy() != Strategy::Drift {
        return Ok(());
    }
    let state = drift.describe(m).await?;
    for n in &mut observed.nodes {
        if n.image_label.is_none() {
            n.image_label = state.image_of_node(&n.name).map(str::to_string);
        }
    }
    observed.drift = Some(state);
    Ok(())
}

/// Which gate evaluation a Karpenter drift is in (`None`: not a drift; the stage decides).
/// Between batches the gates are sampled before the next batch opens (`pre-N`), through a
/// batch's soak (`soak-N`) and the pool soak; not while Karpenter drains, when evicted pods
/// are briefly not Ready by design (as for self-managed batches).
pub(super) fn evaluation(checkpoint: Option<&Checkpoint>) -> Option<String> {
    let cp = checkpoint?;
    let mark = cp.drift.as_ref()?;
    Some(match (&cp.stage, &mark.batch) {
        (Stage::PoolSoak { .. }, _) => "pool".into(),
        (Stage::Done, _) => String::new(),
        _ if cp.rolling_back || cp.halted.is_some() => String::new(),
        (_, None) => format!("pre-{}", cp.batches_started + 1),
        (_, Some(b)) if b.soak_until.is_some() => format!("soak-{}", b.number),
        (_, Some(_)) => String::new(),
    })
}

/// Executes a drift write; `None` when `action` is not one.
pub(super) async fn write(
    drift: Option<&dyn DriftPools>,
    group: &rota_core::cloud::GroupRef,
    action: &Action,
) -> Option<Result<(), CloudError>> {
    let refuse = |call: &'static str, why: &str| {
        CloudError::new(
            rota_core::cloud::CloudErrorKind::Invalid,
            call,
            group,
            why.to_string(),
        )
    };
    let (call, pool) = match (action, group.managed()) {
        (Action::PinNodeClassImage { .. }, m) => ("PatchEC2NodeClass", m),
        (Action::SetDisruptionBudgets { .. }, m) => ("PatchNodePool", m),
        _ => return None,
    };
    let (Some(drift), Some(pool)) = (drift, pool) else {
        return Some(Err(refuse(
            call,
            "not a Karpenter pool this agent drives: nothing is written",
        )));
    };
    Some(match action {
        Action::PinNodeClassImage { node_class, image } => {
            drift.pin_image(pool, node_class, image).await
        }
        Action::SetDisruptionBudgets {
            budgets,
            resource_version,
        } => drift.set_budgets(pool, budgets, resource_version).await,
        _ => unreachable!("matched above"),
    })
}
