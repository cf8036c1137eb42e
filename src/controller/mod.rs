//! The rotation controller: the runtime that drives every NodePoolRotation it owns.
//!
//! One reconcile of one pool reads as a sequence ([`Controller::reconcile`]): prepare the
//! pool's runtime state, sample the due health gates (here, at the edge, from the cluster's
//! watch-fed index), observe (a synchronous read of that index and the cloud group's
//! `describe`), plan (`rotate::plan`, pure), compose the status (`rotate::status::compose`,
//! pure, the one place a status is made), act ([`apply`]: status and checkpoint first, then
//! the actions), and settle (when to look again). Between reconciles the controller waits
//! for the earliest pool that is due (the interval depends on the stage, see [`requeue`]),
//! or for a change that concerns a pool: a NodePoolRotation whose spec changed, one of its
//! nodes, a pod on one of its nodes while it rotates, or the PodDisruptionBudget that
//! blocked an eviction with 429 (that wait is on the PDB, not on a fixed timer).
//!
//! Only the leader of the version's Lease acts ([`leader`]): [`Controller::run`] renews the
//! Lease in a task of its own, a pass starts only while the lease is held with margin, stops
//! early when it is not any more (or when it ran longer than one lease duration), and
//! `controller::apply` checks it again before every side effect. The same [`Leadership`] handle
//! gates the agent ([`Controller::leadership`]). A controller driven through
//! [`Controller::step`] without [`Controller::elect`] is the only writer by construction (a
//! test). Only resources this version owns are touched (`kube::ownership`).
//! `maxParallelPools` is applied per cluster through `rotate::parallel::admit` before each
//! pass. Errors are classified once, by
//! [`rota_core::errors`]: transient ones back off exponentially, waits wait for their object,
//! stalled ones retry slowly, alert and are named in the pool's status message.

pub mod apply;
pub mod clock;
pub mod departures;
mod drift;
#[cfg(test)]
mod error_classes;
mod evaluation;
pub mod leader;
mod own_writes;
mod owner_pools;
pub mod owners;
mod refusals;
pub mod requeue;
mod rotations;
mod skew;
pub mod step_events;
mod transitions;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Resource, ResourceExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

use crate::cloud::NodeGroups;
use crate::cloud::metered::MeteredNodeGroups;
use crate::gates::{self, EventRecord, Gate, GateInputs, PodTally, Tracker};
use crate::kube::crd::NodePoolRotation;
use crate::kube::index::{Changes, ClusterIndex};
use crate::kube::observe::observe;
use crate::kube::ownership;
use crate::metrics::{GateResult, Metrics};
use crate::notify::SharedNotifier;
use apply::{ApplyError, Edge, Persist};
use clock::Clock;
use evaluation::NOT_YET;
pub use evaluation::evaluation;
use leader::{Elector, Leadership, Renewal};
use rota_core::errors::Class;
use rota_core::errors::Classify;
use rota_core::fleet::resolved::GateCheck;
use rota_core::fleet::resolved::Mode;
use rota_core::rotate::operator::{OperatorError, Request};
use rota_core::rotate::parallel::{PoolDemand, admit};
use rota_core::rotate::resource::NodePoolRotationStatus;
use rota_core::rotate::status::{Composed, Reconciled, compose};
use rota_core::rotate::stuck::{self, ErrorTracker};
use rota_core::rotate::{GateVerdict, Phase, Stage, plan};

/// How a controller identifies itself and what it owns.
#[derive(Clone, Debug)]
pub struct Config {
    /// rota's version: names the Lease and selects the resources it owns.
    pub version: String,
    /// Also own resources without a `rota.dev/agent-version` label.
    pub is_default: bool,
    /// This process among the candidates (the Lease's holder identity).
    pub identity: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Controller time runs this many times faster than real time (see [`clock`]).
    pub speed: f64,
    /// Publish Kubernetes events on the resources.
    pub events: bool,
    /// A rotation without progress for this long is Stuck (`--stuck-after`).
    pub stuck_after: std::time::Duration,
    /// How far the cloud's describes may lag behind writes (`--describe-lag`); see
    /// [`rota_core::rotate::observed::Observed::describe_lag`].
    pub describe_lag: std::time::Duration,
    /// How often a pool with nothing to rotate describes its group anyway
    /// (`--idle-describe-interval`); see [`Described`].
    pub idle_describe_interval: std::time::Duration,
    /// Whether a cluster autoscaler may share the pools' groups (`true` unless
    /// `--no-cluster-autoscaler`); see
    /// [`rota_core::rotate::observed::Observed::cluster_autoscaler`].
    pub cluster_autoscaler: bool,
    /// This replica's wall clock is off by this much (tests: clock skew between replicas).
    pub clock_skew: chrono::Duration,
}

impl Config {
    pub fn new(version: &str, identity: &str) -> Config {
        Config {
            version: version.into(),
            is_default: true,
            identity: identity.into(),
            lease_namespace: "kube-system".into(),
            speed: 1.0,
            events: true,
            stuck_after: std::time::Duration::from_secs(30 * 60),
            describe_lag: std::time::Duration::ZERO,
            idle_describe_interval: std::time::Duration::from_secs(3600),
            cluster_autoscaler: true,
            clock_skew: chrono::Duration::zero(),
        }
    }
}

/// The longest a pass (and one pool's reconcile) runs: one lease duration, so that a pass
/// never outlives the lease it started under by more than the renewal task lets it.
pub const PASS_BOUND: std::time::Duration = std::time::Duration::from_secs(15);

/// What one reconcile of one pool ended with.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Planned and applied: every action ran.
    Applied { actions: usize, phase: Phase },
    /// Observation or an action failed; `retry` says how the next attempt waits.
    Failed { retry: Class, error: String },
    /// Test hook ([`Controller::crash_after`]): stopped after a prefix of the actions, as a
    /// crash would.
    Crashed { ran: usize, of: usize },
}

/// Counters a caller can read while the controller runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Reconciles of one pool (whatever their outcome).
    pub reconciles: AtomicU64,
    /// Actions executed.
    pub actions: AtomicU64,
    /// Whether this controller holds its Lease now.
    pub leading: AtomicBool,
}

/// Per-pool runtime state. None of it is needed for safety (that is all in the checkpoint);
/// losing it on a restart only resets gate samples and backoff.
struct PoolState {
    /// The gate specs the gates were built from (rebuilt when the spec changes).
    gate_spec: String,
    gates: Result<Vec<Box<dyn Gate>>, gates::GateError>,
    trackers: Vec<Tracker>,
    /// Which evaluation the trackers belong to (`pre-3`, `soak-3`, `pool`): samples of
    /// one batch's pre-check do not count for its soak.
    evaluation: String,
    due: Instant,
    failures: u32,
    last_error: Option<String>,
    /// The action whose failure `last_error` is (`set image ami-1`), when an action failed:
    /// once the same action succeeds the error has healed and is no longer named, even on a
    /// pool that stays stopped for another cause.
    last_error_action: Option<String>,
    /// The owner's refusal of the last request for this managed pool (`refusals`).
    refused: Option<rota_core::rotate::Refusal>,
    /// The PodDisruptionBudget (namespace, name) whose change wakes this pool.
    blocked_on: Option<(String, String)>,
    /// Errors since the pool last moved: which to report, and the likely cause if it sticks.
    errors: ErrorTracker,
    /// The batch under way and when its surge began (for `rota_batch_duration_seconds` and
    /// boot-to-Ready).
    batch_started: Option<(u32, chrono::DateTime<chrono::Utc>)>,
    /// What wakes the pool on an index change: its node selector, and whether a rotation
    /// is under way (only then do its pods' changes matter).
    selector: BTreeMap<String, String>,
    rotating: bool,
    /// When it was last reconciled: wake-ups are spaced by [`MIN_WAKE_GAP`].
    last: Instant,
    /// The last image check (`NodeGroups::check_image`): the image, when, and why it could
    /// not launch (`None`: usable, kept for good; a hold is asked again after
    /// [`IMAGE_RECHECK`]).
    image_check: Option<ImageChecked>,
    /// The group's last describe, reused by passes that may reuse it ([`Described`]).
    described: Option<Described>,
    /// The actions of the batch step under way, posted as one Event when it ends
    /// ([`step_events`]).
    events: Option<step_events::Gathered>,
}

