//! The phase of a pool's rotation ([`Phase`]), as the NodePoolRotation status and
//! `kubectl get` show it. Every planner decides one; it lives below them all.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The phase of a pool's rotation, as the NodePoolRotation status shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Not planned yet (or not managed: `mode: ignore`).
    #[default]
    Pending,
    /// Nothing under way; waiting for a window or the surge budget.
    Waiting,
    /// A batch is under way.
    Rotating,
    /// A batch or the pool is soaking with gates.
    Soaking,
    /// Stopped until a human acts or a blocker goes away; the message says which.
    Paused,
    /// Cannot proceed (rolled back after a failed gate, or invalid policy).
    Failed,
    /// Every node that should be runs the desired image.
    Succeeded,
    /// Going back to the image the pool came from.
    RollingBack,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
