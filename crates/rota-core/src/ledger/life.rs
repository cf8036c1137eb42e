//! One node's life on one image ([`Life`]): one line of the ledger, and how it ended
//! ([`Left`]). The diff, the departures and the evidence all read it; it lives below them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How a life ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Left {
    /// rota cordoned and drained it (`drainedAt`), then the node went away: rotated out.
    Rotated,
    /// Cordoned by someone else, then gone (a person, an autoscaler's scale-down).
    Drained,
    /// rota terminated its instance without draining it first (a surge node withdrawn when
    /// its batch was abandoned, a node that never turned Ready replaced).
    Terminated,
    /// Gone without rota's doing and without a cordon: terminated behind rota's back, or
    /// lost.
    Lost,
}

impl Left {
    pub fn as_str(self) -> &'static str {
        match self {
            Left::Rotated => "rotated",
            Left::Drained => "drained",
            Left::Terminated => "terminated",
            Left::Lost => "lost",
        }
    }
}

/// One node's life on one image: one line of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Life {
    pub cluster: String,
    pub pool: String,
    pub node: String,
    /// The instance ID (from the node's providerID).
    pub instance: String,
    /// The image ID the instance booted.
    pub image: String,
    /// `channel@version` of the image, where the fleet repo names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// When it was first seen Ready (or, with `joinedBefore`, when the ledger first saw it).
    pub joined: DateTime<Utc>,
    /// Set when the node already ran before the ledger saw it join: `adoption` (its pool was
    /// adopted, or rota met it running) or `restart` (it joined while no agent recorded).
    /// `joined` is then an upper bound, not the moment it joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined_before: Option<String>,
    /// When rota (or someone) cordoned it for a drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained_at: Option<DateTime<Utc>>,
    /// Who cordoned it (`rota.dev/cordoned-by`), when rota did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained_by: Option<String>,
    /// When it was first seen gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_how: Option<Left>,
    /// The rotation that drained or terminated it (`pool:channel@version`, or `pool:rollback
    /// to channel@version`), when rota did: from rota's own actions, so known even when the
    /// node went between two of the agent's looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_rotation: Option<String>,
    /// The desired state it joined under (`pool:channel@version`, or `pool:rollback to
    /// channel@version`), when it joined on that image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<String>,
    /// The fleet commit in force for its pool when it joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Life {
    /// What identifies a life: a node name reused by a new instance is a new life.
    pub fn key(&self) -> (String, String) {
        (self.node.clone(), self.instance.clone())
    }

    /// `[joined, left)` overlaps `[from, to)` (open ends unbounded).
    pub fn overlaps(&self, from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> bool {
        let ends_after = match (self.left, from) {
            (Some(l), Some(f)) => l >= f,
            _ => true,
        };
        let starts_before = to.is_none_or(|t| self.joined < t);
        ends_after && starts_before
    }

    /// The line as written (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("serialisable")
    }
}
