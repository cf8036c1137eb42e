//! The GitOps agent of one cluster: follows the fleet repo, turns each good commit into one
//! NodePoolRotation per pool, and reports the pools' progress back onto the commit.
//!
//! One pass of the loop ([`Agent::step`]):
//! 1. A new commit on the followed branch is checked: that it descends from the commit in
//!    force ([`crate::source::history`]: a force-push back to an older commit or to another
//!    branch waits for a human's `--confirm-rewrite`), its signature (when a trust policy is
//!    set), then the fleet at that commit is loaded, validated and this cluster resolved. A
//!    commit that fails any of these gets an `error` status on `rota/<cluster>` naming why,
//!    and the last good commit stays in force: nothing of it is acted on.
//! 2. For the commit in force, every pool is planned ([`desired::plan_cluster`]): the
//!    promotion guard (records read from the git notes of every cluster) decides whether a
//!    pool may start the pinned version; a held pool keeps its previous version. Specs are
//!    server-side-applied (field manager `rota-agent`), labelled with the agent's version.
//!    Pools gone from git are released: their NodePoolRotation gets `mode: ignore`, never
//!    deleted, so no node is touched and the checkpoint stays for a human to read.
//! 3. The NodePoolRotations' statuses become commit statuses ([`progress`]) and completion /
//!    gate-failure records for the guards of later waves; the stores write only on change.
//!
//! The loop runs on every fetched commit and every `resync` (the guard's soak ends with time,
//! the controller moves pools between commits).
//!
//! Only the leader acts: with [`Agent::set_leadership`] (the controller's handle, see
//! `controller::leader`) a standby replica writes nothing (no commit status, no git-notes
//! push, no NodePoolRotation apply) and every write is preceded by a check that the lease is
//! still held with margin. It still follows the repo (reads), so that it takes over at once.
//!
//! When a newer commit comes into force, the statuses of the one it replaces that are still
//! `pending` are made final ([`superseded`]): `error`, `superseded by <short sha> before it
//! finished: <what it showed>`, so that no commit stays pending forever.
//!
//! The `Agent` struct and its errors are in `state.rs` and its settings in `config.rs`,
//! below the files that add `impl Agent` blocks (this one and `report_writes`).

pub mod adopt;
mod config;
pub mod desired;
pub mod local;
pub mod progress;
mod report_writes;
pub mod reporting;
mod state;
pub mod stops;
pub mod supervise;
pub mod wiring;

use std::collections::BTreeMap;
use std::sync::Arc;

use git2::Oid;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::controller::clock::Clock;
use crate::kube::crd::{AGENT_VERSION_LABEL, NodePoolRotation};
use crate::report::{CommitStatus, GitNotesStore, State, StatusStore, cluster_context};
use crate::source::GitSource;
use crate::source::history::{self, Lineage};
use crate::source::poll::SourceState;
use crate::source::trust::{Admission, LastGood, Verifier};
pub use config::AgentConfig;
use rota_core::fleet::resolved::DesiredCluster;
use rota_core::rotate::resource::NodePoolRotationSpec;
use rota_core::waves::PoolRecord;
use state::InForce;
pub use state::{Agent, AgentError, Snapshot};

/// The field manager the agent applies NodePoolRotation specs as.
pub const FIELD_MANAGER: &str = "rota-agent";

/// How far back (first parents) a restarted agent looks for its own records.
const RECORD_LOOKBACK: usize = 200;

impl Agent {
    pub fn new(
        config: AgentConfig,
        source: Arc<GitSource>,
        client: kube::Client,
        notes: Arc<GitNotesStore>,
        store: Arc<dyn StatusStore>,
        verifier: Option<Arc<Verifier>>,
        clock: Clock,
    ) -> Self {
        // Until a commit says what the guard waits on, only our own notes are fetched.
        if source.notes_clusters().is_none() {
            source.set_notes_clusters([config.cluster.clone()]);
        }
        Agent {
            config,
            source,
            client,
            notes,
            store,
            verifier,
            clock,
            last_good: LastGood::default(),
            seen: None,
            in_force: None,
            records: BTreeMap::new(),
            snapshot: watch::channel(Snapshot::default()).0,
            metrics: None,
            notifier: None,
            webhooks: None,
            superseding: None,
            groups: None,
            owners: Default::default(),
            resumed_from: None,
            leadership: None,
            written: Default::default(),
            baseline: Default::default(),
            stops: Default::default(),
        }
    }