/// The last describe of a pool's group and what it was taken under, so that a pass whose
/// decisions cannot depend on anything newer the cloud knows reuses it instead of calling
/// the cloud again (issue 25: a pool rotating batches of five described its group 47 times
/// a batch, an idle pool 12 times an hour).
///
/// Why it is safe: a pass plans from the reused describe, and keeps that plan only if it
/// calls the cloud for nothing and leaves the checkpoint as it was (evictions, waiting for a
/// boot or a soak, an unchanged status). Any other plan is thrown away and made again from a
/// fresh describe, so every capacity, termination and template change, and every
/// checkpoint that is written, is decided from a describe taken in the same pass, exactly as
/// without reuse. What a reused describe cannot show is only what the cloud did on its own
/// since (rota's own writes are applied to it, or drop it where the cloud chooses their
/// outcome: see [`own_writes`]; a failed call drops it); a change the
/// cluster shows too (a node joining or leaving the pool) drops it as well, and the rest (a
/// launch that failed, a template someone edited) is seen at the latest when it expires,
/// as it would be by a cloud whose describes lag that long: the reused describe is still
/// the newest one rota has, so nothing once seen goes back (an instance seen terminating
/// stays so), and the planner's waits for lagging describes (`--describe-lag`) measure from
/// rota's own writes, and the capacity computed after them is planned from a fresh describe
/// (a plan that calls the cloud never stands on a kept one).
///
/// A describe of a settled group (every instance running with its node registered) is
/// reused for [`DESCRIBE_REUSE`] (idle: `--idle-describe-interval`); one of a group that is
/// not, only while the pool waits on its batch's instances booting or terminating, whose
/// end the cluster shows too, and for [`WAIT_REUSE`] at most ([`waits_on_the_cluster`]).
#[derive(Clone, Debug)]
struct Described {
    group: rota_core::cloud::GroupState,
    /// When it was taken (controller time).
    at: chrono::DateTime<chrono::Utc>,
    /// The NodePoolRotation's generation and the leadership term it was taken under: a spec
    /// change or a new term describes again.
    generation: Option<i64>,
    fence: Option<rota_core::rotate::resource::Fence>,
    /// The provider IDs of the pool's nodes (selected and departed) when it was taken: a
    /// node joining or leaving the pool is a change the cloud made.
    nodes: Vec<String>,
    /// The plan made from it had nothing to do and the pool is on its image: reused for
    /// `--idle-describe-interval` rather than [`DESCRIBE_REUSE`].
    idle: bool,
}

/// How long a rotating pool reuses a describe at most (controller time): the bound on how
/// late a change only the cloud shows (a launch that failed, an instance the cloud took
/// back) is noticed mid-rotation, well within the minutes of `nodeReadyTimeout` and drain
/// timeouts that such changes are judged by.
pub const DESCRIBE_REUSE: std::time::Duration = std::time::Duration::from_secs(60);

/// The provider IDs of the pool's nodes, selected and departed, sorted.
fn node_ids(observed: &rota_core::rotate::Observed) -> Vec<String> {
    let mut ids: Vec<String> = observed
        .nodes
        .iter()
        .chain(&observed.departed)
        .map(|n| n.provider_id.clone())
        .collect();
    ids.sort();
    ids
}

/// Whether everything the group holds shows in the cluster too: as many instances as it
/// wants, each running with its node registered (`nodes`: the pool's provider IDs). Only
/// then is every change to it seen without the cloud (a node joins or leaves); an instance
/// booting, terminating or never registered, or a launch not made yet, changes only in the
/// cloud's describe, so a pool waiting on one describes on every pass.
fn settled(group: &rota_core::cloud::GroupState, nodes: &[String]) -> bool {
    group.instances.len() == group.desired as usize
        && group.instances.iter().all(|i| {
            i.lifecycle == rota_core::cloud::Lifecycle::InService
                && nodes.binary_search(&i.provider_id).is_ok()
        })
}

/// How long a pool waiting on a batch's instances reuses a describe at most (controller
/// time; `--describe-lag` when that is longer): see [`waits_on_the_cluster`].
pub const WAIT_REUSE: std::time::Duration = std::time::Duration::from_secs(15);

/// Whether the pool waits on something whose end the cluster shows as soon as the cloud
/// does: a surge's instances, whose nodes register with their provider IDs (Surging,
/// WaitingReady, a pipelined next batch doing either while the current one soaks); old
/// instances terminating, whose nodes go away (Terminating). Such a pool reuses a describe
/// of an unsettled group for [`WAIT_REUSE`] at most: a node joining or leaving the pool
/// drops it at once (`Described::nodes`), and so does anything the plan would decide
/// (a stage, a capacity, a termination: the plan made from the kept describe stands only if
/// it calls the cloud for nothing and keeps the checkpoint). What only the cloud shows (a
/// launch that failed for a stock-out, an instance taken back, an instance gone before its
/// node) is seen at most [`WAIT_REUSE`] late, as a cloud whose describes lag that long
/// would show it (issue 25: these waits described on every pass, every 5-10 s).
fn waits_on_the_cluster(checkpoint: Option<&rota_core::rotate::Checkpoint>) -> bool {
    let Some(cp) = checkpoint else {
        return false;
    };
    let boots = |s: &Stage| matches!(s, Stage::Surging { .. } | Stage::WaitingReady { .. });
    boots(&cp.stage)
        || matches!(cp.stage, Stage::Terminating { .. })
        || (matches!(cp.stage, Stage::Soaking { .. }) && cp.next.as_deref().is_some_and(boots))
}

/// Whether a plan made from a reused describe may stand: it calls the cloud for nothing
/// and leaves the checkpoint as it was (see [`Described`]).
fn reuse_may_stand(
    plan: &rota_core::rotate::Plan,
    previous: Option<&rota_core::rotate::Checkpoint>,
) -> bool {
    !own_writes::calls_cloud(plan) && plan.checkpoint.as_ref() == previous
}

/// Whether the next plan of this pool could surge onto the desired image: no rotation on it
/// under way, and not settled on it; only a reconciling pool surges. The image and the
/// control plane's version are checked only then (`image_hold`, `control_plane`).
fn surge_may_follow(
    npr: &NodePoolRotation,
    desired: &rota_core::fleet::resolved::DesiredPool,
    observed: &rota_core::rotate::Observed,
) -> bool {
    let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
    let on_it =
        checkpoint.is_some_and(|c| c.stage != Stage::Done && c.target_image == desired.image);
    let settled = checkpoint
        .is_some_and(|c| c.stage == Stage::Done && c.target_image == desired.image)
        && observed.group.template_image == desired.image;
    // A managed pool is its owner's to surge and its image the owner's to check: nothing asks
    // a self-managed cloud about it.
    !(on_it
        || settled
        || desired.mode != rota_core::fleet::resolved::Mode::Reconcile
        || desired.group.managed().is_some())
}

/// One answer of `NodeGroups::check_image` for a pool: the image, when, and the hold (reason,
/// message) it gave, `None` when usable.
struct ImageChecked {
    image: String,
    at: Instant,
    hold: Option<(String, String)>,
}

impl PoolState {
    fn new() -> PoolState {
        PoolState {
            gate_spec: String::new(),
            gates: Ok(Vec::new()),
            trackers: Vec::new(),
            evaluation: String::new(),
            due: Instant::now(),
            failures: 0,
            last_error: None,
            last_error_action: None,
            refused: None,
            blocked_on: None,
            errors: ErrorTracker::default(),
            batch_started: None,
            selector: BTreeMap::new(),
            rotating: false,
            image_check: None,
            described: None,
            events: None,
            last: Instant::now(),
        }
    }
}

/// A pool woken by index changes is reconciled at most this often (controller time): a drain
/// moves dozens of pods at once and one look at them all is enough.
const MIN_WAKE_GAP: std::time::Duration = std::time::Duration::from_secs(2);
/// How long an image the cloud could not launch is held before it is asked about again.
const IMAGE_RECHECK: std::time::Duration = std::time::Duration::from_secs(15);
/// How long the first pass waits for the index's first complete lists (controller-runtime's
/// WaitForCacheSync): until then every pool is "not observed".
const FIRST_SYNC: std::time::Duration = std::time::Duration::from_secs(60);

enum Wake {
    /// A NodePoolRotation was added, or its spec (generation) changed.
    Npr(String),
}

/// The rotation controller of one cluster.
pub struct Controller {
    client: kube::Client,
    groups: Arc<dyn NodeGroups>,
    config: Config,
    clock: Clock,
    pools: BTreeMap<String, PoolState>,
    recorder: Option<Recorder>,
    wakes: mpsc::UnboundedReceiver<Wake>,
    /// The NodePoolRotations, from a watch (a pass reads them here, not with a list).
    rotations: rotations::Rotations,
    watchers: Vec<tokio::task::JoinHandle<()>>,
    /// The cluster's watch-fed index: every read of nodes, pods, PDBs and events.
    index: Arc<ClusterIndex>,
    /// Whether the first pass waited for the index's first sync already.
    first_sync: bool,
    metrics: Metrics,
    notifier: SharedNotifier,
    pub stats: Arc<Stats>,
    /// Whether this process leads; shared with the agent.
    leadership: Leadership,
    /// The renewal task once [`Controller::elect`] started it: from then on every pass and
    /// every side effect is gated on `leadership`.
    election: Option<Renewal>,
    /// The leadership term this replica acts under and when (its clock) it was first seen.
    term: Option<(
        rota_core::rotate::resource::Fence,
        chrono::DateTime<chrono::Utc>,
    )>,
    /// Test hook: after persisting the checkpoint, run only this many actions of the next
    /// plan that has more, then report [`Outcome::Crashed`] (the caller drops the
    /// controller and starts another, as after a crash).
    pub crash_after: Option<usize>,
    /// The API server's version, read before a surge onto a version that declares its
    /// kubelet (see [`skew`]).
    control_plane: skew::ControlPlane,
    /// The owners' APIs of the managed pools this controller drives (see
    /// [`Controller::with_owners`]).
    owners: owners::Owners,
    /// rota's drains and terminations, for the image ledger ([`departures`]).
    departures: departures::Departures,
    /// Karpenter's objects in this cluster (its NodePools are driven through them).
    drift: Arc<dyn rota_core::cloud::karpenter::DriftPools>,
}

