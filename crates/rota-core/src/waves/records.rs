//! Completion and gate-failure records: what each agent writes about its pools next to its
//! statuses (in the git notes of the commits it acts on) and what the promotion guard of the
//! later waves reads. Machine-written: unknown fields are ignored, so agents of different
//! versions can read each other's records.
//!
//! An image that never boots (the rotation halts with "image X did not boot: ...") is recorded
//! as a gate failure under the reserved gate name [`DID_NOT_BOOT`], not as a new field: an
//! older agent then reads it as what it is for the guard (a failure on that version that
//! holds the later waves), and keeps it when it rewrites its own record, where it would drop
//! a field it does not know. The name cannot be a HealthGate's (those are DNS-1123 labels), so
//! it never stands for a gate of the fleet.

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

/// A pool runs `channel@version` on every node: it finished rotating to it (pool soak passed),
/// or the agent found it already there ([`CompletionKind::Adopted`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub channel: String,
    pub version: String,
    pub completed_at: DateTime<Utc>,
    /// Absent in records written before adoption existed (and for rotations): `rotated`. An
    /// older agent that ignores the field reads an adoption as a completion.
    #[serde(default, skip_serializing_if = "CompletionKind::is_rotated")]
    pub kind: CompletionKind,
}

/// How a pool came to run a version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CompletionKind {
    /// rota rotated the pool to it (its soak counts from `completedAt`).
    #[default]
    Rotated,
    /// The pool already ran it, every node, when its agent first met the pool: no rotation
    /// happened, so there is nothing to soak (`completedAt` is when it was observed).
    Adopted,
}

impl CompletionKind {
    pub fn is_rotated(&self) -> bool {
        *self == CompletionKind::Rotated
    }
}

/// The gate name of a [`GateFailure`] that says the image did not boot: its new nodes never got
/// Ready, over every attempt. Spaces and parentheses: no HealthGate can be named so. An older
/// agent shows it as `gate (did not boot) failed on ...`.
pub const DID_NOT_BOOT: &str = "(did not boot)";

/// A health gate failed while the pool ran or rolled to `channel@version` (or, with the gate
/// [`DID_NOT_BOOT`], the version's image did not boot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateFailure {
    pub channel: String,
    pub version: String,
    pub gate: String,
    pub at: DateTime<Utc>,
}

impl GateFailure {
    /// The image did not boot (rather than a health gate failing).
    pub fn did_not_boot(&self) -> bool {
        self.gate == DID_NOT_BOOT
    }

    /// What failed, for a sentence: `gate error-rate failed` or `the image did not boot`.
    pub fn what(&self) -> String {
        if self.did_not_boot() {
            "the image did not boot".to_string()
        } else {
            format!("gate {} failed", self.gate)
        }
    }
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

    /// The newest completion of `channel@version` of either kind, with its kind.
    pub fn latest(&self, channel: &str, version: &str) -> Option<&Completion> {
        self.completions
            .iter()
            .filter(|c| c.channel == channel && c.version == version)
            .max_by_key(|c| c.completed_at)
    }

    /// When this pool was adopted on `channel@version`, if it was.
    pub fn adopted_at(&self, channel: &str, version: &str) -> Option<DateTime<Utc>> {
        self.completions
            .iter()
            .filter(|c| {
                c.channel == channel && c.version == version && c.kind == CompletionKind::Adopted
            })
            .map(|c| c.completed_at)
            .max()
    }

    pub fn completed(mut self, channel: &str, version: &str, at: DateTime<Utc>) -> Self {
        self.record_completion(channel, version, at);
        self
    }

    pub fn adopted(mut self, channel: &str, version: &str, at: DateTime<Utc>) -> Self {
        self.record_adoption(channel, version, at);
        self
    }

    /// Records that the pool was found already running `channel@version` on every node.
    pub fn record_adoption(&mut self, channel: &str, version: &str, at: DateTime<Utc>) {
        self.push_completion(channel, version, at, CompletionKind::Adopted);
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

    pub fn did_not_boot(mut self, channel: &str, version: &str, at: DateTime<Utc>) -> Self {
        self.record_gate_failure(channel, version, DID_NOT_BOOT, at);
        self
    }

    pub fn record_completion(&mut self, channel: &str, version: &str, at: DateTime<Utc>) {
        self.push_completion(channel, version, at, CompletionKind::Rotated);
    }

    fn push_completion(
        &mut self,
        channel: &str,
        version: &str,
        at: DateTime<Utc>,
        kind: CompletionKind,
    ) {
        self.completions.push(Completion {
            channel: channel.into(),
            version: version.into(),
            completed_at: at,
            kind,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adoption_is_an_additive_kind_old_records_read_as_rotations() {
        let at = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let old = r#"{"cluster":"c","pool":"p","completions":[{"channel":"general","version":"1","completedAt":"2026-11-22T10:00:00Z"}]}"#;
        let r: PoolRecord = serde_json::from_str(old).unwrap();
        assert_eq!(r.completions[0].kind, CompletionKind::Rotated);
        assert_eq!(r.adopted_at("general", "1"), None);
        let a = PoolRecord::new("c", "p").adopted("general", "1", at);
        let json = serde_json::to_string(&a).unwrap();
        assert!(json.contains(r#""kind":"adopted""#), "{json}");
        // A rotation is written exactly as before (no `kind`).
        let rotated = serde_json::to_string(&r).unwrap();
        assert!(!rotated.contains("kind"), "{rotated}");
        let back: PoolRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.adopted_at("general", "1"), Some(at));
        assert_eq!(back.latest_completion("general", "1"), Some(at));
    }

    #[test]
    fn a_boot_failure_is_a_gate_failure_older_agents_read_and_keep() {
        let at = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let r = PoolRecord::new("c", "p").did_not_boot("general", "2", at);
        let json = serde_json::to_string(&r).unwrap();
        // The shape every agent version reads: a gate failure, nothing new.
        assert!(
            json.contains(r#""gateFailures":[{"channel":"general","version":"2","gate":"(did not boot)","at":"2026-11-22T10:00:00Z"}]"#),
            "{json}"
        );
        let back: PoolRecord = serde_json::from_str(&json).unwrap();
        assert!(back.gate_failures[0].did_not_boot());
        assert_eq!(back.gate_failures[0].what(), "the image did not boot");
        let gate = PoolRecord::new("c", "p").gate_failed("general", "2", "error-rate", at);
        assert!(!gate.gate_failures[0].did_not_boot());
        assert_eq!(gate.gate_failures[0].what(), "gate error-rate failed");
    }
}
