//! Which planner plans a pool: the batch planner for a self-managed group
//! ([`super::plan::plan_group`]), the owner's update for a managed pool under
//! `managedUpdate: service` ([`super::managed`]), a Karpenter pool's paced drift
//! ([`super::drift`]), a twin pool moved in batches under
//! `blueGreen` ([`super::bluegreen`]), or none (`mode: ignore`, an owner this agent does not
//! drive). Apart from `plan.rs` so the planners below it import nothing that imports them.

use chrono::{DateTime, Utc};

use super::checkpoint::Checkpoint;
use super::counts::Counts;
use super::observed::Observed;
use super::operator::Request;
use super::outcome::Plan;
use super::phase::Phase;
use super::plan::plan_group;
use super::stop::{self, Reason};
use crate::fleet::resolved::{DesiredPool, Mode};

/// Plan one step of the rotation of one pool.
pub fn plan(
    desired: &DesiredPool,
    observed: &Observed,
    checkpoint: Option<&Checkpoint>,
    now: DateTime<Utc>,
) -> Plan {
    plan_with(desired, observed, checkpoint, None, now).0
}

/// [`plan`] with an operator's request (`rota ctl`, see [`super::operator`]) as one more
/// input. Also returns what the request did, or why it did nothing (no rotation under way).
pub fn plan_with(
    desired: &DesiredPool,
    observed: &Observed,
    checkpoint: Option<&Checkpoint>,
    request: Option<&Request>,
    now: DateTime<Utc>,
) -> (Plan, Option<String>) {
    let mut steered = None;
    let plan = plan_steered(desired, observed, checkpoint, request, &mut steered, now);
    let steered = match (request, steered) {
        (Some(r), None)
            if plan
                .checkpoint
                .as_ref()
                .and_then(|c| c.operator_request.as_deref())
                != Some(r.id.as_str()) =>
        {
            Some(format!(
                "{}: no rotation under way, nothing to steer",
                r.describe()
            ))
        }
        (_, s) => s,
    };
    (plan, steered)
}

/// A managed pool (EKS, Karpenter, GKE, AKS): its owner holds the template, and this
/// planner rotates only groups whose template it writes. Until an adapter drives the owner's
/// API, the pool is reported, never acted on: no action, the checkpoint as it was.
fn not_driven(
    desired: &DesiredPool,
    managed: &crate::fleet::owner::ManagedGroup,
    counts: &Counts,
    checkpoint: Option<&Checkpoint>,
) -> Plan {
    let owner = managed.owner();
    let message = format!(
        "{} {} of cluster {} is changed only through {}'s API, which this agent does not drive yet: nothing is written behind it",
        owner.group_key(),
        managed.name(),
        managed.cluster(),
        owner.service()
    );
    let note = stop::explain(
        Reason::ManagedPoolNotSupported,
        &message,
        &stop::Context {
            cluster: &desired.cluster,
            pool: &desired.name,
            ..Default::default()
        },
    );
    Plan {
        actions: Vec::new(),
        dry_run: Vec::new(),
        checkpoint: checkpoint.cloned(),
        status: counts.status(
            Phase::Pending,
            Reason::ManagedPoolNotSupported,
            message,
            note,
        ),
    }
}

fn plan_steered(
    desired: &DesiredPool,
    observed: &Observed,
    checkpoint: Option<&Checkpoint>,
    request: Option<&Request>,
    steered: &mut Option<String>,
    now: DateTime<Utc>,
) -> Plan {
    let counts = Counts::of(desired, observed);
    if desired.mode == Mode::Ignore {
        return Plan {
            actions: Vec::new(),
            dry_run: Vec::new(),
            checkpoint: checkpoint.cloned(),
            status: counts.status(
                Phase::Pending,
                Reason::NotManaged,
                "mode ignore: rota does not touch this pool".into(),
                None,
            ),
        };
    }
    if let Some(managed) = desired.group.managed() {
        // Driven through the owner's API when the edge described the owner and the
        // strategy is the owner's own update, or listed the pools of a blue-green move;
        // reported, never acted on, otherwise.
        if let (Some(state), crate::fleet::owner::Strategy::Drift) =
            (&observed.drift, desired.strategy())
        {
            // An operator's request (`rota ctl`) steers the drift under way like any rotation.
            let mut steering = checkpoint.cloned();
            if let (Some(cp), Some(r)) = (steering.as_mut(), request) {
                *steered = super::drift::steer(cp, r, now);
            }
            let cp = if steered.is_some() {
                steering.as_ref()
            } else {
                checkpoint
            };
            return super::drift::plan_drift(desired, observed, state, cp, now);
        }
        return match (&observed.owner, desired.strategy()) {
            (Some(owner), crate::fleet::owner::Strategy::Service) => {
                super::managed::plan_service(desired, observed, owner, checkpoint, now)
            }
            (_, crate::fleet::owner::Strategy::BlueGreen) if !observed.pools.is_empty() => {
                super::bluegreen::plan(desired, observed, checkpoint, request, steered, now)
            }
            _ => not_driven(desired, managed, &counts, checkpoint),
        };
    }
    plan_group(desired, observed, checkpoint, request, steered, now)
}