    /// Act only while `leadership` (the controller's, [`crate::controller::Controller::leadership`])
    /// holds the lease: one writer per cluster (invariant 7).
    pub fn set_leadership(&mut self, leadership: crate::controller::leader::Leadership) {
        self.leadership = Some(leadership);
    }

    /// Right before a write: the lease must be held with margin.
    fn may_write(&self) -> Result<(), AgentError> {
        match &self.leadership {
            Some(l) => Ok(l.check().map(|_| ())?),
            None => Ok(()),
        }
    }

    /// Adopt pools met for the first time already on their pins, reading their groups from
    /// `groups` (without it, no pool is adopted: every pool goes through the guard).
    pub fn set_groups(&mut self, groups: Arc<dyn crate::cloud::NodeGroups>) {
        self.groups = Some(groups);
    }

    /// Adopt managed pools through `owners` (EKS, GKE, AKS; Karpenter's objects are read
    /// from the cluster): a managed pool whose owner is not among them is never adopted.
    pub fn set_owners(&mut self, owners: crate::controller::owners::Owners) {
        self.owners = owners;
    }

    /// Record commits accepted and refused into `metrics`.
    pub fn set_metrics(&mut self, metrics: crate::metrics::Metrics) {
        self.metrics = Some(metrics);
    }

    /// Keep `notifier` (the controller's) on the webhooks of the commit in force.
    pub fn set_notifier(&mut self, notifier: crate::notify::SharedNotifier) {
        self.notifier = Some(notifier);
    }

    /// Rebuild the notifier when the commit in force names other webhooks. A webhook whose
    /// URL cannot be read is left out, named in a warning (never its URL).
    fn configure_notifications(&mut self, specs: &[rota_core::fleet::model::WebhookSpec]) {
        let Some(notifier) = &self.notifier else {
            return;
        };
        if self.webhooks.as_deref() == Some(specs) {
            return;
        }
        let mut hooks = Vec::new();
        let secrets = self
            .config
            .secrets_dir
            .as_ref()
            .map(crate::notify::secrets::SecretsDir::new);
        for spec in specs {
            match crate::notify::Webhook::from_spec(spec, secrets.as_ref()) {
                Ok(w) => hooks.push(w),
                Err(e) => tracing::warn!(error = %e, "notification webhook left out"),
            }
        }
        let names: Vec<String> = hooks.iter().map(|w| w.name.clone()).collect();
        match crate::notify::Notifier::spawn(hooks, self.metrics.clone()) {
            Ok(n) => {
                tracing::info!(webhooks = ?names, "notifications configured");
                notifier.set(n);
                self.webhooks = Some(specs.to_vec());
            }
            Err(e) => tracing::warn!(error = %e, "notifications not configured"),
        }
    }

