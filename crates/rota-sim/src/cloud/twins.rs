//! The life of a GKE node pool or an AKS agent pool as `managedUpdate: blueGreen` drives
//! it, shared by the two simulated services (each serves it in its own JSON, see
//! `gke_twins.rs` and `aks_twins.rs`): a twin created in the shape of the pool it is made
//! from (its zones), labelled with the pool it came from, `Creating` for [`CREATE_TIME`] and
//! then `Active`; resized (absolute, refused while the pool is not active or its owner is
//! upgrading it); one named instance removed with the pool's size lowered by one (GKE: the
//! node pool's MIG `deleteInstances`; AKS: `deleteMachines`); deleted (`Deleting` for
//! [`DELETE_TIME`], then gone; refused while an upgrade runs, as both services refuse).
//!
//! A node removed here is not drained by the service (its own updates drain, see
//! `service_drain`): rota drains a twin move's nodes before it removes them, so nothing is
//! left on them to drain.

use tokio::time::Instant;

use super::account::{GroupSpec, Inner, SimCloud, SimGroup};
use super::owner_state::{Life, PoolLife};
use rota_core::cloud::managed::{OwnerPoolMembers, PoolStatus, TwinRequest};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef, Lifecycle};

/// How long the simulated services take to create a node or agent pool (before its first
/// node launches).
pub const CREATE_TIME: std::time::Duration = std::time::Duration::from_secs(180);
/// How long they take to delete an empty one.
pub const DELETE_TIME: std::time::Duration = std::time::Duration::from_secs(90);

/// A pool's own life: `Creating` becomes `Active`, `Deleting` becomes gone.
pub(super) fn lifecycle(group: &mut SimGroup, now: Instant) -> Life {
    let Some(life) = group.life.as_mut() else {
        return Life::Steady;
    };
    match (life.status, life.due) {
        (_, Some(due)) if due > now => Life::Due(due),
        (PoolStatus::Creating, Some(_)) => {
            life.status = PoolStatus::Active;
            life.due = None;
            Life::Changed
        }
        (PoolStatus::Deleting, Some(_)) => Life::Gone,
        _ => Life::Steady,
    }
}

/// A conflict, in the service's own words (`code: message`), as an `Invalid` error.
pub(super) fn refused(call: &'static str, group: &GroupRef, code: &str, why: String) -> CloudError {
    CloudError::new(
        CloudErrorKind::Invalid,
        call,
        group,
        format!("{code}: {why}"),
    )
}

impl SimGroup {
    /// The size the owner keeps the pool at (GKE's node count, AKS's `count`).
    fn set_owner_size(&mut self, n: u32) {
        if let Some(np) = self.gke.as_mut() {
            np.set_size(n);
        }
        if let Some(ap) = self.aks.as_mut() {
            ap.set_size(n);
        }
    }

    /// Whether the owner is upgrading the pool now.
    fn upgrading(&self) -> bool {
        self.gke.as_ref().is_some_and(|np| np.busy()) || self.aks.as_ref().is_some_and(|a| a.busy())
    }
}

/// What [`check_create`] found under the twin's name.
pub(super) enum Existing {
    /// Nothing: create it, in these zones.
    Create(Vec<String>),
    /// rota's own twin of the same pool: nothing to do (a repeated call after a lost answer).
    Ours,
}

/// Before a twin is created: refused if a pool of its name is not rota's twin of
/// `req.from` (`code` is the service's word for it).
pub(super) fn check_create(
    inner: &Inner,
    call: &'static str,
    req: &TwinRequest,
    code: &str,
) -> Result<Existing, CloudError> {
    let (from, twin) = (
        GroupRef::Managed(req.from.clone()),
        GroupRef::Managed(req.twin.clone()),
    );
    if let Some(g) = inner.groups.get(&twin) {
        let ours = g.life.as_ref().and_then(|l| l.twin_of.as_deref()) == Some(req.from.name());
        return if ours {
            Ok(Existing::Ours)
        } else {
            Err(refused(
                call,
                &twin,
                code,
                format!("a pool named {} already exists", req.twin.name()),
            ))
        };
    }
    Ok(Existing::Create(inner.groups[&from].zones.clone()))
}