impl Drop for Controller {
    fn drop(&mut self) {
        for w in &self.watchers {
            w.abort();
        }
    }
}

impl Controller {
    /// A controller over one cluster (`client`) and the clouds of its pools (`groups`). Starts
    /// the watches that wake it. Its metrics go to a registry of its own (see
    /// [`Controller::with_metrics`]).
    pub fn new(client: kube::Client, groups: Arc<dyn NodeGroups>, config: Config) -> Controller {
        Self::with_metrics(client, groups, config, Metrics::new())
    }

    /// [`Controller::new`] recording into `metrics` (the process's registry, served on
    /// `/metrics`); the cloud calls are counted and timed through [`MeteredNodeGroups`].
    pub fn with_metrics(
        client: kube::Client,
        groups: Arc<dyn NodeGroups>,
        config: Config,
        metrics: Metrics,
    ) -> Controller {
        let groups: Arc<dyn NodeGroups> = Arc::new(MeteredNodeGroups::new(groups, metrics.clone()));
        let (tx, wakes) = mpsc::unbounded_channel();
        let (rotations, watch) = rotations::Rotations::start(client.clone(), tx);
        let watchers = vec![watch];
        let index = Arc::new(ClusterIndex::start(client.clone()));
        let recorder = config.events.then(|| {
            Recorder::new(
                client.clone(),
                Reporter {
                    controller: "rota".into(),
                    instance: Some(config.identity.clone()),
                },
            )
        });
        let clock = Clock::new(config.speed).skewed(config.clock_skew);
        Controller {
            departures: departures::Departures::new(clock),
            clock,
            drift: Arc::new(crate::kube::karpenter::KubeKarpenter::new(client.clone())),
            client,
            groups,
            config,
            pools: BTreeMap::new(),
            recorder,
            wakes,
            watchers,
            rotations,
            index,
            first_sync: false,
            metrics,
            notifier: SharedNotifier::default(),
            stats: Arc::new(Stats::default()),
            leadership: Leadership::new(),
            term: None,
            election: None,
            crash_after: None,
            control_plane: skew::ControlPlane::default(),
            owners: Default::default(),
        }
    }

    /// Drive the managed pools of `owners`' kind through its API (`managedUpdate: service`),
    /// beside the owners added before; a managed pool whose owner was never added is
    /// reported and never acted on.
    pub fn with_owners(mut self, owners: Arc<dyn rota_core::cloud::managed::OwnerPools>) -> Self {
        self.owners.add(owners);
        self
    }

    /// Whether this process leads, as the election decides once [`run`](Self::run) (or
    /// [`elect`](Self::elect)) started it. The agent checks the same handle before each of
    /// its writes, so the whole process acts only while it leads.
    pub fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// Start the election: the Lease is renewed in a task of its own from now on, and every
    /// pass and side effect of this controller is gated on holding it. Idempotent. A harness
    /// that drives [`step`](Self::step) itself calls this to run several controllers as
    /// replicas of one process.
    pub fn elect(&mut self) {
        if self.election.is_some() {
            return;
        }
        let elector = Elector::new(
            self.client.clone(),
            &self.config.lease_namespace,
            ownership::lease_name(&self.config.version),
            self.config.identity.clone(),
        )
        .with_leadership(self.leadership.clone());
        let clock = self.clock;
        self.election = Some(elector.spawn(move || clock.now()));
    }

    /// Whether a pass may act now: always without election, else only while the lease is
    /// held with margin.
    fn may_act(&self) -> bool {
        self.election.is_none() || self.leadership.leading()
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The handle rollout notices go through; the agent sets the webhooks of the commit in
    /// force on it. Only a leading controller reconciles, so only the leader notifies.
    pub fn notifier(&self) -> SharedNotifier {
        self.notifier.clone()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The cluster index the controller observes through.
    pub fn index(&self) -> &Arc<ClusterIndex> {
        &self.index
    }

    /// The drains and terminations this controller carried out, for the image ledger.
    pub fn departures(&self) -> departures::Departures {
        self.departures.clone()
    }

    /// Mark the caches synced for `/readyz` once the index has listed nodes, pods and PDBs
    /// and the NodePoolRotation watch has listed them once.
    async fn sync_caches(&self) {
        if self.metrics.readiness().not_ready_because().is_none() {
            return;
        }
        if !self.index.is_synced() {
            return;
        }
        if self.rotations.snapshot().is_ok() {
            self.metrics.readiness().set_caches_synced(true);
        }
    }

    /// Run until `stop` resolves: lead (or wait to lead), reconcile, wait, repeat. Gives the
    /// Lease up on the way out; aborted (a killed process), it stops renewing and the Lease
    /// expires for the others.
    pub async fn run(&mut self, stop: impl std::future::Future<Output = ()>) {
        self.elect();
        let lease = ownership::lease_name(&self.config.version);
        // Look at the leadership as often as the renewal task may change it.
        let look = std::time::Duration::from_secs(3);
        tokio::pin!(stop);
        loop {
            let leading = match self.leadership.state() {
                Some(l) => {
                    // The election answered: /readyz knows the leadership state from now on.
                    self.metrics.set_leader(l);
                    l
                }
                None => false,
            };
            self.sync_caches().await;
            let was = self.stats.leading.swap(leading, Ordering::Relaxed);
            if leading != was {
                tracing::info!(%lease, identity = %self.config.identity, leading, "leadership changed");
            }
            if leading {
                self.step().await;
            }
            let cap = Instant::now() + look;
            tokio::select! {
                _ = &mut stop => break,
                _ = self.wait(cap, leading) => {}
            }
        }
        if let Some(election) = self.election.take() {
            election.release().await;
        }
        self.stats.leading.store(false, Ordering::Relaxed);
    }

    /// Wait until a pool is due, a watch wakes one, or `cap`. A follower only drains its
    /// wake-ups until `cap` (its next election attempt).
    pub async fn wait(&mut self, cap: Instant, leading: bool) {
        let due = if leading { self.next_pass(cap) } else { cap };
        let sleep = tokio::time::sleep_until(due);
        tokio::pin!(sleep);
        let index = self.index.clone();
        loop {
            tokio::select! {
                _ = &mut sleep => return,
                changes = index.changed() => {
                    if leading && self.wake_concerned(&changes) {
                        // Sleep until the earliest pool is due: changes that arrive in the
                        // meantime join the same pass instead of each starting one.
                        sleep.as_mut().reset(self.next_pass(cap));
                    }
                }
                w = self.wakes.recv() => {
                    let Some(w) = w else {
                        (&mut sleep).await;
                        return;
                    };
                    if !leading {
                        continue;
                    }
                    let Wake::Npr(name) = w;
                    // A new pool is due by default on the next pass.
                    if let Some(p) = self.pools.get_mut(&name) {
                        p.due = Instant::now();
                    }
                    return;
                }
            }
        }
    }

    /// When the next pass is due: the earliest pool, at the latest `cap`. (No pool is known
    /// before the NodePoolRotations are listed, so an unsynced controller waits for `cap`.)
    fn next_pass(&self, cap: Instant) -> Instant {
        self.pools
            .values()
            .map(|p| p.due)
            .min()
            .unwrap_or(cap)
            .min(cap)
    }

    /// Make the pools that `changes` concern due (spaced by [`MIN_WAKE_GAP`]); whether any
    /// became due earlier than it was. A pool is concerned by a change of one of its nodes (its selector
    /// picks it, or it went away), by a pod change on one of its nodes while it rotates, by
    /// the PDB it waits on, and by a relist (anything may have changed).
    fn wake_concerned(&mut self, changes: &Changes) -> bool {
        let now = Instant::now();
        let gap = MIN_WAKE_GAP.div_f64(self.config.speed.max(f64::MIN_POSITIVE));
        let index = self.index.read();
        let mut woke = false;
        for p in self.pools.values_mut() {
            let blocked = p
                .blocked_on
                .as_ref()
                .is_some_and(|b| changes.pdbs.contains(b));
            let concerned = changes.all
                || blocked
                || changes.nodes.iter().any(|n| match index.node(n) {
                    Some(node) => p
                        .selector
                        .iter()
                        .all(|(k, v)| node.labels.get(k) == Some(v)),
                    // Gone: it may have been one of ours.
                    None => p.rotating,
                })
                || (p.rotating
                    && changes.pods_on.iter().any(|n| {
                        index.node(n).is_some_and(|node| {
                            p.selector
                                .iter()
                                .all(|(k, v)| node.labels.get(k) == Some(v))
                        })
                    }));
            if !concerned {
                continue;
            }
            if blocked {
                p.blocked_on = None;
            }
            let at = now.max(p.last + gap);
            if at < p.due {
                p.due = at;
                woke = true;
            }
        }
        woke
    }

    /// The earliest time a pool is due (for callers that drive [`step`](Self::step) themselves).
    pub fn next_due(&self) -> Option<Instant> {
        self.pools.values().map(|p| p.due).min()
    }

    /// One pass: reconcile every owned pool that is due. Returns each reconciled pool's
    /// outcome.
    pub async fn step(&mut self) -> Vec<(String, Outcome)> {
        if !self.may_act() {
            return Vec::new();
        }
        if !self.first_sync {
            // The first pass waits (bounded) for complete lists (the index's and the
            // NodePoolRotations'); a pool observed before them would only be "not observed"
            // and back off.
            self.first_sync = true;
            let _ = tokio::time::timeout(FIRST_SYNC, async {
                tokio::join!(self.index.synced(), self.rotations.synced())
            })
            .await;
        }
        let list = match self.rotations.snapshot() {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "no NodePoolRotations to reconcile yet");
                return Vec::new();
            }
        };
        let owned: Vec<NodePoolRotation> = list
            .into_iter()
            .filter(|n| {
                ownership::reconciles(n.labels(), &self.config.version, self.config.is_default)
            })
            .collect();
        // Forget pools that went away (or changed owner).
        self.pools
            .retain(|name, _| owned.iter().any(|n| n.name_any() == *name));
        let holds = start_holds(&owned);
        let now = Instant::now();
        // A pass is bounded: a pool left when it ran a whole lease duration waits for the
        // next pass (it stays due), so the lease is looked at again in between.
        let bound = PASS_BOUND;
        // Least recently reconciled first (pools not seen yet before all, then list order).
        // A pass is bounded, and one pool's drain can fill it (1,450 actions a batch at
        // 500-node pools of 30 pods a node): in list order, the first pools, due again at
        // once, took every pass and the last ones waited past their drain timeouts
        // (agent_scale at 5,000 nodes on a loaded machine: pools 8 and 9 halted in batch 1
        // while pool 0 was at batch 9).
        let mut owned = owned;
        owned.sort_by_key(|n| self.pools.get(&n.name_any()).map(|p| p.last));
        let mut out = Vec::new();
        for npr in &owned {
            let name = npr.name_any();
            if self.pools.get(&name).is_some_and(|p| p.due > now) {
                continue;
            }
            if !self.may_act() || now.elapsed() >= bound {
                break;
            }
            let hold = holds.get(&name).cloned().flatten();
            let o = match tokio::time::timeout(bound, self.reconcile(npr, hold)).await {
                Ok(o) => o,
                // Cut short as a crash would be: the checkpoint was written before any side
                // effect, the next pass resumes from it.
                Err(_) => Outcome::Failed {
                    retry: Class::Transient,
                    error: format!("the reconcile ran longer than {bound:?}; resuming next pass"),
                },
            };
            out.push((name, o));
        }
        out
    }

