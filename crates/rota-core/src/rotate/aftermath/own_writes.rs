//! rota's own cloud writes, applied to the pool's kept describe (pure).
//!
//! The pass after rota changes a group used to describe it again only to see its own change
//! (a surge's capacity, a terminated instance): two describes a batch (issue 25, item 4).
//! After every action of a plan succeeded, the kept describe is brought up to what those
//! actions did, as a consistent describe would show them, and is reused under the same rules
//! as any kept describe (`controller::Described`): a plan made from it stands only if it
//! calls the cloud for nothing and keeps the checkpoint, so every capacity, termination,
//! template change and checkpoint is still planned from a describe of its own pass
//! (invariants 1 and 4), and a new leadership term drops it (7).
//!
//! What such a describe cannot show is what the cloud does *because of* the write: the
//! instances a raised capacity launches, or which instances a lowered one removes. The
//! first is seen as any change the cloud makes on its own: when the new instance's node
//! registers (a node joining the pool drops the kept describe) or a wait's reuse bound
//! later (`WAIT_REUSE`, `max(--describe-lag, 15s)`). The second is the cloud's choice, so a
//! lowered capacity is not applied: the next pass describes again. So is a surge withdrawn
//! (`WithdrawSurge` describes again itself and may do nothing) and a termination of an
//! instance the describe does not list.

use crate::cloud::{GroupState, Lifecycle};
use crate::rotate::action::{Action, Planned};

/// Whether a plan made from the pool's kept describe may stand: it calls the cloud for
/// nothing and leaves the checkpoint as it was (`previous`, the one the pass read). Any other
/// plan is made again from a fresh describe, so every cloud write and every checkpoint
/// written is decided from a describe of its own pass (`controller::Described` says why
/// that is safe).
pub fn may_stand_on_kept_describe(
    plan: &crate::rotate::outcome::Plan,
    previous: Option<&crate::rotate::checkpoint::Checkpoint>,
) -> bool {
    !calls_cloud(plan) && plan.checkpoint.as_ref() == previous
}

/// Whether a plan writes to the cloud group or the pool's owner (a managed pool's API,
/// Karpenter's objects). Every action is named: a new one must say which side it acts on.
pub fn calls_cloud(plan: &crate::rotate::outcome::Plan) -> bool {
    plan.actions.iter().any(|a| match a.action {
        Action::SetImage { .. }
        | Action::SetCapacity { .. }
        | Action::SetMax { .. }
        | Action::Terminate { .. }
        | Action::TerminateForReplacement { .. }
        | Action::WithdrawSurge { .. }
        | Action::StartOwnerUpdate { .. }
        | Action::PinNodeClassImage { .. }
        | Action::SetDisruptionBudgets { .. }
        | Action::CreateTwinPool { .. }
        | Action::SetPoolSize { .. }
        | Action::RemovePoolNode { .. }
        | Action::DeletePool { .. } => true,
        Action::Cordon { .. }
        | Action::Uncordon { .. }
        | Action::Evict { .. }
        | Action::DeletePod { .. }
        | Action::SetScaleDownDisabled { .. } => false,
    })
}

