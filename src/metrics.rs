//! rota's Prometheus metrics and its small HTTP server (`/metrics`, `/healthz`, `/readyz`).
//!
//! One [`Metrics`] per process owns a private registry. The controller and the agent record
//! through narrow methods (`metrics.pool(cluster, pool).set_nodes(10, 4)`,
//! `metrics.record_cloud_call("aws", "set_image", Outcome::Ok)`) so that label sets stay
//! fixed and low-cardinality: cluster, pool, gate, reason, provider, call, outcome — never a
//! node, pod or instance name (a 5,000-node fleet would otherwise mint a series per node).
//!
//! "Seconds since last progress" is computed at scrape time from the last progress instant,
//! so it keeps growing while nothing moves, which is exactly what the stuck alert watches.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use tokio::net::TcpListener;

use rota_core::rotate::Phase;

/// Every phase a pool can be in, for the `rota_pool_phase` state set (one series per phase,
/// the current one at 1): PromQL can then count pools per phase without regex on strings.
pub const PHASES: [Phase; 8] = [
    Phase::Pending,
    Phase::Waiting,
    Phase::Rotating,
    Phase::Soaking,
    Phase::Paused,
    Phase::Failed,
    Phase::Succeeded,
    Phase::RollingBack,
];

/// How a call or attempt ended: the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Refused for now, will be retried (HTTP 429, a PDB forbidding an eviction, throttling).
    Throttled,
    /// Not found (often fine: idempotent deletes).
    NotFound,
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Throttled => "throttled",
            Outcome::NotFound => "not_found",
            Outcome::Error => "error",
        }
    }
}

/// The result of one evaluation of a health gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateResult {
    Pass,
    Fail,
    NoData,
    Error,
}

impl GateResult {
    pub fn as_str(self) -> &'static str {
        match self {
            GateResult::Pass => "pass",
            GateResult::Fail => "fail",
            GateResult::NoData => "no_data",
            GateResult::Error => "error",
        }
    }
}

/// Why the process is or is not ready: `/readyz` answers 200 only when both are known.
#[derive(Debug, Default)]
pub struct Readiness {
    caches_synced: AtomicBool,
    leadership_known: AtomicBool,
    leader: AtomicBool,
}

impl Readiness {
    /// The informers (nodes, pods, PDBs, NodePoolRotations) have listed once.
    pub fn set_caches_synced(&self, synced: bool) {
        self.caches_synced.store(synced, Ordering::SeqCst);
    }

    /// The leader election has decided whether this replica leads (either way).
    pub fn set_leadership_known(&self, known: bool) {
        self.leadership_known.store(known, Ordering::SeqCst);
    }

    /// Whether this replica holds the Lease now (reported by `/readyz`; a standby is ready
    /// too: it serves and takes over when the leader goes).
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::SeqCst);
    }

    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    /// `None` when ready, else what is missing.
    pub fn not_ready_because(&self) -> Option<String> {
        let mut missing = Vec::new();
        if !self.caches_synced.load(Ordering::SeqCst) {
            missing.push("caches not synced");
        }
        if !self.leadership_known.load(Ordering::SeqCst) {
            missing.push("leadership not known");
        }
        (!missing.is_empty()).then(|| missing.join(", "))
    }
}

struct Inner {
    registry: Registry,
    readiness: Readiness,
    pools: PoolSeries,
    steps: StepSeries,
    repo: RepoSeries,
    process: ProcessSeries,
    /// What each pool's `rota_pool_info` series says (channel, version, image), to replace it.
    pool_infos: Mutex<BTreeMap<String, [String; 3]>>,
    /// The `cluster` label of the process-wide series (`""`: none).
    cluster: String,
    /// Last progress instant per (cluster, pool), for `rota_pool_seconds_since_progress`.
    last_progress: Mutex<BTreeMap<(String, String), DateTime<Utc>>>,
    /// The reason each stuck pool's `rota_pool_stuck` series carries (to clear it).
    stuck_reasons: Mutex<BTreeMap<(String, String), String>>,
    /// The gate holding each failed pool (to clear `rota_pool_gate_failed`).
    failed_gates: Mutex<BTreeMap<(String, String), String>>,
    /// The reason of the rejected newest commit, if it is.
    rejected: Mutex<Option<String>>,
}

/// What each pool is now: its nodes, phase, batch, progress, the image it runs and what holds
/// it.
struct PoolSeries {
    pool_nodes: IntGaugeVec,
    pool_nodes_on_target: IntGaugeVec,
    pool_phase: IntGaugeVec,
    pool_batch: IntGaugeVec,
    pool_progress: GaugeVec,
    pool_since_progress: GaugeVec,
    pool_stuck: IntGaugeVec,
    pool_gate_failed: IntGaugeVec,
    pool_info: IntGaugeVec,
    pool_image_age: GaugeVec,
    pool_image_overdue: IntGaugeVec,
}

