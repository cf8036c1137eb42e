//! The demo's story as a value ([`Story`]): the options, the output, the fleet repo, the
//! local fleet and its agents, what the views saw and the commits made so far; where a
//! pool ended ([`PoolEnd`]); and [`blocking`], how the story runs git and files off the
//! runtime. The story is told by `impl Story` blocks: the steps in `mod.rs`, the failure
//! in `failure`, the managed pool in `managed`. The struct lives below all of them.

use std::collections::BTreeMap;
use std::io::Write;

use tokio::sync::watch;

use super::options::DemoOptions;
use super::repo::DemoRepo;
use super::view;
use crate::agent::Snapshot;
use crate::agent::local::LocalFleet;

/// Where a pool ended.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolEnd {
    pub version: String,
    pub image: String,
    pub phase: String,
    pub on_target: u32,
    pub total: u32,
    /// The status's stop, `Reason (by)`, when the pool is stopped (the STOP and WHO columns
    /// of `kubectl get npr -o wide`).
    pub stop: Option<String>,
    /// The status's message (why it is where it is: a failed gate's samples, a held drain),
    /// so that a test that finds a pool elsewhere than it expects can say why.
    pub message: String,
}

pub(super) struct Story<'a> {
    pub(super) opts: &'a DemoOptions,
    pub(super) out: &'a mut dyn Write,
    pub(super) repo: DemoRepo,
    pub(super) fleet: LocalFleet,
    /// Clusters in wave order: (cluster, wave).
    pub(super) order: Vec<(String, String)>,
    pub(super) agents: BTreeMap<String, watch::Receiver<Snapshot>>,
    pub(super) seen: view::Seen,
    pub(super) drawn: usize,
    pub(super) last_draw: Option<std::time::Instant>,
    pub(super) start_fleet: chrono::DateTime<chrono::Utc>,
    pub(super) start_wall: std::time::Instant,
    pub(super) commits: BTreeMap<String, String>,
}

/// Run a blocking closure (git, files) off the runtime; on paused time this also stops the
/// clock from jumping while it runs.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("demo: {e}"))?
}
