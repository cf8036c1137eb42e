//! An owner's refusal of rota's request for a managed pool (an `Invalid` answer to the
//! owner's update or to a blue-green twin: a node image AKS does not offer, a version or
//! image type GKE refuses), remembered between passes and handed to the planner as
//! `Observed::refused`, which then does not send the same request again and pauses the
//! pool with `OwnerRefused`. The controller remembers it between passes, and the status
//! composer keeps it in the NodePoolRotation's status while the pool is paused on it
//! (`status.refused`): a restarted controller (or another replica) reads it there and does
//! not ask the owner once more.

use rota_core::cloud::CloudErrorKind;
use rota_core::rotate::Refusal;

use super::apply::ApplyError;

/// The refusal `e` is, if it is one: a cloud call that answered `Invalid`. Which request it
/// refused is its action's text; the planner matches it against the request it would send.
pub(super) fn of(e: &ApplyError) -> Option<Refusal> {
    match e {
        ApplyError::Cloud { action, source } if source.kind == CloudErrorKind::Invalid => {
            Some(Refusal {
                action: action.clone(),
                why: source.message.clone(),
            })
        }
        _ => None,
    }
}