impl PoolSeries {
    fn register(r: &Registrar) -> Self {
        Self {
            pool_nodes: r.int_gauge("rota_pool_nodes", "Nodes in the pool.", POOL),
            pool_nodes_on_target: r.int_gauge(
                "rota_pool_nodes_on_target",
                "Nodes of the pool running the desired image.",
                POOL,
            ),
            pool_phase: r.int_gauge(
                "rota_pool_phase",
                "The pool's phase: 1 for the current phase, 0 for the others.",
                &["cluster", "pool", "phase"],
            ),
            pool_batch: r.int_gauge(
                "rota_pool_batch",
                "Number of the batch under way (1-based; 0 when none).",
                POOL,
            ),
            pool_progress: r.gauge(
                "rota_pool_progress_ratio",
                "Share of the pool's nodes on the desired image (0 to 1).",
                POOL,
            ),
            pool_since_progress: r.gauge(
                "rota_pool_seconds_since_progress",
                "Seconds since the pool's rotation last moved forward.",
                POOL,
            ),
            pool_stuck: r.int_gauge(
                "rota_pool_stuck",
                "1 while the pool is stuck (no progress for longer than the threshold), by reason.",
                &["cluster", "pool", "reason"],
            ),
            pool_gate_failed: r.int_gauge(
                "rota_pool_gate_failed",
                "1 while a failed gate holds the pool (rolled back or paused), by gate.",
                &["cluster", "pool", "gate"],
            ),
            pool_info: r.int_gauge(
                POOL_INFO,
                "Always 1; the channel, version and image every node of the pool runs.",
                &["cluster", "pool", "channel", "version", "image"],
            ),
            pool_image_age: r.gauge(
                "rota_pool_image_age_seconds",
                "Age of the image every node of the pool runs, from its version's `released` (absent when the repo does not say).",
                POOL,
            ),
            pool_image_overdue: r.int_gauge(
                "rota_pool_image_overdue",
                "1 while the pool runs an image older than its channel's maxAge (the patch deadline), else 0.",
                POOL,
            ),
        }
    }
}

/// What each pool's rotation did: nodes brought up, drained and terminated, evictions, gate
/// results, errors, and how long each step took.
struct StepSeries {
    nodes_brought_up: IntCounterVec,
    nodes_drained: IntCounterVec,
    nodes_terminated: IntCounterVec,
    evictions: IntCounterVec,
    gate_evaluations: IntCounterVec,
    gate_failures: IntCounterVec,
    errors: IntCounterVec,
    batch_duration: HistogramVec,
    drain_duration: HistogramVec,
    boot_to_ready: HistogramVec,
    reconcile_duration: HistogramVec,
}

impl StepSeries {
    fn register(r: &Registrar) -> Self {
        Self {
            nodes_brought_up: r.counter(
                "rota_nodes_brought_up_total",
                "Replacement nodes that joined and became Ready.",
                POOL,
            ),
            nodes_drained: r.counter("rota_nodes_drained_total", "Nodes drained.", POOL),
            nodes_terminated: r.counter(
                "rota_nodes_terminated_total",
                "Instances terminated after their node was drained.",
                POOL,
            ),
            evictions: r.counter(
                "rota_evictions_total",
                "Pod evictions, by outcome (throttled: refused by a PodDisruptionBudget).",
                &["cluster", "pool", "outcome"],
            ),
            gate_evaluations: r.counter(
                "rota_gate_evaluations_total",
                "Health gate evaluations, by result.",
                &["cluster", "pool", "gate", "result"],
            ),
            gate_failures: r.counter(
                "rota_gate_failures_total",
                "Gates that failed a batch or pool (after failureLimit): the rotation stopped.",
                &["cluster", "pool", "gate"],
            ),
            errors: r.counter(
                "rota_errors_total",
                "Errors by stable reason; alerting=true for those that cannot heal themselves.",
                &["cluster", "pool", "reason", "alerting"],
            ),
            batch_duration: r.histogram(
                "rota_batch_duration_seconds",
                "From surge to the batch's last old node terminated.",
                POOL,
                BATCH_BUCKETS,
            ),
            drain_duration: r.histogram(
                "rota_drain_duration_seconds",
                "From cordon to the node's last evictable pod gone.",
                POOL,
                DRAIN_BUCKETS,
            ),
            boot_to_ready: r.histogram(
                "rota_node_boot_to_ready_seconds",
                "From instance launch to the node Ready.",
                POOL,
                BOOT_BUCKETS,
            ),
            reconcile_duration: r.histogram(
                "rota_reconcile_duration_seconds",
                "One reconcile of one pool (observe, plan, apply).",
                POOL,
                RECONCILE_BUCKETS,
            ),
        }
    }
}

/// The fleet repo as the process reads it: fetches, polls, refused commits, a rewritten history.
struct RepoSeries {
    git_fetches: IntCounterVec,
    git_polls: IntCounterVec,
    git_last_success: GaugeVec,
    commits_rejected: IntCounterVec,
    commit_rejected: IntGaugeVec,
    history_rewritten: IntGaugeVec,
}

impl RepoSeries {
    fn register(r: &Registrar) -> Self {
        Self {
            git_fetches: r.counter(
                "rota_git_fetches_total",
                "Fetches of the fleet repo by outcome.",
                &["cluster", "outcome"],
            ),
            git_polls: r.counter(
                "rota_git_polls_total",
                "Polls of the fleet repo by what answered them: the protocol v2 probe (nothing in scope moved, no libgit2 connection) or libgit2 (a connection and the whole ref advertisement).",
                &["cluster", "answered_by"],
            ),
            git_last_success: r.gauge(
                "rota_git_last_fetch_success_timestamp_seconds",
                "Unix time of the last successful fetch of the fleet repo.",
                &["cluster"],
            ),
            commits_rejected: r.counter(
                "rota_commits_rejected_total",
                "Fleet commits refused (validation, signature); the last good commit stays in force.",
                &["cluster", "reason"],
            ),
            commit_rejected: r.int_gauge(
                "rota_fleet_commit_rejected",
                "1 while the newest fleet commit is refused (the last good one stays in force).",
                &["cluster", "reason"],
            ),
            history_rewritten: r.int_gauge(
                "rota_fleet_history_rewritten",
                "1 while the branch head does not descend from the commit in force (a force-push or another branch); nothing of it is acted on until confirmed.",
                &["cluster", "in_force", "head"],
            ),
        }
    }
}