/// `group` after `actions`, all of which succeeded, as far as their effect is rota's own;
/// `None` when one's effect is the cloud's to choose (the next pass describes again).
pub fn applied(group: &GroupState, actions: &[Planned]) -> Option<GroupState> {
    let mut g = group.clone();
    for p in actions {
        match &p.action {
            Action::SetImage { image } => g.template_image = image.clone(),
            Action::SetCapacity { desired, max } => {
                if *desired < g.desired {
                    return None;
                }
                if let Some(m) = max {
                    g.max = *m;
                }
                g.desired = *desired;
            }
            // The clouds never set the maximum below the desired capacity (`SetMax`).
            Action::SetMax { max } => g.max = (*max).max(g.desired),
            Action::Terminate { instance_id, .. } => {
                let i = g.instances.iter_mut().find(|i| i.id == *instance_id)?;
                // Terminating already: the decrement was made by the first request.
                if i.lifecycle != Lifecycle::Terminating {
                    i.lifecycle = Lifecycle::Terminating;
                    g.desired = g.desired.saturating_sub(1);
                }
            }
            // The owner chooses what its update does, and the group launches the replacement
            // of an instance removed without a decrement: the describe is dropped.
            Action::WithdrawSurge { .. }
            | Action::TerminateForReplacement { .. }
            | Action::StartOwnerUpdate { .. }
            | Action::PinNodeClassImage { .. }
            | Action::SetDisruptionBudgets { .. }
            | Action::CreateTwinPool { .. }
            | Action::SetPoolSize { .. }
            | Action::RemovePoolNode { .. }
            | Action::DeletePool { .. } => return None,
            Action::Cordon { .. }
            | Action::Uncordon { .. }
            | Action::Evict { .. }
            | Action::DeletePod { .. }
            | Action::SetScaleDownDisabled { .. } => {}
        }
    }
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{GroupRef, Instance};

    fn group() -> GroupState {
        GroupState {
            group: GroupRef::Aws {
                region: "us-east-1".into(),
                auto_scaling_group: "g".into(),
            },
            desired: 4,
            min: 0,
            max: 4,
            template_image: "ami-old".into(),
            instances: (1..=4)
                .map(|n| Instance {
                    id: format!("i-{n}"),
                    provider_id: format!("aws:///us-east-1a/i-{n}"),
                    image: "ami-old".into(),
                    zone: "us-east-1a".into(),
                    lifecycle: Lifecycle::InService,
                    launch_error: None,
                })
                .collect(),
        }
    }

    fn planned(action: Action) -> Planned {
        Planned {
            action,
            reason: "test".into(),
        }
    }

    #[test]
    fn a_surge_shows_its_image_and_capacity_but_no_instance_the_cloud_has_not_listed() {
        let g = applied(
            &group(),
            &[
                planned(Action::SetImage {
                    image: "ami-new".into(),
                }),
                planned(Action::SetCapacity {
                    desired: 6,
                    max: Some(6),
                }),
            ],
        )
        .unwrap();
        assert_eq!((g.desired, g.max), (6, 6));
        assert_eq!(g.template_image, "ami-new");
        assert_eq!(g.instances, group().instances);
    }

    #[test]
    fn a_termination_shows_the_instance_terminating_and_the_capacity_decremented_once() {
        let t = planned(Action::Terminate {
            instance_id: "i-2".into(),
            node: Some("n2".into()),
        });
        let g = applied(&group(), std::slice::from_ref(&t)).unwrap();
        assert_eq!(g.desired, 3);
        assert_eq!(g.instances[1].lifecycle, Lifecycle::Terminating);
        // Sent again (a retry after a crash): the first request decremented already.
        let again = applied(&g, &[t]).unwrap();
        assert_eq!(again, g);
    }

    #[test]
    fn what_the_cloud_chooses_is_left_to_a_describe() {
        // A lowered capacity: the cloud picks the instances that go.
        let lower = planned(Action::SetCapacity {
            desired: 3,
            max: None,
        });
        assert_eq!(applied(&group(), &[lower]), None);
        // A withdrawn surge checks the group again itself and may do nothing.
        let withdraw = planned(Action::WithdrawSurge {
            desired: 4,
            instances: vec![],
        });
        assert_eq!(applied(&group(), &[withdraw]), None);
        // An instance the describe does not list.
        let unknown = planned(Action::Terminate {
            instance_id: "i-9".into(),
            node: None,
        });
        assert_eq!(applied(&group(), &[unknown]), None);
    }

    #[test]
    fn the_maximum_never_goes_below_the_desired_capacity_and_node_writes_change_nothing() {
        let g = applied(
            &group(),
            &[
                planned(Action::SetMax { max: 2 }),
                planned(Action::Cordon {
                    node: "n1".into(),
                    owner: "general/batch-1".into(),
                }),
            ],
        )
        .unwrap();
        assert_eq!((g.desired, g.max), (4, 4));
        assert_eq!(g.instances, group().instances);
    }
}
