//! What the agent asks of its cluster at one fleet commit: one NodePoolRotation spec per pool,
//! each held at its previous version while the promotion guard says wait, and the pools that
//! left git (released). Pure: the run loop reads the inputs and applies the result.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::fleet::Fleet;
use crate::fleet::resolved::{DesiredCluster, Mode};
use crate::kube::crd::NodePoolRotationSpec;
use crate::waves::{GuardDecision, PoolRecord, PoolRef, Promotion, WaveView, promotion_guard};

/// One pool's desired NodePoolRotation spec, and why it is not the commit's pin (if not).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolIntent {
    pub name: String,
    /// What to server-side-apply; `None` when the pool waits and there is no previous
    /// version to hold (a new pool in a later wave): nothing is created yet.
    pub spec: Option<NodePoolRotationSpec>,
    /// The channel@version the commit pins for this pool.
    pub pinned: (String, String),
    /// Set when the guard holds the pool: its pending status description.
    pub waiting: Option<String>,
}

/// The whole plan for one cluster at one commit.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterIntent {
    pub pools: Vec<PoolIntent>,
    /// NodePoolRotations of this cluster whose pool is no longer in git: released (their spec
    /// set to `mode: ignore`, nodes untouched).
    pub released: Vec<String>,
}

/// The waves as the guard sees them, from the resolved fleet.
pub fn wave_views(fleet: &Fleet, clusters: &[DesiredCluster]) -> Vec<WaveView> {
    fleet
        .waves()
        .iter()
        .map(|w| WaveView {
            name: w.name.clone(),
            soak: w.soak.map(|s| s.as_duration()).unwrap_or_default(),
            pools: clusters
                .iter()
                .filter(|c| c.wave == w.name)
                .flat_map(|c| {
                    c.pools
                        .iter()
                        .map(|p| PoolRef::new(&c.name, &p.name, &p.channel))
                })
                .collect(),
        })
        .collect()
}

/// Plans every pool of `cluster` at `commit`. `existing` are this cluster's current specs by
/// pool name (from the NodePoolRotations). A pool whose current spec already runs toward the
/// pinned version is not asked again: the guard gates starting a version, not finishing it.
#[allow(clippy::too_many_arguments)]
pub fn plan_cluster(
    cluster: &DesiredCluster,
    commit: &str,
    guard_enabled: bool,
    waves: &[WaveView],
    records: &[PoolRecord],
    existing: &BTreeMap<String, NodePoolRotationSpec>,
    now: DateTime<Utc>,
) -> ClusterIntent {
    let mut pools = Vec::new();
    for pool in &cluster.pools {
        let mut spec = NodePoolRotationSpec::from_desired(pool, commit);
        let pinned = (pool.channel.clone(), pool.version.clone());
        let previous = existing.get(&pool.name);
        let already =
            previous.is_some_and(|p| p.channel == pool.channel && p.version == pool.version);
        // An ignored pool is left alone entirely, the guard has nothing to hold.
        let decision = if already || pool.mode == Mode::Ignore {
            GuardDecision::Allowed {
                reason: "already on this version".into(),
            }
        } else {
            promotion_guard(
                guard_enabled,
                waves,
                Promotion {
                    wave: &cluster.wave,
                    channel: &pool.channel,
                    version: &pool.version,
                },
                records,
                now,
            )
        };
        let (spec, waiting) = match decision {
            GuardDecision::Allowed { .. } => (Some(spec), None),
            GuardDecision::Waiting(wait) => {
                let why = wait.describe(&pool.channel, &pool.version);
                match previous {
                    // Hold the version (and image) the pool had; everything else follows git.
                    Some(prev) => {
                        spec.channel = prev.channel.clone();
                        spec.version = prev.version.clone();
                        spec.image = prev.image.clone();
                        (Some(spec), Some(why))
                    }
                    None => (None, Some(why)),
                }
            }
        };
        pools.push(PoolIntent {
            name: pool.name.clone(),
            spec,
            pinned,
            waiting,
        });
    }
    let released = existing
        .iter()
        .filter(|(name, spec)| {
            !cluster.pools.iter().any(|p| &p.name == *name) && spec.mode != Mode::Ignore
        })
        .map(|(name, _)| name.clone())
        .collect();
    ClusterIntent { pools, released }
}

/// The spec a released pool keeps: the same, with `mode: ignore` (the controller stops
/// acting on it; its nodes stay as they are).
pub fn released_spec(existing: &NodePoolRotationSpec, commit: &str) -> NodePoolRotationSpec {
    let mut spec = existing.clone();
    spec.mode = Mode::Ignore;
    spec.source_commit = commit.to_string();
    spec
}