/// The process's other edges and itself: cloud calls, commit statuses, notifications, the
/// Lease, its version.
struct ProcessSeries {
    cloud_calls: IntCounterVec,
    cloud_call_duration: HistogramVec,
    statuses_posted: IntCounterVec,
    statuses_deferred: IntCounterVec,
    statuses_waiting: IntGaugeVec,
    notifications: IntCounterVec,
    leader: IntGaugeVec,
    build_info: IntGaugeVec,
}

impl ProcessSeries {
    fn register(r: &Registrar) -> Self {
        Self {
            cloud_calls: r.counter(
                "rota_cloud_calls_total",
                "Cloud API calls by provider, call and outcome.",
                &["cluster", "provider", "call", "outcome"],
            ),
            cloud_call_duration: r.histogram(
                "rota_cloud_call_duration_seconds",
                "Duration of cloud API calls (retries included) by provider and call.",
                &["cluster", "provider", "call"],
                RECONCILE_BUCKETS,
            ),
            statuses_posted: r.counter(
                "rota_statuses_posted_total",
                "Commit statuses posted, by backend and outcome.",
                &["cluster", "backend", "outcome"],
            ),
            statuses_deferred: r.counter(
                "rota_statuses_deferred_total",
                "Commit statuses deferred past the fleet's write budget (written later, the newest per context).",
                &["cluster", "backend"],
            ),
            statuses_waiting: r.int_gauge(
                "rota_statuses_waiting",
                "Commit statuses waiting for the write budget now.",
                &["cluster", "backend"],
            ),
            notifications: r.counter(
                "rota_notifications_total",
                "Notification messages sent, by outcome.",
                &["cluster", "outcome"],
            ),
            leader: r.int_gauge(
                "rota_leader",
                "1 if this replica holds the leader Lease.",
                &["cluster"],
            ),
            build_info: r.int_gauge(
                "rota_build_info",
                "Always 1; rota's version as a label.",
                &["cluster", "version"],
            ),
        }
    }
}

/// Registers each series in the process's registry as it is made: the definitions are static,
/// so a failure here is a programming error caught by every test that builds [`Metrics`].
struct Registrar {
    registry: Registry,
}

impl Registrar {
    fn register<M: prometheus::core::Collector + Clone + 'static>(
        &self,
        m: prometheus::Result<M>,
    ) -> M {
        let m = m.expect("metric definitions are static and valid");
        self.registry
            .register(Box::new(m.clone()))
            .expect("each metric is registered once");
        m
    }

    fn int_gauge(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.register(IntGaugeVec::new(Opts::new(name, help), labels))
    }

    fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.register(GaugeVec::new(Opts::new(name, help), labels))
    }

    fn counter(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.register(IntCounterVec::new(Opts::new(name, help), labels))
    }

    fn histogram(&self, name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
        let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
        self.register(HistogramVec::new(opts, labels))
    }
}

/// The process's metrics; cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

const POOL: &[&str] = &["cluster", "pool"];

/// The info metric of what each pool runs (a Grafana panel and `rota status` read it by name).
pub const POOL_INFO: &str = "rota_pool_info";