    /// Reconcile one pool once, in the pool's span, timed into
    /// `rota_reconcile_duration_seconds`.
    pub async fn reconcile(
        &mut self,
        npr: &NodePoolRotation,
        start_hold: Option<String>,
    ) -> Outcome {
        let span = crate::telemetry::pool_span(&npr.spec.cluster, &npr.spec.pool);
        let started = std::time::Instant::now();
        let outcome = self.reconcile_pool(npr, start_hold).instrument(span).await;
        self.metrics
            .pool(&npr.spec.cluster, &npr.spec.pool)
            .observe_reconcile(started.elapsed().as_secs_f64());
        outcome
    }

    /// One reconcile of one pool, as a sequence: the pool's runtime state, its gates, what is
    /// observed, the plan (pure), the status composed from them (pure), the side effects, and
    /// what the outcome means for the next look.
    async fn reconcile_pool(
        &mut self,
        npr: &NodePoolRotation,
        start_hold: Option<String>,
    ) -> Outcome {
        self.stats.reconciles.fetch_add(1, Ordering::Relaxed);
        let desired = npr.spec.desired();
        let now = self.clock.now();
        self.prepare(npr, &desired);
        let verdict = self.sample_gates(npr, &desired, now).await;
        let request = operator_request(npr);
        let previous = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        // A describe reused where it may be (see `Described`); the plan made from it stands
        // only if it calls the cloud for nothing and keeps the checkpoint, else the pool is
        // described and planned again.
        let reused = match self.reusable(npr, &desired, &verdict, &start_hold, now) {
            Some(mut observed) => {
                observed.image_hold = self.image_hold(npr, &desired, &observed).await;
                observed.control_plane = self.control_plane(npr, &desired, &observed).await;
                let (plan, steered) = self.plan(npr, &desired, &observed, request.as_ref(), now);
                reuse_may_stand(&plan, previous).then_some((observed, plan, steered))
            }
            None => None,
        };
        let (observed, mut plan, steered) = match reused {
            Some(r) => r,
            None => {
                self.forget_describe(npr);
                let cp = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
                let mut observed = match self.observe(&desired, cp, verdict, start_hold, now).await
                {
                    Ok(o) => o,
                    Err(e) => return self.observe_failed(npr, e, now).await,
                };
                observed.image_hold = self.image_hold(npr, &desired, &observed).await;
                observed.control_plane = self.control_plane(npr, &desired, &observed).await;
                let (plan, steered) = self.plan(npr, &desired, &observed, request.as_ref(), now);
                self.remember_describe(npr, &observed, &plan, now);
                (observed, plan, steered)
            }
        };
        // Test hook: run only a prefix of the actions, as a crash would.
        let crash = self.crash_after.filter(|k| *k < plan.actions.len());
        let total = plan.actions.len();
        if let Some(k) = crash {
            plan.actions.truncate(k);
        }
        let composed = self.compose(npr, &plan, now);
        let acted = self.act(npr, &plan, &composed.status).await;
        self.post_step_events(npr, &plan, &acted.done, now).await;
        if acted.result.is_err() {
            // A failed call may have taken effect, or not: the next pass describes again.
            self.forget_describe(npr);
        } else if own_writes::calls_cloud(&plan) {
            // rota changed the group: the kept describe shows what its writes did, or is
            // dropped where the cloud chooses the outcome (`own_writes`).
            self.note_own_writes(npr, &plan.actions);
        }
        if let Some(request) = &request
            && acted.recorded()
        {
            self.consume_request(npr, request, steered.as_deref()).await;
        }
        if acted.written {
            let gate = verdict_gate(&observed.gates);
            self.after_write(npr, &composed, &gate, now).await;
        } else if !acted.unchanged {
            // Folded into the next write (`must_write`): the pool's gauges follow anyway.
            self.metrics
                .pool(&npr.spec.cluster, &npr.spec.pool)
                .observe_status(&composed.status);
        }
        match (acted.result, crash) {
            (Ok(ran), Some(k)) => {
                self.stats.actions.fetch_add(ran as u64, Ordering::Relaxed);
                Outcome::Crashed { ran: k, of: total }
            }
            (result, _) => {
                self.settle(npr, &desired, &plan, &observed, result, now)
                    .await
            }
        }
    }

