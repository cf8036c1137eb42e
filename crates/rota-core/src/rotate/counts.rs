//! A pool's node counts as its status reports them (`total`, `on_target`, `ready`), and the
//! status summary built on them: shared by the self-managed planner (`plan`) and the managed
//! one (`managed`), which each decide the phase and the reason.

use super::lookup::Lookup;
use super::observed::Observed;
use super::outcome::StatusSummary;
use super::phase::Phase;
use super::stop::{self, Reason};
use crate::fleet::resolved::DesiredPool;

/// Node counts for the status.
pub(super) struct Counts {
    total: u32,
    on_target: u32,
    ready: u32,
}

impl Counts {
    pub(super) fn of(desired: &DesiredPool, obs: &Observed) -> Counts {
        // A node's image by hash, not by a scan of the group per node (`rotate::lookup`).
        let obs = Lookup::new(obs);
        Counts {
            total: obs.nodes.len() as u32,
            on_target: obs
                .nodes
                .iter()
                .filter(|n| obs.image_of(n).as_deref() == Some(desired.image.as_str()))
                .count() as u32,
            ready: obs.nodes.iter().filter(|n| n.ready).count() as u32,
        }
    }

    pub(super) fn status(
        &self,
        phase: Phase,
        reason: Reason,
        message: String,
        stop: Option<stop::StopNote>,
    ) -> StatusSummary {
        StatusSummary {
            phase,
            reason: reason.as_str(),
            message,
            stop,
            total: self.total,
            on_target: self.on_target,
            ready: self.ready,
            remaining: None,
        }
    }
}