/// Resize `group` to `desired` nodes (its maximum at least that).
pub(super) fn resize(
    inner: &mut Inner,
    call: &'static str,
    group: &GroupRef,
    desired: u32,
    max: u32,
    code: &str,
) -> Result<bool, CloudError> {
    let g = inner.groups.get_mut(group).expect("checked by call");
    let active = g
        .life
        .as_ref()
        .is_none_or(|l| l.status == PoolStatus::Active);
    if !active || g.upgrading() {
        let status = g.life.as_ref().map_or(PoolStatus::Active, |l| l.status);
        let why = format!("the pool is {status:?} or upgrading: try again once it is done");
        return Err(refused(call, group, code, why));
    }
    let changed = (g.desired, g.max) != (desired, max.max(desired));
    g.set_owner_size(desired);
    g.desired = desired;
    g.max = max.max(desired);
    Ok(changed)
}

/// Remove instance `id` from `group`, its size lowered by one; an instance already gone or
/// going answers Ok (nothing changes).
pub(super) fn remove(
    inner: &mut Inner,
    group: &GroupRef,
    id: &str,
    now: Instant,
) -> Result<bool, CloudError> {
    let mut g = inner.groups.remove(group).expect("checked by call");
    let live = g
        .instances
        .iter()
        .position(|i| i.public.id == id && i.public.lifecycle != Lifecycle::Terminating);
    if let Some(i) = live {
        let mut inst = g.instances[i].clone();
        inner.begin_termination(&g, &mut inst, now);
        g.instances[i] = inst;
        g.desired = g.desired.saturating_sub(1);
        let desired = g.desired;
        g.set_owner_size(desired);
    }
    inner.groups.insert(group.clone(), g);
    Ok(live.is_some())
}

/// Start deleting `group`: `Deleting`, then gone; refused while an upgrade runs.
pub(super) fn delete(
    inner: &mut Inner,
    call: &'static str,
    group: &GroupRef,
    code: &str,
    now: Instant,
) -> Result<bool, CloudError> {
    let g = inner.groups.get_mut(group).expect("checked by call");
    if g.life
        .as_ref()
        .is_some_and(|l| l.status == PoolStatus::Deleting)
    {
        return Ok(false);
    }
    if g.upgrading() {
        let why = "an upgrade of the pool is in progress".to_string();
        return Err(refused(call, group, code, why));
    }
    let life = g.life.get_or_insert_with(PoolLife::active);
    life.status = PoolStatus::Deleting;
    life.due = Some(now + DELETE_TIME);
    // The service drains and deletes what is left; rota deletes only emptied pools.
    g.desired = 0;
    Ok(true)
}

/// The pool's members as `blueGreen` plans from them.
pub(super) fn members(
    g: &SimGroup,
    pool: &rota_core::fleet::owner::ManagedGroup,
) -> OwnerPoolMembers {
    let life = g.life.clone().unwrap_or_else(PoolLife::active);
    let status = match life.status {
        PoolStatus::Active if g.upgrading() => PoolStatus::Updating,
        s => s,
    };
    OwnerPoolMembers {
        pool: pool.clone(),
        status,
        image: g.template_image.clone(),
        desired: g.desired,
        max: g.max,
        instances: g.state().instances,
        issues: Vec::new(),
        twin_of: life.twin_of,
        os: Default::default(),
    }
}

impl SimCloud {
    /// Create the twin `req` asks for (in `zones`), `Creating` until [`CREATE_TIME`] has
    /// passed, labelled with the pool it is made from.
    pub(super) fn create_twin_group(
        &self,
        req: &TwinRequest,
        zones: Vec<String>,
    ) -> Result<(), CloudError> {
        let twin = GroupRef::Managed(req.twin.clone());
        let mut spec = GroupSpec::new(twin.clone(), req.desired, req.image.clone())
            .with_max(req.max.max(req.desired).max(1));
        spec.zones = zones;
        self.create_group(spec)?;
        let mut inner = self.inner.lock().unwrap();
        let g = inner.groups.get_mut(&twin).expect("just created");
        g.life = Some(PoolLife {
            status: PoolStatus::Creating,
            due: Some(Instant::now() + CREATE_TIME),
            twin_of: Some(req.from.name().to_string()),
        });
        inner.twins_created.push(req.twin.name().to_string());
        drop(inner);
        self.changed();
        Ok(())
    }

    /// Every GKE node pool and AKS agent pool a blue-green twin request created, in order
    /// (tests: "never a second twin").
    pub fn twins_created(&self) -> Vec<String> {
        self.inner.lock().unwrap().twins_created.clone()
    }
}