    /// The pool observed with its last describe, when that may be reused now: taken under
    /// the same spec and leadership term, younger than [`DESCRIBE_REUSE`] (an idle pool's:
    /// `--idle-describe-interval`), and the pool's nodes are the ones it was taken with.
    /// `None`: describe again.
    fn reusable(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        verdict: &GateVerdict,
        start_hold: &Option<String>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<rota_core::rotate::Observed> {
        // A managed pool is planned from its owner's state (or Karpenter's objects), which a
        // kept describe of the (empty) group does not hold: observed on every pass.
        if desired.group.managed().is_some() {
            return None;
        }
        let fence = self.leadership.fence();
        let state = self.pools.get(&npr.name_any())?;
        let d = state.described.as_ref()?;
        let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        let ttl = if !settled(&d.group, &d.nodes) {
            if !waits_on_the_cluster(checkpoint) {
                return None;
            }
            WAIT_REUSE.max(self.config.describe_lag)
        } else if d.idle {
            self.config.idle_describe_interval
        } else {
            DESCRIBE_REUSE
        };
        let age = (now - d.at).to_std().ok()?;
        if age >= ttl || d.generation != npr.metadata.generation || d.fence != fence {
            return None;
        }
        let mut observed = crate::kube::observe::observe_with(
            &self.index,
            d.group.clone(),
            desired,
            verdict.clone(),
            start_hold.clone(),
        )
        .ok()?;
        if node_ids(&observed) != d.nodes {
            return None;
        }
        observed.describe_lag = self.config.describe_lag;
        observed.cluster_autoscaler = self.config.cluster_autoscaler;
        observed.leading_since = self.term.as_ref().map(|(_, at)| *at);
        Some(observed)
    }

    /// Remember the describe `observed` holds, with what it was taken under.
    fn remember_describe(
        &mut self,
        npr: &NodePoolRotation,
        observed: &rota_core::rotate::Observed,
        plan: &rota_core::rotate::Plan,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let desired_image = &npr.spec.image;
        let idle = plan.actions.is_empty()
            && plan.status.phase == Phase::Succeeded
            && plan
                .checkpoint
                .as_ref()
                .is_none_or(|c| c.stage == Stage::Done && c.target_image == *desired_image)
            && observed.group.template_image == *desired_image;
        let fence = self.leadership.fence();
        if let Some(state) = self.pools.get_mut(&npr.name_any()) {
            state.described = Some(Described {
                group: observed.group.clone(),
                at: now,
                generation: npr.metadata.generation,
                fence,
                nodes: node_ids(observed),
                idle,
            });
        }
    }

    /// Bring the pool's kept describe up to rota's own writes, all of which succeeded (see
    /// [`own_writes`]); drop it where their outcome is the cloud's to choose. Its time stays
    /// that of the describe: what the cloud did on its own since is no less late for it.
    fn note_own_writes(&mut self, npr: &NodePoolRotation, actions: &[rota_core::rotate::Planned]) {
        if let Some(state) = self.pools.get_mut(&npr.name_any()) {
            state.described = state.described.take().and_then(|mut d| {
                d.group = own_writes::applied(&d.group, actions)?;
                Some(d)
            });
        }
    }

    /// Drop the pool's last describe: rota changed its group (or may have), or a pass could
    /// not use it.
    fn forget_describe(&mut self, npr: &NodePoolRotation) {
        if let Some(state) = self.pools.get_mut(&npr.name_any()) {
            state.described = None;
        }
    }

    /// The pool's runtime state for this reconcile: created on first sight, its gates rebuilt
    /// when their spec changed, what wakes it brought up to date.
    fn prepare(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
    ) {
        let gate_spec = serde_json::to_string(&desired.gates).unwrap_or_default();
        let state = self
            .pools
            .entry(npr.name_any())
            .or_insert_with(PoolState::new);
        state.last = Instant::now();
        state.selector = desired.node_selector.clone();
        if state.gate_spec != gate_spec {
            state.gates = desired.gates.iter().map(gates::build).collect();
            state.trackers = desired.gates.iter().map(Tracker::new).collect();
            state.gate_spec = gate_spec;
        }
        let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        state.rotating = checkpoint.is_some_and(|c| !matches!(c.stage, Stage::Done));
    }

    /// Whether the desired image can launch in the pool's group, asked of the cloud only when
    /// the next plan could surge it (no rotation on it yet) and remembered: a usable image is
    /// not asked about again, an unusable one every [`IMAGE_RECHECK`] until it appears. A
    /// check that fails (the call, not the image) holds too, naming the error: an image
    /// nobody could check is not launched.
    async fn image_hold(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &rota_core::rotate::Observed,
    ) -> Option<(String, String)> {
        if !surge_may_follow(npr, desired, observed) {
            return None;
        }
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        if let Some(c) = &state.image_check
            && c.image == desired.image
            && (c.hold.is_none() || c.at.elapsed() < IMAGE_RECHECK)
        {
            return c.hold.clone();
        }
        let hold = match self
            .groups
            .check_image(&desired.group, &desired.image, desired.arch)
            .await
        {
            Ok(rota_core::cloud::ImageCheck::Usable) => None,
            Ok(rota_core::cloud::ImageCheck::Unusable { reason, message }) => {
                Some((reason, message))
            }
            Err(e) => Some((
                "ImageUnavailable".to_string(),
                format!("could not check image {}: {e}", desired.image),
            )),
        };
        if let Some((reason, message)) = &hold {
            tracing::warn!(pool = %npr.name_any(), image = %desired.image, %reason, "{message}");
        }
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        state.image_check = Some(ImageChecked {
            image: desired.image.clone(),
            at: Instant::now(),
            hold: hold.clone(),
        });
        hold
    }

    /// The control plane's version, read (see [`skew`]) only when the next plan could surge
    /// onto a version that declares its kubelet; `None` otherwise.
    async fn control_plane(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &rota_core::rotate::Observed,
    ) -> Option<Result<rota_core::fleet::kubernetes::KubeMinor, String>> {
        if desired.kubelet.is_none() || !surge_may_follow(npr, desired, observed) {
            return None;
        }
        Some(self.control_plane.read(&self.client).await)
    }

    /// The health gates' verdict for the evaluation the checkpoint is in, sampled here at the
    /// edge from the cluster index (and Prometheus) when a sample is due.
    async fn sample_gates(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        now: chrono::DateTime<chrono::Utc>,
    ) -> GateVerdict {
        let evaluation = evaluation::of_pool(npr, desired);
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        if evaluation != state.evaluation {
            state.trackers.iter_mut().for_each(Tracker::reset);
            state.evaluation = evaluation.clone();
        }
        let gs = match &state.gates {
            _ if evaluation.is_empty() || desired.gates.is_empty() => {
                return GateVerdict::Passing;
            }
            _ if evaluation == NOT_YET => {
                return GateVerdict::Pending(
                    "health gates are checked once the new nodes are Ready".into(),
                );
            }
            Err(gates::GateError::Invalid { gate, .. }) => {
                let reason = state.gates.as_ref().err().map(|e| e.to_string());
                return GateVerdict::Failed {
                    gate: gate.clone(),
                    reason: reason.unwrap_or_default(),
                };
            }
            Ok(gs) => gs,
        };
        if desired
            .gates
            .iter()
            .any(|g| matches!(g.check, GateCheck::Events { .. }))
        {
            self.index.want_events();
        }
        if state.trackers.iter().any(|t| t.due(now)) {
            let pm = self.metrics.pool(&npr.spec.cluster, &npr.spec.pool);
            take_samples(
                &self.index,
                &desired.gates,
                gs,
                &mut state.trackers,
                &pm,
                now,
            )
            .await;
        }
        gates::combine(&state.trackers)
    }

    /// The pool as observed now (the index and the cloud group), with the leadership term it
    /// is acted on under.
    async fn observe(
        &mut self,
        desired: &rota_core::fleet::resolved::DesiredPool,
        checkpoint: Option<&rota_core::rotate::Checkpoint>,
        verdict: GateVerdict,
        start_hold: Option<String>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<rota_core::rotate::Observed, crate::kube::observe::ObserveError> {
        let mut observed = observe(
            &self.index,
            self.groups.as_ref(),
            desired,
            verdict,
            start_hold,
        )
        .await?;
        observed.describe_lag = self.config.describe_lag;
        observed.cluster_autoscaler = self.config.cluster_autoscaler;
        // A managed pool whose owner this controller drives: the owner's state, described
        // on every pass (the planner decides from it; nothing is reused across passes).
        if let Some(o) = self.owners.of(&desired.group) {
            owner_pools::observe(&mut observed, &self.index, desired, o, checkpoint).await?;
        }
        drift::observe(Some(self.drift.as_ref()), desired, &mut observed).await?;
        // A new term (this replica took over, or won the lease back) restarts the waits that
        // are measured from times another replica may have written on its own clock.
        match (&self.leadership.fence(), &self.term) {
            (Some(f), Some((t, _))) if f == t => {}
            (Some(f), _) => self.term = Some((f.clone(), now)),
            (None, _) => self.term = None,
        }
        observed.leading_since = self.term.as_ref().map(|(_, at)| *at);
        Ok(observed)
    }

    /// Observing failed: nothing is planned. One classification for the retry, the alert,
    /// the metric and the event; the stuck metric still follows the last status.
    async fn observe_failed(
        &mut self,
        npr: &NodePoolRotation,
        e: crate::kube::observe::ObserveError,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Outcome {
        let name = npr.name_any();
        let classified = e.classify();
        let retry = classified.class;
        let error = e.to_string();
        tracing::warn!(pool = %name, %error, "observing failed");
        let state = self.pools.get_mut(&name).expect("prepared");
        state.failures += 1;
        state.last_error = Some(error.clone());
        state.last_error_action = None;
        if self.record_error(&name, npr, classified).await.is_some() {
            tracing::error!(pool = %name, %error, "observing failed and will not heal by retrying");
        }
        let state = self.pools.get_mut(&name).expect("prepared");
        if let Some(prev) = &npr.status {
            let stuck = stuck::detect(prev, state.errors.last(), now, self.config.stuck_after);
            self.metrics
                .pool(&npr.spec.cluster, &npr.spec.pool)
                .set_stuck(stuck.as_ref().map(|s| s.reason));
        }
        state.due = self
            .clock
            .after(requeue::after_error(retry, state.failures));
        Outcome::Failed { retry, error }
    }

    /// The plan (pure), with an operator's request (`rota ctl`, an annotation) as one more
    /// input; returns what the request steered, if anything.
    fn plan(
        &self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        observed: &rota_core::rotate::Observed,
        request: Option<&Result<Request, OperatorError>>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> (rota_core::rotate::Plan, Option<String>) {
        let checkpoint = npr.status.as_ref().and_then(|s| s.checkpoint.as_ref());
        let memory = self
            .pools
            .get(&npr.name_any())
            .and_then(|s| s.refused.as_ref());
        let refused = refusals::remembered(memory, npr.status.as_ref());
        let observed = &*refusals::observed_with(observed, refused);
        match request {
            Some(Ok(r)) => {
                rota_core::rotate::plan_with(desired, observed, checkpoint, Some(r), now)
            }
            _ => (plan(desired, observed, checkpoint, now), None),
        }
    }

    /// The status this reconcile writes, composed in one place (`rotate::status`) from the
    /// plan, the previous status, the pool's errors and the writing term.
    fn compose(
        &mut self,
        npr: &NodePoolRotation,
        plan: &rota_core::rotate::Plan,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Composed {
        let state = self.pools.get_mut(&npr.name_any()).expect("prepared");
        let previous = npr.status.as_ref();
        // The term that writes: ours under election (a new term rewrites the status once),
        // else the one already there.
        let fence = match &self.election {
            Some(_) => self.leadership.fence(),
            None => previous.and_then(|p| p.fence.clone()),
        };
        let composed = compose(&Reconciled {
            plan,
            previous,
            commit: &npr.spec.source_commit,
            generation: npr.metadata.generation,
            now,
            last_error: state.last_error.as_deref(),
            cause: state.errors.last(),
            stuck_after: self.config.stuck_after,
            fence,
            refused: refusals::remembered(state.refused.as_ref(), previous),
        });
        if composed.progressed {
            state.errors.healed();
        }
        self.metrics
            .pool(&npr.spec.cluster, &npr.spec.pool)
            .set_stuck(composed.stuck.as_ref().map(|s| s.reason));
        composed
    }

    /// The side effects: the status (skipped when nothing is to be done and nothing new is
    /// to be said, as for most reconciles of a pool waiting for a boot or a soak), then the
    /// plan's actions, in the batch's span.
    async fn act(
        &self,
        npr: &NodePoolRotation,
        plan: &rota_core::rotate::Plan,
        status: &NodePoolRotationStatus,
    ) -> Acted {
        // A status that carries no decision waits for the next write (`must_write`); a pass
        // with nothing to do then writes nothing, one that only evicts checks the stored
        // status instead of writing it (`Persist::Check`).
        let write = rota_core::rotate::status::must_write(npr.status.as_ref(), status);
        let unchanged = plan.actions.is_empty() && !write;
        if unchanged {
            return Acted {
                result: Ok(0),
                unchanged,
                written: false,
                done: step_events::Digest::default(),
            };
        }
        let evicts_only = plan
            .actions
            .iter()
            .all(|p| matches!(p.action, rota_core::rotate::Action::Evict { .. }));
        let persist = if write || !evicts_only {
            Persist::Write
        } else {
            Persist::Check
        };
        let edge = Edge {
            client: self.client.clone(),
            groups: self.groups.as_ref(),
            recorder: self.recorder.clone(),
            metrics: Some(self.metrics.clone()),
            lease: self.election.as_ref().map(|_| self.leadership.clone()),
            owners: self.owners.of(&npr.spec.group),
            departures: Some(&self.departures),
            drift: Some(self.drift.as_ref()),
        };
        let batch = plan
            .checkpoint
            .as_ref()
            .and_then(|c| c.stage.batch())
            .map(|b| b.number);
        let mut done = step_events::Digest::default();
        let applied = apply::apply(&edge, npr, plan, status, persist, &mut done);
        let result = match batch {
            Some(n) => applied.instrument(crate::telemetry::batch_span(n)).await,
            None => applied.await,
        };
        // The status is written unless the write itself failed or was refused.
        let written = persist == Persist::Write
            && !matches!(
                result,
                Err(ApplyError::Status { .. }
                    | ApplyError::Conflict { .. }
                    | ApplyError::NotLeading(_)
                    | ApplyError::Fenced { .. })
            );
        Acted {
            result,
            unchanged,
            written,
            done,
        }
    }

    /// What the outcome means for the pool's next look: progress clears the last error and
    /// the pool is looked at again when what it waits for is due; a failure is [`Self::failed`].
    async fn settle(
        &mut self,
        npr: &NodePoolRotation,
        desired: &rota_core::fleet::resolved::DesiredPool,
        plan: &rota_core::rotate::Plan,
        observed: &rota_core::rotate::Observed,
        result: Result<usize, ApplyError>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Outcome {
        let name = npr.name_any();
        let e = match result {
            Ok(ran) => {
                self.stats.actions.fetch_add(ran as u64, Ordering::Relaxed);
                let state = self.pools.get_mut(&name).expect("prepared");
                // The undoing of a stopped batch does not clear the last error: a paused pool
                // keeps naming the error that stopped it (quota, throttling).
                let stopping = matches!(plan.status.phase, Phase::Paused | Phase::Failed)
                    || plan.checkpoint.as_ref().is_some_and(|c| {
                        c.halted.is_some() || matches!(c.stage, Stage::Abandoning { .. })
                    });
                if error_healed(
                    stopping,
                    &plan.actions[..ran.min(plan.actions.len())],
                    state.last_error_action.as_deref(),
                ) {
                    state.last_error = None;
                    state.last_error_action = None;
                    state.refused = None;
                }
                state.failures = 0;
                state.blocked_on = None;
                let wait = requeue::after_plan(plan, &desired.policy, &desired.gates, now);
                state.due = self.clock.after(wait);
                return Outcome::Applied {
                    actions: ran,
                    phase: plan.status.phase,
                };
            }
            Err(e) => e,
        };
        self.failed(npr, observed, e).await
    }

    /// An action (or the status write) failed: a refusal observes again at once, a failure
    /// is counted, classified once and backs off by its class; a blocked eviction waits for
    /// the PodDisruptionBudget that covers the pod.
    async fn failed(
        &mut self,
        npr: &NodePoolRotation,
        observed: &rota_core::rotate::Observed,
        e: ApplyError,
    ) -> Outcome {
        let name = npr.name_any();
        let retry = e.retry();
        let error = e.to_string();
        if matches!(
            e,
            ApplyError::Conflict { .. } | ApplyError::NotLeading(_) | ApplyError::Fenced { .. }
        ) {
            // Not a failure of the pool: someone else wrote (or leads). Nothing planned from
            // this read is acted on; the next pass observes again.
            tracing::info!(pool = %name, %error, "not acting on this read");
            self.pools.get_mut(&name).expect("prepared").due = Instant::now();
            return Outcome::Failed { retry, error };
        }
        tracing::info!(pool = %name, %error, ?retry, "apply stopped");
        self.pools.get_mut(&name).expect("prepared").failures += 1;
        if self.record_error(&name, npr, e.classify()).await.is_some() {
            tracing::error!(pool = %name, %error, "an action failed and will not heal by retrying");
        }
        let state = self.pools.get_mut(&name).expect("prepared");
        state.refused = refusals::of(&e);
        if let ApplyError::EvictionBlocked { namespace, pod } = &e {
            // The timer is only a safety net for a missed watch event.
            state.blocked_on = observed
                .nodes
                .iter()
                .flat_map(|n| &n.pods)
                .find(|x| x.namespace == *namespace && x.name == *pod)
                .and_then(|x| x.pdb.as_ref())
                .map(|b| (b.namespace.clone(), b.name.clone()));
        } else {
            state.last_error = Some(error.clone());
            state.last_error_action = match &e {
                ApplyError::Cloud { action, .. } | ApplyError::Kube { action, .. } => {
                    Some(action.clone())
                }
                _ => None,
            };
        }
        state.due = self
            .clock
            .after(requeue::after_error(retry, state.failures));
        Outcome::Failed { retry, error }
    }
}

/// What [`Controller::act`] did.
struct Acted {
    result: Result<usize, ApplyError>,
    /// Nothing to do and nothing new to say: nothing was written.
    unchanged: bool,
    /// The status was written.
    written: bool,
    /// The actions that ran, for the step's Event.
    done: step_events::Digest,
}

impl Acted {
    /// Whether the status now records this reconcile (written, or already saying the same):
    /// only then is an operator's request consumed. A crash before this leaves the
    /// annotation, and the checkpoint's `operator_request` keeps it from being applied twice.
    fn recorded(&self) -> bool {
        self.written || (self.unchanged && self.result.is_ok())
    }
}

impl Controller {
    /// Count an error of `pool` and remember it as the likely cause should the pool stick;
    /// one that cannot heal by retrying is reported once (a Warning Event naming its
    /// reason). Returns the reason when it alerts now.
    async fn record_error(
        &mut self,
        name: &str,
        npr: &NodePoolRotation,
        err: rota_core::errors::Classified,
    ) -> Option<&'static str> {
        let alerts = err.class.alerts();
        self.metrics
            .pool(&npr.spec.cluster, &npr.spec.pool)
            .record_error(err.reason, alerts);
        let state = self.pools.get_mut(name)?;
        let alert = state.errors.record(err)?;
        self.event(
            npr,
            true,
            alert,
            "an error that retrying will not fix; see the status message",
        )
        .await;
        Some(alert)
    }

    /// After a status write: the pool's gauges, the counters and histograms of the stages it
    /// left, the Stuck Event, gate failures and the rollout notices.
    async fn after_write(
        &mut self,
        npr: &NodePoolRotation,
        composed: &Composed,
        failed_gate: &Option<String>,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let status = &composed.status;
        let (cluster, pool) = (npr.spec.cluster.as_str(), npr.spec.pool.as_str());
        let prev = npr.status.as_ref();
        {
            let pm = self.metrics.pool(cluster, pool);
            pm.observe_status(status);
            if let Some(s) = self.pools.get_mut(&npr.name_any()) {
                s.batch_started = transitions::count(prev, status, s.batch_started, now, &pm);
            }
            // A gate that stopped the rotation holds rota_pool_gate_failed until it moves.
            let stopped = matches!(
                status.phase,
                Phase::Failed | Phase::RollingBack | Phase::Paused
            );
            let was_stopped = prev.is_some_and(|p| {
                matches!(p.phase, Phase::Failed | Phase::RollingBack | Phase::Paused)
            });
            match failed_gate {
                Some(g) if stopped && !was_stopped => pm.record_gate_failed(g),
                _ if !stopped => pm.clear_gate_failed(),
                _ => {}
            }
        }
        if let Some((warning, reason, note)) = stop_event(prev, status) {
            self.event(npr, warning, reason, &note).await;
        }
        if let Some(t) = &composed.transition {
            let (warning, reason, note) = t.event();
            if warning {
                tracing::warn!(%note, "pool stuck");
            } else {
                tracing::info!("pool moves again");
            }
            self.event(npr, warning, reason, &note).await;
        }
        for notice in crate::notify::notices_for(&npr.spec, prev, status) {
            tracing::info!(?notice.kind, "rollout notice");
            self.notifier.notify(notice);
        }
    }

    /// Records an operator's request in an Event and removes its annotation (only if it
    /// still holds this request: a newer one stays for the next reconcile).
    async fn consume_request(
        &self,
        npr: &NodePoolRotation,
        request: &Result<Request, OperatorError>,
        steered: Option<&str>,
    ) {
        let (value, warning, reason, note) = request_event(request, steered);
        self.event(npr, warning, reason, &note).await;
        let patch = match clear_request_patch(npr.metadata.annotations.as_ref(), &value) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "building the request-clearing patch failed");
                return;
            }
        };
        let api: Api<NodePoolRotation> = Api::all(self.client.clone());
        if let Err(e) = api
            .patch(
                &npr.name_any(),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::<()>::Json(patch),
            )
            .await
        {
            // A newer request replaced it (the test op fails), or a transient error: the next
            // reconcile sees the annotation again and the checkpoint knows it was applied.
            tracing::info!(error = %e, "clearing the operator request annotation failed");
        }
    }

    /// Gather what this pass did into the pool's batch step and post the step's Event when
    /// it ends ([`step_events`]).
    async fn post_step_events(
        &mut self,
        npr: &NodePoolRotation,
        plan: &rota_core::rotate::Plan,
        done: &step_events::Digest,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        let Some(state) = self.pools.get_mut(&npr.name_any()) else {
            return;
        };
        let posts = step_events::record(&mut state.events, step_events::Step::of(plan), done, now);
        for (reason, action, note) in posts {
            self.event_as(npr, false, reason, &action, &note).await;
        }
    }

    /// Publish an Event on the NodePoolRotation (when events are on); failures are logged.
    async fn event(&self, npr: &NodePoolRotation, warning: bool, reason: &str, note: &str) {
        self.event_as(npr, warning, reason, "Rotate", note).await
    }

    /// [`Self::event`] with its `action` (a batch step's Event names its batch).
    async fn event_as(
        &self,
        npr: &NodePoolRotation,
        warning: bool,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        use kube::runtime::events::{Event, EventType};
        let Some(rec) = &self.recorder else { return };
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = rec.publish(&ev, &npr.object_ref(&())).await {
            tracing::warn!(error = %e, "publishing an event failed");
        }
    }
}

/// Whether a pass that observed, wrote its status and ran its first actions (`ran`) heals
/// the pool's last error. An error of no action (observing, writing the status) has healed
/// with this pass, which did both (a pool waiting for a slot must not name a describe that
/// was throttled an hour ago). An action's error heals with any progress of a moving pool;
/// a stopping pool (a halt, an undo) keeps naming it (quota, throttling) unless the very
/// action that failed has now succeeded (the halt's own `set image` back to the origin,
/// which a 504 interrupted).
pub fn error_healed(
    stopping: bool,
    ran: &[rota_core::rotate::Planned],
    failed_action: Option<&str>,
) -> bool {
    match failed_action {
        None => true,
        Some(f) => !ran.is_empty() && (!stopping || ran.iter().any(|p| p.action.to_string() == f)),
    }
}

/// Every stop says who must do what: the Event to post when a pool stops, or what holds it
/// changes (`warning` when it waits for a person): its reason, and the note's cause,
/// blockers and next step. `None` while it moves or nothing changed.
pub fn stop_event<'s>(
    prev: Option<&NodePoolRotationStatus>,
    status: &'s NodePoolRotationStatus,
) -> Option<(bool, &'s str, String)> {
    let note = status.stop.as_ref()?;
    // A wait rota ends is said once per reason: a drain's blocked pods change with every
    // eviction, and an Event each time would flood the resource. What holds a pool for a
    // person is said again whenever it changes.
    let same = prev.and_then(|p| p.stop.as_ref()).is_some_and(|p| {
        p.reason == note.reason
            && (note.by == rota_core::rotate::stop::MovedBy::Rota
                || p.blocked_by == note.blocked_by)
    });
    (!same).then(|| {
        (
            note.by == rota_core::rotate::stop::MovedBy::Person,
            note.reason.as_str(),
            note.line(),
        )
    })
}

/// The operator's request on the NodePoolRotation (`rota.dev/request`), if any.
fn operator_request(
    npr: &NodePoolRotation,
) -> Option<Result<rota_core::rotate::operator::Request, rota_core::rotate::operator::OperatorError>>
{
    let annotations = npr.metadata.annotations.as_ref()?;
    let value = annotations.get(rota_core::rotate::operator::REQUEST_ANNOTATION)?;
    let note = annotations
        .get(rota_core::rotate::operator::REQUEST_NOTE_ANNOTATION)
        .map(String::as_str);
    Some(rota_core::rotate::operator::Request::parse(value).map(|r| r.with_note(note)))
}

/// The gate whose failure the observation carries, if any.
fn verdict_gate(v: &GateVerdict) -> Option<String> {
    match v {
        GateVerdict::Failed { gate, .. } => Some(gate.clone()),
        _ => None,
    }
}

/// `maxParallelPools` over the owned resources, per cluster, in name order: for each pool
/// that would start a rotation, `Some(why)` when it may not now.
pub fn start_holds(nprs: &[NodePoolRotation]) -> HashMap<String, Option<String>> {
    let mut by_cluster: BTreeMap<&str, Vec<&NodePoolRotation>> = BTreeMap::new();
    for n in nprs {
        by_cluster
            .entry(n.spec.cluster.as_str())
            .or_default()
            .push(n);
    }
    let mut out = HashMap::new();
    for pools in by_cluster.values_mut() {
        pools.sort_by_key(|n| n.name_any());
        let max = pools
            .iter()
            .map(|n| n.spec.policy.max_parallel_pools)
            .min()
            .unwrap_or(1);
        let demand: Vec<PoolDemand> = pools
            .iter()
            .map(|n| {
                let status = n.status.as_ref();
                // A pool stopped for a reason of its own (a pod that cannot be evicted, a
                // do-not-disrupt, nodes matching no instance) gives its slot up: its siblings
                // would otherwise wait for the person it waits for. One whose stop may say
                // the image is bad, or that a person paused, keeps it (`Reason::holds_slot`).
                let own_stop = status.is_some_and(|s| {
                    s.phase == Phase::Paused
                        && s.stop
                            .as_ref()
                            .and_then(|n| rota_core::rotate::stop::Reason::parse(&n.reason))
                            .is_some_and(|r| !r.holds_slot())
                });
                let rotating = !own_stop
                    && status
                        .and_then(|s| s.checkpoint.as_ref())
                        .is_some_and(|c| !matches!(c.stage, Stage::Done));
                // Done and nothing new asked since: no demand.
                let settled = status.is_some_and(|s| {
                    matches!(s.phase, Phase::Succeeded | Phase::Failed)
                        && s.observed_generation == n.metadata.generation
                });
                let inert =
                    matches!(n.spec.mode, Mode::Ignore | Mode::ReadOnly) || n.spec.policy.paused;
                PoolDemand {
                    pool: n.name_any(),
                    rotating,
                    waiting: !rotating && !own_stop && !settled && !inert,
                }
            })
            .collect();
        for (pool, hold) in admit(&demand, max) {
            out.insert(pool, hold);
        }
    }
    out
}

/// Sample the gates that are due from the index (and Prometheus) and count each sample. What
/// the index has not listed yet is no sample (the gates stay pending); what its failing watch
/// cannot answer for is unseen: those gates fail their sample (fail closed), never pass on an
/// empty view.
async fn take_samples(
    index: &ClusterIndex,
    specs: &[rota_core::fleet::resolved::ResolvedGate],
    gs: &[Box<dyn Gate>],
    trackers: &mut [Tracker],
    pm: &crate::metrics::PoolMetrics<'_>,
    now: chrono::DateTime<chrono::Utc>,
) {
    let Some((pods, events, unseen)) = gate_inputs(index, specs) else {
        return;
    };
    let inputs = GateInputs {
        pods: &pods,
        events: &events,
        now,
    };
    let mut taken = gates::record_blind(specs, trackers, &unseen, now);
    taken.extend(gates::sample_due(gs, trackers, &inputs).await);
    for (gate, passed) in taken {
        let r = if passed {
            GateResult::Pass
        } else {
            GateResult::Fail
        };
        pm.record_gate(&gate, r);
    }
}

/// The gates' view of the cluster, from the index: every pod's health and, when an events
/// gate asks, the index's window of events; what the index cannot answer for is reported in
/// `Unseen` (never an empty cluster: see `gates::record_blind`). `None` while a kind the
/// gates read has not been listed yet (a watch just started): no sample this pass.
fn gate_inputs(
    index: &ClusterIndex,
    gates: &[rota_core::fleet::resolved::ResolvedGate],
) -> Option<(PodTally, Vec<EventRecord>, gates::Unseen)> {
    use crate::kube::index::NotObserved;
    let state = index.read();
    let wants = |f: fn(&GateCheck) -> bool| gates.iter().any(|g| f(&g.check));
    let mut unseen = gates::Unseen::default();
    let pods = if wants(|c| matches!(c, GateCheck::Pods { .. })) {
        match state.pod_tally() {
            Ok(p) => p,
            Err(NotObserved::NotSynced(_)) => return None,
            Err(e) => {
                unseen.pods = Some(e.to_string());
                PodTally::default()
            }
        }
    } else {
        PodTally::default()
    };
    let events = if wants(|c| matches!(c, GateCheck::Events { .. })) {
        match state.events() {
            Ok(e) => e,
            Err(NotObserved::NotSynced(_)) => return None,
            Err(e) => {
                unseen.events = Some(e.to_string());
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    Some((pods, events, unseen))
}

/// The Event an operator's request gets: (the annotation's value, warning?, reason, note).
/// One reason per verb: the event recorder folds repeats of a reason into one Event (a
/// count), which would hide a resume behind the pause before it.
fn request_event(
    request: &Result<Request, OperatorError>,
    steered: Option<&str>,
) -> (String, bool, &'static str, String) {
    use rota_core::rotate::operator::Verb;
    match request {
        Ok(r) => (
            r.id.clone(),
            false,
            match r.verb {
                Verb::Pause => "OperatorPause",
                Verb::Resume => "OperatorResume",
                Verb::Retry => "OperatorRetry",
                Verb::CompleteSoak => "OperatorCompleteSoak",
            },
            steered.unwrap_or("applied").to_string(),
        ),
        Err(e @ OperatorError::Malformed { value }) => (
            value.clone(),
            true,
            "OperatorRequestInvalid",
            format!("ignored: {e}"),
        ),
    }
}

/// The JSON patch that removes the request annotation only while it still holds `value`
/// (its `test` op fails on a newer request), and the request's free-text note with it.
fn clear_request_patch(
    annotations: Option<&BTreeMap<String, String>>,
    value: &str,
) -> Result<json_patch::Patch, serde_json::Error> {
    use rota_core::rotate::operator::{REQUEST_ANNOTATION, REQUEST_NOTE_ANNOTATION};
    let pointer = |name: &str| format!("/metadata/annotations/{}", name.replace('/', "~1"));
    let path = pointer(REQUEST_ANNOTATION);
    let mut ops = vec![
        serde_json::json!({"op": "test", "path": path, "value": value}),
        serde_json::json!({"op": "remove", "path": path}),
    ];
    if annotations.is_some_and(|a| a.contains_key(REQUEST_NOTE_ANNOTATION)) {
        ops.push(serde_json::json!({"op": "remove", "path": pointer(REQUEST_NOTE_ANNOTATION)}));
    }
    serde_json::from_value(serde_json::Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::rotate::operator::{REQUEST_ANNOTATION, REQUEST_NOTE_ANNOTATION};

    #[test]
    fn each_verb_has_its_own_event_reason_and_a_bad_request_warns() {
        for (value, reason) in [
            ("pause@2026-11-24T06:00:00Z", "OperatorPause"),
            ("resume@2026-11-24T06:00:00Z", "OperatorResume"),
            ("retry@2026-11-24T06:00:00Z", "OperatorRetry"),
        ] {
            let got = request_event(&Request::parse(value), None);
            assert_eq!(
                got,
                (value.to_string(), false, reason, "applied".to_string())
            );
        }
        let (value, warning, reason, note) = request_event(&Request::parse("explode"), None);
        assert_eq!(
            (value.as_str(), warning, reason),
            ("explode", true, "OperatorRequestInvalid")
        );
        assert!(note.starts_with("ignored: "), "{note}");
    }

    #[test]
    fn the_clearing_patch_removes_only_this_request_and_its_note() {
        let value = "pause@2026-11-24T06:00:00Z";
        let mut annotations = BTreeMap::from([(REQUEST_ANNOTATION.to_string(), value.to_string())]);
        let ops = |p: &json_patch::Patch| serde_json::to_value(p).unwrap();
        let patch = clear_request_patch(Some(&annotations), value).unwrap();
        let path = format!(
            "/metadata/annotations/{}",
            REQUEST_ANNOTATION.replace('/', "~1")
        );
        assert_eq!(
            ops(&patch),
            serde_json::json!([
                {"op": "test", "path": path, "value": value},
                {"op": "remove", "path": path}
            ])
        );
        annotations.insert(REQUEST_NOTE_ANNOTATION.to_string(), "by hand".to_string());
        let patch = clear_request_patch(Some(&annotations), value).unwrap();
        assert_eq!(ops(&patch).as_array().unwrap().len(), 3);
        assert_eq!(
            ops(&patch)[2]["path"],
            format!(
                "/metadata/annotations/{}",
                REQUEST_NOTE_ANNOTATION.replace('/', "~1")
            )
        );
    }

    /// Issue 26 (3): a pool stopped for a reason of its own gives its `maxParallelPools` slot
    /// up; one whose stop may say the image is bad keeps the others held.
    #[test]
    fn a_pool_stopped_for_its_own_reason_frees_its_slot_and_a_bad_image_holds_it() {
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        use rota_core::rotate::stop::{MovedBy, StopNote};
        let fleet = crate::source::read::load_dir(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        )
        .unwrap();
        let clusters = fleet.resolve_all().unwrap();
        let desired = &clusters[0].pools[0];
        let npr = |name: &str, status: Option<NodePoolRotationStatus>| {
            let mut spec = NodePoolRotationSpec::from_desired(desired, "abc");
            spec.policy.max_parallel_pools = 1;
            spec.policy.paused = false;
            let mut n = NodePoolRotation::new(name, spec);
            n.metadata.generation = Some(1);
            n.status = status;
            n
        };
        let stopped = |reason: &str| NodePoolRotationStatus {
            phase: Phase::Paused,
            checkpoint: Some(
                serde_json::from_value(serde_json::json!({
                    "originImage": "ami-old", "targetImage": "ami-new", "targetVersion": "2",
                    "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 1,
                    "halted": "halted", "stage": {"name": "between"}
                }))
                .unwrap(),
            ),
            stop: Some(StopNote {
                reason: reason.into(),
                by: MovedBy::Person,
                cause: "halted".into(),
                blocked_by: vec![],
                next: "rota ctl retry".into(),
            }),
            observed_generation: Some(1),
            ..Default::default()
        };
        let holds = start_holds(&[npr("a", Some(stopped("DrainTimeout"))), npr("b", None)]);
        assert_eq!(
            holds.get("b"),
            Some(&None),
            "a drain a pod holds frees the slot"
        );
        assert!(
            !holds.contains_key("a"),
            "the stopped pool asks for no slot either"
        );
        for keeps in ["GateFailed", "BatchFailed", "PausedByOperator"] {
            let holds = start_holds(&[npr("a", Some(stopped(keeps))), npr("b", None)]);
            assert_eq!(
                holds.get("b").cloned().flatten().as_deref(),
                Some("maxParallelPools is 1 and pool(s) a are rotating"),
                "{keeps}"
            );
        }
    }

    /// Issue 26 (3): no stale error rides along on a stop: the halt's own `set image` that a
    /// 504 interrupted, once it succeeds, is no longer named; a quota that stopped the batch
    /// is, while the undo's other actions run.
    #[test]
    fn a_healed_error_is_dropped_even_on_a_stopped_pool() {
        use rota_core::rotate::{Action, Planned};
        let set_image = Planned {
            action: Action::SetImage {
                image: "ami-old".into(),
            },
            reason: "halted".into(),
        };
        let withdraw = Planned {
            action: Action::WithdrawSurge {
                desired: 4,
                instances: vec![],
            },
            reason: "undo".into(),
        };
        let failed = Some("set image ami-old");
        assert!(error_healed(true, std::slice::from_ref(&set_image), failed));
        assert!(!error_healed(true, std::slice::from_ref(&withdraw), failed));
        assert!(!error_healed(false, &[], failed));
        assert!(error_healed(false, std::slice::from_ref(&withdraw), failed));
        // A describe or a status write that failed: healed by a pass that did both, even
        // one with nothing to do (a pool waiting for its slot).
        assert!(error_healed(true, &[], None));
    }

    /// A wait rota ends is one Event per reason; a person's stop again when what holds it
    /// changes.
    #[test]
    fn stop_events_are_posted_once_per_reason_and_per_blocker_for_a_person() {
        use rota_core::rotate::stop::{MovedBy, StopNote};
        let status = |by, blocked: &str| NodePoolRotationStatus {
            stop: Some(StopNote {
                reason: "Draining".into(),
                by,
                cause: "draining".into(),
                blocked_by: vec![blocked.into()],
                next: "nothing to do".into(),
            }),
            ..Default::default()
        };
        let (a, b) = (
            status(MovedBy::Rota, "pod a"),
            status(MovedBy::Rota, "pod b"),
        );
        assert!(stop_event(None, &a).is_some());
        assert!(stop_event(Some(&a), &b).is_none());
        let (a, b) = (
            status(MovedBy::Person, "pod a"),
            status(MovedBy::Person, "pod b"),
        );
        assert!(stop_event(Some(&a), &a).is_none());
        let (warning, reason, note) = stop_event(Some(&a), &b).unwrap();
        assert!(warning);
        assert_eq!(reason, "Draining");
        assert_eq!(note, "draining; blocked by: pod b; next: nothing to do");
        assert!(stop_event(Some(&a), &NodePoolRotationStatus::default()).is_none());
    }
}
