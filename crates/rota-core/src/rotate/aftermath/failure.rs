//! What rota tells of a pass that failed, as data: the Warning an action that failed posts
//! on the pool's NodePoolRotation (the error names the action: a cloud call refused, a
//! Kubernetes write that failed, an eviction a PodDisruptionBudget refused, a termination
//! that its re-check right before the call refused), and the alert an error that retrying
//! will not fix raises, once per reason (`stuck::ErrorTracker::record` decides when).
//!
//! Both were posted from the middle of the controller (`apply` as the action failed, the
//! controller's error path after the pass); as data they come out of [`super::of`] with the
//! pass's other Events, in the order they are posted, so the model world's golden logs
//! record them and a change in their wording is a reviewed diff.

use super::events::Event;
use crate::errors::Classified;

/// The note of an alert: the error itself is in the status message, which says more than
/// an Event's 1 kB and stays while the pool is stopped.
pub const ALERT_NOTE: &str = "an error that retrying will not fix; see the status message";

/// An action of the pass that failed (`controller::apply` stops at the first).
#[derive(Clone, Debug, PartialEq)]
pub struct ActionFailed {
    /// The error, classified once (`rota_core::errors`): its reason is the Event's.
    pub error: Classified,
    /// The error as rota words it; it names the action (`set image ami-2: SetLaunchTemplate
    /// on aws:... failed (throttled): Rate exceeded`).
    pub message: String,
}

impl ActionFailed {
    /// The Warning it posts: its reason, its message.
    pub fn event(&self) -> Event {
        Event::new(true, self.error.reason, "Rotate", self.message.clone())
    }
}

/// The alert of an error that retrying will not fix (a Warning naming its reason).
pub fn alert(reason: &str) -> Event {
    Event::new(true, reason, "Rotate", ALERT_NOTE.to_string())
}
