//! One health check as the gates implement it ([`Gate`]): what it may look at when it
//! samples ([`GateInputs`]), what a sample says ([`Sample`]) and how building one from its
//! spec fails ([`GateError`]). Each gate's file implements it and the tracker in `mod.rs`
//! asks it; it lives below both.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::kube::summary::{EventRecord, PodTally};

/// What a gate may look at when it samples.
#[derive(Clone, Copy, Debug)]
pub struct GateInputs<'a> {
    pub pods: &'a PodTally,
    pub events: &'a [EventRecord],
    pub now: DateTime<Utc>,
}

/// One sample's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sample {
    Pass(String),
    Fail(String),
}

/// One health check.
#[async_trait]
pub trait Gate: Send + Sync {
    /// The HealthGate's name.
    fn name(&self) -> &str;
    /// Take one sample now.
    async fn sample(&self, inputs: &GateInputs<'_>) -> Sample;
}

/// A gate that cannot be built from its spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("health gate {gate}: {why}")]
    Invalid { gate: String, why: String },
}