    /// Follow what the agent did.
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.snapshot.subscribe()
    }

    /// Runs until `cancel`: a pass on every new commit of `state` and every `resync`.
    pub async fn run(mut self, mut state: watch::Receiver<SourceState>, cancel: CancellationToken) {
        loop {
            let head = state.borrow_and_update().commit;
            match self.step(head).await {
                Ok(()) => {}
                // A standby, or a leader whose lease runs out: not a failure.
                Err(AgentError::NotLeading(e)) => {
                    tracing::debug!(cluster = %self.config.cluster, error = %e, "agent pass skipped")
                }
                Err(e) => {
                    tracing::warn!(cluster = %self.config.cluster, error = %e, "agent pass failed; retrying")
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                r = state.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(self.config.resync) => {}
            }
        }
    }

    /// One pass: admit `head` if new, then apply and report the commit in force.
    pub async fn step(&mut self, head: Option<Oid>) -> Result<(), AgentError> {
        // A standby does not even admit commits: the verdicts are the leader's to report.
        self.may_write()?;
        if let Some(head) = head
            && self.seen != Some(head)
        {
            self.seen = Some(head);
            self.snapshot
                .send_modify(|s| s.head = Some(head.to_string()));
            if let Err(e) = self.admit(head).await {
                // Seen again next pass: a verdict that could not be reported is redone.
                self.seen = None;
                return Err(e);
            }
        }
        if let Some((old, new)) = self.superseding {
            // Retried every pass until the store took it; a store that fails (a forge that
            // rate-limits) must not stop the agent acting on the commit in force.
            match self.supersede(old, new).await {
                Ok(()) => self.superseding = None,
                Err(e) => tracing::warn!(cluster = %self.config.cluster, error = %e,
                    "finalising the replaced commit's statuses failed; retrying next pass"),
            }
        }
        let Some(in_force) = self.in_force.clone() else {
            return Ok(());
        };
        self.sync(&in_force).await
    }

    /// Makes `old`'s pending statuses of this cluster final: superseded by `new`.
    async fn supersede(&self, old: Oid, new: Oid) -> Result<(), AgentError> {
        let commit = old.to_string();
        let short = &new.to_string()[..12];
        // The wave's rollup is its writer's to finish too.
        let wave = self
            .in_force
            .as_ref()
            .filter(|_| self.baseline.has_rollup(&commit))
            .map(|f| f.shape.wave.clone());
        for s in self.store.list(&commit).await? {
            if s.state != State::Pending
                || !reporting::own_context(&s.context, &self.config.cluster, wave.as_deref())
            {
                continue;
            }
            let done = superseded(&s, short);
            tracing::info!(cluster = %self.config.cluster, commit = %commit, context = %s.context,
                by = %short, "superseded before it finished");
            self.may_write()?;
            self.store.set(&commit, &done).await?;
        }
        Ok(())
    }

    /// Trust, load and resolve `commit`; on any failure report `error` on it and keep the
    /// commit in force.
    async fn admit(&mut self, commit: Oid) -> Result<(), AgentError> {
        if self.records.is_empty() {
            self.records = self.restore_records(commit).await;
        }
        match self.lineage(commit).await? {
            Lineage::Forward => {
                if let Some(m) = &self.metrics {
                    m.set_history_rewritten(None);
                }
            }
            Lineage::Confirmed { from } => {
                tracing::warn!(cluster = %self.config.cluster, from = %from, to = %commit,
                    "history rewrite confirmed by --confirm-rewrite: checking the new head");
                if let Some(m) = &self.metrics {
                    m.set_history_rewritten(None);
                }
            }
            Lineage::Rewrite { in_force, head } => {
                if let Some(m) = &self.metrics {
                    m.set_history_rewritten(Some((&in_force.to_string(), &head.to_string())));
                }
                tracing::error!(cluster = %self.config.cluster, in_force = %in_force, head = %head,
                    confirm = %format!("{in_force}..{head}"),
                    "the branch head does not descend from the commit in force (history rewritten); \
                     not acting on it. If this rewrite is intended, set --confirm-rewrite (ROTA_CONFIRM_REWRITE) to the confirm value");
                let why = history::rewrite_description(in_force, head);
                return self.reject(commit, &why, "history").await;
            }
        }
        let verdict = match self.check(commit).await {
            Ok(v) => v,
            // Not a verdict: a verifier that failed to run is retried, never a permanent
            // rejection of a commit that may be good.
            Err(message) => {
                return Err(AgentError::Check {
                    commit: commit.to_string(),
                    message,
                });
            }
        };
        match verdict {
            Ok(in_force) => {
                tracing::info!(cluster = %self.config.cluster, commit = %commit, "acting on fleet commit");
                if let Some(m) = &self.metrics {
                    m.record_commit_accepted();
                }
                self.configure_notifications(&in_force.notifications);
                if let Some(old) = self.in_force.as_ref().map(|f| f.commit)
                    && old != commit
                {
                    self.superseding = Some((old, commit));
                }
                self.in_force = Some(in_force);
                self.snapshot
                    .send_modify(|s| s.in_force = Some(commit.to_string()));
                Ok(())
            }
            Err((why, kind)) => self.reject(commit, &why, kind).await,
        }
    }

    /// How `head` relates to the commit in force (or, after a restart, to the commits this
    /// cluster's NodePoolRotations carry).
    async fn lineage(&mut self, head: Oid) -> Result<Lineage, AgentError> {
        let in_force = match (&self.in_force, &self.resumed_from) {
            (Some(f), _) => vec![f.commit],
            (None, Some(r)) => r.clone(),
            (None, None) => {
                let r = self.resumed_commits().await?;
                self.resumed_from = Some(r.clone());
                r
            }
        };
        if in_force.is_empty() {
            return Ok(Lineage::Forward);
        }
        let source = Arc::clone(&self.source);
        let confirmed = self.config.confirm_rewrite;
        let judged = tokio::task::spawn_blocking(move || {
            let judge = || {
                let repo = source.repository().ok();
                history::judge(head, &in_force, confirmed, |a, b| {
                    repo.as_ref().is_some_and(|r| history::descends(r, a, b))
                })
            };
            let first = judge();
            let shallow = source.repository().is_ok_and(|r| r.is_shallow());
            if !matches!(first, Lineage::Rewrite { .. }) || !shallow {
                return Ok(first);
            }
            // A shallow mirror (--depth) hides ancestry: make it whole and look again. A
            // failed fetch is no verdict: checked again on the next pass.
            source
                .unshallow()
                .map(|()| judge())
                .map_err(|e| format!("deepening the shallow mirror to check ancestry: {e}"))
        })
        .await;
        let check = |message: String| AgentError::Check {
            commit: head.to_string(),
            message,
        };
        judged
            .map_err(|e| check(format!("ancestry check failed: {e}")))?
            .map_err(check)
    }

    /// The fleet commits this cluster's NodePoolRotations were last given (none before the
    /// CRD exists).
    async fn resumed_commits(&self) -> Result<Vec<Oid>, AgentError> {
        let api: Api<NodePoolRotation> = Api::all(self.client.clone());
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut out: Vec<Oid> = list
            .items
            .into_iter()
            .filter(|n| n.spec.cluster == self.config.cluster)
            .filter_map(|n| Oid::from_str(&n.spec.source_commit).ok())
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Refuse `commit`; `kind` is the stable reason of `rota_commits_rejected_total`
    /// (`signature`, `validation`, `history`).
    async fn reject(&mut self, commit: Oid, why: &str, kind: &str) -> Result<(), AgentError> {
        if let Some(m) = &self.metrics {
            m.record_commit_rejected(kind);
        }
        tracing::warn!(cluster = %self.config.cluster, commit = %commit, reason = %why,
            "not acting on fleet commit; the last good one stays in force");
        let status = CommitStatus::new(cluster_context(&self.config.cluster), State::Error, why);
        self.snapshot.send_modify(|s| {
            s.rejected
                .push((commit.to_string(), status.description.clone()))
        });
        self.may_write()?;
        self.store.set(&commit.to_string(), &status).await?;
        Ok(())
    }

    /// `Ok(Ok(..))`: act; `Ok(Err((why, kind)))`: refuse; `Err(why)`: could not check (refuse
    /// too).
    async fn check(
        &mut self,
        commit: Oid,
    ) -> Result<Result<InForce, (String, &'static str)>, String> {
        if let Some(verifier) = &self.verifier {
            let source = Arc::clone(&self.source);
            let verifier = Arc::clone(verifier);
            let verdict = tokio::task::spawn_blocking(move || source.verify(&verifier, commit))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            if let Admission::Keep { reason, .. } = self.last_good.admit(commit, verdict) {
                return Ok(Err((reason.message, "signature")));
            }
        }
        let mirror = self.source.mirror_path().to_path_buf();
        let subdir = self.config.subdir.clone();
        let cluster = self.config.cluster.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            crate::source::read::load_git_at(&mirror, &commit.to_string(), subdir.as_deref())
        })
        .await
        .map_err(|e| e.to_string())?;
        let short = &commit.to_string()[..12];
        let fleet = match loaded {
            Ok(f) => f,
            Err(diags) => return Ok(Err((invalid_description(short, &diags), "validation"))),
        };
        let all = match fleet.resolve_all() {
            Ok(a) => a,
            Err(e) => return Ok(Err((format!("commit {short}: {e}"), "validation"))),
        };
        let Some(desired) = all.iter().find(|c| c.name == cluster).cloned() else {
            return Ok(Err((
                format!(
                    "commit {short}: cluster {cluster} is not in the fleet repo; keeping the last good commit"
                ),
                "validation",
            )));
        };
        Ok(Ok(InForce {
            commit,
            waves: rota_core::waves::wave_views(&fleet, &all),
            guard: fleet.promotion_guard(),
            notifications: fleet.notifications_for(&cluster).unwrap_or_default(),
            shape: reporting::FleetShape::of(&all, &desired),
            cluster: desired,
        }))
    }

    /// Points the polls' notes fetch and the notes reads at `needed` (clusters of the
    /// verified fleet, so a ref no declared cluster owns is never fetched). When it names
    /// clusters not fetched so far (the guard starts waiting on a wave), their notes are
    /// fetched now, before the guard reads them, not one poll later.
    async fn scope_notes(&self, needed: std::collections::BTreeSet<String>) {
        let before = self.source.notes_clusters().unwrap_or_default();
        if before == needed {
            return;
        }
        let added = needed.difference(&before).count();
        tracing::debug!(cluster = %self.config.cluster, clusters = needed.len(), added,
            "notes fetched and read from now on");
        self.source.set_notes_clusters(needed.iter().cloned());
        self.notes.scope_to(needed);
        if added == 0 {
            return;
        }
        let source = Arc::clone(&self.source);
        match tokio::task::spawn_blocking(move || source.fetch_notes()).await {
            Ok(Ok(_)) => {}
            // The guard then reads what the mirror has: a cluster it cannot see yet holds
            // the pin (never reported), and the next poll fetches it.
            Ok(Err(e)) => tracing::warn!(error = %e, "fetching the notes the guard waits on"),
            Err(e) => tracing::warn!(error = %e, "fetching the notes the guard waits on"),
        }
    }

    /// This cluster's records, from the newest note of ours on `head`'s first-parent history.
    async fn restore_records(&self, head: Oid) -> BTreeMap<String, PoolRecord> {
        let source = Arc::clone(&self.source);
        let commits = tokio::task::spawn_blocking(move || -> Vec<String> {
            let Ok(repo) = source.repository() else {
                return Vec::new();
            };
            let mut out = Vec::new();
            let mut at = repo.find_commit(head).ok();
            while let Some(c) = at {
                out.push(c.id().to_string());
                if out.len() >= RECORD_LOOKBACK {
                    break;
                }
                at = c.parent(0).ok();
            }
            out
        })
        .await
        .unwrap_or_default();
        for commit in commits {
            // As the guard reads them: from our own ref, about us, signed when required.
            let Ok(records) = self.notes.records(&commit).await else {
                continue;
            };
            if let Some(ours) = records
                .into_iter()
                .find(|c| c.cluster == self.config.cluster)
            {
                return ours
                    .pools
                    .into_iter()
                    .map(|r| (r.pool.clone(), r))
                    .collect();
            }
        }
        BTreeMap::new()
    }

    /// Apply the commit in force and report.
    async fn sync(&mut self, f: &InForce) -> Result<(), AgentError> {
        let commit = f.commit.to_string();
        // Owned: the pass also changes `self` (adoption records).
        let cluster = &self.config.cluster.clone();
        let api: Api<NodePoolRotation> = Api::all(self.client.clone());
        let mine = |n: &NodePoolRotation| &n.spec.cluster == cluster;
        let existing: BTreeMap<String, NodePoolRotationSpec> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(mine)
            .map(|n| (n.name_any(), n.spec))
            .collect();
        self.adopt(&f.cluster, &existing).await;
        // Only the notes this decision reads are fetched and read: our own, and the
        // clusters the guard waits on while a pin waits on it.
        let own: Vec<PoolRecord> = self.records.values().cloned().collect();
        let needed = desired::notes_needed(&f.cluster, f.guard, &f.waves, &own, &existing);
        self.scope_notes(self.rollup_notes(needed, &f.shape)).await;
        let records = self.notes.pool_records(&commit).await.unwrap_or_default();
        // Our own records are authoritative in memory (the note may lag one pass).
        let mut all: Vec<PoolRecord> = records
            .into_iter()
            .filter(|r| &r.cluster != cluster)
            .collect();
        all.extend(self.records.values().cloned());
        // A cluster whose agent has reported before (it has a notes ref) but not yet on this
        // commit is running, not silent: its pools count as recorded with nothing completed,
        // so that the guard names them as a rollout to wait for, not as clusters without an
        // agent (`waves::Wait::NeverReported`).
        for other in self.notes.reporting_clusters().await.unwrap_or_default() {
            if all.iter().any(|r| r.cluster == other) {
                continue;
            }
            for p in f.waves.iter().flat_map(|w| &w.pools) {
                if p.cluster == other {
                    all.push(PoolRecord::new(&p.cluster, &p.pool));
                }
            }
        }
        let now = self.clock.now();
        let mut intent =
            desired::plan_cluster(&f.cluster, &commit, f.guard, &f.waves, &all, &existing, now);
        let fleet_stops = self.fleet_stops().await;
        stops::hold(&mut intent, &f.cluster, fleet_stops.as_ref(), &existing);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for pool in &intent.pools {
            if let Some(spec) = &pool.spec
                && existing.get(&pool.name) != Some(spec)
            {
                self.may_write()?;
                api.patch(
                    &pool.name,
                    &params,
                    &Patch::Apply(self.object(&pool.name, spec)),
                )
                .await?;
            }
        }
        for name in &intent.released {
            let spec = desired::released_spec(&existing[name], &commit);
            tracing::info!(cluster = %cluster, pool = %name, "pool removed from git: released (mode: ignore, nodes untouched)");
            self.may_write()?;
            api.patch(name, &params, &Patch::Apply(self.object(name, &spec)))
                .await?;
        }
        // Read back: statuses as the controller left them.
        let nprs: BTreeMap<String, NodePoolRotation> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(mine)
            .map(|n| (n.name_any(), n))
            .collect();
        for pool in &intent.pools {
            // Every pool has a record, even one held with no NodePoolRotation yet: the
            // guards of later waves tell an agent that reports from none (see
            // `waves::Wait::NeverReported`).
            let record = self
                .records
                .entry(pool.name.clone())
                .or_insert_with(|| PoolRecord::new(cluster, &pool.name));
            if let Some(npr) = nprs.get(&pool.name) {
                progress::observe_record(record, npr, now);
                if let (Some(m), Some((channel, version, image))) =
                    (&self.metrics, progress::runs(npr))
                {
                    m.set_pool_info(&pool.name, channel, version, image);
                    // The version it runs is the spec's: its release and the channel's
                    // deadline travel with it. While a rotation is under way the last value
                    // stands (the pool still runs what it ran).
                    m.set_pool_image_age(
                        &pool.name,
                        npr.spec.released,
                        npr.spec.max_age.map(|a| a.as_duration()),
                        now,
                    );
                }
            }
        }
        if let Some(m) = &self.metrics {
            for name in &intent.released {
                m.clear_pool_info(name);
            }
        }
        let statuses = reporting::statuses(cluster, &intent, &nprs, &commit, now);
        self.may_write()?;
        self.notes
            .set_pool_records(&commit, self.records.values().cloned().collect())
            .await?;
        self.report(&commit, &f.shape, &statuses, &intent, &nprs, all)
            .await?;
        self.snapshot.send_modify(|snap| {
            snap.statuses = statuses;
            snap.reported = Some(commit);
        });
        Ok(())
    }

    /// The fleet stop's orders at the mirror's stop ref; `None` when they could not be read
    /// this pass (every pool then keeps the stop its spec has).
    async fn fleet_stops(&self) -> Option<rota_core::fleet::stops::Stops> {
        let (source, verifier, cache) = (
            Arc::clone(&self.source),
            self.verifier.clone(),
            Arc::clone(&self.stops),
        );
        let read = tokio::task::spawn_blocking(move || {
            let repo = source.repository().map_err(|e| e.to_string())?;
            let mut cache = cache.lock().expect("no panics under the lock");
            cache.read(&repo, verifier.as_deref()).cloned()
        })
        .await;
        match read {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::warn!(cluster = %self.config.cluster, error = %e,
                    "reading the fleet stop's ref failed: every pool keeps its stop as it is");
                None
            }
            Err(e) => {
                tracing::warn!(cluster = %self.config.cluster, error = %e,
                    "reading the fleet stop's ref failed: every pool keeps its stop as it is");
                None
            }
        }
    }

    /// Records an adoption for every pool of `cluster` without a NodePoolRotation whose
    /// nodes already all run its pin ([`adopt::judge`]). A pool that cannot be observed now
    /// is tried again next pass; until adopted it goes through the guard.
    async fn adopt(
        &mut self,
        cluster: &DesiredCluster,
        existing: &BTreeMap<String, NodePoolRotationSpec>,
    ) {
        let Some(groups) = self.groups.clone() else {
            return;
        };
        for pool in &cluster.pools {
            let done = self
                .records
                .get(&pool.name)
                .is_some_and(|r| r.adopted_at(&pool.channel, &pool.version).is_some());
            if done
                || existing.contains_key(&pool.name)
                || pool.mode == rota_core::fleet::resolved::Mode::Ignore
            {
                continue;
            }
            // A managed pool is read through its owner (Karpenter's through its objects in
            // this cluster), never through the self-managed groups.
            let verdict = if pool.group.managed().is_some() {
                let drift = crate::kube::karpenter::KubeKarpenter::new(self.client.clone());
                adopt::observe_managed(&self.client, &self.owners, &drift, pool)
                    .await
                    .map(|seen| match seen {
                        Some((owner, nodes)) => adopt::judge_managed(&owner, &nodes, &pool.image),
                        None => adopt::Verdict::Not("this agent does not drive its owner".into()),
                    })
            } else {
                adopt::observe(&self.client, groups.as_ref(), pool)
                    .await
                    .map(|(group, nodes)| adopt::judge(&group, &nodes, &pool.image))
            };
            let verdict = match verdict {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(cluster = %cluster.name, pool = %pool.name, error = %e,
                        "cannot observe the pool to adopt it; retrying");
                    continue;
                }
            };
            match verdict {
                adopt::Verdict::OnPin { nodes } => {
                    tracing::info!(cluster = %cluster.name, pool = %pool.name, nodes,
                        version = %format!("{}@{}", pool.channel, pool.version),
                        "adopted: every node already runs the pinned image");
                    self.records
                        .entry(pool.name.clone())
                        .or_insert_with(|| PoolRecord::new(&cluster.name, &pool.name))
                        .record_adoption(&pool.channel, &pool.version, self.clock.now());
                }
                adopt::Verdict::Not(why) => {
                    tracing::debug!(cluster = %cluster.name, pool = %pool.name, reason = %why,
                        "not adopted: the pool goes through the promotion guard");
                }
            }
        }
    }

    fn object(&self, name: &str, spec: &NodePoolRotationSpec) -> serde_json::Value {
        let mut spec = serde_json::to_value(spec).expect("a spec serialises");
        // A lifted fleet stop is applied as `null`: left out, it would stay wherever another
        // writer's managed fields cover it (the field is nullable: `null` reads as none).
        if spec["policy"].get("stop").is_none() {
            spec["policy"]["stop"] = serde_json::Value::Null;
        }
        serde_json::json!({
            "apiVersion": "rota.dev/v1alpha1",
            "kind": "NodePoolRotation",
            "metadata": {
                "name": name,
                "labels": {
                    AGENT_VERSION_LABEL: self.config.version,
                    "rota.dev/cluster": self.config.cluster,
                },
            },
            "spec": spec,
        })
    }
}

