//! An owner's refusal of rota's request for a managed pool (an `Invalid` answer to the
//! owner's update or to a blue-green twin: a node image AKS does not offer, a version or
//! image type GKE refuses), remembered between passes and handed to the planner as
//! `Observed::refused`, which then does not send the same request again and pauses the
//! pool with `OwnerRefused`. The memory is the controller's own (a restart forgets it, and
//! the request is sent once more); the service planner records the halt in the checkpoint,
//! so even that does not repeat for `managedUpdate: service`.

use std::borrow::Cow;

use rota_core::cloud::CloudErrorKind;
use rota_core::rotate::{Observed, Refusal};

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

/// `observed` with the pool's remembered refusal (a copy only when there is one).
pub(super) fn observed_with<'a>(
    observed: &'a Observed,
    refused: Option<&Refusal>,
) -> Cow<'a, Observed> {
    match refused {
        Some(r) => Cow::Owned(Observed {
            refused: Some(r.clone()),
            ..observed.clone()
        }),
        None => Cow::Borrowed(observed),
    }
}