// Rotations are slow: batches take minutes to an hour, drains seconds to tens of minutes.
const BATCH_BUCKETS: &[f64] = &[
    30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0,
];
const DRAIN_BUCKETS: &[f64] = &[
    5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
];
const BOOT_BUCKETS: &[f64] = &[15.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 900.0];
const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Metrics of a process that serves no one cluster (`rota controller`): the process-wide
    /// series carry `cluster=""`, which PromQL reads as no label.
    pub fn new() -> Self {
        Self::for_cluster("")
    }

    /// The metrics of `cluster`'s agent: every series carries `cluster`, so that alerts and
    /// dashboards over many clusters (one Prometheus, or federated) see each one apart.
    pub fn for_cluster(cluster: &str) -> Self {
        // One family of series a struct (what a pool is, what its rotation did, the fleet
        // repo, the process), so that a new metric goes beside its kin.
        let r = Registrar {
            registry: Registry::new(),
        };
        let inner = Inner {
            pools: PoolSeries::register(&r),
            steps: StepSeries::register(&r),
            repo: RepoSeries::register(&r),
            process: ProcessSeries::register(&r),
            last_progress: Mutex::new(BTreeMap::new()),
            stuck_reasons: Mutex::new(BTreeMap::new()),
            failed_gates: Mutex::new(BTreeMap::new()),
            rejected: Mutex::new(None),
            pool_infos: Mutex::new(BTreeMap::new()),
            cluster: cluster.to_string(),
            readiness: Readiness::default(),
            registry: r.registry,
        };
        inner
            .process
            .build_info
            .with_label_values(&[cluster, env!("CARGO_PKG_VERSION")])
            .set(1);
        inner.process.leader.with_label_values(&[cluster]).set(0);
        Metrics {
            inner: Arc::new(inner),
        }
    }

    /// The handle that records one pool's series.
    pub fn pool<'a>(&'a self, cluster: &'a str, pool: &'a str) -> PoolMetrics<'a> {
        PoolMetrics {
            m: &self.inner,
            cluster,
            pool,
        }
    }

    pub fn readiness(&self) -> &Readiness {
        &self.inner.readiness
    }

    /// This replica's leadership changed (or was decided for the first time): `rota_leader`,
    /// and `/readyz` knows the leadership state from now on.
    pub fn set_leader(&self, leader: bool) {
        self.inner.readiness.set_leader(leader);
        self.inner.readiness.set_leadership_known(true);
        self.inner
            .process
            .leader
            .with_label_values(&[self.inner.cluster.as_str()])
            .set(leader as i64);
    }

    pub fn observe_cloud_call(&self, provider: &str, call: &str, seconds: f64) {
        self.inner
            .process
            .cloud_call_duration
            .with_label_values(&[self.inner.cluster.as_str(), provider, call])
            .observe(seconds);
    }

    pub fn record_cloud_call(&self, provider: &str, call: &str, outcome: Outcome) {
        self.inner
            .process
            .cloud_calls
            .with_label_values(&[
                self.inner.cluster.as_str(),
                provider,
                call,
                outcome.as_str(),
            ])
            .inc();
    }

    /// A fetch of the fleet repo; on success `at` becomes the last successful fetch.
    pub fn record_git_fetch(&self, outcome: Outcome, at: DateTime<Utc>) {
        self.inner
            .repo
            .git_fetches
            .with_label_values(&[self.inner.cluster.as_str(), outcome.as_str()])
            .inc();
        if outcome == Outcome::Ok {
            self.inner
                .repo
                .git_last_success
                .with_label_values(&[self.inner.cluster.as_str()])
                .set(at.timestamp_millis() as f64 / 1000.0);
        }
    }

    /// Polls answered by the protocol v2 probe (`by_probe`) and by libgit2 (`by_libgit2`)
    /// since the last call (`rota_git_polls_total{answered_by="probe"|"libgit2"}`).
    pub fn record_git_polls(&self, by_probe: u64, by_libgit2: u64) {
        for (by, n) in [("probe", by_probe), ("libgit2", by_libgit2)] {
            if n > 0 {
                self.inner
                    .repo
                    .git_polls
                    .with_label_values(&[self.inner.cluster.as_str(), by])
                    .inc_by(n);
            }
        }
    }

    /// The newest fleet commit was refused; `reason` is a stable word (`validation`,
    /// `signature`). Holds `rota_fleet_commit_rejected{reason}` at 1 until a commit is accepted.
    pub fn record_commit_rejected(&self, reason: &str) {
        self.inner
            .repo
            .commits_rejected
            .with_label_values(&[self.inner.cluster.as_str(), reason])
            .inc();
        let mut rejected = self.inner.rejected.lock().expect("not poisoned");
        if let Some(old) = rejected.take() {
            let _ = self
                .inner
                .repo
                .commit_rejected
                .remove_label_values(&[self.inner.cluster.as_str(), old.as_str()]);
        }
        self.inner
            .repo
            .commit_rejected
            .with_label_values(&[self.inner.cluster.as_str(), reason])
            .set(1);
        *rejected = Some(reason.to_string());
    }

    /// A fleet commit passed validation and signature checks.
    pub fn record_commit_accepted(&self) {
        if let Some(old) = self.inner.rejected.lock().expect("not poisoned").take() {
            let _ = self
                .inner
                .repo
                .commit_rejected
                .remove_label_values(&[self.inner.cluster.as_str(), old.as_str()]);
        }
    }

    /// The branch head `head` does not descend from `in_force` (both full commit ids), or,
    /// with `None`, no longer: `rota_fleet_history_rewritten{cluster, in_force, head}` is 1
    /// while so.
    pub fn set_history_rewritten(&self, rewrite: Option<(&str, &str)>) {
        self.inner.repo.history_rewritten.reset();
        if let Some((in_force, head)) = rewrite {
            self.inner
                .repo
                .history_rewritten
                .with_label_values(&[self.inner.cluster.as_str(), in_force, head])
                .set(1);
        }
    }

    pub fn record_status_posted(&self, backend: &str, outcome: Outcome) {
        self.inner
            .process
            .statuses_posted
            .with_label_values(&[self.inner.cluster.as_str(), backend, outcome.as_str()])
            .inc();
    }

    /// A status the write budget deferred (`report::budget`).
    pub fn record_status_deferred(&self, backend: &str) {
        self.inner
            .process
            .statuses_deferred
            .with_label_values(&[self.inner.cluster.as_str(), backend])
            .inc();
    }

    /// How many statuses wait for the write budget now.
    pub fn set_statuses_waiting(&self, backend: &str, waiting: usize) {
        self.inner
            .process
            .statuses_waiting
            .with_label_values(&[self.inner.cluster.as_str(), backend])
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }

    /// `rota_pool_info{cluster,pool,channel,version,image} 1`: what every node of `pool`
    /// runs (the old series of the pool goes, so there is one per pool).
    pub fn set_pool_info(&self, pool: &str, channel: &str, version: &str, image: &str) {
        let cluster = self.inner.cluster.as_str();
        let now = [channel.to_string(), version.to_string(), image.to_string()];
        let mut infos = self.inner.pool_infos.lock().expect("not poisoned");
        if let Some(old) = infos.get(pool) {
            if *old == now {
                return;
            }
            let _ = self
                .inner
                .pools
                .pool_info
                .remove_label_values(&[cluster, pool, &old[0], &old[1], &old[2]]);
        }
        self.inner
            .pools
            .pool_info
            .with_label_values(&[cluster, pool, channel, version, image])
            .set(1);
        infos.insert(pool.to_string(), now);
    }

    /// `rota_pool_image_age_seconds` and `rota_pool_image_overdue` of a pool that runs a
    /// version released at `released` (`None`: the repo does not say; the series go), on a
    /// channel whose patch deadline is `max_age`.
    pub fn set_pool_image_age(
        &self,
        pool: &str,
        released: Option<DateTime<Utc>>,
        max_age: Option<std::time::Duration>,
        now: DateTime<Utc>,
    ) {
        let labels = [self.inner.cluster.as_str(), pool];
        let Some(released) = released else {
            let _ = self.inner.pools.pool_image_age.remove_label_values(&labels);
            let _ = self
                .inner
                .pools
                .pool_image_overdue
                .remove_label_values(&labels);
            return;
        };
        let age = (now - released).num_milliseconds().max(0) as f64 / 1000.0;
        self.inner
            .pools
            .pool_image_age
            .with_label_values(&labels)
            .set(age);
        let overdue = max_age.is_some_and(|m| age > m.as_secs_f64());
        self.inner
            .pools
            .pool_image_overdue
            .with_label_values(&labels)
            .set(i64::from(overdue));
    }

    /// The pool left git: its `rota_pool_info` goes.
    pub fn clear_pool_info(&self, pool: &str) {
        let cluster = self.inner.cluster.as_str();
        let _ = self
            .inner
            .pools
            .pool_image_age
            .remove_label_values(&[cluster, pool]);
        let _ = self
            .inner
            .pools
            .pool_image_overdue
            .remove_label_values(&[cluster, pool]);
        if let Some(old) = self
            .inner
            .pool_infos
            .lock()
            .expect("not poisoned")
            .remove(pool)
        {
            let _ = self
                .inner
                .pools
                .pool_info
                .remove_label_values(&[cluster, pool, &old[0], &old[1], &old[2]]);
        }
    }

    pub fn record_notification(&self, outcome: Outcome) {
        self.inner
            .process
            .notifications
            .with_label_values(&[self.inner.cluster.as_str(), outcome.as_str()])
            .inc();
    }

    /// The exposition text as of `now` (updates the seconds-since-progress gauges first).
    pub fn render_at(&self, now: DateTime<Utc>) -> String {
        {
            let last = self.inner.last_progress.lock().expect("not poisoned");
            for ((cluster, pool), at) in last.iter() {
                let secs = (now - *at).num_milliseconds().max(0) as f64 / 1000.0;
                self.inner
                    .pools
                    .pool_since_progress
                    .with_label_values(&[cluster.as_str(), pool.as_str()])
                    .set(secs);
            }
        }
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.inner.registry.gather(), &mut out)
            .expect("text encoding into a Vec cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }

    pub fn render(&self) -> String {
        self.render_at(Utc::now())
    }

    /// Serve `/metrics`, `/healthz` and `/readyz` on `listener` until `shutdown` resolves.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        tokio::pin!(shutdown);
        // Capped and timed (crate::serving): half-open or idle connections cannot pile up.
        let slots = crate::serving::Slots::new(crate::serving::METRICS);
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    // A connection that failed before accept (reset, fd limits): keep serving.
                    Err(e) => { tracing::warn!(error = %e, "metrics: accept failed"); tokio::time::sleep(std::time::Duration::from_millis(100)).await; continue }
                },
                () = &mut shutdown => return Ok(()),
            };
            let Some(slot) = slots.admit() else {
                continue;
            };
            let metrics = self.clone();
            let slots = slots.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, Infallible>(metrics.respond(&req)) }
                });
                let conn = slots.http1().serve_connection(TokioIo::new(stream), svc);
                let _ = slots.run(slot, conn).await;
            });
        }
    }

    /// Bind `addr` and serve in the background; returns the bound address (port 0 picks one).
    pub async fn spawn_server(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let me = self.clone();
        tokio::spawn(async move { me.serve(listener, std::future::pending()).await });
        Ok(local)
    }

    fn respond(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let text = |status: StatusCode, body: String, ctype: &str| {
            Response::builder()
                .status(status)
                .header("content-type", ctype)
                .body(Full::new(Bytes::from(body)))
                .expect("static response parts are valid")
        };
        const PLAIN: &str = "text/plain; charset=utf-8";
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into(), PLAIN);
        }
        match req.uri().path() {
            "/metrics" => text(
                StatusCode::OK,
                self.render(),
                "text/plain; version=0.0.4; charset=utf-8",
            ),
            // Alive as long as the process answers: a restart would not fix anything else.
            "/healthz" => text(StatusCode::OK, "ok\n".into(), PLAIN),
            "/readyz" => match self.inner.readiness.not_ready_because() {
                None if self.inner.readiness.is_leader() => {
                    text(StatusCode::OK, "ready (leader)\n".into(), PLAIN)
                }
                None => text(
                    StatusCode::OK,
                    "ready (standby: another replica holds the lease)\n".into(),
                    PLAIN,
                ),
                Some(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"), PLAIN),
            },
            _ => text(StatusCode::NOT_FOUND, "not found\n".into(), PLAIN),
        }
    }
}