/// The final form of a status left pending on a commit that `by` (a short id) replaced:
/// `error` (rota stopped acting on that commit, as for a refused one), saying by what and how
/// far it got.
pub fn superseded(pending: &CommitStatus, by: &str) -> CommitStatus {
    CommitStatus::new(
        pending.context.clone(),
        State::Error,
        &format!(
            "superseded by {by} before it finished: {}",
            pending.description
        ),
    )
}

/// `commit 3f2a9c1d0b7e is invalid: clusters/prod.yaml:12:7 spec.pools[0].group: ... (and 2 more)`.
pub fn invalid_description(short: &str, diags: &rota_core::fleet::Diagnostics) -> String {
    let mut it = diags.iter();
    let Some(first) = it.next() else {
        return format!("commit {short} is invalid");
    };
    let at = match (first.line, first.path.is_empty()) {
        (0, true) => first.file.clone(),
        (0, false) => format!("{} {}", first.file, first.path),
        (_, true) => format!("{}:{}:{}", first.file, first.line, first.column),
        (_, false) => format!(
            "{}:{}:{} {}",
            first.file, first.line, first.column, first.path
        ),
    };
    let more = match diags.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    crate::report::fit_description(&format!(
        "commit {short} is invalid: {at}: {}{more}",
        first.message
    ))
}

/// Whether the NodePoolRotation CRD is served: `Ok(false)` when the API answers 404 for
/// its resources (a list needs only the agent's own RBAC, not read access to CRDs).
pub async fn crd_installed(client: &kube::Client) -> Result<bool, kube::Error> {
    let api: Api<NodePoolRotation> = Api::all(client.clone());
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Server-side-applies the NodePoolRotation CRD.
pub async fn install_crd(client: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crate::kube::crd::definition();
    api.patch(
        "nodepoolrotations.rota.dev",
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await?;
    Ok(())
}
