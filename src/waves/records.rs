//! Completion and gate-failure records: what each agent writes about its pools next to its
//! statuses (in the git notes of the commits it acts on) and what the promotion guard of the
//! later waves reads. Machine-written: unknown fields are ignored, so agents of different
//! versions can read each other's records.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A pool and the channel it follows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolRef {
    pub cluster: String,
    pub pool: String,
    pub channel: String,
}

impl PoolRef {
    pub fn new(cluster: &str, pool: &str, channel: &str) -> Self {
        PoolRef {
            cluster: cluster.into(),
            pool: pool.into(),
            channel: channel.into(),
        }
    }
}

/// A pool finished rotating to `channel@version` (every node on it, pool soak passed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub channel: String,
    pub version: String,
    pub completed_at: DateTime<Utc>,
}

/// A health gate failed while the pool ran or rolled to `channel@version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateFailure {
    pub channel: String,
    pub version: String,
    pub gate: String,
    pub at: DateTime<Utc>,
}

/// Everything recorded about one pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRecord {
    pub cluster: String,
    pub pool: String,
    #[serde(default)]
    pub completions: Vec<Completion>,
    #[serde(default)]
    pub gate_failures: Vec<GateFailure>,
}

/// Records kept per pool: old versions drop out, the guard only asks about recent ones.
pub const KEPT_PER_POOL: usize = 32;

impl PoolRecord {
    pub fn new(cluster: &str, pool: &str) -> Self {
        PoolRecord {
            cluster: cluster.into(),
            pool: pool.into(),
            completions: Vec::new(),
            gate_failures: Vec::new(),
        }
    }

    /// The newest completion of `channel@version`.
    pub fn latest_completion(&self, channel: &str, version: &str) -> Option<DateTime<Utc>> {
        self.completions
            .iter()
            .filter(|c| c.channel == channel && c.version == version)
            .map(|c| c.completed_at)
            .max()
    }

    pub fn completed(mut self, channel: &str, version: &str, at: DateTime<Utc>) -> Self {
        self.record_completion(channel, version, at);
        self
    }

    pub fn gate_failed(
        mut self,
        channel: &str,
        version: &str,
        gate: &str,
        at: DateTime<Utc>,
    ) -> Self {
        self.record_gate_failure(channel, version, gate, at);
        self
    }

    pub fn record_completion(&mut self, channel: &str, version: &str, at: DateTime<Utc>) {
        self.completions.push(Completion {
            channel: channel.into(),
            version: version.into(),
            completed_at: at,
        });
        self.completions.sort_by_key(|c| c.completed_at);
        let excess = self.completions.len().saturating_sub(KEPT_PER_POOL);
        self.completions.drain(..excess);
    }

    pub fn record_gate_failure(
        &mut self,
        channel: &str,
        version: &str,
        gate: &str,
        at: DateTime<Utc>,
    ) {
        self.gate_failures.push(GateFailure {
            channel: channel.into(),
            version: version.into(),
            gate: gate.into(),
            at,
        });
        self.gate_failures.sort_by_key(|g| g.at);
        let excess = self.gate_failures.len().saturating_sub(KEPT_PER_POOL);
        self.gate_failures.drain(..excess);
    }
}