/// Records the series of one pool (see [`Metrics::pool`]).
pub struct PoolMetrics<'a> {
    m: &'a Inner,
    cluster: &'a str,
    pool: &'a str,
}

impl PoolMetrics<'_> {
    fn l(&self) -> [&str; 2] {
        [self.cluster, self.pool]
    }

    /// Nodes in the pool and on the desired image; also sets the progress ratio.
    pub fn set_nodes(&self, total: u32, on_target: u32) {
        self.m
            .pools
            .pool_nodes
            .with_label_values(&self.l())
            .set(total as i64);
        self.m
            .pools
            .pool_nodes_on_target
            .with_label_values(&self.l())
            .set(on_target as i64);
        let ratio = if total == 0 {
            1.0
        } else {
            (on_target as f64 / total as f64).min(1.0)
        };
        self.m
            .pools
            .pool_progress
            .with_label_values(&self.l())
            .set(ratio);
    }

    pub fn set_phase(&self, phase: Phase) {
        for p in PHASES {
            let name = p.to_string();
            self.m
                .pools
                .pool_phase
                .with_label_values(&[self.cluster, self.pool, name.as_str()])
                .set((p == phase) as i64);
        }
    }

    /// The batch under way (1-based), or `None`.
    pub fn set_batch(&self, batch: Option<u32>) {
        self.m
            .pools
            .pool_batch
            .with_label_values(&self.l())
            .set(batch.unwrap_or(0) as i64);
    }

    /// Set the pool's gauges from its NodePoolRotation status: what the controller calls after
    /// every status write (nodes, progress, phase, batch, last progress).
    pub fn observe_status(&self, status: &rota_core::rotate::resource::NodePoolRotationStatus) {
        self.set_nodes(status.total, status.on_target);
        self.set_phase(status.phase);
        self.set_batch(
            status
                .checkpoint
                .as_ref()
                .and_then(|c| c.stage.batch())
                .map(|b| b.number),
        );
        if let Some(at) = status.last_progress_time {
            self.set_last_progress(at);
        }
    }

    /// The rotation moved forward at `at` (the status's `lastProgressTime`).
    pub fn set_last_progress(&self, at: DateTime<Utc>) {
        self.m
            .last_progress
            .lock()
            .expect("not poisoned")
            .insert((self.cluster.to_string(), self.pool.to_string()), at);
    }

    /// Stuck with `reason`, or not stuck (`None`): one series per reason at most at 1.
    pub fn set_stuck(&self, reason: Option<&str>) {
        let key = (self.cluster.to_string(), self.pool.to_string());
        let mut reasons = self.m.stuck_reasons.lock().expect("not poisoned");
        // Clear the reason this pool had, then raise the current one.
        if let Some(old) = reasons.remove(&key) {
            let _ = self.m.pools.pool_stuck.remove_label_values(&[
                self.cluster,
                self.pool,
                old.as_str(),
            ]);
        }
        if let Some(r) = reason {
            self.m
                .pools
                .pool_stuck
                .with_label_values(&[self.cluster, self.pool, r])
                .set(1);
            reasons.insert(key, r.to_string());
        }
    }

    pub fn record_brought_up(&self, n: u64) {
        self.m
            .steps
            .nodes_brought_up
            .with_label_values(&self.l())
            .inc_by(n);
    }

    pub fn record_drained(&self, n: u64) {
        self.m
            .steps
            .nodes_drained
            .with_label_values(&self.l())
            .inc_by(n);
    }

    pub fn record_terminated(&self, n: u64) {
        self.m
            .steps
            .nodes_terminated
            .with_label_values(&self.l())
            .inc_by(n);
    }

    pub fn record_eviction(&self, outcome: Outcome) {
        self.m
            .steps
            .evictions
            .with_label_values(&[self.cluster, self.pool, outcome.as_str()])
            .inc();
    }

    pub fn record_gate(&self, gate: &str, result: GateResult) {
        self.m
            .steps
            .gate_evaluations
            .with_label_values(&[self.cluster, self.pool, gate, result.as_str()])
            .inc();
    }

    /// A gate stopped the rotation (after its failureLimit): counts it and holds
    /// `rota_pool_gate_failed{gate}` at 1 until [`PoolMetrics::clear_gate_failed`].
    pub fn record_gate_failed(&self, gate: &str) {
        self.m
            .steps
            .gate_failures
            .with_label_values(&[self.cluster, self.pool, gate])
            .inc();
        self.clear_gate_failed();
        self.m
            .pools
            .pool_gate_failed
            .with_label_values(&[self.cluster, self.pool, gate])
            .set(1);
        self.m.failed_gates.lock().expect("not poisoned").insert(
            (self.cluster.to_string(), self.pool.to_string()),
            gate.to_string(),
        );
    }

    /// The pool moves again (a new commit, a human resumed it).
    pub fn clear_gate_failed(&self) {
        let key = (self.cluster.to_string(), self.pool.to_string());
        if let Some(old) = self
            .m
            .failed_gates
            .lock()
            .expect("not poisoned")
            .remove(&key)
        {
            let _ = self.m.pools.pool_gate_failed.remove_label_values(&[
                self.cluster,
                self.pool,
                old.as_str(),
            ]);
        }
    }

    /// An error, by its stable reason and whether it alerts (see [`crate::stuck::classify`]).
    pub fn record_error(&self, reason: &str, alerting: bool) {
        self.m
            .steps
            .errors
            .with_label_values(&[
                self.cluster,
                self.pool,
                reason,
                if alerting { "true" } else { "false" },
            ])
            .inc();
    }

    pub fn observe_batch_duration(&self, seconds: f64) {
        self.m
            .steps
            .batch_duration
            .with_label_values(&self.l())
            .observe(seconds);
    }

    pub fn observe_drain_duration(&self, seconds: f64) {
        self.m
            .steps
            .drain_duration
            .with_label_values(&self.l())
            .observe(seconds);
    }

    pub fn observe_boot_to_ready(&self, seconds: f64) {
        self.m
            .steps
            .boot_to_ready
            .with_label_values(&self.l())
            .observe(seconds);
    }

    pub fn observe_reconcile(&self, seconds: f64) {
        self.m
            .steps
            .reconcile_duration
            .with_label_values(&self.l())
            .observe(seconds);
    }

    /// The pool left the fleet repo: drop its series so dashboards do not show a ghost.
    pub fn remove(&self) {
        self.set_stuck(None);
        self.clear_gate_failed();
        let m = self.m;
        let l = self.l();
        let _ = m.pools.pool_nodes.remove_label_values(&l);
        let _ = m.pools.pool_nodes_on_target.remove_label_values(&l);
        let _ = m.pools.pool_batch.remove_label_values(&l);
        let _ = m.pools.pool_progress.remove_label_values(&l);
        let _ = m.pools.pool_since_progress.remove_label_values(&l);
        for p in PHASES {
            let name = p.to_string();
            let _ =
                m.pools
                    .pool_phase
                    .remove_label_values(&[self.cluster, self.pool, name.as_str()]);
        }
        m.last_progress
            .lock()
            .expect("not poisoned")
            .remove(&(self.cluster.to_string(), self.pool.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    /// A raw HTTP/1.1 GET over loopback: status code and body.
    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.unwrap();
        let code = buf[9..12].parse().unwrap();
        let body = buf
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (code, body)
    }

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn pool_series_follow_the_rotation() {
        let m = Metrics::new();
        let p = m.pool("prod-use1", "general");
        p.set_nodes(10, 4);
        p.set_phase(Phase::Rotating);
        p.set_batch(Some(2));
        p.set_last_progress(at(0));
        let text = m.render_at(at(90));
        assert_eq!(
            line(&text, "rota_pool_nodes_on_target{"),
            Some(r#"rota_pool_nodes_on_target{cluster="prod-use1",pool="general"} 4"#)
        );
        assert!(
            text.contains(r#"rota_pool_progress_ratio{cluster="prod-use1",pool="general"} 0.4"#)
        );
        assert!(
            text.contains(
                r#"rota_pool_phase{cluster="prod-use1",phase="Rotating",pool="general"} 1"#
            )
        );
        assert!(
            text.contains(
                r#"rota_pool_phase{cluster="prod-use1",phase="Soaking",pool="general"} 0"#
            )
        );
        assert!(text.contains(r#"rota_pool_batch{cluster="prod-use1",pool="general"} 2"#));
        assert!(text.contains(
            r#"rota_pool_seconds_since_progress{cluster="prod-use1",pool="general"} 90"#
        ));
        // It keeps growing while nothing moves.
        let later = m.render_at(at(600));
        assert!(later.contains(
            r#"rota_pool_seconds_since_progress{cluster="prod-use1",pool="general"} 600"#
        ));
        p.set_nodes(10, 10);
        p.set_phase(Phase::Succeeded);
        let done = m.render_at(at(700));
        assert!(done.contains(r#"rota_pool_progress_ratio{cluster="prod-use1",pool="general"} 1"#));
        assert!(done.contains(r#"phase="Rotating",pool="general"} 0"#));
    }

    #[test]
    fn a_status_sets_the_pool_gauges() {
        let m = Metrics::new();
        let status = rota_core::rotate::resource::NodePoolRotationStatus {
            phase: Phase::Soaking,
            total: 8,
            on_target: 2,
            last_progress_time: Some(at(0)),
            ..Default::default()
        };
        m.pool("c", "p").observe_status(&status);
        let text = m.render_at(at(30));
        assert!(text.contains(r#"rota_pool_progress_ratio{cluster="c",pool="p"} 0.25"#));
        assert!(text.contains(r#"rota_pool_phase{cluster="c",phase="Soaking",pool="p"} 1"#));
        assert!(text.contains(r#"rota_pool_batch{cluster="c",pool="p"} 0"#));
        assert!(text.contains(r#"rota_pool_seconds_since_progress{cluster="c",pool="p"} 30"#));
    }

    #[test]
    fn counters_and_histograms_use_only_low_cardinality_labels() {
        let m = Metrics::for_cluster("c1");
        let p = m.pool("c1", "p1");
        p.record_eviction(Outcome::Ok);
        p.record_eviction(Outcome::Throttled);
        p.record_eviction(Outcome::Throttled);
        p.record_gate("error-rate", GateResult::Pass);
        p.record_brought_up(3);
        p.record_drained(3);
        p.record_terminated(2);
        p.observe_batch_duration(420.0);
        p.observe_drain_duration(45.0);
        p.observe_boot_to_ready(70.0);
        p.observe_reconcile(0.02);
        p.record_error("cloud_throttled", false);
        m.record_cloud_call("aws", "set_launch_image", Outcome::Ok);
        m.record_git_fetch(Outcome::Ok, at(5));
        m.record_git_polls(2, 1);
        m.record_commit_rejected("validation");
        m.record_commit_rejected("signature");
        p.record_gate_failed("error-rate");
        m.record_status_posted("github", Outcome::Ok);
        let text = m.render_at(at(10));
        assert!(
            text.contains(r#"rota_evictions_total{cluster="c1",outcome="throttled",pool="p1"} 2"#)
        );
        assert!(text.contains(r#"rota_nodes_brought_up_total{cluster="c1",pool="p1"} 3"#));
        assert!(text.contains(r#"rota_nodes_terminated_total{cluster="c1",pool="p1"} 2"#));
        assert!(
            text.contains(
                r#"rota_batch_duration_seconds_bucket{cluster="c1",pool="p1",le="600"} 1"#
            )
        );
        assert!(text.contains(r#"rota_drain_duration_seconds_count{cluster="c1",pool="p1"} 1"#));
        assert!(text.contains(r#"rota_node_boot_to_ready_seconds_sum{cluster="c1",pool="p1"} 70"#));
        assert!(text.contains(
            r#"rota_cloud_calls_total{call="set_launch_image",cluster="c1",outcome="ok",provider="aws"} 1"#
        ));
        assert!(
            text.contains(
                r#"rota_git_last_fetch_success_timestamp_seconds{cluster="c1"} 1700000005"#
            )
        );
        assert!(text.contains(r#"rota_git_fetches_total{cluster="c1",outcome="ok"} 1"#));
        assert!(text.contains(r#"rota_git_polls_total{answered_by="probe",cluster="c1"} 2"#));
        assert!(text.contains(r#"rota_git_polls_total{answered_by="libgit2",cluster="c1"} 1"#));
        assert!(text.contains(r#"rota_commits_rejected_total{cluster="c1",reason="signature"} 1"#));
        assert!(text.contains(r#"rota_fleet_commit_rejected{cluster="c1",reason="signature"} 1"#));
        assert!(!text.contains(r#"rota_fleet_commit_rejected{cluster="c1",reason="validation"}"#));
        assert!(text.contains(
            r#"rota_statuses_posted_total{backend="github",cluster="c1",outcome="ok"} 1"#
        ));
        assert!(
            text.contains(r#"rota_pool_gate_failed{cluster="c1",gate="error-rate",pool="p1"} 1"#)
        );
        m.record_commit_accepted();
        p.clear_gate_failed();
        let text = m.render_at(at(11));
        assert!(!text.contains("rota_fleet_commit_rejected{"));
        assert!(!text.contains("rota_pool_gate_failed{"));
        // Every label name in the output is one of the allowed few.
        let allowed = [
            "cluster",
            "pool",
            "phase",
            "reason",
            "alerting",
            "gate",
            "result",
            "outcome",
            "provider",
            "call",
            "backend",
            "version",
            "le",
            "channel",
            "image",
            "answered_by",
        ];
        // Every series of the agent's own process names its cluster.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.contains(r#"cluster="c1""#), "no cluster label: {l}");
        }
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some((_, rest)) = l.split_once('{') {
                let labels = rest.split_once('}').unwrap().0;
                for pair in labels.split("\",") {
                    let name = pair.split('=').next().unwrap();
                    assert!(allowed.contains(&name), "label {name} in {l}");
                }
            }
        }
    }

    #[test]
    fn image_age_and_overdue_follow_released_and_the_deadline() {
        let m = Metrics::for_cluster("prod-use1");
        let now: DateTime<Utc> = "2026-12-20T08:00:00Z".parse().unwrap();
        let released = "2026-11-20T08:00:00Z".parse().ok();
        let day = std::time::Duration::from_secs(86_400);
        m.set_pool_image_age("general", released, Some(30 * day), now);
        let text = m.render();
        assert!(
            text.contains(
                r#"rota_pool_image_age_seconds{cluster="prod-use1",pool="general"} 2592000"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"rota_pool_image_overdue{cluster="prod-use1",pool="general"} 0"#));
        m.set_pool_image_age("general", released, Some(29 * day), now);
        assert!(
            m.render()
                .contains(r#"rota_pool_image_overdue{cluster="prod-use1",pool="general"} 1"#)
        );
        // No deadline: never overdue; no release date: no series.
        m.set_pool_image_age("general", released, None, now);
        assert!(
            m.render()
                .contains(r#"rota_pool_image_overdue{cluster="prod-use1",pool="general"} 0"#)
        );
        m.set_pool_image_age("general", None, Some(day), now);
        assert!(!m.render().contains("rota_pool_image_age_seconds{"));
        m.set_pool_image_age("general", released, Some(day), now);
        m.clear_pool_info("general");
        assert!(!m.render().contains("rota_pool_image_overdue{"));
    }

    #[test]
    fn pool_info_has_one_series_per_pool_naming_what_it_runs() {
        let m = Metrics::for_cluster("canary-use1");
        m.set_pool_info("gpu", "gpu", "2026.10.3", "ami-0a");
        m.set_pool_info("gpu", "gpu", "2026.11.1", "ami-0b");
        m.set_pool_info("general", "general", "2026.11.1", "ami-0c");
        let text = m.render_at(at(0));
        assert!(text.contains(
            r#"rota_pool_info{channel="gpu",cluster="canary-use1",image="ami-0b",pool="gpu",version="2026.11.1"} 1"#
        ), "{text}");
        assert!(!text.contains("2026.10.3"), "{text}");
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("rota_pool_info{"))
                .count(),
            2
        );
        m.clear_pool_info("gpu");
        let text = m.render_at(at(0));
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("rota_pool_info{"))
                .count(),
            1
        );
    }

    #[test]
    fn stuck_has_at_most_one_reason_and_removal_drops_the_pool() {
        let m = Metrics::new();
        let p = m.pool("c", "p");
        p.set_stuck(Some("DrainBlocked"));
        p.set_stuck(Some("NodeNotReady"));
        let text = m.render_at(at(0));
        assert!(!text.contains("DrainBlocked"));
        assert!(text.contains(r#"rota_pool_stuck{cluster="c",pool="p",reason="NodeNotReady"} 1"#));
        p.set_stuck(None);
        assert!(!m.render_at(at(0)).contains("rota_pool_stuck{"));
        p.set_nodes(3, 1);
        p.set_last_progress(at(0));
        p.remove();
        let text = m.render_at(at(10));
        assert!(!text.contains(r#"pool="p""#), "{text}");
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness_over_loopback() {
        let m = Metrics::for_cluster("c");
        m.pool("c", "p").set_nodes(2, 1);
        let addr = m
            .spawn_server("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let (code, body) = get(addr, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains(r#"rota_pool_nodes{cluster="c",pool="p"} 2"#));
        assert!(body.contains(r#"rota_build_info{cluster="c",version="#));
        assert_eq!(get(addr, "/healthz").await.0, 200);
        let (code, body) = get(addr, "/readyz").await;
        assert_eq!(code, 503);
        assert_eq!(body, "caches not synced, leadership not known\n");
        m.readiness().set_caches_synced(true);
        let (code, body) = get(addr, "/readyz").await;
        assert_eq!((code, body.as_str()), (503, "leadership not known\n"));
        m.readiness().set_leadership_known(true);
        assert_eq!(
            get(addr, "/readyz").await,
            (
                200,
                "ready (standby: another replica holds the lease)\n".to_string()
            )
        );
        m.set_leader(true);
        assert_eq!(
            get(addr, "/readyz").await,
            (200, "ready (leader)\n".to_string())
        );
        assert!(
            get(addr, "/metrics")
                .await
                .1
                .contains(r#"rota_leader{cluster="c"} 1"#)
        );
        assert_eq!(get(addr, "/nope").await.0, 404);
        // The series move between scrapes.
        m.pool("c", "p").set_nodes(2, 2);
        let (_, body) = get(addr, "/metrics").await;
        assert!(body.contains(r#"rota_pool_nodes_on_target{cluster="c",pool="p"} 2"#));
    }
}
