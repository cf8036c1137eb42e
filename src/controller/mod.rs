//! The rotation controller: the runtime that drives every NodePoolRotation it owns.
//!
//! One reconcile of one pool reads as a sequence ([`Controller::reconcile`]): prepare the
//! pool's runtime state, sample the due health gates (here, at the edge, from the cluster's
//! watch-fed index), observe (a synchronous read of that index and the cloud group's
//! `describe`) and plan (`rotate::plan`, pure) in one step ([`observe`]), compose the
//! status (`rotate::status::compose`, pure, the one place a status is made), act ([`apply`]: status and checkpoint first, then
//! the actions), and the pass's aftermath: what follows from it (Events, notices, metrics,
//! the operator request's patch, when to look again) decided in one pure function
//! (`rota_core::rotate::aftermath::of`) and carried out by [`aftermath`]. Between reconciles the controller waits
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
//!
//! The `Controller` struct and what it keeps per pool are in `state.rs` and
//! `pool_state.rs` (with `config.rs` and `wake.rs`), below this file and the rooms that add
//! `impl Controller` blocks, so that no room imports the file that calls it.

mod aftermath;
pub mod apply;
pub mod clock;
mod config;
pub mod departures;
mod describe;
mod drift;
#[cfg(test)]
mod error_classes;
mod evaluation;
mod gate_samples;
mod holds;
pub mod leader;
mod observe;
mod owner_pools;
pub mod owners;
mod pool_state;
mod refusals;
mod rotations;
mod skew;
mod state;
mod wake;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::ResourceExt;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

use crate::cloud::NodeGroups;
use crate::cloud::metered::MeteredNodeGroups;
use crate::gates::{self, Tracker};
use crate::kube::crd::NodePoolRotation;
use crate::kube::index::{Changes, ClusterIndex};
use crate::kube::ownership;
use crate::metrics::Metrics;
use crate::notify::SharedNotifier;
use aftermath::unwritten;
use apply::{ApplyError, Edge, Persist};
use clock::Clock;
pub use config::Config;
pub use evaluation::evaluation;
pub use holds::start_holds;
use leader::{Elector, Leadership};
use pool_state::PoolState;
use rota_core::errors::Class;
use rota_core::errors::Classify;
use rota_core::rotate::aftermath::{Acted, failure, requeue};
use rota_core::rotate::status::{Composed, Reconciled, compose};
use rota_core::rotate::stuck;
use rota_core::rotate::{Phase, Stage};
pub use state::{Controller, Stats};
use wake::Wake;

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

/// A pool woken by index changes is reconciled at most this often (controller time): a drain
/// moves dozens of pods at once and one look at them all is enough.
const MIN_WAKE_GAP: std::time::Duration = std::time::Duration::from_secs(2);
/// How long the first pass waits for the index's first complete lists (controller-runtime's
/// WaitForCacheSync): until then every pool is "not observed".
const FIRST_SYNC: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// observed, the plan (pure), the status composed from them (pure), the side effects,
    /// their aftermath (pure, then carried out), and what the outcome means for the next
    /// look.
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
        let looked = self
            .observe_and_plan(npr, &desired, verdict, start_hold, request.as_ref(), now)
            .await;
        let (observed, mut plan, steered) = match looked {
            Ok(l) => l,
            Err(e) => return self.observe_failed(npr, e, now).await,
        };
        // Test hook: run only a prefix of the actions, as a crash would.
        let crash = self.crash_after.filter(|k| *k < plan.actions.len());
        let total = plan.actions.len();
        if let Some(k) = crash {
            plan.actions.truncate(k);
        }
        let composed = self.compose(npr, &observed, &plan, now);
        let (result, acted) = self.act(npr, &plan, &composed).await;
        let facts = aftermath::Facts {
            error: result.as_ref().err().filter(|e| !aftermath::not_ours(e)),
            desired: &desired,
            request: request.as_ref(),
            steered: steered.as_deref(),
            gates: &observed.gates,
            acted: &acted,
            crashed: crash.is_some(),
            now,
        };
        self.follow_up(npr, &plan, &composed, &facts).await;
        match result {
            Ok(ran) => {
                self.stats.actions.fetch_add(ran as u64, Ordering::Relaxed);
                match crash {
                    Some(k) => Outcome::Crashed { ran: k, of: total },
                    None => Outcome::Applied {
                        actions: ran,
                        phase: plan.status.phase,
                    },
                }
            }
            Err(e) => self.failed(npr, &observed, e).await,
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
        if let Some(reason) = self.record_error(npr, classified) {
            tracing::error!(pool = %name, %error, "observing failed and will not heal by retrying");
            self.event(npr, &failure::alert(reason)).await;
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

    /// The status this reconcile writes, composed in one place (`rotate::status`) from the
    /// plan, the previous status, the pool's errors, the owner's refusal the plan was made
    /// with and the writing term.
    fn compose(
        &mut self,
        npr: &NodePoolRotation,
        observed: &rota_core::rotate::Observed,
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
            refused: observed.refused.as_ref(),
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
        composed: &Composed,
    ) -> (Result<usize, ApplyError>, Acted) {
        // A status that carries no decision waits for the next write (`must_write`); a pass
        // with nothing to do then writes nothing, one that only evicts checks the stored
        // status instead of writing it (`Persist::Check`).
        let (status, write) = (&composed.status, composed.must_write);
        let unchanged = plan.actions.is_empty() && !write;
        if unchanged {
            let acted = Acted {
                ran: Some(0),
                unchanged,
                ..Default::default()
            };
            return (Ok(0), acted);
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
        let mut done = Default::default();
        let applied = apply::apply(&edge, npr, plan, status, persist, &mut done);
        let result = match batch {
            Some(n) => applied.instrument(crate::telemetry::batch_span(n)).await,
            None => applied.await,
        };
        // The status is written unless the write itself failed or was refused.
        let written =
            persist == Persist::Write && result.as_ref().err().is_none_or(|e| !unwritten(e));
        let acted = Acted {
            ran: result.as_ref().ok().copied(),
            unchanged,
            written,
            done,
            failed: result.as_ref().err().and_then(ApplyError::action_failed),
        };
        (result, acted)
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
        if aftermath::not_ours(&e) {
            // Not a failure of the pool: someone else wrote (or leads). Nothing planned from
            // this read is acted on; the next pass observes again.
            tracing::info!(pool = %name, %error, "not acting on this read");
            self.pools.get_mut(&name).expect("prepared").due = Instant::now();
            return Outcome::Failed { retry, error };
        }
        tracing::info!(pool = %name, %error, ?retry, "apply stopped");
        // The error was counted, and alerted on, with the pass's aftermath (`aftermath.rs`).
        let state = self.pools.get_mut(&name).expect("prepared");
        state.failures += 1;
        state.refused = refusals::of(&e);
        if let ApplyError::EvictionBlocked { namespace, pod } = &e {
            // The timer is only a safety net for a missed watch event.
            state.blocked_on = observed
                .nodes
                .iter()
                .flat_map(|n| &n.pods)
                .find(|x| *x.namespace == **namespace && *x.name == **pod)
                .and_then(|x| x.pdb.as_ref())
                .map(|b| (b.namespace.to_string(), b.name.to_string()));
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
