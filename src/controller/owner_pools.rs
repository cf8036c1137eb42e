//! A managed pool's owner at the controller's edge: what the planner needs from it before a
//! pass (`observe`: the owner's state for `managedUpdate: service`, the two pools of a
//! `blueGreen` move and both pools' nodes) and the owner calls a `blueGreen` plan makes
//! (`execute`). Every call goes through `cloud::managed::OwnerPools`; nothing here writes a
//! template or a group's capacity behind the owner.

use rota_core::cloud::managed::{OwnerPools, pool_label, renamed};
use rota_core::fleet::owner::Strategy;
use rota_core::fleet::resolved::DesiredPool;
use rota_core::rotate::{Action, Checkpoint, Observed};

use crate::cloud::{CloudError, CloudErrorKind, GroupRef};
use crate::kube::index::ClusterIndex;
use crate::kube::observe::{ObserveError, pool_nodes};

/// Fill in what the owner says about `desired`'s pool: its state (`service`), or the pools
/// of the blue-green move the checkpoint names (the repo's pool before the first move). An
/// owner without the blue-green calls leaves `pools` empty: the pool is reported, not acted
/// on.
pub(super) async fn observe(
    observed: &mut Observed,
    index: &ClusterIndex,
    desired: &DesiredPool,
    owners: &dyn OwnerPools,
    checkpoint: Option<&Checkpoint>,
) -> Result<(), ObserveError> {
    let Some(base) = desired.group.managed() else {
        return Ok(());
    };
    if desired.strategy() != Strategy::BlueGreen {
        observed.owner = Some(owners.describe(base).await?);
        return Ok(());
    }
    if !owners.blue_green() {
        return Ok(());
    }
    let names = match checkpoint.and_then(|c| c.blue_green.as_ref()) {
        Some(m) => {
            let names = vec![m.old_pool.clone(), m.twin_pool.clone()];
            for name in &names {
                if let Some(m) = owners.members(&renamed(base, name)).await? {
                    observed.pools.push(m);
                }
            }
            names
        }
        None => found_again(observed, base, owners).await?,
    };
    // A selector on the owner's pool label (EKS's node group, GKE's node pool, AKS's agent
    // pool) picks one pool's nodes: the pool's are those of every pool of the move, each
    // picked by its own name.
    let label = pool_label(base.owner());
    if let Some((label, own)) = label.and_then(|l| desired.node_selector.get(l).map(|v| (l, v))) {
        let mut nodes = Vec::new();
        for name in names.iter().chain(std::iter::once(own)) {
            let mut selector = desired.node_selector.clone();
            selector.insert(label.to_string(), name.clone());
            for n in pool_nodes(&index.read(), &selector)? {
                if !nodes
                    .iter()
                    .any(|m: &rota_core::rotate::ObservedNode| m.name == n.name)
                {
                    nodes.push(n);
                }
            }
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        observed.nodes = nodes;
    }
    Ok(())
}

/// No move recorded (a first move, or a status lost after a twin was created): the repo's
/// pool and rota's twins found by their label, a twin's twin too (a second move's twin is
/// labelled with the first twin's name), at most [`MAX_GENERATIONS`] deep. The planner
/// resumes a move it finds this way (`rotate::bluegreen`) instead of creating a second twin.
async fn found_again(
    observed: &mut Observed,
    base: &rota_core::fleet::owner::ManagedGroup,
    owners: &dyn OwnerPools,
) -> Result<Vec<String>, ObserveError> {
    let mut names = vec![base.name().to_string()];
    if let Some(m) = owners.members(base).await? {
        observed.pools.push(m);
    }
    let mut from = vec![base.clone()];
    for _ in 0..MAX_GENERATIONS {
        let mut next = Vec::new();
        for pool in &from {
            for twin in owners.twins_of(pool).await? {
                if !names.iter().any(|n| n == twin.pool.name()) {
                    names.push(twin.pool.name().to_string());
                    next.push(twin.pool.clone());
                    observed.pools.push(twin);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        from = next;
    }
    Ok(names)
}

/// How many moves back rota looks for its twins when no move is recorded.
const MAX_GENERATIONS: usize = 4;

/// Run one of a blue-green plan's owner calls. A pool whose owner this agent does not drive
/// is refused, never written through the self-managed path.
pub(super) async fn execute(
    owners: Option<&dyn OwnerPools>,
    group: &GroupRef,
    action: &Action,
) -> Result<(), CloudError> {
    let refuse = |why: &str| {
        CloudError::new(
            CloudErrorKind::Invalid,
            "OwnerPools",
            group,
            why.to_string(),
        )
    };
    let managed = group
        .managed()
        .ok_or_else(|| refuse("not a managed pool"))?;
    let o = match owners {
        Some(o) if o.owner() == managed.owner() && o.blue_green() => o,
        _ => return Err(refuse("this agent does not drive the pool's owner")),
    };
    match action {
        Action::CreateTwinPool { request } => o.create_twin(request).await,
        Action::SetPoolSize { pool, desired, max } => o.set_size(pool, *desired, *max).await,
        Action::RemovePoolNode {
            pool, instance_id, ..
        } => o.remove_node(pool, instance_id).await,
        Action::DeletePool { pool } => o.delete_pool(pool).await,
        other => Err(refuse(&format!("{other} is not an owner call"))),
    }
}
